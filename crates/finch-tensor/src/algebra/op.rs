//! Built-in operators: their names, arities and text forms.
//!
//! Semantics (`eval`) live in `algebra::eval`, algebraic properties (associative,
//! commutative, idempotent, identities and annihilators per argument position) in
//! `algebra::properties`. The text form of an operator is what follows `<<` in a reduction
//! (`<<min>>=`) and what a call is written with (`min(a, b)`); infix operators are written
//! by the parser/printer in infix form.

use std::fmt;

use super::scalar::{ScalarType, Value};

/// A built-in operator or function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `+` (n-ary in calls; unary `+x` is the identity).
    Add,
    /// `-` binary subtraction.
    Sub,
    /// Unary `-x`.
    Neg,
    /// `*`
    Mul,
    /// `/` (true division: integers divide to `f64`, as in Julia).
    Div,
    /// `%`: truncated remainder, same as `rem`.
    Rem,
    /// `^`: power.
    Pow,
    /// `min`
    Min,
    /// `max`
    Max,
    /// `&`: bitwise and (logical on `bool`).
    BitAnd,
    /// `|`: bitwise or (logical on `bool`).
    BitOr,
    /// `xor`
    Xor,
    /// `<<`: shift left.
    Shl,
    /// `>>`: shift right (arithmetic on signed, logical on unsigned).
    Shr,
    /// `!`: logical not on `bool`, bitwise not on integers (Julia's `~x`).
    Not,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`: logical and of `bool`s.
    And,
    /// `||`: logical or of `bool`s.
    Or,
    /// `abs`
    Abs,
    /// `sqrt`
    Sqrt,
    /// `exp`
    Exp,
    /// `log`: natural logarithm.
    Log,
    /// `sin`
    Sin,
    /// `cos`
    Cos,
    /// `div`: integer division truncating toward zero.
    IntDiv,
    /// `rem`: remainder with the sign of the dividend.
    RemFn,
    /// `mod`: remainder with the sign of the divisor.
    Mod,
    /// `fld`: integer division rounding toward negative infinity.
    Fld,
    /// `ifelse(c, a, b)`
    IfElse,
    /// `coalesce(a, b, ...)`: the first argument that is not `missing`.
    Coalesce,
    /// `choose(z)(a, b)`: `a` if `a != z`, else `b` (a reduction that keeps the first
    /// value different from `z`).
    Choose(Value),
    /// `overwrite(a, b) = b`.
    Overwrite,
    /// `T(x)` for a scalar type name `T` (`u8(x)`, `f64(x)`): conversion that truncates
    /// floats toward zero and wraps integers.
    Cast(ScalarType),
}

/// How an operator is written in source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixity {
    /// A binary infix operator, with its binding power (higher binds tighter).
    Infix(u8),
    /// A prefix unary operator (`-x`, `!x`).
    Prefix,
    /// A function call `name(args...)`.
    Call,
}

impl Op {
    /// Every operator without a parameter, for tables and tests.
    pub const SIMPLE: [Op; 36] = [
        Op::Add,
        Op::Sub,
        Op::Neg,
        Op::Mul,
        Op::Div,
        Op::Rem,
        Op::Pow,
        Op::Min,
        Op::Max,
        Op::BitAnd,
        Op::BitOr,
        Op::Xor,
        Op::Shl,
        Op::Shr,
        Op::Not,
        Op::Eq,
        Op::Ne,
        Op::Lt,
        Op::Le,
        Op::Gt,
        Op::Ge,
        Op::And,
        Op::Or,
        Op::Abs,
        Op::Sqrt,
        Op::Exp,
        Op::Log,
        Op::Sin,
        Op::Cos,
        Op::IntDiv,
        Op::RemFn,
        Op::Mod,
        Op::Fld,
        Op::IfElse,
        Op::Coalesce,
        Op::Overwrite,
    ];

    /// The operator's symbol or function name (`"+"`, `"min"`, `"choose"`, `"u8"`).
    pub fn symbol(&self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub | Op::Neg => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Rem => "%",
            Op::Pow => "^",
            Op::Min => "min",
            Op::Max => "max",
            Op::BitAnd => "&",
            Op::BitOr => "|",
            Op::Xor => "xor",
            Op::Shl => "<<",
            Op::Shr => ">>",
            Op::Not => "!",
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::And => "&&",
            Op::Or => "||",
            Op::Abs => "abs",
            Op::Sqrt => "sqrt",
            Op::Exp => "exp",
            Op::Log => "log",
            Op::Sin => "sin",
            Op::Cos => "cos",
            Op::IntDiv => "div",
            Op::RemFn => "rem",
            Op::Mod => "mod",
            Op::Fld => "fld",
            Op::IfElse => "ifelse",
            Op::Coalesce => "coalesce",
            Op::Choose(_) => "choose",
            Op::Overwrite => "overwrite",
            Op::Cast(t) => t.name(),
        }
    }

    /// How the operator is written in expressions.
    ///
    /// Binding powers (low to high): `||` 1, `&&` 2, comparisons 3, `|` `xor`-less infix 4,
    /// `&` 5, `<<` `>>` 6, `+` `-` 7, `*` `/` `%` 8, prefix unary 9, `^` 10 (right
    /// associative). `xor` is written as a call.
    pub fn fixity(&self) -> Fixity {
        match self {
            Op::Or => Fixity::Infix(1),
            Op::And => Fixity::Infix(2),
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => Fixity::Infix(3),
            Op::BitOr => Fixity::Infix(4),
            Op::BitAnd => Fixity::Infix(5),
            Op::Shl | Op::Shr => Fixity::Infix(6),
            Op::Add | Op::Sub => Fixity::Infix(7),
            Op::Mul | Op::Div | Op::Rem => Fixity::Infix(8),
            Op::Neg | Op::Not => Fixity::Prefix,
            Op::Pow => Fixity::Infix(10),
            _ => Fixity::Call,
        }
    }

    /// The number of arguments, or `None` when variadic (`+`, `*`, `min`, `max`, `&`, `|`,
    /// `xor`, `&&`, `||` and `coalesce` accept two or more in call form).
    pub fn arity(&self) -> Option<usize> {
        match self {
            Op::Add
            | Op::Mul
            | Op::Min
            | Op::Max
            | Op::BitAnd
            | Op::BitOr
            | Op::Xor
            | Op::And
            | Op::Or
            | Op::Coalesce => None,
            Op::Neg
            | Op::Not
            | Op::Abs
            | Op::Sqrt
            | Op::Exp
            | Op::Log
            | Op::Sin
            | Op::Cos
            | Op::Cast(_) => Some(1),
            Op::IfElse => Some(3),
            _ => Some(2),
        }
    }

    /// Looks up a function-call name (`"min"`, `"xor"`, `"u8"`, ...). `choose` takes a
    /// parameter and is parsed separately; symbols such as `+` are found by
    /// [`Op::from_reduce_symbol`].
    pub fn from_call_name(name: &str) -> Option<Op> {
        if let Some(t) = ScalarType::from_name(name) {
            return Some(Op::Cast(t));
        }
        Op::SIMPLE
            .iter()
            .copied()
            .find(|op| op.fixity() == Fixity::Call && op.symbol() == name)
    }

    /// Looks up an operator named inside `<<...>>=`: a binary symbol (`+`, `-`, `*`, `/`,
    /// `%`, `^`, `&`, `|`, `<<`, `>>`, `&&`, `||`, comparisons) or a function name.
    pub fn from_reduce_symbol(sym: &str) -> Option<Op> {
        if sym == "-" {
            return Some(Op::Sub);
        }
        Op::SIMPLE
            .iter()
            .copied()
            .find(|op| op.symbol() == sym && *op != Op::Neg && *op != Op::Not)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Choose(z) => write!(f, "choose({z})"),
            other => f.write_str(other.symbol()),
        }
    }
}

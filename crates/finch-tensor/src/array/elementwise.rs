//! Element-wise operations with NumPy broadcasting: each one checks its operands' shapes
//! and types, maps itself onto the language's operators (`ElementwiseOp::expression`),
//! derives the result's fill and space (`rules`), picks the output format and runs the
//! program `program` writes.
//!
//! Every operator maps onto the language directly but `ldexp`, which the language lacks:
//! it is `x * 2.0 ^ n` (exact for `n` in `-1074..=1023`, where `2.0 ^ n` is a float;
//! beyond, `2.0 ^ n` is 0 or infinity where C's `ldexp` would still give a finite
//! nonzero number for some `x`).

use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::Format;
use crate::tensor::fmt_shape;

use super::program::{element_wise_program, run, Expr, ProgramOperand};
use super::promote::{common_type, float_type};
use super::rules::{derive, output_format, with_declared_fill, OperandLayout};
use super::Array;

/// An element-wise operation (NumPy / array-API names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ElementwiseOp {
    /// `x + y`.
    Add,
    /// `x - y`.
    Subtract,
    /// `x * y`.
    Multiply,
    /// `x / y`, true division (integers divide to `f64`).
    Divide,
    /// `floor(x / y)` (`fld`); integer division by zero is an error.
    FloorDivide,
    /// `x - floor(x / y) * y`, the sign of `y` (`mod`).
    Remainder,
    /// `x ^ y`; an integer to a negative integer power is an error.
    Pow,
    /// `min(x, y)`; a NaN operand is the result.
    Minimum,
    /// `max(x, y)`; a NaN operand is the result.
    Maximum,
    /// `x == y`.
    Equal,
    /// `x != y`.
    NotEqual,
    /// `x < y`.
    Less,
    /// `x <= y`.
    LessEqual,
    /// `x > y`.
    Greater,
    /// `x >= y`.
    GreaterEqual,
    /// `x && y` on `bool`.
    LogicalAnd,
    /// `x || y` on `bool`.
    LogicalOr,
    /// `xor(x, y)` on `bool`.
    LogicalXor,
    /// `!x` on `bool`.
    LogicalNot,
    /// `x & y` on integers or `bool`.
    BitwiseAnd,
    /// `x | y` on integers or `bool`.
    BitwiseOr,
    /// `xor(x, y)` on integers or `bool`.
    BitwiseXor,
    /// `!x` on integers (every bit flipped) or `bool`.
    BitwiseInvert,
    /// `x << y` on integers.
    LeftShift,
    /// `x >> y` on integers (arithmetic on signed types).
    RightShift,
    /// `-x`.
    Negative,
    /// `abs(x)`.
    Abs,
    /// `sqrt(x)`; of a negative number, an error (the language follows Julia).
    Sqrt,
    /// `exp(x)`.
    Exp,
    /// `log(x)`; of a negative number, an error.
    Log,
    /// `x * 2^n`, `n` an integer.
    Ldexp,
    /// `where(c, x, y)`: `x` where `c` holds, else `y`.
    Where,
    /// `x` converted to a type (floats truncated toward zero, integers wrapped).
    AsType(ScalarType),
}

impl ElementwiseOp {
    /// The operation's name, as NumPy spells it.
    pub fn name(self) -> &'static str {
        use ElementwiseOp::*;
        match self {
            Add => "add",
            Subtract => "subtract",
            Multiply => "multiply",
            Divide => "divide",
            FloorDivide => "floor_divide",
            Remainder => "remainder",
            Pow => "pow",
            Minimum => "minimum",
            Maximum => "maximum",
            Equal => "equal",
            NotEqual => "not_equal",
            Less => "less",
            LessEqual => "less_equal",
            Greater => "greater",
            GreaterEqual => "greater_equal",
            LogicalAnd => "logical_and",
            LogicalOr => "logical_or",
            LogicalXor => "logical_xor",
            LogicalNot => "logical_not",
            BitwiseAnd => "bitwise_and",
            BitwiseOr => "bitwise_or",
            BitwiseXor => "bitwise_xor",
            BitwiseInvert => "bitwise_invert",
            LeftShift => "left_shift",
            RightShift => "right_shift",
            Negative => "negative",
            Abs => "abs",
            Sqrt => "sqrt",
            Exp => "exp",
            Log => "log",
            Ldexp => "ldexp",
            Where => "where",
            AsType(_) => "astype",
        }
    }

    /// The number of operands.
    pub fn arity(self) -> usize {
        use ElementwiseOp::*;
        match self {
            LogicalNot | BitwiseInvert | Negative | Abs | Sqrt | Exp | Log | AsType(_) => 1,
            Where => 3,
            _ => 2,
        }
    }

    /// The language operator of a binary operation that maps onto one directly.
    fn binary_op(self) -> Option<Op> {
        use ElementwiseOp::*;
        Some(match self {
            Add => Op::Add,
            Subtract => Op::Sub,
            Multiply => Op::Mul,
            Divide => Op::Div,
            FloorDivide => Op::Fld,
            Remainder => Op::Mod,
            Pow => Op::Pow,
            Minimum => Op::Min,
            Maximum => Op::Max,
            Equal => Op::Eq,
            NotEqual => Op::Ne,
            Less => Op::Lt,
            LessEqual => Op::Le,
            Greater => Op::Gt,
            GreaterEqual => Op::Ge,
            LogicalAnd => Op::And,
            LogicalOr => Op::Or,
            LogicalXor | BitwiseXor => Op::Xor,
            BitwiseAnd => Op::BitAnd,
            BitwiseOr => Op::BitOr,
            LeftShift => Op::Shl,
            RightShift => Op::Shr,
            _ => return None,
        })
    }

    /// The expression of the operation over operands `0..arity` of types `types`, with
    /// the casts that make the language compute in the array-API result type.
    pub(crate) fn expression(self, types: &[ScalarType]) -> Result<Expr> {
        use ElementwiseOp::*;
        let operand = |k: usize| Expr::Operand(k);
        let cast = |k: usize, to: ScalarType| {
            if types[k] == to {
                Expr::Operand(k)
            } else {
                Expr::Call(Op::Cast(to), vec![Expr::Operand(k)])
            }
        };
        let refuse = |what: &str| Err(self.type_error(types, what));
        match self {
            LogicalNot | BitwiseInvert => match (self, types[0]) {
                (_, ScalarType::Bool) => Ok(Expr::Call(Op::Not, vec![operand(0)])),
                (BitwiseInvert, t) if t.is_integer() => Ok(Expr::Call(Op::Not, vec![operand(0)])),
                (LogicalNot, _) => refuse("a bool operand"),
                _ => refuse("an integer or bool operand"),
            },
            Negative | Abs => {
                if types[0] == ScalarType::Bool {
                    return refuse("a numeric operand");
                }
                let op = if self == Negative { Op::Neg } else { Op::Abs };
                Ok(Expr::Call(op, vec![operand(0)]))
            }
            Sqrt | Exp | Log => {
                let Some(t) = float_type(types[0]) else {
                    return refuse("a numeric operand");
                };
                let op = match self {
                    Sqrt => Op::Sqrt,
                    Exp => Op::Exp,
                    _ => Op::Log,
                };
                Ok(Expr::Call(op, vec![cast(0, t)]))
            }
            AsType(t) => Ok(if types[0] == t {
                operand(0)
            } else {
                Expr::Call(Op::Cast(t), vec![operand(0)])
            }),
            Where => {
                if types[0] != ScalarType::Bool {
                    return refuse("a bool condition");
                }
                let Some(t) = common_type(&types[1..]) else {
                    return refuse("branches of types with a common type");
                };
                Ok(Expr::Call(
                    Op::IfElse,
                    vec![operand(0), cast(1, t), cast(2, t)],
                ))
            }
            Ldexp => {
                let Some(t) = float_type(types[0]) else {
                    return refuse("a numeric mantissa");
                };
                if !types[1].is_integer() {
                    return refuse("an integer exponent");
                }
                let two = Value::F64(2.0)
                    .convert_wrapping(t)
                    .unwrap_or(Value::F64(2.0));
                let power = Expr::Call(Op::Pow, vec![Expr::Literal(two), operand(1)]);
                Ok(Expr::Call(Op::Mul, vec![cast(0, t), power]))
            }
            _ => self.binary_expression(types),
        }
    }

    fn binary_expression(self, types: &[ScalarType]) -> Result<Expr> {
        use ElementwiseOp::*;
        let op = self
            .binary_op()
            .ok_or_else(|| Error::Program(format!("internal: `{}` is not binary", self.name())))?;
        let Some(common) = common_type(types) else {
            return Err(self.type_error(types, "operand types with a common type"));
        };
        let bool_only = matches!(self, LogicalAnd | LogicalOr | LogicalXor);
        let integer_or_bool = matches!(self, BitwiseAnd | BitwiseOr | BitwiseXor);
        let integer_only = matches!(self, LeftShift | RightShift);
        let comparison = matches!(
            self,
            Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual
        );
        let numeric = !(bool_only || integer_or_bool || integer_only || comparison);
        let ok = if bool_only {
            common == ScalarType::Bool
        } else if integer_or_bool {
            !common.is_float()
        } else if integer_only {
            common.is_integer()
        } else if numeric {
            common != ScalarType::Bool
        } else {
            true
        };
        if !ok {
            let wanted = if bool_only {
                "bool operands"
            } else if integer_or_bool {
                "integer or bool operands"
            } else if integer_only {
                "integer operands"
            } else {
                "numeric operands"
            };
            return Err(self.type_error(types, wanted));
        }
        let target = if self == Divide {
            float_type(common).unwrap_or(ScalarType::F64)
        } else {
            common
        };
        let args = (0..2)
            .map(|k| {
                if types[k] == target {
                    Expr::Operand(k)
                } else {
                    Expr::Call(Op::Cast(target), vec![Expr::Operand(k)])
                }
            })
            .collect();
        Ok(Expr::Call(op, args))
    }

    fn type_error(self, types: &[ScalarType], wanted: &str) -> Error {
        let list: Vec<String> = types
            .iter()
            .enumerate()
            .map(|(k, t)| format!("operand {} is {t}", k + 1))
            .collect();
        Error::Program(format!(
            "`{}` needs {wanted}: {}",
            self.name(),
            list.join(", ")
        ))
    }
}

/// Options of an element-wise operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElementwiseOptions {
    /// A declared fill for the result (rule R5): when it differs from the derived fill,
    /// every coordinate is computed and stored in a dense format.
    pub fill: Option<Value>,
    /// The result's format, instead of the one the output rule chooses; its leaf's fill
    /// is the declared fill (R5 as above).
    pub format: Option<Format>,
}

/// The broadcast shape of operands (NumPy: trailing modes aligned, a size of 1 stretched).
pub(crate) fn broadcast_shape(name: &str, args: &[&Array]) -> Result<Vec<usize>> {
    let rank = args.iter().map(|a| a.ndim()).max().unwrap_or(0);
    let mut shape = vec![1usize; rank];
    let mut from: Vec<Option<usize>> = vec![None; rank];
    for (k, a) in args.iter().enumerate() {
        let offset = rank - a.ndim();
        for (j, &n) in a.shape().iter().enumerate() {
            let m = offset + j;
            if n == shape[m] || n == 1 {
                continue;
            }
            if shape[m] == 1 {
                shape[m] = n;
                from[m] = Some(k);
                continue;
            }
            let other = from[m].unwrap_or(0);
            return Err(Error::Program(format!(
                "`{name}`: operand {} ({}) and operand {} ({}) do not broadcast: mode {} (from the end: {}) has size {} and {n}",
                other + 1,
                args[other].describe(),
                k + 1,
                a.describe(),
                m + 1,
                rank - m,
                shape[m],
            )));
        }
    }
    Ok(shape)
}

impl Array {
    /// Applies an element-wise operation to arrays, broadcasting them (NumPy rules) and
    /// promoting their types (array-API rules, `promote`). The result's fill value is the
    /// operation of the operands' fills as rules R1-R5 give it, and its format follows the
    /// output rule (`docs/array.md`) unless `options` set one.
    pub fn elementwise(
        op: ElementwiseOp,
        args: &[&Array],
        options: &ElementwiseOptions,
    ) -> Result<Array> {
        if args.len() != op.arity() {
            return Err(Error::Program(format!(
                "`{}` takes {} operand{}, got {}",
                op.name(),
                op.arity(),
                if op.arity() == 1 { "" } else { "s" },
                args.len()
            )));
        }
        let types: Vec<ScalarType> = args.iter().map(|a| a.dtype()).collect();
        let shape = broadcast_shape(op.name(), args)?;
        let expr = op.expression(&types)?;
        // 0-d operands are literals: the compiler folds them with the fills.
        let expr = inline_scalars(expr, args)?;
        // Operands given as the same array are bound once.
        let mut operands: Vec<ProgramOperand<'_>> = Vec::new();
        for (k, a) in args.iter().enumerate() {
            let first = args[..k].iter().position(|b| std::ptr::eq(*a, *b));
            let name = format!("A{}", first.unwrap_or(k));
            operands.push(ProgramOperand {
                tensor: a.tensor(),
                name,
            });
        }
        let fills: Vec<Value> = args.iter().map(|a| a.fill_value()).collect();
        let declared = match (&options.format, options.fill) {
            (Some(f), Some(v)) if !f.fill_value().same(&v) => {
                return Err(Error::Program(format!(
                    "`{}`: the declared fill {v} differs from the declared format's fill ({f})",
                    op.name()
                )))
            }
            (Some(f), _) => Some(f.fill_value()),
            (None, v) => v,
        };
        let derived = with_declared_fill(derive(&expr, &fills)?, declared);
        let result_type = derived.fill.scalar_type().ok_or_else(|| {
            Error::Program(format!("`{}`: the result fill is missing", op.name()))
        })?;
        let expected_type = expression_type(&expr, &types)?;
        if result_type != expected_type {
            return Err(Error::Program(format!(
                "`{}`: the declared fill {} is not a {expected_type}, the result's type",
                op.name(),
                derived.fill
            )));
        }
        let format = match &options.format {
            Some(f) => {
                check_format(op.name(), f, &shape)?;
                f.clone()
            }
            None => {
                let layouts: Vec<OperandLayout<'_>> = args
                    .iter()
                    .map(|a| OperandLayout {
                        shape: a.shape(),
                        format: a.format(),
                    })
                    .collect();
                output_format(&derived.algebra, &layouts, &shape, derived.fill)
            }
        };
        let text = element_wise_program(&expr, &operands, &format, &shape)?;
        let tensor = run(&text, &operands)?;
        Ok(Array::from_tensor(tensor))
    }
}

/// Replaces reads of 0-d operands by their values.
fn inline_scalars(e: Expr, args: &[&Array]) -> Result<Expr> {
    Ok(match e {
        Expr::Operand(k) => match args.get(k) {
            Some(a) if a.ndim() == 0 => Expr::Literal(a.get(&[])?),
            _ => Expr::Operand(k),
        },
        Expr::Call(op, xs) => Expr::Call(
            op,
            xs.into_iter()
                .map(|x| inline_scalars(x, args))
                .collect::<Result<_>>()?,
        ),
        lit => lit,
    })
}

/// The type an expression evaluates to: the language's operator on ones of its argument
/// types (the casts have made them agree).
fn expression_type(e: &Expr, types: &[ScalarType]) -> Result<ScalarType> {
    let sample = sample_value(e, types)?;
    sample
        .scalar_type()
        .ok_or_else(|| Error::Program("internal: an expression without a type".into()))
}

fn sample_value(e: &Expr, types: &[ScalarType]) -> Result<Value> {
    match e {
        Expr::Operand(k) => {
            let t = types
                .get(*k)
                .ok_or_else(|| Error::Program(format!("internal: operand {k}")))?;
            Ok(if *t == ScalarType::Bool {
                Value::Bool(true)
            } else {
                Value::one_of(*t)
            })
        }
        Expr::Literal(v) => Ok(*v),
        Expr::Call(op, args) => {
            let vals = args
                .iter()
                .map(|a| sample_value(a, types))
                .collect::<Result<Vec<_>>>()?;
            op.eval(&vals)
        }
    }
}

fn check_format(name: &str, format: &Format, shape: &[usize]) -> Result<()> {
    if format.ndims() != shape.len() {
        return Err(Error::Program(format!(
            "`{name}`: the declared format {format} has {} modes, the result has shape {}",
            format.ndims(),
            fmt_shape(shape)
        )));
    }
    Ok(())
}

/// A unary method per operation.
macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> Result<Array> {
                    Array::elementwise($op, &[self], &ElementwiseOptions::default())
                }
            )*
        }
    };
}

/// A binary method per operation.
macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                pub fn $name(&self, other: &Array) -> Result<Array> {
                    Array::elementwise($op, &[self, other], &ElementwiseOptions::default())
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`, element-wise.
    negative => ElementwiseOp::Negative;
    /// `abs(x)`, element-wise.
    abs => ElementwiseOp::Abs;
    /// `sqrt(x)`, element-wise (an error on a negative value).
    sqrt => ElementwiseOp::Sqrt;
    /// `exp(x)`, element-wise.
    exp => ElementwiseOp::Exp;
    /// `log(x)`, element-wise (an error on a negative value).
    log => ElementwiseOp::Log;
    /// `!x` on `bool`, element-wise.
    logical_not => ElementwiseOp::LogicalNot;
    /// Every bit flipped (`!x` on `bool`), element-wise.
    bitwise_invert => ElementwiseOp::BitwiseInvert;
}

binary_methods! {
    /// `x + y` with broadcasting.
    add => ElementwiseOp::Add;
    /// `x - y` with broadcasting.
    subtract => ElementwiseOp::Subtract;
    /// `x * y` with broadcasting.
    multiply => ElementwiseOp::Multiply;
    /// `x / y` (true division) with broadcasting.
    divide => ElementwiseOp::Divide;
    /// `floor(x / y)` with broadcasting.
    floor_divide => ElementwiseOp::FloorDivide;
    /// `x mod y` (the sign of `y`) with broadcasting.
    remainder => ElementwiseOp::Remainder;
    /// `x ^ y` with broadcasting.
    pow => ElementwiseOp::Pow;
    /// `min(x, y)` with broadcasting.
    minimum => ElementwiseOp::Minimum;
    /// `max(x, y)` with broadcasting.
    maximum => ElementwiseOp::Maximum;
    /// `x == y` with broadcasting.
    equal => ElementwiseOp::Equal;
    /// `x != y` with broadcasting.
    not_equal => ElementwiseOp::NotEqual;
    /// `x < y` with broadcasting.
    less => ElementwiseOp::Less;
    /// `x <= y` with broadcasting.
    less_equal => ElementwiseOp::LessEqual;
    /// `x > y` with broadcasting.
    greater => ElementwiseOp::Greater;
    /// `x >= y` with broadcasting.
    greater_equal => ElementwiseOp::GreaterEqual;
    /// `x && y` on `bool` with broadcasting.
    logical_and => ElementwiseOp::LogicalAnd;
    /// `x || y` on `bool` with broadcasting.
    logical_or => ElementwiseOp::LogicalOr;
    /// `xor(x, y)` on `bool` with broadcasting.
    logical_xor => ElementwiseOp::LogicalXor;
    /// `x & y` with broadcasting.
    bitwise_and => ElementwiseOp::BitwiseAnd;
    /// `x | y` with broadcasting.
    bitwise_or => ElementwiseOp::BitwiseOr;
    /// `xor(x, y)` with broadcasting.
    bitwise_xor => ElementwiseOp::BitwiseXor;
    /// `x << y` with broadcasting.
    left_shift => ElementwiseOp::LeftShift;
    /// `x >> y` with broadcasting.
    right_shift => ElementwiseOp::RightShift;
    /// `x * 2^n` with broadcasting (`n` an integer array).
    ldexp => ElementwiseOp::Ldexp;
}

impl Array {
    /// `where(cond, x, y)`: `x` where `cond` holds, else `y`, broadcasting all three.
    pub fn where_(cond: &Array, x: &Array, y: &Array) -> Result<Array> {
        Array::elementwise(
            ElementwiseOp::Where,
            &[cond, x, y],
            &ElementwiseOptions::default(),
        )
    }

    /// The array converted to `ty` (floats truncated toward zero, integers wrapped).
    pub fn astype(&self, ty: ScalarType) -> Result<Array> {
        Array::elementwise(
            ElementwiseOp::AsType(ty),
            &[self],
            &ElementwiseOptions::default(),
        )
    }
}

//! The Finch program AST (Finch paper Fig. 8a, with the surface syntax of its figures).
//!
//! A [`Program`] is a list of tensor declarations (`input`/`output`/`temp`, each with a
//! format string kept as text: `notation` does not know formats) followed by one body
//! statement. Names are resolved while parsing: a name bound by an enclosing `for` is an
//! [`Expr::Index`], one bound by an enclosing `let` is an [`Expr::Variable`], and a name
//! used as `X[...]` must be a declared tensor.
//!
//! Blocks: the parser stores a statement list of length one as the statement itself, so a
//! `Stmt::Block` always has zero or at least two statements, unless it was written as an
//! explicit `begin ... end` around one statement.

use std::collections::HashSet;

use crate::algebra::{Op, Value};

/// A position in source text (1-based line and column).
///
/// Spans never take part in AST equality (`PartialEq` always holds), so a program equals
/// its printed-and-reparsed self.
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
}

impl PartialEq for Span {
    fn eq(&self, _other: &Span) -> bool {
        true
    }
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A literal value: `1`, `0.5`, `true`, `missing`, `3u8`.
    Literal(Value),
    /// A loop index bound by an enclosing `for`.
    Index(String),
    /// A variable bound by an enclosing `let`.
    Variable(String),
    /// An operator application: infix (`a + b`), prefix (`-a`, `!a`) or call (`min(a, b)`).
    Call {
        /// The operator.
        op: Op,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// A tensor read `A[i, j]` (or `s[]`).
    Access(Access),
    /// `~e`: a permissive index (out of bounds reads `missing`, writes are dropped).
    Permissive(Box<Expr>),
    /// `walk(i)`, `gallop(i)`, `follow(i)`, `extrude(i)`, `laminate(i)`: an index with a
    /// requested access protocol.
    Protocol(Protocol, Box<Expr>),
    /// `(lo:hi)(i)`: a window of a mode (Finch's WindowedTensor), as a tensor index: index
    /// `i` of `lo:hi`, i.e. `lo + i - 1`, where `i` runs over `1:hi-lo+1`.
    Window {
        /// First index of the window.
        lo: Box<Expr>,
        /// Last index of the window.
        hi: Box<Expr>,
        /// The index within the window.
        index: Box<Expr>,
    },
}

/// An access protocol (Finch paper §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Follow the structure (the default for reads).
    Walk,
    /// Structure leads, galloping over the other operands (Jumper).
    Gallop,
    /// Random access (Lookup).
    Follow,
    /// In-order, once-per-fiber writes (default for updates).
    Extrude,
    /// Out-of-order, repeated writes.
    Laminate,
}

impl Protocol {
    /// Every protocol.
    pub const ALL: [Protocol; 5] = [
        Protocol::Walk,
        Protocol::Gallop,
        Protocol::Follow,
        Protocol::Extrude,
        Protocol::Laminate,
    ];

    /// The protocol's name as written (`walk`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Walk => "walk",
            Protocol::Gallop => "gallop",
            Protocol::Follow => "follow",
            Protocol::Extrude => "extrude",
            Protocol::Laminate => "laminate",
        }
    }

    /// Looks up a protocol name.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.iter().copied().find(|p| p.name() == name)
    }
}

/// A tensor access `A[e1, ..., en]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The tensor's declared name.
    pub tensor: String,
    /// One expression per mode (empty for a scalar `s[]`).
    pub indices: Vec<Expr>,
}

/// The extent of a loop.
#[derive(Clone, Debug, PartialEq)]
pub enum Extent {
    /// `_`: inferred by dimensionalization.
    Auto,
    /// `a:b`, inclusive on both ends.
    Range(Expr, Expr),
}

/// How an assignment combines the old value with the new one.
#[derive(Clone, Debug, PartialEq)]
pub enum AssignOp {
    /// `=`: store the right-hand side.
    Store,
    /// `op=` or `<<op>>=`: `A[..] = op(A[..], rhs)`.
    Reduce(Op),
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `X .= init`: declare (initialize) a tensor: every element becomes `init`.
    Declare {
        /// The tensor.
        tensor: String,
        /// The initial (fill) value.
        init: Expr,
    },
    /// `A[..] op= rhs`.
    Assign {
        /// The written access.
        lhs: Access,
        /// How to combine.
        op: AssignOp,
        /// The right-hand side.
        rhs: Expr,
    },
    /// `for i = ext ... end`.
    Loop {
        /// The loop index.
        index: String,
        /// Its extent.
        extent: Extent,
        /// The body.
        body: Box<Stmt>,
    },
    /// `if cond ... [elseif ...] [else ...] end`. An `elseif` is an `otherwise` holding
    /// another `Sieve`.
    Sieve {
        /// The condition (must evaluate to `bool`).
        cond: Expr,
        /// Run when `cond` is true.
        then: Box<Stmt>,
        /// Run when `cond` is false.
        otherwise: Option<Box<Stmt>>,
    },
    /// `let x = e ... end` (`let x = e, y = f` nests).
    Define {
        /// The variable.
        var: String,
        /// Its value.
        value: Expr,
        /// The scope where it is bound.
        body: Box<Stmt>,
    },
    /// A sequence of statements (`begin ... end`, or a loop body of several statements).
    Block(Vec<Stmt>),
    /// `@freeze(X)`: end a tensor's update phase.
    Freeze(String),
    /// `@thaw(X)`: reopen a tensor for updates.
    Thaw(String),
    /// `return X, Y`: the program's results; it ends the program (statements after it
    /// never run).
    Return(Vec<String>),
}

impl Stmt {
    /// Whether this top-level statement ends the program: a `return`, or a block that
    /// reaches one (`return` is refused inside loops and branches).
    pub fn returns(&self) -> bool {
        match self {
            Stmt::Return(_) => true,
            Stmt::Block(v) => v.iter().any(Stmt::returns),
            _ => false,
        }
    }
}

/// The names of the tensors a statement reads, writes and declares (`X .= v`), anywhere
/// inside it.
#[derive(Default)]
pub(crate) struct Uses {
    pub(crate) reads: HashSet<String>,
    pub(crate) writes: HashSet<String>,
    pub(crate) declared: HashSet<String>,
}

/// Calls `f` on each statement of the scope `body` (a block's statements in order, or
/// `body` itself) with its [`Uses`], each followed by the scopes nested in it (loop and
/// `let` bodies, branches): the order in which the lifecycle checks visit a program.
pub(crate) fn each_scoped_statement<E>(
    body: &Stmt,
    f: &mut dyn FnMut(&Stmt, &Uses) -> Result<(), E>,
) -> Result<(), E> {
    let stmts: Vec<&Stmt> = match body {
        Stmt::Block(v) => v.iter().collect(),
        s => vec![s],
    };
    for s in stmts {
        let mut uses = Uses::default();
        collect_uses(s, &mut uses.reads, &mut uses.writes, &mut uses.declared);
        f(s, &uses)?;
        match s {
            Stmt::Loop { body, .. } | Stmt::Define { body, .. } => each_scoped_statement(body, f)?,
            Stmt::Sieve {
                then, otherwise, ..
            } => {
                each_scoped_statement(then, f)?;
                if let Some(o) = otherwise {
                    each_scoped_statement(o, f)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Collects the names of the tensors a statement reads, writes and declares (`X .= v`),
/// anywhere inside it.
pub(crate) fn collect_uses(
    s: &Stmt,
    reads: &mut HashSet<String>,
    writes: &mut HashSet<String>,
    declared: &mut HashSet<String>,
) {
    fn in_expr(e: &Expr, reads: &mut HashSet<String>) {
        match e {
            Expr::Access(a) => {
                reads.insert(a.tensor.clone());
                a.indices.iter().for_each(|x| in_expr(x, reads));
            }
            Expr::Call { args, .. } => args.iter().for_each(|x| in_expr(x, reads)),
            Expr::Permissive(x) | Expr::Protocol(_, x) => in_expr(x, reads),
            Expr::Window { lo, hi, index } => {
                [lo, hi, index].into_iter().for_each(|x| in_expr(x, reads))
            }
            _ => {}
        }
    }
    match s {
        Stmt::Assign { lhs, rhs, .. } => {
            writes.insert(lhs.tensor.clone());
            lhs.indices.iter().for_each(|x| in_expr(x, reads));
            in_expr(rhs, reads);
        }
        Stmt::Declare { tensor, init } => {
            writes.insert(tensor.clone());
            declared.insert(tensor.clone());
            in_expr(init, reads);
        }
        Stmt::Loop { body, .. } => collect_uses(body, reads, writes, declared),
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            in_expr(cond, reads);
            collect_uses(then, reads, writes, declared);
            if let Some(o) = otherwise {
                collect_uses(o, reads, writes, declared);
            }
        }
        Stmt::Define { value, body, .. } => {
            in_expr(value, reads);
            collect_uses(body, reads, writes, declared);
        }
        Stmt::Block(v) => v
            .iter()
            .for_each(|s| collect_uses(s, reads, writes, declared)),
        _ => {}
    }
}

/// Whether a declared tensor is bound by the caller, produced, or private.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeclKind {
    /// Bound by the caller; read (and possibly updated in place).
    Input,
    /// Produced by the program.
    Output,
    /// A private workspace.
    Temp,
}

impl DeclKind {
    /// The keyword (`input`, `output`, `temp`).
    pub fn keyword(self) -> &'static str {
        match self {
            DeclKind::Input => "input",
            DeclKind::Output => "output",
            DeclKind::Temp => "temp",
        }
    }
}

/// A tensor declaration `input A :: Dense(SparseList(Element(0.0)))`.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    /// input / output / temp.
    pub kind: DeclKind,
    /// The tensor's name.
    pub name: String,
    /// The format string, as written (whitespace removed).
    pub format: String,
    /// Where the declaration starts (builders leave it default).
    pub span: Span,
}

/// A whole program: declarations, then the body.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// Tensor declarations in source order.
    pub decls: Vec<Decl>,
    /// The statements (a `Block` when there are several).
    pub body: Stmt,
}

impl Program {
    /// The declaration of a tensor, if any.
    pub fn decl(&self, name: &str) -> Option<&Decl> {
        self.decls.iter().find(|d| d.name == name)
    }
}

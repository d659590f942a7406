//! The program generator: random well-typed Finch programs of one to three loop nests
//! over random dimensions (0, 1, small, odd), each nest writing fresh outputs (tensors or
//! scalars of every kind) that later nests may read, with loops in and across storage
//! order, `if`/`else`, `let`, every assignment operator, reads at offsets, permissive
//! reads and writes, windows, gathers and scatters through index tensors, workspaces
//! declared inside loops, in-place updates of dense inputs and loop ranges given by
//! literals or input scalars. Inputs are created as the expressions need them, with
//! random formats and data that fits them (see `formats` and `data`).
//!
//! A case is made from `(seed, index, attempt)` alone, so a worker, the parent process and
//! `replay` all make the same one.

use std::collections::{BTreeMap, HashSet};

use finch::formats::{Format, LevelFormat, LevelKind, ScalarKind};
use finch::notation::{self, Access, AssignOp, Decl, DeclKind, Expr, Extent, Protocol, Stmt};
use finch::{Op, ScalarType, Value};

use crate::case::Case;
use crate::data::{random_array, Values};
use crate::formats::{all_dense, gallops, level_of_mode, random_format, Ty, Use};
use crate::rng::Rng;

mod sizes;

use sizes::{loop_dim_size, sizes_loop, written_plainly};

/// A declared tensor while the program is built.
#[derive(Clone, Debug)]
struct Tensor {
    name: String,
    kind: DeclKind,
    format: Format,
    /// The dimension (an index into `Gen::sizes`) of each mode.
    dims: Vec<usize>,
    ty: Ty,
    values: Values,
    density: f64,
    /// Whether statements may read it now (inputs; outputs of finished nests).
    readable: bool,
    /// Whether its shape must be given (some mode is written only at computed indices).
    shaped: bool,
}

/// A loop being generated.
#[derive(Clone, Debug)]
struct Loop {
    name: String,
    dim: usize,
    /// Every plain read at this index is `i + shift` (an offset loop, Finch's OffsetTensor).
    shift: i64,
    /// A partial range: every access at this index is permissive.
    permissive: bool,
}

/// A tensor a nest writes, with the indices of its writes.
#[derive(Clone, Debug)]
struct Target {
    name: String,
    ty: Ty,
    indices: Vec<Expr>,
}

struct Gen {
    rng: Rng,
    sizes: Vec<usize>,
    tensors: Vec<Tensor>,
    loops: Vec<Loop>,
    lets: Vec<(String, Ty)>,
    /// Tensors the current nest writes (not readable within it).
    writing: HashSet<String>,
    counter: usize,
    /// Loop extents decided after a nest is built: loop name to extent.
    extents: Vec<(String, Extent)>,
}

/// Generates case `index` of the run seeded `seed` (attempt `attempt`: the worker draws
/// again when the reference engine refuses a program).
pub fn generate(seed: u64, index: u64, attempt: u32) -> Case {
    let mut g = Gen {
        rng: Rng::for_case(seed, index, attempt),
        sizes: Vec::new(),
        tensors: Vec::new(),
        loops: Vec::new(),
        lets: Vec::new(),
        writing: HashSet::new(),
        counter: 0,
        extents: Vec::new(),
    };
    g.sizes = (0..3)
        .map(|_| [0, 1, 2, 3, 3, 4, 5, 7][g.rng.weighted(&[2, 6, 8, 10, 6, 6, 5, 4])])
        .collect();
    let nests = 1 + g.rng.weighted(&[50, 35, 15]);
    let mut body = Vec::new();
    for _ in 0..nests {
        body.extend(g.nest());
        for t in g.tensors.iter_mut() {
            t.readable = true;
        }
        g.writing.clear();
    }
    g.finish(body)
}

fn idx(name: &str) -> Expr {
    Expr::Index(name.to_string())
}

fn lit_i(n: i64) -> Expr {
    Expr::Literal(Value::I64(n))
}

fn call(op: Op, args: Vec<Expr>) -> Expr {
    Expr::Call { op, args }
}

fn access(tensor: &str, indices: Vec<Expr>) -> Expr {
    Expr::Access(Access {
        tensor: tensor.to_string(),
        indices,
    })
}

/// `i + c` (or `i` for no shift).
fn shifted(name: &str, c: i64) -> Expr {
    match c {
        0 => idx(name),
        c if c > 0 => call(Op::Add, vec![idx(name), lit_i(c)]),
        c => call(Op::Sub, vec![idx(name), lit_i(-c)]),
    }
}

fn block(mut stmts: Vec<Stmt>) -> Stmt {
    if stmts.len() == 1 {
        stmts.remove(0)
    } else {
        Stmt::Block(stmts)
    }
}

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn size(&self, dim: usize) -> usize {
        self.sizes[dim]
    }

    fn lit(&mut self, ty: Ty) -> Expr {
        Expr::Literal(match ty {
            Ty::F => {
                if self.rng.chance(0.03) {
                    *self.rng.pick(&[
                        Value::F64(f64::INFINITY),
                        Value::F64(f64::NEG_INFINITY),
                        Value::F64(f64::NAN),
                    ])
                } else {
                    Value::F64(*self.rng.pick(&[0.0, 1.0, 2.0, -1.0, 0.5, 3.0, -2.5, 1.5]))
                }
            }
            Ty::I => Value::I64(self.rng.range(-2, 4)),
            Ty::B => Value::Bool(self.rng.chance(0.5)),
        })
    }

    /// Adds a tensor declaration.
    fn declare(
        &mut self,
        kind: DeclKind,
        prefix: &str,
        format: Format,
        dims: Vec<usize>,
        ty: Ty,
    ) -> String {
        self.declare_tensor(kind, prefix, format, dims, ty).name
    }

    /// [`Self::declare`], returning the declared tensor.
    fn declare_tensor(
        &mut self,
        kind: DeclKind,
        prefix: &str,
        format: Format,
        dims: Vec<usize>,
        ty: Ty,
    ) -> Tensor {
        let name = self.fresh(prefix);
        let density = *self.rng.pick(&[0.2, 0.4, 0.6, 1.0]);
        let t = Tensor {
            name,
            kind,
            format,
            dims,
            ty,
            values: Values::Plain,
            density,
            readable: kind == DeclKind::Input,
            shaped: false,
        };
        self.tensors.push(t.clone());
        t
    }

    fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    fn tensor_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        self.tensors.iter_mut().find(|t| t.name == name)
    }

    // ---- nests ---------------------------------------------------------------------

    fn nest(&mut self) -> Vec<Stmt> {
        self.loops.clear();
        self.lets.clear();
        self.extents.clear();
        let stmts = match self.rng.weighted(&[62, 18, 10, 10]) {
            0 => self.plain_nest(),
            1 => self.workspace_nest(),
            2 => self.scatter_nest(),
            _ => self.short_circuit_nest(),
        };
        self.size_loops(stmts)
    }

    fn new_loop(&mut self, dim: usize, special: bool) -> Loop {
        let name = ["i", "j", "k", "l", "m"][self.loops.len().min(4)].to_string();
        let (shift, permissive) = if !special {
            (0, false)
        } else {
            match self.rng.weighted(&[88, 8, 4]) {
                0 => (0, false),
                1 => (*self.rng.pick(&[-1, 1, 2]), false),
                _ => (0, true),
            }
        };
        if permissive {
            let n = self.size(dim) as i64;
            let lo = self.rng.range(0, n + 1);
            let hi = self.rng.range(lo - 1, n + 1);
            self.extents
                .push((name.clone(), Extent::Range(lit_i(lo), lit_i(hi))));
        }
        Loop {
            name,
            dim,
            shift,
            permissive,
        }
    }

    /// How a plain access writes or reads mode `dim` at loop `l`.
    fn loop_index(l: &Loop) -> (Expr, bool) {
        if l.permissive {
            (Expr::Permissive(Box::new(idx(&l.name))), true)
        } else {
            (shifted(&l.name, l.shift), false)
        }
    }

    /// A new output (or workspace, for `Temp`) over the dimensions of `loops`, declared by
    /// `X .= v`, and the target its writes take.
    fn new_target(&mut self, kind: DeclKind, loops: &[Loop], ty: Ty) -> (Target, Stmt) {
        let dims: Vec<usize> = loops.iter().map(|l| l.dim).collect();
        let format = random_format(&mut self.rng, dims.len(), ty, Use::Output);
        let fill = format.fill_value();
        let init = match &format {
            Format::Scalar(k, _) if !k.tracks_writes() && self.rng.chance(0.25) => self.lit(ty),
            f if all_dense(f) && self.rng.chance(0.15) => self.lit(ty),
            // A sparse tensor declared with a value other than its fill (the compiled
            // engines refuse an output so declared, and take a workspace).
            Format::Levels(_) if self.rng.chance(0.06) => self.lit(ty),
            _ => Expr::Literal(fill),
        };
        let prefix = if kind == DeclKind::Temp { "w" } else { "y" };
        let name = self.declare(kind, prefix, format, dims, ty);
        let mut shaped = false;
        let indices = loops
            .iter()
            .map(|l| {
                let (e, _) = Gen::loop_index(l);
                shaped |= l.permissive || l.shift != 0;
                e
            })
            .collect();
        if let Some(t) = self.tensor_mut(&name) {
            t.shaped = shaped;
        }
        self.writing.insert(name.clone());
        let decl = Stmt::Declare {
            tensor: name.clone(),
            init,
        };
        (Target { name, ty, indices }, decl)
    }

    fn random_ty(&mut self) -> Ty {
        [Ty::F, Ty::I, Ty::B][self.rng.weighted(&[70, 12, 18])]
    }

    /// The loops of a nest: `depth` of them over random dimensions.
    fn make_loops(&mut self, depth: usize) -> Vec<Loop> {
        let mut loops = Vec::new();
        for _ in 0..depth {
            let dim = self.rng.below(self.sizes.len());
            let l = self.new_loop(dim, true);
            self.loops.push(l.clone());
            loops.push(l);
        }
        self.loops.clear();
        loops
    }

    fn plain_nest(&mut self) -> Vec<Stmt> {
        let depth = 1 + self.rng.weighted(&[35, 45, 20]);
        let loops = self.make_loops(depth);
        let mut prelude = Vec::new();
        let mut targets = Vec::new();
        let count = if self.rng.chance(0.3) { 2 } else { 1 };
        for _ in 0..count {
            if self.rng.chance(0.06) {
                if let Some(t) = self.in_place_target(&loops) {
                    targets.push(t);
                    continue;
                }
            }
            let ndims = self.rng.below(depth + 1).min(3);
            let mut chosen: Vec<Loop> = loops.clone();
            while chosen.len() > ndims {
                let k = self.rng.below(chosen.len());
                chosen.remove(k);
            }
            if self.rng.chance(0.4) {
                chosen.reverse();
            }
            let ty = self.random_ty();
            let (t, decl) = self.new_target(DeclKind::Output, &chosen, ty);
            prelude.push(decl);
            targets.push(t);
        }
        let nest = self.loop_nest(&loops, 0, &targets);
        prelude.push(nest);
        prelude
    }

    /// An existing Dense input of floats over dimensions the loops cover, updated in place.
    fn in_place_target(&mut self, loops: &[Loop]) -> Option<Target> {
        let cands: Vec<Tensor> = self
            .tensors
            .iter()
            .filter(|t| {
                t.kind == DeclKind::Input
                    && t.ty == Ty::F
                    && all_dense(&t.format)
                    && t.values == Values::Plain
                    && t.dims.iter().all(|d| {
                        loops
                            .iter()
                            .any(|l| l.dim == *d && l.shift == 0 && !l.permissive)
                    })
            })
            .cloned()
            .collect();
        if cands.is_empty() {
            return None;
        }
        let t = self.rng.pick(&cands).clone();
        let mut used = HashSet::new();
        let mut indices = Vec::new();
        for d in &t.dims {
            let l = loops.iter().find(|l| {
                l.dim == *d && !used.contains(&l.name) && l.shift == 0 && !l.permissive
            })?;
            used.insert(l.name.clone());
            indices.push(idx(&l.name));
        }
        self.writing.insert(t.name.clone());
        Some(Target {
            name: t.name,
            ty: Ty::F,
            indices,
        })
    }

    /// Loops `loops[level..]` around statements writing `targets`.
    fn loop_nest(&mut self, loops: &[Loop], level: usize, targets: &[Target]) -> Stmt {
        let Some(l) = loops.get(level) else {
            return self.statements(targets);
        };
        self.loops.push(l.clone());
        let mut inner = self.loop_nest(loops, level + 1, targets);
        if level + 1 < loops.len() {
            let bound: HashSet<String> = self.loops.iter().map(|l| l.name.clone()).collect();
            let ready: Vec<Target> = targets
                .iter()
                .filter(|t| t.indices.iter().all(|e| mentions_only(e, &bound)))
                .cloned()
                .collect();
            if !ready.is_empty() && self.rng.chance(0.15) {
                let extra = self.statements(&ready[..1]);
                inner = if self.rng.chance(0.5) {
                    Stmt::Block(vec![extra, inner])
                } else {
                    Stmt::Block(vec![inner, extra])
                };
            } else if self.rng.chance(0.1) {
                let cond = self.cond();
                inner = Stmt::Sieve {
                    cond,
                    then: Box::new(inner),
                    otherwise: None,
                };
            }
        }
        self.loops.pop();
        Stmt::Loop {
            index: l.name.clone(),
            extent: Extent::Auto,
            body: Box::new(inner),
        }
    }

    /// One to three statements writing `targets` (each at least once), perhaps under an
    /// `if` or a `let`.
    fn statements(&mut self, targets: &[Target]) -> Stmt {
        let n = (1 + self.rng.weighted(&[60, 30, 10])).max(targets.len());
        if self.rng.chance(0.12) {
            let ty = self.random_ty();
            let (value, _) = self.expr(ty, 1, false);
            let var = self.fresh("t");
            self.lets.push((var.clone(), ty));
            let body = self.statements_plain(targets, n);
            self.lets.pop();
            return Stmt::Define {
                var,
                value,
                body: Box::new(body),
            };
        }
        if self.rng.chance(0.2) {
            let cond = self.cond();
            let then = self.statements_plain(targets, n);
            let otherwise = if self.rng.chance(0.35) {
                Some(Box::new(self.statements_plain(targets, 1)))
            } else {
                None
            };
            return Stmt::Sieve {
                cond,
                then: Box::new(then),
                otherwise,
            };
        }
        self.statements_plain(targets, n)
    }

    fn statements_plain(&mut self, targets: &[Target], n: usize) -> Stmt {
        let stmts = (0..n)
            .map(|k| {
                let t = &targets[k % targets.len()];
                let t = t.clone();
                self.assignment(&t)
            })
            .collect();
        block(stmts)
    }

    fn assignment(&mut self, t: &Target) -> Stmt {
        let format = self.tensor(&t.name).map(|x| x.format.clone());
        let pattern = matches!(&format, Some(Format::Levels(l)) if matches!(l.leaf(), finch::formats::LevelFormat::Pattern));
        let short = matches!(&format, Some(Format::Scalar(k, _)) if k.short_circuits());
        let op = self.assign_op(t.ty, pattern, short, format.as_ref());
        let rhs_ty = if t.ty == Ty::F && self.rng.chance(0.08) {
            Ty::I
        } else {
            t.ty
        };
        let depth = if self.rng.chance(0.5) { 1 } else { 2 };
        let (rhs, _) = self.expr(rhs_ty, depth, true);
        Stmt::Assign {
            lhs: Access {
                tensor: t.name.clone(),
                indices: t.indices.clone(),
            },
            op,
            rhs,
        }
    }

    fn assign_op(
        &mut self,
        ty: Ty,
        pattern: bool,
        short: bool,
        format: Option<&Format>,
    ) -> AssignOp {
        let r = |op| AssignOp::Reduce(op);
        if pattern {
            return if self.rng.chance(0.5) {
                AssignOp::Store
            } else {
                r(Op::BitOr)
            };
        }
        let fill = format.map(Format::fill_value).unwrap_or(ty.zero());
        match ty {
            Ty::F => {
                let w: &[u32] = if short {
                    &[0, 20, 0, 30, 20, 20, 10, 0]
                } else {
                    &[30, 30, 8, 8, 8, 8, 4, 2]
                };
                match self.rng.weighted(w) {
                    0 => AssignOp::Store,
                    1 => r(Op::Add),
                    2 => r(Op::Sub),
                    3 => r(Op::Mul),
                    4 => r(Op::Min),
                    5 => r(Op::Max),
                    6 => r(Op::Choose(fill)),
                    _ => r(Op::Overwrite),
                }
            }
            Ty::I => match self.rng.weighted(&[25, 30, 8, 8, 8, 8, 8, 5]) {
                0 => AssignOp::Store,
                1 => r(Op::Add),
                2 => r(Op::Sub),
                3 => r(Op::Min),
                4 => r(Op::Max),
                5 => r(Op::BitOr),
                6 => r(Op::BitAnd),
                _ => r(Op::Xor),
            },
            Ty::B => match self.rng.weighted(&[30, 30, 20, 8, 6, 6]) {
                0 => AssignOp::Store,
                1 => r(Op::BitOr),
                2 => r(Op::BitAnd),
                3 => r(Op::Xor),
                4 => r(Op::Or),
                _ => r(Op::And),
            },
        }
    }

    /// `for j: w .= v; for i: w[i] op= ...; end; for i: y[..] = f(w[i], ...); end; end`,
    /// with a vector or scalar workspace `w` declared inside the loop.
    fn workspace_nest(&mut self) -> Vec<Stmt> {
        let outer_dim = self.rng.below(self.sizes.len());
        let outer = self.new_loop(outer_dim, false);
        self.loops.push(outer.clone());
        let scalar = self.rng.chance(0.3);
        let inner_dim = self.rng.below(self.sizes.len());
        let inner = self.new_loop(inner_dim, false);
        let ty = if self.rng.chance(0.85) { Ty::F } else { Ty::B };
        let ws_loops = if scalar { vec![] } else { vec![inner.clone()] };
        let (w, w_decl) = self.new_target(DeclKind::Temp, &ws_loops, ty);
        self.workspace_format(&w.name, scalar);
        // The output: over the outer loop, or both, or a scalar.
        let out_loops = match self.rng.below(3) {
            0 => vec![outer.clone()],
            1 if !scalar => vec![inner.clone(), outer.clone()],
            _ => vec![],
        };
        let out_ty = self.random_ty();
        let (y, y_decl) = self.new_target(DeclKind::Output, &out_loops, out_ty);
        // Fill the workspace.
        self.loops.push(inner.clone());
        let mut fill_loops = vec![inner.clone()];
        if self.rng.chance(0.35) {
            let d = self.rng.below(self.sizes.len());
            let extra = self.new_loop(d, false);
            self.loops.push(extra.clone());
            fill_loops.insert(if self.rng.chance(0.5) { 0 } else { 1 }, extra);
        }
        let filling = self.statements(std::slice::from_ref(&w));
        for _ in 0..fill_loops.len() {
            self.loops.pop();
        }
        let mut fill_stmt = filling;
        for l in fill_loops.iter().rev() {
            fill_stmt = Stmt::Loop {
                index: l.name.clone(),
                extent: Extent::Auto,
                body: Box::new(fill_stmt),
            };
        }
        // Use it: the workspace is readable within the loop that declares it.
        if let Some(t) = self.tensor_mut(&w.name) {
            t.readable = true;
        }
        self.writing.remove(&w.name);
        let use_loops: Vec<Loop> = if scalar { vec![] } else { vec![inner.clone()] };
        for l in &use_loops {
            self.loops.push(l.clone());
        }
        // The workspace read back, now and then under a protocol (a galloped or followed
        // read of what the loop just wrote).
        let mut w_indices = w.indices.clone();
        if let Some(first) = w_indices.first_mut() {
            if self.rng.chance(0.2) {
                let p = *self
                    .rng
                    .pick(&[Protocol::Gallop, Protocol::Follow, Protocol::Walk]);
                *first = Expr::Protocol(p, Box::new(first.clone()));
            }
        }
        let w_read = access(&w.name, w_indices);
        let (other, _) = self.expr(y.ty, 1, true);
        let rhs = match (y.ty, ty) {
            (Ty::F, Ty::F) | (Ty::I, Ty::F) if y.ty == Ty::F => {
                let op = *self.rng.pick(&[Op::Add, Op::Mul, Op::Max, Op::Sub]);
                call(op, vec![w_read, other])
            }
            (Ty::B, Ty::B) => call(
                *self.rng.pick(&[Op::And, Op::Or, Op::Xor]),
                vec![w_read, other],
            ),
            (Ty::B, Ty::F) => call(Op::Lt, vec![w_read, Expr::Literal(Value::F64(1.0))]),
            (_, Ty::B) => call(Op::IfElse, vec![w_read, other.clone(), self.lit(y.ty)]),
            _ => other,
        };
        let op = self.assign_op(y.ty, false, false, None);
        let use_stmt = Stmt::Assign {
            lhs: Access {
                tensor: y.name.clone(),
                indices: y.indices.clone(),
            },
            op,
            rhs,
        };
        for _ in &use_loops {
            self.loops.pop();
        }
        let use_stmt = match use_loops.first() {
            Some(l) => Stmt::Loop {
                index: l.name.clone(),
                extent: Extent::Auto,
                body: Box::new(use_stmt),
            },
            None => use_stmt,
        };
        self.loops.pop();
        if let Some(t) = self.tensor_mut(&w.name) {
            t.readable = false;
        }
        let body = Stmt::Block(vec![w_decl, fill_stmt, use_stmt]);
        vec![
            y_decl,
            Stmt::Loop {
                index: outer.name,
                extent: Extent::Auto,
                body: Box::new(body),
            },
        ]
    }

    /// Mostly one of the vector formats the compiled engines take as a workspace declared in
    /// a loop (the others are refused, and counted so), keeping the drawn fill.
    fn workspace_format(&mut self, name: &str, scalar: bool) {
        if scalar || !self.rng.chance(0.85) {
            return;
        }
        let kind = *self.rng.pick(&[
            LevelKind::Dense,
            LevelKind::SparseList,
            LevelKind::SparseByteMap,
            LevelKind::RunList,
            LevelKind::SparseRunList,
            LevelKind::SparseHash,
        ]);
        if let Some(t) = self.tensor_mut(name) {
            let leaf = LevelFormat::Element(t.format.fill_value());
            t.format = Format::Levels(LevelFormat::inner(kind, leaf));
        }
    }

    /// `for i: y[I[i]] op= e` (a scatter through an index tensor) or `y[~(i + c)] = e`.
    fn scatter_nest(&mut self) -> Vec<Stmt> {
        let dim = self.rng.below(self.sizes.len());
        let l = self.new_loop(dim, false);
        let target_dim = self.rng.below(self.sizes.len());
        let ty = self.random_ty();
        let (mut y, decl) = self.new_target(DeclKind::Output, std::slice::from_ref(&l), ty);
        if let Some(t) = self.tensor_mut(&y.name) {
            t.dims = vec![target_dim];
            t.shaped = true;
        }
        let n = self.size(target_dim) as i64;
        y.indices = vec![match self.rng.below(3) {
            0 if n > 0 => self.index_tensor(&l, 1, n, false),
            1 => self.index_tensor(&l, 0, n + 1, true),
            _ => Expr::Permissive(Box::new(shifted(&l.name, self.rng.range(-1, 2)))),
        }];
        self.loops.push(l.clone());
        let s = self.statements(&[y]);
        self.loops.pop();
        vec![
            decl,
            Stmt::Loop {
                index: l.name,
                extent: Extent::Auto,
                body: Box::new(s),
            },
        ]
    }

    /// `I[i]` for a new integer input `I` holding `lo..=hi` (permissive: `~(I[i])`).
    fn index_tensor(&mut self, l: &Loop, lo: i64, hi: i64, permissive: bool) -> Expr {
        let mut format = random_format(&mut self.rng, 1, Ty::I, Use::Input);
        if !permissive {
            // A fill outside `lo..=hi` would index out of bounds.
            format = Format::parse(&format.to_string().replace("Element(0)", "Element(1)"))
                .unwrap_or(format);
        }
        let name = self.declare(DeclKind::Input, "I", format, vec![l.dim], Ty::I);
        if let Some(t) = self.tensor_mut(&name) {
            t.values = Values::Range(lo, hi);
        }
        let (e, _) = Gen::loop_index(l);
        let read = access(&name, vec![e]);
        if permissive {
            Expr::Permissive(Box::new(read))
        } else {
            read
        }
    }

    /// A reduction into a short-circuiting scalar, alone in its loops (so it may stop early).
    fn short_circuit_nest(&mut self) -> Vec<Stmt> {
        let depth = 1 + self.rng.weighted(&[60, 40]);
        let loops = self.make_loops(depth);
        let ty = if self.rng.chance(0.7) { Ty::F } else { Ty::B };
        let (t, _) = self.new_target(DeclKind::Output, &[], ty);
        let kind = if self.rng.chance(0.5) {
            ScalarKind::ShortCircuitScalar
        } else {
            ScalarKind::SparseShortCircuitScalar
        };
        if let Some(x) = self.tensor_mut(&t.name) {
            x.format = Format::Scalar(kind, x.format.fill_value());
        }
        let fill = self
            .tensor(&t.name)
            .map_or(ty.zero(), |x| x.format.fill_value());
        let init = if kind == ScalarKind::ShortCircuitScalar && ty == Ty::F && self.rng.chance(0.5)
        {
            Value::F64(1.0)
        } else {
            fill
        };
        let decl = Stmt::Declare {
            tensor: t.name.clone(),
            init: Expr::Literal(init),
        };
        let nest = self.loop_nest_single(&loops, &t);
        vec![decl, nest]
    }

    fn loop_nest_single(&mut self, loops: &[Loop], t: &Target) -> Stmt {
        for l in loops {
            self.loops.push(l.clone());
        }
        let mut s = self.assignment(t);
        for l in loops.iter().rev() {
            self.loops.pop();
            s = Stmt::Loop {
                index: l.name.clone(),
                extent: Extent::Auto,
                body: Box::new(s),
            };
        }
        s
    }

    // ---- expressions ---------------------------------------------------------------

    /// A condition: a `bool` expression that is never `missing`.
    fn cond(&mut self) -> Expr {
        self.expr(Ty::B, 1, false).0
    }

    /// An expression of type `ty`, at most `depth` operators deep; the flag says whether it
    /// may be `missing` (only where `missing_ok`).
    fn expr(&mut self, ty: Ty, depth: u32, missing_ok: bool) -> (Expr, bool) {
        if depth == 0 || self.rng.chance(0.3) {
            return self.leaf(ty, missing_ok);
        }
        let d = depth - 1;
        let sub = |g: &mut Gen, t: Ty| g.expr(t, d, missing_ok);
        let (e, m) = match ty {
            Ty::F => match self.rng.weighted(&[20, 10, 20, 3, 8, 3, 8, 4, 3, 3]) {
                0 => {
                    let n = 2 + self.rng.below(2);
                    let parts: Vec<(Expr, bool)> = (0..n).map(|_| sub(self, Ty::F)).collect();
                    let m = parts.iter().any(|p| p.1);
                    (call(Op::Add, parts.into_iter().map(|p| p.0).collect()), m)
                }
                1 => self.binary(Op::Sub, Ty::F, Ty::F, d, missing_ok),
                2 => self.binary(Op::Mul, Ty::F, Ty::F, d, missing_ok),
                3 => {
                    let (a, m) = sub(self, Ty::F);
                    (call(Op::Neg, vec![a]), m)
                }
                4 => {
                    let op = *self.rng.pick(&[Op::Min, Op::Max]);
                    self.binary(op, Ty::F, Ty::F, d, missing_ok)
                }
                5 => {
                    let (a, m) = sub(self, Ty::F);
                    (call(Op::Abs, vec![a]), m)
                }
                6 => self.ifelse(Ty::F, d, missing_ok),
                7 => {
                    let (a, m) = sub(self, Ty::F);
                    let k = *self.rng.pick(&[2.0, 4.0, 0.5, -2.0]);
                    (call(Op::Div, vec![a, Expr::Literal(Value::F64(k))]), m)
                }
                8 => {
                    let (a, m) = sub(self, Ty::F);
                    (call(Op::Pow, vec![a, lit_i(2)]), m)
                }
                _ => {
                    let (a, m) = sub(self, Ty::I);
                    (call(Op::Cast(ScalarType::F64), vec![a]), m)
                }
            },
            Ty::I => match self.rng.weighted(&[20, 10, 8, 8, 3, 6, 8, 6]) {
                0 => self.binary(Op::Add, Ty::I, Ty::I, d, missing_ok),
                1 => self.binary(Op::Sub, Ty::I, Ty::I, d, missing_ok),
                2 => self.binary(Op::Mul, Ty::I, Ty::I, d, missing_ok),
                3 => {
                    let op = *self.rng.pick(&[Op::Min, Op::Max]);
                    self.binary(op, Ty::I, Ty::I, d, missing_ok)
                }
                4 => {
                    let (a, m) = sub(self, Ty::I);
                    (call(Op::Abs, vec![a]), m)
                }
                5 => self.ifelse(Ty::I, d, missing_ok),
                6 => {
                    let (a, m) = sub(self, Ty::I);
                    let op = *self.rng.pick(&[Op::IntDiv, Op::RemFn, Op::Mod, Op::Fld]);
                    (call(op, vec![a, lit_i(self.rng.range(2, 3))]), m)
                }
                _ => {
                    let op = *self.rng.pick(&[Op::BitAnd, Op::BitOr, Op::Xor]);
                    self.binary(op, Ty::I, Ty::I, d, missing_ok)
                }
            },
            Ty::B => match self.rng.weighted(&[30, 15, 15, 8, 8, 4]) {
                0 => {
                    let op = *self
                        .rng
                        .pick(&[Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne]);
                    self.binary(op, Ty::F, Ty::F, d, missing_ok)
                }
                1 => {
                    let op = *self.rng.pick(&[Op::Lt, Op::Le, Op::Eq, Op::Ne]);
                    self.binary(op, Ty::I, Ty::I, d, missing_ok)
                }
                2 => {
                    let op = *self.rng.pick(&[Op::And, Op::Or]);
                    self.binary(op, Ty::B, Ty::B, d, missing_ok)
                }
                3 => {
                    let (a, m) = sub(self, Ty::B);
                    (call(Op::Not, vec![a]), m)
                }
                4 => {
                    let op = *self.rng.pick(&[Op::BitAnd, Op::BitOr, Op::Xor]);
                    self.binary(op, Ty::B, Ty::B, d, missing_ok)
                }
                _ => self.ifelse(Ty::B, d, missing_ok),
            },
        };
        (e, m)
    }

    fn binary(&mut self, op: Op, a: Ty, b: Ty, depth: u32, missing_ok: bool) -> (Expr, bool) {
        let (x, mx) = self.expr(a, depth, missing_ok);
        let (y, my) = self.expr(b, depth, missing_ok);
        (call(op, vec![x, y]), mx || my)
    }

    fn ifelse(&mut self, ty: Ty, depth: u32, missing_ok: bool) -> (Expr, bool) {
        let c = self.expr(Ty::B, depth, false).0;
        let (a, ma) = self.expr(ty, depth, missing_ok);
        let (b, mb) = self.expr(ty, depth, missing_ok);
        (call(Op::IfElse, vec![c, a, b]), ma || mb)
    }

    fn leaf(&mut self, ty: Ty, missing_ok: bool) -> (Expr, bool) {
        let vars: Vec<String> = self
            .lets
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n.clone())
            .collect();
        let has_loops = !self.loops.is_empty();
        let w_var = if vars.is_empty() { 0 } else { 10 };
        let w_idx = if has_loops && ty == Ty::I { 20 } else { 0 };
        match self.rng.weighted(&[65, 15, w_var, w_idx]) {
            0 => {
                let (read, maybe) = self.read(ty);
                if maybe && (!missing_ok || self.rng.chance(0.85)) {
                    let default = self.lit(ty);
                    (call(Op::Coalesce, vec![read, default]), false)
                } else {
                    (read, maybe)
                }
            }
            1 => (self.lit(ty), false),
            2 => (Expr::Variable(self.rng.pick(&vars).clone()), false),
            _ => {
                let l = self.rng.pick(&self.loops).clone();
                (idx(&l.name), false)
            }
        }
    }

    /// A read of a tensor of type `ty`: an existing readable one whose modes the bound
    /// loops can index, or a new input over their dimensions.
    fn read(&mut self, ty: Ty) -> (Expr, bool) {
        let cands: Vec<Tensor> = self
            .tensors
            .iter()
            .filter(|t| {
                t.readable
                    && !self.writing.contains(&t.name)
                    && t.ty == ty
                    && t.values == Values::Plain
                    && t.dims.len() <= 3
            })
            .cloned()
            .collect();
        let inputs = self
            .tensors
            .iter()
            .filter(|t| t.kind == DeclKind::Input)
            .count();
        let reuse = !cands.is_empty() && (inputs >= 4 || self.rng.chance(0.6));
        let t = if reuse {
            self.rng.pick(&cands).clone()
        } else {
            self.new_input(ty)
        };
        self.access_of(&t)
    }

    fn new_input(&mut self, ty: Ty) -> Tensor {
        let mut dims: Vec<usize> = Vec::new();
        let ndims = self
            .rng
            .weighted(&[10, 45, 35, 10])
            .min(self.loops.len() + 1);
        let mut pool: Vec<usize> = self.loops.iter().map(|l| l.dim).collect();
        for _ in 0..ndims {
            if !pool.is_empty() && self.rng.chance(0.9) {
                let k = self.rng.below(pool.len());
                dims.push(pool.remove(k));
            } else {
                dims.push(self.rng.below(self.sizes.len()));
            }
        }
        let format = random_format(&mut self.rng, dims.len(), ty, Use::Input);
        self.declare_tensor(DeclKind::Input, "x", format, dims, ty)
    }

    /// `t[...]` with an index for each mode; the flag says whether it may read `missing`.
    fn access_of(&mut self, t: &Tensor) -> (Expr, bool) {
        let mut maybe = false;
        let mut used: HashSet<String> = HashSet::new();
        let mut indices = Vec::new();
        for (m, &dim) in t.dims.iter().enumerate() {
            let kind = level_of_mode(&t.format, m);
            let (e, mm) = self.index_for(dim, &mut used, kind);
            maybe |= mm;
            indices.push(e);
        }
        (access(&t.name, indices), maybe)
    }

    fn index_for(
        &mut self,
        dim: usize,
        used: &mut HashSet<String>,
        kind: Option<finch::formats::LevelKind>,
    ) -> (Expr, bool) {
        let n = self.size(dim) as i64;
        let bare: Vec<Loop> = self
            .loops
            .iter()
            .filter(|l| l.dim == dim && !used.contains(&l.name))
            .cloned()
            .collect();
        let plain: Vec<Loop> = self
            .loops
            .iter()
            .filter(|l| l.shift == 0 && !l.permissive)
            .cloned()
            .collect();
        let fits: Vec<Loop> = plain
            .iter()
            .filter(|l| self.size(l.dim) as i64 <= n)
            .cloned()
            .collect();
        let w = [
            if bare.is_empty() { 0 } else { 80 },
            if bare.is_empty() { 0 } else { 5 },
            if fits.is_empty() { 0 } else { 5 },
            if plain.is_empty() { 0 } else { 3 },
            if n >= 1 { 3 } else { 0 },
            if plain.is_empty() { 0 } else { 4 },
            if self.loops.is_empty() { 0 } else { 2 },
        ];
        if w.iter().all(|&x| x == 0) {
            return (Expr::Permissive(Box::new(lit_i(1))), true);
        }
        match self.rng.weighted(&w) {
            0 => {
                let l = self.rng.pick(&bare).clone();
                used.insert(l.name.clone());
                let (e, maybe) = Gen::loop_index(&l);
                if l.shift == 0 && !l.permissive && self.rng.chance(0.08) {
                    let p = match kind {
                        Some(k) if gallops(k) && self.rng.chance(0.5) => Protocol::Gallop,
                        _ => *self.rng.pick(&[Protocol::Follow, Protocol::Walk]),
                    };
                    return (Expr::Protocol(p, Box::new(e)), false);
                }
                (e, maybe)
            }
            1 => {
                let l = self.rng.pick(&bare).clone();
                let c = *self.rng.pick(&[-2, -1, 1, 2]);
                (
                    Expr::Permissive(Box::new(shifted(&l.name, l.shift + c))),
                    true,
                )
            }
            2 => {
                let l = self.rng.pick(&fits).clone();
                let len = self.size(l.dim) as i64;
                let lo = self.rng.range(1, n - len + 1);
                (window(lo, lo + len - 1, &l.name), false)
            }
            3 => {
                let l = self.rng.pick(&plain).clone();
                let len = self.size(l.dim) as i64;
                let lo = self.rng.range(0, n + 1);
                (
                    Expr::Permissive(Box::new(window(lo, lo + len - 1, &l.name))),
                    true,
                )
            }
            4 => (lit_i(self.rng.range(1, n)), false),
            5 => {
                let l = self.rng.pick(&plain).clone();
                if n >= 1 && self.rng.chance(0.6) {
                    (self.index_tensor(&l, 1, n, false), false)
                } else {
                    (self.index_tensor(&l, 0, n + 1, true), true)
                }
            }
            _ => {
                let l = self.rng.pick(&self.loops).clone();
                (Expr::Permissive(Box::new(idx(&l.name))), true)
            }
        }
    }

    // ---- sizes and the finished program ----------------------------------------------

    /// Gives every loop an extent: `_` where a tensor of known size is read or written at
    /// its index, else a range; a chosen share of sized loops get `1:n` or `1:n[]` anyway.
    fn size_loops(&mut self, stmts: Vec<Stmt>) -> Vec<Stmt> {
        let mut known: HashSet<String> = self
            .tensors
            .iter()
            .filter(|t| !self.writing.contains(&t.name) || t.kind == DeclKind::Input || t.shaped)
            .map(|t| t.name.clone())
            .collect();
        for t in &self.tensors {
            if t.shaped {
                known.insert(t.name.clone());
            }
        }
        // Workspaces and outputs written at plain indices of sized loops are sized too.
        for _ in 0..4 {
            let mut more = Vec::new();
            for s in &stmts {
                written_plainly(s, &known, &mut Vec::new(), &mut more);
            }
            known.extend(more);
        }
        let block = Stmt::Block(stmts);
        let mut out = self.set_extents(block, &known);
        match &mut out {
            Stmt::Block(v) => std::mem::take(v),
            s => vec![s.clone()],
        }
    }

    fn set_extents(&mut self, s: Stmt, known: &HashSet<String>) -> Stmt {
        match s {
            Stmt::Loop { index, body, .. } => {
                let body = self.set_extents(*body, known);
                let preset = self
                    .extents
                    .iter()
                    .find(|(n, _)| *n == index)
                    .map(|e| e.1.clone());
                let sized = sizes_loop(&index, &body, known);
                let dim_size = loop_dim_size(&index, &body, &self.tensors, &self.sizes);
                let extent = match preset {
                    Some(e) => e,
                    None if sized && self.rng.chance(0.88) => Extent::Auto,
                    None => match dim_size {
                        Some((n, shift)) if shift == 0 && self.rng.chance(0.4) => {
                            let bound = self.declare(
                                DeclKind::Input,
                                "n",
                                Format::Scalar(ScalarKind::Scalar, Value::I64(0)),
                                vec![],
                                Ty::I,
                            );
                            if let Some(t) = self.tensor_mut(&bound) {
                                t.values = Values::Range(n as i64, n as i64);
                            }
                            Extent::Range(lit_i(1), access(&bound, vec![]))
                        }
                        Some((n, shift)) => {
                            Extent::Range(lit_i(1 - shift), lit_i(n as i64 - shift))
                        }
                        None if sized => Extent::Auto,
                        None => Extent::Range(lit_i(1), lit_i(self.sizes[0] as i64)),
                    },
                };
                Stmt::Loop {
                    index,
                    extent,
                    body: Box::new(body),
                }
            }
            Stmt::Block(v) => {
                Stmt::Block(v.into_iter().map(|s| self.set_extents(s, known)).collect())
            }
            Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => Stmt::Sieve {
                cond,
                then: Box::new(self.set_extents(*then, known)),
                otherwise: otherwise.map(|o| Box::new(self.set_extents(*o, known))),
            },
            Stmt::Define { var, value, body } => Stmt::Define {
                var,
                value,
                body: Box::new(self.set_extents(*body, known)),
            },
            s => s,
        }
    }

    fn finish(mut self, body: Vec<Stmt>) -> Case {
        // Outputs whose writes do not size every mode get their shape given.
        let mut sized: HashSet<String> = self
            .tensors
            .iter()
            .filter(|t| t.kind == DeclKind::Input)
            .map(|t| t.name.clone())
            .collect();
        for _ in 0..6 {
            let mut more = Vec::new();
            for s in &body {
                written_plainly(s, &sized, &mut Vec::new(), &mut more);
            }
            sized.extend(more);
        }
        let mut shapes = BTreeMap::new();
        for t in &self.tensors {
            if t.kind != DeclKind::Input
                && (t.shaped || !sized.contains(&t.name))
                && !t.dims.is_empty()
            {
                shapes.insert(
                    t.name.clone(),
                    t.dims.iter().map(|&d| self.sizes[d]).collect(),
                );
            }
        }
        let mut decls: Vec<Decl> = Vec::new();
        for kind in [DeclKind::Input, DeclKind::Output, DeclKind::Temp] {
            for t in self.tensors.iter().filter(|t| t.kind == kind) {
                decls.push(Decl {
                    kind,
                    name: t.name.clone(),
                    format: t.format.to_string(),
                    span: Default::default(),
                });
            }
        }
        let program = notation::Program {
            decls,
            body: block(body),
        };
        let text = notation::print_program(&program);
        let mut inputs = Vec::new();
        let tensors = self.tensors.clone();
        for t in tensors.iter().filter(|t| t.kind == DeclKind::Input) {
            let shape: Vec<usize> = t.dims.iter().map(|&d| self.sizes[d]).collect();
            let a = random_array(&mut self.rng, &t.format, &shape, t.values, t.density);
            inputs.push((t.name.clone(), a));
        }
        Case {
            program: text,
            inputs,
            shapes,
        }
    }
}

fn window(lo: i64, hi: i64, index: &str) -> Expr {
    Expr::Window {
        lo: Box::new(lit_i(lo)),
        hi: Box::new(lit_i(hi)),
        index: Box::new(idx(index)),
    }
}

/// Whether `e` mentions only indices in `bound`.
fn mentions_only(e: &Expr, bound: &HashSet<String>) -> bool {
    match e {
        Expr::Index(n) => bound.contains(n),
        Expr::Call { args, .. } => args.iter().all(|a| mentions_only(a, bound)),
        Expr::Access(a) => a.indices.iter().all(|x| mentions_only(x, bound)),
        Expr::Permissive(x) | Expr::Protocol(_, x) => mentions_only(x, bound),
        Expr::Window { lo, hi, index } => [lo, hi, index].iter().all(|x| mentions_only(x, bound)),
        Expr::Literal(_) | Expr::Variable(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_case() {
        for index in 0..50 {
            assert_eq!(generate(3, index, 0), generate(3, index, 0));
        }
        assert_ne!(generate(3, 1, 0).program, generate(3, 2, 0).program);
    }

    #[test]
    fn the_reference_runs_nearly_every_first_draw() {
        let n = 300;
        let mut ran = 0;
        for index in 0..n {
            let case = generate(21, index, 0);
            let p = finch::Program::parse(&case.program).expect("a generated program parses");
            if crate::run::run_reference(&p, &case).is_ok() {
                ran += 1;
            }
        }
        assert!(ran * 100 >= n * 95, "the reference ran {ran} of {n}");
    }

    #[test]
    fn generated_programs_parse() {
        for index in 0..300 {
            let case = generate(9, index, 0);
            if let Err(e) = finch::Program::parse(&case.program) {
                panic!("{e}\n{}", case.program);
            }
        }
    }
}

//! Reads that may fall outside their tensor: shifted and permissive reads, the `missing`
//! leaves they give, and fibers absent at a bound index keeping their bounds.

use super::*;

impl Lowerer {
    /// An assignment reading two or more stored leaves that may be missing (Switches
    /// between a leaf and fill: random access into a sparse level), each a term its fill
    /// does not decide (see [`Self::fill_decides`]): rather than one copy of the statement per
    /// combination of them (`2^n`), every read's `pre` code runs first and the statement
    /// reads each as a [`Tensor::Present`] leaf (`cond ? value : fill`). `None` otherwise.
    pub(super) fn select_missing_leaves(&mut self, s: &Stmt) -> Result<Option<Selected>> {
        if !matches!(s, Stmt::Assign { .. }) {
            return Ok(None);
        }
        let mut switches = 0;
        // Candidates by their position among the statement's accesses.
        let mut candidates: Vec<(usize, Vec<KStmt>, KExpr, crate::looplets::Fiber, Value)> =
            Vec::new();
        let mut n = 0;
        map_exprs(s.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                if matches!(t, Tensor::Switch { .. }) {
                    switches += 1;
                }
                if let (
                    Tensor::Switch {
                        pre,
                        cond,
                        then,
                        otherwise,
                    },
                    true,
                ) = (&t, idx.is_empty())
                {
                    if let (Tensor::Fiber(f), Tensor::FillLeaf(fill)) = (&**then, &**otherwise) {
                        if self.is_leaf(f) && f.hollow.is_none() && !f.protocols.is_written() {
                            candidates.push((n, pre.clone(), cond.clone(), f.clone(), *fill));
                        }
                    }
                }
                n += 1;
                Ok(Expr::Access(Box::new(t), idx))
            })
        })?;
        if candidates.is_empty() {
            return Ok(None);
        }
        let replace = |s: &Stmt, with: &dyn Fn(usize) -> Option<Tensor>| -> Result<Stmt> {
            let mut n = 0;
            map_exprs(s.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    let k = n;
                    n += 1;
                    Ok(Expr::Access(Box::new(with(k).unwrap_or(t)), idx))
                })
            })
        };
        let mut terms = Vec::new();
        for c in &candidates {
            let without = replace(s, &|k| (k == c.0).then_some(Tensor::FillLeaf(c.4)))?;
            if !self.fill_decides(without) {
                terms.push(c);
            }
        }
        // Reads still to be concordized (at an index bound already) become such Switches
        // one at a time: wait for them while every Switch is a term.
        if !terms.is_empty() && terms.len() == switches && concordizable_now(s) {
            return Ok(Some(Selected::Wait));
        }
        if terms.len() < 2 {
            return Ok(None);
        }
        let selected = replace(s, &|k| {
            terms
                .iter()
                .find(|c| c.0 == k)
                .map(|(_, _, cond, fiber, fill)| Tensor::Present {
                    cond: cond.clone(),
                    fiber: fiber.clone(),
                    fill: *fill,
                })
        })?;
        let mut code: Vec<KStmt> = terms.iter().flat_map(|c| c.1.iter().cloned()).collect();
        code.extend(self.lower(selected)?);
        Ok(Some(Selected::Code(code)))
    }

    /// A level that may lack the fiber at an index (any but Dense) read where a deeper
    /// index is shifted and permissive or unchecked (`A[~(i + 1), j]` over a sparse list
    /// of columns): a fiber it lacks is an empty fiber of the level below (a
    /// [`Tensor::Present`] that never holds) rather than its fill, so that a read of it
    /// outside its bounds is still `missing`, or out of range, and not the fill. Only the
    /// reads in `bounded` (`reads_out_of_bounds_apart`) need it.
    pub(super) fn absent_fibers_keep_bounds(
        &self,
        f: &crate::looplets::Fiber,
        idx: &[Expr],
        bounded: &[(usize, String)],
        l: Looplet,
    ) -> Looplet {
        let deeper = &idx[..idx.len().saturating_sub(1)];
        let shifted = deeper.iter().any(may_fall_outside);
        let level = self.tensors[f.tensor].levels.get(f.depth);
        // (A Dense level's fibers exist everywhere; written levels are not read here.)
        let one_mode = !level.is_some_and(LevelParams::is_dense);
        // The modes of a SparseCOO level, or of a SparseHash group read back, below its
        // first read a run of entries: none.
        let end = level
            .and_then(LevelParams::read_group_mode)
            .and_then(|(mode, modes)| (mode + 1 < modes).then(|| KExpr::int(0)));
        let read = (f.tensor, read_key(idx));
        let apart = bounded.contains(&read);
        if !shifted || !one_mode || !apart || f.protocols.is_written() {
            return l;
        }
        let fill = self.fill_of(f.tensor);
        let below = crate::looplets::Fiber {
            tensor: f.tensor,
            depth: f.depth + 1,
            pos: KExpr::int(0),
            end,
            hollow: None,
            protocols: f.protocols,
        };
        let empty: Rc<dyn Fn(Tensor) -> Tensor> =
            Rc::new(move |t| empty_keeps_bounds(t, fill, &below));
        crate::looplets::map_children(&l, &empty)
    }
}

/// A [`Tensor::Present`] fiber read at a shifted index becomes a [`Tensor::Switch`] on its
/// condition, which the statement resolves with an `if`: only a loop over the fiber's own
/// level (a concordized read at a bound index among them), or its leaf, takes the
/// condition in. A Dense level, or a level whose fill is the tensor's (`takes`), takes
/// it in when shifted too (`unfurl_all`): only a fill of `missing` (a shifted read of a
/// Dense parent outside it) over a sparse level is branched on.
pub(super) fn present_read_shifted(
    s: Stmt,
    takes: &dyn Fn(&crate::looplets::Fiber, Value) -> bool,
) -> Result<Stmt> {
    map_exprs(s, &mut |e| {
        map_accesses(e, &mut |t, idx| match t {
            Tensor::Present { cond, fiber, fill }
                if matches!(idx.last(), Some(Expr::Wrapped { .. })) && !takes(&fiber, fill) =>
            {
                Ok(Expr::Access(
                    Box::new(Tensor::Switch {
                        pre: vec![],
                        cond,
                        then: Box::new(Tensor::Fiber(fiber)),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }),
                    idx,
                ))
            }
            t => Ok(Expr::Access(Box::new(t), idx)),
        })
    })
}

/// A child of a level's looplet with the fiber the level lacks (its fill) replaced by an
/// empty fiber of the level below, which keeps that level's bounds
/// (`Lowerer::absent_fibers_keep_bounds`); also in either branch of a search's hit or
/// miss (`follow`), where the miss is the fill.
pub(super) fn empty_keeps_bounds(t: Tensor, fill: Value, below: &crate::looplets::Fiber) -> Tensor {
    match t {
        Tensor::FillLeaf(v) if v == fill => Tensor::Present {
            cond: KExpr::Lit(Value::Bool(false)),
            fiber: below.clone(),
            fill: v,
        },
        Tensor::Switch {
            pre,
            cond,
            then,
            otherwise,
        } => Tensor::Switch {
            pre,
            cond,
            then: Box::new(empty_keeps_bounds(*then, fill, below)),
            otherwise: Box::new(empty_keeps_bounds(*otherwise, fill, below)),
        },
        t => t,
    }
}

/// Adds to `out` the reads (tensor, printed indices) of `e` at a shifted index where a
/// read outside the tensor is told apart from its fill: permissive reads other than
/// `coalesce(x[~(..)], fill)`, and unchecked ones (out of range). Only those need a fiber
/// a level lacks to keep its bounds (`Lowerer::absent_fibers_keep_bounds`).
pub(super) fn reads_out_of_bounds_apart(
    e: &Expr,
    fill_of: &dyn Fn(usize) -> Value,
    out: &mut Vec<(usize, String)>,
) {
    let tensor_of = |t: &Tensor| match t {
        Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } => Some(f.tensor),
        _ => None,
    };
    match e {
        Expr::Call(Op::Coalesce, args) => {
            if let (Some(Expr::Access(t, idx)), [Expr::Lit(pad)]) = (args.first(), &args[1..]) {
                if let Some(k) = tensor_of(t) {
                    // An unchecked read outside stops the kernel whatever the pad.
                    let unchecked = idx.iter().any(|i| may_fall_outside(i) && !is_permissive(i));
                    if *pad != fill_of(k) || unchecked {
                        out.push((k, read_key(idx)));
                    }
                    for i in idx.iter() {
                        reads_out_of_bounds_apart(i, fill_of, out);
                    }
                    return;
                }
            }
            for a in args {
                reads_out_of_bounds_apart(a, fill_of, out);
            }
        }
        Expr::Access(t, idx) => {
            if let Some(k) = tensor_of(t) {
                if idx.iter().any(may_fall_outside) {
                    out.push((k, read_key(idx)));
                }
            }
            for i in idx.iter() {
                reads_out_of_bounds_apart(i, fill_of, out);
            }
        }
        Expr::Call(_, args) => {
            for a in args {
                reads_out_of_bounds_apart(a, fill_of, out);
            }
        }
        Expr::Permissive(x, g) => {
            reads_out_of_bounds_apart(x, fill_of, out);
            if let Some(g) = g {
                reads_out_of_bounds_apart(g, fill_of, out);
            }
        }
        _ => {}
    }
}

/// How [`reads_out_of_bounds_apart`] names a read's indices: printed, with the reads
/// inside them (`I[i]` in `x[~I[i], i]`) as a placeholder, since the lowering unfurls
/// those first and the read must still be found by the name it had before. Two reads
/// named alike both keep their fibers' bounds, which only costs code.
pub(super) fn read_key(idx: &[Expr]) -> String {
    let erased: Vec<Expr> = idx
        .iter()
        .map(|x| {
            map_accesses(x.clone(), &mut |_, _| Ok(Expr::Index("_read".into())))
                .unwrap_or_else(|_| x.clone())
        })
        .collect();
    format!("{erased:?}")
}

/// Is `i` a shifted index that may fall outside its mode, reading `missing` there
/// (permissive) or stopping the kernel (unchecked)? A permissive computed index counts:
/// a shifted index of an enclosing loop becomes one once that loop binds it.
pub(super) fn may_fall_outside(i: &Expr) -> bool {
    is_permissive(i)
        || matches!(
            i,
            Expr::Wrapped {
                in_bounds: false,
                ..
            }
        )
}

pub(super) fn is_permissive(i: &Expr) -> bool {
    matches!(
        i,
        Expr::Wrapped {
            permissive: true,
            ..
        } | Expr::Permissive(..)
    )
}

/// The tensor of the first read of [`Tensor::OutOfRange`] in `e`, if any.
pub(super) fn out_of_range_read(e: &Expr) -> Option<usize> {
    match e {
        Expr::Access(t, idx) => match &**t {
            Tensor::OutOfRange(k) => Some(*k),
            _ => idx.iter().find_map(out_of_range_read),
        },
        Expr::Call(_, args) => args.iter().find_map(out_of_range_read),
        _ => None,
    }
}

pub(super) fn last_is(idx: &[Expr], index: &str) -> bool {
    matches!(idx.last(), Some(Expr::Index(i)) if i == index)
}

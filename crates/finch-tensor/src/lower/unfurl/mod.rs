//! Unfurling: a level's looplet nest for its dimension (finch-language-and-levels.md §4).
//! Positions are 0-based, indices 1-based (stored `idx` values are 0-based, so the index
//! of entry `q` is `idx[q] + 1`).
//!
//! * Dense (read and update): `Lookup(i -> child((p)·shape + i - 1))`.
//! * SparseList (read, walk): `Thunk(q = ptr[p]; q_stop = ptr[p+1]; i_last = idx[q_stop-1]+1
//!   or 0) -> Sequence(Phase(stop = i_last, Stepper(seek: scansearch; preamble: i = idx[q]+1;
//!   stop = i; chunk = Spike(FillLeaf(fill), child(q)); next: q += 1)), Phase(Run(FillLeaf(fill))))`.
//! * The structured levels (`unfurl_structured`), SparseCOO modes and the written levels
//!   (each level's `lowering`) follow the same pattern.
//!
//! Here: the generic unfurling (fibers never present, reads where a condition holds),
//! the dispatch from a fiber's level parameters to its level's looplets
//! (`dispatch.rs`, the registry), and the scaffolds
//! levels share (the sorted-list walk, the segment walk's `StructuredFiber`, the search
//! into runs and blocks, claim state and leaves of written levels). Each level's own
//! looplets, read and written, are in its module's `lowering` (`formats/<level>.rs`).

use std::rc::Rc;

use super::convert::{LeafParams, LevelParams};
use super::Lowerer;
use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::LevelKind;
use crate::kernel::{KExpr, KStmt};
use crate::looplets::{Counted, Fiber, Looplet, Stepper, Tensor};

mod dispatch;
mod sorted;
mod structured;

use dispatch::WhereRead;

pub(crate) use sorted::{fiber_bounds, seek_on};

pub(crate) use structured::{minus1, plus1, within, StructuredFiber};

impl Lowerer {
    /// The leaf parameters of fiber `f`'s level, if it is a leaf.
    pub(crate) fn leaf_of(&self, f: &Fiber) -> Option<LeafParams> {
        self.tensors[f.tensor]
            .levels
            .get(f.depth)
            .and_then(LevelParams::as_leaf)
    }

    /// The fill value of a tensor's leaf.
    pub(crate) fn fill_of(&self, t: usize) -> Value {
        self.tensors[t].format.fill_value()
    }

    /// The looplet nest of fiber `f` where `cond` holds, `fill` everywhere where it does
    /// not ([`Tensor::Present`]): a Dense level hands the condition down to its children; a
    /// SparseList or a walked structured level has no entries where it fails (a RunList
    /// one run of fill; its fiber's bounds are read only where it holds); a searched
    /// structured level searches only where it holds; any other level is one `Switch` on
    /// it. Only a Dense level takes in a `fill` other than the tensor's own (`missing`
    /// outside a shifted read of a Dense parent): the others' missing entries read as
    /// theirs.
    pub(super) fn unfurl_present(
        &mut self,
        f: &Fiber,
        cond: &KExpr,
        fill: Value,
    ) -> Result<Looplet> {
        if *cond == KExpr::Lit(Value::Bool(false)) {
            // A fiber that is never present (a level's missing fiber keeping its bounds,
            // `absent_fibers_keep_bounds`) is its fill at every index, and so is each of
            // its subfibers, still never present: walking its level would copy the
            // statement into every phase of a walk over nothing.
            let below = Tensor::Present {
                cond: cond.clone(),
                fiber: Fiber {
                    depth: f.depth + 1,
                    pos: KExpr::int(0),
                    end: None,
                    ..f.clone()
                },
                fill,
            };
            return Ok(Looplet::Run(Box::new(below)));
        }
        let level = self.tensors[f.tensor].levels.get(f.depth).cloned();
        // (Only a Dense level takes in another fill; see above.)
        let dense = level.as_ref().is_some_and(LevelParams::is_dense);
        let level = level.filter(|_| dense || fill == self.fill_of(f.tensor));
        let Some(level) = level else {
            return self.switch_present(f, cond, fill);
        };
        match dispatch::where_read(&level, f) {
            WhereRead::Dense(shape) => {
                let Looplet::Lookup(child) = dense_lookup(f, shape) else {
                    return Err(Error::Program("internal: a Dense level's lookup".into()));
                };
                let cond = cond.clone();
                Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    present_where(child(i), &cond, fill)
                })))
            }
            WhereRead::Itself => dispatch::unfurl_level(self, f, level, Some(cond)),
            WhereRead::Searched => {
                // Each search runs, and its hit counts, only where `cond` holds.
                let Looplet::Lookup(search) = self.unfurl(f)? else {
                    return Err(Error::Program("internal: a search is a lookup".into()));
                };
                let cond = cond.clone();
                Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    present_where(search(i), &cond, fill)
                })))
            }
            WhereRead::Switch => self.switch_present(f, cond, fill),
        }
    }

    /// One `Switch`: fiber `f` unfurled where `cond` holds, `fill` where it does not.
    fn switch_present(&mut self, f: &Fiber, cond: &KExpr, fill: Value) -> Result<Looplet> {
        Ok(Looplet::Switch(vec![
            (cond.clone(), self.unfurl(f)?),
            (
                KExpr::Lit(Value::Bool(true)),
                Looplet::Run(Box::new(Tensor::FillLeaf(fill))),
            ),
        ]))
    }

    /// The looplet nest of fiber `f` for the dimension of its level.
    pub(super) fn unfurl(&mut self, f: &Fiber) -> Result<Looplet> {
        let info = &self.tensors[f.tensor];
        let name = info.name.clone();
        let level = info.levels.get(f.depth).cloned().ok_or_else(|| {
            Error::Program(format!("internal: `{name}` has no level {}", f.depth + 1))
        })?;
        let (t, depth) = (f.tensor, f.depth + 1);
        let level = self.own_claim_state(level, t, depth);
        dispatch::unfurl_level(self, f, level, None)
    }

    /// Written level `level` (at `depth`, 1-based) of tensor `t` with a claim flag of its
    /// own, and for a hash table an entry local of its own, where the access is nested in
    /// the statements of an index another access of the level writes (`y[~(i + 2)] = v`
    /// beside `y[i] = x[i]`): sharing them, the inner write would find the outer index
    /// claimed and write its entry, and its record would take the outer index's flag.
    fn own_claim_state(&mut self, mut level: LevelParams, t: usize, depth: usize) -> LevelParams {
        // (Read levels and leaves claim nothing.)
        let Some((dirty, at)) = level.claim_state_mut() else {
            return level;
        };
        if self.open_claims.contains(dirty) {
            let name = format!("{}_lvl{depth}_dirty", self.tensors[t].name);
            *dirty = self.kernel.local(name, ScalarType::Bool);
            if let Some(at) = at {
                *at = self.level_local(t, depth, "at");
            }
        }
        level
    }

    /// The value buffer of the Element leaf (at `depth`) under a written sparse level, and
    /// the value a claimed position starts from: the declared initial value in the element
    /// type (checked equal to the fill when the program was converted).
    pub(crate) fn written_leaf(
        &self,
        t: usize,
        depth: usize,
        level: &str,
    ) -> Result<(crate::kernel::BufId, Value)> {
        let Some(LevelParams::Element { val, .. }) = self.tensors[t].levels.get(depth) else {
            return Err(Error::Program(format!(
                "internal: `{}` has no leaf under its {level} level",
                self.tensors[t].name
            )));
        };
        let fill = self.fill_of(t);
        let init = self.tensors[t]
            .init
            .and_then(|v| v.convert_exact(fill.scalar_type().unwrap_or(ScalarType::F64)))
            .unwrap_or(fill);
        Ok((*val, init))
    }

    /// [`Self::written_leaf`], or `None` for a Pattern leaf, which stores no values (writing
    /// `true` claims the index).
    pub(crate) fn written_values(
        &self,
        t: usize,
        depth: usize,
        level: &str,
    ) -> Result<Option<(crate::kernel::BufId, Value)>> {
        match self.tensors[t]
            .levels
            .get(depth)
            .and_then(LevelParams::as_leaf)
        {
            Some(LeafParams::Pattern) => Ok(None),
            Some(LeafParams::Element { .. }) | None => self.written_leaf(t, depth, level).map(Some),
        }
    }

    /// Levels written in order cannot be read back in the same kernel.
    pub(crate) fn written_only(&self, f: &Fiber, name: &str) -> Result<()> {
        if !f.protocols.is_written() {
            return Err(Error::Unsupported(format!(
                "reading the output `{name}` in the kernel that writes it"
            )));
        }
        Ok(())
    }

    /// Rejects a read protocol the level does not support, naming both.
    fn check_protocols(&self, f: &Fiber, kind: LevelKind) -> Result<()> {
        let follow = f.protocols.follows(f.depth);
        let gallop = f.protocols.gallops(f.depth);
        let can = kind.capabilities();
        let asked = match (follow && !can.follow, gallop && !can.gallop) {
            (true, _) => "follow",
            (_, true) => "gallop",
            _ => return Ok(()),
        };
        let supported = can.protocols();
        Err(Error::Unsupported(format!(
            "the {} level of `{}` (mode {}) does not support the {asked} protocol; it supports {}",
            kind.name(),
            self.tensors[f.tensor].name,
            self.tensors[f.tensor].format.ndims() - f.depth,
            supported.join(", ")
        )))
    }

    /// A fresh `i64` local named after the level.
    pub(crate) fn level_local(
        &mut self,
        t: usize,
        depth: usize,
        what: &str,
    ) -> crate::kernel::LocalId {
        let name = format!("{}_lvl{depth}_{what}", self.tensors[t].name);
        self.kernel.local(name, ScalarType::I64)
    }
}

/// `code` where `present` holds (if given), `otherwise` where it does not.
pub(crate) fn where_present(
    present: Option<&KExpr>,
    code: Vec<KStmt>,
    otherwise: Vec<KStmt>,
) -> Vec<KStmt> {
    match present {
        Some(cond) => vec![KStmt::If {
            cond: cond.clone(),
            then: code,
            otherwise,
        }],
        None => code,
    }
}

/// Sets each of `xs` to 0 (the bounds of a fiber with no entries).
pub(crate) fn zeros(xs: &[crate::kernel::LocalId]) -> Vec<KStmt> {
    xs.iter()
        .map(|x| KStmt::Assign(*x, KExpr::int(0)))
        .collect()
}

/// Element `t` of a level read where `present` holds, `fill` where it does not: a subfiber
/// becomes a [`Tensor::Present`]; a search's result (a [`Tensor::Switch`] on a hit) runs
/// its search, and counts its hit, only where `present` holds; anything else not the fill
/// is a Switch on `present`.
pub(super) fn present_where(t: Tensor, present: &KExpr, fill: Value) -> Tensor {
    match t {
        Tensor::Switch {
            pre,
            cond,
            then,
            otherwise,
        } => Tensor::Switch {
            pre: match pre.is_empty() {
                true => pre,
                false => vec![KStmt::If {
                    cond: present.clone(),
                    then: pre,
                    otherwise: vec![],
                }],
            },
            cond: KExpr::Op(
                Op::IfElse,
                vec![present.clone(), cond, KExpr::Lit(Value::Bool(false))],
            ),
            then,
            otherwise,
        },
        Tensor::Fiber(fiber) => Tensor::Present {
            cond: present.clone(),
            fiber,
            fill,
        },
        // Present where both hold (a shifted read of a Dense level, itself read where a
        // shifted read of its parent is inside the parent's level).
        Tensor::Present {
            cond,
            fiber,
            fill: inner,
        } if inner == fill => Tensor::Present {
            cond: KExpr::Op(Op::And, vec![present.clone(), cond]),
            fiber,
            fill,
        },
        Tensor::FillLeaf(v) if v == fill => Tensor::FillLeaf(v),
        other => Tensor::Switch {
            pre: vec![],
            cond: present.clone(),
            then: Box::new(other),
            otherwise: Box::new(Tensor::FillLeaf(fill)),
        },
    }
}

/// `pos·shape + i - 1`: the child position of index `i` of fiber `pos` when every index
/// has one (Dense levels, and the modes above the last of written SparseCOO and
/// SparseHash levels).
pub(crate) fn linear_position(
    pos: KExpr,
    shape: crate::kernel::LocalId,
) -> impl Fn(KExpr) -> KExpr {
    move |i: KExpr| pos.clone() * KExpr::Local(shape) + (i - 1)
}

/// `Lookup(i -> child(pos·shape + i - 1))`: the looplet of a Dense level of fiber `f`.
pub(crate) fn dense_lookup(f: &Fiber, shape: crate::kernel::LocalId) -> Looplet {
    let (tensor, depth, protocols) = (f.tensor, f.depth + 1, f.protocols);
    let linear = linear_position(f.pos.clone(), shape);
    Looplet::Lookup(Rc::new(move |i: KExpr| {
        Tensor::Fiber(Fiber {
            tensor,
            depth,
            pos: linear(i),
            end: None,
            hollow: None,
            protocols,
        })
    }))
}

/// A stepper over a level's entries, or a jumper when the access asks to gallop.
pub(crate) fn walker(stepper: Stepper, gallop: bool) -> Looplet {
    if gallop {
        Looplet::Jumper(Rc::new(stepper))
    } else {
        Looplet::Stepper(Rc::new(stepper))
    }
}

/// A stepper's seek: code that moves it to the child holding a start index.
pub(crate) type SeekCode = Box<dyn Fn(KExpr) -> Vec<KStmt>>;

/// Maps a list entry's position to its child position.
pub(crate) type ChildOf = Rc<dyn Fn(KExpr) -> KExpr>;

/// A sorted per-fiber list: `ptr` over `idx`, children by `child_of(q)`.
pub(crate) struct SortedList {
    pub(crate) entries: Entries,
    pub(crate) idx: crate::kernel::BufId,
    pub(crate) child_of: ChildOf,
    /// The level's size: every stored index is below it (the level's invariants).
    pub(crate) shape: crate::kernel::LocalId,
    /// For a SparseCOO mode above its last: entries with equal indices (nondecreasing
    /// here) form one child, the run `q .. r` handed down as a fiber with an `end`.
    pub(crate) runs: bool,
}

/// Where a sorted list's entries for fiber `pos` lie.
pub(crate) enum Entries {
    /// `ptr[pos] .. ptr[pos+1]`.
    Fiber(crate::kernel::BufId),
    /// `pos .. end` (a SparseCOO mode below its first; a hash group read back).
    Until(KExpr),
    /// `ptr[pos] .. ptr[pos+1]` where the condition holds, none where it does not (a
    /// [`Tensor::Present`] fiber).
    FiberWhere(crate::kernel::BufId, KExpr),
}

impl Entries {
    /// `ptr[pos] .. ptr[pos+1]`, where `present` holds if given.
    pub(crate) fn of_fiber(ptr: crate::kernel::BufId, present: Option<&KExpr>) -> Entries {
        match present {
            Some(cond) => Entries::FiberWhere(ptr, cond.clone()),
            None => Entries::Fiber(ptr),
        }
    }
}

/// Grows a buffer (doubling, at least to `need`) when `need` exceeds its length; new
/// elements are `fill`.
pub(crate) fn grow_to(buf: crate::kernel::BufId, need: KExpr, fill: Value) -> KStmt {
    KStmt::If {
        cond: KExpr::bin(Op::Gt, need.clone(), KExpr::Len(buf)),
        then: vec![KStmt::Resize {
            buf,
            len: KExpr::Op(Op::Max, vec![KExpr::Len(buf) * 2, need]),
            fill,
        }],
        otherwise: vec![],
    }
}

/// Whether `value` is not the fill `fill`, as the reference decides what to store
/// ([`Value::same`]: `-0.0` is the fill `0.0`, and `NaN` the fill `NaN`).
pub(crate) fn not_fill(value: KExpr, fill: Value) -> KExpr {
    if fill.as_f64().is_some_and(f64::is_nan) {
        KExpr::bin(Op::Eq, value.clone(), value)
    } else {
        KExpr::bin(Op::Ne, value, KExpr::Lit(fill))
    }
}

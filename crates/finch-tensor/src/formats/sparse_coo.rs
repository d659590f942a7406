//! `SparseCOO{N}(child)`: one level spanning `N` modes, storing coordinate tuples.
//!
//! Buffers: `ptr` (length `P + 1`) and `tbl[0..N]`, where `tbl[k][q]` is the coordinate
//! of the level's `k`-th mode counted **innermost first**, so `tbl[N-1]` is the outermost
//! (most significant) mode. Fiber `p` holds tuples `q in ptr[p] .. ptr[p+1]`, child
//! position `q`. Invariants:
//! * **I1**–**I4** as SparseList (`ptr` over the tuples)
//! * **I5** `len(tbl) == N` and every `tbl[k]` has `ptr[P]` entries
//! * **I6** `tbl[k][q] < shape[k]`
//! * **I7** tuples strictly increasing within a fiber, `tbl[N-1]` most significant
//!
//! Properties: ordered, unique, compact. Protocols (compiler): read walk, gallop, follow;
//! update extrude.

use super::format::Capabilities;
use super::level::LevelStorage;
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;
use crate::tensor::fmt_shape;

/// What the level can do (sorted tuples: searched or galloped; appended in order).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: false,
    accept_run: false,
};

/// Storage of a SparseCOO{N} level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseCooStorage {
    /// Sizes of the level's modes, innermost first.
    pub shape: Vec<usize>,
    /// Fiber boundaries into the tuples.
    pub ptr: Vec<usize>,
    /// Coordinates per mode, innermost first: `tbl[k][q]`.
    pub tbl: Vec<Vec<usize>>,
    /// The child level (one position per tuple).
    pub child: Box<LevelStorage>,
}

impl SparseCooStorage {
    /// Number of tuples stored.
    pub fn len(&self) -> usize {
        self.tbl.first().map_or(0, Vec::len)
    }

    /// True when no tuple is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tuple at `q`, outermost mode first (the sort key).
    pub fn key(&self, q: usize) -> Vec<usize> {
        self.tbl.iter().rev().map(|t| t[q]).collect()
    }

    /// The stored tuples of fiber `p` as (the tuple, outermost mode first, child
    /// position).
    pub fn tuples(&self, p: usize) -> Vec<(Vec<usize>, usize)> {
        (self.ptr[p]..self.ptr[p + 1])
            .map(|q| (self.key(q), q))
            .collect()
    }

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseCOO",
            invariant,
            detail,
        };
        let n = self.shape.len();
        if self.tbl.len() != n || n == 0 {
            return Err(bad(
                "I5 one coordinate list per mode",
                format!("{} coordinate lists for {n} modes", self.tbl.len()),
            ));
        }
        let entries = self.len();
        if let Some(k) = self.tbl.iter().position(|t| t.len() != entries) {
            return Err(bad(
                "I5 one coordinate list per mode",
                format!(
                    "tbl[{k}] has {} entries, tbl[0] has {entries}",
                    self.tbl[k].len()
                ),
            ));
        }
        validate_ptr(depth, "SparseCOO", &self.ptr, parents, entries)?;
        for (k, t) in self.tbl.iter().enumerate() {
            if let Some(q) = t.iter().position(|&i| i >= self.shape[k]) {
                return Err(bad(
                    "I6 coordinates < shape",
                    format!("tbl[{k}][{q}] = {} with shape {}", t[q], self.shape[k]),
                ));
            }
        }
        for p in 0..parents {
            for q in self.ptr[p]..self.ptr[p + 1].saturating_sub(1) {
                if self.key(q) >= self.key(q + 1) {
                    return Err(bad(
                        "I7 tuples strictly increasing within a fiber",
                        format!(
                            "fiber {p}: tuple {q} {:?} then {:?} (outermost first)",
                            self.key(q),
                            self.key(q + 1)
                        ),
                    ));
                }
            }
        }
        Ok(entries)
    }

    /// The child position of a tuple (outermost first) in fiber `p`, if stored.
    pub fn locate(&self, p: usize, key: &[usize]) -> Option<usize> {
        let (mut lo, mut hi) = (self.ptr[p], self.ptr[p + 1]);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).as_slice().cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(n: usize, at: &BuildAt) -> Result<LevelStorage> {
    let BuildAt {
        child,
        dims,
        m,
        e,
        groups,
        ..
    } = *at;
    let mut child_groups = Vec::new();
    let mut ptr = Vec::with_capacity(groups.len() + 1);
    let mut tbl = vec![Vec::new(); n];
    ptr.push(0);
    let same = |a: usize, b: usize| (m..m + n).all(|r| e.key(a, r) == e.key(b, r));
    for &(lo, hi) in groups {
        let mut k = lo;
        while k < hi {
            let start = k;
            while k < hi && same(start, k) {
                k += 1;
            }
            // tbl is innermost first; the key is outermost first.
            for (r, t) in tbl.iter_mut().enumerate() {
                t.push(e.key(start, m + n - 1 - r));
            }
            child_groups.push((start, k));
        }
        ptr.push(tbl[0].len());
    }
    let c = build_level(child, &dims[n..], m + n, e, &child_groups)?;
    Ok(LevelStorage::SparseCoo(SparseCooStorage {
        shape: dims[..n].iter().rev().copied().collect(),
        ptr,
        tbl,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(modes: usize, at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    // The kernel recorded each entry's linear position over the modes
    // from the root down to the level's last (outermost most significant):
    // the level's own modes are its last `modes` digits.
    let shape = at.shape;
    let split = shape
        .len()
        .checked_sub(modes)
        .ok_or_else(|| Error::Program(format!("internal: shape {}", fmt_shape(shape))))?;
    let (rest, own) = shape.split_at(split);
    let OutBufs { val, ptr, idx, .. } = bufs;
    let mut tbl = vec![Vec::with_capacity(idx.len()); modes];
    for mut lin in idx {
        for (k, &n) in own.iter().enumerate() {
            tbl[k].push(lin % n.max(1));
            lin /= n.max(1);
        }
    }
    Ok(LevelStorage::SparseCoo(super::SparseCooStorage {
        shape: own.to_vec(),
        ptr,
        tbl,
        child: Box::new(super::output::assemble(
            at.child,
            rest,
            OutBufs::values(val),
        )?),
    }))
}

/// Freezes a SparseCOO output written in order (`engine::freeze`): its entries are a
/// list, frozen as one ([`super::output::freeze_list`]).
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::output::freeze_list(bufs, at);
    Ok(())
}

impl registry::StoredLevel for SparseCooStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseCoo(self.shape.len())
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// Tuples span several modes: see [`registry::StoredLevel::fiber`].
    fn children(&self, _: usize) -> Option<Vec<(usize, usize, usize)>> {
        None
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseCooStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        let mut v = vec![registry::KernelBuf::Indices(&self.ptr)];
        v.extend(self.tbl.iter().map(|t| registry::KernelBuf::Indices(t)));
        v
    }

    fn positions(&self, parents: usize) -> usize {
        self.ptr.get(parents).copied().unwrap_or(0)
    }

    fn fiber(&self, p: usize) -> Vec<registry::FiberChild> {
        self.tuples(p)
            .into_iter()
            .map(|(key, q)| (key.into_iter().map(|i| (i, i)).collect(), q))
            .collect()
    }

    fn get(&self, p: usize, coords: &[usize]) -> Option<registry::Value> {
        let n = self.shape.len();
        if coords.len() < n {
            return None;
        }
        self.child.get(self.locate(p, &coords[..n])?, &coords[n..])
    }

    fn walk(
        &self,
        p: usize,
        prefix: &mut Vec<usize>,
        f: &mut dyn FnMut(&[usize], registry::Value),
    ) {
        for q in self.ptr[p]..self.ptr[p + 1] {
            let key = self.key(q);
            prefix.extend_from_slice(&key);
            self.child.walk(q, prefix, f);
            prefix.truncate(prefix.len() - key.len());
        }
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseCoo;

impl registry::Level for SparseCoo {
    fn name(&self) -> &'static str {
        "SparseCOO"
    }

    fn capabilities(&self) -> registry::Capabilities {
        CAPABILITIES
    }

    fn mode_count_param(&self, kind: registry::LevelKind) -> Option<usize> {
        if let registry::LevelKind::SparseCoo(modes) = kind {
            Some(modes)
        } else {
            None
        }
    }

    fn with_modes(&self, _: registry::LevelKind, modes: usize) -> Option<registry::LevelKind> {
        Some(registry::LevelKind::SparseCoo(modes))
    }

    fn build(&self, kind: registry::LevelKind, at: &registry::BuildAt) -> Result<LevelStorage> {
        build(kind.modes(), at)
    }

    fn assemble_output(
        &self,
        kind: registry::LevelKind,
        at: &registry::OutputAt,
        bufs: registry::OutBufs,
    ) -> Result<LevelStorage> {
        from_output(kind.modes(), at, bufs)
    }

    fn read_params(
        &self,
        kind: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        _: registry::IndexWidth,
    ) -> Vec<registry::LevelParams> {
        lowering::read_params(kernel, at, kind.modes())
    }

    fn written_params(
        &self,
        kind: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        child: &registry::LevelFormat,
    ) -> Option<Vec<registry::LevelParams>> {
        lowering::written_in_order(kernel, at, child, kind.modes())
    }

    fn freeze_output(&self, bufs: &mut registry::OutBufs, at: &registry::FreezeAt) -> Result<()> {
        freeze_output(bufs, at)
    }
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub mod lowering {
    use crate::lower::kit::*;

    /// How a kernel writes the level: in order; the leaf grows with the entries; it
    /// records the indices a Pattern leaf is written at. (Levels the run time builds from
    /// recorded entries are written this way too.)
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        child_grows: true,
        records_pattern: true,
        ..WriteTraits::READ_ONLY
    };

    /// Mode `mode` (of `modes`) of a SparseCOO level read by the kernel: sorted tuples
    /// walked like a SparseList, the first mode over fiber `ptr[p] .. ptr[p+1]` (where
    /// `present` holds, if given), each further mode over the run of tuples its parent
    /// mode hands down (sharing the outer coordinates). `tbl` holds the coordinates,
    /// innermost mode first, as stored.
    pub(crate) fn unfurl_read(
        lw: &mut Lowerer,
        f: &Fiber,
        (shape, ptr, tbl): (LocalId, BufId, &[BufId]),
        [mode, modes]: [usize; 2],
        present: Option<&KExpr>,
    ) -> Result<Looplet> {
        let name = &lw.tensors[f.tensor].name;
        let idx = tbl.get(modes - 1 - mode).copied().ok_or_else(|| {
            Error::Program(format!(
                "internal: `{name}` has no coordinates for mode {mode}"
            ))
        })?;
        let entries = match (mode, &f.end) {
            (0, _) => Entries::of_fiber(ptr, present),
            (_, Some(end)) => Entries::Until(end.clone()),
            (_, None) => {
                return Err(Error::Program(format!(
                "internal: mode {} of `{name}`'s SparseCOO level reached without its run of tuples",
                mode + 1
            )))
            }
        };
        let list = SortedList {
            entries,
            idx,
            child_of: Rc::new(|q| q),
            shape,
            runs: mode + 1 < modes,
        };
        Ok(lw.sorted_read(f, list))
    }

    /// One mode of a SparseCOO{N} level of an output, written in order (extrude): the
    /// modes above the last pass a linear position down (as Dense levels do), and the last
    /// records each written entry's linear position in `idx`, which the run time splits
    /// into coordinates at freeze. Mode 0 counts the fiber's entries into `ptr`.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of this mode.
        pub shape: LocalId,
        /// Per-fiber counts (`P + 1` entries, prefix-summed after the kernel).
        pub ptr: BufId,
        /// Linear positions of the written entries (over every mode down to this level),
        /// growable.
        pub idx: BufId,
        /// The next free position.
        pub qos: LocalId,
        /// Whether the current index was written.
        pub dirty: LocalId,
        /// Which mode of the level, 0 = outermost.
        pub mode: usize,
        /// How many modes the level spans.
        pub modes: usize,
        /// The modes are not one SparseCOO level but every level from a sparse one down to
        /// the leaf, of a format the kernel does not assemble itself (a SparseList above
        /// another level, ...): the run time builds those levels from the recorded entries.
        pub rebuilt: bool,
    }

    impl WrittenLevel for OutParams {
        fn clone_box(&self) -> Box<dyn WrittenLevel> {
            Box::new(self.clone())
        }

        fn write_traits(&self) -> WriteTraits {
            WRITE_TRAITS
        }

        fn shape(&self) -> LocalId {
            self.shape
        }

        fn claim_state_mut(&mut self) -> (&mut LocalId, Option<&mut LocalId>) {
            (&mut self.dirty, None)
        }

        fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
            if self.mode == 0 {
                vec![(self.ptr, OutArray::Ptr), (self.idx, OutArray::Idx)]
            } else {
                vec![]
            }
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            let name = lw.tensors[f.tensor].name.clone();
            lw.written_only(f, &name)?;
            crate::formats::sparse_list::lowering::unfurl_list_out(
                lw,
                f,
                self.shape,
                [self.ptr, self.idx],
                [self.qos, self.dirty],
                Some((self.mode, self.modes)),
            )
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseCoo(self.modes))
        }

        fn recorded_modes(&self) -> Option<(usize, bool)> {
            Some((self.modes, false))
        }

        fn rebuilt_from_entries(&self) -> bool {
            self.rebuilt
        }
    }

    /// The levels of a written group recorded as entries (a SparseCOO level, or levels the run
    /// time builds), one per mode, sharing their buffers and cursor.
    pub(crate) fn recorded_params(
        kernel: &mut Kernel,
        at: &LevelAt,
        shapes: &[LocalId],
        rebuilt: bool,
    ) -> Vec<LevelParams> {
        let (name, depth) = (at.name, at.depth);
        let ptr = kernel.buf(
            format!("{name}_lvl{depth}_ptr"),
            ScalarType::I64,
            true,
            false,
        );
        let idx = kernel.buf(
            format!("{name}_lvl{depth}_idx"),
            ScalarType::I64,
            true,
            true,
        );
        let qos = kernel.local(format!("{name}_lvl{depth}_qos"), ScalarType::I64);
        let dirty = kernel.local(format!("{name}_lvl{depth}_dirty"), ScalarType::Bool);
        let modes = shapes.len();
        shapes
            .iter()
            .enumerate()
            .map(|(mode, &shape)| {
                LevelParams::written(OutParams {
                    shape,
                    ptr,
                    idx,
                    qos,
                    dirty,
                    mode,
                    modes,
                    rebuilt,
                })
            })
            .collect()
    }

    /// The kernel parameters of a SparseCOO level of `modes` modes read by a kernel: one
    /// per mode, sharing the level's buffers.
    pub(crate) fn read_params(kernel: &mut Kernel, at: &LevelAt, modes: usize) -> Vec<LevelParams> {
        let shapes = mode_shapes(kernel, at.name, at.depth, at.shape, modes);
        let ptr = kernel.buf(at.named("ptr"), ScalarType::I64, false, false);
        let tbl: Vec<BufId> = (0..modes)
            .map(|k| {
                kernel.buf(
                    at.named(&format!("tbl{}", k + 1)),
                    ScalarType::I64,
                    false,
                    false,
                )
            })
            .collect();
        shapes
            .iter()
            .enumerate()
            .map(|(mode, &shape)| {
                LevelParams::read(ReadParams {
                    shape,
                    ptr,
                    tbl: tbl.clone(),
                    mode,
                    modes,
                })
            })
            .collect()
    }

    /// One mode of a SparseCOO{N} level read by a kernel: the level has `modes` entries in
    /// the tensor's levels, outermost mode (`mode == 0`) first, sharing `ptr` and `tbl`.
    /// Mode 0 walks fiber `p`'s tuples `ptr[p] .. ptr[p+1]`; each further mode walks the
    /// run of tuples its parent mode hands down (the fiber's `end`).
    #[derive(Clone, Debug)]
    pub(crate) struct ReadParams {
        /// Size of this mode.
        shape: LocalId,
        /// Fiber boundaries into the tuples.
        ptr: BufId,
        /// Coordinates per mode (0-based), innermost mode first, as stored.
        tbl: Vec<BufId>,
        /// Which mode of the level, 0 = outermost.
        mode: usize,
        /// How many modes the level spans.
        modes: usize,
    }

    impl ReadLevel for ReadParams {
        fn clone_box(&self) -> Box<dyn ReadLevel> {
            Box::new(self.clone())
        }

        fn shape(&self) -> LocalId {
            self.shape
        }

        /// The first mode binds the level's buffers; the next level's storage is the
        /// child's after the last mode only (the modes share the level's storage).
        fn read_buffers(&self) -> (Vec<BufId>, bool) {
            let bufs = if self.mode == 0 {
                std::iter::once(self.ptr)
                    .chain(self.tbl.iter().copied())
                    .collect()
            } else {
                vec![]
            };
            (bufs, self.mode + 1 == self.modes)
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, present: Option<&KExpr>) -> Result<Looplet> {
            unfurl_read(
                lw,
                f,
                (self.shape, self.ptr, &self.tbl),
                [self.mode, self.modes],
                present,
            )
        }

        /// The first mode walks the fiber's tuples where a condition holds.
        fn reads_itself_where(&self, _: bool) -> bool {
            self.mode == 0
        }

        fn read_group_mode(&self) -> Option<(usize, usize)> {
            Some((self.mode, self.modes))
        }
    }

    /// A SparseCOO level of `modes` modes written in order right above an Element or
    /// Pattern leaf: its entries recorded, one parameter set per mode; `None` over other
    /// levels (the run time builds those levels from recorded entries).
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
        modes: usize,
    ) -> Option<Vec<LevelParams>> {
        if !matches!(child, LevelFormat::Element(_) | LevelFormat::Pattern) {
            return None;
        }
        let shapes = mode_shapes(kernel, at.name, at.depth, at.shape, modes);
        Some(recorded_params(kernel, at, &shapes, false))
    }
}

//! `SparseHash(child)`: stored indices in any order of insertion, with child positions
//! assigned as entries arrive (Finch's SparseDict); frozen, each fiber's entries are
//! listed sorted so reads walk them in order.
//!
//! Buffers: `ptr` (length `P + 1`), `idx` (sorted indices per fiber) and `pos` (the child
//! position of each listed entry). Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over the entries
//! * **I5** `len(pos) == len(idx)` and `pos` is a permutation of `0 ..< len(idx)`
//! * **I6** `idx[q] < shape`, strictly increasing within a fiber
//!
//! Properties: ordered (when frozen), unique, not full, random access. Protocols: read
//! walk, gallop, follow.

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::registry::kit as registry;
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (read back sorted; written at any index through an in-kernel hash table).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: true,
    accept_run: false,
};

/// Storage of a SparseHash level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseHashStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into the sorted entries.
    pub ptr: Vec<usize>,
    /// Stored indices, sorted within each fiber.
    pub idx: Vec<usize>,
    /// Child position of each sorted entry.
    pub pos: Vec<usize>,
    /// The child level (one position per entry).
    pub child: Box<LevelStorage>,
}

impl SparseHashStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "idx", "pos"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseHash",
            invariant,
            detail,
        };
        let n = validate_ptr(depth, "SparseHash", &self.ptr, parents, self.idx.len())?;
        if self.pos.len() != n {
            return Err(bad(
                "I5 len(pos) == len(idx)",
                format!("len(pos) = {}, len(idx) = {n}", self.pos.len()),
            ));
        }
        let mut seen = vec![false; n];
        for (q, &c) in self.pos.iter().enumerate() {
            if c >= n || std::mem::replace(&mut seen[c], true) {
                return Err(bad(
                    "I5 pos is a permutation of the positions",
                    format!("pos[{q}] = {c} is out of range or repeated ({n} entries)"),
                ));
            }
        }
        if let Some(q) = self.idx.iter().position(|&i| i >= self.shape) {
            return Err(bad(
                "I6 idx < shape",
                format!("idx[{q}] = {} with shape {}", self.idx[q], self.shape),
            ));
        }
        for p in 0..parents {
            let seg = &self.idx[self.ptr[p]..self.ptr[p + 1]];
            if let Some(k) = seg.windows(2).position(|w| w[0] >= w[1]) {
                return Err(bad(
                    "I6 idx strictly increasing within a fiber",
                    format!("fiber {p}: {} then {}", seg[k], seg[k + 1]),
                ));
            }
        }
        Ok(n)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        (self.ptr[p]..self.ptr[p + 1])
            .map(|q| (self.idx[q], self.idx[q], self.pos[q]))
            .collect()
    }

    /// The child position of index `i` in fiber `p`, if stored.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        let (lo, hi) = (self.ptr[p], self.ptr[p + 1]);
        self.idx[lo..hi]
            .binary_search(&i)
            .ok()
            .map(|k| self.pos[lo + k])
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Indices(&self.idx),
            KernelBuf::Indices(&self.pos),
        ]
    }
}

impl registry::StoredLevel for SparseHashStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseHash
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseHashStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseHashStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseHashStorage::kernel_buffers(self)
    }

    /// Every stored entry, across fibers.
    fn positions(&self, _: usize) -> usize {
        self.idx.len()
    }

    fn get(&self, p: usize, coords: &[usize]) -> Option<registry::Value> {
        let q = SparseHashStorage::locate(self, p, *coords.first()?)?;
        self.child.get(q, &coords[1..])
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseHash;

impl registry::Level for SparseHash {
    fn name(&self) -> &'static str {
        "SparseHash"
    }

    fn capabilities(&self) -> registry::Capabilities {
        CAPABILITIES
    }

    fn build(&self, _: registry::LevelKind, at: &registry::BuildAt) -> Result<LevelStorage> {
        build(at)
    }

    /// Written SparseHash levels are recorded as entries and built when frozen
    /// (`engine::freeze`), never assembled from buffers.
    fn assemble_output(
        &self,
        _: registry::LevelKind,
        _: &registry::OutputAt,
        _: registry::OutBufs,
    ) -> Result<LevelStorage> {
        Err(Error::Program(
            "internal: a SparseHash output assembled from buffers".into(),
        ))
    }

    fn read_params(
        &self,
        kind: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        _: registry::IndexWidth,
    ) -> Vec<registry::LevelParams> {
        vec![crate::lower::kit::structured_read_params(
            kernel,
            at,
            kind,
            SparseHashStorage::BUFFERS,
        )]
    }

    fn unfurl_structured(
        &self,
        lw: &mut registry::Lowerer,
        cx: &registry::StructuredFiber,
    ) -> Result<registry::Looplet> {
        lowering::unfurl_read(lw, cx)
    }

    /// Written in any order only ([`registry::LevelKind::ANY_ORDER_GROUP`]): an output
    /// written in order records its entries instead.
    fn written_params(
        &self,
        _: registry::LevelKind,
        _: &mut registry::Kernel,
        _: &registry::LevelAt,
        _: &registry::LevelFormat,
    ) -> Option<Vec<registry::LevelParams>> {
        None
    }

    /// A group of levels written in any order ([`registry::LevelKind::ANY_ORDER_GROUP`]).
    fn any_order_params(
        &self,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        modes: usize,
    ) -> Option<Vec<registry::LevelParams>> {
        Some(lowering::group_params(kernel, at, modes))
    }

    fn any_order_modes(&self, level: &registry::LevelFormat) -> Option<usize> {
        lowering::group_modes(level)
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt { m, e, groups, .. } = *at;
    let mut child_groups = Vec::new();
    let (ptr, idx) = sorted_lists(e, m, groups, &mut child_groups);
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseHash(SparseHashStorage {
        shape: size,
        ptr,
        pos: (0..idx.len()).collect(),
        idx,
        child: Box::new(c),
    }))
}

pub mod lowering {
    //! The level's looplets and kernel parameters: how the lowerer reads and writes it.
    //!
    //! Writing SparseHash levels (finch-language-and-levels.md, SparseDict): any order,
    //! repeated (laminate). A group of SparseHash levels running down to the Element leaf is
    //! one open-addressing hash table in the kernel, keyed by an entry's linear position over
    //! every mode of the tensor (column-major, as Dense levels number their positions):
    //!
    //! * slot `h` is `table[2h]`, the key + 1 (0 for an empty slot), and `table[2h + 1]`, the
    //!   entry number, so a probe reads one cache line; slots are found by Fibonacci hashing
    //!   and linear probing; the capacity is a power of two, and the table is rebuilt at twice
    //!   the size before it gets more than half full;
    //! * `keys[q]` is entry `q`'s key, `slot_of[q]` its slot; its value is at child position
    //!   `q` (entries are numbered in insertion order and never move);
    //! * the first write of an index finds or inserts its entry (the hollow leaf's claim);
    //!   later writes of the same index reuse it.
    //!
    //! The run time builds the sorted levels from the entries (freeze). A group at the root
    //! can also be read back in the kernel: the read sorts the keys, splits them into
    //! coordinates and walks them like a SparseCOO level, each sorted position mapped to its
    //! entry by a lookup. Declaring the group again (a workspace inside a loop) empties only
    //! the slots its entries hold.

    use crate::looplets::Hollow;
    use crate::lower::kit::*;

    /// How a kernel writes the level: any order, repeated; one entry per index, so the leaf grows with the entries and records a Pattern leaf's writes.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        repeated: true,
        child_grows: true,
        records_pattern: true,
        ..WriteTraits::READ_ONLY
    };

    /// Sorted entries with a child position each.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let shape = cx.shape;
        let f = cx.fiber;
        let present = cx.present;
        let (ptr, idx, posbuf) = (cx.buf(0)?, cx.buf(1)?, cx.buf(2)?);
        let child_of: ChildOf = Rc::new(move |q| KExpr::load(posbuf, q));
        let list = SortedList {
            entries: Entries::of_fiber(ptr, present),
            idx,
            child_of,
            shape,
            runs: false,
        };
        Ok(lw.sorted_read(f, list))
    }

    /// The kernel parameters of one mode of a group of SparseHash levels a kernel writes
    /// (`LevelParams::Written`; laminate: any order, repeated), from the group's first
    /// level down to the Element leaf. The group is one open-addressing hash table keyed
    /// by an entry's linear position over every mode of the tensor (column-major), so
    /// modes above the last pass the linear position down as Dense levels do. Slot `h` is
    /// `table[2h]`, the key + 1 (0 = empty), and `table[2h + 1]`, the entry (the capacity
    /// is a power of two, at most half full); `keys[q]` is entry `q`'s key and
    /// `slot_of[q]` its slot; entry `q`'s value is at child position `q`. The run time
    /// builds the sorted levels from the entries at freeze.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of this mode.
        pub shape: LocalId,
        /// Which mode of the group, 0 = outermost.
        pub mode: usize,
        /// How many modes (SparseHash levels) the group spans.
        pub modes: usize,
        /// Slots: entry number + 1, or 0 (growable).
        pub table: BufId,
        /// Key (linear position) per entry, in insertion order (growable).
        pub keys: BufId,
        /// Slot per entry (growable).
        pub slot_of: BufId,
        /// Entries so far.
        pub count: LocalId,
        /// The entry of the index being written.
        pub at: LocalId,
        /// Whether the current index was written (its entry looked up).
        pub dirty: LocalId,
        /// Buffers for reading the group back in the kernel.
        pub view: HashView,
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
            (&mut self.dirty, Some(&mut self.at))
        }

        fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
            if self.mode == 0 {
                vec![
                    (self.slot_of, OutArray::Ptr),
                    (self.keys, OutArray::Idx),
                    (self.table, OutArray::Aux),
                ]
            } else {
                vec![]
            }
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            unfurl(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            None
        }

        fn reset_workspace(&self, _: Option<(BufId, Value)>, q: LocalId) -> Option<Vec<KStmt>> {
            Some(reset(self, q))
        }

        fn scratch_buffers(&self) -> Vec<BufId> {
            if self.mode == 0 {
                self.view.scratch_buffers()
            } else {
                vec![]
            }
        }

        fn searchable(&self) -> bool {
            true
        }

        fn read_group_mode(&self) -> Option<(usize, usize)> {
            Some((self.mode, self.modes))
        }

        fn recorded_modes(&self) -> Option<(usize, bool)> {
            Some((self.modes, true))
        }

        fn hash_entry_count(&self) -> Option<LocalId> {
            Some(self.count)
        }
    }

    /// A written SparseHash group read back in the kernel: its entries sorted by key into
    /// `order`, split into coordinates `tbl` (outermost mode first) and into fibers of the
    /// levels above (`ptr`), with `posmap[r]` the entry (child position) of sorted position
    /// `r`; walked like a SparseCOO level. Built by the first read after an insertion
    /// (`frozen` says it is current). Scratch buffers of the run.
    #[derive(Clone, Debug)]
    pub struct HashView {
        /// Sorted keys.
        pub order: BufId,
        /// Fiber boundaries per position of the levels above (`P + 1` entries).
        pub ptr: BufId,
        /// Whether the view matches the table (no insertion since it was built).
        pub frozen: LocalId,
        /// Coordinates (0-based) per mode, outermost first.
        pub tbl: Vec<BufId>,
        /// Entry per sorted position.
        pub posmap: BufId,
    }

    impl HashView {
        /// The view's buffers: scratch space of the kernel.
        pub(crate) fn scratch_buffers(&self) -> Vec<BufId> {
            let mut bufs = self.tbl.clone();
            bufs.extend([self.order, self.posmap, self.ptr]);
            bufs
        }
    }

    impl OutParams {
        /// The group's table.
        pub(crate) fn table(&self) -> HashTable {
            HashTable {
                table: self.table,
                keys: self.keys,
                slot_of: self.slot_of,
                count: self.count,
                at: self.at,
                dirty: self.dirty,
                frozen: self.view.frozen,
            }
        }
    }

    /// The looplets of fiber `f` of a mode of a written SparseHash group: written, or
    /// read back in the kernel.
    pub(crate) fn unfurl(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let modes = [p.mode, p.modes];
        if f.protocols.is_written() {
            unfurl_group_write(lw, f, p.shape, modes, p.table())
        } else {
            unfurl_group_read(lw, f, p.shape, modes, p.table(), p.view.clone())
        }
    }

    /// `w .= v` of a hash workspace inside a loop: it empties the slots its entries hold.
    pub(crate) fn reset(p: &OutParams, q: LocalId) -> Vec<KStmt> {
        p.table().reset(q)
    }

    /// The smallest table (slots).
    const MIN_CAPACITY: i64 = 16;

    /// The kernel state of a written SparseHash group (shared by its modes).
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct HashTable {
        pub(crate) table: BufId,
        pub(crate) keys: BufId,
        pub(crate) slot_of: BufId,
        pub(crate) count: LocalId,
        pub(crate) at: LocalId,
        pub(crate) dirty: LocalId,
        /// The read-back view's flag: cleared by every insertion and declaration.
        pub(crate) frozen: LocalId,
    }

    /// The locals one lookup uses.
    #[derive(Clone, Copy)]
    struct Probe {
        key: LocalId,
        slot: LocalId,
        entry: LocalId,
    }

    fn l(x: LocalId) -> KExpr {
        KExpr::Local(x)
    }

    fn add(a: KExpr, b: KExpr) -> KExpr {
        a + b
    }

    /// The multiplier of Fibonacci hashing (2^64 / golden ratio, as an `i64`).
    const GOLDEN: i64 = -7_046_029_254_386_353_131;

    /// The home slot of key `k`: `m ^ (m >> 29)` of `m = k · GOLDEN` (wrapping), masked to
    /// the capacity (a power of two).
    fn home(table: BufId, k: KExpr) -> KExpr {
        let m = || k.clone() * GOLDEN;
        let mixed = KExpr::bin(Op::Xor, m(), KExpr::bin(Op::Shr, m(), KExpr::int(29)));
        KExpr::bin(Op::BitAnd, mixed, mask(table))
    }

    /// Slots: `table[2h]` holds key + 1 (0 = empty), `table[2h + 1]` the entry, so a probe
    /// reads one cache line.
    fn capacity(table: BufId) -> KExpr {
        KExpr::bin(Op::Shr, KExpr::Len(table), KExpr::int(1))
    }

    fn mask(table: BufId) -> KExpr {
        capacity(table) - 1
    }

    fn key_slot(h: KExpr) -> KExpr {
        h * 2
    }

    fn entry_slot(h: KExpr) -> KExpr {
        add(key_slot(h), KExpr::int(1))
    }

    /// `h = (h + 1) & mask`.
    fn next_slot(table: BufId, h: LocalId) -> KStmt {
        KStmt::Assign(
            h,
            KExpr::bin(Op::BitAnd, add(l(h), KExpr::int(1)), mask(table)),
        )
    }

    impl HashTable {
        /// Looks up `key` (assigned to `p.key` first): runs `found` with `p.entry` holding the
        /// entry number when it is stored, else `empty` with `p.slot` at the free slot where
        /// it belongs.
        fn probe(&self, p: Probe, key: KExpr, found: Vec<KStmt>, empty: Vec<KStmt>) -> Vec<KStmt> {
            let mut on_empty = empty;
            on_empty.push(KStmt::Break);
            let mut on_found = vec![KStmt::Assign(
                p.entry,
                KExpr::load(self.table, entry_slot(l(p.slot))),
            )];
            on_found.extend(found);
            on_found.push(KStmt::Break);
            let stored = || KExpr::load(self.table, key_slot(l(p.slot)));
            vec![
                KStmt::Assign(p.key, key),
                KStmt::Assign(p.slot, home(self.table, l(p.key))),
                KStmt::While {
                    cond: KExpr::Lit(Value::Bool(true)),
                    body: vec![
                        KStmt::If {
                            cond: KExpr::bin(Op::Eq, stored(), add(l(p.key), KExpr::int(1))),
                            then: on_found,
                            otherwise: vec![],
                        },
                        KStmt::If {
                            cond: KExpr::bin(Op::Eq, stored(), KExpr::int(0)),
                            then: on_empty,
                            otherwise: vec![],
                        },
                        next_slot(self.table, p.slot),
                    ],
                },
            ]
        }

        /// Stores entry `q` with key `key` at free slot `h`.
        fn place(&self, h: KExpr, key: KExpr, q: KExpr) -> Vec<KStmt> {
            vec![
                KStmt::Store {
                    buf: self.table,
                    index: key_slot(h.clone()),
                    value: add(key, KExpr::int(1)),
                },
                KStmt::Store {
                    buf: self.table,
                    index: entry_slot(h.clone()),
                    value: q.clone(),
                },
                KStmt::Store {
                    buf: self.slot_of,
                    index: q,
                    value: h,
                },
            ]
        }

        /// Rebuilds the table at twice its capacity (at least [`MIN_CAPACITY`]) when one more
        /// entry would make it more than half full.
        fn make_room(&self, p: Probe, q: LocalId) -> KStmt {
            let mut rebuild = vec![
                KStmt::Resize {
                    buf: self.table,
                    len: KExpr::Op(
                        Op::Max,
                        vec![KExpr::Len(self.table) * 2, KExpr::int(2 * MIN_CAPACITY)],
                    ),
                    fill: Value::I64(0),
                },
                KStmt::For {
                    var: q,
                    lo: KExpr::int(0),
                    hi: KExpr::Len(self.table),
                    body: vec![KStmt::Store {
                        buf: self.table,
                        index: l(q),
                        value: KExpr::int(0),
                    }],
                },
            ];
            // Every entry again, in order, at the first free slot from its home.
            let mut reinsert = vec![
                KStmt::Assign(p.slot, home(self.table, KExpr::load(self.keys, l(q)))),
                KStmt::While {
                    cond: KExpr::bin(
                        Op::Ne,
                        KExpr::load(self.table, key_slot(l(p.slot))),
                        KExpr::int(0),
                    ),
                    body: vec![next_slot(self.table, p.slot)],
                },
            ];
            reinsert.extend(self.place(l(p.slot), KExpr::load(self.keys, l(q)), l(q)));
            rebuild.push(KStmt::For {
                var: q,
                lo: KExpr::int(0),
                hi: l(self.count),
                body: reinsert,
            });
            KStmt::If {
                cond: KExpr::bin(
                    Op::Gt,
                    add(l(self.count), KExpr::int(1)) * 2,
                    capacity(self.table),
                ),
                then: rebuild,
                otherwise: vec![],
            }
        }

        /// Empties the table: only the slots its entries hold, so the cost follows the
        /// entries, not the capacity.
        pub(crate) fn reset(&self, q: LocalId) -> Vec<KStmt> {
            vec![
                KStmt::For {
                    var: q,
                    lo: KExpr::int(0),
                    hi: l(self.count),
                    body: vec![KStmt::Store {
                        buf: self.table,
                        index: key_slot(KExpr::load(self.slot_of, l(q))),
                        value: KExpr::int(0),
                    }],
                },
                KStmt::Assign(self.count, KExpr::int(0)),
                KStmt::Assign(self.frozen, KExpr::Lit(Value::Bool(false))),
            ]
        }
    }

    fn probe_locals(lw: &mut Lowerer, t: usize, depth: usize) -> Probe {
        Probe {
            key: lw.level_local(t, depth, "key"),
            slot: lw.level_local(t, depth, "slot"),
            entry: lw.level_local(t, depth, "entry"),
        }
    }

    /// The looplets of mode `mode` (of `modes`) of a written SparseHash group: modes above
    /// the last pass the linear position down; the last hands out the leaf of the index's
    /// entry, found or inserted by the first write.
    fn unfurl_group_write(
        lw: &mut Lowerer,
        f: &Fiber,
        shape: LocalId,
        [mode, modes]: [usize; 2],
        h: HashTable,
    ) -> Result<Looplet> {
        let (t, depth) = (f.tensor, f.depth + 1);
        if mode + 1 < modes {
            return Ok(dense_lookup(f, shape));
        }
        let linear = linear_position(f.pos.clone(), shape);
        // (Over a Pattern leaf, which stores no values, an entry is its key.)
        let leaf = lw.written_values(t, depth, "SparseHash")?;
        let p = probe_locals(lw, t, depth);
        let q = lw.level_local(t, depth, "rehash");
        let mut insert = vec![
            grow_to(h.keys, add(l(h.count), KExpr::int(1)), Value::I64(0)),
            grow_to(h.slot_of, add(l(h.count), KExpr::int(1)), Value::I64(0)),
        ];
        if let Some((val, init)) = leaf {
            insert.push(grow_to(val, add(l(h.count), KExpr::int(1)), init));
        }
        insert.push(KStmt::Store {
            buf: h.keys,
            index: l(h.count),
            value: l(p.key),
        });
        insert.extend(h.place(l(p.slot), l(p.key), l(h.count)));
        if let Some((val, init)) = leaf {
            insert.push(KStmt::Store {
                buf: val,
                index: l(h.count),
                value: KExpr::Lit(init),
            });
        }
        insert.extend([
            KStmt::Assign(h.at, l(h.count)),
            KStmt::Assign(h.count, add(l(h.count), KExpr::int(1))),
            KStmt::Assign(h.frozen, KExpr::Lit(Value::Bool(false))),
        ]);
        let found = vec![KStmt::Assign(h.at, l(p.entry))];
        let claim_of = move |i: KExpr| {
            let mut claim = vec![h.make_room(p, q)];
            claim.extend(h.probe(p, linear(i), found.clone(), insert.clone()));
            claim.push(KStmt::Assign(h.dirty, KExpr::Lit(Value::Bool(true))));
            Hollow {
                dirty: h.dirty,
                claim,
                // Storing the fill into an entry another statement wrote must reach it, so
                // every write looks its entry up (a fill written first is stored).
                skip_fill: false,
                skip_fill_values: false,
                fill_claims: true,
                repeated: false,
            }
        };
        Ok(Looplet::LookupWrite {
            body: Rc::new(move |i: KExpr| Fiber::hollow_leaf(t, depth, l(h.at), claim_of(i))),
            epilogue: Rc::new(move |_i: KExpr| {
                vec![KStmt::Assign(h.dirty, KExpr::Lit(Value::Bool(false)))]
            }),
        })
    }

    /// Mode `mode` of a written SparseHash group read back in the kernel: the first read
    /// after an insertion sorts the entries and splits their keys into coordinates and
    /// fibers (`view`), then every mode walks them like a SparseCOO level.
    fn unfurl_group_read(
        lw: &mut Lowerer,
        f: &Fiber,
        shape: LocalId,
        [mode, modes]: [usize; 2],
        h: HashTable,
        view: HashView,
    ) -> Result<Looplet> {
        let name = lw.tensors[f.tensor].name.clone();
        let idx = view.tbl.get(mode).copied().ok_or_else(|| {
            Error::Program(format!(
                "internal: `{name}` has no coordinates for mode {mode}"
            ))
        })?;
        let entries = if mode == 0 {
            Entries::Fiber(view.ptr)
        } else {
            Entries::Until(f.end.clone().ok_or_else(|| {
                Error::Program(format!(
                    "internal: mode {} of `{name}`'s SparseHash levels reached without its run of entries",
                    mode + 1
                ))
            })?)
        };
        let posmap = view.posmap;
        let child_of: ChildOf = if mode + 1 == modes {
            Rc::new(move |r| KExpr::load(posmap, r))
        } else {
            Rc::new(|r| r)
        };
        let list = SortedList {
            entries,
            idx,
            child_of,
            shape,
            runs: mode + 1 < modes,
        };
        let walk = lw.sorted_read(f, list);
        if mode > 0 {
            return Ok(walk);
        }
        let (t, depth) = (f.tensor, f.depth + 1);
        let shape_of = |levels: &[LevelParams]| -> Vec<LocalId> {
            levels.iter().filter_map(LevelParams::shape).collect()
        };
        let shapes = shape_of(&lw.tensors[t].levels[f.depth..f.depth + modes]);
        // Positions of the levels above: the product of their sizes (Dense levels).
        let parents = shape_of(&lw.tensors[t].levels[..f.depth])
            .into_iter()
            .fold(KExpr::int(1), |p, s| p * l(s));
        let mut freeze = freeze(lw, t, depth, h, &view, &shapes, parents);
        freeze.push(KStmt::Assign(view.frozen, KExpr::Lit(Value::Bool(true))));
        Ok(Looplet::Thunk {
            preamble: vec![KStmt::If {
                cond: KExpr::Op(Op::Not, vec![l(view.frozen)]),
                then: freeze,
                otherwise: vec![],
            }],
            body: Box::new(walk),
            epilogue: vec![],
        })
    }

    /// Sorts a SparseHash group's keys into `view.order`, counts the entries of each of the
    /// `parents` fibers into `view.ptr` (then offsets), and splits each key into its
    /// coordinates (0-based, `shapes` outermost first) and finds its entry.
    fn freeze(
        lw: &mut Lowerer,
        t: usize,
        depth: usize,
        h: HashTable,
        view: &HashView,
        shapes: &[LocalId],
        parents: KExpr,
    ) -> Vec<KStmt> {
        let p = probe_locals(lw, t, depth);
        let r = lw.level_local(t, depth, "sorted");
        let k = lw.level_local(t, depth, "rest");
        let n = l(h.count);
        let mut code = vec![grow_to(view.order, n.clone(), Value::I64(0))];
        code.extend(
            view.tbl
                .iter()
                .map(|&b| grow_to(b, n.clone(), Value::I64(0))),
        );
        code.push(grow_to(view.posmap, n.clone(), Value::I64(0)));
        // Per-fiber counts start at 0.
        let fibers = add(parents, KExpr::int(1));
        code.push(grow_to(view.ptr, fibers.clone(), Value::I64(0)));
        code.push(KStmt::For {
            var: r,
            lo: KExpr::int(0),
            hi: fibers.clone(),
            body: vec![KStmt::Store {
                buf: view.ptr,
                index: l(r),
                value: KExpr::int(0),
            }],
        });
        code.push(KStmt::For {
            var: r,
            lo: KExpr::int(0),
            hi: n.clone(),
            body: vec![KStmt::Store {
                buf: view.order,
                index: l(r),
                value: KExpr::load(h.keys, l(r)),
            }],
        });
        code.push(KStmt::Sort {
            buf: view.order,
            lo: KExpr::int(0),
            hi: n.clone(),
        });
        let mut body = h.probe(
            p,
            KExpr::load(view.order, l(r)),
            vec![KStmt::Store {
                buf: view.posmap,
                index: l(r),
                value: l(p.entry),
            }],
            // Every sorted key is stored; an empty slot cannot be reached.
            vec![],
        );
        body.push(KStmt::Assign(k, l(p.key)));
        for (&b, &s) in view.tbl.iter().zip(shapes).rev() {
            body.push(KStmt::Store {
                buf: b,
                index: l(r),
                value: KExpr::bin(Op::Rem, l(k), l(s)),
            });
            body.push(KStmt::Assign(k, KExpr::bin(Op::IntDiv, l(k), l(s))));
        }
        // What is left of the key is the fiber (the position of the levels above).
        let slot = add(l(k), KExpr::int(1));
        body.push(KStmt::Store {
            buf: view.ptr,
            index: slot.clone(),
            value: add(KExpr::load(view.ptr, slot), KExpr::int(1)),
        });
        code.push(KStmt::For {
            var: r,
            lo: KExpr::int(0),
            hi: n,
            body,
        });
        // Counts to offsets.
        code.push(KStmt::For {
            var: r,
            lo: KExpr::int(1),
            hi: fibers,
            body: vec![KStmt::Store {
                buf: view.ptr,
                index: l(r),
                value: add(KExpr::load(view.ptr, l(r)), KExpr::load(view.ptr, l(r) - 1)),
            }],
        });
        code
    }

    /// The levels of a SparseHash group spanning `modes` modes: one table over all of them.
    pub(crate) fn group_params(
        kernel: &mut Kernel,
        at: &LevelAt,
        modes: usize,
    ) -> Vec<LevelParams> {
        let shapes = mode_shapes(kernel, at.name, at.depth, at.shape, modes);
        let mut buf = |what: &str| at.buf(kernel, what, true);
        let (table, keys, slot_of) = (buf("table"), buf("keys"), buf("slot_of"));
        let (order, ptr, posmap) = (buf("order"), buf("fiber_ptr"), buf("posmap"));
        let tbl = (0..modes)
            .map(|m| buf(&format!("coord{}", m + 1)))
            .collect();
        let frozen = at.local(kernel, "frozen", ScalarType::Bool);
        let view = HashView {
            order,
            ptr,
            frozen,
            tbl,
            posmap,
        };
        let (count, position, dirty) = (
            at.local(kernel, "count", ScalarType::I64),
            at.local(kernel, "at", ScalarType::I64),
            at.local(kernel, "dirty", ScalarType::Bool),
        );
        kernel.outputs.push(count);
        shapes
            .iter()
            .enumerate()
            .map(|(mode, &shape)| {
                LevelParams::written(OutParams {
                    shape,
                    mode,
                    modes,
                    table,
                    keys,
                    slot_of,
                    count,
                    at: position,
                    dirty,
                    view: view.clone(),
                })
            })
            .collect()
    }

    /// How many SparseHash levels `level` starts that run down to an Element or Pattern leaf
    /// (a group the compiler writes as one hash table), or `None`.
    pub(crate) fn group_modes(level: &LevelFormat) -> Option<usize> {
        let mut n = 0;
        let mut l = level;
        loop {
            match l {
                LevelFormat::Inner {
                    kind: LevelKind::SparseHash,
                    child,
                    ..
                } => {
                    n += 1;
                    l = child;
                }
                LevelFormat::Element(_) | LevelFormat::Pattern => return (n > 0).then_some(n),
                _ => return None,
            }
        }
    }
}

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

use std::rc::Rc;

use super::convert::HashView;
use super::unfurl::{dense_lookup, grow_to, linear_position, ChildOf, Entries, SortedList};
use super::Lowerer;
use crate::algebra::{Op, Value};
use crate::error::{Error, Result};
use crate::kernel::{BufId, KExpr, KStmt, LocalId};
use crate::looplets::{Fiber, Hollow, Looplet};

/// The smallest table (slots).
const MIN_CAPACITY: i64 = 16;

/// The kernel state of a written SparseHash group (shared by its modes).
#[derive(Clone, Copy, Debug)]
pub(super) struct HashTable {
    pub(super) table: BufId,
    pub(super) keys: BufId,
    pub(super) slot_of: BufId,
    pub(super) count: LocalId,
    pub(super) at: LocalId,
    pub(super) dirty: LocalId,
    /// The read-back view's flag: cleared by every insertion and declaration.
    pub(super) frozen: LocalId,
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
    pub(super) fn reset(&self, q: LocalId) -> Vec<KStmt> {
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

impl Lowerer {
    fn probe_locals(&mut self, t: usize, depth: usize) -> Probe {
        Probe {
            key: self.level_local(t, depth, "key"),
            slot: self.level_local(t, depth, "slot"),
            entry: self.level_local(t, depth, "entry"),
        }
    }

    /// The looplets of mode `mode` (of `modes`) of a written SparseHash group: modes above
    /// the last pass the linear position down; the last hands out the leaf of the index's
    /// entry, found or inserted by the first write.
    pub(super) fn unfurl_hash_out(
        &mut self,
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
        let leaf = self.written_values(t, depth, "SparseHash")?;
        let p = self.probe_locals(t, depth);
        let q = self.level_local(t, depth, "rehash");
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
    pub(super) fn unfurl_hash_read(
        &mut self,
        f: &Fiber,
        shape: LocalId,
        [mode, modes]: [usize; 2],
        h: HashTable,
        view: HashView,
    ) -> Result<Looplet> {
        let name = self.tensors[f.tensor].name.clone();
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
        let walk = self.sorted_read(f, list);
        if mode > 0 {
            return Ok(walk);
        }
        let (t, depth) = (f.tensor, f.depth + 1);
        let shape_of = |levels: &[super::LevelParams]| -> Vec<LocalId> {
            levels
                .iter()
                .filter_map(super::LevelParams::shape)
                .collect()
        };
        let shapes = shape_of(&self.tensors[t].levels[f.depth..f.depth + modes]);
        // Positions of the levels above: the product of their sizes (Dense levels).
        let parents = shape_of(&self.tensors[t].levels[..f.depth])
            .into_iter()
            .fold(KExpr::int(1), |p, s| p * l(s));
        let mut freeze = self.hash_freeze(t, depth, h, &view, &shapes, parents);
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
    fn hash_freeze(
        &mut self,
        t: usize,
        depth: usize,
        h: HashTable,
        view: &HashView,
        shapes: &[LocalId],
        parents: KExpr,
    ) -> Vec<KStmt> {
        let p = self.probe_locals(t, depth);
        let r = self.level_local(t, depth, "sorted");
        let k = self.level_local(t, depth, "rest");
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
}

impl HashTable {
    /// The table of a written SparseHash mode's parameters.
    pub(super) fn of(l: &super::LevelParams) -> Option<(HashTable, HashView)> {
        match l {
            super::LevelParams::HashOut {
                table,
                keys,
                slot_of,
                count,
                at,
                dirty,
                view,
                ..
            } => Some((
                HashTable {
                    table: *table,
                    keys: *keys,
                    slot_of: *slot_of,
                    count: *count,
                    at: *at,
                    dirty: *dirty,
                    frozen: view.frozen,
                },
                view.clone(),
            )),
            _ => None,
        }
    }
}

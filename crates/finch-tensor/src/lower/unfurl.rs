//! Unfurling: a level's looplet nest for its dimension (finch-language-and-levels.md §4).
//! Positions are 0-based, indices 1-based (stored `idx` values are 0-based, so the index
//! of entry `q` is `idx[q] + 1`).
//!
//! * Dense (read and update): `Lookup(i -> child((p)·shape + i - 1))`.
//! * SparseList (read, walk): `Thunk(q = ptr[p]; q_stop = ptr[p+1]; i_last = idx[q_stop-1]+1
//!   or 0) -> Sequence(Phase(stop = i_last, Stepper(seek: scansearch; preamble: i = idx[q]+1;
//!   stop = i; chunk = Spike(FillLeaf(fill), child(q)); next: q += 1)), Phase(Run(FillLeaf(fill))))`.
//!
//! This lives with the lowerer for now; it moves into the level files when more levels
//! arrive (issue #4).

use std::rc::Rc;

use super::convert::LevelParams;
use super::Lowerer;
use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::kernel::{KExpr, KStmt};
use crate::looplets::{Fiber, Looplet, Stepper, Tensor};

impl Lowerer {
    /// The fill value of a tensor's leaf.
    pub(super) fn fill_of(&self, t: usize) -> Value {
        self.tensors[t].format.fill_value()
    }

    /// The looplet nest of fiber `f` for the dimension of its level.
    pub(super) fn unfurl(&mut self, f: &Fiber) -> Result<Looplet> {
        let info = &self.tensors[f.tensor];
        let name = info.name.clone();
        let level = info.levels.get(f.depth).cloned().ok_or_else(|| {
            Error::Program(format!("internal: `{name}` has no level {}", f.depth + 1))
        })?;
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        match level {
            LevelParams::Dense { shape } => Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                let child = KExpr::bin(
                    Op::Add,
                    KExpr::bin(Op::Mul, pos.clone(), KExpr::Local(shape)),
                    KExpr::bin(Op::Sub, i, KExpr::int(1)),
                );
                Tensor::Fiber(Fiber {
                    tensor: t,
                    depth,
                    pos: child,
                    hollow: None,
                    protocols,
                })
            }))),
            LevelParams::SparseList { ptr, idx, .. } if f.protocols & (1 << f.depth) != 0 => {
                // follow: random access by binary search in the fiber; a miss reads fill.
                let fill = self.fill_of(t);
                let r = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_r"), ScalarType::I64);
                let found = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_found"), ScalarType::Bool);
                let hi = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_q_stop"), ScalarType::I64);
                let l = KExpr::Local;
                let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
                Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    let target = KExpr::bin(Op::Sub, i, KExpr::int(1));
                    Tensor::Switch {
                        pre: vec![
                            KStmt::Assign(hi, KExpr::load(ptr, plus1(pos.clone()))),
                            KStmt::Assign(
                                r,
                                KExpr::Search {
                                    buf: idx,
                                    value: Box::new(target.clone()),
                                    lo: Box::new(KExpr::load(ptr, pos.clone())),
                                    hi: Box::new(l(hi)),
                                },
                            ),
                            KStmt::Assign(found, KExpr::Lit(Value::Bool(false))),
                            KStmt::If {
                                cond: KExpr::bin(Op::Lt, l(r), l(hi)),
                                then: vec![KStmt::Assign(
                                    found,
                                    KExpr::bin(Op::Eq, KExpr::load(idx, l(r)), target),
                                )],
                                otherwise: vec![],
                            },
                        ],
                        cond: l(found),
                        then: Box::new(Tensor::Fiber(Fiber {
                            tensor: t,
                            depth,
                            pos: l(r),
                            hollow: None,
                            protocols,
                        })),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }
                })))
            }
            LevelParams::SparseList { ptr, idx, .. } => {
                let fill = self.fill_of(t);
                let q = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_q"), ScalarType::I64);
                let q_stop = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_q_stop"), ScalarType::I64);
                let i_last = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_i_last"), ScalarType::I64);
                let i_cur = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_i"), ScalarType::I64);
                let l = KExpr::Local;
                let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
                let preamble = vec![
                    KStmt::Assign(q, KExpr::load(ptr, pos.clone())),
                    KStmt::Assign(q_stop, KExpr::load(ptr, plus1(pos))),
                    KStmt::If {
                        cond: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                        then: vec![KStmt::Assign(
                            i_last,
                            plus1(KExpr::load(
                                idx,
                                KExpr::bin(Op::Sub, l(q_stop), KExpr::int(1)),
                            )),
                        )],
                        otherwise: vec![KStmt::Assign(i_last, KExpr::int(0))],
                    },
                ];
                let seek = move |start: KExpr| {
                    // Only search when the cursor is behind `start` (one comparison when it
                    // is already in place).
                    vec![KStmt::If {
                        cond: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                        then: vec![KStmt::If {
                            cond: KExpr::bin(Op::Lt, plus1(KExpr::load(idx, l(q))), start.clone()),
                            then: vec![KStmt::Assign(
                                q,
                                KExpr::Search {
                                    buf: idx,
                                    value: Box::new(KExpr::bin(Op::Sub, start, KExpr::int(1))),
                                    lo: Box::new(l(q)),
                                    hi: Box::new(l(q_stop)),
                                },
                            )],
                            otherwise: vec![],
                        }],
                        otherwise: vec![],
                    }]
                };
                let stepper = Stepper {
                    seek: Box::new(seek),
                    preamble: vec![KStmt::Assign(i_cur, plus1(KExpr::load(idx, l(q))))],
                    stop: l(i_cur),
                    chunk: Looplet::Spike {
                        body: Box::new(Tensor::FillLeaf(fill)),
                        tail: Box::new(Tensor::Fiber(Fiber {
                            tensor: t,
                            depth,
                            pos: l(q),
                            hollow: None,
                            protocols,
                        })),
                    },
                    next: vec![KStmt::Assign(q, plus1(l(q)))],
                    counted: Some(crate::looplets::Counted {
                        more: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                        last: l(i_last),
                    }),
                };
                let gallop = f.protocols & (1 << (32 + f.depth)) != 0;
                let walker = if gallop {
                    Looplet::Jumper(Rc::new(stepper))
                } else {
                    Looplet::Stepper(Rc::new(stepper))
                };
                Ok(Looplet::Thunk {
                    epilogue: vec![],
                    preamble,
                    body: Box::new(Looplet::Sequence(vec![
                        (Some(l(i_last)), walker),
                        (None, Looplet::Run(Box::new(Tensor::FillLeaf(fill)))),
                    ])),
                })
            }
            LevelParams::SparseListOut {
                ptr,
                idx,
                qos,
                dirty,
                ..
            } => {
                let Some(LevelParams::Element { val, .. }) =
                    self.tensors[t].levels.get(depth).cloned()
                else {
                    return Err(Error::Program(format!(
                        "internal: `{name}` has no leaf under its sparse output level"
                    )));
                };
                let fill = self.fill_of(t);
                // The declared initial value, in the element type (checked equal to the fill
                // when the program was converted).
                let init = self.tensors[t]
                    .init
                    .and_then(|v| v.convert_exact(fill.scalar_type().unwrap_or(ScalarType::F64)))
                    .unwrap_or(fill);
                let start = self
                    .kernel
                    .local(format!("{name}_lvl{depth}_qos_start"), ScalarType::I64);
                let l = KExpr::Local;
                let hollow = crate::looplets::Hollow {
                    dirty,
                    idx,
                    val,
                    init,
                };
                // After each index's statements: record it if written.
                let record = move |i: KExpr| {
                    vec![KStmt::If {
                        cond: l(dirty),
                        then: vec![
                            KStmt::Store {
                                buf: idx,
                                index: l(qos),
                                value: KExpr::bin(Op::Sub, i, KExpr::int(1)),
                            },
                            KStmt::Assign(qos, KExpr::bin(Op::Add, l(qos), KExpr::int(1))),
                            KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                        ],
                        otherwise: vec![],
                    }]
                };
                Ok(Looplet::Thunk {
                    preamble: vec![KStmt::Assign(start, l(qos))],
                    body: Box::new(Looplet::LookupWrite {
                        body: Rc::new(move |_i: KExpr| {
                            Tensor::Fiber(Fiber {
                                tensor: t,
                                depth,
                                pos: l(qos),
                                hollow: Some(hollow.clone()),
                                protocols: 0,
                            })
                        }),
                        epilogue: Rc::new(record),
                    }),
                    // The fiber's count; the run time prefix-sums the counts at freeze.
                    epilogue: vec![KStmt::Store {
                        buf: ptr,
                        index: KExpr::bin(Op::Add, pos, KExpr::int(1)),
                        value: KExpr::bin(Op::Sub, l(qos), l(start)),
                    }],
                })
            }
            LevelParams::Element { .. } | LevelParams::Pattern => Err(Error::Program(format!(
                "internal: the leaf of `{name}` indexed by a loop"
            ))),
        }
    }
}

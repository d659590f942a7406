//! The lowering of a declaration's lifecycle in the kernel: a sorted-list output frozen
//! before a later statement reads it, a workspace reset by a declaration inside a loop,
//! and a scalar set.

use super::*;

impl Lowerer {
    /// A SparseList output frozen in the kernel: its per-fiber counts become offsets.
    pub(super) fn lower_freeze(&mut self, t: usize) -> Result<Vec<KStmt>> {
        let ptr = self.tensors[t].levels.iter().find_map(|l| match l {
            LevelParams::SparseListOut(SparseListOut { ptr, .. }) => Some(*ptr),
            _ => None,
        });
        let Some(ptr) = ptr else {
            return Err(Error::Program("internal: freeze of a non-list".into()));
        };
        // Counts to offsets: ptr[p] += ptr[p - 1].
        let p = self.fresh(&format!("{}_freeze", self.tensors[t].name), ScalarType::I64);
        let at = |e: KExpr| KExpr::load(ptr, e);
        let prev = KExpr::Local(p) - 1;
        Ok(vec![KStmt::For {
            var: p,
            lo: KExpr::int(1),
            hi: KExpr::Len(ptr),
            body: vec![KStmt::Store {
                buf: ptr,
                index: KExpr::Local(p),
                value: at(KExpr::Local(p)) + at(prev),
            }],
        }])
    }

    /// `w .= v` inside a loop: the workspace `t` emptied, each level kind its own way.
    pub(super) fn lower_reset(&mut self, t: usize, v: Value) -> Result<Vec<KStmt>> {
        let levels = self.tensors[t].levels.clone();
        // The leaf's values and the reset value in their type (a Pattern leaf has
        // none).
        let leaf = match levels.last() {
            Some(LevelParams::Element { val, .. }) => {
                let elem = self.kernel.bufs[val.0 as usize].elem;
                let v = v.convert_exact(elem).ok_or_else(|| {
                    Error::Program(format!(
                        "`{}` ({elem}) cannot be set to {v}",
                        self.tensors[t].name
                    ))
                })?;
                Some((*val, v))
            }
            Some(LevelParams::Pattern) => None,
            _ => {
                return Err(Error::Program(
                    "internal: reset of a tensor without a leaf".into(),
                ))
            }
        };
        let q = self.fresh(&format!("{}_reset", self.tensors[t].name), ScalarType::I64);
        // The first level with storage of its own decides (a SparseHash group under
        // Dense levels is one table over every mode; all-Dense levels reach the
        // leaf).
        let first = levels
            .iter()
            .find(|l| !matches!(l, LevelParams::Dense { .. }));
        match (first, leaf) {
            // A run-length workspace starts over: later writes overwrite its runs.
            (Some(LevelParams::RunsOut(RunsOut { qos, .. })), _) => {
                Ok(vec![KStmt::Assign(*qos, KExpr::int(0))])
            }
            // A sorted vector workspace starts empty (its one fiber's count is 0
            // until a write ends): entries are written again from position 0, and
            // a claim sets each value.
            (
                Some(LevelParams::SparseListOut(SparseListOut {
                    ptr, qos, dirty, ..
                })),
                _,
            ) => Ok(vec![
                KStmt::Assign(*qos, KExpr::int(0)),
                KStmt::Assign(*dirty, KExpr::Lit(Value::Bool(false))),
                KStmt::Store {
                    buf: *ptr,
                    index: KExpr::int(1),
                    value: KExpr::int(0),
                },
            ]),
            // A hash workspace empties the slots its entries hold.
            (Some(l @ LevelParams::HashOut { .. }), _) => {
                let (h, _) = hash::HashTable::of(l)
                    .ok_or_else(|| Error::Program("internal: a SparseHash table".into()))?;
                Ok(h.reset(q))
            }
            // A bytemap workspace resets only the positions it set (TACO's
            // workspace): the cost follows the previous nonzeros, not the size.
            (
                Some(LevelParams::SparseByteMapOut(SparseByteMapOut { tbl, srt, nsrt, .. })),
                leaf,
            ) => {
                let at = KExpr::load(*srt, KExpr::Local(q));
                let mut body = vec![KStmt::Store {
                    buf: *tbl,
                    index: at.clone(),
                    value: KExpr::Lit(Value::Bool(false)),
                }];
                if let Some((val, v)) = leaf {
                    body.push(KStmt::Store {
                        buf: val,
                        index: at,
                        value: KExpr::Lit(v),
                    });
                }
                Ok(vec![
                    KStmt::For {
                        var: q,
                        lo: KExpr::int(0),
                        hi: KExpr::Local(*nsrt),
                        body,
                    },
                    KStmt::Assign(*nsrt, KExpr::int(0)),
                ])
            }
            // A dense workspace: every value.
            (_, Some((val, v))) => Ok(vec![KStmt::For {
                var: q,
                lo: KExpr::int(0),
                hi: KExpr::Len(val),
                body: vec![KStmt::Store {
                    buf: val,
                    index: KExpr::Local(q),
                    value: KExpr::Lit(v),
                }],
            }]),
            (_, None) => Err(Error::Program(
                "internal: reset of a non-dense tensor".into(),
            )),
        }
    }

    /// `s .= e` or a write of a scalar: the value converted to the scalar's type.
    pub(super) fn lower_set_scalar(&mut self, t: usize, e: Expr) -> Result<Vec<KStmt>> {
        let target = self.tensors[t]
            .scalar
            .ok_or_else(|| Error::Program("internal: not a scalar".into()))?;
        let (v, vt) = self.kexpr(&e)?;
        let (mut code, v) = self.convert_for_store(
            v,
            vt,
            self.kernel.locals[target.0 as usize].ty,
            &self.tensors[t].name.clone(),
        )?;
        code.push(KStmt::Assign(target, v));
        // Declaring a SparseScalar clears its written flag.
        if let Some(d) = self.tensors[t].dirty {
            code.push(KStmt::Assign(d, KExpr::Lit(Value::Bool(false))));
        }
        Ok(code)
    }
}

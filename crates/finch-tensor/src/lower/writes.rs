//! Output writes: assignments and updates into leaves, Pattern leaves, hollow leaf
//! positions a written sparse level hands out (claimed on the first write), and the
//! conversions a store needs.

use super::*;

impl Lowerer {
    /// `target op= rhs` at a leaf.
    pub(super) fn emit_assign(
        &mut self,
        lhs: (Tensor, Vec<Expr>),
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        // A read outside a tensor through a non-permissive shifted index stops the kernel,
        // at one position or over a run of them integrated into one update.
        if let Some(t) = out_of_range_read(&rhs) {
            return Ok(vec![KStmt::Fail(
                crate::backend::c::INDEX_OUT_OF_RANGE_BASE + t as i32,
            )]);
        }
        let (t, idx) = lhs;
        if !idx.is_empty() {
            return Err(Error::Program(
                "internal: a write with indices left after lowering".into(),
            ));
        }
        if let Tensor::Fiber(
            f @ crate::looplets::Fiber {
                hollow: Some(_), ..
            },
        ) = &t
        {
            return self.emit_hollow(f.clone(), op, rhs);
        }
        // A SparseScalar records that it was written.
        let dirty = match &t {
            Tensor::Scalar(s) => self.tensors[*s].dirty,
            _ => None,
        };
        let (old, elem, name, store): (KExpr, ScalarType, String, Box<dyn Fn(KExpr) -> KStmt>) =
            match t {
                Tensor::Scalar(s) => {
                    let l = self.tensors[s]
                        .scalar
                        .ok_or_else(|| Error::Program("internal: scalar".into()))?;
                    (
                        KExpr::Local(l),
                        self.kernel.locals[l.0 as usize].ty,
                        self.tensors[s].name.clone(),
                        Box::new(move |v| KStmt::Assign(l, v)),
                    )
                }
                Tensor::Local(l) => (
                    KExpr::Local(l),
                    self.kernel.locals[l.0 as usize].ty,
                    "an accumulator".to_string(),
                    Box::new(move |v| KStmt::Assign(l, v)),
                ),
                Tensor::Fiber(f) => match self.leaf_of(&f) {
                    Some(LeafParams::Element { val, .. }) => {
                        let (val, pos) = (val, f.pos.clone());
                        (
                            KExpr::load(val, pos.clone()),
                            self.kernel.bufs[val.0 as usize].elem,
                            self.tensors[f.tensor].name.clone(),
                            Box::new(move |v| KStmt::Store {
                                buf: val,
                                index: pos.clone(),
                                value: v,
                            }),
                        )
                    }
                    Some(LeafParams::Pattern) | None => {
                        return Err(Error::Program(
                            "internal: a write to a non-leaf level".into(),
                        ))
                    }
                },
                other => return Err(Error::Program(format!("internal: a write to {other:?}"))),
            };
        let value = match op {
            None => rhs,
            Some(op) => Expr::Call(op, vec![Expr::Code(old), rhs]),
        };
        let value = simplify_expr(value, self);
        let (v, vt) = self.kexpr(&value)?;
        let (mut code, v) = self.convert_for_store(v, vt, elem, &name)?;
        code.push(store(v));
        if let Some(d) = dirty {
            code.push(KStmt::Assign(d, KExpr::Lit(Value::Bool(true))));
        }
        Ok(code)
    }

    /// An update of a written Pattern leaf, which stores nothing: its value is whether the
    /// index is claimed (`h.dirty`, which the level above records). `=` and `|=` of `true`
    /// claim it; any other update `op= c` sets the claim to `op(claimed, c)`, as Finch.jl
    /// does (a Pattern subfiber written is a scalar over the level's `dirty` flag), so
    /// `&=` or a store of `false` takes back a claim an earlier write of the index made.
    pub(super) fn emit_pattern_update(
        &mut self,
        h: &crate::looplets::Hollow,
        t: usize,
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        let name = self.tensors[t].name.clone();
        let unclaimed = KExpr::Op(Op::Not, vec![KExpr::Local(h.dirty)]);
        let sets = matches!(op, None | Some(Op::Or | Op::BitOr));
        let value = match op {
            Some(op) if !sets => {
                // A level that records an index only where its flag ends up set can take
                // a claim back; the others (SparseByteMap, SparseHash) keep a flag per
                // entry instead where the program may clear one (`convert::may_clear`).
                if !h.skip_fill {
                    return Err(Error::Program(format!(
                        "internal: an update of the Pattern tensor `{name}` that may clear an index"
                    )));
                }
                let value = Expr::Call(op, vec![Expr::Code(KExpr::Local(h.dirty)), rhs]);
                simplify_expr(value, self)
            }
            _ => rhs,
        };
        let (c, ty) = self.kexpr(&value)?;
        let (check, c) = if sets {
            if ty != ScalarType::Bool {
                return Err(Error::Program(format!(
                    "`{name}` is a Pattern (bool) tensor but the value written is {ty}"
                )));
            }
            (vec![], c)
        } else {
            self.convert_for_store(c, ty, ScalarType::Bool, &name)?
        };
        if (op.is_none() && h.repeated && h.skip_fill) || !sets {
            // An earlier run of the write may have claimed the index, and the claim is the
            // entry (the level records what is claimed): a `false` takes it back.
            let mut code = check;
            code.push(KStmt::If {
                cond: c,
                then: vec![KStmt::If {
                    cond: unclaimed,
                    then: h.claim.clone(),
                    otherwise: vec![],
                }],
                otherwise: vec![KStmt::Assign(h.dirty, KExpr::Lit(Value::Bool(false)))],
            });
            return Ok(code);
        }
        // `|= c`, or `= c` written once per index: `false` changes nothing.
        let mut code = check;
        code.push(KStmt::If {
            cond: KExpr::Op(Op::And, vec![c, unclaimed]),
            then: h.claim.clone(),
            otherwise: vec![],
        });
        Ok(code)
    }

    /// A write to a position an extruding sparse level hands out: the first write of the
    /// index claims the position (growing the buffers by doubling), then the value is
    /// updated. Storing the fill value into an unclaimed position does nothing.
    pub(super) fn emit_hollow(
        &mut self,
        f: crate::looplets::Fiber,
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        let Some(h) = f.hollow.clone() else {
            return Err(Error::Program("internal: not a hollow position".into()));
        };
        let fill = self.fill_of(f.tensor);
        if matches!(
            self.tensors[f.tensor].levels.get(f.depth),
            Some(LevelParams::Pattern)
        ) {
            return self.emit_pattern_update(&h, f.tensor, op, rhs);
        }
        let plain = Tensor::Fiber(crate::looplets::Fiber {
            hollow: None,
            ..f.clone()
        });
        let store = self.emit_assign((plain, vec![]), op, rhs.clone())?;
        let dirty = KExpr::Local(h.dirty);
        if op.is_none() && matches!(simplify_expr(rhs.clone(), self), Expr::Lit(v) if v.same(&fill))
        {
            // Storing the fill claims nothing. Where the level skips it (an extruded list:
            // one statement writes it, so nothing claimed this index before) no code is
            // emitted, and a loop over a region of fills vanishes. A write an inner loop
            // repeats may have claimed the index at an earlier iteration: there the fill
            // is stored (and the level's record drops a value that is the fill).
            if h.skip_fill && h.repeated {
                return Ok(vec![KStmt::If {
                    cond: dirty,
                    then: store,
                    otherwise: vec![],
                }]);
            }
            if h.skip_fill {
                return Ok(vec![]);
            }
            if !h.fill_claims {
                return Ok(store);
            }
        }
        let claim = h.claim.clone();
        let mut code = vec![KStmt::If {
            cond: KExpr::Op(Op::Not, vec![dirty.clone()]),
            then: claim,
            otherwise: vec![],
        }];
        code.extend(store);
        if h.skip_fill_values {
            // Only stores of values other than the fill, and updates by values other than
            // the operator's identity (`+= 0` changes nothing), claim the index: the
            // result holds what a dense run would store. A store an inner loop repeats
            // reaches a position an earlier iteration claimed whatever its value.
            let (v, ty) = self.kexpr(&rhs)?;
            let unchanged = match op {
                None => fill.convert_exact(ty),
                Some(op) => op.identity(ty, crate::algebra::Side::Right),
            };
            if let Some(u) = unchanged {
                let mut cond = KExpr::bin(Op::Ne, v, KExpr::Lit(u));
                if op.is_none() && h.repeated {
                    cond = KExpr::Op(Op::Or, vec![dirty, cond]);
                }
                return Ok(vec![KStmt::If {
                    cond,
                    then: code,
                    otherwise: vec![],
                }]);
            }
        }
        Ok(code)
    }

    /// Converts a value for storing into a tensor of type `to`: identical types, `bool`
    /// into anything, narrower into wider integers of the same signedness, unsigned into
    /// wider signed, and any integer or float into a float (rounded to the nearest, as the
    /// reference engine does). Any other conversion (a wider integer, a float or an `i64`
    /// into a `bool`) is checked where it runs, as Julia's `convert` and the reference
    /// engine do: the statements returned first fail the kernel (`ErrorCode::Inexact`)
    /// unless the value converts back to itself.
    pub(super) fn convert_for_store(
        &mut self,
        v: KExpr,
        from: ScalarType,
        to: ScalarType,
        name: &str,
    ) -> Result<(Vec<KStmt>, KExpr)> {
        if from == to {
            return Ok((vec![], v));
        }
        if let KExpr::Lit(x) = &v {
            // A constant converts exactly or not at all, decided now.
            return x
                .convert_exact(to)
                .map(|c| (vec![], KExpr::Lit(c)))
                .ok_or_else(|| {
                    Error::Program(format!(
                        "the constant {x} cannot be stored exactly into `{name}` ({to})"
                    ))
                });
        }
        let exact = from == ScalarType::Bool
            || (from.is_integer()
                && to.is_integer()
                && from.is_signed_integer() == to.is_signed_integer()
                && from.bits() < to.bits())
            || (from.is_integer()
                && !from.is_signed_integer()
                && to.is_signed_integer()
                && from.bits() < to.bits())
            || (from == ScalarType::F32 && to == ScalarType::F64);
        // An integer or a wider float stored into a float tensor rounds to the nearest
        // value, as Julia's `convert` and the reference engine do (`i64` past 2^53).
        let rounds = to.is_float() && (from.is_integer() || from.is_float());
        if rounds && to == ScalarType::F32 && from.is_integer() {
            // Through `f64`, as every engine's `Value` conversion goes: the same rounding.
            let wide = KExpr::Op(Op::Cast(ScalarType::F64), vec![v]);
            Ok((vec![], KExpr::Op(Op::Cast(to), vec![wide])))
        } else if exact || rounds {
            Ok((vec![], KExpr::Op(Op::Cast(to), vec![v])))
        } else {
            // Exact where the value converts back to itself (casts wrap and truncate, and
            // NaN equals nothing).
            let x = self.fresh(&format!("{name}_stored"), from);
            let narrowed = KExpr::Op(Op::Cast(to), vec![KExpr::Local(x)]);
            let back = KExpr::Op(Op::Cast(from), vec![narrowed.clone()]);
            let check = vec![
                KStmt::Assign(x, v),
                KStmt::If {
                    cond: KExpr::bin(Op::Ne, back, KExpr::Local(x)),
                    then: vec![KStmt::Fail(crate::backend::c::ErrorCode::Inexact as i32)],
                    otherwise: vec![],
                },
            ];
            Ok((check, narrowed))
        }
    }

    /// Lowers `body`, the statements of one index (or run) of written levels, with the
    /// claim flags of the positions they write open: a write of the same level nested in
    /// them (another statement's, at another index) claims through flags of its own
    /// (`Lowerer::own_claim_state`), or it would take this index's claim for its own.
    pub(super) fn lower_claiming(&mut self, mut body: Stmt) -> Result<Vec<KStmt>> {
        let open = self.open_claims.len();
        let claims = &mut self.open_claims;
        crate::looplets::for_each_claim(&mut body, &mut |h| claims.push(h.dirty));
        let code = self.lower(body);
        self.open_claims.truncate(open);
        code
    }
}

/// Does `s` write the scalar `k` (an update or a nested declaration)?
pub(super) fn writes_scalar(s: &Stmt, k: usize) -> bool {
    match s {
        Stmt::Assign { lhs, .. } => matches!(lhs.0, Tensor::Scalar(t) if t == k),
        Stmt::SetScalar(t, _) => *t == k,
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => writes_scalar(body, k),
        Stmt::Sieve {
            then, otherwise, ..
        } => writes_scalar(then, k) || writes_scalar(otherwise, k),
        Stmt::Block(v) => v.iter().any(|s| writes_scalar(s, k)),
        Stmt::Reset(..) | Stmt::Freeze(_) | Stmt::SetLocal(..) | Stmt::Check(..) => false,
    }
}

/// Does a simplified statement do nothing or write only constants? (See
/// `Lowerer::fill_decides`.)
pub(super) fn only_constants(s: &Stmt) -> bool {
    match s {
        Stmt::Assign { rhs, .. } => matches!(rhs, Expr::Lit(_)),
        Stmt::Block(v) => v.iter().all(only_constants),
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => only_constants(body),
        Stmt::Sieve {
            then, otherwise, ..
        } => only_constants(then) && only_constants(otherwise),
        _ => false,
    }
}

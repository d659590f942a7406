//! Expression translation: lowering-IR expressions into kernel-IR ones with their types,
//! `coalesce` of padded reads as selects, and present leaves.

use super::*;

impl Lowerer {
    /// A kernel expression and its type, with explicit conversions to the operator's
    /// common argument type (Julia promotion, as `Op::eval`).
    pub(super) fn kexpr(&mut self, e: &Expr) -> Result<(KExpr, ScalarType)> {
        match e {
            Expr::Lit(v) => match v.scalar_type() {
                Some(t) => Ok((KExpr::Lit(*v), t)),
                None => Err(Error::Unsupported(
                    "a `missing` value (a permissive read outside its tensor) reaching compiled code; wrap the read in `coalesce(..., default)`"
                        .into(),
                )),
            },
            Expr::Code(k) => Ok((k.clone(), kexpr_type(&self.kernel, k))),
            Expr::Index(i) | Expr::Wrapped { index: i, .. } => Err(Error::Program(format!(
                "internal: the index `{i}` is unbound at a leaf"
            ))),
            Expr::Permissive(..) => Err(Error::Program(
                "internal: a permissive index outside an access".into(),
            )),
            Expr::Access(t, idx) => {
                if !idx.is_empty() {
                    return Err(Error::Program(format!(
                        "internal: an access with {} indices left at a leaf ({t:?})",
                        idx.len()
                    )));
                }
                match &**t {
                    Tensor::Scalar(s) => {
                        let l = self.tensors[*s]
                            .scalar
                            .ok_or_else(|| Error::Program("internal: scalar".into()))?;
                        Ok((KExpr::Local(l), self.kernel.locals[l.0 as usize].ty))
                    }
                    Tensor::Fiber(f) => match self.leaf_of(f) {
                        Some(LeafParams::Element { val, .. }) => Ok((
                            KExpr::load(val, f.pos.clone()),
                            self.kernel.bufs[val.0 as usize].elem,
                        )),
                        Some(LeafParams::Pattern) => {
                            Ok((KExpr::Lit(Value::Bool(true)), ScalarType::Bool))
                        }
                        None => Err(Error::Program(
                            "internal: a read of a non-leaf level".into(),
                        )),
                    },
                    Tensor::FillLeaf(v) => self.kexpr(&Expr::Lit(*v)),
                    Tensor::Present { cond, fiber, fill } => self.present_leaf(cond, fiber, *fill),
                    Tensor::Local(l) => Ok((KExpr::Local(*l), self.kernel.locals[l.0 as usize].ty)),
                    Tensor::Switch { .. } => Err(Error::Program(
                        "internal: an unresolved switch at a leaf".into(),
                    )),
                    Tensor::Null => Err(Error::Program("internal: a read of null".into())),
                    Tensor::OutOfRange(_) => Err(Error::Program(
                        "internal: an out-of-range read left in a value".into(),
                    )),
                    Tensor::Value(v) => self.kexpr(v),
                    Tensor::Looplet(l) => Err(Error::Program(format!(
                        "internal: an unlowered looplet {l:?}"
                    ))),
                }
            }
            Expr::Call(Op::Coalesce, args) => self.coalesce_selects(args),
            Expr::Call(op, args) => {
                let parts = args
                    .iter()
                    .map(|a| self.kexpr(a))
                    .collect::<Result<Vec<_>>>()?;
                let tys: Vec<ScalarType> = parts.iter().map(|p| p.1).collect();
                let cast = |(k, t): (KExpr, ScalarType), to: ScalarType| {
                    if t == to {
                        k
                    } else {
                        KExpr::Op(Op::Cast(to), vec![k])
                    }
                };
                let common = tys
                    .iter()
                    .copied()
                    .reduce(promote)
                    .unwrap_or(ScalarType::I64);
                let arith = if common == ScalarType::Bool {
                    ScalarType::I64
                } else {
                    common
                };
                let args: Vec<KExpr> = match op {
                    Op::Add
                    | Op::Sub
                    | Op::Mul
                    | Op::Pow
                    | Op::Div
                    | Op::Rem
                    | Op::RemFn
                    | Op::Mod
                    | Op::IntDiv
                    | Op::Fld
                    | Op::Neg
                    | Op::Abs => parts.into_iter().map(|p| cast(p, arith)).collect(),
                    Op::Shl | Op::Shr => {
                        let mut it = parts.into_iter();
                        let a = it.next().map(|p| {
                            cast(
                                p.clone(),
                                if p.1 == ScalarType::Bool {
                                    ScalarType::I64
                                } else {
                                    p.1
                                },
                            )
                        });
                        a.into_iter().chain(it.map(|p| p.0)).collect()
                    }
                    Op::IfElse => {
                        let value_ty = tys[1..]
                            .iter()
                            .copied()
                            .reduce(promote)
                            .unwrap_or(ScalarType::I64);
                        parts
                            .into_iter()
                            .enumerate()
                            .map(|(k, p)| if k == 0 { p.0 } else { cast(p, value_ty) })
                            .collect()
                    }
                    Op::And
                    | Op::Or
                    | Op::Not
                    | Op::Sqrt
                    | Op::Exp
                    | Op::Log
                    | Op::Sin
                    | Op::Cos
                    | Op::Cast(_) => parts.into_iter().map(|p| p.0).collect(),
                    _ => parts.into_iter().map(|p| cast(p, common)).collect(),
                };
                let arg_tys: Vec<ScalarType> =
                    args.iter().map(|a| kexpr_type(&self.kernel, a)).collect();
                // An integer power has its base's type (`Int8(3) ^ 5` is an `Int8`), but the
                // kernel computes it in the arguments' common type: wrapping multiplication
                // there, then wrapping into the base's type, gives the same bits.
                let narrowed = match (op, tys.as_slice()) {
                    (Op::Pow, [base, exp]) => Op::Pow
                        .eval(&[Value::one_of(*base), Value::one_of(*exp)])
                        .ok()
                        .and_then(|v| v.scalar_type())
                        .filter(|t| t.is_integer()),
                    _ => None,
                };
                match op_type(*op, &arg_tys) {
                    Some(t) => match narrowed {
                        Some(n) if n != t && t.is_integer() => {
                            Ok((KExpr::Op(Op::Cast(n), vec![KExpr::Op(*op, args)]), n))
                        }
                        _ => Ok((KExpr::Op(*op, args), t)),
                    },
                    None => Err(Error::Program(format!(
                        "`{op}` cannot be compiled for arguments of types ({})",
                        tys.iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))),
                }
            }
        }
    }

    /// `coalesce(a, b, ...)` once the only arguments that may be `missing` are leaves read
    /// where a condition holds and `missing` elsewhere (a shifted read of a Dense level
    /// walked segment by segment, see `Lowerer::walk_to_the_end`): a select of each such
    /// leaf where it holds, of the rest where it does not. Its type is the leaf's where
    /// the rest converts to it exactly (the padding literal), else the promoted type.
    pub(super) fn coalesce_selects(&mut self, args: &[Expr]) -> Result<(KExpr, ScalarType)> {
        let Some((first, rest)) = args.split_first() else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        if rest.is_empty() || !crate::simplify::may_be_missing(first) {
            return self.kexpr(first);
        }
        let mut present = Vec::new();
        let Some(read) = crate::simplify::read_where_present(first, &mut present) else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        let Some(cond) = present.into_iter().reduce(|a, b| KExpr::bin(Op::And, a, b)) else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        let (value, value_ty) = self.kexpr(&read)?;
        let (other, other_ty) = self.coalesce_selects(rest)?;
        let ty = match &other {
            _ if other_ty == value_ty => value_ty,
            KExpr::Lit(v) if v.convert_exact(value_ty).is_some() => value_ty,
            _ => promote(value_ty, other_ty),
        };
        let cast = |k: KExpr, t: ScalarType| match k {
            _ if t == ty => k,
            KExpr::Lit(v) => match v.convert_exact(ty) {
                Some(v) => KExpr::Lit(v),
                None => KExpr::Op(Op::Cast(ty), vec![KExpr::Lit(v)]),
            },
            k => KExpr::Op(Op::Cast(ty), vec![k]),
        };
        let select = vec![cond, cast(value, value_ty), cast(other, other_ty)];
        Ok((KExpr::Op(Op::IfElse, select), ty))
    }

    /// A leaf that holds only where `cond` does ([`Tensor::Present`]): a select, which
    /// reads the value only where it exists (C's `?:`); a Pattern leaf is the condition.
    pub(super) fn present_leaf(
        &mut self,
        cond: &KExpr,
        fiber: &crate::looplets::Fiber,
        fill: Value,
    ) -> Result<(KExpr, ScalarType)> {
        let leaf = Expr::Access(Box::new(Tensor::Fiber(fiber.clone())), vec![]);
        let (value, ty) = self.kexpr(&leaf)?;
        if fill.is_missing() {
            // Left where no branch resolves it (`lift-missing` splits assignments on it,
            // `coalesce_selects` reads it): an `if` condition, which the reference
            // refuses where it is `missing`, or an index. Refused as `missing` is.
            return self.kexpr(&Expr::Lit(fill));
        }
        let fill = fill
            .convert_exact(ty)
            .ok_or_else(|| Error::Program(format!("internal: the fill {fill} of a {ty} leaf")))?;
        Ok(match (value, fill) {
            (KExpr::Lit(Value::Bool(true)), Value::Bool(false)) => (cond.clone(), ty),
            (value, fill) => (
                KExpr::Op(Op::IfElse, vec![cond.clone(), value, KExpr::Lit(fill)]),
                ty,
            ),
        })
    }
}

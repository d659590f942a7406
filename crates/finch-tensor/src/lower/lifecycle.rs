//! The lowering of a declaration's lifecycle in the kernel: a sorted-list output frozen
//! before a later statement reads it, a workspace reset by a declaration inside a loop,
//! and a scalar set.

use super::*;

impl Lowerer {
    /// A SparseList output frozen in the kernel: its per-fiber counts become offsets.
    pub(super) fn lower_freeze(&mut self, t: usize) -> Result<Vec<KStmt>> {
        let level = self.tensors[t]
            .levels
            .iter()
            .find(|l| l.write_traits().freezes_in_kernel)
            .cloned();
        let p = self.fresh(&format!("{}_freeze", self.tensors[t].name), ScalarType::I64);
        level
            .and_then(|l| l.freeze_in_kernel(p))
            .ok_or_else(|| Error::Program("internal: freeze of a non-list".into()))
    }

    /// `w .= v` inside a loop: the workspace `t` emptied, each level kind its own way.
    pub(super) fn lower_reset(&mut self, t: usize, v: Value) -> Result<Vec<KStmt>> {
        let levels = self.tensors[t].levels.clone();
        // The leaf's values and the reset value in their type (a Pattern leaf has
        // none).
        let leaf = match levels.last().and_then(LevelParams::as_leaf) {
            Some(LeafParams::Element { val, .. }) => {
                let elem = self.kernel.bufs[val.0 as usize].elem;
                let v = v.convert_exact(elem).ok_or_else(|| {
                    Error::Program(format!(
                        "`{}` ({elem}) cannot be set to {v}",
                        self.tensors[t].name
                    ))
                })?;
                Some((val, v))
            }
            Some(LeafParams::Pattern) => None,
            None => {
                return Err(Error::Program(
                    "internal: reset of a tensor without a leaf".into(),
                ))
            }
        };
        let q = self.fresh(&format!("{}_reset", self.tensors[t].name), ScalarType::I64);
        // The first level with storage of its own decides (a SparseHash group under
        // Dense levels is one table over every mode; all-Dense levels reach the
        // leaf).
        let first = levels.iter().find(|l| !l.is_dense());
        if let Some(code) = first.and_then(|l| l.reset_workspace(leaf, q)) {
            return Ok(code);
        }
        match leaf {
            // A dense workspace: every value.
            Some((val, v)) => Ok(vec![KStmt::For {
                var: q,
                lo: KExpr::int(0),
                hi: KExpr::Len(val),
                body: vec![KStmt::Store {
                    buf: val,
                    index: KExpr::Local(q),
                    value: KExpr::Lit(v),
                }],
            }]),
            None => Err(Error::Program(
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

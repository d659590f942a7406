//! Access translation: each index of a tensor access (windows, offsets, permissive and
//! Toeplitz indices, computed indices, protocols) to the lowering IR, with the loop-order
//! and output-shape facts it implies.

use super::*;

/// One mode of an access being converted.
struct AccessSite<'a> {
    access: &'a notation::Access,
    tensor: usize,
    mode: usize,
    is_write: bool,
}

impl Converter<'_> {
    /// Converts an access: checks bare, concordant indices; records output shapes.
    pub(super) fn access(
        &mut self,
        a: &notation::Access,
        is_write: bool,
    ) -> Result<(Tensor, Vec<Expr>)> {
        let t = self.tensor(&a.tensor)?;
        if self.tensors[t].scalar.is_some() {
            // A SparseScalar read is a run-time choice between its value and its fill, so
            // the statement specializes where it was not written (`0 * x` vanishes).
            if let (Some(dirty), false) = (self.tensors[t].dirty, is_write) {
                return Ok((
                    Tensor::Switch {
                        pre: vec![],
                        cond: KExpr::Local(dirty),
                        then: Box::new(Tensor::Scalar(t)),
                        otherwise: Box::new(Tensor::FillLeaf(self.tensors[t].format.fill_value())),
                    },
                    vec![],
                ));
            }
            return Ok((Tensor::Scalar(t), vec![]));
        }
        let mut depths = Vec::new();
        let mut idx = Vec::new();
        let mut protocols = crate::looplets::Protocols::default();
        for (m, e) in a.indices.iter().enumerate() {
            let site = AccessSite {
                access: a,
                tensor: t,
                mode: m,
                is_write,
            };
            idx.push(self.mode_index(&site, e, &mut depths, &mut protocols)?);
        }
        self.check_loop_order(a, t, &depths, is_write)?;
        if is_write {
            self.record_output_shape(a, t, &depths)?;
            protocols.set_written();
        }
        let root = Tensor::Fiber(Fiber {
            tensor: t,
            depth: 0,
            pos: KExpr::int(0),
            end: None,
            hollow: None,
            protocols,
        });
        Ok((root, idx))
    }

    /// The index of one mode of an access: a window, an offset, permissive or Toeplitz
    /// index, a computed index, or a loop index (with its protocol). The loop depth of a
    /// walked index goes to `depths`.
    fn mode_index(
        &mut self,
        site: &AccessSite,
        e: &notation::Expr,
        depths: &mut Vec<usize>,
        protocols: &mut crate::looplets::Protocols,
    ) -> Result<Expr> {
        if let Some(at) = self.window_index(site, e, depths)? {
            return Ok(at);
        }
        if let Some(at) = self.shifted_index(site, e, depths)? {
            return Ok(at);
        }
        if let Some(at) = self.computed_index(site, e)? {
            return Ok(at);
        }
        self.loop_index(site, e, depths, protocols)
    }

    /// A window `(lo:hi)(j)` or `~(lo:hi)(j)`.
    fn window_index(
        &mut self,
        site: &AccessSite,
        e: &notation::Expr,
        depths: &mut Vec<usize>,
    ) -> Result<Option<Expr>> {
        let (a, t, m, is_write) = (site.access, site.tensor, site.mode, site.is_write);
        // `(lo:hi)(j)`: index `lo + j - 1`, `j` in `1:hi-lo+1` (Finch's WindowedTensor
        // under an OffsetTensor); the window is checked inside the mode when tensors
        // are bound. `~(lo:hi)(j)` reads `missing` (writes nothing) outside the tensor.
        let (window, permissive) = match e {
            notation::Expr::Permissive(x) if matches!(**x, notation::Expr::Window { .. }) => {
                (&**x, true)
            }
            e => (e, false),
        };
        if let notation::Expr::Window {
            lo,
            hi,
            index: within,
        } = window
        {
            let walked = match &**within {
                notation::Expr::Index(name) if !self.around_declaration(t, m, name) => Some(name),
                _ => None,
            };
            let Some(name) = walked else {
                // An expression: index `lo + e - 1` computed (and concordized), made
                // out of range when `e` is outside the window so the read fails as the
                // reference's does. A permissive window reads `missing` outside the
                // tensor, but `e` outside the window is still an error: the read's
                // guard.
                if let (Ok(lo), Ok(hi), false) = (self.bound(lo), self.bound(hi), permissive) {
                    self.windows.push(WindowCheck {
                        tensor: t,
                        mode: m,
                        lo,
                        hi,
                    });
                }
                if is_write && !self.tensors[t].takes_writes_in_any_order() {
                    self.needs_any_order(t, format!(
                        "writing `{}` through a window: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                        a.tensor
                    ))?;
                }
                let call = |op: Op, args: Vec<notation::Expr>| notation::Expr::Call { op, args };
                let int = |n: i64| notation::Expr::Literal(Value::I64(n));
                let (e, lo, hi) = ((**within).clone(), (**lo).clone(), (**hi).clone());
                let span = call(Op::Add, vec![call(Op::Sub, vec![hi, lo.clone()]), int(1)]);
                let inside = call(
                    Op::And,
                    vec![
                        call(Op::Le, vec![int(1), e.clone()]),
                        call(Op::Le, vec![e.clone(), span]),
                    ],
                );
                let at = call(Op::Add, vec![lo, call(Op::Sub, vec![e, int(1)])]);
                if permissive {
                    let guard = Box::new(self.expr(&inside)?);
                    return Ok(Some(Expr::Permissive(
                        Box::new(self.expr(&at)?),
                        Some(guard),
                    )));
                }
                return Ok(Some(
                    self.expr(&call(Op::IfElse, vec![inside, at, int(0)]))?,
                ));
            };
            // Bounds known when tensors are bound are checked then; bounds from
            // enclosing indices, where the loop over the window starts.
            match (self.bound(lo), self.bound(hi)) {
                (Ok(lo), Ok(hi)) => {
                    if !permissive {
                        self.windows.push(WindowCheck {
                            tensor: t,
                            mode: m,
                            lo,
                            hi,
                        })
                    }
                }
                _ if self.known_at_loop(lo) && self.known_at_loop(hi) => {}
                (lo, hi) => {
                    lo?;
                    hi?;
                }
            }
            if is_write {
                if !self.tensors[t].takes_writes_in_any_order() {
                    self.needs_any_order(t, format!(
                        "writing `{}` through a window: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                        a.tensor
                    ))?;
                }
                let at = notation::Expr::Call {
                    op: Op::Add,
                    args: vec![
                        (**within).clone(),
                        notation::Expr::Call {
                            op: Op::Sub,
                            args: vec![(**lo).clone(), notation::Expr::Literal(Value::I64(1))],
                        },
                    ],
                };
                let at = self.expr(&at)?;
                return Ok(Some(if permissive {
                    Expr::Permissive(Box::new(at), None)
                } else {
                    at
                }));
            }
            let depth = self.loop_depth(name, &a.tensor)?;
            depths.push(depth);
            return Ok(Some(Expr::Wrapped {
                index: name.clone(),
                offset: -1,
                by: Some(Box::new(self.expr(lo)?)),
                permissive,
                in_bounds: !permissive,
            }));
        }
        Ok(None)
    }

    /// An offset, permissive or Toeplitz index (`i + c`, `~i`, `i + e`).
    fn shifted_index(
        &mut self,
        site: &AccessSite,
        e: &notation::Expr,
        depths: &mut Vec<usize>,
    ) -> Result<Option<Expr>> {
        let (a, t, m, is_write) = (site.access, site.tensor, site.mode, site.is_write);
        // `i + c`, `~i`, `~(i + c)`: an offset and/or permissive read (wrapperization).
        let wrapped = match e {
            notation::Expr::Permissive(x) => {
                crate::reference::dims::offset_index(x).map(|(i, c)| (i, c, true))
            }
            other => crate::reference::dims::offset_index(other)
                .filter(|&(_, c)| c != 0)
                .map(|(i, c)| (i, c, false)),
        };
        let wrapped = wrapped.filter(|(name, ..)| !self.around_declaration(t, m, name));
        let random_writes = self.tensors[t].takes_writes_in_any_order();
        if let Some((name, offset, permissive)) = wrapped {
            if is_write {
                if !random_writes {
                    self.needs_any_order(t, format!(
                        "writing `{}[{}]` through an offset or permissive index: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                        a.tensor,
                        notation::print_expr(e)
                    ))?;
                }
                // A shifted write is a write at a computed index (concordized at the
                // leaf); a permissive one outside the tensor is dropped.
                let at = match e {
                    notation::Expr::Permissive(x) => {
                        Expr::Permissive(Box::new(self.expr(x)?), None)
                    }
                    other => self.expr(other)?,
                };
                let _ = (name, offset, permissive);
                return Ok(Some(at));
            }
            let depth = self.loop_depth(name, &a.tensor)?;
            depths.push(depth);
            return Ok(Some(Expr::Wrapped {
                index: name.to_string(),
                offset,
                by: None,
                permissive,
                in_bounds: true,
            }));
        }
        // `i + e` or `~(i + e)`, `e` computed from indices of loops around `i`'s
        // (Finch's ToeplitzTensor): the level is walked in `i`'s loop, shifted by `e`;
        // outside the tensor a permissive read is `missing` and any other stops the
        // kernel where it is read.
        let (inner, permissive) = match e {
            notation::Expr::Permissive(x) => (&**x, true),
            other => (other, false),
        };
        if !is_write {
            let toeplitz = self
                .toeplitz(inner)
                .filter(|(name, _)| !self.around_declaration(t, m, name));
            if let Some((name, rest)) = toeplitz {
                let depth = self
                    .loops
                    .iter()
                    .position(|(n, _)| *n == name)
                    .ok_or_else(|| Error::Program("internal: toeplitz index".into()))?;
                depths.push(depth);
                return Ok(Some(Expr::Wrapped {
                    index: name,
                    offset: 0,
                    by: Some(Box::new(self.expr(&rest)?)),
                    permissive,
                    in_bounds: false,
                }));
            }
        }
        Ok(None)
    }

    /// Any other index expression of loop indices (`I[i]`, `i + j`): its value is
    /// computed, then read through a one-index loop (concordization).
    fn computed_index(&mut self, site: &AccessSite, e: &notation::Expr) -> Result<Option<Expr>> {
        let (a, t, is_write) = (site.access, site.tensor, site.is_write);
        // Any other index expression of loop indices (`I[i]`, `i + j`): its value is
        // computed, then read through a one-index loop (concordization).
        let computed = !matches!(e, notation::Expr::Index(_) | notation::Expr::Protocol(..));
        if computed {
            let writable = self.tensors[t].takes_writes_in_any_order();
            if is_write && !writable {
                self.needs_any_order(t, format!(
                    "writing `{}[{}]` at a computed index: only Dense, SparseByteMap and SparseHash levels take writes in any order",
                    a.tensor,
                    notation::print_expr(e)
                ))?;
            }
            // `~(expr)`: out of the tensor a read is `missing` and a write is dropped.
            if let notation::Expr::Permissive(x) = e {
                return Ok(Some(Expr::Permissive(Box::new(self.expr(x)?), None)));
            }
            return Ok(Some(self.expr(e)?));
        }
        Ok(None)
    }

    /// A loop index, bare or under a protocol (`i`, `gallop(i)`), or the index of a loop
    /// around the tensor's declaration (a value).
    fn loop_index(
        &mut self,
        site: &AccessSite,
        e: &notation::Expr,
        depths: &mut Vec<usize>,
        protocols: &mut crate::looplets::Protocols,
    ) -> Result<Expr> {
        let (a, t, m, is_write) = (site.access, site.tensor, site.mode, site.is_write);
        let ndims = a.indices.len();
        let name = match e {
            notation::Expr::Index(i) => i,
            notation::Expr::Protocol(p @ (notation::Protocol::Follow | notation::Protocol::Gallop), x) if !is_write && ndims - 1 - m < crate::looplets::Protocols::MAX_DEPTH => match &**x {
                notation::Expr::Index(i) => {
                    if *p == notation::Protocol::Follow {
                        protocols.set_follow(ndims - 1 - m);
                    } else {
                        protocols.set_gallop(ndims - 1 - m);
                    }
                    i
                }
                _ => return unsupported(format!("a protocol around a non-index in `{}[...]`", a.tensor)),
            },
            notation::Expr::Protocol(p, x) => match &**x {
                notation::Expr::Index(i) if *p == notation::Protocol::Walk || *p == notation::Protocol::Extrude => i,
                _ => return unsupported(format!("the protocol `{}` in `{}[...]` (reads take `walk`, `gallop` and `follow`)", p.name(), a.tensor)),
            },
            other => {
                return unsupported(format!(
                    "the index `{}` of `{}` is not compiled (accesses take loop indices, windows, protocols, and expressions of indices and scalars)",
                    notation::print_expr(other),
                    a.tensor
                ))
            }
        };
        if self.around_declaration(t, m, name) {
            if is_write && !self.tensors[t].takes_writes_in_any_order() {
                self.needs_any_order(t, format!(
                    "writing `{}` at `{name}`, the index of a loop around its declaration: only Dense, SparseByteMap and SparseHash levels take writes at an index fixed for the whole declaration",
                    a.tensor
                ))?;
            }
            // A value, not `Index` (which the loop would walk): the cast keeps the
            // simplifier from folding it back.
            let at = Expr::Call(Op::Cast(ScalarType::I64), vec![Expr::Index(name.clone())]);
            return Ok(at);
        }
        let depth = self.loop_depth(name, &a.tensor)?;
        depths.push(depth);
        Ok(Expr::Index(name.clone()))
    }

    /// Concordant: the last index is bound outermost (Finch is column-major). A read out of
    /// that order is concordized at the leaf with a warning; a write out of it needs levels
    /// that take writes in any order, and one that writes every mode is a single pass.
    fn check_loop_order(
        &mut self,
        a: &notation::Access,
        t: usize,
        depths: &[usize],
        is_write: bool,
    ) -> Result<()> {
        // Concordant: the last index is bound outermost (Finch is column-major). A read
        // out of that order is concordized at the leaf (random access into the levels
        // below the first out-of-order index); a write must be to levels that take writes
        // in any order.
        let random_writes = self.tensors[t].takes_writes_in_any_order();
        if depths.windows(2).any(|w| w[0] <= w[1]) && !is_write {
            let sparse = self.tensors[t].levels.iter().any(|l| {
                !matches!(
                    l,
                    LevelParams::Dense { .. } | LevelParams::Element { .. } | LevelParams::Pattern
                )
            });
            if sparse {
                self.warnings.push(format!(
                    "the read `{}[{}]` is not in loop order (its last index should be the outermost loop); its sparse levels are searched at each access (reorder the loops or store `{}` transposed to avoid it)",
                    a.tensor,
                    a.indices.iter().map(notation::print_expr).collect::<Vec<_>>().join(", "),
                    a.tensor
                ));
            }
        } else if depths.windows(2).any(|w| w[0] <= w[1]) && !random_writes {
            self.needs_any_order(t, format!(
                "the write `{}[{}]` is not in loop order (the last index must be the outermost loop), and only Dense, SparseByteMap and SparseHash levels take writes in any order",
                a.tensor,
                a.indices.iter().map(notation::print_expr).collect::<Vec<_>>().join(", ")
            ))?;
        }
        if is_write && depths.len() == a.indices.len() {
            self.check_single_pass(t, depths, a)?;
        }
        Ok(())
    }

    /// The sizes an output takes from the loops that write it.
    fn record_output_shape(
        &mut self,
        a: &notation::Access,
        t: usize,
        depths: &[usize],
    ) -> Result<()> {
        if let Some(&d) = depths.iter().find(|&&d| self.loop_offsets[d] != 0) {
            return unsupported(format!(
                "writing `{}` indexed by `{}`, which runs over shifted indices (an output sized by an offset loop)",
                a.tensor, self.loops[d].0
            ));
        }
        let sizes: Vec<Option<Size>> = depths.iter().map(|&d| self.loops[d].1.clone()).collect();
        let entry = self
            .output_shapes
            .entry(t)
            .or_insert_with(|| vec![None; sizes.len()]);
        for (slot, s) in entry.iter_mut().zip(sizes) {
            if slot.is_none() {
                *slot = s;
            }
        }
        Ok(())
    }
}

//! Statement translation: each statement of the program AST to the lowering IR, with the
//! declarations, writes and loop extents it implies.

use super::*;

impl Converter<'_> {
    pub(super) fn stmt(&mut self, s: &notation::Stmt) -> Result<Stmt> {
        let top = std::mem::replace(&mut self.top_level, false);
        let r = self.stmt_inner(s, top);
        self.top_level = top;
        r
    }

    fn stmt_inner(&mut self, s: &notation::Stmt, top: bool) -> Result<Stmt> {
        Ok(match s {
            notation::Stmt::Block(v) => return self.block(v, top),
            notation::Stmt::Declare { tensor, init } => return self.declare(tensor, init, top),
            notation::Stmt::Assign { lhs, op, rhs } => return self.assign(lhs, op, rhs),
            notation::Stmt::Loop {
                index,
                extent,
                body,
            } => return self.loop_stmt(index, extent, body),
            notation::Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => common_scope_reads(
                Stmt::Sieve {
                    cond: self.expr(cond)?,
                    then: Box::new(self.stmt(then)?),
                    otherwise: Box::new(match otherwise {
                        Some(o) => self.stmt(o)?,
                        None => Stmt::Block(vec![]),
                    }),
                },
                &mut self.cse_count,
            ),
            notation::Stmt::Define { var, value, body } => {
                let value = self.expr(value)?;
                self.lets.push(var.clone());
                let body = self.stmt(body);
                self.lets.pop();
                common_scope_reads(
                    Stmt::Define {
                        var: format!("let:{var}"),
                        value,
                        body: Box::new(body?),
                    },
                    &mut self.cse_count,
                )
            }
            notation::Stmt::Freeze(_) | notation::Stmt::Thaw(_) => Stmt::Block(vec![]),
            notation::Stmt::Return(_) => {
                if !top {
                    return unsupported("`return` inside a loop or branch");
                }
                Stmt::Block(vec![])
            }
        })
    }

    /// A block; at the top level, a sparse output written in order is frozen before a
    /// later statement reads it.
    fn block(&mut self, v: &[notation::Stmt], top: bool) -> Result<Stmt> {
        let mut out = Vec::new();
        for s in v {
            if top {
                // A SparseList output written by an earlier statement and read by
                // this one is frozen first; writing it again after is refused.
                let (mut reads, mut writes, mut declared) = Default::default();
                collect_uses(s, &mut reads, &mut writes, &mut declared);
                for name in &reads {
                    let Some(&t) = self.by_name.get(name) else {
                        continue;
                    };
                    // A SparseList output level right above the leaf.
                    let list_out = self.tensors[t]
                        .levels
                        .iter()
                        .rev()
                        .nth(1)
                        .is_some_and(|l| l.write_traits().freezes_in_kernel);
                    if list_out
                        && self.sparse_written.contains(&t)
                        && !self.tensors[t].frozen_in_kernel
                    {
                        self.tensors[t].frozen_in_kernel = true;
                        out.push(Stmt::Freeze(t));
                    }
                }
                for name in &writes {
                    if let Some(&t) = self.by_name.get(name) {
                        if self.tensors[t].frozen_in_kernel {
                            return unsupported(format!(
                                "writing `{name}` after a statement read it (a sparse output written in order is frozen when read; declare it again to write it anew)"
                            ));
                        }
                    }
                }
            }
            // Statements of a top-level block are still top level.
            self.top_level = top;
            out.push(self.stmt(s)?);
            // A `return` ends the program: what follows never runs.
            if top && s.returns() {
                break;
            }
        }
        Ok(if top {
            Stmt::Block(out)
        } else {
            common_scope_reads(Stmt::Block(out), &mut self.cse_count)
        })
    }

    /// `tensor .= init`: a scalar set, a reset inside a loop, or the initial value of an
    /// output allocated by the run time.
    fn declare(&mut self, tensor: &str, init: &notation::Expr, top: bool) -> Result<Stmt> {
        let t = self.tensor(tensor)?;
        self.declared_at.insert(t, self.loops.len());
        let init = match self.expr(init)? {
            Expr::Lit(v) => v,
            _ => return unsupported(format!("`{tensor} .= ...` with a non-constant value")),
        };
        if self.tensors[t].scalar.is_some() {
            let fill = self.tensors[t].format.fill_value();
            let is_fill = fill
                .scalar_type()
                .and_then(|ty| init.convert_exact(ty))
                .is_some_and(|v| v.same(&fill));
            if let (Some(_), Format::Scalar(kind, _)) =
                (self.tensors[t].dirty, &self.tensors[t].format)
            {
                if !is_fill {
                    return Err(Error::Program(format!(
                        "`{tensor} .= {init}`: a {} is declared with its fill value ({fill}); until it is written it reads as the fill",
                        kind.name()
                    )));
                }
            }
            return Ok(Stmt::SetScalar(t, Expr::Lit(init)));
        }
        let dense = self.tensors[t].holds_dense_values();
        // A vector of one level over the leaf, emptied where it was set, or as a
        // sorted vector written in order, then read, per iteration.
        let vector = match self.tensors[t].levels.as_slice() {
            [level, leaf] if leaf.is_leaf() => Some(level.write_traits()),
            _ => None,
        };
        let byte_map = vector.is_some_and(|w| w.marks_dense_children);
        let runs = readable_runs(&self.tensors[t]);
        // A SparseHash group, under leading Dense levels or not: one table over
        // every mode, emptied as a whole.
        let hash = self.tensors[t]
            .levels
            .iter()
            .find(|l| !l.is_dense())
            .is_some_and(|l| {
                let w = l.write_traits();
                w.repeated && w.child_grows
            });
        let list =
            self.tensors[t].kind == DeclKind::Temp && vector.is_some_and(|w| w.freezes_in_kernel);
        // A sparse level holds only what differs from its fill: the positions a
        // kernel leaves unwritten read as the fill, in an output or a workspace,
        // at the top level or in a loop (Finch.jl's Element level refuses any value
        // but the fill, under a dense level too).
        let sparse = self.tensors[t]
            .levels
            .iter()
            .any(LevelParams::is_sparse_out);
        let fill = self.tensors[t].format.fill_value();
        if sparse
            && !init
                .convert_exact(fill.scalar_type().unwrap_or(ScalarType::F64))
                .is_some_and(|v| v.same(&fill))
        {
            return unsupported(format!(
                "declaring the sparse tensor `{tensor}` with {init}, which is not its fill value {fill} (a sparse level stores only what differs from the fill, as in Finch.jl); write `{tensor} .= {fill}`, or give `{tensor}` the leaf `Element({init})` to start from {init}, or Dense levels"
            ));
        }
        if !top {
            if self.tensors[t].kind == DeclKind::Input {
                return unsupported(format!(
                    "declaring the input `{tensor}` inside a loop or branch; declare an output or `temp` and copy `{tensor}` into it"
                ));
            }
            if !(dense || byte_map || runs || hash || list) {
                // Any other format is written as one SparseHash group below its
                // leading Dense levels, which a declaration empties, and built in
                // its own format when frozen (the conversion is done again).
                self.needs_any_order(t, format!(
                    "declaring `{tensor}` inside a loop or branch: its levels must take writes in any order; declare it with Dense, SparseByteMap or SparseHash levels over an Element or Pattern leaf"
                ))?;
                return Ok(Stmt::Block(vec![]));
            }
            // Allocated once by the run time; reset here on every execution.
            self.tensors[t].init.get_or_insert(init);
            return Ok(Stmt::Reset(t, init));
        }
        if self.tensors[t].kind == DeclKind::Input {
            return unsupported(format!("re-declaring the input `{tensor}`"));
        }
        self.tensors[t].init = Some(init);
        Ok(Stmt::Block(vec![]))
    }

    /// `lhs op= rhs`: a write, checked against the output's format and declaration.
    fn assign(
        &mut self,
        lhs: &notation::Access,
        op: &AssignOp,
        rhs: &notation::Expr,
    ) -> Result<Stmt> {
        let t = self.tensor(&lhs.tensor)?;
        let sparse = self.tensors[t].levels.iter().any(is_extruded);
        if sparse && !self.sparse_written.insert(t) {
            self.needs_any_order(t, format!(
                "`{}` is written by more than one statement; a sparse output of this format is written once, in order",
                lhs.tensor
            ))?;
        }
        let input = self.tensors[t].kind == DeclKind::Input;
        let dense = self.tensors[t].holds_dense_values();
        if input && !dense {
            return unsupported(format!(
                "updating the input `{}` in place: only inputs of Dense levels over an Element leaf can be updated in place",
                lhs.tensor
            ));
        }
        // An input updated in place starts from its values (no declaration needed).
        if !input && self.tensors[t].scalar.is_none() && self.tensors[t].init.is_none() {
            return Err(Error::Program(format!(
                "`{}` is written before it is declared (add `{} .= ...` before the loops)",
                lhs.tensor, lhs.tensor
            )));
        }
        let (tensor, idx) = self.access(lhs, true)?;
        let op = match op {
            AssignOp::Store => None,
            AssignOp::Reduce(op) => Some(*op),
        };
        let rhs = self.expr(rhs)?;
        Ok(common_scope_reads(
            Stmt::Assign {
                lhs: (tensor, idx),
                op,
                rhs,
            },
            &mut self.cse_count,
        ))
    }

    /// `for index = extent: body`, after the checks of windows computed from enclosing
    /// indices.
    fn loop_stmt(&mut self, index: &str, extent: &Extent, body: &notation::Stmt) -> Result<Stmt> {
        // Windows `A[(lo:hi)(i)]` give `i` the span of the window.
        let (spans, dynamic) = self.window_uses(index, body)?;
        let (size, offset, mut range) = self.loop_size(index, extent, body, &spans, &dynamic)?;
        // The loop statements run first: spans of windows computed from enclosing
        // indices, and their checks.
        let mut before = self.window_length_checks(index, &size, offset, &mut range, &dynamic)?;
        if let Some(size) = &size {
            for span in &spans {
                if span != size {
                    if offset != 0 {
                        return unsupported(format!(
                            "a window and an offset read of `{index}` in one loop (read one of them permissively, `~`)"
                        ));
                    }
                    self.constraints
                        .push((span.clone(), size.clone(), index.to_string()));
                }
            }
        }
        self.loops.push((index.to_string(), size));
        self.loop_offsets.push(offset);
        let body = self.stmt(body);
        self.loop_offsets.pop();
        let (_, size) = self.loops.pop().unwrap_or_default();
        let (lo, hi) = self.loop_bounds(index, range, size, offset)?;
        let l = Stmt::Loop {
            index: index.to_string(),
            lo,
            hi,
            body: Box::new(body?),
        };
        Ok(if before.is_empty() {
            l
        } else {
            before.push(l);
            Stmt::Block(before)
        })
    }
}

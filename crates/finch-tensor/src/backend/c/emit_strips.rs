//! Prefetching strips in a reassociating kernel's vectorized copies: their loops are
//! printed from the lowered kernel, which the vectorizer (`simd.rs`) recognises, so the
//! strips pass (`kernel/passes/strips.rs`) has not run on them; the scalar loops the
//! vectorizer does not take are printed here in strips, with the pass's analysis. A
//! second `impl Emitter` block beside `emit.rs`.

use std::fmt::Write;

use crate::error::Result;
use crate::kernel::passes::strips::{
    elem_bytes, streams, strip_len, PREFETCH_AHEAD, PREFETCH_BYTES,
};
use crate::kernel::{BufId, KExpr, KStmt, LocalId};

use super::emit::{CheckMode, Emitter};

impl Emitter<'_> {
    /// In trusted code: the loads a loop over `var` prefetches as it runs in strips (see
    /// `kernel/passes/strips.rs`); `walk` is the bound of a `while` loop.
    pub(super) fn prefetched(
        &self,
        var: LocalId,
        walk: Option<&KExpr>,
        body: &[KStmt],
    ) -> Option<Vec<(BufId, KExpr)>> {
        if self.mode != CheckMode::Trusted {
            return None;
        }
        let outermost = walk.is_none() && self.loops.is_empty();
        streams(self.k, var, walk, body, outermost)
    }

    /// Strips of the loop over `var` while at least a strip of iterations ([`strip_len`])
    /// remain before `end` (C): the prefetches, then that many iterations of `body` (a
    /// `for` loop's variable advanced after each, a walk's by its body). The loop that
    /// follows runs the rest.
    pub(super) fn strips(
        &mut self,
        end: &str,
        var: LocalId,
        streams: &[(BufId, KExpr)],
        body: &[KStmt],
        level: usize,
    ) -> Result<()> {
        let strip = strip_len(self.k, streams);
        let pad = "  ".repeat(level);
        let v = self.local(var);
        let _ = writeln!(self.out, "{pad}while ({end} - {v} >= {strip}) {{");
        self.prefetches(streams, &format!("{pad}  "));
        let walk = body
            .iter()
            .any(|s| matches!(s, KStmt::Assign(l, _) if *l == var));
        let step = if walk {
            String::new()
        } else {
            format!(", {v}++")
        };
        let _ = writeln!(
            self.out,
            "{pad}  for (int k_ = 0; k_ < {strip}; k_++{step}) {{"
        );
        self.block(body, level + 2)?;
        let _ = writeln!(self.out, "{pad}  }}\n{pad}}}");
        Ok(())
    }

    /// One prefetch per stream, [`PREFETCH_BYTES`] past its position now.
    fn prefetches(&mut self, streams: &[(BufId, KExpr)], pad: &str) {
        for (b, index) in streams {
            let (p, i) = (self.ptr(*b), self.expr(index));
            let ahead = self.k.bufs.get(b.0 as usize).map_or(PREFETCH_AHEAD, |buf| {
                PREFETCH_BYTES / elem_bytes(buf.elem, buf.narrow)
            });
            let _ = writeln!(self.out, "{pad}{}", super::emit::prefetch(&p, &i, ahead));
        }
    }
}

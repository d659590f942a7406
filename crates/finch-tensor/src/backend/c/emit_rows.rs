//! Printing of rows that walk over steps run together (a SparseBlockList row's blocks),
//! which `kernel/passes/jam.rs` recognises and the jam pass leaves whole, and of the
//! prefetching strips of those rows and of a vectorized copy's scalar loops (elsewhere the
//! strips pass made them). A second `impl Emitter` block beside `emit.rs`, which keeps the
//! printing of statements and expressions.

use std::fmt::Write;

use crate::algebra::{Op, ScalarType};
use crate::error::{Error, Result};
use crate::kernel::passes::jam::ROWS;
use crate::kernel::{BufId, KExpr, KStmt, LocalId};

use super::emit::{c_type, storage_type, CheckMode, Emitter};

/// The fewest iterations the probed rows' inner loops must have on average for a row loop
/// whose rows walk over steps (a SparseBlockList row's blocks) to run several rows at a
/// time (see `Emitter::walk_rows`): each stretch the rows run together ends in a branch
/// the predictor misses, so short steps lose more than the interleaved chains gain.
/// Zen 3, strict SpMV, generated, four rows against the plain loop in one process: blocks
/// of 32 on average (synthetic) 0.66 -> 0.48 ms, qc324 (33) 0.017 -> 0.009 ms, bcsstk16
/// (7.8) 0.214 -> 0.185 ms, bcsstk38 (6.6) 0.42 -> 0.53 ms (slower), mbeacxc (3.5) 0.080
/// -> 0.083 ms.
const WALK_MIN: usize = 8;

/// The most inner-loop iterations, estimated from the probed rows, over which a row loop
/// runs along its walks [`ROWS`] rows at a time (see [`WALK_MIN`]); over more, it runs
/// [`WALK_FAR_ROWS`] at a time with prefetching strips. With the rows' data in cache four
/// rows gain most (strict SpMV on Zen 3, generated, against the plain loop: qc324, 26730
/// entries, 0.017 -> 0.009 ms, two rows 0.015; bcsstk16, 290378, 0.27 -> 0.19-0.25 ms),
/// but from further away four rows' streams outrun their prefetches (rows of three blocks
/// of 32 entries on average: 10000 rows 0.66 -> 0.45 ms run after run, but slower when the
/// other variants of `finch-bench structure` ran in between; 20000 rows 1.40 -> 1.54 ms,
/// 40000 rows 3.1 -> 4.2-4.5 ms, with prefetching strips too).
const WALK_MAX: usize = 1 << 19;

/// The rows a row loop runs at a time along its walks over more than [`WALK_MAX`]
/// iterations, in strips that prefetch each row's streams once a cache line (hand-written,
/// against the plain loop, Zen 3: 20000 rows of three blocks of 32 entries 1.40 -> 1.19-1.32
/// ms, 40000 rows 3.1 -> 2.9 ms; without the prefetches 2.5 and 5.3 ms).
const WALK_FAR_ROWS: usize = 2;

/// The rows, evenly spaced, whose walks decide whether and how many at a time a row loop
/// runs along its walks (see [`WALK_MIN`] and [`WALK_MAX`]).
const WALK_PROBES: usize = 16;

impl Emitter<'_> {
    /// In a kernel that keeps its floating-point order (trusted, scalar): the parts of a
    /// row loop that can run several rows at a time (see `jam`), when nothing in it can fail.
    pub(super) fn joint_rows<'b>(
        &self,
        var: LocalId,
        lo: &KExpr,
        hi: &KExpr,
        body: &'b [KStmt],
    ) -> Option<crate::kernel::passes::jam::Rows<'b>> {
        if !self.in_order_scalar()
            || self.plain_rows
            || !self.row_own.is_empty()
            || self.fallible(lo)
            || self.fallible(hi)
        {
            return None;
        }
        let mut fallible = false;
        crate::kernel::visit_exprs(body, &mut |e| fallible |= self.fallible(e));
        if fallible {
            return None;
        }
        crate::kernel::passes::jam::rows(self.k, &self.reads, var, body)
    }

    /// The row loop `row_loop` one row at a time, where the rows' probe decides against
    /// running them together.
    fn plain_copy(&mut self, row_loop: &KStmt, level: usize) -> Result<()> {
        self.plain_rows = true;
        let done = self.stmt(row_loop, level);
        self.plain_rows = false;
        done
    }

    /// The opening of rows run together (`how`: a note for the comment): the row loop's
    /// bounds as `lo_{v}` and `hi_{v}` in a new C block, and the rows' own locals; returns
    /// `v` and the row loop's body.
    fn open_rows<'b>(
        &mut self,
        row_loop: &'b KStmt,
        rows: &crate::kernel::passes::jam::Rows,
        how: &str,
        pad: &str,
    ) -> Result<(u32, &'b [KStmt])> {
        let KStmt::For { var, lo, hi, body } = row_loop else {
            return Err(Error::Program(
                "internal: rows of a loop that is not a for".into(),
            ));
        };
        let v = var.0;
        let (l, h) = (self.expr(lo), self.expr(hi));
        let _ = writeln!(
            self.out,
            "{pad}{{ /* {ROWS} rows at a time{how} */ int64_t lo_{v} = {l}; int64_t hi_{v} = {h};"
        );
        self.own_copies(rows, pad);
        Ok((v, body))
    }

    /// The copies of a row's own locals for the rows past the first (see `jam`), from
    /// here on named `w{row}_{n}`.
    fn own_copies(&mut self, rows: &crate::kernel::passes::jam::Rows, pad: &str) {
        self.row_own = rows.own.iter().copied().collect();
        for r in 1..ROWS {
            self.row = r;
            for x in &rows.own {
                let (t, name) = (c_type(self.k.locals[x.0 as usize].ty), self.local(*x));
                let _ = writeln!(self.out, "{pad}{t} {name} = 0; (void){name};");
            }
        }
        self.row = 0;
    }

    /// A row's count of inner iterations and the offsets of its loads at consecutive
    /// positions (`based`) at its inner loop's first iteration, simplified through the
    /// definitions of `setup` (what runs right before the inner loop), so that the C
    /// compiler sees each row's base as the few loads it is (a band row's values start at
    /// its `ofs`, not at `last - 1 - ofs_end + (last - len + 1)`).
    fn count_and_offsets(
        &self,
        rows: &crate::kernel::passes::jam::Rows,
        based: &[(BufId, KExpr)],
        setup: &[KStmt],
    ) -> (KExpr, Vec<KExpr>) {
        let (j, jlo, jhi, _) = rows.inner;
        let defs = crate::kernel::passes::jam::setup_definitions(self.k, setup);
        let is_i64 = |e: &KExpr| self.ty(e) == ScalarType::I64;
        let simplified = |e: &KExpr| {
            crate::kernel::passes::jam::affine(e, &defs, &is_i64)
                .map_or_else(|| e.clone(), |f| f.to_expr())
        };
        let count = simplified(&KExpr::Op(Op::Sub, vec![jhi.clone(), jlo.clone()]));
        let offsets = based
            .iter()
            .map(|(_, i)| simplified(&crate::kernel::passes::jam::substitute(i, j, jlo)))
            .collect();
        (count, offsets)
    }

    /// The loop `row_loop` several rows at a time along their walks (see `jam::Walk`)
    /// where the inner loops of [`WALK_PROBES`] rows evenly spaced have [`WALK_MIN`]
    /// iterations or more on average, else plain: [`ROWS`] at a time where all rows, so
    /// estimated, have at most [`WALK_MAX`], else [`WALK_FAR_ROWS`] in prefetching strips.
    pub(super) fn walk_rows(
        &mut self,
        row_loop: &KStmt,
        rows: &crate::kernel::passes::jam::Rows,
        walk: &crate::kernel::passes::jam::Walk,
        level: usize,
    ) -> Result<()> {
        let pad = "  ".repeat(level);
        let how = format!(", along their walks ({WALK_FAR_ROWS} over {WALK_MAX} iterations)");
        let (v, body) = self.open_rows(row_loop, rows, &how, &pad)?;
        let (count, _) = self.count_and_offsets(rows, &[], walk.head);
        let count = self.expr(&count);
        // Up to [`WALK_PROBES`] rows, evenly spaced, walked once more (assignments only,
        // so running them again changes nothing), count their steps and iterations.
        let _ = writeln!(
            self.out,
            "{pad}int64_t ent_ = 0, runs_ = 0, probed_ = 0;\n{pad}if (lo_{v} < hi_{v}) {{\n{pad}  int64_t step_ = (int64_t)(((uint64_t)hi_{v} - (uint64_t)lo_{v}) / {WALK_PROBES}u) + 1;\n{pad}  for (v{v} = lo_{v}; v{v} < hi_{v}; v{v} = (uint64_t)hi_{v} - (uint64_t)v{v} > (uint64_t)step_ ? v{v} + step_ : hi_{v}) {{\n{pad}    probed_++;"
        );
        self.block(rows.prefix, level + 2)?;
        if let Some(g) = rows.guard {
            let _ = writeln!(self.out, "{pad}    if ({}) {{", self.expr(g));
        }
        self.block(walk.preloop, level + 3)?;
        let _ = writeln!(self.out, "{pad}      while ({}) {{", self.expr(walk.cond));
        self.block(walk.head, level + 4)?;
        let _ = writeln!(
            self.out,
            "{pad}        int64_t c_ = {count}; if (c_ > 0) ent_ += c_; runs_++;"
        );
        self.block(walk.tail, level + 4)?;
        let _ = writeln!(self.out, "{pad}      }}");
        if rows.guard.is_some() {
            let _ = writeln!(self.out, "{pad}    }}");
        }
        let _ = writeln!(self.out, "{pad}  }}\n{pad}}}");
        let _ = writeln!(
            self.out,
            "{pad}if (runs_ == 0 || ent_ < {WALK_MIN} * runs_) {{"
        );
        self.plain_copy(row_loop, level + 1)?;
        let _ = writeln!(
            self.out,
            "{pad}}} else if ((double)ent_ / (double)probed_ * ((double)hi_{v} - (double)lo_{v}) <= {WALK_MAX}.0) {{"
        );
        self.joint_walks_loop(rows, walk, (v, ROWS), false, level + 1)?;
        self.last_rows(v, body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} else {{");
        self.joint_walks_loop(rows, walk, (v, WALK_FAR_ROWS), true, level + 1)?;
        self.last_rows(v, body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} }}");
        self.row_own.clear();
        Ok(())
    }

    /// The rows a joint loop over `v{v}` left (fewer than it runs at a time), one at a
    /// time.
    fn last_rows(&mut self, v: u32, body: &[KStmt], level: usize) -> Result<()> {
        let pad = "  ".repeat(level);
        let _ = writeln!(self.out, "{pad}for (; v{v} < hi_{v}; v{v}++) {{");
        self.block(body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// The rows of the row loop over `v{v}` (from `lo_{v}` to `hi_{v}`) `group` at a time
    /// along their walks (each stretch in prefetching strips where `strips`): each row's
    /// setup and first step; then, while every row is in a
    /// step, the rows' inner loops together up to the nearest end of one (a stretch), after
    /// which each row whose inner loop ended takes its step's tail and its next step's head
    /// (or leaves the walk); then each row alone: the rest of its inner loop, its tail, the
    /// rest of its walk, and its stores. Each row runs its statements in its own order, so
    /// results are those of the plain loop bit for bit.
    fn joint_walks_loop(
        &mut self,
        rows: &crate::kernel::passes::jam::Rows,
        walk: &crate::kernel::passes::jam::Walk,
        (v, group): (u32, usize),
        strips: bool,
        level: usize,
    ) -> Result<()> {
        use crate::kernel::passes::strips::STRIP;
        let pad = "  ".repeat(level);
        let (j, _, _, inner) = rows.inner;
        let based = crate::kernel::passes::jam::based_loads(self.k, j, inner);
        let (count, offsets) = self.count_and_offsets(rows, &based, walk.head);
        let streams = crate::kernel::passes::strips::streams(self.k, j, None, inner, false)
            .unwrap_or_default();
        let _ = writeln!(
            self.out,
            "{pad}for (v{v} = lo_{v}; hi_{v} - v{v} >= {group}; v{v} += {group}) {{"
        );
        let mut names: Vec<Vec<(BufId, KExpr, String)>> = Vec::new();
        for r in 0..group {
            self.row = r;
            if r > 0 {
                let _ = writeln!(self.out, "{pad}  {} = v{v} + {r};", self.local(rows.var));
            }
            self.block(rows.prefix, level + 1)?;
            let _ = writeln!(
                self.out,
                "{pad}  int64_t n{v}_{r} = 0; bool a{v}_{r} = false;"
            );
            let mut row_names = Vec::new();
            for (x, (b, i)) in based.iter().enumerate() {
                let name = format!("b{v}_{r}_{x}");
                let (t, p) = (storage_type(&self.k.bufs[b.0 as usize]), self.ptr(*b));
                let _ = writeln!(self.out, "{pad}  const {t} *{name} = {p};");
                row_names.push((*b, i.clone(), name));
            }
            names.push(row_names);
            if let Some(g) = rows.guard {
                let _ = writeln!(self.out, "{pad}  if ({}) {{", self.expr(g));
            }
            self.block(walk.preloop, level + 2)?;
            let _ = writeln!(
                self.out,
                "{pad}    a{v}_{r} = {};\n{pad}    if (a{v}_{r}) {{",
                self.expr(walk.cond)
            );
            self.step_entry((walk, rows), (&count, &offsets), &names[r], v, level + 3)?;
            let _ = writeln!(self.out, "{pad}    }}");
            if rows.guard.is_some() {
                let _ = writeln!(self.out, "{pad}  }}");
            }
        }
        self.row = 0;
        let all: Vec<String> = (0..group).map(|r| format!("a{v}_{r}")).collect();
        let _ = writeln!(self.out, "{pad}  while ({}) {{", all.join(" && "));
        self.least_count(v, group, &format!("{pad}    "));
        // A stretch: where `strips`, in strips with a prefetch per row and stream that
        // moves on (once a cache line of `f64`), then the rest.
        self.based = names.clone();
        let _ = writeln!(self.out, "{pad}    int64_t k_ = 0;");
        let strip_streams = if strips { streams.as_slice() } else { &[] };
        self.together((j, inner), strip_streams, (group, STRIP), level + 2)?;
        self.based.clear();
        self.counter = None;
        for (r, row_names) in names.iter().enumerate() {
            self.row = r;
            let jn = self.local(j);
            let _ = writeln!(
                self.out,
                "{pad}    {jn} = (int64_t)((uint64_t){jn} + (uint64_t)m_); n{v}_{r} -= m_;"
            );
            for (_, _, name) in row_names {
                let _ = writeln!(self.out, "{pad}    {name} += m_;");
            }
            let _ = writeln!(self.out, "{pad}    if (n{v}_{r} == 0) {{");
            self.block(walk.tail, level + 3)?;
            let _ = writeln!(
                self.out,
                "{pad}      a{v}_{r} = {};\n{pad}      if (a{v}_{r}) {{",
                self.expr(walk.cond)
            );
            self.step_entry((walk, rows), (&count, &offsets), row_names, v, level + 4)?;
            let _ = writeln!(self.out, "{pad}      }}\n{pad}    }}");
        }
        let _ = writeln!(self.out, "{pad}  }}");
        // Each row alone: the rest of its inner loop, its tail and the rest of its walk.
        for (r, row_names) in names.iter().enumerate() {
            self.row = r;
            let _ = writeln!(
                self.out,
                "{pad}  if (a{v}_{r}) {{\n{pad}    for (int64_t k_ = 0; k_ < n{v}_{r}; k_++) {{"
            );
            self.based = vec![Vec::new(); r];
            self.based.push(row_names.clone());
            self.counter = Some((j, "k_"));
            self.block(inner, level + 3)?;
            self.based.clear();
            self.counter = None;
            let _ = writeln!(self.out, "{pad}    }}");
            self.block(walk.tail, level + 2)?;
            self.stmt(walk.looped, level + 2)?;
            let _ = writeln!(self.out, "{pad}  }}");
        }
        for r in 0..group {
            self.row = r;
            self.block(rows.suffix, level + 1)?;
        }
        self.row = 0;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// A row's next step, in its walk's joint loop: the step's head, then its inner
    /// loop's first value, count (`n{v}_{row}`, at least 0) and pointers (`names`, at
    /// their buffers' start where the count is 0: the offsets may lie anywhere then).
    fn step_entry(
        &mut self,
        (walk, rows): (
            &crate::kernel::passes::jam::Walk,
            &crate::kernel::passes::jam::Rows,
        ),
        (count, offsets): (&KExpr, &[KExpr]),
        names: &[(BufId, KExpr, String)],
        v: u32,
        level: usize,
    ) -> Result<()> {
        let pad = "  ".repeat(level);
        let r = self.row;
        let (j, jlo, _, _) = rows.inner;
        self.block(walk.head, level)?;
        let _ = writeln!(
            self.out,
            "{pad}{} = {};\n{pad}n{v}_{r} = {};\n{pad}if (n{v}_{r} < 0) n{v}_{r} = 0;",
            self.local(j),
            self.expr(jlo),
            self.expr(count)
        );
        for ((b, _, name), off) in names.iter().zip(offsets) {
            let _ = writeln!(
                self.out,
                "{pad}{name} = {} + (n{v}_{r} > 0 ? {} : 0);",
                self.ptr(*b),
                self.expr(off)
            );
        }
        Ok(())
    }

    /// `m_`, the least of the first `group` rows' counts `n{v}_{row}`, in C.
    fn least_count(&mut self, v: u32, group: usize, pad: &str) {
        let _ = writeln!(self.out, "{pad}int64_t m_ = n{v}_0;");
        for r in 1..group {
            let _ = writeln!(self.out, "{pad}if (n{v}_{r} < m_) m_ = n{v}_{r};");
        }
    }

    /// The first `group` rows' inner loops `(j, inner)` together from `k_` to `m_` (C
    /// locals), each row reading through its pointers in `self.based`: while `strip_min`
    /// iterations are left and there are `streams` to prefetch, in strips, one prefetch
    /// per stream and row, then the strip's iterations, kept a loop (cc's full unrolling
    /// slows it: hand-written, SpMV over a band of 61 per row on Zen 3, 0.19 ms as a loop,
    /// 0.22 unrolled); the rows move through storage together, a band's or a dense
    /// matrix's one after another, so each prefetches `group` times as far ahead as one
    /// row would: past the rows that follow (hand-written, a band of 201 per row on Zen 3,
    /// 1.1 ms -> 0.65 ms). Then the rest, a loop cc may run with vectors of products (each
    /// row's additions stay in order). The inner variable reads as the row's first value
    /// plus `k_` after it.
    fn together(
        &mut self,
        (j, inner): (LocalId, &[KStmt]),
        streams: &[(BufId, KExpr)],
        (group, strip_min): (usize, usize),
        level: usize,
    ) -> Result<()> {
        use crate::kernel::passes::strips::STRIP;
        let pad = "  ".repeat(level);
        if !streams.is_empty() {
            let _ = writeln!(self.out, "{pad}while (m_ - k_ >= {strip_min}) {{");
            for r in 0..group {
                self.row = r;
                self.prefetches(streams, &format!("{pad}  "), group, "k_");
            }
            self.row = 0;
            let _ = writeln!(
                self.out,
                "{pad}  _Pragma(\"GCC unroll 1\")\n{pad}  for (int s_ = 0; s_ < {STRIP}; s_++) {{"
            );
            self.counter = Some((j, "k_ + s_"));
            self.rows_in_turn(inner, group, level + 2)?;
            let _ = writeln!(self.out, "{pad}  }}\n{pad}  k_ += {STRIP};\n{pad}}}");
        }
        let _ = writeln!(self.out, "{pad}for (; k_ < m_; k_++) {{");
        self.counter = Some((j, "k_"));
        self.rows_in_turn(inner, group, level + 1)?;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// `body` for each of the first `group` rows in turn.
    fn rows_in_turn(&mut self, body: &[KStmt], group: usize, level: usize) -> Result<()> {
        for r in 0..group {
            self.row = r;
            self.block(body, level)?;
        }
        self.row = 0;
        Ok(())
    }

    /// In a kernel that keeps its floating-point order (trusted, scalar): the loads a loop
    /// over `var` prefetches as it runs in strips (see `prefetch`); `walk` is the bound of
    /// a `while` loop.
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
        crate::kernel::passes::strips::streams(self.k, var, walk, body, outermost)
    }

    /// Strips of the loop over `var` while at least a strip of iterations
    /// ([`crate::kernel::passes::strips::strip_len`]) remain before `end` (C): the prefetches, then that
    /// many iterations of `body` (a `for` loop's variable advanced after each, a walk's by
    /// its body). The loop that follows runs the rest.
    pub(super) fn strips(
        &mut self,
        end: &str,
        var: LocalId,
        streams: &[(BufId, KExpr)],
        body: &[KStmt],
        level: usize,
    ) -> Result<()> {
        let strip = crate::kernel::passes::strips::strip_len(self.k, streams);
        let pad = "  ".repeat(level);
        let v = self.local(var);
        let _ = writeln!(self.out, "{pad}while ({end} - {v} >= {strip}) {{");
        self.prefetches(streams, &format!("{pad}  "), 1, "k_");
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

    /// One prefetch per stream, `rows` times [`crate::kernel::passes::strips::PREFETCH_BYTES`] past its
    /// position now (`rows`: the rows that move through the storage together, see `jam`;
    /// `at`: the position in C of a stream read through a row's own pointer).
    fn prefetches(&mut self, streams: &[(BufId, KExpr)], pad: &str, rows: usize, at: &str) {
        use crate::kernel::passes::strips::{elem_bytes, PREFETCH_AHEAD, PREFETCH_BYTES};
        for (b, index) in streams {
            // In the joint loop of rows, a stream the row reads through its own pointer
            // is prefetched through it (the row's offsets need not stay in registers).
            let (p, i) = match self.based_pointer(*b, index) {
                Some(name) => (name.to_string(), at.to_string()),
                None => (self.ptr(*b), self.expr(index)),
            };
            let ahead = rows
                * self.k.bufs.get(b.0 as usize).map_or(PREFETCH_AHEAD, |buf| {
                    PREFETCH_BYTES / elem_bytes(buf.elem, buf.narrow)
                });
            let _ = writeln!(self.out, "{pad}{}", super::emit::prefetch(&p, &i, ahead));
        }
    }
}

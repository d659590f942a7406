//! Loop extents: sizes of modes, window bounds and loop ranges (literals, input scalars
//! plus or minus a literal), the uses of an index that agree on its extent, and ranges
//! over offset reads.

use super::*;

/// A loop's size, the offset of its offset reads, and its own bounds when its range
/// does not start at 1.
pub(super) type LoopSize = (Option<Size>, i64, Option<(KExpr, KExpr)>);

impl Converter<'_> {
    /// Windows `A[(lo:hi)(i)]` of the loop index in `s`: the span each gives `i`.
    /// Windows whose bounds are known when tensors are bound give a [`Size::Span`]; those
    /// whose bounds use enclosing loop indices are returned apart, to be computed and
    /// checked in the kernel.
    pub(super) fn window_uses(
        &self,
        index: &str,
        s: &notation::Stmt,
    ) -> Result<(Vec<Size>, Vec<DynamicWindow>)> {
        let mut found: Vec<(String, usize, notation::Expr, notation::Expr, bool)> = Vec::new();
        walk_accesses(s, &mut |a: &notation::Access| {
            for (m, e) in a.indices.iter().enumerate() {
                let (e, permissive) = match e {
                    notation::Expr::Permissive(x) => (&**x, true),
                    e => (e, false),
                };
                if let notation::Expr::Window { lo, hi, index: i } = e {
                    if matches!(&**i, notation::Expr::Index(n) if n == index) {
                        found.push((
                            a.tensor.clone(),
                            m,
                            (**lo).clone(),
                            (**hi).clone(),
                            permissive,
                        ));
                    }
                }
            }
        });
        let (mut known, mut dynamic) = (Vec::new(), Vec::new());
        for (name, m, lo, hi, permissive) in found {
            match (self.bound(&lo), self.bound(&hi)) {
                (Ok(lo), Ok(hi)) => known.push(Size::Span(lo, hi)),
                _ if self.known_at_loop(&lo) && self.known_at_loop(&hi) => {
                    dynamic.push(DynamicWindow {
                        tensor: self.tensor(&name)?,
                        mode: m,
                        lo,
                        hi,
                        permissive,
                    })
                }
                (lo, hi) => {
                    lo?;
                    hi?;
                }
            }
        }
        Ok((known, dynamic))
    }

    /// An integer expression of literals, enclosing loop indices and scalars the program
    /// does not write (`+`, `-`, `*`): known when a loop inside those indices starts.
    pub(super) fn known_at_loop(&self, e: &notation::Expr) -> bool {
        let mut used = Vec::new();
        self.index_terms(e, true, &mut used)
            && used.iter().all(|i| self.loops.iter().any(|(n, _)| n == i))
    }

    /// Whether `e` is built from loop indices (collected into `out`), literals, `+ - *`
    /// and reads of scalars the program never writes (`n[]`); with `integer`, literals and
    /// scalars must be integers.
    pub(super) fn index_terms(
        &self,
        e: &notation::Expr,
        integer: bool,
        out: &mut Vec<String>,
    ) -> bool {
        let integer_typed = |t: Option<ScalarType>| !integer || t.is_some_and(|t| t.is_integer());
        match e {
            notation::Expr::Index(i) => {
                out.push(i.clone());
                true
            }
            notation::Expr::Literal(v) => integer_typed(v.scalar_type()),
            notation::Expr::Access(a) if a.indices.is_empty() => {
                self.by_name.get(&a.tensor).is_some_and(|&t| {
                    let info = &self.tensors[t];
                    info.scalar.is_some()
                        && !info.written
                        && integer_typed(Some(info.format.element_type()))
                })
            }
            notation::Expr::Call {
                op: Op::Add | Op::Sub | Op::Mul,
                args,
            } => args.iter().all(|a| self.index_terms(a, integer, out)),
            _ => false,
        }
    }

    /// A bound of a loop range or window: an integer literal, or an integer input scalar
    /// the program does not write plus or minus a literal, so it is known when tensors are
    /// bound.
    pub(super) fn bound(&self, e: &notation::Expr) -> Result<Bound> {
        fn literal(e: &notation::Expr) -> Option<i64> {
            match e {
                notation::Expr::Literal(v) if v.scalar_type().is_some_and(|t| t.is_integer()) => {
                    v.as_i128().and_then(|n| i64::try_from(n).ok())
                }
                _ => None,
            }
        }
        let scalar = |e: &notation::Expr| match e {
            notation::Expr::Access(a) if a.indices.is_empty() => {
                self.by_name.get(&a.tensor).copied().filter(|&t| {
                    let info = &self.tensors[t];
                    info.kind == DeclKind::Input
                        && !info.written
                        && info.scalar.is_some()
                        && info.format.element_type().is_integer()
                })
            }
            _ => None,
        };
        let found = match e {
            e if literal(e).is_some() => literal(e).map(Bound::Const),
            e if scalar(e).is_some() => scalar(e).map(|t| Bound::Scalar(t, 0)),
            notation::Expr::Call { op: Op::Add, args } if args.len() == 2 => {
                match (
                    scalar(&args[0]),
                    literal(&args[1]),
                    scalar(&args[1]),
                    literal(&args[0]),
                ) {
                    (Some(t), Some(c), _, _) | (_, _, Some(t), Some(c)) => {
                        Some(Bound::Scalar(t, c))
                    }
                    _ => None,
                }
            }
            notation::Expr::Call { op: Op::Sub, args } if args.len() == 2 => scalar(&args[0])
                .zip(literal(&args[1]).and_then(|c| c.checked_neg()))
                .map(|(t, c)| Bound::Scalar(t, c)),
            _ => None,
        };
        found.map_or_else(
            || {
                unsupported(format!(
                    "the bound `{}`: compiled loop ranges and windows take integer literals and integer input scalars the program does not write, plus or minus a literal (`n[]`, `n[] + 1`)",
                    notation::print_expr(e)
                ))
            },
            Ok,
        )
    }

    /// The `i64` kernel expression of a window bound.
    pub(super) fn bound_value(&self, b: Bound) -> Result<KExpr> {
        match b {
            Bound::Const(n) => Ok(KExpr::int(n)),
            Bound::Scalar(t, c) => {
                let l = self.tensors[t].scalar.ok_or_else(|| {
                    Error::Program(format!(
                        "internal: `{}` is not a scalar",
                        self.tensors[t].name
                    ))
                })?;
                let ty = self.tensors[t].format.element_type();
                let v = if ty == ScalarType::I64 {
                    KExpr::Local(l)
                } else {
                    KExpr::Op(Op::Cast(ScalarType::I64), vec![KExpr::Local(l)])
                };
                Ok(crate::kernel::tidy_expr(KExpr::bin(
                    Op::Add,
                    v,
                    KExpr::int(c),
                )))
            }
        }
    }

    /// Non-permissive offset reads `A[i + c]` (`c != 0`) of the loop index in `s`.
    pub(super) fn offset_uses(
        &self,
        index: &str,
        s: &notation::Stmt,
        out: &mut Vec<(usize, usize, i64)>,
    ) {
        let mut visit = |a: &notation::Access| {
            if let Some(&t) = self.by_name.get(&a.tensor) {
                for (m, e) in a.indices.iter().enumerate() {
                    if let Some((i, c)) = crate::reference::dims::offset_index(e) {
                        if i == index && c != 0 {
                            out.push((t, m, c));
                        }
                    }
                }
            }
        };
        walk_accesses(s, &mut visit);
    }

    /// The uses of a loop index (`(tensor, mode, offset)`: bare ones at offset 0) must
    /// agree on the range `1 - c : n - c` over which each is in bounds (Finch's
    /// OffsetArray); returns the use that gives it (an input first: outputs are sized by
    /// the loops that write them) and ties the others' sizes to it. `extent` is the
    /// loop's, for the message.
    pub(super) fn agreeing_uses(
        &mut self,
        index: &str,
        extent: &str,
        mut uses: Vec<(usize, usize, i64)>,
    ) -> Result<Option<(usize, usize, i64)>> {
        uses.sort_by_key(|&(t, _, _)| self.tensors[t].kind != DeclKind::Input);
        let Some(&(t, m, c)) = uses.first() else {
            return Ok(None);
        };
        for &(t2, m2, c2) in &uses[1..] {
            if c2 != c {
                let shown = |t: usize, m: usize, c: i64| {
                    let name = &self.tensors[t].name;
                    match c {
                        0 => format!("`{name}` (mode {}) as `{index}`", m + 1),
                        c if c > 0 => format!("`{name}` (mode {}) as `{index} + {c}`", m + 1),
                        c => format!("`{name}` (mode {}) as `{index} - {}`", m + 1, -(c as i128)),
                    }
                };
                let hint = if extent == "_" {
                    " or give the loop a range"
                } else {
                    ""
                };
                return Err(Error::Program(format!(
                    "the loop `for {index} = {extent}` reads {} and {}, whose in-bounds ranges of `{index}` differ; make one permissive (`~`){hint}",
                    shown(t, m, c),
                    shown(t2, m2, c2)
                )));
            }
            self.constraints
                .push((Size::Mode(t, m), Size::Mode(t2, m2), index.to_string()));
        }
        Ok(Some((t, m, c)))
    }

    /// A loop `for index = lo:hi` whose body uses no offset of `index`: its size, tied to
    /// the modes `index` indexes directly, and its own bounds if it does not start at 1.
    pub(super) fn plain_range(
        &mut self,
        index: &str,
        (lo, hi): (Bound, Bound),
        body: &notation::Stmt,
    ) -> Result<(Size, Option<(KExpr, KExpr)>)> {
        let mut uses = Vec::new();
        self.bare_uses(index, body, &mut uses);
        // A bare read or write of a tensor at the index spans its whole mode, so the
        // range starts at 1 (the reference's rule).
        if let (Some(&(t, m)), false) = (uses.first(), lo == Bound::Const(1)) {
            let name = &self.tensors[t].name;
            return match lo {
                Bound::Const(c) => Err(Error::Program(format!(
                    "the loop `for {index} = {c}:...` indexes `{name}` (mode {}) directly, so it must run over the whole mode from 1; use a window `{name}[(lo:hi)({index})]` to restrict it",
                    m + 1
                ))),
                Bound::Scalar(..) => unsupported(format!(
                    "a loop range starting at a scalar over `{index}`, which indexes `{name}` directly (start it at 1, or read `{name}` through a window)"
                )),
            };
        }
        let size = match (lo, hi) {
            (Bound::Const(1), Bound::Const(n)) => Size::Const(n),
            (lo, hi) => Size::Span(lo, hi),
        };
        for &(t, m) in &uses {
            self.constraints
                .push((size.clone(), Size::Mode(t, m), index.to_string()));
        }
        let own = if lo != Bound::Const(1) {
            Some((self.bound_value(lo)?, self.bound_value(hi)?))
        } else {
            None
        };
        Ok((size, own))
    }

    /// A loop `for index = lo:hi` whose body reads (or writes) tensors at `index + c`
    /// (`shifted`, `c != 0`). As in Finch.jl, where `A[i + c]` is `OffsetArray(A, c)[i]`
    /// whose extent `1 - c : n - c` `dimensionalize!` checks against the loop's (both
    /// limits), and in the reference, the range must equal that extent; checked when
    /// tensors are bound ([`RangeCheck`]). The loop then runs over the offset's range, as
    /// `for index = _` does, so the read needs no check of its own in the kernel. A bare
    /// use or a window of `index` (in bounds from 1) cannot agree with it.
    pub(super) fn shifted_range(
        &mut self,
        index: &str,
        extent: &str,
        (lo, hi): (Bound, Bound),
        body: &notation::Stmt,
        shifted: Vec<(usize, usize, i64)>,
        windowed: bool,
    ) -> Result<(usize, usize, i64)> {
        let mut bare = Vec::new();
        self.bare_uses(index, body, &mut bare);
        let mut uses: Vec<(usize, usize, i64)> = bare.into_iter().map(|(t, m)| (t, m, 0)).collect();
        uses.extend(shifted);
        let Some((t, m, c)) = self.agreeing_uses(index, extent, uses)? else {
            return Err(Error::Program(format!(
                "internal: no offset read of `{index}`"
            )));
        };
        if windowed {
            return Err(Error::Program(format!(
                "the loop `for {index} = {extent}` reads `{}` at an offset of `{index}` and a window indexed by `{index}`, whose in-bounds ranges differ (the window's starts at 1); read one of them permissively (`~`)",
                self.tensors[t].name
            )));
        }
        let span = match (lo, hi) {
            (Bound::Const(1), Bound::Const(n)) => Size::Const(n),
            (lo, hi) => Size::Span(lo, hi),
        };
        self.constraints
            .push((span, Size::Mode(t, m), index.to_string()));
        self.ranges.push(RangeCheck {
            index: index.to_string(),
            lo,
            hi,
            tensor: t,
            mode: m,
            offset: c,
        });
        Ok((t, m, c))
    }

    /// The `i64` kernel expression for the size of mode `m` of tensor `t`.
    pub(super) fn mode_size(&self, t: usize, m: usize) -> Result<KExpr> {
        let info = &self.tensors[t];
        let ndims = info.format.ndims();
        let depth = ndims - 1 - m;
        match info.levels.get(depth).and_then(LevelParams::shape) {
            Some(shape) => Ok(KExpr::Local(shape)),
            None => Err(Error::Program(format!(
                "`{}` has no mode {}",
                info.name,
                m + 1
            ))),
        }
    }

    /// `i + rest` where `i` is the most deeply bound loop index of `x` (once, added) and
    /// `rest` only uses indices of loops around `i`'s, constants and scalars the program
    /// does not write: `(i, rest)`.
    pub(super) fn toeplitz(&self, x: &notation::Expr) -> Option<(String, notation::Expr)> {
        fn terms(e: &notation::Expr, sign: bool, out: &mut Vec<(bool, notation::Expr)>) {
            match e {
                notation::Expr::Call { op: Op::Add, args } if args.len() == 2 => {
                    terms(&args[0], sign, out);
                    terms(&args[1], sign, out);
                }
                notation::Expr::Call { op: Op::Sub, args } if args.len() == 2 => {
                    terms(&args[0], sign, out);
                    terms(&args[1], !sign, out);
                }
                other => out.push((sign, other.clone())),
            }
        }
        let depth = |n: &str| self.loops.iter().position(|(l, _)| l == n);
        let mut ts = Vec::new();
        terms(x, true, &mut ts);
        let mut used = Vec::new();
        if !ts
            .iter()
            .all(|(_, t)| self.index_terms(t, false, &mut used))
        {
            return None;
        }
        let deepest = used.iter().max_by_key(|n| depth(n))?.clone();
        depth(&deepest)?;
        // `i` occurs once, as a term of its own with a plus sign; other indices are outer.
        let own = ts
            .iter()
            .position(|(s, t)| *s && matches!(t, notation::Expr::Index(n) if *n == deepest))?;
        if used.iter().filter(|n| **n == deepest).count() != 1 || ts.len() < 2 {
            return None;
        }
        if !used
            .iter()
            .all(|n| *n == deepest || depth(n) < depth(&deepest))
        {
            return None;
        }
        let mut rest: Option<notation::Expr> = None;
        for (k, (sign, t)) in ts.into_iter().enumerate() {
            if k == own {
                continue;
            }
            rest = Some(match (rest, sign) {
                (None, true) => t,
                (None, false) => notation::Expr::Call {
                    op: Op::Sub,
                    args: vec![notation::Expr::Literal(Value::I64(0)), t],
                },
                (Some(r), s) => notation::Expr::Call {
                    op: if s { Op::Add } else { Op::Sub },
                    args: vec![r, t],
                },
            });
        }
        // A constant remainder is the plain offset case, handled before this.
        let rest = rest?;
        if matches!(rest, notation::Expr::Literal(_)) {
            return None;
        }
        Some((deepest, rest))
    }

    /// Finds the size of every mode indexed by bare `index` in `s`: (tensor, mode).
    pub(super) fn bare_uses(&self, index: &str, s: &notation::Stmt, out: &mut Vec<(usize, usize)>) {
        let mut visit = |a: &notation::Access| {
            if let Some(&t) = self.by_name.get(&a.tensor) {
                for (m, e) in a.indices.iter().enumerate() {
                    let bare = match e {
                        notation::Expr::Index(i) => i == index,
                        notation::Expr::Protocol(_, x) => {
                            matches!(&**x, notation::Expr::Index(i) if i == index)
                        }
                        _ => false,
                    };
                    if bare {
                        out.push((t, m));
                    }
                }
            }
        };
        walk_accesses(s, &mut visit);
    }

    /// How deep the loop binding `name` is (0 = outermost), for an access to `tensor`.
    pub(super) fn loop_depth(&self, name: &str, tensor: &str) -> Result<usize> {
        self.loops
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| {
                Error::Unsupported(format!("`{name}` in `{tensor}[...]` is not a loop index"))
            })
    }

    /// The extent of `for index = extent` from the uses of `index` in `body`: its size,
    /// the offset of its offset reads, and its own bounds when its range does not start
    /// at 1.
    pub(super) fn loop_size(
        &mut self,
        index: &str,
        extent: &Extent,
        body: &notation::Stmt,
        spans: &[Size],
        dynamic: &[DynamicWindow],
    ) -> Result<LoopSize> {
        let mut offset = 0i64;
        // An explicit range not starting at 1: the loop's own bounds.
        let mut range: Option<(KExpr, KExpr)> = None;
        let size = match extent {
            // Windows alone: a known one gives the extent, else one computed in
            // the kernel (below).
            Extent::Auto
                if !(spans.is_empty() && dynamic.is_empty()) && {
                    let mut bare = Vec::new();
                    self.bare_uses(index, body, &mut bare);
                    let mut shifted = Vec::new();
                    self.offset_uses(index, body, &mut shifted);
                    bare.is_empty() && shifted.is_empty()
                } =>
            {
                spans.first().cloned()
            }
            Extent::Auto => {
                // Bare uses (`A[i]`) and offset uses (`A[i + c]`) each give a range
                // `1 - c : n - c`; permissive uses (`A[~i]`) give none. All ranges
                // must agree.
                let mut uses: Vec<(usize, usize, i64)> = Vec::new();
                let mut bare = Vec::new();
                self.bare_uses(index, body, &mut bare);
                uses.extend(bare.into_iter().map(|(t, m)| (t, m, 0)));
                self.offset_uses(index, body, &mut uses);
                let Some((t, m, c)) = self.agreeing_uses(index, "_", uses)? else {
                    let mut indexed = false;
                    walk_accesses(body, &mut |a| {
                        indexed |= a.indices.iter().any(|e| mentions_index(e, index));
                    });
                    if indexed {
                        return unsupported(format!(
                            "cannot determine the extent of `for {index} = _`: every tensor is indexed by `{index}` permissively or through an expression Finch-RS does not compile yet (give the loop a range)"
                        ));
                    }
                    return Err(Error::Program(format!(
                        "cannot determine the extent of `for {index} = _`: no tensor is indexed by `{index}` in its body"
                    )));
                };
                offset = c;
                Some(Size::Mode(t, m))
            }
            Extent::Range(lo_expr, hi_expr) => {
                let (lo, hi) = (self.bound(lo_expr)?, self.bound(hi_expr)?);
                let mut shifted = Vec::new();
                self.offset_uses(index, body, &mut shifted);
                if shifted.is_empty() {
                    let (size, own) = self.plain_range(index, (lo, hi), body)?;
                    range = own;
                    Some(size)
                } else {
                    let extent = format!(
                        "{}:{}",
                        notation::print_expr(lo_expr),
                        notation::print_expr(hi_expr)
                    );
                    let windowed = !(spans.is_empty() && dynamic.is_empty());
                    let (t, m, c) =
                        self.shifted_range(index, &extent, (lo, hi), body, shifted, windowed)?;
                    offset = c;
                    Some(Size::Mode(t, m))
                }
            }
        };
        Ok((size, offset, range))
    }

    /// Windows computed from enclosing indices: each lies inside its mode and has the
    /// loop's length, checked each time the loop starts; with nothing else to give the
    /// loop its extent, the first one does (then `range` becomes its span).
    pub(super) fn window_length_checks(
        &mut self,
        index: &str,
        size: &Option<Size>,
        offset: i64,
        range: &mut Option<(KExpr, KExpr)>,
        dynamic: &[DynamicWindow],
    ) -> Result<Vec<Stmt>> {
        let mut before = Vec::new();
        if dynamic.is_empty() {
            return Ok(before);
        }
        let length = match size {
            Some(Size::Const(n)) => Some(Expr::Lit(Value::I64(*n))),
            Some(Size::Mode(t, m)) => Some(Expr::Code(self.mode_size(*t, *m)?)),
            Some(Size::Span(lo, hi)) => Some(Expr::Code(crate::kernel::tidy_expr(
                (self.bound_value(*hi)? - self.bound_value(*lo)?) + 1,
            ))),
            None => None,
        };
        if offset != 0 || range.is_some() {
            return unsupported(format!(
                "a window computed from enclosing indices with an offset read of `{index}` or a range not starting at 1"
            ));
        }
        let span_local = self.kernel_local(&format!("{index}_window_length"));
        let mut first = true;
        for w in dynamic {
            let (t, m) = (&w.tensor, &w.mode);
            let (lo, hi) = (self.expr(&w.lo)?, self.expr(&w.hi)?);
            let int = |n: i64| Expr::Lit(Value::I64(n));
            let len = Expr::Call(
                Op::Add,
                vec![Expr::Call(Op::Sub, vec![hi.clone(), lo.clone()]), int(1)],
            );
            let n = Expr::Code(self.mode_size(*t, *m)?);
            let mut ok = vec![Expr::Call(Op::Le, vec![int(0), len.clone()])];
            if !w.permissive {
                ok.push(Expr::Call(Op::Le, vec![int(1), lo.clone()]));
                ok.push(Expr::Call(Op::Le, vec![hi.clone(), n]));
            }
            match (&length, first) {
                (Some(l), _) => ok.push(Expr::Call(Op::Eq, vec![len, l.clone()])),
                (None, true) => before.push(Stmt::SetLocal(span_local, len)),
                (None, false) => ok.push(Expr::Call(
                    Op::Eq,
                    vec![len, Expr::Code(KExpr::Local(span_local))],
                )),
            }
            first = false;
            before.push(Stmt::Check(
                Expr::Call(Op::And, ok),
                crate::backend::c::WINDOW_MISMATCH_BASE + *t as i32,
            ));
        }
        if length.is_none() {
            *range = Some((KExpr::int(1), KExpr::Local(span_local)));
        }
        Ok(before)
    }

    /// The bounds of a loop: its own range, else `1 : size`, moved by `-offset` so that
    /// `A[i + offset]` stays in bounds (`i` runs over `1 - c : n - c`).
    pub(super) fn loop_bounds(
        &mut self,
        index: &str,
        range: Option<(KExpr, KExpr)>,
        size: Option<Size>,
        offset: i64,
    ) -> Result<(KExpr, KExpr)> {
        let (lo, hi) = match (range, size) {
            (Some(r), _) => r,
            (None, Some(Size::Const(n))) => (KExpr::int(1), KExpr::int(n)),
            (None, Some(Size::Mode(t, m))) => (KExpr::int(1), self.mode_size(t, m)?),
            (None, Some(Size::Span(lo, hi))) => (
                KExpr::int(1),
                crate::kernel::tidy_expr((self.bound_value(hi)? - self.bound_value(lo)?) + 1),
            ),
            (None, None) => return Err(Error::Program(format!("no extent for `{index}`"))),
        };
        // `A[i + c]` in bounds: `i` runs over `1 - c : n - c`.
        let (lo, hi) = if offset == 0 {
            (lo, hi)
        } else {
            (
                crate::kernel::tidy_expr(KExpr::bin(
                    crate::algebra::Op::Sub,
                    lo,
                    KExpr::int(offset),
                )),
                crate::kernel::tidy_expr(KExpr::bin(
                    crate::algebra::Op::Sub,
                    hi,
                    KExpr::int(offset),
                )),
            )
        };
        Ok((lo, hi))
    }
}

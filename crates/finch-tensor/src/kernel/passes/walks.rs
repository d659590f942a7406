//! Rows that walk over steps run together (the jam pass, for a row loop whose rows each
//! walk `while c { head; for ...; tail }`, a SparseBlockList row's blocks): the rows'
//! inner loops along one counter, stretch by stretch, up to the nearest end of one; then
//! each row whose inner loop ended takes its step's tail and its next step's head. Each
//! stretch ends in a branch the predictor misses, so this pays only for steps of several
//! entries (strict SpMV on Zen 3, generated, four rows: blocks of 32 entries on average
//! 0.66 -> 0.48 ms, qc324's 33 0.017 -> 0.009 ms, bcsstk16's 7.8 0.214 -> 0.185 ms;
//! bcsstk38's 6.6 0.42 -> 0.53 ms, so they stay plain). Rows from beyond the cache run two
//! at a time with prefetching strips instead.

use super::jam::{
    based_loads, count_and_offsets, group_loop, if_then, lt, strips_of_rows, Joint, Row, Rows,
    Walk, ROWS,
};
use super::strips::STRIP;
use super::Fresh;
use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{KExpr, KStmt, Kernel, LocalId};

/// The fewest iterations the probed rows' inner loops must have on average for the rows
/// to run together (see the module docs). Zen 3, strict SpMV, generated, four rows against
/// the plain loop in one process: blocks of 32 on average (synthetic) 0.66 -> 0.48 ms,
/// qc324 (33) 0.017 -> 0.009 ms, bcsstk16 (7.8) 0.214 -> 0.185 ms, bcsstk38 (6.6) 0.42 ->
/// 0.53 ms (slower), mbeacxc (3.5) 0.080 -> 0.083 ms.
const WALK_MIN: i64 = 8;

/// The most inner-loop iterations, estimated from the probed rows, over which the rows
/// run [`ROWS`] at a time; over more, [`WALK_FAR_ROWS`] at a time with prefetching
/// strips. With the rows' data in cache four rows gain most (strict SpMV on Zen 3,
/// generated, against the plain loop: qc324, 26730 entries, 0.017 -> 0.009 ms, two rows
/// 0.015; bcsstk16, 290378, 0.27 -> 0.19-0.25 ms), but from further away four rows'
/// streams outrun their prefetches (rows of three blocks of 32 entries on average: 10000
/// rows 0.66 -> 0.45 ms run after run, but slower when the other variants of
/// `finch-bench structure` ran in between; 20000 rows 1.40 -> 1.54 ms, 40000 rows 3.1 ->
/// 4.2-4.5 ms, with prefetching strips too).
const WALK_MAX: f64 = (1 << 19) as f64;

/// The rows run at a time along their walks over more than [`WALK_MAX`] iterations, in
/// strips that prefetch each row's streams once a cache line (hand-written, against the
/// plain loop, Zen 3: 20000 rows of three blocks of 32 entries 1.40 -> 1.19-1.32 ms, 40000
/// rows 3.1 -> 2.9 ms; without the prefetches 2.5 and 5.3 ms).
const WALK_FAR_ROWS: usize = 2;

/// The rows, evenly spaced, whose walks decide whether and how many at a time the rows
/// run together.
const WALK_PROBES: i64 = 16;

/// The row loop `row_loop` (`for var = lo .. hi { body }`, its parts `rows` along `walk`)
/// several rows at a time along their walks where the inner loops of [`WALK_PROBES`] rows
/// evenly spaced have [`WALK_MIN`] iterations or more on average, else `plain` of it:
/// [`ROWS`] at a time where all rows, so estimated, have at most [`WALK_MAX`], else
/// [`WALK_FAR_ROWS`] in prefetching strips; the last rows `plain` of the row loop from
/// where the joint loop stopped.
pub(crate) fn walks_together<'k>(
    fresh: &mut Fresh<'k>,
    row_loop: &KStmt,
    (rows, walk): (&Rows, &Walk),
    plain: &mut dyn FnMut(&mut Fresh<'k>, KStmt) -> Vec<KStmt>,
) -> Vec<KStmt> {
    let KStmt::For { var, lo, hi, body } = row_loop else {
        return vec![row_loop.clone()];
    };
    let k = fresh.kernel();
    let name = fresh.name(*var);
    let mut local = |what: &str, ty| fresh.local(format!("{name}_{what}"), ty);
    let (rlo, rhi) = (local("lo", ScalarType::I64), local("hi", ScalarType::I64));
    let (entries, runs, probed, step, width) = (
        local("entries", ScalarType::I64),
        local("runs", ScalarType::I64),
        local("probed", ScalarType::I64),
        local("step", ScalarType::I64),
        local("width", ScalarType::I64),
    );
    let (l, h) = (KExpr::Local(rlo), KExpr::Local(rhi));
    let mut out = vec![
        KStmt::Assign(rlo, lo.clone()),
        KStmt::Assign(rhi, hi.clone()),
        KStmt::Assign(entries, KExpr::int(0)),
        KStmt::Assign(runs, KExpr::int(0)),
        KStmt::Assign(probed, KExpr::int(0)),
    ];
    // Up to [`WALK_PROBES`] rows, evenly spaced, walked once more (assignments only, so
    // running them again changes nothing): their steps and iterations.
    let (j, _, _, inner) = rows.inner;
    let (count, _) = count_and_offsets(k, rows, &[], walk.head);
    let mut tally = walk.head.to_vec();
    tally.push(KStmt::Assign(width, count.clone()));
    tally.push(if_then(
        lt(KExpr::int(0), KExpr::Local(width)),
        vec![KStmt::Assign(
            entries,
            KExpr::Local(entries) + KExpr::Local(width),
        )],
    ));
    tally.push(KStmt::Assign(runs, KExpr::Local(runs) + 1));
    tally.extend(walk.tail.iter().cloned());
    let mut walked = walk.preloop.to_vec();
    walked.push(KStmt::While {
        cond: walk.cond.clone(),
        body: tally,
    });
    let mut probe = vec![KStmt::Assign(probed, KExpr::Local(probed) + 1)];
    probe.extend(rows.prefix.iter().cloned());
    probe.extend(guarded(rows, walked));
    probe.push(KStmt::If {
        cond: lt(KExpr::Local(step), h.clone() - KExpr::Local(*var)),
        then: vec![KStmt::Assign(*var, KExpr::Local(*var) + KExpr::Local(step))],
        otherwise: vec![KStmt::Assign(*var, h.clone())],
    });
    out.push(if_then(
        lt(l.clone(), h.clone()),
        vec![
            KStmt::Assign(
                step,
                KExpr::bin(Op::IntDiv, h.clone() - l.clone(), KExpr::int(WALK_PROBES)) + 1,
            ),
            KStmt::Assign(*var, l.clone()),
            KStmt::While {
                cond: lt(KExpr::Local(*var), h.clone()),
                body: probe,
            },
        ],
    ));
    let based = based_loads(k, j, inner);
    let locals = Joint::new(fresh, rows, based.len());
    let Some(flags) = locals
        .all
        .iter()
        .map(|row| row.active)
        .collect::<Option<Vec<_>>>()
    else {
        return vec![row_loop.clone()];
    };
    let mut joint = |fresh: &mut Fresh<'k>, group: usize, strips: bool| {
        let mut code = joint_walks(
            k,
            (rows, walk),
            (rlo, rhi),
            (group, strips),
            (&locals, &flags),
            fresh,
            plain,
        );
        code.extend(plain(
            fresh,
            KStmt::For {
                var: *var,
                lo: KExpr::Local(*var),
                hi: h.clone(),
                body: body.clone(),
            },
        ));
        code
    };
    let near = joint(fresh, ROWS, false);
    let far = joint(fresh, WALK_FAR_ROWS, true);
    let copy = plain(
        fresh,
        KStmt::For {
            var: *var,
            lo: l.clone(),
            hi: h.clone(),
            body: body.clone(),
        },
    );
    let f64_of = |e: KExpr| KExpr::Op(Op::Cast(ScalarType::F64), vec![e]);
    let estimate = KExpr::bin(
        Op::Mul,
        KExpr::bin(
            Op::Div,
            f64_of(KExpr::Local(entries)),
            f64_of(KExpr::Local(probed)),
        ),
        KExpr::bin(Op::Sub, f64_of(h.clone()), f64_of(l.clone())),
    );
    out.push(KStmt::If {
        cond: KExpr::bin(
            Op::Or,
            KExpr::bin(Op::Eq, KExpr::Local(runs), KExpr::int(0)),
            lt(
                KExpr::Local(entries),
                KExpr::bin(Op::Mul, KExpr::int(WALK_MIN), KExpr::Local(runs)),
            ),
        ),
        then: copy,
        otherwise: vec![KStmt::If {
            cond: KExpr::bin(Op::Le, estimate, KExpr::Lit(Value::F64(WALK_MAX))),
            then: near,
            otherwise: far,
        }],
    });
    out
}

/// `stmts` under the rows' guard, if any.
fn guarded(rows: &Rows, stmts: Vec<KStmt>) -> Vec<KStmt> {
    match rows.guard {
        Some(g) => vec![if_then(g.clone(), stmts)],
        None => stmts,
    }
}

/// The rows `rlo .. rhi` `group` at a time along their walks (each stretch in prefetching
/// strips where `strips`): each row's setup and first step; then, while every row is in a
/// step, the rows' inner loops together up to the nearest end of one (a stretch), after
/// which each row whose inner loop ended takes its step's tail and its next step's head
/// (or leaves the walk); then each row alone: the rest of its inner loop, its tail, the
/// rest of its walk (`plain` of it), and its stores. Each row runs its statements in its
/// own order, so results are those of the plain loop bit for bit.
fn joint_walks<'k>(
    k: &Kernel,
    (rows, walk): (&Rows, &Walk),
    (rlo, rhi): (LocalId, LocalId),
    (group, strips): (usize, bool),
    (locals, flags): (&Joint, &[LocalId]),
    fresh: &mut Fresh<'k>,
    plain: &mut dyn FnMut(&mut Fresh<'k>, KStmt) -> Vec<KStmt>,
) -> Vec<KStmt> {
    let (j, jlo, _, inner) = rows.inner;
    let based = based_loads(k, j, inner);
    let (count, offsets) = count_and_offsets(k, rows, &based, walk.head);
    let streams = if strips {
        super::strips::streams(k, j, None, inner, false).unwrap_or_default()
    } else {
        Vec::new()
    };
    let Joint { all, m, c, s } = locals;
    let (m, c, s) = (*m, *c, *s);
    // Each row with its flag: whether it is in a step of its walk.
    let rows_here = &all[..group.min(all.len())];
    let flagged = || rows_here.iter().zip(flags.iter().copied());
    let var = rows.var;
    // A row's next step: its head, then its inner loop's first value, count (at least
    // 0) and offsets (0 where the count is 0: they may lie anywhere then).
    let step_entry = |row: &Row| -> Vec<KStmt> {
        let mut code = row.stmts(walk.head);
        let n = row.count;
        code.push(KStmt::Assign(row.local(j), row.expr(jlo)));
        code.push(KStmt::Assign(n, row.expr(&count)));
        code.push(if_then(
            lt(KExpr::Local(n), KExpr::int(0)),
            vec![KStmt::Assign(n, KExpr::int(0))],
        ));
        code.extend(row.first_offsets(&offsets));
        code
    };
    // `a = cond; if a { step }`: whether the row is in a step, and the step's entry.
    let next_step = |(row, active): (&Row, LocalId)| -> Vec<KStmt> {
        vec![
            KStmt::Assign(active, row.expr(walk.cond)),
            if_then(KExpr::Local(active), step_entry(row)),
        ]
    };
    let mut body: Vec<KStmt> = rows_here
        .iter()
        .flat_map(|row| row.pointer_hints(&based))
        .collect();
    for (r, (row, active)) in flagged().enumerate() {
        if r > 0 {
            body.push(KStmt::Assign(row.local(var), KExpr::Local(var) + r as i64));
        }
        body.extend(row.stmts(rows.prefix));
        body.push(KStmt::Assign(row.count, KExpr::int(0)));
        body.push(KStmt::Assign(active, KExpr::Lit(Value::Bool(false))));
        for o in &row.offsets {
            body.push(KStmt::Assign(*o, KExpr::int(0)));
        }
        let mut enter = row.stmts(walk.preloop);
        enter.extend(next_step((row, active)));
        match rows.guard {
            Some(g) => body.push(if_then(row.expr(g), enter)),
            None => body.extend(enter),
        }
    }
    // While every row is in a step: a stretch up to the nearest end of one.
    let mut stretch = vec![KStmt::Assign(m, KExpr::Local(rows_here[0].count))];
    for row in &rows_here[1..] {
        stretch.push(if_then(
            lt(KExpr::Local(row.count), KExpr::Local(m)),
            vec![KStmt::Assign(m, KExpr::Local(row.count))],
        ));
    }
    stretch.push(KStmt::Assign(c, KExpr::int(0)));
    let in_turn = |at: &KExpr| -> Vec<KStmt> {
        rows_here
            .iter()
            .flat_map(|row| row.inner(inner, j, &based, at))
            .collect()
    };
    if !streams.is_empty() {
        let turn = (inner, j, based.as_slice());
        stretch.push(strips_of_rows(
            k,
            rows_here,
            turn,
            &streams,
            (m, c, s),
            STRIP,
        ));
    }
    stretch.push(KStmt::For {
        var: c,
        lo: KExpr::Local(c),
        hi: KExpr::Local(m),
        body: in_turn(&KExpr::Local(c)),
    });
    for (row, active) in flagged() {
        let (jr, n) = (row.local(j), row.count);
        stretch.push(KStmt::Assign(jr, KExpr::Local(jr) + KExpr::Local(m)));
        stretch.push(KStmt::Assign(n, KExpr::Local(n) - KExpr::Local(m)));
        for o in &row.offsets {
            stretch.push(KStmt::Assign(*o, KExpr::Local(*o) + KExpr::Local(m)));
        }
        let mut ended = row.stmts(walk.tail);
        ended.extend(next_step((row, active)));
        stretch.push(if_then(
            KExpr::bin(Op::Eq, KExpr::Local(n), KExpr::int(0)),
            ended,
        ));
    }
    let every = flagged()
        .map(|(_, active)| KExpr::Local(active))
        .reduce(|a, b| KExpr::bin(Op::And, a, b))
        .unwrap_or(KExpr::Lit(Value::Bool(false)));
    body.push(KStmt::While {
        cond: every,
        body: stretch,
    });
    // Each row alone: the rest of its inner loop, its tail and the rest of its walk.
    for (row, active) in flagged() {
        let mut alone = vec![KStmt::For {
            var: c,
            lo: KExpr::int(0),
            hi: KExpr::Local(row.count),
            body: row.inner(inner, j, &based, &KExpr::Local(c)),
        }];
        alone.extend(row.stmts(walk.tail));
        for s in row.stmts(std::slice::from_ref(walk.looped)) {
            alone.extend(plain(fresh, s));
        }
        body.push(if_then(KExpr::Local(active), alone));
    }
    group_loop(rows, (rlo, rhi), rows_here, body)
}

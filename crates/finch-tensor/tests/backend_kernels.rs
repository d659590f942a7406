//! Backends: hand-written kernel IR (what lowering will produce) runs on the interpreter
//! and the C backend with identical results, checked against the reference interpreter;
//! every operator agrees between the backends on random values of every type; errors and
//! buffer growth behave the same; the C kernel cache works.

use finch::algebra::{Op, ScalarType, Value};
use finch::backend::{c, interp, BufArg};
use finch::formats::{Format, LevelStorage};
use finch::kernel::{verify, KExpr, KStmt, Kernel};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Buffer, DenseArray, IndexVec, Tensor, TensorStorage};
use finch::Program;
use proptest::prelude::*;

fn c_or_skip() -> bool {
    if !c::available() {
        eprintln!("note: no C compiler; C backend checks skipped");
        return false;
    }
    true
}

/// `y[i] += A[i, j] * x[j]` over CSC `A` (`Dense(SparseList(Element(0.0)))`).
fn spmv_kernel() -> Kernel {
    let mut k = Kernel::new("spmv_csc");
    let ptr = k.buf("A_lvl2_ptr", ScalarType::I64, false, false);
    let idx = k.buf("A_lvl2_idx", ScalarType::I64, false, false);
    let val = k.buf("A_lvl3_val", ScalarType::F64, false, false);
    let x = k.buf("x_val", ScalarType::F64, false, false);
    let y = k.buf("y_val", ScalarType::F64, true, false);
    let n = k.local("A_lvl1_shape", ScalarType::I64);
    let j = k.local("j", ScalarType::I64);
    let q = k.local("A_lvl2_q", ScalarType::I64);
    let xj = k.local("x_j", ScalarType::F64);
    let i = k.local("i", ScalarType::I64);
    k.inputs.push(n);
    use KExpr as E;
    let l = E::Local;
    k.body = vec![KStmt::For {
        var: j,
        lo: E::int(0),
        hi: l(n),
        body: vec![
            KStmt::Assign(xj, E::load(x, l(j))),
            KStmt::For {
                var: q,
                lo: E::load(ptr, l(j)),
                hi: E::load(ptr, E::bin(Op::Add, l(j), E::int(1))),
                body: vec![
                    KStmt::Assign(i, E::load(idx, l(q))),
                    KStmt::Store {
                        buf: y,
                        index: l(i),
                        value: E::bin(
                            Op::Add,
                            E::load(y, l(i)),
                            E::bin(Op::Mul, E::load(val, l(q)), l(xj)),
                        ),
                    },
                ],
            },
        ],
    }];
    k
}

fn csc_parts(t: &Tensor) -> (&[usize], &[usize], &Buffer) {
    let TensorStorage::Levels(LevelStorage::Dense(d)) = t.storage() else {
        panic!()
    };
    let LevelStorage::SparseList(s) = &*d.child else {
        panic!()
    };
    let LevelStorage::Element(e) = &*s.child else {
        panic!()
    };
    let (IndexVec::Wide(ptr), IndexVec::Wide(idx)) = (&s.ptr, &s.idx) else {
        panic!("64-bit indices expected")
    };
    (ptr, idx, &e.val)
}

fn run_spmv(a: &DenseArray, x: &[f64], use_c: bool) -> (Vec<f64>, Option<interp::InterpStats>) {
    let t = Tensor::from_dense(
        &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
        a,
    )
    .unwrap();
    let (ptr, idx, val) = csc_parts(&t);
    let xb = Buffer::F64(x.to_vec());
    let mut y = Buffer::F64(vec![0.0; a.shape[0]]);
    let k = spmv_kernel();
    let n = Value::I64(a.shape[1] as i64);
    let mut args = [
        BufArg::ReadIndices(ptr),
        BufArg::ReadIndices(idx),
        BufArg::ReadValues(val),
        BufArg::ReadValues(&xb),
        BufArg::Values(&mut y),
    ];
    let stats = if use_c {
        c::compile(&k).unwrap().run(&mut args, &[n]).unwrap();
        None
    } else {
        Some(interp::run(&k, &mut args, &[n]).unwrap().1)
    };
    (y.as_f64_slice().unwrap().to_vec(), stats)
}

fn reference_spmv(a: &DenseArray, x: &[f64]) -> Vec<f64> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spmv.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let mut b = Bindings::new();
    b.insert("A", a.clone());
    b.insert("x", DenseArray::from_f64(&[x.len()], x).unwrap());
    p.run_reference(&mut b, &RunOptions::default()).unwrap();
    b.get("y")
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn spmv_kernel_verifies_and_prints() {
    let k = spmv_kernel();
    verify(&k).unwrap();
    let text = k.to_string();
    assert!(
        text.starts_with("kernel spmv_csc(b0: i64[] A_lvl2_ptr"),
        "{text}"
    );
    assert!(
        text.contains("for v2 = b0[v1] .. b0[(v1 + 1)]")
            || text.contains("for v2 = b0[v1] .. b0[(v1 + 1)]"),
        "{text}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn spmv_both_backends_match_the_reference(
        (m, n, vals) in (0usize..7, 0usize..7).prop_flat_map(|(m, n)| (Just(m), Just(n), prop::collection::vec(prop_oneof![3 => Just(0.0), 2 => -9.0f64..9.0], m * n)))
    ) {
        let a = DenseArray::from_f64(&[m, n], &vals).unwrap();
        let x: Vec<f64> = (0..n).map(|j| j as f64 - 1.5).collect();
        let want = reference_spmv(&a, &x);
        let (got, stats) = run_spmv(&a, &x, false);
        prop_assert_eq!(&got, &want);
        // Structure: the interpreter loads each stored value exactly once.
        let stored = vals.iter().filter(|v| **v != 0.0).count() as u64;
        prop_assert!(stats.unwrap().loads >= stored);
        if c::available() {
            let (got_c, _) = run_spmv(&a, &x, true);
            prop_assert_eq!(got_c, want);
        }
    }
}

// ---- operator agreement ----

const BINARY: [Op; 17] = [
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Min,
    Op::Max,
    Op::Eq,
    Op::Ne,
    Op::Lt,
    Op::Le,
    Op::Gt,
    Op::Ge,
    Op::Overwrite,
    Op::Choose(Value::I64(0)),
    Op::BitAnd,
    Op::BitOr,
    Op::Xor,
];
const GUARDED: [Op; 6] = [Op::IntDiv, Op::RemFn, Op::Rem, Op::Mod, Op::Fld, Op::Pow];
const UNARY: [Op; 9] = [
    Op::Neg,
    Op::Abs,
    Op::Not,
    Op::Exp,
    Op::Sin,
    Op::Cos,
    Op::Cast(ScalarType::I8),
    Op::Cast(ScalarType::U32),
    Op::Cast(ScalarType::Bool),
];

/// One kernel per type: out_k[i] = op_k(a[i], b[i]) for every operator that applies.
fn ops_kernel(t: ScalarType) -> (Kernel, Vec<Op>) {
    let mut k = Kernel::new(format!("ops_{t}"));
    let a = k.buf("a", t, false, false);
    let b = k.buf("b", t, false, false);
    let i = k.local("i", ScalarType::I64);
    let n = k.local("n", ScalarType::I64);
    k.inputs.push(n);
    let mut body = Vec::new();
    let mut ops = Vec::new();
    use KExpr as E;
    let (ai, bi) = (E::load(a, E::Local(i)), E::load(b, E::Local(i)));
    let mut add = |k: &mut Kernel, op: Op, e: E, guard: Option<E>| {
        let tys: Vec<ScalarType> = match &e {
            E::Op(_, args) => args.iter().map(|_| t).collect(),
            _ => vec![],
        };
        let Some(rt) = finch::kernel::op_type(op, &tys) else {
            return;
        };
        let out = k.buf(format!("out_{op}"), rt, true, false);
        let store = KStmt::Store {
            buf: out,
            index: E::Local(i),
            value: e,
        };
        body.push(match guard {
            Some(c) => KStmt::If {
                cond: c,
                then: vec![store],
                otherwise: vec![],
            },
            None => store,
        });
        ops.push(op);
    };
    for op in BINARY {
        add(&mut k, op, E::Op(op, vec![ai.clone(), bi.clone()]), None);
    }
    for op in UNARY {
        add(&mut k, op, E::Op(op, vec![ai.clone()]), None);
    }
    if !t.is_float() && t != ScalarType::Bool {
        let zero = E::Lit(Value::zero_of(t));
        for op in GUARDED {
            let guard = if op == Op::Pow {
                // Non-negative exponents only (negative ones are an error in both).
                E::bin(Op::Ge, bi.clone(), zero.clone())
            } else {
                E::bin(Op::Ne, bi.clone(), zero.clone())
            };
            add(
                &mut k,
                op,
                E::Op(op, vec![ai.clone(), bi.clone()]),
                Some(guard),
            );
        }
        add(
            &mut k,
            Op::Shl,
            E::Op(Op::Shl, vec![ai.clone(), bi.clone()]),
            None,
        );
        add(
            &mut k,
            Op::Shr,
            E::Op(Op::Shr, vec![ai.clone(), bi.clone()]),
            None,
        );
    } else if t.is_float() {
        for op in [Op::IntDiv, Op::Rem, Op::Mod, Op::Fld, Op::Pow] {
            add(&mut k, op, E::Op(op, vec![ai.clone(), bi.clone()]), None);
        }
        let zero = E::Lit(Value::zero_of(t));
        add(
            &mut k,
            Op::Sqrt,
            E::Op(Op::Sqrt, vec![ai.clone()]),
            Some(E::bin(Op::Ge, ai.clone(), zero.clone())),
        );
        add(
            &mut k,
            Op::Log,
            E::Op(Op::Log, vec![ai.clone()]),
            Some(E::bin(Op::Ge, ai.clone(), zero)),
        );
    }
    k.body = vec![KStmt::For {
        var: i,
        lo: E::int(0),
        hi: E::Local(n),
        body,
    }];
    (k, ops)
}

fn random_values(t: ScalarType, n: usize, seed: u64) -> Vec<Value> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        -f64::INFINITY,
        0.5,
        -2.5,
        1e300,
        3.0,
    ];
    (0..n)
        .map(|k| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 11) as i64;
            if t.is_float() {
                let x = if k % 3 == 0 {
                    specials[(s >> 3) as usize % specials.len()]
                } else {
                    (r % 20000) as f64 / 137.0 - 70.0
                };
                Value::F64(x).convert_wrapping(t).unwrap()
            } else {
                let small = [0i64, 1, -1, 2, 7, 63, 64, 65, -64, i64::MAX, i64::MIN];
                let x = if k % 2 == 0 {
                    small[(s >> 5) as usize % small.len()]
                } else {
                    r % 300 - 150
                };
                Value::I64(x).convert_wrapping(t).unwrap()
            }
        })
        .collect()
}

#[test]
fn every_operator_agrees_between_backends() {
    let use_c = c_or_skip();
    for t in ScalarType::ALL {
        let (k, ops) = ops_kernel(t);
        verify(&k).unwrap_or_else(|e| panic!("{t}: {e}"));
        let n = 300;
        let a = Buffer::from_values(t, &random_values(t, n, 1 + t as u64)).unwrap();
        let b = Buffer::from_values(t, &random_values(t, n, 99 + t as u64)).unwrap();
        let mut outs_i: Vec<Buffer> = k.bufs[2..]
            .iter()
            .map(|p| Buffer::filled(p.elem, n, Value::zero_of(p.elem)).unwrap())
            .collect();
        let mut outs_c = outs_i.clone();
        {
            let mut args = vec![BufArg::ReadValues(&a), BufArg::ReadValues(&b)];
            args.extend(outs_i.iter_mut().map(BufArg::Values));
            interp::run(&k, &mut args, &[Value::I64(n as i64)])
                .unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        if !use_c {
            continue;
        }
        {
            let ck = c::compile(&k).unwrap_or_else(|e| panic!("{t}: {e}"));
            let mut args = vec![BufArg::ReadValues(&a), BufArg::ReadValues(&b)];
            args.extend(outs_c.iter_mut().map(BufArg::Values));
            ck.run(&mut args, &[Value::I64(n as i64)])
                .unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        for (op, (oi, oc)) in ops.iter().zip(outs_i.iter().zip(&outs_c)) {
            for i in 0..n {
                let (x, y) = (oi.get(i).unwrap(), oc.get(i).unwrap());
                assert!(
                    x.same(&y),
                    "{t} {op}({}, {}): interp {x}, C {y}",
                    a.get(i).unwrap(),
                    b.get(i).unwrap()
                );
            }
        }
    }
}

/// `s = div(a[0], a[1])`, then loads `a[s]`.
fn fallible_kernel() -> Kernel {
    let mut k = Kernel::new("fallible");
    let a = k.buf("a", ScalarType::I64, false, false);
    let s = k.local("s", ScalarType::I64);
    let r = k.local("r", ScalarType::I64);
    k.outputs.push(r);
    k.body = vec![
        KStmt::Assign(
            s,
            KExpr::bin(
                Op::IntDiv,
                KExpr::load(a, KExpr::int(0)),
                KExpr::load(a, KExpr::int(1)),
            ),
        ),
        KStmt::Assign(r, KExpr::load(a, KExpr::Local(s))),
    ];
    k
}

#[test]
fn errors_are_the_same_on_both_backends() {
    let k = fallible_kernel();
    let cases: [(&[usize], Result<i64, &str>); 3] = [
        (&[4, 2, 9], Ok(9)),
        (&[4, 0, 9], Err("division by zero")),
        (&[40, 2, 9], Err("out")),
    ];
    for (data, want) in cases {
        let v: Vec<Buffer> = vec![Buffer::I64(data.iter().map(|&x| x as i64).collect())];
        let mut args = [BufArg::ReadValues(&v[0])];
        let r = interp::run(&k, &mut args, &[]).map(|(o, _)| o);
        let check = |r: finch::Result<Vec<Value>>, which: &str| match (&want, r) {
            (Ok(x), Ok(o)) => assert_eq!(o, vec![Value::I64(*x)], "{which}"),
            (Err(m), Err(e)) => assert!(e.to_string().contains(m), "{which}: {e}"),
            (w, r) => panic!("{which}: want {w:?}, got {r:?}"),
        };
        check(r, "interp");
        if c::available() {
            let mut args = [BufArg::ReadValues(&v[0])];
            check(c::compile(&k).unwrap().run(&mut args, &[]), "C");
        }
    }
}

/// Appends 0, 1, ..., n-1 to a growable index buffer, doubling its length as needed.
fn growth_kernel() -> Kernel {
    let mut k = Kernel::new("grow");
    let out = k.buf("out_idx", ScalarType::I64, true, true);
    let n = k.local("n", ScalarType::I64);
    let i = k.local("i", ScalarType::I64);
    k.inputs.push(n);
    use KExpr as E;
    k.body = vec![
        KStmt::For {
            var: i,
            lo: E::int(0),
            hi: E::Local(n),
            body: vec![
                KStmt::If {
                    cond: E::bin(Op::Ge, E::Local(i), E::Len(out)),
                    then: vec![KStmt::Resize {
                        buf: out,
                        len: E::Op(
                            Op::Max,
                            vec![E::bin(Op::Mul, E::Len(out), E::int(2)), E::int(1)],
                        ),
                        fill: Value::I64(0),
                    }],
                    otherwise: vec![],
                },
                KStmt::Store {
                    buf: out,
                    index: E::Local(i),
                    value: E::Local(i),
                },
            ],
        },
        KStmt::Resize {
            buf: out,
            len: E::Local(n),
            fill: Value::I64(0),
        },
    ];
    k
}

#[test]
fn buffers_grow_by_doubling_on_both_backends() {
    let k = growth_kernel();
    let want: Vec<usize> = (0..1000).collect();
    let mut v = Vec::new();
    interp::run(&k, &mut [BufArg::Indices(&mut v)], &[Value::I64(1000)]).unwrap();
    assert_eq!(v, want);
    if c::available() {
        let mut w = Vec::new();
        c::compile(&k)
            .unwrap()
            .run(&mut [BufArg::Indices(&mut w)], &[Value::I64(1000)])
            .unwrap();
        assert_eq!(w, want);
    }
}

#[test]
fn signature_mismatches_are_errors() {
    let k = spmv_kernel();
    let f = Buffer::F64(vec![]);
    let mut args = [BufArg::ReadValues(&f)];
    assert!(interp::run(&k, &mut args, &[Value::I64(0)])
        .unwrap_err()
        .to_string()
        .contains("takes 5 buffers"));
    let mut bad = Kernel::new("bad");
    let b = bad.buf("ro", ScalarType::F64, false, false);
    bad.body = vec![
        KStmt::Store {
            buf: b,
            index: KExpr::int(0),
            value: KExpr::Lit(Value::I64(1)),
        },
        KStmt::Break,
    ];
    let e = verify(&bad).unwrap_err().to_string();
    assert!(
        e.contains("read-only")
            && e.contains("expected f64")
            && e.contains("`break` outside a loop"),
        "{e}"
    );
}

#[test]
fn compiled_kernels_are_cached() {
    if !c_or_skip() {
        return;
    }
    let mut k = growth_kernel();
    k.name = format!("grow_cache_{}", std::process::id());
    let first = c::compile(&k).unwrap();
    let second = c::compile(&k).unwrap();
    assert_eq!(second.outcome, c::CacheOutcome::Memory);
    assert_eq!(first.key, second.key);
    let cached = c::cache_dir().join(format!("finch-{}.so", first.key));
    assert!(cached.exists(), "{}", cached.display());
}

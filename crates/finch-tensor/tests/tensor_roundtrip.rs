//! Tensor storage: round trips over random formats and data, the golden vectors of
//! verified-formats.md §9, the validator's negative tests, and the tree printer.

use finch::algebra::{ScalarType, Value};
use finch::formats::{
    DenseStorage, ElementStorage, Format, IndexWidth, LevelFormat, LevelKind, LevelStorage,
    SparseCooStorage,
};
use finch::tensor::{Buffer, Coo, DenseArray, IndexVec, Tensor, TensorStorage};
use finch::Error;
use proptest::prelude::*;

fn fmt(s: &str) -> Format {
    Format::parse(s).unwrap()
}

/// M of verified-formats §9: 4×5, row-major as written.
fn m_rows() -> DenseArray {
    DenseArray::from_rows_f64(&[
        &[0.0, 1.0, 0.0, 0.0, 2.0],
        &[0.0, 0.0, 0.0, 0.0, 0.0],
        &[3.0, 0.0, 4.0, 0.0, 0.0],
        &[0.0, 0.0, 0.0, 5.0, 0.0],
    ])
    .unwrap()
}

/// The transpose of M as a Finch tensor `MT[j, i] = M[i, j]`: stored in
/// Dense(SparseList) its root level runs over the rows of M, so the buffers are M's CSR.
fn m_transposed() -> DenseArray {
    let m = m_rows();
    let mut t = DenseArray::filled(ScalarType::F64, &[5, 4], Value::F64(0.0)).unwrap();
    for i in 0..4 {
        for j in 0..5 {
            t.set(&[j, i], m.get(&[i, j]).unwrap()).unwrap();
        }
    }
    t
}

fn f64s(b: &Buffer) -> Vec<f64> {
    b.as_f64_slice().unwrap().to_vec()
}

#[test]
fn golden_sparse_list_is_csr_of_m() {
    let t = Tensor::from_dense(&fmt("Dense(SparseList(Element(0.0)))"), &m_transposed()).unwrap();
    let TensorStorage::Levels(LevelStorage::Dense(d)) = t.storage() else {
        panic!()
    };
    let LevelStorage::SparseList(s) = &*d.child else {
        panic!()
    };
    assert_eq!(s.ptr, vec![0, 2, 2, 4, 5]);
    assert_eq!(s.idx, vec![1, 4, 0, 2, 3]);
    let LevelStorage::Element(e) = &*s.child else {
        panic!()
    };
    assert_eq!(f64s(&e.val), vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(t.countstored(), 5);
    t.validate().unwrap();
}

#[test]
fn narrow_sparse_list_stores_u32_and_reads_like_wide() {
    let wide =
        Tensor::from_dense(&fmt("Dense(SparseList(Element(0.0)))"), &m_transposed()).unwrap();
    let f = fmt("Dense(SparseList{UInt32}(Element(0.0)))");
    let t = Tensor::from_dense(&f, &m_transposed()).unwrap();
    let TensorStorage::Levels(LevelStorage::Dense(d)) = t.storage() else {
        panic!()
    };
    let LevelStorage::SparseList(s) = &*d.child else {
        panic!()
    };
    assert_eq!(s.ptr, IndexVec::Narrow(vec![0, 2, 2, 4, 5]));
    assert_eq!(s.idx, IndexVec::Narrow(vec![1, 4, 0, 2, 3]));
    assert_eq!(t.to_dense().unwrap(), wide.to_dense().unwrap());
    // CSC arrays handed in as u32 make the narrow format, without a copy.
    let c = Tensor::from_csc(
        5,
        4,
        vec![0u32, 2, 2, 4, 5],
        vec![1u32, 4, 0, 2, 3],
        Buffer::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0]),
    )
    .unwrap();
    assert_eq!(c.format(), &f);
    assert_eq!(c.to_dense().unwrap(), wide.to_dense().unwrap());
    // And are validated like wide ones.
    let bad = Tensor::from_csc(
        5,
        4,
        vec![0u32, 2, 2, 4, 5],
        vec![4u32, 1, 0, 2, 3],
        Buffer::F64(vec![1.0; 5]),
    );
    let msg = bad.unwrap_err().to_string();
    assert!(msg.contains("I6"), "{msg}");
    // A narrow format refuses an index that does not fit in 32 bits.
    let mut coo = Coo::new(ScalarType::F64, &[5_000_000_000]);
    coo.push(&[4_999_999_999], Value::F64(1.0)).unwrap();
    let msg = Tensor::from_coo(&fmt("SparseList{UInt32}(Element(0.0))"), &coo)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("does not fit"), "{msg}");
    assert!(Tensor::from_coo(&fmt("SparseList(Element(0.0))"), &coo).is_ok());
}

#[test]
fn golden_coo_row_major_has_rows_most_significant() {
    let t = Tensor::from_dense(&fmt("SparseCOO{2}(Element(0.0))"), &m_transposed()).unwrap();
    let TensorStorage::Levels(LevelStorage::SparseCoo(c)) = t.storage() else {
        panic!()
    };
    assert_eq!(c.ptr, vec![0, 5]);
    assert_eq!(c.tbl[0], vec![1, 4, 0, 2, 3], "tbl[0] = cols");
    assert_eq!(c.tbl[1], vec![0, 0, 2, 2, 3], "tbl[1] = rows");
    let LevelStorage::Element(e) = &*c.child else {
        panic!()
    };
    assert_eq!(f64s(&e.val), vec![1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn golden_dcsr_of_m() {
    let t = Tensor::from_dense(
        &fmt("SparseList(SparseList(Element(0.0)))"),
        &m_transposed(),
    )
    .unwrap();
    let TensorStorage::Levels(LevelStorage::SparseList(outer)) = t.storage() else {
        panic!()
    };
    assert_eq!(outer.ptr, vec![0, 3]);
    assert_eq!(outer.idx, vec![0, 2, 3]);
    let LevelStorage::SparseList(inner) = &*outer.child else {
        panic!()
    };
    assert_eq!(inner.ptr, vec![0, 2, 4, 5]);
    assert_eq!(inner.idx, vec![1, 4, 0, 2, 3]);
}

fn csr_of_m() -> (Vec<usize>, Vec<usize>, Buffer) {
    (
        vec![0, 2, 2, 4, 5],
        vec![1, 4, 0, 2, 3],
        Buffer::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0]),
    )
}

/// A change that breaks the CSR buffers of M.
type Mutation = Box<dyn Fn(&mut (Vec<usize>, Vec<usize>, Buffer))>;

fn invariant_of(r: Result<Tensor, Error>) -> String {
    match r {
        Err(Error::Invalid { invariant, .. }) => invariant.to_string(),
        other => panic!("expected an invariant violation, got {other:?}"),
    }
}

#[test]
fn from_csr_and_csc_agree_with_dense() {
    let (p, i, v) = csr_of_m();
    let a = Tensor::from_csr(4, 5, p.clone(), i.clone(), v.clone()).unwrap();
    assert_eq!(a.to_dense().unwrap(), m_rows());
    let at = Tensor::from_csr_transposed(4, 5, p, i, v).unwrap();
    assert_eq!(at.to_dense().unwrap(), m_transposed());
    assert_eq!(at.shape(), &[5, 4]);
}

#[test]
fn validator_rejects_each_broken_invariant() {
    let cases: Vec<(&str, Mutation, &str)> = vec![
        ("pos[0]=1", Box::new(|c| c.0[0] = 1), "I2"),
        (
            "pos not monotone",
            Box::new(|c| c.0 = vec![0, 2, 1, 4, 5]),
            "I3",
        ),
        ("pos[P]=4", Box::new(|c| c.0[4] = 4), "I4"),
        (
            "unsorted row",
            Box::new(|c| c.1 = vec![4, 1, 0, 2, 3]),
            "I6",
        ),
        ("duplicate", Box::new(|c| c.1 = vec![1, 1, 0, 2, 3]), "I6"),
        ("idx out of range", Box::new(|c| c.1[1] = 5), "I5"),
        (
            "len(val)=4",
            Box::new(|c| c.2 = Buffer::F64(vec![1.0; 4])),
            "I1 len(val)",
        ),
        ("len(ptr)", Box::new(|c| c.0.push(5)), "I1 len(ptr)"),
    ];
    for (name, mutate, want) in cases {
        let mut c = csr_of_m();
        mutate(&mut c);
        let got = invariant_of(Tensor::from_csr_transposed(4, 5, c.0, c.1, c.2));
        assert!(got.starts_with(want), "{name}: got {got}");
    }
}

#[test]
fn validator_rejects_coo_out_of_order_and_mismatched_storage() {
    let storage = LevelStorage::SparseCoo(SparseCooStorage {
        shape: vec![5, 4],
        ptr: vec![0, 2],
        tbl: vec![vec![1, 4], vec![2, 0]],
        child: Box::new(LevelStorage::Element(ElementStorage {
            fill: Value::F64(0.0),
            val: Buffer::F64(vec![1.0, 2.0]),
        })),
    });
    let r = Tensor::from_parts(
        fmt("SparseCOO{2}(Element(0.0))"),
        vec![5, 4],
        TensorStorage::Levels(storage.clone()),
    );
    assert!(invariant_of(r).starts_with("I7"));
    // Storage of the wrong kind or fill for the format is an error, not a crash.
    let r = Tensor::from_parts(
        fmt("Dense(SparseList(Element(0.0)))"),
        vec![5, 4],
        TensorStorage::Levels(storage),
    );
    assert!(matches!(r, Err(Error::Program(_))));
    let dense = LevelStorage::Dense(DenseStorage {
        shape: 3,
        child: Box::new(LevelStorage::Element(ElementStorage {
            fill: Value::F64(1.0),
            val: Buffer::F64(vec![1.0; 3]),
        })),
    });
    let r = Tensor::from_parts(
        fmt("Dense(Element(0.0))"),
        vec![3],
        TensorStorage::Levels(dense),
    );
    assert!(matches!(r, Err(Error::Program(m)) if m.contains("fill")));
}

#[test]
fn from_coo_combines_duplicates_and_keeps_explicit_zeros() {
    let mut c = Coo::new(ScalarType::I64, &[3]);
    for (i, v) in [(2, 1), (0, 5), (2, 4), (1, 0)] {
        c.push(&[i], Value::I64(v)).unwrap();
    }
    let t = Tensor::from_coo(&fmt("SparseList(Element(0))"), &c).unwrap();
    assert_eq!(t.to_coo().coords, vec![vec![0, 1, 2]]);
    assert_eq!(
        t.to_coo().vals,
        vec![Value::I64(5), Value::I64(0), Value::I64(5)]
    );
    let t = Tensor::from_coo_with(&fmt("SparseList(Element(0))"), &c, finch::Op::Max).unwrap();
    assert_eq!(t.get(&[2]).unwrap(), Value::I64(4));
    assert!(t.get(&[3]).is_err());
    // Type mismatch names both types.
    let e = Tensor::from_coo(&fmt("SparseList(Element(0.0))"), &c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f64") && e.contains("i64"), "{e}");
}

#[test]
fn pattern_stores_only_true_and_rejects_false_under_dense() {
    let mut a = DenseArray::filled(ScalarType::Bool, &[4], Value::Bool(false)).unwrap();
    a.set(&[1], Value::Bool(true)).unwrap();
    let t = Tensor::from_dense(&fmt("SparseList(Pattern())"), &a).unwrap();
    assert_eq!(t.countstored(), 1);
    assert_eq!(t.to_dense().unwrap(), a);
    assert!(Tensor::from_dense(&fmt("Dense(Pattern())"), &a).is_err());
}

/// Found by the `format_text` fuzz target: a 0-d `Pattern()` tensor given `false` was
/// stored, and read back `true`.
#[test]
fn a_bare_pattern_leaf_holds_true_and_refuses_false() {
    let pattern = fmt("Pattern()");
    for (v, ok) in [(false, false), (true, true)] {
        let mut a = DenseArray::filled(ScalarType::Bool, &[], Value::Bool(false)).unwrap();
        a.data[0] = Value::Bool(v);
        match Tensor::from_dense(&pattern, &a) {
            Ok(t) => {
                assert!(ok, "a 0-d Pattern() stored `false`");
                assert_eq!(t.to_dense().unwrap(), a);
            }
            Err(e) => assert!(!ok && e.to_string().contains("Element(false)"), "{e}"),
        }
    }
}

#[test]
fn tree_printer_snapshot() {
    let a = DenseArray::from_rows_f64(&[&[1.0, 0.0, 2.0], &[0.0, 3.0, 0.0]]).unwrap();
    let t = Tensor::from_dense(&fmt("Dense(SparseList(Element(0.0)))"), &a).unwrap();
    let expected = "\
2×3 Tensor Dense(SparseList(Element(0.0)))
└─ Dense [:, 1:3]
   ├─ [:, 1]: SparseList (1) [1:2, 1]
   │  └─ [1, 1]: 1.0
   ├─ [:, 2]: SparseList (1) [1:2, 2]
   │  └─ [2, 2]: 3.0
   └─ [:, 3]: SparseList (1) [1:2, 3]
      └─ [1, 3]: 2.0
";
    assert_eq!(t.to_string(), expected);
    let s = Tensor::from_dense(
        &fmt("Scalar(0.0)"),
        &DenseArray::from_f64(&[], &[4.5]).unwrap(),
    )
    .unwrap();
    assert_eq!(s.to_string(), "scalar Tensor Scalar(0.0)\n└─ 4.5\n");
    let long = DenseArray::from_f64(&[12], &[1.0; 12]).unwrap();
    let t = Tensor::from_dense(&fmt("SparseList(Element(0.0))"), &long).unwrap();
    assert!(t.to_string().ends_with("└─ ⋮ (2 more)\n"), "{t}");
}

// ---- random round trips ----

/// Every level of the registry (a level of several modes with 1 to 3 of them).
fn level_kinds() -> impl Strategy<Value = LevelKind> {
    let kinds: Vec<LevelKind> = LevelKind::ALL
        .iter()
        .flat_map(|&k| match k.mode_count_param() {
            Some(_) => (1..=3).filter_map(|n| k.with_modes(n)).collect(),
            None => vec![k],
        })
        .collect();
    prop::sample::select(kinds)
}

/// A random format with exactly `ndims` modes over a leaf.
fn format_for(ndims: usize, kinds: Vec<LevelKind>, leaf: LevelFormat) -> Option<LevelFormat> {
    let mut left = ndims;
    let mut chosen = Vec::new();
    for k in kinds {
        if left == 0 {
            break;
        }
        let k = if k.modes() > left {
            LevelKind::SparseList
        } else {
            k
        };
        left -= k.modes();
        chosen.push(k);
    }
    if left != 0 {
        return None;
    }
    let mut f = leaf;
    // Every other SparseList level (counting from the leaf) stores 32-bit indices.
    let mut lists = 0;
    for k in chosen.into_iter().rev() {
        let index = if k == LevelKind::SparseList {
            lists += 1;
            if lists % 2 == 0 {
                IndexWidth::U32
            } else {
                IndexWidth::U64
            }
        } else {
            IndexWidth::U64
        };
        f = LevelFormat::Inner {
            kind: k,
            index,
            child: Box::new(f),
        };
    }
    Some(f)
}

fn values(ty: ScalarType, n: usize, density: f64) -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((0.0f64..1.0, -50i64..50), n).prop_map(move |v| {
        v.into_iter()
            .map(|(r, x)| {
                if r >= density {
                    Value::zero_of(ty)
                } else if ty == ScalarType::Bool {
                    Value::Bool(true)
                } else {
                    Value::I64(x).convert_wrapping(ty).unwrap()
                }
            })
            .collect()
    })
}

fn case() -> impl Strategy<Value = (Format, DenseArray)> {
    (
        prop::collection::vec(0usize..4, 1..=3),
        prop::collection::vec(level_kinds(), 3),
        prop::sample::select(vec![
            ScalarType::F64,
            ScalarType::I32,
            ScalarType::U8,
            ScalarType::Bool,
        ]),
        prop::sample::select(vec![0.0, 0.3, 1.0]),
        any::<bool>(),
    )
        .prop_flat_map(|(shape, kinds, ty, density, pattern)| {
            let len: usize = shape.iter().product();
            let leaf = if ty == ScalarType::Bool && pattern {
                LevelFormat::Pattern
            } else {
                LevelFormat::Element(Value::zero_of(ty))
            };
            let f = format_for(shape.len(), kinds, leaf).unwrap_or_else(|| {
                format_for(
                    shape.len(),
                    vec![LevelKind::SparseList; 3],
                    LevelFormat::Element(Value::zero_of(ty)),
                )
                .unwrap()
            });
            (Just(f), Just(shape), values(ty, len, density))
        })
        .prop_map(|(f, shape, vals)| {
            let ty = f.element_type();
            let a = DenseArray::from_data(ty, &shape, vals, Value::zero_of(ty)).unwrap();
            (Format::Levels(f), a)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn dense_round_trip((format, a) in case()) {
        match Tensor::from_dense(&format, &a) {
            Ok(t) => {
                prop_assert!(t.validate().is_ok());
                prop_assert_eq!(t.to_dense().unwrap(), a.clone());
                let back = Tensor::from_coo(&format, &t.to_coo()).unwrap();
                prop_assert_eq!(&back, &t);
                for (k, v) in a.data.iter().enumerate() {
                    prop_assert_eq!(t.get(&a.unlinear(k)).unwrap(), *v);
                }
            }
            Err(e) => {
                // Refusals: a level that stores fill positions over Pattern() (it cannot
                // hold `false`), and data that does not fit a single-entry or single-run
                // level. Each says why.
                let msg = e.to_string();
                let ok = (format.to_string().contains("Pattern()") && msg.contains("Pattern() leaf"))
                    || msg.contains("SparsePoint stores at most one index per fiber")
                    || msg.contains("SparseInterval stores one run of equal values per fiber");
                prop_assert!(ok, "{}: {}", format, e);
            }
        }
    }
}

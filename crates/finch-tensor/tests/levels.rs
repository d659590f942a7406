//! The structured level formats (SparsePoint, SparseInterval, SparseBand, SparseBlockList,
//! RunList, SparseRunList, SparseByteMap, SparseHash): the golden storage of
//! verified-formats.md §9, the validator's negative tests, build errors and the tree
//! printer. Random round trips over every level live in `tensor_roundtrip.rs`.

use finch::formats::{Format, LevelStorage};
use finch::tensor::{Buffer, DenseArray, Tensor, TensorStorage};
use finch::Error;

fn fmt(s: &str) -> Format {
    Format::parse(s).unwrap()
}

/// `rows` as a Finch tensor whose root level runs over the rows: `T[j, i] = rows[i][j]`.
fn by_rows(rows: &[&[f64]]) -> DenseArray {
    let (m, n) = (rows.len(), rows.first().map_or(0, |r| r.len()));
    let mut data = Vec::with_capacity(m * n);
    for r in rows {
        data.extend_from_slice(r);
    }
    // Column-major [n, m]: element (j, i) at j + n*i, which is row-major order of `rows`.
    DenseArray::from_f64(&[n, m], &data).unwrap()
}

fn m_rows() -> DenseArray {
    by_rows(&[
        &[0.0, 1.0, 0.0, 0.0, 2.0],
        &[0.0, 0.0, 0.0, 0.0, 0.0],
        &[3.0, 0.0, 4.0, 0.0, 0.0],
        &[0.0, 0.0, 0.0, 5.0, 0.0],
    ])
}

fn a_rows() -> DenseArray {
    by_rows(&[
        &[1.0, 2.0, 0.0, 0.0, 0.0, 0.0],
        &[0.0, 3.0, 4.0, 0.0, 0.0, 0.0],
        &[5.0, 0.0, 6.0, 0.0, 0.0, 0.0],
        &[0.0, 7.0, 0.0, 8.0, 9.0, 0.0],
    ])
}

/// Builds, validates, checks the round trip, and returns the level below a Dense root
/// (or the root itself for a vector format) with its leaf values.
fn build(format: &str, a: &DenseArray) -> (Tensor, LevelStorage, Vec<f64>) {
    let t = Tensor::from_dense(&fmt(format), a).unwrap();
    t.validate().unwrap();
    assert_eq!(&t.to_dense().unwrap(), a);
    let TensorStorage::Levels(root) = t.storage().clone() else {
        panic!("not a level tensor")
    };
    let level = match root {
        LevelStorage::Dense(d) => *d.child,
        other => other,
    };
    let mut leaf = level.child().unwrap();
    while let Some(c) = leaf.child() {
        leaf = c;
    }
    let vals = match leaf {
        LevelStorage::Element(e) => e.val.as_f64_slice().unwrap().to_vec(),
        _ => vec![],
    };
    (t, level, vals)
}

fn v(x: &[f64]) -> DenseArray {
    DenseArray::from_f64(&[x.len()], x).unwrap()
}

#[test]
fn golden_sparse_band_on_m_and_a() {
    let (_, l, vals) = build("Dense(SparseBand(Element(0.0)))", &m_rows());
    let LevelStorage::SparseBand(b) = l else {
        panic!()
    };
    assert_eq!((b.idx[0], b.idx[2], b.idx[3]), (4, 2, 3));
    assert_eq!(b.ofs, vec![0, 4, 4, 7, 8]);
    assert_eq!(vals, vec![1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 4.0, 5.0]);
    let (_, l, vals) = build("Dense(SparseBand(Element(0.0)))", &a_rows());
    let LevelStorage::SparseBand(b) = l else {
        panic!()
    };
    assert_eq!(b.idx, vec![1, 2, 2, 4]);
    assert_eq!(b.ofs, vec![0, 2, 4, 7, 11]);
    assert_eq!(
        vals,
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 6.0, 7.0, 0.0, 8.0, 9.0]
    );
}

#[test]
fn golden_sparse_block_list_on_a() {
    let (_, l, vals) = build("Dense(SparseBlockList(Element(0.0)))", &a_rows());
    let LevelStorage::SparseBlockList(b) = l else {
        panic!()
    };
    assert_eq!(b.ptr, vec![0, 1, 2, 4, 6]);
    assert_eq!(b.idx, vec![1, 2, 0, 2, 1, 4]);
    assert_eq!(b.ofs, vec![0, 2, 4, 5, 6, 7, 9]);
    assert_eq!(vals, (1..=9).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn golden_run_lists_and_interval() {
    let x = v(&[0.0, 0.0, 3.0, 3.0, 3.0, 0.0, 7.0, 7.0]);
    let (_, l, vals) = build("RunList(Element(0.0))", &x);
    let LevelStorage::RunList(r) = l else {
        panic!()
    };
    assert_eq!(
        (r.ptr.clone(), r.right.clone()),
        (vec![0, 4], vec![1, 4, 5, 7])
    );
    assert_eq!(vals, vec![0.0, 3.0, 0.0, 7.0]);
    let (_, l, vals) = build("SparseRunList(Element(0.0))", &x);
    let LevelStorage::SparseRunList(r) = l else {
        panic!()
    };
    assert_eq!(
        (r.ptr.clone(), r.left.clone(), r.right.clone()),
        (vec![0, 2], vec![2, 6], vec![4, 7])
    );
    assert_eq!(vals, vec![3.0, 7.0]);
    let (_, l, vals) = build(
        "SparseInterval(Element(0.0))",
        &v(&[0.0, 0.0, 3.0, 3.0, 3.0, 0.0, 0.0, 0.0]),
    );
    let LevelStorage::SparseInterval(r) = l else {
        panic!()
    };
    assert_eq!((r.left.clone(), r.right.clone()), (vec![2], vec![4]));
    assert_eq!(vals, vec![3.0]);
}

#[test]
fn golden_sparse_point_byte_map_and_hash() {
    let diag = by_rows(&[&[10.0, 0.0, 0.0], &[0.0, 20.0, 0.0], &[0.0, 0.0, 30.0]]);
    let (_, l, vals) = build("Dense(SparsePoint(Element(0.0)))", &diag);
    let LevelStorage::SparsePoint(p) = l else {
        panic!()
    };
    assert_eq!(p.idx, vec![0, 1, 2]);
    assert_eq!(vals, vec![10.0, 20.0, 30.0]);

    let (_, l, vals) = build("Dense(SparseByteMap(Element(0.0)))", &m_rows());
    let LevelStorage::SparseByteMap(b) = l else {
        panic!()
    };
    let bits: Vec<u8> = match &b.tbl {
        Buffer::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        bits,
        vec![0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0]
    );
    assert_eq!(b.ptr, vec![0, 2, 2, 4, 5]);
    assert_eq!(b.srt, vec![1, 4, 0, 2, 3]);
    assert_eq!(vals.len(), 20);

    let (_, l, vals) = build("Dense(SparseHash(Element(0.0)))", &m_rows());
    let LevelStorage::SparseHash(h) = l else {
        panic!()
    };
    assert_eq!(
        (h.ptr.clone(), h.idx.clone()),
        (vec![0, 2, 2, 4, 5], vec![1, 4, 0, 2, 3])
    );
    assert_eq!(vals, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn single_entry_and_single_run_levels_refuse_data_that_does_not_fit() {
    let e =
        Tensor::from_dense(&fmt("SparsePoint(Element(0.0))"), &v(&[1.0, 0.0, 2.0])).unwrap_err();
    assert!(
        e.to_string().contains("fiber 0 has 2 (indices 1, 3)"),
        "{e}"
    );
    let e =
        Tensor::from_dense(&fmt("SparseInterval(Element(0.0))"), &v(&[1.0, 1.0, 2.0])).unwrap_err();
    assert!(
        e.to_string().contains("fiber 0 has 2 runs (1:2, 3:3)"),
        "{e}"
    );
    // A long fiber is named by its first few entries, not all of them.
    let long: Vec<f64> = (0..1000).map(|k| (k % 2 + 1) as f64).collect();
    for f in ["SparsePoint(Element(0.0))", "SparseInterval(Element(0.0))"] {
        let e = Tensor::from_dense(&fmt(f), &v(&long))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fiber 0 has 1000"), "{e}");
        assert!(e.contains(", ... (994 more)") && e.len() < 200, "{e}");
    }
    // Empty fibers are fine for both.
    let sparse = by_rows(&[&[0.0, 4.0], &[0.0, 0.0]]);
    let (_, l, _) = build("Dense(SparsePoint(Element(0.0)))", &sparse);
    let LevelStorage::SparsePoint(p) = l else {
        panic!()
    };
    assert_eq!(p.idx, vec![1, 2]);
    let (_, l, _) = build("Dense(SparseInterval(Element(0.0)))", &sparse);
    let LevelStorage::SparseInterval(r) = l else {
        panic!()
    };
    assert_eq!((r.left.clone(), r.right.clone()), (vec![1, 1], vec![1, 0]));
}

/// Replaces the level below the Dense root and returns the validator's message.
fn broken(format: &str, a: &DenseArray, edit: impl FnOnce(&mut LevelStorage)) -> String {
    let t = Tensor::from_dense(&fmt(format), a).unwrap();
    let (f, shape, storage) = t.into_parts();
    let TensorStorage::Levels(mut root) = storage else {
        panic!()
    };
    match &mut root {
        LevelStorage::Dense(d) => edit(&mut d.child),
        other => edit(other),
    }
    match Tensor::from_parts(f, shape, TensorStorage::Levels(root)) {
        Err(Error::Invalid { invariant, .. }) => invariant.to_string(),
        other => panic!("expected an invariant violation, got {other:?}"),
    }
}

#[test]
fn validator_rejects_broken_structured_levels() {
    let band = |l: &mut LevelStorage| {
        let LevelStorage::SparseBand(b) = l else {
            panic!()
        };
        b.idx[0] = 2; // width 4 ending at 2 starts before 0
    };
    assert!(broken("Dense(SparseBand(Element(0.0)))", &m_rows(), band).starts_with("I3"));
    let x = v(&[0.0, 0.0, 3.0, 3.0, 3.0, 0.0, 7.0, 7.0]);
    let runs = |l: &mut LevelStorage| {
        let LevelStorage::RunList(r) = l else {
            panic!()
        };
        r.right[3] = 6; // last run no longer ends at n - 1
    };
    assert!(broken("RunList(Element(0.0))", &x, runs).starts_with("I5"));
    let overlap = |l: &mut LevelStorage| {
        let LevelStorage::SparseRunList(r) = l else {
            panic!()
        };
        r.left[1] = 4; // [2,4] and [4,7] overlap
    };
    assert!(broken("SparseRunList(Element(0.0))", &x, overlap).starts_with("I6"));
    let unset = |l: &mut LevelStorage| {
        let LevelStorage::SparseByteMap(b) = l else {
            panic!()
        };
        if let Buffer::Bool(t) = &mut b.tbl {
            t[1] = false; // srt lists (0, 1)
        }
    };
    assert!(broken("Dense(SparseByteMap(Element(0.0)))", &m_rows(), unset).starts_with("I6"));
    let repeated = |l: &mut LevelStorage| {
        let LevelStorage::SparseHash(h) = l else {
            panic!()
        };
        h.pos[1] = h.pos[0];
    };
    assert!(broken("Dense(SparseHash(Element(0.0)))", &m_rows(), repeated).starts_with("I5"));
    let point = |l: &mut LevelStorage| {
        let LevelStorage::SparsePoint(p) = l else {
            panic!()
        };
        p.idx[1] = 7;
    };
    let diag = by_rows(&[&[10.0, 0.0, 0.0], &[0.0, 20.0, 0.0], &[0.0, 0.0, 30.0]]);
    assert!(broken("Dense(SparsePoint(Element(0.0)))", &diag, point).starts_with("I2"));
    let empty_with_value = |l: &mut LevelStorage| {
        let LevelStorage::SparsePoint(p) = l else {
            panic!()
        };
        p.idx[1] = 3; // marks fiber 1 empty, but its child holds 20
    };
    assert!(broken("Dense(SparsePoint(Element(0.0)))", &diag, empty_with_value).starts_with("I3"));
    let blocks = |l: &mut LevelStorage| {
        let LevelStorage::SparseBlockList(b) = l else {
            panic!()
        };
        b.idx[4] = 3; // row 3: the first block now ends where the second starts
    };
    assert!(broken("Dense(SparseBlockList(Element(0.0)))", &a_rows(), blocks).starts_with("I7"));
    let interval = |l: &mut LevelStorage| {
        let LevelStorage::SparseInterval(r) = l else {
            panic!()
        };
        r.right[0] = 8;
    };
    assert!(broken(
        "SparseInterval(Element(0.0))",
        &v(&[0.0, 3.0, 3.0]),
        interval
    )
    .starts_with("I2"));
}

#[test]
fn tree_printer_shows_runs_as_ranges() {
    let x = v(&[0.0, 0.0, 3.0, 3.0, 3.0, 0.0, 7.0, 7.0]);
    let t = Tensor::from_dense(&fmt("SparseRunList(Element(0.0))"), &x).unwrap();
    assert_eq!(
        t.to_string(),
        "8 Tensor SparseRunList(Element(0.0))\n└─ SparseRunList [1:8]\n   ├─ [3:5]: 3.0\n   └─ [7:8]: 7.0\n"
    );
    let t = Tensor::from_dense(&fmt("RunList(Element(0.0))"), &x).unwrap();
    assert!(t.to_string().contains("├─ [1:2]: 0.0\n"), "{t}");
}

#[test]
fn sparse_scalar_dirty_flag_follows_its_value() {
    use finch::formats::{ScalarKind, ScalarStorage};
    use finch::Value;
    let f = Format::parse("SparseScalar(0.0)").unwrap();
    // Built from data: a value other than the fill was written.
    let five = DenseArray::from_f64(&[], &[5.0]).unwrap();
    let TensorStorage::Scalar(s) = Tensor::from_dense(&f, &five).unwrap().storage().clone() else {
        panic!()
    };
    assert!(s.dirty);
    // Handed in: an unwritten SparseScalar must hold its fill (I2).
    let bad = Tensor::from_parts(
        f,
        vec![],
        TensorStorage::Scalar(ScalarStorage {
            kind: ScalarKind::SparseScalar,
            fill: Value::F64(0.0),
            val: Value::F64(5.0),
            dirty: false,
        }),
    );
    let msg = bad.unwrap_err().to_string();
    assert!(msg.contains("I2"), "{msg}");
}

/// The level table of `docs/capabilities.md` says what each level's capabilities say:
/// `gallop` and `follow` ("no" where the level lacks them), and written in any order
/// ("yes" where the level inserts, "through a hash table" where it does not).
#[test]
fn the_documented_level_table_matches_the_capabilities() {
    use finch::formats::LevelKind;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/capabilities.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    for &kind in LevelKind::ALL {
        let name = match kind.mode_count_param() {
            Some(_) => format!("`{}{{N}}`", kind.name()),
            None => format!("`{}`", kind.name()),
        };
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name} in {}", path.display()));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let can = kind.capabilities();
        assert_eq!(cells[2] != "no", can.gallop, "gallop of {name}: {row}");
        assert_eq!(cells[3] != "no", can.follow, "follow of {name}: {row}");
        assert_eq!(
            cells[5].starts_with("yes"),
            can.insert,
            "any order of {name}: {row}"
        );
    }
}

/// Issue #28: a level's knowledge lives in its module. Outside the level modules
/// (`formats/<level>.rs`), the registry (`formats/registry.rs`, and `format.rs`,
/// `level.rs` and `output.rs`, which ask it) and the named formats (`formats/named.rs`),
/// no library code names a registered level: no `LevelKind::`, `LevelStorage::` or (but
/// the lowering's own Dense lookup) `LevelParams::` variant of one. A file's tests, after
/// its `#[cfg(test)]`, and comments are not code. The levels come from the registry.
#[test]
fn no_library_code_outside_the_level_modules_names_a_level() {
    use finch::formats::LevelKind;
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let levels: Vec<String> = LevelKind::ALL
        .iter()
        .map(|k| {
            let debug = format!("{k:?}");
            debug.split('(').next().unwrap_or_default().to_string()
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    for level in &levels {
        names.push(format!("LevelKind::{level}"));
        names.push(format!("LevelStorage::{level}"));
        if level != "Dense" {
            names.push(format!("LevelParams::{level}"));
        }
    }
    let exempt = |path: &std::path::Path| {
        let rel = path
            .strip_prefix(&src)
            .unwrap_or(path)
            .to_string_lossy()
            .to_string();
        let file = rel.strip_prefix("formats/").unwrap_or("");
        let level_module = levels.iter().any(|l| {
            let snake: String = l.chars().fold(String::new(), |mut s, c| {
                if c.is_uppercase() && !s.is_empty() {
                    s.push('_');
                }
                s.push(c.to_ascii_lowercase());
                s
            });
            file == format!("{snake}.rs")
        });
        level_module
            || [
                "registry.rs",
                "format.rs",
                "level.rs",
                "output.rs",
                "named.rs",
            ]
            .contains(&file)
    };
    let mut found = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !exempt(&path) {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    if line.trim() == "#[cfg(test)]" {
                        break;
                    }
                    let code = line.split("//").next().unwrap_or_default();
                    for name in &names {
                        let hit = code.match_indices(name.as_str()).any(|(at, _)| {
                            !code[at + name.len()..]
                                .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                        });
                        if hit {
                            found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                        }
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "levels named outside their modules:\n{}",
        found.join("\n")
    );
}

//! Checked invariants: a tensor `validate` accepts is safe for every kernel. Random
//! corruptions of 2- and 3-level tensors in every level format in every position (a
//! size, position, index, run or block end changed to a nearby or arbitrary value, a
//! bytemap flag flipped) are either rejected by the validator with the invariant's name,
//! or the tensor they make runs through the bounds-checked interpreter without reading
//! outside any buffer and gives the reference's results on what the tensor means
//! (`to_dense`). A corruption the validator let through and a kernel then read outside a
//! buffer would be undefined behaviour in the trusted C kernels, which do not check
//! bounds.

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::{Format, LevelStorage};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Buffer, IndexVec, Tensor, TensorStorage};
use finch::{DenseArray, Error, Program};
use proptest::prelude::*;

const LEVELS: [&str; 12] = [
    "Dense",
    "SparseList",
    "SparseList{UInt32}",
    "SparsePoint",
    "SparseInterval",
    "SparseBand",
    "SparseBlockList",
    "RunList",
    "SparseRunList",
    "SparseByteMap",
    "SparseHash",
    "SparseCOO{1}",
];

/// A value of a level's storage a corruption may change.
enum Slot<'a> {
    /// An index buffer (positions, indices, run or block ends).
    Wide(&'a mut Vec<usize>),
    /// A 32-bit index buffer.
    Narrow(&'a mut Vec<u32>),
    /// A level's size.
    Size(&'a mut usize),
    /// A SparseByteMap's flags.
    Flags(&'a mut Vec<bool>),
}

/// Every index buffer and size of a level tree, outermost first.
fn slots<'a>(l: &'a mut LevelStorage, out: &mut Vec<Slot<'a>>) {
    let wide = |v: &'a mut Vec<usize>| Slot::Wide(v);
    let child = match l {
        LevelStorage::Dense(d) => {
            out.push(Slot::Size(&mut d.shape));
            &mut d.child
        }
        LevelStorage::SparseList(s) => {
            out.push(Slot::Size(&mut s.shape));
            for v in [&mut s.ptr, &mut s.idx] {
                out.push(match v {
                    IndexVec::Wide(w) => Slot::Wide(w),
                    IndexVec::Narrow(n) => Slot::Narrow(n),
                });
            }
            &mut s.child
        }
        LevelStorage::SparseCoo(s) => {
            out.extend([wide(&mut s.shape), wide(&mut s.ptr)]);
            out.extend(s.tbl.iter_mut().map(wide));
            &mut s.child
        }
        LevelStorage::SparsePoint(s) => {
            out.extend([Slot::Size(&mut s.shape), wide(&mut s.idx)]);
            &mut s.child
        }
        LevelStorage::SparseInterval(s) => {
            out.extend([
                Slot::Size(&mut s.shape),
                wide(&mut s.left),
                wide(&mut s.right),
            ]);
            &mut s.child
        }
        LevelStorage::SparseBand(s) => {
            out.extend([Slot::Size(&mut s.shape), wide(&mut s.idx), wide(&mut s.ofs)]);
            &mut s.child
        }
        LevelStorage::SparseBlockList(s) => {
            out.extend([
                Slot::Size(&mut s.shape),
                wide(&mut s.ptr),
                wide(&mut s.idx),
                wide(&mut s.ofs),
            ]);
            &mut s.child
        }
        LevelStorage::RunList(s) => {
            out.extend([
                Slot::Size(&mut s.shape),
                wide(&mut s.ptr),
                wide(&mut s.right),
            ]);
            &mut s.child
        }
        LevelStorage::SparseRunList(s) => {
            out.extend([
                Slot::Size(&mut s.shape),
                wide(&mut s.ptr),
                wide(&mut s.left),
                wide(&mut s.right),
            ]);
            &mut s.child
        }
        LevelStorage::SparseByteMap(s) => {
            out.extend([Slot::Size(&mut s.shape), wide(&mut s.ptr), wide(&mut s.srt)]);
            if let Buffer::Bool(flags) = &mut s.tbl {
                out.push(Slot::Flags(flags));
            }
            &mut s.child
        }
        LevelStorage::SparseHash(s) => {
            out.extend([
                Slot::Size(&mut s.shape),
                wide(&mut s.ptr),
                wide(&mut s.idx),
                wide(&mut s.pos),
            ]);
            &mut s.child
        }
        LevelStorage::Element(_) | LevelStorage::Pattern(_) => return,
    };
    slots(child, out);
}

/// `old` changed as `change` says (`arbitrary` for an arbitrary small value).
fn corrupt(old: usize, change: u8, arbitrary: usize) -> usize {
    match change {
        0 => old + 1,
        1 => old.saturating_sub(1),
        2 => 0,
        3 => old + 2,
        4 => arbitrary,
        _ => u32::MAX as usize,
    }
}

fn dense(shape: &[usize], seed: u64) -> DenseArray {
    let len: usize = shape.iter().product();
    let mut s = seed | 1;
    let data: Vec<f64> = (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match (s >> 40) % 4 {
                0 | 1 => 0.0,
                2 => 3.0,
                _ => ((s >> 20) % 9) as f64 - 4.0,
            }
        })
        .collect();
    DenseArray::from_f64(shape, &data).unwrap()
}

/// Read kernels over matrix `A` (root over the columns `j`): a sum, SpMV, a copy into a
/// dense matrix, an element-wise product with itself stored as CSC, and reads by random
/// access (`follow`) and by galloping (where the level has the protocol).
const PROGRAMS: [&str; 6] = [
    "output s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[follow(i), j] * 2.0\nend\n",
    "input B :: Dense(SparseList(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[gallop(i), j] * B[gallop(i), j]\nend\n",
    "output s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j]\nend\n",
    "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n",
    "output C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] + 1.0\nend\n",
    "input B :: Dense(SparseList(Element(0.0)))\noutput C :: Dense(Dense(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
];

/// The same for a 3-mode tensor: a sum, and a copy with one random-access mode.
const PROGRAMS_3: [&str; 2] = [
    "output s :: Scalar(0.0)\ns .= 0\nfor k = _, j = _, i = _\n  s[] += A[i, j, k]\nend\n",
    "output C :: Dense(Dense(Dense(Element(0.0))))\nC .= 0\nfor k = _, j = _, i = _\n  C[i, j, k] = A[follow(i), j, k] - 1.0\nend\n",
];

/// Runs every program on `a` with the interpreter and checks it against the reference.
fn reads_match_reference(a: &Tensor, format: &str) -> Result<(), TestCaseError> {
    let meaning = a
        .to_dense()
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let x = dense(&[n], 7);
    let programs: &[&str] = if a.shape().len() == 3 {
        &PROGRAMS_3
    } else {
        &PROGRAMS
    };
    for body in programs {
        let text = format!("input A :: {format}\n{body}");
        let p = Program::parse(&text).unwrap();
        let k = match p.compile(Engine::Interp) {
            Ok(k) => k,
            // A level without the protocol a program asks for is refused by name.
            Err(Error::Unsupported(_)) => continue,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
        };
        let mut reference = Bindings::new();
        let mut t = HashMap::new();
        reference.insert("A", meaning.clone());
        t.insert("A".to_string(), a.clone());
        if p.decl("x").is_some() {
            reference.insert("x", x.clone());
            let vec = Format::parse("Dense(Element(0.0))").unwrap();
            t.insert("x".to_string(), Tensor::from_dense(&vec, &x).unwrap());
        }
        if p.decl("B").is_some() {
            reference.insert("B", meaning.clone());
            let csc = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
            t.insert("B".to_string(), Tensor::from_dense(&csc, &meaning).unwrap());
        }
        p.run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        k.run(&mut t, &HashMap::new())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}\n{m}x{n}")))?;
        for name in ["s", "y", "C"] {
            if let (Some(got), Some(want)) = (t.get(name), reference.get(name)) {
                prop_assert_eq!(&got.to_dense().unwrap(), want, "{}", text);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_index_buffers_are_rejected_or_harmless(
        outer in 0..LEVELS.len(),
        inner in 0..LEVELS.len(),
        middle in prop::option::weighted(0.3, 0..LEVELS.len()),
        m in 0usize..7,
        n in 0usize..7,
        seed in any::<u64>(),
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        change in 0u8..6,
        arbitrary in 0usize..12,
    ) {
        // Two levels, or three with a middle level.
        let (format, shape) = match middle {
            Some(mid) => (
                format!("{}({}({}(Element(0.0))))", LEVELS[outer], LEVELS[mid], LEVELS[inner]),
                vec![m, n, (m + n) % 4],
            ),
            None => (format!("{}({}(Element(0.0)))", LEVELS[outer], LEVELS[inner]), vec![m, n]),
        };
        let f = Format::parse(&format).unwrap();
        let a = dense(&shape, seed);
        // Data a single-entry or single-run level cannot hold is not this test's subject.
        let Ok(t) = Tensor::from_dense(&f, &a) else {
            return Ok(());
        };
        let (f, shape, storage) = t.into_parts();
        let TensorStorage::Levels(mut root) = storage else {
            return Err(TestCaseError::fail("not a level tensor"));
        };
        let mut all = Vec::new();
        slots(&mut root, &mut all);
        let mut all: Vec<Slot> = all
            .into_iter()
            .filter(|s| match s {
                Slot::Wide(v) => !v.is_empty(),
                Slot::Narrow(v) => !v.is_empty(),
                Slot::Flags(v) => !v.is_empty(),
                Slot::Size(_) => true,
            })
            .collect();
        if all.is_empty() {
            return Ok(());
        }
        let k = pick.index(all.len());
        let changed = match &mut all[k] {
            Slot::Wide(v) => {
                let q = at.index(v.len());
                let old = v[q];
                v[q] = corrupt(old, change, arbitrary);
                v[q] != old
            }
            Slot::Narrow(v) => {
                let q = at.index(v.len());
                let old = v[q];
                v[q] = u32::try_from(corrupt(old as usize, change, arbitrary)).unwrap_or(u32::MAX);
                v[q] != old
            }
            Slot::Size(x) => {
                let old = **x;
                **x = corrupt(old, change, arbitrary);
                **x != old
            }
            Slot::Flags(v) => {
                let q = at.index(v.len());
                v[q] = !v[q];
                true
            }
        };
        drop(all);
        if !changed {
            return Ok(());
        }
        match Tensor::from_parts(f, shape, TensorStorage::Levels(root)) {
            // Rejected by name.
            Err(Error::Invalid { invariant, .. }) => {
                prop_assert!(invariant.starts_with('I'), "{}", invariant);
            }
            // Sizes that disagree with the tensor's shape.
            Err(Error::Program(m)) if m.contains("does not match the format") => {}
            Err(other) => {
                return Err(TestCaseError::fail(format!("not an invariant violation: {other}")));
            }
            // Accepted: it must be a tensor every kernel reads safely.
            Ok(t) => reads_match_reference(&t, &format)?,
        }
    }
}

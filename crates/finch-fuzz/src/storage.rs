//! Tensors from raw arrays: the constructors that take a caller's buffers (`from_csc`,
//! `from_csr`, `from_coo`) and level storage corrupted in place. A tensor the validator
//! accepts must be safe for every kernel: the bounds-checked interpreter reads it without
//! leaving a buffer and gives the reference's results on what it means (`to_dense`). A
//! corruption that passed the validator and a kernel then read out of bounds would be
//! undefined behaviour in the trusted C kernels, which check no bounds.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use finch::engine::{CompiledProgram, Engine};
use finch::formats::{Format, LevelKind, LevelStorage};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Buffer, Coo, IndexVec, Tensor, TensorStorage};
use finch::{DenseArray, Error, Program, ScalarType, Value};

use crate::bytes::Bytes;

/// A value of a level's storage a corruption may change.
pub enum Slot<'a> {
    /// An index buffer (positions, indices, run or block ends).
    Wide(&'a mut Vec<usize>),
    /// A 32-bit index buffer.
    Narrow(&'a mut Vec<u32>),
    /// A level's size.
    Size(&'a mut usize),
    /// A SparseByteMap's flags.
    Flags(&'a mut Vec<bool>),
}

impl Slot<'_> {
    /// Whether there is nothing in it to change.
    pub fn is_empty(&self) -> bool {
        match self {
            Slot::Wide(v) => v.is_empty(),
            Slot::Narrow(v) => v.is_empty(),
            Slot::Flags(v) => v.is_empty(),
            Slot::Size(_) => false,
        }
    }

    /// Changes entry `at` (taken modulo the length) as [`corrupt`] says; whether it
    /// changed.
    pub fn corrupt_at(&mut self, at: usize, change: u8, arbitrary: usize) -> bool {
        match self {
            Slot::Wide(v) => {
                let q = at % v.len();
                let old = v[q];
                v[q] = corrupt(old, change, arbitrary);
                v[q] != old
            }
            Slot::Narrow(v) => {
                let q = at % v.len();
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
                let q = at % v.len();
                v[q] = !v[q];
                true
            }
        }
    }
}

/// Every index buffer and size of a level tree, outermost first.
pub fn slots<'a>(l: &'a mut LevelStorage, out: &mut Vec<Slot<'a>>) {
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
pub fn corrupt(old: usize, change: u8, arbitrary: usize) -> usize {
    match change % 6 {
        0 => old + 1,
        1 => old.saturating_sub(1),
        2 => 0,
        3 => old + 2,
        4 => arbitrary,
        _ => u32::MAX as usize,
    }
}

/// Small `f64` data of a shape, half zeros, from a seed.
pub fn small_dense(shape: &[usize], seed: u64) -> DenseArray {
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
    match DenseArray::from_f64(shape, &data) {
        Ok(a) => a,
        Err(e) => panic!("a {shape:?} array of {len} values: {e}"),
    }
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

/// A read program and its kernel.
type ReadKernel = (Program, Rc<CompiledProgram>);

/// A read kernel compiled for the interpreter, or `None` where the compiler refuses it
/// by name; kept per program text for the life of the process, since a fuzzer runs the
/// same few hundred formats again and again (compiling took most of each input's time).
fn compiled(text: &str) -> Result<Option<ReadKernel>, String> {
    thread_local! {
        static KERNELS: RefCell<HashMap<String, Option<ReadKernel>>> = RefCell::new(HashMap::new());
    }
    if let Some(hit) = KERNELS.with(|k| k.borrow().get(text).cloned()) {
        return Ok(hit);
    }
    let p = Program::parse(text).map_err(|e| format!("{e}\n{text}"))?;
    let k = match p.compile(Engine::Interp) {
        Ok(k) => Some((p, Rc::new(k))),
        Err(Error::Unsupported(_)) => None,
        Err(e) => return Err(format!("{e}\n{text}")),
    };
    KERNELS.with(|cache| cache.borrow_mut().insert(text.to_string(), k.clone()));
    Ok(k)
}

/// Runs the read kernels on `a` (an `f64` matrix or 3-mode tensor stored in `format`)
/// with the interpreter, and checks each against the reference on `a.to_dense()`.
pub fn reads_match_reference(a: &Tensor, format: &str) -> Result<(), String> {
    let meaning = a.to_dense().map_err(|e| format!("to_dense: {e}"))?;
    let programs: &[&str] = match a.shape().len() {
        2 => &PROGRAMS,
        3 => &PROGRAMS_3,
        _ => return Ok(()),
    };
    let x = small_dense(&[a.shape()[1]], 7);
    for body in programs {
        let text = format!("input A :: {format}\n{body}");
        let Some((p, k)) = compiled(&text)? else {
            // A level without the protocol a program asks for is refused by name.
            continue;
        };
        let mut reference = Bindings::new();
        let mut t = HashMap::new();
        reference.insert("A", meaning.clone());
        t.insert("A".to_string(), a.clone());
        let bind =
            |name: &str, f: &str, data: &DenseArray, r: &mut Bindings, t: &mut HashMap<_, _>| {
                let format = Format::parse(f).map_err(|e| e.to_string())?;
                r.insert(name, data.clone());
                let tensor = Tensor::from_dense(&format, data).map_err(|e| e.to_string())?;
                t.insert(name.to_string(), tensor);
                Ok::<(), String>(())
            };
        if p.decl("x").is_some() {
            bind("x", "Dense(Element(0.0))", &x, &mut reference, &mut t)?;
        }
        if p.decl("B").is_some() {
            let csc = "Dense(SparseList(Element(0.0)))";
            bind("B", csc, &meaning, &mut reference, &mut t)?;
        }
        p.run_reference(&mut reference, &RunOptions::default())
            .map_err(|e| format!("reference: {e}\n{text}"))?;
        k.run(&mut t, &HashMap::new())
            .map_err(|e| format!("{e}\n{text}\n{:?}", a.shape()))?;
        for name in ["s", "y", "C"] {
            if let (Some(got), Some(want)) = (t.get(name), reference.get(name)) {
                let got = got.to_dense().map_err(|e| e.to_string())?;
                if &got != want {
                    return Err(format!("`{name}` differs\n{text}\n{got:?}\n{want:?}"));
                }
            }
        }
    }
    Ok(())
}

/// What the validator said of corrupted storage: rejected with an invariant's name or
/// for sizes that disagree with the shape, or accepted and read as the reference reads it.
pub fn corrupted_is_rejected_or_harmless(
    result: finch::Result<Tensor>,
    format: &str,
) -> Result<(), String> {
    match result {
        Err(Error::Invalid { invariant, .. }) if invariant.starts_with('I') => Ok(()),
        Err(Error::Program(m)) if m.contains("does not match the format") => Ok(()),
        Err(other) => Err(format!("not an invariant violation: {other}")),
        Ok(t) => reads_match_reference(&t, format),
    }
}

/// A format of two or three levels over an `f64` leaf, and a shape for it.
fn level_format(b: &mut Bytes) -> (String, Vec<usize>) {
    let levels = LevelKind::registry();
    let outer = b.pick(&levels).clone();
    let inner = b.pick(&levels).clone();
    let (m, n) = (b.below(7), b.below(7));
    if b.below(3) == 0 {
        let middle = b.pick(&levels).clone();
        let f = format!("{outer}({middle}({inner}(Element(0.0))))");
        (f, vec![m, n, (m + n) % 4])
    } else {
        (format!("{outer}({inner}(Element(0.0)))"), vec![m, n])
    }
}

/// Level storage of a random format and data, changed in one to three places.
fn corrupted_storage(b: &mut Bytes) {
    let (format, shape) = level_format(b);
    let Ok(f) = Format::parse(&format) else {
        panic!("a format of known levels does not parse: {format}");
    };
    let a = small_dense(&shape, b.u64());
    // Data a single-entry or single-run level cannot hold is not this target's subject.
    let Ok(t) = Tensor::from_dense(&f, &a) else {
        return;
    };
    let (f, shape, storage) = t.into_parts();
    let TensorStorage::Levels(mut root) = storage else {
        panic!("`{format}` is not stored in levels");
    };
    let mut changed = false;
    for _ in 0..1 + b.below(3) {
        let mut all = Vec::new();
        slots(&mut root, &mut all);
        all.retain(|s| !s.is_empty());
        if all.is_empty() {
            return;
        }
        let k = b.below(all.len());
        let (at, change, arbitrary) = (b.below(4096), b.byte(), b.below(12));
        changed |= all[k].corrupt_at(at, change, arbitrary);
    }
    if !changed {
        return;
    }
    let result = Tensor::from_parts(f, shape, TensorStorage::Levels(root));
    if let Err(e) = corrupted_is_rejected_or_harmless(result, &format) {
        panic!("corrupted `{format}`: {e}");
    }
}

/// A CSC (or CSR) matrix from raw pointer, index and value arrays, mostly valid.
fn csx_arrays(b: &mut Bytes) {
    let (nrows, ncols) = (b.below(6), b.below(6));
    let narrow = b.below(2) == 1;
    let transposed_csr = b.below(3);
    let ptr_len = match b.below(4) {
        0 => b.below(8),
        _ => ncols + 1,
    };
    let mut ptr: Vec<usize> = Vec::with_capacity(ptr_len);
    let mut at = 0;
    for k in 0..ptr_len {
        if k > 0 {
            at += b.below(3);
        }
        ptr.push(if b.below(16) == 0 { b.below(20) } else { at });
    }
    let nnz = ptr.last().copied().unwrap_or(0);
    let idx: Vec<usize> = (0..nnz + usize::from(b.below(8) == 0))
        .map(|_| {
            let past = usize::from(b.below(8) == 0);
            b.below(nrows + 1 + past)
        })
        .collect();
    let vals: Vec<f64> = (0..nnz).map(|_| f64::from(b.byte() % 7) - 3.0).collect();
    let (ptr_v, idx_v): (IndexVec, IndexVec) = if narrow {
        let n = |v: &[usize]| v.iter().map(|&x| x as u32).collect::<Vec<u32>>();
        (IndexVec::Narrow(n(&ptr)), IndexVec::Narrow(n(&idx)))
    } else {
        (IndexVec::Wide(ptr.clone()), IndexVec::Wide(idx.clone()))
    };
    let data = Buffer::F64(vals.clone());
    let result = match transposed_csr {
        0 => Tensor::from_csc(nrows, ncols, ptr_v, idx_v, data),
        1 => Tensor::from_csr(ncols, nrows, ptr_v, idx_v, data),
        _ => Tensor::from_csr_transposed(ncols, nrows, ptr_v, idx_v, data),
    };
    // Any refusal is fine: the arrays come from outside. An accepted matrix must mean
    // what the arrays say and be read correctly.
    let Ok(t) = result else {
        return;
    };
    let (rows, cols) = if transposed_csr == 1 {
        (ncols, nrows)
    } else {
        (nrows, ncols)
    };
    let mut want = small_dense(&[rows, cols], 0);
    want.data.iter_mut().for_each(|v| *v = Value::F64(0.0));
    for j in 0..ncols {
        for p in ptr[j]..ptr[j + 1] {
            let coord = if transposed_csr == 1 {
                [j, idx[p]]
            } else {
                [idx[p], j]
            };
            if let Err(e) = want.set(&coord, Value::F64(vals[p])) {
                panic!("accepted arrays index outside the matrix: {e}\nptr {ptr:?} idx {idx:?}");
            }
        }
    }
    match t.to_dense() {
        Ok(got) => assert_eq!(got, want, "ptr {ptr:?} idx {idx:?} vals {vals:?}"),
        Err(e) => panic!("an accepted matrix cannot be read: {e}"),
    }
    let format = t.format().to_string();
    if let Err(e) = reads_match_reference(&t, &format) {
        panic!("an accepted matrix is read wrongly: {e}\nptr {ptr:?} idx {idx:?}");
    }
}

/// Coordinates and values (inside or just outside the shape, duplicates allowed) stored
/// in a random format with `from_coo`.
fn coo_arrays(b: &mut Bytes) {
    let (format, shape) = level_format(b);
    let Ok(f) = Format::parse(&format) else {
        panic!("a format of known levels does not parse: {format}");
    };
    let len = b.below(10);
    let coords: Vec<Vec<usize>> = shape
        .iter()
        .map(|&d| (0..len).map(|_| b.below(d + 1)).collect())
        .collect();
    let vals: Vec<Value> = (0..len)
        .map(|_| Value::F64(f64::from(b.byte() % 5) - 2.0))
        .collect();
    let coo = Coo {
        ty: ScalarType::F64,
        shape,
        coords,
        vals,
    };
    // Coordinates outside the shape and data a level cannot hold are refused.
    let Ok(t) = Tensor::from_coo(&f, &coo) else {
        return;
    };
    if let Err(e) = t.validate() {
        panic!("from_coo built a tensor that fails validation: {e}\n{format}\n{coo:?}");
    }
    if let Err(e) = reads_match_reference(&t, &format) {
        panic!("a tensor from_coo is read wrongly: {e}\n{coo:?}");
    }
}

/// The `raw_arrays` target: the first byte chooses corrupted level storage, CSC/CSR
/// arrays, or coordinates.
pub fn raw_arrays(data: &[u8]) {
    let mut b = Bytes::new(data);
    match b.below(3) {
        0 => corrupted_storage(&mut b),
        1 => csx_arrays(&mut b),
        _ => coo_arrays(&mut b),
    }
}

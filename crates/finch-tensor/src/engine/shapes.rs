//! The first phase of a run: every input present in its declared format, and the size
//! of every mode of every tensor, from the inputs, the shapes given and the program's
//! dimension constraints, checked against each other, against the windows and against
//! the loop ranges that run over offset reads.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::lower::{Bound, Lowered, RangeCheck, Size, TensorInfo};
use crate::notation::DeclKind;
use crate::tensor::Tensor;

/// Every input is present, with the declared format.
pub(super) fn check_inputs(infos: &[TensorInfo], tensors: &HashMap<String, Tensor>) -> Result<()> {
    // Inputs: present, with the declared format.
    for info in infos.iter().filter(|t| t.kind == DeclKind::Input) {
        let t = tensors
            .get(&info.name)
            .ok_or_else(|| Error::Program(format!("missing input: {}", info.name)))?;
        if t.format() != &info.format {
            return Err(Error::Program(format!(
                "the input `{}` is stored as {} but the program declares {}",
                info.name,
                t.format(),
                info.format
            )));
        }
    }
    Ok(())
}

/// The shape of every tensor that is not a scalar, by its index in `lowered.tensors`.
pub(super) fn infer_shapes(
    lowered: &Lowered,
    tensors: &HashMap<String, Tensor>,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<HashMap<usize, Vec<usize>>> {
    let infos = &lowered.tensors;
    // Shapes of inputs, then outputs from the sizes of the loops that write them.
    let mut shape_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, info) in infos.iter().enumerate() {
        if info.kind == DeclKind::Input {
            if let Some(t) = tensors.get(&info.name) {
                shape_of.insert(k, t.shape().to_vec());
            }
        }
    }
    // Sizes of every (tensor, mode): inputs and given shapes first, then propagated
    // through the dimension constraints and the loops that write outputs, to a fixpoint
    // (a workspace can size an output and the other way round).
    let mut known: HashMap<(usize, usize), usize> = HashMap::new();
    for (k, sh) in &shape_of {
        for (m, &n) in sh.iter().enumerate() {
            known.insert((*k, m), n);
        }
    }
    for (k, info) in infos.iter().enumerate() {
        if let Some(sh) = shapes.get(&info.name) {
            if sh.len() != info.format.ndims() {
                return Err(Error::Program(format!(
                    "a shape of {} modes was given for `{}`, which has {}",
                    sh.len(),
                    info.name,
                    info.format.ndims()
                )));
            }
            for (m, &n) in sh.iter().enumerate() {
                known.entry((k, m)).or_insert(n);
            }
        }
    }
    let scalar_bounds = scalar_bounds(infos, tensors);
    let bound = |b: &Bound| match b {
        Bound::Const(n) => Some(*n),
        Bound::Scalar(t, c) => scalar_bounds.get(t).and_then(|v| v.checked_add(*c)),
    };
    let value = |s: &Size, known: &HashMap<(usize, usize), usize>| -> Option<usize> {
        match s {
            Size::Const(n) => usize::try_from(*n).ok(),
            Size::Mode(t, m) => known.get(&(*t, *m)).copied(),
            Size::Span(lo, hi) => bound(hi)
                .zip(bound(lo))
                .and_then(|(hi, lo)| hi.checked_sub(lo)?.checked_add(1))
                .and_then(|n| usize::try_from(n).ok()),
        }
    };
    loop {
        let mut changed = false;
        let mut learn = |from: &Size, to: &Size, known: &mut HashMap<(usize, usize), usize>| {
            if let (Some(n), Size::Mode(t, m)) = (value(from, known), to) {
                if let std::collections::hash_map::Entry::Vacant(e) = known.entry((*t, *m)) {
                    e.insert(n);
                    changed = true;
                }
            }
        };
        for (a, b, _) in &lowered.constraints {
            learn(a, b, &mut known);
            learn(b, a, &mut known);
        }
        for (k, sizes) in &lowered.output_shapes {
            for (m, s) in sizes.iter().enumerate() {
                if let Some(s) = s {
                    learn(s, &Size::Mode(*k, m), &mut known);
                }
            }
        }
        if !changed {
            break;
        }
    }
    let show_bound = |b: &Bound| show_bound(infos, b);
    let describe = |s: &Size| match s {
        Size::Const(n) => format!("the loop range 1:{n}"),
        Size::Mode(t, m) => format!("`{}` (mode {})", infos[*t].name, m + 1),
        Size::Span(lo, hi) => format!("the window ({}:{})", show_bound(lo), show_bound(hi)),
    };
    check_windows(lowered, &bound, &known)?;
    // Before the sizes alone, which would blame the lengths.
    check_ranges(&lowered.ranges, infos, &bound, &known)?;
    for (a, b, index) in &lowered.constraints {
        if let (Some(x), Some(y)) = (value(a, &known), value(b, &known)) {
            if x != y {
                return Err(Error::Program(format!(
                    "the loop index `{index}` ranges over {} of size {x} and over {} of size {y}; the sizes must be equal",
                    describe(a),
                    describe(b)
                )));
            }
        }
    }
    for (k, info) in infos.iter().enumerate() {
        if info.kind == DeclKind::Input || info.scalar.is_some() {
            continue;
        }
        let mut sh = Vec::with_capacity(info.format.ndims());
        for m in 0..info.format.ndims() {
            match known.get(&(k, m)) {
                Some(&n) => sh.push(n),
                None => {
                    return Err(Error::Program(format!(
                        "cannot determine the size of mode {} of `{}`; give its shape",
                        m + 1,
                        info.name
                    )))
                }
            }
        }
        shape_of.insert(k, sh);
    }
    Ok(shape_of)
}

/// The values of the input scalars (integers only), by tensor index: window bounds and
/// loop ranges may be written with them.
fn scalar_bounds(infos: &[TensorInfo], tensors: &HashMap<String, Tensor>) -> HashMap<usize, i64> {
    let mut scalar_bounds: HashMap<usize, i64> = HashMap::new();
    for (k, info) in infos.iter().enumerate() {
        if info.kind == DeclKind::Input && info.scalar.is_some() {
            if let Some(n) = tensors
                .get(&info.name)
                .and_then(|t| t.get(&[]).ok())
                .and_then(|v| v.as_i128())
                .and_then(|n| i64::try_from(n).ok())
            {
                scalar_bounds.insert(k, n);
            }
        }
    }
    scalar_bounds
}

/// A bound as the program writes it (`3`, `n[] + 1`).
fn show_bound(infos: &[TensorInfo], b: &Bound) -> String {
    match b {
        Bound::Const(n) => n.to_string(),
        Bound::Scalar(t, 0) => format!("{}[]", infos[*t].name),
        Bound::Scalar(t, c) if *c > 0 => format!("{}[] + {c}", infos[*t].name),
        Bound::Scalar(t, c) => format!("{}[] - {}", infos[*t].name, -(*c as i128)),
    }
}

/// Every window lies inside its mode (an empty one may start right after it).
fn check_windows(
    lowered: &Lowered,
    bound: &dyn Fn(&Bound) -> Option<i64>,
    known: &HashMap<(usize, usize), usize>,
) -> Result<()> {
    let infos = &lowered.tensors;
    for w in &lowered.windows {
        let (lo, hi) = (bound(&w.lo), bound(&w.hi));
        let size = known.get(&(w.tensor, w.mode)).copied();
        if let (Some(lo), Some(hi), Some(n)) = (lo, hi, size) {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            if lo < 1 || hi > n || hi < lo - 1 {
                return Err(Error::Program(format!(
                    "the window ({lo}:{hi}) of `{}` (mode {}) is outside its size {n}",
                    infos[w.tensor].name,
                    w.mode + 1
                )));
            }
        } else if lo.is_none() || hi.is_none() {
            return Err(Error::Program(format!(
                "the window ({}:{}) of `{}` needs its bounds: bind the scalar inputs",
                show_bound(infos, &w.lo),
                show_bound(infos, &w.hi),
                infos[w.tensor].name
            )));
        }
    }
    Ok(())
}

/// A loop range that runs over an offset read must be the read's in-bounds range, both
/// limits (the loop runs over that range: the kernel reads no further).
fn check_ranges(
    ranges: &[RangeCheck],
    infos: &[TensorInfo],
    bound: &dyn Fn(&Bound) -> Option<i64>,
    known: &HashMap<(usize, usize), usize>,
) -> Result<()> {
    for r in ranges {
        let (Some(lo), Some(hi), Some(&n)) =
            (bound(&r.lo), bound(&r.hi), known.get(&(r.tensor, r.mode)))
        else {
            continue;
        };
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let (a, b) = (1i64.saturating_sub(r.offset), n.saturating_sub(r.offset));
        if (lo, hi) != (a, b) {
            let name = &infos[r.tensor].name;
            let read = match r.offset {
                c if c > 0 => format!("{} + {c}", r.index),
                c => format!("{} - {}", r.index, -(c as i128)),
            };
            return Err(Error::Program(format!(
                "the loop index `{}` has extent {lo}:{hi} but `{name}` (mode {}, size {n}, shifted by {}) needs {a}:{b}; loop bounds must equal tensor dimensions (a permissive read `{name}[~({read})]` is `missing` outside `{name}`)",
                r.index,
                r.mode + 1,
                -(r.offset as i128),
            )));
        }
    }
    Ok(())
}

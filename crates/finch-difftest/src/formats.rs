//! Random formats: every level of the paper over `Element(fill)` or `Pattern()` leaves, and
//! the four scalar kinds, with fills `0`, `1`, `±Inf` and `NaN`.

use finch::formats::{Format, IndexWidth, LevelFormat, LevelKind, ScalarKind};
use finch::Value;

use crate::rng::Rng;

/// The element types the generator uses: `f64` mostly, `i64` and `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `f64`.
    F,
    /// `i64`.
    I,
    /// `bool`.
    B,
}

impl Ty {
    /// The type of a value (`i64` for any integer).
    pub fn of(v: &Value) -> Ty {
        match v {
            Value::F32(_) | Value::F64(_) => Ty::F,
            Value::Bool(_) => Ty::B,
            _ => Ty::I,
        }
    }

    /// The zero of the type.
    pub fn zero(self) -> Value {
        match self {
            Ty::F => Value::F64(0.0),
            Ty::I => Value::I64(0),
            Ty::B => Value::Bool(false),
        }
    }
}

/// What a tensor is for: it decides which formats and fills are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Read by the program.
    Input,
    /// Written by the program (an output or a workspace).
    Output,
}

/// A random fill value of a type.
pub fn random_fill(rng: &mut Rng, ty: Ty) -> Value {
    match ty {
        Ty::F => *rng.pick(&[
            Value::F64(0.0),
            Value::F64(0.0),
            Value::F64(0.0),
            Value::F64(0.0),
            Value::F64(0.0),
            Value::F64(1.0),
            Value::F64(f64::INFINITY),
            Value::F64(f64::NEG_INFINITY),
            Value::F64(f64::NAN),
        ]),
        Ty::I => *rng.pick(&[Value::I64(0), Value::I64(0), Value::I64(0), Value::I64(1)]),
        Ty::B => *rng.pick(&[Value::Bool(false), Value::Bool(false), Value::Bool(true)]),
    }
}

/// A random level kind for a level spanning one of `modes_left` modes (a SparseCOO level
/// may span several), and its index width.
fn random_kind(rng: &mut Rng, modes_left: usize) -> (LevelKind, IndexWidth) {
    const KINDS: [(LevelKind, u32); 10] = [
        (LevelKind::Dense, 30),
        (LevelKind::SparseList, 16),
        (LevelKind::SparsePoint, 6),
        (LevelKind::SparseInterval, 6),
        (LevelKind::SparseBand, 6),
        (LevelKind::SparseBlockList, 6),
        (LevelKind::RunList, 6),
        (LevelKind::SparseRunList, 6),
        (LevelKind::SparseHash, 6),
        (LevelKind::SparseByteMap, 6),
    ];
    if modes_left >= 2 && rng.chance(0.08) {
        let n = rng.range(2, modes_left as i64) as usize;
        return (LevelKind::SparseCoo(n), IndexWidth::U64);
    }
    let weights: Vec<u32> = KINDS.iter().map(|k| k.1).collect();
    let kind = KINDS[rng.weighted(&weights)].0;
    let width = if kind == LevelKind::SparseList && rng.chance(0.25) {
        IndexWidth::U32
    } else {
        IndexWidth::U64
    };
    (kind, width)
}

/// A random format of `ndims` modes for elements of type `ty` (a scalar kind for 0 modes).
pub fn random_format(rng: &mut Rng, ndims: usize, ty: Ty, usage: Use) -> Format {
    let fill = random_fill(rng, ty);
    if ndims == 0 {
        let kind = match (usage, rng.below(6)) {
            (Use::Input, _) | (_, 0..=2) => ScalarKind::Scalar,
            (_, 3) => ScalarKind::SparseScalar,
            (_, 4) => ScalarKind::ShortCircuitScalar,
            _ => ScalarKind::SparseShortCircuitScalar,
        };
        return Format::Scalar(kind, fill);
    }
    let leaf = if ty == Ty::B && fill == Value::Bool(false) && rng.chance(0.3) {
        LevelFormat::Pattern
    } else {
        LevelFormat::Element(fill)
    };
    let mut kinds = Vec::new();
    let mut left = ndims;
    while left > 0 {
        let (kind, width) = random_kind(rng, left);
        left -= kind.modes();
        kinds.push((kind, width));
    }
    // A Pattern leaf stores only `true`: levels that keep positions holding the fill right
    // above it (Dense, bands, runs, an empty SparsePoint or SparseInterval fiber's child)
    // cannot store data with `false` there, so only sorted-list levels take one.
    let mut level = match kinds.last() {
        Some((
            LevelKind::SparseList
            | LevelKind::SparseCoo(_)
            | LevelKind::SparseHash
            | LevelKind::SparseByteMap,
            _,
        )) => leaf,
        _ => LevelFormat::Element(fill),
    };
    for (kind, index) in kinds.into_iter().rev() {
        level = LevelFormat::Inner {
            kind,
            index,
            child: Box::new(level),
        };
    }
    Format::Levels(level)
}

/// The kind of the level that stores mode `mode` (0-based; the root stores the last).
pub fn level_of_mode(format: &Format, mode: usize) -> Option<LevelKind> {
    let Format::Levels(mut level) = format.clone() else {
        return None;
    };
    let mut last = format.ndims();
    loop {
        match level {
            LevelFormat::Inner { kind, child, .. } => {
                let first = last.checked_sub(kind.modes())?;
                if mode >= first && mode < last {
                    return Some(kind);
                }
                last = first;
                level = *child;
            }
            _ => return None,
        }
    }
}

/// Whether a level kind can be galloped over (its entries, runs or blocks are sorted).
pub fn gallops(kind: LevelKind) -> bool {
    matches!(
        kind,
        LevelKind::SparseList
            | LevelKind::SparseCoo(_)
            | LevelKind::SparseBlockList
            | LevelKind::RunList
            | LevelKind::SparseRunList
            | LevelKind::SparseByteMap
            | LevelKind::SparseHash
    )
}

/// Only Dense levels (over an `Element` leaf): a tensor the compiled engines update in place.
pub fn all_dense(format: &Format) -> bool {
    fn dense(l: &LevelFormat) -> bool {
        match l {
            LevelFormat::Inner {
                kind: LevelKind::Dense,
                child,
                ..
            } => dense(child),
            LevelFormat::Inner { .. } | LevelFormat::Pattern => false,
            LevelFormat::Element(_) => true,
        }
    }
    matches!(format, Format::Levels(l) if dense(l))
}

/// A simpler format for the minimiser: level `depth` (0 = root) made `kind`.
pub fn with_level(format: &Format, depth: usize, kind: LevelKind) -> Option<Format> {
    fn go(l: &LevelFormat, depth: usize, kind: LevelKind) -> Option<LevelFormat> {
        match l {
            LevelFormat::Inner {
                kind: k,
                index,
                child,
            } => {
                if depth == 0 {
                    if *k == kind || k.modes() != 1 {
                        return None;
                    }
                    Some(LevelFormat::Inner {
                        kind,
                        index: IndexWidth::U64,
                        child: child.clone(),
                    })
                } else {
                    Some(LevelFormat::Inner {
                        kind: *k,
                        index: *index,
                        child: Box::new(go(child, depth - 1, kind)?),
                    })
                }
            }
            _ => None,
        }
    }
    match format {
        Format::Levels(l) => go(l, depth, kind).map(Format::Levels),
        Format::Scalar(..) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_back_and_have_their_modes() {
        let mut rng = Rng::new(5);
        for k in 0..500 {
            let ndims = k % 4;
            let ty = [Ty::F, Ty::I, Ty::B][k % 3];
            let f = random_format(&mut rng, ndims, ty, Use::Input);
            let back = Format::parse(&f.to_string()).expect("a format parses");
            assert_eq!(back, f);
            assert_eq!(f.ndims(), ndims);
            for m in 0..ndims {
                assert!(level_of_mode(&f, m).is_some());
            }
        }
    }
}

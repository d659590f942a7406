//! Random data that fits a format: each level draws which of its positions hold something
//! other than the fill as the level can store them (a SparsePoint fiber one position, a
//! SparseInterval fiber one run of one repeated subfiber, a SparseBand fiber one
//! contiguous band, run-length levels runs of repeated subfibers), and values are small
//! integers and halves, so that sums and run-length products are exact in any order.

use finch::formats::{Format, LevelFormat, LevelKind};
use finch::tensor::{DenseArray, Tensor};
use finch::{ScalarType, Value};

use crate::formats::Ty;
use crate::rng::Rng;

/// What values a tensor holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Values {
    /// Small numbers of the element type (and now and then `±Inf` or `NaN` for floats).
    Plain,
    /// Integers `lo..=hi`: an index tensor (a scatter target's positions) or a loop bound.
    Range(i64, i64),
}

/// Draws the data of a tensor of `format` and `shape`; `density` is the share of positions
/// a sparse level fills.
pub fn random_array(
    rng: &mut Rng,
    format: &Format,
    shape: &[usize],
    values: Values,
    density: f64,
) -> DenseArray {
    let fill = format.fill_value();
    let ty = format.element_type();
    let data = match format {
        Format::Scalar(..) => vec![value(rng, Ty::of(&fill), fill, values)],
        Format::Levels(level) => {
            let mut g = DataGen {
                rng,
                fill,
                values,
                density,
            };
            g.fiber(level, shape)
        }
    };
    let array = DenseArray::from_data(ty, shape, data, fill)
        .or_else(|_| DenseArray::filled(ty, shape, fill));
    match array {
        Ok(a) if Tensor::from_dense(format, &a).is_ok() => a,
        // Data a level cannot hold (never expected): the fill fits every format.
        _ => DenseArray {
            ty,
            shape: shape.to_vec(),
            data: vec![fill; shape.iter().product()],
            fill,
        },
    }
}

/// One value of type `ty` other than (mostly) the fill.
fn value(rng: &mut Rng, ty: Ty, fill: Value, values: Values) -> Value {
    if let Values::Range(lo, hi) = values {
        return Value::I64(rng.range(lo, hi));
    }
    match ty {
        Ty::F => {
            if rng.chance(0.03) {
                return *rng.pick(&[
                    Value::F64(f64::NAN),
                    Value::F64(f64::INFINITY),
                    Value::F64(f64::NEG_INFINITY),
                ]);
            }
            if rng.chance(0.04) {
                return fill;
            }
            let halves = rng.range(-8, 8);
            let x = if rng.chance(0.7) {
                (halves / 2) as f64
            } else {
                halves as f64 / 2.0
            };
            Value::F64(if x == 0.0 { 1.0 } else { x })
        }
        Ty::I => {
            let n = rng.range(-2, 5);
            Value::I64(if n == 0 { 2 } else { n })
        }
        Ty::B => Value::Bool(fill != Value::Bool(true) || rng.chance(0.2)),
    }
}

struct DataGen<'r> {
    rng: &'r mut Rng,
    fill: Value,
    values: Values,
    density: f64,
}

impl DataGen<'_> {
    /// The column-major data of a fiber of `level` over `shape` (innermost mode first).
    fn fiber(&mut self, level: &LevelFormat, shape: &[usize]) -> Vec<Value> {
        let (kind, child) = match level {
            LevelFormat::Inner { kind, child, .. } => (*kind, &**child),
            LevelFormat::Element(_) => {
                return vec![value(self.rng, Ty::of(&self.fill), self.fill, self.values)]
            }
            LevelFormat::Pattern => return vec![Value::Bool(true)],
        };
        let k = kind.modes().min(shape.len());
        let (inner, outer) = shape.split_at(shape.len() - k);
        let block: usize = inner.iter().product();
        let n: usize = outer.iter().product();
        let empty = vec![self.fill; block];
        let full = full_only(level);
        let mut out = Vec::with_capacity(block * n);
        match kind {
            LevelKind::SparsePoint => {
                let at = if self.rng.chance(0.8) {
                    self.rng.below(n)
                } else {
                    n
                };
                for p in 0..n {
                    let sub = if p == at {
                        self.fiber(child, inner)
                    } else {
                        empty.clone()
                    };
                    out.extend(sub);
                }
            }
            LevelKind::SparseInterval | LevelKind::SparseBand => {
                let a = self.rng.below(n + 1);
                let b = a + self.rng.below(n + 1 - a);
                let shared = self.fiber(child, inner);
                for p in 0..n {
                    let sub = match (p >= a && p < b, kind) {
                        (false, _) => empty.clone(),
                        (true, LevelKind::SparseInterval) => shared.clone(),
                        (true, _) => self.fiber(child, inner),
                    };
                    out.extend(sub);
                }
            }
            LevelKind::RunList | LevelKind::SparseRunList => {
                while out.len() < block * n {
                    let run = 1 + self.rng.below(3);
                    let sub = if full || self.rng.chance(self.density) {
                        self.fiber(child, inner)
                    } else {
                        empty.clone()
                    };
                    for _ in 0..run.min(n - out.len() / block.max(1)) {
                        out.extend(sub.iter().copied());
                    }
                    if block == 0 {
                        break;
                    }
                }
            }
            _ => {
                for _ in 0..n {
                    let sub = if full
                        || kind == LevelKind::Dense && self.density >= 1.0
                        || self.rng.chance(self.density)
                    {
                        self.fiber(child, inner)
                    } else {
                        empty.clone()
                    };
                    out.extend(sub);
                }
            }
        }
        out.resize(block * n, self.fill);
        out
    }
}

/// Whether every position of a fiber of `level` must hold something other than the fill:
/// Dense and RunList levels store every position, and a `Pattern()` leaf stores only `true`.
fn full_only(level: &LevelFormat) -> bool {
    match level {
        LevelFormat::Inner {
            kind: LevelKind::Dense | LevelKind::RunList,
            child,
            ..
        } => matches!(**child, LevelFormat::Pattern) || full_only(child),
        _ => false,
    }
}

/// The scalar type of a generator type.
pub fn scalar_type(ty: Ty) -> ScalarType {
    match ty {
        Ty::F => ScalarType::F64,
        Ty::I => ScalarType::I64,
        Ty::B => ScalarType::Bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{random_format, Use};

    #[test]
    fn data_fits_every_random_format() {
        let mut rng = Rng::new(11);
        for k in 0..2000 {
            let ndims = k % 4;
            let ty = [Ty::F, Ty::I, Ty::B][k % 3];
            let f = random_format(&mut rng, ndims, ty, Use::Input);
            let shape: Vec<usize> = (0..ndims).map(|_| rng.below(6)).collect();
            let density = *rng.pick(&[0.2, 0.5, 1.0]);
            let direct = {
                let fill = f.fill_value();
                let mut g = DataGen {
                    rng: &mut rng,
                    fill,
                    values: Values::Plain,
                    density,
                };
                match &f {
                    Format::Levels(l) => g.fiber(l, &shape),
                    Format::Scalar(..) => vec![fill],
                }
            };
            let a = DenseArray::from_data(f.element_type(), &shape, direct, f.fill_value())
                .expect("the data has the shape's length");
            assert!(
                Tensor::from_dense(&f, &a).is_ok(),
                "{f} {shape:?} {:?}",
                a.data
            );
        }
    }
}

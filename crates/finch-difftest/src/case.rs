//! A test case: a program's text, its input data and the shapes given to outputs whose
//! writes do not size them; with a plain-text form in which workers receive cases and
//! reproducers keep them (`case.txt`).

use std::collections::BTreeMap;

use finch::tensor::DenseArray;
use finch::Value;

/// Errors reading a case's text form.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A malformed line.
    #[error("case text, line {line}: {message}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// One generated (or minimised) program with its data.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The program text.
    pub program: String,
    /// Each input's dense data, in declaration order.
    pub inputs: Vec<(String, DenseArray)>,
    /// Shapes of outputs and temporaries that no write sizes (`--shape`).
    pub shapes: BTreeMap<String, Vec<usize>>,
}

fn join<T: ToString>(xs: &[T]) -> String {
    xs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Case {
    /// The text form: `program N` and N lines, then per input `input NAME FILL SHAPE...`
    /// and a line of values, per given shape `shape NAME DIMS...`, and `end`.
    pub fn to_text(&self) -> String {
        let mut out = format!("program {}\n{}", self.program.lines().count(), self.program);
        if !self.program.ends_with('\n') {
            out.push('\n');
        }
        for (name, a) in &self.inputs {
            out.push_str(&format!("input {name} {} {}\n", a.fill, join(&a.shape)));
            out.push_str(&format!("{}\n", join(&a.data)));
        }
        for (name, dims) in &self.shapes {
            out.push_str(&format!("shape {name} {}\n", join(dims)));
        }
        out.push_str("end\n");
        out
    }

    /// Reads the text form back.
    pub fn from_text(text: &str) -> Result<Case, CaseError> {
        let mut lines = text.lines().enumerate().map(|(k, l)| (k + 1, l));
        let bad = |line: usize, message: &str| CaseError::Malformed {
            line,
            message: message.to_string(),
        };
        let (ln, first) = lines.next().ok_or_else(|| bad(1, "empty"))?;
        let n: usize = first
            .strip_prefix("program ")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| bad(ln, "expected `program N`"))?;
        let mut program = String::new();
        for _ in 0..n {
            let (_, l) = lines.next().ok_or_else(|| bad(ln, "program cut short"))?;
            program.push_str(l);
            program.push('\n');
        }
        let mut case = Case {
            program,
            inputs: Vec::new(),
            shapes: BTreeMap::new(),
        };
        while let Some((ln, line)) = lines.next() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["end"] => return Ok(case),
                ["input", name, fill, dims @ ..] => {
                    let fill = Value::parse_literal(fill).ok_or_else(|| bad(ln, "bad fill"))?;
                    let shape = dims
                        .iter()
                        .map(|d| d.parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| bad(ln, "bad shape"))?;
                    let (vln, vals) = lines.next().ok_or_else(|| bad(ln, "no values"))?;
                    let data = vals
                        .split_whitespace()
                        .map(Value::parse_literal)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad(vln, "bad value"))?;
                    let ty = fill.scalar_type().ok_or_else(|| bad(ln, "untyped fill"))?;
                    let a = DenseArray::from_data(ty, &shape, data, fill)
                        .map_err(|e| bad(vln, &e.to_string()))?;
                    case.inputs.push((name.to_string(), a));
                }
                ["shape", name, dims @ ..] => {
                    let dims = dims
                        .iter()
                        .map(|d| d.parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| bad(ln, "bad shape"))?;
                    case.shapes.insert(name.to_string(), dims);
                }
                _ => return Err(bad(ln, "expected `input`, `shape` or `end`")),
            }
        }
        Err(bad(0, "no `end`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let a = DenseArray::from_data(
            finch::ScalarType::F64,
            &[3],
            vec![
                Value::F64(f64::NAN),
                Value::F64(-0.5),
                Value::F64(f64::INFINITY),
            ],
            Value::F64(f64::NEG_INFINITY),
        )
        .unwrap();
        let b = DenseArray::from_data(
            finch::ScalarType::I64,
            &[],
            vec![Value::I64(3)],
            Value::I64(0),
        )
        .unwrap();
        let case = Case {
            program: "input x :: Dense(Element(-Inf))\n".into(),
            inputs: vec![("x".into(), a), ("n".into(), b)],
            shapes: BTreeMap::from([("y".to_string(), vec![2, 0])]),
        };
        assert_eq!(Case::from_text(&case.to_text()).unwrap(), case);
    }
}

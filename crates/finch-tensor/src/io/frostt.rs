//! FROSTT `.tns`: one entry per line, `i1 i2 ... id value`, 1-based, no header. `#`
//! comment lines and blank lines are skipped. The shape is given by the caller or taken
//! as the largest index per mode. Values are `i64` when every value is an integer, else
//! `f64`.

use std::path::Path;

use super::matrix_market::{read_text, write_atomically};
use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::tensor::Coo;

/// Parses `.tns` text; `path` names the source in errors.
pub fn read_tns(text: &str, path: &str, shape: Option<&[usize]>) -> Result<Coo> {
    let err = |line: usize, message: String| Error::Io {
        path: path.to_string(),
        line,
        message,
    };
    let mut ndims: Option<usize> = None;
    let mut coords: Vec<Vec<usize>> = Vec::new();
    let mut ints: Option<Vec<i64>> = Some(Vec::new());
    let mut floats: Vec<f64> = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let ln = k + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        if toks.len() < 2 {
            return Err(err(
                ln,
                format!(
                    "expected indices and a value, found {} number(s)",
                    toks.len()
                ),
            ));
        }
        let d = toks.len() - 1;
        match ndims {
            None => {
                ndims = Some(d);
                coords = vec![Vec::new(); d];
                if let Some(s) = shape {
                    if s.len() != d {
                        return Err(err(
                            ln,
                            format!(
                                "the given shape has {} modes but the entries have {d}",
                                s.len()
                            ),
                        ));
                    }
                }
            }
            Some(n) if n != d => {
                return Err(err(
                    ln,
                    format!("{d} indices on this line but {n} on the first entry line"),
                ))
            }
            _ => {}
        }
        for (m, tok) in toks[..d].iter().enumerate() {
            let i: usize = tok.parse().map_err(|_| {
                err(
                    ln,
                    format!("index {} `{tok}` is not a positive integer", m + 1),
                )
            })?;
            if i == 0 {
                return Err(err(
                    ln,
                    format!("index {} is 0 (indices start at 1)", m + 1),
                ));
            }
            if let Some(s) = shape {
                if i > s[m] {
                    return Err(err(
                        ln,
                        format!(
                            "index {} is {i} but mode {} has size {}",
                            m + 1,
                            m + 1,
                            s[m]
                        ),
                    ));
                }
            }
            coords[m].push(i - 1);
        }
        let v = toks[d];
        let x: f64 = v
            .parse()
            .map_err(|_| err(ln, format!("`{v}` is not a number")))?;
        if let Some(is) = ints.as_mut() {
            match v.parse::<i64>() {
                Ok(n) => is.push(n),
                Err(_) => ints = None,
            }
        }
        floats.push(x);
    }
    let d = ndims.unwrap_or(shape.map_or(0, |s| s.len()));
    if coords.len() < d {
        coords = vec![Vec::new(); d];
    }
    let shape: Vec<usize> = match shape {
        Some(s) => s.to_vec(),
        None => coords
            .iter()
            .map(|c| c.iter().max().map_or(0, |&m| m + 1))
            .collect(),
    };
    let (ty, vals) = match ints {
        Some(is) if !floats.is_empty() => {
            (ScalarType::I64, is.into_iter().map(Value::I64).collect())
        }
        _ => (
            ScalarType::F64,
            floats.into_iter().map(Value::F64).collect(),
        ),
    };
    Ok(Coo {
        ty,
        shape,
        coords,
        vals,
    })
}

/// Reads a `.tns` file.
pub fn read_tns_file(path: &Path, shape: Option<&[usize]>) -> Result<Coo> {
    let text = read_text(path)?;
    read_tns(&text, &path.display().to_string(), shape)
}

/// Writes `.tns` text (1-based indices, one entry per line).
pub fn write_tns(coo: &Coo) -> Result<String> {
    coo.check()?;
    let mut out = String::with_capacity(coo.len() * (8 * coo.shape.len() + 16));
    for k in 0..coo.len() {
        for c in &coo.coords {
            out.push_str(&(c[k] + 1).to_string());
            out.push(' ');
        }
        let v = coo.vals[k];
        out.push_str(&match v {
            Value::F64(x) => format!("{x:?}"),
            Value::F32(x) => format!("{x:?}"),
            Value::Bool(b) => (b as u8).to_string(),
            v => v.as_i128().map_or_else(|| v.to_string(), |n| n.to_string()),
        });
        out.push('\n');
    }
    Ok(out)
}

/// Writes a `.tns` file atomically.
pub fn write_tns_file(path: &Path, coo: &Coo) -> Result<()> {
    write_atomically(path, &write_tns(coo)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_reports_lines() {
        let c = read_tns("# c\n1 2 3 1\n\n2  1 1 2.5\n", "t", None).unwrap();
        assert_eq!(c.shape, vec![2, 2, 3]);
        assert_eq!(c.ty, ScalarType::F64);
        let back = read_tns(&write_tns(&c).unwrap(), "t", Some(&[2, 2, 3])).unwrap();
        assert_eq!(back, c);
        let i = read_tns("1 1 7\n", "t", None).unwrap();
        assert_eq!(i.vals, vec![Value::I64(7)]);
        for (text, line, msg) in [
            ("1 1 1\n1 1\n", 2, "1 indices"),
            ("0 1 1\n", 1, "is 0"),
            ("1 x 1\n", 1, "not a positive integer"),
            ("1 1 y\n", 1, "not a number"),
            ("5\n", 1, "expected indices"),
        ] {
            match read_tns(text, "t", None) {
                Err(Error::Io {
                    line: l, message, ..
                }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert!(message.contains(msg), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(read_tns("3 1 1\n", "t", Some(&[2, 2])).is_err());
    }
}

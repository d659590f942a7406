//! Reading tensors from files (or scalar literals) into a declared format, writing them
//! back, and `finch info`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use finch::formats::Format;
use finch::io::{self, MtxWriteOptions};
use finch::tensor::{fmt_shape, Coo, Tensor};
use finch::Value;

/// The kinds of tensor file the CLI reads and writes, chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileKind {
    MatrixMarket,
    Frostt,
}

fn file_kind(path: &Path) -> Result<FileKind> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("mtx") => Ok(FileKind::MatrixMarket),
        Some(e) if e.eq_ignore_ascii_case("tns") => Ok(FileKind::Frostt),
        _ => bail!(
            "{}: unknown file type (expected a .mtx Matrix Market or .tns FROSTT file)",
            path.display()
        ),
    }
}

/// Reads a file's entries.
fn read_coo(path: &Path) -> Result<Coo> {
    Ok(match file_kind(path)? {
        FileKind::MatrixMarket => io::read_matrix_market_file(path)?.coo,
        FileKind::Frostt => io::read_tns_file(path, None)?,
    })
}

/// Builds the tensor bound to an input: from a file, or from a literal for a 0-d tensor.
/// Values are converted exactly to the declared element type; a Matrix Market `n×1` or
/// `1×n` matrix binds to a 1-d tensor, and a `1×1` one to a scalar.
pub fn load_tensor(source: &str, format: &Format) -> Result<Tensor> {
    let ty = format.element_type();
    if format.ndims() == 0 {
        if let Some(v) = Value::parse_literal(source) {
            let v = v
                .convert_exact(ty)
                .with_context(|| format!("the literal {v} is not exactly a {ty}"))?;
            let mut coo = Coo::new(ty, &[]);
            coo.push(&[], v)?;
            return Ok(Tensor::from_coo(format, &coo)?);
        }
    }
    let path = Path::new(source);
    let coo = read_coo(path)?;
    let coo = coo.convert_to(ty)?;
    let coo = if coo.shape.len() == format.ndims() {
        coo
    } else {
        coo.reshape_unit_modes(&unit_target(&coo.shape, format.ndims()))
            .with_context(|| {
                format!(
                    "the format {format} has {} modes but the file holds a {} tensor",
                    format.ndims(),
                    fmt_shape(&coo.shape)
                )
            })?
    };
    Ok(Tensor::from_coo(format, &coo)?)
}

/// The shape a file's data takes when bound to a tensor of `ndims` modes: the file's
/// non-unit sizes, padded with 1s (so `n×1` becomes `[n]` and `1×1` becomes `[]`).
fn unit_target(shape: &[usize], ndims: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = shape.iter().copied().filter(|&n| n != 1).collect();
    while dims.len() < ndims {
        dims.push(1);
    }
    dims
}

/// Writes a tensor's stored entries to a `.mtx` (vectors as `n×1`, scalars as `1×1`) or
/// `.tns` file. Positions it does not store hold its fill, as when a file is read into a
/// declared format: a fill other than zero is named in a `.mtx` comment line.
pub fn save_tensor(tensor: &Tensor, path: &Path) -> Result<()> {
    let coo = tensor.to_coo();
    match file_kind(path)? {
        FileKind::MatrixMarket => {
            let fill = tensor.fill_value();
            let options = MtxWriteOptions {
                comment: (!fill.is_zero()).then(|| {
                    format!(" fill {fill}: every position not listed holds {fill} (not 0)")
                }),
                ..MtxWriteOptions::default()
            };
            let coo = match coo.shape.len() {
                2 => coo,
                0 => coo.reshape_unit_modes(&[1, 1])?,
                1 => {
                    let n = coo.shape[0];
                    coo.reshape_unit_modes(&[n, 1])?
                }
                d => bail!("a {d}-mode tensor cannot be written as Matrix Market; use a .tns file"),
            };
            io::write_matrix_market_file(path, &coo, &options)?;
        }
        FileKind::Frostt => io::write_tns_file(path, &coo)?,
    }
    Ok(())
}

/// `finch info FILE`: shape, stored entries, symmetry and a structure summary.
pub fn print_info(path: &Path) -> Result<()> {
    match file_kind(path)? {
        FileKind::MatrixMarket => {
            let mm = io::read_matrix_market_file(path)?;
            println!("file: {}", path.display());
            println!("format: Matrix Market {}", mm.header);
            println!("shape: {}", fmt_shape(&mm.coo.shape));
            println!(
                "stored entries: {} (after expanding symmetry)",
                mm.coo.len()
            );
            print!("{}", io::structure_summary(&mm.coo));
        }
        FileKind::Frostt => {
            let coo = io::read_tns_file(path, None)?;
            println!("file: {}", path.display());
            println!("format: FROSTT .tns ({} modes)", coo.shape.len());
            println!("shape: {} (largest index per mode)", fmt_shape(&coo.shape));
            println!("stored entries: {}", coo.len());
            println!("element type: {}", coo.ty);
        }
    }
    Ok(())
}

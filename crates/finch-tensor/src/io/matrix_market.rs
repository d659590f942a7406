//! Matrix Market (`.mtx`) reading and writing.
//!
//! Reading is strict: the banner must be the first line; keywords are case-insensitive;
//! `%` lines (including LAGraph's `%%GraphBLAS` type line, which is not honoured) and
//! blank lines may appear anywhere after it. Every problem is an `Error::Io` with the
//! 1-based line number. Decisions:
//! * `real` -> `f64` (`nan`, `inf`, `-inf`, `infinity` accepted), `integer` -> `i64`,
//!   `pattern` -> `bool` (`true` per entry). `complex` (and so `hermitian`) is rejected:
//!   complex values are not supported. [`read_matrix_market_structure`] reads the
//!   structure of any file, complex ones included: `true` per entry, the values checked
//!   to be numbers and dropped.
//! * `symmetric`/`skew-symmetric` files are expanded to the full matrix (skew negates);
//!   they must store only the lower triangle (`i >= j`; strictly for skew), as the format
//!   says — an upper entry is an error rather than a guess.
//! * `array` files: every value (zeros included) becomes an entry, so dense data round
//!   trips; symmetric arrays hold the lower triangle column by column.
//! * Duplicate coordinates are kept; `Tensor::from_coo` sums them (as scipy does).
//! * The declared entry count never drives an allocation larger than the file can hold.

use std::fmt;
use std::path::Path;

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::tensor::Coo;

/// `coordinate` or `array`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxLayout {
    /// One line per stored entry: `i j [value]`.
    Coordinate,
    /// Every value, column-major, one per line.
    Array,
}

/// The value field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxField {
    /// Floating-point values.
    Real,
    /// Integer values.
    Integer,
    /// No values: every listed entry is present.
    Pattern,
    /// Complex values (rejected by the reader).
    Complex,
}

/// The symmetry of the stored matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxSymmetry {
    /// Every entry is stored.
    General,
    /// `A[i,j] == A[j,i]`; the lower triangle is stored.
    Symmetric,
    /// `A[i,j] == -A[j,i]`; the strict lower triangle is stored.
    SkewSymmetric,
    /// `A[i,j] == conj(A[j,i])` (complex only; only its structure can be read).
    Hermitian,
}

/// The banner of a Matrix Market file, with its comment lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtxHeader {
    /// coordinate / array.
    pub layout: MtxLayout,
    /// real / integer / pattern / complex.
    pub field: MtxField,
    /// general / symmetric / skew-symmetric / hermitian.
    pub symmetry: MtxSymmetry,
    /// The `%` comment lines after the banner, without the leading `%`.
    pub comments: Vec<String>,
}

/// A parsed file: its header and the full (symmetry-expanded) entries.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixMarket {
    /// The banner.
    pub header: MtxHeader,
    /// The entries (0-based), all of them after expanding symmetry.
    pub coo: Coo,
}

impl MtxLayout {
    fn name(self) -> &'static str {
        match self {
            MtxLayout::Coordinate => "coordinate",
            MtxLayout::Array => "array",
        }
    }
}

impl MtxField {
    fn name(self) -> &'static str {
        match self {
            MtxField::Real => "real",
            MtxField::Integer => "integer",
            MtxField::Pattern => "pattern",
            MtxField::Complex => "complex",
        }
    }
}

impl MtxSymmetry {
    fn name(self) -> &'static str {
        match self {
            MtxSymmetry::General => "general",
            MtxSymmetry::Symmetric => "symmetric",
            MtxSymmetry::SkewSymmetric => "skew-symmetric",
            MtxSymmetry::Hermitian => "hermitian",
        }
    }
}

impl fmt::Display for MtxHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.layout.name(),
            self.field.name(),
            self.symmetry.name()
        )
    }
}

struct Lines<'a> {
    path: &'a str,
    iter: std::iter::Enumerate<std::str::Split<'a, char>>,
    /// The last line read that was not blank (where an unexpected end of file is reported).
    last: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str, path: &'a str) -> Lines<'a> {
        Lines {
            path,
            iter: text.split('\n').enumerate(),
            last: 0,
        }
    }

    /// The next line that is not blank or a comment, with its 1-based number.
    fn next_data(&mut self, comments: Option<&mut Vec<String>>) -> Option<(usize, &'a str)> {
        let mut comments = comments;
        for (k, line) in self.iter.by_ref() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let t = line.trim_start();
            if t.is_empty() {
                continue;
            }
            self.last = k + 1;
            if let Some(c) = t.strip_prefix('%') {
                if let Some(v) = comments.as_deref_mut() {
                    v.push(c.to_string());
                }
                continue;
            }
            return Some((k + 1, line));
        }
        None
    }

    fn err(&self, line: usize, message: impl Into<String>) -> Error {
        Error::Io {
            path: self.path.to_string(),
            line,
            message: message.into(),
        }
    }
}

fn parse_index(tok: &str, line: usize, n: usize, what: &str, lines: &Lines) -> Result<usize> {
    let i: usize = tok.parse().map_err(|_| {
        lines.err(
            line,
            format!("the {what} index `{tok}` is not a positive integer"),
        )
    })?;
    if i == 0 {
        return Err(lines.err(
            line,
            format!("the {what} index is 0 (Matrix Market indices start at 1)"),
        ));
    }
    if i > n {
        return Err(lines.err(
            line,
            format!("the {what} index {i} is larger than the {n} {what}s"),
        ));
    }
    Ok(i - 1)
}

fn parse_value(tok: &str, field: MtxField, line: usize, lines: &Lines) -> Result<Value> {
    match field {
        MtxField::Integer => tok.parse::<i64>().map(Value::I64).map_err(|_| {
            lines.err(
                line,
                format!("`{tok}` is not an integer (the banner says `integer`)"),
            )
        }),
        _ => {
            let ok_chars = tok
                .bytes()
                .all(|b| b.is_ascii_digit() || b".+-eE".contains(&b) || b.is_ascii_alphabetic());
            match tok.parse::<f64>() {
                Ok(x) if ok_chars => Ok(Value::F64(x)),
                _ => Err(lines.err(line, format!("`{tok}` is not a number"))),
            }
        }
    }
}

fn negate(v: Value) -> Value {
    match v {
        Value::I64(x) => Value::I64(x.wrapping_neg()),
        Value::F64(x) => Value::F64(-x),
        v => v,
    }
}

/// Parses Matrix Market text; `path` names the source in errors.
pub fn read_matrix_market(text: &str, path: &str) -> Result<MatrixMarket> {
    parse(text, path, Values::Keep)
}

/// Parses the structure of Matrix Market text of any field, complex and hermitian files
/// included: each entry (after expanding symmetry; every position of an array file)
/// becomes `true` of type `bool`. Values must still be numbers of the banner's field; the
/// header keeps the file's field.
pub fn read_matrix_market_structure(text: &str, path: &str) -> Result<MatrixMarket> {
    parse(text, path, Values::Structure)
}

/// Whether a read keeps the values or only the structure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    Keep,
    Structure,
}

fn parse(text: &str, path: &str, values: Values) -> Result<MatrixMarket> {
    let mut lines = Lines::new(text, path);
    let (layout, field, symmetry) = parse_banner(text, &mut lines, values)?;
    let mut comments = Vec::new();
    let (size_line, nums) = parse_size_line(&mut lines, &mut comments, layout, symmetry)?;
    let (m, n) = (nums[0], nums[1]);
    let ty = match field {
        _ if values == Values::Structure => ScalarType::Bool,
        MtxField::Integer => ScalarType::I64,
        MtxField::Pattern => ScalarType::Bool,
        _ => ScalarType::F64,
    };
    let declared = Declared {
        field,
        symmetry,
        values,
        ty,
        m,
        n,
    };
    let mut coo = Coo::new(ty, &[m, n]);
    match layout {
        MtxLayout::Coordinate => {
            // Never trust the declared count for allocation beyond what the text can hold.
            let cap = |k: usize| k.min(text.len() / 4 + 1);
            read_coordinates(&mut lines, &declared, (size_line, nums[2]), cap, &mut coo)?;
        }
        MtxLayout::Array => read_array(&mut lines, &declared, &mut coo)?,
    }
    Ok(MatrixMarket {
        header: MtxHeader {
            layout,
            field,
            symmetry,
            comments,
        },
        coo,
    })
}

/// The banner, which must be the very first line: its layout, field and symmetry, and
/// whether they go together (and with what the read keeps, `values`).
fn parse_banner(
    text: &str,
    lines: &mut Lines,
    values: Values,
) -> Result<(MtxLayout, MtxField, MtxSymmetry)> {
    let first = text.split('\n').next().unwrap_or("").trim_end_matches('\r');
    lines.iter.next();
    lines.last = 1;
    let words: Vec<String> = first
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(lines.err(
            1,
            "missing banner: the first line must start with `%%MatrixMarket`",
        ));
    }
    if words.len() != 5 {
        return Err(lines.err(1, format!(
            "the banner needs 4 words after `%%MatrixMarket` (object layout field symmetry), found {}",
            words.len() - 1
        )));
    }
    if words[1] != "matrix" {
        return Err(lines.err(
            1,
            format!("unknown object `{}` (only `matrix` is supported)", words[1]),
        ));
    }
    let layout = match words[2].as_str() {
        "coordinate" => MtxLayout::Coordinate,
        "array" => MtxLayout::Array,
        w => {
            return Err(lines.err(
                1,
                format!("unknown layout `{w}` (expected `coordinate` or `array`)"),
            ))
        }
    };
    let field = match words[3].as_str() {
        "real" | "double" => MtxField::Real,
        "integer" => MtxField::Integer,
        "pattern" => MtxField::Pattern,
        "complex" => MtxField::Complex,
        w => {
            return Err(lines.err(
                1,
                format!("unknown field `{w}` (expected real, integer, pattern or complex)"),
            ))
        }
    };
    let symmetry = match words[4].as_str() {
        "general" => MtxSymmetry::General,
        "symmetric" => MtxSymmetry::Symmetric,
        "skew-symmetric" => MtxSymmetry::SkewSymmetric,
        "hermitian" => MtxSymmetry::Hermitian,
        w => {
            return Err(lines.err(
                1,
                format!(
            "unknown symmetry `{w}` (expected general, symmetric, skew-symmetric or hermitian)"
        ),
            ))
        }
    };
    if field == MtxField::Complex && values == Values::Keep {
        return Err(lines.err(
            1,
            "complex matrices are not supported (their structure can be read)",
        ));
    }
    if symmetry == MtxSymmetry::Hermitian && field != MtxField::Complex {
        return Err(lines.err(
            1,
            format!(
                "`{} hermitian` is invalid: hermitian needs complex values",
                field.name()
            ),
        ));
    }
    if layout == MtxLayout::Array && field == MtxField::Pattern {
        return Err(lines.err(1, "`array pattern` is invalid: an array lists values"));
    }
    Ok((layout, field, symmetry))
}

/// The size line (after the comments, collected into `comments`): its line number and
/// its rows, columns and (`coordinate` only, else 0) entries; a symmetric matrix must be
/// square.
fn parse_size_line(
    lines: &mut Lines,
    comments: &mut Vec<String>,
    layout: MtxLayout,
    symmetry: MtxSymmetry,
) -> Result<(usize, [usize; 3])> {
    let Some((size_line, size_text)) = lines.next_data(Some(comments)) else {
        return Err(lines.err(lines.last.max(1), "missing size line"));
    };
    let dims: Vec<&str> = size_text.split_whitespace().collect();
    let want = if layout == MtxLayout::Coordinate {
        3
    } else {
        2
    };
    if dims.len() != want {
        return Err(lines.err(
            size_line,
            format!(
                "the size line needs {want} numbers ({}), found {}",
                if want == 3 {
                    "rows columns entries"
                } else {
                    "rows columns"
                },
                dims.len()
            ),
        ));
    }
    let mut nums = [0usize; 3];
    for (k, d) in dims.iter().enumerate() {
        nums[k] = d.parse().map_err(|_| {
            lines.err(
                size_line,
                format!("`{d}` in the size line is not a non-negative integer"),
            )
        })?;
    }
    let (m, n) = (nums[0], nums[1]);
    if symmetry != MtxSymmetry::General && m != n {
        return Err(lines.err(
            size_line,
            format!(
                "a {} matrix must be square, this one is {m}x{n}",
                symmetry.name()
            ),
        ));
    }
    Ok((size_line, nums))
}

/// What the banner and the size line declare, for reading the entries.
struct Declared {
    field: MtxField,
    symmetry: MtxSymmetry,
    /// Whether the read keeps the values or only the structure.
    values: Values,
    /// The type of the entries read.
    ty: ScalarType,
    /// Rows.
    m: usize,
    /// Columns.
    n: usize,
}

impl Declared {
    /// The numbers that make one value (two for complex: real and imaginary).
    fn per_value(&self) -> usize {
        if self.field == MtxField::Complex {
            2
        } else {
            1
        }
    }

    /// The value an entry gets: parsed, or `true` once its tokens are checked.
    fn value(&self, toks: &[&str], ln: usize, lines: &Lines) -> Result<Value> {
        let mut v = Value::Bool(true);
        for tok in toks {
            v = parse_value(tok, self.field, ln, lines)?;
        }
        Ok(if self.values == Values::Structure {
            Value::Bool(true)
        } else {
            v
        })
    }

    /// Appends the entry `(i, j)` with value `v`, and its mirror image across the
    /// diagonal in a symmetric matrix (negated in a skew-symmetric one).
    fn push(&self, coo: &mut Coo, (i, j): (usize, usize), v: Value) {
        let symmetry = self.symmetry;
        coo.coords[0].push(i);
        coo.coords[1].push(j);
        coo.vals.push(v);
        if symmetry != MtxSymmetry::General && i != j {
            coo.coords[0].push(j);
            coo.coords[1].push(i);
            coo.vals.push(if symmetry == MtxSymmetry::SkewSymmetric {
                negate(v)
            } else {
                v
            });
        }
    }
}

/// The entry lines of a `coordinate` file into `coo`: exactly `nnz` of them, as the size
/// line (at `size_line`) declares; `cap` bounds what the declared count may reserve.
fn read_coordinates(
    lines: &mut Lines,
    declared: &Declared,
    (size_line, nnz): (usize, usize),
    cap: impl Fn(usize) -> usize,
    coo: &mut Coo,
) -> Result<()> {
    let Declared {
        field,
        symmetry,
        m,
        n,
        ..
    } = *declared;
    if m.checked_mul(n).is_some_and(|mn| nnz > mn) && symmetry == MtxSymmetry::General {
        return Err(lines.err(
            size_line,
            format!("{nnz} entries cannot fit in a {m}x{n} matrix"),
        ));
    }
    let expand = if symmetry == MtxSymmetry::General {
        1
    } else {
        2
    };
    coo.coords[0].reserve(cap(nnz * expand));
    coo.coords[1].reserve(cap(nnz * expand));
    coo.vals.reserve(cap(nnz * expand));
    let ncols = if field == MtxField::Pattern {
        2
    } else {
        2 + declared.per_value()
    };
    let mut count = 0usize;
    while let Some((ln, line)) = lines.next_data(None) {
        if count == nnz {
            return Err(lines.err(
                ln,
                format!("more entries than the {nnz} the size line declares"),
            ));
        }
        let t = entry_tokens(line, ncols, ln, lines)?;
        let i = parse_index(t[0], ln, m, "row", lines)?;
        let j = parse_index(t[1], ln, n, "column", lines)?;
        let v = declared.value(&t[2..ncols], ln, lines)?;
        check_triangle(symmetry, (i, j), ln, lines)?;
        declared.push(coo, (i, j), v);
        count += 1;
    }
    if count < nnz {
        return Err(lines.err(
            lines.last,
            format!("the file ends after {count} entries but the size line declares {nnz}"),
        ));
    }
    Ok(())
}

/// The `ncols` tokens of the entry line `line` (number `ln`): row, column and the
/// value's numbers.
fn entry_tokens<'a>(line: &'a str, ncols: usize, ln: usize, lines: &Lines) -> Result<[&'a str; 4]> {
    let mut toks = line.split_whitespace();
    let mut t = [""; 4];
    let mut k = 0;
    for tok in toks.by_ref() {
        if k == ncols {
            k += 1;
            break;
        }
        t[k] = tok;
        k += 1;
    }
    if k != ncols {
        return Err(lines.err(
            ln,
            format!(
                "expected {ncols} numbers ({}) on an entry line, found {}",
                match ncols {
                    2 => "row column; the banner says pattern",
                    3 => "row column value",
                    _ => "row column real imaginary; the banner says complex",
                },
                if k > ncols {
                    format!("more than {ncols}")
                } else {
                    k.to_string()
                }
            ),
        ));
    }
    Ok(t)
}

/// A symmetric (or hermitian) file stores the lower triangle only, a skew-symmetric one
/// the strict lower triangle: the entry `(i, j)` (0-based, on line `ln`) must lie there.
fn check_triangle(
    symmetry: MtxSymmetry,
    (i, j): (usize, usize),
    ln: usize,
    lines: &Lines,
) -> Result<()> {
    match symmetry {
        MtxSymmetry::Symmetric | MtxSymmetry::Hermitian if i < j => {
            Err(lines.err(ln, format!(
                "entry ({}, {}) is above the diagonal; a {} file stores the lower triangle only",
                i + 1,
                j + 1,
                symmetry.name()
            )))
        }
        MtxSymmetry::SkewSymmetric if i <= j => {
            Err(lines.err(ln, format!(
                "entry ({}, {}) is not below the diagonal; a skew-symmetric file stores the strict lower triangle only",
                i + 1,
                j + 1
            )))
        }
        _ => Ok(()),
    }
}

/// The values of an `array` file into `coo`, column by column (the lower triangle only
/// where symmetric), exactly as many as the matrix holds.
fn read_array(lines: &mut Lines, declared: &Declared, coo: &mut Coo) -> Result<()> {
    let Declared {
        symmetry,
        values,
        ty,
        m,
        n,
        ..
    } = *declared;
    let per_value = declared.per_value();
    // Positions in the order the file lists them.
    let positions: Box<dyn Iterator<Item = (usize, usize)>> = match symmetry {
        MtxSymmetry::General => Box::new((0..n).flat_map(move |j| (0..m).map(move |i| (i, j)))),
        MtxSymmetry::Symmetric | MtxSymmetry::Hermitian => {
            Box::new((0..n).flat_map(move |j| (j..m).map(move |i| (i, j))))
        }
        _ => Box::new((0..n).flat_map(move |j| (j + 1..m).map(move |i| (i, j)))),
    };
    let mut expected = 0usize;
    for (i, j) in positions {
        expected += 1;
        let Some((ln, line)) = lines.next_data(None) else {
            return Err(lines.err(
                lines.last,
                format!(
                    "the file ends after {} values; a {m}x{n} {} array needs more",
                    expected - 1,
                    symmetry.name()
                ),
            ));
        };
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() != per_value {
            return Err(lines.err(
                ln,
                format!(
                    "expected {} per line in an array file, found {} numbers",
                    if per_value == 1 {
                        "one value"
                    } else {
                        "two numbers (real imaginary)"
                    },
                    toks.len()
                ),
            ));
        }
        let v = declared.value(&toks, ln, lines)?;
        declared.push(coo, (i, j), v);
    }
    if symmetry == MtxSymmetry::SkewSymmetric {
        // The diagonal of a skew-symmetric matrix is zero.
        for d in 0..n {
            coo.coords[0].push(d);
            coo.coords[1].push(d);
            coo.vals.push(if values == Values::Structure {
                Value::Bool(true)
            } else {
                Value::zero_of(ty)
            });
        }
    }
    if let Some((ln, _)) = lines.next_data(None) {
        return Err(lines.err(
            ln,
            format!("more values than a {m}x{n} {} array holds", symmetry.name()),
        ));
    }
    Ok(())
}

/// Reads a Matrix Market file.
pub fn read_matrix_market_file(path: &Path) -> Result<MatrixMarket> {
    let text = read_text(path)?;
    read_matrix_market(&text, &path.display().to_string())
}

/// Reads the structure of a Matrix Market file (see [`read_matrix_market_structure`]).
pub fn read_matrix_market_structure_file(path: &Path) -> Result<MatrixMarket> {
    let text = read_text(path)?;
    read_matrix_market_structure(&text, &path.display().to_string())
}

pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| Error::Os {
        path: path.display().to_string(),
        cause: source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        Error::Io {
            path: path.display().to_string(),
            line: upto.iter().filter(|&&b| b == b'\n').count() + 1,
            message: "the file is not valid UTF-8 text".into(),
        }
    })
}

/// How to write a Matrix Market file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtxWriteOptions {
    /// `coordinate` (default) or `array`.
    pub layout: MtxLayout,
    /// `general` (default), or `symmetric`/`skew-symmetric` (checked, then only the lower
    /// triangle is written).
    pub symmetry: MtxSymmetry,
    /// A comment line to write after the banner.
    pub comment: Option<String>,
}

impl Default for MtxWriteOptions {
    fn default() -> Self {
        MtxWriteOptions {
            layout: MtxLayout::Coordinate,
            symmetry: MtxSymmetry::General,
            comment: None,
        }
    }
}

fn value_text(v: &Value) -> String {
    match *v {
        Value::F64(x) => format!("{x:?}"),
        Value::F32(x) => format!("{x:?}"),
        Value::Bool(b) => (b as u8).to_string(),
        v => match v.as_i128() {
            Some(n) => n.to_string(),
            None => v.to_string(),
        },
    }
}

/// Writes a 2-d `Coo` as Matrix Market text. `bool` data is written as `pattern` when
/// every value is `true`, else as `integer` 0/1; integers as `integer`; floats as `real`
/// (shortest text that reads back to the same `f64`).
pub fn write_matrix_market(coo: &Coo, opts: &MtxWriteOptions) -> Result<String> {
    coo.check()?;
    if coo.shape.len() != 2 {
        return Err(Error::Program(format!(
            "Matrix Market holds matrices; this tensor has {} modes",
            coo.shape.len()
        )));
    }
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let field = match coo.ty {
        ScalarType::Bool
            if coo.vals.iter().all(|v| v.as_bool() == Some(true))
                && opts.layout == MtxLayout::Coordinate =>
        {
            MtxField::Pattern
        }
        t if t.is_float() => MtxField::Real,
        _ => MtxField::Integer,
    };
    if opts.symmetry == MtxSymmetry::Hermitian {
        return Err(Error::Program(
            "hermitian needs complex values, which are not supported".into(),
        ));
    }
    // Sorted (column-major) entries with duplicates combined by the last value.
    let mut order: Vec<usize> = (0..coo.len()).collect();
    order.sort_by_key(|&k| (coo.coords[1][k], coo.coords[0][k]));
    let mut entries: Vec<(usize, usize, Value)> = Vec::with_capacity(order.len());
    for k in order {
        let (i, j, v) = (coo.coords[0][k], coo.coords[1][k], coo.vals[k]);
        match entries.last_mut() {
            Some(last) if last.0 == i && last.1 == j => last.2 = v,
            _ => entries.push((i, j, v)),
        }
    }
    if opts.symmetry != MtxSymmetry::General {
        if m != n {
            return Err(Error::Program(format!(
                "a {m}x{n} matrix cannot be written as {}",
                opts.symmetry.name()
            )));
        }
        let skew = opts.symmetry == MtxSymmetry::SkewSymmetric;
        let find = |i: usize, j: usize| {
            entries
                .binary_search_by_key(&(j, i), |&(a, b, _)| (b, a))
                .ok()
                .map(|k| entries[k].2)
        };
        for &(i, j, v) in &entries {
            let zero = Value::zero_of(coo.ty);
            let mirror = find(j, i).unwrap_or(zero);
            let ok = if skew {
                crate::algebra::Op::Neg
                    .eval(&[v])
                    .is_ok_and(|w| w.num_eq(&mirror))
                    && (i != j || v.is_zero())
            } else {
                v.same(&mirror)
            };
            if !ok {
                return Err(Error::Program(format!(
                    "the matrix is not {}: entry ({}, {}) = {v} but ({}, {}) = {mirror}",
                    opts.symmetry.name(),
                    i + 1,
                    j + 1,
                    j + 1,
                    i + 1
                )));
            }
        }
        entries.retain(|&(i, j, _)| if skew { i > j } else { i >= j });
    }
    let mut out = String::with_capacity(32 + entries.len() * 24);
    out.push_str(&format!(
        "%%MatrixMarket matrix {} {} {}\n",
        opts.layout.name(),
        field.name(),
        opts.symmetry.name()
    ));
    if let Some(c) = &opts.comment {
        for line in c.lines() {
            out.push_str(&format!("%{line}\n"));
        }
    }
    match opts.layout {
        MtxLayout::Coordinate => {
            out.push_str(&format!("{m} {n} {}\n", entries.len()));
            for (i, j, v) in entries {
                if field == MtxField::Pattern {
                    out.push_str(&format!("{} {}\n", i + 1, j + 1));
                } else {
                    out.push_str(&format!("{} {} {}\n", i + 1, j + 1, value_text(&v)));
                }
            }
        }
        MtxLayout::Array => {
            out.push_str(&format!("{m} {n}\n"));
            let len = m.saturating_mul(n);
            let mut dense = Vec::new();
            crate::tensor::resize_fallibly(&mut dense, len, Value::zero_of(coo.ty))?;
            for &(i, j, v) in &entries {
                dense[i + j * m] = v;
            }
            for j in 0..n {
                let start = match opts.symmetry {
                    MtxSymmetry::General => 0,
                    MtxSymmetry::Symmetric => j,
                    _ => j + 1,
                };
                for i in start..m {
                    out.push_str(&value_text(&dense[i + j * m]));
                    out.push('\n');
                }
            }
        }
    }
    Ok(out)
}

/// Writes a Matrix Market file atomically (a temporary file renamed into place).
pub fn write_matrix_market_file(path: &Path, coo: &Coo, opts: &MtxWriteOptions) -> Result<()> {
    let text = write_matrix_market(coo, opts)?;
    write_atomically(path, &text)
}

pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let os = |source| Error::Os {
        path: path.display().to_string(),
        cause: source,
    };
    let file_name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(os)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        os(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, String) {
        match read_matrix_market(text, "t.mtx") {
            Err(Error::Io { line, message, .. }) => (line, message),
            other => panic!("expected an error for {text:?}, got {other:?}"),
        }
    }

    const H: &str = "%%MatrixMarket matrix coordinate real general\n";

    #[test]
    fn reads_general_symmetric_skew_and_pattern() {
        let mm = read_matrix_market(&format!("{H}% c\n\n2 3 2\n1 1 1.5\n2 3 -2e1\n"), "t").unwrap();
        assert_eq!(mm.coo.shape, vec![2, 3]);
        assert_eq!(mm.coo.coords, vec![vec![0, 1], vec![0, 2]]);
        assert_eq!(mm.coo.vals, vec![Value::F64(1.5), Value::F64(-20.0)]);
        assert_eq!(mm.header.comments, vec![" c".to_string()]);
        let s = read_matrix_market(
            "%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n1 1 3\n2 1 4\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.coo.len(), 3);
        let k = read_matrix_market(
            "%%MatrixMarket Matrix Coordinate Integer Skew-Symmetric\n2 2 1\n2 1 4\n",
            "t",
        )
        .unwrap();
        assert_eq!(k.coo.vals, vec![Value::I64(4), Value::I64(-4)]);
        let p = read_matrix_market(
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n",
            "t",
        )
        .unwrap();
        assert_eq!(p.coo.ty, ScalarType::Bool);
        let a = read_matrix_market(
            "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n",
            "t",
        )
        .unwrap();
        assert_eq!(a.coo.len(), 4);
    }

    #[test]
    fn structure_reads_any_field_and_checks_values() {
        let c = "%%MatrixMarket matrix coordinate complex hermitian\n3 3 3\n1 1 2 0\n3 1 1.5 -2\n3 3 0 0\n";
        let mm = read_matrix_market_structure(c, "t").unwrap();
        assert_eq!(mm.header.field, MtxField::Complex);
        assert_eq!(mm.coo.ty, ScalarType::Bool);
        assert_eq!(mm.coo.coords, vec![vec![0, 2, 0, 2], vec![0, 0, 2, 2]]);
        assert!(mm.coo.vals.iter().all(|v| *v == Value::Bool(true)));
        // The values are still checked, and the complex reader still refuses.
        let bad = "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1.0 x\n";
        match read_matrix_market_structure(bad, "t") {
            Err(Error::Io {
                line: 3, message, ..
            }) => assert!(message.contains("`x`"), "{message}"),
            other => panic!("{other:?}"),
        }
        let short = "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1.0\n";
        match read_matrix_market_structure(short, "t") {
            Err(Error::Io {
                line: 3, message, ..
            }) => {
                assert!(message.contains("real imaginary"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let upper = "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 2 1 1\n";
        assert!(read_matrix_market_structure(upper, "t").is_err());
        assert!(read_matrix_market(c, "t").is_err());
        // Real files: the same entries as the value reader, as `true`; arrays are full.
        let r = read_matrix_market_structure(&format!("{H}2 3 2\n1 1 1.5\n2 3 0\n"), "t").unwrap();
        assert_eq!(r.coo.coords, vec![vec![0, 1], vec![0, 2]]);
        let a = "%%MatrixMarket matrix array complex general\n2 1\n1 0\n0 0\n";
        assert_eq!(read_matrix_market_structure(a, "t").unwrap().coo.len(), 2);
        let k = "%%MatrixMarket matrix array real skew-symmetric\n2 2\n3\n";
        let k = read_matrix_market_structure(k, "t").unwrap();
        assert_eq!(k.coo.len(), 4);
        assert!(k.coo.vals.iter().all(|v| *v == Value::Bool(true)));
    }

    #[test]
    fn each_error_names_its_line() {
        let cases: [(&str, usize, &str); 14] = [
            ("junk\n", 1, "missing banner"),
            (
                "\n%%MatrixMarket matrix coordinate real general\n",
                1,
                "missing banner",
            ),
            (
                "%%MatrixMarket matrix coordinate complex general\n1 1 0\n",
                1,
                "complex",
            ),
            (
                "%%MatrixMarket matrix coordinate real hermitian\n",
                1,
                "hermitian",
            ),
            (
                "%%MatrixMarket matrix array pattern general\n",
                1,
                "array pattern",
            ),
            (
                "%%MatrixMarket matrix coordinate real foo\n",
                1,
                "unknown symmetry",
            ),
            (H, 1, "missing size line"),
            (&format!("{H}3\n"), 2, "size line needs 3"),
            (&format!("{H}2 2 2\n1 1 1.0\n"), 3, "ends after 1 entries"),
            (&format!("{H}2 2 1\n1 1 1.0\n2 2 2.0\n"), 4, "more entries"),
            (&format!("{H}2 2 1\n0 1 1.0\n"), 3, "index is 0"),
            (&format!("{H}2 2 1\n1 3 1.0\n"), 3, "column index 3"),
            (&format!("{H}2 2 1\n1 1 pi\n"), 3, "not a number"),
            (
                "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 inf\n",
                3,
                "not an integer",
            ),
        ];
        for (text, line, msg) in cases {
            let (l, m) = err(text);
            assert!(m.contains(msg), "{text:?}: {m}");
            assert_eq!(l, line, "{text:?}: {m}");
        }
        let (l, m) = err("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1.0\n");
        assert_eq!(l, 3);
        assert!(m.contains("above the diagonal"), "{m}");
        let (_, m) = err("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2 1.0\n");
        assert!(m.contains("pattern"), "{m}");
        // A huge declared count does not allocate; it fails on the count.
        let (l, _) = err(&format!("{H}1000000 1000000 999999999999\n1 1 1\n"));
        assert_eq!(l, 3);
    }

    #[test]
    fn writes_and_reads_back() {
        let mut c = Coo::new(ScalarType::F64, &[3, 3]);
        c.push(&[0, 0], Value::F64(1.0)).unwrap();
        c.push(&[2, 1], Value::F64(0.1)).unwrap();
        c.push(&[1, 2], Value::F64(0.1)).unwrap();
        for opts in [
            MtxWriteOptions::default(),
            MtxWriteOptions {
                symmetry: MtxSymmetry::Symmetric,
                ..Default::default()
            },
            MtxWriteOptions {
                layout: MtxLayout::Array,
                ..Default::default()
            },
        ] {
            let text = write_matrix_market(&c, &opts).unwrap();
            let back = read_matrix_market(&text, "t").unwrap().coo;
            let mut d =
                crate::tensor::DenseArray::filled(ScalarType::F64, &[3, 3], Value::F64(0.0))
                    .unwrap();
            for k in 0..back.len() {
                d.set(&back.coord(k), back.vals[k]).unwrap();
            }
            assert_eq!(d.get(&[2, 1]), Some(Value::F64(0.1)), "{text}");
            assert_eq!(d.get(&[1, 2]), Some(Value::F64(0.1)), "{text}");
            assert_eq!(d.get(&[0, 0]), Some(Value::F64(1.0)), "{text}");
        }
        let skew = MtxWriteOptions {
            symmetry: MtxSymmetry::SkewSymmetric,
            ..Default::default()
        };
        assert!(write_matrix_market(&c, &skew).is_err());
    }
}

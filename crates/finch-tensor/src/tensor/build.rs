//! Building tensors: from dense arrays, from coordinate lists (duplicates combined), and
//! from CSC/CSR buffers handed in by a caller.
//!
//! `from_dense` and `from_coo` sort the entries column-major (the last mode most
//! significant, the order of every level's fibers) and build the levels top-down from
//! groups of entries per parent position, so the result is valid by construction.

use crate::algebra::{Op, Value};
use crate::error::{Error, Result};
use crate::formats::{named, Format, IndexWidth, LevelFormat, LevelStorage, ScalarStorage};
use crate::tensor::storage::TensorStorage;
use crate::tensor::{checked_len, fmt_shape, Buffer, Coo, DenseArray, IndexVec, Tensor};

/// Sorted, duplicate-free entries: `keys[k*n .. (k+1)*n]` is entry `k`'s coordinate,
/// outermost mode first.
pub(crate) struct Entries {
    pub(crate) n: usize,
    pub(crate) keys: Vec<usize>,
    pub(crate) vals: Vec<Value>,
}

impl Entries {
    pub(crate) fn key(&self, k: usize, m: usize) -> usize {
        self.keys[k * self.n + m]
    }
}

impl Tensor {
    /// Stores a dense array in a format. Entries equal to the format's fill are not stored
    /// by sparse levels. The array's element type must be the format's.
    pub fn from_dense(format: &Format, a: &DenseArray) -> Result<Tensor> {
        check_type(format, a.ty)?;
        let fill = format.fill_value();
        let n = a.shape.len();
        // Column-major linear order is sorted by (i_{N-1}, ..., i_0).
        let mut keys = Vec::new();
        let mut vals = Vec::new();
        let mut idx = vec![0usize; n];
        for (pos, v) in a.data.iter().enumerate() {
            if pos > 0 {
                // Advance the column-major multi-index.
                for (i, &size) in idx.iter_mut().zip(&a.shape) {
                    *i += 1;
                    if *i < size {
                        break;
                    }
                    *i = 0;
                }
            }
            if !v.same(&fill) || n == 0 {
                keys.extend(idx.iter().rev());
                vals.push(*v);
            }
        }
        build(format, &a.shape, Entries { n, keys, vals })
    }

    /// A dense tensor of `shape` holding `values` in column-major order (the first index
    /// varies fastest), stored as `Dense(...Dense(Element(0))...)`, one Dense level per
    /// mode, with a zero of the values' type as its fill. The vector moves in without a
    /// copy: `Tensor::from_values(&[3], vec![1.0, 2.0, 3.0])`.
    pub fn from_values(shape: &[usize], values: impl Into<Buffer>) -> Result<Tensor> {
        let val = values.into();
        let len = checked_len(shape)?;
        if shape.is_empty() || val.len() != len {
            return Err(Error::Program(format!(
                "{} values for a dense tensor of shape {} ({len} entries{})",
                val.len(),
                fmt_shape(shape),
                if shape.is_empty() {
                    "; a 0-d tensor is a Scalar"
                } else {
                    ""
                }
            )));
        }
        let fill = Value::zero_of(val.scalar_type());
        let (format, storage) = named::dense(shape, fill, val);
        Tensor::from_parts(format, shape.to_vec(), TensorStorage::Levels(storage))
    }

    /// Stores coordinate data in a format; duplicate coordinates are combined with `+`.
    /// Explicitly listed fill values are stored (a file's explicit zeros stay), except
    /// under a `Pattern()` leaf, which can only store `true`.
    pub fn from_coo(format: &Format, coo: &Coo) -> Result<Tensor> {
        Tensor::from_coo_with(format, coo, Op::Add)
    }

    /// Like [`Tensor::from_coo`], combining duplicates with `combine` (e.g. `Op::Max`,
    /// `Op::Overwrite` to keep the last).
    pub fn from_coo_with(format: &Format, coo: &Coo, combine: Op) -> Result<Tensor> {
        coo.check()?;
        check_type(format, coo.ty)?;
        let n = coo.shape.len();
        let mut order: Vec<usize> = (0..coo.len()).collect();
        let key = |k: usize| coo.coords.iter().rev().map(move |c| c[k]);
        order.sort_by(|&a, &b| key(a).cmp(key(b)));
        let mut keys: Vec<usize> = Vec::with_capacity(coo.len() * n);
        let mut vals: Vec<Value> = Vec::with_capacity(coo.len());
        let mut prev: Option<usize> = None;
        for &k in &order {
            let v = coo.vals[k];
            if let Some(p) = prev {
                if key(p).eq(key(k)) {
                    let last = vals.len() - 1;
                    vals[last] = combine
                        .eval(&[vals[last], v])?
                        .convert_exact(coo.ty)
                        .ok_or_else(|| {
                            Error::Program(format!(
                                "combining duplicates with `{combine}` does not give a {}",
                                coo.ty
                            ))
                        })?;
                    continue;
                }
            }
            keys.extend(key(k));
            vals.push(v);
            prev = Some(k);
        }
        if is_pattern(format) {
            // A Pattern leaf stores `true` only.
            let mut kk = Vec::with_capacity(keys.len());
            let mut vv = Vec::with_capacity(vals.len());
            for (k, v) in vals.iter().enumerate() {
                if v.as_bool() == Some(true) {
                    kk.extend_from_slice(&keys[k * n..(k + 1) * n]);
                    vv.push(*v);
                }
            }
            keys = kk;
            vals = vv;
        }
        build(format, &coo.shape, Entries { n, keys, vals })
    }

    /// A CSC matrix (`nrows × ncols`, column pointers, row indices, values) as
    /// `Dense(SparseList(Element(0)))` of shape `[nrows, ncols]`, or
    /// `Dense(SparseList{UInt32}(Element(0)))` when the pointers and indices are `Vec<u32>`.
    /// The buffers are moved in without copying and validated (they come from outside).
    pub fn from_csc(
        nrows: usize,
        ncols: usize,
        colptr: impl Into<IndexVec>,
        rowidx: impl Into<IndexVec>,
        data: impl Into<Buffer>,
    ) -> Result<Tensor> {
        let data = data.into();
        let ty = data.scalar_type();
        let fill = Value::zero_of(ty);
        let (format, storage) = named::csc(nrows, ncols, fill, colptr.into(), rowidx.into(), data);
        Tensor::from_parts(format, vec![nrows, ncols], TensorStorage::Levels(storage))
    }

    /// A CSR matrix handed in as row pointers, column indices and values, *without
    /// copying*: the result is the transpose `Aᵀ` (shape `[ncols, nrows]`) in
    /// `Dense(SparseList(Element(0)))`, because CSR of `A` is exactly CSC of `Aᵀ`. Index
    /// it as `AT[j, i]`. Validated.
    pub fn from_csr_transposed(
        nrows: usize,
        ncols: usize,
        rowptr: impl Into<IndexVec>,
        colidx: impl Into<IndexVec>,
        data: impl Into<Buffer>,
    ) -> Result<Tensor> {
        Tensor::from_csc(ncols, nrows, rowptr, colidx, data)
    }

    /// A CSR matrix as the matrix itself (shape `[nrows, ncols]`) in
    /// `Dense(SparseList(Element(0)))`. Needs a transposing copy (counting sort, O(nnz));
    /// use [`Tensor::from_csr_transposed`] to avoid it. Validated.
    pub fn from_csr(
        nrows: usize,
        ncols: usize,
        rowptr: impl Into<IndexVec>,
        colidx: impl Into<IndexVec>,
        data: impl Into<Buffer>,
    ) -> Result<Tensor> {
        let at = Tensor::from_csr_transposed(nrows, ncols, rowptr, colidx, data)?;
        let ty = at.element_type();
        let TensorStorage::Levels(storage) = at.storage else {
            return Err(Error::Program("internal: CSR storage is not levels".into()));
        };
        let (rowptr, colidx, data) = named::csc_buffers(storage)
            .ok_or_else(|| Error::Program("internal: CSR storage is not CSC".into()))?;
        let colidx = colidx.into_wide();
        // Counting sort by column.
        let nnz = colidx.len();
        let mut colptr = Vec::new();
        reserve(&mut colptr, ncols.saturating_add(1), "Dense")?;
        colptr.resize(ncols + 1, 0usize);
        for &j in &colidx {
            colptr[j + 1] += 1;
        }
        for j in 0..ncols {
            colptr[j + 1] += colptr[j];
        }
        let mut next = colptr.clone();
        let mut rowidx = vec![0usize; nnz];
        let mut perm = vec![0usize; nnz];
        for i in 0..nrows {
            for (q, &j) in colidx
                .iter()
                .enumerate()
                .take(rowptr.at(i + 1))
                .skip(rowptr.at(i))
            {
                rowidx[next[j]] = i;
                perm[next[j]] = q;
                next[j] += 1;
            }
        }
        let mut vals = Buffer::new(ty);
        vals.reserve(nnz);
        for &q in &perm {
            if let Some(v) = data.get(q) {
                vals.push(v)?;
            }
        }
        let width = rowptr.width();
        Tensor::from_csc(
            nrows,
            ncols,
            IndexVec::with_width(colptr, width, "the column pointers")?,
            IndexVec::with_width(rowidx, width, "the row indices")?,
            vals,
        )
    }
}

fn is_pattern(format: &Format) -> bool {
    let mut l = match format {
        Format::Levels(l) => l,
        Format::Scalar(..) => return false,
    };
    loop {
        match l {
            LevelFormat::Inner { child, .. } => l = child,
            LevelFormat::Pattern => return true,
            LevelFormat::Element(_) => return false,
        }
    }
}

fn check_type(format: &Format, ty: crate::algebra::ScalarType) -> Result<()> {
    if format.element_type() != ty {
        return Err(Error::Program(format!(
            "the format {format} holds {} but the data is {ty}",
            format.element_type()
        )));
    }
    Ok(())
}

/// Builds a tensor from sorted, duplicate-free entries.
fn build(format: &Format, shape: &[usize], e: Entries) -> Result<Tensor> {
    if format.ndims() != shape.len() {
        return Err(Error::Program(format!(
            "the format {format} has {} modes but the data has shape {}",
            format.ndims(),
            fmt_shape(shape)
        )));
    }
    checked_len(shape)?;
    let storage = match format {
        Format::Scalar(kind, fill) => {
            let val = e.vals.first().copied().unwrap_or(*fill);
            TensorStorage::Scalar(ScalarStorage {
                kind: *kind,
                fill: *fill,
                val,
                // A SparseScalar holding a value other than its fill was written.
                dirty: kind.tracks_writes() && !val.same(fill),
            })
        }
        Format::Levels(lf) => {
            let outer_first: Vec<usize> = shape.iter().rev().copied().collect();
            let groups = vec![(0, e.vals.len())];
            TensorStorage::Levels(build_level(lf, &outer_first, 0, &e, &groups)?)
        }
    };
    Ok(Tensor {
        format: format.clone(),
        shape: shape.to_vec(),
        storage,
    })
}

/// Builds one level. `dims` are the sizes of the remaining modes, outermost first; `m` is
/// the key position of this level's (outermost) mode; `groups[p]` is the range of entries
/// below parent position `p` (sorted, all sharing the outer key prefix).
pub(crate) fn build_level(
    format: &LevelFormat,
    dims: &[usize],
    m: usize,
    e: &Entries,
    groups: &[(usize, usize)],
) -> Result<LevelStorage> {
    match format {
        LevelFormat::Element(fill) => crate::formats::element::build(*fill, e, groups),
        LevelFormat::Pattern => crate::formats::pattern::build(e, groups),
        LevelFormat::Inner { kind, index, child } => kind.build(&BuildAt {
            index: *index,
            child,
            dims,
            m,
            e,
            groups,
        }),
    }
}

/// Where a level is built: its index width, the format below it, the sizes of the
/// remaining modes (outermost first), the key position `m` of its outermost mode, the
/// entries, and per parent position the range of entries below it.
#[derive(Clone, Copy)]
pub(crate) struct BuildAt<'a> {
    pub(crate) index: IndexWidth,
    pub(crate) child: &'a LevelFormat,
    pub(crate) dims: &'a [usize],
    pub(crate) m: usize,
    pub(crate) e: &'a Entries,
    pub(crate) groups: &'a [(usize, usize)],
}

impl BuildAt<'_> {
    /// The size of the level's outermost mode.
    pub(crate) fn size(&self) -> usize {
        self.dims[0]
    }

    /// The level below a one-mode level, over the entries of each of its positions.
    pub(crate) fn child_of(&self, child_groups: &[(usize, usize)]) -> Result<LevelStorage> {
        build_level(
            self.child,
            &self.dims[1..],
            self.m + 1,
            self.e,
            child_groups,
        )
    }
}

/// Per parent group, its distinct indices of mode `m` in order: `ptr` (offsets, one per
/// group plus one) and `idx`; each index's entries go to `child_groups`.
pub(crate) fn sorted_lists(
    e: &Entries,
    m: usize,
    groups: &[(usize, usize)],
    child_groups: &mut Vec<(usize, usize)>,
) -> (Vec<usize>, Vec<usize>) {
    let mut ptr = Vec::with_capacity(groups.len() + 1);
    let mut idx = Vec::new();
    ptr.push(0);
    for &(lo, hi) in groups {
        for (i, g) in index_groups(e, m, lo, hi) {
            idx.push(i);
            child_groups.push(g);
        }
        ptr.push(idx.len());
    }
    (ptr, idx)
}

/// The distinct indices of key position `m` among entries `lo..hi`, each with its range of
/// entries.
pub(crate) fn index_groups(
    e: &Entries,
    m: usize,
    lo: usize,
    hi: usize,
) -> Vec<(usize, (usize, usize))> {
    let mut out = Vec::new();
    let mut k = lo;
    while k < hi {
        let i = e.key(k, m);
        let start = k;
        while k < hi && e.key(k, m) == i {
            k += 1;
        }
        out.push((i, (start, k)));
    }
    out
}

/// The first few items, comma-separated, then how many more: an error about one fiber of
/// a large tensor stays one line.
pub(crate) fn first_few(items: impl ExactSizeIterator<Item = String>) -> String {
    const SHOWN: usize = 6;
    let more = items.len().saturating_sub(SHOWN);
    let mut out = items.take(SHOWN).collect::<Vec<_>>().join(", ");
    if more > 0 {
        out.push_str(&format!(", ... ({more} more)"));
    }
    out
}

/// The entries of a group below key position `m` that are not the fill: the subfiber's
/// content, for comparing subfibers.
pub(crate) fn content<'a>(
    e: &'a Entries,
    m: usize,
    g: (usize, usize),
    fill: &'a Value,
) -> impl Iterator<Item = (&'a [usize], Value)> + 'a {
    (g.0..g.1)
        .filter(move |&k| !e.vals[k].same(fill))
        .map(move |k| (&e.keys[k * e.n + m + 1..(k + 1) * e.n], e.vals[k]))
}

pub(crate) fn same_subfiber(
    e: &Entries,
    m: usize,
    a: (usize, usize),
    b: (usize, usize),
    fill: &Value,
) -> bool {
    let (mut x, mut y) = (content(e, m, a, fill), content(e, m, b, fill));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return true,
            (Some((ka, va)), Some((kb, vb))) if ka == kb && va.same(&vb) => {}
            _ => return false,
        }
    }
}

/// Maximal runs `(first, last, representative group)` of equal subfibers among the
/// entries `lo..hi` of one fiber of size `size`. With `tile`, runs cover `0..size` (gaps
/// are fill runs); without, only runs whose subfiber is not all fill are returned.
pub(crate) fn runs_of(
    e: &Entries,
    m: usize,
    lo: usize,
    hi: usize,
    size: usize,
    fill: &Value,
    tile: bool,
) -> Vec<(usize, usize, (usize, usize))> {
    let empty = (lo, lo);
    // Segments in index order: stored indices and the gaps between them (as empty groups).
    let mut segments: Vec<(usize, usize, (usize, usize))> = Vec::new();
    let mut next = 0;
    for (i, g) in index_groups(e, m, lo, hi) {
        if i > next {
            segments.push((next, i - 1, empty));
        }
        segments.push((i, i, g));
        next = i + 1;
    }
    if next < size {
        segments.push((next, size - 1, empty));
    }
    let mut runs: Vec<(usize, usize, (usize, usize))> = Vec::new();
    for (a, b, g) in segments {
        match runs.last_mut() {
            Some(last) if last.1 + 1 == a && same_subfiber(e, m, last.2, g, fill) => last.1 = b,
            _ => runs.push((a, b, g)),
        }
    }
    if !tile {
        runs.retain(|&(_, _, g)| content(e, m, g, fill).next().is_some());
    }
    runs
}

/// The `parents × size` positions of a Dense or SparseByteMap level, or an error naming it.
pub(crate) fn positions(parents: usize, size: usize, level: &str) -> Result<usize> {
    parents.checked_mul(size).ok_or_else(|| {
        Error::Program(format!(
            "a {level} level of {parents} × {size} positions is larger than memory can address"
        ))
    })
}

/// Room for `n` more elements of a level being built, or an error naming it (a huge size
/// read from a file is an error, not an aborted process).
pub(crate) fn reserve<T>(v: &mut Vec<T>, n: usize, level: &str) -> Result<()> {
    super::memory::check(n, std::mem::size_of::<T>(), || format!("a {level} level"))?;
    v.try_reserve(n).map_err(|_| {
        Error::Program(format!(
            "a {level} level of {n} positions needs more memory than is available ({} bytes)",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })
}

//! The common formats by name, for the constructors that take raw arrays
//! (`Tensor::from_values`, `from_csc`, ...) and give them back: a dense array is one
//! Dense level per mode over an Element leaf; CSC is `Dense(SparseList(Element))`.

use super::dense::DenseStorage;
use super::element::ElementStorage;
use super::format::{Format, LevelFormat, LevelKind};
use super::level::LevelStorage;
use super::sparse_coo::SparseCooStorage;
use super::sparse_list::SparseListStorage;
use crate::algebra::Value;
use crate::tensor::{Buffer, IndexVec};

/// `Dense(...Dense(Element(fill))...)` over `shape` (first mode innermost) holding `val`
/// column-major, and its format. Not validated.
pub(crate) fn dense(shape: &[usize], fill: Value, val: Buffer) -> (Format, LevelStorage) {
    let mut format = LevelFormat::Element(fill);
    let mut storage = LevelStorage::Element(ElementStorage { fill, val });
    // The first mode is the innermost level; the last, the root.
    for &n in shape {
        format = LevelFormat::inner(LevelKind::Dense, format);
        storage = LevelStorage::Dense(DenseStorage {
            shape: n,
            child: Box::new(storage),
        });
    }
    (Format::Levels(format), storage)
}

/// A level per mode over `Element(fill)`, the first mode innermost: `SparseList` where
/// `sparse[m]` holds, `Dense` elsewhere (the array layer's default formats).
pub(crate) fn lists_or_dense(sparse: &[bool], fill: Value) -> Format {
    let mut level = LevelFormat::Element(fill);
    for &s in sparse {
        let kind = if s {
            LevelKind::SparseList
        } else {
            LevelKind::Dense
        };
        level = LevelFormat::inner(kind, level);
    }
    Format::Levels(level)
}

/// COO of `shape` holding `val` at `coords` (one vector per mode, innermost first as
/// SparseCOO stores them, the tuples sorted), as one `SparseCOO{N}` level over an
/// Element leaf, and its format. Not validated.
pub(crate) fn coo(
    shape: &[usize],
    coords: Vec<Vec<usize>>,
    fill: Value,
    val: Buffer,
) -> (Format, LevelStorage) {
    let format = Format::Levels(LevelFormat::inner(
        LevelKind::SparseCoo(shape.len()),
        LevelFormat::Element(fill),
    ));
    let storage = LevelStorage::SparseCoo(SparseCooStorage {
        shape: shape.to_vec(),
        ptr: vec![0, val.len()],
        tbl: coords,
        child: Box::new(LevelStorage::Element(ElementStorage { fill, val })),
    });
    (format, storage)
}

/// The values of a storage tree that is Dense levels over an Element leaf, column-major;
/// `None` for any other structure.
pub(crate) fn dense_values(mut level: LevelStorage) -> Option<Buffer> {
    loop {
        if let LevelStorage::Element(e) = level {
            return Some(e.val);
        }
        let LevelStorage::Dense(d) = level else {
            return None;
        };
        level = *d.child;
    }
}

/// A CSC matrix (`nrows × ncols`) as `Dense(SparseList{index}(Element(fill)))` over its
/// buffers, moved in, and its format. Not validated.
pub(crate) fn csc(
    nrows: usize,
    ncols: usize,
    fill: Value,
    ptr: IndexVec,
    idx: IndexVec,
    val: Buffer,
) -> (Format, LevelStorage) {
    let index = ptr.width();
    let format = Format::Levels(LevelFormat::inner(
        LevelKind::Dense,
        LevelFormat::Inner {
            kind: LevelKind::SparseList,
            index,
            child: Box::new(LevelFormat::Element(fill)),
        },
    ));
    let storage = LevelStorage::Dense(DenseStorage {
        shape: ncols,
        child: Box::new(LevelStorage::SparseList(SparseListStorage {
            shape: nrows,
            ptr,
            idx,
            child: Box::new(LevelStorage::Element(ElementStorage { fill, val })),
        })),
    });
    (format, storage)
}

/// The column pointers, row indices and values of CSC storage, moved out; `None` for
/// any other structure.
pub(crate) fn csc_buffers(level: LevelStorage) -> Option<(IndexVec, IndexVec, Buffer)> {
    let LevelStorage::Dense(d) = level else {
        return None;
    };
    let LevelStorage::SparseList(s) = *d.child else {
        return None;
    };
    let LevelStorage::Element(e) = *s.child else {
        return None;
    };
    Some((s.ptr, s.idx, e.val))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csc_buffers_come_back_out() {
        let (_, s) = csc(
            2,
            1,
            Value::F64(0.0),
            IndexVec::Wide(vec![0, 1]),
            IndexVec::Wide(vec![1]),
            Buffer::F64(vec![5.0]),
        );
        let (ptr, idx, val) = csc_buffers(s).expect("CSC storage");
        assert_eq!(ptr, IndexVec::Wide(vec![0, 1]));
        assert_eq!(idx, IndexVec::Wide(vec![1]));
        assert_eq!(val, Buffer::F64(vec![5.0]));
        let (_, d) = dense(&[2], Value::F64(0.0), Buffer::F64(vec![1.0, 2.0]));
        assert_eq!(dense_values(d), Some(Buffer::F64(vec![1.0, 2.0])));
    }
}

//! Checked invariants: a tensor `validate` accepts is safe for every kernel. Random
//! corruptions of 2- and 3-level tensors in every level format in every position (a
//! size, position, index, run or block end changed to a nearby or arbitrary value, a
//! bytemap flag flipped) are either rejected by the validator with the invariant's name,
//! or the tensor they make runs through the bounds-checked interpreter without reading
//! outside any buffer and gives the reference's results on what the tensor means
//! (`to_dense`). The `raw_arrays` fuzz target does the same, guided by coverage.

use finch::formats::Format;
use finch::formats::LevelKind;
use finch::tensor::{Tensor, TensorStorage};
use finch_fuzz::storage::{corrupted_is_rejected_or_harmless, slots, small_dense};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_index_buffers_are_rejected_or_harmless(
        outer in 0..LevelKind::registry().len(),
        inner in 0..LevelKind::registry().len(),
        middle in prop::option::weighted(0.3, 0..LevelKind::registry().len()),
        m in 0usize..7,
        n in 0usize..7,
        seed in any::<u64>(),
        pick in any::<prop::sample::Index>(),
        at in any::<usize>(),
        change in 0u8..6,
        arbitrary in 0usize..12,
    ) {
        // Two levels, or three with a middle level.
        let levels = LevelKind::registry();
        let (format, shape) = match middle {
            Some(mid) => (
                format!("{}({}({}(Element(0.0))))", levels[outer], levels[mid], levels[inner]),
                vec![m, n, (m + n) % 4],
            ),
            None => (format!("{}({}(Element(0.0)))", levels[outer], levels[inner]), vec![m, n]),
        };
        let f = Format::parse(&format).unwrap();
        let a = small_dense(&shape, seed);
        // Data a single-entry or single-run level cannot hold is not this test's subject.
        let Ok(t) = Tensor::from_dense(&f, &a) else {
            return Ok(());
        };
        let (f, shape, storage) = t.into_parts();
        let TensorStorage::Levels(mut root) = storage else {
            return Err(TestCaseError::fail("not a level tensor"));
        };
        let mut all = Vec::new();
        slots(&mut root, &mut all);
        all.retain(|s| !s.is_empty());
        if all.is_empty() {
            return Ok(());
        }
        let k = pick.index(all.len());
        let changed = all[k].corrupt_at(at, change, arbitrary);
        drop(all);
        if !changed {
            return Ok(());
        }
        let result = Tensor::from_parts(f, shape, TensorStorage::Levels(root));
        corrupted_is_rejected_or_harmless(result, &format).map_err(TestCaseError::fail)?;
    }
}

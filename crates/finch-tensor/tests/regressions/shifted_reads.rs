//! See `main.rs`.

use super::*;

/// Issue #27, reproducer 4: `A :: SparseBand(SparseRunList)` read at `A[i + 1, j]` by
/// two statements (four reads, so the SparseRunList columns are walked to the end of the
/// extent, segment by segment). `i` runs over `0:1`, but the segment walk first sought
/// index 1, past the run of row 1 (`i = 0`), and a seek cannot go back: z lost
/// min(0, -1) / (|-1| + 1) = -0.5.
#[test]
fn a_shifted_run_list_walked_to_the_end_keeps_its_first_row() {
    let text = "input A :: SparseBand(SparseRunList(Element(0.0)))
output y :: Dense(Element(false))
output z :: Dense(Element(0.0))
y .= false
z .= 0
for j = _, i = _
  y[j] |= (A[i + 1, j] - A[i + 1, j]) != 0.0
  z[j] += min(0.0, A[i + 1, j]) / (abs(A[i + 1, j]) + 1.0)
end
";
    let out = agree(text, &[("A", array(&[2, 1], &[-1.0, 0.0]))]);
    assert_eq!(out["z"].data, array(&[1], &[-0.5]).data);
    assert_eq!(out["y"].data, vec![finch::Value::Bool(false)]);
}

/// The same walk over SparseBlockList columns under a SparseList, read at `A[i + 2, j]`
/// by one statement of five reads: the blocks of rows 1 and 2 (`i = -1` and `0`) end
/// before index 1, where the walk started.
#[test]
fn a_shifted_block_list_walked_to_the_end_keeps_the_blocks_before_index_one() {
    let text = "input A :: SparseList(SparseBlockList(Element(0.0)))
output z :: Dense(Element(0.0))
z .= 0
for j = _, i = _
  z[j] += A[i + 2, j] + 2.0 * A[i + 2, j] - A[i + 2, j] + abs(A[i + 2, j]) + A[i + 2, j] * 0.5
end
";
    // Column 1: rows 1, 2 and 4 hold 2, -3 and 1; column 2 is empty.
    let a = array(&[4, 2], &[2.0, -3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let out = agree(text, &[("A", a)]);
    // Each entry v adds v + 2v - v + |v| + v/2 = 2.5v + |v|.
    let column = |v: f64| 2.5 * v + v.abs();
    assert_eq!(
        out["z"].data,
        array(&[2], &[column(2.0) + column(-3.0) + column(1.0), 0.0]).data
    );
}

/// A permissive shifted read of SparsePoint columns padded with their fill, walked to
/// the end of a loop that runs past the level: an empty point fiber's entry is the index
/// after the level's last, which the shift brought inside the loop. Column 1, outside
/// the band, has no fiber at all, and the compiled engines read column 2's entry there
/// (13 where the reference gives 3; over an empty matrix, a read outside the values).
#[test]
fn an_empty_point_fiber_read_past_the_level_is_padding() {
    let text = "input A :: SparseBand(SparsePoint(Element(0.0)))
output z :: Dense(Element(0.0))
z .= 0
for j = _, i = 0:4
  z[j] += coalesce(A[~(i + 1), j], 1.0) + coalesce(A[~(i + 1), j], 0.0) + coalesce(A[~(i + 1), j], 0.0)
end
";
    // Columns: [0, 0] (outside the band), [5, 0], [0, 7].
    let a = array(&[2, 3], &[0.0, 0.0, 5.0, 0.0, 0.0, 7.0]);
    let out = agree(text, &[("A", a)]);
    // i = 0:4 reads rows 1:5; rows 3:5 are outside `A` and read 1.0 + 0.0 + 0.0.
    assert_eq!(
        out["z"].data,
        array(&[3], &[3.0, 3.0 + 15.0, 3.0 + 21.0]).data
    );
    let empty = agree(text, &[("A", array(&[1, 1], &[0.0]))]);
    assert_eq!(empty["z"].data, array(&[1], &[4.0]).data);
}

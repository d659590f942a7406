//! Bad files get clear errors: Matrix Market and FROSTT texts cut, with junk inserted, or
//! with a number replaced (by a huge, negative, fractional or empty one) are read as a
//! matrix or refused with an error, never a panic; what is read stores into a tensor or
//! is refused with an error too.

use finch::formats::Format;
use finch::io::{read_matrix_market, read_matrix_market_structure, read_tns};
use finch::tensor::Tensor;
use proptest::prelude::*;

const MTX: [&str; 6] = [
    "%%MatrixMarket matrix coordinate real general\n% a comment\n3 4 3\n1 1 1.5\n2 3 -2\n3 4 4e2\n",
    "%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n1 1 1\n2 1 -7\n3 2 4\n",
    "%%MatrixMarket matrix coordinate pattern general\n2 5 2\n1 5\n2 1\n",
    "%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 1.0 0.0\n2 1 2.0 -1.0\n",
    "%%MatrixMarket matrix array real general\n2 2\n1.0\n0\n-3.5\n4\n",
    "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.0\n3 1 -2.0\n",
];

const TNS: [&str; 2] = [
    "1 1 1 1.0\n2 3 1 -2.5\n4 1 2 7\n",
    "# comment\n1 2 3.0\n2 2 0\n",
];

/// `text` with one change: cut at `at`, junk inserted at `at`, or the number around `at`
/// replaced.
fn mutate(text: &str, how: u8, at: usize, junk: &str) -> String {
    let at = (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    match how {
        0 => text[..at].to_string(),
        1 => format!("{}{junk}{}", &text[..at], &text[at..]),
        _ => {
            let replacement = [
                "99999999999999999999",
                "4294967296",
                "-1",
                "0",
                "2.5",
                "",
                "1e308",
                "nan",
            ][(how as usize) % 8];
            let start = text[..at]
                .rfind(|c: char| c.is_whitespace())
                .map_or(0, |i| i + 1);
            let end = text[at..]
                .find(|c: char| c.is_whitespace())
                .map_or(text.len(), |i| at + i);
            format!("{}{replacement}{}", &text[..start], &text[end..])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn malformed_matrix_market_and_frostt_files_are_errors_not_panics(
        which in 0usize..8,
        how in 0u8..10,
        at in 0usize..160,
        junk in "[ -~\n]{0,6}",
    ) {
        let csr = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
        if which < MTX.len() {
            let text = mutate(MTX[which], how, at, &junk);
            if let Ok(m) = read_matrix_market(&text, "fuzz.mtx") {
                let _ = Tensor::from_coo(&csr, &m.coo);
            }
            if let Ok(m) = read_matrix_market_structure(&text, "fuzz.mtx") {
                let _ = Tensor::from_coo(&csr, &m.coo);
            }
        } else {
            let text = mutate(TNS[which - MTX.len()], how, at, &junk);
            if let Ok(coo) = read_tns(&text, "fuzz.tns", None) {
                let f = match coo.shape.len() {
                    0 => Format::parse("Element(0.0)").unwrap(),
                    2 => csr,
                    n => Format::parse(&format!("SparseCOO{{{n}}}(Element(0.0))")).unwrap(),
                };
                let _ = Tensor::from_coo(&f, &coo);
            }
        }
    }
}

/// A size no memory holds is an error naming the level, not an aborted process.
#[test]
fn a_dense_level_larger_than_memory_is_an_error() {
    // 2^44 columns: the Dense root's positions alone would take 2^48 bytes.
    let coo = read_tns("1 17592186044416 1.0\n", "huge.tns", None).unwrap();
    let csr = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
    let e = Tensor::from_coo(&csr, &coo).unwrap_err().to_string();
    assert!(e.contains("Dense level") && e.contains("memory"), "{e}");
    let bytemap = Format::parse("SparseByteMap(SparseList(Element(0.0)))").unwrap();
    let e = Tensor::from_coo(&bytemap, &coo).unwrap_err().to_string();
    assert!(e.contains("SparseByteMap level"), "{e}");
}

/// A hypersparse matrix (dimensions of 2^44) is summarized from its entries, and CSR
/// with that many columns is an error naming the level, not an aborted process.
#[test]
fn hypersparse_shapes_are_summarized_or_refused() {
    let text = "%%MatrixMarket matrix coordinate real general\n17592186044416 17592186044416 2\n1 1 1.0\n17592186044416 3 2.0\n";
    let m = read_matrix_market(text, "huge.mtx").unwrap();
    let s = finch::io::structure_summary(&m.coo);
    let stats = s.matrix.expect("a matrix");
    assert_eq!(
        (stats.max_per_row, stats.empty_rows, stats.empty_cols),
        (1, (1 << 44) - 2, (1 << 44) - 2)
    );
    let e = Tensor::from_csr(
        1,
        1 << 44,
        vec![0usize, 1],
        vec![5usize],
        finch::tensor::Buffer::F64(vec![1.0]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("memory"), "{e}");
}

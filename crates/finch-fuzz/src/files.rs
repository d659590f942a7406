//! File surfaces: the Matrix Market and FROSTT readers.

use finch::io::{
    read_matrix_market, read_matrix_market_structure, read_tns, structure_summary,
    write_matrix_market, write_tns, MtxWriteOptions,
};
use finch::tensor::Coo;
use finch::Value;

/// Files longer than this are skipped (the readers are linear; longer inputs only slow
/// the fuzzer down).
const MAX_FILE: usize = 1 << 16;

/// A Matrix Market reader: text and the name it has in errors.
type Reader = fn(&str, &str) -> finch::Result<finch::io::MatrixMarket>;

/// The Matrix Market reader, on values and on structure only: it refuses the file with an
/// error, or it reads entries that pass `Coo::check`, summarise, and write and read back
/// to the same entries.
pub fn matrix_market(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > MAX_FILE {
        return;
    }
    let readers: [(&str, Reader); 2] = [
        ("values", read_matrix_market),
        ("structure", read_matrix_market_structure),
    ];
    for (what, read) in readers {
        let Ok(m) = read(text, "fuzz.mtx") else {
            continue;
        };
        if let Err(e) = m.coo.check() {
            panic!("the reader ({what}) returned entries that fail their check: {e}\n{text}");
        }
        let _ = structure_summary(&m.coo);
        let written = match write_matrix_market(&m.coo, &MtxWriteOptions::default()) {
            Ok(w) => w,
            Err(e) => panic!("entries read ({what}) cannot be written: {e}\n{text}"),
        };
        let again = match read(&written, "written.mtx") {
            Ok(m) => m.coo,
            Err(e) => panic!("the written file does not read back ({what}): {e}\n--- input\n{text}\n--- written\n{written}"),
        };
        // The writer sorts column-major and keeps the last of duplicate entries.
        let want = sorted_last_wins(&m.coo, &[1, 0]);
        let got = sorted_last_wins(&again, &[1, 0]);
        assert!(
            same_entries(&want, &got) && m.coo.shape == again.shape,
            "written and read back ({what}), the entries changed\n--- input\n{text}\n--- written\n{written}"
        );
    }
}

/// The FROSTT reader: it refuses the file with an error, or it reads entries that pass
/// `Coo::check` and write and read back (with the shape given) to the same entries.
pub fn frostt(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > MAX_FILE {
        return;
    }
    let Ok(coo) = read_tns(text, "fuzz.tns", None) else {
        return;
    };
    if let Err(e) = coo.check() {
        panic!("the reader returned entries that fail their check: {e}\n{text}");
    }
    let written = match write_tns(&coo) {
        Ok(w) => w,
        Err(e) => panic!("entries read cannot be written: {e}\n{text}"),
    };
    let again = match read_tns(&written, "written.tns", Some(&coo.shape)) {
        Ok(c) => c,
        Err(e) => panic!(
            "the written file does not read back: {e}\n--- input\n{text}\n--- written\n{written}"
        ),
    };
    assert!(
        coo.shape == again.shape && same_entries(&entry_list(&coo), &entry_list(&again)),
        "written and read back, the entries changed\n--- input\n{text}\n--- written\n{written}"
    );
}

/// The entries of `coo` as (coordinate, value), in file order.
fn entry_list(coo: &Coo) -> Vec<(Vec<usize>, Value)> {
    (0..coo.len())
        .map(|k| (coo.coord(k), coo.vals[k]))
        .collect()
}

/// The entries sorted by the modes in `order` (most significant first), a coordinate
/// given twice keeping its last value.
fn sorted_last_wins(coo: &Coo, order: &[usize]) -> Vec<(Vec<usize>, Value)> {
    let mut entries = entry_list(coo);
    let key = |c: &Vec<usize>| order.iter().map(|&m| c[m]).collect::<Vec<_>>();
    entries.sort_by_key(|(c, _)| key(c));
    let mut out: Vec<(Vec<usize>, Value)> = Vec::with_capacity(entries.len());
    for (c, v) in entries {
        match out.last_mut() {
            Some(last) if last.0 == c => last.1 = v,
            _ => out.push((c, v)),
        }
    }
    out
}

/// The same coordinates, and values equal as numbers (`NaN` equal to `NaN`; a type may
/// change, as `bool` data written as integers).
fn same_entries(a: &[(Vec<usize>, Value)], b: &[(Vec<usize>, Value)]) -> bool {
    let nan = |v: &Value| v.as_f64().is_some_and(f64::is_nan);
    a.len() == b.len()
        && a.iter().zip(b).all(|((ca, va), (cb, vb))| {
            ca == cb && (va.same(vb) || va.num_eq(vb) || (nan(va) && nan(vb)))
        })
}

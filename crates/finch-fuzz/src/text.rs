//! Text surfaces: programs and format strings.

use finch::formats::Format;
use finch::notation::{parse_program, print_program};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, Value};

use crate::bytes::Bytes;

/// Inputs longer than this are skipped: the parser is linear, and longer inputs only slow
/// the fuzzer down.
const MAX_TEXT: usize = 1 << 14;

/// The parser and the checker never panic, and parse → print → parse is the identity on
/// every program the parser accepts (spans aside), with print a fixpoint.
pub fn program_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > MAX_TEXT {
        return;
    }
    // The checker (formats, types, scopes) on everything the parser accepts.
    let _ = Program::parse(text);
    let Ok(ast) = parse_program(text) else {
        return;
    };
    let printed = print_program(&ast);
    let again = match parse_program(&printed) {
        Ok(p) => p,
        Err(e) => panic!(
            "the printed program does not parse: {e}\n--- input\n{text}\n--- printed\n{printed}"
        ),
    };
    assert!(
        again == ast,
        "parse, print, parse changed the program\n--- input\n{text}\n--- printed\n{printed}\n--- {ast:?}\n--- {again:?}"
    );
    assert_eq!(print_program(&again), printed, "printing is not a fixpoint");
}

/// Format strings: parse → print → parse is the identity, printing is canonical, and a
/// small tensor of every accepted format is built, validated and read back unchanged.
pub fn format_text(data: &[u8]) {
    // The last bytes choose the tensor's shape; the rest is the format string.
    let split = data.len().saturating_sub(4);
    let (text, tail) = data.split_at(split);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if text.len() > MAX_TEXT {
        return;
    }
    let Ok(format) = Format::parse(text) else {
        return;
    };
    let printed = format.to_string();
    let again = match Format::parse(&printed) {
        Ok(f) => f,
        Err(e) => panic!("the printed format does not parse: {e}\n{text}\n{printed}"),
    };
    assert_eq!(again, format, "parse, print, parse changed `{text}`");
    assert_eq!(again.to_string(), printed, "printing is not canonical");

    let mut b = Bytes::new(tail);
    let shape: Vec<usize> = (0..format.ndims()).map(|_| b.below(4)).collect();
    let ty = format.element_type();
    let Ok(mut a) = DenseArray::filled(ty, &shape, format.fill_value()) else {
        return;
    };
    // One entry off the fill, where there is room and the type has another value.
    let other = Value::zero_of(ty);
    if !a.data.is_empty() && !other.same(&format.fill_value()) {
        let at = b.below(a.data.len());
        a.data[at] = other;
    }
    // Data some formats cannot hold (two entries in a SparsePoint fiber, ...) is refused.
    if let Ok(t) = Tensor::from_dense(&format, &a) {
        if let Err(e) = t.validate() {
            panic!("a tensor built in `{printed}` fails validation: {e}");
        }
        match t.to_dense() {
            Ok(back) => assert_eq!(back, a, "`{printed}` does not hold its data"),
            Err(e) => panic!("a tensor built in `{printed}` cannot be read: {e}"),
        }
    }
}

//! See `main.rs`.

use super::*;

/// Issue #27, reproducer 3a: a RunList workspace whose only write is simplified away
/// (`+=` of a product with the constant 0.0) holds no run when read; it reads as its
/// declared value, 0.0, where the compiled engines read nothing and left `z` at Inf.
#[test]
fn an_unwritten_run_list_workspace_reads_as_its_declared_value() {
    let text = "input x :: Dense(Element(0.0))
output z :: Dense(Element(Inf))
temp W :: RunList(Element(0.0))
z .= Inf
W .= 0.0
for j = _
  W[j] += 0.0 * x[j]
end
for j = _
  z[j] = W[j]
end
";
    let out = agree(text, &[("x", array(&[3], &[1.0, 0.0, 3.0]))]);
    assert_eq!(out["z"].data, array(&[3], &[0.0, 0.0, 0.0]).data);
}

/// Issue #27, reproducer 3b: a RunList workspace declared in a loop whose write loop is
/// skipped in the last iteration (an empty column of `A`) reads as its declared value
/// there: `y` ends as 0.0 + 1.0, not as column 2's 5.0 + 1.0.
#[test]
fn a_run_list_workspace_declared_in_a_loop_reads_as_declared_after_an_empty_column() {
    let text = "input A :: SparseList(SparseList(Element(0.0)))
output y :: Scalar(0.0)
temp W :: RunList(Element(0.0))
y .= 0
for i = _
  W .= 0.0
  for j = _
    W[j] += A[j, i]
  end
  for j = _
    y[] = W[j] + 1.0
  end
end
";
    // Columns: [3, 0], [0, 5], [0, 0].
    let a = array(&[2, 3], &[3.0, 0.0, 0.0, 5.0, 0.0, 0.0]);
    let out = agree(text, &[("A", a)]);
    assert_eq!(out["y"].data, vec![finch::Value::F64(1.0)]);
}

/// A galloped read of a RunList workspace assumes a run covers each index: where the
/// first iteration skipped its write, the interpreter stopped reading `W_lvl1_right` at
/// position 0 of an empty buffer and the C kernel read outside it.
#[test]
fn a_galloped_run_list_workspace_has_a_run_where_its_write_was_skipped() {
    let text = "input A :: SparseList(SparseList(Element(0.0)))
input x :: Dense(Element(0.0))
output y :: Dense(Element(0.0))
temp W :: RunList(Element(0.0))
y .= 0
for i = _
  W .= 0.0
  for j = _
    W[j] += A[j, i]
  end
  for j = _
    y[i] += W[gallop(j)] * x[j] + 1.0
  end
end
";
    // Columns: [0, 0], [3, 5], [0, 0].
    let a = array(&[2, 3], &[0.0, 0.0, 3.0, 5.0, 0.0, 0.0]);
    let x = array(&[2], &[1.0, 2.0]);
    let out = agree(text, &[("A", a), ("x", x)]);
    assert_eq!(out["y"], array(&[3], &[2.0, 15.0, 2.0]));
}

/// A sparse workspace declared in a loop with a value other than its fill (`W .= 1.0`
/// over `Element(0.0)`) read its unwritten positions as the fill 0.0 in the compiled
/// engines, where the reference reads 1.0: a sparse level holds only what differs from
/// its fill. The compiler refuses it, as it refuses such a declaration at the top level.
#[test]
fn sparse_workspaces_declared_in_a_loop_with_other_than_their_fill_are_refused() {
    for level in [
        "RunList",
        "SparseRunList",
        "SparseList",
        "SparseByteMap",
        "SparseHash",
    ] {
        let text = format!(
            "input A :: SparseList(SparseList(Element(0.0)))
output y :: Dense(Element(0.0))
temp W :: {level}(Element(0.0))
y .= 0
for i = _
  W .= 1.0
  for j = _
    W[j] += A[j, i]
  end
  for j = _
    y[i] += W[j]
  end
end
"
        );
        let program = Program::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut reference = Bindings::new();
        reference.insert("A", array(&[2, 2], &[3.0, 0.0, 0.0, 0.0]));
        program
            .run_reference(&mut reference, &RunOptions::default())
            .unwrap_or_else(|e| panic!("reference: {e}\n{text}"));
        let y = reference.get("y").expect("the reference binds y");
        assert_eq!(y.data, array(&[2], &[5.0, 2.0]).data, "{level}");
        for engine in [Engine::Interp, Engine::C] {
            let compiled = program.compile_with(engine, &CompileOptions::default());
            assert!(
                matches!(&compiled, Err(finch::Error::Unsupported(m)) if m.contains("`W` with 1.0")),
                "{level} {engine:?}: {:?}",
                compiled.err()
            );
        }
    }
}

/// Difftest seed 104 #532: a `SparseByteMap(Pattern())` workspace declared inside a loop
/// was taken for a format that needs rewriting as a hash group (only a SparseByteMap
/// over an `Element` leaf was reset in place), and the conversion, asked to do that
/// twice, failed with "internal: an output written in any order twice". A Pattern leaf
/// under a SparseByteMap is reset in place as an Element leaf is.
#[test]
fn a_byte_map_pattern_workspace_declared_in_a_loop_is_reset_in_place() {
    let text = "input A :: Dense(SparseList(Element(1.0)))
output y :: Dense(Dense(Element(0.0)))
temp w :: SparseByteMap(Pattern())
y .= 0.0
for i = _
  w .= false
  for j = _
    for k = _
      w[j] |= A[j, k] == 0.0
    end
  end
  for j = _
    y[j, i] = ifelse(w[j], 1.0, 2.0) * A[j, i]
  end
end
";
    // Column-major 3×3: row 2 holds a zero (column 3); rows 1 and 3 none.
    let a = array(&[3, 3], &[1.0, 5.0, 1.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0]);
    let out = agree(text, &[("A", a)]);
    let want = [2.0, 5.0, 2.0, 4.0, 1.0, 2.0, 2.0, 0.0, 6.0];
    assert_eq!(out["y"], array(&[3, 3], &want));
}

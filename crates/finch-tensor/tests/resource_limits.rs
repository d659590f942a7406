//! Resource limits: programs and sizes that would exhaust the stack, the memory or the
//! compiler's time are refused with an error that says what and where, before the work
//! starts; and what is just within a limit still works.

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Coo, Tensor};
use finch::{Program, ScalarType, Value};

/// A thread with the default stack of spawned threads (2 MiB), as in a test harness, a
/// worker pool or a Python thread.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn scalar_program(expr: &str) -> String {
    format!("output s :: Scalar(0.0)\ns .= 0\ns[] = {expr}\n")
}

fn parse_error(text: &str) -> String {
    let text = text.to_string();
    on_small_stack(move || Program::parse(&text).unwrap_err().to_string())
}

/// Found by hand while adding the limits: 50,000 nested parentheses, unary minuses or
/// `if` blocks overflowed the parser's stack (the process aborted).
#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let parens = scalar_program(&format!("{}1.0{}", "(".repeat(50_000), ")".repeat(50_000)));
    let minuses = scalar_program(&format!("{}1.0", "-".repeat(50_000)));
    let chain = scalar_program(&vec!["1.0"; 50_000].join(" + "));
    let power = scalar_program(&vec!["1.0"; 50_000].join(" ^ "));
    for text in [parens, minuses, chain, power] {
        let e = parse_error(&text);
        assert!(
            e.contains("nested more than 1000 deep") && e.contains("3:"),
            "{e}"
        );
    }
    let ifs = format!(
        "output s :: Scalar(0.0)\ns .= 0\n{}s[] = 1.0\n{}",
        "if true\n".repeat(5_000),
        "end\n".repeat(5_000)
    );
    let e = parse_error(&ifs);
    assert!(
        e.contains("a statement nested more than 200 deep") && e.contains("at 203:1"),
        "{e}"
    );
}

/// Just within the limits, a program runs on every engine, on a small stack.
#[test]
fn the_deepest_accepted_program_compiles_and_runs_on_a_small_stack() {
    // A chain of 998 additions of a read (depth 1000; nothing to fold) inside 199 nested
    // `if`s.
    let sum = vec!["x[1]"; 999].join(" + ");
    let text = format!(
        "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\n{}s[] = {sum}\n{}",
        "if true\n".repeat(199),
        "end\n".repeat(199)
    );
    let engines: Vec<Engine> = if finch::backend::c::available() {
        vec![Engine::Interp, Engine::C]
    } else {
        vec![Engine::Interp]
    };
    on_small_stack(move || {
        let p = Program::parse(&text).unwrap();
        let x = finch::DenseArray::from_f64(&[2], &[0.5, 2.0]).unwrap();
        let mut b = Bindings::new();
        b.insert("x", x.clone());
        p.run_reference(&mut b, &RunOptions::default()).unwrap();
        assert_eq!(b.get("s").unwrap().data[0], finch::Value::F64(999.0 * 0.5));
        for engine in engines {
            let k = p.compile(engine).unwrap();
            let format = p.decl("x").unwrap().format.clone();
            let mut t = HashMap::new();
            t.insert(
                "x".to_string(),
                finch::tensor::Tensor::from_dense(&format, &x).unwrap(),
            );
            k.run(&mut t, &HashMap::new()).unwrap();
            let s = t["s"].to_dense().unwrap().data[0];
            assert_eq!(s, finch::Value::F64(999.0 * 0.5), "{engine:?}");
        }
    });
}

/// An error on a very long line shows the part of it around the column, not the line.
#[test]
fn an_error_on_a_long_line_shows_the_part_around_it() {
    let e = parse_error(&scalar_program(&vec!["1.0"; 50_000].join(" + ")));
    let shown = e.lines().nth(2).unwrap();
    assert!(shown.chars().count() < 100 && shown.contains('…'), "{e}");
    // The caret stands under the column.
    let caret = e.lines().nth(3).unwrap().chars().count();
    let plus = shown.chars().count() - shown.trim_start_matches(|c: char| c != '…').len();
    assert!(caret > plus, "{e}");
}

/// The budget every memory test of this binary runs under (the same in each, as tests
/// run in parallel in one process).
fn budget() {
    finch::tensor::memory::set_limit(Some(1 << 30));
}

fn is_budget_error(e: &finch::Error) -> bool {
    let t = e.to_string();
    t.contains("would take") && t.contains("more than the budget of 1.0 GiB set")
}

/// A huge mode holding one entry: a level whose storage grows with its size (Dense,
/// SparseByteMap) is refused before allocating, by the budget; the others store it.
#[test]
fn every_level_of_a_huge_mode_is_stored_or_refused_by_the_budget() {
    budget();
    let huge = 1usize << 40;
    for level in finch::formats::LevelKind::registry() {
        for (format, shape) in [
            (format!("{level}(Element(0.0))"), vec![huge]),
            (
                format!("Dense({level}(Element(0.0)))"),
                vec![1 << 20, 1 << 20],
            ),
            (
                format!("{level}(Dense(Element(0.0)))"),
                vec![1 << 30, 1 << 10],
            ),
        ] {
            let f = Format::parse(&format).unwrap();
            let mut coo = Coo::new(ScalarType::F64, &shape);
            coo.push(&vec![5; shape.len()], Value::F64(2.0)).unwrap();
            match Tensor::from_coo(&f, &coo) {
                Ok(t) => {
                    assert_eq!(t.get(&vec![5; shape.len()]).unwrap(), Value::F64(2.0));
                    assert!(
                        !format.starts_with("Dense(Element")
                            && !format.starts_with("SparseByteMap(Element"),
                        "{format}"
                    );
                }
                Err(e) => assert!(is_budget_error(&e), "{format} {shape:?}: {e}"),
            }
        }
    }
}

/// An output sized by inference from a huge sparse input: refused by the budget before
/// the kernel runs where its storage grows with the size, on every engine; stored where
/// it does not.
#[test]
fn outputs_sized_by_inference_are_checked_against_the_budget() {
    budget();
    let huge = 1usize << 40;
    let mut engines = vec![Engine::Interp];
    if finch::backend::c::available() {
        engines.push(Engine::C);
    }
    for level in finch::formats::LevelKind::registry() {
        let text = format!(
            "input x :: SparseList(Element(0.0))\noutput y :: {level}(Element(0.0))\n\
             y .= 0\nfor i = _\n  y[i] += x[i] * 2.0\nend\n"
        );
        let p = Program::parse(&text).unwrap();
        let x_format = p.decl("x").unwrap().format.clone();
        let mut coo = Coo::new(ScalarType::F64, &[huge]);
        coo.push(&[7], Value::F64(1.5)).unwrap();
        let x = Tensor::from_coo(&x_format, &coo).unwrap();
        for &engine in &engines {
            let k = match p.compile(engine) {
                Ok(k) => k,
                // Levels that cannot be written in this order are refused by name.
                Err(finch::Error::Unsupported(_)) => continue,
                Err(e) => panic!("{level}: {e}"),
            };
            let mut t = HashMap::new();
            t.insert("x".to_string(), x.clone());
            match k.run(&mut t, &HashMap::new()) {
                Ok(_) => {
                    let y = &t["y"];
                    assert_eq!(y.shape(), &[huge]);
                    assert_eq!(y.get(&[7]).unwrap(), Value::F64(3.0), "{level} {engine:?}");
                    assert!(
                        !matches!(level.as_str(), "Dense" | "SparseByteMap"),
                        "{level}"
                    );
                }
                Err(e) => assert!(is_budget_error(&e), "{level} {engine:?}: {e}"),
            }
        }
    }
}

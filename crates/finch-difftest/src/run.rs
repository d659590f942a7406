//! Running one case: the reference engine (plain, and with annihilation), then each asked
//! configuration of the compiled engines, whose outputs must equal the reference's, value
//! by value and stored entry by stored entry; and the classification of what happened.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use finch::engine::{CompileOptions, Engine};
use finch::formats::Format;
use finch::notation::{DeclKind, Stmt};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{DenseArray, Tensor};
use finch::{Program, Value};

use crate::case::Case;

/// Relative difference allowed between floats: run-length sums and products (`n * v`,
/// `v ^ n`) and reassociated C may round differently; faults differ by far more.
pub const TOLERANCE: f64 = 1e-9;

/// A compiled configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config {
    /// Generated C (else the kernel interpreter).
    pub c: bool,
    /// `--reassociate` (C only).
    pub reassociate: bool,
    /// `--compact`.
    pub compact: bool,
}

/// Every configuration: the interpreter and C, strict and reassociated, specialized and
/// compact (the interpreter ignores reassociation, so it has two).
pub const CONFIGS: [Config; 6] = [
    Config::new(false, false, false),
    Config::new(false, false, true),
    Config::new(true, false, false),
    Config::new(true, false, true),
    Config::new(true, true, false),
    Config::new(true, true, true),
];

impl Config {
    const fn new(c: bool, reassociate: bool, compact: bool) -> Config {
        Config {
            c,
            reassociate,
            compact,
        }
    }

    /// A short name: `interp`, `c-reassoc-compact`, ...
    pub fn name(&self) -> String {
        let mut n = if self.c { "c" } else { "interp" }.to_string();
        if self.reassociate {
            n.push_str("-reassoc");
        }
        if self.compact {
            n.push_str("-compact");
        }
        n
    }

    /// The configuration of a name.
    pub fn from_name(name: &str) -> Option<Config> {
        CONFIGS.iter().copied().find(|c| c.name() == name)
    }

    /// Its bit in a set of configurations.
    pub fn bit(&self) -> u8 {
        1 << CONFIGS.iter().position(|c| c == self).unwrap_or(0)
    }

    /// The configurations in a set.
    pub fn set(mask: u8) -> Vec<Config> {
        CONFIGS
            .iter()
            .copied()
            .filter(|c| mask & c.bit() != 0)
            .collect()
    }

    /// The `finch run` flags that select it.
    pub fn cli_flags(&self) -> String {
        let mut f = format!("--engine {}", if self.c { "c" } else { "interp" });
        if self.reassociate {
            f.push_str(" --reassociate");
        }
        if self.compact {
            f.push_str(" --compact");
        }
        f
    }
}

/// What happened to a case in one configuration, from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Same values and stored entries as the reference.
    Agree,
    /// The compiled engines refuse what the reference runs (`not supported yet`).
    Refused,
    /// The compiled engine raised an error the reference does not.
    Error,
    /// Different values or stored entries.
    Wrong,
    /// An error whose message starts with `internal`.
    Internal,
    /// A panic in the library.
    Panic,
    /// The worker process died (a signal).
    Crash,
    /// The worker passed the time limit.
    Hang,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 8] = [
        Kind::Agree,
        Kind::Refused,
        Kind::Error,
        Kind::Wrong,
        Kind::Internal,
        Kind::Panic,
        Kind::Crash,
        Kind::Hang,
    ];

    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Agree => "agree",
            Kind::Refused => "refused",
            Kind::Error => "error",
            Kind::Wrong => "wrong",
            Kind::Internal => "internal",
            Kind::Panic => "panic",
            Kind::Crash => "crash",
            Kind::Hang => "hang",
        }
    }

    /// The kind of a name.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Whether it is a fault of the compiled engines.
    pub fn is_fault(self) -> bool {
        self > Kind::Refused
    }
}

/// One configuration's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The configuration.
    pub config: Config,
    /// What happened.
    pub kind: Kind,
    /// The error, the difference, or the refusal.
    pub message: String,
}

/// The reference engine's results: plain, and with annihilation (`0 * NaN = 0`).
pub struct Reference {
    plain: Bindings,
    annihilated: Option<Bindings>,
}

/// The tensors whose final values count: outputs, and inputs the program updates.
pub fn compared_tensors(program: &Program) -> Vec<(String, Format)> {
    fn writes(s: &Stmt, out: &mut HashSet<String>) {
        match s {
            Stmt::Assign { lhs, .. } => {
                out.insert(lhs.tensor.clone());
            }
            Stmt::Loop { body, .. } | Stmt::Define { body, .. } => writes(body, out),
            Stmt::Sieve {
                then, otherwise, ..
            } => {
                writes(then, out);
                if let Some(o) = otherwise {
                    writes(o, out);
                }
            }
            Stmt::Block(v) => v.iter().for_each(|s| writes(s, out)),
            _ => {}
        }
    }
    let mut written = HashSet::new();
    writes(&program.ast().body, &mut written);
    program
        .decls()
        .iter()
        .filter(|d| {
            d.kind == DeclKind::Output || (d.kind == DeclKind::Input && written.contains(&d.name))
        })
        .map(|d| (d.name.clone(), d.format.clone()))
        .collect()
}

fn shapes(case: &Case) -> HashMap<String, Vec<usize>> {
    case.shapes
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Runs the reference engine; an error means the case is invalid.
pub fn run_reference(program: &Program, case: &Case) -> Result<Reference, String> {
    let run = |annihilate: bool| {
        let mut b = Bindings::new();
        for (name, a) in &case.inputs {
            b.insert(name.clone(), a.clone());
        }
        let opts = RunOptions {
            shapes: shapes(case),
            annihilate,
        };
        program.run_reference(&mut b, &opts).map(|_| b)
    };
    let plain = catch_unwind(AssertUnwindSafe(|| run(false)))
        .map_err(|p| format!("reference panicked: {}", panic_text(&p)))?
        .map_err(|e| e.to_string())?;
    let annihilated = catch_unwind(AssertUnwindSafe(|| run(true)))
        .ok()
        .and_then(Result::ok);
    Ok(Reference { plain, annihilated })
}

/// The text of a panic's payload.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// The compiled engine's error, classified.
fn classify_error(e: &finch::Error) -> (Kind, String) {
    let text = e.to_string();
    match e {
        finch::Error::Unsupported(_) => (Kind::Refused, text),
        _ if text.starts_with("internal") => (Kind::Internal, text),
        _ => (Kind::Error, text),
    }
}

/// Runs one configuration and compares it with the reference; `step` hears `run NAME`
/// once the kernel is compiled (compiling may take long, a kernel should not).
pub fn run_config(
    program: &Program,
    case: &Case,
    reference: &Reference,
    config: Config,
    step: &mut dyn FnMut(&str),
) -> Outcome {
    let result = catch_unwind(AssertUnwindSafe(|| {
        compile_and_compare(program, case, reference, config, step)
    }));
    let (kind, message) = match result {
        Ok(r) => r,
        Err(p) => (Kind::Panic, panic_text(&p)),
    };
    Outcome {
        config,
        kind,
        message,
    }
}

fn compile_and_compare(
    program: &Program,
    case: &Case,
    reference: &Reference,
    config: Config,
    step: &mut dyn FnMut(&str),
) -> (Kind, String) {
    let options = CompileOptions {
        reassociate: config.reassociate,
        compact: config.compact,
    };
    let engine = if config.c { Engine::C } else { Engine::Interp };
    let compiled = match program.compile_with(engine, &options) {
        Ok(c) => c,
        Err(e) => return classify_error(&e),
    };
    let mut tensors = HashMap::new();
    for (name, a) in &case.inputs {
        let Some(d) = program.decl(name) else {
            return (Kind::Error, format!("no declaration of the input `{name}`"));
        };
        match Tensor::from_dense(&d.format, a) {
            Ok(t) => {
                tensors.insert(name.clone(), t);
            }
            Err(e) => {
                return (
                    Kind::Error,
                    format!("the input `{name}` does not fit its format: {e}"),
                )
            }
        }
    }
    step(&format!("run {}", config.name()));
    if let Err(e) = compiled.run(&mut tensors, &shapes(case)) {
        let (kind, text) = classify_error(&e);
        // A result the declared format cannot hold is refused by name, as it should be:
        // the reference's, or one that takes the annihilated value at some elements and
        // the plain one at others (as a compiled engine may), where the two differ.
        let mixed =
            text.starts_with("cannot store the result") && annihilation_matters(program, reference);
        if kind == Kind::Error && (!reference_fits(program, reference) || mixed) {
            return (Kind::Refused, text);
        }
        return (kind, text);
    }
    let mut differences = Vec::new();
    for (name, format) in compared_tensors(program) {
        let (Some(got), Some(want)) = (tensors.get(&name), reference.plain.get(&name)) else {
            differences.push(format!("`{name}` is missing from the results"));
            continue;
        };
        let other = reference.annihilated.as_ref().and_then(|b| b.get(&name));
        if let Err(d) = compare(&name, &format, got, want, other) {
            differences.push(d);
        }
    }
    if differences.is_empty() {
        (Kind::Agree, String::new())
    } else {
        (Kind::Wrong, differences.join("\n"))
    }
}

/// Whether the reference's results fit their declared formats, with and without
/// annihilation (a compiled engine that annihilates `y[] * 0.0` may compute values a
/// SparsePoint output cannot hold where the plain reference's NaNs are its fill).
fn reference_fits(program: &Program, reference: &Reference) -> bool {
    let fits = |b: &Bindings| {
        compared_tensors(program).iter().all(|(name, format)| {
            b.get(name)
                .is_none_or(|a| Tensor::from_dense(format, a).is_ok())
        })
    };
    fits(&reference.plain) && reference.annihilated.as_ref().is_none_or(fits)
}

/// Whether annihilation changes some value the program computes: then a compiled engine,
/// which takes an annihilator as the result where its iteration skips the other operands
/// and computes elsewhere, may hold a mix of the two results that neither reference does.
fn annihilation_matters(program: &Program, reference: &Reference) -> bool {
    let Some(annihilated) = &reference.annihilated else {
        return false;
    };
    compared_tensors(program).iter().any(|(name, _)| {
        match (reference.plain.get(name), annihilated.get(name)) {
            (Some(p), Some(a)) => p.data.iter().zip(&a.data).any(|(x, y)| !close(x, y)),
            _ => false,
        }
    })
}

/// Equal values: the same (`NaN` equals `NaN`, `-0.0` equals `0.0`), or floats within
/// [`TOLERANCE`].
pub fn close(a: &Value, b: &Value) -> bool {
    if a.same(b) {
        return true;
    }
    match (a, b) {
        (Value::F64(x), Value::F64(y)) if x.is_finite() && y.is_finite() => {
            (x - y).abs() <= TOLERANCE * x.abs().max(y.abs()).max(1.0)
        }
        _ => false,
    }
}

/// Compares a compiled result with the reference's: each value equals the plain
/// reference's or the annihilating one's, and the stored entries are those of that
/// result stored in the declared format.
fn compare(
    name: &str,
    format: &Format,
    got: &Tensor,
    want: &DenseArray,
    annihilated: Option<&DenseArray>,
) -> Result<(), String> {
    let dense = got
        .to_dense()
        .map_err(|e| format!("`{name}`: the compiled result cannot be read: {e}"))?;
    if dense.shape != want.shape {
        return Err(format!(
            "`{name}`: shape {:?}, the reference's {:?}",
            dense.shape, want.shape
        ));
    }
    let mut expected = want.clone();
    let mut wrong = Vec::new();
    for (k, g) in dense.data.iter().enumerate() {
        if close(g, &want.data[k]) {
            continue;
        }
        match annihilated.map(|a| a.data[k]) {
            Some(a) if close(g, &a) => expected.data[k] = a,
            _ => wrong.push(k),
        }
    }
    if !wrong.is_empty() {
        let shown: Vec<String> = wrong
            .iter()
            .take(6)
            .map(|&k| {
                format!(
                    "{:?}: {} (reference {})",
                    position(&want.shape, k),
                    dense.data[k],
                    want.data[k]
                )
            })
            .collect();
        return Err(format!(
            "`{name}`: {} of {} values differ: {}",
            wrong.len(),
            want.data.len(),
            shown.join(", ")
        ));
    }
    let stored = Tensor::from_dense(format, &expected)
        .map_err(|e| format!("`{name}`: the reference's result does not fit {format}: {e}"))?;
    let (a, b) = (got.to_coo(), stored.to_coo());
    let same = a.coords == b.coords
        && a.vals.len() == b.vals.len()
        && a.vals.iter().zip(&b.vals).all(|(x, y)| close(x, y));
    if same {
        Ok(())
    } else {
        Err(format!(
            "`{name}`: stored entries differ: {} stored, the reference's result stores {}",
            a.vals.len(),
            b.vals.len()
        ))
    }
}

/// The 1-based coordinates of a column-major position.
fn position(shape: &[usize], mut k: usize) -> Vec<usize> {
    shape
        .iter()
        .map(|&n| {
            let i = k % n.max(1);
            k /= n.max(1);
            i + 1
        })
        .collect()
}

/// A refusal's category: its message with names, numbers and formats blanked, so that
/// refusals of one kind count together.
pub fn refusal_category(message: &str) -> String {
    let message = message
        .strip_prefix("not supported yet: ")
        .unwrap_or(message);
    let mut out = String::new();
    let mut in_tick = false;
    for ch in message.chars() {
        match ch {
            '`' => {
                if !in_tick {
                    out.push('_');
                }
                in_tick = !in_tick;
            }
            _ if in_tick => {}
            c if c.is_ascii_digit() => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            c => out.push(c),
        }
    }
    let words: Vec<String> = out.split_whitespace().map(blank_word).collect();
    let text = words.join(" ");
    let cut = text
        .find(" (this release")
        .or_else(|| text.find("; "))
        .unwrap_or(text.len());
    text[..cut].chars().take(110).collect()
}

/// A fault's key: the category of its message, cut before any detail in parentheses.
pub fn fault_key(message: &str) -> String {
    let cat = refusal_category(message.lines().next().unwrap_or(""));
    match cat.find(" (") {
        Some(k) if k >= 20 => cat[..k].to_string(),
        _ => cat,
    }
}

/// A word of a message with a format or a value in it blanked: `FORMAT`, `V`.
fn blank_word(w: &str) -> String {
    const LEVELS: [&str; 6] = [
        "Dense(", "Sparse", "RunList(", "Element(", "Pattern(", "Scalar(",
    ];
    let core = w.trim_start_matches('(');
    let value = w.trim_end_matches([',', ')', ':', ';', '.']);
    if core.contains('(') && LEVELS.iter().any(|l| core.starts_with(l)) {
        let opened = w.len() - core.len();
        let closed = w.chars().filter(|&c| c == ')').count();
        let extra = closed.saturating_sub(w.chars().filter(|&c| c == '(').count() - opened);
        return format!(
            "{}FORMAT{}",
            "(".repeat(opened),
            ")".repeat(extra.min(opened))
        ) + if w.ends_with(':') { ":" } else { "" };
    }
    let is_value = matches!(
        value.trim_start_matches('-'),
        "N" | "N.N" | "Inf" | "NaN" | "true" | "false"
    );
    if is_value {
        return w.replacen(value, "V", 1);
    }
    w.to_string()
}

/// The verdict on a case: its configurations' outcomes, or why the reference refused it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// The generation attempt that the reference ran (generated cases).
    pub attempt: u32,
    /// The reference's error, when every attempt was refused.
    pub invalid: Option<String>,
    /// One outcome per configuration run.
    pub outcomes: Vec<Outcome>,
}

impl Verdict {
    /// The worst outcome.
    pub fn worst(&self) -> Option<&Outcome> {
        self.outcomes.iter().max_by_key(|o| o.kind)
    }

    /// The configurations that failed with each fault kind.
    pub fn faults(&self) -> BTreeMap<Kind, Vec<Config>> {
        let mut m: BTreeMap<Kind, Vec<Config>> = BTreeMap::new();
        for o in self.outcomes.iter().filter(|o| o.kind.is_fault()) {
            m.entry(o.kind).or_default().push(o.config);
        }
        m
    }
}

/// Runs `case` in the given configurations in this process; `step` is told each step
/// before it starts (so a parent learns which one crashed or hung).
pub fn run_case(case: &Case, configs: &[Config], step: &mut dyn FnMut(&str)) -> Verdict {
    step("reference");
    let program = match Program::parse(&case.program) {
        Ok(p) => p,
        Err(e) => {
            return Verdict {
                invalid: Some(format!("parse: {e}")),
                ..Verdict::default()
            }
        }
    };
    let reference = match run_reference(&program, case) {
        Ok(r) => r,
        Err(e) => {
            return Verdict {
                invalid: Some(e),
                ..Verdict::default()
            }
        }
    };
    let outcomes = configs
        .iter()
        .map(|&c| {
            step(&c.name());
            run_config(&program, case, &reference, c, step)
        })
        .collect();
    Verdict {
        outcomes,
        ..Verdict::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_categories_blank_names() {
        for c in CONFIGS {
            assert_eq!(Config::from_name(&c.name()), Some(c));
            assert_eq!(Config::set(c.bit()), vec![c]);
        }
        assert_eq!(
            refusal_category(
                "declaring the sparse output `y` with -2.5, which is not its fill value NaN"
            ),
            "declaring the sparse output _ with V, which is not its fill value V"
        );
        assert_eq!(
            refusal_category("cannot store the result in `y` (SparsePoint(Dense(Element(0.0)))): SparsePoint stores at most one index"),
            "cannot store the result in _ (FORMAT): SparsePoint stores at most one index"
        );
        assert_eq!(
            refusal_category("not supported yet: the SparseBand level of `x3` (mode 2) does not support the gallop protocol; it supports walk"),
            "the SparseBand level of _ (mode V) does not support the gallop protocol"
        );
    }

    #[test]
    fn compare_tells_wrong_values_and_stored_entries_and_accepts_annihilation() {
        let format = Format::parse("SparseList(Element(0.0))").unwrap();
        let arr = |v: &[f64]| DenseArray::from_f64(&[v.len()], v).unwrap();
        let got = Tensor::from_dense(&format, &arr(&[1.0, 0.0, 3.0])).unwrap();
        assert!(compare("y", &format, &got, &arr(&[1.0, 0.0, 3.0]), None).is_ok());
        let wrong = compare("y", &format, &got, &arr(&[1.0, 2.0, 3.0]), None).unwrap_err();
        assert!(wrong.contains("1 of 3 values differ"), "{wrong}");
        // Annihilated: the reference's NaN where the compiled engine took 0 * NaN as 0.
        let want = arr(&[1.0, f64::NAN, 3.0]);
        assert!(compare("y", &format, &got, &want, None).is_err());
        assert!(compare("y", &format, &got, &want, Some(&arr(&[1.0, 0.0, 3.0]))).is_ok());
        // The same values with an explicitly stored fill: the stored entries differ.
        let coo = {
            let mut c = finch::tensor::Coo::new(finch::ScalarType::F64, &[3]);
            for (k, v) in [(0, 1.0), (1, 0.0), (2, 3.0)] {
                c.push(&[k], Value::F64(v)).unwrap();
            }
            c
        };
        let explicit = Tensor::from_coo(&format, &coo).unwrap();
        let stored = compare("y", &format, &explicit, &arr(&[1.0, 0.0, 3.0]), None).unwrap_err();
        assert!(stored.contains("stored entries"), "{stored}");
    }

    #[test]
    fn an_agreeing_program_agrees_and_fill_annihilation_is_no_fault() {
        let text = "input x :: SparseList(Element(0.0))\ninput z :: Dense(Element(NaN))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] * z[i]\nend\n";
        let case = Case {
            program: text.into(),
            inputs: vec![
                (
                    "x".into(),
                    DenseArray::from_f64(&[3], &[0.0, 2.0, 0.0]).unwrap(),
                ),
                (
                    "z".into(),
                    DenseArray::from_data(
                        finch::ScalarType::F64,
                        &[3],
                        vec![Value::F64(f64::NAN), Value::F64(1.0), Value::F64(f64::NAN)],
                        Value::F64(f64::NAN),
                    )
                    .unwrap(),
                ),
            ],
            shapes: BTreeMap::new(),
        };
        let v = run_case(&case, &[Config::new(false, false, false)], &mut |_| {});
        assert_eq!(v.invalid, None);
        assert_eq!(v.outcomes[0].kind, Kind::Agree, "{:?}", v.outcomes);
    }

    /// Seed 109, case 1752, minimised: the interpreter skips `w7[1] *= x5[1] * -Inf`
    /// where `x5` holds its fill 0 (annihilation: `w7[1]` stays 0, `y8[1, i]` is 1.0) and
    /// computes `w7[2] *= 1.0 * -Inf` (NaN), so each column is `[1.0, NaN]`: each value one
    /// the tester accepts, but two runs a SparseInterval cannot hold, where the plain
    /// reference's `[NaN, NaN]` and the annihilating one's `[1.0, 1.0]` are one run each.
    /// The compiled engine's refusal to store that mix is a refusal, not a fault.
    #[test]
    fn a_mix_of_annihilated_and_plain_values_refused_by_the_format_is_a_refusal() {
        let text = "input x5 :: SparseList(Element(0.0))\ninput I9 :: Dense(Element(0))\noutput y8 :: Dense(SparseInterval(Element(0.0)))\ntemp w7 :: SparseList(Element(0.0))\n\ny8 .= 0.0\nfor i = _\n  w7 .= 0.0\n  for j = _\n    w7[j] *= x5[j] * coalesce(x5[~I9[j]], -Inf)\n  end\n  for j = _\n    y8[j, i] = max(w7[j], 1.0)\n  end\nend\n";
        let case = Case {
            program: text.into(),
            inputs: vec![
                (
                    "x5".into(),
                    DenseArray::from_f64(&[2], &[0.0, 1.0]).unwrap(),
                ),
                (
                    "I9".into(),
                    DenseArray::from_data(
                        finch::ScalarType::I64,
                        &[2],
                        vec![Value::I64(0), Value::I64(0)],
                        Value::I64(0),
                    )
                    .unwrap(),
                ),
            ],
            shapes: BTreeMap::from([("y8".to_string(), vec![2, 4])]),
        };
        let v = run_case(&case, &[Config::new(false, false, false)], &mut |_| {});
        assert_eq!(v.invalid, None);
        let outcome = &v.outcomes[0];
        assert_eq!(outcome.kind, Kind::Refused, "{:?}", v.outcomes);
        assert!(
            outcome.message.contains("SparseInterval"),
            "{}",
            outcome.message
        );
    }
}

//! Structured levels against their SparseList counterpart (issue #4), in one run on the
//! same data: SpMV over SparseBand (banded and upper-triangular matrices), SparsePoint
//! (a permutation, with Pattern leaves), SparseBlockList (block-structured shared-data
//! matrices), Pattern leaves on a graph; and sums, dot products and element-wise products
//! over run-length data (RunList, SparseRunList) against dense vectors, doubling the length
//! at a fixed number of runs to show the cost follows the runs.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use finch::algebra::{ScalarType, Value};
use finch::engine::{CompiledProgram, Engine};
use finch::formats::{Format, LevelStorage, RunListStorage, SparseRunListStorage};
use finch::tensor::{Buffer, Coo, Tensor, TensorStorage};
use finch::Program;

/// Row-major SpMV: `AT` stores the transposed matrix (its root runs over the rows of A).
const SPMV: &str = "input AT :: {F}\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += AT[j, i] * x[j]\nend\n";
const SUM: &str =
    "input x :: {F}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i]\nend\n";
const DOT: &str = "input x :: {F}\ninput z :: {F}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] * z[i]\nend\n";
/// Element-wise product into a vector of the inputs' format: a run-length output is
/// written once per run of the product, not once per position.
const MUL: &str = "input x :: {F}\ninput z :: {F}\noutput w :: {F}\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n";

/// Minimum kernel time of `program` (with `{F}` replaced by `format`) over `repeat` runs.
fn kernel_time(
    template: &str,
    format: &str,
    tensors: &mut HashMap<String, Tensor>,
    repeat: usize,
) -> Result<Duration> {
    let program = Program::parse(&template.replace("{F}", format))?;
    let compiled = program.compile_with(Engine::C, &Default::default())?;
    let mut best = Duration::MAX;
    for _ in 0..repeat.max(1) {
        best = best.min(compiled.run(tensors, &HashMap::new())?.kernel_time);
    }
    Ok(best)
}

/// The sum of `y` (to check that both formats computed the same thing).
fn checksum(t: &Tensor) -> f64 {
    t.to_coo().vals.iter().filter_map(|v| v.as_f64()).sum()
}

/// `AT` (shape `[n, m]`) holding `entries` `(i, j, value)` of an `m × n` matrix.
fn transposed(format: &str, m: usize, n: usize, entries: &[(usize, usize, f64)]) -> Result<Tensor> {
    let pattern = format.contains("Pattern()");
    let ty = if pattern {
        ScalarType::Bool
    } else {
        ScalarType::F64
    };
    let coo = Coo {
        ty,
        shape: vec![n, m],
        coords: vec![
            entries.iter().map(|e| e.1).collect(),
            entries.iter().map(|e| e.0).collect(),
        ],
        vals: entries
            .iter()
            .map(|e| {
                if pattern {
                    Value::Bool(true)
                } else {
                    Value::F64(e.2)
                }
            })
            .collect(),
    };
    Ok(Tensor::from_coo(&Format::parse(format)?, &coo)?)
}

/// The turns SpMV variants take in one pass (see [`SpmvCase::pass`]).
const TURNS: usize = 10;

/// Passes over every SpMV matrix: this VM's speed drifts over seconds (up to 1.5x on one
/// kernel), so each speed-up is the median of the passes' ratios, with their range, and the
/// passes of one matrix are spread over the whole run.
const PASSES: usize = 7;

/// One SpMV comparison, compiled and built: `structured` against `baseline` on the same
/// matrix, strict and reassociated, with every pass's minimum time of each variant.
struct SpmvCase {
    name: String,
    shape: (usize, usize),
    nnz: usize,
    formats: (&'static str, &'static str),
    /// Runs of each variant in a turn.
    runs: usize,
    /// Structured strict, counterpart strict, structured reassociated, counterpart
    /// reassociated.
    variants: Vec<(&'static str, CompiledProgram, HashMap<String, Tensor>)>,
    passes: Vec<[Duration; 4]>,
}

impl SpmvCase {
    fn new(
        name: &str,
        m: usize,
        n: usize,
        entries: &[(usize, usize, f64)],
        (structured, baseline): (&'static str, &'static str),
        repeat: usize,
    ) -> Result<SpmvCase> {
        // Each variant runs over at least 20 million entries a pass (up to 100x the runs),
        // so that the minimum of a kernel of microseconds is neither timer nor scheduling
        // noise; at least three runs a turn, as the first may find its data evicted by the
        // variant before (a band of 201 takes 16 MB, its CSR 32 MB).
        let repeat = repeat.max((20_000_000 / entries.len().max(1)).min(repeat * 100));
        let x: Vec<f64> = (0..n).map(|j| ((j % 7) as f64) * 0.25 + 1.0).collect();
        let xt = Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))")?,
            &finch::DenseArray::from_f64(&[n], &x)?,
        )?;
        let mut variants = Vec::new();
        for reassociate in [false, true] {
            for f in [structured, baseline] {
                let program = Program::parse(&SPMV.replace("{F}", f))?;
                let compiled = program
                    .compile_with(
                        Engine::C,
                        &finch::engine::CompileOptions {
                            reassociate,
                            ..Default::default()
                        },
                    )
                    .with_context(|| format!("{name}: {f}"))?;
                let tensors = HashMap::from([
                    ("AT".to_string(), transposed(f, m, n, entries)?),
                    ("x".to_string(), xt.clone()),
                ]);
                variants.push((f, compiled, tensors));
            }
        }
        Ok(SpmvCase {
            name: name.to_string(),
            shape: (m, n),
            nnz: entries.len(),
            formats: (structured, baseline),
            runs: repeat.div_ceil(TURNS).max(3),
            variants,
            passes: Vec::new(),
        })
    }

    /// One pass: the four variants run in turns, a share of the runs each per turn, so that
    /// their minima come from the same stretches of time.
    fn pass(&mut self) -> Result<()> {
        let mut best = [Duration::MAX; 4];
        for _ in 0..TURNS {
            for ((f, compiled, tensors), best) in self.variants.iter_mut().zip(&mut best) {
                for _ in 0..self.runs {
                    let run = compiled
                        .run(tensors, &HashMap::new())
                        .with_context(|| format!("{}: {f}", self.name))?;
                    *best = (*best).min(run.kernel_time);
                }
            }
        }
        let sums: Vec<f64> = self
            .variants
            .iter()
            .map(|(_, _, t)| checksum(&t["y"]))
            .collect();
        if let Some(s) = sums
            .iter()
            .find(|s| (**s - sums[1]).abs() > 1e-6 * sums[1].abs().max(1.0))
        {
            anyhow::bail!(
                "{}: {} and {} disagree ({s} vs {})",
                self.name,
                self.formats.0,
                self.formats.1,
                sums[1]
            );
        }
        self.passes.push(best);
        Ok(())
    }

    /// The table row: each variant's minimum over all passes, and the speed-ups' median
    /// over the passes with their range.
    fn row(&self) -> String {
        let ms = |v: usize| {
            let best = self
                .passes
                .iter()
                .map(|p| p[v])
                .min()
                .unwrap_or(Duration::MAX);
            best.as_secs_f64() * 1e3
        };
        let speed_up = |structured: usize| {
            median_and_range(
                self.passes
                    .iter()
                    .map(|p| p[structured + 1].as_secs_f64() / p[structured].as_secs_f64())
                    .collect(),
            )
        };
        let (structured, baseline) = self.formats;
        format!(
            "| {} | {}x{} | {} | `{structured}` | {:.3} | `{baseline}` | {:.3} | {} | {:.3} | {:.3} | {} |\n",
            self.name,
            self.shape.0,
            self.shape.1,
            self.nnz,
            ms(0),
            ms(1),
            speed_up(0),
            ms(2),
            ms(3),
            speed_up(2)
        )
    }
}

/// `median (lowest-highest)` of `ratios` (the upper median of an even count), or `-`.
fn median_and_range(mut ratios: Vec<f64>) -> String {
    ratios.sort_by(f64::total_cmp);
    match (ratios.first(), ratios.last()) {
        (Some(lo), Some(hi)) => format!("{:.2} ({lo:.2}-{hi:.2})", ratios[ratios.len() / 2]),
        _ => "-".to_string(),
    }
}

fn banded(n: usize, w: usize) -> Vec<(usize, usize, f64)> {
    let mut e = Vec::new();
    for i in 0..n {
        for j in i.saturating_sub(w)..=(i + w).min(n - 1) {
            e.push((i, j, ((i + 2 * j) % 11) as f64 - 5.0));
        }
    }
    e
}

/// `n × n`, each row with `blocks` runs of consecutive columns, of lengths in
/// `lo..=hi`, at scattered (deterministic) starts that never overlap.
fn long_blocks(n: usize, blocks: usize, lo: usize, hi: usize) -> Vec<(usize, usize, f64)> {
    let mut e = Vec::new();
    let span = n / blocks;
    for i in 0..n {
        for b in 0..blocks {
            let h = (i * 2_654_435_761 + b * 40_503) % 1_000_003;
            let len = lo + h % (hi - lo + 1);
            let start = b * span + (h / 7) % span.saturating_sub(len).max(1);
            for j in start..(start + len).min(n) {
                e.push((i, j, ((i + 3 * j) % 17) as f64 - 8.0));
            }
        }
    }
    e
}

/// The mean length of runs of consecutive column indices within the rows of `entries`.
fn mean_block(entries: &[(usize, usize, f64)]) -> f64 {
    let mut sorted: Vec<(usize, usize)> = entries.iter().map(|e| (e.0, e.1)).collect();
    sorted.sort_unstable();
    let blocks = sorted
        .iter()
        .enumerate()
        .filter(|&(k, &(i, j))| k == 0 || sorted[k - 1] != (i, j.wrapping_sub(1)))
        .count();
    sorted.len() as f64 / blocks.max(1) as f64
}

/// A matrix as `(rows, cols, entries)`.
type Entries = (usize, usize, Vec<(usize, usize, f64)>);

fn from_mtx(path: &Path) -> Result<Entries> {
    let mm = finch::io::read_matrix_market_file(path)?;
    let coo = mm.coo.convert_to(ScalarType::F64)?;
    let entries = (0..coo.len())
        .map(|k| {
            (
                coo.coords[0][k],
                coo.coords[1][k],
                coo.vals[k].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    Ok((coo.shape[0], coo.shape[1], entries))
}

/// The structure of a matrix file of any field (complex ones included), with generated
/// non-zero real values.
fn structure_from_mtx(path: &Path) -> Result<Entries> {
    let coo = finch::io::read_matrix_market_structure_file(path)?.coo;
    let entries = (0..coo.len())
        .map(|k| {
            let (i, j) = (coo.coords[0][k], coo.coords[1][k]);
            (i, j, 1.0 + ((i * 3 + j) % 13) as f64 * 0.25)
        })
        .collect();
    Ok((coo.shape[0], coo.shape[1], entries))
}

/// A vector of length `len` with `runs` runs alternating zero and non-zero values, as
/// RunList, SparseRunList and Dense tensors. With `salt` 1 the values alternate the other
/// way and every boundary moves half a run to the right, so that the product of the two
/// vectors has non-zero runs (half a run long) where each has its own.
fn run_vectors(len: usize, runs: usize, salt: usize) -> Result<[(String, Tensor); 3]> {
    let width = len / runs;
    let shift = salt * width / 2;
    let mut right = Vec::with_capacity(runs);
    let mut vals = Vec::with_capacity(runs);
    for r in 0..runs {
        right.push(if r + 1 == runs {
            len - 1
        } else {
            (r + 1) * width - 1 + shift
        });
        vals.push(if (r + salt).is_multiple_of(2) {
            0.0
        } else {
            ((r * 7 + salt) % 5) as f64 + 1.0
        });
    }
    let leaf = |v: Vec<f64>| {
        Box::new(LevelStorage::Element(finch::formats::ElementStorage {
            fill: Value::F64(0.0),
            val: Buffer::F64(v),
        }))
    };
    let rl = Tensor::from_parts(
        Format::parse("RunList(Element(0.0))")?,
        vec![len],
        TensorStorage::Levels(LevelStorage::RunList(RunListStorage {
            shape: len,
            ptr: vec![0, runs],
            right: right.clone(),
            child: leaf(vals.clone()),
        })),
    )?;
    let (mut left, mut sright, mut svals) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        if vals[r] != 0.0 {
            left.push(if r == 0 { 0 } else { right[r - 1] + 1 });
            sright.push(right[r]);
            svals.push(vals[r]);
        }
    }
    let srl = Tensor::from_parts(
        Format::parse("SparseRunList(Element(0.0))")?,
        vec![len],
        TensorStorage::Levels(LevelStorage::SparseRunList(SparseRunListStorage {
            shape: len,
            ptr: vec![0, left.len()],
            left,
            right: sright,
            child: leaf(svals),
        })),
    )?;
    let mut dense = Vec::with_capacity(len);
    for r in 0..runs {
        let start = if r == 0 { 0 } else { right[r - 1] + 1 };
        dense.extend(std::iter::repeat_n(vals[r], right[r] + 1 - start));
    }
    let d = Tensor::from_dense(
        &Format::parse("Dense(Element(0.0))")?,
        &finch::DenseArray::from_f64(&[len], &dense)?,
    )?;
    Ok([
        ("RunList(Element(0.0))".into(), rl),
        ("SparseRunList(Element(0.0))".into(), srl),
        ("Dense(Element(0.0))".into(), d),
    ])
}

/// Runs the benchmark and returns the Markdown report.
pub fn run(repeat: usize, data: &Path, quick: bool) -> Result<String> {
    let mut out = String::from("# Structured levels\n\n");
    out.push_str(&format!("Machine: {}\n\n", crate::machine_line()));
    let passes = if quick { 2 } else { PASSES };
    out.push_str(&format!(
        "Milliseconds, compiled C (`cc -O3`, trusted). SpMV is row-major, `y[i] += AT[j, i] * \
         x[j]`, with `AT` in the structured format and in its SparseList counterpart, both \
         checked to compute the same `y`; speed-up = SparseList time / structured time (> 1: \
         the structured level is faster). The reassociated columns compile both programs with \
         `CompileOptions {{ reassociate: true }}`: the dense runs of a band or block then run \
         as AVX-512 or AVX2 vector code (whichever the CPU has), and SparseList walks use \
         AVX-512 gathers where the CPU has them (with AVX2 only, they stay scalar); strict \
         kernels add each row's terms in order, as the reference does.\n\n\
         How SpMV is timed: this VM's speed drifts over seconds, so the run makes {passes} \
         passes over all the matrices, and in each pass the four kernels of a matrix take \
         {TURNS} turns, each kernel running in a pass as many times as add up to 20 million \
         entries (at least {repeat}, at most 100x as many) and at least three times a turn, \
         so that the four minima of a pass come from the same stretches of time. A speed-up is the median of the passes' ratios of \
         minima, with the lowest and highest in brackets; a time is the minimum over all \
         passes. Run-length kernels: minimum of {repeat} runs.\n\n"
    ));
    out.push_str("## SpMV\n\n| matrix | shape | nnz | structured | ms | counterpart | ms | speed-up | structured, reassociated ms | counterpart, reassociated ms | speed-up reassociated |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut cases = Vec::new();
    let band = (
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
    );
    let n = if quick { 2_000 } else { 10_000 };
    for w in [5, 30, 100] {
        let e = banded(n, w);
        cases.push(SpmvCase::new(
            &format!("banded, half-bandwidth {w}"),
            n,
            n,
            &e,
            band,
            repeat,
        )?);
    }
    let t = if quick { 256 } else { 1024 };
    let upper: Vec<_> = (0..t)
        .flat_map(|i| (i..t).map(move |j| (i, j, ((i * 3 + j) % 13) as f64 - 6.0)))
        .collect();
    cases.push(SpmvCase::new("upper triangle", t, t, &upper, band, repeat)?);
    let p = if quick { 50_000 } else { 1_000_000 };
    let perm: Vec<_> = (0..p).map(|i| (i, p - 1 - i, 1.0)).collect();
    cases.push(SpmvCase::new(
        "reverse permutation (Pattern)",
        p,
        p,
        &perm,
        (
            "Dense(SparsePoint(Pattern()))",
            "Dense(SparseList(Pattern()))",
        ),
        repeat,
    )?);
    // The structure SparseBlockList is made for: rows of a few long dense blocks.
    let rows = if quick { 2_000 } else { 10_000 };
    let e = long_blocks(rows, 3, 16, 48);
    cases.push(SpmvCase::new(
        &format!(
            "synthetic, 3 blocks of 16-48 per row ({:.1} on average)",
            mean_block(&e)
        ),
        rows,
        rows,
        &e,
        (
            "Dense(SparseBlockList(Element(0.0)))",
            "Dense(SparseList(Element(0.0)))",
        ),
        repeat,
    )?);
    // Real block structure: qc324's long blocks (its complex values replaced by generated
    // reals), then FEM and economic matrices with short blocks.
    for (name, values) in [
        ("qc324", "structure, generated values; "),
        ("bcsstk16", ""),
        ("bcsstk38", ""),
        ("mbeacxc", ""),
    ] {
        let path = data.join("matrices").join(format!("{name}.mtx"));
        if !path.exists() {
            eprintln!("note: {} missing", path.display());
            continue;
        }
        let (m, n, e) = if values.is_empty() {
            from_mtx(&path)?
        } else {
            structure_from_mtx(&path)?
        };
        cases.push(SpmvCase::new(
            &format!(
                "{name} ({values}blocks of {:.1} on average)",
                mean_block(&e)
            ),
            m,
            n,
            &e,
            (
                "Dense(SparseBlockList(Element(0.0)))",
                "Dense(SparseList(Element(0.0)))",
            ),
            repeat,
        )?);
    }
    // Graphs: ca-AstroPh is the paper's (Fig. 20: Pattern 1.17x, Element 1.04x over TACO).
    for (name, note) in [
        ("soc-Slashdot0902", "graph, Pattern leaves"),
        ("ca-AstroPh_cc1", "the paper's graph, Pattern leaves"),
    ] {
        let graph = data.join("matrices").join(format!("{name}.mtx"));
        if !graph.exists() || quick {
            continue;
        }
        let (m, n, mut e) = from_mtx(&graph)?;
        // Unit weights, so the Pattern and Element results agree.
        e.iter_mut().for_each(|x| x.2 = 1.0);
        cases.push(SpmvCase::new(
            &format!("{name} ({note})"),
            m,
            n,
            &e,
            (
                "Dense(SparseList(Pattern()))",
                "Dense(SparseList(Element(0.0)))",
            ),
            repeat,
        )?);
    }

    for _ in 0..passes {
        for case in &mut cases {
            case.pass()?;
        }
    }
    for case in &cases {
        out.push_str(&case.row());
    }

    out.push_str(include_str!("structure_notes.md"));
    out.push_str("\n## Run-length data\n\nVectors of `runs` runs alternating 0 and a non-zero value; `sum` is `s[] += x[i]`, `dot` is `s[] += x[i] * z[i]` of two such vectors, the second's values alternating the other way and its boundaries half a run to the right (their product has a non-zero run, half a run long, in every second run), `mul` is `w[i] = x[i] * z[i]` into a vector of the inputs' format (its check: the sum of `w`). Dense = `Dense(Element(0.0))` on the same values.\n\n| length | runs | kernel | RunList ms | SparseRunList ms | Dense ms | Dense / RunList | Dense / SparseRunList |\n|---|---|---|---|---|---|---|---|\n");
    let runs = 1_000;
    let lengths: &[usize] = if quick {
        &[100_000, 200_000]
    } else {
        &[2_000_000, 4_000_000, 8_000_000]
    };
    for &len in lengths {
        let xs = run_vectors(len, runs, 0)?;
        let zs = run_vectors(len, runs, 1)?;
        for (kernel, template) in [("sum", SUM), ("dot", DOT), ("mul", MUL)] {
            let mut times = Vec::new();
            let mut sums = Vec::new();
            for ((f, x), (_, z)) in xs.iter().zip(zs.iter()) {
                let mut t =
                    HashMap::from([("x".to_string(), x.clone()), ("z".to_string(), z.clone())]);
                times.push(kernel_time(template, f, &mut t, repeat)?);
                sums.push(match t.get("w") {
                    Some(w) => checksum(w),
                    None => t["s"].get(&[])?.as_f64().unwrap_or(f64::NAN),
                });
            }
            if sums
                .iter()
                .any(|s| (s - sums[2]).abs() > 1e-6 * sums[2].abs().max(1.0))
            {
                anyhow::bail!("run-length {kernel} disagrees: {sums:?}");
            }
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            out.push_str(&format!(
                "| {len} | {runs} | {kernel} | {:.4} | {:.4} | {:.3} | {:.0} | {:.0} |\n",
                ms(times[0]),
                ms(times[1]),
                ms(times[2]),
                times[2].as_secs_f64() / times[0].as_secs_f64(),
                times[2].as_secs_f64() / times[1].as_secs_f64()
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &Tensor) -> Vec<f64> {
        let dense = t.to_dense().unwrap();
        dense.data.iter().map(|v| v.as_f64().unwrap()).collect()
    }

    #[test]
    fn speed_ups_are_the_median_with_the_range() {
        assert_eq!(median_and_range(vec![1.9, 1.2, 1.5]), "1.50 (1.20-1.90)");
        assert_eq!(median_and_range(vec![2.0, 1.0]), "2.00 (1.00-2.00)");
        assert_eq!(median_and_range(vec![1.234]), "1.23 (1.23-1.23)");
        assert_eq!(median_and_range(Vec::new()), "-");
    }

    /// The three formats hold the same values, and the second vector's runs overlap the
    /// first's so that the dot product is not zero (with boundaries in common it was).
    #[test]
    fn run_vectors_overlap_by_half_a_run() {
        let (xs, zs) = (
            run_vectors(40, 4, 0).unwrap(),
            run_vectors(40, 4, 1).unwrap(),
        );
        for vs in [&xs, &zs] {
            let dense = values(&vs[2].1);
            assert_eq!(values(&vs[0].1), dense);
            assert_eq!(values(&vs[1].1), dense);
        }
        let (x, z) = (values(&xs[2].1), values(&zs[2].1));
        // x: 0 on 1-10, 3 on 11-20, 0 on 21-30, 2 on 31-40; z: 2 on 1-15, 0 on 16-25,
        // 1 on 26-35, 0 on 36-40.
        let expect_x: Vec<f64> = [0.0, 3.0, 0.0, 2.0].iter().flat_map(|&v| [v; 10]).collect();
        assert_eq!(x, expect_x);
        let expect_z: Vec<f64> = [(2.0, 15), (0.0, 10), (1.0, 10), (0.0, 5)]
            .iter()
            .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
            .collect();
        assert_eq!(z, expect_z);
        let dot: f64 = x.iter().zip(&z).map(|(a, b)| a * b).sum();
        assert_eq!(dot, 5.0 * 6.0 + 5.0 * 2.0);
    }
}

//! Binary erosion (Finch paper Fig. 26) on real images, against OpenCV in the same run.
//!
//! The programs are the examples themselves: `examples/fig26_erosion.fin` over
//! `Dense(SparseRunList(Element(false)))` images (and the same text over `RunList`),
//! `examples/fig26_erosion_dense.fin` over `Dense(Dense(Element(false)))` and
//! `examples/fig26_erosion_bitwise.fin` over 64-pixel words. Each erodes with a 3x3
//! square, padding with `true` (a pixel outside the image does not erode its neighbours),
//! which is OpenCV's `erode` with a 3x3 rectangle and its default border. The images are
//! the shared data's (`images/`): MNIST digits, Omniglot characters, the textbook masks of
//! the Finch benchmarks (`finch_masks`, 1-bit PNG) and those masks magnified 4x (nearest
//! neighbour), as in the paper. OpenCV runs in `bench/.venv` (`bench/morphology_baseline.py`,
//! `bench/run.sh morphology` installs it) on the same pixels; every Finch result's count of
//! foreground pixels is checked against OpenCV's (and against each other's without it).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use finch::algebra::{ScalarType, Value};
use finch::engine::{CompileOptions, CompiledProgram, Engine};
use finch::formats::Format;
use finch::tensor::Tensor;
use finch::{DenseArray, Program};

const RUN_LENGTH: &str = include_str!("../../../examples/fig26_erosion.fin");
const DENSE: &str = include_str!("../../../examples/fig26_erosion_dense.fin");
const BITWISE: &str = include_str!("../../../examples/fig26_erosion_bitwise.fin");

/// A binary image, `px[y * w + x]` (row-major, `x` fast as in the programs' `img[x, y]`).
pub(crate) struct Image {
    name: String,
    w: usize,
    h: usize,
    px: Vec<bool>,
}

impl Image {
    fn foreground(&self) -> usize {
        self.px.iter().filter(|&&p| p).count()
    }

    /// Each pixel repeated `k` times along both axes.
    fn magnified(&self, k: usize) -> Image {
        let (w, h) = (self.w * k, self.h * k);
        let px = (0..w * h)
            .map(|p| self.px[(p / w / k) * self.w + (p % w) / k])
            .collect();
        Image {
            name: format!("{} x{k}", self.name),
            w,
            h,
            px,
        }
    }
}

/// A 1-bit or 8-bit grayscale PNG; a pixel is foreground where it is not 0.
fn load_png(path: &Path) -> Result<Image> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    // Expand 1-bit samples to bytes.
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder
        .read_info()
        .with_context(|| format!("{}", path.display()))?;
    let size = reader
        .output_buffer_size()
        .with_context(|| format!("{}: image too large", path.display()))?;
    let mut buf = vec![0u8; size];
    let info = reader
        .next_frame(&mut buf)
        .with_context(|| format!("{}", path.display()))?;
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = info.color_type.samples();
    let bytes_per_sample = match info.bit_depth {
        png::BitDepth::Sixteen => 2,
        _ => 1,
    };
    let step = channels * bytes_per_sample;
    let mut px = Vec::with_capacity(w * h);
    for y in 0..h {
        let row = &buf[y * info.line_size..];
        for x in 0..w {
            px.push(row[x * step] != 0);
        }
    }
    let name = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    Ok(Image { name, w, h, px })
}

/// An `.npy` file (format 1.0 or 2.0) of unsigned bytes: its shape and data.
fn load_npy_u8(path: &Path) -> Result<(Vec<usize>, Vec<u8>)> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("{}", path.display()))?;
    ensure!(
        bytes.len() > 10 && bytes.starts_with(b"\x93NUMPY"),
        "{}: not an .npy file",
        path.display()
    );
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let header = std::str::from_utf8(bytes.get(start..start + header_len).unwrap_or_default())
        .with_context(|| format!("{}: header", path.display()))?;
    ensure!(
        header.contains("'|u1'") && header.contains("'fortran_order': False"),
        "{}: expected C-ordered unsigned bytes, header {header}",
        path.display()
    );
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .with_context(|| format!("{}: no shape in {header}", path.display()))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: shape {shape_text}", path.display()))?;
    let data = bytes[start + header_len..].to_vec();
    ensure!(
        data.len() == shape.iter().product::<usize>(),
        "{}: {} bytes of data for shape {shape:?}",
        path.display(),
        data.len()
    );
    Ok((shape, data))
}

/// `count` images of a stack `(n, h, w)`, evenly spaced through it, thresholded at `> cut`.
fn stack(path: &Path, label: &str, count: usize, cut: u8) -> Result<Vec<Image>> {
    let (shape, data) = load_npy_u8(path)?;
    ensure!(shape.len() == 3, "{}: expected (n, h, w)", path.display());
    let (n, h, w) = (shape[0], shape[1], shape[2]);
    Ok((0..count.min(n))
        .map(|k| {
            let i = k * n / count.min(n);
            Image {
                name: format!("{label} {i}"),
                w,
                h,
                px: data[i * h * w..(i + 1) * h * w]
                    .iter()
                    .map(|&v| v > cut)
                    .collect(),
            }
        })
        .collect())
}

/// The image sets: (set name, images).
fn image_sets(data: &Path, quick: bool) -> Result<Vec<(String, Vec<Image>)>> {
    let images = data.join("images");
    ensure!(
        images.is_dir(),
        "{} not found: set FINCH_DATA_DIR to the shared data folder",
        images.display()
    );
    let count = if quick { 10 } else { 100 };
    let mut masks = Vec::new();
    for dir in ["masks", "dip3e_masks"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(images.join("finch_masks").join(dir))
            .with_context(|| format!("{}", images.join("finch_masks").display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "png"))
            .collect();
        paths.sort();
        for p in paths {
            masks.push(load_png(&p)?);
        }
    }
    if quick {
        masks.truncate(8);
    }
    let magnified = masks
        .iter()
        .filter(|m| m.w * m.h <= 1_000_000)
        .take(if quick { 2 } else { 20 })
        .map(|m| m.magnified(4))
        .collect();
    Ok(vec![
        (
            format!("MNIST ({count} digits, 28x28, > 127)"),
            stack(&images.join("mnist/mnist_10k_u8.npy"), "mnist", count, 127)?,
        ),
        (
            format!("Omniglot ({count} characters, 105x105)"),
            stack(
                &images.join("omniglot/omniglot_sample400_ink_u8.npy"),
                "omniglot",
                count,
                0,
            )?,
        ),
        ("textbook masks (finch_masks)".to_string(), masks),
        (
            "textbook masks of at most 1 MP, magnified 4x".to_string(),
            magnified,
        ),
    ])
}

/// One storage of the images and the program that erodes it.
struct Variant {
    label: &'static str,
    format: &'static str,
    text: String,
    bitwise: bool,
}

fn variants() -> Vec<Variant> {
    vec![
        Variant {
            label: "SparseRunList",
            format: "Dense(SparseRunList(Element(false)))",
            text: RUN_LENGTH.to_string(),
            bitwise: false,
        },
        Variant {
            label: "RunList",
            format: "Dense(RunList(Element(false)))",
            text: RUN_LENGTH.replace("SparseRunList", "RunList"),
            bitwise: false,
        },
        Variant {
            label: "Dense",
            format: "Dense(Dense(Element(false)))",
            text: DENSE.to_string(),
            bitwise: false,
        },
        Variant {
            label: "bitwise",
            format: "Dense(Dense(Element(0u64)))",
            text: BITWISE.to_string(),
            bitwise: true,
        },
    ]
}

/// The image as the variant's input tensor.
fn input(image: &Image, v: &Variant) -> Result<Tensor> {
    let format = Format::parse(v.format)?;
    let array = if v.bitwise {
        let per_row = image.w.div_ceil(64);
        let mut words = Vec::with_capacity(per_row * image.h);
        for y in 0..image.h {
            for k in 0..per_row {
                // Pad bits beyond the image are set, as the program expects.
                let mut word = !0u64;
                for b in 0..64 {
                    let x = k * 64 + b;
                    if x < image.w && !image.px[y * image.w + x] {
                        word &= !(1u64 << b);
                    }
                }
                words.push(Value::U64(word));
            }
        }
        DenseArray::from_data(ScalarType::U64, &[per_row, image.h], words, Value::U64(0))?
    } else {
        DenseArray::from_data(
            ScalarType::Bool,
            &[image.w, image.h],
            image.px.iter().map(|&b| Value::Bool(b)).collect(),
            Value::Bool(false),
        )?
    };
    Ok(Tensor::from_dense(&format, &array)?)
}

/// The foreground pixels of an output of the variant.
fn foreground(out: &Tensor, image: &Image, v: &Variant) -> Result<usize> {
    let dense = out.to_dense()?;
    if !v.bitwise {
        return Ok(dense
            .data
            .iter()
            .filter(|&&x| x == Value::Bool(true))
            .count());
    }
    let per_row = image.w.div_ceil(64);
    let mut count = 0;
    for y in 0..image.h {
        for x in 0..image.w {
            let word = dense.data[y * per_row + x / 64]
                .as_i128()
                .context("bitwise output")? as u64;
            count += (word >> (x % 64) & 1) as usize;
        }
    }
    Ok(count)
}

/// Minimum kernel time over `repeat` runs and the output's foreground pixels.
fn erode(
    compiled: &CompiledProgram,
    image: &Image,
    v: &Variant,
    repeat: usize,
) -> Result<(Duration, usize)> {
    let mut tensors = HashMap::from([("img".to_string(), input(image, v)?)]);
    let mut best = Duration::MAX;
    for _ in 0..repeat.max(1) {
        best = best.min(compiled.run(&mut tensors, &HashMap::new())?.kernel_time);
    }
    let out = tensors.get("out").context("no output `out`")?;
    Ok((best, foreground(out, image, v)?))
}

/// OpenCV's results (`bench/morphology_baseline.py`).
struct OpenCv {
    /// Minimum time and foreground count per image.
    rows: Vec<(Duration, usize)>,
    /// The time of the same call on a 1x1 image (calling OpenCV from Python).
    overhead: Duration,
}

/// OpenCV's results on `images`, or why it could not run.
fn opencv(images: &[&Image], repeat: usize, dir: &Path) -> Result<OpenCv, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let py = root.join("bench/.venv/bin/python");
    if !py.exists() {
        return Err("bench/.venv not found: run bench/run.sh morphology".into());
    }
    let mut list = String::new();
    for (k, im) in images.iter().enumerate() {
        let bytes: Vec<u8> = im.px.iter().map(|&p| u8::from(p)).collect();
        let file = dir.join(format!("{k}.u8"));
        std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
        let _ = writeln!(list, "{} {} {}", file.display(), im.w, im.h);
    }
    let listing = dir.join("images.txt");
    std::fs::write(&listing, list).map_err(|e| format!("{}: {e}", listing.display()))?;
    let out = Command::new(&py)
        .arg(root.join("bench/morphology_baseline.py"))
        .arg(&listing)
        .arg(repeat.to_string())
        .output()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let overhead = text
        .lines()
        .find_map(|l| l.strip_prefix("overhead "))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .ok_or("OpenCV reported no call overhead")?;
    let rows: Vec<(Duration, usize)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let secs: f64 = f.next()?.parse().ok()?;
            let count: usize = f.next()?.parse().ok()?;
            Some((Duration::from_secs_f64(secs), count))
        })
        .collect();
    if rows.len() != images.len() {
        return Err(format!(
            "OpenCV reported {} of {} images",
            rows.len(),
            images.len()
        ));
    }
    Ok(OpenCv { rows, overhead })
}

fn geomean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

/// Runs the benchmark and returns the Markdown report.
pub fn run(repeat: usize, data: &Path, quick: bool) -> Result<String> {
    let sets = image_sets(data, quick)?;
    let variants = variants();
    let mut compiled = Vec::new();
    for v in &variants {
        let program = Program::parse(&v.text).with_context(|| v.label)?;
        compiled.push(
            program
                .compile_with(Engine::C, &CompileOptions::default())
                .with_context(|| v.label)?,
        );
    }
    let tmp = std::env::temp_dir().join(format!("finch-bench-morphology-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;

    let mut out = String::from("# Binary erosion (Finch paper Fig. 26)\n\n");
    let _ = writeln!(out, "Machine: {}\n", crate::machine_line());
    let _ = writeln!(
        out,
        "One erosion with a 3x3 square, padded with `true`, per image: the programs \
         `examples/fig26_erosion.fin` (run-length images, output and row; `RunList` is the \
         same text with `RunList` for `SparseRunList`), `examples/fig26_erosion_dense.fin` \
         (one `bool` a pixel) and `examples/fig26_erosion_bitwise.fin` (64 pixels a word), \
         compiled C (`cc -O3`), against OpenCV's `cv2.erode` with a 3x3 rectangle and its \
         default border (the same result) on `uint8` pixels, output preallocated, one thread. \
         Time per image is the minimum of {repeat} runs (the kernel alone for Finch, the \
         call for OpenCV); a set's time is the sum over its images. Every output's count of \
         foreground pixels equals OpenCV's. Speed-up = OpenCV / Finch (> 1: Finch faster); \
         geomean = geometric mean of the per-image speed-ups.\n"
    );
    let _ = writeln!(
        out,
        "| images | pixels | foreground | runs per row | OpenCV ms | {} |",
        variants
            .iter()
            .map(|v| format!("{} ms | speed-up | geomean", v.label))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|{}",
        "---|---|---|".repeat(variants.len())
    );
    let mut largest: Vec<(String, usize, Vec<f64>, f64)> = Vec::new();
    let mut overhead = Duration::MAX;
    for (set, images) in &sets {
        eprintln!("{set}: {} images", images.len());
        let refs: Vec<&Image> = images.iter().collect();
        let cv = opencv(&refs, repeat, &tmp);
        let mut times = vec![vec![Duration::ZERO; images.len()]; variants.len()];
        for (k, image) in images.iter().enumerate() {
            let mut counts = Vec::new();
            for (vi, v) in variants.iter().enumerate() {
                let (t, count) = erode(&compiled[vi], image, v, repeat)
                    .with_context(|| format!("{} on {}", v.label, image.name))?;
                times[vi][k] = t;
                counts.push(count);
            }
            if let Ok(cv) = &cv {
                counts.push(cv.rows[k].1);
            }
            if counts.iter().any(|&c| c != counts[0]) {
                bail!(
                    "{}: the foreground counts differ ({} then OpenCV: {counts:?})",
                    image.name,
                    variants
                        .iter()
                        .map(|v| v.label)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        let pixels: usize = images.iter().map(|i| i.w * i.h).sum();
        let fg: usize = images.iter().map(Image::foreground).sum();
        let row_runs: usize = images
            .iter()
            .map(|i| {
                (0..i.h)
                    .map(|y| {
                        let row = &i.px[y * i.w..(y + 1) * i.w];
                        1 + row.windows(2).filter(|p| p[0] != p[1]).count()
                    })
                    .sum::<usize>()
            })
            .sum();
        let rows: usize = images.iter().map(|i| i.h).sum();
        let cv_total = cv
            .as_ref()
            .map(|c| c.rows.iter().map(|r| r.0).sum::<Duration>());
        if let Ok(c) = &cv {
            overhead = overhead.min(c.overhead);
        }
        let mut cells = Vec::new();
        for vt in &times {
            let total: Duration = vt.iter().sum();
            match &cv {
                Ok(c) => {
                    let ratios: Vec<f64> = c
                        .rows
                        .iter()
                        .zip(vt)
                        .map(|(b, t)| b.0.as_secs_f64() / t.as_secs_f64().max(1e-9))
                        .collect();
                    let cvt = cv_total.as_ref().map_or(0.0, |d| d.as_secs_f64());
                    cells.push(format!(
                        "{:.3} | {:.2} | {:.2}",
                        ms(total),
                        cvt / total.as_secs_f64().max(1e-9),
                        geomean(&ratios)
                    ));
                }
                Err(_) => cells.push(format!("{:.3} | - | -", ms(total))),
            }
        }
        let _ = writeln!(
            out,
            "| {set} | {pixels} | {:.1} % | {:.1} | {} | {} |",
            100.0 * fg as f64 / pixels.max(1) as f64,
            row_runs as f64 / rows.max(1) as f64,
            cv_total.map_or_else(|e| format!("- ({e})"), |d| format!("{:.3}", ms(d))),
            cells.join(" | ")
        );
        // The largest images of the set, one row each.
        let mut order: Vec<usize> = (0..images.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(images[k].w * images[k].h));
        for &k in order.iter().take(3) {
            let im = &images[k];
            if im.w * im.h < 1_000_000 {
                continue;
            }
            largest.push((
                format!("{} ({}x{})", im.name, im.w, im.h),
                im.w * im.h,
                times.iter().map(|t| ms(t[k])).collect(),
                cv.as_ref().map_or(f64::NAN, |c| ms(c.rows[k].0)),
            ));
        }
    }
    if !largest.is_empty() {
        let _ = writeln!(
            out,
            "\nImages of a megapixel or more, one row each (ms; speed-up against OpenCV in \
             parentheses):\n"
        );
        let _ = writeln!(
            out,
            "| image | OpenCV | {} |",
            variants
                .iter()
                .map(|v| v.label)
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(out, "|---|---|{}", "---|".repeat(variants.len()));
        for (name, _, t, cv) in &largest {
            let _ = writeln!(
                out,
                "| {name} | {cv:.3} | {} |",
                t.iter()
                    .map(|t| format!("{t:.3} ({:.2})", cv / t))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
    }
    if overhead < Duration::MAX {
        let _ = writeln!(
            out,
            "\nEach OpenCV time includes the call from Python: {:.2} µs on a 1x1 image \
             (minimum of 1000 calls); Finch's kernel time includes no call. On MNIST and \
             Omniglot that call is most of OpenCV's time.",
            overhead.as_secs_f64() * 1e6
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(out)
}

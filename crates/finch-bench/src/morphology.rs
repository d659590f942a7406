//! The image kernels of the Finch paper's Fig. 26 on real images, against OpenCV in the
//! same run: binary erosion and a masked histogram.
//!
//! The programs are the examples themselves. Erosion: `examples/fig26_erosion.fin` over
//! `Dense(SparseRunList(Element(false)))` images (and the same text over `RunList`),
//! `examples/fig26_erosion_dense.fin` over `Dense(Dense(Element(false)))` and
//! `examples/fig26_erosion_bitwise.fin` over 64-pixel words. Each erodes with a 3x3
//! square, padding with `true` (a pixel outside the image does not erode its neighbours),
//! which is OpenCV's `erode` with a 3x3 rectangle and its default border. The images are
//! the shared data's (`images/`): MNIST digits, Omniglot characters, the textbook masks of
//! the Finch benchmarks (`finch_masks`, 1-bit PNG) and those masks magnified 4x (nearest
//! neighbour), as in the paper. Histogram: `examples/fig26_histogram.fin` with its mask
//! stored as SparseList, SparseRunList or Dense, over the scikit-image photographs and
//! their Otsu masks, against `calcHist`. OpenCV runs in `bench/.venv`
//! (`bench/morphology_baseline.py`; `bench/run.sh morphology` installs it) on the same
//! pixels, and every Finch result is checked against OpenCV's (and against the other
//! storages' without it).

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
const HISTOGRAM: &str = include_str!("../../../examples/fig26_histogram.fin");

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
        Image {
            name: format!("{} x{k}", self.name),
            w: self.w * k,
            h: self.h * k,
            px: magnify(&self.px, self.w, k),
        }
    }
}

/// The pixels `px` of an image `w` wide (row-major), each repeated `k` times along both
/// axes.
fn magnify<T: Copy>(px: &[T], w: usize, k: usize) -> Vec<T> {
    let wk = w * k;
    (0..px.len() * k * k)
        .map(|p| px[(p / wk / k) * w + (p % wk) / k])
        .collect()
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
    /// Minimum time and the numbers printed (erosion: the foreground count; histogram:
    /// the 16 bins) per image.
    rows: Vec<(Duration, Vec<u64>)>,
    /// The time of the same call on a 1x1 image (calling OpenCV from Python).
    overhead: Duration,
}

/// OpenCV's results on `images` (each: width, height and its planes of bytes, row-major:
/// the pixels for `erode`; the gray pixels and the mask for `hist`), or why it could not
/// run.
fn opencv(
    mode: &str,
    images: &[(usize, usize, Vec<Vec<u8>>)],
    repeat: usize,
    dir: &Path,
) -> Result<OpenCv, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let py = root.join("bench/.venv/bin/python");
    if !py.exists() {
        return Err("bench/.venv not found: run bench/run.sh morphology".into());
    }
    let mut list = String::new();
    for (k, (w, h, planes)) in images.iter().enumerate() {
        let _ = write!(list, "{w} {h}");
        for (p, bytes) in planes.iter().enumerate() {
            let file = dir.join(format!("{k}-{p}.u8"));
            std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
            let _ = write!(list, " {}", file.display());
        }
        list.push('\n');
    }
    let listing = dir.join("images.txt");
    std::fs::write(&listing, list).map_err(|e| format!("{}: {e}", listing.display()))?;
    let out = Command::new(&py)
        .arg(root.join("bench/morphology_baseline.py"))
        .arg(mode)
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
    let rows: Vec<(Duration, Vec<u64>)> = text
        .lines()
        .filter(|l| !l.starts_with("overhead "))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let secs: f64 = f.next()?.parse().ok()?;
            let numbers = f.map(str::parse).collect::<Result<Vec<u64>, _>>().ok()?;
            Some((Duration::from_secs_f64(secs), numbers))
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

/// A results table's header: images, pixels, the two columns `data` (`a | b`), OpenCV's
/// time, then for each Finch variant its time column (`timed`), speed-up and geomean.
fn table_header(out: &mut String, data: &str, timed: impl Iterator<Item = String>) {
    let timed: Vec<String> = timed.map(|t| format!("{t} | speed-up | geomean")).collect();
    let _ = writeln!(
        out,
        "| images | pixels | {data} | OpenCV ms | {} |",
        timed.join(" | ")
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|{}",
        "---|---|---|".repeat(timed.len())
    );
}

/// The cells of a set's row: OpenCV's total time (or why it did not run), and per storage
/// (`times[storage][image]`) its total time, OpenCV's total over it and the geometric mean
/// of the per-image speed-ups.
fn speed_up_cells(times: &[Vec<Duration>], cv: &Result<OpenCv, String>) -> (String, Vec<String>) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let cv_total = cv
        .as_ref()
        .map(|c| c.rows.iter().map(|r| r.0).sum::<Duration>());
    let cells = times
        .iter()
        .map(|vt| {
            let total: Duration = vt.iter().sum();
            match (cv, &cv_total) {
                (Ok(c), Ok(cvt)) => {
                    let ratios: Vec<f64> = c
                        .rows
                        .iter()
                        .zip(vt)
                        .map(|(b, t)| b.0.as_secs_f64() / t.as_secs_f64().max(1e-9))
                        .collect();
                    format!(
                        "{:.3} | {:.2} | {:.2}",
                        ms(total),
                        cvt.as_secs_f64() / total.as_secs_f64().max(1e-9),
                        geomean(&ratios)
                    )
                }
                _ => format!("{:.3} | - | -", ms(total)),
            }
        })
        .collect();
    let cv_cell = cv_total.map_or_else(|e| format!("- ({e})"), |d| format!("{:.3}", ms(d)));
    (cv_cell, cells)
}

/// Runs the benchmark and returns the Markdown report.
pub fn run(repeat: usize, data: &Path, quick: bool) -> Result<String> {
    let tmp = std::env::temp_dir().join(format!("finch-bench-morphology-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut out = String::from("# Image kernels of the Finch paper (Fig. 26)\n\n");
    let _ = writeln!(out, "Machine: {}\n", crate::machine_line());
    let report = erosion(repeat, data, quick, &tmp)
        .and_then(|e| Ok(e + &histogram(repeat, data, quick, &tmp)?));
    let _ = std::fs::remove_dir_all(&tmp);
    out.push_str(&report?);
    Ok(out)
}

/// The erosion section of the report.
fn erosion(repeat: usize, data: &Path, quick: bool, tmp: &Path) -> Result<String> {
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
    let ms = |d: Duration| d.as_secs_f64() * 1e3;

    let mut out = String::from("## Binary erosion\n\n");
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
    table_header(
        &mut out,
        "foreground | runs per row",
        variants.iter().map(|v| format!("{} ms", v.label)),
    );
    let mut largest: Vec<(String, usize, Vec<f64>, f64)> = Vec::new();
    let mut overhead = Duration::MAX;
    for (set, images) in &sets {
        eprintln!("{set}: {} images", images.len());
        let planes: Vec<(usize, usize, Vec<Vec<u8>>)> = images
            .iter()
            .map(|i| (i.w, i.h, vec![i.px.iter().map(|&p| u8::from(p)).collect()]))
            .collect();
        let cv = opencv("erode", &planes, repeat, tmp);
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
                counts.push(cv.rows[k].1.first().map_or(usize::MAX, |&c| c as usize));
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
        if let Ok(c) = &cv {
            overhead = overhead.min(c.overhead);
        }
        let (cv_cell, cells) = speed_up_cells(&times, &cv);
        let _ = writeln!(
            out,
            "| {set} | {pixels} | {:.1} % | {:.1} | {cv_cell} | {} |",
            100.0 * fg as f64 / pixels.max(1) as f64,
            row_runs as f64 / rows.max(1) as f64,
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
    out.push_str(
        "\nThe run-length programs cost a step per run, not per pixel: a SparseRunList image \
         stores only its runs of foreground, and `&` with a missing run is false, so the \
         background is skipped; a RunList image stores its runs of background too, and steps \
         through them. Magnifying an image 4x makes its runs 4x longer and keeps their \
         number per row, so the run-length programs gain most there. The bitwise program \
         does 64 pixels per operation.\n",
    );
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
    Ok(out)
}

/// An 8-bit gray image and a mask of it, `px[y * w + x]`.
struct Gray {
    name: String,
    w: usize,
    h: usize,
    px: Vec<u8>,
    mask: Vec<bool>,
}

impl Gray {
    /// Each pixel repeated `k` times along both axes.
    fn magnified(&self, k: usize) -> Gray {
        Gray {
            name: format!("{} x{k}", self.name),
            w: self.w * k,
            h: self.h * k,
            px: magnify(&self.px, self.w, k),
            mask: magnify(&self.mask, self.w, k),
        }
    }
}

/// A binary (`P4`: a set bit is 1) or 8-bit gray (`P5`) Netpbm image: its size and one
/// byte a pixel, row-major.
fn load_pnm(path: &Path) -> Result<(usize, usize, Vec<u8>)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    let mut at = 0;
    let token = |at: &mut usize| -> Option<String> {
        loop {
            match bytes.get(*at)? {
                b'#' => {
                    while *bytes.get(*at)? != b'\n' {
                        *at += 1;
                    }
                }
                c if c.is_ascii_whitespace() => *at += 1,
                _ => break,
            }
        }
        let start = *at;
        while !bytes.get(*at)?.is_ascii_whitespace() {
            *at += 1;
        }
        Some(String::from_utf8_lossy(&bytes[start..*at]).into_owned())
    };
    let bad = || anyhow::anyhow!("{}: not a P4 or 8-bit P5 Netpbm image", path.display());
    let magic = token(&mut at).ok_or_else(bad)?;
    let number = |at: &mut usize| token(at).and_then(|t| t.parse::<usize>().ok());
    let w = number(&mut at).ok_or_else(bad)?;
    let h = number(&mut at).ok_or_else(bad)?;
    // The data: `len` bytes after the one whitespace byte that ends the header.
    let body = |at: usize, len: Option<usize>| {
        len.and_then(|n| bytes.get(at + 1..(at + 1).checked_add(n)?))
            .ok_or_else(bad)
    };
    let data = match magic.as_str() {
        "P5" => {
            ensure!(number(&mut at) == Some(255), bad());
            body(at, w.checked_mul(h))?.to_vec()
        }
        "P4" => {
            let row = w.div_ceil(8);
            let d = body(at, row.checked_mul(h))?;
            (0..w * h)
                .map(|p| (d[(p / w) * row + (p % w) / 8] >> (7 - (p % w) % 8)) & 1)
                .collect()
        }
        _ => return Err(bad()),
    };
    Ok((w, h, data))
}

/// The gray images with their Otsu masks (`images/skimage`: `X.pgm` and `X_otsu.pbm`).
fn gray_sets(data: &Path, quick: bool) -> Result<Vec<(String, Vec<Gray>)>> {
    let dir = data.join("images/skimage");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix("_otsu.pbm").map(String::from)
        })
        .filter(|n| dir.join(format!("{n}.pgm")).exists())
        .collect();
    names.sort();
    if quick {
        names.truncate(3);
    }
    let mut images = Vec::new();
    for n in names {
        let (w, h, px) = load_pnm(&dir.join(format!("{n}.pgm")))?;
        let (mw, mh, mask) = load_pnm(&dir.join(format!("{n}_otsu.pbm")))?;
        ensure!(
            (w, h) == (mw, mh),
            "{n}: the mask's size differs from the image's"
        );
        images.push(Gray {
            name: n,
            w,
            h,
            px,
            mask: mask.iter().map(|&b| b != 0).collect(),
        });
    }
    let magnified = images.iter().map(|g| g.magnified(4)).collect();
    Ok(vec![
        ("scikit-image photographs, Otsu masks".to_string(), images),
        ("the same, magnified 4x".to_string(), magnified),
    ])
}

/// The masked histogram section of the report.
fn histogram(repeat: usize, data: &Path, quick: bool, tmp: &Path) -> Result<String> {
    let sets = gray_sets(data, quick)?;
    let masks = [
        ("SparseList", "Dense(SparseList(Pattern()))"),
        ("SparseRunList", "Dense(SparseRunList(Pattern()))"),
        ("Dense", "Dense(Dense(Element(false)))"),
    ];
    let mut compiled = Vec::new();
    for (label, format) in masks {
        let text = HISTOGRAM.replace(
            "input  mask :: Dense(SparseList(Pattern()))",
            &format!("input  mask :: {format}"),
        );
        ensure!(
            text.contains(format),
            "fig26_histogram.fin no longer declares its mask as expected"
        );
        compiled.push(
            Program::parse(&text)
                .with_context(|| label)?
                .compile_with(Engine::C, &CompileOptions::default())
                .with_context(|| label)?,
        );
    }
    let shapes = HashMap::from([("bins".to_string(), vec![16usize])]);
    let mut out = String::from("\n## Masked histogram\n\n");
    let _ = writeln!(
        out,
        "`examples/fig26_histogram.fin`: the 16-bin histogram of an 8-bit image's pixels \
         where a mask is set (the scikit-image photographs of the shared data, each with its \
         Otsu threshold as mask), the image `Dense(Dense(Element(0u8)))` and the mask in \
         each format below, compiled C, against OpenCV's `cv2.calcHist` with the mask \
         (8-bit, 0/1). Minimum of {repeat} runs per image, summed over the set; every \
         histogram equals OpenCV's.\n"
    );
    table_header(
        &mut out,
        "masked | mask runs per row",
        masks.iter().map(|(l, _)| format!("{l} mask ms")),
    );
    let mut overhead = Duration::MAX;
    for (set, images) in &sets {
        eprintln!("{set}: {} images", images.len());
        let planes: Vec<(usize, usize, Vec<Vec<u8>>)> = images
            .iter()
            .map(|g| {
                (
                    g.w,
                    g.h,
                    vec![g.px.clone(), g.mask.iter().map(|&m| u8::from(m)).collect()],
                )
            })
            .collect();
        let cv = opencv("hist", &planes, repeat, tmp);
        if let Ok(c) = &cv {
            overhead = overhead.min(c.overhead);
        }
        let mut times = vec![vec![Duration::ZERO; images.len()]; masks.len()];
        for (k, g) in images.iter().enumerate() {
            let img = Tensor::from_dense(
                &Format::parse("Dense(Dense(Element(0u8)))")?,
                &DenseArray::from_data(
                    ScalarType::U8,
                    &[g.w, g.h],
                    g.px.iter().map(|&v| Value::U8(v)).collect(),
                    Value::U8(0),
                )?,
            )?;
            let mask = DenseArray::from_data(
                ScalarType::Bool,
                &[g.w, g.h],
                g.mask.iter().map(|&m| Value::Bool(m)).collect(),
                Value::Bool(false),
            )?;
            let mut results = Vec::new();
            for (mi, (label, format)) in masks.iter().enumerate() {
                let mut tensors = HashMap::from([
                    ("img".to_string(), img.clone()),
                    (
                        "mask".to_string(),
                        Tensor::from_dense(&Format::parse(format)?, &mask)?,
                    ),
                ]);
                let mut best = Duration::MAX;
                for _ in 0..repeat.max(1) {
                    best = best.min(
                        compiled[mi]
                            .run(&mut tensors, &shapes)
                            .with_context(|| format!("{label} mask on {}", g.name))?
                            .kernel_time,
                    );
                }
                times[mi][k] = best;
                let bins = tensors
                    .get("bins")
                    .context("no output `bins`")?
                    .to_dense()?;
                results.push(
                    bins.data
                        .iter()
                        .map(|v| v.as_i128().map_or(u64::MAX, |b| b as u64))
                        .collect::<Vec<u64>>(),
                );
            }
            if let Ok(c) = &cv {
                results.push(c.rows[k].1.clone());
            }
            if results.iter().any(|r| *r != results[0]) {
                bail!(
                    "{}: the histograms differ ({results:?}; OpenCV last)",
                    g.name
                );
            }
        }
        let pixels: usize = images.iter().map(|g| g.w * g.h).sum();
        let masked: usize = images
            .iter()
            .map(|g| g.mask.iter().filter(|&&m| m).count())
            .sum();
        let rows: usize = images.iter().map(|g| g.h).sum();
        let runs: usize = images
            .iter()
            .map(|g| {
                (0..g.h)
                    .map(|y| {
                        let row = &g.mask[y * g.w..(y + 1) * g.w];
                        usize::from(row[0]) + row.windows(2).filter(|p| !p[0] && p[1]).count()
                    })
                    .sum::<usize>()
            })
            .sum();
        let (cv_cell, cells) = speed_up_cells(&times, &cv);
        let _ = writeln!(
            out,
            "| {set} ({}) | {pixels} | {:.1} % | {:.1} | {cv_cell} | {} |",
            images.len(),
            100.0 * masked as f64 / pixels.max(1) as f64,
            runs as f64 / rows.max(1) as f64,
            cells.join(" | ")
        );
    }
    if overhead < Duration::MAX {
        let _ = writeln!(
            out,
            "\nEach OpenCV time includes the call from Python: {:.2} µs on a 1x1 image.",
            overhead.as_secs_f64() * 1e6
        );
    }
    out.push_str(
        "\nA histogram's time follows its masked pixels: each adds one to a bin, and \
         consecutive additions to one bin wait on each other through memory (a few cycles \
         each), which every mask format pays alike. A SparseList or SparseRunList mask visits \
         only the masked pixels; OpenCV and the Dense mask test every pixel. A SparseRunList \
         mask adds a loop per run, which short runs (about 8 pixels here) do not repay.\n",
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with `bytes` in a folder of its own, removed with it when dropped.
    struct Temp(PathBuf);

    impl Drop for Temp {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    fn temp(name: &str, bytes: &[u8]) -> Temp {
        let dir = std::env::temp_dir().join(format!(
            "finch-bench-test-{}-{}",
            std::process::id(),
            name.replace('.', "-")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }

    #[test]
    fn netpbm_images_read_as_one_byte_a_pixel() {
        // 10x2 bitmap, rows padded to 2 bytes, MSB first; a comment in the header.
        let mut p4 = b"P4\n# made by hand\n10 2\n".to_vec();
        p4.extend([0b1000_0000, 0b0100_0000, 0b0000_0001, 0b1000_0000]);
        let (w, h, px) = load_pnm(&temp("a.pbm", &p4).0).unwrap();
        assert_eq!((w, h), (10, 2));
        assert_eq!(
            px,
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0]
        );
        let mut p5 = b"P5\n3 2\n255\n".to_vec();
        p5.extend([0, 17, 255, 16, 31, 200]);
        assert_eq!(
            load_pnm(&temp("b.pgm", &p5).0).unwrap(),
            (3, 2, vec![0, 17, 255, 16, 31, 200])
        );
        // Cut short, 16-bit, or not Netpbm: errors that name the file.
        for (name, bytes) in [
            ("c.pgm", &p5[..p5.len() - 1]),
            ("d.pgm", &b"P5\n3 2\n65535\n\0\0\0\0\0\0\0\0\0\0\0\0"[..]),
            ("e.pgm", &b"GIF89a"[..]),
            ("f.pbm", &b"P4\n10"[..]),
        ] {
            let e = load_pnm(&temp(name, bytes).0).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    fn npy(descr: &str, data: &[u8]) -> Vec<u8> {
        let header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 1, 3), }}");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        bytes.extend(data);
        bytes
    }

    #[test]
    fn npy_stacks_read_with_their_shape() {
        let file = temp("s.npy", &npy("|u1", &[1, 2, 3, 200, 0, 128]));
        let path = &file.0;
        assert_eq!(
            load_npy_u8(path).unwrap(),
            (vec![2, 1, 3], vec![1, 2, 3, 200, 0, 128])
        );
        let images = stack(path, "s", 2, 127).unwrap();
        assert_eq!(images[1].px, [true, false, true]);
        // Another element type, or missing data, is refused with the file's name.
        for (name, bytes) in [
            ("f.npy", npy("<f8", &[0; 48])),
            ("t.npy", npy("|u1", &[1, 2, 3, 200, 0])),
        ] {
            let e = load_npy_u8(&temp(name, &bytes).0).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn magnifying_repeats_each_pixel() {
        let im = Image {
            name: "i".into(),
            w: 2,
            h: 1,
            px: vec![true, false],
        };
        let m = im.magnified(2);
        assert_eq!((m.w, m.h), (4, 2));
        assert_eq!(m.px, [true, true, false, false, true, true, false, false]);
        assert_eq!(m.foreground(), 4);
    }
}

//! The AVX2 copy of a reassociating kernel, which CPUs with AVX2 and FMA but without
//! AVX-512 run. This test process builds every kernel with `FINCH_NO_AVX512` defined
//! (through `FINCH_CFLAGS`, read once per process), so that a CPU with AVX2 runs that copy
//! whatever else it has, and checks it against the dense reference on data where every
//! order of summation is exact. (On a CPU without AVX2 the scalar copy runs instead.)

mod reassociated;

use finch::backend::c::CheckMode;
use finch::{DenseArray, Program, ScalarType, Value};

#[test]
fn reassociated_avx2_copies_match_the_reference() {
    let Some(copies) = reassociated::spmv_over_every_level("-O3 -DFINCH_NO_AVX512", "avx2") else {
        return; // no C compiler
    };
    // Dense rows, bands and block lists read contiguous runs, which AVX2 code takes.
    assert!(copies >= 3, "{copies} kernels had an AVX2 copy");
}

/// Fibers of every length from 0 to 21 stored entries: loops of fewer than four positions
/// run scalar, longer ones in groups of eight and four and then one masked group of the
/// last one to three. Each body adds a term that is not 0 where a masked lane reads
/// nothing (`+ 0.5`; a coordinate, `stored position + 1`), so a lane the mask leaves out
/// must keep its partial sum: an `f64` fused multiply-add's and an `i64` sum over a
/// 32-bit index buffer's (masked 32-bit loads).
#[test]
fn reassociated_avx2_loops_take_every_last_group() {
    std::env::set_var("FINCH_CFLAGS", "-O3 -DFINCH_NO_AVX512");
    let (rows, cols) = (40, 22);
    // Column `j` stores `j` entries, spread over the rows.
    let stored = |i: usize, j: usize| i * j / rows != (i + 1) * j / rows;
    let programs = [
        (
            "input A :: Dense(SparseBand(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i] + 0.5\nend\n",
            ScalarType::F64,
        ),
        (
            "input A :: Dense(SparseBand(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n",
            ScalarType::F64,
        ),
        (
            "input A :: Dense(SparseList{UInt32}(Pattern()))\noutput y :: Dense(Element(0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * i\nend\n",
            ScalarType::Bool,
        ),
    ];
    for (text, ty) in programs {
        let program = Program::parse(text).unwrap();
        let Some(kernel) = reassociated::compile_reassociated(&program) else {
            return; // no C compiler
        };
        let source = kernel.c_source(CheckMode::Trusted).unwrap();
        assert!(source.contains("maskload"), "{source}");
        let band = text.contains("SparseBand");
        let mut data = Vec::new();
        for j in 0..cols {
            for i in 0..rows {
                // A band stores one run: the first `j` rows.
                let here = if band { i < j } else { stored(i, j) };
                let v = match ((i * 7 + j * 3) % 11) as f64 - 5.0 {
                    0.0 => 2.0,
                    v => v,
                };
                data.push(match ty {
                    ScalarType::Bool => Value::Bool(here),
                    _ => Value::F64(if here { v } else { 0.0 }),
                });
            }
        }
        let fill = if ty == ScalarType::Bool {
            Value::Bool(false)
        } else {
            Value::F64(0.0)
        };
        let a = DenseArray::from_data(ty, &[rows, cols], data, fill).unwrap();
        let mut inputs = vec![("A", a)];
        if text.contains("input x") {
            inputs.push(("x", reassociated::x_values(rows)));
        }
        reassociated::assert_y_matches_reference(&program, &kernel, inputs, text);
    }
}

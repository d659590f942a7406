//! The AVX2 copy of a reassociating kernel, which CPUs with AVX2 and FMA but without
//! AVX-512 run. This test process builds every kernel with `FINCH_NO_AVX512` defined
//! (through `FINCH_CFLAGS`, read once per process), so that a CPU with AVX2 runs that copy
//! whatever else it has, and checks it against the dense reference on data where every
//! order of summation is exact. (On a CPU without AVX2 the scalar copy runs instead.)

mod reassociated;

#[test]
fn reassociated_avx2_copies_match_the_reference() {
    let Some(copies) = reassociated::spmv_over_every_level("-O3 -DFINCH_NO_AVX512", "avx2") else {
        return; // no C compiler
    };
    // Dense rows, bands and block lists read contiguous runs, which AVX2 code takes.
    assert!(copies >= 3, "{copies} kernels had an AVX2 copy");
}

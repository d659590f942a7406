//! The scalar copy of a reassociating kernel, which CPUs without AVX2 run. This test
//! process builds every kernel with `FINCH_NO_AVX512` and `FINCH_NO_AVX2` defined (through
//! `FINCH_CFLAGS`, read once per process), which leaves that copy as the only one, and
//! checks it against the dense reference on data where every order of summation is exact.

mod reassociated;

#[test]
fn reassociated_scalar_copies_match_the_reference() {
    let Some(copies) =
        reassociated::spmv_over_every_level("-O3 -DFINCH_NO_AVX512 -DFINCH_NO_AVX2", "avx512")
    else {
        return; // no C compiler
    };
    // The formats whose walks vectorize have vector copies to leave out.
    assert!(copies >= 3, "{copies} kernels had an AVX-512 copy");
}

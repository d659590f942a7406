#![no_main]
// The `raw_arrays` target of crates/finch-fuzz (what it checks is documented there).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(target) = finch_fuzz::target("raw_arrays") {
        (target.run)(data);
    }
});

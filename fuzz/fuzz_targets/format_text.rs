#![no_main]
// The `format_text` target of crates/finch-fuzz (what it checks is documented there).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(target) = finch_fuzz::target("format_text") {
        (target.run)(data);
    }
});

//! Fuzz target `dataurl`: the properties of `tests/fuzz-checks/dataurl.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::dataurl::check(data));

//! Fuzz target `token_file`: the properties of `tests/fuzz-checks/token_file.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::token_file::check(data));

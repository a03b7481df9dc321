//! Fuzz target `pool_path`: the properties of `tests/fuzz-checks/pool_path.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::pool_path::check(data));

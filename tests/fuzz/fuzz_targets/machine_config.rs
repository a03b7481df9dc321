//! Fuzz target `machine_config`: the properties of `tests/fuzz-checks/machine_config.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::machine_config::check(data));

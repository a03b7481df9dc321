//! Fuzz target `controller_config`: the properties of `tests/fuzz-checks/controller_config.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| fuzz_checks::controller_config::check(data)
);

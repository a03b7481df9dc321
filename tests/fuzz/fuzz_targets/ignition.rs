//! Fuzz target `ignition`: the properties of `tests/fuzz-checks/ignition.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::ignition::check(data));

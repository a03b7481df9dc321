//! Fuzz target `accept`: the properties of `tests/fuzz-checks/accept.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::accept::check(data));

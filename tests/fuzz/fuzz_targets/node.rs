//! Fuzz target `node`: the properties of `tests/fuzz-checks/node.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::node::check(data));

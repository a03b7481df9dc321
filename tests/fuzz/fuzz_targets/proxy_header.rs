//! Fuzz target `proxy_header`: the properties of `tests/fuzz-checks/proxy_header.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::proxy_header::check(data));

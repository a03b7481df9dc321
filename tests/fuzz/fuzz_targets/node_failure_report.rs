//! Fuzz target `node_failure_report`: the properties of `tests/fuzz-checks/node_failure_report.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::node_failure_report::check(data));

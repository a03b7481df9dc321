//! Fuzz target `kubeconfig`: the properties of `tests/fuzz-checks/kubeconfig.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::kubeconfig::check(data));

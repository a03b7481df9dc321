//! Fuzz target `kubeconfig`: the properties of `checks/kubeconfig.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::kubeconfig::check(data));

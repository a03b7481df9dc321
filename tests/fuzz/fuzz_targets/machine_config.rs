//! Fuzz target `machine_config`: the properties of `checks/machine_config.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::machine_config::check(data));

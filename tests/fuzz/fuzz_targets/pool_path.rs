//! Fuzz target `pool_path`: the properties of `checks/pool_path.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::pool_path::check(data));

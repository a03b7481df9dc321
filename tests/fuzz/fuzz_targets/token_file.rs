//! Fuzz target `token_file`: the properties of `checks/token_file.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::token_file::check(data));

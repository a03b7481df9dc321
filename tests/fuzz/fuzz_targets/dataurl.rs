//! Fuzz target `dataurl`: the properties of `checks/dataurl.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::dataurl::check(data));

//! Fuzz target `accept`: the properties of `checks/accept.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::accept::check(data));

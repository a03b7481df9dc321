//! Fuzz target `ignition`: the properties of `checks/ignition.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::ignition::check(data));

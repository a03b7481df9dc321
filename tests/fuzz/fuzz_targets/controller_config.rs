//! Fuzz target `controller_config`: the properties of `checks/controller_config.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| machine_config_server_fuzz::controller_config::check(data)
);

//! Fuzz target `machine_os_build`: the properties of `checks/machine_os_build.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| machine_config_server_fuzz::machine_os_build::check(data)
);

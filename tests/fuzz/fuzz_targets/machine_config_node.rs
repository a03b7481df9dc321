//! Fuzz target `machine_config_node`: the properties of `checks/machine_config_node.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| machine_config_server_fuzz::machine_config_node::check(data)
);

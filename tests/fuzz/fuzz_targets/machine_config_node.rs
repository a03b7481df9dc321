//! Fuzz target `machine_config_node`: the properties of `tests/fuzz-checks/machine_config_node.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| fuzz_checks::machine_config_node::check(data)
);

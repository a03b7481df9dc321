//! Fuzz target `node`: the properties of `checks/node.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| machine_config_server_fuzz::node::check(data));

//! Fuzz target `machine_os_build`: the properties of `tests/fuzz-checks/machine_os_build.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| fuzz_checks::machine_os_build::check(data)
);

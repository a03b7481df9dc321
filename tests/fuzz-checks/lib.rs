//! The properties the fuzz targets check, one module per parser of untrusted or
//! cluster-supplied input. Each `check(data)` feeds the input to the server's own public
//! functions and panics (an `assert!` naming the property) when a property does not hold, so a
//! violation is a libFuzzer crash like any panic inside the server's code.
//!
//! A crate of its own (`mcs-fuzz-checks`, named `fuzz_checks`), linked by the fuzz targets
//! (`tests/fuzz`, nightly, cargo-fuzz) and by the main crate's suite, where
//! `tests/fuzz_seeds.rs` (stable) replays the committed seeds and regressions through the same
//! checks.

pub mod accept;
pub mod cluster_objects;
pub mod controller_config;
pub mod dataurl;
pub mod ignition;
pub mod kubeconfig;
pub mod machine_config;
pub mod machine_config_node;
pub mod machine_os_build;
pub mod node;
pub mod node_failure_report;
pub mod pool_path;
pub mod proxy_header;
pub mod render_support;
pub mod token_file;

/// A target's check: panics when a property does not hold for the input.
pub type Check = fn(&[u8]);

/// Every target: its name (the file under `fuzz_targets/`, the directory under `seeds/`) and
/// its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("pool_path", pool_path::check),
    ("accept", accept::check),
    ("dataurl", dataurl::check),
    ("ignition", ignition::check),
    ("machine_config", machine_config::check),
    ("controller_config", controller_config::check),
    ("machine_os_build", machine_os_build::check),
    ("machine_config_node", machine_config_node::check),
    ("node", node::check),
    ("kubeconfig", kubeconfig::check),
    ("token_file", token_file::check),
    ("proxy_header", proxy_header::check),
    ("node_failure_report", node_failure_report::check),
];

//! Shared helpers for the integration tests. Each `tests/*.rs` file that needs them declares
//! `mod support;` and uses the modules below.

pub mod fake_apiserver;

/// A complete `machine-config-controller` ControllerConfig, as the cluster tests load it into
/// the fake API server.
#[allow(dead_code)]
pub const CONTROLLER_CONFIG: &str = include_str!("controller-config.yaml");

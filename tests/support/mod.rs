//! Shared helpers for the integration tests. Each `tests/*.rs` file that needs them declares
//! `mod support;` and uses the modules below.

pub mod fake_apiserver;

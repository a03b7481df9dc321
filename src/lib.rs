//! machine-config-server: serves Ignition configs to booting OpenShift nodes.
//!
//! # Layout
//! - [`ignition`]: spec versions, parsing, translation, Accept negotiation, data URLs (pure).
//! - [`api`]: typed `machineconfiguration.openshift.io/v1` resources.
//! - [`snapshot`]: the immutable state a render reads, published by a source.
//! - [`source`]: the bootstrap directory source and the cluster (watch cache) source.
//! - [`render`]: pure pipeline from a snapshot, a pool and a spec version to the served bytes.
//! - [`cache`]: serialized payloads per (pool, version, generation), rendered once.
//! - [`clock`]: the API server's clock as this replica estimates it (cluster mode).
//! - [`server`]: routes, status mapping, TLS, listeners.
//! - [`mcn`]: MachineConfigNode publisher (cluster mode).
//! - [`metrics`], [`telemetry`]: Prometheus registry and tracing set-up.
//! - [`events`]: Kubernetes Events published by the lease holder (cluster mode).
//! - [`cli`], [`app`]: command line, validation, start-up and shutdown wiring.
//! - [`explain`]: the `explain` subcommand: what would be served for a pool, and why.

pub mod api;
pub mod app;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod events;
pub mod explain;
pub mod ignition;
pub mod mcn;
pub mod metrics;
pub mod render;
pub mod server;
pub mod snapshot;
pub mod source;
pub mod telemetry;

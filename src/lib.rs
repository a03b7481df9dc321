//! machine-config-server: serves Ignition configs to booting OpenShift nodes.
//!
//! # Layers
//! Read top-down. A module uses only modules of its own layer or of the layers below it
//! (`tests/module_graph.rs` fails on an upward import or an import cycle between files):
//!
//! 1. [`app`]: start-up and shutdown wiring, one entry for `main` and the tests.
//! 2. [`explain`], [`compare`], [`cleanup`]: the `explain` subcommand (what would be served for
//!    a pool, and why), the `compare` subcommand (this server's answers against a running
//!    original's) and the `cleanup` subcommand (what this server wrote to the cluster, listed
//!    and removed: the way back to the original).
//! 3. [`cli`]: the command line and its validation into settings.
//! 4. [`events`], [`mcn`]: the cluster-mode tasks: Kubernetes Events of the lease holder, and
//!    the MachineConfigNode publisher with the served records the replicas share.
//! 5. [`server`]: routes, status mapping, TLS, listeners, and what the request path reports
//!    (the served-request log, notices for Events, the layered decisions served).
//! 6. [`cache`], [`source`]: serialized payloads rendered once per input generation; the
//!    bootstrap directory and the cluster watch caches that publish snapshots.
//! 7. [`render`]: the pure pipeline from a snapshot, a pool and a spec version to the served
//!    bytes (rendered-config choice, layered-image decision, appended files, translation).
//! 8. [`snapshot`]: the immutable state a render reads.
//! 9. [`metrics`], [`telemetry`], [`clock`], [`rights`]: the Prometheus registry, logging and
//!    tracing set-up, the API server's clock as this replica estimates it (cluster mode), and
//!    what each feature beyond the original needs from the authorizer and whether it is on.
//! 10. [`api`]: typed `machineconfiguration.openshift.io/v1` resources and pool membership.
//! 11. [`ignition`]: spec versions, parsing, validation, translation, Accept negotiation, data
//!     URLs (pure).
//! 12. [`crypto`]: the TLS crypto backend (ring or the system OpenSSL) and FIPS mode; imports
//!     nothing of this crate.

pub mod api;
pub mod app;
pub mod cache;
pub mod cleanup;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod crypto;
pub mod events;
pub mod explain;
pub mod ignition;
pub mod mcn;
pub mod metrics;
pub mod render;
pub mod rights;
pub mod server;
pub mod snapshot;
pub mod source;
pub mod telemetry;

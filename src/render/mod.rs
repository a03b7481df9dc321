//! Pure render pipeline: (snapshot, pool, spec version) -> the exact bytes served.
//!
//! Steps, as the original server: pick the rendered MachineConfig, parse its Ignition config,
//! migrate kernel arguments for specs below 3.3, write the ControllerConfig CA bundles, append
//! the node files (annotations, kubeconfig, MC content, registry certs, encapsulated MC last),
//! translate to the requested spec and serialize. No I/O, no logging: errors are returned typed.

pub mod layered;

use bytes::Bytes;

use crate::ignition::{ParseError, SpecVersion, TranslateError};

/// A rendered payload, ready to serve.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The serialized Ignition config.
    pub body: Bytes,
    /// Name of the rendered MachineConfig it was built from.
    pub rendered_config: String,
    /// The spec version of `body`.
    pub version: SpecVersion,
    /// The OS image put into the node annotations / encapsulated MC, if any (layered pools).
    pub image: Option<String>,
}

/// Why a render failed. The server maps each variant to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Bootstrap mode: the pool file or its MachineConfig file does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// Bootstrap mode serves only `master` and `arbiter` (500, as the original).
    #[error("pool {0:?} is not served in bootstrap mode (only master and arbiter)")]
    PoolNotServed(String),
    /// Cluster mode: no such MachineConfigPool (500 so Ignition retries; it may appear later).
    #[error("machine config pool {0:?} does not exist")]
    UnknownPool(String),
    /// Cluster mode: the pool has no rendered config yet, or it is missing from the cache (500).
    #[error("rendered machine config {name:?} for pool {pool:?} is not available")]
    MissingMachineConfig { pool: String, name: String },
    /// An input exists but is broken (500).
    #[error("{0}")]
    InvalidInput(String),
    /// `spec.config` could not be parsed (500).
    #[error("machine config {name:?}: {source}")]
    Parse {
        name: String,
        #[source]
        source: ParseError,
    },
    /// Kernel arguments cannot be migrated for a spec below 3.3 (500).
    #[error("failed to migrate kernel args: can't serve version {0} with ignition KernelArguments.ShouldNotExist populated")]
    KernelArguments(SpecVersion),
    /// The config cannot be expressed in the requested spec (500).
    #[error("machine config {name:?}: {source}")]
    Translate {
        name: String,
        #[source]
        source: TranslateError,
    },
    /// Cluster mode: the caches have not synced yet (503).
    #[error("caches have not synced yet")]
    NotReady,
}

impl RenderError {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::PoolNotServed(_) => "pool_not_served",
            Self::UnknownPool(_) => "unknown_pool",
            Self::MissingMachineConfig { .. } => "missing_machine_config",
            Self::InvalidInput(_) => "invalid_input",
            Self::Parse { .. } => "parse",
            Self::KernelArguments(_) => "kernel_arguments",
            Self::Translate { .. } => "translate",
            Self::NotReady => "not_ready",
        }
    }
}

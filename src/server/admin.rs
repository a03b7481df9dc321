//! The admin (metrics) listener: plain HTTP, bound to `--metrics-bind-address` (default
//! `127.0.0.1:22625`), never to the public ports.
//!
//! Routes: `GET /metrics` (OpenMetrics text), `GET /readyz` (200 once ready, else 503),
//! `GET /healthz` (200 while the process serves), `GET /status` (JSON pool status board, the
//! latest first-boot failure reports, sanitized as their Events are, and the serving
//! certificate: its files, key kind, expiry, since when, the newest refused reload).
//! `HEAD` works wherever `GET` does; other methods get 405, other paths 404.
//!
//! Owns: these routes and their response shapes. Must not touch: config rendering, the
//! Kubernetes API, files. Everything it shows comes from [`Metrics`], the readiness flag, the
//! [`PoolStatusBoard`], and in cluster mode the snapshot's synced inputs and the features'
//! rights; none of those hold secrets (no kubeconfig, token, key or payload bytes).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;
use tokio::sync::watch;

use crate::metrics::{FailureStatus, Metrics, PoolStatus, PoolStatusBoard};
use crate::render::waiting_for;
use crate::rights::{FeatureState, Grants};
use crate::server::tls::reload::{CertificateState, ReloadStats};
use crate::snapshot::{Mode, Snapshot};

/// The admin listener's default bind address (`--metrics-bind-address`; empty disables it).
pub const DEFAULT_BIND_ADDRESS: &str = "127.0.0.1:22625";

/// What the admin routes read: cheap handles shared with the rest of the server.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// The registry `/metrics` encodes.
    pub metrics: Arc<Metrics>,
    /// True once the server can answer config requests (cluster mode: every cache synced).
    pub ready: watch::Receiver<bool>,
    /// The per-pool status `/status` shows.
    pub pools: PoolStatusBoard,
    /// Cluster mode: the snapshot served from (which pools can be served, and what each still
    /// waits for).
    pub snapshots: Option<watch::Receiver<Arc<Snapshot>>>,
    /// Cluster mode: the rights of the features beyond the original.
    pub features: Option<watch::Receiver<Arc<Grants>>>,
    /// The TLS port's certificate (`None` without one).
    pub certificate: Option<ReloadStats>,
}

/// The body of `/status`.
#[derive(Debug, Serialize)]
pub struct StatusPage {
    /// The readiness flag, as `/readyz` reports it.
    pub ready: bool,
    /// Every existing pool the server has answered for, by name.
    pub pools: BTreeMap<String, PoolStatus>,
    /// The newest first-boot failures machines reported to this replica, newest first
    /// (absent while there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub firstboot_failures: Vec<FailureStatus>,
    /// Cluster mode: every pool of the cluster, whether it can be served now and the caches it
    /// still waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness: Option<BTreeMap<String, PoolReadiness>>,
    /// Cluster mode: each feature beyond the original, on or off and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<&'static str, FeatureState>>,
    /// The TLS port's certificate: which files hold what, since when, and the newest refused
    /// reload (absent when the TLS port is off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_certificate: Option<CertificateState>,
}

/// Whether a pool can be served, and what it waits for.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct PoolReadiness {
    pub ready: bool,
    /// Kinds whose caches have not synced (`MachineOSBuild`, `Node`, ...).
    pub waiting_for: Vec<&'static str>,
}

/// Every pool of a cluster-mode snapshot with its readiness (`None` in bootstrap mode).
pub fn pool_readiness(snapshot: &Snapshot) -> Option<BTreeMap<String, PoolReadiness>> {
    if snapshot.mode != Mode::Cluster {
        return None;
    }
    Some(
        snapshot
            .pools
            .keys()
            .map(|pool| {
                let waiting: Vec<&'static str> = waiting_for(snapshot, pool)
                    .into_iter()
                    .map(|input| input.kind())
                    .collect();
                let readiness = PoolReadiness {
                    ready: waiting.is_empty() && snapshot.generation > 0,
                    waiting_for: waiting,
                };
                (pool.clone(), readiness)
            })
            .collect(),
    )
}

/// The admin router, served by [`crate::server::listener::serve`]; tests drive it without sockets.
pub fn admin_router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/readyz", get(readyz))
        .route("/healthz", get(healthz))
        .route("/status", get(status))
        .with_state(state)
}

async fn metrics(State(state): State<AdminState>) -> Response<Body> {
    // Sampled when scraped, so `mcs_ready` is exactly what /readyz answers now.
    state.metrics.set_ready(*state.ready.borrow());
    text_response(
        StatusCode::OK,
        Metrics::CONTENT_TYPE,
        state.metrics.encode(),
    )
}

async fn readyz(State(state): State<AdminState>) -> Response<Body> {
    let ready = *state.ready.borrow();
    if ready {
        text_response(StatusCode::OK, TEXT_PLAIN, "ok\n".to_owned())
    } else {
        text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT_PLAIN,
            "not ready\n".to_owned(),
        )
    }
}

async fn healthz() -> Response<Body> {
    text_response(StatusCode::OK, TEXT_PLAIN, "ok\n".to_owned())
}

async fn status(State(state): State<AdminState>) -> Response<Body> {
    let page = StatusPage {
        ready: *state.ready.borrow(),
        pools: state.pools.snapshot(),
        firstboot_failures: state.pools.failures(),
        readiness: state
            .snapshots
            .as_ref()
            .and_then(|snapshots| pool_readiness(&snapshots.borrow())),
        features: state.features.as_ref().map(|grants| {
            grants
                .borrow()
                .states()
                .into_iter()
                .map(|(feature, state)| (feature.as_str(), state))
                .collect()
        }),
        serving_certificate: state.certificate.as_ref().map(ReloadStats::certificate),
    };
    match serde_json::to_string_pretty(&page) {
        Ok(body) => text_response(StatusCode::OK, APPLICATION_JSON, body),
        Err(err) => {
            // Only plain strings and numbers are serialized; this cannot happen in practice.
            tracing::error!(error = %err, "serializing the status page failed");
            text_response(StatusCode::INTERNAL_SERVER_ERROR, TEXT_PLAIN, String::new())
        }
    }
}

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
const APPLICATION_JSON: &str = "application/json";

fn text_response(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Every answer describes "now"; a cached one would be wrong.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

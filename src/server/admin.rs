//! The admin (metrics) listener: plain HTTP, bound to `--metrics-bind-address` (default
//! `127.0.0.1:22625`), never to the public ports.
//!
//! Routes: `GET /metrics` (OpenMetrics text), `GET /readyz` (200 once ready, else 503),
//! `GET /healthz` (200 while the process serves), `GET /status` (JSON pool status board and
//! the latest first-boot failure reports, sanitized as their Events are).
//! `HEAD` works wherever `GET` does; other methods get 405, other paths 404.
//!
//! Owns: these routes and their response shapes. Must not touch: config rendering, the
//! Kubernetes API, files. Everything it shows comes from [`Metrics`], the readiness flag and the
//! [`PoolStatusBoard`]; none of those hold secrets (no kubeconfig, token, key or payload bytes).

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

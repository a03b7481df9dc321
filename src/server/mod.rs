//! HTTP surface: routing, the one error-to-status mapping, TLS and listeners.
//!
//! The routes match the original server on both ports: `GET`/`HEAD /config/<pool>`, `/healthz`,
//! and 404/405 for everything else, with empty bodies and `Content-Length: 0` on every error;
//! plus `POST /v1/node-failure` ([`node_failure`]) as upstream's open proposal has it.
//! The handler never performs I/O: it reads the current snapshot and the payload cache. In
//! cluster mode a 200 waits, at most 2 s, for the batched write that carries its served
//! record ([`commit`]); it never calls the API itself.
//!
//! What the request path reports to the cluster-mode tasks above it lives here, so that they
//! depend on the server and not the other way round: the served-request log ([`served`]) and
//! its group commit ([`commit`]) for the MachineConfigNode publisher, the notices for
//! Kubernetes Events ([`notices`]), and the layered decisions served ([`layered_decisions`]).
//!
//! Who the client is: the connection's peer, or the client a trusted load balancer names in a
//! PROXY protocol header ([`proxy_protocol`], off by default); which Ignition release it runs
//! (its `User-Agent`, [`crate::ignition::client`]), optionally refused when too old
//! ([`min_ignition`]).

pub mod access;
pub mod admin;
pub mod commit;
pub mod held_tail;
pub mod layered_decisions;
pub mod listener;
pub mod min_ignition;
pub mod node_failure;
pub mod notices;
pub mod per_source;
pub mod pool_path;
pub mod proxy_protocol;
pub mod served;
pub mod stall;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody as _};
use axum::extract::{Request, State};
use axum::Router;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Response, StatusCode};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::cache::{CacheKey, CacheOutcome, PayloadCache};
use crate::ignition::client::IgnitionRelease;
use crate::ignition::{accept, SpecVersion};
use crate::metrics::{Metrics, PoolLabel, PoolStatusBoard};
use crate::render::{self, RenderError, Rendered};
use crate::snapshot::Snapshot;
use crate::telemetry;
use crate::telemetry::ErrorChain;
use commit::{Durability, DEFAULT_WAIT_BOUND as RECORD_WAIT_BOUND};
use layered_decisions::DecisionTracker;
use notices::EventNotices;
use served::ServedLog;

/// How long a config request that arrives before the caches synced waits for them before its
/// 503. A DaemonSet's rolling update starts the new pod on the old one's ports at once, so the
/// balancer, whose checks never saw the port go, sends it machines within milliseconds, while
/// its caches take a few hundred to sync: those machines wait that long instead of getting a
/// 503 and their Ignition's retry (the switch rehearsal's wave found it). Bounded, so that a
/// replica whose API is down still answers a clear 503 within seconds.
const READY_WAIT: Duration = Duration::from_secs(3);

/// Whether the source is ready now or turns ready within `bound`.
async fn ready_within(ready: &watch::Receiver<bool>, bound: Duration) -> bool {
    if *ready.borrow() {
        return true;
    }
    let mut ready = ready.clone();
    let turned = tokio::time::timeout(bound, ready.wait_for(|ready| *ready))
        .await
        .is_ok_and(|changed| changed.is_ok());
    turned
}

/// Shared state of the request handlers: cheap handles only.
#[derive(Clone)]
pub struct AppState {
    /// The latest snapshot published by the source.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// False until the source has a complete view (cluster mode: every cache synced).
    pub ready: watch::Receiver<bool>,
    /// Rendered payloads per (pool, version, generation).
    pub cache: PayloadCache,
    /// Prometheus metrics (also served by the admin listener).
    pub metrics: Arc<Metrics>,
    /// Per-pool status shown on the admin listener's `/status`.
    pub pools: PoolStatusBoard,
    /// Optional source/token restrictions on `/config/` (allow-all by default).
    pub access: Arc<access::AccessPolicy>,
    /// Last layered-image decision per pool: reports each served one (log, metric, status).
    pub layered: Arc<DecisionTracker>,
    /// What each remote address was last answered (read by the MachineConfigNode publisher).
    pub served: ServedLog,
    /// Renders that succeeded or failed, for the Kubernetes Events of the lease holder.
    pub events: EventNotices,
    /// `--min-ignition-version`: older Ignition clients are refused (off by default).
    pub min_ignition: Option<Arc<min_ignition::MinIgnition>>,
    /// The per-source budget of `/v1/node-failure` reports.
    pub failure_intake: Arc<node_failure::FailureIntake>,
}

/// The remote address of the connection a request arrived on (set by the listener).
#[derive(Clone, Copy, Debug)]
pub struct RemoteAddr(pub SocketAddr);

/// The router shared by the secure and insecure listeners.
pub fn router(state: AppState) -> Router {
    Router::new().fallback(dispatch).with_state(state)
}

/// Route by path by hand: the original's `ServeMux` rules (prefix `/config/`, exact `/healthz`,
/// everything else the default handler) are simpler to state than to express as axum routes.
async fn dispatch(State(state): State<AppState>, request: Request) -> Response<Body> {
    let path = request.uri().path();
    if path == "/healthz" {
        return empty(if is_read(request.method()) {
            StatusCode::OK
        } else {
            StatusCode::METHOD_NOT_ALLOWED
        });
    }
    if path.starts_with("/config/") {
        return config(state, request).await;
    }
    if path == node_failure::PATH {
        return node_failure::report(state, request).await;
    }
    empty(if is_read(request.method()) {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::METHOD_NOT_ALLOWED
    })
}

fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// What a config request turned out to be, filled in by [`answer_config`] for the metrics.
#[derive(Default)]
struct Observed {
    pool: Option<String>,
    version: Option<SpecVersion>,
    rendered_config: Option<String>,
    error_kind: Option<&'static str>,
    /// A 200 whose last byte waits for its served record ([`held_tail`]): the body and the
    /// wait. [`config`] sends it, and counts the answer when it is complete.
    held: Option<HeldAnswer>,
}

/// The body of a 200 that waits for its record, and the wait (which itself reports an answer
/// sent before its record was durable).
struct HeldAnswer {
    body: Bytes,
    durable: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Runs its closure once, when dropped.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run();
        }
    }
}

/// `GET`/`HEAD /config/<pool>`: [`answer_config`] inside the request span, then the metrics, the
/// span's outcome fields, the pool status board and the one info line per request. An answer
/// whose last byte waits for its served record is counted once it is complete (its record
/// durable, or the wait's bound passed) or abandoned (the machine went away), whichever comes
/// first: a replica that dies before its write succeeded has counted no answer that no machine
/// got, and `mcs_requests_total` agrees with the 200s machines saw.
async fn config(state: AppState, request: Request) -> Response<Body> {
    let started = Instant::now();
    let span = {
        let header = |name| {
            request
                .headers()
                .get(name)
                .map(|v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        telemetry::request_span(
            request.extensions().get::<RemoteAddr>().map(|r| r.0),
            header(USER_AGENT).as_deref(),
            header(ACCEPT).as_deref(),
        )
    };
    let mut observed = Observed::default();
    let mut response = answer_config(&state, request, &mut observed)
        .instrument(span.clone())
        .await;

    let status = response.status().as_u16();
    match observed.held.take() {
        None => {
            let bytes = response.body().size_hint().exact().unwrap_or(0);
            account(&state, &span, &observed, status, bytes, started.elapsed());
        }
        Some(HeldAnswer { body, durable }) => {
            let bytes = u64::try_from(body.len()).unwrap_or(u64::MAX);
            let accounted = OnDrop(Some({
                let span = span.clone();
                move || account(&state, &span, &observed, status, bytes, started.elapsed())
            }));
            let release = async move {
                durable.await;
                drop(accounted);
            }
            .instrument(span);
            *response.body_mut() = Body::new(held_tail::HeldTail::new(body, release));
        }
    }
    response
}

/// The metrics, the span's outcome fields, the pool status board and the one info line of an
/// answered config request.
fn account(
    state: &AppState,
    span: &tracing::Span,
    observed: &Observed,
    status: u16,
    bytes: u64,
    elapsed: std::time::Duration,
) {
    let pool_label = match &observed.pool {
        Some(pool) => {
            let exists = matches!(state.snapshots.borrow().pools.get(pool), Some(Ok(_)));
            PoolLabel::new(pool, exists)
        }
        None => PoolLabel::unknown(),
    };
    telemetry::record_response(span, status, bytes, elapsed);
    state
        .metrics
        .record_request(&pool_label, observed.version, status, elapsed, bytes);
    state.pools.record_served(
        &pool_label,
        observed.version,
        status,
        observed.rendered_config.as_deref(),
    );
    if let Some(kind) = observed.error_kind {
        telemetry::record_error_kind(span, kind);
        state.pools.record_error(&pool_label, kind, status);
    }
    // The one info line per request (as the original), carrying every span field.
    span.in_scope(|| tracing::info!("config request answered"));
}

async fn answer_config(
    state: &AppState,
    request: Request,
    observed: &mut Observed,
) -> Response<Body> {
    // Only the head is needed; the body of a GET/HEAD is never read.
    let (request, _body) = request.into_parts();
    if !is_read(&request.method) {
        return empty(StatusCode::METHOD_NOT_ALLOWED);
    }
    let head = request.method == Method::HEAD;
    let header = |name| {
        request
            .headers
            .get(name)
            .map(|v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let accept_header = header(ACCEPT);
    let user_agent = header(USER_AGENT).unwrap_or_default();
    let client = IgnitionRelease::from_user_agent(
        request
            .headers
            .get(USER_AGENT)
            .and_then(|v| v.to_str().ok()),
    );
    let remote_addr = request.extensions.get::<RemoteAddr>().map(|r| r.0);
    let remote = remote_addr.map(|r| r.to_string()).unwrap_or_default();
    if let Err(denial) = state.access.check(
        remote_addr.map(|r| r.ip()),
        request.headers.get(http::header::AUTHORIZATION),
    ) {
        // Logged without the token; counted with the other answers (code 403).
        tracing::warn!(%remote, path = request.uri.path(), reason = denial.as_str(), "config request denied");
        observed.error_kind = Some(denial.as_str());
        return empty(StatusCode::FORBIDDEN);
    }

    let (pool, traversal) = match pool_path::parse(request.uri.path()) {
        Ok(parsed) => (parsed.pool, parsed.traversal),
        Err(e) => {
            tracing::info!(path = request.uri.path(), %remote, %user_agent, reason = %e, "rejected config request");
            return empty(e.status());
        }
    };
    tracing::debug!(
        %pool, %remote, %user_agent, accept = accept_header.as_deref().unwrap_or(""),
        "config requested"
    );
    telemetry::record_pool(&tracing::Span::current(), &pool);
    observed.pool = Some(pool.clone());
    state
        .metrics
        .ignition_client(IgnitionRelease::label_of(client.as_ref()));
    if let Some(floor) = &state.min_ignition {
        let exists = matches!(state.snapshots.borrow().pools.get(&pool), Some(Ok(_)));
        if let Some(refusal) = floor.check(&pool, exists, client.as_ref(), Instant::now()) {
            let version = client
                .as_ref()
                .map(IgnitionRelease::as_str)
                .unwrap_or_default();
            state.metrics.ignition_refusal(
                &PoolLabel::new(&pool, exists),
                IgnitionRelease::label_of(client.as_ref()),
            );
            if refusal.tell {
                tracing::warn!(%pool, %remote, ignition = version, minimum = %floor.minimum(), "refusing config requests from an Ignition older than --min-ignition-version: the machine's boot image is too old (it retries; at most one line per pool and 10 minutes)");
                state
                    .events
                    .ignition_too_old(&pool, version, floor.minimum().as_str());
            } else {
                tracing::debug!(%pool, %remote, ignition = version, "refusing a config request from an old Ignition");
            }
            observed.error_kind = Some("ignition_too_old");
            return empty(StatusCode::SERVICE_UNAVAILABLE);
        }
    }
    let version = match accept::negotiate(accept_header.as_deref()) {
        Ok(version) => {
            // The span's spec_version is recorded once, with the answer: the text log would
            // print a field recorded twice twice.
            observed.version = Some(version);
            version
        }
        Err(e) => {
            tracing::info!(%pool, error = %e, "unsupported Ignition version requested");
            return empty(StatusCode::BAD_REQUEST);
        }
    };
    if !ready_within(&state.ready, READY_WAIT).await {
        telemetry::record_spec_version(&tracing::Span::current(), version);
        tracing::info!(%pool, "not ready: the caches every pool reads have not synced yet");
        return empty(StatusCode::SERVICE_UNAVAILABLE);
    }
    let snapshot = state.snapshots.borrow().clone();
    let key = CacheKey {
        pool: Arc::from(pool.as_str()),
        version,
        generation: snapshot.generation,
    };
    let lookup = {
        let pool = pool.clone();
        state
            .cache
            .lookup(key, move || render::render(&snapshot, &pool, version))
            .await
    };
    match lookup.outcome {
        CacheOutcome::Miss => state.metrics.cache_miss(),
        CacheOutcome::Hit | CacheOutcome::Joined => state.metrics.cache_hit(),
    }
    // A render happened (not a cached answer): news for the pool's events, once per input
    // generation whatever the request rate.
    if lookup.outcome == CacheOutcome::Miss {
        let served = lookup.result.as_ref().map_or(version, |r| r.version);
        report_render(state, &pool, served, lookup.result.as_ref().err());
    }
    match lookup.result {
        Ok(rendered) => {
            observed.rendered_config = Some(rendered.rendered_config.clone());
            // The spec served follows the rendered config too (3.6 only from a 3.6 config):
            // the log, the metrics and the pool board carry what was served.
            let version = rendered.version;
            telemetry::record_spec_version(&tracing::Span::current(), version);
            observed.version = Some(version);
            tracing::debug!(%pool, spec_version = %version, bytes = rendered.body.len(), cache = lookup.outcome.as_str(), "config served");
            if let Some(decision) = &rendered.layered {
                state.layered.observe(
                    &pool,
                    &rendered.rendered_config,
                    decision,
                    &state.metrics,
                    &state.pools,
                );
            }
            if head {
                return ok_json(&rendered, Body::empty());
            }
            // MCN publisher hook: the bootstrap record of the node this address becomes. The
            // body goes out at once but for its last byte, which waits (bounded) until the
            // batched write carrying the record has succeeded: a replica that dies before that
            // has told the machine nothing, and the write overlaps the transfer ([`held_tail`]).
            let Some(sequence) =
                state
                    .served
                    .record_answer(remote_addr, &pool, &rendered, client.as_ref())
            else {
                return ok_json(&rendered, Body::from(rendered.body.clone()));
            };
            let durable = state.served.durable(sequence, RECORD_WAIT_BOUND);
            let metrics = state.metrics.clone();
            observed.held = Some(HeldAnswer {
                body: rendered.body.clone(),
                durable: Box::pin(async move {
                    if durable.await == Durability::Pending {
                        tracing::debug!("answering before the served record is durable (API slow or unreachable)");
                        metrics.served_before_durable();
                    }
                }),
            });
            // [`config`] puts the held body in.
            ok_json(&rendered, Body::empty())
        }
        Err(e) => {
            telemetry::record_spec_version(&tracing::Span::current(), version);
            let status = match &*e {
                RenderError::PoolNotServed(_) | RenderError::UnknownPool(_) if traversal => {
                    StatusCode::NOT_FOUND
                }
                e => status_for(e),
            };
            observed.error_kind = Some(e.kind());
            // Count each failed render once, not every time its cached result is served.
            if lookup.outcome == CacheOutcome::Miss {
                state.metrics.render_error(e.kind());
            }
            // A failed render is cached per generation: log its cause once, when it happened,
            // not on every retry of every booting machine.
            if lookup.outcome == CacheOutcome::Hit {
                tracing::debug!(%pool, spec_version = %version, status = status.as_u16(), error = %ErrorChain(&*e), "cached failure served");
            } else if let RenderError::NotReady(_) = &*e {
                // Not a fault: this pool's own caches are still syncing (other pools serve).
                tracing::info!(%pool, spec_version = %version, status = status.as_u16(), reason = %e, "pool not ready yet");
            } else if status.is_server_error() {
                tracing::error!(%pool, spec_version = %version, status = status.as_u16(), error = %ErrorChain(&*e), "could not serve config");
            } else {
                tracing::info!(%pool, spec_version = %version, status = status.as_u16(), error = %ErrorChain(&*e), "config not found");
            }
            empty(status)
        }
    }
}

/// Tells the event publisher how a render for an existing pool went.
fn report_render(
    state: &AppState,
    pool: &str,
    version: SpecVersion,
    error: Option<&Arc<RenderError>>,
) {
    let exists = matches!(state.snapshots.borrow().pools.get(pool), Some(Ok(_)));
    if !exists {
        return;
    }
    match error {
        None => state.events.rendered(pool, version),
        Some(error) => state.events.render_failed(
            pool,
            version,
            error.kind(),
            status_for(error).as_u16(),
            ErrorChain(&**error).to_string(),
        ),
    }
}

/// The one place render errors become HTTP statuses. Ignition retries every 5xx forever and gives
/// up on a 4xx, so only "this config cannot exist" answers are 4xx.
pub fn status_for(error: &RenderError) -> StatusCode {
    match error {
        RenderError::NotFound(_) => StatusCode::NOT_FOUND,
        RenderError::NotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
        RenderError::PoolNotServed(_)
        | RenderError::UnknownPool(_)
        | RenderError::MissingMachineConfig { .. }
        | RenderError::InvalidInput(_)
        | RenderError::Parse { .. }
        | RenderError::KernelArguments(_)
        | RenderError::Translate { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A 200 with the payload's headers and `body` (empty for HEAD; the payload itself for GET).
fn ok_json(rendered: &Rendered, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(rendered.body.len()));
    response
}

/// An error answer: empty body, `Content-Length: 0`, as the original.
fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::from(Bytes::new()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(0));
    response
}

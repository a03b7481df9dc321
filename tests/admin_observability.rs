//! The admin listener and the metrics behind it, as an operator sees them: the routes' status
//! codes and bodies (driven through the router without sockets, plus one run on a real loopback
//! socket), the exact counts a scripted set of requests leaves in `/metrics`, and the bound on
//! series when clients or callers send endless pool names.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use machine_config_server::ignition::SpecVersion;
use machine_config_server::metrics::{Metrics, PoolLabel, PoolStatusBoard, MAX_POOL_LABELS};
use machine_config_server::server::admin::{admin_router, AdminState};
use machine_config_server::server::listener::{serve, ConnectionLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tower::ServiceExt;

// ---------------------------------------------------------------------------------------------
// A small reader of the OpenMetrics text format, enough to look samples up by name and labels.

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(parse_sample)
        .collect()
}

fn parse_sample(line: &str) -> Sample {
    let (series, value) = line.rsplit_once(' ').expect("sample has a value");
    let value: f64 = value.parse().expect("numeric value");
    let Some((name, rest)) = series.split_once('{') else {
        return Sample {
            name: series.to_owned(),
            labels: BTreeMap::new(),
            value,
        };
    };
    let body = rest.strip_suffix('}').expect("labels end with }");
    let mut labels = BTreeMap::new();
    let mut chars = body.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "label value is quoted in {line}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => panic!("dangling escape in {line}"),
                },
                '"' => break,
                other => value.push(other),
            }
        }
        labels.insert(key, value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Sample {
        name: name.to_owned(),
        labels,
        value,
    }
}

/// The value of the one sample named `name` whose labels include all of `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "expected one sample {name}{labels:?}, found {matching:?}"
    );
    matching[0].value
}

/// The cumulative count of the `pool`'s latency histogram bucket whose bound is `le`.
fn bucket(samples: &[Sample], pool: &str, le: f64) -> f64 {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == "mcs_request_duration_seconds_bucket")
        .filter(|s| s.labels.get("pool").map(String::as_str) == Some(pool))
        .filter(|s| {
            let bound = s.labels.get("le").expect("bucket has le");
            let bound: f64 = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound.parse().expect("numeric le")
            };
            bound == le
        })
        .collect();
    assert_eq!(matching.len(), 1, "bucket {pool} le={le}: {matching:?}");
    matching[0].value
}

fn count_series(samples: &[Sample], name: &str) -> usize {
    samples.iter().filter(|s| s.name == name).count()
}

// ---------------------------------------------------------------------------------------------
// Metrics

const MS: Duration = Duration::from_millis(1);

/// The requests and events of a short boot storm, recorded on `metrics`.
fn record_script(metrics: &Metrics) {
    let master = PoolLabel::new("master", true);
    let worker = PoolLabel::new("worker", true);
    let nope = PoolLabel::new("no-such-pool", false);
    metrics.record_request(&master, Some(SpecVersion::V3_4), 200, MS / 2, 1000);
    metrics.record_request(&master, Some(SpecVersion::V3_4), 200, MS * 2, 1000);
    metrics.record_request(&master, Some(SpecVersion::V3_4), 200, MS * 20, 1000);
    metrics.record_request(&master, None, 400, Duration::from_micros(50), 0);
    metrics.record_request(&worker, Some(SpecVersion::V2_2), 200, MS * 3000, 500);
    metrics.record_request(&nope, Some(SpecVersion::V3_5), 500, MS, 0);
    metrics.record_request(&nope, Some(SpecVersion::V3_5), 500, MS, 0);
    metrics.render_error("unknown_pool");
    metrics.render_error("unknown_pool");
    metrics.render_error("translate");
    metrics.cache_hit();
    metrics.cache_hit();
    metrics.cache_miss();
    metrics.layered_decision(&worker, "base_image", "build_not_succeeded");
    metrics.tls_handshake_failure();
    metrics.cert_reload(true);
    metrics.cert_reload(false);
    metrics.cert_reload(false);
    metrics.set_cert_expiry(1_900_000_000);
    metrics.watch_restart("MachineConfigPool");
    metrics.synced("MachineConfigPool", 1_700_000_000);
    metrics.set_api_reachable(true);
    metrics.mcn_publish("created");
    metrics.mcn_publish("created");
    metrics.mcn_publish("conflict");
    metrics.build_info("0.1.0", "4.19.0");
}

#[test]
fn scripted_requests_change_the_metrics_by_exactly_that() {
    let metrics = Metrics::new();
    record_script(&metrics);
    let once = parse_exposition(&metrics.encode());

    let requests = |pool, version, code| {
        value(
            &once,
            "mcs_requests_total",
            &[("pool", pool), ("version", version), ("code", code)],
        )
    };
    assert_eq!(requests("master", "3.4.0", "200"), 3.0);
    assert_eq!(requests("master", "none", "400"), 1.0);
    assert_eq!(requests("worker", "2.2.0", "200"), 1.0);
    assert_eq!(requests("<unknown>", "3.5.0", "500"), 2.0);
    assert_eq!(count_series(&once, "mcs_requests_total"), 4);

    let count = |pool| {
        value(
            &once,
            "mcs_request_duration_seconds_count",
            &[("pool", pool)],
        )
    };
    assert_eq!(count("master"), 4.0);
    assert_eq!(count("worker"), 1.0);
    assert_eq!(count("<unknown>"), 2.0);
    // Cumulative buckets of master: 0.05 ms, 0.5 ms, 2 ms, 20 ms.
    assert_eq!(bucket(&once, "master", 0.0001), 1.0);
    assert_eq!(bucket(&once, "master", 0.0005), 2.0);
    assert_eq!(bucket(&once, "master", 0.001), 2.0);
    assert_eq!(bucket(&once, "master", 0.0025), 3.0);
    assert_eq!(bucket(&once, "master", 0.01), 3.0);
    assert_eq!(bucket(&once, "master", 0.025), 4.0);
    assert_eq!(bucket(&once, "master", f64::INFINITY), 4.0);
    assert_eq!(bucket(&once, "worker", 2.5), 0.0);
    assert_eq!(bucket(&once, "worker", 5.0), 1.0);
    let master_sum = value(
        &once,
        "mcs_request_duration_seconds_sum",
        &[("pool", "master")],
    );
    assert!((master_sum - 0.02255).abs() < 1e-9, "{master_sum}");

    let bytes = |pool| value(&once, "mcs_response_bytes_total", &[("pool", pool)]);
    assert_eq!(bytes("master"), 3000.0);
    assert_eq!(bytes("worker"), 500.0);
    assert_eq!(bytes("<unknown>"), 0.0);

    let render_errors = |kind| value(&once, "mcs_render_errors_total", &[("kind", kind)]);
    assert_eq!(render_errors("unknown_pool"), 2.0);
    assert_eq!(render_errors("translate"), 1.0);
    assert_eq!(value(&once, "mcs_cache_hits_total", &[]), 2.0);
    assert_eq!(value(&once, "mcs_cache_misses_total", &[]), 1.0);
    assert_eq!(
        value(
            &once,
            "mcs_layered_decisions_total",
            &[
                ("pool", "worker"),
                ("decision", "base_image"),
                ("reason", "build_not_succeeded")
            ]
        ),
        1.0
    );
    assert_eq!(value(&once, "mcs_tls_handshake_failures_total", &[]), 1.0);
    let reloads = |result| {
        value(
            &once,
            "mcs_certificate_reloads_total",
            &[("result", result)],
        )
    };
    assert_eq!(reloads("success"), 1.0);
    assert_eq!(reloads("failure"), 2.0);
    assert_eq!(
        value(
            &once,
            "mcs_serving_certificate_expiry_timestamp_seconds",
            &[]
        ),
        1_900_000_000.0
    );
    assert_eq!(
        value(
            &once,
            "mcs_watch_restarts_total",
            &[("kind", "MachineConfigPool")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &once,
            "mcs_last_sync_timestamp_seconds",
            &[("kind", "MachineConfigPool")]
        ),
        1_700_000_000.0
    );
    assert_eq!(value(&once, "mcs_api_reachable", &[]), 1.0);
    let mcn = |result| value(&once, "mcs_mcn_publish_total", &[("result", result)]);
    assert_eq!(mcn("created"), 2.0);
    assert_eq!(mcn("conflict"), 1.0);
    assert_eq!(
        value(
            &once,
            "mcs_build_info",
            &[("version", "0.1.0"), ("payload_version", "4.19.0")]
        ),
        1.0
    );

    // Running the same script again doubles every counter and histogram count: nothing else
    // counts behind the caller's back. Gauges stay where they were set.
    record_script(&metrics);
    let twice = parse_exposition(&metrics.encode());
    assert_eq!(once.len(), twice.len(), "no new series");
    for sample in &once {
        let after = value(&twice, &sample.name, &labels_of(sample));
        let is_cumulative = sample.name.ends_with("_total")
            || sample.name.ends_with("_count")
            || sample.name.ends_with("_bucket")
            || sample.name.ends_with("_sum");
        let expected = if is_cumulative {
            sample.value * 2.0
        } else {
            sample.value
        };
        assert!(
            (after - expected).abs() < 1e-9,
            "{} {:?}: {} then {after}",
            sample.name,
            sample.labels,
            sample.value
        );
    }
    // A second build_info call replaces the first instead of adding a series.
    metrics.build_info("0.2.0", "4.20.0");
    let replaced = parse_exposition(&metrics.encode());
    assert_eq!(count_series(&replaced, "mcs_build_info"), 1);
}

fn labels_of(sample: &Sample) -> Vec<(&str, &str)> {
    sample
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn endless_pool_names_keep_the_series_bounded() {
    let metrics = Metrics::new();
    let board = PoolStatusBoard::new();
    // Clients asking for 10,000 pools that do not exist.
    for i in 0..10_000 {
        let pool = PoolLabel::new(&format!("pool-{i}"), false);
        metrics.record_request(&pool, Some(SpecVersion::V3_4), 500, MS, 0);
        board.record_served(&pool, Some(SpecVersion::V3_4), 500, None);
    }
    let samples = parse_exposition(&metrics.encode());
    assert_eq!(count_series(&samples, "mcs_requests_total"), 1);
    assert_eq!(
        value(
            &samples,
            "mcs_requests_total",
            &[("pool", "<unknown>"), ("version", "3.4.0"), ("code", "500")]
        ),
        10_000.0
    );
    assert!(board.snapshot().is_empty(), "unknown pools have no status");

    // A caller bug (or years of pool churn) claiming 10,000 distinct pools exist.
    for i in 0..10_000 {
        let pool = PoolLabel::new(&format!("existing-{i}"), true);
        metrics.record_request(&pool, Some(SpecVersion::V3_4), 200, MS, 10);
        metrics.layered_decision(&pool, "base_image", "not_layered");
        board.record_served(&pool, Some(SpecVersion::V3_4), 200, Some("rendered-x"));
    }
    let samples = parse_exposition(&metrics.encode());
    let pool_values: BTreeSet<&str> = samples
        .iter()
        .filter_map(|s| s.labels.get("pool").map(String::as_str))
        .collect();
    // The first MAX_POOL_LABELS names, "<other>" and "<unknown>".
    assert_eq!(pool_values.len(), MAX_POOL_LABELS + 2, "{pool_values:?}");
    assert!(pool_values.contains("<other>"));
    assert_eq!(
        value(
            &samples,
            "mcs_requests_total",
            &[("pool", "<other>"), ("version", "3.4.0"), ("code", "200")]
        ),
        (10_000 - MAX_POOL_LABELS) as f64
    );
    // Every series: per pool one request counter, 17 buckets + sum + count, one bytes counter
    // and one layered counter; plus the handful of unlabelled or fixed-label metrics.
    let per_pool = 1 + 17 + 2 + 1 + 1;
    assert!(
        samples.len() <= (MAX_POOL_LABELS + 2) * per_pool + 20,
        "{} series",
        samples.len()
    );
    assert_eq!(board.snapshot().len(), MAX_POOL_LABELS);
}

// ---------------------------------------------------------------------------------------------
// Admin router

struct Admin {
    state: AdminState,
    ready: watch::Sender<bool>,
}

fn admin() -> Admin {
    let (ready, ready_rx) = watch::channel(false);
    Admin {
        state: AdminState {
            metrics: Arc::new(Metrics::new()),
            ready: ready_rx,
            pools: PoolStatusBoard::new(),
            snapshots: None,
            features: None,
            certificate: None,
        },
        ready,
    }
}

struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    body: String,
}

async fn call(state: &AdminState, method: Method, path: &str) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .expect("request");
    let response = admin_router(state.clone())
        .oneshot(request)
        .await
        .expect("router is infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().expect("ascii").to_owned());
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        content_type,
        body: String::from_utf8(body.to_vec()).expect("utf-8"),
    }
}

#[tokio::test]
async fn metrics_endpoint_serves_the_shared_registry() {
    let admin = admin();
    admin.state.metrics.record_request(
        &PoolLabel::new("master", true),
        Some(SpecVersion::V3_4),
        200,
        MS,
        4096,
    );
    let answer = call(&admin.state, Method::GET, "/metrics").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.content_type.as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(answer.body.ends_with("# EOF\n"), "{}", answer.body);
    let samples = parse_exposition(&answer.body);
    assert_eq!(
        value(
            &samples,
            "mcs_requests_total",
            &[("pool", "master"), ("version", "3.4.0"), ("code", "200")]
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "mcs_response_bytes_total", &[("pool", "master")]),
        4096.0
    );

    let head = call(&admin.state, Method::HEAD, "/metrics").await;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.body, "");
    let post = call(&admin.state, Method::POST, "/metrics").await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn readyz_follows_the_readiness_flag() {
    let admin = admin();
    let before = call(&admin.state, Method::GET, "/readyz").await;
    assert_eq!(before.status, StatusCode::SERVICE_UNAVAILABLE);
    admin.ready.send(true).expect("receiver alive");
    let after = call(&admin.state, Method::GET, "/readyz").await;
    assert_eq!(after.status, StatusCode::OK);
    assert_eq!(after.body, "ok\n");
    admin.ready.send(false).expect("receiver alive");
    let again = call(&admin.state, Method::GET, "/readyz").await;
    assert_eq!(again.status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn healthz_is_ok_even_before_ready() {
    let admin = admin();
    let answer = call(&admin.state, Method::GET, "/healthz").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "ok\n");
    let put = call(&admin.state, Method::PUT, "/healthz").await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn unknown_admin_paths_are_not_found() {
    let admin = admin();
    for path in ["/", "/config/master", "/metrics/extra", "/debug/pprof"] {
        let answer = call(&admin.state, Method::GET, path).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.body, "", "{path}");
    }
}

#[tokio::test]
async fn status_page_shows_what_the_server_recorded_per_pool() {
    let admin = admin();
    let empty = call(&admin.state, Method::GET, "/status").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.content_type.as_deref(), Some("application/json"));
    let page: serde_json::Value = serde_json::from_str(&empty.body).expect("JSON");
    assert_eq!(page, serde_json::json!({"ready": false, "pools": {}}));

    let board = &admin.state.pools;
    let master = PoolLabel::new("master", true);
    let worker = PoolLabel::new("worker", true);
    board.record_served(
        &master,
        Some(SpecVersion::V3_4),
        200,
        Some("rendered-master-abc"),
    );
    board.record_served(
        &master,
        Some(SpecVersion::V3_2),
        200,
        Some("rendered-master-abc"),
    );
    board.record_served(&worker, Some(SpecVersion::V3_4), 500, None);
    board.record_error(&worker, "translate", 500);
    board.record_layered(
        &worker,
        "base_image",
        "build_not_succeeded",
        Some("quay.io/x/y@sha256:0"),
    );
    board.record_served(&PoolLabel::new("ghost", false), None, 500, None);
    admin.ready.send(true).expect("receiver alive");

    let answer = call(&admin.state, Method::GET, "/status").await;
    assert_eq!(answer.status, StatusCode::OK);
    let page: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
    assert_eq!(page["ready"], true);
    let pools = page["pools"].as_object().expect("pools object");
    assert_eq!(
        pools.keys().collect::<Vec<_>>(),
        ["master", "worker"],
        "only existing pools"
    );
    let m = &pools["master"];
    assert_eq!(m["rendered_config"], "rendered-master-abc");
    assert_eq!(
        m["spec_versions_served"],
        serde_json::json!(["3.2.0", "3.4.0"])
    );
    assert_eq!(m["requests"], 2);
    assert_eq!(m["last_status"], 200);
    assert_eq!(m["last_error"], serde_json::Value::Null);
    let w = &pools["worker"];
    assert_eq!(w["spec_versions_served"], serde_json::json!([]));
    assert_eq!(w["last_error"]["kind"], "translate");
    assert_eq!(w["last_error"]["status"], 500);
    assert_eq!(w["layered"]["decision"], "base_image");
    assert_eq!(w["layered"]["reason"], "build_not_succeeded");
    assert_eq!(w["layered"]["image"], "quay.io/x/y@sha256:0");

    // The documented field set, nothing more (docs/operations.md lists these).
    let keys: Vec<&str> = m
        .as_object()
        .expect("pool object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "rendered_config",
            "spec_versions_served",
            "requests",
            "last_status",
            "last_request_unix_secs",
            "last_error",
            "layered"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The listener on a real loopback socket

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .expect("read response");
    String::from_utf8(response).expect("utf-8")
}

#[tokio::test]
async fn admin_router_answers_on_loopback_and_stops_on_shutdown() {
    let admin = admin();
    admin.state.metrics.build_info("0.1.0", "4.19.0");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        None,
        admin_router(admin.state.clone()),
        ConnectionLimits::default(),
        None,
        admin.state.metrics.clone(),
        async move {
            let _ = stopped.await;
        },
    ));

    let deadline = Duration::from_secs(10);
    let health = tokio::time::timeout(deadline, http_get(addr, "/healthz"))
        .await
        .expect("healthz in time");
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    let metrics = tokio::time::timeout(deadline, http_get(addr, "/metrics"))
        .await
        .expect("metrics in time");
    assert!(
        metrics.contains("mcs_build_info{version=\"0.1.0\",payload_version=\"4.19.0\"} 1"),
        "{metrics}"
    );
    let not_ready = tokio::time::timeout(deadline, http_get(addr, "/readyz"))
        .await
        .expect("readyz in time");
    assert!(
        not_ready.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{not_ready}"
    );

    stop.send(()).expect("server still running");
    tokio::time::timeout(deadline, server)
        .await
        .expect("server stops in time")
        .expect("server task did not panic");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed after shutdown"
    );
}

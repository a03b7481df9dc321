//! The admin listener of the real binary: after a few config requests on the public port, the
//! metrics, status page and JSON logs report exactly those requests, and the public ports do not
//! serve any admin route.

use std::time::Duration;
use support::mcs;

use mcs::{request, Server};

const ACCEPT_35: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
);
const MASTER_CONFIG: &str = "rendered-master-example";

fn start() -> Server {
    let base = mcs::repo().join("config/bootstrap");
    Server::bootstrap(
        &base,
        &["--payload-version", "4.19.0-test", "--log-format", "json"],
    )
}

/// The value of the sample `name{labels}` in an OpenMetrics text (labels in encoding order).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn admin_listener_reports_the_requests_served() {
    let server = start();
    let master = server.http("GET", "/config/master", &[ACCEPT_35]);
    assert_eq!(master.status, 200);
    let served_bytes = master.body.len();
    assert!(served_bytes > 0);
    assert_eq!(
        server.http("HEAD", "/config/master", &[ACCEPT_35]).status,
        200
    );
    // Bootstrap mode serves only master and arbiter: 500, counted under "<unknown>".
    assert_eq!(
        server
            .http("GET", "/config/some-client-made-this-up", &[ACCEPT_35])
            .status,
        500
    );
    assert_eq!(
        server.http("POST", "/config/master", &[ACCEPT_35]).status,
        405
    );

    let metrics = request(server.metrics, None, "GET", "/metrics", &[]);
    assert_eq!(metrics.status, 200);
    assert_eq!(
        metrics.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = String::from_utf8(metrics.body.clone()).expect("utf-8");
    let get = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series}\n{text}"));
    assert_eq!(
        get(r#"mcs_requests_total{pool="master",version="3.5.0",code="200"}"#),
        2.0
    );
    assert_eq!(
        get(r#"mcs_requests_total{pool="<unknown>",version="3.5.0",code="500"}"#),
        1.0
    );
    assert_eq!(
        get(r#"mcs_requests_total{pool="<unknown>",version="none",code="405"}"#),
        1.0
    );
    assert!(
        !text.contains("some-client-made-this-up"),
        "client-chosen pool names never become labels"
    );
    assert_eq!(
        get(r#"mcs_request_duration_seconds_count{pool="master"}"#),
        2.0
    );
    // HEAD sends no body.
    assert_eq!(
        get(r#"mcs_response_bytes_total{pool="master"}"#),
        served_bytes as f64
    );
    assert_eq!(
        get(r#"mcs_render_errors_total{kind="pool_not_served"}"#),
        1.0
    );
    // Three requests reached the payload cache (the 405 did not).
    assert_eq!(
        get("mcs_cache_hits_total") + get("mcs_cache_misses_total"),
        3.0
    );
    assert_eq!(
        get(r#"mcs_build_info{version="0.1.0",payload_version="4.19.0-test"}"#),
        1.0
    );

    let status = request(server.metrics, None, "GET", "/status", &[]);
    assert_eq!(status.status, 200);
    let page = status.json();
    assert_eq!(page["ready"], true);
    let pools = page["pools"].as_object().expect("pools");
    assert_eq!(pools.keys().collect::<Vec<_>>(), ["master"]);
    assert_eq!(pools["master"]["rendered_config"], MASTER_CONFIG);
    assert_eq!(
        pools["master"]["spec_versions_served"],
        serde_json::json!(["3.5.0"])
    );
    assert_eq!(pools["master"]["requests"], 2);
    assert_eq!(pools["master"]["last_status"], 200);

    assert_eq!(
        request(server.metrics, None, "GET", "/readyz", &[]).status,
        200
    );
    // No admin route on the public ports.
    for path in ["/metrics", "/status", "/readyz"] {
        assert_eq!(server.http("GET", path, &[]).status, 404, "{path}");
    }

    // The JSON log has one line per config request carrying the request span's fields.
    let line = mcs::poll("the request log line", Duration::from_secs(10), || {
        server.output().lines().find_map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).ok()?;
            let span = &value["span"];
            (value["message"] == "config request answered"
                && span["pool"] == "master"
                && span["status"] == 200)
                .then_some(value)
        })
    });
    let span = &line["span"];
    assert_eq!(span["name"], "request");
    assert_eq!(span["spec_version"], "3.5.0");
    assert_eq!(span["accept"], ACCEPT_35.1);
    assert!(span["remote_addr"]
        .as_str()
        .is_some_and(|a| a.starts_with("127.0.0.1:")));
    assert!(span["elapsed_ms"].as_f64().is_some());
    assert!(
        span["bytes"] == served_bytes || span["bytes"] == 0,
        "{line}"
    );
    let failed = mcs::poll(
        "the failed request's log line",
        Duration::from_secs(10),
        || {
            server.output().lines().find_map(|line| {
                let value: serde_json::Value = serde_json::from_str(line).ok()?;
                (value["message"] == "config request answered" && value["span"]["status"] == 500)
                    .then_some(value)
            })
        },
    );
    assert_eq!(failed["span"]["error_kind"], "pool_not_served");
    assert_eq!(failed["span"]["pool"], "some-client-made-this-up");
}

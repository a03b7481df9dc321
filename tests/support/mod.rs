//! Shared helpers for the integration tests. Each `tests/*.rs` file that needs them declares
//! `mod support;` and uses the modules below.

pub mod api_server;
pub mod fake_apiserver;
pub mod fault_proxy;
pub mod fixtures;
pub mod real_apiserver;
pub mod upstream;

/// A complete `machine-config-controller` ControllerConfig, as the cluster tests load it into
/// the fake API server.
#[allow(dead_code)]
pub const CONTROLLER_CONFIG: &str = include_str!("controller-config.yaml");

/// `GET path` through `router` without a socket, with the headers a current Ignition sends
/// (spec 3.5 preferred): the status and the body.
#[allow(dead_code)]
pub async fn router_get(router: &axum::Router, path: &str) -> (http::StatusCode, Vec<u8>) {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let request = http::Request::get(path)
        .header(
            "Accept",
            "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
        )
        .header("User-Agent", "Ignition/2.20.0")
        .body(axum::body::Body::empty())
        .expect("request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("infallible router");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body.to_vec())
}

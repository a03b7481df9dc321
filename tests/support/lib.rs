//! Test support of machine-config-server, a dev-only crate of the workspace: what the
//! integration tests (`tests/*.rs`) and the benches share. The tests name it `support`
//! (`support = { package = "mcs-test-support", ... }` in the root `Cargo.toml`).
//!
//! - [`mcs`]: the real `machine-config-server` binary on free loopback ports, and HTTP/1.1 to
//!   it over TCP or TLS, byte for byte.
//! - [`api_server`]: the Kubernetes API server a test gets: the in-test one
//!   ([`fake_apiserver`]), or a real kube-apiserver ([`real_apiserver`]) when
//!   `KUBEBUILDER_ASSETS` names one.
//! - [`cluster`]: the project's fixtures loaded into an API server as a cluster has them.
//! - [`dashboard`]: the console dashboard the project ships, as its panels and queries.
//! - [`balancer`], [`fault_proxy`]: the client-address-keeping load balancer in front of
//!   several replicas, and the fault-injecting proxy between a replica and its API server.
//! - [`haproxy`]: a real haproxy in front of the server, sending the PROXY protocol.
//! - [`hypershift`]: HyperShift's ignition server as a caller (its payload generation on ports
//!   22625 and 22626, in a network namespace of its own).
//! - [`rehearsal`]: a scale-up rehearsed end to end (three replicas behind haproxy, machines
//!   that speak as Ignition, the cluster's side, a rollout, an image build, a SIGKILL), judged
//!   in verdicts, with a timeline report (`benches/rehearsal.rs`, `tests/rehearsal.rs`).
//! - [`fixtures`], [`upstream`]: the project's own fixtures, and the upstream assets
//!   (`MCS_UPSTREAM_ASSETS`).
//! - [`ignition_samples`], [`validators`]: Ignition configs exercising every translated field,
//!   and the real Ignition validators (Debian's `ignition`, the upstream JSON schemas).
//! - [`elf`]: how an ELF executable links (`DT_NEEDED`, PIE), read as OpenShift's payload
//!   scanner reads it.
//! - [`openssl_fips`]: the environment of a server that loads OpenSSL's FIPS provider.
//! - [`prometheus`]: a real Prometheus on loopback scraping the servers a test names, and its
//!   HTTP API (the rehearsal's operator view evaluates the console dashboard through it).
//! - [`promql`]: the metrics and labels a PromQL expression reads, checked against real
//!   scrapes of the server (the alerting rules' and the dashboard's tests).
//! - [`tier`]: the `#[tier(...)]` attribute of tests that need more than this repository.

pub mod api_server;
pub mod balancer;
pub mod cluster;
pub mod dashboard;
pub mod elf;
pub mod fake_apiserver;
pub mod fault_proxy;
pub mod fixtures;
pub mod haproxy;
pub mod hypershift;
pub mod ignition_samples;
pub mod mcs;
pub mod openssl_fips;
pub mod prometheus;
pub mod promql;
pub mod real_apiserver;
pub mod rehearsal;
pub mod upstream;
pub mod validators;

/// `#[tier(NAME)]`: a test of a tier this machine cannot run is compiled as ignored, with the
/// reason (see the `mcs-test-macros` crate for the tiers and how they are probed).
pub use mcs_test_macros::tier;

/// Where Debian's `libfaketime` package puts its preload library, per architecture. The
/// `libfaketime` tier's probe (`tests/support/macros/build.rs`) looks in the same places.
pub const LIBFAKETIME_PATHS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// libfaketime's preload library, when installed.
pub fn libfaketime() -> Option<std::path::PathBuf> {
    LIBFAKETIME_PATHS
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.is_file())
}

/// A complete `machine-config-controller` ControllerConfig, as the cluster tests load it into
/// the fake API server.
pub const CONTROLLER_CONFIG: &str = include_str!("controller-config.yaml");

/// `GET path` through `router` without a socket, with the headers a current Ignition sends
/// (spec 3.5 preferred): the status and the body.
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

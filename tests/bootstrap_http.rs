//! The HTTP table of the original server (shared/docs/upstream-mcs.md), checked row by row
//! against the real binary in bootstrap mode, on both ports.

use std::fs;
use support::fixtures;
use support::mcs;
use support::tier;
use support::upstream;

use mcs::{served_files, Server};

const IGNITION_3_4: &str = "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1";
const IGNITION_3_5: &str = "application/vnd.coreos.ignition+json;version=3.5.0";

fn example() -> Server {
    Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[])
}

fn assert_empty_error(response: &mcs::Response, status: u16, what: &str) {
    assert_eq!(response.status, status, "{what}");
    assert_eq!(
        response.header("content-length"),
        Some("0"),
        "{what}: Content-Length"
    );
    assert!(response.body.is_empty(), "{what}: body");
}

#[test]
fn get_serves_json_with_exact_length_on_both_ports() {
    let server = example();
    for response in [
        server.http("GET", "/config/master", &[("Accept", IGNITION_3_4)]),
        server.https("GET", "/config/master", &[("Accept", IGNITION_3_4)]),
    ] {
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(
            response.header("content-length"),
            Some(response.body.len().to_string().as_str())
        );
        assert_eq!(response.json()["ignition"]["version"], "3.4.0");
    }
}

#[test]
fn head_has_the_headers_of_get_and_no_body() {
    let server = example();
    let get = server.http("GET", "/config/master", &[("Accept", IGNITION_3_5)]);
    let head = server.http("HEAD", "/config/master", &[("Accept", IGNITION_3_5)]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), get.header("content-length"));
    assert_eq!(head.header("content-type"), Some("application/json"));
}

#[test]
fn other_methods_on_config_are_405_with_empty_body() {
    let server = example();
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        assert_empty_error(&server.http(method, "/config/master", &[]), 405, method);
        assert_empty_error(&server.https(method, "/config/master", &[]), 405, method);
    }
}

#[test]
fn pool_name_is_the_last_path_segment() {
    let server = example();
    for path in [
        "/config/master/",
        "/config/a/master",
        "/config/..%2fmaster",
        "/config/master?x=1&y",
        "/config/master//",
    ] {
        let response = server.http("GET", path, &[("Accept", IGNITION_3_5)]);
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.json()["ignition"]["version"], "3.5.0", "{path}");
    }
    // `/config/` asks for a pool named `config`: not served in bootstrap mode (500, retryable).
    assert_empty_error(&server.http("GET", "/config/", &[]), 500, "/config/");
}

#[test]
fn config_without_slash_and_unknown_paths_follow_the_default_handler() {
    let server = example();
    for path in [
        "/config",
        "/",
        "/healthz/",
        "/metrics",
        "/configs/master",
        "/etc/passwd",
    ] {
        assert_empty_error(&server.http("GET", path, &[]), 404, path);
        assert_empty_error(&server.http("HEAD", path, &[]), 404, path);
        assert_empty_error(&server.http("POST", path, &[]), 405, path);
    }
}

#[test]
fn healthz_is_200_for_get_and_head_and_405_otherwise() {
    let server = example();
    for method in ["GET", "HEAD"] {
        assert_empty_error(&server.http(method, "/healthz", &[]), 200, method);
        assert_empty_error(&server.https(method, "/healthz", &[]), 200, method);
    }
    for method in ["POST", "PUT", "DELETE"] {
        assert_empty_error(&server.http(method, "/healthz", &[]), 405, method);
    }
}

#[test]
fn accept_header_picks_the_served_spec() {
    let server = example();
    let cases = [
        ("", "2.2.0"),
        ("*/*", "2.2.0"),
        ("text/plain", "2.2.0"),
        ("application/vnd.coreos.ignition+json", "2.2.0"),
        ("an-invalid-accept-header", "2.2.0"),
        ("application/vnd.coreos.ignition+json;version=2.2.0", "2.2.0"),
        ("application/vnd.coreos.ignition+json;version=2.4.0", "2.2.0"),
        ("application/vnd.coreos.ignition+json;version=3.1.0", "3.1.0"),
        ("application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1", "3.2.0"),
        ("application/vnd.coreos.ignition+json;version=3.3.0", "3.3.0"),
        ("application/vnd.coreos.ignition+json;version=3.4.7", "3.4.0"),
        ("application/vnd.coreos.ignition+json;version=3.99.0, */*;q=0.1", "3.5.0"),
        ("application/vnd.coreos.ignition+json;version=3.1.0;q=0.5, application/vnd.coreos.ignition+json;version=3.4.0;q=0.9", "3.4.0"),
    ];
    for (accept, expected) in cases {
        let headers: &[(&str, &str)] = if accept.is_empty() {
            &[]
        } else {
            &[("Accept", accept)]
        };
        let response = server.http("GET", "/config/master", headers);
        assert_eq!(response.status, 200, "Accept {accept:?}");
        assert_eq!(
            response.json()["ignition"]["version"],
            expected,
            "Accept {accept:?}"
        );
    }
}

#[test]
fn unsupported_ignition_versions_are_400() {
    let server = example();
    for version in ["4.0.0", "2.1.0", "1.0.0"] {
        let accept = format!("application/vnd.coreos.ignition+json;version={version}");
        assert_empty_error(
            &server.http("GET", "/config/master", &[("Accept", &accept)]),
            400,
            version,
        );
    }
    let no_fallback = "application/vnd.coreos.ignition+json;version=4.0.0, application/vnd.coreos.ignition+json;version=3.2.0;q=0.5";
    assert_empty_error(
        &server.http("GET", "/config/master", &[("Accept", no_fallback)]),
        400,
        "no fallback",
    );
}

#[test]
fn missing_pool_or_machine_config_file_is_404_and_other_pools_are_500() {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&mcs::repo().join("config/bootstrap"), dir.path());
    // arbiter: no pool file. A second copy of master's pool pointing at a missing MC.
    let server = Server::bootstrap(dir.path(), &[]);
    assert_empty_error(
        &server.http("GET", "/config/arbiter", &[]),
        404,
        "arbiter without a pool file",
    );
    for pool in ["worker", "infra", "config"] {
        assert_empty_error(
            &server.http("GET", &format!("/config/{pool}"), &[]),
            500,
            pool,
        );
    }
    fs::remove_file(
        dir.path()
            .join("machine-configs/rendered-master-example.yaml"),
    )
    .unwrap();
    mcs::poll(
        "404 once the MC file is gone",
        std::time::Duration::from_secs(5),
        || (server.http("GET", "/config/master", &[]).status == 404).then_some(()),
    );
}

#[test]
fn served_config_carries_the_appended_files_in_the_original_order() {
    let server = example();
    let response = server.http("GET", "/config/master", &[("Accept", IGNITION_3_5)]);
    let config = response.json();
    let files = served_files(&config);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    // CA file first (step 4), then the appenders in the original order, encapsulated MC last.
    assert_eq!(
        &paths[paths.len() - 5..],
        [
            "/etc/kubernetes/kubelet-ca.crt",
            "/etc/machine-config-daemon/node-annotations.json",
            "/etc/kubernetes/kubeconfig",
            "/etc/mcs-machine-config-content.json",
            "/etc/ignition-machine-config-encapsulated.json",
        ]
    );
    let file = |path: &str| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("{path} missing"))
    };

    let annotations: serde_json::Value =
        serde_json::from_slice(&file("/etc/machine-config-daemon/node-annotations.json")).unwrap();
    assert_eq!(
        annotations,
        serde_json::json!({
            "machineconfiguration.openshift.io/currentConfig": "rendered-master-example",
            "machineconfiguration.openshift.io/desiredConfig": "rendered-master-example",
            "machineconfiguration.openshift.io/firstPivotConfig": "rendered-master-example",
            "machineconfiguration.openshift.io/state": "Done",
        })
    );
    assert_eq!(
        file("/etc/kubernetes/kubeconfig"),
        fs::read(mcs::repo().join("config/bootstrap/kubeconfig")).unwrap()
    );
    assert_eq!(
        file("/etc/kubernetes/kubelet-ca.crt"),
        b"-----BEGIN CERTIFICATE-----\nexample\n-----END CERTIFICATE-----\n"
    );

    let content = String::from_utf8(file("/etc/mcs-machine-config-content.json")).unwrap();
    assert!(
        content.starts_with("{\n    \""),
        "4-space indented JSON: {}",
        &content[..40]
    );
    let content: serde_json::Value = serde_json::from_str(&content).unwrap();
    assert_eq!(content["metadata"]["name"], "rendered-master-example");
    assert_eq!(content["spec"]["config"]["ignition"]["version"], "3.5.0");

    let encapsulated: serde_json::Value =
        serde_json::from_slice(&file("/etc/ignition-machine-config-encapsulated.json")).unwrap();
    assert_eq!(
        encapsulated["spec"]["config"],
        serde_json::json!({"ignition": {"version": "3.5.0"}})
    );
    assert_eq!(
        encapsulated["spec"]["kernelArguments"],
        serde_json::json!(["systemd.unified_cgroup_hierarchy=1"])
    );

    // Every appended entry as the original writes it.
    for entry in config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take(4)
    {
        assert_eq!(entry["mode"], 420);
        assert_eq!(entry["overwrite"], true);
        assert!(entry["contents"]["source"]
            .as_str()
            .unwrap()
            .starts_with("data:,"));
    }
}

/// As the original's bootstrap server: the encapsulated MachineConfig carries an empty config
/// of spec 3.5, its newest, whatever was asked (issue 40).
#[test]
fn encapsulated_config_is_spec_3_5_whatever_was_asked() {
    let server = example();
    for asked in ["3.2.0", "2.2.0", "3.5.0"] {
        let accept = format!("application/vnd.coreos.ignition+json;version={asked}");
        let response = server.http("GET", "/config/master", &[("Accept", accept.as_str())]);
        let files = served_files(&response.json());
        let encapsulated = &files
            .iter()
            .find(|(p, _)| p == "/etc/ignition-machine-config-encapsulated.json")
            .unwrap()
            .1;
        let encapsulated: serde_json::Value = serde_json::from_slice(encapsulated).unwrap();
        assert_eq!(
            encapsulated["spec"]["config"],
            serde_json::json!({"ignition": {"version": "3.5.0"}}),
            "asked for {asked}"
        );
    }
}

#[test]
fn registry_certs_are_served_under_docker_certs_d() {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&mcs::repo().join("config/bootstrap"), dir.path());
    fs::create_dir_all(dir.path().join("certs")).unwrap();
    fs::write(dir.path().join("certs/registry.pem"), "REGISTRY CA\n").unwrap();
    let server = Server::bootstrap(
        dir.path(),
        &[
            "--bootstrap-certs",
            "registry.example:5000=certs/registry.pem",
        ],
    );
    let files = served_files(
        &server
            .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
            .json(),
    );
    let cert = files
        .iter()
        .find(|(p, _)| p == "/etc/docker/certs.d/registry.example:5000/ca.crt")
        .expect("cert served");
    assert_eq!(cert.1, b"REGISTRY CA\n");
    let before_encapsulated = &files[files.len() - 2].0;
    assert_eq!(
        before_encapsulated,
        "/etc/docker/certs.d/registry.example:5000/ca.crt"
    );
}

#[test]
fn changes_in_the_base_directory_are_served_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&mcs::repo().join("config/bootstrap"), dir.path());
    let server = Server::bootstrap(dir.path(), &[]);
    let before = server
        .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
        .body;
    let mc = dir
        .path()
        .join("machine-configs/rendered-master-example.yaml");
    let text = fs::read_to_string(&mc)
        .unwrap()
        .replace("Served%20by", "Changed%20and%20served%20by");
    fs::write(&mc, text).unwrap();
    let after = mcs::poll(
        "the changed MC to be served",
        std::time::Duration::from_secs(5),
        || {
            let body = server
                .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
                .body;
            (body != before).then_some(body)
        },
    );
    assert!(String::from_utf8_lossy(&after).contains("Changed%20and%20served%20by"));
}

#[test]
fn full_size_fixture_is_served_in_every_spec() {
    served_in_every_spec(&fixtures::bootstrap_full());
}

#[tier(upstream)]
#[test]
fn upstream_rendered_fixture_is_served_in_every_spec() {
    served_in_every_spec(&upstream::realistic_fixture());
}

fn served_in_every_spec(fixture: &std::path::Path) {
    let server = Server::bootstrap(fixture, &[]);
    for version in ["2.2.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] {
        let accept = format!("application/vnd.coreos.ignition+json;version={version}");
        let response = server.https("GET", "/config/master", &[("Accept", &accept)]);
        assert_eq!(response.status, 200, "{version}:\n{}", server.output());
        assert_eq!(response.json()["ignition"]["version"], version);
    }
    // The fixture has no arbiter pool; worker is not served in bootstrap mode.
    assert_eq!(server.http("GET", "/config/arbiter", &[]).status, 404);
    assert_eq!(server.http("GET", "/config/worker", &[]).status, 500);
}

/// The text log's line for a config request names the spec version once, with the version
/// served (a span field recorded twice was printed twice: `spec_version="3.4.0"
/// spec_version="3.4.0"`).
#[test]
fn the_request_log_line_names_the_spec_version_once() {
    let server = example();
    assert_eq!(
        server
            .http("GET", "/config/master", &[("Accept", IGNITION_3_4)])
            .status,
        200
    );
    let line = mcs::poll(
        "the request's log line",
        std::time::Duration::from_secs(10),
        || {
            server
                .output()
                .lines()
                .find(|line| line.contains("config request answered"))
                .map(str::to_owned)
        },
    );
    assert_eq!(
        line.matches("spec_version=").count(),
        1,
        "one spec_version in: {line}"
    );
    assert!(line.contains("spec_version=\"3.4.0\""), "{line}");
}

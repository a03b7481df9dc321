//! Which boot image a machine started from: the Ignition release in its `User-Agent`, and
//! `--min-ignition-version`, with the real binary:
//! - the real Ignition client (Debian's, fetch stage; its pointer config sets the `User-Agent`
//!   a boot image's Ignition sends, through `httpHeaders`) is refused with a 503 while too old,
//!   and retries until its time is up, as a machine waiting for a newer boot image; a new
//!   enough one is served, and so is a client that names no Ignition release (Debian's own
//!   `Ignition/Debian 2.14.0+ds1-1+b6` is not a release: parsed strictly, it is unknown);
//! - cluster mode: refusals are counted by pool and minor version, and the lease holder writes
//!   one Warning `BootImageTooOld` Event on the pool naming both versions, however many
//!   retries; the release of each served client is on its MCN.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::mcs;
use support::tier;

use machine_config_server::events::REPORTING_CONTROLLER;
use machine_config_server::mcn;
use mcs::{poll, Server};
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    load_realistic_cluster, mcn_annotation, token_dir, worker_node, APISERVER_URL,
};

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";
const DEADLINE: Duration = Duration::from_secs(30);
const ACCEPT: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
);

fn metric(server: &Server, series: &str) -> f64 {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Ignition's fetch stage with a pointer config merging `url`, sending `user_agent` when given,
/// giving up after `total_seconds`: whether it succeeded, and its log.
fn ignition_fetch(
    work: &Path,
    url: &str,
    user_agent: Option<&str>,
    total_seconds: u32,
) -> (bool, String) {
    let mut merge = json!({ "source": url });
    if let Some(agent) = user_agent {
        merge["httpHeaders"] = json!([{ "name": "User-Agent", "value": agent }]);
    }
    let pointer = json!({
        "ignition": {
            "version": "3.2.0",
            "config": { "merge": [merge] },
            "timeouts": { "httpTotal": total_seconds }
        }
    });
    let pointer_file = work.join("pointer.ign");
    std::fs::write(&pointer_file, serde_json::to_vec(&pointer).unwrap()).unwrap();
    let output = Command::new(IGNITION)
        .args(["-platform", "file", "-stage", "fetch", "-log-to-stdout"])
        .arg("-config-cache")
        .arg(work.join("ignition.json"))
        .arg("-state-file")
        .arg(work.join("state"))
        .arg("-neednet")
        .arg(work.join("neednet"))
        .arg("-root")
        .arg(work.join("root"))
        .env("IGNITION_CONFIG_FILE", &pointer_file)
        .output()
        .expect("run ignition");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), log)
}

#[tier(ignition)]
#[test]
fn a_too_old_ignition_is_refused_with_a_status_it_retries() {
    let server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--min-ignition-version", "2.20.0"],
    );
    let url = format!("http://127.0.0.1:{}/config/master", server.insecure.port());

    // A boot image with Ignition 2.14: refused, retried (several attempts) until its time is up.
    let old = tempfile::tempdir().unwrap();
    let (ok, log) = ignition_fetch(old.path(), &url, Some("Ignition/2.14.0"), 4);
    assert!(!ok, "a too old Ignition was served:\n{log}");
    let unavailable = log.matches("GET result: Service Unavailable").count();
    assert!(unavailable >= 2, "Ignition did not retry the 503:\n{log}");
    // Every attempt Ignition logged was a refusal (one more may have been cut by its timeout).
    let refused = metric(
        &server,
        r#"mcs_ignition_refusals_total{pool="master",ignition_version="2.14"}"#,
    );
    assert!(
        refused >= unavailable as f64 && refused <= unavailable as f64 + 1.0,
        "{refused} refusals, {unavailable} attempts"
    );
    // One log line for the pool, however many retries (read from the process's output: waited
    // for, then counted).
    let told = |output: &str| {
        output
            .lines()
            .filter(|l| l.contains("refusing config requests from an Ignition older"))
            .count()
    };
    poll("the refusal's log line", DEADLINE, || {
        (told(&server.output()) > 0).then_some(())
    });
    let output = server.output();
    assert_eq!(told(&output), 1, "{output}");

    // A new enough boot image is served at once; so is a client that names no release.
    for agent in [Some("Ignition/2.20.0"), None] {
        let work = tempfile::tempdir().unwrap();
        let (ok, log) = ignition_fetch(work.path(), &url, agent, 30);
        assert!(ok, "{agent:?} was not served:\n{log}\n{}", server.output());
        assert!(!log.contains("Service Unavailable"), "{log}");
    }
    assert_eq!(
        metric(
            &server,
            r#"mcs_config_requests_by_ignition_total{ignition_version="unknown"}"#
        ),
        1.0,
        "Debian's own User-Agent is not an Ignition release"
    );
    assert_eq!(
        metric(
            &server,
            r#"mcs_config_requests_by_ignition_total{ignition_version="2.20"}"#
        ),
        1.0
    );
}

fn events(api: &ApiServer, reason: &str) -> Vec<Value> {
    api.list("events.events.k8s.io")
        .into_iter()
        .filter(|e| e["reportingController"] == REPORTING_CONTROLLER && e["reason"] == reason)
        .collect()
}

#[test]
fn refusals_are_counted_and_told_once_per_pool_and_served_clients_recorded() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let server = Server::start_cluster_with_flags(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &["--min-ignition-version", "2.20.0"],
        &[
            (mcn::ENV_RESYNC_MS, "300"),
            (mcn::ENV_RETRY_PERIOD_MS, "200"),
        ],
    );
    let get = |agent: &str| {
        server
            .http("GET", "/config/worker", &[ACCEPT, ("User-Agent", agent)])
            .status
    };
    poll("the server ready and leading", DEADLINE, || {
        (get("Ignition/2.20.0") == 200 && support::cluster::lease_holder(&api).is_some())
            .then_some(())
    });
    for _ in 0..10 {
        assert_eq!(get("Ignition/v2.14.0"), 503);
    }
    let event = poll("the BootImageTooOld Event", DEADLINE, || {
        events(&api, "BootImageTooOld").into_iter().next()
    });
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["regarding"]["kind"], "MachineConfigPool");
    assert_eq!(event["regarding"]["name"], "worker");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("2.14.0") && note.contains("2.20.0"), "{note}");
    assert_eq!(events(&api, "BootImageTooOld").len(), 1);
    assert_eq!(
        metric(
            &server,
            r#"mcs_ignition_refusals_total{pool="worker",ignition_version="2.14"}"#
        ),
        10.0
    );
    // The machine that was served (from 127.0.0.1) joins: its MCN names its Ignition.
    api.create(&worker_node("worker-new", "127.0.0.1")).unwrap();
    let mcn = poll("worker-new's bootstrap record", DEADLINE, || {
        let mcn = api.get("MachineConfigNode", None, "worker-new")?;
        mcn_annotation(&mcn, "bootstrap-served-at")?;
        Some(mcn)
    });
    assert_eq!(
        mcn_annotation(&mcn, "bootstrap-ignition-client").as_deref(),
        Some("2.20.0")
    );
}

//! HyperShift's ignition server as a caller: the built binary run exactly as
//! `runMCSAndFetchPayload` runs it to make a NodePool's payload (`bootstrap` on ports 22625
//! and 22626, a Go client polling `http://localhost:22626/config/master` at spec 3.2.0 every
//! second, the process SIGKILLed after the first 200), each generation in a network namespace
//! of its own (`support::hypershift`).

use std::path::Path;
use std::time::Duration;

use support::hypershift::{self, PayloadDir, ACCEPT, POLL_INTERVAL};
use support::mcs::{bin, repo, Server};
use support::tier;

/// As HyperShift's own context allows a generation: far more than either server needs.
const DEADLINE: Duration = Duration::from_secs(30);
const PAYLOAD_VERSION: &str = "4.21.0";

/// What the server answers HyperShift's request for `dir`'s master pool when it runs the way
/// every other test runs it (free ports, its admin listener on): the answer the payload must be.
fn answer_on_free_ports(dir: &Path) -> Vec<u8> {
    let server = Server::bootstrap(dir, &[]);
    let response = server.http("GET", "/config/master", &[("Accept", ACCEPT)]);
    assert_eq!(response.status, 200, "{}", server.output());
    response.body
}

/// One generation in a fresh network namespace, with the binary extracted alone into the
/// work directory as HyperShift extracts it.
fn generate(dir: &PayloadDir) -> hypershift::Generation {
    let arguments = dir.arguments(PAYLOAD_VERSION);
    let binary = dir.extract(&bin());
    hypershift::in_network_namespace(move || {
        hypershift::generate(&binary, &arguments, POLL_INTERVAL, DEADLINE)
    })
    .expect("a network namespace")
    .unwrap_or_else(|why| panic!("HyperShift's payload generation failed: {why}"))
}

#[test]
#[tier(netns)]
fn hypershifts_payload_generation_gets_the_spec_3_2_answer() {
    let dir = PayloadDir::from_bootstrap_dir(&repo().join("config/bootstrap"));
    let generation = generate(&dir);
    assert_eq!(
        generation.payload,
        answer_on_free_ports(dir.path()),
        "the payload is not the server's 3.2.0 answer for the directory"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&generation.payload).expect("the payload is JSON");
    assert_eq!(config["ignition"]["version"], "3.2.0");
    assert_eq!(
        generation.content_type.as_deref(),
        Some("application/json"),
        "the original's Content-Type"
    );
    // The admin listener's default is the secure port HyperShift chose: it stays off, and
    // says so in one line.
    let off: Vec<&str> = generation
        .output
        .lines()
        .filter(|line| line.contains("admin listener off"))
        .collect();
    assert_eq!(off.len(), 1, "{}", generation.output);
    assert!(off[0].contains("--secure-port"), "{}", off[0]);
}

#[test]
#[tier(netns, upstream)]
fn the_payload_of_the_realistic_fixture_is_the_originals_bytes() {
    let dir = PayloadDir::from_bootstrap_dir(&support::upstream::realistic_fixture());
    let generation = generate(&dir);
    let recorded =
        std::fs::read_to_string(repo().join("tests/fixtures/hypershift/original-7ff337a4f.sha256"))
            .expect("the recorded digest");
    assert_eq!(
        hypershift::digest(&generation.payload),
        recorded.trim(),
        "the payload differs from the original's (tests/fixtures/hypershift/README.md)"
    );
}

#[test]
#[tier(netns)]
fn a_second_generation_serves_on_the_same_ports_right_after_the_first_is_killed() {
    let dir = PayloadDir::from_bootstrap_dir(&repo().join("config/bootstrap"));
    let arguments = dir.arguments(PAYLOAD_VERSION);
    let binary = dir.extract(&bin());
    // HyperShift runs generations one after the other under a lock, in one process tree (one
    // network namespace): the first server is SIGKILLed with the client's connection still
    // open, so its port keeps a connection in TIME_WAIT when the second one binds.
    let (first, second) = hypershift::in_network_namespace(move || {
        let first = hypershift::generate(&binary, &arguments, POLL_INTERVAL, DEADLINE);
        let second = hypershift::generate(&binary, &arguments, POLL_INTERVAL, DEADLINE);
        (first, second)
    })
    .expect("a network namespace");
    let first = first.unwrap_or_else(|why| panic!("first generation: {why}"));
    let second = second.unwrap_or_else(|why| panic!("second generation: {why}"));
    assert_eq!(first.payload, second.payload);
    assert!(
        !second.output.contains("cannot listen"),
        "the second server could not bind:\n{}",
        second.output
    );
    // Served at once: by HyperShift's first or second poll, as the first generation was.
    assert!(
        second.attempts <= 2,
        "the second generation needed {} polls ({:?}):\n{}",
        second.attempts,
        second.elapsed,
        second.output
    );
}

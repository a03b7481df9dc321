use super::*;

use serde_json::json;

use std::time::UNIX_EPOCH;

use crate::ignition::SpecVersion;
use crate::server::served::Answer;

/// Nodes are created at this Unix time.
const JOINED: u64 = 1_700_000_000;
/// Just beyond the clock-skew allowance after the nodes were created.
const TOO_LATE: u64 = JOINED + CLOCK_SKEW.as_secs() + 1;

fn node(name: &str, ips: &[&str]) -> Node {
    node_with_role(name, "worker", ips)
}

fn node_with_role(name: &str, role: &str, ips: &[&str]) -> Node {
    let addresses: Vec<_> = ips
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": "2023-11-14T22:13:20Z",
                     "labels": {format!("node-role.kubernetes.io/{role}"): ""}},
        "status": {"addresses": addresses}
    }))
    .unwrap()
}

fn record(pool: &str, config: &str, at: u64) -> ServedRecord {
    ServedRecord::new(
        Answer {
            pool: pool.into(),
            spec_version: SpecVersion::V3_5,
            ..Answer::worker(config)
        },
        UNIX_EPOCH + Duration::from_secs(at),
    )
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Records as (replica, address, pool, config, served at).
fn merged(records: &[(&str, &str, &str, &str, u64)]) -> MergedRecords {
    let mut published: BTreeMap<String, Vec<(IpAddr, ServedRecord)>> = BTreeMap::new();
    for (replica, address, pool, config, at) in records {
        published
            .entry(replica.to_string())
            .or_default()
            .push((ip(address), record(pool, config, *at)));
    }
    MergedRecords::merge(
        "",
        Vec::new(),
        &published,
        UNIX_EPOCH + Duration::from_secs(JOINED),
        Duration::from_secs(3600),
    )
}

/// What `match_node` says, short: `served_by config also` or `unknown reason` or `none`.
fn outcome(m: &BootstrapMatch) -> String {
    match m {
        BootstrapMatch::NoRecord => "none".into(),
        BootstrapMatch::Matched(b) => format!(
            "{} {} {} also={}",
            b.address,
            b.served_by.as_deref().unwrap_or("?"),
            b.record.rendered_config,
            b.also_served_by.join(",")
        ),
        BootstrapMatch::SourceUnknown { address, reason } => {
            format!("{address} unknown {}", reason.as_str())
        }
    }
}

/// (case, records as in [`merged`], other Nodes and their addresses, expected [`outcome`]).
type Case = (
    &'static str,
    &'static [(&'static str, &'static str, &'static str, &'static str, u64)],
    &'static [(&'static str, &'static [&'static str])],
    &'static str,
);

#[test]
fn matching_rules_table() {
    let cases: &[Case] = &[
        (
            "one replica served the node",
            &[("a", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 60)],
            &[],
            "10.0.0.5 a rendered-worker-1 also=",
        ),
        ("nothing served", &[], &[], "none"),
        (
            "another address only",
            &[("a", "10.0.0.6", "worker", "rendered-worker-1", JOINED - 60)],
            &[],
            "none",
        ),
        (
            "served after the node joined (beyond the skew): another machine reused the address",
            &[("a", "10.0.0.5", "worker", "rendered-worker-1", TOO_LATE)],
            &[],
            "none",
        ),
        (
            "served just after creation, within the skew",
            &[("a", "10.0.0.5", "worker", "rendered-worker-1", JOINED + 5)],
            &[],
            "10.0.0.5 a rendered-worker-1 also=",
        ),
        (
            "two replicas served the same config: the newest wins and names the other",
            &[
                ("a", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 90),
                ("c", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 30),
                ("b", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 60),
            ],
            &[],
            "10.0.0.5 c rendered-worker-1 also=a,b",
        ),
        (
            "two replicas served different configs: several machines behind one address",
            &[
                ("a", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 90),
                ("b", "10.0.0.5", "infra", "rendered-infra-1", JOINED - 30),
            ],
            &[],
            "10.0.0.5 unknown address-served-different-configs",
        ),
        (
            "the address is another node's too (a proxy on a control-plane node)",
            &[("a", "10.0.0.5", "worker", "rendered-worker-1", JOINED - 60)],
            &[("master-0", &["10.0.0.5"])],
            "10.0.0.5 unknown address-of-another-node",
        ),
        (
            "the node's second address was served; the first is nobody's",
            &[("b", "fd00::5", "worker", "rendered-worker-1", JOINED - 60)],
            &[],
            "fd00::5 b rendered-worker-1 also=",
        ),
        (
            "expired records are not merged",
            &[(
                "a",
                "10.0.0.5",
                "worker",
                "rendered-worker-1",
                JOINED - 3601,
            )],
            &[],
            "none",
        ),
    ];
    for (name, records, other_nodes, expected) in cases {
        let me = node("worker-5", &["10.0.0.5", "fd00::5"]);
        let others: Vec<Node> = other_nodes
            .iter()
            .map(|(name, ips)| node(name, ips))
            .collect();
        let owners = nodes_by_address(std::iter::once(&me).chain(others.iter()));
        let got = outcome(&match_node(&me, &merged(records), &owners));
        assert_eq!(got, *expected, "{name}");
    }
}

#[test]
fn records_count_only_for_nodes_of_their_pool_family() {
    // (node role, record pool, expected).
    let cases = [
        ("master", "worker", "none"),
        ("control-plane", "worker", "none"),
        ("master", "master", "10.0.0.5 a rendered-x also="),
        ("worker", "master", "none"),
        ("infra", "worker", "10.0.0.5 a rendered-x also="),
        ("worker", "infra", "10.0.0.5 a rendered-x also="),
        ("arbiter", "arbiter", "10.0.0.5 a rendered-x also="),
        ("arbiter", "worker", "none"),
    ];
    for (role, pool, expected) in cases {
        let me = node_with_role("n", role, &["10.0.0.5"]);
        let owners = nodes_by_address([&me]);
        let records = merged(&[("a", "10.0.0.5", pool, "rendered-x", JOINED - 60)]);
        assert_eq!(
            outcome(&match_node(&me, &records, &owners)),
            expected,
            "{role} node, {pool} record"
        );
    }
}

#[test]
fn own_memory_wins_over_own_published_entry_and_is_merged_with_the_others() {
    let published = BTreeMap::from([
        (
            "me".to_string(),
            vec![(ip("10.0.0.5"), record("worker", "stale", JOINED - 100))],
        ),
        (
            "other".to_string(),
            vec![(
                ip("10.0.0.6"),
                record("worker", "rendered-worker-1", JOINED - 50),
            )],
        ),
    ]);
    let own = vec![(
        ip("10.0.0.5"),
        record("worker", "rendered-worker-1", JOINED - 10),
    )];
    let merged = MergedRecords::merge(
        "me",
        own,
        &published,
        UNIX_EPOCH + Duration::from_secs(JOINED),
        Duration::from_secs(3600),
    );
    assert_eq!(merged.len(), 2);
    let five = merged.served_to(ip("10.0.0.5"));
    assert_eq!(five.len(), 1);
    assert_eq!(five[0].replica, "me");
    assert_eq!(five[0].record.rendered_config, "rendered-worker-1");
    assert_eq!(merged.served_to(ip("::ffff:10.0.0.6"))[0].replica, "other");
}

#[test]
fn a_plain_lookup_matches_without_a_replica_name() {
    let lookup = |_: IpAddr| Some(record("worker", "rendered-worker-1", JOINED - 60));
    let me = node("worker-5", &["10.0.0.5"]);
    let owners = nodes_by_address([&me]);
    let BootstrapMatch::Matched(bootstrap) = match_node(&me, &lookup, &owners) else {
        panic!("no match");
    };
    assert_eq!(bootstrap.served_by, None);
    assert!(bootstrap.also_served_by.is_empty());
}

#[test]
fn unknown_reasons_parse_back_from_their_annotation_values() {
    for reason in UnknownReason::ALL {
        assert_eq!(UnknownReason::parse(reason.as_str()), Some(reason));
    }
    assert_eq!(UnknownReason::parse("written-by-hand"), None);
}

fn failure(pool: &str, at: u64) -> FailureRecord {
    FailureRecord {
        pool: pool.into(),
        node_id: "localhost".into(),
        stage: "firstboot-update".into(),
        message: "error pulling image".into(),
        image: "quay.io".into(),
        reported_at: UNIX_EPOCH + Duration::from_secs(at),
    }
}

/// Records as in [`merged`] plus failures as (replica, address, pool, reported at).
fn merged_with_failures(
    records: &[(&str, &str, &str, &str, u64)],
    failures: &[(&str, &str, &str, u64)],
) -> MergedRecords {
    let mut published: BTreeMap<String, Vec<(IpAddr, FailureRecord)>> = BTreeMap::new();
    for (replica, address, pool, at) in failures {
        published
            .entry(replica.to_string())
            .or_default()
            .push((ip(address), failure(pool, *at)));
    }
    merged(records).with_failures(
        "",
        Vec::new(),
        &published,
        UNIX_EPOCH + Duration::from_secs(JOINED),
        Duration::from_secs(3600),
    )
}

fn matched_failure(node: &Node, merged: &MergedRecords, nodes: &[&Node]) -> Option<(IpAddr, u64)> {
    let owners = nodes_by_address(nodes.iter().copied());
    match_failure(node, merged, &owners).map(|m| {
        (
            m.address,
            m.failure
                .reported_at
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        )
    })
}

#[test]
fn a_failure_reported_before_the_node_joined_is_its_own() {
    let worker = node("worker-0", &["10.0.0.5"]);
    let other = node("worker-1", &["10.0.0.6"]);
    let all = [&worker, &other];
    let served = [(
        "r0",
        "10.0.0.5",
        "worker",
        "rendered-worker-1",
        JOINED - 600,
    )];
    // Served, then failed twice (two replicas got a report): the newest failure wins.
    let merged = merged_with_failures(
        &served,
        &[
            ("r0", "10.0.0.5", "worker", JOINED - 500),
            ("r1", "10.0.0.5", "worker", JOINED - 400),
        ],
    );
    assert_eq!(
        matched_failure(&worker, &merged, &all),
        Some((ip("10.0.0.5"), JOINED - 400))
    );
    assert_eq!(
        matched_failure(&other, &merged, &all),
        None,
        "another machine's"
    );
    assert_eq!(merged.failures().count(), 2);
}

#[test]
fn failures_that_cannot_be_the_nodes_own_are_never_matched() {
    let worker = node("worker-0", &["10.0.0.5"]);
    let master = node_with_role("master-0", "master", &["10.0.0.5"]);
    let alone = [&worker];
    // Reported after the node joined (beyond the clock skew): another machine's.
    let late = merged_with_failures(&[], &[("r0", "10.0.0.5", "worker", TOO_LATE)]);
    assert_eq!(matched_failure(&worker, &late, &alone), None);
    // Within the skew allowance it counts.
    let skewed = merged_with_failures(&[], &[("r0", "10.0.0.5", "worker", JOINED + 5)]);
    assert!(matched_failure(&worker, &skewed, &alone).is_some());
    // Another pool family's report.
    let master_report = merged_with_failures(&[], &[("r0", "10.0.0.5", "master", JOINED - 5)]);
    assert_eq!(matched_failure(&worker, &master_report, &alone), None);
    // An address two Nodes have: the source is unknown.
    let shared = merged_with_failures(&[], &[("r0", "10.0.0.5", "worker", JOINED - 5)]);
    assert_eq!(matched_failure(&worker, &shared, &[&worker, &master]), None);
    // The machine started over: a config served after the failure, before the node joined.
    let started_over = merged_with_failures(
        &[(
            "r1",
            "10.0.0.5",
            "worker",
            "rendered-worker-1",
            JOINED - 100,
        )],
        &[("r0", "10.0.0.5", "worker", JOINED - 200)],
    );
    assert_eq!(matched_failure(&worker, &started_over, &alone), None);
    // A config served to the address after the node joined (another machine) changes nothing.
    let reused = merged_with_failures(
        &[("r1", "10.0.0.5", "worker", "rendered-worker-1", TOO_LATE)],
        &[("r0", "10.0.0.5", "worker", JOINED - 200)],
    );
    assert!(matched_failure(&worker, &reused, &alone).is_some());
    // Expired reports are not merged.
    let old = merged_with_failures(&[], &[("r0", "10.0.0.5", "worker", JOINED - 7200)]);
    assert_eq!(old.failures().count(), 0);
}

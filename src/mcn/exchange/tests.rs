use super::*;
use crate::api::machineconfignode::MachineConfigNode;
use crate::mcn::matching::CLOCK_SKEW;

fn record(config: &str, image: Option<&str>, at_ms: u64) -> ServedRecord {
    ServedRecord::new(
        Answer {
            image: image.map(str::to_owned),
            ..Answer::worker(config)
        },
        UNIX_EPOCH + Duration::from_millis(at_ms),
    )
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn encoding_round_trips_newest_first_with_shared_answers() {
    let entries = vec![
        (
            ip("10.0.0.1"),
            record("rendered-worker-1", None, 1_700_000_000_001),
        ),
        (
            ip("fd00::2"),
            record(
                "rendered-worker-1",
                Some("quay.io/x@sha256:00"),
                1_700_000_000_003,
            ),
        ),
        (
            ip("10.0.0.3"),
            record("rendered-worker-1", None, 1_700_000_000_002),
        ),
    ];
    let (text, count) = encode(&entries, 10, 10_000);
    assert_eq!(count, 3);
    let wire: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(wire["configs"].as_array().unwrap().len(), 2, "{text}");
    let decoded = decode(&text).unwrap();
    let addresses: Vec<String> = decoded.iter().map(|(a, _)| a.to_string()).collect();
    assert_eq!(addresses, ["fd00::2", "10.0.0.3", "10.0.0.1"]);
    for (address, record) in &decoded {
        let original = entries.iter().find(|(a, _)| a == address).unwrap();
        assert_eq!(record, &original.1);
    }
    // The two records of one answer hold one copy of it.
    assert!(Arc::ptr_eq(&decoded[1].1.answer, &decoded[2].1.answer));
    assert!(!Arc::ptr_eq(&decoded[0].1.answer, &decoded[1].1.answer));
}

#[test]
fn encoding_is_bounded_by_count_and_bytes_keeping_the_newest() {
    let entries: Vec<_> = (0..10_000u32)
        .map(|i| {
            (
                IpAddr::from((0x0a00_0000 + i).to_be_bytes()),
                record(
                    "rendered-worker-0123456789abcdef0123456789abcdef",
                    None,
                    1_732_480_000_000 + u64::from(i) * 250,
                ),
            )
        })
        .collect();
    let (text, count) = encode(&entries, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES);
    assert_eq!(count, DEFAULT_MAX_ENTRIES);
    assert!(text.len() <= DEFAULT_MAX_BYTES, "{}", text.len());
    eprintln!(
        "{count} IPv4 records encode to {} bytes ({} bytes per record)",
        text.len(),
        text.len() / count
    );
    let decoded = decode(&text).unwrap();
    assert_eq!(
        decoded[0].1.served_at,
        UNIX_EPOCH + Duration::from_millis(1_732_480_000_000 + 9_999 * 250)
    );

    let (text, count) = encode(&entries, usize::MAX, 10_000);
    assert!(text.len() <= 10_000, "{}", text.len());
    // About 31 bytes an IPv4 record with a millisecond timestamp.
    assert!(count > 250 && count < 400, "{count}");
    // IPv6 records are longer; the byte bound still holds.
    let v6: Vec<_> = (0..10_000u128)
        .map(|i| {
            (
                IpAddr::from(
                    (0xfd00_0000_0000_0000_0000_0000_0000_0000u128 + i * 7919).to_be_bytes(),
                ),
                record(
                    "rendered-worker-1",
                    None,
                    1_700_000_000_000 + u64::try_from(i).unwrap(),
                ),
            )
        })
        .collect();
    let (text, _) = encode(&v6, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES);
    assert!(text.len() <= DEFAULT_MAX_BYTES);
}

#[test]
fn bad_values_are_errors_and_bad_entries_are_skipped() {
    assert!(decode("not json").is_err());
    assert!(decode(r#"{"v":2,"configs":[],"served":[]}"#).is_err());
    let text = r#"{"v":1,"configs":[["worker","rendered-worker-1","3.4.0",""]],
        "served":[["10.0.0.1",0,5],["nonsense",0,5],["10.0.0.2",7,5]]}"#;
    let decoded = decode(text).unwrap();
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].0, ip("10.0.0.1"));
}

#[test]
fn replica_keys_are_valid_configmap_keys() {
    assert_eq!(replica_key("master-0.example.com"), "master-0.example.com");
    assert_eq!(replica_key(" "), "unknown");
    assert_eq!(replica_key("a b/c"), "a-b-c");
    assert_eq!(replica_key(".."), "unknown");
    assert_eq!(replica_key(&"x".repeat(300)).len(), 253);
    let settings = ExchangeSettings::new(&"m".repeat(300));
    assert_eq!(settings.field_manager().len(), 128);
    assert!(settings.field_manager().starts_with(FIELD_MANAGER_PREFIX));
}

#[test]
fn the_view_decodes_every_replica_key() {
    let (text, _) = encode(
        &[(ip("10.0.0.1"), record("rendered-worker-1", None, 5))],
        10,
        10_000,
    );
    let object = ConfigMap {
        data: Some(BTreeMap::from([
            ("master-0".to_string(), text.clone()),
            ("master-1".to_string(), "garbage".to_string()),
        ])),
        ..ConfigMap::default()
    };
    let view = view_of(Some(&object));
    assert!(view.exists && view.listed);
    assert_eq!(view.records.len(), 1);
    assert_eq!(view.records["master-0"].len(), 1);
    assert_eq!(view.raw["master-0"], text);
    let absent = view_of(None);
    assert!(!absent.exists && absent.listed && absent.records.is_empty());
}

#[test]
fn a_record_is_settled_once_a_node_that_joined_after_it_has_its_mcn_record() {
    use crate::snapshot::Mode;
    use k8s_openapi::api::core::v1::Node;
    let node = |name: &str, ip: &str| -> Arc<Node> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "creationTimestamp": "2023-11-14T22:13:20Z"},
                "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
            }))
            .unwrap(),
        )
    };
    let mcn = |name: &str, annotations: serde_json::Value| -> Arc<MachineConfigNode> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigNode",
                "metadata": {"name": name, "annotations": annotations},
                "spec": {"node": {"name": name}, "pool": {"name": "worker"},
                         "configVersion": {"desired": "rendered-worker-1"}}
            }))
            .unwrap(),
        )
    };
    let mut snapshot = Snapshot::empty(Mode::Cluster);
    snapshot.generation = 1;
    snapshot.layered.nodes = vec![
        node("recorded", "10.0.0.1"),
        node("unknown-source", "10.0.0.2"),
        node("no-record-yet", "10.0.0.3"),
    ];
    snapshot.layered.machine_config_nodes = vec![
        mcn(
            "recorded",
            serde_json::json!({"mcs.machineconfiguration.openshift.io/bootstrap-served-at": "2023-11-14T22:00:00Z"}),
        ),
        mcn(
            "unknown-source",
            serde_json::json!({"mcs.machineconfiguration.openshift.io/bootstrap-source-unknown": "address-of-another-node"}),
        ),
        mcn("no-record-yet", serde_json::json!({})),
    ];
    let settled_here = settled_addresses(&snapshot);
    let joined_ms = 1_700_000_000_000;
    let before = record("rendered-worker-1", None, joined_ms - 60_000);
    let long_after = record(
        "rendered-worker-1",
        None,
        joined_ms + u64::try_from(CLOCK_SKEW.as_millis()).unwrap() + 1_000,
    );
    assert!(settled(ip("10.0.0.1"), &before, &settled_here));
    assert!(settled(ip("10.0.0.2"), &before, &settled_here));
    assert!(!settled(ip("10.0.0.3"), &before, &settled_here));
    assert!(!settled(ip("10.0.0.4"), &before, &settled_here));
    // Served long after that node joined: another machine on the address, still waiting.
    assert!(!settled(ip("10.0.0.1"), &long_after, &settled_here));
}

#[test]
fn only_keys_of_other_replicas_with_nothing_fresh_are_stale() {
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let ttl = Duration::from_secs(3600);
    let at = |age_secs: u64| {
        let ms = u64::try_from(
            (now - Duration::from_secs(age_secs))
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        record("rendered-worker-1", None, ms)
    };
    let value = |records: Vec<ServedRecord>| {
        let entries: Vec<_> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (IpAddr::from([10, 0, 0, u8::try_from(i).unwrap()]), r))
            .collect();
        encode(&entries, 100, 100_000).0
    };
    let object = ConfigMap {
        data: Some(BTreeMap::from([
            ("me".to_string(), value(vec![at(7200)])),
            ("gone".to_string(), value(vec![at(7200), at(4000)])),
            ("alive".to_string(), value(vec![at(7200), at(60)])),
            ("empty".to_string(), value(vec![])),
            ("newer-format".to_string(), r#"{"v":2}"#.to_string()),
        ])),
        ..ConfigMap::default()
    };
    let view = view_of(Some(&object));
    let stale: Vec<String> = stale_keys(&view, "me", now, ttl, false)
        .into_iter()
        .map(|(key, raw)| {
            assert_eq!(raw, view.raw[&key]);
            key
        })
        .collect();
    assert_eq!(stale, ["gone"]);
}

#[test]
fn the_bootstrap_servers_key_lives_a_day_or_until_every_control_plane_node_has_its_record() {
    let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
    let ttl = Duration::from_secs(3600);
    let at = |secs_ago: u64| {
        ServedRecord::new(
            Answer::worker("rendered-master-1"),
            now - Duration::from_secs(secs_ago),
        )
    };
    let value = |records: Vec<ServedRecord>| {
        let entries: Vec<_> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (IpAddr::from([10, 0, 1, u8::try_from(i).unwrap()]), r))
            .collect();
        encode(&entries, 100, 100_000).0
    };
    // Served two hours before the replicas looked (a slow bare-metal install).
    let object = ConfigMap {
        data: Some(BTreeMap::from([
            (BOOTSTRAP_SERVER_KEY.to_string(), value(vec![at(7200)])),
            ("gone".to_string(), value(vec![at(7200)])),
        ])),
        ..ConfigMap::default()
    };
    let view = view_of(Some(&object));
    let stale = |recorded| -> Vec<String> {
        stale_keys(&view, "me", now, ttl, recorded)
            .into_iter()
            .map(|(key, _)| key)
            .collect()
    };
    assert_eq!(
        stale(false),
        ["gone"],
        "two hours are within the bootstrap TTL"
    );
    assert_eq!(stale(true), [BOOTSTRAP_SERVER_KEY, "gone"]);
    assert_eq!(record_ttl(BOOTSTRAP_SERVER_KEY, ttl), BOOTSTRAP_TTL);
    assert_eq!(record_ttl("master-0", ttl), ttl);
    // A day later it expires like any gone replica's key.
    let later = now + BOOTSTRAP_TTL;
    let keys: Vec<String> = stale_keys(&view, "me", later, ttl, false)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(keys, [BOOTSTRAP_SERVER_KEY, "gone"]);
}

#[test]
fn retry_delays_are_spread_between_half_and_all_of_the_backoff() {
    let delay = Duration::from_secs(8);
    assert_eq!(jittered(delay, 0), Duration::from_secs(4));
    assert!(jittered(delay, u64::MAX) <= delay);
    assert!(jittered(delay, u64::MAX) > Duration::from_millis(7990));
    let mut jitter = Jitter::new("master-0");
    let spread: std::collections::BTreeSet<Duration> =
        (0..20).map(|_| jitter.apply(delay)).collect();
    assert!(spread.len() > 10, "{spread:?}");
    assert!(spread
        .iter()
        .all(|d| *d >= Duration::from_secs(4) && *d <= delay));
}

fn failure(stage: &str, at_ms: u64) -> FailureRecord {
    FailureRecord {
        pool: "worker".into(),
        node_id: "worker-7".into(),
        stage: stage.into(),
        message: "error pulling image: token=[REDACTED]".into(),
        image: "quay.io".into(),
        reported_at: UNIX_EPOCH + Duration::from_millis(at_ms),
    }
}

/// Format 1 as the replicas before the `agents`, `agent` and `failures` members read it
/// (their `Wire`, field for field): a rollout runs both versions side by side.
#[derive(serde::Deserialize)]
struct EarlierWire {
    v: u32,
    configs: Vec<(String, String, String, String)>,
    served: Vec<(String, usize, u64)>,
}

#[test]
fn client_releases_and_failures_round_trip_and_earlier_replicas_still_read_the_records() {
    let with_client = |config: &str, client: Option<&str>, at| {
        let mut record = record(config, None, at);
        record.answer_mut().ignition = client.map(str::to_owned);
        record
    };
    let entries = vec![
        (
            ip("10.0.0.1"),
            with_client("rendered-worker-1", Some("2.26.0"), 1),
        ),
        (ip("10.0.0.2"), with_client("rendered-worker-1", None, 2)),
        (
            ip("10.0.0.3"),
            with_client("rendered-worker-1", Some("2.14.0-3-gabc"), 3),
        ),
        (
            ip("10.0.0.4"),
            with_client("rendered-worker-1", Some("2.26.0"), 4),
        ),
    ];
    let failures = vec![
        (ip("10.0.0.9"), failure("firstboot-update", 10)),
        (ip("fd00::9"), failure("pivot", 11)),
    ];
    let (text, count) = encode_with_failures(&entries, &failures, 100, 100_000);
    assert_eq!(count, 4);
    let wire: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(wire["agents"].as_array().unwrap().len(), 2, "{text}");
    let decoded = decode_all(&text).unwrap();
    for (address, record) in &entries {
        assert!(
            decoded.served.contains(&(*address, record.clone())),
            "{address}"
        );
    }
    assert_eq!(decoded.failures.len(), 2);
    assert_eq!(decoded.failures[0], (ip("fd00::9"), failure("pivot", 11)));
    assert_eq!(
        decoded.failures[1],
        (ip("10.0.0.9"), failure("firstboot-update", 10))
    );

    // An earlier replica reads the same value: every record, no error.
    let earlier: EarlierWire = serde_json::from_str(&text).expect("earlier replicas decode it");
    assert_eq!(
        (earlier.v, earlier.served.len(), earlier.configs.len()),
        (1, 4, 1)
    );

    // An earlier replica's value reads as records with unknown clients and no failures.
    let (earlier_text, _) = encode(
        &[(ip("10.0.0.1"), with_client("rendered-worker-1", None, 1))],
        10,
        10_000,
    );
    assert_eq!(
        earlier_text,
        r#"{"v":1,"configs":[["worker","rendered-worker-1","3.4.0",""]],"served":[["10.0.0.1",0,1]]}"#,
        "without clients or failures the value is exactly format 1 as before"
    );
    let decoded = decode_all(&earlier_text).unwrap();
    assert_eq!(decoded.served[0].1.ignition, None);
    assert!(decoded.failures.is_empty());

    // A client table that does not fit its records is ignored, not misapplied.
    let odd = r#"{"v":1,"configs":[["worker","rendered-worker-1","3.4.0",""]],
        "served":[["10.0.0.1",0,1],["10.0.0.2",0,2]],"agents":["2.26.0"],"agent":[1]}"#;
    let decoded = decode_all(odd).unwrap();
    assert!(decoded.served.iter().all(|(_, r)| r.ignition.is_none()));
}

#[test]
fn failures_take_at_most_half_the_bytes_and_the_value_stays_bounded() {
    let entries: Vec<_> = (0..10_000u32)
        .map(|i| {
            (IpAddr::from((0x0a00_0000 + i).to_be_bytes()), {
                let mut record =
                    record("rendered-worker-1", None, 1_732_480_000_000 + u64::from(i));
                record.answer_mut().ignition = Some(format!("2.{}.0", i % 30));
                record
            })
        })
        .collect();
    let failures: Vec<_> = (0..2_000u32)
        .map(|i| {
            let mut failure = failure("firstboot-update", 1_732_480_000_000 + u64::from(i));
            failure.message = "m".repeat(215);
            failure.node_id = "n".repeat(60);
            (IpAddr::from((0x0b00_0000 + i).to_be_bytes()), failure)
        })
        .collect();
    let (text, count) =
        encode_with_failures(&entries, &failures, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES);
    assert!(text.len() <= DEFAULT_MAX_BYTES, "{}", text.len());
    let decoded = decode_all(&text).unwrap();
    assert_eq!(decoded.served.len(), count);
    assert!(count > 1000, "{count}");
    let failures_bytes = serde_json::to_string(
        &serde_json::from_str::<serde_json::Value>(&text).unwrap()["failures"],
    )
    .unwrap()
    .len();
    assert!(failures_bytes <= DEFAULT_MAX_BYTES / 2, "{failures_bytes}");
    // The newest failures were kept.
    assert_eq!(
        decoded.failures[0].1.reported_at,
        UNIX_EPOCH + Duration::from_millis(1_732_480_000_000 + 1_999)
    );
    eprintln!(
        "{} failures and {count} records with clients encode to {} bytes",
        decoded.failures.len(),
        text.len()
    );
}

#[test]
fn a_replica_with_fresh_failures_is_not_stale() {
    let now = UNIX_EPOCH + Duration::from_secs(100_000);
    let ttl = Duration::from_secs(3600);
    let old_ms = 1_000;
    let fresh_ms = (100_000 - 10) * 1000;
    let value = |served: &[(IpAddr, ServedRecord)], failures: &[(IpAddr, FailureRecord)]| {
        encode_with_failures(served, failures, 100, 100_000).0
    };
    let object = ConfigMap {
        data: Some(
            [
                (
                    "gone".to_string(),
                    value(&[(ip("10.0.0.1"), record("r", None, old_ms))], &[]),
                ),
                (
                    "reporting".to_string(),
                    value(
                        &[(ip("10.0.0.2"), record("r", None, old_ms))],
                        &[(ip("10.0.0.3"), failure("pivot", fresh_ms))],
                    ),
                ),
                (
                    "only-old-failures".to_string(),
                    value(&[], &[(ip("10.0.0.4"), failure("pivot", old_ms))]),
                ),
            ]
            .into_iter()
            .collect(),
        ),
        ..ConfigMap::default()
    };
    let view = view_of(Some(&object));
    assert_eq!(view.failures["reporting"].len(), 1);
    let stale: Vec<String> = stale_keys(&view, "me", now, ttl, false)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(stale, ["gone", "only-old-failures"]);
}

//! Ignition spec 3.6 (issue 35): rendered MachineConfigs of spec 3.6, as an MCO with
//! openshift/machine-config-operator PR #6236 renders them, parsed, validated and translated as
//! Ignition 2.26 and that PR's ign-converter do, and served in every spec their content allows;
//! 3.6 answered only from a rendered config of spec 3.6 (docs/ignition-3.6.md).
//!
//! - the engine: the 3.6 rules one by one (`vector_36_*`, `deviation_36_*`), and every config of
//!   the corpus as a 3.6 twin answering every older spec exactly as the 3.5 original;
//! - the renders of `tests/fixtures/generated/bootstrap-3.6` in bootstrap and cluster mode at
//!   every requested spec, each answer checked by the validators we did not write: the upstream
//!   JSON schema of its spec (upstream tier), Debian's ignition-validate 2.14 for 3.0 to 3.4
//!   (ignition tier) and the current ignition-validate, 2.26 or newer, for every 3.x answer
//!   (ignition_current tier, `MCS_IGNITION_VALIDATE`);
//! - the real binary on that directory in bootstrap mode, and in cluster mode against the
//!   in-test API server loaded with it.

use std::collections::BTreeMap;
use std::time::Duration;

use machine_config_server::ignition::{
    accept, parse_config, parse_config_slice, spec_of, to_value_as, Config, ParseError,
    SpecVersion as V, TranslateError,
};
use machine_config_server::render::{self, RenderError};
use machine_config_server::snapshot::Mode;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{load_cluster_from, token_dir, APISERVER_URL};
use support::fixtures;
use support::ignition_samples::corpus;
use support::mcs::{self, Server};
use support::tier;
use support::validators::{
    assert_matches_schema, ignition_validate, ignition_validate_current,
    run_ignition_validate_current, schema,
};

const I: &str = "application/vnd.coreos.ignition+json";
const SPECIAL_3_5: &str = "special mode bits are not supported in spec v3.5";

fn parse(v: Value) -> Config {
    parse_config(Some(&v)).unwrap_or_else(|e| panic!("parse {v}: {e}"))
}

/// A config of spec `version` with the given top-level members.
fn config(version: &str, members: Value) -> Value {
    let mut v = json!({"ignition": {"version": version}});
    if let (Some(map), Value::Object(extra)) = (v.as_object_mut(), members) {
        map.extend(extra);
    }
    v
}

fn c36(members: Value) -> Config {
    parse(config("3.6.0", members))
}

fn older_than_3_6() -> impl Iterator<Item = V> {
    V::ALL.into_iter().filter(|v| *v < V::V3_6)
}

fn err(c: &Config, v: V) -> TranslateError {
    match to_value_as(c, v) {
        Ok(value) => panic!("translation to {v} should fail, got {value}"),
        Err(e) => e,
    }
}

// The engine.

#[test]
fn vector_36_01_versions() {
    let c = c36(json!({}));
    assert_eq!(spec_of(&c), V::V3_6);
    assert_eq!(
        to_value_as(&c, V::V3_6).unwrap(),
        json!({"ignition": {"version": "3.6.0"}})
    );
    // go-semver reads leading zeros; the string is kept on the identity path, as upstream.
    let zeros = parse(config("03.6.0", json!({})));
    assert_eq!(spec_of(&zeros), V::V3_6);
    assert_eq!(
        to_value_as(&zeros, V::V3_6).unwrap()["ignition"]["version"],
        "03.6.0"
    );
    // Ignition 2.26 no longer accepts 3.6.0-experimental; 3.7.0 is experimental only.
    for version in ["3.6.0-experimental", "3.7.0", "3.7.0-experimental", "3.6.1"] {
        let e = parse_config(Some(&config(version, json!({})))).unwrap_err();
        assert!(
            matches!(e, ParseError::UnknownVersion { .. }),
            "{version}: {e}"
        );
        assert!(
            e.to_string()
                .ends_with("Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5,3.6"),
            "{e}"
        );
    }
}

#[test]
fn vector_36_02_special_mode_bits_are_served_in_3_6_only() {
    let c = c36(json!({"storage": {
        "directories": [{"path": "/var/d", "mode": 493}, {"path": "/tmp/x", "mode": 0o1777}],
        "files": [{"path": "/usr/local/bin/x", "mode": 0o4755, "contents": {"source": "data:,x"}}]
    }}));
    let served = to_value_as(&c, V::V3_6).unwrap();
    assert_eq!(served["storage"]["directories"][1]["mode"], 0o1777);
    assert_eq!(served["storage"]["files"][0]["mode"], 0o4755);
    // v36tov35's walk meets directories before files.
    for target in older_than_3_6() {
        let e = err(&c, target);
        assert_eq!(
            (e.kind(), e.field(), e.target()),
            ("unsupported", "storage.directories[1].mode", target)
        );
        assert!(e.to_string().ends_with(SPECIAL_3_5), "{e}");
    }
    let file_only = c36(json!({"storage": {"files": [
        {"path": "/etc/a", "mode": 420, "contents": {"source": "data:,a"}},
        {"path": "/usr/local/bin/g", "mode": 0o2755, "contents": {"source": "data:,g"}}
    ]}}));
    for target in older_than_3_6() {
        assert_eq!(err(&file_only, target).field(), "storage.files[1].mode");
    }
    // Illegal modes stay illegal in 3.6.
    let illegal = parse_config(Some(&config(
        "3.6.0",
        json!({"storage": {"files": [{"path": "/etc/a", "mode": 0o10000}]}}),
    )))
    .unwrap_err();
    assert!(
        illegal.to_string().contains("illegal file mode"),
        "{illegal}"
    );
}

fn luks_with_pin(version: &str, pin: &str) -> Value {
    config(
        version,
        json!({"storage": {"luks": [{"name": "data", "device": "/dev/vdb",
            "clevis": {"custom": {"pin": pin, "config": "{}"}}}]}}),
    )
}

#[test]
fn vector_36_03_custom_clevis_pins() {
    // 3.6 takes any pin; 3.5 knows tpm2, tang and sss.
    let arbitrary = parse(luks_with_pin("3.6.0", "tpm2-plus"));
    assert_eq!(
        to_value_as(&arbitrary, V::V3_6).unwrap()["storage"]["luks"][0]["clevis"]["custom"]["pin"],
        "tpm2-plus"
    );
    let e = parse_config(Some(&luks_with_pin("3.5.0", "tpm2-plus"))).unwrap_err();
    assert!(
        e.to_string()
            .contains("error at storage.luks[0].clevis.custom.pin: unsupported clevis pin"),
        "{e}"
    );
    for target in older_than_3_6() {
        let e = err(&arbitrary, target);
        assert_eq!(e.field(), "storage.luks[0].clevis.custom.pin");
        assert!(
            e.to_string()
                .ends_with("arbitrary custom clevis pin 'tpm2-plus' is not supported in spec v3.5"),
            "{e}"
        );
    }
    // A pin 3.5 knows goes down as far as LUKS goes (3.2).
    let known = parse(luks_with_pin("3.6.0", "tpm2"));
    for target in [V::V3_5, V::V3_4, V::V3_3, V::V3_2] {
        let value = to_value_as(&known, target).unwrap();
        assert_eq!(
            value["storage"]["luks"][0]["clevis"]["custom"]["pin"],
            "tpm2"
        );
    }
    for target in [V::V3_1, V::V3_0, V::V2_2] {
        assert!(err(&known, target).field().starts_with("storage.luks"));
    }
}

#[test]
fn deviation_36_empty_custom_pin_is_not_an_arbitrary_pin() {
    // `"pin": ""` with nothing else is the no-op custom block both specs accept; PR #6236's
    // v36tov35 refuses it only because it asks whether the pin pointer is set.
    let c = c36(
        json!({"storage": {"luks": [{"name": "data", "device": "/dev/vdb",
        "clevis": {"custom": {"pin": ""}}}]}}),
    );
    let value = to_value_as(&c, V::V3_5).unwrap();
    assert_eq!(value["storage"]["luks"][0]["clevis"]["custom"]["pin"], "");
}

#[test]
fn vector_36_04_a_3_5_config_asked_for_as_3_6_is_masked_as_ignition_does() {
    // Never served (3.6 is answered only from 3.6 configs), but the engine translates up as
    // Ignition's config/v3_6/translate does.
    let c = parse(config(
        "3.5.0",
        json!({"storage": {
            "directories": [{"path": "/tmp/x", "mode": 0o1777}],
            "files": [{"path": "/usr/local/bin/x", "mode": 0o4755, "contents": {"source": "data:,x"}}]
        }}),
    ));
    let up = to_value_as(&c, V::V3_6).unwrap();
    assert_eq!(up["ignition"]["version"], "3.6.0");
    assert_eq!(up["storage"]["directories"][0]["mode"], 0o777);
    assert_eq!(up["storage"]["files"][0]["mode"], 0o755);
    // As 3.5 and 3.4 the bits stay as the original serves them; 3.3 refuses them.
    assert_eq!(
        to_value_as(&c, V::V3_4).unwrap()["storage"]["files"][0]["mode"],
        0o4755
    );
    assert!(err(&c, V::V3_3)
        .to_string()
        .ends_with("special mode bits are not supported in spec v3.3"));
}

/// The answer of a translation, comparable across configs: the document, or what failed.
fn outcome(c: &Config, v: V) -> Result<Value, (String, String)> {
    to_value_as(c, v).map_err(|e| (e.kind().to_string(), e.field().to_string()))
}

#[test]
fn every_corpus_config_as_3_6_answers_older_specs_as_the_3_5_original() {
    let special = |v: &Value, kind: &str| {
        v["storage"][kind]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["mode"].as_i64().is_some_and(|m| m & 0o7000 != 0))
    };
    let mut compared = 0;
    for sample in corpus() {
        let as_3_5 = to_value_as(&sample.config, V::V3_5).expect("the corpus serves as 3.5");
        let has_special_bits = special(&as_3_5, "files") || special(&as_3_5, "directories");
        let mut twin = as_3_5.clone();
        twin["ignition"]["version"] = json!("3.6.0");
        let as_3_6 = twin.clone();
        let twin = parse_config(Some(&twin))
            .unwrap_or_else(|e| panic!("{} as 3.6 parses: {e}", sample.name));
        assert_eq!(spec_of(&twin), V::V3_6);
        assert_eq!(
            outcome(&twin, V::V3_6),
            Ok(as_3_6),
            "{} at 3.6",
            sample.name
        );
        for target in older_than_3_6() {
            if has_special_bits {
                // In 3.5 the bits were inert (served as written down to 3.4, refused below);
                // written in 3.6 they mean something, and no older spec can say it.
                let e = err(&twin, target);
                assert!(e.field().ends_with(".mode"), "{}: {e}", sample.name);
                assert!(e.to_string().ends_with(SPECIAL_3_5), "{e}");
                continue;
            }
            assert_eq!(
                outcome(&twin, target),
                outcome(&sample.config, target),
                "{} at {target}",
                sample.name
            );
            compared += 1;
        }
    }
    assert!(compared >= 30, "only {compared} answers compared");
}

#[test]
fn negotiation_follows_the_rendered_config() {
    let served = |header: &str, rendered: V| {
        accept::negotiate(Some(header)).map(|requested| accept::choose(requested, rendered))
    };
    for (header, from_3_5, from_3_6) in [
        (format!("{I};version=3.6.0, */*;q=0.1"), V::V3_5, V::V3_6),
        (format!("{I};version=3.6.2"), V::V3_5, V::V3_6),
        (format!("{I};version=3.7.0"), V::V3_5, V::V3_6),
        (format!("{I};version=3.99.0"), V::V3_5, V::V3_6),
        (format!("{I};version=3.5.0"), V::V3_5, V::V3_5),
        (format!("{I};version=3.0.0"), V::V3_0, V::V3_0),
        (format!("{I};version=2.4.0"), V::V2_2, V::V2_2),
        ("*/*".to_string(), V::V2_2, V::V2_2),
    ] {
        assert_eq!(served(&header, V::V3_5), Ok(from_3_5), "{header} from 3.5");
        assert_eq!(served(&header, V::V3_6), Ok(from_3_6), "{header} from 3.6");
    }
    assert!(served(&format!("{I};version=4.0.0"), V::V3_6).is_err());
}

// Renders of the spec-3.6 fixture.

/// What a pool of bootstrap-3.6 gets for a request of `requested`: the served spec, or the
/// field that blocks it.
fn expected(pool: &str, requested: V) -> Result<V, &'static str> {
    match pool {
        // Nothing only 3.6 can say: every spec.
        "arbiter" => Ok(requested),
        // Special mode bits (a sticky directory first) and an arbitrary pin: 3.6 only.
        "master" if requested == V::V3_6 => Ok(V::V3_6),
        "master" => Err("storage.directories[1].mode"),
        // A LUKS volume with the tpm2 custom pin: 3.2 and newer.
        "worker" if requested >= V::V3_2 => Ok(requested),
        "worker" => Err("storage.luks"),
        other => panic!("no pool {other}"),
    }
}

/// Every answer of bootstrap-3.6 in `mode`, checked against [`expected`]; returns the bodies
/// served, keyed `pool requested`.
fn fixture_answers(mode: Mode) -> BTreeMap<String, (V, Value)> {
    let snapshot = fixtures::snapshot_of(&fixtures::bootstrap_3_6(), mode);
    let pools: &[&str] = match mode {
        Mode::Bootstrap => &["master", "arbiter"],
        Mode::Cluster => &["master", "arbiter", "worker"],
    };
    let mut served = BTreeMap::new();
    for pool in pools {
        for requested in V::ALL {
            let label = format!("{pool} {requested}");
            match (
                render::render(&snapshot, pool, requested),
                expected(pool, requested),
            ) {
                (Ok(rendered), Ok(version)) => {
                    assert_eq!(rendered.version, version, "{label}");
                    let body: Value = serde_json::from_slice(&rendered.body).unwrap();
                    assert_eq!(body["ignition"]["version"], version.as_str(), "{label}");
                    check_body(mode, pool, version, &body, &label);
                    served.insert(label, (version, body));
                }
                (Err(RenderError::Translate { source, .. }), Err(field)) => {
                    assert!(source.field().starts_with(field), "{label}: {source}");
                    assert_eq!(source.target(), requested, "{label}");
                }
                (Ok(_), Err(field)) => panic!("{label} should fail on {field}"),
                (Err(e), _) => panic!("{label}: {e:?}"),
            }
        }
    }
    if mode == Mode::Bootstrap {
        let worker = render::render(&snapshot, "worker", V::V3_6).unwrap_err();
        assert_eq!(worker.kind(), "pool_not_served");
    }
    served
}

fn file<'a>(body: &'a Value, path: &str) -> Option<&'a Value> {
    body["storage"]["files"]
        .as_array()?
        .iter()
        .find(|f| f["path"] == path)
}

/// What every served body must carry: the encapsulated MachineConfig at the served spec in
/// cluster mode, at 3.6 in bootstrap mode (the newest spec of an MCO that renders 3.6, whatever
/// was asked, as the original's bootstrap server encapsulates its newest), the modes as the
/// spec can say them, a document that re-parses in its spec.
fn check_body(mode: Mode, pool: &str, version: V, body: &Value, label: &str) {
    let encapsulated = file(body, render::ENCAPSULATED_PATH).expect("encapsulated MC");
    let source = encapsulated["contents"]["source"].as_str().unwrap();
    let mc: Value =
        serde_json::from_slice(&machine_config_server::ignition::dataurl::decode(source).unwrap())
            .unwrap();
    let encapsulated_version = match mode {
        Mode::Bootstrap => V::V3_6,
        Mode::Cluster => version,
    };
    assert_eq!(
        mc["spec"]["config"],
        json!({"ignition": {"version": encapsulated_version.as_str()}}),
        "{label}: the encapsulated config's spec"
    );
    if pool == "master" {
        // Only 3.6 is served: the special bits arrive as written.
        let mode = |p: &str| file(body, p).map(|f| f["mode"].clone());
        assert_eq!(mode("/usr/local/bin/master-helper"), Some(json!(0o4755)));
        assert_eq!(
            mode("/usr/local/bin/master-group-tool"),
            Some(json!(0o2755))
        );
        let dirs = body["storage"]["directories"].as_array().unwrap();
        let modes: Vec<&Value> = dirs.iter().map(|d| &d["mode"]).collect();
        assert_eq!(modes, [&json!(493), &json!(0o1777), &json!(0o2775)]);
        assert_eq!(
            body["storage"]["luks"][0]["clevis"]["custom"]["pin"],
            "tpm2-fixture"
        );
    }
    if version != V::V2_2 {
        let reparsed = parse_config_slice(&serde_json::to_vec(body).unwrap())
            .unwrap_or_else(|e| panic!("{label} re-parses: {e}"));
        let own = if version == V::V3_6 { V::V3_6 } else { V::V3_5 };
        assert_eq!(spec_of(&reparsed), own, "{label}");
    }
}

#[test]
fn bootstrap_directory_of_spec_3_6_is_served_in_every_spec_its_content_allows() {
    let served = fixture_answers(Mode::Bootstrap);
    // arbiter in all 8 specs, master in 3.6.
    assert_eq!(served.len(), 9, "{:?}", served.keys().collect::<Vec<_>>());
}

#[test]
fn cluster_of_spec_3_6_is_served_in_every_spec_its_content_allows() {
    let served = fixture_answers(Mode::Cluster);
    // arbiter 8, master 1, worker 3.2 to 3.6.
    assert_eq!(served.len(), 14, "{:?}", served.keys().collect::<Vec<_>>());
}

#[test]
fn a_3_6_config_without_3_6_content_answers_as_its_3_5_twin_byte_for_byte() {
    // The arbiter's rendered config relabelled 3.5: every answer below 3.6 is the same bytes,
    // but for the file that carries the whole MachineConfig (its spec.config says 3.6.0) and
    // the encapsulated one (bootstrap mode: 3.6 and 3.5, each MCO's newest).
    let base = fixtures::bootstrap_3_6();
    let original = fixtures::snapshot_of(&base, Mode::Bootstrap);
    let mut twin = original.clone();
    for mc in twin.machine_configs.values_mut() {
        let Ok(mc) = mc else { continue };
        let mut relabelled = (**mc).clone();
        if let Some(config) = relabelled.spec.config.as_mut() {
            config.modify(|config| config["ignition"]["version"] = json!("3.5.0"));
        }
        *mc = std::sync::Arc::new(relabelled);
    }
    // In bootstrap mode the encapsulated MachineConfig differs too: an empty config of the
    // newest spec its MCO renders (3.6 for the original, 3.5 for its twin).
    let without_content = |body: &[u8]| {
        let mut value: Value = serde_json::from_slice(body).unwrap();
        let files = value["storage"]["files"].as_array_mut().unwrap();
        files.retain(|f| {
            f["path"] != render::MACHINE_CONFIG_CONTENT_PATH
                && f["path"] != render::ENCAPSULATED_PATH
        });
        value
    };
    for requested in older_than_3_6() {
        let a = render::render(&original, "arbiter", requested).unwrap();
        let b = render::render(&twin, "arbiter", requested).unwrap();
        assert_eq!(a.version, b.version);
        assert_ne!(a.body, b.body, "the content file differs");
        assert_eq!(
            without_content(&a.body),
            without_content(&b.body),
            "{requested}"
        );
    }
    // A 3.6 request: 3.6 from the 3.6 config, 3.5 from its 3.5 twin.
    assert_eq!(
        render::render(&original, "arbiter", V::V3_6)
            .unwrap()
            .version,
        V::V3_6
    );
    assert_eq!(
        render::render(&twin, "arbiter", V::V3_6).unwrap().version,
        V::V3_5
    );
}

fn every_3x_answer() -> Vec<(String, V, Value)> {
    let mut answers = Vec::new();
    for (mode, name) in [(Mode::Bootstrap, "bootstrap"), (Mode::Cluster, "cluster")] {
        for (label, (version, body)) in fixture_answers(mode) {
            if version != V::V2_2 {
                answers.push((format!("{name} {label}"), version, body));
            }
        }
    }
    answers
}

#[tier(upstream)]
#[test]
fn every_3x_answer_matches_the_upstream_json_schema_of_its_spec() {
    let mut checked = 0;
    for (label, version, body) in every_3x_answer() {
        let (_, minor) = version.major_minor();
        assert_matches_schema(&schema(minor as u8), &label, &body);
        checked += 1;
    }
    assert_eq!(checked, 21);
}

#[tier(ignition)]
#[test]
fn debians_ignition_validate_accepts_every_answer_of_specs_it_knows() {
    let dir = tempfile::tempdir().unwrap();
    let checked = every_3x_answer()
        .into_iter()
        .filter(|(label, _, body)| ignition_validate(dir.path(), label, body))
        .count();
    // 3.0 to 3.4 of arbiter (both modes) and 3.2 to 3.4 of worker.
    assert_eq!(checked, 13);
}

#[tier(ignition_current)]
#[test]
fn current_ignition_validate_accepts_every_3x_answer() {
    let dir = tempfile::tempdir().unwrap();
    let answers = every_3x_answer();
    for (label, _, body) in &answers {
        let report = ignition_validate_current(dir.path(), label, body);
        // Special bits are served only where the spec applies them (3.6): an older answer
        // carrying one would get the validator's "not supported or functional" warning.
        assert!(
            !report.contains("setuid/setgid/sticky"),
            "{label}: {report}"
        );
    }
    assert_eq!(answers.len(), 21);
}

#[tier(ignition_current)]
#[test]
fn current_ignition_validate_knows_what_3_6_changed() {
    // The validator itself: 3.5 warns about special bits (it ignores them) and refuses an
    // arbitrary pin; 3.6 takes both without a word. If this fails, the tier's binary is not
    // the Ignition the 3.6 checks above rely on.
    let dir = tempfile::tempdir().unwrap();
    let bits = |version: &str| {
        config(
            version,
            json!({"storage": {"files": [{"path": "/usr/local/bin/x", "mode": 0o4755}]}}),
        )
    };
    let (ok, report) = run_ignition_validate_current(dir.path(), &bits("3.5.0"));
    assert!(ok && report.contains("setuid/setgid/sticky"), "{report}");
    let (ok, report) = run_ignition_validate_current(dir.path(), &bits("3.6.0"));
    assert!(ok && report.trim().is_empty(), "{report}");
    let (ok, report) = run_ignition_validate_current(dir.path(), &luks_with_pin("3.5.0", "x"));
    assert!(!ok, "{report}");
    let (ok, report) = run_ignition_validate_current(dir.path(), &luks_with_pin("3.6.0", "x"));
    assert!(ok, "{report}");
}

// The real binary.

fn accept(version: &str) -> String {
    format!("{I};version={version}, */*;q=0.1")
}

/// Status and served spec of `GET /config/<pool>` for each requested version.
fn check_binary_answers(server: &Server, pools: &[&str]) {
    for pool in pools {
        for requested in V::ALL {
            let header = accept(requested.as_str());
            let response = server.http(
                "GET",
                &format!("/config/{pool}"),
                &[("Accept", header.as_str())],
            );
            match expected(pool, requested) {
                Ok(version) => {
                    assert_eq!(response.status, 200, "{pool} {requested}");
                    assert_eq!(
                        response.json()["ignition"]["version"],
                        version.as_str(),
                        "{pool} {requested}"
                    );
                }
                Err(_) => assert_eq!(response.status, 500, "{pool} {requested}"),
            }
        }
        // Newer than any known spec: 3.6 from a 3.6 config, where the content allows it.
        let response = server.http(
            "GET",
            &format!("/config/{pool}"),
            &[("Accept", accept("3.7.0").as_str())],
        );
        assert_eq!(response.status, 200, "{pool} 3.7.0");
        assert_eq!(response.json()["ignition"]["version"], "3.6.0");
    }
}

#[test]
fn the_binary_serves_a_spec_3_6_bootstrap_directory() {
    let server = Server::bootstrap(&fixtures::bootstrap_3_6(), &[]);
    check_binary_answers(&server, &["master", "arbiter"]);
    // The cause of a refusal is logged once per render, naming the field once.
    let output = server.output();
    let line = output
        .lines()
        .find(|l| l.contains("could not serve config") && l.contains("storage.directories[1].mode"))
        .unwrap_or_else(|| panic!("a logged refusal:\n{output}"));
    assert_eq!(line.matches(SPECIAL_3_5).count(), 1, "{line}");
}

#[test]
fn the_binary_serves_a_spec_3_6_cluster() {
    let api = ApiServer::start(Options::default());
    load_cluster_from(&api, &fixtures::bootstrap_3_6());
    let tokens = token_dir();
    let server = Server::start_cluster(api.kubeconfig_file(), APISERVER_URL, tokens.path(), &[]);
    mcs::poll("/readyz 200", Duration::from_secs(30), || {
        (mcs::request(server.metrics, None, "GET", "/readyz", &[]).status == 200).then_some(())
    });
    check_binary_answers(&server, &["master", "arbiter", "worker"]);
}

//! Answers for rendered MachineConfigs of spec 3.5 and older stay byte-identical across changes
//! to the spec engine (issue 35: readiness for an MCO that renders spec 3.6 must not change a
//! single answer of today's clusters).
//!
//! The digests in `tests/fixtures/answers-3.5-and-older.txt` were recorded with the server as
//! it was before spec 3.6 was accepted (commit bc2c1e5), by running this test with
//! `MCS_RECORD_ANSWERS=1`; the test compares every answer with them. An answer is what the
//! server does for one request: the Accept header negotiated, then the render of one pool of a
//! fixture directory in bootstrap mode (as `bootstrap --server-basedir` reads it) and in
//! cluster mode (every pool and rendered config of the directory in the caches): status kind,
//! served spec and the body's FNV-1a digest and length. At the spec-engine level: each corpus
//! config and each fuzz seed of the Ignition target translated to each spec served before 3.6
//! (digest, or the error text; a seed that does not parse, the error's kind).
//!
//! A deliberate change of a 3.5 answer must re-record the file in the same commit and say why.
//! Re-recorded since:
//! - the cluster-mode answers (`render ... cluster ...`), when the MachineConfig content and
//!   encapsulated files became the original's bytes for an informer object (no `kind` and
//!   `apiVersion`, Go's metadata order; src/api/go_marshal.rs): the digests before pinned a
//!   serialization the original never wrote. Bootstrap answers and translations unchanged.
//! - every answer (`render ...`), when served configs became the original's bytes: Go's member
//!   order for 3.x files, directories, links and users, and `clarketm/json`'s escaping of `<`,
//!   `>` and `&` (`ignition::go_order`, `ignition::gojson`). The translations are not
//!   re-recorded: their digests are of the translated value as `serde_json` writes it, still
//!   those recorded at bc2c1e5, and each served form is checked to be that same value.
//! - the bootstrap-mode answers (`render ... bootstrap ...`) and the spec-2.2 seed's
//!   translations (`seed v22.json ...`), issue 40: bootstrap mode writes its MachineConfig
//!   files as the original writes an object read from a YAML file (Go's member order, `kind`
//!   and `apiVersion` kept, `spec.config`'s keys sorted, `clarketm/json`'s escaping) and
//!   encapsulates spec 3.5 whatever was asked; a spec-2 config is de-duplicated as the original
//!   de-duplicates it (files and units listed in reverse, one entry per path). Each change makes
//!   the answers the original's bytes (measured against a build of 7ff337a4f).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use machine_config_server::ignition::{
    accept, parse_config_slice, serialize_as, to_value_as, Config, SpecVersion,
};
use machine_config_server::render;
use machine_config_server::snapshot::Mode;
use serde_json::Value;
use support::fixtures;
use support::ignition_samples::corpus;
use support::tier;
use support::upstream;

const I: &str = "application/vnd.coreos.ignition+json";

/// What booting machines and people send: none, foreign types, every spec and the edges of
/// the negotiation (newer minors, a newer major, pre-releases, q ordering).
fn accept_headers() -> Vec<String> {
    let mut headers = vec![
        String::new(),
        "*/*".to_string(),
        I.to_string(),
        format!("{I};version=2.2.0"),
        format!("{I};version=2.4.0, {I}; version=1; q=0.5, */*; q=0.1"),
        format!("{I};version=2.1.0"),
        format!("{I};version=4.0.0"),
        format!("{I};version=3.6.0-experimental, */*;q=0.1"),
        format!("{I};version=3.1.0;q=0.5, {I};version=3.6.0;q=0.9"),
    ];
    for minor in 0..=9 {
        headers.push(format!("{I};version=3.{minor}.0, */*;q=0.1"));
    }
    headers.push(format!("{I};version=3.6.2"));
    headers.push(format!("{I};version=3.99.0"));
    headers
}

/// FNV-1a, 64 bits: a stable digest with no dependency (this guards against accidental
/// changes, not against an adversary).
fn fnv1a(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}/{}", bytes.len())
}

fn pools(base: &Path) -> Vec<String> {
    let mut pools: Vec<String> = std::fs::read_dir(base.join("machine-pools"))
        .expect("machine-pools/")
        .map(|e| {
            let path = e.expect("entry").path();
            path.file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    pools.sort();
    pools
}

/// Every answer for the fixture at `base`, keyed `label mode pool header`.
fn render_answers(label: &str, base: &Path, out: &mut BTreeMap<String, String>) {
    for (mode_name, mode) in [("bootstrap", Mode::Bootstrap), ("cluster", Mode::Cluster)] {
        let snapshot = support::fixtures::snapshot_of(base, mode);
        for pool in pools(base) {
            for header in accept_headers() {
                let key = format!("render {label} {mode_name} {pool} [{header}]");
                let answer = match accept::negotiate(Some(&header)) {
                    Err(e) => format!("400 {}", e.kind()),
                    Ok(version) => match render::render(&snapshot, &pool, version) {
                        Ok(rendered) => {
                            format!("200 {} {}", rendered.version, fnv1a(&rendered.body))
                        }
                        Err(e) => format!("error {}", e.kind()),
                    },
                };
                out.insert(key, answer);
            }
        }
    }
}

const BEFORE_3_6: [SpecVersion; 7] = [
    SpecVersion::V2_2,
    SpecVersion::V3_0,
    SpecVersion::V3_1,
    SpecVersion::V3_2,
    SpecVersion::V3_3,
    SpecVersion::V3_4,
    SpecVersion::V3_5,
];

/// `config` translated to each spec served before 3.6, keyed `prefix version`. The digest is of
/// the translated value as `serde_json` writes it (the form recorded at bc2c1e5, members in
/// `ignition-config`'s order); the bytes served are checked to be that value in the original's
/// member order and escaping (`serialize_as`), so that the recorded digests still pin every
/// translated value since bc2c1e5.
fn translations(prefix: &str, config: &Config, out: &mut BTreeMap<String, String>) {
    for version in BEFORE_3_6 {
        let answer = match to_value_as(config, version) {
            Ok(value) => {
                let served = serialize_as(config, version).expect("serializes as it translates");
                let read: Value = serde_json::from_slice(&served).expect("served bytes are JSON");
                assert_eq!(
                    read, value,
                    "{prefix} {version}: served bytes are the value"
                );
                fnv1a(&serde_json::to_vec(&value).expect("a value serializes"))
            }
            Err(e) => format!("error {e}"),
        };
        out.insert(format!("{prefix} {version}"), answer.replace('\n', "\\n"));
    }
}

/// The corpus of 3.5 configs translated to each spec served before 3.6.
fn corpus_answers(out: &mut BTreeMap<String, String>) {
    for (i, sample) in corpus().into_iter().enumerate() {
        translations(
            &format!("corpus {i:02} {}", sample.name),
            &sample.config,
            out,
        );
    }
}

/// The fuzz seeds of the Ignition target (every spec from 2.0 to 3.5, and broken inputs):
/// parsed (the error's kind when refused), then translated.
fn seed_answers(out: &mut BTreeMap<String, String>) {
    let dir = support::mcs::repo().join("tests/fuzz/seeds/ignition");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the ignition seeds")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("v36"))
        .collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).expect("a seed");
        match parse_config_slice(&bytes) {
            Ok(config) => translations(&format!("seed {name}"), &config, out),
            Err(e) => {
                out.insert(format!("seed {name} parse"), format!("error {}", e.kind()));
            }
        }
    }
}

fn golden_path() -> PathBuf {
    support::mcs::repo().join("tests/fixtures/answers-3.5-and-older.txt")
}

fn read_golden() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(golden_path()).expect("the recorded answers exist");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (key, value) = line.split_once('\t').expect("key<TAB>answer");
            (key.to_string(), value.to_string())
        })
        .collect()
}

/// Compare `answers` with the recorded ones whose key starts with `prefix` (or record them).
fn check(prefix: &str, answers: BTreeMap<String, String>) {
    assert!(answers.len() > 40, "only {} answers", answers.len());
    if std::env::var_os("MCS_RECORD_ANSWERS").is_some() {
        // The tests of this file run in parallel and share the file.
        static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = read_golden_or_empty();
        all.retain(|k, _| !k.starts_with(prefix));
        all.extend(answers);
        let mut text = String::from(
            "# Answers of the server before spec 3.6 was accepted (commit bc2c1e5), for rendered\n\
             # configs of spec 3.5 and older, re-recorded where a change was deliberate (the\n\
             # list is in tests/ignition_answers_unchanged.rs).\n",
        );
        for (k, v) in &all {
            text.push_str(&format!("{k}\t{v}\n"));
        }
        std::fs::write(golden_path(), text).expect("write the recorded answers");
        return;
    }
    let golden: BTreeMap<String, String> = read_golden()
        .into_iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .collect();
    assert_eq!(
        golden.keys().collect::<Vec<_>>(),
        answers.keys().collect::<Vec<_>>(),
        "the same requests"
    );
    let changed: Vec<String> = answers
        .iter()
        .filter(|(k, v)| golden[*k] != **v)
        .map(|(k, v)| format!("{k}: was {}, now {v}", golden[k]))
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} answers changed:\n{}",
        changed.len(),
        answers.len(),
        changed.join("\n")
    );
    eprintln!("answers unchanged: {}/{}", answers.len(), golden.len());
}

fn read_golden_or_empty() -> BTreeMap<String, String> {
    if golden_path().exists() {
        read_golden()
    } else {
        BTreeMap::new()
    }
}

#[test]
fn answers_for_the_projects_fixture_are_unchanged() {
    let mut answers = BTreeMap::new();
    render_answers("bootstrap-full", &fixtures::bootstrap_full(), &mut answers);
    check("render bootstrap-full ", answers);
}

#[test]
fn translations_of_the_corpus_are_unchanged() {
    let mut answers = BTreeMap::new();
    corpus_answers(&mut answers);
    check("corpus ", answers);
}

#[test]
fn translations_of_the_fuzz_seeds_are_unchanged() {
    let mut answers = BTreeMap::new();
    seed_answers(&mut answers);
    check("seed ", answers);
}

#[tier(upstream)]
#[test]
fn answers_for_the_upstream_rendered_fixture_are_unchanged() {
    let mut answers = BTreeMap::new();
    render_answers(
        "bootstrap-realistic",
        &upstream::realistic_fixture(),
        &mut answers,
    );
    check("render bootstrap-realistic ", answers);
}

//! The alerting rules, `config/deploy/alerts/rules.yaml`, checked with the real Prometheus tool
//! and against what the server really exports:
//! - `promtool check rules` accepts them and `promtool test rules` passes `tests.yaml`: each
//!   alert fires on a failing series once its duration has passed, not before, and stays
//!   silent on healthy series (promtool is Debian's `prometheus` package; `.ci/run` installs
//!   it, and with `CI=true` its absence fails these tests);
//! - the PrometheusRule in `config/deploy/prometheusrule.yaml` embeds exactly these groups;
//! - every alert has a summary, a description naming the `explain` command, and a severity;
//! - every metric an expression selects and every label it matches or groups by appear in a
//!   real scrape of the server's `/metrics` (bootstrap mode, and cluster mode against the
//!   in-test API server after a node joined a layered cluster), so a renamed metric or label
//!   breaks the build, not the pager.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::mcs;
use support::tier;

use mcs::Server;
use serde::Deserialize;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{load_realistic_cluster, token_dir, worker_node, APISERVER_URL};

const DEADLINE: Duration = Duration::from_secs(30);

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/deploy")
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let first = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .find(|doc| !doc.is_null());
    first.expect("a document")
}

fn rules() -> Value {
    yaml_file(&deploy_dir().join("alerts/rules.yaml"))
}

/// Every alerting rule of the rules file.
fn alert_rules() -> Vec<Value> {
    rules()["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .filter(|rule| rule["alert"].is_string())
        .collect()
}

/// `promtool` in the alert rules' directory (for `#[tier(promtool)]` tests).
fn promtool() -> Command {
    let mut command = Command::new("promtool");
    command.current_dir(deploy_dir().join("alerts"));
    command
}

fn run(mut command: Command) -> String {
    let out = command.output().expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

#[tier(promtool)]
#[test]
fn promtool_accepts_the_rules() {
    let mut promtool = promtool();
    promtool.args(["check", "rules", "rules.yaml"]);
    let out = run(promtool);
    let alerts = alert_rules().len();
    assert!(
        out.contains(&format!("SUCCESS: {alerts} rules found")),
        "{out}"
    );
}

#[tier(promtool)]
#[test]
fn promtool_unit_tests_pass() {
    let mut promtool = promtool();
    promtool.args(["test", "rules", "tests.yaml"]);
    let out = run(promtool);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_prometheus_rule_embeds_the_rules_file() {
    let resource = yaml_file(&deploy_dir().join("prometheusrule.yaml"));
    assert_eq!(resource["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(resource["kind"], "PrometheusRule");
    let expected = serde_yaml::to_string(&json!({"groups": rules()["groups"]})).unwrap();
    assert!(
        resource["spec"]["groups"] == rules()["groups"],
        "config/deploy/prometheusrule.yaml differs from alerts/rules.yaml; its spec must be:\n{expected}"
    );
}

#[test]
fn every_alert_is_actionable_and_tested_both_ways() {
    let tests = yaml_file(&deploy_dir().join("alerts/tests.yaml"));
    let alerts = alert_rules();
    assert!(alerts.len() >= 7, "{} alerts", alerts.len());
    for rule in &alerts {
        let name = rule["alert"].as_str().unwrap();
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        let summary = rule["annotations"]["summary"].as_str().unwrap_or_default();
        assert!(!summary.is_empty(), "{name}: no summary");
        let description = rule["annotations"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(
            description.contains("machine-config-server explain --in-cluster"),
            "{name}: the description names no explain command: {description}"
        );
        // In one promtool test: silent at an earlier evaluation, firing at a later one.
        let tested_both_ways = tests["tests"].as_array().unwrap().iter().any(|test| {
            let evaluations: Vec<(u64, bool)> = test["alert_rule_test"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["alertname"] == name)
                .map(|t| {
                    let fires = t["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
                    (duration_secs(t["eval_time"].as_str().unwrap()), fires)
                })
                .collect();
            evaluations.iter().any(|(silent_at, fires)| {
                !fires
                    && evaluations
                        .iter()
                        .any(|(firing_at, fires)| *fires && firing_at > silent_at)
            })
        });
        assert!(
            tested_both_ways,
            "{name}: tests.yaml must expect it silent first and firing later"
        );
    }
}

/// `6h10m`, `11m`, `90s` in seconds.
fn duration_secs(text: &str) -> u64 {
    let mut total = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            other => panic!("unit {other} in {text}"),
        };
        total += number.parse::<u64>().unwrap() * unit;
        number.clear();
    }
    total
}

/// What an alert expression reads: selected metrics with the labels they match, and the
/// labels it groups or joins by.
#[derive(Debug, Default)]
struct Uses {
    metrics: BTreeMap<String, BTreeSet<String>>,
    grouping: BTreeSet<String>,
}

/// PromQL words that are not metric names.
const PROMQL_WORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "rate",
    "increase",
    "irate",
    "delta",
    "time",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "abs",
    "absent",
    "absent_over_time",
    "changes",
    "resets",
    "histogram_quantile",
    "topk",
    "bottomk",
    "clamp_min",
    "clamp_max",
    "humanizeDuration",
    "offset",
];

fn uses(expr: &str) -> Uses {
    let selector = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?").unwrap();
    let matcher = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"#).unwrap();
    let grouping = regex::Regex::new(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)").unwrap();
    let strings = regex::Regex::new(r#""(?:[^"\\]|\\.)*""#).unwrap();
    let ranges = regex::Regex::new(r"\[[^\]]*\]").unwrap();

    let mut out = Uses::default();
    // Label lists of by/on/...: removed before looking for metric names.
    let without_grouping = grouping.replace_all(expr, |caps: &regex::Captures| {
        for label in caps[1].split(',').map(str::trim).filter(|l| !l.is_empty()) {
            out.grouping.insert(label.to_owned());
        }
        caps[0].split('(').next().unwrap_or_default().to_owned()
    });
    let cleaned = ranges.replace_all(&without_grouping, "");
    for caps in selector.captures_iter(&cleaned) {
        let name = &caps[1];
        if PROMQL_WORDS.contains(&name) {
            continue;
        }
        let labels = out.metrics.entry(name.to_owned()).or_default();
        if let Some(inside) = caps.get(3) {
            let inside = strings.replace_all(inside.as_str(), "\"\"");
            for m in matcher.captures_iter(&inside) {
                labels.insert(m[1].to_owned());
            }
        }
    }
    out
}

#[test]
fn expression_parsing_finds_metrics_labels_and_grouping() {
    let found = uses(
        r#"sum by (pool) (rate(mcs_requests_total{code=~"5..", pool!="<unknown>"}[5m])) > 0 and on (instance) mcs_ready == 0"#,
    );
    assert_eq!(
        found.metrics,
        BTreeMap::from([
            (
                "mcs_requests_total".to_owned(),
                BTreeSet::from(["code".to_owned(), "pool".to_owned()])
            ),
            ("mcs_ready".to_owned(), BTreeSet::new()),
        ])
    );
    assert_eq!(
        found.grouping,
        BTreeSet::from(["pool".to_owned(), "instance".to_owned()])
    );
}

/// Sample name -> label names seen on it, from an OpenMetrics text.
fn exported(text: &str, into: &mut BTreeMap<String, BTreeSet<String>>) {
    let label = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*""#).unwrap();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = into.entry(line[..name_end].to_owned()).or_default();
        if line[name_end..].starts_with('{') {
            let inside = &line[name_end + 1..line.rfind('}').unwrap_or(line.len())];
            for caps in label.captures_iter(inside) {
                labels.insert(caps[1].to_owned());
            }
        }
    }
}

/// What is missing from `scraped` for the rules' expressions, one line per problem.
fn missing(scraped: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    for rule in alert_rules() {
        let name = rule["alert"].as_str().unwrap();
        let found = uses(rule["expr"].as_str().unwrap());
        assert!(!found.metrics.is_empty(), "{name}: selects no metric");
        let mut all_labels = BTreeSet::new();
        for (metric, labels) in &found.metrics {
            let Some(exported_labels) = scraped.get(metric) else {
                problems.push(format!("{name}: metric {metric} is not exported"));
                continue;
            };
            all_labels.extend(exported_labels.iter().cloned());
            for label in labels.difference(exported_labels) {
                problems.push(format!("{name}: {metric} has no label {label}"));
            }
        }
        for label in found.grouping.difference(&all_labels) {
            problems.push(format!("{name}: groups by {label}, which its metrics lack"));
        }
    }
    problems
}

fn scrape(server: &Server) -> String {
    let response = mcs::request(server.metrics, None, "GET", "/metrics", &[]);
    assert_eq!(response.status, 200);
    String::from_utf8(response.body).expect("utf-8")
}

const ACCEPT_34: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.4.0",
);

#[test]
fn alert_expressions_use_what_the_server_exports() {
    let mut scraped = BTreeMap::new();

    // Bootstrap mode: a config served, a pool it does not serve.
    let bootstrap = Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    assert_eq!(
        bootstrap.http("GET", "/config/master", &[ACCEPT_34]).status,
        200
    );
    assert_eq!(
        bootstrap.http("GET", "/config/nope", &[ACCEPT_34]).status,
        500
    );
    // A machine reports a first-boot failure.
    let report = r#"{"pool":"master","nodeID":"master-0","stage":"firstboot-update"}"#;
    let raw = mcs::exchange(
        bootstrap.insecure,
        None,
        &mcs::post_json_bytes("/v1/node-failure", report, &[]),
    )
    .unwrap();
    assert_eq!(mcs::parse_response(&raw, false).unwrap().status, 202);
    exported(&scrape(&bootstrap), &mut scraped);

    // Cluster mode: a layered pool held on its base image (a build succeeded, no node runs it)
    // and a machine that boots and joins (its MachineConfigNode is written).
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    api.load_yaml_file(support::fixtures::layered_objects())
        .unwrap();
    let tokens = token_dir();
    let cluster = Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("MCS_MCN_RETRY_PERIOD_MS", "200"),
            ("MCS_MCN_RESYNC_MS", "500"),
        ],
    );
    cluster.wait_every_pool_ready(DEADLINE);
    for pool in ["worker", "layered-worker"] {
        let path = format!("/config/{pool}");
        assert_eq!(cluster.http("GET", &path, &[ACCEPT_34]).status, 200);
    }
    api.apply_object(&worker_node("worker-0", "127.0.0.1"))
        .unwrap();

    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut both = scraped.clone();
        exported(&scrape(&cluster), &mut both);
        let problems = missing(&both);
        if problems.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alert rules use what the server does not export:\n{}\n\nscrape:\n{}",
            problems.join("\n"),
            scrape(&cluster)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

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

use serde::Deserialize;
use serde_json::{json, Value};
use support::promql::{self, uses};
use support::tier;

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

#[tier(promtool)]
#[test]
fn promtool_accepts_the_rules() {
    let out = promql::promtool(
        &deploy_dir().join("alerts"),
        &["check", "rules", "rules.yaml"],
    );
    let alerts = alert_rules().len();
    assert!(
        out.contains(&format!("SUCCESS: {alerts} rules found")),
        "{out}"
    );
}

#[tier(promtool)]
#[test]
fn promtool_unit_tests_pass() {
    let out = promql::promtool(
        &deploy_dir().join("alerts"),
        &["test", "rules", "tests.yaml"],
    );
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

/// What is missing from `scraped` for the rules' expressions, one line per problem.
fn missing(scraped: &promql::Exported) -> Vec<String> {
    alert_rules()
        .iter()
        .flat_map(|rule| {
            let name = rule["alert"].as_str().unwrap();
            promql::missing(name, rule["expr"].as_str().unwrap(), scraped, &[])
        })
        .collect()
}

#[test]
fn alert_expressions_use_what_the_server_exports() {
    promql::until_exported("alert rules", missing);
}

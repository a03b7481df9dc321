//! The console dashboard, `config/deploy/dashboard/machine-config-server.json`, checked as the
//! OpenShift console reads it and against what the server really exports:
//! - `promtool test rules tests.yaml` passes: every panel's query gives the expected values on
//!   series shaped as the server's (promtool is Debian's `prometheus` package);
//! - every panel query has a promtool case whose `expr` is exactly it, and every case is a
//!   panel's query, so a panel cannot be added, or changed, untested;
//! - every panel is one the console draws (`graph`, `singlestat`, `gauge`, `table`, inside
//!   `row`s; it silently leaves out any other type), names no data source and uses no template
//!   variable, and groups only by labels whose values are bounded;
//! - `kubectl apply -k config/deploy` makes the ConfigMap the console reads from exactly this
//!   file (kustomize's `configMapGenerator`: the JSON is the one source of truth);
//! - every metric and label a query reads, and every metric and label of the promtool input
//!   series, appear in a real scrape of the server's `/metrics` (both modes), apart from the
//!   target labels Prometheus adds, so a renamed metric breaks the build, not the panel;
//! - docs/operations.md describes every panel.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use support::promql::{self, Exported};
use support::tier;

/// The dashboard's title, as the console's dashboard list shows it.
const TITLE: &str = "Machine Config Server / Scale-up";

/// Labels Prometheus adds to every series of a target of the ServiceMonitor
/// (`config/deploy/metrics.yaml`): no scrape carries them.
const TARGET_LABELS: &[&str] = &["instance", "job", "namespace", "pod"];

/// Labels a panel may group by, each with a bounded number of values (docs/operations.md,
/// "Dashboard"): `pool` by `MAX_POOL_LABELS` (src/metrics.rs), `pod` by the replicas (one per
/// control-plane node), `le` by the histogram's buckets, `code` by the status codes the server
/// sends, the others by fixed sets in the code.
const BOUNDED_LABELS: &[&str] = &[
    "pool", "pod", "le", "code", "kind", "event", "result", "decision", "reason", "feature",
    "stage",
];

/// Panel types the console draws; it leaves out any other.
const CONSOLE_PANELS: &[&str] = &["graph", "singlestat", "gauge", "table"];

/// Units the console formats (`yaxes[0].format` of a graph, `format` of a single stat, `unit`
/// of a table column).
const CONSOLE_UNITS: &[&str] = &[
    "Bytes",
    "bytes",
    "bps",
    "Bps",
    "pps",
    "ms",
    "s",
    "percentunit",
    "short",
];

fn dashboard_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/deploy/dashboard")
}

fn dashboard() -> Value {
    support::dashboard::load().unwrap_or_else(|e| panic!("{e}"))
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let first = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .find(|doc| !doc.is_null());
    first.expect("a document")
}

fn panels(dashboard: &Value) -> Vec<Value> {
    support::dashboard::panels(dashboard)
}

/// Each panel query: the panel's title and the query.
fn queries() -> Vec<(String, String)> {
    support::dashboard::queries(&dashboard())
        .into_iter()
        .map(|q| (q.panel, q.expr))
        .collect()
}

fn tests_file() -> Value {
    yaml_file(&dashboard_dir().join("tests.yaml"))
}

/// The `expr` of every `promql_expr_test` case of tests.yaml.
fn tested_exprs() -> BTreeSet<String> {
    tests_file()["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|test| {
            test["promql_expr_test"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|case| case["expr"].as_str().expect("expr").to_owned())
        .collect()
}

#[tier(promtool)]
#[test]
fn promtool_tests_of_every_panel_query_pass() {
    let out = promql::promtool(&dashboard_dir(), &["test", "rules", "tests.yaml"]);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_panel_query_is_tested_and_every_test_is_a_panel_query() {
    let queries = queries();
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let tested = tested_exprs();
    let untested: Vec<String> = queries
        .iter()
        .filter(|(_, expr)| !tested.contains(expr))
        .map(|(title, expr)| format!("{title}: {expr}"))
        .collect();
    assert!(
        untested.is_empty(),
        "panel queries without a promql_expr_test in config/deploy/dashboard/tests.yaml whose expr is exactly them:\n{}",
        untested.join("\n")
    );
    let asked: BTreeSet<&str> = queries.iter().map(|(_, expr)| expr.as_str()).collect();
    let stale: Vec<&String> = tested
        .iter()
        .filter(|expr| !asked.contains(expr.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "tests.yaml tests queries no panel has: {stale:?}"
    );
}

#[test]
fn the_console_draws_every_panel() {
    let dashboard = dashboard();
    assert_eq!(dashboard["title"], TITLE);
    // The console substitutes only query and interval variables, and promtool could not test a
    // query with a variable in it as the panel has it.
    assert_eq!(
        dashboard["templating"]["list"],
        serde_json::json!([]),
        "no template variables"
    );
    // The console keys panels by id.
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        assert!(ids.insert(panel["id"].as_u64().expect("a numeric id")));
        if panel["type"] == "row" {
            // The console shows a row's title, and lets it fold, only with showTitle.
            assert_eq!(panel["showTitle"], true, "{panel}");
            assert!(panel["title"].as_str().is_some_and(|t| !t.is_empty()));
            for inner in panel["panels"].as_array().into_iter().flatten() {
                assert!(ids.insert(inner["id"].as_u64().expect("a numeric id")));
            }
        }
    }
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().expect("a title");
        let kind = panel["type"].as_str().unwrap_or_default();
        assert!(
            CONSOLE_PANELS.contains(&kind),
            "{title}: the console does not draw panels of type {kind:?}"
        );
        // A data source the console reads as the name of a data-source plugin; without one,
        // the console asks the cluster's Prometheus and Grafana its default data source.
        assert!(
            panel.get("datasource").is_none(),
            "{title}: names a data source"
        );
        let span = panel["span"].as_u64().unwrap_or_default();
        assert!((1..=12).contains(&span), "{title}: span {span}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            assert!(
                target.get("datasource").is_none(),
                "{title}: names a data source"
            );
            assert!(
                target["refId"].is_string(),
                "{title}: a target without refId"
            );
        }
        let units: Vec<&str> = match kind {
            "graph" => vec![panel["yaxes"][0]["format"].as_str().unwrap_or_default()],
            "singlestat" | "gauge" => vec![panel["format"].as_str().unwrap_or_default()],
            _ => Vec::new(),
        };
        if kind == "table" {
            // The console draws a table's columns from its styles only.
            let styles = panel["styles"].as_array().expect("a table has styles");
            let shown: Vec<&Value> = styles.iter().filter(|s| s["type"] != "hidden").collect();
            assert!(shown.len() >= 2, "{title}: columns {shown:?}");
            for style in shown {
                assert!(
                    style["alias"].is_string(),
                    "{title}: a column without alias"
                );
                if let Some(unit) = style["unit"].as_str() {
                    assert!(CONSOLE_UNITS.contains(&unit), "{title}: unit {unit}");
                }
            }
        }
        for unit in units {
            assert!(CONSOLE_UNITS.contains(&unit), "{title}: unit {unit:?}");
        }
    }
}

#[test]
fn panels_group_only_by_bounded_labels() {
    for (title, expr) in queries() {
        let grouping = promql::uses(&expr).grouping;
        for label in &grouping {
            assert!(
                BOUNDED_LABELS.contains(&label.as_str()),
                "{title}: groups by {label}, whose values are not known to be bounded: {expr}"
            );
        }
    }
}

/// `kubectl apply -k config/deploy` applies the dashboard as the ConfigMap the console reads:
/// kustomize generates it from the JSON file (one key, named after the file; the console reads
/// a dashboard ConfigMap's first key), under a fixed name, in openshift-config-managed, with
/// the console's label.
#[test]
fn kustomize_generates_the_console_configmap_from_the_json() {
    let kustomization = yaml_file(&dashboard_dir().join("../kustomization.yaml"));
    let generators = kustomization["configMapGenerator"]
        .as_array()
        .expect("configMapGenerator");
    assert_eq!(generators.len(), 1, "{generators:?}");
    let generator = &generators[0];
    assert_eq!(generator["name"], "machine-config-server-dashboard");
    assert_eq!(generator["namespace"], "openshift-config-managed");
    assert_eq!(
        generator["files"],
        serde_json::json!(["dashboard/machine-config-server.json"])
    );
    assert!(generator.get("literals").is_none() && generator.get("envs").is_none());
    assert_eq!(generator["options"]["disableNameSuffixHash"], true);
    assert_eq!(
        generator["options"]["labels"]["console.openshift.io/dashboard"],
        "true"
    );
    // The namespace is the generator's own: a kustomization-wide one would override it.
    assert!(kustomization.get("namespace").is_none());
    assert_eq!(dashboard()["title"], TITLE);
}

/// The labels and metric of one promtool input series, e.g. `m{a="1",b="2"}`.
fn series_shape(series: &str) -> (String, BTreeSet<String>) {
    let label = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*""#).unwrap();
    let name_end = series.find('{').unwrap_or(series.len());
    let labels = label
        .captures_iter(&series[name_end..])
        .map(|caps| caps[1].to_owned())
        .collect();
    (series[..name_end].to_owned(), labels)
}

/// What the panel queries and the promtool input series use that `scraped` lacks.
fn missing(scraped: &Exported) -> Vec<String> {
    let mut problems: Vec<String> = queries()
        .iter()
        .flat_map(|(title, expr)| promql::missing(title, expr, scraped, TARGET_LABELS))
        .collect();
    for test in tests_file()["tests"].as_array().expect("tests") {
        for input in test["input_series"].as_array().into_iter().flatten() {
            let series = input["series"].as_str().expect("series");
            let (name, labels) = series_shape(series);
            let Some(exported) = scraped.get(&name) else {
                problems.push(format!("tests.yaml: {name} is not exported"));
                continue;
            };
            for label in &labels {
                if !exported.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                    problems.push(format!("tests.yaml: {name} has no label {label}"));
                }
            }
        }
    }
    problems
}

#[test]
fn series_shape_reads_name_and_labels() {
    assert_eq!(
        series_shape(r#"mcs_requests_total{pool="<unknown>",code="500",pod="a"}"#),
        (
            "mcs_requests_total".to_owned(),
            BTreeSet::from(["pool".to_owned(), "code".to_owned(), "pod".to_owned()])
        )
    );
    assert_eq!(
        series_shape("mcs_ready"),
        ("mcs_ready".to_owned(), BTreeSet::new())
    );
}

#[test]
fn panel_queries_and_test_series_use_what_the_server_exports() {
    promql::until_exported("dashboard panels and tests.yaml", missing);
}

/// docs/operations.md, "Dashboard": names the dashboard and says what every panel shows.
#[test]
fn the_operations_guide_describes_every_panel() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md");
    let text = std::fs::read_to_string(path).expect("docs/operations.md");
    let start = text.find("\n## Dashboard\n").expect("a Dashboard section");
    let section = &text[start + 1..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 3)];
    assert!(section.contains(TITLE), "the section names the dashboard");
    for panel in panels(&dashboard()) {
        let title = panel["title"].as_str().unwrap();
        assert!(
            section.contains(&format!("**{title}**")),
            "docs/operations.md, Dashboard, does not describe panel **{title}**"
        );
    }
}

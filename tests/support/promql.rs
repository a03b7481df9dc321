//! PromQL expressions held against what the server really exports, for the files that query
//! its metrics (the alerting rules, `tests/alerts.rs`; the console dashboard,
//! `tests/dashboard.rs`): which metrics and labels an expression reads ([`uses`]), which
//! sample names and labels an OpenMetrics scrape carries ([`exported`]), what an expression
//! reads that a scrape lacks ([`missing`]), real scrapes of the server in both modes
//! ([`until_exported`]), and `promtool` ([`promtool`]), so that a renamed metric or label fails a test instead of leaving a
//! silent alert or an empty panel.
//!
//! The parser is a reading aid, not a PromQL parser: it knows the functions and keywords in
//! [`PROMQL_WORDS`] and takes every other identifier outside a label list for a metric name,
//! so an expression using a new function fails loudly (as an unknown metric) until the word
//! is added.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::api_server::{ApiServer, Options};
use crate::cluster::{load_realistic_cluster, token_dir, worker_node, APISERVER_URL};
use crate::mcs::{self, Server};

/// Sample name (e.g. `mcs_requests_total`, `mcs_request_duration_seconds_bucket`) to the
/// label names seen on it.
pub type Exported = BTreeMap<String, BTreeSet<String>>;

/// What an expression reads: selected metrics with the labels they match, and the labels it
/// groups or joins by.
#[derive(Debug, Default)]
pub struct Uses {
    pub metrics: BTreeMap<String, BTreeSet<String>>,
    pub grouping: BTreeSet<String>,
}

/// PromQL words that are not metric names.
pub const PROMQL_WORDS: &[&str] = &[
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

/// The metrics, matched labels and grouping labels of `expr`.
pub fn uses(expr: &str) -> Uses {
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

/// Adds every sample name of the OpenMetrics `text` with the label names seen on it.
pub fn exported(text: &str, into: &mut Exported) {
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

/// What `expr` (named `name` in the messages) reads that `scraped` lacks, one line per
/// problem. `target_labels` are labels Prometheus adds to every series of a target (e.g.
/// `pod`, from the ServiceMonitor's endpoints), which no scrape carries.
pub fn missing(name: &str, expr: &str, scraped: &Exported, target_labels: &[&str]) -> Vec<String> {
    let found = uses(expr);
    assert!(!found.metrics.is_empty(), "{name}: selects no metric");
    let mut problems = Vec::new();
    let mut all_labels: BTreeSet<String> = target_labels.iter().map(|l| l.to_string()).collect();
    for (metric, labels) in &found.metrics {
        let Some(exported_labels) = scraped.get(metric) else {
            problems.push(format!("{name}: metric {metric} is not exported"));
            continue;
        };
        all_labels.extend(exported_labels.iter().cloned());
        for label in labels.difference(exported_labels) {
            if !target_labels.contains(&label.as_str()) {
                problems.push(format!("{name}: {metric} has no label {label}"));
            }
        }
    }
    for label in found.grouping.difference(&all_labels) {
        problems.push(format!("{name}: groups by {label}, which its metrics lack"));
    }
    problems
}

/// `promtool ARGS` run in `dir` (for `#[tier(promtool)]` tests): its output, stdout then
/// stderr; panics with it when promtool fails.
pub fn promtool(dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new("promtool");
    command.current_dir(dir).args(args);
    let out = command.output().expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

/// `GET /metrics` on the server's admin listener.
pub fn scrape(server: &Server) -> String {
    let response = mcs::request(server.metrics, None, "GET", "/metrics", &[]);
    assert_eq!(response.status, 200);
    String::from_utf8(response.body).expect("utf-8")
}

const DEADLINE: Duration = Duration::from_secs(30);

const ACCEPT_34: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.4.0",
);

/// Scrapes the server in both modes after it did what makes its lazily created series appear,
/// until `problems` of the union of both scrapes is empty; panics with the problems and the
/// cluster scrape when it is not within 30 seconds. What it does first:
/// - bootstrap mode: a config served, a pool it does not serve, a first-boot failure report;
/// - cluster mode (the in-test API server): a layered pool held on its base image (a build
///   succeeded, no node runs it), configs served for it and a plain pool, and a machine that
///   boots and joins (its MachineConfigNode is written).
pub fn until_exported(what: &str, problems: impl Fn(&Exported) -> Vec<String>) {
    let mut scraped = Exported::new();

    let bootstrap = Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    assert_eq!(
        bootstrap.http("GET", "/config/master", &[ACCEPT_34]).status,
        200
    );
    assert_eq!(
        bootstrap.http("GET", "/config/nope", &[ACCEPT_34]).status,
        500
    );
    let report = r#"{"pool":"master","nodeID":"master-0","stage":"firstboot-update"}"#;
    let raw = mcs::exchange(
        bootstrap.insecure,
        None,
        &mcs::post_json_bytes("/v1/node-failure", report, &[]),
    )
    .unwrap();
    assert_eq!(mcs::parse_response(&raw, false).unwrap().status, 202);
    exported(&scrape(&bootstrap), &mut scraped);

    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    api.load_yaml_file(crate::fixtures::layered_objects())
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
        let found = problems(&both);
        if found.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} use what the server does not export:\n{}\n\nscrape:\n{}",
            found.join("\n"),
            scrape(&cluster)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

//! `machine-config-server explain`: what the server would answer a node asking for one pool,
//! and why, without binding a port. The first thing to run when a node will not join.
//!
//! Owns the report ([`Explanation`], its text and JSON forms) and the one-shot loading of a
//! snapshot: the bootstrap directory read once ([`bootstrap::load_once`]), or the cluster source
//! started, given until `--timeout-seconds` for its caches to sync, and stopped.
//!
//! Everything reported comes from the serving code paths, in the config handler's order: pool
//! name from the path ([`pool_path::parse`]), Accept negotiation ([`accept::negotiate`]),
//! readiness, [`render::render`] and its status mapping ([`server::status_for`]). What is
//! described of a served config is read back from the served bytes. This module decides
//! nothing the server decides, and never prints file contents or the served kubeconfig: paths,
//! modes and sizes only.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use crate::api::{annotations, MachineConfigPool};
use crate::app::RunError;
use crate::cli::{self, ExplainFlags, ExplainOutput, UsageError};
use crate::ignition::{self, accept, dataurl, SpecVersion};
use crate::render::layered::{DecisionReason, LayeredDecision};
use crate::render::{self, RenderError};
use crate::server::tls::TlsPolicy;
use crate::server::{self, pool_path, ErrorChain};
use crate::snapshot::{LoadError, Mode, Snapshot};
use crate::source::bootstrap::{self, BootstrapSettings};
use crate::source::cluster::{self, ClusterObserver, ClusterSettings};

/// How the spec version is chosen: an Accept header negotiated as the server does, or a
/// version given outright (`--spec`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecRequest {
    Accept(String),
    Exact(SpecVersion),
}

impl SpecRequest {
    /// Without `--accept` or `--spec`: what a current Ignition sends (the newest spec).
    pub fn default_accept() -> SpecRequest {
        SpecRequest::Accept(format!(
            "application/vnd.coreos.ignition+json;version={}, */*;q=0.1",
            SpecVersion::NEWEST
        ))
    }
}

/// Everything `explain` reports. Serialized as is for `--output json`.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// `bootstrap` or `cluster`.
    pub mode: &'static str,
    /// Where the state came from: the base directory, the kubeconfig, or `in-cluster`.
    pub source: String,
    pub pool: String,
    /// The pool object exists (bootstrap: its file; cluster: the MachineConfigPool).
    pub pool_found: bool,
    /// Why the pool cannot be used, when it cannot.
    pub pool_problem: Option<String>,
    /// Pools that exist and load (bootstrap mode reads only `master` and `arbiter`).
    pub known_pools: Vec<String>,
    /// Which rendered MachineConfig the pool points a new node at, and by which rule.
    pub selection: Option<Selection>,
    /// The Accept header negotiated (`None` with `--spec`).
    pub accept: Option<String>,
    /// The spec version served, when one could be chosen.
    pub spec_version: Option<String>,
    /// `accept` or `spec`: how the version was chosen.
    pub spec_version_from: &'static str,
    /// The layered-image decision of the render (cluster mode, when the render got that far).
    pub layered: Option<LayeredDecision>,
    /// The HTTP status the server would answer.
    pub status: u16,
    pub status_text: String,
    /// Why the server would not serve a config.
    pub error: Option<ErrorReport>,
    /// What Ignition on the node does with this answer.
    pub node_behaviour: &'static str,
    /// The served config, described from its bytes (only on 200).
    pub served: Option<Served>,
    /// Anything else worth knowing (cluster caches that did not sync, `--write-config`).
    pub notes: Vec<String>,
}

/// The rendered MachineConfig chosen for the pool.
#[derive(Clone, Debug, Serialize)]
pub struct Selection {
    /// The chosen name (empty when the pool names none).
    pub rendered_config: String,
    /// The rule that chose it, in words.
    pub rule: String,
    pub spec_configuration: String,
    pub status_configuration: String,
    /// `status.updatedMachineCount` (cluster mode decides on it).
    pub updated_machine_count: Option<i64>,
    /// `found`, `missing`, or why it cannot be loaded.
    pub machine_config: String,
}

/// A failure the server would answer with a non-200 status.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorReport {
    /// Short, stable name (the metric label the server uses).
    pub kind: String,
    /// The error with its whole `source()` chain, as the server logs it.
    pub message: String,
}

/// A served config, read back from the exact bytes.
#[derive(Clone, Debug, Serialize)]
pub struct Served {
    pub body_bytes: usize,
    /// `ignition.version` of the body.
    pub ignition_version: String,
    /// `storage.files`, in served order.
    pub files: Vec<ServedFile>,
    /// `systemd.units` count.
    pub systemd_units: usize,
    pub kernel_arguments: KernelArguments,
    /// `spec.osImageURL` of the encapsulated MachineConfig: the image the node boots into.
    pub os_image_url: Option<String>,
    /// The `currentImage` node annotation, when the served annotations carry one.
    pub node_annotations_image: Option<String>,
}

/// One served file: never its contents, only their size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServedFile {
    pub path: String,
    /// `mode` as written in the config (decimal; 420 is 0644).
    pub mode: Option<i64>,
    /// Size of the decoded contents (`None` for remote or undecodable sources).
    pub size: Option<usize>,
    /// `data` (inline), `remote` (fetched by Ignition), `none`, or `invalid`.
    pub contents: &'static str,
    pub compression: Option<String>,
    pub origin: FileOrigin,
    /// What the server writes at this path, for the paths it owns.
    pub role: Option<&'static str>,
}

/// Where a served file comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOrigin {
    /// From the rendered MachineConfig, unchanged.
    MachineConfig,
    /// From the rendered MachineConfig, contents replaced by the server (ControllerConfig CAs).
    Replaced,
    /// Added by the server.
    Appended,
}

/// Kernel arguments a node gets: from Ignition (spec 3.3 and later) and from the MachineConfig
/// (the daemon applies those; below 3.3 Ignition's are moved there).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelArguments {
    pub ignition_should_exist: Vec<String>,
    pub ignition_should_not_exist: Vec<String>,
    /// `spec.kernelArguments` of the served MachineConfig content file.
    pub machine_config: Vec<String>,
}

/// The report and, on 200, the exact bytes the server would send.
#[derive(Clone, Debug)]
pub struct Explained {
    pub explanation: Explanation,
    pub body: Option<Bytes>,
}

/// Explain what a request for `/config/<pool>` gets from `snapshot`. `ready` is the source's
/// readiness (always true in bootstrap mode); `source` describes where the snapshot came from.
pub fn explain(
    snapshot: &Snapshot,
    ready: bool,
    pool: &str,
    spec: &SpecRequest,
    source: String,
) -> Explained {
    let (accept_header, negotiated) = match spec {
        SpecRequest::Accept(header) => (Some(header.clone()), accept::negotiate(Some(header))),
        SpecRequest::Exact(version) => (None, Ok(*version)),
    };
    let (pool_found, pool_problem) = if ready {
        pool_state(snapshot, pool)
    } else {
        (
            false,
            Some("unknown: the watch caches have not synced".to_string()),
        )
    };
    let mut explanation = Explanation {
        mode: mode_name(snapshot.mode),
        source,
        pool: pool.to_string(),
        pool_found,
        pool_problem,
        known_pools: known_pools(snapshot),
        selection: selection(snapshot, pool),
        accept: accept_header,
        spec_version: negotiated.as_ref().ok().map(|v| v.to_string()),
        spec_version_from: match spec {
            SpecRequest::Accept(_) => "accept",
            SpecRequest::Exact(_) => "spec",
        },
        layered: None,
        status: 0,
        status_text: String::new(),
        error: None,
        node_behaviour: "",
        served: None,
        notes: Vec::new(),
    };
    let mut body = None;

    // The config handler's order: pool name from the path, Accept, readiness, render.
    let outcome = match pool_path::parse(&format!("/config/{pool}")) {
        Err(e) => Err((e.status(), error_report("invalid_pool_path", &e))),
        Ok(_) => match negotiated {
            Err(e) => Err((StatusCode::BAD_REQUEST, error_report(e.kind(), &e))),
            Ok(_) if !ready => {
                let e = RenderError::NotReady;
                Err((server::status_for(&e), error_report(e.kind(), &e)))
            }
            Ok(version) => match render::render(snapshot, pool, version) {
                Ok(rendered) => {
                    explanation.layered = rendered.layered.clone();
                    let original = original_files(snapshot, &rendered.rendered_config);
                    explanation.served = Some(describe_served(&rendered.body, &original));
                    body = Some(rendered.body);
                    Ok(())
                }
                Err(e) => Err((server::status_for(&e), error_report(e.kind(), &e))),
            },
        },
    };
    let status = match outcome {
        Ok(()) => StatusCode::OK,
        Err((status, error)) => {
            explanation.error = Some(error);
            status
        }
    };
    explanation.status = status.as_u16();
    explanation.status_text = status.canonical_reason().unwrap_or("").to_string();
    explanation.node_behaviour = node_behaviour(status);
    Explained { explanation, body }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Bootstrap => "bootstrap",
        Mode::Cluster => "cluster",
    }
}

fn error_report(kind: &str, error: &(dyn std::error::Error + 'static)) -> ErrorReport {
    ErrorReport {
        kind: kind.to_string(),
        message: ErrorChain(error).to_string(),
    }
}

/// What Ignition does with the answer (it waits for 200, retries 5xx, gives up on 4xx).
fn node_behaviour(status: StatusCode) -> &'static str {
    if status.is_success() {
        "Ignition applies this config"
    } else if status.is_server_error() {
        "Ignition retries 5xx answers forever (backoff up to 5 s): the node joins once this is fixed"
    } else {
        "Ignition gives up on a 4xx answer: the machine is stuck until it is fixed and rebooted"
    }
}

fn pool_state(snapshot: &Snapshot, pool: &str) -> (bool, Option<String>) {
    match snapshot.pools.get(pool) {
        Some(Ok(_)) => (true, None),
        Some(Err(e @ LoadError::NotFound(_))) => (false, Some(e.to_string())),
        Some(Err(e)) => (true, Some(e.to_string())),
        None => (
            false,
            Some(match snapshot.mode {
                Mode::Bootstrap => format!(
                    "bootstrap mode reads only the {} pools",
                    render::BOOTSTRAP_POOLS.join(" and ")
                ),
                Mode::Cluster => format!("no MachineConfigPool named {pool:?}"),
            }),
        ),
    }
}

fn known_pools(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .pools
        .iter()
        .filter(|(_, pool)| pool.is_ok())
        .map(|(name, _)| name.clone())
        .collect()
}

/// The rendered config the pool points at, and the rule, described from the pool object. The
/// render makes the same choice ([`MachineConfigPool::served_config_name`] in cluster mode).
fn selection(snapshot: &Snapshot, pool: &str) -> Option<Selection> {
    let pool_object: &MachineConfigPool = snapshot.pools.get(pool)?.as_ref().ok()?;
    let spec_name = pool_object.spec.configuration.name.clone();
    let status = pool_object.status.as_ref();
    let status_name = status
        .map(|s| s.configuration.name.clone())
        .unwrap_or_default();
    let updated = status.map(|s| s.updated_machine_count);
    let (chosen, rule) = match snapshot.mode {
        Mode::Bootstrap => (
            status_name.clone(),
            format!("status.configuration of machine-pools/{pool}.yaml (bootstrap mode)"),
        ),
        Mode::Cluster => {
            let chosen = pool_object.served_config_name().to_string();
            let rule = cluster_rule(&chosen, &spec_name, &status_name, updated);
            (chosen, rule)
        }
    };
    let machine_config = match snapshot.machine_configs.get(&chosen) {
        _ if chosen.is_empty() => "none named".to_string(),
        Some(Ok(_)) => "found".to_string(),
        Some(Err(e)) => e.to_string(),
        None => "missing".to_string(),
    };
    Some(Selection {
        rendered_config: chosen,
        rule,
        spec_configuration: spec_name,
        status_configuration: status_name,
        updated_machine_count: updated,
        machine_config,
    })
}

/// Names the field the cluster-mode choice came from, derived from the choice itself.
fn cluster_rule(chosen: &str, spec: &str, status: &str, updated: Option<i64>) -> String {
    let Some(updated) = updated else {
        return "the pool has no status yet: it names no rendered config to serve".to_string();
    };
    if chosen.is_empty() {
        "the pool names no rendered config yet".to_string()
    } else if spec == status {
        format!(
            "spec.configuration and status.configuration agree (status.updatedMachineCount {updated})"
        )
    } else if chosen == spec {
        format!(
            "spec.configuration: status.updatedMachineCount is {updated} (> 0), so the newest \
             render, already running on a node, is served instead of status.configuration {status}"
        )
    } else {
        format!(
            "status.configuration: status.updatedMachineCount is {updated}, so the render the \
             pool is at is served; the newer spec.configuration {spec} is not on any node yet"
        )
    }
}

/// Paths and decoded contents of the selected MachineConfig's own files, to tell them apart
/// from what the server adds or replaces.
fn original_files(snapshot: &Snapshot, rendered_config: &str) -> Vec<(String, Option<Vec<u8>>)> {
    let Some(Ok(machine_config)) = snapshot.machine_configs.get(rendered_config) else {
        return Vec::new();
    };
    let Ok(config) = ignition::parse_config(machine_config.spec.config.as_ref()) else {
        return Vec::new();
    };
    config
        .storage
        .and_then(|s| s.files)
        .unwrap_or_default()
        .into_iter()
        .map(|file| {
            let contents = file
                .contents
                .and_then(|c| c.source)
                .and_then(|source| dataurl::decode(&source).ok());
            (file.path, contents)
        })
        .collect()
}

/// The paths the server writes, by what it writes there.
fn server_role(path: &str) -> Option<&'static str> {
    match path {
        render::NODE_ANNOTATIONS_PATH => Some("node annotations"),
        render::KUBECONFIG_PATH => Some("kubeconfig"),
        render::MACHINE_CONFIG_CONTENT_PATH => Some("machine config content"),
        render::ENCAPSULATED_PATH => Some("encapsulated machine config"),
        render::KUBELET_CA_PATH => Some("kubelet CA"),
        render::CLOUD_PROVIDER_CA_PATH => Some("cloud provider CA"),
        _ => path
            .strip_prefix(render::REGISTRY_CERTS_DIR)
            .filter(|rest| rest.starts_with('/') && rest.ends_with("/ca.crt"))
            .map(|_| "registry CA"),
    }
}

/// Describe the served bytes. `original` are the MachineConfig's own files in order: the
/// server keeps them first and in place (replacing the CA files' contents), and appends the
/// rest after them.
pub fn describe_served(body: &[u8], original: &[(String, Option<Vec<u8>>)]) -> Served {
    let document: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let files: Vec<(ServedFile, Option<Vec<u8>>)> = document["storage"]["files"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(index, file)| describe_file(index, file, original))
        .collect();
    // Read back from the server's own files (last one wins, as on the node).
    let file_json = |path: &str| -> Value {
        files
            .iter()
            .rev()
            .find(|(f, _)| f.path == path)
            .and_then(|(_, data)| data.as_deref())
            .and_then(|data| serde_json::from_slice(data).ok())
            .unwrap_or(Value::Null)
    };
    let content = file_json(render::MACHINE_CONFIG_CONTENT_PATH);
    let encapsulated = file_json(render::ENCAPSULATED_PATH);
    let node_annotations = file_json(render::NODE_ANNOTATIONS_PATH);
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Served {
        body_bytes: body.len(),
        ignition_version: document["ignition"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        files: files.into_iter().map(|(file, _)| file).collect(),
        systemd_units: document["systemd"]["units"].as_array().map_or(0, Vec::len),
        kernel_arguments: KernelArguments {
            ignition_should_exist: strings(&document["kernelArguments"]["shouldExist"]),
            ignition_should_not_exist: strings(&document["kernelArguments"]["shouldNotExist"]),
            machine_config: strings(&content["spec"]["kernelArguments"]),
        },
        os_image_url: encapsulated["spec"]["osImageURL"]
            .as_str()
            .map(str::to_string),
        node_annotations_image: node_annotations[annotations::CURRENT_IMAGE]
            .as_str()
            .map(str::to_string),
    }
}

fn describe_file(
    index: usize,
    file: &Value,
    original: &[(String, Option<Vec<u8>>)],
) -> (ServedFile, Option<Vec<u8>>) {
    let path = file["path"].as_str().unwrap_or_default().to_string();
    let source = file["contents"]["source"].as_str();
    let (contents, data) = match source {
        None => ("none", None),
        Some(url) if url.starts_with("data:") => match dataurl::decode(url) {
            Ok(data) => ("data", Some(data)),
            Err(_) => ("invalid", None),
        },
        Some(_) => ("remote", None),
    };
    let origin = match original.get(index) {
        Some((original_path, original_data)) if *original_path == path => {
            if data.is_some() && *original_data != data {
                FileOrigin::Replaced
            } else {
                FileOrigin::MachineConfig
            }
        }
        _ => FileOrigin::Appended,
    };
    let described = ServedFile {
        role: server_role(&path),
        path,
        mode: file["mode"].as_i64(),
        size: data.as_ref().map(Vec::len),
        contents,
        compression: file["contents"]["compression"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string),
        origin,
    };
    (described, data)
}

/// One line per layered reason: what it means for the booting node.
fn reason_meaning(reason: DecisionReason) -> &'static str {
    match reason {
        DecisionReason::NotLayered => "no MachineOSConfig names this pool",
        DecisionReason::NoImageYet => "the MachineOSConfig has no image yet",
        DecisionReason::NoBuildForConfig => {
            "no MachineOSBuild of the MachineOSConfig is for this rendered config"
        }
        DecisionReason::BuildPending => "the newest build has not started or has no image yet",
        DecisionReason::BuildBuilding => "the newest build is running",
        DecisionReason::BuildFailed => "the newest build failed",
        DecisionReason::BuildInterrupted => "the newest build was interrupted",
        DecisionReason::NotValidated => {
            "a build succeeded, but no node of the pool runs its image and is done updating"
        }
        DecisionReason::InClusterRegistry => {
            "the image is in the in-cluster registry, which a booting node cannot reach"
        }
        DecisionReason::Validated => "a node of the pool runs this image",
    }
}

const LABEL_WIDTH: usize = 18;

/// The report as text for a person.
pub fn format_text(e: &Explanation) -> String {
    let mut out = format!("What a node asking for /config/{} would get:\n", e.pool);
    let mut line = |label: &str, value: &str| {
        let mut first = true;
        for part in value.split('\n') {
            let label = if first { label } else { "" };
            out.push_str(&format!("  {label:<LABEL_WIDTH$}{part}\n"));
            first = false;
        }
    };
    line("mode:", &format!("{} ({})", e.mode, e.source));
    let known = if e.known_pools.is_empty() {
        "none".to_string()
    } else {
        e.known_pools.join(", ")
    };
    let pool_state = match (&e.pool_problem, e.pool_found) {
        (None, _) => "found".to_string(),
        (Some(problem), false) if problem.starts_with("unknown") => problem.clone(),
        (Some(problem), true) => format!("found but unusable: {problem}"),
        (Some(problem), false) => format!("not found: {problem}"),
    };
    line(
        "pool:",
        &format!("{} ({pool_state}; known pools: {known})", e.pool),
    );
    match &e.selection {
        Some(s) => {
            let name = if s.rendered_config.is_empty() {
                "(none)"
            } else {
                &s.rendered_config
            };
            line(
                "rendered config:",
                &format!("{name} ({})\n{}", s.machine_config, s.rule),
            );
        }
        None => line("rendered config:", "(no usable pool)"),
    }
    let spec = match (&e.spec_version, e.spec_version_from, &e.accept) {
        (Some(v), "accept", Some(accept)) => format!("{v}, negotiated from Accept: {accept}"),
        (Some(v), _, _) => format!("{v} (--spec)"),
        (None, _, Some(accept)) => format!("none: Accept {accept:?} names no servable version"),
        (None, _, None) => "none".to_string(),
    };
    line("spec version:", &spec);
    line("layered image:", &layered_text(e));
    line("answer:", &format!("{} {}", e.status, e.status_text));
    if let Some(error) = &e.error {
        line(
            "error:",
            &format!("{} (kind: {})", error.message, error.kind),
        );
    }
    line("on the node:", e.node_behaviour);
    if let Some(served) = &e.served {
        line(
            "body:",
            &format!(
                "{} bytes, Ignition {}",
                served.body_bytes, served.ignition_version
            ),
        );
        line(
            "files:",
            &format!(
                "{} (in served order)\n{}",
                served.files.len(),
                files_table(&served.files)
            ),
        );
        line("systemd units:", &served.systemd_units.to_string());
        let k = &served.kernel_arguments;
        line(
            "kernel args:",
            &format!(
                "Ignition shouldExist: {}; shouldNotExist: {}\nMachineConfig spec.kernelArguments: {}",
                list_or_none(&k.ignition_should_exist),
                list_or_none(&k.ignition_should_not_exist),
                list_or_none(&k.machine_config)
            ),
        );
        line(
            "OS image:",
            served
                .os_image_url
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("(none: the node keeps the image it booted)"),
        );
        line(
            "node image:",
            served
                .node_annotations_image
                .as_deref()
                .unwrap_or("(none in the node annotations)"),
        );
    }
    for note in &e.notes {
        line("note:", note);
    }
    out
}

fn layered_text(e: &Explanation) -> String {
    let Some(decision) = &e.layered else {
        return match e.mode {
            "bootstrap" => "not layered (bootstrap mode)".to_string(),
            _ => "not decided (the request failed before the render decided it)".to_string(),
        };
    };
    let mut details = Vec::new();
    let mut detail = |label: &str, value: &Option<String>| {
        if let Some(value) = value {
            details.push(format!("{label} {value}"));
        }
    };
    detail("MachineOSConfig", &decision.machine_os_config);
    detail("MachineOSBuild", &decision.machine_os_build);
    if decision.build_image != decision.image {
        detail("build image", &decision.build_image);
    }
    detail("validated by node", &decision.validated_by);
    let head = match &decision.image {
        Some(image) => format!("layered image {image}"),
        None => "base image".to_string(),
    };
    let mut text = format!(
        "{head}: {} ({})",
        decision.reason,
        reason_meaning(decision.reason)
    );
    if !details.is_empty() {
        text.push('\n');
        text.push_str(&details.join(", "));
    }
    text
}

fn files_table(files: &[ServedFile]) -> String {
    let mut rows = vec![format!("{:<6} {:>9}  PATH", "MODE", "BYTES")];
    for file in files {
        let mode = file
            .mode
            .map(|m| format!("{m:04o}"))
            .unwrap_or_else(|| "-".to_string());
        let size = match (file.size, file.contents) {
            (Some(size), _) => size.to_string(),
            (None, kind) => kind.to_string(),
        };
        let mut marks = Vec::new();
        match file.origin {
            FileOrigin::MachineConfig => {}
            FileOrigin::Replaced => marks.push("replaced by server"),
            FileOrigin::Appended => marks.push("appended by server"),
        }
        if let Some(role) = file
            .role
            .filter(|_| file.origin != FileOrigin::MachineConfig)
        {
            marks.push(role);
        }
        let compression = file
            .compression
            .as_deref()
            .map(|c| format!(" ({c} compressed)"))
            .unwrap_or_default();
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!("  [{}]", marks.join(": "))
        };
        rows.push(format!(
            "{mode:<6} {size:>9}  {}{compression}{marks}",
            file.path
        ));
    }
    rows.join("\n")
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(" ")
    }
}

/// `--spec`: one of the servable versions, `3.4.0` or `3.4`.
pub fn parse_spec(value: &str) -> Result<SpecVersion, UsageError> {
    SpecVersion::ALL
        .into_iter()
        .find(|v| v.as_str() == value || v.as_str().strip_suffix(".0") == Some(value))
        .ok_or_else(|| {
            let all: Vec<&str> = SpecVersion::ALL.iter().map(|v| v.as_str()).collect();
            UsageError(format!(
                "--spec {value:?}: expected one of {}",
                all.join(", ")
            ))
        })
}

/// `--pool` must be what a node's `/config/<pool>` path resolves to, not another path.
pub fn check_pool(pool: &str) -> Result<(), UsageError> {
    match pool_path::parse(&format!("/config/{pool}")) {
        Ok(parsed) if parsed.pool != pool || parsed.traversal => Err(UsageError(format!(
            "--pool {pool:?}: a node asking for /config/{pool} gets pool {:?}; pass the pool name",
            parsed.pool
        ))),
        // A name no pool can have is explained as the 4xx the server answers.
        _ => Ok(()),
    }
}

/// `machine-config-server explain`: load, explain, print, and exit 1 (with one line on stderr)
/// when the server would not serve a config.
pub async fn run(flags: &ExplainFlags) -> Result<(), RunError> {
    check_pool(&flags.pool)?;
    let spec = match (&flags.accept, &flags.spec) {
        (_, Some(spec)) => SpecRequest::Exact(parse_spec(spec)?),
        (Some(accept), None) => SpecRequest::Accept(accept.clone()),
        (None, None) => SpecRequest::default_accept(),
    };
    let loaded = match &flags.server_basedir {
        Some(base_dir) => load_bootstrap(base_dir, flags).await?,
        None => load_cluster(flags).await?,
    };
    let Explained {
        mut explanation,
        body,
    } = explain(
        &loaded.snapshot,
        loaded.ready,
        &flags.pool,
        &spec,
        loaded.source,
    );
    explanation.notes.extend(loaded.notes);
    if let Some(path) = &flags.write_config {
        match &body {
            Some(body) => {
                std::fs::write(path, body)
                    .map_err(|e| UsageError(format!("--write-config {}: {e}", path.display())))?;
                explanation.notes.push(format!(
                    "wrote the {} served bytes to {}",
                    body.len(),
                    path.display()
                ));
            }
            None => explanation.notes.push(format!(
                "nothing written to {}: no config would be served",
                path.display()
            )),
        }
    }
    let report = match flags.output {
        ExplainOutput::Text => format_text(&explanation),
        ExplainOutput::Json => {
            let mut json = serde_json::to_string_pretty(&explanation)
                .map_err(|e| anyhow::anyhow!("cannot serialize the report: {e}"))?;
            json.push('\n');
            json
        }
    };
    print_report(&report)?;
    if explanation.status == StatusCode::OK.as_u16() {
        Ok(())
    } else {
        Err(RunError::Other(anyhow::anyhow!(
            "pool {:?}: the server would answer {} {}",
            flags.pool,
            explanation.status,
            explanation.status_text
        )))
    }
}

fn print_report(report: &str) -> Result<(), RunError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| RunError::Other(anyhow::anyhow!("cannot print the report: {e}")))
}

/// A snapshot to explain, and what is known about how it was obtained.
struct Loaded {
    snapshot: Arc<Snapshot>,
    ready: bool,
    source: String,
    notes: Vec<String>,
}

/// The bootstrap directory read once, after the checks `bootstrap` makes before it starts.
async fn load_bootstrap(base_dir: &Path, flags: &ExplainFlags) -> Result<Loaded, RunError> {
    cli::require_dir("--server-basedir", base_dir)?;
    cli::require_file("--bootstrap-kubeconfig", &flags.bootstrap_kubeconfig)?;
    let registry_certs = cli::parse_bootstrap_certs(&flags.bootstrap_certs)?;
    // `bootstrap` refuses to start with a broken APIServer manifest; so does its explanation.
    TlsPolicy::for_bootstrap(base_dir).map_err(|e| UsageError(e.to_string()))?;
    let settings = BootstrapSettings {
        base_dir: base_dir.to_path_buf(),
        kubeconfig: flags.bootstrap_kubeconfig.clone(),
        registry_certs,
    };
    let snapshot = tokio::task::spawn_blocking(move || bootstrap::load_once(&settings))
        .await
        .map_err(|e| anyhow::anyhow!("reading the base directory failed: {e}"))?
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(Loaded {
        snapshot: Arc::new(snapshot),
        ready: true,
        source: format!("base directory {}", base_dir.display()),
        notes: Vec::new(),
    })
}

/// The cluster source started until every cache has synced (or `--timeout-seconds`), then
/// stopped. Nothing is written to the cluster.
async fn load_cluster(flags: &ExplainFlags) -> Result<Loaded, RunError> {
    if flags.apiserver_url.is_empty() {
        return Err(UsageError(
            "--apiserver-url is required in cluster mode: it is written into the served kubeconfig"
                .into(),
        )
        .into());
    }
    // Without a token the cluster source never becomes ready; say so now, naming the flag.
    let inputs = cluster::kubeconfig::read_token_dir(&flags.bootstrap_token_dir, None).await;
    if let Err(e) = &inputs.token {
        return Err(UsageError(format!(
            "--bootstrap-token-dir {}: {e} (run explain where the server runs, or point it at a \
             copy of the node-bootstrapper token)",
            flags.bootstrap_token_dir.display()
        ))
        .into());
    }
    let settings = ClusterSettings {
        kubeconfig: flags.kubeconfig.clone(),
        bootstrap_token_dir: flags.bootstrap_token_dir.clone(),
        ..ClusterSettings::new(flags.apiserver_url.clone())
    };
    let source_name = match &flags.kubeconfig {
        Some(path) => format!("kubeconfig {}", path.display()),
        None => "in-cluster configuration".to_string(),
    };
    let syncs = Arc::new(SyncRecorder::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let source = cluster::start(settings, syncs.clone(), async move {
        let _ = stopped.await;
    })
    .await
    .map_err(|e| UsageError(e.to_string()))?;

    let timeout = Duration::from_secs(flags.timeout_seconds);
    let mut ready = source.ready.clone();
    let ready = matches!(
        tokio::time::timeout(timeout, ready.wait_for(|ready| *ready)).await,
        Ok(Ok(_))
    );
    let snapshot = source.snapshots.borrow().clone();
    let _ = stop.send(());
    if tokio::time::timeout(Duration::from_secs(5), source.join())
        .await
        .is_err()
    {
        tracing::warn!("the cluster source did not stop within 5 s");
    }
    let notes = if ready {
        Vec::new()
    } else {
        vec![syncs.summary(timeout)]
    };
    Ok(Loaded {
        snapshot,
        ready,
        source: source_name,
        notes,
    })
}

/// Records which watch caches synced and which failed, to say why a cluster was not ready.
#[derive(Default)]
struct SyncRecorder {
    kinds: Mutex<BTreeMap<&'static str, Option<&'static str>>>,
}

impl SyncRecorder {
    fn record(&self, kind: &'static str, failure: Option<&'static str>) {
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        match (kinds.get(kind), failure) {
            // A failure after the cache synced does not make it unsynced.
            (Some(None), Some(_)) => {}
            _ => {
                kinds.insert(kind, failure);
            }
        }
    }

    fn summary(&self, waited: Duration) -> String {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        let synced: Vec<&str> = kinds
            .iter()
            .filter(|(_, failure)| failure.is_none())
            .map(|(kind, _)| *kind)
            .collect();
        let failing: Vec<String> = kinds
            .iter()
            .filter_map(|(kind, failure)| failure.map(|reason| format!("{kind} ({reason})")))
            .collect();
        let list = |items: Vec<String>| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        format!(
            "the watch caches did not all sync within {} s (--timeout-seconds); failing: {}; synced: {}",
            waited.as_secs(),
            list(failing),
            list(synced.into_iter().map(str::to_string).collect())
        )
    }
}

impl ClusterObserver for SyncRecorder {
    fn watch_failed(&self, kind: &'static str, reason: &'static str) {
        self.record(kind, Some(reason));
    }

    fn cache_synced(&self, kind: &'static str) {
        self.record(kind, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ControllerConfig, MachineConfig};
    use base64::Engine as _;
    use serde_json::json;

    const SECRET_TOKEN: &str = "sEcReT-bootstrap-token";
    const SECRET_CONTENT: &str = "sEcReT-file-content";

    fn machine_config(name: &str, kernel_arguments: &[&str]) -> Arc<MachineConfig> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfig",
                "metadata": {"name": name},
                "spec": {
                    "osImageURL": "quay.io/os@sha256:1",
                    "kernelArguments": kernel_arguments,
                    "config": {
                        "ignition": {"version": "3.5.0"},
                        "storage": {"files": [
                            {"path": "/etc/kubernetes/kubelet-ca.crt", "mode": 420,
                             "contents": {"source": "data:,old%20CA"}},
                            {"path": "/etc/motd", "mode": 384,
                             "contents": {"source": format!("data:,{SECRET_CONTENT}")}}
                        ]},
                        "systemd": {"units": [{"name": "a.service"}, {"name": "b.service"}]}
                    }
                }
            }))
            .expect("machine config"),
        )
    }

    /// A cluster-mode snapshot: pool `worker` at `rendered-worker-old`, with a newer
    /// `rendered-worker-new` in its spec that no node runs yet.
    fn cluster_snapshot(updated_machine_count: i64) -> Snapshot {
        let mut snapshot = Snapshot::empty(Mode::Cluster);
        snapshot.generation = 1;
        let pool: MachineConfigPool = serde_json::from_value(json!({
            "metadata": {"name": "worker"},
            "spec": {"configuration": {"name": "rendered-worker-new"}},
            "status": {"configuration": {"name": "rendered-worker-old"},
                       "updatedMachineCount": updated_machine_count}
        }))
        .expect("pool");
        snapshot.pools.insert("worker".into(), Ok(Arc::new(pool)));
        for name in ["rendered-worker-old", "rendered-worker-new"] {
            snapshot
                .machine_configs
                .insert(name.into(), Ok(machine_config(name, &["nosmt"])));
        }
        let ca = base64::engine::general_purpose::STANDARD.encode("new CA");
        let controller_config: ControllerConfig = serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {"kubeAPIServerServingCAData": ca}
        }))
        .expect("controller config");
        snapshot.controller_config = Some(Ok(Arc::new(controller_config)));
        snapshot.kubeconfig = Arc::from(format!("token: {SECRET_TOKEN}\n").into_bytes());
        snapshot
    }

    fn explain_worker(snapshot: &Snapshot, ready: bool, spec: &SpecRequest) -> Explained {
        explain(snapshot, ready, "worker", spec, "test".into())
    }

    #[test]
    fn served_config_is_described_from_its_bytes() {
        let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
        let e = &explained.explanation;
        assert_eq!((e.status, e.status_text.as_str()), (200, "OK"));
        assert!(e.error.is_none());
        let served = e.served.as_ref().expect("served");
        let body = explained.body.as_ref().expect("body");
        assert_eq!(served.body_bytes, body.len());
        assert_eq!(served.ignition_version, SpecVersion::NEWEST.as_str());
        let files: Vec<(&str, FileOrigin, Option<&str>)> = served
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.origin, f.role))
            .collect();
        assert_eq!(
            files,
            vec![
                (
                    render::KUBELET_CA_PATH,
                    FileOrigin::Replaced,
                    Some("kubelet CA")
                ),
                ("/etc/motd", FileOrigin::MachineConfig, None),
                (
                    render::NODE_ANNOTATIONS_PATH,
                    FileOrigin::Appended,
                    Some("node annotations")
                ),
                (
                    render::KUBECONFIG_PATH,
                    FileOrigin::Appended,
                    Some("kubeconfig")
                ),
                (
                    render::MACHINE_CONFIG_CONTENT_PATH,
                    FileOrigin::Appended,
                    Some("machine config content")
                ),
                (
                    render::ENCAPSULATED_PATH,
                    FileOrigin::Appended,
                    Some("encapsulated machine config")
                ),
            ]
        );
        assert_eq!(served.files[0].size, Some("new CA".len()));
        assert_eq!(served.files[1].size, Some(SECRET_CONTENT.len()));
        assert_eq!(served.files[1].mode, Some(0o600));
        assert_eq!(
            served.files[3].size,
            Some(format!("token: {SECRET_TOKEN}\n").len())
        );
        assert_eq!(served.systemd_units, 2);
        assert_eq!(served.kernel_arguments.machine_config, vec!["nosmt"]);
        assert_eq!(served.os_image_url.as_deref(), Some("quay.io/os@sha256:1"));
        assert_eq!(served.node_annotations_image, None);
    }

    #[test]
    fn cluster_selection_names_the_rule_the_render_followed() {
        let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
        let selection = explained.explanation.selection.expect("selection");
        assert_eq!(selection.rendered_config, "rendered-worker-old");
        assert!(
            selection.rule.starts_with("status.configuration"),
            "{}",
            selection.rule
        );
        assert_eq!(selection.machine_config, "found");
        let node_annotations = served_annotations(&explained.body.expect("body"));
        assert!(node_annotations.contains("rendered-worker-old"));

        let explained = explain_worker(&cluster_snapshot(2), true, &SpecRequest::default_accept());
        let selection = explained.explanation.selection.expect("selection");
        assert_eq!(selection.rendered_config, "rendered-worker-new");
        assert!(
            selection.rule.starts_with("spec.configuration"),
            "{}",
            selection.rule
        );
        assert!(selection.rule.contains("updatedMachineCount is 2"));
        let node_annotations = served_annotations(&explained.body.expect("body"));
        assert!(node_annotations.contains("rendered-worker-new"));
    }

    fn served_annotations(body: &[u8]) -> String {
        let document: Value = serde_json::from_slice(body).expect("json");
        let files = document["storage"]["files"].as_array().expect("files");
        let file = files
            .iter()
            .find(|f| f["path"] == render::NODE_ANNOTATIONS_PATH)
            .expect("annotations file");
        let data = dataurl::decode(file["contents"]["source"].as_str().expect("source"))
            .expect("data url");
        String::from_utf8(data).expect("utf-8")
    }

    #[test]
    fn cluster_layered_decision_is_reported() {
        let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
        let e = explained.explanation;
        let decision = e.layered.as_ref().expect("cluster mode decides");
        assert_eq!(decision.reason, DecisionReason::NotLayered);
        let text = format_text(&e);
        assert!(text.contains("base image: not_layered"), "{text}");
    }

    #[test]
    fn failures_carry_the_servers_status_and_error_chain() {
        let snapshot = cluster_snapshot(0);
        let spec = SpecRequest::default_accept();

        let missing = explain(&snapshot, true, "infra", &spec, "test".into()).explanation;
        assert_eq!(missing.status, 500);
        assert!(!missing.pool_found);
        assert_eq!(missing.known_pools, vec!["worker"]);
        let error = missing.error.as_ref().expect("error");
        assert_eq!(error.kind, "unknown_pool");
        assert!(error.message.contains("\"infra\""));
        assert!(missing.served.is_none());
        assert!(missing.node_behaviour.contains("retries"));

        let not_ready = explain_worker(&snapshot, false, &spec).explanation;
        assert_eq!(not_ready.status, 503);
        assert_eq!(not_ready.error.expect("error").kind, "not_ready");

        let invalid_name = explain(&snapshot, true, "Worker", &spec, "test".into()).explanation;
        assert_eq!(invalid_name.status, 404);
        assert!(invalid_name.node_behaviour.contains("gives up"));

        let mut broken = cluster_snapshot(0);
        broken.controller_config = None;
        let broken = explain_worker(&broken, true, &spec).explanation;
        assert_eq!(broken.status, 500);
        assert_eq!(broken.error.expect("error").kind, "invalid_input");
    }

    #[test]
    fn bootstrap_mode_refuses_other_pools_and_reports_missing_files() {
        let mut snapshot = Snapshot::empty(Mode::Bootstrap);
        snapshot.pools.insert(
            "arbiter".into(),
            Err(LoadError::NotFound(
                "file /base/machine-pools/arbiter.yaml".into(),
            )),
        );
        let spec = SpecRequest::Exact(SpecVersion::NEWEST);
        let worker = explain(&snapshot, true, "worker", &spec, "test".into()).explanation;
        assert_eq!(worker.status, 500);
        assert_eq!(
            worker.error.as_ref().expect("error").kind,
            "pool_not_served"
        );
        assert!(worker
            .pool_problem
            .expect("problem")
            .contains("master and arbiter"));

        let arbiter = explain(&snapshot, true, "arbiter", &spec, "test".into()).explanation;
        assert_eq!(arbiter.status, 404);
        assert!(!arbiter.pool_found);
        assert_eq!(arbiter.spec_version_from, "spec");
        assert!(arbiter.accept.is_none());
        let text = format_text(&arbiter);
        assert!(text.contains("not layered (bootstrap mode)"), "{text}");
        assert!(text.contains("404 Not Found"), "{text}");
    }

    #[test]
    fn reports_never_contain_file_contents_or_the_kubeconfig() {
        let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
        let body = String::from_utf8_lossy(explained.body.as_ref().expect("body")).into_owned();
        // The served bytes do carry them...
        assert!(body.contains(SECRET_TOKEN) && body.contains(SECRET_CONTENT));
        // ...the report does not.
        let text = format_text(&explained.explanation);
        let json = serde_json::to_string(&explained.explanation).expect("json");
        for output in [&text, &json] {
            assert!(!output.contains(SECRET_TOKEN), "{output}");
            assert!(!output.contains(SECRET_CONTENT), "{output}");
        }
    }

    #[test]
    fn text_lists_every_file_with_mode_size_and_marker() {
        let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
        let text = format_text(&explained.explanation);
        assert!(text.starts_with("What a node asking for /config/worker would get:\n"));
        assert!(text.contains("0600"), "{text}");
        assert!(
            text.contains(&format!(
                "{}  [replaced by server: kubelet CA]",
                render::KUBELET_CA_PATH
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{}  [appended by server: kubeconfig]",
                render::KUBECONFIG_PATH
            )),
            "{text}"
        );
        assert!(text.contains("6 (in served order)"), "{text}");
        assert!(text.contains("spec.kernelArguments: nosmt"), "{text}");
    }

    #[test]
    fn kernel_arguments_are_read_back_where_the_node_gets_them() {
        let mut snapshot = cluster_snapshot(0);
        let mut machine_config = (*machine_config("rendered-worker-old", &["nosmt"])).clone();
        if let Some(config) = machine_config.spec.config.as_mut() {
            config["kernelArguments"] = json!({"shouldExist": ["mitigations=off"]});
        }
        snapshot
            .machine_configs
            .insert("rendered-worker-old".into(), Ok(Arc::new(machine_config)));

        let newest = explain_worker(&snapshot, true, &SpecRequest::Exact(SpecVersion::V3_5));
        let k = newest.explanation.served.expect("served").kernel_arguments;
        assert_eq!(k.ignition_should_exist, vec!["mitigations=off"]);
        assert_eq!(k.machine_config, vec!["nosmt"]);

        // Below 3.3 Ignition has no kernel arguments: the server moves them to the MachineConfig.
        let old = explain_worker(&snapshot, true, &SpecRequest::Exact(SpecVersion::V3_2));
        let k = old.explanation.served.expect("served").kernel_arguments;
        assert!(k.ignition_should_exist.is_empty());
        assert_eq!(k.machine_config, vec!["nosmt", "mitigations=off"]);
    }

    #[test]
    fn remote_and_compressed_sources_are_labelled() {
        let body = json!({
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [
                {"path": "/a", "contents": {"source": "https://example.test/a?token=x"}},
                {"path": "/b", "contents": {"source": "data:,abc", "compression": "gzip"}},
                {"path": "/c"}
            ]}
        });
        let served = describe_served(body.to_string().as_bytes(), &[]);
        let kinds: Vec<(&str, Option<usize>)> =
            served.files.iter().map(|f| (f.contents, f.size)).collect();
        assert_eq!(
            kinds,
            vec![("remote", None), ("data", Some(3)), ("none", None)]
        );
        assert_eq!(served.files[1].compression.as_deref(), Some("gzip"));
        let table = files_table(&served.files);
        assert!(!table.contains("token=x"));
        assert!(table.contains("/b (gzip compressed)"));
    }

    #[test]
    fn spec_and_pool_flags_are_checked() {
        assert_eq!(parse_spec("3.4.0").ok(), Some(SpecVersion::V3_4));
        assert_eq!(parse_spec("2.2").ok(), Some(SpecVersion::V2_2));
        assert!(parse_spec("3.9.0").is_err());
        assert!(parse_spec("").is_err());
        assert!(check_pool("worker").is_ok());
        // Explained as the 404 a node gets, not refused.
        assert!(check_pool("Worker").is_ok());
        assert!(check_pool("a/b").is_err());
        assert!(check_pool("../master").is_err());
        assert!(check_pool("master/").is_err());
    }

    #[test]
    fn sync_summary_names_failing_and_synced_kinds() {
        let recorder = SyncRecorder::default();
        recorder.watch_failed("MachineOSBuild", "forbidden");
        recorder.cache_synced("MachineConfigPool");
        recorder.watch_failed("MachineConfigPool", "unreachable");
        let summary = recorder.summary(Duration::from_secs(30));
        assert!(summary.contains("within 30 s"), "{summary}");
        assert!(
            summary.contains("failing: MachineOSBuild (forbidden)"),
            "{summary}"
        );
        assert!(summary.contains("synced: MachineConfigPool"), "{summary}");
    }
}

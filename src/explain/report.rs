//! The explanation of one pool: what the server would answer and why, decided from a snapshot
//! through the serving code paths, and what a served config contains, read back from its bytes.

use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use crate::api::{annotations, MachineConfigPool};

use crate::ignition::{self, accept, dataurl, SpecVersion};
use crate::render::layered::{DecisionReason, LayeredDecision};
use crate::render::{self, RenderError};
use crate::rights::Grants;
use crate::server::{self, pool_path};
use crate::snapshot::{LoadError, Mode, Snapshot};
use crate::telemetry::ErrorChain;

/// What the TLS port would serve with: which files hold what, since when, and whether this
/// build takes the pair (a node's Ignition never gets a config from a server it cannot shake
/// hands with).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CertificateReport {
    pub cert_file: String,
    pub key_file: String,
    /// The key's algorithm and size from the key file (`ECDSA P-521`), when readable.
    pub key: Option<String>,
    /// The leaf certificate's notAfter, RFC 3339, when readable.
    pub not_after: Option<String>,
    /// When each file last changed (RFC 3339): what a running server loaded then, or reloads
    /// within a second.
    pub cert_changed: Option<String>,
    pub key_changed: Option<String>,
    /// `None` when this build serves with the pair; else the error the server would stop with
    /// (at start) or log (at reload, keeping the previous pair).
    pub refused: Option<String>,
}

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
    /// The rule that chose the version, in words: the negotiation's, and what the pool's
    /// rendered config changes (3.6 is served only from a rendered config of spec 3.6).
    pub spec_rule: Option<String>,
    /// The layered-image decision of the render (cluster mode, when the render got that far).
    pub layered: Option<LayeredDecision>,
    /// Cluster mode: the caches this pool's answer reads that have not synced (empty: it can be
    /// served).
    pub waiting_for: Vec<&'static str>,
    /// Cluster mode: each feature beyond the original, on or off and why (`None` in bootstrap
    /// mode).
    pub features: Option<Vec<FeatureReport>>,
    /// The HTTP status the server would answer.
    pub status: u16,
    pub status_text: String,
    /// Why the server would not serve a config.
    pub error: Option<ErrorReport>,
    /// What Ignition on the node does with this answer.
    pub node_behaviour: &'static str,
    /// The served config, described from its bytes (only on 200).
    pub served: Option<Served>,
    /// The TLS port's certificate and key as `--cert` and `--key` name them, read where
    /// `explain` runs (`None` when the secure port is off).
    pub serving_certificate: Option<CertificateReport>,
    /// Anything else worth knowing (cluster caches that did not sync, `--write-config`).
    pub notes: Vec<String>,
}

/// One feature beyond the original in the report.
#[derive(Clone, Debug, Serialize)]
pub struct FeatureReport {
    pub feature: &'static str,
    pub enabled: bool,
    /// Why it is off (the rules not granted, or the refused request).
    pub why_off: Option<String>,
    /// What runs instead while it is off.
    pub when_off: Option<&'static str>,
}

impl FeatureReport {
    /// Every feature of `grants`.
    pub fn all(grants: &Grants) -> Vec<FeatureReport> {
        grants
            .states()
            .into_iter()
            .map(|(feature, state)| FeatureReport {
                feature: feature.as_str(),
                enabled: state.is_enabled(),
                why_off: state.why_off(),
                when_off: (!state.is_enabled()).then(|| feature.when_off()),
            })
            .collect()
    }
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
    /// The `machineConfigServerURL` node annotation (`--advertise-failure-reporting`, cluster
    /// mode): where the machine's daemon reports a first-boot failure.
    pub machine_config_server_url: Option<String>,
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
        SpecRequest::Accept(header) => (
            Some(header.clone()),
            accept::negotiate_with_rule(Some(header)),
        ),
        SpecRequest::Exact(version) => (
            None,
            Ok(accept::Negotiated {
                version: *version,
                rule: accept::Rule::SupportedMinor,
                asked: None,
            }),
        ),
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
        spec_version: None,
        spec_version_from: match spec {
            SpecRequest::Accept(_) => "accept",
            SpecRequest::Exact(_) => "spec",
        },
        spec_rule: None,
        layered: None,
        waiting_for: render::waiting_for(snapshot, pool)
            .into_iter()
            .map(|input| input.kind())
            .collect(),
        features: None,
        status: 0,
        status_text: String::new(),
        error: None,
        node_behaviour: "",
        served: None,
        serving_certificate: None,
        notes: Vec::new(),
    };
    let mut body = None;

    if let Ok(negotiated) = &negotiated {
        // What a render would serve: the negotiated version, and 3.5 instead of 3.6 when the
        // pool's rendered config is not spec 3.6 (the render itself decides the same way).
        let rendered = ready
            .then(|| render::rendered_machine_config(snapshot, pool))
            .flatten();
        let served = rendered.as_ref().map_or(negotiated.version, |mc| {
            render::served_version(mc, negotiated.version)
        });
        explanation.spec_version = Some(served.to_string());
        explanation.spec_rule = Some(spec_rule(spec, negotiated, rendered.as_deref(), served));
    }

    // The config handler's order: pool name from the path, Accept, readiness, render.
    let outcome = match pool_path::parse(&format!("/config/{pool}")) {
        Err(e) => Err((e.status(), error_report("invalid_pool_path", &e))),
        Ok(_) => match negotiated.map(|n| n.version) {
            Err(e) => Err((StatusCode::BAD_REQUEST, error_report(e.kind(), &e))),
            Ok(_) if !ready => {
                let e = RenderError::NotReady(render::waiting_for(snapshot, pool));
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

/// The rule that chose the served version, in words: the negotiation's rule, then what the
/// pool's rendered config (when there is one) made of it.
fn spec_rule(
    spec: &SpecRequest,
    negotiated: &accept::Negotiated,
    rendered: Option<&crate::api::MachineConfig>,
    served: SpecVersion,
) -> String {
    let requested = negotiated.version;
    let asked = negotiated.asked.as_deref().unwrap_or_default();
    let mut text = match (spec, negotiated.rule) {
        (SpecRequest::Exact(v), _) => format!("--spec {v} asks for spec {v}"),
        (_, accept::Rule::NoIgnitionVersion) => {
            "Accept names no Ignition media type with a version: 2.2.0, the original's default"
                .to_string()
        }
        (_, accept::Rule::Spec2) => {
            format!("Accept asks for {asked} (2.x at or above 2.2): 2.2.0, the only 2.x spec served")
        }
        (_, accept::Rule::SupportedMinor) => {
            format!("Accept asks for {asked}: spec {requested}")
        }
        (_, accept::Rule::NewerMinor) => format!(
            "Accept asks for {asked}, a 3.x minor newer than any known here: the newest, {requested}"
        ),
    };
    let Some(mc) = rendered else {
        return text;
    };
    let name = mc.metadata.name.as_deref().unwrap_or_default();
    let version = mc.spec.config_version();
    let rendered_spec = crate::ignition::rendered_spec(version);
    let version = if version.is_empty() { "none" } else { version };
    if requested == SpecVersion::V3_6 && rendered_spec == SpecVersion::V3_6 {
        text.push_str(&format!(
            "; the rendered MachineConfig {name} is spec {version} (an MCO that renders 3.6): served as {served}"
        ));
    } else if requested == SpecVersion::V3_6 {
        text.push_str(&format!(
            "; the rendered MachineConfig {name} is spec {version}, not 3.6 (this cluster's MCO does not render 3.6, and a daemon that cannot read 3.6 would fail the node's first boot): served as {served}, as the original at 7ff337a4f does"
        ));
    } else if rendered_spec == SpecVersion::V3_6 {
        text.push_str(&format!(
            "; translated down from the rendered MachineConfig {name} (spec {version})"
        ));
    }
    text
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
    let Ok(config) = ignition::parse_config_owned(
        machine_config
            .spec
            .config
            .as_ref()
            .map(crate::api::RawConfig::value),
    ) else {
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
        render::MCS_CA_BUNDLE_PATH => Some("failure-report CA"),
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
        machine_config_server_url: node_annotations[annotations::MACHINE_CONFIG_SERVER_URL]
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
pub(super) fn reason_meaning(reason: DecisionReason) -> &'static str {
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
        DecisionReason::PoolNotUpdated => {
            "a build succeeded, but no machine of the pool has completed the update (updatedMachineCount is 0): the original's gate, since this server may not read Nodes"
        }
        DecisionReason::Validated => "a node of the pool runs this image",
        DecisionReason::PoolUpdated => {
            "a machine of the pool has completed the update (updatedMachineCount > 0): the original's gate, since this server may not read Nodes"
        }
    }
}

//! Pure render pipeline: (snapshot, pool, spec version) -> the exact bytes served.
//!
//! Steps, as the original server: pick the rendered MachineConfig, parse its Ignition config,
//! migrate kernel arguments for specs below 3.3, write the ControllerConfig CA bundles (with
//! `--advertise-failure-reporting`, the root CA the daemon reports through too), append the
//! node files (annotations, kubeconfig, MC content, registry certs, encapsulated MC last),
//! translate to the requested spec and serialize. No I/O, no logging: errors are returned typed.

pub mod layered;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ignition_config::v3_5 as ign;

use crate::api::go_marshal::{self, Origin};
use crate::api::{annotations, MachineConfig, RawConfig};
use crate::ignition::gojson::{self, Escaping, Keys};
use crate::ignition::{self, dataurl, Config, ParseError, SpecVersion, TranslateError};
use crate::snapshot::{Input, LayeredGate, LoadError, Mode, Snapshot};

/// A rendered payload, ready to serve.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The serialized Ignition config.
    pub body: Bytes,
    /// Name of the rendered MachineConfig it was built from.
    pub rendered_config: String,
    /// The spec version of `body`.
    pub version: SpecVersion,
    /// The OS image put into the node annotations / encapsulated MC, if any (layered pools).
    pub image: Option<String>,
    /// Cluster mode: the layered-image decision behind `image`, reported per request by
    /// [`crate::server::layered_decisions::DecisionTracker`]. `None` in bootstrap mode.
    pub layered: Option<layered::LayeredDecision>,
}

/// Why a render failed. The server maps each variant to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Bootstrap mode: the pool file or its MachineConfig file does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// Bootstrap mode serves only `master` and `arbiter` (500, as the original).
    #[error("pool {0:?} is not served in bootstrap mode (only master and arbiter)")]
    PoolNotServed(String),
    /// Cluster mode: no such MachineConfigPool (500 so Ignition retries; it may appear later).
    #[error("machine config pool {0:?} does not exist")]
    UnknownPool(String),
    /// Cluster mode: the pool has no rendered config yet, or it is missing from the cache (500).
    #[error("rendered machine config {name:?} for pool {pool:?} is not available")]
    MissingMachineConfig { pool: String, name: String },
    /// An input exists but is broken (500).
    #[error("{0}")]
    InvalidInput(String),
    /// `spec.config` could not be parsed (500). The cause is the source, not repeated here:
    /// the log and `explain` print the chain ([`crate::telemetry::ErrorChain`]).
    #[error("machine config {name:?}")]
    Parse {
        name: String,
        #[source]
        source: ParseError,
    },
    /// Kernel arguments cannot be migrated for a spec below 3.3 (500).
    #[error("failed to migrate kernel args: can't serve version {0} with ignition KernelArguments.ShouldNotExist populated")]
    KernelArguments(SpecVersion),
    /// The config cannot be expressed in the requested spec (500). The cause is the source.
    #[error("machine config {name:?}")]
    Translate {
        name: String,
        #[source]
        source: TranslateError,
    },
    /// Cluster mode: caches this pool's answer reads have not synced yet (503).
    #[error("waiting for the {} cache{} to sync", kinds(.0), if .0.len() == 1 { "" } else { "s" })]
    NotReady(Vec<Input>),
}

/// `MachineOSBuild, Node` for a list of inputs.
fn kinds(inputs: &[Input]) -> String {
    inputs
        .iter()
        .map(|input| input.kind())
        .collect::<Vec<_>>()
        .join(", ")
}

impl RenderError {
    /// Short, stable name used as a metric label (one of
    /// [`crate::metrics::RENDER_ERROR_KINDS`], which a new kind must join).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::PoolNotServed(_) => "pool_not_served",
            Self::UnknownPool(_) => "unknown_pool",
            Self::MissingMachineConfig { .. } => "missing_machine_config",
            Self::InvalidInput(_) => "invalid_input",
            Self::Parse { .. } => "parse",
            Self::KernelArguments(_) => "kernel_arguments",
            Self::Translate { .. } => "translate",
            Self::NotReady(_) => "not_ready",
        }
    }
}

/// Where the node's initial annotations are written; the daemon reads them on first boot.
pub const NODE_ANNOTATIONS_PATH: &str = "/etc/machine-config-daemon/node-annotations.json";
/// The node's bootstrap kubeconfig.
pub const KUBECONFIG_PATH: &str = "/etc/kubernetes/kubeconfig";
/// The whole MachineConfig, for the daemon's first boot.
pub const MACHINE_CONFIG_CONTENT_PATH: &str = "/etc/mcs-machine-config-content.json";
/// The MachineConfig with an empty Ignition config, the daemon's "current config" on first boot.
pub const ENCAPSULATED_PATH: &str = "/etc/ignition-machine-config-encapsulated.json";
/// ControllerConfig `kubeAPIServerServingCAData` goes here.
pub const KUBELET_CA_PATH: &str = "/etc/kubernetes/kubelet-ca.crt";
/// ControllerConfig `cloudProviderCAData` goes here.
pub const CLOUD_PROVIDER_CA_PATH: &str =
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem";
/// With `--advertise-failure-reporting`, ControllerConfig `rootCAData` goes here: the daemon
/// of upstream's PR #6124 trusts it when it reports a first-boot failure to this server.
pub const MCS_CA_BUNDLE_PATH: &str = "/etc/machine-config-daemon/mcs-ca-bundle.crt";
/// Bootstrap `--bootstrap-certs name=file` are served below this directory.
pub const REGISTRY_CERTS_DIR: &str = "/etc/docker/certs.d";
/// Mode of every appended file (0644), as the original.
const APPENDED_FILE_MODE: i64 = 0o644;

/// Pools the bootstrap server agrees to serve; any other pool is refused (500), as the original.
pub const BOOTSTRAP_POOLS: [&str; 2] = ["master", "arbiter"];

/// Cluster mode: the inputs `pool`'s answer reads whose caches have not synced yet (empty:
/// the pool can be served). Every pool reads [`Input::EVERY_POOL`]; a layered pool (one a
/// MachineOSConfig names) also its builds and the registry's host names, and, under the
/// Node-validated gate, the Nodes and MachineConfigNodes. Nothing else holds a pool back.
/// Bootstrap mode reads everything before its first snapshot: always empty.
pub fn waiting_for(snapshot: &Snapshot, pool: &str) -> Vec<Input> {
    if snapshot.mode == Mode::Bootstrap {
        return Vec::new();
    }
    let mut needed: Vec<Input> = Input::EVERY_POOL.to_vec();
    let layered = snapshot
        .layered
        .machine_os_configs
        .iter()
        .any(|mosc| mosc.spec.machine_config_pool.name == pool);
    if layered && snapshot.synced.contains(&Input::MachineOSConfigs) {
        needed.extend([
            Input::MachineOSBuilds,
            Input::RegistryServices,
            Input::RegistryRoutes,
        ]);
        if snapshot.layered.gate == LayeredGate::NodeValidated {
            needed.extend([Input::Nodes, Input::MachineConfigNodes]);
        }
    }
    needed.retain(|input| !snapshot.synced.contains(input));
    needed
}

/// Render the Ignition config for `pool` from `snapshot` for a request of spec `requested`
/// (what [`ignition::accept::negotiate`] made of the Accept header). The spec served follows
/// the rendered config too ([`ignition::accept::choose`]: 3.6 only from a 3.6 config) and is
/// [`Rendered::version`].
pub fn render(
    snapshot: &Snapshot,
    pool: &str,
    requested: SpecVersion,
) -> Result<Rendered, RenderError> {
    let waiting = waiting_for(snapshot, pool);
    if !waiting.is_empty() {
        return Err(RenderError::NotReady(waiting));
    }
    let machine_config = select_machine_config(snapshot, pool)?;
    let name = machine_config.metadata.name.clone().unwrap_or_default();
    let version = served_version(&machine_config, requested);
    let decision = layered_decision(snapshot, pool, &machine_config);
    let image = decision.as_ref().and_then(|d| d.image.clone());

    let mut config =
        ignition::parse_config_owned(machine_config.spec.config.as_ref().map(RawConfig::value))
            .map_err(|source| RenderError::Parse {
                name: name.clone(),
                source,
            })?;
    // Every mutation below works on this copy: the snapshot is shared and immutable.
    let mut machine_config = (*machine_config).clone();
    migrate_kernel_arguments(&mut config, &mut machine_config, version)?;
    add_controller_config_cas(snapshot, &mut config)?;
    let server_url = snapshot
        .failure_reporting
        .as_ref()
        .and_then(|reporting| reporting.server_url.as_deref());
    if let Some(decision) = &decision {
        machine_config.spec.os_image_url =
            layered::encapsulated_os_image_url(&machine_config, decision).to_string();
    }
    let node_image = layered::node_annotation_image(&machine_config, image.as_deref());

    append_file(
        &mut config,
        NODE_ANNOTATIONS_PATH,
        &node_annotations(&name, node_image.as_deref(), server_url),
    );
    append_file(&mut config, KUBECONFIG_PATH, &snapshot.kubeconfig);
    let origin = origin(snapshot, &name);
    // The MachineConfig content is the largest file by far (the whole MachineConfig, its config
    // included). A stand-in goes through translation (which copies the config several times
    // and would check the data URL of megabytes it built itself), and the content is written
    // in its place, straight into the body ([`write_body`]).
    append_file(
        &mut config,
        MACHINE_CONFIG_CONTENT_PATH,
        CONTENT_STAND_IN.as_bytes(),
    );
    for (registry, cert) in &snapshot.registry_certs {
        let cert = cert
            .as_ref()
            .map_err(|e| RenderError::InvalidInput(e.to_string()))?;
        append_file(
            &mut config,
            &format!("{REGISTRY_CERTS_DIR}/{registry}/ca.crt"),
            cert,
        );
    }
    append_file(
        &mut config,
        ENCAPSULATED_PATH,
        &encapsulated_machine_config(
            &machine_config,
            &name,
            origin,
            encapsulated_version(snapshot.mode, &machine_config, version),
        )?,
    );

    let mut value =
        ignition::into_value_as(config, version).map_err(|source| RenderError::Translate {
            name: name.clone(),
            source,
        })?;
    ignition::order_as(&mut value, version);
    let slot: *const serde_json::Value = stand_in_slot(&value, MACHINE_CONFIG_CONTENT_PATH)?;
    // Compact: indented while it is escaped into the body.
    let content = go_marshal::marshal(&machine_config, origin);
    drop(machine_config);
    let body = write_body(&mut value, slot, &content)
        .ok_or_else(|| lost_file(MACHINE_CONFIG_CONTENT_PATH))?;
    drop(content);
    Ok(Rendered {
        // Exactly the bytes, no spare capacity: the body was grown by doubling while it was
        // written, and the payload cache keeps it for as long as its generation lasts (with 20
        // pools the spare capacity was about as large as the bodies themselves).
        body: Bytes::from(body.into_boxed_slice()),
        rendered_config: name,
        version,
        image,
        layered: decision,
    })
}

/// The spec served for a request of `requested` from `machine_config` (the pool's rendered
/// config): [`ignition::accept::choose`] with the spec its `ignition.version` names.
pub fn served_version(machine_config: &MachineConfig, requested: SpecVersion) -> SpecVersion {
    let version = machine_config.spec.config_version();
    ignition::accept::choose(requested, ignition::rendered_spec(version))
}

/// The pool's rendered MachineConfig, as a render picks it; `None` when the render would fail
/// before reading it (for `explain`, which reports that failure from the render itself).
pub fn rendered_machine_config(snapshot: &Snapshot, pool: &str) -> Option<Arc<MachineConfig>> {
    select_machine_config(snapshot, pool).ok()
}

/// Step 1: the rendered MachineConfig for the pool, with the original's status-code rules.
fn select_machine_config(
    snapshot: &Snapshot,
    pool: &str,
) -> Result<Arc<MachineConfig>, RenderError> {
    match snapshot.mode {
        Mode::Bootstrap => {
            if !BOOTSTRAP_POOLS.contains(&pool) {
                return Err(RenderError::PoolNotServed(pool.to_string()));
            }
            let pool_object = match snapshot.pools.get(pool) {
                None => return Err(RenderError::NotFound(format!("pool {pool:?} not found"))),
                Some(Err(e @ LoadError::NotFound(_))) => {
                    return Err(RenderError::NotFound(format!("pool {pool:?}: {e}")))
                }
                Some(Err(e)) => return Err(RenderError::InvalidInput(e.to_string())),
                Some(Ok(p)) => p,
            };
            let name = pool_object
                .status
                .as_ref()
                .map(|s| s.configuration.name.as_str())
                .unwrap_or_default();
            match snapshot.machine_configs.get(name) {
                None => Err(RenderError::NotFound(format!(
                    "machine config {name:?} of pool {pool:?} not found"
                ))),
                Some(Err(e @ LoadError::NotFound(_))) => Err(RenderError::NotFound(format!(
                    "machine config {name:?} of pool {pool:?}: {e}"
                ))),
                Some(Err(e)) => Err(RenderError::InvalidInput(e.to_string())),
                Some(Ok(mc)) => Ok(mc.clone()),
            }
        }
        Mode::Cluster => {
            let pool_object = match snapshot.pools.get(pool) {
                None => return Err(RenderError::UnknownPool(pool.to_string())),
                Some(Err(e)) => return Err(RenderError::InvalidInput(e.to_string())),
                Some(Ok(p)) => p,
            };
            let name = pool_object.served_config_name();
            match snapshot.machine_configs.get(name) {
                Some(Ok(mc)) if !name.is_empty() => Ok(mc.clone()),
                Some(Err(e)) => Err(RenderError::InvalidInput(e.to_string())),
                _ => Err(RenderError::MissingMachineConfig {
                    pool: pool.to_string(),
                    name: name.to_string(),
                }),
            }
        }
    }
}

/// The layered-image decision for the pool (cluster mode only; no pool is layered in bootstrap
/// mode). Its `image`, when set, is served: see [`layered::decide`].
fn layered_decision(
    snapshot: &Snapshot,
    pool: &str,
    machine_config: &MachineConfig,
) -> Option<layered::LayeredDecision> {
    match snapshot.mode {
        Mode::Bootstrap => None,
        Mode::Cluster => {
            // `select_machine_config` has already found the pool.
            let pool_object = snapshot.pools.get(pool)?.as_ref().ok()?;
            let rendered_config = machine_config.metadata.name.as_deref().unwrap_or_default();
            Some(layered::decide(
                pool_object,
                rendered_config,
                &snapshot.layered,
            ))
        }
    }
}

/// Step 3: below spec 3.3 Ignition has no kernel arguments; the daemon applies the MachineConfig's
/// `spec.kernelArguments` instead, so `shouldExist` entries move there (verbatim, not split).
fn migrate_kernel_arguments(
    config: &mut Config,
    machine_config: &mut MachineConfig,
    version: SpecVersion,
) -> Result<(), RenderError> {
    if version >= SpecVersion::V3_3 {
        return Ok(());
    }
    let Some(kernel_arguments) = config.kernel_arguments.take() else {
        return Ok(());
    };
    if kernel_arguments
        .should_not_exist
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        return Err(RenderError::KernelArguments(version));
    }
    // Go's `append` to a nil list of nothing leaves it nil (`null`), so only a non-empty move
    // turns a nil list into one.
    let moved = kernel_arguments.should_exist.unwrap_or_default();
    if !moved.is_empty() {
        machine_config
            .spec
            .kernel_arguments
            .get_or_insert_with(Vec::new)
            .extend(moved);
    }
    Ok(())
}

/// Step 4: the ControllerConfig's CA bundles replace an existing file's contents or are appended
/// (a bundle that is empty or absent is neither): the kubelet's, the cloud provider's and, with
/// `--advertise-failure-reporting` ([`crate::snapshot::FailureReporting`]), the root CA the daemon reports
/// through (upstream's PR #6124 adds it there, after the other two).
fn add_controller_config_cas(snapshot: &Snapshot, config: &mut Config) -> Result<(), RenderError> {
    let controller_config = match &snapshot.controller_config {
        Some(Ok(cc)) => cc,
        Some(Err(e)) => return Err(RenderError::InvalidInput(format!("controller config: {e}"))),
        None => {
            return Err(RenderError::InvalidInput(
                "controller config machine-config-controller not found".into(),
            ))
        }
    };
    let invalid = |field: &str, e: base64::DecodeError| {
        RenderError::InvalidInput(format!(
            "controller config {field} is not valid base64: {e}"
        ))
    };
    let kubelet_ca = controller_config
        .spec
        .kube_api_server_serving_ca()
        .map_err(|e| invalid("kubeAPIServerServingCAData", e))?;
    let cloud_ca = controller_config
        .spec
        .cloud_provider_ca()
        .map_err(|e| invalid("cloudProviderCAData", e))?;
    if let Some(data) = kubelet_ca {
        replace_or_append_file(config, KUBELET_CA_PATH, &data);
    }
    if let Some(data) = cloud_ca {
        replace_or_append_file(config, CLOUD_PROVIDER_CA_PATH, &data);
    }
    if snapshot.failure_reporting.is_some() {
        let root_ca = controller_config
            .spec
            .root_ca()
            .map_err(|e| invalid("rootCAData", e))?;
        if let Some(data) = root_ca {
            replace_or_append_file(config, MCS_CA_BUNDLE_PATH, &data);
        }
    }
    Ok(())
}

fn replace_or_append_file(config: &mut Config, path: &str, contents: &[u8]) {
    let files = config
        .storage
        .get_or_insert_with(Default::default)
        .files
        .get_or_insert_with(Vec::new);
    match files.iter_mut().find(|f| f.path == path) {
        Some(file) => {
            file.contents.get_or_insert_with(Default::default).source =
                Some(dataurl::encode(contents));
        }
        None => append_file(config, path, contents),
    }
}

/// Append a file the way the original does: overwrite, mode 0644, contents as a `data:,` URL.
pub fn append_file(config: &mut Config, path: &str, contents: &[u8]) {
    let mut file = ign::File::new(path.to_string());
    file.overwrite = Some(true);
    file.mode = Some(APPENDED_FILE_MODE);
    file.contents = Some(ign::Resource {
        source: Some(dataurl::encode(contents)),
        ..Default::default()
    });
    config
        .storage
        .get_or_insert_with(Default::default)
        .files
        .get_or_insert_with(Vec::new)
        .push(file);
}

/// What the MachineConfig content file holds while the config is translated; the content is
/// written in its place ([`write_body`]).
const CONTENT_STAND_IN: &str = "machine-config-content";

/// The stand-in of the file at `path` in the translated `config`: the source of the last file
/// with that path (appended files come after the config's own), which must be the stand-in's
/// data URL.
fn stand_in_slot<'v>(
    config: &'v serde_json::Value,
    path: &str,
) -> Result<&'v serde_json::Value, RenderError> {
    let stand_in = dataurl::encode(CONTENT_STAND_IN.as_bytes());
    config
        .pointer("/storage/files")
        .and_then(serde_json::Value::as_array)
        .and_then(|files| {
            files
                .iter()
                .rev()
                .find(|file| file.get("path").and_then(serde_json::Value::as_str) == Some(path))
        })
        .and_then(|file| file.pointer("/contents/source"))
        .filter(|slot| slot.as_str() == Some(stand_in.as_str()))
        .ok_or_else(|| lost_file(path))
}

/// The stand-in of the appended file at `path` is not where the render put it.
fn lost_file(path: &str) -> RenderError {
    RenderError::InvalidInput(format!(
        "the translated config lost the appended file {path}"
    ))
}

/// The body: the translated, ordered `config` as the original's encoder writes it, with the
/// MachineConfig content's data URL at `slot` (the stand-in's source): `content`, the compact
/// MachineConfig, indented as `json.MarshalIndent` and percent-encoded straight into the body.
/// Neither the indented content nor its data URL (megabytes each, for a large config) is ever
/// built on its own, and the config's strings are freed as they are written
/// ([`gojson::drain_to_vec`]): a render's peak is the body and the compact content
/// (benches/README.md). `config` is left `null`; `None` when `slot` is not in it.
fn write_body(
    config: &mut serde_json::Value,
    slot: *const serde_json::Value,
    content: &[u8],
) -> Option<Vec<u8>> {
    let mut escaped = 0;
    gojson::indent_into(content, go_marshal::INDENT, &mut |bytes| {
        escaped += dataurl::escaped_len(bytes);
    });
    let mut write = |out: &mut Vec<u8>| {
        // A data URL is ASCII that no JSON encoder escapes: quoted as it is.
        out.push(b'"');
        out.extend_from_slice(dataurl::PREFIX.as_bytes());
        gojson::indent_into(content, go_marshal::INDENT, &mut |bytes| {
            dataurl::escape_into(out, bytes);
        });
        out.push(b'"');
    };
    gojson::drain_to_vec(
        config,
        Escaping::Clarketm,
        Keys::AsGiven,
        gojson::Splice {
            at: slot,
            len: 2 + dataurl::PREFIX.len() + escaped,
            write: &mut write,
        },
    )
}

/// The node annotations file: the config the node starts at, the image when one is served, and
/// this server's URL when machines are told where to report a first-boot failure. Written as
/// the original marshals its map: keys sorted, `clarketm/json`'s escaping.
pub fn node_annotations(
    rendered_config: &str,
    image: Option<&str>,
    server_url: Option<&str>,
) -> Vec<u8> {
    let mut values = BTreeMap::from([
        (annotations::CURRENT_CONFIG, rendered_config),
        (annotations::DESIRED_CONFIG, rendered_config),
        (annotations::FIRST_PIVOT_CONFIG, rendered_config),
        (annotations::STATE, annotations::STATE_DONE),
    ]);
    if let Some(image) = image {
        values.insert(annotations::CURRENT_IMAGE, image);
        values.insert(annotations::DESIRED_IMAGE, image);
    }
    if let Some(url) = server_url {
        values.insert(annotations::MACHINE_CONFIG_SERVER_URL, url);
    }
    let object = values
        .into_iter()
        .map(|(key, value)| (key.to_owned(), serde_json::Value::from(value)))
        .collect();
    gojson::to_vec(
        &serde_json::Value::Object(object),
        Escaping::Clarketm,
        Keys::Sorted,
    )
}

/// How the original's MachineConfig object came to be, which decides how it writes it into
/// the files it serves ([`go_marshal`]): from its informers in cluster mode, from the pool's
/// MachineConfig file (with the `kind` and `apiVersion` that file names) in bootstrap mode.
fn origin<'s>(snapshot: &'s Snapshot, name: &str) -> Origin<'s> {
    match snapshot.mode {
        Mode::Cluster => Origin::Informer,
        Mode::Bootstrap => {
            let type_meta = snapshot.file_type_meta.get(name);
            Origin::File {
                kind: type_meta.map_or("", |t| t.kind.as_str()),
                api_version: type_meta.map_or("", |t| t.api_version.as_str()),
            }
        }
    }
}

/// The spec of the empty config in the encapsulated MachineConfig, for an answer served in
/// `served`:
///
/// - cluster mode: the served spec, as the original converts it to the requested version
///   (`appendEncapsulated` with the request's version: old boot images ran a daemon of their
///   own that reads only its own spec);
/// - bootstrap mode: 3.5, the original's newest, whatever was asked (its bootstrap server
///   passes no version to `appendEncapsulated`; the nodes it serves boot the installer's own
///   boot image, whose daemon reads 3.5). From a rendered config of spec 3.6, which only an
///   MCO with PR #6236 renders, 3.6: what that MCO's server encapsulates.
pub fn encapsulated_version(
    mode: Mode,
    machine_config: &MachineConfig,
    served: SpecVersion,
) -> SpecVersion {
    match mode {
        Mode::Cluster => served,
        Mode::Bootstrap => ignition::rendered_spec(machine_config.spec.config_version()),
    }
}

/// `appendEncapsulated`: the MachineConfig with `spec.config` replaced by an empty config of
/// spec `version`, compact (`json.Marshal(mc)`).
fn encapsulated_machine_config(
    machine_config: &MachineConfig,
    name: &str,
    origin: Origin<'_>,
    version: SpecVersion,
) -> Result<Vec<u8>, RenderError> {
    let empty = ignition::to_value_as(&ignition::empty_config(), version).map_err(|source| {
        RenderError::Translate {
            name: name.to_string(),
            source,
        }
    })?;
    let mut encapsulated = machine_config.clone();
    encapsulated.spec.config = Some(RawConfig::from(empty));
    Ok(go_marshal::marshal(&encapsulated, origin))
}

#[cfg(test)]
mod readiness_tests {
    use super::*;
    use crate::api::imagebuild::MachineOSConfig;
    use crate::snapshot::LayeredGate;

    fn cluster(synced: &[Input], gate: LayeredGate) -> Snapshot {
        let mut snapshot = Snapshot::empty(Mode::Cluster);
        snapshot.generation = 1;
        snapshot.synced = synced.iter().copied().collect();
        snapshot.layered.gate = gate;
        let mosc: MachineOSConfig = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "layered"},
            "spec": {"machineConfigPool": {"name": "layered"}}
        }))
        .expect("MachineOSConfig");
        snapshot.layered.machine_os_configs = vec![Arc::new(mosc)];
        snapshot
    }

    fn kinds(inputs: Vec<Input>) -> Vec<&'static str> {
        inputs.into_iter().map(Input::kind).collect()
    }

    #[test]
    fn a_pool_waits_only_for_what_its_answer_reads() {
        let every_pool = Input::EVERY_POOL;
        let snapshot = cluster(&every_pool, LayeredGate::NodeValidated);
        // Nodes, MCNs, builds and the registry never hold back a pool that is not layered.
        assert_eq!(waiting_for(&snapshot, "worker"), []);
        assert_eq!(
            kinds(waiting_for(&snapshot, "layered")),
            [
                "MachineOSBuild",
                "Service",
                "Route",
                "Node",
                "MachineConfigNode"
            ]
        );
        // Under the original's gate a layered pool reads no Node.
        let original = cluster(&every_pool, LayeredGate::PoolUpdatedMachineCount);
        assert_eq!(
            kinds(waiting_for(&original, "layered")),
            ["MachineOSBuild", "Service", "Route"]
        );
        let all = cluster(&Input::ALL, LayeredGate::NodeValidated);
        assert_eq!(waiting_for(&all, "layered"), []);
        // Before the MachineOSConfigs have synced, nobody knows which pools are layered.
        let early = cluster(&every_pool[..4], LayeredGate::NodeValidated);
        assert_eq!(kinds(waiting_for(&early, "worker")), ["MachineOSConfig"]);
        assert_eq!(kinds(waiting_for(&early, "layered")), ["MachineOSConfig"]);
        // Bootstrap mode reads everything first.
        assert_eq!(waiting_for(&Snapshot::empty(Mode::Bootstrap), "master"), []);
    }

    #[test]
    fn a_pool_that_waits_answers_not_ready_naming_what_it_waits_for() {
        let snapshot = cluster(&Input::EVERY_POOL, LayeredGate::NodeValidated);
        let error = render(&snapshot, "layered", SpecVersion::V3_5).unwrap_err();
        assert_eq!(error.kind(), "not_ready");
        assert_eq!(
            error.to_string(),
            "waiting for the MachineOSBuild, Service, Route, Node, MachineConfigNode caches to sync"
        );
    }
}

#[cfg(test)]
mod failure_reporting_tests {
    use super::*;
    use crate::snapshot::FailureReporting;
    use serde_json::{json, Value};

    const ROOT_CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nROOT\n-----END CERTIFICATE-----\n";

    fn base64(bytes: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A bootstrap snapshot of pool `master` whose rendered config has `files`.
    fn snapshot(files: Value, root_ca: Option<&[u8]>) -> Snapshot {
        let mut snapshot = Snapshot::empty(Mode::Bootstrap);
        snapshot.generation = 1;
        let pool = serde_json::from_value(json!({
            "metadata": {"name": "master"},
            "spec": {"configuration": {"name": "rendered-master-1"}},
            "status": {"configuration": {"name": "rendered-master-1"}}
        }))
        .expect("pool");
        snapshot.pools.insert("master".into(), Ok(Arc::new(pool)));
        let machine_config = serde_json::from_value(json!({
            "metadata": {"name": "rendered-master-1"},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}
        }))
        .expect("MachineConfig");
        snapshot
            .machine_configs
            .insert("rendered-master-1".into(), Ok(Arc::new(machine_config)));
        let controller_config = serde_json::from_value(json!({
            "metadata": {"name": "machine-config-controller"},
            "spec": {
                "kubeAPIServerServingCAData": base64(b"KUBELET CA"),
                "rootCAData": root_ca.map(base64),
            }
        }))
        .expect("ControllerConfig");
        snapshot.controller_config = Some(Ok(Arc::new(controller_config)));
        snapshot
    }

    /// The served files, decoded, in order.
    fn served(snapshot: &Snapshot, version: SpecVersion) -> Vec<(String, Vec<u8>)> {
        let body = render(snapshot, "master", version).expect("rendered").body;
        let config: Value = serde_json::from_slice(&body).expect("JSON");
        config["storage"]["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|file| {
                let source = file["contents"]["source"].as_str().expect("source");
                (
                    file["path"].as_str().expect("path").to_owned(),
                    dataurl::decode(source).expect("data URL"),
                )
            })
            .collect()
    }

    fn paths(files: &[(String, Vec<u8>)]) -> Vec<&str> {
        files.iter().map(|(path, _)| path.as_str()).collect()
    }

    fn annotations(files: &[(String, Vec<u8>)]) -> Value {
        let (_, data) = files
            .iter()
            .find(|(path, _)| path == NODE_ANNOTATIONS_PATH)
            .expect("node annotations");
        serde_json::from_slice(data).expect("annotations JSON")
    }

    #[test]
    fn without_the_flag_nothing_is_added() {
        let snapshot = snapshot(json!([]), Some(ROOT_CA));
        let files = served(&snapshot, SpecVersion::V3_4);
        assert!(!paths(&files).contains(&MCS_CA_BUNDLE_PATH));
        assert!(annotations(&files)
            .get(annotations::MACHINE_CONFIG_SERVER_URL)
            .is_none());
    }

    #[test]
    fn the_root_ca_is_appended_after_the_other_cas_and_before_the_node_files() {
        let mut snapshot = snapshot(json!([]), Some(ROOT_CA));
        snapshot.failure_reporting = Some(FailureReporting::default());
        for version in [SpecVersion::V2_2, SpecVersion::V3_4] {
            let files = served(&snapshot, version);
            assert_eq!(
                paths(&files),
                [
                    KUBELET_CA_PATH,
                    MCS_CA_BUNDLE_PATH,
                    NODE_ANNOTATIONS_PATH,
                    KUBECONFIG_PATH,
                    MACHINE_CONFIG_CONTENT_PATH,
                    ENCAPSULATED_PATH
                ],
                "{version}"
            );
            assert_eq!(files[1].1, ROOT_CA);
            // No URL: the annotation is absent, not empty.
            assert!(annotations(&files)
                .get(annotations::MACHINE_CONFIG_SERVER_URL)
                .is_none());
        }
        let body = render(&snapshot, "master", SpecVersion::V3_4)
            .expect("rendered")
            .body;
        let config: Value = serde_json::from_slice(&body).expect("JSON");
        let file = &config["storage"]["files"][1];
        assert_eq!(file["mode"], 420);
        assert_eq!(file["overwrite"], true);
        assert!(file["contents"]["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("data:,-----BEGIN%20CERTIFICATE-----%0AROOT")));
    }

    #[test]
    fn a_machine_config_with_the_file_keeps_its_place_and_gets_the_root_ca() {
        let mine = json!([
            {"path": "/etc/motd", "contents": {"source": "data:,hi"}},
            {"path": MCS_CA_BUNDLE_PATH, "mode": 384, "contents": {"source": "data:,mine"}}
        ]);
        let mut snapshot = snapshot(mine.clone(), Some(ROOT_CA));
        snapshot.failure_reporting = Some(FailureReporting::default());
        let files = served(&snapshot, SpecVersion::V3_4);
        assert_eq!(
            &paths(&files)[..3],
            ["/etc/motd", MCS_CA_BUNDLE_PATH, KUBELET_CA_PATH]
        );
        assert_eq!(files[1].1, ROOT_CA);
        assert_eq!(
            paths(&files)
                .iter()
                .filter(|p| **p == MCS_CA_BUNDLE_PATH)
                .count(),
            1
        );
        // Its other fields are the MachineConfig's.
        let body = render(&snapshot, "master", SpecVersion::V3_4)
            .expect("rendered")
            .body;
        let config: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(config["storage"]["files"][1]["mode"], 384);
        // Without a root CA the MachineConfig's own contents stay, and nothing is appended.
        let mut snapshot = self::snapshot(mine, None);
        snapshot.failure_reporting = Some(FailureReporting::default());
        let files = served(&snapshot, SpecVersion::V3_4);
        assert_eq!(files[1], (MCS_CA_BUNDLE_PATH.to_owned(), b"mine".to_vec()));
        let mut snapshot = self::snapshot(json!([]), None);
        snapshot.failure_reporting = Some(FailureReporting::default());
        assert!(!paths(&served(&snapshot, SpecVersion::V3_4)).contains(&MCS_CA_BUNDLE_PATH));
    }

    #[test]
    fn the_url_is_a_node_annotation_written_as_go_writes_the_map() {
        assert_eq!(
            node_annotations("rendered-worker-1", None, Some("https://api-int.example.test:22623")),
            br#"{"machineconfiguration.openshift.io/currentConfig":"rendered-worker-1","machineconfiguration.openshift.io/desiredConfig":"rendered-worker-1","machineconfiguration.openshift.io/firstPivotConfig":"rendered-worker-1","machineconfiguration.openshift.io/machineConfigServerURL":"https://api-int.example.test:22623","machineconfiguration.openshift.io/state":"Done"}"#
        );
        // clarketm's escaping of a host Go lets through.
        let written = node_annotations("r", Some("i"), Some("https://a&b<c>:22623"));
        let text = String::from_utf8(written).expect("UTF-8");
        assert!(
            text.contains(r#""https://a\u0026b\u003cc\u003e:22623""#),
            "{text}"
        );
        assert!(text.find("currentImage") < text.find("machineConfigServerURL"));
        assert!(text.find("machineConfigServerURL") < text.find("state"));
    }
}

#[cfg(test)]
mod kind_labels {
    use super::RenderError;
    use crate::metrics::RENDER_ERROR_KINDS;

    #[test]
    fn every_kind_a_render_error_has_is_a_label_exported_from_the_start() {
        let errors = [
            RenderError::NotFound("x".into()),
            RenderError::PoolNotServed("x".into()),
            RenderError::UnknownPool("x".into()),
            RenderError::MissingMachineConfig {
                pool: "x".into(),
                name: "y".into(),
            },
            RenderError::InvalidInput("x".into()),
            RenderError::KernelArguments(crate::ignition::SpecVersion::V2_2),
            RenderError::NotReady(Vec::new()),
        ];
        for error in &errors {
            assert!(
                RENDER_ERROR_KINDS.contains(&error.kind()),
                "{}",
                error.kind()
            );
        }
        // Parse and Translate carry their sources; their kinds are listed by name.
        assert!(RENDER_ERROR_KINDS.contains(&"parse"));
        assert!(RENDER_ERROR_KINDS.contains(&"translate"));
    }
}

//! What the publisher writes: the MachineConfigNode (MCN) for one Node, its initial status and
//! the bootstrap-record annotations. Pure functions of the Node, its pool, what this server
//! serves and what it answered that node; no I/O, no clock (the caller passes the time).
//!
//! Every value written must pass the real CRD (`shared/crds/machineconfignodes.yaml`): config
//! names are RFC 1123 subdomains (a value that is not is treated as unknown, never written),
//! condition reasons match the CRD's pattern, `status.configVersion.desired` is always present
//! and `status.observedGeneration` is at least 1.
//!
//! # `spec.configImage`
//! The CRD shipped with the default feature set does not declare `spec.configImage` (newer,
//! tech-preview CRDs do, with an `@sha256:` digest rule). A real API server silently prunes an
//! undeclared field, so writing it blindly would either vanish or, with a tag instead of a
//! digest, fail the whole write on newer CRDs. [`MachineConfigNodeParts::config_image`] is
//! therefore filled only when the caller says the CRD in use declares it and the image is in
//! digest form; the image a node was served is always kept in the bootstrap-record annotation
//! [`annotations::BOOTSTRAP_IMAGE`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use super::matching::{Bootstrap, FailureMatch, UnknownReason};
use crate::api::annotations as node_annotations;
use crate::api::imagebuild::{Condition, NameRef};
use crate::api::machineconfignode::{
    MachineConfigNode, MachineConfigNodeSpec, MachineConfigNodeStatus, SpecConfigImage,
    SpecConfigVersion, StatusConfigVersion,
};
use crate::api::node::{boot_id, name as node_name};

/// The placeholder the MCO writes while a config version is unknown.
pub const NOT_YET_SET: &str = "not-yet-set";

/// Annotations this server writes on the MCNs it creates.
pub mod annotations {
    /// Marks an MCN this server created; only such MCNs are ever filled in later.
    pub const CREATED_BY: &str = "mcs.machineconfiguration.openshift.io/created-by";
    /// Value of [`CREATED_BY`].
    pub const CREATED_BY_VALUE: &str = "machine-config-server";
    /// Prefix of every annotation this server writes.
    pub const PREFIX: &str = "mcs.machineconfiguration.openshift.io/";
    /// Bootstrap record: the remote address the config request came from.
    pub const BOOTSTRAP_ADDRESS: &str = "mcs.machineconfiguration.openshift.io/bootstrap-address";
    /// Bootstrap record: the pool the node asked for.
    pub const BOOTSTRAP_POOL: &str = "mcs.machineconfiguration.openshift.io/bootstrap-pool";
    /// Bootstrap record: the rendered MachineConfig it was served.
    pub const BOOTSTRAP_CONFIG: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-rendered-config";
    /// Bootstrap record: the OS image it was served (layered or pre-built), if any.
    pub const BOOTSTRAP_IMAGE: &str = "mcs.machineconfiguration.openshift.io/bootstrap-image";
    /// Bootstrap record: the Ignition spec version of the payload.
    pub const BOOTSTRAP_SPEC_VERSION: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-ignition-version";
    /// Bootstrap record: when it was served (RFC 3339, UTC).
    pub const BOOTSTRAP_SERVED_AT: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-served-at";
    /// Bootstrap record: the replica that served it (its `NODE_NAME`), when known.
    pub const BOOTSTRAP_SERVED_BY: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-served-by";
    /// Bootstrap record: other replicas that served the same address earlier (comma-separated);
    /// the newest answer is the record.
    pub const BOOTSTRAP_ALSO_SERVED_BY: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-also-served-by";
    /// Instead of a record: records exist for the node's address but cannot be told to be its
    /// own (a proxy or NAT hides the machines); the value says why (see `matching`).
    pub const BOOTSTRAP_SOURCE_UNKNOWN: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-source-unknown";
    /// Bootstrap record: the Ignition release of the client, from its `User-Agent` (the boot
    /// image it started from); `unknown` when the request named none.
    pub const BOOTSTRAP_IGNITION_CLIENT: &str =
        "mcs.machineconfiguration.openshift.io/bootstrap-ignition-client";
    /// First-boot failure the machine reported before it joined: the stage that failed.
    pub const FIRSTBOOT_FAILURE_STAGE: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-stage";
    /// First-boot failure: when it was reported (RFC 3339, UTC).
    pub const FIRSTBOOT_FAILURE_AT: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-at";
    /// First-boot failure: the sanitized message (cut, secrets redacted).
    pub const FIRSTBOOT_FAILURE_MESSAGE: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-message";
    /// First-boot failure: the registry host of the image it failed on (`none` if none).
    pub const FIRSTBOOT_FAILURE_IMAGE: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-image";
    /// First-boot failure: the node ID the machine reported (its host name then).
    pub const FIRSTBOOT_FAILURE_NODE_ID: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-node-id";
    /// First-boot failure: the address it was reported from.
    pub const FIRSTBOOT_FAILURE_ADDRESS: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-address";
    /// First-boot failure: the Node's boot ID when the failure was written; a later boot of
    /// the node that becomes ready clears the failure ([`super::failure_cleared_by`]).
    pub const FIRSTBOOT_FAILURE_BOOT_ID: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-boot-id";
    /// Beside the failure: when the node was past it (the `Ready` transition of the boot that
    /// got past it; see [`super::failure_cleared_by`]). The failure stays, as the record of
    /// how the machine came up; the marker says it is history.
    pub const FIRSTBOOT_FAILURE_CLEARED_AT: &str =
        "mcs.machineconfiguration.openshift.io/firstboot-failure-cleared-at";
    /// Every first-boot failure annotation but the cleared marker.
    pub const FIRSTBOOT_FAILURE: [&str; 7] = [
        FIRSTBOOT_FAILURE_STAGE,
        FIRSTBOOT_FAILURE_AT,
        FIRSTBOOT_FAILURE_MESSAGE,
        FIRSTBOOT_FAILURE_IMAGE,
        FIRSTBOOT_FAILURE_NODE_ID,
        FIRSTBOOT_FAILURE_ADDRESS,
        FIRSTBOOT_FAILURE_BOOT_ID,
    ];
}

/// Condition types of the MCN design (default feature set), in the order the daemon writes them
/// after the parent (`Updated`): the update phases (parent and child) and the singletons.
pub const NOT_YET_OCCURRED_CONDITIONS: [&str; 13] = [
    "UpdatePrepared",
    "UpdateExecuted",
    "UpdatePostActionComplete",
    "UpdateComplete",
    "Resumed",
    "Drained",
    "AppliedFilesAndOS",
    "Cordoned",
    "RebootedNode",
    "Uncordoned",
    "NodeDegraded",
    "PinnedImageSetsDegraded",
    "PinnedImageSetsProgressing",
];

/// The condition that says whether the node runs its desired config.
pub const CONDITION_UPDATED: &str = "Updated";
const REASON_NOT_YET_OCCURRED: &str = "NotYetOccurred";

/// What this server serves now for a pool (the fallback for a node's desired config and image).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolServing {
    /// The rendered MachineConfig a new node of the pool gets; empty when the pool has none yet.
    pub rendered_config: String,
    /// The OS image it gets written into its annotations (layered or pre-built), if any.
    pub image: Option<String>,
}

/// Everything the MCN of one node is built from.
#[derive(Clone, Copy, Debug)]
pub struct NodeInputs<'a> {
    pub node: &'a Node,
    /// The node's primary pool.
    pub pool: &'a str,
    /// What this server serves for that pool now, if it serves it.
    pub serving: Option<&'a PoolServing>,
    /// What this server answered the node when it booted, if it remembers.
    pub bootstrap: Option<&'a Bootstrap>,
    /// Records exist for the node's address but cannot be told to be its own.
    pub source_unknown: Option<(IpAddr, UnknownReason)>,
    /// The first-boot failure its machine reported before it joined, if any.
    pub failure: Option<&'a FailureMatch>,
    /// Whether the MCN CRD in use declares `spec.configImage`.
    pub config_image_declared: bool,
}

/// The parts of an MCN the publisher owns (see [`build_mcn`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MachineConfigNodeParts {
    pub spec_desired: String,
    pub config_image: Option<String>,
}

/// `spec.configVersion.desired`: the node's `desiredConfig` annotation, else the rendered config
/// this server answered the node with, else the one it serves the pool now, else
/// [`NOT_YET_SET`]. Values that are not valid MachineConfig names are skipped.
pub fn desired_config(inputs: &NodeInputs<'_>) -> String {
    let candidates = [
        node_annotation(inputs.node, node_annotations::DESIRED_CONFIG),
        inputs.bootstrap.map(|b| b.record.rendered_config.as_str()),
        inputs.serving.map(|s| s.rendered_config.as_str()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|name| is_dns1123_subdomain(name))
        .unwrap_or(NOT_YET_SET)
        .to_owned()
}

/// The node's desired OS image: its `desiredImage` annotation, else the image it was served,
/// else the one the pool is served now; `None` when no layered or pre-built image applies.
pub fn desired_image(inputs: &NodeInputs<'_>) -> Option<String> {
    let candidates = [
        node_annotation(inputs.node, node_annotations::DESIRED_IMAGE),
        inputs.bootstrap.and_then(|b| b.record.image.as_deref()),
        inputs.serving.and_then(|s| s.image.as_deref()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|image| !image.is_empty())
        .map(str::to_owned)
}

/// The MCN to create for a node: name and `spec.node.name` = node name, owner reference to the
/// Node, `spec.pool.name`, `spec.configVersion.desired`, `spec.configImage` (see module docs),
/// the [`annotations::CREATED_BY`] marker and the bootstrap record when there is one.
pub fn build_mcn(inputs: &NodeInputs<'_>) -> MachineConfigNode {
    let name = node_name(inputs.node).to_owned();
    let parts = MachineConfigNodeParts {
        spec_desired: desired_config(inputs),
        config_image: desired_image(inputs)
            .filter(|image| inputs.config_image_declared && is_digest_image(image)),
    };
    let mut annotations = BTreeMap::from([(
        annotations::CREATED_BY.to_owned(),
        annotations::CREATED_BY_VALUE.to_owned(),
    )]);
    if let Some(bootstrap) = inputs.bootstrap {
        annotations.extend(bootstrap_annotations(bootstrap));
    } else if let Some((address, reason)) = inputs.source_unknown {
        annotations.extend(source_unknown_annotations(address, reason));
    }
    if let Some(failure) = inputs.failure {
        annotations.extend(failure_annotations(failure, inputs.node));
    }
    let mut mcn = MachineConfigNode::new(
        &name,
        MachineConfigNodeSpec {
            node: NameRef { name: name.clone() },
            pool: NameRef {
                name: inputs.pool.to_owned(),
            },
            config_version: SpecConfigVersion {
                desired: parts.spec_desired,
            },
            config_image: parts
                .config_image
                .map(|desired_image| SpecConfigImage { desired_image }),
        },
    );
    mcn.metadata = ObjectMeta {
        name: Some(name),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(inputs.node)]),
        ..ObjectMeta::default()
    };
    mcn
}

/// The owner reference of an MCN to its Node (as the original: no controller flag).
pub fn owner_reference(node: &Node) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: node_name(node).to_owned(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        ..OwnerReference::default()
    }
}

/// The bootstrap-record annotations for what was served to `bootstrap.address`.
pub fn bootstrap_annotations(bootstrap: &Bootstrap) -> BTreeMap<String, String> {
    let record = &bootstrap.record;
    let mut out = BTreeMap::from([
        (
            annotations::BOOTSTRAP_ADDRESS.to_owned(),
            bootstrap.address.to_string(),
        ),
        (annotations::BOOTSTRAP_POOL.to_owned(), record.pool.clone()),
        (
            annotations::BOOTSTRAP_CONFIG.to_owned(),
            record.rendered_config.clone(),
        ),
        (
            annotations::BOOTSTRAP_SPEC_VERSION.to_owned(),
            record.spec_version.as_str().to_owned(),
        ),
        (
            annotations::BOOTSTRAP_SERVED_AT.to_owned(),
            rfc3339_seconds(record.served_at),
        ),
    ]);
    if let Some(image) = record.image.as_ref().filter(|i| !i.is_empty()) {
        out.insert(annotations::BOOTSTRAP_IMAGE.to_owned(), image.clone());
    }
    if let Some(replica) = bootstrap.served_by.as_ref().filter(|r| !r.is_empty()) {
        out.insert(annotations::BOOTSTRAP_SERVED_BY.to_owned(), replica.clone());
    }
    if !bootstrap.also_served_by.is_empty() {
        out.insert(
            annotations::BOOTSTRAP_ALSO_SERVED_BY.to_owned(),
            bootstrap.also_served_by.join(","),
        );
    }
    out.insert(
        annotations::BOOTSTRAP_IGNITION_CLIENT.to_owned(),
        record
            .ignition
            .clone()
            .unwrap_or_else(|| crate::ignition::client::UNKNOWN_LABEL.to_owned()),
    );
    out
}

/// The annotations of a first-boot failure the node's machine reported, with the Node's boot ID
/// now, and the cleared marker when the node is past the failure already
/// ([`failure_cleared_by`]: the usual case, since a machine's Node registers only once a boot
/// got past its first-boot update).
pub fn failure_annotations(failure: &FailureMatch, node: &Node) -> BTreeMap<String, String> {
    let boot_id = boot_id(node);
    let report = &failure.failure;
    let mut out = BTreeMap::from([
        (
            annotations::FIRSTBOOT_FAILURE_STAGE.to_owned(),
            report.stage.clone(),
        ),
        (
            annotations::FIRSTBOOT_FAILURE_AT.to_owned(),
            rfc3339_seconds(report.reported_at),
        ),
        (
            annotations::FIRSTBOOT_FAILURE_MESSAGE.to_owned(),
            report.message.clone(),
        ),
        (
            annotations::FIRSTBOOT_FAILURE_IMAGE.to_owned(),
            report.image.clone(),
        ),
        (
            annotations::FIRSTBOOT_FAILURE_NODE_ID.to_owned(),
            report.node_id.clone(),
        ),
        (
            annotations::FIRSTBOOT_FAILURE_ADDRESS.to_owned(),
            failure.address.to_string(),
        ),
    ]);
    if let Some(boot_id) = boot_id {
        out.insert(
            annotations::FIRSTBOOT_FAILURE_BOOT_ID.to_owned(),
            boot_id.to_owned(),
        );
    }
    if let Some(cleared_at) = cleared_at(report.reported_at, boot_id, node) {
        out.insert(
            annotations::FIRSTBOOT_FAILURE_CLEARED_AT.to_owned(),
            cleared_at,
        );
    }
    out
}

/// True when the MCN carries a first-boot failure, or says one was cleared: either way the
/// failure was told and is never written again.
pub fn has_failure_record(mcn: &MachineConfigNode) -> bool {
    mcn.metadata.annotations.as_ref().is_some_and(|a| {
        a.contains_key(annotations::FIRSTBOOT_FAILURE_STAGE)
            || a.contains_key(annotations::FIRSTBOOT_FAILURE_CLEARED_AT)
    })
}

/// When the MCN's first-boot failure is cleared, and it does not say so yet: the value of
/// [`annotations::FIRSTBOOT_FAILURE_CLEARED_AT`] to add ([`cleared_at`]).
pub fn failure_cleared_by(mcn: &MachineConfigNode, node: &Node) -> Option<String> {
    let written = mcn.metadata.annotations.as_ref()?;
    written.get(annotations::FIRSTBOOT_FAILURE_STAGE)?;
    if written.contains_key(annotations::FIRSTBOOT_FAILURE_CLEARED_AT) {
        return None;
    }
    let reported_at = written
        .get(annotations::FIRSTBOOT_FAILURE_AT)
        .and_then(|at| at.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .and_then(|at| u64::try_from(at.as_second()).ok())
        .map(|secs| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))?;
    let written_during = written
        .get(annotations::FIRSTBOOT_FAILURE_BOOT_ID)
        .map(String::as_str)
        .filter(|id| !id.is_empty());
    cleared_at(reported_at, written_during, node)
}

/// Whether `node` is past a first-boot failure its machine reported at `reported_at` (written
/// while the node ran boot `written_during`, if known), and since when: the node is `Ready`,
/// and either it registered after the report (the kubelet runs only once the daemon's
/// first-boot update has succeeded, so the boot that registered the Node is a later boot than
/// the one that failed), or it has booted again since the failure was written (another boot
/// ID). The value is the `Ready` transition time (`unknown` when the node records none).
/// Compared to the second, as both times are stored.
pub fn cleared_at(
    reported_at: std::time::SystemTime,
    written_during: Option<&str>,
    node: &Node,
) -> Option<String> {
    let since = crate::api::node::ready_since(node)?;
    let to_second = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let registered_after = crate::api::node::created(node)
        .is_some_and(|created| to_second(reported_at) <= to_second(created));
    let rebooted = match (written_during, boot_id(node)) {
        (Some(then), Some(now)) => then != now,
        _ => false,
    };
    (registered_after || rebooted).then(|| {
        if since.is_empty() {
            "unknown".to_owned()
        } else {
            since
        }
    })
}

/// The annotations saying that records exist for `address` but their source is unknown.
pub fn source_unknown_annotations(
    address: IpAddr,
    reason: UnknownReason,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            annotations::BOOTSTRAP_ADDRESS.to_owned(),
            address.to_string(),
        ),
        (
            annotations::BOOTSTRAP_SOURCE_UNKNOWN.to_owned(),
            reason.as_str().to_owned(),
        ),
    ])
}

/// The status of an MCN whose node has not started an update, as the daemon initialises it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialStatus {
    pub node: String,
    /// The node's `currentConfig` annotation, if valid.
    pub current: Option<String>,
    /// `status.configVersion.desired`: the node's `desiredConfig` annotation, else
    /// [`NOT_YET_SET`] (the daemon sets it only once it has validated an update).
    pub status_desired: String,
    /// `spec.configVersion.desired` of the MCN; `Updated` is true when `current` equals it.
    pub spec_desired: String,
}

impl InitialStatus {
    /// The initial status inputs for `node` whose MCN has `spec_desired`.
    pub fn for_node(node: &Node, spec_desired: &str) -> Self {
        let valid = |key| node_annotation(node, key).filter(|v| is_dns1123_subdomain(v));
        InitialStatus {
            node: node_name(node).to_owned(),
            current: valid(node_annotations::CURRENT_CONFIG).map(str::to_owned),
            status_desired: valid(node_annotations::DESIRED_CONFIG)
                .unwrap_or(NOT_YET_SET)
                .to_owned(),
            spec_desired: spec_desired.to_owned(),
        }
    }

    /// The status to write for an MCN at `generation` (from the API server), at time `now`:
    /// `Updated` first, then every phase and singleton condition false with reason
    /// `NotYetOccurred`, `configVersion`, and `observedGeneration`.
    pub fn build(&self, generation: i64, now: Timestamp) -> MachineConfigNodeStatus {
        let generation = generation.max(1);
        let time = rfc3339_seconds_of(now);
        let condition = |type_: &str, status: &str, reason: &str, message: String| Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: time.clone(),
            observed_generation: Some(generation),
        };
        let updated = match &self.current {
            Some(current) if *current == self.spec_desired => condition(
                CONDITION_UPDATED,
                "True",
                CONDITION_UPDATED,
                format!("Node {} Updated", self.node),
            ),
            Some(_) => condition(
                CONDITION_UPDATED,
                "False",
                CONDITION_UPDATED,
                format!("Node {} needs an update", self.node),
            ),
            None => condition(
                CONDITION_UPDATED,
                "False",
                CONDITION_UPDATED,
                format!("Node {} has not reported its current config yet", self.node),
            ),
        };
        let mut conditions = vec![updated];
        conditions.extend(NOT_YET_OCCURRED_CONDITIONS.iter().map(|type_| {
            condition(
                type_,
                "False",
                REASON_NOT_YET_OCCURRED,
                format!("This node has not yet entered the {type_} phase"),
            )
        }));
        MachineConfigNodeStatus {
            conditions,
            config_version: Some(StatusConfigVersion {
                current: self.current.clone().unwrap_or_default(),
                desired: self.status_desired.clone(),
            }),
            config_image: None,
            observed_generation: Some(generation),
            rest: Default::default(),
        }
    }
}

/// True when the MCN carries this server's [`annotations::CREATED_BY`] marker.
pub fn is_ours(mcn: &MachineConfigNode) -> bool {
    mcn.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::CREATED_BY))
        .is_some_and(|v| v == annotations::CREATED_BY_VALUE)
}

/// True when the MCN already has a bootstrap record (or says that its source is unknown).
pub fn has_bootstrap_record(mcn: &MachineConfigNode) -> bool {
    mcn.metadata.annotations.as_ref().is_some_and(|a| {
        a.contains_key(annotations::BOOTSTRAP_SERVED_AT)
            || a.contains_key(annotations::BOOTSTRAP_SOURCE_UNKNOWN)
    })
}

fn node_annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// A lowercase RFC 1123 subdomain (the CRD's rule for config, pool and node names).
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

/// An image pull spec `host[:port][/namespace]/name@sha256:<64 lowercase hex>`, the only form
/// the CRDs that declare `configImage` accept.
pub fn is_digest_image(image: &str) -> bool {
    let Some((name, digest)) = image.split_once('@') else {
        return false;
    };
    let Some(hex) = digest.strip_prefix("sha256:") else {
        return false;
    };
    let host = name.split('/').next().unwrap_or_default();
    hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && name.contains('/')
        && host.contains('.')
        && image.len() <= 447
}

/// `2025-05-22T12:37:28Z`: RFC 3339 in UTC with whole seconds, as Kubernetes writes times.
pub fn rfc3339_seconds(time: std::time::SystemTime) -> String {
    let seconds = match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(elapsed) => i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX),
        Err(_) => 0,
    };
    match Timestamp::from_second(seconds) {
        Ok(timestamp) => timestamp.to_string(),
        Err(_) => Timestamp::UNIX_EPOCH.to_string(),
    }
}

fn rfc3339_seconds_of(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
mod tests;

//! Layered (image-mode) pools: which OS image a booting node gets, and why.
//!
//! Owns the pure decision [`decide`] (cluster objects in, [`LayeredDecision`] out), the
//! pre-built-image rule for the node annotations ([`node_annotation_image`]), the in-cluster
//! registry hosts ([`registry_hosts`]). Pool membership comes from
//! [`crate::api::pool_membership`] (shared with the MachineConfigNode publisher); reporting the
//! decisions served is the server's ([`crate::server::layered_decisions`]). The decision does no I/O and reads no clock, and this module never touches the Ignition
//! document itself: the render pipeline puts the chosen image into the node-annotations file
//! and the encapsulated MachineConfig.
//!
//! # The rule
//! A node booting into pool `P` with rendered config `R` gets image `I` in one reboot only when
//! all of these hold; otherwise it boots the base image from `R` and updates after joining (two
//! reboots). The first failing step is the [`DecisionReason`]:
//! 1. A MachineOSConfig (MOSC) has `spec.machineConfigPool.name == P`, else `not_layered`. If
//!    several do (older clusters did not forbid it), the one named `P` wins, then the smallest
//!    name: deterministic, unlike the original's list order.
//! 2. The MOSC has a non-empty `status.currentImagePullSpec`, else `no_image_yet`. This is only
//!    a gate ("this MOSC has produced an image at all"); the MOSC's image does **not** have to
//!    equal the served build's image. The MOSC tracks the newest build, which during a rollout
//!    belongs to a newer rendered config than `R`; the original serves the MOSC's image with
//!    `R`'s config, which can pair a config with an image built from another one. We serve the
//!    image of a build *of `R`*.
//! 3. At least one MachineOSBuild (MOSB) has `spec.machineOSConfig.name ==` the MOSC and
//!    `spec.machineConfig.name == R`, else `no_build_for_config`.
//! 4. At least one of those builds succeeded: condition `Succeeded=True` **and** a non-empty
//!    `status.digestedImagePushSpec` (the image served). Otherwise the newest build's state is
//!    the reason: `build_failed` (`Failed=True`), `build_interrupted` (`Interrupted=True`),
//!    `build_building` (`Building=True`), else `build_pending` (`Prepared`, no conditions yet,
//!    or `Succeeded` before the digest is recorded).
//! 5. A node of `P` has validated a succeeded build, else `not_validated`. Builds are tried
//!    newest first, "newest" meaning the later `metadata.creationTimestamp`, then the greater
//!    name (a missing timestamp counts as oldest); the first validated one is chosen. So with
//!    an older validated build and a newer unvalidated one, the older image is served and the
//!    node moves to the newer one after joining, like any other node of the pool.
//! 6. The chosen image is not in the in-cluster registry (string prefix of one of
//!    [`LayeredInputs::registry_hosts`]), else `in_cluster_registry`: a booting node has no
//!    cluster DNS. Otherwise the reason is `validated` and the image is served. As in the
//!    original this is checked after validation, so a registry image reads `not_validated`
//!    until a node runs it.
//!
//! The decision reads only the snapshot, so the snapshot generation (part of every payload
//! cache key) also keys the served image: a Node, MachineConfigNode, build or registry change
//! publishes a new snapshot and the next request is rendered with the new decision. It runs
//! once per render (pool, spec version, generation), not per request.
//!
//! # Validated
//! A node has validated image `I` when, at the same time:
//! - it belongs to `P`: its labels match `P`'s `spec.nodeSelector` and `P` is its *primary* pool
//!   among [`LayeredInputs::pools`] (custom pool over `worker`, `master` over custom, none when
//!   two custom pools claim it, none for Windows nodes; see [`crate::api::pool_membership`]). A node of another
//!   pool, even one running the same image, proves nothing about `P`;
//! - it reports `I` exactly as its current image: node annotation
//!   `machineconfiguration.openshift.io/currentImage`, or its MachineConfigNode's (same name)
//!   `status.configImage.currentImage`;
//! - it is done updating: node annotation `machineconfiguration.openshift.io/state` is `Done`.
//!   `Working` (mid-update), `Degraded` and `Unreconcilable` (the daemon's degraded states),
//!   or no state at all, are not proof;
//! - it is not degraded by its MachineConfigNode either: condition `NodeDegraded=True` vetoes.
//!
//! The pool's `status.updatedMachineCount` is deliberately ignored: it counts nodes at the
//! pool's config, not nodes that booted this image. A pool with no node yet never validates,
//! so its first nodes boot the base image.
//!
//! # Without Node rights: the original's gate
//! Where the server's identity may not read Nodes and MachineConfigNodes (the MCO's own
//! ClusterRole grants neither), step 5 cannot be checked; [`LayeredInputs::gate`] is then
//! [`LayeredGate::PoolUpdatedMachineCount`] and step 5 is the original's: the pool's
//! `status.updatedMachineCount > 0` (`pool_updated`, else `pool_not_updated`), serving the
//! MachineOSConfig's `status.currentImagePullSpec` as the original does. Steps 1-4 and 6 are
//! unchanged, so the answer is the original's wherever the two agree on the build.
//!
//! # Pre-built image (install-time image mode)
//! A rendered MachineConfig annotated `machineconfiguration.openshift.io/pre-built-image` names
//! the image its nodes were installed with; for the node annotations it wins over any decision,
//! in bootstrap and cluster mode alike ([`node_annotation_image`]). The encapsulated
//! MachineConfig's `spec.osImageURL` is overridden only by a served decision image
//! ([`encapsulated_os_image_url`]).

mod registry;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use crate::api::annotations;
use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig};
use crate::api::machineconfignode::{MachineConfigNode, CONDITION_NODE_DEGRADED};
use crate::api::{MachineConfig, MachineConfigPool};

pub use registry::{in_cluster_registry_host, registry_hosts, REGISTRY_NAMESPACE};

use crate::api::pool_membership::{primary_pool, PoolSelector};
use crate::snapshot::{LayeredGate, LayeredInputs};

/// Why a pool's node gets the layered image or the base image. Each variant is one step of the
/// rule in the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionReason {
    /// No MachineOSConfig names the pool.
    NotLayered,
    /// The MachineOSConfig has no `status.currentImagePullSpec` yet.
    NoImageYet,
    /// No MachineOSBuild of this MachineOSConfig for the selected rendered config.
    NoBuildForConfig,
    /// The newest build is prepared or not started (or succeeded without a recorded digest).
    BuildPending,
    /// The newest build is running.
    BuildBuilding,
    /// The newest build failed.
    BuildFailed,
    /// The newest build was interrupted.
    BuildInterrupted,
    /// A build succeeded but no node of the pool runs its image and is done updating.
    NotValidated,
    /// The original's gate (this server may not read Nodes): a build succeeded, but the pool's
    /// `status.updatedMachineCount` is 0.
    PoolNotUpdated,
    /// The validated image is in the in-cluster registry, unreachable for a booting node.
    InClusterRegistry,
    /// A validated image outside the cluster registry: it is served.
    Validated,
    /// The original's gate (this server may not read Nodes): a build succeeded and the pool's
    /// `status.updatedMachineCount` is above 0; the MachineOSConfig's image is served, as the
    /// original serves it.
    PoolUpdated,
}

impl DecisionReason {
    /// Every reason, in rule order (for metric pre-registration and tests).
    pub const ALL: [DecisionReason; 12] = [
        DecisionReason::NotLayered,
        DecisionReason::NoImageYet,
        DecisionReason::NoBuildForConfig,
        DecisionReason::BuildPending,
        DecisionReason::BuildBuilding,
        DecisionReason::BuildFailed,
        DecisionReason::BuildInterrupted,
        DecisionReason::NotValidated,
        DecisionReason::PoolNotUpdated,
        DecisionReason::InClusterRegistry,
        DecisionReason::Validated,
        DecisionReason::PoolUpdated,
    ];

    /// Stable snake_case label (metric `reason` label, logs, status page).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotLayered => "not_layered",
            Self::NoImageYet => "no_image_yet",
            Self::NoBuildForConfig => "no_build_for_config",
            Self::BuildPending => "build_pending",
            Self::BuildBuilding => "build_building",
            Self::BuildFailed => "build_failed",
            Self::BuildInterrupted => "build_interrupted",
            Self::NotValidated => "not_validated",
            Self::PoolNotUpdated => "pool_not_updated",
            Self::InClusterRegistry => "in_cluster_registry",
            Self::Validated => "validated",
            Self::PoolUpdated => "pool_updated",
        }
    }

    /// True when the layered image is served.
    pub fn is_served(self) -> bool {
        matches!(self, Self::Validated | Self::PoolUpdated)
    }

    /// True when a succeeded build is held back for want of proof on a node (or, under the
    /// original's gate, of an updated machine).
    pub fn is_held_for_validation(self) -> bool {
        matches!(self, Self::NotValidated | Self::PoolNotUpdated)
    }

    /// `"layered"` when the image is served, `"base"` otherwise (metric `decision` label).
    pub fn decision(self) -> &'static str {
        if self.is_served() {
            "layered"
        } else {
            "base"
        }
    }
}

impl std::fmt::Display for DecisionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of [`decide`]: the image to serve, if any, and what led there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayeredDecision {
    /// The image to serve (node annotations and encapsulated `osImageURL`); `Some` exactly when
    /// the reason [`DecisionReason::is_served`].
    pub image: Option<String>,
    pub reason: DecisionReason,
    /// The MachineOSConfig of the pool, once one was found.
    pub machine_os_config: Option<String>,
    /// The MachineOSBuild the reason is about (the served one, the newest succeeded one, or the
    /// newest one of the rendered config), once one was found.
    pub machine_os_build: Option<String>,
    /// That build's image, also when it is not served (for explanation).
    pub build_image: Option<String>,
    /// The node whose state validated the image.
    pub validated_by: Option<String>,
}

impl LayeredDecision {
    /// The decision for a pool that is not layered (and for every pool in bootstrap mode).
    pub fn not_layered() -> Self {
        Self::base(DecisionReason::NotLayered)
    }

    fn base(reason: DecisionReason) -> Self {
        LayeredDecision {
            image: None,
            reason,
            machine_os_config: None,
            machine_os_build: None,
            build_image: None,
            validated_by: None,
        }
    }

    /// `"layered"` or `"base"`.
    pub fn decision(&self) -> &'static str {
        self.reason.decision()
    }
}

/// Decides which OS image a node booting into `pool` with `rendered_config` gets. Pure; see
/// the module docs for the rule.
pub fn decide(
    pool: &MachineConfigPool,
    rendered_config: &str,
    inputs: &LayeredInputs,
) -> LayeredDecision {
    let Some(pool_name) = pool.metadata.name.as_deref() else {
        return LayeredDecision::not_layered();
    };
    let Some(mosc) = machine_os_config_for_pool(pool_name, &inputs.machine_os_configs) else {
        return LayeredDecision::not_layered();
    };
    let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
    let with_mosc = |reason| LayeredDecision {
        machine_os_config: Some(mosc_name.clone()),
        ..LayeredDecision::base(reason)
    };

    let has_image = mosc
        .status
        .as_ref()
        .and_then(|s| s.current_image_pull_spec.as_deref())
        .is_some_and(|image| !image.is_empty());
    if !has_image {
        return with_mosc(DecisionReason::NoImageYet);
    }

    let builds = builds_newest_first(&mosc_name, rendered_config, &inputs.machine_os_builds);
    let Some(newest) = builds.first() else {
        return with_mosc(DecisionReason::NoBuildForConfig);
    };

    let succeeded: Vec<(&MachineOSBuild, &str)> = builds
        .iter()
        .filter_map(|build| match build_state(build) {
            BuildState::Succeeded(image) => Some((*build, image)),
            _ => None,
        })
        .collect();
    let Some(&(newest_succeeded, newest_image)) = succeeded.first() else {
        let reason = match build_state(newest) {
            BuildState::Succeeded(_) | BuildState::Pending => DecisionReason::BuildPending,
            BuildState::Building => DecisionReason::BuildBuilding,
            BuildState::Failed => DecisionReason::BuildFailed,
            BuildState::Interrupted => DecisionReason::BuildInterrupted,
        };
        return LayeredDecision {
            machine_os_build: newest.metadata.name.clone(),
            ..with_mosc(reason)
        };
    };

    if inputs.gate == LayeredGate::PoolUpdatedMachineCount {
        return decide_by_updated_machine_count(pool, mosc, newest_succeeded, newest_image, inputs)
            .unwrap_or_else(|reason| LayeredDecision {
                machine_os_build: newest_succeeded.metadata.name.clone(),
                build_image: Some(newest_image.to_string()),
                ..with_mosc(reason)
            });
    }

    let members = pool_members(pool, pool_name, inputs);
    let machine_config_nodes: BTreeMap<&str, &MachineConfigNode> = inputs
        .machine_config_nodes
        .iter()
        .filter_map(|mcn| Some((mcn.metadata.name.as_deref()?, mcn.as_ref())))
        .collect();
    let validated = succeeded.iter().find_map(|&(build, image)| {
        validating_node(image, &members, &machine_config_nodes).map(|node| (build, image, node))
    });
    let Some((build, image, node)) = validated else {
        return LayeredDecision {
            machine_os_build: newest_succeeded.metadata.name.clone(),
            build_image: Some(newest_image.to_string()),
            ..with_mosc(DecisionReason::NotValidated)
        };
    };

    let explained = |reason| LayeredDecision {
        machine_os_build: build.metadata.name.clone(),
        build_image: Some(image.to_string()),
        validated_by: Some(node.to_string()),
        ..with_mosc(reason)
    };
    if in_cluster_registry_host(image, &inputs.registry_hosts).is_some() {
        return explained(DecisionReason::InClusterRegistry);
    }
    LayeredDecision {
        image: Some(image.to_string()),
        ..explained(DecisionReason::Validated)
    }
}

/// Step 5 under the original's gate (`resolveDesiredImageForPool` at 7ff337a4f), for a server
/// whose identity may not read Nodes: the pool's `status.updatedMachineCount > 0` stands for "a
/// node has validated this build", and the image served is the MachineOSConfig's
/// `status.currentImagePullSpec`, as the original serves it. Step 6 (the in-cluster registry)
/// applies unchanged. `Err` holds the reason the base image is served.
fn decide_by_updated_machine_count(
    pool: &MachineConfigPool,
    mosc: &MachineOSConfig,
    build: &MachineOSBuild,
    build_image: &str,
    inputs: &LayeredInputs,
) -> Result<LayeredDecision, DecisionReason> {
    let updated = pool
        .status
        .as_ref()
        .is_some_and(|status| status.updated_machine_count > 0);
    if !updated {
        return Err(DecisionReason::PoolNotUpdated);
    }
    let image = mosc
        .status
        .as_ref()
        .and_then(|s| s.current_image_pull_spec.as_deref())
        .unwrap_or_default();
    let decision = |reason, served: Option<&str>| LayeredDecision {
        image: served.map(str::to_string),
        reason,
        machine_os_config: mosc.metadata.name.clone(),
        machine_os_build: build.metadata.name.clone(),
        build_image: Some(build_image.to_string()),
        validated_by: None,
    };
    if in_cluster_registry_host(image, &inputs.registry_hosts).is_some() {
        return Ok(decision(DecisionReason::InClusterRegistry, None));
    }
    Ok(decision(DecisionReason::PoolUpdated, Some(image)))
}

/// Since when a pool has been held on its base image for want of validation: for a
/// [`DecisionReason::NotValidated`] (or, under the original's gate,
/// [`DecisionReason::PoolNotUpdated`]) decision about `rendered_config`, the earliest time one of
/// that config's builds succeeded (its `Succeeded` condition's `lastTransitionTime`, else its
/// creation time), Unix seconds; `None` for any other decision. Read from the cluster's objects,
/// so every replica reports the same time and a restart does not reset it.
pub fn not_validated_since(
    decision: &LayeredDecision,
    rendered_config: &str,
    inputs: &LayeredInputs,
) -> Option<i64> {
    if !decision.reason.is_held_for_validation() {
        return None;
    }
    let mosc = decision.machine_os_config.as_deref()?;
    builds_newest_first(mosc, rendered_config, &inputs.machine_os_builds)
        .into_iter()
        .filter(|build| matches!(build_state(build), BuildState::Succeeded(_)))
        .filter_map(succeeded_at)
        .min()
}

fn succeeded_at(build: &MachineOSBuild) -> Option<i64> {
    let transition = build.status.as_ref().and_then(|status| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_SUCCEEDED && c.status == "True")
            .and_then(|c| {
                c.last_transition_time
                    .parse::<k8s_openapi::jiff::Timestamp>()
                    .ok()
            })
    });
    transition
        .or_else(|| build.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .map(|t| t.as_second())
}

/// The image for the `currentImage`/`desiredImage` node annotations: the MachineConfig's
/// non-empty `pre-built-image` annotation (install-time image mode) wins, in both modes; else
/// the served decision image; else none (no image annotations).
pub fn node_annotation_image(mc: &MachineConfig, served_image: Option<&str>) -> Option<String> {
    let pre_built = mc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::PRE_BUILT_IMAGE))
        .filter(|image| !image.is_empty());
    pre_built
        .map(String::as_str)
        .or(served_image)
        .map(str::to_string)
}

/// The `spec.osImageURL` of the encapsulated MachineConfig: the served image for a layered
/// decision, the MachineConfig's own otherwise.
pub fn encapsulated_os_image_url<'a>(
    mc: &'a MachineConfig,
    decision: &'a LayeredDecision,
) -> &'a str {
    decision.image.as_deref().unwrap_or(&mc.spec.os_image_url)
}

fn machine_os_config_for_pool<'a>(
    pool_name: &str,
    configs: &'a [Arc<MachineOSConfig>],
) -> Option<&'a MachineOSConfig> {
    configs
        .iter()
        .map(Arc::as_ref)
        .filter(|mosc| mosc.spec.machine_config_pool.name == pool_name)
        .min_by_key(|mosc| {
            let name = mosc.metadata.name.as_deref().unwrap_or_default();
            (name != pool_name, name)
        })
}

fn builds_newest_first<'a>(
    mosc_name: &str,
    rendered_config: &str,
    builds: &'a [Arc<MachineOSBuild>],
) -> Vec<&'a MachineOSBuild> {
    let mut matching: Vec<&MachineOSBuild> = builds
        .iter()
        .map(Arc::as_ref)
        .filter(|b| {
            b.spec.machine_os_config.name == mosc_name
                && b.spec.machine_config.name == rendered_config
        })
        .collect();
    matching.sort_by(|a, b| {
        let key = |m: &MachineOSBuild| {
            (
                m.metadata.creation_timestamp.clone(),
                m.metadata.name.clone(),
            )
        };
        key(b).cmp(&key(a))
    });
    matching
}

/// The state of one build, from its conditions.
enum BuildState<'a> {
    /// `Succeeded=True` with the digested image.
    Succeeded(&'a str),
    Failed,
    Interrupted,
    Building,
    /// Prepared, no conditions yet, or succeeded without a digest.
    Pending,
}

const CONDITION_SUCCEEDED: &str = "Succeeded";
const CONDITION_FAILED: &str = "Failed";
const CONDITION_INTERRUPTED: &str = "Interrupted";
const CONDITION_BUILDING: &str = "Building";

fn build_state(build: &MachineOSBuild) -> BuildState<'_> {
    let Some(status) = build.status.as_ref() else {
        return BuildState::Pending;
    };
    let is_true = |kind: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    let digest = status
        .digested_image_push_spec
        .as_deref()
        .filter(|image| !image.is_empty());
    match digest {
        Some(image) if is_true(CONDITION_SUCCEEDED) => BuildState::Succeeded(image),
        _ if is_true(CONDITION_FAILED) => BuildState::Failed,
        _ if is_true(CONDITION_INTERRUPTED) => BuildState::Interrupted,
        _ if is_true(CONDITION_BUILDING) => BuildState::Building,
        _ => BuildState::Pending,
    }
}

/// The Nodes whose primary pool is `pool`.
fn pool_members<'a>(
    pool: &MachineConfigPool,
    pool_name: &str,
    inputs: &'a LayeredInputs,
) -> Vec<&'a Node> {
    let mut selectors: Vec<PoolSelector> = inputs
        .pools
        .iter()
        .filter(|p| p.metadata.name.as_deref() != Some(pool_name))
        .map(|p| PoolSelector::of(p))
        .collect();
    // The pool being decided is judged by its own selector, even if the list is stale.
    selectors.push(PoolSelector::of(pool));
    let empty = BTreeMap::new();
    inputs
        .nodes
        .iter()
        .map(Arc::as_ref)
        .filter(|node| {
            let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
            primary_pool(labels, &selectors) == Some(pool_name)
        })
        .collect()
}

/// A hash of what a render reads of a Node: its name, labels (`pool_members`) and
/// annotations (`validating_node`). The cluster source starts a new snapshot generation (new
/// payloads) only when this, or another render input, changes.
pub fn node_render_digest(node: &Node) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    node.metadata.name.hash(&mut hasher);
    node.metadata.labels.hash(&mut hasher);
    node.metadata.annotations.hash(&mut hasher);
    hasher.finish()
}

/// A hash of what a render reads of a MachineConfigNode (`validating_node`): its name,
/// `status.configImage.currentImage` and whether `NodeDegraded` is true; `None` when it has
/// neither (a render then decides as if it did not exist). Everything else the daemon rewrites
/// during an update (other conditions, config versions, times) is not read.
pub fn machine_config_node_render_digest(mcn: &MachineConfigNode) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let status = mcn.status.as_ref()?;
    let image = status
        .config_image
        .as_ref()
        .and_then(|ci| ci.current_image.as_deref());
    let degraded = status
        .conditions
        .iter()
        .any(|c| c.type_ == CONDITION_NODE_DEGRADED && c.status == "True");
    if image.is_none() && !degraded {
        return None;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&mcn.metadata.name, image, degraded).hash(&mut hasher);
    Some(hasher.finish())
}

const STATE_DONE: &str = annotations::STATE_DONE;

/// The first member node that has validated `image` (module docs, "Validated").
fn validating_node<'a>(
    image: &str,
    members: &[&'a Node],
    machine_config_nodes: &BTreeMap<&str, &MachineConfigNode>,
) -> Option<&'a str> {
    members.iter().find_map(|node| {
        let name = node.metadata.name.as_deref()?;
        let node_annotations = node.metadata.annotations.as_ref();
        let annotation = |key: &str| {
            node_annotations
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        let mcn_status = machine_config_nodes
            .get(name)
            .and_then(|mcn| mcn.status.as_ref());

        let mcn_image = mcn_status
            .and_then(|s| s.config_image.as_ref())
            .and_then(|ci| ci.current_image.as_deref());
        let runs_image =
            annotation(annotations::CURRENT_IMAGE) == Some(image) || mcn_image == Some(image);
        let done = annotation(annotations::STATE) == Some(STATE_DONE);
        let mcn_degraded = mcn_status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == CONDITION_NODE_DEGRADED && c.status == "True")
        });
        (runs_image && done && !mcn_degraded).then_some(name)
    })
}

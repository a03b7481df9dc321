//! The publisher's decisions: from the cluster state in a [`Snapshot`] and the served-request
//! record, which MachineConfigNodes (MCNs) to create, which of ours to fill in, which to give
//! their initial status and which to delete. Pure: no I/O, no clock, no logging.
//!
//! The rules, per Node (newest `creationTimestamp` first, then by name, so plans are
//! deterministic and a Node that just joined comes before older ones):
//! - nodes in phase `Pending`/`Provisioning` and nodes being deleted are skipped;
//! - a node without a primary pool (no pool selects it, or several custom pools do; see
//!   [`primary_pool`]) gets no MCN and is reported in [`Plan::unpooled`];
//! - no MCN: [`Action::Create`] (spec, owner reference, annotations) with its initial status;
//! - an MCN this server created ([`is_ours`]): [`Action::Fill`] when its
//!   `spec.configVersion.desired` is still `not-yet-set` and is now known, when it has no
//!   bootstrap record and one now matches, when it has no first-boot failure (nor a cleared
//!   one) and one of its machine's reports now matches ([`match_failure`]), or when its failure
//!   is cleared by a later successful boot ([`desired::failure_cleared_by`]);
//!   [`Action::InitStatus`] while it has no status;
//! - an MCN someone else created: left alone, whatever it contains, whether its Node exists or
//!   not (the daemon or the operator may write it before our cache shows the Node);
//! - an MCN this server created for an earlier Node of the same name (its owner reference names
//!   another uid): never filled for the new Node; it is a deletion candidate like an orphan.
//!
//! And per MCN: [`Action::Delete`] only for a *candidate*, an MCN that is ours ([`is_ours`]),
//! whose owner reference names a Node uid, and whose Node with that uid is not in the cache
//! (absent, or replaced by a Node with a new uid). A candidate is evidence, not proof: the
//! controller deletes only after the candidate has stood for a grace period, the API server
//! confirms the Node (with that uid) is gone, and the object's managedFields show that our field
//! manager set the creation annotation. Kubernetes garbage collection removes MCNs whose owner
//! Node is gone anyway; this is for ours when it lags or does not run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::desired::{
    self, annotations, build_mcn, desired_config, has_bootstrap_record, has_failure_record,
    is_ours, InitialStatus, NodeInputs, PoolServing, NOT_YET_SET,
};
use super::matching::{match_failure, match_node, nodes_by_address, BootstrapMatch, ServedLookup};
use crate::api::machineconfignode::{MachineConfigNode, MachineConfigNodeSpec, SpecConfigVersion};
use crate::api::node::{is_provisioning, name as node_name};
use crate::api::pool_membership::{primary_pool, PoolSelector};
use crate::render::layered::{self};
use crate::server::served::ServedRecord;
use crate::snapshot::Snapshot;

/// The cluster state a plan is made from.
#[derive(Clone, Debug)]
pub struct World<'a> {
    pub nodes: &'a [Arc<Node>],
    pub machine_config_nodes: &'a [Arc<MachineConfigNode>],
    /// Every pool's name and node selector.
    pub pools: Vec<PoolSelector>,
    /// What this server serves for each pool now.
    pub serving: BTreeMap<String, PoolServing>,
}

impl<'a> World<'a> {
    /// The state in a cluster-mode snapshot.
    pub fn from_snapshot(snapshot: &'a Snapshot) -> Self {
        World {
            nodes: &snapshot.layered.nodes,
            machine_config_nodes: &snapshot.layered.machine_config_nodes,
            pools: snapshot
                .pools
                .values()
                .filter_map(|pool| pool.as_ref().ok())
                .map(|pool| PoolSelector::of(pool))
                .collect(),
            serving: serving_by_pool(snapshot),
        }
    }
}

/// What a new node of each pool is served now: the pool's served rendered config and, for a
/// layered pool or a config with a pre-built image, the image put into its annotations. Uses the
/// same pure rules as the render pipeline.
pub fn serving_by_pool(snapshot: &Snapshot) -> BTreeMap<String, PoolServing> {
    snapshot
        .pools
        .iter()
        .filter_map(|(name, pool)| {
            let pool = pool.as_ref().ok()?;
            let rendered_config = pool.served_config_name().to_owned();
            if rendered_config.is_empty() {
                return Some((name.clone(), PoolServing::default()));
            }
            let decision = layered::decide(pool, &rendered_config, &snapshot.layered);
            let image = match snapshot.machine_configs.get(&rendered_config) {
                Some(Ok(mc)) => layered::node_annotation_image(mc, decision.image.as_deref()),
                _ => decision.image.clone(),
            };
            Some((
                name.clone(),
                PoolServing {
                    rendered_config,
                    image,
                },
            ))
        })
        .collect()
}

/// One write the publisher should make.
#[derive(Clone, Debug)]
pub enum Action {
    /// Apply a new MCN, then its initial status.
    Create {
        mcn: Box<MachineConfigNode>,
        status: InitialStatus,
    },
    /// Write our MCN's listed fields again, filled in (everything else as it is).
    Fill {
        mcn: Box<MachineConfigNode>,
        filled: Vec<&'static str>,
    },
    /// Apply the initial status of our MCN, which has none yet (it is at `generation`). The
    /// write is conditional on `resource_version`, the version the plan saw: a previous leader
    /// may have written the status just before this replica's cache caught up.
    InitStatus {
        name: String,
        status: InitialStatus,
        generation: i64,
        resource_version: Option<String>,
    },
    /// Delete our MCN whose Node (`node_uid`) is gone (precondition: the MCN's `uid`).
    Delete {
        name: String,
        uid: Option<String>,
        node_uid: String,
    },
}

impl Action {
    /// The MCN the action is about.
    pub fn name(&self) -> &str {
        match self {
            Action::Create { mcn, .. } | Action::Fill { mcn, .. } => {
                mcn.metadata.name.as_deref().unwrap_or_default()
            }
            Action::InitStatus { name, .. } | Action::Delete { name, .. } => name,
        }
    }

    /// Short label for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Fill { .. } => "fill",
            Action::InitStatus { .. } => "init_status",
            Action::Delete { .. } => "delete",
        }
    }
}

/// The outcome of [`plan`].
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Nodes that get no MCN because they have no primary pool.
    pub unpooled: Vec<String>,
    /// Nodes matched to the record of what their machine was served (the match their
    /// bootstrap record is written from), for the `FirstConfigServed` Event.
    pub matched: Vec<(Arc<Node>, ServedRecord)>,
}

/// Decides the writes for `world` (see the module docs). `served` looks up what every replica
/// answered an address (matched to Nodes by [`match_node`]); `config_image_declared` says
/// whether the MCN CRD declares `spec.configImage`.
pub fn plan(world: &World<'_>, served: impl ServedLookup, config_image_declared: bool) -> Plan {
    let mcns: BTreeMap<&str, &MachineConfigNode> = world
        .machine_config_nodes
        .iter()
        .filter_map(|mcn| Some((mcn.metadata.name.as_deref()?, mcn.as_ref())))
        .collect();
    let mut nodes: Vec<&Arc<Node>> = world.nodes.iter().collect();
    // Newest first: the controller spends a write budget in plan order, so a machine that just
    // joined gets its MCN before a backlog of older Nodes is worked through.
    let created = |node: &Node| node.metadata.creation_timestamp.as_ref().map(|t| t.0);
    nodes.sort_by(|a, b| {
        created(b)
            .cmp(&created(a))
            .then_with(|| node_name(a).cmp(node_name(b)))
    });

    let owners = nodes_by_address(nodes.iter().map(|node| node.as_ref()));
    let mut out = Plan::default();
    let empty = BTreeMap::new();
    for &arc in &nodes {
        let node: &Node = arc;
        let name = node_name(node);
        if name.is_empty() || is_provisioning(node) || node.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let Some(pool) = primary_pool(labels, &world.pools) else {
            if !mcns.contains_key(name) {
                out.unpooled.push(name.to_owned());
            }
            continue;
        };
        let matched = match_node(node, &served, &owners);
        if let BootstrapMatch::Matched(bootstrap) = &matched {
            out.matched
                .push((Arc::clone(arc), bootstrap.record.clone()));
        }
        let (bootstrap, source_unknown) = match &matched {
            BootstrapMatch::NoRecord => (None, None),
            BootstrapMatch::Matched(bootstrap) => (Some(bootstrap), None),
            BootstrapMatch::SourceUnknown { address, reason } => (None, Some((*address, *reason))),
        };
        let failure = match_failure(node, &served, &owners);
        let inputs = NodeInputs {
            node,
            pool,
            serving: world.serving.get(pool),
            bootstrap,
            source_unknown,
            failure: failure.as_ref(),
            config_image_declared,
        };
        match mcns.get(name) {
            None => {
                let mcn = build_mcn(&inputs);
                let status = InitialStatus::for_node(node, &mcn.spec.config_version.desired);
                out.actions.push(Action::Create {
                    mcn: Box::new(mcn),
                    status,
                });
            }
            // Ours, but written for an earlier Node of this name: a deletion candidate below.
            Some(existing) if is_ours(existing) && stale_owner(existing, node) => {}
            Some(existing) if is_ours(existing) => {
                let mut spec_desired = existing.spec.config_version.desired.clone();
                if let Some((mcn, filled)) = fill(existing, &inputs) {
                    spec_desired = mcn.spec.config_version.desired.clone();
                    out.actions.push(Action::Fill {
                        mcn: Box::new(mcn),
                        filled,
                    });
                }
                if !has_status(existing) {
                    out.actions.push(Action::InitStatus {
                        name: name.to_owned(),
                        status: InitialStatus::for_node(node, &spec_desired),
                        generation: existing.metadata.generation.unwrap_or(1),
                        resource_version: existing.metadata.resource_version.clone(),
                    });
                }
            }
            Some(_) => {}
        }
    }

    let node_uids: BTreeSet<(&str, &str)> = nodes
        .iter()
        .filter_map(|n| Some((node_name(n), n.metadata.uid.as_deref()?)))
        .collect();
    for (name, mcn) in &mcns {
        if !is_ours(mcn) || mcn.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(node_uid) = owner_node_uid(mcn) else {
            continue;
        };
        if !node_uids.contains(&(*name, node_uid)) {
            out.actions.push(Action::Delete {
                name: (*name).to_owned(),
                uid: mcn.metadata.uid.clone(),
                node_uid: node_uid.to_owned(),
            });
        }
    }
    out
}

/// The uid of the Node this MCN's owner reference names (a `v1` `Node` of the MCN's own name).
pub fn owner_node_uid(mcn: &MachineConfigNode) -> Option<&str> {
    let name = mcn.metadata.name.as_deref()?;
    mcn.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == "Node" && r.api_version == "v1" && r.name == name)
        .map(|r| r.uid.as_str())
        .filter(|uid| !uid.is_empty())
}

/// True when the MCN's owner reference names another Node than `node` (same name, new uid).
fn stale_owner(mcn: &MachineConfigNode, node: &Node) -> bool {
    match (owner_node_uid(mcn), node.metadata.uid.as_deref()) {
        (Some(owner), Some(uid)) => owner != uid,
        _ => false,
    }
}

fn has_status(mcn: &MachineConfigNode) -> bool {
    mcn.status
        .as_ref()
        .is_some_and(|s| !s.conditions.is_empty() || s.config_version.is_some())
}

/// Our MCN with its `not-yet-set` desired config, missing bootstrap record and first-boot failure
/// filled in, or its failure cleared; every other field this server owns is repeated as it is.
/// Returns the MCN and what was filled; `None` when there is nothing to fill.
fn fill(
    existing: &MachineConfigNode,
    inputs: &NodeInputs<'_>,
) -> Option<(MachineConfigNode, Vec<&'static str>)> {
    let mut filled = Vec::new();
    let mut spec_desired = existing.spec.config_version.desired.clone();
    if spec_desired.is_empty() || spec_desired == NOT_YET_SET {
        let known = desired_config(inputs);
        if known != NOT_YET_SET {
            spec_desired = known;
            filled.push("spec.configVersion.desired");
        }
    }
    let mut our_annotations: BTreeMap<String, String> = existing
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(annotations::PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !has_bootstrap_record(existing) {
        if let Some(bootstrap) = inputs.bootstrap {
            our_annotations.extend(desired::bootstrap_annotations(bootstrap));
            filled.push("bootstrap record");
        } else if let Some((address, reason)) = inputs.source_unknown {
            our_annotations.extend(desired::source_unknown_annotations(address, reason));
            filled.push("bootstrap record (source unknown)");
        }
    }
    if !has_failure_record(existing) {
        if let Some(failure) = inputs.failure {
            our_annotations.extend(desired::failure_annotations(failure, inputs.node));
            filled.push("firstboot failure");
        }
    } else if let Some(cleared_at) = desired::failure_cleared_by(existing, inputs.node) {
        // The failure stays as the record of how the machine came up; the marker says the
        // node is past it.
        our_annotations.insert(
            annotations::FIRSTBOOT_FAILURE_CLEARED_AT.to_owned(),
            cleared_at,
        );
        filled.push("firstboot failure cleared");
    }
    if filled.is_empty() {
        return None;
    }
    let name = node_name(inputs.node).to_owned();
    let owner_references: Vec<_> = existing
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.kind == "Node" && r.api_version == "v1" && r.name == name)
        .cloned()
        .collect();
    let mut mcn = MachineConfigNode::new(
        &name,
        MachineConfigNodeSpec {
            node: existing.spec.node.clone(),
            pool: existing.spec.pool.clone(),
            config_version: SpecConfigVersion {
                desired: spec_desired,
            },
            config_image: existing.spec.config_image.clone(),
        },
    );
    mcn.metadata = ObjectMeta {
        name: Some(name),
        annotations: Some(our_annotations),
        owner_references: (!owner_references.is_empty()).then_some(owner_references),
        ..ObjectMeta::default()
    };
    Some((mcn, filled))
}

#[cfg(test)]
mod tests;

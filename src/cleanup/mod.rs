//! `machine-config-server cleanup`: the way back to the original. Lists everything this server
//! wrote to the cluster that the original does not write, and with `--remove` removes it; a dry
//! run by default. Named after what it does: it cleans up after this server. It does not
//! uninstall anything (the DaemonSet, its image and RBAC are the deployment's, or the MCO's),
//! and it is run once the server is gone.
//!
//! What this server writes, and what becomes of it here ([`inventory`] decides, from what the
//! API server records in `managedFields`):
//! - the ConfigMap of the served records the replicas share ([`crate::mcn::exchange`]) and the
//!   publisher's Lease ([`crate::mcn::lease`]): objects only this server creates, deleted on the
//!   uid and resourceVersion they were read at. Nothing is removed while a replica holds the
//!   Lease (this server still runs, and would write everything again).
//! - On MachineConfigNodes, whoever created them: the annotations under
//!   `mcs.machineconfiguration.openshift.io/` that our field manager (`machine-config-server-mcn`)
//!   owns and no other manager does, and the status fields of our status apply.
//! - The MachineConfigNodes this server created are never deleted, nor their spec and owner
//!   reference removed: the MCO's operator keeps a MachineConfigNode for every Node
//!   (`syncMachineConfigNodes`, comparing only `spec.node` and `spec.pool`), so the object is
//!   the one the original's cluster has too; the CRD requires the spec; and a deleted one
//!   leaves its Node without an MCN until the operator's next sync (the MCO's pool status skips
//!   such a Node, its daemon creates one without status). An MCN another writer created is not
//!   deleted either, ever.
//! - Events (`reportingController` [`crate::events::REPORTING_CONTROLLER`], in `default`): counted
//!   and left; the API server deletes each one event TTL after its last write.
//!
//! # How fields are removed without touching another manager's
//! - Status: a server-side apply of an empty status under our field manager. The API server
//!   itself then removes each field that manager applied and no other manager owns, and drops
//!   only our claim on the others, at the moment of the write: it can never remove another
//!   manager's field, whatever changed since we read the object.
//! - Annotations: our creates and fills are updates (a `POST`, merge patches), not applies, and
//!   an apply under the same manager name does not release an update's fields. So a JSON merge
//!   patch sets exactly the annotations only our manager owned to null, carrying the
//!   resourceVersion of the copy whose managedFields said so: if anything changed since (another
//!   manager took an annotation over, say) the API server refuses it with 409, the MCN is read
//!   again and judged again.
//!
//! Exit codes: 0 when nothing of this server is left (Events and what is kept on purpose
//! aside), 2 when something is (listed in a dry run, or still there after `--remove`: a failed
//! removal, a replica that still runs), 1 when the API could not be asked (one line), 64 for
//! usage errors.
//!
//! Owns these requests only; must not touch the request path, the watch caches or anything it
//! did not find to be this server's.

pub mod inventory;
pub mod report;

pub use inventory::{
    inventory, Action, EventSummary, Found, Holder, Inventory, Item, Kept, Outcome,
    EVENTS_NAMESPACE, NAMESPACE,
};
pub use report::{format_text, Report, Summary};

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::{Api, Client, Resource};
use serde_json::json;

use crate::api::machineconfignode::MachineConfigNode;
use crate::cli::{CleanupFlags, ReportFormat, RunError, UsageError};
use crate::mcn::FIELD_MANAGER;
use crate::telemetry::ErrorChain;

/// How often a removal is tried again after the object changed under it (409).
const ATTEMPTS: usize = 3;
/// Objects per list page.
const PAGE: u32 = 500;

/// Why `cleanup` could not ask the API (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// A read of what this server may have left failed: nothing can be said about it. One
    /// line: the API's answer, or the cause chain (kube's error displays repeat their causes).
    #[error("cannot read {what} from the API server: {}", api_text(.error))]
    Read { what: String, error: kube::Error },
}

impl CleanupError {
    /// A short label for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
        }
    }
}

/// `machine-config-server cleanup`: read, judge, (remove, read again), print; the exit code
/// says whether something of this server is left.
pub async fn run(flags: &CleanupFlags) -> Result<(), RunError> {
    if let Some(kubeconfig) = &flags.kubeconfig {
        crate::cli::require_file("--kubeconfig", kubeconfig)?;
    }
    let timeout = Duration::from_secs(flags.request_timeout_seconds.max(1));
    let client = crate::source::cluster::plain_client(flags.kubeconfig.as_deref(), timeout)
        .await
        .map_err(UsageError::from)?;
    let cluster = Cluster::new(client);
    let source = match &flags.kubeconfig {
        Some(path) => format!("kubeconfig {}", path.display()),
        None => "in-cluster configuration".to_owned(),
    };
    let found = cluster.read().await.map_err(read_failed)?;
    let Inventory {
        mut items,
        kept,
        events,
        holder,
        notes,
    } = inventory(&found, SystemTime::now());
    let mut left_after = None;
    let mut kept = kept;
    if flags.remove {
        match &holder {
            Some(holder) => {
                let why = format!(
                    "{} holds this server's Lease until {}: stop every replica, then run again",
                    holder.identity, holder.until
                );
                for item in &mut items {
                    item.outcome = Outcome::NotRemoved(why.clone());
                }
            }
            None => {
                // MachineConfigNodes first, the Lease last: a replica that came back meanwhile
                // shows up holding it when the objects are read again.
                let order = |item: &Item| match item.kind {
                    "MachineConfigNode" => 0,
                    "ConfigMap" => 1,
                    _ => 2,
                };
                let mut indices: Vec<usize> = (0..items.len()).collect();
                indices.sort_by_key(|&i| order(&items[i]));
                for i in indices {
                    items[i].outcome = cluster.remove(&items[i]).await;
                    tracing::debug!(kind = items[i].kind, name = %items[i].name, outcome = ?items[i].outcome, "cleanup");
                }
                // What is left, as the API server tells it now.
                let again = cluster.read().await.map_err(read_failed)?;
                let after = inventory(&again, SystemTime::now());
                kept = after.kept;
                left_after = Some(after.items);
            }
        }
    }
    let mut report = Report {
        mode: if flags.remove { "remove" } else { "dry-run" },
        source,
        holder,
        items,
        left_after,
        kept,
        events,
        notes,
        summary: Summary::default(),
    };
    report.summarize();
    let text = match flags.output {
        ReportFormat::Text => format_text(&report),
        ReportFormat::Json => {
            let mut json = serde_json::to_string_pretty(&report)
                .map_err(|e| anyhow::anyhow!("cannot serialize the report: {e}"))?;
            json.push('\n');
            json
        }
    };
    print(&text)?;
    if report.summary.left == 0 {
        Ok(())
    } else {
        let hint = if flags.remove {
            ""
        } else {
            " (a dry run: cleanup --remove removes them)"
        };
        Err(RunError::Left(format!("{}{hint}", report.left_line())))
    }
}

fn read_failed(error: CleanupError) -> RunError {
    RunError::Other(anyhow::Error::new(error))
}

/// The requests of `cleanup`.
struct Cluster {
    config_maps: Api<ConfigMap>,
    leases: Api<Lease>,
    /// Metadata reads (managedFields included) of MachineConfigNodes.
    mcns: Api<MachineConfigNode>,
    /// Writes to MachineConfigNodes, whose answers are not decoded into our types (an MCN
    /// another writer made may carry fields they do not know).
    mcn_writes: Api<DynamicObject>,
    events: Api<Event>,
}

impl Cluster {
    fn new(client: Client) -> Self {
        Cluster {
            config_maps: Api::namespaced(client.clone(), NAMESPACE),
            leases: Api::namespaced(client.clone(), NAMESPACE),
            mcns: Api::all(client.clone()),
            mcn_writes: Api::all_with(
                client.clone(),
                &ApiResource::erase::<MachineConfigNode>(&()),
            ),
            events: Api::namespaced(client, EVENTS_NAMESPACE),
        }
    }

    /// Everything this server may have written. A read that fails is an error (nothing can be
    /// said about what it would have shown), but the Events' (they are only counted).
    async fn read(&self) -> Result<Found, CleanupError> {
        let config_map = self
            .config_maps
            .get_opt(crate::mcn::exchange::DEFAULT_NAME)
            .await
            .map_err(|error| CleanupError::Read {
                what: format!(
                    "ConfigMap {NAMESPACE}/{}",
                    crate::mcn::exchange::DEFAULT_NAME
                ),
                error,
            })?;
        let lease = self
            .leases
            .get_opt(crate::mcn::lease::DEFAULT_NAME)
            .await
            .map_err(|error| CleanupError::Read {
                what: format!("Lease {NAMESPACE}/{}", crate::mcn::lease::DEFAULT_NAME),
                error,
            })?;
        let mcns = self.list_mcns().await?;
        let events = self.list_events().await.map_err(|e| api_text(&e));
        Ok(Found {
            config_map,
            lease,
            mcns,
            events,
        })
    }

    /// The metadata of every MachineConfigNode; `None` when the API does not serve them.
    async fn list_mcns(&self) -> Result<Option<Vec<ObjectMeta>>, CleanupError> {
        let mut all = Vec::new();
        let mut params = ListParams::default().limit(PAGE);
        loop {
            match self.mcns.list_metadata(&params).await {
                Ok(list) => {
                    all.extend(list.items.into_iter().map(|item| item.metadata));
                    match list.metadata.continue_.filter(|token| !token.is_empty()) {
                        Some(token) => params = params.continue_token(&token),
                        None => return Ok(Some(all)),
                    }
                }
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                Err(error) => {
                    return Err(CleanupError::Read {
                        what: "MachineConfigNodes".to_owned(),
                        error,
                    })
                }
            }
        }
    }

    /// The metadata of one MachineConfigNode, read by a list pinned to its name (the rights
    /// `cleanup` needs anyway: no `get`).
    async fn mcn_metadata(&self, name: &str) -> Result<Option<ObjectMeta>, kube::Error> {
        let params = ListParams::default().fields(&format!("metadata.name={name}"));
        let list = self.mcns.list_metadata(&params).await?;
        Ok(list.items.into_iter().next().map(|item| item.metadata))
    }

    async fn list_events(&self) -> Result<Vec<Event>, kube::Error> {
        let mut all = Vec::new();
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let list = self.events.list(&params).await?;
            all.extend(list.items);
            match list.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(all),
            }
        }
    }

    async fn remove(&self, item: &Item) -> Outcome {
        match (&item.action, item.kind) {
            (Action::ByHand(how), _) => Outcome::NotRemoved(how.clone()),
            (
                Action::Delete {
                    uid,
                    resource_version,
                },
                "ConfigMap",
            ) => {
                delete(
                    &self.config_maps,
                    &item.name,
                    uid.clone(),
                    resource_version.clone(),
                    |_| None,
                )
                .await
            }
            (
                Action::Delete {
                    uid,
                    resource_version,
                },
                _,
            ) => {
                delete(
                    &self.leases,
                    &item.name,
                    uid.clone(),
                    resource_version.clone(),
                    |lease| {
                        inventory::holder(lease, SystemTime::now()).map(|holder| {
                            format!(
                                "{} took the Lease meanwhile: this server runs again",
                                holder.identity
                            )
                        })
                    },
                )
                .await
            }
            (
                Action::RemoveAnnotations {
                    keys,
                    resource_version,
                },
                _,
            ) => {
                self.remove_annotations(&item.name, keys.clone(), resource_version.clone())
                    .await
            }
            (Action::ReleaseStatus, _) => self.release_status(&item.name).await,
        }
    }

    /// A merge patch setting `keys` to null on `resource_version`, the version at which only
    /// our field manager owned them. On 409 the MCN changed since: it is read again and what
    /// is still ours alone is removed on its new version.
    async fn remove_annotations(
        &self,
        name: &str,
        mut keys: Vec<String>,
        mut resource_version: Option<String>,
    ) -> Outcome {
        for _ in 0..ATTEMPTS {
            // Never unguarded: without the version it was judged at, nothing is written.
            let Some(version) = resource_version.clone() else {
                return Outcome::Failed("no resourceVersion to write on".to_owned());
            };
            let nulls: serde_json::Map<String, serde_json::Value> = keys
                .iter()
                .map(|key| (key.clone(), serde_json::Value::Null))
                .collect();
            let patch = json!({"metadata": {"resourceVersion": version, "annotations": nulls}});
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            match self
                .mcn_writes
                .patch(name, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Outcome::Removed,
                Err(kube::Error::Api(status)) if status.code == 404 => return Outcome::Removed,
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let meta = match self.mcn_metadata(name).await {
                        Ok(Some(meta)) => meta,
                        Ok(None) => return Outcome::Removed,
                        Err(e) => return Outcome::Failed(api_text(&e)),
                    };
                    let again =
                        inventory::mcn_parts(&meta).0.into_iter().find_map(|item| {
                            match item.action {
                                Action::RemoveAnnotations {
                                    keys,
                                    resource_version,
                                } => Some((keys, resource_version)),
                                _ => None,
                            }
                        });
                    match again {
                        // Nothing of ours alone is there any more.
                        None => return Outcome::Removed,
                        Some((k, v)) => (keys, resource_version) = (k, v),
                    }
                }
                Err(e) => return Outcome::Failed(api_text(&e)),
            }
        }
        Outcome::Failed(format!(
            "the MachineConfigNode changed under each of {ATTEMPTS} tries: run again"
        ))
    }

    /// An apply of nothing to `/status` under our field manager: the API server removes the
    /// status fields only we applied and drops our claim on those another manager owns too.
    async fn release_status(&self, name: &str) -> Outcome {
        let body = json!({
            "apiVersion": MachineConfigNode::api_version(&()),
            "kind": MachineConfigNode::kind(&()),
            "metadata": {"name": name},
        });
        match self
            .mcn_writes
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(applied) => {
                let claim_left = applied.metadata.managed_fields.iter().flatten().any(|e| {
                    e.manager.as_deref() == Some(FIELD_MANAGER)
                        && e.subresource.as_deref() == Some("status")
                        && e.operation.as_deref() == Some("Apply")
                });
                if claim_left {
                    Outcome::Failed("the API server kept this server's status apply".to_owned())
                } else {
                    Outcome::Removed
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Outcome::Removed,
            Err(e) => Outcome::Failed(api_text(&e)),
        }
    }
}

/// Deletes `name` on the uid and resourceVersion it was read at; on 409 (it changed since) it
/// is read again and, unless `refuse` gives a reason not to, deleted on its new version.
async fn delete<K>(
    api: &Api<K>,
    name: &str,
    mut uid: Option<String>,
    mut resource_version: Option<String>,
    refuse: impl Fn(&K) -> Option<String>,
) -> Outcome
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..ATTEMPTS {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: uid.clone(),
                resource_version: resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => return Outcome::Removed,
            Err(kube::Error::Api(status)) if status.code == 404 => return Outcome::Removed,
            Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(name).await {
                Ok(None) => return Outcome::Removed,
                Ok(Some(object)) => {
                    if let Some(reason) = refuse(&object) {
                        return Outcome::NotRemoved(reason);
                    }
                    uid = object.meta().uid.clone();
                    resource_version = object.meta().resource_version.clone();
                }
                Err(e) => return Outcome::Failed(api_text(&e)),
            },
            Err(e) => return Outcome::Failed(api_text(&e)),
        }
    }
    Outcome::Failed(format!(
        "it changed under each of {ATTEMPTS} tries: run again"
    ))
}

/// One line for an API error: the status code, reason and message of an API answer, else the
/// cause chain.
fn api_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("{} {}: {}", status.code, status.reason, status.message)
        }
        other => ErrorChain(other).to_string(),
    }
}

fn print(text: &str) -> Result<(), RunError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| RunError::Other(anyhow::anyhow!("cannot print the report: {e}")))
}

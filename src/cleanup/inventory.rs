//! What of this server is in the cluster, and how each part is removed, from what was read
//! ([`Found`]). Pure: no I/O, the time is passed in.
//!
//! Who wrote what is the API server's own record, `managedFields`: a field is this server's
//! when one of its field managers owns it and no other manager does. A field another manager
//! owns too is never listed for removal, under our annotation prefix or not.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use serde::Serialize;
use serde_json::Value;

use crate::mcn::desired::annotations::PREFIX;
use crate::mcn::exchange::{self, FIELD_MANAGER_PREFIX};
use crate::mcn::FIELD_MANAGER;

/// What was read from the cluster.
#[derive(Clone, Debug)]
pub struct Found {
    /// The shared served-records ConfigMap, if it exists.
    pub config_map: Option<ConfigMap>,
    /// The publisher's Lease, if it exists.
    pub lease: Option<Lease>,
    /// The metadata (managedFields included) of every MachineConfigNode; `None` when the
    /// MachineConfigNode API is not served.
    pub mcns: Option<Vec<ObjectMeta>>,
    /// The Events in `default`, or why they could not be listed.
    pub events: Result<Vec<Event>, String>,
}

/// One thing of this server's in the cluster, and how `--remove` removes it.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// What of it is this server's.
    pub what: String,
    /// The fields concerned: annotation keys, status field paths, data keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// How `--remove` removes it.
    pub removal: &'static str,
    /// What became of it.
    pub outcome: Outcome,
    #[serde(skip)]
    pub action: Action,
}

/// What became of an [`Item`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", content = "reason", rename_all = "kebab-case")]
pub enum Outcome {
    /// A dry run: nothing was changed.
    Listed,
    Removed,
    /// The removal was tried and failed.
    Failed(String),
    /// The removal was not tried.
    NotRemoved(String),
}

/// How an [`Item`] is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Delete the object, on the uid and resourceVersion it was read at.
    Delete {
        uid: Option<String>,
        resource_version: Option<String>,
    },
    /// A merge patch setting these annotations to null, on the resourceVersion at which only
    /// our field manager owned them.
    RemoveAnnotations {
        keys: Vec<String>,
        resource_version: Option<String>,
    },
    /// A server-side apply of an empty status under our field manager: the API server drops
    /// every status field only we own and our claim on the others.
    ReleaseStatus,
    /// Nothing this command may do safely; the reason says what to do by hand.
    ByHand(String),
}

/// Something of this server that stays, on purpose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub kind: &'static str,
    pub name: String,
    pub what: String,
    pub why: String,
}

/// The Events this server reported, which are left to expire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    pub namespace: &'static str,
    pub reporting_controller: &'static str,
    pub count: usize,
    /// How many of each reason.
    pub reasons: BTreeMap<String, usize>,
    /// When the newest was last written (RFC 3339): it expires the event TTL after that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// Why they could not be listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A replica holding the publisher's Lease: this server still runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub identity: String,
    /// When its hold ends unless renewed (RFC 3339).
    pub until: String,
}

/// Everything of this server in the cluster.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub items: Vec<Item>,
    pub kept: Vec<Kept>,
    pub events: EventSummary,
    pub holder: Option<Holder>,
    pub notes: Vec<String>,
}

/// The namespace of the ConfigMap and the Lease.
pub const NAMESPACE: &str = crate::mcn::lease::DEFAULT_NAMESPACE;
/// Where the Events are (every object they regard is cluster-scoped).
pub const EVENTS_NAMESPACE: &str = "default";

/// The inventory of what was read, at `now`.
pub fn inventory(found: &Found, now: SystemTime) -> Inventory {
    let mut inventory = Inventory {
        events: events(&found.events),
        ..Inventory::default()
    };
    if let Some(config_map) = &found.config_map {
        inventory.items.push(config_map_item(config_map));
    }
    if let Some(lease) = &found.lease {
        inventory.holder = holder(lease, now);
        inventory
            .items
            .push(lease_item(lease, inventory.holder.as_ref()));
    }
    match &found.mcns {
        Some(mcns) => {
            for mcn in mcns {
                let (items, kept) = mcn_parts(mcn);
                inventory.items.extend(items);
                inventory.kept.extend(kept);
            }
        }
        None => inventory.notes.push(
            "the MachineConfigNode API is not served: no MachineConfigNode to look at".to_owned(),
        ),
    }
    inventory
}

fn config_map_item(config_map: &ConfigMap) -> Item {
    let meta = &config_map.metadata;
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let mut keys = Vec::new();
    for (key, value) in config_map.data.iter().flatten() {
        let path = vec!["f:data".to_owned(), format!("f:{key}")];
        let writers: Vec<&str> = entries
            .iter()
            .filter(|e| members(e).contains(&path))
            .filter_map(|e| e.manager.as_deref())
            .collect();
        let content = match exchange::decode_all(value) {
            Ok(decoded) => format!(
                "{} records, {} failure reports",
                decoded.served.len(),
                decoded.failures.len()
            ),
            Err(_) => "not in the records format".to_owned(),
        };
        let by = if writers.is_empty() {
            String::new()
        } else {
            format!(", by {}", writers.join(", "))
        };
        keys.push(format!("{key} ({content}{by})"));
    }
    let others: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e.manager.as_deref())
        .filter(|m| !m.starts_with(FIELD_MANAGER_PREFIX))
        .collect();
    let mut what = format!(
        "the served records the replicas share ({})",
        counted(keys.len(), "replica key", "replica keys")
    );
    if !others.is_empty() {
        what.push_str(&format!(
            "; also written by {} (what they wrote goes with the object, which only this server creates)",
            others.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Item {
        kind: "ConfigMap",
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        what,
        fields: keys,
        removal: "delete (on its uid and resourceVersion)",
        outcome: Outcome::Listed,
        action: Action::Delete {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        },
    }
}

/// The replica holding `lease` at `now`, if its hold has not ended: its last renewal (or
/// acquisition) plus the lease duration is still ahead.
pub fn holder(lease: &Lease, now: SystemTime) -> Option<Holder> {
    let spec = lease.spec.as_ref()?;
    let identity = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?;
    let seconds = u64::try_from(spec.lease_duration_seconds.unwrap_or(0).max(0)).ok()?;
    let renewed_at = SystemTime::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(renewed.0.as_millisecond()).ok()?);
    let until = renewed_at + Duration::from_secs(seconds);
    (until > now).then(|| Holder {
        identity,
        until: crate::mcn::desired::rfc3339_seconds(until),
    })
}

fn lease_item(lease: &Lease, holder: Option<&Holder>) -> Item {
    let meta = &lease.metadata;
    let what = match holder {
        Some(holder) => format!(
            "the MachineConfigNode publisher's election, held by {} until {} unless renewed: this server still runs",
            holder.identity, holder.until
        ),
        None => match lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
        {
            Some(last) => format!("the MachineConfigNode publisher's election (expired hold of {last})"),
            None => "the MachineConfigNode publisher's election (released)".to_owned(),
        },
    };
    Item {
        kind: "Lease",
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        what,
        fields: Vec::new(),
        removal: "delete (on its uid and resourceVersion)",
        outcome: Outcome::Listed,
        action: Action::Delete {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        },
    }
}

/// What of one MachineConfigNode is this server's (to remove), and what of it stays.
///
/// - Annotations under [`PREFIX`] that our field manager owns and no other manager does:
///   removed. One another manager owns too (whoever wrote it, even under our prefix) stays; one
///   no manager owns (managedFields reset) cannot be told ours and is left to do by hand.
/// - Status fields of our status apply: released (only those no other manager owns go).
///   Status fields our manager owns by an update (no version of this server writes them so)
///   cannot be released by an apply: by hand.
/// - Spec and the owner reference, on an MCN this server created: kept (see
///   docs/operations.md, "Switching back": the MCO's operator writes the same object for every
///   Node, and the CRD requires the spec).
pub fn mcn_parts(meta: &ObjectMeta) -> (Vec<Item>, Vec<Kept>) {
    let name = meta.name.clone().unwrap_or_default();
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let ours = |e: &&ManagedFieldsEntry| e.manager.as_deref() == Some(FIELD_MANAGER);
    let on_status = |e: &&ManagedFieldsEntry| e.subresource.as_deref() == Some("status");
    let union = |selected: &mut dyn Iterator<Item = &ManagedFieldsEntry>| {
        selected.fold(BTreeSet::new(), |mut all, e| {
            all.extend(members(e));
            all
        })
    };
    let foreign = union(&mut entries.iter().filter(|e| !ours(e)));
    let ours_main = union(&mut entries.iter().filter(ours).filter(|e| !on_status(e)));
    let mut items = Vec::new();
    let mut kept = Vec::new();
    let item = |what: String, fields: Vec<String>, removal, action| Item {
        kind: "MachineConfigNode",
        namespace: None,
        name: name.clone(),
        what,
        fields,
        removal,
        outcome: Outcome::Listed,
        action,
    };

    let mut removable = Vec::new();
    let mut unowned = Vec::new();
    for key in meta.annotations.iter().flatten().map(|(k, _)| k) {
        if !key.starts_with(PREFIX) {
            continue;
        }
        let path = vec![
            "f:metadata".to_owned(),
            "f:annotations".to_owned(),
            format!("f:{key}"),
        ];
        let writers: BTreeSet<&str> = entries
            .iter()
            .filter(|e| !ours(e) && members(e).contains(&path))
            .filter_map(|e| e.manager.as_deref())
            .collect();
        if !writers.is_empty() {
            kept.push(Kept {
                kind: "MachineConfigNode",
                name: name.clone(),
                what: format!("annotation {key}"),
                why: format!(
                    "written by {} too: never removed",
                    writers.into_iter().collect::<Vec<_>>().join(", ")
                ),
            });
        } else if ours_main.contains(&path) {
            removable.push(key.clone());
        } else {
            unowned.push(key.clone());
        }
    }
    if !removable.is_empty() {
        items.push(item(
            format!(
                "{} only this server's field manager owns",
                counted(removable.len(), "annotation", "annotations")
            ),
            removable.clone(),
            "merge patch setting them to null, on the resourceVersion they were read at",
            Action::RemoveAnnotations {
                keys: removable,
                resource_version: meta.resource_version.clone(),
            },
        ));
    }
    if !unowned.is_empty() {
        items.push(item(
            format!(
                "{} under {PREFIX} that no field manager owns (its managedFields were reset): this server's or not, the API server cannot tell",
                counted(unowned.len(), "annotation", "annotations")
            ),
            unowned.clone(),
            "by hand",
            Action::ByHand(format!(
                "check and remove by hand: oc annotate machineconfignode {name} {}",
                unowned
                    .iter()
                    .map(|k| format!("{k}-"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
        ));
    }

    for entry in entries.iter().filter(ours).filter(on_status) {
        let claimed = members(entry);
        let only_ours: BTreeSet<Vec<String>> = claimed.difference(&foreign).cloned().collect();
        let shared = claimed.len() - only_ours.len();
        if entry.operation.as_deref() == Some("Apply") {
            let mut what = format!(
                "status fields of this server's apply: {} only it owns",
                only_ours.len()
            );
            if shared > 0 {
                let sharers: BTreeSet<&str> = entries
                    .iter()
                    .filter(|e| !ours(e) && !members(e).is_disjoint(&claimed))
                    .filter_map(|e| e.manager.as_deref())
                    .collect();
                what.push_str(&format!(
                    ", {shared} shared with {} (those stay, its claim on them goes)",
                    sharers.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            if !entries.iter().any(|e| !ours(&e) && on_status(&e)) {
                what.push_str(
                    "; no other manager wrote its status yet (its daemon has not reported): without it the MCN has no status until the daemon reports",
                );
            }
            items.push(item(
                what,
                readable(&only_ours),
                "server-side apply of an empty status under machine-config-server-mcn",
                Action::ReleaseStatus,
            ));
        } else if !only_ours.is_empty() {
            items.push(item(
                format!(
                    "status fields only this server's field manager owns, written by an update ({})",
                    entry.operation.as_deref().unwrap_or("unknown operation")
                ),
                readable(&only_ours),
                "by hand",
                Action::ByHand(
                    "an update's fields cannot be released by an apply; remove them by hand (oc edit machineconfignode --subresource status)".to_owned(),
                ),
            ));
        }
    }

    let spec_or_owner = ours_main.iter().any(|path| {
        path.first().map(String::as_str) != Some("f:metadata")
            || path.get(1).map(String::as_str) == Some("f:ownerReferences")
    });
    if spec_or_owner {
        kept.push(Kept {
            kind: "MachineConfigNode",
            name: name.clone(),
            what: "the object, its spec and its owner reference (this server created it)".to_owned(),
            why: "the MCO's operator keeps the same MachineConfigNode for every Node and the CRD requires the spec: never deleted".to_owned(),
        });
    }
    (items, kept)
}

fn events(listed: &Result<Vec<Event>, String>) -> EventSummary {
    let mut summary = EventSummary {
        namespace: EVENTS_NAMESPACE,
        reporting_controller: crate::events::REPORTING_CONTROLLER,
        ..EventSummary::default()
    };
    let events = match listed {
        Ok(events) => events,
        Err(error) => {
            summary.error = Some(error.clone());
            return summary;
        }
    };
    let mut newest: Option<i64> = None;
    for event in events
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(crate::events::REPORTING_CONTROLLER))
    {
        summary.count += 1;
        *summary
            .reasons
            .entry(event.reason.clone().unwrap_or_default())
            .or_default() += 1;
        let written = [
            event
                .series
                .as_ref()
                .map(|s| s.last_observed_time.0.as_second()),
            event.event_time.as_ref().map(|t| t.0.as_second()),
            event
                .deprecated_last_timestamp
                .as_ref()
                .map(|t| t.0.as_second()),
            event
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second()),
        ]
        .into_iter()
        .flatten()
        .max();
        newest = newest.max(written);
    }
    summary.newest = newest.and_then(|s| u64::try_from(s).ok()).map(|s| {
        crate::mcn::desired::rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
    });
    summary
}

/// `1 annotation`, `2 annotations`.
fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// The fields a managedFields entry owns, each as its path of `fieldsV1` keys (`f:status`,
/// `k:{"type":"Updated"}`, ...). A key whose value is empty is an owned field; a key with
/// children is owned itself only when it has the child `.`.
pub fn members(entry: &ManagedFieldsEntry) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    if let Some(fields) = &entry.fields_v1 {
        collect(&fields.0, &mut Vec::new(), &mut out);
    }
    out
}

fn collect(value: &Value, path: &mut Vec<String>, out: &mut BTreeSet<Vec<String>>) {
    let Some(map) = value.as_object() else {
        return;
    };
    for (key, child) in map {
        if key == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(key.clone());
        match child.as_object() {
            Some(children) if !children.is_empty() => collect(child, path, out),
            _ => {
                out.insert(path.clone());
            }
        }
        path.pop();
    }
}

/// Field paths as people read them (`status.conditions[type=Updated].message`), only the
/// outermost of each owned subtree (a whole condition rather than each of its fields).
pub fn readable(paths: &BTreeSet<Vec<String>>) -> Vec<String> {
    paths
        .iter()
        .filter(|path| !(1..path.len()).any(|len| paths.contains(&path[..len].to_vec())))
        .map(|path| path_text(path))
        .collect()
}

fn path_text(path: &[String]) -> String {
    let mut text = String::new();
    for segment in path {
        if let Some(field) = segment.strip_prefix("f:") {
            if !text.is_empty() {
                text.push('.');
            }
            text.push_str(field);
        } else if let Some(key) = segment.strip_prefix("k:") {
            let keys = serde_json::from_str::<serde_json::Map<String, Value>>(key)
                .map(|map| {
                    map.iter()
                        .map(|(k, v)| match v {
                            Value::String(s) => format!("{k}={s}"),
                            other => format!("{k}={other}"),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_else(|_| key.to_owned());
            text.push_str(&format!("[{keys}]"));
        } else if let Some(value) = segment.strip_prefix("v:") {
            text.push_str(&format!("[={value}]"));
        } else if let Some(index) = segment.strip_prefix("i:") {
            text.push_str(&format!("[{index}]"));
        } else {
            text.push_str(&format!("[{segment}]"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn entry(
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            operation: Some(operation.to_owned()),
            subresource: subresource.map(str::to_owned),
            fields_type: Some("FieldsV1".to_owned()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    const CREATED_BY: &str = "mcs.machineconfiguration.openshift.io/created-by";
    const SERVED_AT: &str = "mcs.machineconfiguration.openshift.io/bootstrap-served-at";
    const THEIRS: &str = "mcs.machineconfiguration.openshift.io/copied";

    /// An MCN this server created (annotations, spec, owner reference) and gave its initial
    /// status, on which the MCO's daemon then applied its own status and another manager wrote
    /// an annotation (under our prefix, even).
    fn shared_mcn() -> ObjectMeta {
        ObjectMeta {
            name: Some("worker-one".to_owned()),
            resource_version: Some("42".to_owned()),
            annotations: Some(
                [CREATED_BY, SERVED_AT, THEIRS, "example.com/other"]
                    .into_iter()
                    .map(|k| (k.to_owned(), "x".to_owned()))
                    .collect(),
            ),
            managed_fields: Some(vec![
                entry(
                    FIELD_MANAGER,
                    "Update",
                    None,
                    json!({
                        "f:metadata": {
                            "f:annotations": {".": {}, format!("f:{CREATED_BY}"): {}, format!("f:{SERVED_AT}"): {}},
                            "f:ownerReferences": {".": {}, "k:{\"uid\":\"u\"}": {}}
                        },
                        "f:spec": {"f:node": {"f:name": {}}, "f:pool": {"f:name": {}}}
                    }),
                ),
                entry(
                    FIELD_MANAGER,
                    "Apply",
                    Some("status"),
                    json!({"f:status": {
                        "f:conditions": {
                            "k:{\"type\":\"Updated\"}": {".": {}, "f:type": {}, "f:status": {}, "f:observedGeneration": {}},
                            "k:{\"type\":\"UpdatePrepared\"}": {".": {}, "f:type": {}, "f:status": {}}
                        },
                        "f:observedGeneration": {}
                    }}),
                ),
                entry(
                    "machine-config-operator",
                    "Apply",
                    Some("status"),
                    json!({"f:status": {
                        "f:conditions": {
                            "k:{\"type\":\"Updated\"}": {".": {}, "f:type": {}, "f:status": {}}
                        },
                        "f:observedGeneration": {}
                    }}),
                ),
                entry(
                    "kubectl-annotate",
                    "Update",
                    None,
                    json!({"f:metadata": {"f:annotations": {format!("f:{THEIRS}"): {}, "f:example.com/other": {}}}}),
                ),
            ]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_fields_no_other_manager_owns_are_listed() {
        let (items, kept) = mcn_parts(&shared_mcn());
        assert_eq!(items.len(), 2, "{items:#?}");
        assert_eq!(
            items[0].action,
            Action::RemoveAnnotations {
                keys: vec![SERVED_AT.to_owned(), CREATED_BY.to_owned()],
                resource_version: Some("42".to_owned()),
            }
        );
        assert_eq!(items[1].action, Action::ReleaseStatus);
        // The whole UpdatePrepared condition and Updated's observedGeneration are ours alone;
        // Updated's type and status and status.observedGeneration the daemon's too.
        assert_eq!(
            items[1].fields,
            [
                "status.conditions[type=UpdatePrepared]",
                "status.conditions[type=Updated].observedGeneration",
            ]
        );
        assert!(
            items[1]
                .what
                .contains("4 shared with machine-config-operator"),
            "{}",
            items[1].what
        );
        assert!(kept.iter().any(
            |k| k.what == format!("annotation {THEIRS}") && k.why.contains("kubectl-annotate")
        ));
        assert!(kept
            .iter()
            .any(|k| k.what.starts_with("the object, its spec")));
        // Nothing outside our prefix is ever looked at.
        assert!(!kept.iter().any(|k| k.what.contains("example.com")));
    }

    #[test]
    fn an_mcn_another_writer_created_has_nothing_of_ours() {
        let meta = ObjectMeta {
            name: Some("worker-foreign".to_owned()),
            annotations: Some([(THEIRS.to_owned(), "x".to_owned())].into()),
            managed_fields: Some(vec![entry(
                "machine-config-operator",
                "Update",
                None,
                json!({"f:metadata": {"f:annotations": {format!("f:{THEIRS}"): {}}}, "f:spec": {"f:node": {"f:name": {}}}}),
            )]),
            ..ObjectMeta::default()
        };
        let (items, kept) = mcn_parts(&meta);
        assert!(items.is_empty(), "{items:#?}");
        assert_eq!(
            kept.len(),
            1,
            "only the foreign annotation under our prefix: {kept:#?}"
        );
    }

    #[test]
    fn annotations_no_manager_owns_are_left_to_do_by_hand() {
        let meta = ObjectMeta {
            name: Some("reset".to_owned()),
            annotations: Some([(CREATED_BY.to_owned(), "machine-config-server".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let (items, _) = mcn_parts(&meta);
        assert_eq!(items.len(), 1);
        assert!(
            matches!(&items[0].action, Action::ByHand(how) if how.contains(&format!("{CREATED_BY}-")))
        );
    }

    #[test]
    fn a_status_claim_shared_entirely_is_still_released() {
        let mut meta = shared_mcn();
        let entries = meta.managed_fields.as_mut().unwrap();
        entries[1] = entry(
            FIELD_MANAGER,
            "Apply",
            Some("status"),
            json!({"f:status": {"f:observedGeneration": {}}}),
        );
        let (items, _) = mcn_parts(&meta);
        let status = items
            .iter()
            .find(|i| i.action == Action::ReleaseStatus)
            .expect("released");
        assert!(status.fields.is_empty());
        assert!(
            status.what.contains("0 only it owns, 1 shared"),
            "{}",
            status.what
        );
    }

    #[test]
    fn a_lease_is_held_until_its_renewal_plus_its_duration() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let at = |s: i64| MicroTime(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let lease = |holder: &str| Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                renew_time: Some(at(1_000)),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let now = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(
            holder(&lease("master-0_7"), now(1_010)).map(|h| h.identity),
            Some("master-0_7".to_owned())
        );
        assert_eq!(holder(&lease("master-0_7"), now(1_015)), None);
        assert_eq!(holder(&lease(""), now(1_000)), None, "released");
    }

    #[test]
    fn only_this_servers_events_are_counted() {
        let event = |controller: &str, reason: &str| Event {
            reporting_controller: Some(controller.to_owned()),
            reason: Some(reason.to_owned()),
            event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            )),
            ..Event::default()
        };
        let summary = events(&Ok(vec![
            event(crate::events::REPORTING_CONTROLLER, "FirstConfigServed"),
            event(crate::events::REPORTING_CONTROLLER, "FirstConfigServed"),
            event("kubelet", "Starting"),
        ]));
        assert_eq!(summary.count, 2);
        assert_eq!(summary.reasons["FirstConfigServed"], 2);
        assert_eq!(summary.newest.as_deref(), Some("2023-11-14T22:13:20Z"));
    }

    #[test]
    fn paths_read_as_fields_items_and_values() {
        let paths: BTreeSet<Vec<String>> = [
            vec![
                "f:status".to_owned(),
                "f:conditions".to_owned(),
                "k:{\"type\":\"A\"}".to_owned(),
            ],
            vec![
                "f:status".to_owned(),
                "f:conditions".to_owned(),
                "k:{\"type\":\"A\"}".to_owned(),
                "f:message".to_owned(),
            ],
            vec![
                "f:spec".to_owned(),
                "f:list".to_owned(),
                "v:\"x\"".to_owned(),
            ],
        ]
        .into();
        assert_eq!(
            readable(&paths),
            ["spec.list[=\"x\"]", "status.conditions[type=A]"]
        );
    }
}

//! Resource registry: which APIs the fake server serves, and its discovery documents.
//!
//! Owns the list of resources (group, version, plural, kind, scope, status subresource, CRD
//! schema), the CustomResourceDefinitions (derived from our API types, or the real ones of the
//! upstream tier), and the discovery
//! responses (`/api`, `/api/v1`, `/apis`, `/apis/<group>[/<version>]`). It holds no objects:
//! storage is `store.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use super::builtin::{self, Kind};

/// Index of a resource in the [`Registry`]; stable for the lifetime of a server.
pub type ResourceId = usize;

/// One served resource (one group/version/plural).
#[derive(Clone, Debug)]
pub struct ResourceDef {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Plural resource name used in URLs (`configmaps`).
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (then writes to the main resource ignore `.status`).
    pub status_subresource: bool,
    /// The CRD's `openAPIV3Schema`; `None` for built-in kinds.
    pub schema: Option<Arc<Value>>,
    /// The built-in kind's Go shape and strategy, when this server models the kind (a built-in
    /// without one is stored as sent).
    pub builtin: Option<&'static Kind>,
}

impl ResourceDef {
    /// A `v1` built-in resource: the modelled kind of [`super::builtin`] when there is one
    /// (same group, kind and plural), else stored as sent with the ObjectMeta rules only.
    pub fn builtin(group: &str, plural: &str, kind: &str, namespaced: bool, status: bool) -> Self {
        let modelled = builtin::lookup(group, kind).filter(|k| {
            k.plural == plural && k.namespaced == namespaced && k.status_subresource == status
        });
        ResourceDef {
            builtin: modelled,
            group: group.to_string(),
            version: "v1".to_string(),
            plural: plural.to_string(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_string(),
            namespaced,
            status_subresource: status,
            schema: None,
        }
    }

    /// `apiVersion` of objects of this resource: `v1` or `<group>/<version>`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `machineconfigpools.machineconfiguration.openshift.io`, as in messages.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The API group validation errors name the kind in: the group of the internal type, which
    /// for events.k8s.io Events is the core group (they are stored as core Events).
    pub fn error_group(&self) -> &str {
        match self.builtin {
            Some(kind) => kind.internal_group,
            None => &self.group,
        }
    }

    /// The field selector labels this resource accepts and the value of an unset field: a
    /// custom resource's `metadata.name` (and `metadata.namespace` when namespaced), a built-in
    /// kind's own list, else the generic pair.
    pub fn field_labels(&self) -> Vec<(&'static str, &'static str)> {
        match self.builtin {
            Some(kind) => kind.field_labels.to_vec(),
            None if self.is_custom() && !self.namespaced => vec![("metadata.name", "")],
            None => vec![("metadata.name", ""), ("metadata.namespace", "")],
        }
    }

    /// Whether the resource comes from a CustomResourceDefinition (generation tracking, schema).
    pub fn is_custom(&self) -> bool {
        self.schema.is_some()
    }

    /// The URL prefix of the resource's group version: `/api/v1` or `/apis/<group>/<version>`.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

/// The set of resources a server serves. Immutable once the server has started.
#[derive(Clone, Debug)]
pub struct Registry {
    resources: Vec<ResourceDef>,
}

impl Registry {
    /// The resources the machine-config-server and its tests touch: the built-in kinds of
    /// [`super::builtin`] (core nodes, namespaces, configmaps, secrets, services,
    /// serviceaccounts; coordination leases; core and events.k8s.io events, one storage; RBAC roles
    /// and bindings);
    /// every CRD of `crd_dir` (default: the CRDs derived from our own API types,
    /// [`derived_crds`]; Routes only when `with_routes`, to model a plain Kubernetes cluster
    /// without OpenShift's route API).
    pub fn standard(
        with_routes: bool,
        crd_dir: Option<&Path>,
        extra: &[ResourceDef],
    ) -> Result<Self, String> {
        let mut resources: Vec<ResourceDef> = builtin::kinds()
            .iter()
            .map(|k| {
                ResourceDef::builtin(
                    k.group,
                    k.plural,
                    k.kind,
                    k.namespaced,
                    k.status_subresource,
                )
            })
            .collect();
        let crds = match crd_dir {
            Some(dir) => {
                let mut crds = load_crd_dir(dir)?;
                // The Infrastructure the server reads is served beside any CRD directory: the
                // release payload's CRD with the upstream assets, else the derived one.
                let config = match crate::upstream::config_crds_if_present() {
                    Some(config) => load_crd_dir(&config)?,
                    None => derived_config_crds(),
                };
                for def in config {
                    if crds
                        .iter()
                        .all(|c| (&c.group, &c.plural) != (&def.group, &def.plural))
                    {
                        crds.push(def);
                    }
                }
                crds
            }
            None => derived_crds().to_vec(),
        };
        resources.extend(
            crds.into_iter()
                .filter(|def| with_routes || def.group != "route.openshift.io"),
        );
        for def in extra {
            let taken = resources.iter().any(|r| {
                r.group == def.group && r.version == def.version && r.plural == def.plural
            });
            if taken {
                return Err(format!(
                    "resource {} registered twice",
                    def.qualified_name()
                ));
            }
            resources.push(def.clone());
        }
        Ok(Registry { resources })
    }

    pub fn get(&self, id: ResourceId) -> &ResourceDef {
        &self.resources[id]
    }

    pub fn len(&self) -> usize {
        self.resources.len()
    }

    /// The resource served at `<group>/<version>/<plural>`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceId> {
        self.resources
            .iter()
            .position(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// Whether a built-in API (not a CRD) serves `group` (`""`: the core group).
    pub fn built_in_group(&self, group: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.group == group && !r.is_custom())
    }

    /// The resource of objects with this `apiVersion` and `kind`.
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<ResourceId> {
        self.resources
            .iter()
            .position(|r| r.api_version() == api_version && r.kind == kind)
    }

    /// Lookup for test helpers: a kind (`ConfigMap`), a plural (`configmaps`) or a qualified
    /// plural (`machineconfigpools.machineconfiguration.openshift.io`).
    pub fn resolve(&self, name: &str) -> Option<ResourceId> {
        self.resources
            .iter()
            .position(|r| r.kind == name)
            .or_else(|| self.resources.iter().position(|r| r.plural == name))
            .or_else(|| {
                self.resources
                    .iter()
                    .position(|r| r.qualified_name() == name)
            })
    }

    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.resources.iter().filter(|r| !r.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => {
                    versions.push(r.version.clone())
                }
                Some(_) => {}
                None => groups.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        groups
    }

    /// `GET /api`.
    pub fn core_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }],
        })
    }

    /// `GET /apis`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .into_iter()
            .map(|(group, versions)| group_json(&group, &versions))
            .collect();
        json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
    }

    /// `GET /apis/<group>`; `None` when no such group is served.
    pub fn group(&self, group: &str) -> Option<Value> {
        self.groups()
            .into_iter()
            .find(|(g, _)| g == group)
            .map(|(g, versions)| {
                let mut doc = group_json(&g, &versions);
                doc["kind"] = json!("APIGroup");
                doc["apiVersion"] = json!("v1");
                doc
            })
    }

    /// `GET /api/v1` (group "") or `GET /apis/<group>/<version>`; `None` when not served.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let served: Vec<&ResourceDef> = self
            .resources
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .collect();
        if served.is_empty() {
            return None;
        }
        let mut resources = Vec::new();
        for r in served {
            resources.push(json!({
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            }));
            if r.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", r.plural),
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }))
    }
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    json!({ "name": group, "versions": versions, "preferredVersion": versions[0] })
}

/// The CRDs derived from this project's own API types (`kube::CustomResourceExt::crd()` of
/// `src/api`): what the self-contained tier validates against. The upstream tier checks these
/// types against the real CRDs (`tests/api_model.rs`), so the two tiers together stay honest.
pub fn derived_crds() -> &'static [ResourceDef] {
    use kube::CustomResourceExt;
    use machine_config_server::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
    use machine_config_server::api::infrastructure::Infrastructure;
    use machine_config_server::api::machineconfignode::MachineConfigNode;
    use machine_config_server::api::{ControllerConfig, MachineConfig, MachineConfigPool};
    static CRDS: OnceLock<Vec<ResourceDef>> = OnceLock::new();
    CRDS.get_or_init(|| {
        [
            ControllerConfig::crd(),
            MachineConfigNode::crd(),
            MachineConfigPool::crd(),
            MachineConfig::crd(),
            MachineOSBuild::crd(),
            MachineOSConfig::crd(),
            Route::crd(),
            Infrastructure::crd(),
        ]
        .iter()
        .map(|crd| {
            let value = serde_json::to_value(crd).expect("a derived CRD serializes");
            let mut def = crd_resource(&value).unwrap_or_else(|e| panic!("derived CRD: {e}"));
            // schemars writes a `default:` for every `#[serde(default)]` field; the real CRDs
            // declare none of those, and the server would apply them on every write.
            def.schema = def
                .schema
                .map(|s| Arc::new(super::schema::without_defaults(&s)));
            def
        })
        .collect()
    })
}

/// The derived CRDs of the `config.openshift.io` kinds the server reads (the Infrastructure).
fn derived_config_crds() -> Vec<ResourceDef> {
    derived_crds()
        .iter()
        .filter(|def| def.group == "config.openshift.io")
        .cloned()
        .collect()
}

/// The real OpenShift CRDs (upstream tier, `MCS_UPSTREAM_ASSETS`; for `#[tier(upstream)]`
/// tests), `crds/` and `crds-config/` (the Infrastructure), parsed once per test binary.
pub fn real_crds() -> &'static [ResourceDef] {
    static CRDS: OnceLock<Vec<ResourceDef>> = OnceLock::new();
    CRDS.get_or_init(|| {
        let dir = crate::upstream::crds();
        let mut crds = load_crd_dir(&dir).unwrap_or_else(|e| panic!("the real CRDs: {e}"));
        if let Some(config) = crate::upstream::config_crds_if_present() {
            crds.extend(
                load_crd_dir(&config).unwrap_or_else(|e| panic!("the real config CRDs: {e}")),
            );
        }
        crds
    })
}

/// Every CRD (`*.yaml`, `*.yml`, `*.json`) in `dir`, sorted by file name.
pub fn load_crd_dir(dir: &Path) -> Result<Vec<ResourceDef>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    let mut defs = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            if value["kind"] == "CustomResourceDefinition" {
                defs.push(crd_resource(&value).map_err(|e| format!("{}: {e}", file.display()))?);
            }
        }
    }
    Ok(defs)
}

/// The storage version of a CRD as a served resource.
fn crd_resource(crd: &Value) -> Result<ResourceDef, String> {
    let spec = &crd["spec"];
    let text = |v: &Value, what: &str| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("CRD without {what}"))
    };
    let versions = spec["versions"]
        .as_array()
        .ok_or("CRD without spec.versions")?;
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or_else(|| versions.iter().find(|v| v["served"] == true))
        .ok_or("CRD without a served version")?;
    let kind = text(&spec["names"]["kind"], "spec.names.kind")?;
    Ok(ResourceDef {
        group: text(&spec["group"], "spec.group")?,
        version: text(&version["name"], "version name")?,
        plural: text(&spec["names"]["plural"], "spec.names.plural")?,
        singular: spec["names"]["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_ascii_lowercase()),
        kind,
        namespaced: spec["scope"] == "Namespaced",
        status_subresource: version["subresources"].get("status").is_some(),
        schema: Some(Arc::new(version["schema"]["openAPIV3Schema"].clone())),
        builtin: None,
    })
}

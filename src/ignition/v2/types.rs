//! Ignition spec 2.2 types (the ones the original serves and accepts), with Go's JSON
//! behaviour: `null` or a missing member is the zero value, and zero values of non-pointer
//! fields (`""`, `false`, `0`, empty lists and structs) are left out when writing.
//! Spec 2.0 and 2.1 input shapes live in [`super::older`].

use serde::{Deserialize, Deserializer, Serialize};

/// Go decodes `null` into a non-pointer field as "leave it at zero".
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    #[serde(default, deserialize_with = "null_default")]
    pub ignition: Ignition,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub networkd: Networkd,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub passwd: Passwd,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub storage: Storage,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub systemd: Systemd,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ignition {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub config: IgnitionConfig,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub security: Security,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub timeouts: Timeouts,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IgnitionConfig {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub append: Vec<ConfigReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<ConfigReference>,
}

/// A config or CA reference (`source` + optional hash).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigReference {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub source: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub verification: Verification,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Security {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub tls: Tls,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tls {
    #[serde(
        rename = "certificateAuthorities",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub certificate_authorities: Vec<ConfigReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    #[serde(
        rename = "httpResponseHeaders",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_response_headers: Option<i64>,
    #[serde(rename = "httpTotal", default, skip_serializing_if = "Option::is_none")]
    pub http_total: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Networkd {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub units: Vec<NetworkdUnit>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkdUnit {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub contents: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub dropins: Vec<Dropin>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Passwd {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub groups: Vec<PasswdGroup>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub users: Vec<PasswdUser>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PasswdGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
    #[serde(
        rename = "passwordHash",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub password_hash: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub system: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PasswdUser {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<UserCreate>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub gecos: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub groups: Vec<String>,
    #[serde(
        rename = "homeDir",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub home_dir: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
    #[serde(
        rename = "noCreateHome",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_create_home: bool,
    #[serde(
        rename = "noLogInit",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_log_init: bool,
    #[serde(
        rename = "noUserGroup",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_user_group: bool,
    #[serde(
        rename = "passwordHash",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub password_hash: Option<String>,
    #[serde(
        rename = "primaryGroup",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub primary_group: String,
    #[serde(
        rename = "sshAuthorizedKeys",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub shell: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub system: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i64>,
}

/// The deprecated `create` object of a 2.x user (accepted, then dropped going to spec 3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserCreate {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub gecos: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub groups: Vec<String>,
    #[serde(
        rename = "homeDir",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub home_dir: String,
    #[serde(
        rename = "noCreateHome",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_create_home: bool,
    #[serde(
        rename = "noLogInit",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_log_init: bool,
    #[serde(
        rename = "noUserGroup",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub no_user_group: bool,
    #[serde(
        rename = "primaryGroup",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub primary_group: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub shell: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub system: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub directories: Vec<Directory>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub disks: Vec<Disk>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub files: Vec<File>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub filesystems: Vec<Filesystem>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub links: Vec<Link>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub raid: Vec<Raid>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeUser {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub filesystem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<NodeGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeUser>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub filesystem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<NodeGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeUser>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub append: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub contents: FileContents,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileContents {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub compression: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub source: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub verification: Verification,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Link {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub filesystem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<NodeGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeUser>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub hard: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub target: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Disk {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub device: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub partitions: Vec<Partition>,
    #[serde(
        rename = "wipeTable",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub wipe_table: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub guid: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub label: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub number: i64,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub size: i64,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub start: i64,
    #[serde(
        rename = "typeGuid",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub type_guid: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filesystem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<Mount>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mount {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<Create>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub device: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(
        rename = "wipeFilesystem",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub wipe_filesystem: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Create {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub force: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Raid {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub devices: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub level: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub options: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub spares: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Systemd {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub units: Vec<Unit>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub contents: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub dropins: Vec<Dropin>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub enable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub mask: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropin {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub contents: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_default"
    )]
    pub name: String,
}

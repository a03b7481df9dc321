//! Spec 2.0 and 2.1 input: read with their own shapes and upgraded to 2.2 exactly as the
//! original's `TranslateFromV2_0` / `TranslateFromV2_1` do (2.0 files gain `user:{id:0}` and
//! `group:{id:0}`, 2.1 modes become explicit, keys the older spec lacks are ignored).

use serde::Deserialize;
use serde_json::Value;

use super::types::{self as v2, null_default};

/// Read a 2.1 config and upgrade it to 2.2.
pub(crate) fn from_v2_1(value: Value) -> Result<v2::Config, String> {
    // 2.1 is 2.2 without these members; reading with the 2.2 types and clearing them is
    // the same as ignoring the unknown keys.
    let mut config: v2::Config = serde_json::from_value(value).map_err(|e| e.to_string())?;
    upgrade_2_1_shape(&mut config);
    Ok(config)
}

/// What `TranslateFromV2_1` does to a config that only has 2.1 members.
fn upgrade_2_1_shape(config: &mut v2::Config) {
    config.ignition.version = "2.2.0".to_string();
    config.ignition.security = v2::Security::default();
    for unit in &mut config.networkd.units {
        unit.dropins.clear();
    }
    let s = &mut config.storage;
    for raid in &mut s.raid {
        raid.options.clear();
    }
    for f in &mut s.files {
        f.overwrite = None;
        f.append = false;
        f.mode = Some(f.mode.unwrap_or(0));
        f.user = Some(f.user.clone().unwrap_or_default());
        f.group = Some(f.group.clone().unwrap_or_default());
    }
    for d in &mut s.directories {
        d.overwrite = None;
        d.mode = Some(d.mode.unwrap_or(0));
        d.user = Some(d.user.clone().unwrap_or_default());
        d.group = Some(d.group.clone().unwrap_or_default());
    }
    for l in &mut s.links {
        l.overwrite = None;
        l.user = Some(l.user.clone().unwrap_or_default());
        l.group = Some(l.group.clone().unwrap_or_default());
    }
}

/// Read a 2.0 config and upgrade it to 2.2 (through 2.1).
pub(crate) fn from_v2_0(value: Value) -> Result<v2::Config, String> {
    let old: Config20 = serde_json::from_value(value).map_err(|e| e.to_string())?;
    for hash in old.hashes() {
        if !hash.contains('-') {
            return Err("malformed hash specifier".to_string());
        }
    }
    let mut config = v2::Config {
        ignition: v2::Ignition {
            config: v2::IgnitionConfig {
                append: old.ignition.config.append.iter().map(reference).collect(),
                replace: old.ignition.config.replace.as_ref().map(reference),
            },
            version: "2.2.0".to_string(),
            ..Default::default()
        },
        ..Default::default()
    };
    for d in old.storage.disks {
        config.storage.disks.push(v2::Disk {
            device: d.device,
            wipe_table: d.wipe_table,
            partitions: d
                .partitions
                .into_iter()
                .map(|p| v2::Partition {
                    label: p.label,
                    number: p.number,
                    size: p.size,
                    start: p.start,
                    type_guid: p.type_guid,
                    guid: String::new(),
                })
                .collect(),
        });
    }
    for r in old.storage.raid {
        config.storage.raid.push(v2::Raid {
            name: r.name,
            level: r.level,
            devices: r.devices,
            spares: r.spares,
            options: Vec::new(),
        });
    }
    for f in old.storage.filesystems {
        config.storage.filesystems.push(v2::Filesystem {
            name: f.name,
            path: f.path,
            mount: f.mount.map(|m| v2::Mount {
                device: m.device,
                format: m.format,
                create: m.create.map(|c| v2::Create {
                    force: c.force,
                    options: c.options,
                }),
                ..Default::default()
            }),
        });
    }
    for f in old.storage.files {
        config.storage.files.push(v2::File {
            filesystem: f.filesystem,
            path: f.path,
            user: Some(v2::NodeUser {
                id: Some(f.user.id),
                name: String::new(),
            }),
            group: Some(v2::NodeGroup {
                id: Some(f.group.id),
                name: String::new(),
            }),
            mode: Some(f.mode),
            contents: v2::FileContents {
                compression: f.contents.compression,
                source: f.contents.source,
                verification: v2::Verification {
                    hash: f.contents.verification.hash,
                },
            },
            overwrite: None,
            append: false,
        });
    }
    for u in old.systemd.units {
        config.systemd.units.push(v2::Unit {
            name: u.name,
            enable: u.enable,
            mask: u.mask,
            contents: u.contents,
            dropins: u
                .dropins
                .into_iter()
                .map(|d| v2::Dropin {
                    name: d.name,
                    contents: d.contents,
                })
                .collect(),
            enabled: None,
        });
    }
    for u in old.networkd.units {
        config.networkd.units.push(v2::NetworkdUnit {
            name: u.name,
            contents: u.contents,
            dropins: Vec::new(),
        });
    }
    for u in old.passwd.users {
        config.passwd.users.push(v2::PasswdUser {
            name: u.name,
            password_hash: Some(u.password_hash).filter(|h| !h.is_empty()),
            ssh_authorized_keys: u.ssh_authorized_keys,
            create: u.create.map(|c| v2::UserCreate {
                uid: c.uid,
                gecos: c.gecos,
                home_dir: c.home_dir,
                no_create_home: c.no_create_home,
                primary_group: c.primary_group,
                groups: c.groups,
                no_user_group: c.no_user_group,
                system: c.system,
                no_log_init: c.no_log_init,
                shell: c.shell,
            }),
            ..Default::default()
        });
    }
    for g in old.passwd.groups {
        config.passwd.groups.push(v2::PasswdGroup {
            name: g.name,
            gid: g.gid,
            password_hash: g.password_hash,
            system: g.system,
        });
    }
    // 2.0 → 2.1 → 2.2: the 2.1 step makes modes explicit and node owners present.
    upgrade_2_1_shape(&mut config);
    Ok(config)
}

fn reference(r: &Reference20) -> v2::ConfigReference {
    v2::ConfigReference {
        source: r.source.clone(),
        verification: v2::Verification {
            hash: r.verification.hash.clone(),
        },
    }
}

#[derive(Debug, Default, Deserialize)]
struct Config20 {
    #[serde(default, deserialize_with = "null_default")]
    ignition: Ignition20,
    #[serde(default, deserialize_with = "null_default")]
    storage: Storage20,
    #[serde(default, deserialize_with = "null_default")]
    systemd: Systemd20,
    #[serde(default, deserialize_with = "null_default")]
    networkd: Networkd20,
    #[serde(default, deserialize_with = "null_default")]
    passwd: Passwd20,
}

impl Config20 {
    fn hashes(&self) -> impl Iterator<Item = &String> {
        let refs = self
            .ignition
            .config
            .append
            .iter()
            .chain(self.ignition.config.replace.iter())
            .filter_map(|r| r.verification.hash.as_ref());
        let files = self
            .storage
            .files
            .iter()
            .filter_map(|f| f.contents.verification.hash.as_ref());
        refs.chain(files)
    }
}

#[derive(Debug, Default, Deserialize)]
struct Ignition20 {
    #[serde(default, deserialize_with = "null_default")]
    config: IgnitionConfig20,
}

#[derive(Debug, Default, Deserialize)]
struct IgnitionConfig20 {
    #[serde(default, deserialize_with = "null_default")]
    append: Vec<Reference20>,
    #[serde(default)]
    replace: Option<Reference20>,
}

#[derive(Debug, Default, Deserialize)]
struct Reference20 {
    #[serde(default, deserialize_with = "null_default")]
    source: String,
    #[serde(default, deserialize_with = "null_default")]
    verification: Verification20,
}

#[derive(Debug, Default, Deserialize)]
struct Verification20 {
    #[serde(default)]
    hash: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Storage20 {
    #[serde(default, deserialize_with = "null_default")]
    disks: Vec<Disk20>,
    #[serde(default, deserialize_with = "null_default")]
    raid: Vec<Raid20>,
    #[serde(default, deserialize_with = "null_default")]
    filesystems: Vec<Filesystem20>,
    #[serde(default, deserialize_with = "null_default")]
    files: Vec<File20>,
}

#[derive(Debug, Default, Deserialize)]
struct Disk20 {
    #[serde(default, deserialize_with = "null_default")]
    device: String,
    #[serde(rename = "wipeTable", default, deserialize_with = "null_default")]
    wipe_table: bool,
    #[serde(default, deserialize_with = "null_default")]
    partitions: Vec<Partition20>,
}

#[derive(Debug, Default, Deserialize)]
struct Partition20 {
    #[serde(default, deserialize_with = "null_default")]
    label: String,
    #[serde(default, deserialize_with = "null_default")]
    number: i64,
    #[serde(default, deserialize_with = "null_default")]
    size: i64,
    #[serde(default, deserialize_with = "null_default")]
    start: i64,
    #[serde(rename = "typeGuid", default, deserialize_with = "null_default")]
    type_guid: String,
}

#[derive(Debug, Default, Deserialize)]
struct Raid20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    level: String,
    #[serde(default, deserialize_with = "null_default")]
    devices: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    spares: i64,
}

#[derive(Debug, Default, Deserialize)]
struct Filesystem20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    mount: Option<Mount20>,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Mount20 {
    #[serde(default, deserialize_with = "null_default")]
    device: String,
    #[serde(default, deserialize_with = "null_default")]
    format: String,
    #[serde(default)]
    create: Option<Create20>,
}

#[derive(Debug, Default, Deserialize)]
struct Create20 {
    #[serde(default, deserialize_with = "null_default")]
    force: bool,
    #[serde(default, deserialize_with = "null_default")]
    options: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct File20 {
    #[serde(default, deserialize_with = "null_default")]
    filesystem: String,
    #[serde(default, deserialize_with = "null_default")]
    path: String,
    #[serde(default, deserialize_with = "null_default")]
    contents: Contents20,
    #[serde(default, deserialize_with = "null_default")]
    mode: i64,
    #[serde(default, deserialize_with = "null_default")]
    user: Id20,
    #[serde(default, deserialize_with = "null_default")]
    group: Id20,
}

#[derive(Debug, Default, Deserialize)]
struct Id20 {
    #[serde(default, deserialize_with = "null_default")]
    id: i64,
}

#[derive(Debug, Default, Deserialize)]
struct Contents20 {
    #[serde(default, deserialize_with = "null_default")]
    compression: String,
    #[serde(default, deserialize_with = "null_default")]
    source: String,
    #[serde(default, deserialize_with = "null_default")]
    verification: Verification20,
}

#[derive(Debug, Default, Deserialize)]
struct Systemd20 {
    #[serde(default, deserialize_with = "null_default")]
    units: Vec<Unit20>,
}

#[derive(Debug, Default, Deserialize)]
struct Unit20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    enable: bool,
    #[serde(default, deserialize_with = "null_default")]
    mask: bool,
    #[serde(default, deserialize_with = "null_default")]
    contents: String,
    #[serde(default, deserialize_with = "null_default")]
    dropins: Vec<Dropin20>,
}

#[derive(Debug, Default, Deserialize)]
struct Dropin20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    contents: String,
}

#[derive(Debug, Default, Deserialize)]
struct Networkd20 {
    #[serde(default, deserialize_with = "null_default")]
    units: Vec<NetworkdUnit20>,
}

#[derive(Debug, Default, Deserialize)]
struct NetworkdUnit20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    contents: String,
}

#[derive(Debug, Default, Deserialize)]
struct Passwd20 {
    #[serde(default, deserialize_with = "null_default")]
    users: Vec<User20>,
    #[serde(default, deserialize_with = "null_default")]
    groups: Vec<Group20>,
}

#[derive(Debug, Default, Deserialize)]
struct User20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(rename = "passwordHash", default, deserialize_with = "null_default")]
    password_hash: String,
    #[serde(
        rename = "sshAuthorizedKeys",
        default,
        deserialize_with = "null_default"
    )]
    ssh_authorized_keys: Vec<String>,
    #[serde(default)]
    create: Option<UserCreate20>,
}

#[derive(Debug, Default, Deserialize)]
struct UserCreate20 {
    #[serde(default)]
    uid: Option<i64>,
    #[serde(default, deserialize_with = "null_default")]
    gecos: String,
    #[serde(rename = "homeDir", default, deserialize_with = "null_default")]
    home_dir: String,
    #[serde(rename = "noCreateHome", default, deserialize_with = "null_default")]
    no_create_home: bool,
    #[serde(rename = "primaryGroup", default, deserialize_with = "null_default")]
    primary_group: String,
    #[serde(default, deserialize_with = "null_default")]
    groups: Vec<String>,
    #[serde(rename = "noUserGroup", default, deserialize_with = "null_default")]
    no_user_group: bool,
    #[serde(default, deserialize_with = "null_default")]
    system: bool,
    #[serde(rename = "noLogInit", default, deserialize_with = "null_default")]
    no_log_init: bool,
    #[serde(default, deserialize_with = "null_default")]
    shell: String,
}

#[derive(Debug, Default, Deserialize)]
struct Group20 {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    gid: Option<i64>,
    #[serde(rename = "passwordHash", default, deserialize_with = "null_default")]
    password_hash: String,
    #[serde(default, deserialize_with = "null_default")]
    system: bool,
}

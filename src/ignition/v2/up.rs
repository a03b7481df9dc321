//! Spec 2.2 → canonical 3.5, as the original's `ParseAndConvertConfig` does for spec 2:
//! the MachineConfig de-duplication, then 2.2→2.3 (every partition gains the deprecated
//! `size`/`start`, so any partition fails), the 2.3→3.0 checks and mapping with the
//! filesystem map `{"root": "/"}`, validation of the 3.0 result, and the lossless 3.x
//! up-hops.
//!
//! The de-duplication is the original's, order and all ([`dedupe`]): a config it lists in
//! reverse is served in reverse, in every spec.

use std::collections::HashMap;

use ignition_config::v3_5 as t;

use super::types as v2;
use crate::ignition::error::ParseError;
use crate::ignition::gostd::path_join;
use crate::ignition::validate::validate;
use crate::ignition::version::SpecVersion;
use crate::ignition::Config;

/// The entry one path keeps after de-duplication: a full definition (`base`), or an `append`
/// entry (the only one in `appends`).
#[derive(Debug, Clone)]
pub(crate) struct FileGroup {
    pub base: Option<v2::File>,
    pub appends: Vec<v2::File>,
}

impl FileGroup {
    /// The entry whose node attributes (filesystem, path, owner, mode) the 3.x file takes:
    /// the winning definition, else the last append. A group always has one of them.
    fn definition(&self) -> Option<&v2::File> {
        self.base.as_ref().or(self.appends.last())
    }
}

/// A 2.2 config after the MachineConfig de-duplication.
#[derive(Debug, Clone)]
pub(crate) struct Deduped {
    pub config: v2::Config,
    pub files: Vec<FileGroup>,
}

/// The MachineConfig de-duplication of files, units and users, as the original's
/// `removeIgnDuplicateFilesUnitsUsers`: files and units are walked last to first and the first
/// seen of each path or name is kept, so the output lists them in reverse and the last
/// definition wins; an earlier unit of the same name gives the winner its drop-ins (walking
/// back, unless the name is already there); `append` entries are entries like any other (the
/// MCO allows no appends: its daemon refuses a config with one).
pub(crate) fn dedupe(mut config: v2::Config) -> Result<Deduped, ParseError> {
    let mut seen_paths = std::collections::HashSet::new();
    let files: Vec<FileGroup> = std::mem::take(&mut config.storage.files)
        .into_iter()
        .rev()
        .filter(|file| seen_paths.insert(file.path.clone()))
        .map(|file| {
            if file.append {
                FileGroup {
                    base: None,
                    appends: vec![file],
                }
            } else {
                FileGroup {
                    base: Some(file),
                    appends: Vec::new(),
                }
            }
        })
        .collect();

    let mut units: Vec<v2::Unit> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for unit in std::mem::take(&mut config.systemd.units).into_iter().rev() {
        match by_name.get(&unit.name) {
            None => {
                by_name.insert(unit.name.clone(), units.len());
                units.push(unit);
            }
            Some(&index) => {
                let winner = &mut units[index];
                for dropin in unit.dropins {
                    if !winner.dropins.iter().any(|d| d.name == dropin.name) {
                        winner.dropins.push(dropin);
                    }
                }
            }
        }
    }
    config.systemd.units = units;

    if let Some(mut user) = config.passwd.users.last().cloned() {
        if user.name != "core" {
            return Err(ParseError::UnexpectedUser { name: user.name });
        }
        for earlier in config.passwd.users.iter().rev().skip(1) {
            if earlier.name != "core" {
                return Err(ParseError::UnexpectedUser {
                    name: earlier.name.clone(),
                });
            }
            user.ssh_authorized_keys
                .extend(earlier.ssh_authorized_keys.iter().cloned());
        }
        let mut seen = std::collections::HashSet::new();
        user.ssh_authorized_keys
            .retain(|key| seen.insert(key.clone()));
        config.passwd.users = vec![user];
    }
    Ok(Deduped { config, files })
}

fn convert_error(detail: impl Into<String>) -> ParseError {
    ParseError::ConvertV2 {
        detail: detail.into(),
    }
}

fn fs_dir(filesystem: &str) -> &'static str {
    if filesystem == "root" {
        "/"
    } else {
        ""
    }
}

/// Where a 2.x node lands in spec 3: `path.Join(fsmap[fs], path)`.
fn node_path(filesystem: &str, path: &str) -> String {
    path_join(&[fs_dir(filesystem), path])
}

/// The inode-uniqueness key the 2.3→3.0 checks use: `path.Join("/", fsmap[fs], path)`.
fn inode_path(filesystem: &str, path: &str) -> String {
    path_join(&["/", fs_dir(filesystem), path])
}

/// The 2.2→2.3→3.0 checks of the original.
fn check(d: &Deduped) -> Result<(), ParseError> {
    let c = &d.config;
    let partitions: usize = c
        .storage
        .disks
        .iter()
        .map(|disk| disk.partitions.len())
        .sum();
    if partitions > 0 {
        let report = [
            "deprecated: size is deprecated; use sizeMB instead",
            "deprecated: start is deprecated; use startMB instead",
        ]
        .repeat(partitions)
        .join("\n");
        return Err(convert_error(format!("Invalid input config:\n{report}")));
    }
    if !c.networkd.units.is_empty() {
        return Err(convert_error(
            "config includes deprecated networkd section - use Files instead",
        ));
    }
    for fs in &c.storage.filesystems {
        if fs.name != "root" {
            return Err(convert_error(format!(
                "Config defined filesystem {:?} but no mapping was defined.Please specify a path to be used as the filesystem mountpoint.",
                fs.name
            )));
        }
    }
    let links: Vec<String> = c
        .storage
        .links
        .iter()
        .map(|l| inode_path(&l.filesystem, &l.path))
        .collect();
    let uses_link = |path: &str| {
        links
            .iter()
            .find(|l| path.starts_with(l.as_str()) && path != l.as_str())
            .cloned()
    };
    let mut entries: HashMap<String, String> = HashMap::new();
    let mut claim = |path: String,
                     name: String,
                     check_link_first: bool|
     -> Result<(), ParseError> {
        if let Some(existing) = entries.get(&path) {
            return Err(convert_error(format!(
                "Config has conflicting inodes: {existing:?} and {name:?}.  All files, directories and links must specify a unique `path`."
            )));
        }
        if check_link_first {
            if let Some(link) = uses_link(&path) {
                return Err(convert_error(format!(
                    "{name} uses link defined in config {link:?}. Please use a link not defined in Storage:Links"
                )));
            }
            entries.insert(path, name);
        } else {
            entries.insert(path.clone(), name.clone());
            if let Some(link) = uses_link(&path) {
                return Err(convert_error(format!(
                    "{name} uses link defined in config {link:?}. Please use a link not defined in Storage:Links"
                )));
            }
        }
        Ok(())
    };
    for f in d.files.iter().filter_map(FileGroup::definition) {
        let path = inode_path(&f.filesystem, &f.path);
        claim(path.clone(), format!("File: {path}"), true)?;
    }
    for dir in &c.storage.directories {
        let path = inode_path(&dir.filesystem, &dir.path);
        claim(path.clone(), format!("Directory: {path}"), true)?;
    }
    for link in &c.storage.links {
        let path = inode_path(&link.filesystem, &link.path);
        claim(path.clone(), format!("Link: {path}"), false)?;
    }
    for unit in &c.systemd.units {
        let mut dropins = std::collections::HashSet::new();
        for dropin in &unit.dropins {
            if !dropins.insert(dropin.name.as_str()) {
                return Err(convert_error(format!(
                    "Config has duplicate dropin name {:?} in unit {:?}.  All dropins must specify a unique `name`.",
                    dropin.name, unit.name
                )));
            }
        }
    }
    Ok(())
}

fn str_p(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn bool_p(b: bool) -> Option<bool> {
    b.then_some(true)
}

fn resource(source: &str, hash: &Option<String>, compression: Option<String>) -> t::Resource {
    t::Resource {
        compression,
        http_headers: None,
        source: Some(source.to_string()),
        verification: hash.as_ref().map(|h| t::Verification {
            hash: Some(h.clone()),
        }),
    }
}

fn node_user(u: &Option<v2::NodeUser>) -> Option<t::NodeUser> {
    let u = u.clone().unwrap_or_default();
    let out = t::NodeUser {
        id: u.id,
        name: str_p(&u.name),
    };
    (out != t::NodeUser::default()).then_some(out)
}

fn node_group(g: &Option<v2::NodeGroup>) -> Option<t::NodeGroup> {
    let g = g.clone().unwrap_or_default();
    let out = t::NodeGroup {
        id: g.id,
        name: str_p(&g.name),
    };
    (out != t::NodeGroup::default()).then_some(out)
}

fn file_contents(f: &v2::File) -> t::Resource {
    resource(
        &f.contents.source,
        &f.contents.verification.hash,
        str_p(&f.contents.compression),
    )
}

/// The 2.3→3.0 mapping (into the 3.5 structs; 3.0→3.5 adds nothing).
fn translate(d: Deduped) -> Config {
    let c = d.config;
    let mut out = crate::ignition::empty_config();
    let merge: Vec<t::Resource> = c
        .ignition
        .config
        .append
        .iter()
        .map(|r| resource(&r.source, &r.verification.hash, None))
        .collect();
    let replace = c
        .ignition
        .config
        .replace
        .as_ref()
        .map(|r| resource(&r.source, &r.verification.hash, None));
    if !merge.is_empty() || replace.is_some() {
        out.ignition.config = Some(t::IgnitionConfig {
            merge: (!merge.is_empty()).then_some(merge),
            replace,
        });
    }
    let cas: Vec<t::Resource> = c
        .ignition
        .security
        .tls
        .certificate_authorities
        .iter()
        .map(|r| resource(&r.source, &r.verification.hash, None))
        .collect();
    if !cas.is_empty() {
        out.ignition.security = Some(t::Security {
            tls: Some(t::SecurityTls {
                certificate_authorities: Some(cas),
            }),
        });
    }
    let timeouts = &c.ignition.timeouts;
    if timeouts.http_response_headers.is_some() || timeouts.http_total.is_some() {
        out.ignition.timeouts = Some(t::Timeouts {
            http_response_headers: timeouts.http_response_headers,
            http_total: timeouts.http_total,
        });
    }

    let users: Vec<t::User> = c
        .passwd
        .users
        .iter()
        .map(|u| t::User {
            gecos: str_p(&u.gecos),
            groups: (!u.groups.is_empty()).then(|| u.groups.clone()),
            home_dir: str_p(&u.home_dir),
            name: u.name.clone(),
            no_create_home: bool_p(u.no_create_home),
            no_log_init: bool_p(u.no_log_init),
            no_user_group: bool_p(u.no_user_group),
            password_hash: u.password_hash.clone(),
            primary_group: str_p(&u.primary_group),
            shell: str_p(&u.shell),
            should_exist: None,
            ssh_authorized_keys: (!u.ssh_authorized_keys.is_empty())
                .then(|| u.ssh_authorized_keys.clone()),
            system: bool_p(u.system),
            uid: u.uid,
        })
        .collect();
    let groups: Vec<t::Group> = c
        .passwd
        .groups
        .iter()
        .map(|g| t::Group {
            gid: g.gid,
            name: g.name.clone(),
            password_hash: str_p(&g.password_hash),
            should_exist: None,
            system: bool_p(g.system),
        })
        .collect();
    if !users.is_empty() || !groups.is_empty() {
        out.passwd = Some(t::Passwd {
            groups: (!groups.is_empty()).then_some(groups),
            users: (!users.is_empty()).then_some(users),
        });
    }

    let units: Vec<t::Unit> = c
        .systemd
        .units
        .iter()
        .map(|u| {
            // `enabled` wins over the deprecated `enable`; an explicit false stays false.
            let enabled = match u.enabled {
                Some(false) => Some(false),
                Some(true) => Some(true),
                None => bool_p(u.enable),
            };
            t::Unit {
                contents: str_p(&u.contents),
                dropins: (!u.dropins.is_empty()).then(|| {
                    u.dropins
                        .iter()
                        .map(|d| t::Dropin {
                            contents: str_p(&d.contents),
                            name: d.name.clone(),
                        })
                        .collect()
                }),
                enabled,
                mask: bool_p(u.mask),
                name: u.name.clone(),
            }
        })
        .collect();
    if !units.is_empty() {
        out.systemd = Some(t::Systemd { units: Some(units) });
    }

    let mut storage = t::Storage::default();
    let disks: Vec<t::Disk> = c
        .storage
        .disks
        .iter()
        .map(|d| t::Disk {
            device: d.device.clone(),
            partitions: None, // any partition failed the 2.3 checks
            wipe_table: bool_p(d.wipe_table),
        })
        .collect();
    storage.disks = (!disks.is_empty()).then_some(disks);
    let raid: Vec<t::Raid> = c
        .storage
        .raid
        .iter()
        .map(|r| t::Raid {
            devices: (!r.devices.is_empty()).then(|| r.devices.clone()),
            level: Some(r.level.clone()),
            name: r.name.clone(),
            options: (!r.options.is_empty()).then(|| r.options.clone()),
            spares: (r.spares != 0).then_some(r.spares),
        })
        .collect();
    storage.raid = (!raid.is_empty()).then_some(raid);
    // Only the `root` filesystem passes the checks, and it is implied in spec 3.

    let files: Vec<t::File> = d
        .files
        .iter()
        .filter_map(|group| Some((group, group.definition()?)))
        .map(|(group, def)| {
            let (contents, overwrite) = match &group.base {
                // 2.x files overwrite by default.
                Some(base) => (Some(file_contents(base)), base.overwrite.or(Some(true))),
                // Appending never overwrites.
                None => (None, Some(false)),
            };
            let append: Vec<t::Resource> = group.appends.iter().map(file_contents).collect();
            t::File {
                append: (!append.is_empty()).then_some(append),
                contents,
                group: node_group(&def.group),
                mode: def.mode,
                overwrite,
                path: node_path(&def.filesystem, &def.path),
                user: node_user(&def.user),
            }
        })
        .collect();
    storage.files = (!files.is_empty()).then_some(files);
    let directories: Vec<t::Directory> = c
        .storage
        .directories
        .iter()
        .map(|dir| t::Directory {
            group: node_group(&dir.group),
            mode: dir.mode,
            overwrite: dir.overwrite,
            path: node_path(&dir.filesystem, &dir.path),
            user: node_user(&dir.user),
        })
        .collect();
    storage.directories = (!directories.is_empty()).then_some(directories);
    let links: Vec<t::Link> = c
        .storage
        .links
        .iter()
        .map(|l| t::Link {
            group: node_group(&l.group),
            hard: bool_p(l.hard),
            overwrite: l.overwrite,
            path: node_path(&l.filesystem, &l.path),
            target: Some(l.target.clone()),
            user: node_user(&l.user),
        })
        .collect();
    storage.links = (!links.is_empty()).then_some(links);
    if storage != t::Storage::default() {
        out.storage = Some(storage);
    }
    out
}

/// De-duplicate, check and translate a validated 2.2 config to canonical 3.5.
pub(crate) fn to_canonical(config: v2::Config) -> Result<Config, ParseError> {
    let deduped = dedupe(config)?;
    check(&deduped)?;
    let mut out = translate(deduped);
    out.ignition.version = SpecVersion::V3_0.as_str().to_string();
    validate(&out, SpecVersion::V3_0)
        .into_result()
        .map_err(|report| convert_error(report.to_string()))?;
    out.ignition.version = SpecVersion::V3_5.as_str().to_string();
    Ok(out)
}

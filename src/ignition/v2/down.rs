//! The 3.2→2.2 hop (the original's `v32tov22`): refuse what spec 2.2 cannot express, then map
//! field by field. Every 3.x struct is taken apart exhaustively, so a field is either carried
//! over, refused, or listed here as a documented default that goes (`shouldExist:true`,
//! `resize:false`, `wipePartitionEntry:false`).
//!
//! Deliberate deviations from the original (see the spec doc, section 12):
//! - a file without contents or appends is kept as an empty file (`data:,`), not dropped;
//! - a partition with `shouldExist:false` or `wipePartitionEntry:true` is refused, not
//!   turned into "partition exists";
//! - a node belongs to the filesystem whose path is its longest whole-component prefix
//!   (`/var` owns `/var/x` and `/var` itself, not `/variable`), and a filesystem at `/` is
//!   the `root` filesystem.

use ignition_config::v3_5 as t;
use serde_json::Value;

use super::types as v2;
use super::validate::validate;
use crate::ignition::error::{Stage, TranslateError};
use crate::ignition::json::join_index;
use crate::ignition::version::SpecVersion;
use crate::ignition::Config;

const TARGET: SpecVersion = SpecVersion::V2_2;

fn unsupported(field: impl Into<String>, reason: &str) -> TranslateError {
    TranslateError::Unsupported {
        target: TARGET,
        field: field.into(),
        reason: reason.to_string(),
    }
}

/// Translate a config that already went through the 3.x hops down to 3.2.
pub(crate) fn from_v3_2(cfg: &Config) -> Result<Value, TranslateError> {
    check(cfg)?;
    let out = translate(cfg);
    validate(&out, true)
        .into_result()
        .map_err(|report| TranslateError::Invalid {
            target: TARGET,
            spec: TARGET,
            stage: Stage::Output,
            report,
        })?;
    serde_json::to_value(&out).map_err(|e| TranslateError::Serialize {
        target: TARGET,
        detail: e.to_string(),
    })
}

/// The original's checks, in its order, plus ours for partition deletion.
fn check(cfg: &Config) -> Result<(), TranslateError> {
    let ign = &cfg.ignition;
    if let Some(config) = &ign.config {
        for (i, merge) in config.merge.iter().flatten().enumerate() {
            let path = join_index("ignition.config.merge", i);
            if merge.compression.is_some() {
                return Err(unsupported(
                    format!("{path}.compression"),
                    "Compression in Ignition.Config.Merge is not supported on 2.2",
                ));
            }
            if merge.http_headers.is_some() {
                return Err(unsupported(
                    format!("{path}.httpHeaders"),
                    "HTTPHeaders in Ignition.Config.Merge are not supported on 2.2",
                ));
            }
        }
        if let Some(replace) = &config.replace {
            if replace.compression.is_some() {
                return Err(unsupported(
                    "ignition.config.replace.compression",
                    "Compression in Ignition.Config.Replace is not supported on 2.2",
                ));
            }
            if replace.http_headers.is_some() {
                return Err(unsupported(
                    "ignition.config.replace.httpHeaders",
                    "HTTPHeaders in Ignition.Config.Replace are not supported on 2.2",
                ));
            }
        }
    }
    if let Some(tls) = ign.security.as_ref().and_then(|s| s.tls.as_ref()) {
        for (i, ca) in tls.certificate_authorities.iter().flatten().enumerate() {
            let path = join_index("ignition.security.tls.certificateAuthorities", i);
            if ca.compression.is_some() {
                return Err(unsupported(
                    format!("{path}.compression"),
                    "Compression in Ignition.Security.TLS.CertificateAuthorities is not supported on 2.2",
                ));
            }
            if ca.http_headers.is_some() {
                return Err(unsupported(
                    format!("{path}.httpHeaders"),
                    "HTTPHeaders in Ignition.Security.TLS.CertificateAuthorities are not supported on 2.2",
                ));
            }
        }
    }
    if let Some(proxy) = &ign.proxy {
        if proxy.http_proxy.is_some() || proxy.https_proxy.is_some() || proxy.no_proxy.is_some() {
            return Err(unsupported(
                "ignition.proxy",
                "HTTP proxies in Ignition.Proxy are not supported on 2.2",
            ));
        }
    }
    let storage = cfg.storage.clone().unwrap_or_default();
    if storage.luks.as_ref().is_some_and(|l| !l.is_empty()) {
        return Err(unsupported("storage.luks", "LUKS is not supported on 2.2"));
    }
    if let Some(passwd) = &cfg.passwd {
        for (i, user) in passwd.users.iter().flatten().enumerate() {
            if user.should_exist == Some(false) {
                return Err(unsupported(
                    format!("passwd.users[{i}].shouldExist"),
                    "ShouldExist in Passwd.Users is not supported on 2.2",
                ));
            }
        }
        for (i, group) in passwd.groups.iter().flatten().enumerate() {
            if group.should_exist == Some(false) {
                return Err(unsupported(
                    format!("passwd.groups[{i}].shouldExist"),
                    "ShouldExist in Passwd.Groups is not supported on 2.2",
                ));
            }
        }
    }
    for (i, disk) in storage.disks.iter().flatten().enumerate() {
        for (j, p) in disk.partitions.iter().flatten().enumerate() {
            let path = format!("storage.disks[{i}].partitions[{j}]");
            if p.size_mib.is_some() || p.start_mib.is_some() {
                let field = if p.size_mib.is_some() {
                    "sizeMiB"
                } else {
                    "startMiB"
                };
                return Err(unsupported(
                    format!("{path}.{field}"),
                    "SizeMiB and StartMiB in Storage.Disks.Partitions is not supported on 2.2",
                ));
            }
            if p.resize == Some(true) {
                return Err(unsupported(
                    format!("{path}.resize"),
                    "Resize in Storage.Disks.Partitions is not supported on 2.2",
                ));
            }
            // Deviation: the original drops these, turning "delete partition N" into
            // "partition N exists".
            if p.should_exist == Some(false) {
                return Err(unsupported(
                    format!("{path}.shouldExist"),
                    "ShouldExist in Storage.Disks.Partitions is not supported on 2.2 (it cannot express deleting a partition)",
                ));
            }
            if p.wipe_partition_entry == Some(true) {
                return Err(unsupported(
                    format!("{path}.wipePartitionEntry"),
                    "WipePartitionEntry in Storage.Disks.Partitions is not supported on 2.2",
                ));
            }
        }
    }
    for (i, fs) in storage.filesystems.iter().flatten().enumerate() {
        if fs.mount_options.is_some() {
            return Err(unsupported(
                format!("storage.filesystems[{i}].mountOptions"),
                "MountOptions in Storage.Filesystems is not supported on 2.2",
            ));
        }
    }
    for (i, file) in storage.files.iter().flatten().enumerate() {
        if file
            .contents
            .as_ref()
            .is_some_and(|c| c.http_headers.is_some())
        {
            return Err(unsupported(
                format!("storage.files[{i}].contents.httpHeaders"),
                "HTTPHeaders in Storage.Files.Contents are not supported on 2.2",
            ));
        }
        for (j, append) in file.append.iter().flatten().enumerate() {
            if append.http_headers.is_some() {
                return Err(unsupported(
                    format!("storage.files[{i}].append[{j}].httpHeaders"),
                    "HTTPHeaders in Storage.Files.Append.* are not supported on 2.2",
                ));
            }
        }
    }
    Ok(())
}

fn hash_of(res: &t::Resource) -> v2::Verification {
    v2::Verification {
        hash: res.verification.as_ref().and_then(|v| v.hash.clone()),
    }
}

fn reference(res: &t::Resource) -> v2::ConfigReference {
    v2::ConfigReference {
        source: res.source.clone().unwrap_or_default(),
        verification: hash_of(res),
    }
}

fn translate(cfg: &Config) -> v2::Config {
    let t::Config {
        ignition,
        kernel_arguments: _, // refused or emptied by the 3.3→3.2 hop
        passwd,
        storage,
        systemd,
    } = cfg;
    let t::Ignition {
        config,
        proxy: _, // refused above when set
        security,
        timeouts,
        version: _,
    } = ignition;
    let (append, replace) = match config {
        Some(t::IgnitionConfig { merge, replace }) => (
            merge.iter().flatten().map(reference).collect(),
            replace
                .as_ref()
                .filter(|r| r.source.is_some())
                .map(reference),
        ),
        None => (Vec::new(), None),
    };
    let cas = security
        .iter()
        .flat_map(|s| s.tls.iter())
        .flat_map(|tls| tls.certificate_authorities.iter().flatten())
        .map(reference)
        .collect();
    let timeouts = timeouts
        .as_ref()
        .map(|t| v2::Timeouts {
            http_response_headers: t.http_response_headers,
            http_total: t.http_total,
        })
        .unwrap_or_default();
    let passwd = passwd.clone().unwrap_or_default();
    let storage = storage.clone().unwrap_or_default();
    let systemd = systemd.clone().unwrap_or_default();
    v2::Config {
        ignition: v2::Ignition {
            config: v2::IgnitionConfig { append, replace },
            security: v2::Security {
                tls: v2::Tls {
                    certificate_authorities: cas,
                },
            },
            timeouts,
            version: TARGET.as_str().to_string(),
        },
        networkd: v2::Networkd::default(),
        passwd: v2::Passwd {
            groups: passwd.groups.into_iter().flatten().map(group).collect(),
            users: passwd.users.into_iter().flatten().map(user).collect(),
        },
        storage: translate_storage(storage),
        systemd: v2::Systemd {
            units: systemd.units.into_iter().flatten().map(unit).collect(),
        },
    }
}

fn user(u: t::User) -> v2::PasswdUser {
    let t::User {
        gecos,
        groups,
        home_dir,
        name,
        no_create_home,
        no_log_init,
        no_user_group,
        password_hash,
        primary_group,
        shell,
        should_exist: _, // only `true` (the default) can reach here
        ssh_authorized_keys,
        system,
        uid,
    } = u;
    v2::PasswdUser {
        create: None,
        gecos: gecos.unwrap_or_default(),
        groups: groups.unwrap_or_default(),
        home_dir: home_dir.unwrap_or_default(),
        name,
        no_create_home: no_create_home.unwrap_or_default(),
        no_log_init: no_log_init.unwrap_or_default(),
        no_user_group: no_user_group.unwrap_or_default(),
        password_hash,
        primary_group: primary_group.unwrap_or_default(),
        ssh_authorized_keys: ssh_authorized_keys.unwrap_or_default(),
        shell: shell.unwrap_or_default(),
        system: system.unwrap_or_default(),
        uid,
    }
}

fn group(g: t::Group) -> v2::PasswdGroup {
    let t::Group {
        gid,
        name,
        password_hash,
        should_exist: _, // only `true` (the default) can reach here
        system,
    } = g;
    v2::PasswdGroup {
        gid,
        name,
        password_hash: password_hash.unwrap_or_default(),
        system: system.unwrap_or_default(),
    }
}

fn unit(u: t::Unit) -> v2::Unit {
    let t::Unit {
        contents,
        dropins,
        enabled,
        mask,
        name,
    } = u;
    v2::Unit {
        contents: contents.unwrap_or_default(),
        dropins: dropins
            .into_iter()
            .flatten()
            .map(|t::Dropin { contents, name }| v2::Dropin {
                contents: contents.unwrap_or_default(),
                name,
            })
            .collect(),
        enable: false,
        enabled,
        mask: mask.unwrap_or_default(),
        name,
    }
}

/// Which 2.2 filesystem a node path belongs to, and the path inside it.
fn place_node(path: &str, filesystem_paths: &[String]) -> (String, String) {
    let owner = filesystem_paths
        .iter()
        .filter(|fs| {
            fs.as_str() == "/" || path == fs.as_str() || path.starts_with(&format!("{fs}/"))
        })
        .max_by_key(|fs| fs.len());
    match owner {
        None => ("root".to_string(), path.to_string()),
        Some(fs) if fs == "/" => ("root".to_string(), path.to_string()),
        Some(fs) => {
            let inside = &path[fs.len()..];
            let inside = if inside.is_empty() { "/" } else { inside };
            (fs.clone(), inside.to_string())
        }
    }
}

fn node_user(u: Option<t::NodeUser>) -> Option<v2::NodeUser> {
    u.filter(|u| *u != t::NodeUser::default())
        .map(|t::NodeUser { id, name }| v2::NodeUser {
            id,
            name: name.unwrap_or_default(),
        })
}

fn node_group(g: Option<t::NodeGroup>) -> Option<v2::NodeGroup> {
    g.filter(|g| *g != t::NodeGroup::default())
        .map(|t::NodeGroup { id, name }| v2::NodeGroup {
            id,
            name: name.unwrap_or_default(),
        })
}

fn contents_of(res: &t::Resource) -> v2::FileContents {
    v2::FileContents {
        compression: res.compression.clone().unwrap_or_default(),
        source: res.source.clone().unwrap_or_default(),
        verification: hash_of(res),
    }
}

fn translate_storage(s: t::Storage) -> v2::Storage {
    let t::Storage {
        directories,
        disks,
        files,
        filesystems,
        links,
        luks: _, // refused above when set
        raid,
    } = s;
    let filesystems = filesystems.unwrap_or_default();
    let filesystem_paths: Vec<String> = filesystems.iter().filter_map(|f| f.path.clone()).collect();

    let mut unnamed = 0;
    let filesystems = filesystems
        .into_iter()
        .map(|f| {
            let t::Filesystem {
                device,
                format,
                label,
                mount_options: _, // refused above when set
                options,
                path,
                uuid,
                wipe_filesystem,
            } = f;
            let name = match path {
                Some(p) if p == "/" => "root".to_string(),
                Some(p) => p,
                None => {
                    unnamed += 1;
                    unnamed.to_string()
                }
            };
            v2::Filesystem {
                mount: Some(v2::Mount {
                    create: None,
                    device,
                    format: format.unwrap_or_default(),
                    label,
                    options: options.unwrap_or_default(),
                    uuid,
                    wipe_filesystem: wipe_filesystem.unwrap_or_default(),
                }),
                name,
                path: None,
            }
        })
        .collect();

    let mut out_files = Vec::new();
    for f in files.into_iter().flatten() {
        let t::File {
            append,
            contents,
            group,
            mode,
            overwrite,
            path,
            user,
        } = f;
        let (filesystem, inside) = place_node(&path, &filesystem_paths);
        let base = v2::File {
            filesystem,
            group: node_group(group),
            // Spec 3 defaults overwrite to false, spec 2 to true: keep spec 3's meaning.
            overwrite: Some(overwrite.unwrap_or(false)),
            path: inside,
            user: node_user(user),
            append: false,
            contents: v2::FileContents::default(),
            mode,
        };
        let appends = append.unwrap_or_default();
        match contents.as_ref().filter(|c| c.source.is_some()) {
            Some(c) => out_files.push(v2::File {
                contents: contents_of(c),
                ..base.clone()
            }),
            None if appends.is_empty() => {
                // Deviation: an empty file in spec 3; the original drops it.
                out_files.push(v2::File {
                    contents: v2::FileContents {
                        source: "data:,".to_string(),
                        ..Default::default()
                    },
                    ..base.clone()
                })
            }
            None => {}
        }
        for a in &appends {
            out_files.push(v2::File {
                overwrite: Some(false),
                append: true,
                contents: contents_of(a),
                ..base.clone()
            });
        }
    }

    let directories = directories
        .into_iter()
        .flatten()
        .map(|d| {
            let t::Directory {
                group,
                mode,
                overwrite,
                path,
                user,
            } = d;
            let (filesystem, inside) = place_node(&path, &filesystem_paths);
            v2::Directory {
                filesystem,
                group: node_group(group),
                overwrite,
                path: inside,
                user: node_user(user),
                mode,
            }
        })
        .collect();

    let links = links
        .into_iter()
        .flatten()
        .map(|l| {
            let t::Link {
                group,
                hard,
                overwrite,
                path,
                target,
                user,
            } = l;
            let (filesystem, inside) = place_node(&path, &filesystem_paths);
            v2::Link {
                filesystem,
                group: node_group(group),
                overwrite,
                path: inside,
                user: node_user(user),
                hard: hard.unwrap_or_default(),
                target: target.unwrap_or_default(),
            }
        })
        .collect();

    let disks = disks
        .into_iter()
        .flatten()
        .map(|d| {
            let t::Disk {
                device,
                partitions,
                wipe_table,
            } = d;
            v2::Disk {
                device,
                partitions: partitions
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        let t::Partition {
                            guid,
                            label,
                            number,
                            resize: _,       // only `false` can reach here
                            should_exist: _, // only `true` can reach here
                            size_mib: _,     // refused above when set
                            start_mib: _,    // refused above when set
                            type_guid,
                            wipe_partition_entry: _, // only `false` can reach here
                        } = p;
                        v2::Partition {
                            guid: guid.unwrap_or_default(),
                            label: label.unwrap_or_default(),
                            number: number.unwrap_or_default(),
                            size: 0,
                            start: 0,
                            type_guid: type_guid.unwrap_or_default(),
                        }
                    })
                    .collect(),
                wipe_table: wipe_table.unwrap_or_default(),
            }
        })
        .collect();

    let raid = raid
        .into_iter()
        .flatten()
        .map(|r| {
            let t::Raid {
                devices,
                level,
                name,
                options,
                spares,
            } = r;
            v2::Raid {
                devices: devices.unwrap_or_default(),
                level: level.unwrap_or_default(),
                name,
                options: options.unwrap_or_default(),
                spares: spares.unwrap_or_default(),
            }
        })
        .collect();

    v2::Storage {
        directories,
        disks,
        files: out_files,
        filesystems,
        links,
        raid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_component_wise_filesystem_prefix_matching() {
        let fs = vec!["/var".to_string(), "/var/lib".to_string()];
        assert_eq!(place_node("/var/x", &fs), ("/var".into(), "/x".into()));
        assert_eq!(
            place_node("/var/lib/x", &fs),
            ("/var/lib".into(), "/x".into())
        );
        assert_eq!(
            place_node("/variable/x", &fs),
            ("root".into(), "/variable/x".into())
        );
        assert_eq!(place_node("/var", &fs), ("/var".into(), "/".into()));
        assert_eq!(place_node("/etc/z", &fs), ("root".into(), "/etc/z".into()));
        let root = vec!["/".to_string()];
        assert_eq!(
            place_node("/etc/z", &root),
            ("root".into(), "/etc/z".into())
        );
    }
}

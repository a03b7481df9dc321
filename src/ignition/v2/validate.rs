//! The spec 2.2 validator of the original (fatal findings only): used on 2.x input and on
//! what the 3.2→2.2 hop produces. Spec 2 URLs allow `http`, `https`, `oem`, `tftp`, `s3` and
//! `data`; hashes only sha512; filesystem formats ext4, btrfs, xfs, swap, vfat.

use super::types::*;
use crate::ignition::dataurl;
use crate::ignition::error::Report;
use crate::ignition::gostd::{path_ext, url_parse};
use crate::ignition::json::{join_index, join_key};
use crate::ignition::unit::check_unit_contents;
use crate::ignition::validate::{
    check_dropin_name, check_fs_label, check_hash, check_raid_level, check_unit_name, is_guid,
};
use crate::ignition::version::GoSemver;

/// Validate a 2.2 config. With `inline_checked` (the output of the 3.2→2.2 hop, whose sources
/// the serve path already validated), `data:` URLs are not decoded again: their rules are the
/// same in spec 2 and 3.
pub(crate) fn validate(config: &Config, inline_checked: bool) -> Report {
    let mut r = Report::default();
    let check_url = |s: &str| {
        if inline_checked && s.starts_with("data:") {
            Ok(())
        } else {
            check_url_v2(s)
        }
    };
    ignition(&mut r, &config.ignition, &check_url);
    for (i, unit) in config.networkd.units.iter().enumerate() {
        let path = join_index("networkd.units", i);
        check(
            &mut r,
            join_key(&path, "contents"),
            check_unit_contents(&unit.contents),
        );
        if !matches!(path_ext(&unit.name), ".link" | ".netdev" | ".network") {
            r.add(join_key(&path, "name"), "invalid networkd unit extension");
        }
    }
    for (i, user) in config.passwd.users.iter().enumerate() {
        passwd_user(&mut r, &join_index("passwd.users", i), user);
    }
    storage(&mut r, &config.storage, &check_url);
    for (i, unit) in config.systemd.units.iter().enumerate() {
        let path = join_index("systemd.units", i);
        check(
            &mut r,
            join_key(&path, "contents"),
            check_unit_contents(&unit.contents),
        );
        check(&mut r, join_key(&path, "name"), check_unit_name(&unit.name));
        for (j, dropin) in unit.dropins.iter().enumerate() {
            let dropin_path = join_index(&join_key(&path, "dropins"), j);
            check(
                &mut r,
                join_key(&dropin_path, "contents"),
                check_unit_contents(&dropin.contents),
            );
            check(
                &mut r,
                join_key(&dropin_path, "name"),
                check_dropin_name(&dropin.name),
            );
        }
    }
    r
}

fn check(r: &mut Report, path: String, result: Result<(), impl Into<String>>) {
    if let Err(message) = result {
        r.add(path, message);
    }
}

/// Spec 2 URL rules: an empty source is an empty file.
pub(crate) fn check_url_v2(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    let url = url_parse(s).map_err(|()| "unable to parse url".to_string())?;
    match url.scheme.as_str() {
        "http" | "https" | "oem" | "tftp" => Ok(()),
        "s3" => match url.query_values("versionId") {
            Some(values) if values.first().is_none_or(|v| v.is_empty()) => {
                Err("invalid S3 object VersionId".to_string())
            }
            _ => Ok(()),
        },
        "data" => dataurl::check(s).map_err(|e| e.reason),
        _ => Err("invalid url scheme".to_string()),
    }
}

fn check_path_v2(p: &str) -> Result<(), &'static str> {
    if p.starts_with('/') {
        Ok(())
    } else {
        Err("path not absolute")
    }
}

fn verification(r: &mut Report, path: &str, v: &Verification) {
    if let Some(hash) = &v.hash {
        check(
            r,
            format!("{path}.verification.hash"),
            check_hash(hash, false),
        );
    }
}

type UrlCheck<'a> = &'a dyn Fn(&str) -> Result<(), String>;

fn reference(r: &mut Report, path: &str, c: &ConfigReference, check_url: UrlCheck<'_>) {
    check(r, join_key(path, "source"), check_url(&c.source));
    verification(r, path, &c.verification);
}

fn ignition(r: &mut Report, ign: &Ignition, check_url: UrlCheck<'_>) {
    match GoSemver::parse(&ign.version) {
        None => r.add(
            "ignition.version",
            "invalid config version (couldn't parse)",
        ),
        Some(v) if v.major < 2 => r.add("ignition.version", "incorrect config version (too old)"),
        Some(v) if v.compare(&GoSemver::new(2, 2, 0)).is_gt() => {
            r.add("ignition.version", "incorrect config version (too new)")
        }
        Some(_) => {}
    }
    for (i, append) in ign.config.append.iter().enumerate() {
        reference(
            r,
            &join_index("ignition.config.append", i),
            append,
            check_url,
        );
    }
    if let Some(replace) = &ign.config.replace {
        reference(r, "ignition.config.replace", replace, check_url);
    }
    for (i, ca) in ign.security.tls.certificate_authorities.iter().enumerate() {
        reference(
            r,
            &join_index("ignition.security.tls.certificateAuthorities", i),
            ca,
            check_url,
        );
    }
}

fn passwd_user(r: &mut Report, path: &str, u: &PasswdUser) {
    if u.create.is_none() {
        return;
    }
    let conflicts = [
        (!u.gecos.is_empty(), "gecos"),
        (!u.groups.is_empty(), "groups"),
        (!u.home_dir.is_empty(), "homeDir"),
        (u.no_create_home, "noCreateHome"),
        (u.no_log_init, "noLogInit"),
        (u.no_user_group, "noUserGroup"),
        (!u.primary_group.is_empty(), "primaryGroup"),
        (!u.shell.is_empty(), "shell"),
        (u.system, "system"),
        (u.uid.is_some(), "uid"),
    ];
    for (set, field) in conflicts {
        if set {
            r.add(
                path,
                format!("cannot use both the create object and the user-level {field} field"),
            );
        }
    }
}

fn mode(r: &mut Report, path: &str, m: Option<i64>) {
    if m.is_some_and(|m| !(0..=0o7777).contains(&m)) {
        r.add(join_key(path, "mode"), "illegal file mode");
    }
}

fn node(
    r: &mut Report,
    path: &str,
    filesystem: &str,
    node_path: &str,
    user: &Option<NodeUser>,
    group: &Option<NodeGroup>,
) {
    if filesystem.is_empty() {
        r.add(join_key(path, "filesystem"), "no filesystem specified");
    }
    check(r, join_key(path, "path"), check_path_v2(node_path));
    if user
        .as_ref()
        .is_some_and(|u| u.id.is_some() && !u.name.is_empty())
    {
        r.add(join_key(path, "user"), "cannot set both id and name");
    }
    if group
        .as_ref()
        .is_some_and(|g| g.id.is_some() && !g.name.is_empty())
    {
        r.add(join_key(path, "group"), "cannot set both id and name");
    }
}

fn storage(r: &mut Report, s: &Storage, check_url: UrlCheck<'_>) {
    for (i, d) in s.directories.iter().enumerate() {
        let path = join_index("storage.directories", i);
        node(r, &path, &d.filesystem, &d.path, &d.user, &d.group);
        mode(r, &path, d.mode);
    }
    for (i, disk) in s.disks.iter().enumerate() {
        let path = join_index("storage.disks", i);
        if disk.device.is_empty() {
            r.add(join_key(&path, "device"), "disk device is required");
        } else {
            check(r, join_key(&path, "device"), check_path_v2(&disk.device));
        }
        partitions(r, &join_key(&path, "partitions"), &disk.partitions);
    }
    for (i, f) in s.files.iter().enumerate() {
        let path = join_index("storage.files", i);
        if f.overwrite == Some(true) && f.append {
            r.add(&path, "cannot set both append and overwrite to true");
        }
        node(r, &path, &f.filesystem, &f.path, &f.user, &f.group);
        mode(r, &path, f.mode);
        let contents = join_key(&path, "contents");
        if !matches!(f.contents.compression.as_str(), "" | "gzip") {
            r.add(
                join_key(&contents, "compression"),
                "invalid compression method",
            );
        }
        check(
            r,
            join_key(&contents, "source"),
            check_url(&f.contents.source),
        );
        verification(r, &contents, &f.contents.verification);
    }
    for (i, fs) in s.filesystems.iter().enumerate() {
        let path = join_index("storage.filesystems", i);
        if fs.mount.is_none() && fs.path.is_none() {
            r.add(&path, "filesystem is missing mount or path");
        }
        if let Some(p) = &fs.path {
            check(r, join_key(&path, "path"), check_path_v2(p));
        }
        if let Some(mount) = &fs.mount {
            if fs.path.is_some() {
                r.add(&path, "filesystem has both mount and path defined");
            }
            if mount.create.is_some() {
                if mount.wipe_filesystem {
                    r.add(
                        &path,
                        "cannot use both create object and wipeFilesystem field",
                    );
                }
                if !mount.options.is_empty() {
                    r.add(
                        &path,
                        "cannot use both create object and mount-level options field",
                    );
                }
            }
            let mount_path = join_key(&path, "mount");
            if !matches!(
                mount.format.as_str(),
                "ext4" | "btrfs" | "xfs" | "swap" | "vfat"
            ) {
                r.add(join_key(&mount_path, "format"), "invalid filesystem format");
            }
            check(
                r,
                join_key(&mount_path, "device"),
                check_path_v2(&mount.device),
            );
            if let Some(label) = &mount.label {
                check(
                    r,
                    join_key(&mount_path, "label"),
                    check_fs_label(&mount.format, label),
                );
            }
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        let path = join_index("storage.links", i);
        node(r, &path, &l.filesystem, &l.path, &l.user, &l.group);
    }
    for (i, raid) in s.raid.iter().enumerate() {
        let path = join_index("storage.raid", i);
        let spares = Some(raid.spares);
        check(
            r,
            join_key(&path, "level"),
            check_raid_level(&raid.level, spares),
        );
        for (j, device) in raid.devices.iter().enumerate() {
            check(
                r,
                join_index(&join_key(&path, "devices"), j),
                check_path_v2(device),
            );
        }
    }
}

fn partitions(r: &mut Report, path: &str, parts: &[Partition]) {
    let mut numbers = std::collections::HashSet::new();
    if parts
        .iter()
        .any(|p| p.number != 0 && !numbers.insert(p.number))
    {
        r.add(path, "partition numbers collide");
    }
    let end = |p: &Partition| {
        if p.size == 0 {
            p.start
        } else {
            p.start.saturating_add(p.size).saturating_sub(1)
        }
    };
    let overlap = parts.iter().filter(|p| p.start != 0).any(|p| {
        parts.iter().filter(|o| *o != p && o.start != 0).any(|o| {
            (p.start >= o.start && p.start <= end(o))
                || (end(p) >= o.start && end(p) <= end(o))
                || (p.start < o.start && end(p) > end(o))
        })
    });
    if overlap {
        r.add(path, "partitions overlap");
    }
    if parts.iter().any(|p| p.start & (2048 - 1) != 0) {
        r.add(path, "partitions misaligned");
    }
    for (i, p) in parts.iter().enumerate() {
        let part_path = join_index(path, i);
        if p.label.len() > 36 {
            r.add(
                join_key(&part_path, "label"),
                "partition labels may not exceed 36 characters",
            );
        }
        let bad = "doesn't match the form \"01234567-89AB-CDEF-EDCB-A98765432101\"";
        if !is_guid(&p.type_guid) {
            r.add(join_key(&part_path, "typeGuid"), bad);
        }
        if !is_guid(&p.guid) {
            r.add(join_key(&part_path, "guid"), bad);
        }
    }
}

//! The `storage` section: node paths, owners and modes (files, directories, links), links a
//! path goes through, disks and their partitions, filesystems and their labels, and the
//! duplicate-entry checks of the whole section (LUKS and RAID keys included, in the original's
//! order). LUKS and RAID field checks are in [`super::luks_raid`].

use std::collections::{HashMap, HashSet};

use ignition_config::v3_5 as t;

use super::super::gostd::{path_clean, path_join};
use super::super::json::{join_index, join_key};
use super::super::version::SpecVersion;
use super::super::Config;
use super::{is_true, nil_or_empty, not_empty, Validator, DUPLICATE};

/// The node path rules: present, absolute, already clean.
pub(super) fn check_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("path not specified");
    }
    if !p.starts_with('/') {
        return Err("path not absolute");
    }
    if path_clean(p) != p {
        return Err("path is not fully simplified");
    }
    Ok(())
}

fn check_path_nil_ok(p: &Option<String>) -> Result<(), &'static str> {
    match p {
        Some(p) if !p.is_empty() => check_path(p),
        _ => Ok(()),
    }
}

/// `^(|[[:xdigit:]]{8}-[[:xdigit:]]{4}-[[:xdigit:]]{4}-[[:xdigit:]]{4}-[[:xdigit:]]{12})$`
pub(crate) fn is_guid(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub(crate) fn check_fs_label(format: &str, label: &str) -> Result<(), &'static str> {
    let (limit, message) = match format {
        "ext4" => (
            16,
            "filesystem labels cannot be longer than 16 characters when using ext4",
        ),
        "btrfs" => (
            256,
            "filesystem labels cannot be longer than 256 characters when using btrfs",
        ),
        "xfs" => (
            12,
            "filesystem labels cannot be longer than 12 characters when using xfs",
        ),
        "swap" => (
            15,
            "filesystem labels cannot be longer than 15 characters when using swap",
        ),
        "vfat" => (
            11,
            "filesystem labels cannot be longer than 11 characters when using vfat",
        ),
        _ => return Ok(()),
    };
    if label.len() > limit {
        Err(message)
    } else {
        Ok(())
    }
}

impl Validator {
    pub(super) fn node(
        &mut self,
        path: &str,
        node_path: &str,
        user: &Option<t::NodeUser>,
        group: &Option<t::NodeGroup>,
    ) {
        self.check(join_key(path, "path"), check_path(node_path));
        if let Some(user) = user {
            if user.id.is_some() && not_empty(&user.name) {
                self.add(join_key(path, "user"), "cannot set both id and name");
            }
        }
        if let Some(group) = group {
            if group.id.is_some() && not_empty(&group.name) {
                self.add(join_key(path, "group"), "cannot set both id and name");
            }
        }
    }

    pub(super) fn mode(&mut self, path: &str, mode: Option<i64>) {
        if mode.is_some_and(|m| !(0..=0o7777).contains(&m)) {
            self.add(join_key(path, "mode"), "illegal file mode");
        }
    }

    pub(super) fn storage(&mut self, s: &t::Storage) {
        let links = s.links.as_deref().unwrap_or_default();
        let dirs = s.directories.as_deref().unwrap_or_default();
        for (i, d) in dirs.iter().enumerate() {
            if links
                .iter()
                .any(|l| d.path.starts_with(&format!("{}/", l.path)))
            {
                self.add(
                    join_index("storage.directories", i),
                    "directory path includes link in config",
                );
            }
        }
        for (i, f) in s.files.iter().flatten().enumerate() {
            if links
                .iter()
                .any(|l| f.path.starts_with(&format!("{}/", l.path)))
            {
                self.add(
                    join_index("storage.files", i),
                    "file path includes link in config",
                );
            }
        }
        for (i, l1) in links.iter().enumerate() {
            let path = join_index("storage.links", i);
            for l2 in links {
                if l1.path.starts_with(&format!("{}/", l2.path)) {
                    self.add(&path, "link path includes link in config");
                }
            }
            let Some(target) = l1.target.as_deref().filter(|t| !t.is_empty()) else {
                if self.spec >= SpecVersion::V3_3 {
                    self.add(join_key(&path, "target"), "link target is required");
                }
                continue;
            };
            if !is_true(l1.hard) {
                continue;
            }
            let mut resolved = path_clean(target);
            if !resolved.starts_with('/') {
                resolved = path_join(&[&l1.path, target]);
            }
            if dirs.iter().any(|d| d.path == resolved) {
                self.add(&path, "hard link target is a directory");
            }
        }

        for (i, d) in dirs.iter().enumerate() {
            let path = join_index("storage.directories", i);
            self.node(&path, &d.path, &d.user, &d.group);
            self.mode(&path, d.mode);
        }
        for (i, disk) in s.disks.iter().flatten().enumerate() {
            self.disk(&join_index("storage.disks", i), disk);
        }
        for (i, f) in s.files.iter().flatten().enumerate() {
            let path = join_index("storage.files", i);
            self.node(&path, &f.path, &f.user, &f.group);
            self.mode(&path, f.mode);
            let source = f.contents.as_ref().and_then(|c| c.source.as_ref());
            if is_true(f.overwrite) && source.is_none() {
                self.add(
                    join_key(&path, "overwrite"),
                    "overwrite must be false if source is unspecified",
                );
            }
            for (j, append) in f.append.iter().flatten().enumerate() {
                self.resource(&join_index(&join_key(&path, "append"), j), append);
            }
            if let Some(contents) = &f.contents {
                self.resource(&join_key(&path, "contents"), contents);
            }
        }
        for (i, fs) in s.filesystems.iter().flatten().enumerate() {
            self.filesystem(&join_index("storage.filesystems", i), fs);
        }
        for (i, l) in links.iter().enumerate() {
            let path = join_index("storage.links", i);
            self.node(&path, &l.path, &l.user, &l.group);
        }
        for (i, luks) in s.luks.iter().flatten().enumerate() {
            self.luks(&join_index("storage.luks", i), luks);
        }
        for (i, raid) in s.raid.iter().flatten().enumerate() {
            self.raid(&join_index("storage.raid", i), raid);
        }
    }

    pub(super) fn disk(&mut self, path: &str, d: &t::Disk) {
        let device_path = join_key(path, "device");
        if d.device.is_empty() {
            self.add(device_path, "disk device is required");
            return;
        }
        self.check(device_path, check_path(&d.device));
        let parts = d.partitions.as_deref().unwrap_or_default();
        let parts_path = join_key(path, "partitions");
        let mut by_number: HashMap<i64, Vec<usize>> = HashMap::new();
        for (i, p) in parts.iter().enumerate() {
            if let Some(n) = p.number.filter(|&n| n != 0) {
                by_number.entry(n).or_default().push(i);
            }
        }
        if let Some(index) = by_number
            .values()
            .filter(|v| v.len() > 1)
            .map(|v| v[1])
            .min()
        {
            self.add(join_index(&parts_path, index), "partition numbers collide");
        }
        if let Some(index) = partitions_overlap(parts) {
            self.add(join_index(&parts_path, index), "partitions overlap");
        }
        let has_zero = parts.iter().any(|p| p.number.unwrap_or(0) == 0);
        let has_should_not_exist = parts.iter().any(|p| p.should_exist == Some(false));
        if has_zero && has_should_not_exist {
            self.add(
                &parts_path,
                "shouldExist is false for a partition and other partition(s) has start or size 0",
            );
        }
        let mut labels = HashSet::new();
        for (i, p) in parts.iter().enumerate() {
            if let Some(label) = &p.label {
                if !labels.insert(label.as_str()) {
                    self.add(
                        join_index(&parts_path, i),
                        "cannot use the same partition label twice",
                    );
                    break;
                }
            }
        }
        for (i, p) in parts.iter().enumerate() {
            let path = join_index(&parts_path, i);
            if p.should_exist == Some(false)
                && (p.label.is_some()
                    || not_empty(&p.type_guid)
                    || not_empty(&p.guid)
                    || p.start_mib.is_some()
                    || p.size_mib.is_some())
            {
                self.add(
                    &path,
                    "shouldExist specified false with other options also specified",
                );
            }
            if p.number.unwrap_or(0) == 0 && p.label.is_none() {
                self.add(
                    &path,
                    "a partition number >= 1 or a label must be specified",
                );
            }
            if let Some(label) = &p.label {
                if label.len() > 36 {
                    self.add(
                        join_key(&path, "label"),
                        "partition labels may not exceed 36 characters",
                    );
                } else if label.contains(':') {
                    self.add(
                        join_key(&path, "label"),
                        "partition label will be truncated to text before the colon",
                    );
                }
            }
            let bad_guid = "doesn't match the form \"01234567-89AB-CDEF-EDCB-A98765432101\"";
            if p.guid.as_deref().is_some_and(|g| !is_guid(g)) {
                self.add(join_key(&path, "guid"), bad_guid);
            }
            if p.type_guid.as_deref().is_some_and(|g| !is_guid(g)) {
                self.add(join_key(&path, "typeGuid"), bad_guid);
            }
        }
    }

    pub(super) fn filesystem(&mut self, path: &str, f: &t::Filesystem) {
        self.check(join_key(path, "path"), check_path_nil_ok(&f.path));
        self.check(join_key(path, "device"), check_path(&f.device));
        let format_result = if nil_or_empty(&f.format) {
            let others = not_empty(&f.path)
                || not_empty(&f.label)
                || not_empty(&f.uuid)
                || is_true(f.wipe_filesystem)
                || f.mount_options.as_ref().is_some_and(|o| !o.is_empty())
                || f.options.as_ref().is_some_and(|o| !o.is_empty());
            if others {
                Err("format cannot be empty when path, label, uuid, wipeFilesystem, options, or mountOptions is specified")
            } else {
                Ok(())
            }
        } else {
            match f.format.as_deref().unwrap_or_default() {
                "ext4" | "btrfs" | "xfs" | "swap" | "vfat" => Ok(()),
                "none" if self.spec >= SpecVersion::V3_3 => Ok(()),
                _ => Err("invalid filesystem format"),
            }
        };
        self.check(join_key(path, "format"), format_result);
        if not_empty(&f.label) {
            let label = f.label.as_deref().unwrap_or_default();
            let result = match f.format.as_deref() {
                None | Some("") => Err("filesystem must specify format if label is specified"),
                Some(format) => check_fs_label(format, label),
            };
            self.check(join_key(path, "label"), result);
        }
    }

    pub(super) fn storage_duplicates(&mut self, c: &Config) {
        if let Some(s) = &c.storage {
            let mut nodes = HashSet::new();
            for (i, d) in s.directories.iter().flatten().enumerate() {
                if !nodes.insert(d.path.clone()) {
                    self.add(join_index("storage.directories", i), DUPLICATE);
                }
            }
            let disks = s.disks.as_deref().unwrap_or_default();
            self.dups("storage.disks", disks.iter().map(|d| d.device.clone()));
            for (i, f) in s.files.iter().flatten().enumerate() {
                if !nodes.insert(f.path.clone()) {
                    self.add(join_index("storage.files", i), DUPLICATE);
                }
            }
            let filesystems = s.filesystems.as_deref().unwrap_or_default();
            self.dups(
                "storage.filesystems",
                filesystems.iter().map(|f| f.device.clone()),
            );
            for (i, l) in s.links.iter().flatten().enumerate() {
                if !nodes.insert(l.path.clone()) {
                    self.add(join_index("storage.links", i), DUPLICATE);
                }
            }
            let luks = s.luks.as_deref().unwrap_or_default();
            self.dups("storage.luks", luks.iter().map(|l| l.name.clone()));
            let raid = s.raid.as_deref().unwrap_or_default();
            self.dups("storage.raid", raid.iter().map(|r| r.name.clone()));
            for (i, d) in disks.iter().enumerate() {
                let path = join_key(&join_index("storage.disks", i), "partitions");
                self.dups(&path, d.partitions.iter().flatten().map(partition_key));
            }
            for (i, f) in s.files.iter().flatten().enumerate() {
                let path = join_index("storage.files", i);
                if let Some(contents) = &f.contents {
                    self.header_dups(&join_key(&path, "contents"), contents);
                }
                for (j, append) in f.append.iter().flatten().enumerate() {
                    self.header_dups(&join_index(&join_key(&path, "append"), j), append);
                }
            }
            for (i, l) in luks.iter().enumerate() {
                let path = join_index("storage.luks", i);
                self.dups(
                    &join_key(&path, "openOptions"),
                    l.open_options.iter().flatten().cloned(),
                );
                if let Some(tang) = l.clevis.as_ref().and_then(|c| c.tang.as_ref()) {
                    self.dups(
                        &format!("{path}.clevis.tang"),
                        tang.iter().map(|t| t.url.clone().unwrap_or_default()),
                    );
                }
                if let Some(key_file) = &l.key_file {
                    self.header_dups(&join_key(&path, "keyFile"), key_file);
                }
            }
            for (i, r) in raid.iter().enumerate() {
                let path = join_key(&join_index("storage.raid", i), "devices");
                self.dups(&path, r.devices.iter().flatten().cloned());
            }
        }
    }
}

fn partition_key(p: &t::Partition) -> String {
    match (p.number.filter(|&n| n != 0), &p.label) {
        (Some(n), _) => format!("number:{n}"),
        (None, Some(label)) => format!("label:{label}"),
        (None, None) => String::new(),
    }
}

/// Index of a partition that overlaps another one (only partitions with an explicit non-zero
/// start and a size take part, as in the original).
fn partitions_overlap(parts: &[t::Partition]) -> Option<usize> {
    let end = |p: &t::Partition| {
        let (start, size) = (p.start_mib.unwrap_or(0), p.size_mib.unwrap_or(0));
        if size == 0 {
            start
        } else {
            start.saturating_add(size).saturating_sub(1)
        }
    };
    for p in parts {
        let (Some(p_start), Some(_)) = (p.start_mib, p.size_mib) else {
            continue;
        };
        if p_start == 0 {
            continue;
        }
        for (i, o) in parts.iter().enumerate() {
            let (Some(o_start), Some(_)) = (o.start_mib, o.size_mib) else {
                continue;
            };
            if p == o || o_start == 0 {
                continue;
            }
            let (p_end, o_end) = (end(p), end(o));
            if (p_start >= o_start && p_start <= o_end)
                || (p_end >= o_start && p_end <= o_end)
                || (p_start < o_start && p_end > o_end)
            {
                return Some(i);
            }
        }
    }
    None
}

//! The Ignition 3.x validator the original runs (per spec version), applied to the canonical
//! 3.5 structs: field checks (paths, URLs and their schemes, hashes, modes, filesystems, LUKS,
//! RAID, partitions, systemd units) and duplicate-entry checks. Returns every fatal finding;
//! warnings are not reported. The rules that differ between 3.0 and 3.5 are selected by the
//! spec version passed in. Pure; does not change the config.

use std::collections::{HashMap, HashSet};

use ignition_config::v3_5 as t;

use super::dataurl;
use super::error::Report;
use super::gostd::{path_clean, path_ext, path_join, url_parse};
use super::json::{join_index, join_key};
use super::unit::check_unit_contents;
use super::version::{GoSemver, SpecVersion};
use super::Config;

const DUPLICATE: &str = "duplicate entry defined";
const UNIT_EXTENSIONS: [&str; 12] = [
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// Validate `config` with the rules of spec `spec` (3.0 to 3.5).
pub(crate) fn validate(config: &Config, spec: SpecVersion) -> Report {
    run(config, spec, false)
}

/// Validate the output of a down-translation hop. Its sources are the ones the serve-path
/// validation already checked, and the `data:` URL rules are the same in every spec, so
/// inline sources are not decoded again (they are most of a rendered config).
pub(crate) fn validate_translated(config: &Config, spec: SpecVersion) -> Report {
    run(config, spec, true)
}

fn run(config: &Config, spec: SpecVersion, inline_checked: bool) -> Report {
    let mut v = Validator {
        spec,
        inline_checked,
        report: Report::default(),
    };
    v.config(config);
    v.duplicates(config);
    v.report
}

struct Validator {
    spec: SpecVersion,
    inline_checked: bool,
    report: Report,
}

fn not_empty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

fn nil_or_empty(s: &Option<String>) -> bool {
    !not_empty(s)
}

fn is_true(b: Option<bool>) -> bool {
    b == Some(true)
}

/// The node path rules: present, absolute, already clean.
pub(crate) fn check_path(p: &str) -> Result<(), &'static str> {
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

/// The resource URL rules of spec `spec`: a parseable URL with a supported scheme; `data:`
/// URLs must decode, `s3`/`arn` version ids must not be empty.
pub(crate) fn check_url(s: &str, spec: SpecVersion) -> Result<(), String> {
    let url = url_parse(s).map_err(|()| "unable to parse url".to_string())?;
    match url.scheme.as_str() {
        "http" | "https" | "tftp" => Ok(()),
        "gs" if spec >= SpecVersion::V3_2 => Ok(()),
        "s3" => check_version_id(&url),
        "arn" if spec >= SpecVersion::V3_4 => {
            check_s3_arn(&format!("arn:{}", url.opaque))?;
            check_version_id(&url)
        }
        "data" => dataurl::check(s).map_err(|e| e.reason),
        _ => Err("invalid url scheme".to_string()),
    }
}

fn check_version_id(url: &super::gostd::GoUrl<'_>) -> Result<(), String> {
    match url.query_values("versionId") {
        Some(values) if values.first().is_none_or(|v| v.is_empty()) => {
            Err("invalid S3 object VersionId".to_string())
        }
        _ => Ok(()),
    }
}

/// AWS ARN syntax as the original checks it, restricted to S3 object or access-point ARNs.
fn check_s3_arn(full: &str) -> Result<(), String> {
    const INVALID: &str = "invalid S3 ARN format";
    if !full.starts_with("arn:") || full.matches(':').count() < 5 {
        return Err(INVALID.to_string());
    }
    let sections: Vec<&str> = full.splitn(6, ':').collect();
    if sections.len() != 6 {
        return Err("arn: not enough sections".to_string());
    }
    if sections[1].is_empty() {
        return Err("arn: invalid partition".to_string());
    }
    if sections[2].is_empty() {
        return Err("arn: invalid service".to_string());
    }
    if sections[5].is_empty() {
        return Err("arn: invalid resource".to_string());
    }
    if sections[2] != "s3" {
        return Err(INVALID.to_string());
    }
    let slashes = full.split('/').count();
    if sections[5].starts_with("accesspoint/") {
        if slashes < 3 {
            return Err(INVALID.to_string());
        }
    } else if slashes < 2 {
        return Err(INVALID.to_string());
    }
    Ok(())
}

/// The hash rules: `function-hexsum`, sha512 (and sha256 from 3.1), right length.
pub(crate) fn check_hash(hash: &str, sha256_allowed: bool) -> Result<(), &'static str> {
    let Some((function, sum)) = hash.split_once('-') else {
        return Err("malformed hash specifier");
    };
    let expected = match function {
        "sha512" => 128,
        "sha256" if sha256_allowed => 64,
        _ => return Err("unrecognized hash function"),
    };
    if sum.len() != expected {
        return Err("incorrect size for hash sum");
    }
    Ok(())
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

pub(crate) fn check_unit_name(name: &str) -> Result<(), &'static str> {
    if UNIT_EXTENSIONS.contains(&path_ext(name)) {
        Ok(())
    } else {
        Err("invalid systemd unit extension")
    }
}

pub(crate) fn check_dropin_name(name: &str) -> Result<(), &'static str> {
    if path_ext(name) == ".conf" {
        Ok(())
    } else {
        Err("invalid systemd drop-in extension")
    }
}

pub(crate) fn check_raid_level(level: &str, spares: Option<i64>) -> Result<(), &'static str> {
    match level {
        "linear" | "raid0" | "0" | "stripe" => {
            if spares.is_some_and(|s| s != 0) {
                return Err("spares unsupported for linear and raid0 arrays");
            }
            Ok(())
        }
        "raid1" | "1" | "mirror" | "raid4" | "4" | "raid5" | "5" | "raid6" | "6" | "raid10"
        | "10" => Ok(()),
        _ => Err("unrecognized raid level"),
    }
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
    fn url(&self, s: &str) -> Result<(), String> {
        if self.inline_checked && s.starts_with("data:") {
            return Ok(());
        }
        check_url(s, self.spec)
    }

    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.report.add(path, message);
    }

    fn check(&mut self, path: impl Into<String>, result: Result<(), impl Into<String>>) {
        if let Err(message) = result {
            self.add(path, message);
        }
    }

    fn config(&mut self, c: &Config) {
        self.systemd_path_conflicts(c);
        self.ignition(&c.ignition);
        if let Some(storage) = &c.storage {
            self.storage(storage);
        }
        if let Some(systemd) = &c.systemd {
            for (i, unit) in systemd.units.iter().flatten().enumerate() {
                self.unit(&join_index("systemd.units", i), unit);
            }
        }
    }

    fn systemd_path_conflicts(&mut self, c: &Config) {
        let mut unit_paths = HashSet::new();
        for unit in c.systemd.iter().flat_map(|s| s.units.iter().flatten()) {
            if not_empty(&unit.contents) {
                unit_paths.insert(format!("/etc/systemd/system/{}", unit.name));
            }
            for dropin in unit.dropins.iter().flatten() {
                if not_empty(&dropin.contents) {
                    unit_paths.insert(format!(
                        "/etc/systemd/system/{}.d/{}",
                        unit.name, dropin.name
                    ));
                }
            }
        }
        if unit_paths.is_empty() {
            return;
        }
        let Some(storage) = &c.storage else { return };
        let conflict = "path conflicts with systemd unit or dropin";
        for (i, f) in storage.files.iter().flatten().enumerate() {
            if unit_paths.contains(&f.path) {
                self.add(format!("storage.files[{i}].path"), conflict);
            }
        }
        for (i, d) in storage.directories.iter().flatten().enumerate() {
            if unit_paths.contains(&d.path) {
                self.add(format!("storage.directories[{i}].path"), conflict);
            }
        }
        for (i, l) in storage.links.iter().flatten().enumerate() {
            if unit_paths.contains(&l.path) {
                self.add(format!("storage.links[{i}].path"), conflict);
            }
        }
    }

    fn ignition(&mut self, ign: &t::Ignition) {
        match GoSemver::parse(&ign.version) {
            None => self.add(
                "ignition.version",
                "invalid config version (couldn't parse)",
            ),
            Some(v) if !v.is_exactly(self.spec) => {
                self.add("ignition.version", "unsupported config version")
            }
            Some(_) => {}
        }
        if let Some(config) = &ign.config {
            for (i, merge) in config.merge.iter().flatten().enumerate() {
                let path = join_index("ignition.config.merge", i);
                if self.spec >= SpecVersion::V3_1 {
                    self.required_source(&path, merge);
                }
                self.resource(&path, merge);
            }
            if let Some(replace) = &config.replace {
                self.resource("ignition.config.replace", replace);
            }
        }
        if let Some(proxy) = &ign.proxy {
            self.proxy_url("ignition.proxy.httpProxy", &proxy.http_proxy);
            self.proxy_url("ignition.proxy.httpsProxy", &proxy.https_proxy);
        }
        let cas = ign
            .security
            .iter()
            .flat_map(|s| s.tls.iter())
            .flat_map(|tls| tls.certificate_authorities.iter().flatten());
        for (i, ca) in cas.enumerate() {
            let path = join_index("ignition.security.tls.certificateAuthorities", i);
            if self.spec >= SpecVersion::V3_1 {
                self.required_source(&path, ca);
            } else {
                // 3.0 CAs carry a plain (required) string source.
                let source = ca.source.clone().unwrap_or_default();
                let result = self.url(&source);
                self.check(join_key(&path, "source"), result);
            }
            self.resource(&path, ca);
        }
    }

    fn required_source(&mut self, path: &str, res: &t::Resource) {
        match res.source.as_deref() {
            None | Some("") => self.add(path, "source is required"),
            Some(source) => {
                let result = self.url(source);
                self.check(path, result);
            }
        }
    }

    fn proxy_url(&mut self, path: &str, value: &Option<String>) {
        let Some(value) = value else { return };
        match url_parse(value) {
            Err(()) => self.add(path, "unable to parse url"),
            Ok(url) if url.scheme != "http" && url.scheme != "https" => {
                self.add(path, "proxies must be http(s)")
            }
            Ok(_) => {}
        }
    }

    fn resource(&mut self, path: &str, res: &t::Resource) {
        if let Some(compression) = &res.compression {
            if !compression.is_empty() && compression != "gzip" {
                self.add(join_key(path, "compression"), "invalid compression method");
            }
        }
        let hash = res.verification.as_ref().and_then(|v| v.hash.as_ref());
        if hash.is_some() && res.source.is_none() {
            self.add(
                format!("{path}.verification.hash"),
                "source must be specified if verification is specified",
            );
        }
        if let Some(source) = res.source.as_deref().filter(|s| !s.is_empty()) {
            let result = self.url(source);
            self.check(join_key(path, "source"), result);
        }
        let headers = res.http_headers.as_deref().unwrap_or_default();
        if !headers.is_empty() {
            let scheme_ok = match res.source.as_deref() {
                None | Some("") => Err("unable to parse url"),
                Some(source) => match url_parse(source) {
                    Err(()) => Err("unable to parse url"),
                    Ok(url) if url.scheme == "http" || url.scheme == "https" => Ok(()),
                    Ok(_) => Err("cannot use HTTP headers with this source scheme"),
                },
            };
            self.check(join_key(path, "httpHeaders"), scheme_ok);
        }
        for (i, header) in headers.iter().enumerate() {
            let header_path = join_index(&join_key(path, "httpHeaders"), i);
            if header.name.is_empty() {
                self.add(
                    join_key(&header_path, "name"),
                    "HTTP header name can't be empty",
                );
            }
            if header.value.as_deref() == Some("") {
                self.add(
                    join_key(&header_path, "value"),
                    "unable to parse HTTP header",
                );
            }
        }
        if let Some(hash) = hash {
            let result = check_hash(hash, self.spec >= SpecVersion::V3_1);
            self.check(format!("{path}.verification.hash"), result);
        }
    }

    fn node(
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

    fn mode(&mut self, path: &str, mode: Option<i64>) {
        if mode.is_some_and(|m| !(0..=0o7777).contains(&m)) {
            self.add(join_key(path, "mode"), "illegal file mode");
        }
    }

    fn storage(&mut self, s: &t::Storage) {
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

    fn disk(&mut self, path: &str, d: &t::Disk) {
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

    fn filesystem(&mut self, path: &str, f: &t::Filesystem) {
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

    fn luks(&mut self, path: &str, l: &t::Luks) {
        if l.name.contains('/') {
            self.add(
                join_key(path, "name"),
                "device names cannot contain slashes",
            );
        }
        if l.label.as_deref().is_some_and(|label| label.len() > 47) {
            self.add(
                join_key(path, "label"),
                "luks device labels cannot be longer than 47 characters",
            );
        }
        match l.device.as_deref() {
            None | Some("") => self.add(join_key(path, "device"), "disk device is required"),
            Some(device) => self.check(join_key(path, "device"), check_path(device)),
        }
        let clevis = l.clevis.clone().unwrap_or_default();
        let custom = clevis.custom.clone().unwrap_or_default();
        let tang = clevis.tang.as_deref().unwrap_or_default();
        let others =
            !tang.is_empty() || is_true(clevis.tpm2) || clevis.threshold.is_some_and(|t| t != 0);
        let custom_set = if self.spec >= SpecVersion::V3_3 {
            not_empty(&custom.pin)
        } else {
            custom != t::ClevisCustom::default()
        };
        if custom_set && others {
            self.add(
                join_key(path, "clevis"),
                "cannot use custom clevis config with tpm2, tang, or threshold",
            );
        }
        let key_file_source = l.key_file.as_ref().and_then(|k| k.source.clone());
        if let Some(source) = key_file_source.as_deref().filter(|s| !s.is_empty()) {
            if self.url(source).is_err() {
                self.add(join_key(path, "keys"), "invalid key-file source");
            }
        }
        if self.spec >= SpecVersion::V3_5 {
            let clevis_present = not_empty(&custom.pin) || others;
            let cex_present = l.cex.as_ref().is_some_and(|c| is_true(c.enabled));
            if clevis_present && cex_present {
                self.add(join_key(path, "cex"), "cannot use cex with clevis");
            }
            if cex_present && not_empty(&key_file_source) {
                self.add(join_key(path, "cex"), "cannot use key file with cex");
            }
        }
        let clevis_path = join_key(path, "clevis");
        if nil_or_empty(&custom.pin)
            && nil_or_empty(&custom.config)
            && !is_true(custom.needs_network)
        {
            // An empty custom pin configuration is valid.
        } else {
            let custom_path = join_key(&clevis_path, "custom");
            match custom.pin.as_deref() {
                Some("tpm2" | "tang" | "sss") => {}
                Some(pin) if !pin.is_empty() => {
                    self.add(join_key(&custom_path, "pin"), "unsupported clevis pin")
                }
                _ => self.add(
                    join_key(&custom_path, "pin"),
                    "missing required custom clevis pin",
                ),
            }
            if nil_or_empty(&custom.config) {
                self.add(
                    join_key(&custom_path, "config"),
                    "missing required custom clevis config",
                );
            }
        }
        for (i, tang) in tang.iter().enumerate() {
            let tang_path = join_index(&join_key(&clevis_path, "tang"), i);
            let url = tang.url.as_deref().unwrap_or_default();
            let url_result = match url_parse(url) {
                Err(()) => Err("unable to parse url"),
                Ok(u) if u.scheme == "http" || u.scheme == "https" => Ok(()),
                Ok(_) => Err("invalid url scheme"),
            };
            self.check(join_key(&tang_path, "url"), url_result);
            if nil_or_empty(&tang.thumbprint) {
                self.add(join_key(&tang_path, "thumbprint"), "thumbprint is required");
            }
            if self.spec >= SpecVersion::V3_4 && not_empty(&tang.advertisement) {
                let advertisement = tang.advertisement.as_deref().unwrap_or_default();
                if serde_json::from_str::<serde_json::Value>(advertisement).is_err() {
                    self.add(
                        join_key(&tang_path, "advertisement"),
                        "advertisement is not valid JSON",
                    );
                }
            }
        }
        if let Some(key_file) = &l.key_file {
            self.resource(&join_key(path, "keyFile"), key_file);
        }
    }

    fn raid(&mut self, path: &str, r: &t::Raid) {
        let level = match r.level.as_deref() {
            None | Some("") if self.spec >= SpecVersion::V3_3 => Err("raid level is required"),
            level => check_raid_level(level.unwrap_or_default(), r.spares),
        };
        self.check(join_key(path, "level"), level);
        let devices = r.devices.as_deref().unwrap_or_default();
        if devices.is_empty() {
            self.add(join_key(path, "devices"), "raid devices required");
        }
        for (i, device) in devices.iter().enumerate() {
            self.check(
                join_index(&join_key(path, "devices"), i),
                check_path(device),
            );
        }
    }

    fn unit(&mut self, path: &str, u: &t::Unit) {
        self.check(join_key(path, "name"), check_unit_name(&u.name));
        if let Some(contents) = &u.contents {
            self.check(join_key(path, "contents"), check_unit_contents(contents));
        }
        for (i, d) in u.dropins.iter().flatten().enumerate() {
            let dropin_path = join_index(&join_key(path, "dropins"), i);
            if let Some(contents) = &d.contents {
                self.check(
                    join_key(&dropin_path, "contents"),
                    check_unit_contents(contents),
                );
            }
            self.check(join_key(&dropin_path, "name"), check_dropin_name(&d.name));
        }
    }

    /// The duplicate-key pass: every list keyed as the original keys it.
    fn duplicates(&mut self, c: &Config) {
        if let Some(config) = &c.ignition.config {
            let merge = config.merge.as_deref().unwrap_or_default();
            self.dups("ignition.config.merge", merge.iter().map(resource_key));
            for (i, m) in merge.iter().enumerate() {
                self.header_dups(&join_index("ignition.config.merge", i), m);
            }
            if let Some(replace) = &config.replace {
                self.header_dups("ignition.config.replace", replace);
            }
        }
        if let Some(proxy) = &c.ignition.proxy {
            self.dups(
                "ignition.proxy.noProxy",
                proxy.no_proxy.iter().flatten().cloned(),
            );
        }
        if let Some(tls) = c.ignition.security.as_ref().and_then(|s| s.tls.as_ref()) {
            let cas = tls.certificate_authorities.as_deref().unwrap_or_default();
            let path = "ignition.security.tls.certificateAuthorities";
            self.dups(path, cas.iter().map(resource_key));
            for (i, ca) in cas.iter().enumerate() {
                self.header_dups(&join_index(path, i), ca);
            }
        }
        if let Some(kargs) = &c.kernel_arguments {
            let mut seen = HashSet::new();
            for (name, list) in [
                ("shouldExist", &kargs.should_exist),
                ("shouldNotExist", &kargs.should_not_exist),
            ] {
                for (i, karg) in list.iter().flatten().enumerate() {
                    if !seen.insert(karg.clone()) {
                        self.add(format!("kernelArguments.{name}[{i}]"), DUPLICATE);
                    }
                }
            }
        }
        if let Some(passwd) = &c.passwd {
            let groups = passwd.groups.as_deref().unwrap_or_default();
            self.dups("passwd.groups", groups.iter().map(|g| g.name.clone()));
            let users = passwd.users.as_deref().unwrap_or_default();
            self.dups("passwd.users", users.iter().map(|u| u.name.clone()));
            for (i, u) in users.iter().enumerate() {
                let path = join_index("passwd.users", i);
                self.dups(
                    &join_key(&path, "groups"),
                    u.groups.iter().flatten().cloned(),
                );
                self.dups(
                    &join_key(&path, "sshAuthorizedKeys"),
                    u.ssh_authorized_keys.iter().flatten().cloned(),
                );
            }
        }
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
        if let Some(systemd) = &c.systemd {
            let units = systemd.units.as_deref().unwrap_or_default();
            self.dups("systemd.units", units.iter().map(|u| u.name.clone()));
            for (i, u) in units.iter().enumerate() {
                let path = join_key(&join_index("systemd.units", i), "dropins");
                self.dups(&path, u.dropins.iter().flatten().map(|d| d.name.clone()));
            }
        }
    }

    fn dups(&mut self, path: &str, keys: impl Iterator<Item = String>) {
        let mut seen = HashSet::new();
        for (i, key) in keys.enumerate() {
            if !seen.insert(key) {
                self.add(join_index(path, i), DUPLICATE);
            }
        }
    }

    fn header_dups(&mut self, path: &str, res: &t::Resource) {
        self.dups(
            &join_key(path, "httpHeaders"),
            res.http_headers.iter().flatten().map(|h| h.name.clone()),
        );
    }
}

fn resource_key(res: &t::Resource) -> String {
    res.source.clone().unwrap_or_default()
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

/// The MachineConfig file-mode rule of the original's `ValidateIgnition` (used by its render
/// controller, not while serving): a file mode above 0777 is rejected. Directories are not
/// checked, as in the original.
pub fn check_file_modes(config: &Config) -> Result<(), String> {
    for file in config.storage.iter().flat_map(|s| s.files.iter().flatten()) {
        if let Some(mode) = file.mode.filter(|&m| m > 0o777) {
            return Err(format!(
                "invalid mode 0{mode:o} for {}, cannot exceed 0777",
                file.path
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: serde_json::Value) -> Config {
        serde_json::from_value(json).unwrap()
    }

    fn messages(config: &Config, spec: SpecVersion) -> Vec<String> {
        validate(config, spec)
            .problems
            .into_iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect()
    }

    #[test]
    fn empty_config_is_valid() {
        let c = cfg(serde_json::json!({"ignition": {"version": "3.5.0"}}));
        assert!(validate(&c, SpecVersion::V3_5).is_empty());
    }

    #[test]
    fn vector_42_duplicate_paths() {
        let c = cfg(
            serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
            "files": [{"path": "/a"}, {"path": "/a"}]}}),
        );
        assert_eq!(
            messages(&c, SpecVersion::V3_5),
            ["storage.files[1]: duplicate entry defined"]
        );
        let c = cfg(
            serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
            "files": [{"path": "/a"}], "directories": [{"path": "/a"}]}}),
        );
        assert_eq!(
            messages(&c, SpecVersion::V3_5),
            ["storage.files[0]: duplicate entry defined"]
        );
    }

    #[test]
    fn node_and_resource_rules() {
        let c = cfg(
            serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
            "files": [
                {"path": "rel"},
                {"path": "/a/../b"},
                {"path": "/c", "mode": 8192},
                {"path": "/d", "overwrite": true},
                {"path": "/e", "contents": {"source": "ftp://x"}},
                {"path": "/f", "contents": {"source": "data:,ok", "compression": "xz"}},
                {"path": "/g", "contents": {"source": "data:,ok", "verification": {"hash": "md5-00"}}},
                {"path": "/h", "user": {"id": 1, "name": "core"}}
            ]}}),
        );
        assert_eq!(
            messages(&c, SpecVersion::V3_5),
            [
                "storage.files[0].path: path not absolute",
                "storage.files[1].path: path is not fully simplified",
                "storage.files[2].mode: illegal file mode",
                "storage.files[3].overwrite: overwrite must be false if source is unspecified",
                "storage.files[4].contents.source: invalid url scheme",
                "storage.files[5].contents.compression: invalid compression method",
                "storage.files[6].contents.verification.hash: unrecognized hash function",
                "storage.files[7].user: cannot set both id and name",
            ]
        );
    }

    #[test]
    fn version_specific_rules() {
        let gs = cfg(
            serde_json::json!({"ignition": {"version": "3.1.0"}, "storage": {
            "files": [{"path": "/a", "contents": {"source": "gs://b/o"}}]}}),
        );
        assert_eq!(
            messages(&gs, SpecVersion::V3_1),
            ["storage.files[0].contents.source: invalid url scheme"]
        );
        let none = cfg(
            serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {
            "filesystems": [{"device": "/dev/vdb1", "format": "none"}]}}),
        );
        assert_eq!(
            messages(&none, SpecVersion::V3_2),
            ["storage.filesystems[0].format: invalid filesystem format"]
        );
        let sha = format!("sha256-{}", "a".repeat(64));
        let sha256 = cfg(
            serde_json::json!({"ignition": {"version": "3.0.0"}, "storage": {
            "files": [{"path": "/a", "contents": {"source": "data:,x", "verification": {"hash": sha}}}]}}),
        );
        assert_eq!(
            messages(&sha256, SpecVersion::V3_0),
            ["storage.files[0].contents.verification.hash: unrecognized hash function"]
        );
    }

    #[test]
    fn luks_raid_units_and_kargs() {
        let c = cfg(serde_json::json!({"ignition": {"version": "3.5.0"},
            "kernelArguments": {"shouldExist": ["a"], "shouldNotExist": ["a"]},
            "storage": {
                "luks": [{"name": "a/b", "device": "/dev/sda", "cex": {"enabled": true},
                          "clevis": {"tpm2": true}}],
                "raid": [{"name": "md0", "level": "raid0", "spares": 1, "devices": ["/dev/a"]}]
            },
            "systemd": {"units": [{"name": "x.foo", "contents": "[Unit"}]}}));
        assert_eq!(
            messages(&c, SpecVersion::V3_5),
            [
                "storage.luks[0].name: device names cannot contain slashes",
                "storage.luks[0].cex: cannot use cex with clevis",
                "storage.raid[0].level: spares unsupported for linear and raid0 arrays",
                "systemd.units[0].name: invalid systemd unit extension",
                "systemd.units[0].contents: invalid unit content: unable to find end of section",
                "kernelArguments.shouldNotExist[0]: duplicate entry defined",
            ]
        );
    }

    #[test]
    fn arn_and_s3_urls() {
        assert_eq!(
            check_url("arn:aws:s3:::bucket/key", SpecVersion::V3_4),
            Ok(())
        );
        assert!(check_url("arn:aws:s3:::bucket/key", SpecVersion::V3_3).is_err());
        assert!(check_url("arn:aws:iam:::bucket/key", SpecVersion::V3_5).is_err());
        assert!(check_url("arn:aws:s3:::bucket", SpecVersion::V3_5).is_err());
        assert_eq!(
            check_url("s3://b/k?versionId=", SpecVersion::V3_5),
            Err("invalid S3 object VersionId".to_string())
        );
        assert_eq!(check_url("s3://b/k?versionId=1", SpecVersion::V3_5), Ok(()));
        assert!(check_url("data:,a b", SpecVersion::V3_5).is_err());
    }
}

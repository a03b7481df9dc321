//! The `systemd` section: unit and drop-in names and contents, unit names and drop-in names
//! unique, and the paths units claim, which no storage node may take.

use std::collections::HashSet;

use ignition_config::v3_5 as t;

use super::super::gostd::path_ext;
use super::super::json::{join_index, join_key};
use super::super::unit::check_unit_contents;
use super::super::Config;
use super::{not_empty, Validator};

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

impl Validator {
    pub(super) fn systemd_path_conflicts(&mut self, c: &Config) {
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

    pub(super) fn unit(&mut self, path: &str, u: &t::Unit) {
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
    pub(super) fn systemd_duplicates(&mut self, c: &Config) {
        if let Some(systemd) = &c.systemd {
            let units = systemd.units.as_deref().unwrap_or_default();
            self.dups("systemd.units", units.iter().map(|u| u.name.clone()));
            for (i, u) in units.iter().enumerate() {
                let path = join_key(&join_index("systemd.units", i), "dropins");
                self.dups(&path, u.dropins.iter().flatten().map(|d| d.name.clone()));
            }
        }
    }
}

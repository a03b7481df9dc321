//! The Ignition 3.x validator the original runs (per spec version), applied to the canonical
//! 3.5 structs. Returns every fatal finding; warnings are not reported. The rules that differ
//! between 3.0 and 3.5 are selected by the spec version passed in. Pure; does not change the
//! config.
//!
//! Organised by config section, as Ignition's own validation is (one file per part of the
//! config types): [`sources`] (the `ignition` section and every resource: URLs and their
//! schemes, hashes, headers), [`storage`] (nodes, modes, disks and partitions, filesystems),
//! [`luks_raid`], [`systemd`] (units, drop-ins, paths they claim) and [`passwd`]. Each section
//! has its field checks and its duplicate-entry checks; this module runs them in the original's
//! order (every field check, then every duplicate check), so findings come out in the same order.

use std::collections::HashSet;

use super::error::Report;
use super::json::join_index;
use super::version::SpecVersion;
use super::Config;

mod luks_raid;
mod passwd;
mod sources;
mod storage;
mod systemd;
#[cfg(test)]
mod tests;

pub(crate) use luks_raid::check_raid_level;
pub(crate) use sources::{check_hash, check_url};
pub(crate) use storage::{check_fs_label, is_guid};
pub(crate) use systemd::{check_dropin_name, check_unit_name};

/// The finding of a duplicate-key check.
const DUPLICATE: &str = "duplicate entry defined";

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

/// One validation run: the spec version's rules and the findings so far.
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

impl Validator {
    /// A resource URL, by the rules of this validator's spec version (inline sources are
    /// skipped when a translated config's were checked already).
    pub(super) fn url(&self, s: &str) -> Result<(), String> {
        if self.inline_checked && s.starts_with("data:") {
            return Ok(());
        }
        check_url(s, self.spec)
    }

    pub(super) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.report.add(path, message);
    }

    pub(super) fn check(&mut self, path: impl Into<String>, result: Result<(), impl Into<String>>) {
        if let Err(message) = result {
            self.add(path, message);
        }
    }

    /// The field checks of every section, in the original's order.
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

    /// The duplicate-key pass: every list keyed as the original keys it.
    fn duplicates(&mut self, c: &Config) {
        self.ignition_duplicates(c);
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
        self.passwd_duplicates(c);
        self.storage_duplicates(c);
        self.systemd_duplicates(c);
    }

    /// An entry per repeated key.
    pub(super) fn dups(&mut self, path: &str, keys: impl Iterator<Item = String>) {
        let mut seen = HashSet::new();
        for (i, key) in keys.enumerate() {
            if !seen.insert(key) {
                self.add(join_index(path, i), DUPLICATE);
            }
        }
    }
}

/// A file whose mode the original's render controller refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid mode 0{mode:o} for {path}, cannot exceed 0777")]
pub struct FileModeError {
    pub path: String,
    pub mode: i64,
}

/// The MachineConfig file-mode rule of the original's `ValidateIgnition` (used by its render
/// controller, not while serving): a file mode above 0777 is rejected. Directories are not
/// checked, as in the original.
pub fn check_file_modes(config: &Config) -> Result<(), FileModeError> {
    for file in config.storage.iter().flat_map(|s| s.files.iter().flatten()) {
        if let Some(mode) = file.mode.filter(|&m| m > 0o777) {
            return Err(FileModeError {
                path: file.path.clone(),
                mode,
            });
        }
    }
    Ok(())
}

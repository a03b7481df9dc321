//! LUKS volumes (names, labels, devices, Clevis pins and Tang servers, key files, CEX) and RAID
//! arrays (levels, spares, devices) of the `storage` section.

use ignition_config::v3_5 as t;

use super::super::gostd::url_parse;
use super::super::json::{join_index, join_key};
use super::super::version::SpecVersion;
use super::storage::check_path;
use super::{is_true, nil_or_empty, not_empty, Validator};

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

impl Validator {
    pub(super) fn luks(&mut self, path: &str, l: &t::Luks) {
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
                // Spec 3.6 takes any custom pin (Ignition 2.25+, `ClevisCustom.Validate` of
                // config/v3_6/types/clevis.go); older specs know these three only.
                Some(pin) if !pin.is_empty() && self.spec >= SpecVersion::V3_6 => {}
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

    pub(super) fn raid(&mut self, path: &str, r: &t::Raid) {
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
}

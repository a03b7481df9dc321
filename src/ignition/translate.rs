//! Serving a canonical config in the spec asked for, as the original's serve path does:
//! validate the whole config with the rules of its own spec (3.5, or 3.6 for a rendered config
//! of spec 3.6), then run the down-translation hops 3.6→3.5 (PR #6236's `v36tov35`)
//! →3.4→3.3→3.2→3.1→3.0 (the last one is ours) or 3.2→2.2, each with its own failure checks
//! and an output validation with the older spec's rules. A 3.x result is finally read into
//! that spec's own types and compared with what we meant to send, so a field the older spec
//! cannot carry is an error, never silently dropped. A canonical 3.5 config asked for as 3.6
//! goes up as Ignition's own 3.5→3.6 translation does (special mode bits masked); the server
//! never asks for that ([`super::accept::choose`] serves 3.6 only from a 3.6 config).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::error::{Stage, TranslateError};
use super::go_order::to_go_order;
use super::gojson::{self, Escaping, Keys};
use super::gostd::url_parse;
use super::json::{first_difference, join_index, join_key, strip_empty};
use super::parse::{round_trip, round_trip_owned};
use super::validate::{validate, validate_translated};
use super::version::{GoSemver, SpecVersion};
use super::{v2, Config};

/// Validate, translate and shape `config` for `target`, as a JSON value without empty members.
pub fn to_value_as(config: &Config, target: SpecVersion) -> Result<Value, TranslateError> {
    let source = source_spec(config, target)?;
    let cfg = round_trip(config).map_err(|detail| TranslateError::Serialize { target, detail })?;
    translate(cfg, source, target)
}

/// [`to_value_as`] of a config the caller gives up. Each step then drops the copy it started
/// from, so that at most three copies of the config exist at once (while the result is read
/// back into the target spec's types) instead of five: a render's memory beside every payload
/// already cached (benches/README.md).
pub fn into_value_as(config: Config, target: SpecVersion) -> Result<Value, TranslateError> {
    let source = source_spec(&config, target)?;
    let cfg =
        round_trip_owned(config).map_err(|detail| TranslateError::Serialize { target, detail })?;
    translate(cfg, source, target)
}

/// The spec of a canonical config: 3.5, or 3.6.
fn source_spec(config: &Config, target: SpecVersion) -> Result<SpecVersion, TranslateError> {
    match GoSemver::parse(&config.ignition.version) {
        Some(v) if v.is_exactly(SpecVersion::V3_5) => Ok(SpecVersion::V3_5),
        Some(v) if v.is_exactly(SpecVersion::V3_6) => Ok(SpecVersion::V3_6),
        _ => Err(TranslateError::Version {
            target,
            found: config.ignition.version.clone(),
        }),
    }
}

/// The translation proper, from a normalized copy of the config.
fn translate(
    mut cfg: Config,
    source: SpecVersion,
    target: SpecVersion,
) -> Result<Value, TranslateError> {
    validate(&cfg, source)
        .into_result()
        .map_err(|report| TranslateError::Invalid {
            target,
            spec: source,
            stage: Stage::Input,
            report,
        })?;
    if target == SpecVersion::V3_5 && source == SpecVersion::V3_5 {
        let mut value = serde_json::to_value(&cfg).map_err(|e| TranslateError::Serialize {
            target,
            detail: e.to_string(),
        })?;
        drop(cfg);
        strip_empty(&mut value);
        return Ok(value);
    }
    if target == SpecVersion::V3_6 {
        if source == SpecVersion::V3_5 {
            up_3_5_to_3_6(&mut cfg);
            validate_translated(&cfg, SpecVersion::V3_6)
                .into_result()
                .map_err(|report| TranslateError::Invalid {
                    target,
                    spec: SpecVersion::V3_6,
                    stage: Stage::Output,
                    report,
                })?;
        }
        return shape_3x(cfg, target);
    }
    // The 2.2 hop starts from 3.2; every other target is reached through each 3.x minor.
    let last_3x = if target == SpecVersion::V2_2 {
        SpecVersion::V3_2
    } else {
        target
    };
    let mut current = source;
    while current != last_3x {
        let Some(next) = current.previous_3x() else {
            break;
        };
        hop_down(&mut cfg, next, target)?;
        current = next;
    }
    if target == SpecVersion::V2_2 {
        return v2::down::from_v3_2(&cfg);
    }
    shape_3x(cfg, target)
}

/// Translate and serialize as compact JSON, byte for byte as the original writes it: Go's
/// field order ([`to_go_order`]; 2.2 is built in it) and `clarketm/json`'s escaping (`<`, `>`,
/// `&` as `\u003c`, `\u003e`, `\u0026`).
pub fn serialize_as(config: &Config, target: SpecVersion) -> Result<Vec<u8>, TranslateError> {
    Ok(write_as(to_value_as(config, target)?, target))
}

/// The bytes served for `value`, what [`to_value_as`] or [`into_value_as`] gave for `target`:
/// [`serialize_as`]'s last step, for a caller that changes the value in between.
pub fn write_as(mut value: Value, target: SpecVersion) -> Vec<u8> {
    order_as(&mut value, target);
    gojson::to_vec(&value, Escaping::Clarketm, Keys::AsGiven)
}

/// Puts `value`, what [`to_value_as`] or [`into_value_as`] gave for `target`, in the field
/// order the original writes `target` in ([`to_go_order`]; 2.2 is built in it), for a caller
/// that writes it itself ([`gojson`] with [`Escaping::Clarketm`] and [`Keys::AsGiven`]).
pub fn order_as(value: &mut Value, target: SpecVersion) {
    if target != SpecVersion::V2_2 {
        to_go_order(value);
    }
}

fn unsupported(
    target: SpecVersion,
    field: impl Into<String>,
    reason: impl Into<String>,
) -> TranslateError {
    TranslateError::Unsupported {
        target,
        field: field.into(),
        reason: reason.into(),
    }
}

/// One down-translation hop to `next`: its own checks, its restructuring, then validation of
/// the result with `next`'s rules.
fn hop_down(
    cfg: &mut Config,
    next: SpecVersion,
    target: SpecVersion,
) -> Result<(), TranslateError> {
    match next {
        SpecVersion::V3_5 => hop_3_6_to_3_5(cfg, target)?,
        SpecVersion::V3_4 => hop_3_5_to_3_4(cfg, target)?,
        SpecVersion::V3_3 => hop_3_4_to_3_3(cfg, target)?,
        SpecVersion::V3_2 => hop_3_3_to_3_2(cfg, target)?,
        SpecVersion::V3_1 => hop_3_2_to_3_1(cfg, target)?,
        SpecVersion::V3_0 => hop_3_1_to_3_0(cfg, target)?,
        SpecVersion::V3_6 | SpecVersion::V2_2 => {}
    }
    cfg.ignition.version = next.as_str().to_string();
    validate_translated(cfg, next)
        .into_result()
        .map_err(|report| TranslateError::Invalid {
            target,
            spec: next,
            stage: Stage::Output,
            report,
        })
}

/// The special bits of a mode: setuid, setgid, sticky.
const SPECIAL_BITS: i64 = 0o7000;

/// 3.6→3.5, as `v36tov35.Translate` (ign-converter as vendored by the MCO in PR #6236): the
/// structs are the same, but what 3.6 honours 3.5 cannot say. Special mode bits on a file or a
/// directory fail (Ignition before 3.6 ignored them: "fail translation to avoid silently
/// breaking working functionality"), and so does a custom Clevis pin other than `tpm2`, `tang`
/// and `sss` (3.6 takes any pin). Checked in the order of PR #6236's reflective walk
/// (`checkValue`): directories, then files, then LUKS volumes. Deliberate deviation: an empty
/// pin (`""`, the no-op custom block both specs accept) is not an "arbitrary pin"; PR #6236
/// refuses it because it only asks whether the pin pointer is set.
fn hop_3_6_to_3_5(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    const SPECIAL: &str = "special mode bits are not supported in spec v3.5";
    let Some(storage) = &cfg.storage else {
        return Ok(());
    };
    for (i, dir) in storage.directories.iter().flatten().enumerate() {
        if special_mode(dir.mode) {
            return Err(unsupported(
                target,
                format!("storage.directories[{i}].mode"),
                SPECIAL,
            ));
        }
    }
    for (i, file) in storage.files.iter().flatten().enumerate() {
        if special_mode(file.mode) {
            return Err(unsupported(
                target,
                format!("storage.files[{i}].mode"),
                SPECIAL,
            ));
        }
    }
    for (i, luks) in storage.luks.iter().flatten().enumerate() {
        let pin = luks
            .clevis
            .as_ref()
            .and_then(|c| c.custom.as_ref())
            .and_then(|c| c.pin.as_deref());
        if let Some(pin) = pin.filter(|p| !p.is_empty() && !["tpm2", "tang", "sss"].contains(p)) {
            return Err(unsupported(
                target,
                format!("storage.luks[{i}].clevis.custom.pin"),
                format!("arbitrary custom clevis pin '{pin}' is not supported in spec v3.5"),
            ));
        }
    }
    Ok(())
}

/// 3.5→3.6 as Ignition's `config/v3_6/translate` (`translateFileEmbedded1`,
/// `translateDirectoryEmbedded1`): the special bits of file and directory modes are masked,
/// because Ignition before 3.6 never applied them.
fn up_3_5_to_3_6(cfg: &mut Config) {
    cfg.ignition.version = SpecVersion::V3_6.as_str().to_string();
    let Some(storage) = &mut cfg.storage else {
        return;
    };
    for dir in storage.directories.iter_mut().flatten() {
        if let Some(mode) = &mut dir.mode {
            *mode &= !SPECIAL_BITS;
        }
    }
    for file in storage.files.iter_mut().flatten() {
        if let Some(mode) = &mut file.mode {
            *mode &= !SPECIAL_BITS;
        }
    }
}

/// 3.5→3.4: spec 3.4 has no `cex`. Deliberate deviation: the original drops an enabled cex
/// silently (the LUKS volume would be set up without its key); we refuse. A `cex` that is not
/// enabled is a no-op and goes. Tang `advertisement` exists in 3.4 and is kept (the original
/// drops it here).
fn hop_3_5_to_3_4(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    let Some(storage) = &mut cfg.storage else {
        return Ok(());
    };
    for (i, luks) in storage.luks.iter_mut().flatten().enumerate() {
        if luks.cex.as_ref().is_some_and(|c| c.enabled == Some(true)) {
            return Err(unsupported(
                target,
                format!("storage.luks[{i}].cex"),
                "'Cex' type is not supported in spec v3.4",
            ));
        }
        luks.cex = None;
    }
    Ok(())
}

fn check_resource_3_3(
    path: &str,
    res: &ignition_config::v3_5::Resource,
    target: SpecVersion,
) -> Result<(), TranslateError> {
    let Some(source) = res.source.as_deref().filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    if source.starts_with("data:") {
        // Not `arn:`, and already parsed by the serve-path validation.
        return Ok(());
    }
    let field = join_key(path, "source");
    match url_parse(source) {
        Err(()) => Err(unsupported(target, field, "unable to parse url")),
        Ok(url) if url.scheme == "arn" => Err(unsupported(
            target,
            field,
            "arn: scheme for s3 is not supported in spec v3.3",
        )),
        Ok(_) => Ok(()),
    }
}

fn special_mode(mode: Option<i64>) -> bool {
    mode.is_some_and(|m| m & SPECIAL_BITS != 0)
}

/// 3.4→3.3: no Tang offline provisioning, LUKS discard/openOptions, special mode bits or
/// `arn:` sources in 3.3. Checked in the original's walk order; `discard:false` goes.
fn hop_3_4_to_3_3(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    const SPECIAL: &str = "special mode bits are not supported in spec v3.3";
    if let Some(config) = &cfg.ignition.config {
        for (i, merge) in config.merge.iter().flatten().enumerate() {
            check_resource_3_3(&join_index("ignition.config.merge", i), merge, target)?;
        }
        if let Some(replace) = &config.replace {
            check_resource_3_3("ignition.config.replace", replace, target)?;
        }
    }
    if let Some(tls) = cfg.ignition.security.as_ref().and_then(|s| s.tls.as_ref()) {
        for (i, ca) in tls.certificate_authorities.iter().flatten().enumerate() {
            let path = join_index("ignition.security.tls.certificateAuthorities", i);
            check_resource_3_3(&path, ca, target)?;
        }
    }
    let Some(storage) = &mut cfg.storage else {
        return Ok(());
    };
    for (i, dir) in storage.directories.iter().flatten().enumerate() {
        if special_mode(dir.mode) {
            return Err(unsupported(
                target,
                format!("storage.directories[{i}].mode"),
                SPECIAL,
            ));
        }
    }
    for (i, file) in storage.files.iter().flatten().enumerate() {
        let path = join_index("storage.files", i);
        if special_mode(file.mode) {
            return Err(unsupported(target, join_key(&path, "mode"), SPECIAL));
        }
        for (j, append) in file.append.iter().flatten().enumerate() {
            check_resource_3_3(&join_index(&join_key(&path, "append"), j), append, target)?;
        }
        if let Some(contents) = &file.contents {
            check_resource_3_3(&join_key(&path, "contents"), contents, target)?;
        }
    }
    for (i, luks) in storage.luks.iter_mut().flatten().enumerate() {
        let path = join_index("storage.luks", i);
        if luks.discard == Some(true) {
            return Err(unsupported(
                target,
                join_key(&path, "discard"),
                "luks discard is not supported in spec v3.3",
            ));
        }
        if luks.open_options.as_ref().is_some_and(|o| !o.is_empty()) {
            return Err(unsupported(
                target,
                join_key(&path, "openOptions"),
                "luks openOptions is not supported in spec v3.3",
            ));
        }
        if let Some(tang) = luks.clevis.as_mut().and_then(|c| c.tang.as_mut()) {
            for (j, t) in tang.iter_mut().enumerate() {
                if t.advertisement.as_deref().is_some_and(|a| !a.is_empty()) {
                    return Err(unsupported(
                        target,
                        format!("{path}.clevis.tang[{j}].advertisement"),
                        "tang offline provisioning is not supported in spec v3.3",
                    ));
                }
                t.advertisement = None;
            }
        }
        if let Some(key_file) = &luks.key_file {
            check_resource_3_3(&join_key(&path, "keyFile"), key_file, target)?;
        }
        luks.discard = None;
        luks.open_options = None;
    }
    Ok(())
}

/// 3.3→3.2: no kernel arguments in 3.2 (when serving, the renderer moves `shouldExist` into
/// the MachineConfig first). A custom Clevis pin becomes 3.2's struct with plain strings.
fn hop_3_3_to_3_2(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    if let Some(kargs) = &cfg.kernel_arguments {
        let set = |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| !l.is_empty());
        if set(&kargs.should_exist) || set(&kargs.should_not_exist) {
            return Err(unsupported(
                target,
                "kernelArguments",
                "KernelArguments is not supported on 3.2",
            ));
        }
    }
    cfg.kernel_arguments = None;
    if let Some(storage) = &mut cfg.storage {
        for luks in storage.luks.iter_mut().flatten() {
            if let Some(custom) = luks.clevis.as_mut().and_then(|c| c.custom.as_mut()) {
                custom.config.get_or_insert_with(String::new);
                custom.pin.get_or_insert_with(String::new);
            }
        }
    }
    Ok(())
}

/// 3.2→3.1: no LUKS, no user/group deletion, no partition resize in 3.1. `shouldExist:true`
/// and `resize:false` are the defaults and go.
fn hop_3_2_to_3_1(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    if let Some(storage) = &mut cfg.storage {
        if storage.luks.as_ref().is_some_and(|l| !l.is_empty()) {
            return Err(unsupported(
                target,
                "storage.luks",
                "LUKS is not supported on 3.1",
            ));
        }
        storage.luks = None;
    }
    if let Some(passwd) = &mut cfg.passwd {
        for (i, user) in passwd.users.iter_mut().flatten().enumerate() {
            if user.should_exist == Some(false) {
                return Err(unsupported(
                    target,
                    format!("passwd.users[{i}].shouldExist"),
                    "ShouldExist in Passwd.Users is not supported on 3.1",
                ));
            }
            user.should_exist = None;
        }
        for (i, group) in passwd.groups.iter_mut().flatten().enumerate() {
            if group.should_exist == Some(false) {
                return Err(unsupported(
                    target,
                    format!("passwd.groups[{i}].shouldExist"),
                    "ShouldExist in Passwd.Groups is not supported on 3.1",
                ));
            }
            group.should_exist = None;
        }
    }
    if let Some(storage) = &mut cfg.storage {
        for (i, disk) in storage.disks.iter_mut().flatten().enumerate() {
            for (j, partition) in disk.partitions.iter_mut().flatten().enumerate() {
                if partition.resize == Some(true) {
                    return Err(unsupported(
                        target,
                        format!("storage.disks[{i}].partitions[{j}].resize"),
                        "Resize in Storage.Disks.Partitions is not supported on 3.1",
                    ));
                }
                partition.resize = None;
            }
        }
    }
    Ok(())
}

/// 3.1→3.0 (ours; the original cannot serve 3.0): spec 3.0 has no HTTP headers, no
/// compression on config and CA references, no proxy and no filesystem mount options; its
/// validator also rejects sha256 hashes.
fn hop_3_1_to_3_0(cfg: &mut Config, target: SpecVersion) -> Result<(), TranslateError> {
    use ignition_config::v3_5::Resource;
    let reference = |path: &str, res: &Resource, what: &str| -> Result<(), TranslateError> {
        if res.compression.is_some() {
            return Err(unsupported(
                target,
                join_key(path, "compression"),
                format!("Compression in {what} is not supported on 3.0"),
            ));
        }
        if res.http_headers.is_some() {
            return Err(unsupported(
                target,
                join_key(path, "httpHeaders"),
                format!("HTTPHeaders in {what} are not supported on 3.0"),
            ));
        }
        Ok(())
    };
    if let Some(config) = &cfg.ignition.config {
        for (i, merge) in config.merge.iter().flatten().enumerate() {
            let path = join_index("ignition.config.merge", i);
            reference(&path, merge, "Ignition.Config.Merge")?;
        }
        if let Some(replace) = &config.replace {
            reference(
                "ignition.config.replace",
                replace,
                "Ignition.Config.Replace",
            )?;
        }
    }
    if let Some(tls) = cfg.ignition.security.as_ref().and_then(|s| s.tls.as_ref()) {
        for (i, ca) in tls.certificate_authorities.iter().flatten().enumerate() {
            let path = join_index("ignition.security.tls.certificateAuthorities", i);
            reference(&path, ca, "Ignition.Security.TLS.CertificateAuthorities")?;
        }
    }
    if let Some(proxy) = &cfg.ignition.proxy {
        if proxy.http_proxy.is_some() || proxy.https_proxy.is_some() || proxy.no_proxy.is_some() {
            return Err(unsupported(
                target,
                "ignition.proxy",
                "HTTP proxies in Ignition.Proxy are not supported on 3.0",
            ));
        }
    }
    if let Some(storage) = &cfg.storage {
        for (i, fs) in storage.filesystems.iter().flatten().enumerate() {
            if fs.mount_options.is_some() {
                return Err(unsupported(
                    target,
                    format!("storage.filesystems[{i}].mountOptions"),
                    "MountOptions in Storage.Filesystems is not supported on 3.0",
                ));
            }
        }
        for (i, file) in storage.files.iter().flatten().enumerate() {
            let path = join_index("storage.files", i);
            if file
                .contents
                .as_ref()
                .is_some_and(|c| c.http_headers.is_some())
            {
                return Err(unsupported(
                    target,
                    format!("{path}.contents.httpHeaders"),
                    "HTTPHeaders in Storage.Files.Contents are not supported on 3.0",
                ));
            }
            for (j, append) in file.append.iter().flatten().enumerate() {
                if append.http_headers.is_some() {
                    return Err(unsupported(
                        target,
                        format!("{path}.append[{j}].httpHeaders"),
                        "HTTPHeaders in Storage.Files.Append.* are not supported on 3.0",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Serialize the translated config, read it into `target`'s own types, and refuse if that
/// loses or changes anything.
fn shape_3x(cfg: Config, target: SpecVersion) -> Result<Value, TranslateError> {
    use ignition_config as ic;
    let mut value = serde_json::to_value(&cfg).map_err(|e| TranslateError::Serialize {
        target,
        detail: e.to_string(),
    })?;
    drop(cfg);
    strip_empty(&mut value);
    let back = match target {
        SpecVersion::V3_0 => through::<ic::v3_0::Config>(&value),
        SpecVersion::V3_1 => through::<ic::v3_1::Config>(&value),
        SpecVersion::V3_2 => through::<ic::v3_2::Config>(&value),
        SpecVersion::V3_3 => through::<ic::v3_3::Config>(&value),
        SpecVersion::V3_4 => through::<ic::v3_4::Config>(&value),
        // Canonical already: nothing to read back.
        SpecVersion::V3_5 | SpecVersion::V2_2 => return Ok(value),
        SpecVersion::V3_6 => through::<ic::v3_6::Config>(&value),
    }
    .map_err(|detail| TranslateError::Serialize { target, detail })?;
    if let Some(field) = first_difference(&value, &back, "") {
        return Err(TranslateError::Dropped { target, field });
    }
    Ok(back)
}

fn through<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let mut back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    strip_empty(&mut back);
    Ok(back)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(value: Value) -> Config {
        serde_json::from_value(value).expect("3.5 shape")
    }

    #[test]
    fn guard_refuses_fields_the_target_cannot_carry() {
        // Without the hop's checks, shaping a LUKS config as 3.1 must not drop it silently.
        let c = cfg(json!({"ignition": {"version": "3.1.0"},
            "storage": {"luks": [{"name": "x", "device": "/dev/sda"}]}}));
        assert_eq!(
            shape_3x(c, SpecVersion::V3_1),
            Err(TranslateError::Dropped {
                target: SpecVersion::V3_1,
                field: "storage.luks".into()
            })
        );
        let kargs = cfg(json!({"ignition": {"version": "3.2.0"},
            "kernelArguments": {"shouldExist": ["a"]}}));
        assert_eq!(
            shape_3x(kargs, SpecVersion::V3_2).map_err(|e| e.field().to_string()),
            Err("kernelArguments.shouldExist".to_string())
        );
    }

    #[test]
    fn hop_3_3_to_3_2_restructures_clevis_raid_and_links() {
        let c = cfg(json!({"ignition": {"version": "3.5.0"}, "storage": {
            "luks": [{"name": "x", "device": "/dev/sda",
                      "clevis": {"custom": {"pin": "tpm2", "config": "{}"}}},
                     {"name": "y", "device": "/dev/sdb", "clevis": {"custom": {"needsNetwork": false}}}],
            "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/vda", "/dev/vdb"]}],
            "links": [{"path": "/etc/l", "target": "/etc/t"}]}}));
        let out = to_value_as(&c, SpecVersion::V3_2).expect("3.2");
        assert_eq!(
            out["storage"]["luks"][0]["clevis"],
            json!({"custom": {"pin": "tpm2", "config": "{}"}})
        );
        // 3.2's custom pin block has plain strings: an all-default block says so.
        assert_eq!(
            out["storage"]["luks"][1]["clevis"],
            json!({"custom": {"config": "", "pin": "", "needsNetwork": false}})
        );
        assert_eq!(out["storage"]["raid"][0]["level"], "raid1");
        assert_eq!(out["storage"]["links"][0]["target"], "/etc/t");
        for older in [SpecVersion::V3_1, SpecVersion::V3_0, SpecVersion::V2_2] {
            assert_eq!(
                to_value_as(&c, older).map_err(|e| e.field().to_string()),
                Err("storage.luks".to_string())
            );
        }
    }

    #[test]
    fn every_hop_names_its_target_and_keeps_the_version_string() {
        let c = crate::ignition::empty_config();
        for target in SpecVersion::ALL {
            let value = to_value_as(&c, target).expect("empty config translates");
            assert_eq!(value["ignition"]["version"], target.as_str());
        }
        let mut wrong = crate::ignition::empty_config();
        wrong.ignition.version = "3.4.0".into();
        let e = to_value_as(&wrong, SpecVersion::V3_3).unwrap_err();
        assert_eq!(
            (e.target(), e.kind(), e.field()),
            (SpecVersion::V3_3, "version", "ignition.version")
        );
    }
}

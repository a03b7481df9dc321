//! Ignition configs of every spec through parse, validation and translation to every served
//! spec: `ignition::parse_config_slice` (2.0, 2.1, 2.2, 3.0 to 3.5 in, canonical 3.5 out; 3.6
//! in, canonical 3.6 out), then `ignition::to_value_as` / `serialize_as` to each of 2.2 and 3.0
//! to 3.6. The input is the `spec.config` JSON of a MachineConfig.
//!
//! Properties, for a config that parses:
//! - it is canonical 3.5 or 3.6 (3.6 exactly when the input names 3.6.0) and serves in that
//!   spec (parsing validated it; so does the serve path), or, for an input of an older spec
//!   only, serving fails on 3.5's own validation (a 500, as the original);
//! - translating is deterministic, `serialize_as` writes exactly `to_value_as`'s value, and a
//!   failure names the requested spec;
//! - a translated config says the spec it was asked for, re-parses and validates in that spec
//!   (the 2.x path adds only the original's documented up-conversion refusals, see
//!   [`is_documented_v2_refusal`]), and translating the re-parsed config to the same spec gives
//!   the same document (translation is idempotent);
//! - the re-parsed config serves in its own canonical spec as well;
//! - from 3.6, every older spec is reached through 3.5: translating the 3.6 config to an older
//!   spec gives what translating its 3.5 translation does, and the 3.6→3.5 step fails exactly
//!   on what 3.5 cannot say (special mode bits, a custom Clevis pin other than tpm2/tang/sss),
//!   naming that field, and then every older spec fails too;
//! - a 3.5 config served as 3.6 loses exactly its special mode bits (Ignition's own 3.5→3.6
//!   translation masks them).

use machine_config_server::ignition::{
    parse_config, parse_config_slice, serialize_as, spec_of, to_value_as, Config, ParseError,
    SpecVersion, Stage, TranslateError,
};
use serde_json::Value;

pub fn check(data: &[u8]) {
    let Ok(config) = parse_config_slice(data) else {
        return;
    };
    if !from_canonical_spec(data) {
        // A config of an older spec is validated by its own spec's validator (and, from 2.x, the
        // 3.0 one on its way up: docs/ignition-translation.md §2, §5.3), not by 3.5's, which
        // serving runs in full (§3, step 7). What 3.5 refuses is a 500 at serve time, as in the
        // original. Found by this target: a `merge` (3.0) or `append` (2.2) without a source,
        // which those specs accept and 3.5 requires. Anything else must serve.
        if let Err(e) = to_value_as(&config, SpecVersion::V3_5) {
            assert!(
                matches!(
                    e,
                    TranslateError::Invalid {
                        spec: SpecVersion::V3_5,
                        stage: Stage::Input,
                        ..
                    }
                ),
                "a config of an older spec fails to serve as 3.5 other than by 3.5's validation: {e}"
            );
            return;
        }
    }
    check_config(&config);
}

/// Whether the input names spec 3.5.0 or 3.6.0, the canonical specs parsing validates with.
fn from_canonical_spec(data: &[u8]) -> bool {
    serde_json::from_slice::<Value>(data).is_ok_and(|v| {
        v.pointer("/ignition/version")
            .and_then(Value::as_str)
            .is_some_and(|version| version == "3.5.0" || version == "3.6.0")
    })
}

/// The properties above for one canonical config (also used by the MachineConfig target).
pub fn check_config(config: &Config) {
    let spec = spec_of(config);
    assert!(
        (config.ignition.version == "3.5.0" && spec == SpecVersion::V3_5)
            || spec == SpecVersion::V3_6,
        "parsing yields canonical 3.5 or 3.6, not {:?}",
        config.ignition.version
    );
    if let Err(e) = to_value_as(config, spec) {
        panic!("a config that parsed does not serve in its own spec {spec}: {e}");
    }
    for target in SpecVersion::ALL {
        check_translation(config, target);
    }
    match spec {
        SpecVersion::V3_6 => check_down_from_3_6(config),
        _ => check_up_to_3_6(config),
    }
}

/// 3.6 reaches every older spec through 3.5, and fails only on what 3.5 cannot say.
fn check_down_from_3_6(config: &Config) {
    let special = |mode: Option<i64>| mode.is_some_and(|m| m & 0o7000 != 0);
    let storage = config.storage.as_ref();
    let inexpressible = storage.is_some_and(|s| {
        s.directories.iter().flatten().any(|d| special(d.mode))
            || s.files.iter().flatten().any(|f| special(f.mode))
            || s.luks.iter().flatten().any(|l| {
                let pin = l.clevis.as_ref().and_then(|c| c.custom.as_ref());
                pin.and_then(|c| c.pin.as_deref())
                    .is_some_and(|p| !p.is_empty() && !["tpm2", "tang", "sss"].contains(&p))
            })
    });
    let as_3_5 = to_value_as(config, SpecVersion::V3_5);
    match (&as_3_5, inexpressible) {
        (Err(e), true) => {
            assert_eq!(e.kind(), "unsupported", "{e}");
            assert!(
                e.field().ends_with(".mode") || e.field().ends_with(".clevis.custom.pin"),
                "the 3.6→3.5 refusal names a mode or a pin: {e}"
            );
            for target in SpecVersion::ALL
                .into_iter()
                .filter(|v| *v < SpecVersion::V3_5)
            {
                assert_eq!(
                    to_value_as(config, target).map_err(|e| e.field().to_string()),
                    Err(e.field().to_string()),
                    "{target} fails on the same field as 3.5"
                );
            }
        }
        (Ok(_), true) => panic!("3.5 cannot say special mode bits or an arbitrary pin"),
        (Err(e), false) => panic!("a 3.6 config without 3.6-only content fails as 3.5: {e}"),
        (Ok(value), false) => {
            let via = parse_config(Some(value)).expect("the 3.5 translation re-parses");
            for target in SpecVersion::ALL
                .into_iter()
                .filter(|v| *v < SpecVersion::V3_5)
            {
                assert_eq!(
                    to_value_as(config, target).map_err(|e| e.field().to_string()),
                    to_value_as(&via, target).map_err(|e| e.field().to_string()),
                    "3.6 → {target} is 3.6 → 3.5 → {target}"
                );
            }
        }
    }
}

/// A 3.5 config asked for as 3.6 is Ignition's translation of it: the same config, with the
/// special bits of every mode masked.
fn check_up_to_3_6(config: &Config) {
    let Ok(mut expected) = to_value_as(config, SpecVersion::V3_5) else {
        return;
    };
    expected["ignition"]["version"] = "3.6.0".into();
    for kind in ["files", "directories"] {
        if let Some(Value::Array(nodes)) = expected.pointer_mut(&format!("/storage/{kind}")) {
            for node in nodes {
                if let Some(mode) = node.get("mode").and_then(Value::as_i64) {
                    node["mode"] = (mode & !0o7000).into();
                }
            }
        }
    }
    match to_value_as(config, SpecVersion::V3_6) {
        Ok(value) => assert_eq!(value, expected, "3.5 → 3.6 masks the special bits only"),
        // 3.6's rules accept everything 3.5's do (they only allow more Clevis pins).
        Err(e) => panic!("a 3.5 config that serves as 3.5 does not serve as 3.6: {e}"),
    }
}

fn check_translation(config: &Config, target: SpecVersion) {
    let translated = to_value_as(config, target);
    assert_eq!(translated, to_value_as(config, target), "deterministic");
    let value = match translated {
        Err(e) => {
            assert_eq!(
                e.target(),
                target,
                "the error names the requested spec: {e}"
            );
            assert_ne!(e.kind(), "serialize", "{e}");
            assert_ne!(e.kind(), "version", "{e}");
            return;
        }
        Ok(value) => value,
    };
    let bytes = serialize_as(config, target).expect("serialize_as agrees with to_value_as");
    assert_eq!(
        serde_json::from_slice::<Value>(&bytes).ok().as_ref(),
        Some(&value),
        "serialize_as writes to_value_as's value"
    );
    assert_eq!(
        value.pointer("/ignition/version").and_then(Value::as_str),
        Some(target.as_str()),
        "the translated config says spec {target}"
    );
    let reparsed = match parse_config(Some(&value)) {
        Ok(reparsed) => reparsed,
        Err(e) if target == SpecVersion::V2_2 && is_documented_v2_refusal(&e) => return,
        Err(e) => panic!("the {target} translation does not re-parse: {e}\n{value}"),
    };
    match to_value_as(&reparsed, target) {
        Ok(again) if target == SpecVersion::V2_2 => {
            // Reading a 2.2 config back is the original's de-duplication: files and units
            // come back in reverse, and a path with several entries (a file's appends) keeps
            // only its last (docs/ignition-translation.md §5.1).
            if let Some(expected) = reread_2_2(&value) {
                assert_eq!(
                    again, expected,
                    "translating the re-parsed {target} config again changes it"
                );
            }
        }
        Ok(again) => assert_eq!(
            again, value,
            "translating the re-parsed {target} config again changes it"
        ),
        Err(e) => panic!("the re-parsed {target} config does not translate to {target}: {e}"),
    }
    let own = spec_of(&reparsed);
    if let Err(e) = to_value_as(&reparsed, own) {
        panic!("the re-parsed {target} config does not serve in its own spec {own}: {e}");
    }
}

/// What a 2.2 document reads back as after the original's de-duplication and translates to
/// again: its files and units in reverse. `None` when a path has several entries (one is
/// kept, so the document does not come back).
fn reread_2_2(value: &Value) -> Option<Value> {
    let mut expected = value.clone();
    if let Some(files) = expected
        .pointer_mut("/storage/files")
        .and_then(Value::as_array_mut)
    {
        let mut paths = std::collections::HashSet::new();
        if !files.iter().all(|f| paths.insert(f["path"].to_string())) {
            return None;
        }
        files.reverse();
    }
    if let Some(units) = expected
        .pointer_mut("/systemd/units")
        .and_then(Value::as_array_mut)
    {
        units.reverse();
    }
    Some(expected)
}

/// A 2.2 document the original's 2.x→3 path refuses although it is valid 2.2
/// (docs/ignition-translation.md §5.1 to §5.3): any partition (the 2.3 step adds the deprecated
/// `size`/`start`), a filesystem other than `root` (no mapping), and a user other than `core`
/// (the MachineConfig de-duplication of users, "unexpected user with name"; found by this
/// target: a 3.x config with user `cqre` serves as 2.2 and reads back refused, as upstream).
/// Served 2.2 configs are read by Ignition 0.x, which accepts them; only reading them back as
/// a MachineConfig fails.
pub fn is_documented_v2_refusal(error: &ParseError) -> bool {
    match error {
        ParseError::ConvertV2 { detail } => {
            detail.contains("size is deprecated") || detail.contains("but no mapping was defined")
        }
        ParseError::UnexpectedUser { .. } => true,
        _ => false,
    }
}

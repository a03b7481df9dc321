//! Ignition configs of every spec through parse, validation and translation to every served
//! spec: `ignition::parse_config_slice` (2.0, 2.1, 2.2, 3.0 to 3.5 in, canonical 3.5 out), then
//! `ignition::to_value_as` / `serialize_as` to each of 2.2 and 3.0 to 3.5. The input is the
//! `spec.config` JSON of a MachineConfig.
//!
//! Properties, for a config that parses:
//! - it is canonical 3.5 and serves as 3.5 (parsing validated it; so does the serve path), or,
//!   for an input of an older spec only, serving fails on 3.5's own validation (a 500, as the
//!   original);
//! - translating is deterministic, `serialize_as` writes exactly `to_value_as`'s value, and a
//!   failure names the requested spec;
//! - a translated config says the spec it was asked for, re-parses and validates in that spec
//!   (the 2.x path adds only the original's documented up-conversion refusals, see
//!   [`is_documented_v2_refusal`]), and translating the re-parsed config to the same spec gives
//!   the same document (translation is idempotent);
//! - the re-parsed config serves in 3.5 as well.

use machine_config_server::ignition::{
    parse_config, parse_config_slice, serialize_as, to_value_as, Config, ParseError, SpecVersion,
    Stage, TranslateError,
};
use serde_json::Value;

pub fn check(data: &[u8]) {
    let Ok(config) = parse_config_slice(data) else {
        return;
    };
    if !from_spec_3_5(data) {
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

/// Whether the input names spec 3.5.0, the canonical spec parsing validates with.
fn from_spec_3_5(data: &[u8]) -> bool {
    serde_json::from_slice::<Value>(data).is_ok_and(|v| {
        v.pointer("/ignition/version")
            .and_then(Value::as_str)
            .is_some_and(|version| version == "3.5.0")
    })
}

/// The properties above for one canonical config (also used by the MachineConfig target).
pub fn check_config(config: &Config) {
    assert_eq!(
        config.ignition.version, "3.5.0",
        "parsing yields canonical 3.5"
    );
    if let Err(e) = to_value_as(config, SpecVersion::V3_5) {
        panic!("a config that parsed does not serve as 3.5: {e}");
    }
    for target in SpecVersion::ALL {
        check_translation(config, target);
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
        Ok(again) => assert_eq!(
            again, value,
            "translating the re-parsed {target} config again changes it"
        ),
        Err(e) => panic!("the re-parsed {target} config does not translate to {target}: {e}"),
    }
    if let Err(e) = to_value_as(&reparsed, SpecVersion::V3_5) {
        panic!("the re-parsed {target} config does not serve as 3.5: {e}");
    }
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

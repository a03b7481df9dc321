//! Reading a MachineConfig `spec.config` in any accepted spec (2.0, 2.1, 2.2, 3.0-3.6) into
//! the canonical form, as the original's `ParseAndConvertConfig`: detect the version from
//! `ignition.version` only, parse with that version's types (unknown keys dropped), validate
//! with that version's rules, translate up to 3.5. Spec 2 goes through [`super::v2`]. A 3.6
//! config stays 3.6 (the MCO of PR #6236 would translate everything up to 3.6, masking the
//! special mode bits of older configs; we keep older configs exactly as the original at
//! 7ff337a4f reads them, docs/ignition-3.6.md).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::error::{ParseError, Report};
use super::json::strip_empty;
use super::validate::validate;
use super::version::{GoSemver, SpecVersion};
use super::{empty_config, v2, Config};

/// Parse a `spec.config` value. `None` and JSON `null` are the empty 3.5 config. The result
/// is canonical 3.5, or canonical 3.6 for a config of spec 3.6 ([`super::spec_of`]).
pub fn parse_config(raw: Option<&Value>) -> Result<Config, ParseError> {
    parse_config_owned(raw.cloned())
}

/// [`parse_config`] of a value the caller gives up (no copy of it is made: a render inflates
/// its MachineConfig's config for this parse only).
pub fn parse_config_owned(raw: Option<Value>) -> Result<Config, ParseError> {
    match raw {
        None | Some(Value::Null) => Ok(empty_config()),
        Some(value) => parse_value(value),
    }
}

/// Parse raw JSON bytes. Empty input and `null` are the empty 3.5 config; duplicate keys
/// resolve to the last one, as in Go.
pub fn parse_config_slice(bytes: &[u8]) -> Result<Config, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(empty_config());
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ParseError::Syntax {
        detail: e.to_string(),
    })?;
    parse_config(Some(&value))
}

/// The `ignition.version` string, read the way the original's version stub reads it.
fn version_string(value: &Value) -> Result<String, ParseError> {
    let type_error = |what: &str| ParseError::Syntax {
        detail: format!("{what} has the wrong type"),
    };
    let ignition = match value {
        Value::Object(map) => map.get("ignition"),
        _ => return Err(type_error("the config")),
    };
    let version = match ignition {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => map.get("version"),
        Some(_) => return Err(type_error("ignition")),
    };
    match version {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(type_error("ignition.version")),
    }
}

fn parse_value(value: Value) -> Result<Config, ParseError> {
    let version_text = version_string(&value)?;
    let version = GoSemver::parse(&version_text).ok_or(ParseError::InvalidVersion)?;
    let spec3 = [
        SpecVersion::V3_6,
        SpecVersion::V3_5,
        SpecVersion::V3_4,
        SpecVersion::V3_3,
        SpecVersion::V3_2,
        SpecVersion::V3_1,
        SpecVersion::V3_0,
    ]
    .into_iter()
    .find(|v| version.is_exactly(*v));
    match spec3 {
        Some(spec) => parse_v3(value, spec, &version_text),
        None => v2::parse(value, &version, &version_text),
    }
}

/// Parse a 3.x config with its own version's types, then carry it into the canonical structs
/// (3.5's, which are 3.6's as well).
fn parse_v3(value: Value, spec: SpecVersion, version_text: &str) -> Result<Config, ParseError> {
    use ignition_config as ic;
    let as_json = match spec {
        SpecVersion::V3_0 => through::<ic::v3_0::Config>(value),
        SpecVersion::V3_1 => through::<ic::v3_1::Config>(value),
        SpecVersion::V3_2 => through::<ic::v3_2::Config>(value),
        SpecVersion::V3_3 => through::<ic::v3_3::Config>(value),
        SpecVersion::V3_4 => through::<ic::v3_4::Config>(value),
        SpecVersion::V3_5 | SpecVersion::V2_2 => through::<Config>(value),
        SpecVersion::V3_6 => through::<ic::v3_6::Config>(value),
    };
    let invalid = |message: String| {
        let mut report = Report::default();
        report.add("", message);
        ParseError::InvalidV3 {
            version: version_text.to_string(),
            report,
        }
    };
    let as_json = as_json.map_err(invalid)?;
    let mut config: Config = serde_json::from_value(as_json).map_err(|e| invalid(e.to_string()))?;
    normalize(&mut config);
    validate(&config, spec)
        .into_result()
        .map_err(|report| ParseError::InvalidV3 {
            version: version_text.to_string(),
            report,
        })?;
    if spec < SpecVersion::V3_5 {
        config.ignition.version = SpecVersion::V3_5.as_str().to_string();
    }
    Ok(config)
}

/// Deserialize into `T` (dropping keys `T` does not know) and serialize back, without
/// nulls and empty members.
fn through<T: DeserializeOwned + Serialize>(value: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    strip_empty(&mut back);
    Ok(back)
}

/// Bring a config to the shape the original's marshal/parse round trip leaves: no empty
/// lists or objects (dropped by serialization already) and no partition number 0.
pub(crate) fn normalize(config: &mut Config) {
    if let Some(storage) = &mut config.storage {
        for disk in storage.disks.iter_mut().flatten() {
            for partition in disk.partitions.iter_mut().flatten() {
                if partition.number == Some(0) {
                    partition.number = None;
                }
            }
        }
    }
}

/// Normalize any canonical config: serialize, strip empty members, read back.
pub(crate) fn round_trip(config: &Config) -> Result<Config, String> {
    let value = serde_json::to_value(config).map_err(|e| e.to_string())?;
    round_trip_value(value)
}

/// [`round_trip`] of a config the caller gives up: it is dropped as soon as it is written out.
pub(crate) fn round_trip_owned(config: Config) -> Result<Config, String> {
    let value = serde_json::to_value(&config).map_err(|e| e.to_string())?;
    drop(config);
    round_trip_value(value)
}

fn round_trip_value(mut value: Value) -> Result<Config, String> {
    strip_empty(&mut value);
    let mut typed: Config = serde_json::from_value(value).map_err(|e| e.to_string())?;
    normalize(&mut typed);
    Ok(typed)
}

//! Ignition spec engine: versions, parsing of every accepted spec, translation between specs,
//! Accept-header negotiation and data URLs. Pure: no I/O, no logging.
//!
//! PLACEHOLDER CONTRACT (the ignition-engine work replaces this file and its siblings; the public
//! names and signatures below are what the rest of the crate calls):
//! - [`SpecVersion`], [`Config`] (= `ignition_config::v3_5::Config`, the canonical internal form)
//! - [`parse_config`]: any accepted spec (2.0-2.2, 3.0-3.5) -> canonical 3.5
//! - [`serialize_as`]: canonical 3.5 -> JSON bytes of the requested spec, empty fields omitted
//! - [`to_value_as`]: the same as a `serde_json::Value` (for the encapsulated MachineConfig)
//! - [`empty_config`]: an empty 3.5 config
//! - [`accept::negotiate`], [`dataurl::encode`], [`dataurl::decode`]

pub mod accept;
pub mod dataurl;

use std::fmt;

/// Canonical internal form of every config.
pub type Config = ignition_config::v3_5::Config;

/// An Ignition spec version this server can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpecVersion {
    V2_2,
    V3_0,
    V3_1,
    V3_2,
    V3_3,
    V3_4,
    V3_5,
}

impl SpecVersion {
    /// Every servable version, oldest first.
    pub const ALL: [SpecVersion; 7] = [
        Self::V2_2,
        Self::V3_0,
        Self::V3_1,
        Self::V3_2,
        Self::V3_3,
        Self::V3_4,
        Self::V3_5,
    ];
    /// The newest version, the canonical internal one.
    pub const NEWEST: SpecVersion = Self::V3_5;

    /// Full semver string as written in `ignition.version`, e.g. `"3.5.0"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2_2 => "2.2.0",
            Self::V3_0 => "3.0.0",
            Self::V3_1 => "3.1.0",
            Self::V3_2 => "3.2.0",
            Self::V3_3 => "3.3.0",
            Self::V3_4 => "3.4.0",
            Self::V3_5 => "3.5.0",
        }
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a `spec.config` could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("parsing Ignition config failed: {0}")]
pub struct ParseError(pub String);

/// Why a config could not be expressed in the requested spec.
#[derive(Debug, thiserror::Error)]
#[error("translating to {target} failed: {reason}")]
pub struct TranslateError {
    pub target: SpecVersion,
    pub reason: String,
}

/// An empty canonical config (`{"ignition":{"version":"3.5.0"}}`).
pub fn empty_config() -> Config {
    Config::new(ignition_config::v3_5::Ignition::new("3.5.0".into()))
}

/// Parse a MachineConfig `spec.config` in any accepted spec into the canonical form.
/// `None` or JSON `null` is an empty config.
pub fn parse_config(raw: Option<&serde_json::Value>) -> Result<Config, ParseError> {
    match raw {
        None | Some(serde_json::Value::Null) => Ok(empty_config()),
        Some(value) => serde_json::from_value(value.clone()).map_err(|e| ParseError(e.to_string())),
    }
}

/// Translate the canonical config to `target` as a JSON value, empty fields omitted.
pub fn to_value_as(
    config: &Config,
    target: SpecVersion,
) -> Result<serde_json::Value, TranslateError> {
    if target != SpecVersion::V3_5 {
        return Err(TranslateError {
            target,
            reason: "placeholder engine serves only 3.5".into(),
        });
    }
    serde_json::to_value(config).map_err(|e| TranslateError {
        target,
        reason: e.to_string(),
    })
}

/// Translate the canonical config to `target` and serialize it.
pub fn serialize_as(config: &Config, target: SpecVersion) -> Result<Vec<u8>, TranslateError> {
    let value = to_value_as(config, target)?;
    serde_json::to_vec(&value).map_err(|e| TranslateError {
        target,
        reason: e.to_string(),
    })
}

//! Ignition spec 2: the 2.2 types, the spec-2 validator, reading 2.0/2.1/2.2 configs into the
//! canonical 3.5 form ([`up`], [`older`]) and writing 2.2 ([`down`]).

pub(crate) mod down;
pub(crate) mod older;
pub(crate) mod types;
pub(crate) mod up;
pub(crate) mod validate;

use serde_json::Value;

use super::error::ParseError;
use super::version::GoSemver;
use super::Config;

/// Parse a config whose version is not an exact 3.x version. Exactly 2.2.0 is read as 2.2;
/// 2.1.0 and 2.0.0 are read with their own shapes and upgraded; any other version (2.2.1,
/// 2.3.0, 3.6.0, 1.x, pre-releases) is unknown, as in the original's parser chain.
pub(crate) fn parse(value: Value, version: &GoSemver, text: &str) -> Result<Config, ParseError> {
    let invalid = |detail: String| ParseError::InvalidV2 { detail };
    let config = if *version == GoSemver::new(2, 2, 0) {
        serde_json::from_value::<types::Config>(value).map_err(|e| invalid(e.to_string()))?
    } else if *version == GoSemver::new(2, 1, 0) {
        older::from_v2_1(value).map_err(invalid)?
    } else if *version == GoSemver::new(2, 0, 0) {
        older::from_v2_0(value).map_err(invalid)?
    } else {
        return Err(ParseError::UnknownVersion {
            version: text.to_string(),
        });
    };
    validate::validate(&config, false)
        .into_result()
        .map_err(|report| invalid(report.to_string()))?;
    up::to_canonical(config)
}

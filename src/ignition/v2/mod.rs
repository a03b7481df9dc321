//! Ignition spec 2: the 2.2 types, the spec-2 validator, reading 2.0/2.1/2.2 configs into the
//! canonical 3.5 form ([`up`]) and writing 2.2 ([`down`]).

pub(crate) mod down;
pub(crate) mod types;
pub(crate) mod validate;

use serde_json::Value;

use super::error::ParseError;
use super::version::GoSemver;
use super::Config;

/// Parse a config whose version is not an exact 3.x version: 2.2.0, or 2.0.0/2.1.0 (read with
/// their own shapes and upgraded); any other version is unknown.
pub(crate) fn parse(value: Value, version: &GoSemver, text: &str) -> Result<Config, ParseError> {
    let _ = value;
    let accepted = [(2, 2), (2, 1), (2, 0)]
        .iter()
        .any(|&(major, minor)| *version == GoSemver::new(major, minor, 0));
    if !accepted {
        return Err(ParseError::UnknownVersion {
            version: text.to_string(),
        });
    }
    Err(ParseError::ConvertV2 {
        detail: "spec 2 input is not supported yet".to_string(),
    })
}

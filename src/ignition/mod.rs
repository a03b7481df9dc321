//! Ignition spec engine: spec versions, parsing of every spec a MachineConfig may carry,
//! translation to every spec we serve, Accept-header negotiation and data URLs.
//! Pure: no I/O, no logging, no global state. Owns nothing outside this module.
//!
//! - [`SpecVersion`], [`Config`] (= `ignition_config::v3_5::Config`, the canonical form; a
//!   config of spec 3.6 is held in the same structs, see [`Config`]).
//! - [`parse_config`] / [`parse_config_slice`]: 2.0, 2.1, 2.2 and 3.0-3.5 → canonical 3.5, and
//!   3.6 → canonical 3.6, with the original's version detection, validation and up-translation.
//! - [`to_value_as`] / [`serialize_as`]: canonical 3.6 or 3.5 → 3.6, 3.5, 3.4, 3.3, 3.2, 3.1,
//!   3.0 or 2.2, validated as the original's serve path does, translated hop by hop, empty
//!   members omitted. A config that cannot be expressed is a [`TranslateError`] naming the field.
//!   [`serialize_as`] writes the original's bytes: Go's field order and `clarketm/json`'s
//!   escaping ([`gojson`]).
//! - [`accept::negotiate`] / [`accept::choose`] (the served version follows the Accept header
//!   and the rendered config's spec), [`dataurl::encode`] / [`dataurl::decode`].
//! - [`client::IgnitionRelease`]: the Ignition client's own release, from a request's
//!   `User-Agent`.
//!
//! Where we deliberately differ from the original (each has a test named `deviation_*`):
//! 3.0 is served (a 3.1→3.0 hop); an enabled LUKS `cex` fails 3.5→3.4 instead of vanishing;
//! Tang `advertisement` survives between 3.4 and 3.5; in 2.2 output sourceless files are
//! empty `data:,` files, partition deletion is refused, and filesystems own whole path
//! components (a filesystem at `/` is `root`). The 2.x de-duplication is the original's (order
//! reversed, one entry per path). Spec 3.6 (docs/ignition-3.6.md) follows the MCO of PR #6236 for
//! rendered configs of spec 3.6 only; configs of 3.5 and older answer exactly as before.

pub mod accept;
pub mod client;
pub mod dataurl;
mod error;
mod go_order;
pub mod gojson;
mod gostd;
mod json;
mod parse;
mod translate;
mod unit;
mod v2;
mod validate;
mod version;

pub use error::{ParseError, Problem, Report, Stage, TranslateError};
pub use parse::{parse_config, parse_config_owned, parse_config_slice};
pub use translate::{into_value_as, order_as, serialize_as, to_value_as, write_as};
pub use validate::{check_file_modes, FileModeError};
pub use version::SpecVersion;

/// Canonical internal form of every config: the structs of spec 3.5, which are those of spec
/// 3.6 too (the two JSON schemas are identical; `ignition-config` 0.6.1 generates the same
/// fields for both). `ignition.version` says whose rules the content follows: `3.5.0` for
/// every config parsed from spec 3.5 or older (special mode bits are kept as written, as the
/// original server does), `3.6.0` for a config parsed from spec 3.6 (special mode bits are
/// honoured by Ignition, any custom Clevis pin is allowed). See [`spec_of`].
pub type Config = ignition_config::v3_5::Config;

/// The spec whose rules a canonical config follows: 3.6 when its version is 3.6.0, else 3.5
/// (the canonical form of 3.5 and every older spec).
pub fn spec_of(config: &Config) -> SpecVersion {
    rendered_spec(&config.ignition.version)
}

/// The spec a rendered config is served from, read from its `ignition.version` as written
/// (before parsing): 3.6 for exactly 3.6.0 (as `go-semver` compares it), else 3.5. What the
/// negotiation needs to know of a rendered config ([`accept::choose`]).
pub fn rendered_spec(version: &str) -> SpecVersion {
    match version::GoSemver::parse(version) {
        Some(v) if v.is_exactly(SpecVersion::V3_6) => SpecVersion::V3_6,
        _ => SpecVersion::LEGACY_NEWEST,
    }
}

/// The `ignition.version` string of a `spec.config` value, if it has one.
pub fn version_text(raw: Option<&serde_json::Value>) -> &str {
    raw.and_then(|v| v.pointer("/ignition/version"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

/// An empty canonical 3.5 config (`{"ignition":{"version":"3.5.0"}}`).
pub fn empty_config() -> Config {
    Config::new(ignition_config::v3_5::Ignition::new(
        SpecVersion::V3_5.as_str().to_string(),
    ))
}

#[cfg(test)]
mod tests;

//! Ignition spec engine: spec versions, parsing of every spec a MachineConfig may carry,
//! translation to every spec we serve, Accept-header negotiation and data URLs.
//! Pure: no I/O, no logging, no global state. Owns nothing outside this module.
//!
//! - [`SpecVersion`], [`Config`] (= `ignition_config::v3_5::Config`, the canonical form).
//! - [`parse_config`] / [`parse_config_slice`]: 2.0, 2.1, 2.2 and 3.0-3.5 → canonical 3.5,
//!   with the original's version detection, validation and up-translation.
//! - [`to_value_as`] / [`serialize_as`]: canonical 3.5 → 3.5, 3.4, 3.3, 3.2, 3.1, 3.0 or 2.2,
//!   validated as the original's serve path does, translated hop by hop, empty members
//!   omitted. A config that cannot be expressed is a [`TranslateError`] naming the field.
//! - [`accept::negotiate`], [`dataurl::encode`] / [`dataurl::decode`].
//! - [`client::IgnitionRelease`]: the Ignition client's own release, from a request's
//!   `User-Agent`.
//!
//! Where we deliberately differ from the original (each has a test named `deviation_*`):
//! 3.0 is served (a 3.1→3.0 hop); an enabled LUKS `cex` fails 3.5→3.4 instead of vanishing;
//! Tang `advertisement` survives between 3.4 and 3.5; in 2.2 output sourceless files are
//! empty `data:,` files, partition deletion is refused, and filesystems own whole path
//! components (a filesystem at `/` is `root`); 2.x de-duplication keeps the original order
//! and every `append`.

pub mod accept;
pub mod client;
pub mod dataurl;
mod error;
mod gostd;
mod json;
mod parse;
mod translate;
mod unit;
mod v2;
mod validate;
mod version;

pub use error::{ParseError, Problem, Report, Stage, TranslateError};
pub use parse::{parse_config, parse_config_slice};
pub use translate::{serialize_as, to_value_as};
pub use validate::{check_file_modes, FileModeError};
pub use version::SpecVersion;

/// Canonical internal form of every config.
pub type Config = ignition_config::v3_5::Config;

/// An empty canonical config (`{"ignition":{"version":"3.5.0"}}`).
pub fn empty_config() -> Config {
    Config::new(ignition_config::v3_5::Ignition::new(
        SpecVersion::V3_5.as_str().to_string(),
    ))
}

#[cfg(test)]
mod tests;

//! The two error types of the spec engine ([`ParseError`], [`TranslateError`]) and the
//! validation [`Report`] they carry. Texts follow the original's error strings; paths use
//! `storage.files[1].path` notation. No logic beyond formatting lives here.

use std::fmt;

use super::version::{SpecVersion, SUPPORTED_MINORS};

/// One fatal finding of a validator: where, and what the original would say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Field path, e.g. `storage.files[1]` (empty for the whole config).
    pub path: String,
    pub message: String,
}

/// Every fatal finding of one validation pass, in the order the original reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub problems: Vec<Problem>,
}

impl Report {
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// Path of the first problem (the field that blocks the config).
    pub fn first_path(&self) -> &str {
        self.problems.first().map_or("", |p| p.path.as_str())
    }

    pub(crate) fn into_result(self) -> Result<(), Report> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            if problem.path.is_empty() {
                write!(f, "error: {}", problem.message)?;
            } else {
                write!(f, "error at {}: {}", problem.path, problem.message)?;
            }
        }
        Ok(())
    }
}

/// Why a `spec.config` could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not JSON, or a field of the wrong type.
    #[error("parsing Ignition config failed: config is not valid: {detail}")]
    Syntax { detail: String },
    /// `ignition.version` is missing or not a semantic version.
    #[error("parsing Ignition config failed: invalid version. Supported spec versions: {SUPPORTED_MINORS}")]
    InvalidVersion,
    /// A well-formed version this server does not accept (2.3.0, 3.7.0, ...).
    #[error("parsing Ignition config failed: unknown version. Supported spec versions: {SUPPORTED_MINORS}")]
    UnknownVersion { version: String },
    /// A 3.x config that its version's validator rejects.
    #[error(
        "parsing Ignition config spec v3 failed with error: config is not valid\nReport: {report}"
    )]
    InvalidV3 { version: String, report: Report },
    /// A 2.x config that the spec-2 validator rejects or that cannot be decoded.
    #[error("parsing Ignition spec v2 failed with error: config is not valid\nReport: {detail}")]
    InvalidV2 { detail: String },
    /// The MachineConfig de-duplication of a 2.x config found a user other than `core`.
    #[error("unexpected user with name: {name}. Only core user is supported")]
    UnexpectedUser { name: String },
    /// A valid 2.x config that cannot be expressed in spec 3.
    #[error("failed to convert Ignition config spec v2 to v3: unable to convert Ignition spec v2 config to v3: {detail}")]
    ConvertV2 { detail: String },
}

impl ParseError {
    /// Short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Syntax { .. } => "syntax",
            Self::InvalidVersion => "invalid_version",
            Self::UnknownVersion { .. } => "unknown_version",
            Self::InvalidV3 { .. } => "invalid_v3",
            Self::InvalidV2 { .. } => "invalid_v2",
            Self::UnexpectedUser { .. } => "unexpected_user",
            Self::ConvertV2 { .. } => "convert_v2",
        }
    }
}

/// Which validation pass rejected a config during translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Validating the input of a step (the serve path validates the 3.5 or 3.6 config first).
    Input,
    /// Validating what a down-translation hop produced.
    Output,
}

/// Why a config could not be expressed in the requested spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// The canonical config carries neither version 3.5.0 nor 3.6.0.
    #[error(
        "translating to spec {target} failed: config version {found:?} is neither 3.5.0 nor 3.6.0"
    )]
    Version { target: SpecVersion, found: String },
    /// A validator rejected the config at `spec` (input of a step or output of a hop).
    #[error("translating to spec {target} failed: {}spec {spec} config:\n{report}", match .stage { Stage::Input => "invalid ", Stage::Output => "converted spec has unexpected fatal error in " })]
    Invalid {
        target: SpecVersion,
        spec: SpecVersion,
        stage: Stage,
        report: Report,
    },
    /// A field the older spec cannot express is set (a hop's own check).
    #[error("translating to spec {target} failed: {field}: {reason}")]
    Unsupported {
        target: SpecVersion,
        field: String,
        reason: String,
    },
    /// A set field has no place in the target spec and would be dropped silently.
    #[error("translating to spec {target} failed: {field} has no equivalent in spec {target} and would be dropped")]
    Dropped { target: SpecVersion, field: String },
    /// The translated config could not be serialized (should not happen).
    #[error("translating to spec {target} failed: serialization: {detail}")]
    Serialize { target: SpecVersion, detail: String },
}

impl TranslateError {
    /// The spec version that was asked for.
    pub fn target(&self) -> SpecVersion {
        match self {
            Self::Version { target, .. }
            | Self::Invalid { target, .. }
            | Self::Unsupported { target, .. }
            | Self::Dropped { target, .. }
            | Self::Serialize { target, .. } => *target,
        }
    }

    /// The path of the field that blocks the translation (`storage.luks[0].cex`).
    pub fn field(&self) -> &str {
        match self {
            Self::Version { .. } => "ignition.version",
            Self::Invalid { report, .. } => report.first_path(),
            Self::Unsupported { field, .. } | Self::Dropped { field, .. } => field,
            Self::Serialize { .. } => "",
        }
    }

    /// Short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Version { .. } => "version",
            Self::Invalid {
                stage: Stage::Input,
                ..
            } => "invalid",
            Self::Invalid {
                stage: Stage::Output,
                ..
            } => "invalid_output",
            Self::Unsupported { .. } => "unsupported",
            Self::Dropped { .. } => "dropped",
            Self::Serialize { .. } => "serialize",
        }
    }
}

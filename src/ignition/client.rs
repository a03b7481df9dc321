//! The Ignition *client's* release, as a config request's `User-Agent` names it: which boot
//! image a machine started from (an old boot image carries an old Ignition). Pure: no I/O.
//!
//! Ignition sets `User-Agent: Ignition/<version>` on every fetch (`internal/resource/http.go`),
//! `<version>` being what its build was given: `git describe` output (`v2.26.0`,
//! `v2.14.0-3-gabcdef0-dirty`) or a package's version (`2.20.0`). The header is parsed strictly
//! ([`IgnitionRelease::from_user_agent`]): the whole value must be `Ignition/`, an optional `v`,
//! `MAJOR.MINOR.PATCH` (decimal, no leading zeros) and at most a short `-` or `+` suffix of
//! `[0-9A-Za-z.+-]`. Anything else (curl, a browser, a forged or decorated header) is "unknown":
//! never a guess.
//!
//! Versions compare by `MAJOR.MINOR.PATCH` only; a suffix (a build a few commits past a tag)
//! neither raises nor lowers a release. Metrics use [`IgnitionRelease::minor_label`], whose
//! values are bounded by construction.

use std::cmp::Ordering;
use std::fmt;

/// The `User-Agent` prefix of Ignition's fetches.
const PREFIX: &str = "Ignition/";
/// Longest suffix accepted after `MAJOR.MINOR.PATCH` (a `git describe` tail fits easily).
const MAX_SUFFIX: usize = 64;
/// Largest component accepted (six digits: far beyond any release, small enough to never
/// overflow).
const MAX_COMPONENT: u32 = 999_999;
/// Label value of requests whose `User-Agent` is not an Ignition release.
pub const UNKNOWN_LABEL: &str = "unknown";
/// Label value of Ignition releases outside the bounded label range.
pub const OTHER_LABEL: &str = "other";
/// Largest major version given its own label (Ignition releases are 0.x and 2.x so far).
const LABEL_MAX_MAJOR: u32 = 3;
/// Largest minor version given its own label.
const LABEL_MAX_MINOR: u32 = 63;

/// An Ignition release, from a `User-Agent` or the `--min-ignition-version` flag.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IgnitionRelease {
    major: u32,
    minor: u32,
    patch: u32,
    /// `MAJOR.MINOR.PATCH` and the suffix as sent, without a leading `v`.
    text: String,
}

/// Why a `--min-ignition-version` value is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an Ignition release (expected MAJOR.MINOR.PATCH, e.g. 2.20.0)")]
pub struct NotARelease(pub String);

impl IgnitionRelease {
    /// The release a config request's `User-Agent` header names, if the header is exactly an
    /// Ignition one (see the module docs); `None` for anything else.
    pub fn from_user_agent(header: Option<&str>) -> Option<IgnitionRelease> {
        let version = header?.strip_prefix(PREFIX)?;
        Self::parse_version(version, true)
    }

    /// A release given on the command line: `MAJOR.MINOR.PATCH` or `MAJOR.MINOR` (patch 0),
    /// an optional leading `v`, no suffix.
    pub fn parse_flag(text: &str) -> Result<IgnitionRelease, NotARelease> {
        let trimmed = text.trim();
        let with_patch = if trimmed.trim_start_matches('v').matches('.').count() == 1 {
            format!("{trimmed}.0")
        } else {
            trimmed.to_owned()
        };
        Self::parse_version(&with_patch, false).ok_or_else(|| NotARelease(text.to_owned()))
    }

    fn parse_version(version: &str, allow_suffix: bool) -> Option<IgnitionRelease> {
        let version = version.strip_prefix('v').unwrap_or(version);
        let core_end = version.find(['-', '+']).unwrap_or(version.len());
        let (core, suffix) = version.split_at(core_end);
        let mut parts = core.split('.');
        let major = component(parts.next()?)?;
        let minor = component(parts.next()?)?;
        let patch = component(parts.next()?)?;
        if parts.next().is_some() {
            return None;
        }
        if !suffix.is_empty() {
            let tail = &suffix[1..];
            let valid = allow_suffix
                && !tail.is_empty()
                && suffix.len() <= MAX_SUFFIX
                && tail
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
            if !valid {
                return None;
            }
        }
        Some(IgnitionRelease {
            major,
            minor,
            patch,
            text: version.to_owned(),
        })
    }

    /// The version as sent, without a leading `v` (e.g. `2.26.0`, `2.14.0-3-gabcdef0`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `(major, minor, patch)`.
    pub fn numbers(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }

    /// True when this release is older than `minimum` (by `MAJOR.MINOR.PATCH`).
    pub fn is_older_than(&self, minimum: &IgnitionRelease) -> bool {
        self.numbers() < minimum.numbers()
    }

    /// The metric label of this release: `MAJOR.MINOR` for majors up to 3 and minors up to 63,
    /// else [`OTHER_LABEL`]: at most 4 * 64 + 2 values whatever clients send.
    pub fn minor_label(&self) -> String {
        if self.major <= LABEL_MAX_MAJOR && self.minor <= LABEL_MAX_MINOR {
            format!("{}.{}", self.major, self.minor)
        } else {
            OTHER_LABEL.to_owned()
        }
    }

    /// The metric label of a request's client: [`IgnitionRelease::minor_label`], or
    /// [`UNKNOWN_LABEL`] when the `User-Agent` named no Ignition release.
    pub fn label_of(release: Option<&IgnitionRelease>) -> String {
        release.map_or_else(|| UNKNOWN_LABEL.to_owned(), IgnitionRelease::minor_label)
    }
}

impl PartialOrd for IgnitionRelease {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.numbers().cmp(&other.numbers()))
    }
}

impl fmt::Display for IgnitionRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One decimal component: digits only, no leading zero (except `0` itself), bounded.
fn component(text: &str) -> Option<u32> {
    let bytes = text.as_bytes();
    if bytes.is_empty()
        || bytes.len() > 6
        || !bytes.iter().all(u8::is_ascii_digit)
        || (bytes.len() > 1 && bytes[0] == b'0')
    {
        return None;
    }
    text.parse().ok().filter(|n| *n <= MAX_COMPONENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ua(text: &str) -> Option<String> {
        IgnitionRelease::from_user_agent(Some(text)).map(|r| r.as_str().to_owned())
    }

    #[test]
    fn ignition_user_agents_are_parsed_strictly() {
        assert_eq!(ua("Ignition/2.26.0").as_deref(), Some("2.26.0"));
        assert_eq!(ua("Ignition/v2.26.0").as_deref(), Some("2.26.0"));
        assert_eq!(
            ua("Ignition/v2.14.0-3-gabcdef0-dirty").as_deref(),
            Some("2.14.0-3-gabcdef0-dirty")
        );
        assert_eq!(ua("Ignition/0.35.0").as_deref(), Some("0.35.0"));
        for bad in [
            "",
            "Ignition",
            "Ignition/",
            "ignition/2.26.0",
            "Ignition/2.26",
            "Ignition/2.26.0.1",
            "Ignition/02.26.0",
            "Ignition/2.026.0",
            "Ignition/2.26.0 (Linux)",
            " Ignition/2.26.0",
            "Ignition/2.26.0-",
            "Ignition/2.26.0-a b",
            "Ignition/2.26.0-é",
            "Ignition/was not built properly",
            "Ignition/1234567.0.0",
            "curl/8.5.0",
            "Mozilla/5.0 Ignition/2.26.0",
        ] {
            assert_eq!(ua(bad), None, "{bad:?}");
        }
        let long = format!("Ignition/2.26.0-{}", "a".repeat(MAX_SUFFIX));
        assert_eq!(ua(&long), None);
        assert_eq!(IgnitionRelease::from_user_agent(None), None);
    }

    #[test]
    fn releases_compare_by_numbers_and_label_by_minor() {
        let min = IgnitionRelease::parse_flag("2.20").unwrap();
        assert_eq!(min.as_str(), "2.20.0");
        let old = IgnitionRelease::from_user_agent(Some("Ignition/2.14.0-3-gabc")).unwrap();
        let new = IgnitionRelease::from_user_agent(Some("Ignition/v2.20.0")).unwrap();
        assert!(old.is_older_than(&min));
        assert!(!new.is_older_than(&min));
        assert!(
            !IgnitionRelease::from_user_agent(Some("Ignition/2.20.0-rc1"))
                .unwrap()
                .is_older_than(&min),
            "a suffix neither raises nor lowers a release"
        );
        assert_eq!(old.minor_label(), "2.14");
        assert_eq!(
            IgnitionRelease::from_user_agent(Some("Ignition/2.64.0"))
                .unwrap()
                .minor_label(),
            OTHER_LABEL
        );
        assert_eq!(
            IgnitionRelease::from_user_agent(Some("Ignition/4.0.0"))
                .unwrap()
                .minor_label(),
            OTHER_LABEL
        );
        assert_eq!(IgnitionRelease::label_of(None), UNKNOWN_LABEL);
        for bad in ["", "2", "2.x.0", "2.20.0-rc1", "latest", "2.20.0.0"] {
            assert!(IgnitionRelease::parse_flag(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            IgnitionRelease::parse_flag("v2.26.1").unwrap().numbers(),
            (2, 26, 1)
        );
    }
}

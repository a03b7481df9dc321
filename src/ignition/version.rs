//! Spec versions this server knows, and semantic-version parsing that accepts exactly what
//! the original's semver library (`go-semver`) accepts. Owns no I/O and no config types.

use std::cmp::Ordering;
use std::fmt;

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
    V3_6,
}

impl SpecVersion {
    /// Every servable version, oldest first. 3.6 is served only for a rendered config of
    /// spec 3.6 (see [`super::accept::choose`]).
    pub const ALL: [SpecVersion; 8] = [
        Self::V2_2,
        Self::V3_0,
        Self::V3_1,
        Self::V3_2,
        Self::V3_3,
        Self::V3_4,
        Self::V3_5,
        Self::V3_6,
    ];
    /// The newest version this server knows (what a request for a newer 3.x minor asks for).
    pub const NEWEST: SpecVersion = Self::V3_6;
    /// The newest version of the original server at 7ff337a4f, and the spec every rendered
    /// config of spec 3.5 or older is held in (see [`super::Config`]).
    pub const LEGACY_NEWEST: SpecVersion = Self::V3_5;

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
            Self::V3_6 => "3.6.0",
        }
    }

    /// `(major, minor)` of this version.
    pub fn major_minor(self) -> (i64, i64) {
        match self {
            Self::V2_2 => (2, 2),
            Self::V3_0 => (3, 0),
            Self::V3_1 => (3, 1),
            Self::V3_2 => (3, 2),
            Self::V3_3 => (3, 3),
            Self::V3_4 => (3, 4),
            Self::V3_5 => (3, 5),
            Self::V3_6 => (3, 6),
        }
    }

    /// The version with this major and minor number, if we serve it.
    pub fn from_major_minor(major: i64, minor: i64) -> Option<SpecVersion> {
        Self::ALL
            .into_iter()
            .find(|v| v.major_minor() == (major, minor))
    }

    /// The next older 3.x version (the target of a down-translation hop from `self`).
    pub(crate) fn previous_3x(self) -> Option<SpecVersion> {
        match self {
            Self::V3_6 => Some(Self::V3_5),
            Self::V3_5 => Some(Self::V3_4),
            Self::V3_4 => Some(Self::V3_3),
            Self::V3_3 => Some(Self::V3_2),
            Self::V3_2 => Some(Self::V3_1),
            Self::V3_1 => Some(Self::V3_0),
            Self::V3_0 | Self::V2_2 => None,
        }
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The supported minor versions as the original lists them in its error messages.
pub(crate) const SUPPORTED_MINORS: &str = "2.2,3.0,3.1,3.2,3.3,3.4,3.5,3.6";

/// A version parsed the way `go-semver` parses it: `X.Y.Z[-pre][+meta]`, decimal numbers
/// (leading zeros allowed), identifiers of `[0-9A-Za-z-]` separated by dots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GoSemver {
    pub major: i64,
    pub minor: i64,
    pub patch: i64,
    pub pre_release: String,
    pub metadata: String,
}

impl GoSemver {
    pub fn new(major: i64, minor: i64, patch: i64) -> Self {
        GoSemver {
            major,
            minor,
            patch,
            pre_release: String::new(),
            metadata: String::new(),
        }
    }

    /// Parse like `semver.NewVersion`; `None` where it returns an error.
    pub fn parse(input: &str) -> Option<GoSemver> {
        // Metadata is split off at the first '+', then the pre-release at the first '-'.
        let (rest, metadata) = split_off(input, '+');
        let (rest, pre_release) = split_off(rest, '-');
        let mut parts = rest.splitn(3, '.');
        let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
        if !valid_identifier(pre_release) || !valid_identifier(metadata) {
            return None;
        }
        Some(GoSemver {
            major: parse_decimal_i64(major)?,
            minor: parse_decimal_i64(minor)?,
            patch: parse_decimal_i64(patch)?,
            pre_release: pre_release.to_string(),
            metadata: metadata.to_string(),
        })
    }

    /// Struct equality with `X.Y.0` (what the original's version checks use).
    pub fn is_exactly(&self, version: SpecVersion) -> bool {
        let (major, minor) = version.major_minor();
        *self == GoSemver::new(major, minor, 0)
    }

    /// `semver.Version.Compare`: numbers, then pre-release (metadata ignored).
    pub fn compare(&self, other: &GoSemver) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| compare_pre_release(&self.pre_release, &other.pre_release))
    }
}

fn split_off(input: &str, delimiter: char) -> (&str, &str) {
    match input.split_once(delimiter) {
        Some((head, tail)) => (head, tail),
        None => (input, ""),
    }
}

fn valid_identifier(id: &str) -> bool {
    id.is_empty()
        || id.split('.').all(|part| {
            !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// `strconv.ParseInt(s, 10, 64)` for input that cannot carry a sign (signs were split off).
fn parse_decimal_i64(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// `strconv.Atoi`: optional sign then decimal digits, within i64.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

fn compare_pre_release(a: &str, b: &str) -> Ordering {
    // A version without a pre-release is greater than the same version with one.
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        (false, false) => {}
    }
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let ordering = match (go_atoi(x), go_atoi(y)) {
                    (Some(i), Some(j)) => i.cmp(&j),
                    // Numeric identifiers sort before alphanumeric ones.
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => x.cmp(y),
                };
                if ordering != Ordering::Equal {
                    return ordering;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_version_strings_and_order() {
        assert_eq!(SpecVersion::V3_5.as_str(), "3.5.0");
        assert_eq!(SpecVersion::V2_2.to_string(), "2.2.0");
        assert!(SpecVersion::V2_2 < SpecVersion::V3_0);
        assert_eq!(SpecVersion::NEWEST, SpecVersion::V3_6);
        assert_eq!(SpecVersion::V3_6.previous_3x(), Some(SpecVersion::V3_5));
        assert_eq!(SpecVersion::from_major_minor(3, 6), Some(SpecVersion::V3_6));
        assert_eq!(SpecVersion::from_major_minor(3, 4), Some(SpecVersion::V3_4));
        assert_eq!(SpecVersion::from_major_minor(2, 1), None);
    }

    #[test]
    fn go_semver_accepts_what_go_accepts() {
        let v = GoSemver::parse("03.5.0").unwrap();
        assert!(v.is_exactly(SpecVersion::V3_5));
        assert!(GoSemver::parse("3.5.0-")
            .unwrap()
            .is_exactly(SpecVersion::V3_5));
        let pre = GoSemver::parse("3.7.0-experimental").unwrap();
        assert_eq!(pre.pre_release, "experimental");
        assert!(!pre.is_exactly(SpecVersion::V3_5));
        assert!(!GoSemver::parse("3.5.0+meta")
            .unwrap()
            .is_exactly(SpecVersion::V3_5));
        for bad in [
            "",
            "3.2",
            "v3.2.0",
            "3.2.0.1",
            "3..0",
            "3.x.0",
            "3.2.0-a..b",
            "3.2.0-a_b",
            "-3.2.0",
            "+3.2.0",
            "3.2. 0",
            "99999999999999999999.0.0",
        ] {
            assert_eq!(GoSemver::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn go_semver_compare() {
        let p = |s| GoSemver::parse(s).unwrap();
        assert_eq!(p("2.2.0-rc1").compare(&p("2.2.0")), Ordering::Less);
        assert_eq!(p("2.4.0").compare(&p("2.2.0")), Ordering::Greater);
        assert_eq!(p("1.0.0-1").compare(&p("1.0.0-a")), Ordering::Less);
        assert_eq!(p("1.0.0-a.1").compare(&p("1.0.0-a")), Ordering::Greater);
        assert_eq!(p("1.0.0+x").compare(&p("1.0.0+y")), Ordering::Equal);
    }
}

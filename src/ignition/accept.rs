//! Accept-header negotiation, identical to the original server: which Ignition spec version a
//! request gets. Pure; never panics on any input.
//!
//! Parsing: split on `,`, trim, split each piece on `;`, trim the parts; pieces without `/`
//! are skipped. Only the parameters `version` (first value that parses as a semver) and `q`
//! (first value that parses as a float32; default 1) count. Entries are stably sorted by
//! descending `q` with Go's exact algorithm (so NaN and ties behave the same).
//! Detection ([`negotiate`]): the first entry whose subtype is `vnd.coreos.ignition+json` and
//! that has a version decides: 2.x at or above 2.2 gets 2.2; a supported minor gets that
//! minor; a newer 3.x minor than supported gets the newest (3.6); anything else is an error (no
//! fallback). No such entry at all gets 2.2.
//!
//! The version served then follows the cluster ([`choose`]): 3.6 is answered only from a
//! rendered config of spec 3.6 (an MCO that renders 3.6, PR #6236). From a rendered config of
//! 3.5 or older a request for 3.6 or newer gets 3.5, exactly as the original at 7ff337a4f
//! answers it: the served config embeds the MachineConfig at the served spec, and a
//! machine-config-daemon that cannot read 3.6 would fail the node's first boot.
use super::gostd::parse_float32;
use super::version::{GoSemver, SpecVersion};

/// The Accept header named an Ignition version this server cannot serve (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Ignition version in Accept header: {header}")]
pub struct UnsupportedVersion {
    pub header: String,
}

impl UnsupportedVersion {
    /// Short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        "unsupported_version"
    }
}

const IGNITION_SUBTYPE: &str = "vnd.coreos.ignition+json";

/// One media range of the header, as the original keeps it.
#[derive(Debug, Clone)]
struct AcceptEntry<'a> {
    subtype: &'a str,
    version: Option<GoSemver>,
    /// The `version` parameter as written, when it parsed.
    version_text: &'a str,
    q: f32,
}

/// Which rule of the negotiation picked the requested version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// No Ignition media type with a version: 2.2, the original's default (curl, old clients).
    NoIgnitionVersion,
    /// A 2.x version at or above 2.2: 2.2, the only 2.x spec served.
    Spec2,
    /// A 3.x minor this server serves (the patch level and any pre-release are ignored).
    SupportedMinor,
    /// A 3.x minor newer than any this server knows: the newest it knows.
    NewerMinor,
}

/// The outcome of negotiating an Accept header: the version asked for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The spec version the request asks for (3.6 stands for "3.6 or newer").
    pub version: SpecVersion,
    pub rule: Rule,
    /// The `version` parameter of the deciding media range, as written.
    pub asked: Option<String>,
}

/// Pick the spec version to serve for an `Accept` header (`None` when absent).
pub fn negotiate(header: Option<&str>) -> Result<SpecVersion, UnsupportedVersion> {
    negotiate_with_rule(header).map(|n| n.version)
}

/// [`negotiate`], with the rule that decided.
pub fn negotiate_with_rule(header: Option<&str>) -> Result<Negotiated, UnsupportedVersion> {
    let raw = header.unwrap_or("");
    let entries = parse_accept(raw);
    let v2_2 = GoSemver::new(2, 2, 0);
    for entry in &entries {
        if entry.subtype != IGNITION_SUBTYPE {
            continue;
        }
        let Some(requested) = &entry.version else {
            continue;
        };
        let decided = |version, rule| {
            Ok(Negotiated {
                version,
                rule,
                asked: Some(entry.version_text.to_string()),
            })
        };
        if requested.major == 2 && requested.compare(&v2_2).is_ge() {
            return decided(SpecVersion::V2_2, Rule::Spec2);
        }
        if let Some(version) = SpecVersion::from_major_minor(requested.major, requested.minor) {
            return decided(version, Rule::SupportedMinor);
        }
        let (newest_major, newest_minor) = SpecVersion::NEWEST.major_minor();
        if requested.major == newest_major && requested.minor > newest_minor {
            return decided(SpecVersion::NEWEST, Rule::NewerMinor);
        }
        return Err(UnsupportedVersion {
            header: raw.to_string(),
        });
    }
    Ok(Negotiated {
        version: SpecVersion::V2_2,
        rule: Rule::NoIgnitionVersion,
        asked: None,
    })
}

/// The version served for a request of `requested` ([`negotiate`]) from a rendered config of
/// spec `rendered` ([`super::rendered_spec`]): 3.6 only from a 3.6 config (PR #6236's rule:
/// 3.6 to 3.6 and newer requests); from 3.5 or older, 3.5 (the original at 7ff337a4f). Every
/// other request is served as asked (translated down from the rendered config's spec).
pub fn choose(requested: SpecVersion, rendered: SpecVersion) -> SpecVersion {
    if requested == SpecVersion::V3_6 && rendered < SpecVersion::V3_6 {
        SpecVersion::LEGACY_NEWEST
    } else {
        requested
    }
}

fn parse_accept(input: &str) -> Vec<AcceptEntry<'_>> {
    let mut entries = Vec::new();
    for value in input.split(',') {
        let mut parts = value.trim().split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let Some((_, subtype)) = media.split_once('/') else {
            continue;
        };
        let mut version = None;
        let mut version_text = "";
        let mut q = None;
        for extension in parts {
            let Some((key, val)) = extension.split_once('=') else {
                continue;
            };
            if key == "version" && version.is_none() {
                version = GoSemver::parse(val);
                version_text = val;
            } else if key == "q" && q.is_none() {
                q = parse_float32(val);
            }
        }
        entries.push(AcceptEntry {
            subtype,
            version,
            version_text,
            q: q.unwrap_or(1.0),
        });
    }
    go_stable_sort(&mut entries, |a, b| a.q > b.q);
    entries
}

/// Go's `sort.SliceStable`: insertion sort on blocks of 20, then in-place symmerge. Using the
/// same algorithm keeps the result identical even for a non-total order (NaN q values).
fn go_stable_sort<T>(data: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, &less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, &less);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b, &less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, &less);
        }
        block *= 2;
    }
}

fn insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &impl Fn(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1]) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge<T>(data: &mut [T], a: usize, m: usize, b: usize, less: &impl Fn(&T, &T) -> bool) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&data[h], &data[a]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i.saturating_sub(1) {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&data[m], &data[h]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&data[p - c], &data[c]) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

fn rotate<T>(data: &mut [T], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

fn swap_range<T>(data: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: &str = "application/vnd.coreos.ignition+json";

    fn neg(h: &str) -> Result<SpecVersion, UnsupportedVersion> {
        negotiate(Some(h))
    }

    #[test]
    fn vector_1_defaults_to_2_2() {
        assert_eq!(negotiate(None), Ok(SpecVersion::V2_2));
        for h in [
            "".to_string(),
            "*/*".to_string(),
            "text/plain".to_string(),
            I.to_string(),
            "an-invalid-accept-header".to_string(),
            format!("{I};version=2.4.0, {I}; version=1; q=0.5, */*; q=0.1"),
            "application/VND.coreos.ignition+json;version=3.3.0".to_string(),
        ] {
            assert_eq!(neg(&h), Ok(SpecVersion::V2_2), "{h:?}");
        }
    }

    #[test]
    fn vector_2_supported_and_newer_minors() {
        assert_eq!(neg(&format!("{I};version=3.4.7")), Ok(SpecVersion::V3_4));
        // 3.6 and newer ask for the newest; what is served follows the rendered config.
        assert_eq!(
            neg(&format!("{I};version=3.99.0, */*;q=0.1")),
            Ok(SpecVersion::V3_6)
        );
        assert_eq!(
            neg("foo/vnd.coreos.ignition+json;version=3.3.0"),
            Ok(SpecVersion::V3_3)
        );
        assert_eq!(neg(&format!("{I};version=3.0.0")), Ok(SpecVersion::V3_0));
        assert_eq!(
            neg(&format!("{I};version=2.2.0-rc1")),
            Ok(SpecVersion::V2_2)
        );
        assert_eq!(neg(&format!("{I};version=3.6.0")), Ok(SpecVersion::V3_6));
        assert_eq!(neg(&format!("{I};version=3.6.2")), Ok(SpecVersion::V3_6));
        assert_eq!(
            neg(&format!("{I};version=3.6.0-experimental")),
            Ok(SpecVersion::V3_6)
        );
        assert_eq!(
            neg(&format!("{I};version=3.4.0, */*;q=0.1")),
            Ok(SpecVersion::V3_4)
        );
    }

    #[test]
    fn vector_3_unsupported_without_fallback() {
        for h in [
            format!("{I};version=4.0.0"),
            format!("{I};version=2.1.0"),
            format!("{I};version=1.0.0"),
            format!("{I};version=4.0.0, {I};version=3.2.0;q=0.5"),
        ] {
            assert_eq!(
                neg(&h),
                Err(UnsupportedVersion { header: h.clone() }),
                "{h:?}"
            );
        }
    }

    #[test]
    fn vector_4_q_ordering_and_first_valid_parameter() {
        assert_eq!(
            neg(&format!("{I};version=3.1.0;q=0.5, {I};version=3.4.0;q=0.5")),
            Ok(SpecVersion::V3_1)
        );
        assert_eq!(
            neg(&format!("{I};version=3.1.0;q=abc, {I};version=3.4.0;q=0.9")),
            Ok(SpecVersion::V3_1)
        );
        assert_eq!(
            neg(&format!("{I};version=bad;version=3.1.0")),
            Ok(SpecVersion::V3_1)
        );
        // q sorts descending; the later entry with the higher q wins.
        assert_eq!(
            neg(&format!("{I};version=3.1.0;q=0.2, {I};version=3.4.0;q=0.9")),
            Ok(SpecVersion::V3_4)
        );
        // Values are not trimmed: `q= 0.9` is invalid and defaults to 1.
        assert_eq!(
            neg(&format!(
                "{I};version=3.1.0;q= 0.1, {I};version=3.4.0;q=0.9"
            )),
            Ok(SpecVersion::V3_1)
        );
        // Keys are case-sensitive.
        assert_eq!(neg(&format!("{I};Version=3.4.0")), Ok(SpecVersion::V2_2));
        // Negative and >1 q values are accepted.
        assert_eq!(
            neg(&format!("{I};version=3.1.0;q=-1, {I};version=3.2.0;q=7")),
            Ok(SpecVersion::V3_2)
        );
    }

    #[test]
    fn nan_q_sorts_like_go() {
        // Go's insertion sort never moves an entry across a NaN: 3.1 stays first.
        assert_eq!(
            neg(&format!(
                "{I};version=3.1.0;q=0.5, {I};version=3.2.0;q=NaN, {I};version=3.4.0;q=1"
            )),
            Ok(SpecVersion::V3_1)
        );
    }

    #[test]
    fn stable_sort_matches_go_on_long_lists() {
        // More than one 20-element block exercises symmerge; stability must hold.
        let mut data: Vec<(u32, usize)> = (0..97).map(|i| ((i * 7919 % 13) as u32, i)).collect();
        go_stable_sort(&mut data, |a, b| a.0 > b.0);
        let mut expected: Vec<(u32, usize)> =
            (0..97).map(|i| ((i * 7919 % 13) as u32, i)).collect();
        expected.sort_by_key(|e| std::cmp::Reverse(e.0));
        assert_eq!(data, expected);
    }

    #[test]
    fn malformed_headers_do_not_panic() {
        for h in [
            ",,,;;;",
            "/",
            ";/",
            "a/b;=;==;q",
            "a/b;q=1e400",
            "a/b;version=",
            "/;version=3.2.0",
            "\u{0}/\u{1}",
            "é/ü;version=3.2.0;q=0x1p-2",
            "*/*;q=inf,*/*;q=-inf,*/*;q=nan",
        ] {
            let _ = negotiate(Some(h));
        }
        assert_eq!(
            neg("/vnd.coreos.ignition+json;version=3.2.0"),
            Ok(SpecVersion::V3_2)
        );
    }

    #[test]
    fn the_rule_that_decided_is_reported() {
        let rule = |h: &str| negotiate_with_rule(Some(h)).map(|n| (n.version, n.rule, n.asked));
        assert_eq!(
            rule("*/*"),
            Ok((SpecVersion::V2_2, Rule::NoIgnitionVersion, None))
        );
        assert_eq!(
            rule(&format!("{I};version=2.4.0")),
            Ok((SpecVersion::V2_2, Rule::Spec2, Some("2.4.0".into())))
        );
        assert_eq!(
            rule(&format!("{I};version=3.6.1, */*;q=0.1")),
            Ok((
                SpecVersion::V3_6,
                Rule::SupportedMinor,
                Some("3.6.1".into())
            ))
        );
        assert_eq!(
            rule(&format!("{I};version=3.7.0")),
            Ok((SpecVersion::V3_6, Rule::NewerMinor, Some("3.7.0".into())))
        );
    }

    #[test]
    fn three_six_is_served_only_from_a_three_six_rendered_config() {
        for requested in SpecVersion::ALL {
            let from_3_6 = choose(requested, SpecVersion::V3_6);
            assert_eq!(
                from_3_6, requested,
                "from 3.6, {requested} is served as asked"
            );
            let from_3_5 = choose(requested, SpecVersion::V3_5);
            if requested == SpecVersion::V3_6 {
                assert_eq!(from_3_5, SpecVersion::V3_5);
            } else {
                assert_eq!(from_3_5, requested);
            }
        }
    }
}

//! Small re-implementations of the Go standard-library behaviour that decides validity in the
//! original: `path.Clean`/`Join`/`Ext`, the parts of `net/url.Parse` its validators look at,
//! and `strconv.ParseFloat(s, 32)`. Pure functions; no config types here.

/// `path.Clean`: lexical clean-up of a slash-separated path.
pub(crate) fn path_clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let bytes = path.as_bytes();
    let rooted = bytes[0] == b'/';
    let n = bytes.len();
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let (mut r, mut dotdot) = (0usize, 0usize);
    if rooted {
        out.push(b'/');
        r = 1;
        dotdot = 1;
    }
    while r < n {
        if bytes[r] == b'/' || (bytes[r] == b'.' && (r + 1 == n || bytes[r + 1] == b'/')) {
            // Empty element or `.`: skip.
            r += 1;
        } else if bytes[r] == b'.'
            && r + 1 < n
            && bytes[r + 1] == b'.'
            && (r + 2 == n || bytes[r + 2] == b'/')
        {
            r += 2;
            if out.len() > dotdot {
                // Back up to the previous separator (exclusive), as Go's lazybuf does.
                let mut w = out.len() - 1;
                while w > dotdot && out[w] != b'/' {
                    w -= 1;
                }
                out.truncate(w);
            } else if !rooted {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(b"..");
                dotdot = out.len();
            }
        } else {
            if (rooted && out.len() != 1) || (!rooted && !out.is_empty()) {
                out.push(b'/');
            }
            while r < n && bytes[r] != b'/' {
                out.push(bytes[r]);
                r += 1;
            }
        }
    }
    if out.is_empty() {
        return ".".to_string();
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `path.Join`: joins the non-empty elements with `/` and cleans the result.
pub(crate) fn path_join(elements: &[&str]) -> String {
    let joined: Vec<&str> = elements.iter().copied().filter(|e| !e.is_empty()).collect();
    if joined.is_empty() {
        return String::new();
    }
    path_clean(&joined.join("/"))
}

/// `path.Ext`: the suffix from the final dot of the last element, or "".
pub(crate) fn path_ext(path: &str) -> &str {
    for (i, b) in path.bytes().enumerate().rev() {
        if b == b'/' {
            break;
        }
        if b == b'.' {
            return &path[i..];
        }
    }
    ""
}

/// What the validators use from a parsed URL (borrowed from the input: data URLs are big).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GoUrl<'a> {
    /// Lower-cased scheme, "" when there is none.
    pub scheme: String,
    /// Everything after `scheme:` when it does not start with `/`.
    pub opaque: &'a str,
    /// The raw query (after the first `?`, before any `#`).
    pub raw_query: &'a str,
}

impl GoUrl<'_> {
    /// `u.Query()[key]`: the values of a query parameter (malformed pairs are skipped).
    pub fn query_values(&self, key: &str) -> Option<Vec<String>> {
        let mut found: Option<Vec<String>> = None;
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (
                unescape(k, Mode::QueryComponent),
                unescape(v, Mode::QueryComponent),
            ) else {
                continue;
            };
            if k == key {
                found.get_or_insert_with(Vec::new).push(v);
            }
        }
        found
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Host,
    Zone,
    UserPassword,
    QueryComponent,
}

/// `url.Parse`; `Err(())` where Go returns an error.
pub(crate) fn url_parse(raw: &str) -> Result<GoUrl<'_>, ()> {
    let (u, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    if u.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err(());
    }
    let mut url = GoUrl {
        scheme: String::new(),
        opaque: "",
        raw_query: "",
    };
    if u == "*" {
        return Ok(url);
    }
    let (scheme, rest) = get_scheme(u)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = rest;
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query;
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest;
            return finish_fragment(url, fragment);
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err(());
        }
    }
    let mut path = rest;
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let authority_and_path = &rest[2..];
        let (authority, tail) = match authority_and_path.find('/') {
            Some(i) => (&authority_and_path[..i], &authority_and_path[i..]),
            None => (authority_and_path, ""),
        };
        parse_authority(authority)?;
        path = tail;
    }
    check_escapes(path)?;
    finish_fragment(url, fragment)
}

fn finish_fragment<'a>(url: GoUrl<'a>, fragment: &str) -> Result<GoUrl<'a>, ()> {
    if !fragment.is_empty() {
        check_escapes(fragment)?;
    }
    Ok(url)
}

fn get_scheme(raw: &str) -> Result<(&str, &str), ()> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err(());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn parse_authority(authority: &str) -> Result<(), ()> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    parse_host(host)?;
    if let Some(userinfo) = userinfo {
        let valid = userinfo.chars().all(|r| {
            r.is_ascii_alphanumeric()
                || matches!(
                    r,
                    '-' | '.'
                        | '_'
                        | ':'
                        | '~'
                        | '!'
                        | '$'
                        | '&'
                        | '\''
                        | '('
                        | ')'
                        | '*'
                        | '+'
                        | ','
                        | ';'
                        | '='
                        | '%'
                        | '@'
                )
        });
        if !valid {
            return Err(());
        }
        match userinfo.split_once(':') {
            Some((user, password)) => {
                unescape(user, Mode::UserPassword)?;
                unescape(password, Mode::UserPassword)?;
            }
            None => {
                unescape(userinfo, Mode::UserPassword)?;
            }
        }
    }
    Ok(())
}

fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

fn parse_host(host: &str) -> Result<(), ()> {
    if host.starts_with('[') {
        let close = host.rfind(']').ok_or(())?;
        if !valid_optional_port(&host[close + 1..]) {
            return Err(());
        }
        if let Some(zone) = host[..close].find("%25") {
            unescape(&host[..zone], Mode::Host)?;
            unescape(&host[zone..close], Mode::Zone)?;
            unescape(&host[close..], Mode::Host)?;
            return Ok(());
        }
    } else if let Some(colon) = host.rfind(':') {
        if !valid_optional_port(&host[colon..]) {
            return Err(());
        }
    }
    unescape(host, Mode::Host).map(|_| ())
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// `url.unescape` in path or fragment mode only fails on a malformed `%XX` escape.
fn check_escapes(s: &str) -> Result<(), ()> {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(offset) = b[i..].iter().position(|&c| c == b'%') {
        i += offset;
        if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
            return Err(());
        }
        i += 3;
    }
    Ok(())
}

/// `url.unescape`: percent-decoding with Go's per-component rules.
fn unescape(s: &str, mode: Mode) -> Result<String, ()> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if i + 2 >= b.len()
                    || !b[i + 1].is_ascii_hexdigit()
                    || !b[i + 2].is_ascii_hexdigit()
                {
                    return Err(());
                }
                let escape = &s[i..i + 3];
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && escape != "%25" {
                    return Err(());
                }
                let v = (unhex(b[i + 1]) << 4) | unhex(b[i + 2]);
                if mode == Mode::Zone
                    && escape != "%25"
                    && v != b' '
                    && should_escape(v, Mode::Host)
                {
                    return Err(());
                }
                out.push(v);
                i += 3;
            }
            b'+' => {
                out.push(if mode == Mode::QueryComponent {
                    b' '
                } else {
                    b'+'
                });
                i += 1;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(());
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `strconv.ParseFloat(s, 32)`; `None` where Go returns an error (syntax or overflow).
pub(crate) fn parse_float32(s: &str) -> Option<f32> {
    if let Some(special) = parse_special(s) {
        return Some(special);
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    if body.len() > 2 && (body.starts_with("0x") || body.starts_with("0X")) {
        return parse_hex_float(&body[2..]).map(|v| if negative { -v } else { v });
    }
    if !valid_decimal_float(body) {
        return None;
    }
    let value: f32 = s.parse().ok()?;
    // Go reports overflow to infinity as an error (ErrRange).
    value.is_finite().then_some(value)
}

fn parse_special(s: &str) -> Option<f32> {
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f32::INFINITY),
        "-inf" | "-infinity" => Some(f32::NEG_INFINITY),
        "nan" => Some(f32::NAN),
        _ => None,
    }
}

/// Go's decimal float syntax: digits with at most one dot (at least one digit), then an
/// optional exponent `e[+-]digits`. Underscores are only allowed with a base prefix.
fn valid_decimal_float(body: &str) -> bool {
    let b = body.as_bytes();
    let mut i = 0;
    let mut digits = 0;
    let mut dot = false;
    while i < b.len() {
        match b[i] {
            b'0'..=b'9' => digits += 1,
            b'.' if !dot => dot = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    i == b.len()
}

/// Hexadecimal float after the `0x` prefix: hex digits (underscores allowed between them),
/// an optional dot, and a mandatory binary exponent `p[+-]digits`.
fn parse_hex_float(body: &str) -> Option<f32> {
    let b = body.as_bytes();
    let mut i = 0;
    let mut mantissa = 0f64;
    let mut digits = 0;
    let mut dot = false;
    let mut scale = 0i64;
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_hexdigit() => {
                mantissa = mantissa * 16.0 + f64::from(unhex(c));
                digits += 1;
                if dot {
                    scale -= 4;
                }
            }
            b'_' => {}
            b'.' if !dot => dot = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 || i >= b.len() || (b[i] != b'p' && b[i] != b'P') {
        return None;
    }
    i += 1;
    let negative_exp = i < b.len() && b[i] == b'-';
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let exp_digits = &body[i..];
    if exp_digits.is_empty() || !exp_digits.bytes().all(|c| c.is_ascii_digit() || c == b'_') {
        return None;
    }
    let exp: i64 = exp_digits
        .replace('_', "")
        .parse::<i64>()
        .unwrap_or(i64::MAX / 4)
        .min(100_000);
    let exp = if negative_exp { -exp } else { exp };
    let value = (mantissa * 2f64.powi((exp + scale).clamp(-2000, 2000) as i32)) as f32;
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_matches_go() {
        for (input, want) in [
            ("", "."),
            ("/", "/"),
            ("/etc//x/../y/", "/etc/y"),
            ("/../a", "/a"),
            ("a/../..", ".."),
            ("/a/b/..", "/a"),
            ("/a/./b", "/a/b"),
            ("abc/def/../../..", ".."),
            ("/var/lib/x", "/var/lib/x"),
        ] {
            assert_eq!(path_clean(input), want, "{input:?}");
        }
        assert_eq!(path_join(&["/", "/etc//x/../y/"]), "/etc/y");
        assert_eq!(path_join(&["", "/x"]), "/x");
        assert_eq!(path_join(&["", ""]), "");
        assert_eq!(path_ext("/a/b.service"), ".service");
        assert_eq!(path_ext("a.d/b"), "");
    }

    #[test]
    fn url_schemes_and_errors() {
        let scheme = |s: &str| url_parse(s).map(|u| u.scheme);
        assert_eq!(scheme("https://x/c.ign"), Ok("https".into()));
        assert_eq!(scheme("HTTP://x"), Ok("http".into()));
        assert_eq!(scheme("data:,hello"), Ok("data".into()));
        assert_eq!(scheme("arn:aws:s3:::bucket/key"), Ok("arn".into()));
        assert_eq!(scheme("gs://b/o"), Ok("gs".into()));
        assert_eq!(scheme(""), Ok("".into()));
        assert_eq!(scheme("/abs/path"), Ok("".into()));
        assert!(url_parse(":foo").is_err());
        assert!(url_parse("http://x:port/").is_err());
        assert!(url_parse("http://a b/").is_err());
        assert!(url_parse("http://x/%zz").is_err());
        assert!(url_parse("a:b/c").map(|u| u.opaque).is_ok());
        assert!(url_parse("ab/c:d").is_ok());
        assert!(url_parse("c:d/x").is_ok());
        assert!(url_parse("1a:b").is_err());
        assert!(url_parse("http://x/\n").is_err());
        let s3 = url_parse("s3://bucket/key?versionId=").unwrap();
        assert_eq!(s3.query_values("versionId"), Some(vec![String::new()]));
        assert_eq!(s3.query_values("other"), None);
    }

    #[test]
    fn float_parsing_matches_go() {
        assert_eq!(parse_float32("0.5"), Some(0.5));
        assert_eq!(parse_float32("1"), Some(1.0));
        assert_eq!(parse_float32("-0.1"), Some(-0.1));
        assert_eq!(parse_float32(".5"), Some(0.5));
        assert_eq!(parse_float32("1."), Some(1.0));
        assert_eq!(parse_float32("1e-1"), Some(0.1));
        assert_eq!(parse_float32("Inf"), Some(f32::INFINITY));
        assert!(parse_float32("NaN").is_some_and(f32::is_nan));
        assert_eq!(parse_float32("0x1p-1"), Some(0.5));
        for bad in [
            "", "abc", " 0.5", "0.5 ", "1e50", "+nan", "1_0", ".", "e1", "1e", "0x1",
        ] {
            assert_eq!(parse_float32(bad), None, "{bad:?}");
        }
    }
}

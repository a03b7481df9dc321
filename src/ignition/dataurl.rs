//! RFC 2397 data URLs exactly as the original's `dataurl` library writes and reads them:
//! [`encode`] is `"data:," + Escape(bytes)`, [`decode`] accepts what `DecodeString` accepts
//! (percent or base64 data, optional media type and parameters). Also the validity check
//! the Ignition validators apply to `data:` sources. Pure; no config types here.

use base64::Engine as _;

/// Why a string is not a data URL the original would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid data URL: {reason}")]
pub struct DataUrlError {
    pub reason: String,
}

impl DataUrlError {
    fn new(reason: impl Into<String>) -> Self {
        DataUrlError {
            reason: reason.into(),
        }
    }

    /// Short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        "invalid_data_url"
    }
}

/// What every data URL [`encode`] writes starts with.
pub const PREFIX: &str = "data:,";

/// `data:,` + percent-encoding exactly as Go's `dataurl.Escape`: unreserved characters
/// `A-Z a-z 0-9 - _ . ! ~ * ' ( )` are kept, every other byte becomes `%XX` (upper-case hex).
pub fn encode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(PREFIX.len() + escaped_len(bytes));
    out.extend_from_slice(PREFIX.as_bytes());
    escape_into(&mut out, bytes);
    // Only ASCII was written.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends `bytes` percent-encoded as [`encode`] writes them after its [`PREFIX`] (in pieces:
/// the escape of a concatenation is the concatenation of the escapes). The result is ASCII
/// that no JSON encoder escapes.
pub fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if is_unreserved(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]]);
        }
    }
}

/// How many bytes [`escape_into`] appends for `bytes`.
pub fn escaped_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .map(|&b| if is_unreserved(b) { 1 } else { 3 })
        .sum()
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')'
        )
}

/// Decode a `data:` URL into its bytes (percent-encoded or `;base64`).
pub fn decode(url: &str) -> Result<Vec<u8>, DataUrlError> {
    Lexer::new(url).run(true)
}

/// Whether [`decode`] would accept `url`, without building the data (validators call this
/// for every source, and inline sources are large).
pub fn check(url: &str) -> Result<(), DataUrlError> {
    Lexer::new(url).run(false).map(|_| ())
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    base64: bool,
}

const DATA_PREFIX: &str = "data:";

fn is_tspecial(c: char) -> bool {
    matches!(
        c,
        '(' | ')' | '<' | '>' | '@' | ',' | ';' | ':' | '\\' | '"' | '/' | '[' | ']' | '?' | '='
    )
}

/// RFC 2045 token character: ASCII, not a control, not a space, not a tspecial.
fn is_token(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && c != ' ' && !is_tspecial(c)
}

/// Byte classes for the data part, built once at compile time (data URLs are large and every
/// validation pass scans them).
const URL_CHAR: [bool; 256] = byte_table(false);
const BASE64_CHAR: [bool; 256] = byte_table(true);

const fn byte_table(base64: bool) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 128 {
        let c = i as u8 as char;
        table[i] = if base64 {
            is_base64_char(c)
        } else {
            is_url_char(c)
        };
        i += 1;
    }
    table
}

const fn is_url_char(c: char) -> bool {
    c.is_ascii()
        && !c.is_ascii_control()
        && !matches!(
            c,
            ' ' | '<' | '>' | '#' | '"' | '{' | '}' | '|' | '\\' | '^' | '[' | ']' | '`'
        )
}

const fn is_base64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '\n')
}

impl<'a> Lexer<'a> {
    fn new(input: &'a str) -> Self {
        Lexer {
            input,
            pos: 0,
            base64: false,
        }
    }

    fn next(&mut self) -> Option<char> {
        let c = self.input[self.pos..].chars().next()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn run(mut self, keep_data: bool) -> Result<Vec<u8>, DataUrlError> {
        if !self.input.starts_with(DATA_PREFIX) {
            return Err(DataUrlError::new("missing data prefix"));
        }
        self.pos = DATA_PREFIX.len();
        match self.peek() {
            Some(';') => self.params()?,
            Some(',') => {}
            None => return Err(DataUrlError::new("missing comma before data")),
            Some(_) => self.media_type()?,
        }
        // The lexer stops at the comma before the data.
        self.pos += 1;
        self.data(keep_data)
    }

    /// `type/subtype` after the prefix, then parameters if a `;` follows.
    fn media_type(&mut self) -> Result<(), DataUrlError> {
        let start = self.pos;
        let first = self.next().unwrap_or(' ');
        let x_token = (first == 'x' || first == 'X') && self.peek() == Some('-');
        if x_token {
            self.pos += 1;
        } else if !is_token(first) {
            return Err(DataUrlError::new("invalid character after data prefix"));
        }
        loop {
            match self.next() {
                Some('/') => {
                    self.pos -= 1;
                    break;
                }
                None => return Err(DataUrlError::new("missing media type slash")),
                Some(c) if is_token(c) => {}
                Some(_) => return Err(DataUrlError::new("invalid character for media type")),
            }
        }
        let main_type = &self.input[start..self.pos];
        if !x_token && !is_discrete_or_composite(main_type) {
            return Err(DataUrlError::new("invalid media type"));
        }
        self.pos += 1; // the slash
        loop {
            match self.next() {
                Some(';') | Some(',') => {
                    self.pos -= 1;
                    break;
                }
                None => return Err(DataUrlError::new("incomplete media type")),
                Some(c) if is_token(c) => {}
                Some(_) => return Err(DataUrlError::new("invalid character for media subtype")),
            }
        }
        if self.peek() == Some(';') {
            self.params()?;
        }
        Ok(())
    }

    /// `;attr=value` pairs (value a token or a quoted string), or a final `;base64`.
    /// Leaves the position at the comma before the data.
    fn params(&mut self) -> Result<(), DataUrlError> {
        while self.peek() == Some(';') {
            self.pos += 1;
            match self.peek() {
                None | Some('=') | Some(',') => {
                    return Err(DataUrlError::new("unterminated parameter sequence"))
                }
                Some(c) if is_token(c) => {}
                Some(_) => {
                    return Err(DataUrlError::new(
                        "invalid character for parameter attribute",
                    ))
                }
            }
            let start = self.pos;
            loop {
                match self.next() {
                    Some('=') => {
                        self.pos -= 1;
                        break;
                    }
                    Some(',') => {
                        self.pos -= 1;
                        let attribute = &self.input[start..self.pos];
                        if attribute != "base64" {
                            return Err(DataUrlError::new(format!(
                                "expected base64, got {attribute}"
                            )));
                        }
                        self.base64 = true;
                        return Ok(());
                    }
                    None => return Err(DataUrlError::new("unterminated parameter sequence")),
                    Some(c) if is_token(c) => {}
                    Some(_) => {
                        return Err(DataUrlError::new(
                            "invalid character for parameter attribute",
                        ))
                    }
                }
            }
            self.pos += 1; // '='
            self.param_value()?;
        }
        match self.peek() {
            Some(',') => Ok(()),
            None => Err(DataUrlError::new("missing comma before data")),
            Some(_) => Err(DataUrlError::new("expected semicolon or comma")),
        }
    }

    fn param_value(&mut self) -> Result<(), DataUrlError> {
        match self.next() {
            Some('"') => {
                let start = self.pos;
                loop {
                    match self.next() {
                        None => return Err(DataUrlError::new("unclosed quoted string")),
                        Some('\\') => match self.next() {
                            Some(c) if c.is_ascii() => {}
                            None => return Err(DataUrlError::new("unexpected eof")),
                            Some(_) => return Err(DataUrlError::new("invalid escaped character")),
                        },
                        Some('"') => break,
                        Some(c) if c.is_ascii() => {}
                        Some(_) => {
                            return Err(DataUrlError::new("invalid character for parameter value"))
                        }
                    }
                }
                let raw = &self.input[start..self.pos - 1];
                go_unquote(raw).ok_or_else(|| DataUrlError::new("invalid syntax"))?;
            }
            None => return Err(DataUrlError::new("missing comma before data")),
            Some(c) if is_token(c) => {
                let start = self.pos - c.len_utf8();
                loop {
                    match self.next() {
                        Some(';') | Some(',') => {
                            self.pos -= 1;
                            break;
                        }
                        None => return Err(DataUrlError::new("missing comma before data")),
                        Some(c) if is_token(c) => {}
                        Some(_) => {
                            return Err(DataUrlError::new("invalid character for parameter value"))
                        }
                    }
                }
                percent_decode(&self.input[start..self.pos])?;
            }
            Some(_) => return Err(DataUrlError::new("invalid character for parameter value")),
        }
        Ok(())
    }

    fn data(&mut self, keep_data: bool) -> Result<Vec<u8>, DataUrlError> {
        let data = &self.input[self.pos..];
        if self.base64 {
            if !data.bytes().all(|b| BASE64_CHAR[usize::from(b)]) {
                return Err(DataUrlError::new("invalid data character"));
            }
            if !keep_data {
                return check_base64(data).map(|()| Vec::new());
            }
            // Go's base64 decoder skips newlines, requires padding and tolerates
            // non-zero trailing bits.
            let cleaned: String = data.chars().filter(|&c| c != '\n').collect();
            let engine = base64::engine::GeneralPurpose::new(
                &base64::alphabet::STANDARD,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_allow_trailing_bits(true)
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireCanonical),
            );
            engine
                .decode(cleaned)
                .map_err(|e| DataUrlError::new(format!("illegal base64 data: {e}")))
        } else {
            if !keep_data {
                return check_percent(data).map(|()| Vec::new());
            }
            if !data.bytes().all(|b| URL_CHAR[usize::from(b)]) {
                return Err(DataUrlError::new("invalid data character"));
            }
            percent_decode(data)
        }
    }
}

fn is_discrete_or_composite(main_type: &str) -> bool {
    [
        "text",
        "image",
        "audio",
        "video",
        "application",
        "message",
        "multipart",
    ]
    .iter()
    .any(|prefix| main_type.starts_with(prefix))
}

/// RFC 2396 unescape as the `dataurl` library does it (ASCII only, `%XX` escapes).
fn percent_decode(s: &str) -> Result<Vec<u8>, DataUrlError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !c.is_ascii() {
            return Err(DataUrlError::new("rfc2396: non-ASCII char detected"));
        }
        if c == b'%' {
            let (Some(&h1), Some(&h0)) = (b.get(i + 1), b.get(i + 2)) else {
                return Err(DataUrlError::new(
                    "rfc2396: unexpected end of unescape sequence",
                ));
            };
            if !h1.is_ascii_hexdigit() || !h0.is_ascii_hexdigit() {
                return Err(DataUrlError::new(
                    "rfc2396: invalid char in unescape sequence",
                ));
            }
            out.push(hex_value(h1) * 16 + hex_value(h0));
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// What the data lexer and [`percent_decode`] would reject, in one pass without decoding.
fn check_percent(s: &str) -> Result<(), DataUrlError> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !URL_CHAR[usize::from(c)] {
            return Err(DataUrlError::new("invalid data character"));
        }
        if c != b'%' {
            i += 1;
            continue;
        }
        match (b.get(i + 1), b.get(i + 2)) {
            (Some(h1), Some(h0)) if h1.is_ascii_hexdigit() && h0.is_ascii_hexdigit() => i += 3,
            (Some(_), Some(_)) => {
                return Err(DataUrlError::new(
                    "rfc2396: invalid char in unescape sequence",
                ))
            }
            _ => {
                return Err(DataUrlError::new(
                    "rfc2396: unexpected end of unescape sequence",
                ))
            }
        }
    }
    Ok(())
}

/// What Go's padded standard base64 decoder rejects (newlines skipped; the alphabet was
/// checked by the lexer): a length that is not a multiple of 4, or `=` anywhere but the last
/// one or two places.
fn check_base64(data: &str) -> Result<(), DataUrlError> {
    let mut symbols = 0usize;
    let mut padding = 0usize;
    for c in data.bytes().filter(|&c| c != b'\n') {
        if c == b'=' {
            padding += 1;
        } else if padding > 0 {
            return Err(DataUrlError::new("illegal base64 data: data after padding"));
        }
        symbols += 1;
    }
    if symbols % 4 != 0 || padding > 2 {
        return Err(DataUrlError::new(
            "illegal base64 data: invalid length or padding",
        ));
    }
    Ok(())
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// Go's `strconv.Unquote` of `"` + raw + `"` for ASCII input; `None` on invalid syntax.
fn go_unquote(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\n' {
            return None;
        }
        if c != b'\\' {
            out.push(char::from(c));
            i += 1;
            continue;
        }
        let escape = *b.get(i + 1)?;
        i += 2;
        match escape {
            b'a' => out.push('\u{7}'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'v' => out.push('\u{b}'),
            b'\\' => out.push('\\'),
            b'"' => out.push('"'),
            b'x' | b'u' | b'U' => {
                let len = match escape {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let hex = raw.get(i..i + len)?;
                let value = u32::from_str_radix(hex, 16).ok()?;
                if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(char::from_u32(value)?);
                i += len;
            }
            b'0'..=b'7' => {
                let octal = raw.get(i - 1..i + 2)?;
                let value = u32::from_str_radix(octal, 8).ok()?;
                if value > 255 {
                    return None;
                }
                out.push(char::from_u32(value)?);
                i += 2;
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_is_go_escape() {
        assert_eq!(encode(b"Hello, world!"), "data:,Hello%2C%20world!");
        assert_eq!(encode("a\nb é".as_bytes()), "data:,a%0Ab%20%C3%A9");
        assert_eq!(encode(br#"{"a":"b"}"#), "data:,%7B%22a%22%3A%22b%22%7D");
        assert_eq!(encode(b""), "data:,");
        assert_eq!(encode(b"-_.!~*'()"), "data:,-_.!~*'()");
        assert_eq!(
            encode(b"/:;=&+$#?@%"),
            "data:,%2F%3A%3B%3D%26%2B%24%23%3F%40%25"
        );
        // In pieces, and measured before: the same bytes, as many as said.
        let text = "a\nb é {\"x\": [1, 2]}";
        let mut out = PREFIX.as_bytes().to_vec();
        for piece in text.as_bytes().chunks(3) {
            escape_into(&mut out, piece);
        }
        assert_eq!(out, encode(text.as_bytes()).as_bytes());
        assert_eq!(PREFIX.len() + escaped_len(text.as_bytes()), out.len());
    }

    #[test]
    fn decode_percent_and_base64() {
        assert_eq!(decode("data:,Hello%2C%20world!").unwrap(), b"Hello, world!");
        assert_eq!(decode("data:,").unwrap(), b"");
        assert_eq!(decode("data:,hello").unwrap(), b"hello");
        assert_eq!(
            decode("data:text/plain;charset=utf-8;base64,SGVsbG8=").unwrap(),
            b"Hello"
        );
        assert_eq!(decode("data:;base64,SGVsbG8=").unwrap(), b"Hello");
        assert_eq!(decode("data:text/plain,a+b").unwrap(), b"a+b");
        assert_eq!(decode("data:text/plain;name=\"a\\\"b\",x").unwrap(), b"x");
        assert_eq!(decode("data:x-foo/bar,x").unwrap(), b"x");
        assert_eq!(decode("data:;base64,SGVs\nbG8=").unwrap(), b"Hello");
    }

    #[test]
    fn decode_rejects_what_go_rejects() {
        for bad in [
            "",
            "DATA:,x",
            "data:",
            "data:hello",
            "data:foo/bar,x",
            "data:text/plain",
            "data:,hello world",
            "data:,a%2",
            "data:,a%zz",
            "data:;base64,SGVsbG8",
            "data:;base64,%%%",
            "data:;foo,x",
            "data:;charset,x",
            "data:text/plain;;x,x",
            "data:,é",
            "data:text/plain;a=\"x,y",
        ] {
            assert!(decode(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn check_agrees_with_decode() {
        for url in [
            "data:,ok",
            "data:,a%2",
            "data:,a%zz",
            "data:,%41%42",
            "data:;base64,SGVsbG8=",
            "data:;base64,SGVsbG8",
            "data:;base64,SGVsbA==",
            "data:;base64,====",
            "data:;base64,A===",
            "data:;base64,AA==AA==",
            "data:;base64,",
            "data:;base64,SGVs\nbG8=",
            "data:;base64,SGVsbG9",
            "data:text/plain;charset=utf-8;base64,YQ==",
            "nodata",
            "data:,é",
        ] {
            assert_eq!(check(url).is_ok(), decode(url).is_ok(), "{url:?}");
        }
    }

    #[test]
    fn round_trips_arbitrary_bytes() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }
}

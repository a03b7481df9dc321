//! Kubernetes' timestamps as Go parses and prints them: `metav1.Time` (`time.RFC3339`, printed
//! in UTC to the second) and `metav1.MicroTime` (`2006-01-02T15:04:05.000000Z07:00`, exactly six
//! fraction digits, printed in UTC to the microsecond), with the error texts of Go's
//! `time.Parse` (`parsing time "x" as "2006-...": cannot parse "x" as "2006"`, `month out of
//! range`, `extra text`), which kube-apiserver puts into its 400 answers. Pure functions.

/// Which Go layout a timestamp is parsed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `time.RFC3339` (`metav1.Time`): fractional seconds optional.
    Rfc3339,
    /// `metav1.RFC3339Micro` (`metav1.MicroTime`): exactly six fraction digits.
    Rfc3339Micro,
}

impl Layout {
    pub fn text(self) -> &'static str {
        match self {
            Layout::Rfc3339 => "2006-01-02T15:04:05Z07:00",
            Layout::Rfc3339Micro => "2006-01-02T15:04:05.000000Z07:00",
        }
    }
}

/// A parsed instant: seconds since the Unix epoch (UTC) and nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instant {
    pub seconds: i64,
    pub nanos: u32,
}

/// Go's `time.quote`.
fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        if (c as u32) < 0x20 || (c as u32) >= 0x80 {
            let mut buf = [0u8; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

enum Element {
    Literal(&'static str),
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Micros,
    Zone,
}

impl Element {
    fn text(&self) -> &'static str {
        match self {
            Element::Literal(l) => l,
            Element::Year => "2006",
            Element::Month => "01",
            Element::Day => "02",
            Element::Hour => "15",
            Element::Minute => "04",
            Element::Second => "05",
            Element::Micros => ".000000",
            Element::Zone => "Z07:00",
        }
    }
}

fn digit(s: &str, i: usize) -> bool {
    s.as_bytes().get(i).is_some_and(u8::is_ascii_digit)
}

/// Go's `getnum`: one or (when `fixed`) exactly two digits.
fn getnum(s: &str, fixed: bool) -> Option<(i64, &str)> {
    if !digit(s, 0) {
        return None;
    }
    if !digit(s, 1) {
        if fixed {
            return None;
        }
        return Some((i64::from(s.as_bytes()[0] - b'0'), &s[1..]));
    }
    let b = s.as_bytes();
    Some((
        i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'),
        &s[2..],
    ))
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `value` as Go's `time.Parse(layout, value)` does, with its error text.
pub fn parse(value: &str, layout: Layout) -> Result<Instant, String> {
    let elements: &[Element] = match layout {
        Layout::Rfc3339 => &[
            Element::Year,
            Element::Literal("-"),
            Element::Month,
            Element::Literal("-"),
            Element::Day,
            Element::Literal("T"),
            Element::Hour,
            Element::Literal(":"),
            Element::Minute,
            Element::Literal(":"),
            Element::Second,
            Element::Zone,
        ],
        Layout::Rfc3339Micro => &[
            Element::Year,
            Element::Literal("-"),
            Element::Month,
            Element::Literal("-"),
            Element::Day,
            Element::Literal("T"),
            Element::Hour,
            Element::Literal(":"),
            Element::Minute,
            Element::Literal(":"),
            Element::Second,
            Element::Micros,
            Element::Zone,
        ],
    };
    let whole = quote(value);
    let layout_text = quote(layout.text());
    let cannot = |rest: &str, element: &str| {
        format!(
            "parsing time {whole} as {layout_text}: cannot parse {} as {}",
            quote(rest),
            quote(element)
        )
    };
    let out_of_range = |what: &str| format!("parsing time {whole}: {what} out of range");
    let (mut year, mut month, mut day, mut hour, mut minute, mut second) = (0, 0, 0, 0, 0, 0);
    let mut nanos: i64 = 0;
    let mut offset: i64 = 0;
    let mut rest = value;
    for (i, element) in elements.iter().enumerate() {
        let hold = rest;
        match element {
            Element::Literal(literal) => match rest.strip_prefix(literal) {
                Some(r) => rest = r,
                None => return Err(cannot(rest, literal)),
            },
            Element::Year => {
                if rest.len() < 4 || !digit(rest, 0) || !rest.is_char_boundary(4) {
                    return Err(cannot(hold, element.text()));
                }
                year = rest[..4]
                    .parse::<i64>()
                    .map_err(|_| cannot(hold, element.text()))?;
                rest = &rest[4..];
            }
            Element::Month | Element::Day | Element::Minute | Element::Second | Element::Hour => {
                let fixed = !matches!(element, Element::Hour);
                let (n, r) = getnum(rest, fixed).ok_or_else(|| cannot(hold, element.text()))?;
                rest = r;
                match element {
                    Element::Month => {
                        if !(1..=12).contains(&n) {
                            return Err(out_of_range("month"));
                        }
                        month = n;
                    }
                    Element::Day => day = n,
                    Element::Hour => {
                        if !(0..24).contains(&n) {
                            return Err(out_of_range("hour"));
                        }
                        hour = n;
                    }
                    Element::Minute => {
                        if !(0..60).contains(&n) {
                            return Err(out_of_range("minute"));
                        }
                        minute = n;
                    }
                    _ => {
                        if !(0..60).contains(&n) {
                            return Err(out_of_range("second"));
                        }
                        second = n;
                        // A fraction the layout does not have is still accepted.
                        let layout_has_fraction =
                            matches!(elements.get(i + 1), Some(Element::Micros));
                        let b = rest.as_bytes();
                        if !layout_has_fraction
                            && b.len() >= 2
                            && (b[0] == b'.' || b[0] == b',')
                            && b[1].is_ascii_digit()
                        {
                            let mut n = 2;
                            while n < b.len() && b[n].is_ascii_digit() {
                                n += 1;
                            }
                            nanos = fraction_nanos(&rest[1..n]);
                            rest = &rest[n..];
                        }
                    }
                }
            }
            Element::Micros => {
                let b = rest.as_bytes();
                if b.len() < 7 || !(b[0] == b'.' || b[0] == b',') {
                    return Err(cannot(hold, element.text()));
                }
                if !b[1..7].iter().all(u8::is_ascii_digit) {
                    return Err(cannot(hold, element.text()));
                }
                nanos = fraction_nanos(&rest[1..7]);
                rest = &rest[7..];
            }
            Element::Zone => {
                if let Some(r) = rest.strip_prefix('Z') {
                    rest = r;
                    continue;
                }
                let b = rest.as_bytes();
                if b.len() < 6 || b[3] != b':' || !rest.is_char_boundary(6) {
                    return Err(cannot(hold, element.text()));
                }
                let (hours, _) =
                    getnum(&rest[1..3], true).ok_or_else(|| cannot(hold, element.text()))?;
                let (minutes, _) =
                    getnum(&rest[4..6], true).ok_or_else(|| cannot(hold, element.text()))?;
                let sign = match b[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return Err(cannot(hold, element.text())),
                };
                if hours > 24 {
                    return Err(out_of_range("time zone offset hour"));
                }
                if minutes > 60 {
                    return Err(out_of_range("time zone offset minute"));
                }
                offset = sign * (hours * 3600 + minutes * 60);
                rest = &rest[6..];
            }
        }
    }
    if !rest.is_empty() {
        return Err(format!("parsing time {whole}: extra text: {}", quote(rest)));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(format!("parsing time {whole}: day out of range"));
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Ok(Instant {
        seconds,
        nanos: nanos as u32,
    })
}

fn fraction_nanos(digits: &str) -> i64 {
    let mut padded: String = digits.chars().take(9).collect();
    while padded.len() < 9 {
        padded.push('0');
    }
    padded.parse().unwrap_or(0)
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The instant printed as `layout` in UTC (`Time` to the second, `MicroTime` to the
/// microsecond), as metav1 marshals it.
pub fn format(instant: Instant, layout: Layout) -> String {
    let days = instant.seconds.div_euclid(86_400);
    let secs = instant.seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let base = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    );
    match layout {
        Layout::Rfc3339 => format!("{base}Z"),
        Layout::Rfc3339Micro => format!("{base}.{:06}Z", instant.nanos / 1000),
    }
}

/// Parses and prints again: what the API server stores for a timestamp field.
pub fn normalize(value: &str, layout: Layout) -> Result<String, String> {
    parse(value, layout).map(|instant| format(instant, layout))
}

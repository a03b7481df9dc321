//! The systemd unit-file syntax check the Ignition validators run on unit and drop-in
//! contents (go-systemd's deserializer): which contents are rejected, with its messages.
//! Includes its 2048-byte line limit, which it applies through a 4096-byte read buffer; the
//! buffer is modelled so the same inputs are rejected. Pure; no config types here.

const BUFFER_SIZE: usize = 4096;
const LINE_MAX: usize = 2048;
const UTF_MAX: usize = 4;

/// Check unit contents; `Err` carries the original's message.
pub(crate) fn check_unit_contents(contents: &str) -> Result<(), String> {
    Lexer::new(contents.as_bytes())
        .run()
        .map_err(|e| format!("invalid unit content: {e}"))
}

/// A model of Go's `bufio.Reader` over an in-memory source: `pos` is how far the lexer has
/// read, `filled` how far the buffer has pulled from the source.
struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    filled: usize,
}

impl<'a> Reader<'a> {
    fn buffered(&self) -> usize {
        self.filled - self.pos
    }

    fn fill(&mut self) {
        let space = BUFFER_SIZE - self.buffered();
        self.filled += space.min(self.input.len() - self.filled);
    }

    fn read_rune(&mut self) -> Option<(char, usize)> {
        while self.buffered() < UTF_MAX
            && !full_rune(&self.input[self.pos..self.filled])
            && self.filled < self.input.len()
        {
            self.fill();
        }
        if self.pos == self.filled {
            return None;
        }
        let available = &self.input[self.pos..self.filled];
        let (c, width) = decode_rune(available);
        self.pos += width;
        Some((c, width))
    }

    fn unread(&mut self, width: usize) {
        self.pos -= width;
    }

    /// `ReadBytes(delim)`: the bytes up to and including `delim`, and whether the source
    /// ended before `delim` was found.
    fn read_bytes(&mut self, delim: u8) -> (&'a [u8], bool) {
        let start = self.pos;
        loop {
            if let Some(i) = self.input[self.pos..self.filled]
                .iter()
                .position(|&b| b == delim)
            {
                self.pos += i + 1;
                return (&self.input[start..self.pos], false);
            }
            if self.filled == self.input.len() {
                self.pos = self.filled;
                return (&self.input[start..self.pos], true);
            }
            if self.buffered() >= BUFFER_SIZE {
                // Buffer full without the delimiter: hand out the fragment and refill.
                self.pos = self.filled;
            }
            self.fill();
        }
    }

    fn read_line(&mut self) -> (&'a [u8], bool) {
        let (line, eof) = self.read_bytes(b'\n');
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        (line, eof)
    }
}

fn full_rune(bytes: &[u8]) -> bool {
    match bytes.first() {
        None => false,
        Some(&b) => {
            let need = utf8_len(b);
            bytes.len() >= need
        }
    }
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    }
}

fn decode_rune(bytes: &[u8]) -> (char, usize) {
    let need = utf8_len(bytes[0]).min(bytes.len());
    match std::str::from_utf8(&bytes[..need]) {
        Ok(s) => s.chars().next().map_or(('\u{fffd}', 1), |c| (c, need)),
        Err(_) => ('\u{fffd}', 1),
    }
}

fn is_comment(c: char) -> bool {
    c == '#' || c == ';'
}

fn is_go_space(c: char) -> bool {
    c.is_whitespace()
}

fn trim_space(bytes: &[u8]) -> &[u8] {
    let s = String::from_utf8_lossy(bytes);
    if s.trim().is_empty() {
        &[]
    } else {
        bytes
    }
}

#[derive(Clone, Copy)]
enum State {
    NextSection,
    SectionName,
    SectionSuffix,
    IgnoreLine(Resume),
    NextSectionOrOption,
    OptionName,
    OptionValue,
}

#[derive(Clone, Copy)]
enum Resume {
    NextSection,
    NextSectionOrOption,
}

struct Lexer<'a> {
    reader: Reader<'a>,
}

impl<'a> Lexer<'a> {
    fn new(input: &'a [u8]) -> Self {
        Lexer {
            reader: Reader {
                input,
                pos: 0,
                filled: 0,
            },
        }
    }

    fn run(mut self) -> Result<(), String> {
        let mut state = Some(State::NextSection);
        while let Some(current) = state {
            if self.reader.buffered() >= LINE_MAX {
                let window = &self.reader.input[self.reader.pos..self.reader.pos + LINE_MAX];
                if !window.iter().any(|&b| b == b'\r' || b == b'\n') {
                    return Err(format!("line too long (max {LINE_MAX} bytes)"));
                }
            }
            state = self.step(current)?;
        }
        Ok(())
    }

    fn step(&mut self, state: State) -> Result<Option<State>, String> {
        let r = &mut self.reader;
        Ok(match state {
            State::NextSection => match r.read_rune() {
                None => None,
                Some(('[', _)) => Some(State::SectionName),
                Some((c, _)) if is_comment(c) => Some(State::IgnoreLine(Resume::NextSection)),
                Some(_) => Some(State::NextSection),
            },
            State::SectionName => {
                let (_, eof) = r.read_bytes(b']');
                if eof {
                    return Err("unable to find end of section".to_string());
                }
                Some(State::SectionSuffix)
            }
            State::SectionSuffix => {
                let (garbage, _) = r.read_line();
                if !trim_space(garbage).is_empty() {
                    return Err(format!(
                        "found garbage after section name : {:?}",
                        String::from_utf8_lossy(garbage).trim()
                    ));
                }
                Some(State::NextSectionOrOption)
            }
            State::IgnoreLine(resume) => {
                loop {
                    let (line, _) = r.read_line();
                    let line = line.strip_suffix(b" ").unwrap_or(line);
                    if !line.ends_with(b"\\") {
                        break;
                    }
                }
                Some(match resume {
                    Resume::NextSection => State::NextSection,
                    Resume::NextSectionOrOption => State::NextSectionOrOption,
                })
            }
            State::NextSectionOrOption => match r.read_rune() {
                None => None,
                Some((c, _)) if is_go_space(c) => Some(State::NextSectionOrOption),
                Some(('[', _)) => Some(State::SectionName),
                Some((c, _)) if is_comment(c) => {
                    Some(State::IgnoreLine(Resume::NextSectionOrOption))
                }
                Some((_, width)) => {
                    r.unread(width);
                    Some(State::OptionName)
                }
            },
            State::OptionName => loop {
                match r.read_rune() {
                    None => return Err("EOF".to_string()),
                    Some(('\n', _)) | Some(('\r', _)) => {
                        return Err(
                            "unexpected newline encountered while parsing option name".to_string()
                        )
                    }
                    Some(('=', _)) => break Some(State::OptionValue),
                    Some(_) => {}
                }
            },
            State::OptionValue => {
                let (line, _) = r.read_line();
                if !trim_space(line).is_empty() && line.ends_with(b"\\") {
                    Some(State::OptionValue)
                } else {
                    Some(State::NextSectionOrOption)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_units() {
        for ok in [
            "",
            "[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
            "# comment\n[Unit]\nA=b \\\n  c\n",
            "garbage before any section is skipped\n[Unit]\nA=b",
            "[Service]\r\nA=b\r\n",
            "[Unit]\n; comment \\\n continued\nA=\n",
        ] {
            assert_eq!(check_unit_contents(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn rejects_what_go_systemd_rejects() {
        for (bad, message) in [
            (
                "[Unit",
                "invalid unit content: unable to find end of section",
            ),
            (
                "[Unit] x\n",
                "invalid unit content: found garbage after section name : \"x\"",
            ),
            (
                "[Unit]\nNoEquals\nA=b\n",
                "invalid unit content: unexpected newline encountered while parsing option name",
            ),
            ("[Unit]\nA=b\nTrailing", "invalid unit content: EOF"),
        ] {
            assert_eq!(
                check_unit_contents(bad),
                Err(message.to_string()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn long_lines_are_rejected_like_the_buffered_reader_does() {
        let long = format!("[Service]\nExecStart={}\n", "x".repeat(3000));
        assert_eq!(
            check_unit_contents(&long),
            Err("invalid unit content: line too long (max 2048 bytes)".to_string())
        );
        let fine = format!("[Service]\nExecStart={}\n", "x".repeat(2000));
        assert_eq!(check_unit_contents(&fine), Ok(()));
    }
}

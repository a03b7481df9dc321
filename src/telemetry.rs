//! Logging set-up: the `tracing` subscriber (human-readable text or JSON lines on stderr), the
//! mapping from the original server's klog `-v` numbers to levels, and the request span every
//! config request runs in.
//!
//! Owns: the subscriber, the filter directives, the request span's name and field names, and
//! [`ErrorChain`], how an error and its causes read in one log line (every module logs through it).
//! Must not touch: metrics, HTTP routing, anything on the request path beyond creating and
//! filling the span. Called once from `main` before anything logs.
//!
//! # Verbosity
//! `RUST_LOG`, when set and not empty, wins over `-v` entirely (standard `EnvFilter` syntax).
//! Otherwise `-v N` sets this crate's level with [`level_for_verbosity`] and the dependencies'
//! (kube, hyper, rustls, ...) with [`dependency_level_for_verbosity`]:
//!
//! | `-v` | this server | dependencies |
//! |---|---|---|
//! | 0-3 (default 0) | info | info |
//! | 4-5 | debug | info |
//! | 6-7 | trace | info |
//! | 8-9 | trace | debug |
//! | 10+ | trace | trace |
//!
//! # Request span
//! [`request_span`] creates the span named [`REQUEST_SPAN`] with these fields (names are part of
//! the log format and documented in `docs/operations.md`):
//! `pool`, `remote_addr`, `user_agent`, `accept`, `spec_version`, `status`, `bytes`,
//! `elapsed_ms`, `error_kind`. Fields not known when the request arrives start empty and are
//! filled with `Span::record` ([`record_pool`], [`record_spec_version`], [`record_response`],
//! [`record_error_kind`]). The server logs one info line per request in the span once all of
//! them are known, so that line carries the whole outcome.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use tracing::field::Empty;
use tracing::Span;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::ignition::SpecVersion;

/// The `tracing` target of this crate (library and binary), used in the default directives.
const CRATE_TARGET: &str = "machine_config_server";

/// Name of the span every config request runs in.
pub const REQUEST_SPAN: &str = "request";

/// Longest client-supplied header value (User-Agent, Accept) copied into a log field.
pub const MAX_LOGGED_HEADER_CHARS: usize = 256;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (`--log-format=text`, the default).
    #[default]
    Text,
    /// One JSON object per line (`--log-format=json`), with the current span's fields under
    /// `span` and the event's fields at the top level.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` is set but is not a valid filter.
    #[error("RUST_LOG is not a valid log filter: {0}")]
    InvalidFilter(#[source] tracing_subscriber::filter::ParseError),
    /// A global subscriber was installed already.
    #[error("installing the log subscriber failed: {0}")]
    Install(#[source] tracing_subscriber::util::TryInitError),
}

impl TelemetryError {
    /// Short, stable name of the error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidFilter(_) => "invalid_filter",
            Self::Install(_) => "install",
        }
    }
}

/// This crate's log level for klog-style verbosity `v`: 0-3 info, 4-5 debug, 6+ trace.
pub fn level_for_verbosity(v: u8) -> LevelFilter {
    match v {
        0..=3 => LevelFilter::INFO,
        4..=5 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// The dependencies' log level for verbosity `v`: info below 8, debug at 8-9, trace from 10.
/// Kept lower than ours so `-v 6` shows this server's trace without drowning it in kube and
/// hyper internals.
pub fn dependency_level_for_verbosity(v: u8) -> LevelFilter {
    match v {
        0..=7 => LevelFilter::INFO,
        8..=9 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// The filter to use: `rust_log` (the value of `RUST_LOG`) when set and not blank, else the
/// directives for `verbosity`.
pub fn filter_for(verbosity: u8, rust_log: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    let directives = match rust_log.map(str::trim) {
        Some(value) if !value.is_empty() => value.to_owned(),
        _ => format!(
            "{},{CRATE_TARGET}={}",
            dependency_level_for_verbosity(verbosity),
            level_for_verbosity(verbosity)
        ),
    };
    EnvFilter::builder()
        .parse(directives)
        .map_err(TelemetryError::InvalidFilter)
}

/// Installs the global subscriber writing to stderr. Reads `RUST_LOG`; call once from `main`.
pub fn init(format: LogFormat, verbosity: u8) -> Result<(), TelemetryError> {
    init_silencing(format, verbosity, &[])
}

/// [`init`], with the log targets `silenced` off unless `RUST_LOG` says otherwise (a one-shot
/// subcommand that reports a failed request in its own line, where the client's request log
/// would say it a second time).
pub fn init_silencing(
    format: LogFormat,
    verbosity: u8,
    silenced: &[&str],
) -> Result<(), TelemetryError> {
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty());
    let filter = match rust_log {
        Some(value) => filter_for(verbosity, Some(&value))?,
        None => {
            let mut directives = format!(
                "{},{CRATE_TARGET}={}",
                dependency_level_for_verbosity(verbosity),
                level_for_verbosity(verbosity)
            );
            for target in silenced {
                directives.push_str(&format!(",{target}=off"));
            }
            filter_for(verbosity, Some(&directives))?
        }
    };
    let ansi = format == LogFormat::Text && std::io::stderr().is_terminal();
    subscriber(format, filter, std::io::stderr, ansi)
        .try_init()
        .map_err(TelemetryError::Install)
}

/// The subscriber `init` installs, writing to `writer`; separate so tests can capture output.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync + 'static>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

/// Truncates a client-supplied value to [`MAX_LOGGED_HEADER_CHARS`] characters.
fn clip(value: &str) -> &str {
    match value.char_indices().nth(MAX_LOGGED_HEADER_CHARS) {
        Some((end, _)) => &value[..end],
        None => value,
    }
}

/// The span a config request runs in, at info level. `user_agent` and `accept` are the raw
/// header values (clipped; recorded as strings, so the text format quotes and escapes them).
pub fn request_span(
    remote_addr: Option<SocketAddr>,
    user_agent: Option<&str>,
    accept: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        REQUEST_SPAN,
        pool = Empty,
        remote_addr = Empty,
        user_agent = Empty,
        accept = Empty,
        spec_version = Empty,
        status = Empty,
        bytes = Empty,
        elapsed_ms = Empty,
        error_kind = Empty,
    );
    if let Some(addr) = remote_addr {
        span.record("remote_addr", tracing::field::display(addr));
    }
    if let Some(user_agent) = user_agent {
        span.record("user_agent", clip(user_agent));
    }
    if let Some(accept) = accept {
        span.record("accept", clip(accept));
    }
    span
}

/// Records the pool name the request asked for (clipped).
pub fn record_pool(span: &Span, pool: &str) {
    span.record("pool", clip(pool));
}

/// Records the negotiated spec version.
pub fn record_spec_version(span: &Span, version: SpecVersion) {
    span.record("spec_version", version.as_str());
}

/// Records how the request was answered.
pub fn record_response(span: &Span, status: u16, bytes: u64, elapsed: Duration) {
    span.record("status", status);
    span.record("bytes", bytes);
    // Microsecond precision: enough to read, and no float noise like 0.30304000000000003.
    span.record("elapsed_ms", elapsed.as_micros() as f64 / 1000.0);
}

/// Records the `kind()` of the error a failed request hit.
pub fn record_error_kind(span: &Span, kind: &'static str) {
    span.record("error_kind", kind);
}

/// Displays an error with its `source()` chain, `outer: inner: root`: how every module puts an
/// error into one log line or report.
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            // An error whose own message already ends with its cause's (`"{name}: {source}"`
            // with `#[source]`) names the cause once, not twice.
            let cause_text = cause.to_string();
            if !text.ends_with(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            source = cause.source();
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("disk full")]
    struct Root;

    #[derive(Debug, thiserror::Error)]
    enum Wrapper {
        #[error("writing cache")]
        Plain(#[source] Root),
        #[error("writing cache: {0}")]
        Repeating(#[source] Root),
    }

    #[test]
    fn an_error_chain_names_each_cause_once() {
        assert_eq!(
            ErrorChain(&Wrapper::Plain(Root)).to_string(),
            "writing cache: disk full"
        );
        // A message that already carries its source's text does not get it again.
        assert_eq!(
            ErrorChain(&Wrapper::Repeating(Root)).to_string(),
            "writing cache: disk full"
        );
    }

    #[test]
    fn verbosity_maps_to_levels() {
        let ours: Vec<LevelFilter> = (0..=11).map(level_for_verbosity).collect();
        use LevelFilter as L;
        assert_eq!(
            ours,
            [
                L::INFO,
                L::INFO,
                L::INFO,
                L::INFO,
                L::DEBUG,
                L::DEBUG,
                L::TRACE,
                L::TRACE,
                L::TRACE,
                L::TRACE,
                L::TRACE,
                L::TRACE
            ]
        );
        assert_eq!(level_for_verbosity(u8::MAX), L::TRACE);
        let deps: Vec<LevelFilter> = (0..=11).map(dependency_level_for_verbosity).collect();
        assert_eq!(&deps[..8], [L::INFO; 8]);
        assert_eq!(&deps[8..10], [L::DEBUG; 2]);
        assert_eq!(&deps[10..], [L::TRACE; 2]);
    }

    #[test]
    fn rust_log_wins_over_verbosity() {
        let filter = filter_for(0, Some("warn")).expect("valid filter");
        assert_eq!(filter.max_level_hint(), Some(LevelFilter::WARN));
        let filter = filter_for(9, Some("error")).expect("valid filter");
        assert_eq!(filter.max_level_hint(), Some(LevelFilter::ERROR));
    }

    #[test]
    fn blank_rust_log_falls_back_to_verbosity() {
        let filter = filter_for(4, Some("  ")).expect("valid filter");
        assert_eq!(filter.max_level_hint(), Some(LevelFilter::DEBUG));
        let filter = filter_for(0, None).expect("valid filter");
        assert_eq!(filter.max_level_hint(), Some(LevelFilter::INFO));
    }

    #[test]
    fn invalid_rust_log_is_an_error() {
        let err = filter_for(0, Some("foo=notalevel")).expect_err("invalid filter");
        assert_eq!(err.kind(), "invalid_filter");
        assert!(err.to_string().starts_with("RUST_LOG"), "{err}");
    }

    #[test]
    fn clip_cuts_on_a_char_boundary() {
        let long = "é".repeat(MAX_LOGGED_HEADER_CHARS + 10);
        assert_eq!(clip(&long).chars().count(), MAX_LOGGED_HEADER_CHARS);
        assert_eq!(clip("Ignition/2.14.0"), "Ignition/2.14.0");
    }

    /// Collects everything the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf-8")
        }
    }

    fn log_one_request(format: LogFormat, user_agent: &str) -> String {
        let out = Captured::default();
        let filter = filter_for(0, None).expect("valid filter");
        let subscriber = subscriber(format, filter, out.clone(), false);
        tracing::subscriber::with_default(subscriber, || {
            let span = request_span(
                Some("10.0.0.7:40000".parse().expect("addr")),
                Some(user_agent),
                Some("application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1"),
            );
            record_pool(&span, "worker");
            record_spec_version(&span, SpecVersion::V3_4);
            record_response(&span, 200, 1234, Duration::from_micros(1500));
            let _entered = span.enter();
            tracing::info!("served config");
        });
        out.text()
    }

    #[test]
    fn json_lines_carry_the_documented_span_fields() {
        let text = log_one_request(LogFormat::Json, "Ignition/2.14.0");
        let line: serde_json::Value =
            serde_json::from_str(text.trim()).expect("one JSON object per line");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "served config");
        let span = &line["span"];
        assert_eq!(span["name"], REQUEST_SPAN);
        assert_eq!(span["pool"], "worker");
        assert_eq!(span["remote_addr"], "10.0.0.7:40000");
        assert_eq!(span["user_agent"], "Ignition/2.14.0");
        assert_eq!(
            span["accept"],
            "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1"
        );
        assert_eq!(span["spec_version"], "3.4.0");
        assert_eq!(span["status"], 200);
        assert_eq!(span["bytes"], 1234);
        assert_eq!(span["elapsed_ms"], 1.5);
    }

    #[test]
    fn text_lines_escape_client_supplied_values() {
        let text = log_one_request(LogFormat::Text, "evil\nINFO forged line");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("pool=\"worker\""), "{text}");
        assert!(text.contains("status=200"), "{text}");
        assert!(text.contains("served config"), "{text}");
    }
}

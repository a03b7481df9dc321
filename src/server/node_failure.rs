//! `POST /v1/node-failure`: a machine whose first boot failed before its kubelet ran (an OS
//! image pivot that cannot pull, a bad kernel argument) tells the server why, so that the
//! failure shows in the cluster although no Node exists yet. The request and its answers are
//! those of the upstream proposal (openshift/machine-config-operator PR #6124,
//! `pkg/server/api.go`, `failure_reporter.go`):
//!
//! - the body is JSON `{"pool", "nodeID", "stage", "imageURL", "errorMessage"}`, decoded as Go's
//!   `encoding/json` does (the first JSON value; keys matched exactly, else case-insensitively;
//!   unknown keys ignored; `null` leaves a field empty);
//! - `405` with an empty body for any other method; `400` with
//!   `{"error":"Invalid JSON payload"}` for a body that does not decode, `400` with
//!   `{"error":"Missing required fields: pool, nodeID, and stage are required"}` when one of
//!   those is empty; otherwise `202` with `{"status":"accepted"}` (each body ends with a
//!   newline, as Go's `json.Encoder` writes it), whatever happens to the report afterwards: the
//!   machine must not retry-loop on the server's troubles.
//!
//! Beyond upstream, because the endpoint is reachable before anything authenticates a machine:
//! the same access policy as config requests (`--allowed-source-cidrs`, `--require-token-file`:
//! `403`, empty body), a body of at most [`MAX_BODY`] bytes (`413`), and at most
//! [`RATE_BURST`] reports per source address and then one per [`RATE_REFILL`] (`429`); the
//! source address is the client's (behind a PROXY protocol balancer too).
//!
//! The report is sanitized as upstream sanitizes it before anything stores or shows it
//! ([`sanitize_error_message`], [`sanitize_image_url`]; plus control characters replaced and
//! the node ID and stage cut), then:
//! - cluster mode: it becomes a durable record ([`super::served::ServedLog::record_failure`],
//!   the same group commit as served records: the answer waits, bounded, for the write that
//!   carries it), from which the lease holder writes a Warning Event `FirstbootFailed` on the
//!   pool (upstream's reason and message) and, once the machine's Node exists, the failure on
//!   its MachineConfigNode ([`crate::mcn`]);
//! - both modes: one log line, `mcs_firstboot_failures_total{pool,stage}`, and the report on
//!   the admin listener's `/status`.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::commit::{Durability, DEFAULT_WAIT_BOUND};
use super::per_source::{PerSource, DEFAULT_CAPACITY};
use super::served::FailureRecord;
use super::{AppState, RemoteAddr};
use crate::metrics::{FailureStatus, PoolLabel};
use crate::snapshot::Mode;

/// The route (an exact path, as Go's `ServeMux` pattern without a trailing slash).
pub const PATH: &str = "/v1/node-failure";
/// Largest request body accepted. A report is a few hundred bytes; upstream keeps 200 bytes of
/// its message.
pub const MAX_BODY: usize = 8 * 1024;
/// Reports accepted at once from one source address.
pub const RATE_BURST: u32 = 5;
/// One more report per source address per this interval.
pub const RATE_REFILL: Duration = Duration::from_secs(12);
/// Upstream's cap on the error message (bytes, before `... (truncated)`).
pub const MESSAGE_LIMIT: usize = 200;
/// Longest node ID kept (a DNS subdomain's limit).
pub const NODE_ID_LIMIT: usize = 253;
/// Longest stage and pool kept.
pub const STAGE_LIMIT: usize = 64;
/// Longest pool name kept.
pub const POOL_LIMIT: usize = 253;
/// The stages the metric names; any other is `other`. The upstream daemon reports
/// `firstboot-update`; its proposal names `pivot`, `kargs` and `updateLayeredOS` too.
pub const KNOWN_STAGES: [&str; 4] = ["firstboot-update", "pivot", "kargs", "updateLayeredOS"];

const INVALID_JSON: &str = "Invalid JSON payload";
const MISSING_FIELDS: &str = "Missing required fields: pool, nodeID, and stage are required";
const TOO_LARGE: &str = "Payload too large";
const RATE_LIMITED: &str = "Too many failure reports from this address";

/// The per-source budget of failure reports (shared by both serving ports).
#[derive(Debug)]
pub struct FailureIntake {
    limiter: PerSource,
}

impl Default for FailureIntake {
    fn default() -> Self {
        FailureIntake {
            limiter: PerSource::new(RATE_BURST, RATE_REFILL, DEFAULT_CAPACITY),
        }
    }
}

impl FailureIntake {
    fn allow(&self, address: IpAddr) -> bool {
        self.limiter.allow(address, Instant::now())
    }
}

/// A report as the machine sent it (JSON names of upstream's `FirstbootFailureReport`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailureReport {
    pub pool: String,
    pub node_id: String,
    pub stage: String,
    pub image_url: String,
    pub error_message: String,
}

/// Why a body is refused (`400`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("{INVALID_JSON}")]
    InvalidJson,
    #[error("{MISSING_FIELDS}")]
    MissingFields,
}

/// The JSON names of the report's fields, in upstream's struct order.
const FIELDS: [&str; 5] = ["pool", "nodeID", "stage", "imageURL", "errorMessage"];

/// Decodes a body as Go's `json.NewDecoder(body).Decode(&report)` does, then checks the
/// required fields. Pure.
pub fn decode(body: &[u8]) -> Result<FailureReport, ReportError> {
    let text = trim_json_space(body);
    if text.starts_with(b"null") {
        // Go decodes `null` into a struct as "leave it alone": every field is empty.
        return Err(ReportError::MissingFields);
    }
    let text = go_text(text);
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<OrderedObject>();
    let object = match stream.next() {
        Some(Ok(object)) => object,
        _ => return Err(ReportError::InvalidJson),
    };
    let mut values: [Option<String>; 5] = Default::default();
    for (key, value) in object.0 {
        let Some(index) = FIELDS
            .iter()
            .position(|field| *field == key)
            .or_else(|| FIELDS.iter().position(|field| go_fold_eq(field, &key)))
        else {
            continue;
        };
        match value {
            Value::String(text) => values[index] = Some(text),
            Value::Null => {}
            _ => return Err(ReportError::InvalidJson),
        }
    }
    let [pool, node_id, stage, image_url, error_message] = values.map(Option::unwrap_or_default);
    if pool.is_empty() || node_id.is_empty() || stage.is_empty() {
        return Err(ReportError::MissingFields);
    }
    Ok(FailureReport {
        pool,
        node_id,
        stage,
        image_url,
        error_message,
    })
}

/// The body as Go's decoder reads it: invalid UTF-8 and lone UTF-16 surrogate escapes
/// (`\ud800`) in strings become U+FFFD instead of errors (serde_json refuses both; found by
/// a side-by-side run against upstream's server on the fuzzing corpus). Outside strings such
/// bytes stay invalid JSON either way.
fn go_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let chars: Vec<char> = text.chars().collect();
    let hex4 = |at: usize| -> Option<u32> {
        if chars.get(at) != Some(&'\\') || chars.get(at + 1) != Some(&'u') {
            return None;
        }
        let digits: String = chars.get(at + 2..at + 6)?.iter().collect();
        u32::from_str_radix(&digits, 16)
            .ok()
            .filter(|_| digits.len() == 4 && digits.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let mut out = String::with_capacity(text.len());
    let (mut at, mut in_string) = (0, false);
    while at < chars.len() {
        let c = chars[at];
        if !in_string {
            in_string = c == '"';
            out.push(c);
            at += 1;
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
                at += 1;
            }
            '\\' => match hex4(at) {
                Some(0xD800..=0xDBFF) => match hex4(at + 6) {
                    Some(0xDC00..=0xDFFF) => {
                        out.extend(&chars[at..at + 12]);
                        at += 12;
                    }
                    _ => {
                        out.push_str("\\ufffd");
                        at += 6;
                    }
                },
                Some(0xDC00..=0xDFFF) => {
                    out.push_str("\\ufffd");
                    at += 6;
                }
                _ => {
                    // Any other escape: the backslash and what it escapes, as they are.
                    out.extend(&chars[at..(at + 2).min(chars.len())]);
                    at += 2;
                }
            },
            c => {
                out.push(c);
                at += 1;
            }
        }
    }
    out
}

/// Go's JSON white space (space, tab, CR, LF) trimmed from the start.
fn trim_json_space(body: &[u8]) -> &[u8] {
    let start = body
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .unwrap_or(body.len());
    &body[start..]
}

/// Go's case-insensitive key match (`encoding/json` folds keys: ASCII case, and the Kelvin
/// sign and long s fold to `k` and `s`). `field` is ASCII.
fn go_fold_eq(field: &str, key: &str) -> bool {
    let mut key_chars = key.chars().map(|c| match c {
        '\u{212A}' => 'k',
        '\u{017F}' => 's',
        c => c.to_ascii_lowercase(),
    });
    field
        .chars()
        .all(|f| key_chars.next() == Some(f.to_ascii_lowercase()))
        && key_chars.next().is_none()
}

/// A JSON object's members in document order, duplicates kept (Go assigns each in turn, so
/// the last one wins).
struct OrderedObject(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for OrderedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    members.push((key, value));
                }
                Ok(OrderedObject(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// Upstream's `sanitizeErrorMessage`: `unknown error` when empty; cut to [`MESSAGE_LIMIT`]
/// bytes (on a character boundary) with `... (truncated)`; then secrets redacted
/// ([`redact_secrets`], every occurrence where upstream redacts the first); then control
/// characters replaced by spaces (the message goes into log lines, annotations and Events),
/// and once more the patterns a space ends, which that replacement may have formed (`bearer`
/// and a newline becomes `bearer `; found by fuzzing). The second pass changes nothing already
/// redacted (`[REDACTED]` holds no space).
pub fn sanitize_error_message(message: &str) -> String {
    if message.is_empty() {
        return "unknown error".to_owned();
    }
    let mut message = message.to_owned();
    if message.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("... (truncated)");
    }
    let cleaned = without_controls(&redact_secrets(&message));
    redact(
        &cleaned,
        SECRET_PATTERNS
            .iter()
            .filter(|(prefix, _)| prefix.contains(' ')),
    )
}

/// Upstream's secret patterns: the text after each prefix (any case) up to its terminator is
/// replaced by `[REDACTED]`.
const SECRET_PATTERNS: [(&str, &str); 6] = [
    ("token=", "&"),
    ("password=", "&"),
    ("key=", "&"),
    ("secret=", "&"),
    ("authorization:", "\n"),
    ("bearer ", " "),
];

/// Replaces what follows every secret prefix (ASCII case-insensitive) up to its terminator (or
/// the end) by `[REDACTED]`.
pub fn redact_secrets(text: &str) -> String {
    redact(text, SECRET_PATTERNS.iter())
}

fn redact<'a>(text: &str, patterns: impl Iterator<Item = &'a (&'a str, &'a str)>) -> String {
    let mut out = text.to_owned();
    for &(prefix, terminator) in patterns {
        let mut from = 0;
        while let Some(found) = find_ascii_case_insensitive(&out[from..], prefix) {
            let start = from + found + prefix.len();
            let end = out[start..]
                .find(terminator)
                .map_or(out.len(), |offset| start + offset);
            out.replace_range(start..end, "[REDACTED]");
            from = start + "[REDACTED]".len();
        }
    }
    out
}

fn find_ascii_case_insensitive(haystack: &str, needle: &str) -> Option<usize> {
    let (hay, needle) = (haystack.as_bytes(), needle.as_bytes());
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len())
        .find(|&at| hay[at..at + needle.len()].eq_ignore_ascii_case(needle))
}

/// Upstream's `sanitizeImageURL`: `none` when empty; the image reduced to its registry host
/// (credentials, repository, tag, digest and query dropped); `internal-registry` for the
/// in-cluster registry; `invalid-url` when no host can be read.
pub fn sanitize_image_url(image: &str) -> String {
    if image.is_empty() {
        return "none".to_owned();
    }
    let rest = match image.find("://") {
        Some(at) => &image[at + 3..],
        None => image,
    };
    let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
    let host = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    if !is_host_and_port(host) {
        return "invalid-url".to_owned();
    }
    if host.contains("image-registry.openshift-image-registry") {
        return "internal-registry".to_owned();
    }
    host.to_owned()
}

/// A host name or address with an optional numeric port (what Go's URL parser accepts as a
/// host, narrowed to what a registry host can be).
fn is_host_and_port(authority: &str) -> bool {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((address, rest)) = bracketed.split_once(']') else {
            return false;
        };
        let port = match rest {
            "" => None,
            rest => match rest.strip_prefix(':') {
                Some(port) => Some(port),
                None => return false,
            },
        };
        (address, port)
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// Upstream's Event message: `Node <id> failed during firstboot at stage '<stage>': <message>
/// (image: <registry>)`, from a sanitized record.
pub fn failure_message(failure: &FailureRecord) -> String {
    format!(
        "Node {} failed during firstboot at stage '{}': {} (image: {})",
        failure.node_id, failure.stage, failure.message, failure.image
    )
}

/// The metric label of a reported stage: one of [`KNOWN_STAGES`], else `other`.
pub fn stage_label(stage: &str) -> &'static str {
    KNOWN_STAGES
        .into_iter()
        .find(|known| *known == stage)
        .unwrap_or("other")
}

/// `text` with control characters replaced by spaces, cut to at most `limit` bytes.
fn cleaned(text: &str, limit: usize) -> String {
    let mut out = without_controls(text);
    if out.len() > limit {
        let mut end = limit;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

fn without_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The sanitized record of `report`, received at `reported_at`. Pure.
pub fn sanitize(report: &FailureReport, reported_at: std::time::SystemTime) -> FailureRecord {
    FailureRecord {
        pool: cleaned(&report.pool, POOL_LIMIT),
        node_id: cleaned(&report.node_id, NODE_ID_LIMIT),
        stage: cleaned(&report.stage, STAGE_LIMIT),
        message: sanitize_error_message(&report.error_message),
        image: sanitize_image_url(&report.image_url),
        reported_at,
    }
}

/// The handler of [`PATH`] (both serving ports).
pub async fn report(state: AppState, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let remote = parts.extensions.get::<RemoteAddr>().map(|r| r.0);
    if parts.method != Method::POST {
        state.metrics.node_failure_report("method_not_allowed");
        return super::empty(StatusCode::METHOD_NOT_ALLOWED);
    }
    let source = remote.map(|r| r.to_string()).unwrap_or_default();
    if let Err(denial) = state.access.check(
        remote.map(|r| r.ip()),
        parts.headers.get(http::header::AUTHORIZATION),
    ) {
        tracing::warn!(remote = %source, path = PATH, reason = denial.as_str(), "failure report denied");
        state.metrics.node_failure_report("denied");
        return super::empty(StatusCode::FORBIDDEN);
    }
    if let Some(address) = remote {
        if !state.failure_intake.allow(address.ip()) {
            tracing::debug!(remote = %source, "failure report rate-limited");
            state.metrics.node_failure_report("rate_limited");
            return json_error(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED);
        }
    }
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY as u64) {
        state.metrics.node_failure_report("too_large");
        return json_error(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE);
    }
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let too_large = error
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            if too_large {
                state.metrics.node_failure_report("too_large");
                return json_error(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE);
            }
            // The client went away mid-body: treated as a body that does not decode.
            state.metrics.node_failure_report("invalid");
            return json_error(StatusCode::BAD_REQUEST, INVALID_JSON);
        }
    };
    let report = match decode(&body) {
        Ok(report) => report,
        Err(error) => {
            tracing::info!(remote = %source, error = %error, "failure report refused");
            state.metrics.node_failure_report("invalid");
            return json_error(StatusCode::BAD_REQUEST, &error.to_string());
        }
    };
    accept(&state, remote, &report).await;
    json_body(StatusCode::ACCEPTED, "status", "accepted")
}

/// Logs, counts, shows and (cluster mode) records an accepted report; waits, bounded, for the
/// write that carries it.
async fn accept(state: &AppState, remote: Option<SocketAddr>, report: &FailureReport) {
    let failure = sanitize(report, state.served.clock().now());
    let (mode, exists) = {
        let snapshot = state.snapshots.borrow();
        let exists = matches!(snapshot.pools.get(&failure.pool), Some(Ok(_)));
        (snapshot.mode, exists)
    };
    let pool = PoolLabel::new(&failure.pool, exists);
    let stage = stage_label(&failure.stage);
    state.metrics.node_failure_report("accepted");
    state
        .metrics
        .firstboot_failure(&pool, stage, failure.reported_at);
    let address = remote.map(|r| r.ip().to_canonical());
    tracing::warn!(
        remote = %address.map(|a| a.to_string()).unwrap_or_default(),
        pool = %failure.pool,
        node = %failure.node_id,
        stage = %failure.stage,
        image = %failure.image,
        message = %failure.message,
        "machine reported a first-boot failure"
    );
    state.pools.record_failure(FailureStatus {
        address: address.map(|a| a.to_string()).unwrap_or_default(),
        pool: failure.pool.clone(),
        node_id: failure.node_id.clone(),
        stage: failure.stage.clone(),
        message: failure.message.clone(),
        image: failure.image.clone(),
        at_unix_secs: crate::metrics::unix_now(),
    });
    // Bootstrap mode has no cluster to tell: logged and counted only.
    let (Mode::Cluster, Some(address)) = (mode, address) else {
        return;
    };
    let sequence = state.served.record_failure(address, failure);
    if state.served.durable(sequence, DEFAULT_WAIT_BOUND).await == Durability::Pending {
        tracing::debug!("answering before the failure record is durable (API slow or unreachable)");
        state.metrics.served_before_durable();
    }
}

/// `{"<key>":"<value>"}` and a newline, as Go's `json.NewEncoder(w).Encode(map[string]string)`.
fn json_body(status: StatusCode, key: &str, value: &str) -> Response<Body> {
    let mut text = serde_json::json!({ key: value }).to_string();
    text.push('\n');
    let length = text.len();
    let mut response = Response::new(Body::from(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    response
}

fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    json_body(status, "error", message)
}

#[cfg(test)]
mod tests;

//! The in-test API server held to a real kube-apiserver's recorded answers.
//!
//! A corpus (format `mcs-apiserver-corpus/1`, described in the corpus README) is a sequence of
//! HTTP requests and what kube-apiserver answered to each. This test replays every corpus file
//! of the upstream assets (`$MCS_UPSTREAM_ASSETS/api-corpus/*.json`), and the file or directory
//! named by `MCS_API_CORPUS` when set, against a fresh in-test server per file (the real CRDs of
//! the upstream tier loaded), over HTTP exactly as recorded: query parameters URL-encoded, the
//! body serialized as JSON, the recorded `Content-Type`, `Accept: application/json`,
//! `User-Agent: Python-urllib/3.11`, as a cluster admin. Templates (`{{rv:ID}}`, `{{uid:ID}}`,
//! `{{continue:ID}}`, `{{name:ID}}`) take values from this server's own earlier answers.
//!
//! Both answers are normalized as the README says, then compared: status code and warnings
//! equal; a `Status` with the same `reason`, `code` and `details.causes` as a set of
//! (field, reason); any other body equal. The wording (the set of cause messages, and the
//! message of a `Status` with at most one cause) is a separate, weaker figure. Each file gives
//! one line, `api corpus: N/M steps match; wording K/M`, and each mismatch its step id, why it
//! was recorded and a short diff; the test fails unless every step matches.
//!
//! Without the upstream assets the corpus group is recorded as not run (an error with
//! `CI=true`), as for every upstream-tier test.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use support::tier;

use serde_json::{Map, Value};
use support::fake_apiserver::{freeze_clock, FakeApiServer, Options};
use support::upstream;

/// The variable naming one more corpus file, or a directory of them, to replay.
const EXTRA_CORPUS_VAR: &str = "MCS_API_CORPUS";
const FORMAT: &str = "mcs-apiserver-corpus/1";
const USER_AGENT: &str = "Python-urllib/3.11";

/// One recorded request.
#[derive(Clone, Debug)]
struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    content_type: Option<String>,
    body: Value,
}

/// One answer: recorded (normalized) or ours (raw, normalized before comparing).
#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    warnings: Vec<String>,
    body: Value,
}

#[derive(Clone, Debug)]
struct Step {
    id: String,
    why: String,
    request: Request,
    response: Answer,
}

/// The outcome of one step.
#[derive(Debug)]
struct StepResult {
    id: String,
    why: String,
    /// `None` when the answers are the same (rules 1-3), else what differs.
    mismatch: Option<String>,
    /// `None` when the wording is the same (rule 4), else ours and the recorded one.
    wording: Option<String>,
}

/// The outcome of one corpus file.
#[derive(Debug)]
struct Replay {
    file: PathBuf,
    steps: Vec<StepResult>,
}

impl Replay {
    fn matching(&self) -> usize {
        self.steps.iter().filter(|s| s.mismatch.is_none()).count()
    }

    fn worded(&self) -> usize {
        self.steps.iter().filter(|s| s.wording.is_none()).count()
    }

    /// `api corpus: N/M steps match; wording K/M`.
    fn summary(&self) -> String {
        let total = self.steps.len();
        format!(
            "api corpus: {}/{total} steps match; wording {}/{total} ({})",
            self.matching(),
            self.worded(),
            self.file.display()
        )
    }

    /// The summary, then per mismatch its id, why, and the difference; then the steps whose
    /// wording differs.
    fn report(&self) -> String {
        let mut out = self.summary();
        for step in &self.steps {
            if let Some(diff) = &step.mismatch {
                out.push_str(&format!("\n  {} ({}): {diff}", step.id, step.why));
            }
        }
        for step in &self.steps {
            if let (None, Some(words)) = (&step.mismatch, &step.wording) {
                out.push_str(&format!("\n  wording of {}: {words}", step.id));
            }
        }
        out
    }
}

fn text(value: &Value, field: &str) -> Result<String, String> {
    value[field]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{field} is not a string"))
}

fn parse_corpus(path: &Path) -> Result<Vec<Step>, String> {
    let raw = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&raw).map_err(|e| format!("{}: {e}", path.display()))?;
    if doc["format"] != FORMAT {
        return Err(format!(
            "{}: format {} is not {FORMAT:?}",
            path.display(),
            doc["format"]
        ));
    }
    let steps = doc["steps"]
        .as_array()
        .ok_or_else(|| format!("{}: no steps", path.display()))?;
    steps
        .iter()
        .map(|step| {
            let request = &step["request"];
            let response = &step["response"];
            let query = match &request["query"] {
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or("query value")?.to_string())))
                    .collect::<Result<Vec<_>, String>>()?,
                Value::Null => Vec::new(),
                _ => return Err("query is not an object".to_string()),
            };
            Ok(Step {
                id: text(step, "id")?,
                why: step["why"].as_str().unwrap_or_default().to_string(),
                request: Request {
                    method: text(request, "method")?,
                    path: text(request, "path")?,
                    query,
                    content_type: request["content_type"].as_str().map(str::to_string),
                    body: request["body"].clone(),
                },
                response: Answer {
                    status: response["status"]
                        .as_u64()
                        .and_then(|s| u16::try_from(s).ok())
                        .ok_or("response status")?,
                    warnings: response["warnings"]
                        .as_array()
                        .map(|w| {
                            w.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                    body: response["body"].clone(),
                },
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Replaces every `{{kind:ID}}` in `text` with the value taken from step ID's raw answer.
fn render(text: &str, answers: &HashMap<String, Value>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed template in {text:?}"))?;
        let template = &after[..end];
        let (kind, id) = template
            .split_once(':')
            .ok_or_else(|| format!("template {template:?} is not kind:ID"))?;
        let answer = answers
            .get(id)
            .ok_or_else(|| format!("template {template:?} names no earlier step"))?;
        let field = match kind {
            "rv" => "resourceVersion",
            "uid" => "uid",
            "continue" => "continue",
            "name" => "name",
            other => return Err(format!("unknown template kind {other:?}")),
        };
        let value = answer["metadata"][field].as_str().ok_or_else(|| {
            format!("template {template:?}: the answer of {id} has no metadata.{field}")
        })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// [`render`] on every string of a JSON value.
fn render_value(value: &Value, answers: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => Value::String(render(s, answers)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_value(v, answers))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_value(v, answers)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        ),
        other => other.clone(),
    })
}

/// URL-encodes a query component as Python's `urllib.parse.urlencode` does (`quote_plus`).
fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// Sends one request over a fresh connection; the status, the `Warning` headers in order and
/// the body as JSON (`Null` when empty; a string when it is not JSON).
fn send(
    address: std::net::SocketAddr,
    token: &str,
    request: &Request,
    answers: &HashMap<String, Value>,
) -> Result<Answer, String> {
    let mut target = render(&request.path, answers)?;
    if !request.query.is_empty() {
        let query: Vec<String> = request
            .query
            .iter()
            .map(|(k, v)| {
                Ok(format!(
                    "{}={}",
                    url_encode(k),
                    url_encode(&render(v, answers)?)
                ))
            })
            .collect::<Result<_, String>>()?;
        target.push('?');
        target.push_str(&query.join("&"));
    }
    let body = match &request.body {
        Value::Null => String::new(),
        body => render_value(body, answers)?.to_string(),
    };
    let mut head = format!(
        "{} {target} HTTP/1.1\r\nHost: {address}\r\nAccept: application/json\r\n\
         User-Agent: {USER_AGENT}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n",
        request.method
    );
    if let Some(content_type) = &request.content_type {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    if !body.is_empty() || matches!(request.method.as_str(), "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    let mut stream = std::net::TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Result<Answer, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or("no status line")?;
    let mut warnings = Vec::new();
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().to_string();
        if name.eq_ignore_ascii_case("warning") {
            warnings.push(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked") {
            chunked = true;
        }
    }
    if chunked {
        body = dechunk(&body)?;
    }
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    Ok(Answer {
        status,
        warnings,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunk")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "bad chunk size")?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(data.get(..size).ok_or("short chunk")?);
        data = data.get(size + 2..).ok_or("short chunk")?;
    }
}

const SET: &str = "<set>";
/// Kubernetes' `SimpleNameGenerator`: five characters of this alphabet after the prefix.
const GENERATED_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

fn is_generated_suffix(suffix: &str) -> bool {
    suffix.len() == 5 && suffix.chars().all(|c| GENERATED_ALPHABET.contains(c))
}

/// The README's normalization, in place.
fn normalize(body: &mut Value) {
    normalize_objects(body);
    if is_status(body) {
        if let Some(details) = body.get_mut("details").and_then(Value::as_object_mut) {
            if details.contains_key("uid") {
                details.insert("uid".into(), Value::from(SET));
            }
            if let Some(Value::Array(causes)) = details.get_mut("causes") {
                for cause in causes.iter_mut() {
                    if let Some(Value::String(message)) = cause.get_mut("message") {
                        *message = mask_uuids(message);
                    }
                }
                causes.sort_by_key(|c| {
                    let t = |f: &str| c[f].as_str().unwrap_or_default().to_string();
                    (t("field"), t("reason"), t("message"))
                });
            }
        }
        if let Some(Value::String(message)) = body.get_mut("message") {
            *message = mask_uuids(message);
        }
    }
}

/// Server-set metadata of every object (any depth) becomes `<set>`.
fn normalize_objects(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                normalize_metadata(meta);
            }
            for (key, child) in map.iter_mut() {
                if key != "metadata" {
                    normalize_objects(child);
                }
            }
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                // Objects embedded in metadata (none today) are normalized too.
                for (key, child) in meta.iter_mut() {
                    if key != "managedFields" {
                        normalize_objects(child);
                    }
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_objects),
        _ => {}
    }
}

fn normalize_metadata(meta: &mut Map<String, Value>) {
    for field in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "deletionTimestamp",
    ] {
        if meta.contains_key(field) {
            meta.insert(field.into(), Value::from(SET));
        }
    }
    if meta
        .get("continue")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        meta.insert("continue".into(), Value::from(SET));
    }
    if let (Some(prefix), Some(name)) = (
        meta.get("generateName").and_then(Value::as_str),
        meta.get("name").and_then(Value::as_str),
    ) {
        if name
            .strip_prefix(prefix)
            .is_some_and(|suffix| !prefix.is_empty() && is_generated_suffix(suffix))
        {
            let generated = format!("{prefix}<generated>");
            meta.insert("name".into(), Value::from(generated));
        }
    }
    if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
        for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
            if entry.contains_key("time") {
                entry.insert("time".into(), Value::from(SET));
            }
        }
    }
}

/// Every UUID (8-4-4-4-12 hex digits) in `text` becomes `<uid>`.
fn mask_uuids(text: &str) -> String {
    let bytes = text.as_bytes();
    let groups = [8, 4, 4, 4, 12];
    let is_uuid_at = |start: usize| -> Option<usize> {
        let mut i = start;
        for (n, len) in groups.iter().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'-') {
                    return None;
                }
                i += 1;
            }
            for _ in 0..*len {
                if !bytes.get(i)?.is_ascii_hexdigit() {
                    return None;
                }
                i += 1;
            }
        }
        let bounded = |b: Option<&u8>| b.is_none_or(|b| !b.is_ascii_hexdigit() && *b != b'-');
        (start == 0 || bounded(bytes.get(start - 1)))
            .then_some(())
            .filter(|_| bounded(bytes.get(i)))
            .map(|_| i)
    };
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        match is_uuid_at(i) {
            Some(end) => {
                out.push_str("<uid>");
                i = end;
            }
            None => {
                let c = text[i..].chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    out
}

fn is_status(body: &Value) -> bool {
    body["kind"] == "Status" && body["apiVersion"] == "v1"
}

/// (field, reason) of every cause, as a set.
fn cause_keys(body: &Value) -> BTreeSet<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let t = |f: &str| c[f].as_str().unwrap_or_default().to_string();
            (t("field"), t("reason"))
        })
        .collect()
}

fn cause_messages(body: &Value) -> BTreeSet<String> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn shorten(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 160 {
        format!("{}...", text.chars().take(157).collect::<String>())
    } else {
        text
    }
}

/// Rules 1-3 of the README: `None` when the answers are the same, else a short diff.
fn compare(expected: &Answer, actual: &Answer) -> Option<String> {
    if expected.status != actual.status {
        return Some(format!(
            "status {} (expected {}); body {}",
            actual.status,
            expected.status,
            shorten(&actual.body)
        ));
    }
    if expected.warnings != actual.warnings {
        return Some(format!(
            "warnings {:?} (expected {:?})",
            actual.warnings, expected.warnings
        ));
    }
    if is_status(&expected.body) {
        if !is_status(&actual.body) {
            return Some(format!(
                "a {} body (expected a Status): {}",
                actual.body["kind"],
                shorten(&actual.body)
            ));
        }
        let mut problems = Vec::new();
        for field in ["reason", "code"] {
            if expected.body.get(field) != actual.body.get(field) {
                problems.push(format!(
                    "{field} {} (expected {})",
                    actual.body.get(field).map_or("absent".into(), shorten),
                    expected.body.get(field).map_or("absent".into(), shorten)
                ));
            }
        }
        let (want, got) = (cause_keys(&expected.body), cause_keys(&actual.body));
        let missing: Vec<_> = want.difference(&got).collect();
        let unexpected: Vec<_> = got.difference(&want).collect();
        if !missing.is_empty() {
            problems.push(format!("missing causes {missing:?}"));
        }
        if !unexpected.is_empty() {
            problems.push(format!("unexpected causes {unexpected:?}"));
        }
        if problems.is_empty() {
            return None;
        }
        problems.push(format!("message {:?}", actual.body["message"]));
        return Some(problems.join("; "));
    }
    let mut diffs = Vec::new();
    json_diff(&expected.body, &actual.body, "", &mut diffs);
    if diffs.is_empty() {
        None
    } else {
        let more = diffs.len().saturating_sub(4);
        diffs.truncate(4);
        if more > 0 {
            diffs.push(format!("and {more} more"));
        }
        Some(diffs.join("; "))
    }
}

/// Paths where two JSON values differ, with both values.
fn json_diff(expected: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => {
            let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
            for key in keys {
                let child = format!("{path}.{key}");
                match (want.get(key), got.get(key)) {
                    (Some(w), Some(g)) => json_diff(w, g, &child, out),
                    (Some(w), None) => {
                        out.push(format!("{child} missing (expected {})", shorten(w)))
                    }
                    (None, Some(g)) => out.push(format!("{child} unexpected: {}", shorten(g))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => {
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                json_diff(w, g, &format!("{path}[{i}]"), out);
            }
        }
        (want, got) if want != got => out.push(format!(
            "{} is {} (expected {})",
            if path.is_empty() { "body" } else { path },
            shorten(got),
            shorten(want)
        )),
        _ => {}
    }
}

/// Rule 4: the wording of a `Status`: the set of cause messages, and the message when there is
/// at most one cause. An answer that is no `Status` has no wording: it agrees when ours is no
/// `Status` either. `None` when the wording agrees, else ours against the recorded one.
fn wording_difference(expected: &Answer, actual: &Answer) -> Option<String> {
    if !is_status(&expected.body) {
        return is_status(&actual.body).then(|| "a Status (expected none)".to_string());
    }
    if !is_status(&actual.body) {
        return Some("no Status".into());
    }
    let (want, got) = (cause_messages(&expected.body), cause_messages(&actual.body));
    if want != got {
        let missing: Vec<_> = want.difference(&got).collect();
        let unexpected: Vec<_> = got.difference(&want).collect();
        return Some(format!("causes {unexpected:?} (recorded {missing:?})"));
    }
    let causes = expected.body["details"]["causes"]
        .as_array()
        .map_or(0, Vec::len);
    (causes <= 1 && expected.body["message"] != actual.body["message"]).then(|| {
        format!(
            "message {} (recorded {})",
            actual.body["message"], expected.body["message"]
        )
    })
}

fn same_wording(expected: &Answer, actual: &Answer) -> bool {
    wording_difference(expected, actual).is_none()
}

/// Replays one corpus file against a fresh in-test server with the real CRDs.
fn replay(file: &Path, crds: &Path) -> Result<Replay, String> {
    let steps = parse_corpus(file)?;
    // As on the fast server the recordings were made on: each burst of writes within one
    // second, so managedFields sort by manager and not by when a loaded machine got to them.
    freeze_clock();
    let server = FakeApiServer::start(Options {
        crd_dir: Some(crds.to_path_buf()),
        ..Options::default()
    });
    let token = server.admin_token();
    let mut answers: HashMap<String, Value> = HashMap::new();
    let mut results = Vec::new();
    for step in steps {
        let (mismatch, wording) = match send(server.address(), &token, &step.request, &answers) {
            Ok(raw) => {
                answers.insert(step.id.clone(), raw.body.clone());
                let mut ours = raw;
                normalize(&mut ours.body);
                let mut recorded = step.response.clone();
                normalize(&mut recorded.body);
                (
                    compare(&recorded, &ours),
                    wording_difference(&recorded, &ours),
                )
            }
            Err(e) => (
                Some(format!("request not sent: {e}")),
                Some("not sent".to_string()),
            ),
        };
        results.push(StepResult {
            id: step.id,
            why: step.why,
            mismatch,
            wording,
        });
    }
    Ok(Replay {
        file: file.to_path_buf(),
        steps: results,
    })
}

/// `*.json` files of a directory, sorted; a file stands for itself.
fn corpus_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    files.sort();
    files
}

/// Every corpus this run replays: the upstream assets' `api-corpus/`, then `MCS_API_CORPUS`.
fn corpora() -> Vec<PathBuf> {
    let dir = upstream::api_corpus();
    let mut files = corpus_files(&dir);
    assert!(
        !files.is_empty(),
        "{} holds no corpus file (*.json)",
        dir.display()
    );
    if let Some(extra) = std::env::var_os(EXTRA_CORPUS_VAR).filter(|v| !v.is_empty()) {
        let extra = PathBuf::from(extra);
        assert!(
            extra.exists(),
            "{EXTRA_CORPUS_VAR}={} does not exist",
            extra.display()
        );
        files.extend(corpus_files(&extra));
    }
    files
}

#[tier(upstream)]
#[test]
fn the_in_test_server_answers_every_recorded_request_as_kube_apiserver_did() {
    let files = corpora();
    let crds = upstream::crds();
    let mut failed = Vec::new();
    for file in files {
        let replay = replay(&file, &crds).unwrap_or_else(|e| panic!("{e}"));
        println!("{}", replay.report());
        if replay.matching() != replay.steps.len() {
            failed.push(replay.summary());
        }
    }
    assert!(failed.is_empty(), "mismatches: {failed:#?}");
}

/// The replay finds what differs: a copy of the corpus with answers altered the way a wrong
/// server would answer (another status code, a missing cause, a different field, a missing
/// warning, another message) reports exactly those steps, with their ids.
#[tier(upstream)]
#[test]
fn an_altered_recording_is_reported_step_by_step() {
    let dir = upstream::api_corpus();
    let crds = upstream::crds();
    let original = corpus_files(&dir)
        .into_iter()
        .next()
        .expect("a corpus file");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
    let steps = doc["steps"].as_array_mut().unwrap();
    let mut altered = BTreeSet::new();
    let mut reworded = None;
    let step_with = |steps: &[Value], check: &dyn Fn(&Value) -> bool| -> usize {
        steps
            .iter()
            .position(|s| check(&s["response"]))
            .expect("a step of that kind")
    };
    // Another status code.
    let i = step_with(steps, &|r| r["status"] == 201);
    steps[i]["response"]["status"] = Value::from(200);
    altered.insert(steps[i]["id"].as_str().unwrap().to_string());
    // A cause fewer.
    let i = step_with(steps, &|r| {
        r["body"]["details"]["causes"]
            .as_array()
            .is_some_and(|c| c.len() >= 2)
    });
    steps[i]["response"]["body"]["details"]["causes"]
        .as_array_mut()
        .unwrap()
        .pop();
    altered.insert(steps[i]["id"].as_str().unwrap().to_string());
    // A field of an object.
    let i = step_with(steps, &|r| {
        r["status"] == 200 && r["body"]["spec"].is_object()
    });
    steps[i]["response"]["body"]["spec"]["altered"] = Value::from(true);
    altered.insert(steps[i]["id"].as_str().unwrap().to_string());
    // A warning.
    let i = step_with(steps, &|r| {
        r["warnings"].as_array().is_some_and(|w| !w.is_empty())
    });
    steps[i]["response"]["warnings"] = Value::Array(Vec::new());
    altered.insert(steps[i]["id"].as_str().unwrap().to_string());
    // Only the wording of a one-cause Status: a match, but not in wording.
    let i = step_with(steps, &|r| {
        r["body"]["details"]["causes"]
            .as_array()
            .is_some_and(|c| c.len() == 1)
    });
    steps[i]["response"]["body"]["message"] = Value::from("reworded");
    reworded = reworded.or(Some(steps[i]["id"].as_str().unwrap().to_string()));

    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("altered.json");
    std::fs::write(&copy, doc.to_string()).unwrap();
    let replay = replay(&copy, &crds).unwrap();
    let reported: BTreeSet<String> = replay
        .steps
        .iter()
        .filter(|s| s.mismatch.is_some())
        .map(|s| s.id.clone())
        .collect();
    // What the unaltered corpus already reports stays reported; the altered steps join it.
    let baseline = replay_mismatches(&original, &crds);
    let expected: BTreeSet<String> = baseline.union(&altered).cloned().collect();
    assert_eq!(reported, expected, "{}", replay.report());
    let reworded = reworded.unwrap();
    let step = replay.steps.iter().find(|s| s.id == reworded).unwrap();
    assert!(
        step.wording.is_some(),
        "{reworded}: a changed message counts against the wording"
    );
    assert!(replay
        .report()
        .contains(&format!("\n  {}", altered.iter().next().unwrap())));
}

fn replay_mismatches(file: &Path, crds: &Path) -> BTreeSet<String> {
    replay(file, crds)
        .unwrap()
        .steps
        .into_iter()
        .filter(|s| s.mismatch.is_some())
        .map(|s| s.id)
        .collect()
}

#[test]
fn normalization_follows_the_corpus_readme() {
    let mut body = serde_json::json!({
        "kind": "MachineConfigList", "apiVersion": "machineconfiguration.openshift.io/v1",
        "metadata": {"resourceVersion": "12", "continue": "abc"},
        "items": [{"metadata": {
            "name": "gen-x7b2k", "generateName": "gen-", "uid": "u", "creationTimestamp": "t",
            "resourceVersion": "3", "deletionTimestamp": "t",
            "ownerReferences": [{"uid": "kept"}],
            "managedFields": [{"manager": "m", "time": "t"}, {"manager": "n"}]
        }}]
    });
    normalize(&mut body);
    let item = &body["items"][0]["metadata"];
    assert_eq!(body["metadata"]["resourceVersion"], SET);
    assert_eq!(body["metadata"]["continue"], SET);
    assert_eq!(item["name"], "gen-<generated>");
    for field in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "deletionTimestamp",
    ] {
        assert_eq!(item[field], SET, "{field}");
    }
    assert_eq!(item["ownerReferences"][0]["uid"], "kept");
    assert_eq!(item["managedFields"][0]["time"], SET);
    assert!(item["managedFields"][1].get("time").is_none());

    let mut empty_continue = serde_json::json!({"metadata": {"continue": ""}});
    normalize(&mut empty_continue);
    assert_eq!(empty_continue["metadata"]["continue"], "");

    let mut status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1",
        "message": "UID 6b8c3c56-0000-4000-8000-000000000001 differs from 00000000-0000-4000-8000-000000000000.",
        "details": {"uid": "x", "causes": [
            {"field": "b", "reason": "R", "message": "m 6b8c3c56-0000-4000-8000-000000000001"},
            {"field": "a", "reason": "R", "message": "m"}
        ]}
    });
    normalize(&mut status);
    assert_eq!(status["message"], "UID <uid> differs from <uid>.");
    assert_eq!(status["details"]["uid"], SET);
    assert_eq!(status["details"]["causes"][0]["field"], "a");
    assert_eq!(status["details"]["causes"][1]["message"], "m <uid>");
}

#[test]
fn the_comparison_rules_of_the_corpus_readme() {
    let status = |causes: Value, message: &str| Answer {
        status: 422,
        warnings: vec![],
        body: serde_json::json!({"kind": "Status", "apiVersion": "v1", "code": 422,
            "reason": "Invalid", "message": message, "details": {"causes": causes}}),
    };
    let a = serde_json::json!({"field": "f", "reason": "FieldValueInvalid", "message": "one"});
    let b = serde_json::json!({"field": "g", "reason": "FieldValueRequired", "message": "two"});
    let recorded = status(serde_json::json!([a, b]), "x: [one, two]");
    // Cause order and the joined message of several causes do not count.
    let reordered = status(serde_json::json!([b, a]), "x: [two, one]");
    assert_eq!(compare(&recorded, &reordered), None);
    assert!(same_wording(&recorded, &reordered));
    // A cause's reason does.
    let mut other_reason = a.clone();
    other_reason["reason"] = Value::from("FieldValueForbidden");
    let wrong = status(serde_json::json!([other_reason, b]), "x");
    assert!(compare(&recorded, &wrong)
        .unwrap()
        .contains("missing causes"));
    // A one-cause message is wording: a match, but not in wording.
    let single = status(serde_json::json!([a]), "x: one");
    let reworded = status(serde_json::json!([a]), "x: 1");
    assert_eq!(compare(&single, &reworded), None);
    assert!(!same_wording(&single, &reworded));
    // Warnings and status codes must be equal.
    let mut warned = single.clone();
    warned.warnings.push("299 - \"w\"".into());
    assert!(compare(&single, &warned).unwrap().starts_with("warnings"));
    let mut other_code = single.clone();
    other_code.status = 400;
    assert!(compare(&single, &other_code)
        .unwrap()
        .starts_with("status 400"));
    // Other bodies must be equal in every field.
    let object = |fips: bool| Answer {
        status: 200,
        warnings: vec![],
        body: serde_json::json!({"kind": "MachineConfig", "spec": {"fips": fips}}),
    };
    assert_eq!(compare(&object(true), &object(true)), None);
    assert!(compare(&object(true), &object(false))
        .unwrap()
        .contains(".spec.fips"));
}

#[test]
fn templates_take_values_from_earlier_answers() {
    let mut answers = HashMap::new();
    answers.insert(
        "mc".to_string(),
        serde_json::json!({"metadata": {"name": "n", "uid": "u", "resourceVersion": "7"}}),
    );
    answers.insert(
        "page".to_string(),
        serde_json::json!({"metadata": {"continue": "tok"}}),
    );
    assert_eq!(
        render(
            "{{rv:mc}}/{{uid:mc}}/{{name:mc}}/{{continue:page}}",
            &answers
        )
        .unwrap(),
        "7/u/n/tok"
    );
    assert!(render("{{rv:later}}", &answers).is_err());
    assert!(render("{{uid:page}}", &answers).is_err());
    assert_eq!(url_encode("metadata.name=a b/c"), "metadata.name%3Da+b%2Fc");
}

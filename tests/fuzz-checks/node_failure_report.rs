//! The body of `POST /v1/node-failure` (`server::node_failure::decode`, then `sanitize`,
//! `failure_message` and `stage_label`): what a machine, or anyone who can reach the port,
//! sends.
//!
//! Properties:
//! - decoding never panics; an accepted report has a pool, a node ID and a stage;
//! - a body that is a JSON object with string members `pool`, `nodeID` and `stage` (non-empty,
//!   and no other member whose name folds to one of the five fields) decodes to exactly those
//!   values, as Go's decoder would;
//! - the sanitized record carries no control character and fits an Event note: the node ID, the
//!   stage and the pool are cut, the message is at most 200 bytes plus `... (truncated)` and
//!   the redactions;
//! - every secret prefix left in the message (`token=`, `password=`, `key=`, `secret=`,
//!   `authorization:`, `bearer `, any case) is followed by `[REDACTED]`;
//! - the image is `none`, `invalid-url`, `internal-registry` or a host (and port) alone: no
//!   path, credentials, query or fragment;
//! - the stage label is one of the bounded set.

use machine_config_server::server::node_failure::{
    decode, failure_message, sanitize, stage_label, KNOWN_STAGES, MESSAGE_LIMIT, NODE_ID_LIMIT,
    POOL_LIMIT, STAGE_LIMIT,
};
use serde_json::Value;

const PREFIXES: [&str; 6] = [
    "token=",
    "password=",
    "key=",
    "secret=",
    "authorization:",
    "bearer ",
];

pub fn check(data: &[u8]) {
    let decoded = decode(data);
    agrees_with_plain_json(data, decoded.as_ref().ok());
    let Ok(report) = decoded else {
        return;
    };
    assert!(
        !report.pool.is_empty() && !report.node_id.is_empty() && !report.stage.is_empty(),
        "an accepted report has its required fields"
    );
    let record = sanitize(&report, std::time::UNIX_EPOCH);
    for (what, text, limit) in [
        ("pool", &record.pool, POOL_LIMIT),
        ("node ID", &record.node_id, NODE_ID_LIMIT),
        ("stage", &record.stage, STAGE_LIMIT),
    ] {
        assert!(text.len() <= limit, "the {what} is cut to {limit} bytes");
        assert!(
            !text.chars().any(char::is_control),
            "no control character in the {what}"
        );
    }
    let message = &record.message;
    assert!(
        !message.chars().any(char::is_control),
        "no control character in the message"
    );
    let prefixes_in = |text: &str| {
        PREFIXES
            .iter()
            .map(|p| text.to_ascii_lowercase().matches(p).count())
            .sum::<usize>()
    };
    assert!(
        message.len() <= MESSAGE_LIMIT + "... (truncated)".len() + 10 * prefixes_in(message),
        "the message is cut ({} bytes)",
        message.len()
    );
    let lower = message.to_ascii_lowercase();
    for prefix in PREFIXES {
        for (at, _) in lower.match_indices(prefix) {
            assert!(
                message[at + prefix.len()..].starts_with("[REDACTED]"),
                "{prefix:?} at {at} is not redacted in {message:?}"
            );
        }
    }
    let image = &record.image;
    let fixed = ["none", "invalid-url", "internal-registry"];
    assert!(
        fixed.contains(&image.as_str())
            || (!image.is_empty()
                && image
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b))),
        "the image is reduced to its registry: {image:?}"
    );
    let note = failure_message(&record);
    assert!(
        !note.chars().any(char::is_control),
        "no control character in the Event"
    );
    let label = stage_label(&record.stage);
    assert!(label == "other" || KNOWN_STAGES.contains(&label));
}

/// Go's decoder on a plain object: the exact members, when nothing else folds to a field name.
fn agrees_with_plain_json(
    data: &[u8],
    decoded: Option<&machine_config_server::server::node_failure::FailureReport>,
) {
    let Ok(Value::Object(members)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let fields = ["pool", "nodeid", "stage", "imageurl", "errormessage"];
    let folds = |key: &str| {
        let folded: String = key
            .chars()
            .map(|c| match c {
                '\u{212A}' => 'k',
                '\u{017F}' => 's',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        fields.contains(&folded.as_str())
    };
    let exact = ["pool", "nodeID", "stage", "imageURL", "errorMessage"];
    if members
        .keys()
        .any(|k| folds(k) && !exact.contains(&k.as_str()))
    {
        return;
    }
    let text = |key: &str| match members.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => Some(String::new()),
        Some(_) => None,
    };
    let values: Option<Vec<String>> = exact.iter().map(|k| text(k)).collect();
    let Some(values) = values else {
        assert!(
            decoded.is_none(),
            "a member of another type fails the decode"
        );
        return;
    };
    if values[..3].iter().any(String::is_empty) {
        assert!(decoded.is_none(), "a missing required field is refused");
        return;
    }
    let report = decoded.expect("a plain object with its required fields decodes");
    assert_eq!(
        [
            &report.pool,
            &report.node_id,
            &report.stage,
            &report.image_url,
            &report.error_message
        ],
        [&values[0], &values[1], &values[2], &values[3], &values[4]]
    );
}

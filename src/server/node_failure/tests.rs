use super::*;
use std::time::{SystemTime, UNIX_EPOCH};

#[test]
fn the_upstream_body_decodes_and_required_fields_are_checked() {
    let body = br#"{"pool":"worker","nodeID":"test-node-1","stage":"updateLayeredOS","imageURL":"quay.io/test:latest","errorMessage":"Image pull failed"}"#;
    assert_eq!(
        decode(body),
        Ok(FailureReport {
            pool: "worker".into(),
            node_id: "test-node-1".into(),
            stage: "updateLayeredOS".into(),
            image_url: "quay.io/test:latest".into(),
            error_message: "Image pull failed".into(),
        })
    );
    // Upstream's handler tests: invalid JSON and missing fields are 400s.
    assert_eq!(decode(b"invalid json"), Err(ReportError::InvalidJson));
    assert_eq!(
        decode(br#"{"pool":"worker"}"#),
        Err(ReportError::MissingFields)
    );
    // Without imageURL and errorMessage (upstream's reporter-error test body): accepted.
    assert!(decode(br#"{"pool":"worker","nodeID":"test","stage":"pivot"}"#).is_ok());
}

#[test]
fn decoding_follows_go_encoding_json() {
    let ok = |body: &str| decode(body.as_bytes()).map(|r| (r.pool, r.node_id, r.stage));
    let triple = |p: &str, n: &str, s: &str| Ok((p.to_owned(), n.to_owned(), s.to_owned()));
    // Keys match case-insensitively (exact first), unknown keys and trailing data ignored.
    assert_eq!(
        ok(r#" {"POOL":"w","NodeId":"n","Stage":"s","extra":[1,{"x":null}]} trailing"#),
        triple("w", "n", "s")
    );
    assert_eq!(
        ok(r#"{"pool":"a","POOL":"b","nodeID":"n","stage":"s"}"#),
        triple("b", "n", "s"),
        "members are assigned in document order"
    );
    assert_eq!(
        ok("{\"pool\":\"w\",\"nodeID\":\"n\",\"\u{17F}tage\":\"s\"}"),
        triple("w", "n", "s"),
        "Go folds the long s to s"
    );
    // null leaves a field as it is; other types fail the decode.
    assert_eq!(
        ok(r#"{"pool":"w","nodeID":"n","stage":"s","imageURL":null}"#),
        triple("w", "n", "s")
    );
    assert_eq!(
        ok(r#"{"pool":"w","nodeID":null,"stage":"s"}"#),
        Err(ReportError::MissingFields)
    );
    assert_eq!(ok("null"), Err(ReportError::MissingFields));
    for invalid in [
        "",
        "  ",
        "[]",
        r#""text""#,
        "42",
        "true",
        r#"{"pool":5,"nodeID":"n","stage":"s"}"#,
        r#"{"pool":"w","nodeID":"n","stage":["s"]}"#,
        r#"{"pool":"w","nodeID":"n","stage":"s""#,
        r#"{"pool":"w","nodeID":"n","stage":"s",}"#,
    ] {
        assert_eq!(ok(invalid), Err(ReportError::InvalidJson), "{invalid:?}");
    }
    assert_eq!(
        ok(r#"{"pool":"","nodeID":"n","stage":"s"}"#),
        Err(ReportError::MissingFields)
    );
    // Invalid UTF-8 and lone surrogate escapes in strings become U+FFFD, as in Go (found by a
    // side-by-side run against upstream's server); outside strings they stay errors.
    let bytes = |body: &[u8]| decode(body).map(|r| (r.pool, r.node_id, r.stage));
    assert_eq!(
        bytes(b"{\"pool\":\"w\xff\",\"nodeID\":\"n\",\"stage\":\"s\"}"),
        triple("w\u{FFFD}", "n", "s")
    );
    assert_eq!(
        bytes(b"{\"pool\":\"w\",\"nodeID\":\"n\",\"st\xffage\":\"s\"}"),
        Err(ReportError::MissingFields)
    );
    assert_eq!(
        bytes(b"\xff{\"pool\":\"w\"}"),
        Err(ReportError::InvalidJson)
    );
    for (escaped, decoded) in [
        (r"\ud800", "\u{FFFD}"),
        (r"\udc00x", "\u{FFFD}x"),
        (r"\ud800\u0041", "\u{FFFD}A"),
        (r"\ud83d\ude00", "\u{1F600}"),
        (r"a\\ud800", r"a\ud800"),
        (r#"\"\ud800"#, "\"\u{FFFD}"),
    ] {
        assert_eq!(
            ok(&format!(
                r#"{{"pool":"w","nodeID":"n","stage":"{escaped}"}}"#
            )),
            triple("w", "n", decoded),
            "{escaped}"
        );
    }
}

#[test]
fn messages_are_sanitized_as_upstream_does() {
    // Upstream's TestSanitizeErrorMessage vectors.
    for (input, expected) in [
        ("", "unknown error"),
        ("Image pull failed", "Image pull failed"),
        (
            "Failed to authenticate with token=abc123&other=value",
            "Failed to authenticate with token=[REDACTED]&other=value",
        ),
        (
            "Login failed: password=secret123&user=admin",
            "Login failed: password=[REDACTED]&user=admin",
        ),
        (
            "Authorization failed bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9 invalid",
            "Authorization failed bearer [REDACTED] invalid",
        ),
        (
            "This is a very long error message that exceeds the maximum length limit and should be truncated to avoid bloating the event storage with unnecessary details that are not helpful for debugging and this text keeps going on and on with more content",
            "This is a very long error message that exceeds the maximum length limit and should be truncated to avoid bloating the event storage with unnecessary details that are not helpful for debugging and this... (truncated)",
        ),
    ] {
        assert_eq!(sanitize_error_message(input), expected, "{input:?}");
    }
    // Beyond upstream: every occurrence, any case, and no control characters.
    assert_eq!(
        sanitize_error_message("a TOKEN=x&b token=y&c\nAuthorization: Bearer z\nend"),
        "a TOKEN=[REDACTED]&b token=[REDACTED]&c Authorization:[REDACTED] end"
    );
    assert_eq!(
        sanitize_error_message("pull secret=hunter2"),
        "pull secret=[REDACTED]"
    );
    // Found by fuzzing: a control character after a secret's prefix hid it from the first
    // pass, and became the space that completes the prefix.
    assert_eq!(
        sanitize_error_message("auth: Bearer\nxyz next"),
        "auth: Bearer [REDACTED] next"
    );
    // A secret cut by the length cap is still redacted to the end.
    let long = format!("{}password=abcdefgh", "x".repeat(190));
    assert_eq!(
        sanitize_error_message(&long),
        format!("{}password=[REDACTED]", "x".repeat(190))
    );
    // The cut never splits a character.
    let wide = "é".repeat(150);
    let cut = sanitize_error_message(&wide);
    assert!(cut.ends_with("... (truncated)") && cut.len() <= MESSAGE_LIMIT + 15);
}

#[test]
fn images_are_reduced_to_their_registry_as_upstream_does() {
    // Upstream's TestSanitizeImageURL vectors.
    for (input, expected) in [
        ("", "none"),
        ("not a valid url", "invalid-url"),
        (
            "image-registry.openshift-image-registry.svc:5000/openshift/custom:latest",
            "internal-registry",
        ),
        ("quay.io/openshift/custom:latest", "quay.io"),
        (
            "https://user:password@registry.example.com/repo/image:tag",
            "registry.example.com",
        ),
        (
            "https://registry.example.com/repo?token=secret&key=value",
            "registry.example.com",
        ),
    ] {
        assert_eq!(sanitize_image_url(input), expected, "{input:?}");
    }
    assert_eq!(
        sanitize_image_url("quay.example.com:8443/ocp/rhcos@sha256:0123"),
        "quay.example.com:8443"
    );
    assert_eq!(sanitize_image_url("[fd00::1]:5000/x"), "[fd00::1]:5000");
    assert_eq!(
        sanitize_image_url("ostree-unverified-registry:quay.io/x"),
        "invalid-url"
    );
    assert_eq!(sanitize_image_url("/just/a/path"), "invalid-url");
}

#[test]
fn the_event_message_is_upstreams() {
    let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let record = |node: &str, stage: &str, message: &str, image: &str| {
        sanitize(
            &FailureReport {
                pool: "worker".into(),
                node_id: node.into(),
                stage: stage.into(),
                image_url: image.into(),
                error_message: message.into(),
            },
            at,
        )
    };
    // Upstream's TestFormatFailureMessage vectors.
    for (failure, expected) in [
        (
            record("node-1", "pivot", "Failed to pivot", "quay.io/openshift/image:latest"),
            "Node node-1 failed during firstboot at stage 'pivot': Failed to pivot (image: quay.io)",
        ),
        (
            record("node-2", "updateLayeredOS", "Pull failed", "https://user:pass@registry.com/repo:tag"),
            "Node node-2 failed during firstboot at stage 'updateLayeredOS': Pull failed (image: registry.com)",
        ),
        (
            record("node-3", "pivot", "Network timeout", "image-registry.openshift-image-registry.svc:5000/test/image:v1"),
            "Node node-3 failed during firstboot at stage 'pivot': Network timeout (image: internal-registry)",
        ),
        (
            record("node-4", "kargs", "Auth failed with token=abc123&other=data", ""),
            "Node node-4 failed during firstboot at stage 'kargs': Auth failed with token=[REDACTED]&other=data (image: none)",
        ),
    ] {
        assert_eq!(failure_message(&failure), expected);
    }
    // Node IDs and stages are cut and lose their control characters.
    let odd = record(&"n".repeat(400), "a\nb", "m", "");
    assert_eq!(odd.node_id.len(), NODE_ID_LIMIT);
    assert_eq!(odd.stage, "a b");
    assert_eq!(odd.reported_at, at);
    let _ = SystemTime::now();
}

#[test]
fn stages_are_bounded_labels() {
    assert_eq!(stage_label("firstboot-update"), "firstboot-update");
    assert_eq!(stage_label("pivot"), "pivot");
    assert_eq!(stage_label("Pivot"), "other");
    assert_eq!(stage_label(&"x".repeat(1000)), "other");
}

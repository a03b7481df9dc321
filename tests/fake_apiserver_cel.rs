//! The in-test API server evaluates CRD validation rules (`x-kubernetes-validations`, CEL) as
//! kube-apiserver does (`tests/support/fake_apiserver/cel.rs`).
//!
//! Self-contained tier: a small CRD written here with representative rules (object, list,
//! map-value and scalar rules, a transition rule, IP and format helpers, messageExpression,
//! fieldPath, reason) proves 422 answers with Kubernetes' field paths and messages, and that a
//! rule the server cannot evaluate fails loudly. Upstream tier: every rule of every real CRD
//! compiles and evaluates, and each rule family of MachineConfigNode (and some of
//! MachineOSBuild, MachineOSConfig, MachineConfigPool) rejects an object that breaks it; the
//! project's own fixtures pass them.

use serde_json::{json, Value};
use support::fake_apiserver::cel::{check_rule, compile, rules_of, validate};
use support::fake_apiserver::{real_crds, yaml_objects, ApiError, FakeApiServer, Options, Scope};
use support::tier;

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: self.metadata.name == self.spec.node.name
          message: spec.node.name should match metadata.name
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!has(self.locked) || self.locked == 'yes'"
              message: locked must be yes
              fieldPath: .locked
            properties:
              node:
                type: object
                x-kubernetes-validations:
                - rule: has(self.name)
                properties:
                  name:
                    type: string
                    x-kubernetes-validations:
                    - rule: "!format.dns1123Subdomain().validate(self).hasValue()"
                      message: a lowercase RFC 1123 subdomain
              locked: {type: string}
              mode:
                type: string
                x-kubernetes-validations:
                - rule: self != 'bad'
                  messageExpression: "'mode ' + self + ' is not allowed'"
                  reason: FieldValueForbidden
              addresses:
                type: array
                items:
                  type: string
                  x-kubernetes-validations:
                  - rule: isIP(self)
                    message: value must be a valid IP address
                x-kubernetes-validations:
                - rule: "size(self) == 2 && isIP(self[0]) && isIP(self[1]) ? ip(self[0]).family() != ip(self[1]).family() : true"
                  message: at most one address per family
              labels:
                type: object
                additionalProperties:
                  type: string
                  x-kubernetes-validations:
                  - rule: self.lowerAscii() == self
                    message: must be lowercase
              headers:
                type: array
                items: {type: string}
                x-kubernetes-validations:
                - rule: self.all(h, h.split(':').size() == 2)
              weird:
                type: string
                x-kubernetes-validations:
                - rule: self.noSuchFunction()
          status:
            type: object
            properties:
              observedGeneration:
                type: integer
                x-kubernetes-validations:
                - rule: self >= oldSelf
                  message: observedGeneration must not decrease
              items:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    count:
                      type: integer
                      x-kubernetes-validations:
                      - rule: self >= oldSelf
                        message: count must not decrease
"#;

/// A server serving only the Widget CRD (and the built-in kinds).
fn widget_server() -> (FakeApiServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("widgets.yaml"), WIDGET_CRD).expect("write CRD");
    let api = FakeApiServer::start(Options {
        crd_dir: Some(dir.path().to_path_buf()),
        routes: false,
        ..Options::default()
    });
    (api, dir)
}

fn widget(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": { "name": name },
        "spec": spec,
    })
}

fn rejected(result: Result<Value, ApiError>) -> ApiError {
    match result {
        Ok(stored) => panic!("expected a 422, the server stored {stored}"),
        Err(e) => {
            assert_eq!((e.code, e.reason), (422, "Invalid"), "{e}");
            e
        }
    }
}

#[test]
fn object_list_map_and_scalar_rules_answer_422_with_kubernetes_paths_and_messages() {
    let (api, _dir) = widget_server();
    let ok = widget(
        "w1",
        json!({"node": {"name": "w1"}, "addresses": ["10.0.0.1", "fd00::1"]}),
    );
    api.create(&ok).expect("a valid widget is stored");

    let e = rejected(api.create(&widget("w2", json!({"node": {"name": "other"}}))));
    assert_eq!(
        e.cause_messages(),
        [r#"<nil>: Invalid value: spec.node.name should match metadata.name"#]
    );
    assert_eq!(
        e.message,
        r#"Widget.example.com "w2" is invalid: <nil>: Invalid value: spec.node.name should match metadata.name"#
    );

    // No message: "failed rule: <rule>"; the root rule also fails (no such key).
    let e = rejected(api.create(&widget("w3", json!({"node": {}}))));
    assert_eq!(
        e.cause_messages(),
        [
            r#"<nil>: Invalid value: "object": no such key: name evaluating rule: spec.node.name should match metadata.name"#,
            r#"spec.node: Invalid value: failed rule: has(self.name)"#,
        ]
    );

    let e = rejected(api.create(&widget(
        "w4",
        json!({"node": {"name": "w4"}, "addresses": ["10.0.0.1", "10.0.0.2", "nope"]}),
    )));
    assert_eq!(
        e.cause_messages(),
        [r#"spec.addresses[2]: Invalid value: "nope": value must be a valid IP address"#]
    );
    let e = rejected(api.create(&widget(
        "w5",
        json!({"node": {"name": "w5"}, "addresses": ["10.0.0.1", "10.0.0.2"]}),
    )));
    assert_eq!(
        e.cause_messages(),
        [r#"spec.addresses: Invalid value: at most one address per family"#]
    );

    let e = rejected(api.create(&widget(
        "w6",
        json!({"node": {"name": "w6"}, "labels": {"good": "yes", "bad": "Yes"}}),
    )));
    assert_eq!(
        e.cause_messages(),
        [r#"spec.labels[bad]: Invalid value: "Yes": must be lowercase"#]
    );

    let e = rejected(api.create(&widget("Bad_Name", json!({"node": {"name": "Bad_Name"}}))));
    assert!(
        e.cause_messages().contains(
            &r#"spec.node.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#
                .to_string()
        ),
        "{e}"
    );

    // messageExpression, reason and fieldPath.
    let e = rejected(api.create(&widget(
        "w7",
        json!({"node": {"name": "w7"}, "mode": "bad", "locked": "no"}),
    )));
    assert_eq!(
        e.cause_messages(),
        [
            "spec.locked: Invalid value: locked must be yes",
            "spec.mode: Forbidden: mode bad is not allowed",
        ]
    );
    assert_eq!(e.details["causes"][1]["reason"], "FieldValueForbidden");

    // cel-go string extension split, default message.
    let e = rejected(api.create(&widget(
        "w8",
        json!({"node": {"name": "w8"}, "headers": ["a:b", "c"]}),
    )));
    assert_eq!(
        e.cause_messages(),
        [r#"spec.headers: Invalid value: failed rule: self.all(h, h.split(':').size() == 2)"#]
    );
}

#[test]
fn rules_run_on_update_patch_apply_and_status_writes_and_transition_rules_only_on_update() {
    let (api, _dir) = widget_server();
    let mut stored = api
        .create(&widget("w", json!({"node": {"name": "w"}})))
        .expect("create");

    // Update (PUT), merge patch and server-side apply all run the rules.
    stored["spec"]["node"]["name"] = json!("x");
    rejected(api.update(&stored));
    rejected(api.merge_patch("Widget", None, "w", &json!({"spec": {"mode": "bad"}})));
    rejected(api.apply_as(
        "tester",
        &widget("w", json!({"node": {"name": "w"}, "labels": {"a": "B"}})),
        Scope::Main,
        true,
    ));

    // Transition rules: not run on create, run on every later write of the status.
    let mut status = api.get("Widget", None, "w").expect("stored");
    status["status"] = json!({"observedGeneration": 5, "items": [{"name": "a", "count": 3}]});
    let status = api
        .update_status(&status)
        .expect("first status: no oldSelf");
    let mut lower = status.clone();
    lower["status"]["observedGeneration"] = json!(4);
    let e = rejected(api.update_status(&lower));
    assert_eq!(
        e.cause_messages(),
        [r#"status.observedGeneration: Invalid value: 4: observedGeneration must not decrease"#]
    );
    // Items of a map-type list correlate by key: a lower count on "a" is rejected, a new item
    // "b" has no oldSelf.
    let mut items = status.clone();
    items["status"]["items"] = json!([{"name": "b", "count": 0}, {"name": "a", "count": 2}]);
    let e = rejected(api.update_status(&items));
    assert_eq!(
        e.cause_messages(),
        [r#"status.items[1].count: Invalid value: 2: count must not decrease"#]
    );
    items["status"]["items"] = json!([{"name": "b", "count": 0}, {"name": "a", "count": 3}]);
    api.update_status(&items).expect("new item b, unchanged a");
    let mut higher = api.get("Widget", None, "w").expect("stored");
    higher["status"]["observedGeneration"] = json!(6);
    api.update_status(&higher)
        .expect("observedGeneration may grow");
}

#[test]
fn an_unchanged_invalid_value_is_ratcheted_but_a_changed_one_is_not() {
    // An object stored before a rule existed (or by a more lenient server) stays writable as
    // long as the failing value is unchanged (CRDValidationRatcheting, on since Kubernetes 1.30).
    let crd: Value = serde_yaml::from_str(WIDGET_CRD).expect("CRD");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let old = widget(
        "w",
        json!({"node": {"name": "w"}, "labels": {"a": "X", "b": "y"}}),
    );
    let fields = |causes: Vec<support::fake_apiserver::Cause>| -> Vec<String> {
        causes.into_iter().map(|c| c.field).collect()
    };
    let on_create = validate(schema, None, &old).expect("evaluable");
    assert_eq!(fields(on_create), ["spec.labels[a]"]);
    let mut new = old.clone();
    new["spec"]["mode"] = json!("fine");
    assert!(validate(schema, Some(&old), &new)
        .expect("evaluable")
        .is_empty());
    // Kubernetes answers the ratcheted violation as a warning.
    let (_, warnings) = support::fake_apiserver::cel::validate_ratcheting(schema, Some(&old), &new)
        .expect("evaluable");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("spec.labels[a]: Invalid value: \"X\": "),
        "{warnings:?}"
    );
    new["spec"]["labels"]["b"] = json!("Y");
    assert_eq!(
        fields(validate(schema, Some(&old), &new).expect("evaluable")),
        ["spec.labels[b]"]
    );
}

#[test]
fn a_rule_the_server_cannot_evaluate_is_a_500_naming_it_and_fails_the_test() {
    let (api, _dir) = widget_server();
    let err = api
        .create(&widget("w", json!({"node": {"name": "w"}, "weird": "x"})))
        .expect_err("an unevaluable rule must not pass");
    assert_eq!((err.code, err.reason), (500, "InternalError"), "{err}");
    assert!(err.message.contains("self.noSuchFunction()"), "{err}");
    assert!(err.message.contains("spec.weird"), "{err}");
    assert!(err.message.contains("noSuchFunction"), "{err}");
    // Dropping the server fails the test that used it.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(api)));
    let panic = dropped.expect_err("dropping the server must fail the test");
    let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("self.noSuchFunction()"), "{text}");
}

#[tokio::test]
async fn kube_rs_sees_the_422_status_with_causes() {
    let (api, _dir) = widget_server();
    let client = api.client().await;
    let resource = kube::core::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: kube::Api<kube::core::DynamicObject> = kube::Api::all_with(client, &resource);
    let object: kube::core::DynamicObject =
        serde_json::from_value(widget("w", json!({"node": {"name": "v"}}))).expect("object");
    match widgets.create(&Default::default(), &object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert_eq!(status.reason, "Invalid");
            assert!(
                status.message.ends_with(
                    r#"<nil>: Invalid value: spec.node.name should match metadata.name"#
                ),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

#[test]
fn kubernetes_library_functions_follow_kubernetes() {
    let rule = |text: &str| support::fake_apiserver::cel::Rule {
        rule: text.to_string(),
        message: None,
        message_expression: None,
        field_path: None,
        reason: None,
        optional_old_self: false,
    };
    let string = json!({"type": "string"});
    let holds = |text: &str, value: &str| {
        let causes =
            check_rule(&rule(text), &string, &json!(value), None).unwrap_or_else(|e| panic!("{e}"));
        causes.is_empty()
    };
    // Kubernetes' IP library: no zones, no IPv4-mapped IPv6, no leading zeros.
    assert!(holds("isIP(self)", "192.168.0.1"));
    assert!(holds("isIP(self)", "fd00::1"));
    assert!(!holds("isIP(self)", "fe80::1%eth0"));
    assert!(!holds("isIP(self)", "::ffff:1.2.3.4"));
    assert!(!holds("isIP(self)", "010.0.0.1"));
    assert!(holds("ip(self).family() == 6", "fd00::1"));
    assert!(holds("isCIDR(self)", "10.0.0.0/8"));
    assert!(holds("cidr(self).prefixLength() == 64", "fd00::/64"));
    assert!(!holds("isCIDR(self)", "10.0.0.0/33"));
    assert!(!holds("isCIDR(self)", "10.0.0.0"));
    assert!(holds("isURL(self)", "https://example.com/x"));
    assert!(!holds("isURL(self)", "example.com"));
    // Kubernetes' own examples (library/urls.go), then what Go's ParseRequestURI checks.
    assert!(holds(
        "isURL(self)",
        "https://user:pass@example.com:80/path?query=val#fragment"
    ));
    assert!(holds("isURL(self)", "/absolute-path"));
    assert!(!holds("isURL(self)", "https://a:b:c/"));
    assert!(!holds("isURL(self)", "../relative-path"));
    assert!(holds(
        "isURL(self)",
        "https://example.com/path with spaces/"
    ));
    assert!(holds("isURL(self)", "https://[fd00::1]:6443/healthz"));
    assert!(holds("isURL(self)", "urn:isbn:0451450523"));
    assert!(!holds("isURL(self)", "https://exa mple.com/"));
    assert!(!holds("isURL(self)", "https://example.com:80a/"));
    assert!(!holds("isURL(self)", "https://example.com/%zz"));
    assert!(!holds("isURL(self)", "https://[fd00::1/"));
    assert!(!holds("isURL(self)", "https://ex%41mple.com/"));
    assert!(!holds("isURL(self)", "https://example.com\tab/"));
    // Formats.
    assert!(holds(
        "!format.dns1123Label().validate(self).hasValue()",
        "abc-1"
    ));
    assert!(!holds(
        "!format.dns1123Label().validate(self).hasValue()",
        "a.b"
    ));
    assert!(holds(
        "!format.dns1123Subdomain().validate(self).hasValue()",
        "a.b-c"
    ));
    assert!(!holds(
        "!format.dns1035Label().validate(self).hasValue()",
        "1abc"
    ));
    // cel-go strings extension and CEL's size in code points.
    assert!(holds("self.lowerAscii() == 'abc'", "AbC"));
    assert!(holds(
        "self.split('@').size() == 2 && self.split('@')[1] == 'b'",
        "a@b"
    ));
    assert!(holds("self.split('/', 2) == ['a', 'b/c']", "a/b/c"));
    assert!(holds("self.indexOf('c') == 2", "abc"));
    assert!(holds("self.replace('b', 'x') == 'axc'", "abc"));
    assert!(holds("size(self) == 2", "éé"));
    assert!(holds("self.matches('^[0-9A-Za-z_.:/=+-@ ]+$')", "a b"));
    // `&&` and `||` absorb errors the way CEL's do, whichever side errs.
    let object = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let verdict = |text: &str| {
        check_rule(&rule(text), &object, &json!({}), None)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|c| c.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(verdict("self.a == 'x' || true"), Vec::<String>::new());
    assert!(verdict("true || self.a == 'x'").is_empty());
    assert_eq!(
        verdict("self.a == 'x' && false"),
        [r#"Invalid value: failed rule: self.a == 'x' && false"#]
    );
    assert_eq!(
        verdict("self.a == 'x' || false"),
        [r#"Invalid value: "object": no such key: a evaluating rule: self.a == 'x' || false"#]
    );
    // Property names as Kubernetes escapes them for CEL.
    let escaped = json!({"type": "object", "properties": {
        "foo-bar": {"type": "string"}, "namespace": {"type": "string"}, "a__b": {"type": "string"},
    }});
    let escaped_holds = |text: &str| {
        let value = json!({"foo-bar": "x", "namespace": "ns", "a__b": "y"});
        check_rule(&rule(text), &escaped, &value, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty()
    };
    assert!(escaped_holds("self.foo__dash__bar == 'x'"));
    assert!(escaped_holds("self.__namespace__ == 'ns'"));
    assert!(escaped_holds("self.a__underscores__b == 'y'"));
    // A runtime error Kubernetes also raises is a 422 cause, not a crash.
    let causes =
        check_rule(&rule("ip(self).family() == 4"), &string, &json!("x"), None).expect("422");
    assert_eq!(causes.len(), 1);
    assert!(causes[0].message.contains("evaluating rule"), "{causes:?}");
}

// ---------------------------------------------------------------------------------------------
// Upstream tier: the real CRDs.

/// A value for every property the schema declares (one item per list, one key per map), so
/// that a rule's every field access and function call is exercised.
fn sample(schema: &Value, depth: usize) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        return json!(1);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2024-01-01T00:00:00Z"),
            Some("date") => json!("2024-01-01"),
            Some("byte") => json!("YQ=="),
            _ => json!("a"),
        },
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => match schema.get("items").filter(|_| depth < 12) {
            Some(items) => json!([sample(items, depth + 1)]),
            None => json!([]),
        },
        _ => {
            let mut object = serde_json::Map::new();
            if depth < 12 {
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, child) in props {
                        object.insert(k.clone(), sample(child, depth + 1));
                    }
                }
                if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                    object.insert("k".into(), sample(values, depth + 1));
                }
            }
            Value::Object(object)
        }
    }
}

/// The schema node at a `rules_of` path (`.a.b[]`, `.m{}`).
fn schema_at<'a>(root: &'a Value, path: &str) -> &'a Value {
    let mut node = root;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            node = &node["items"];
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{}") {
            node = &node["additionalProperties"];
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', '{']).unwrap_or(r.len());
            node = &node["properties"][&r[..end]];
            rest = &r[end..];
        } else {
            panic!("bad path {path}");
        }
    }
    node
}

#[tier(upstream)]
#[test]
fn every_rule_of_every_real_crd_compiles_and_evaluates() {
    let crds = real_crds();
    let mut count = 0;
    let mut failures = Vec::new();
    let mut runtime_errors = Vec::new();
    for def in crds {
        let Some(schema) = &def.schema else { continue };
        for (path, rule) in rules_of(schema) {
            count += 1;
            let node = schema_at(schema, &path);
            let mut value = sample(node, 0);
            if path.is_empty() {
                // The resource root: the server always has the name.
                value["metadata"] = json!({"name": "a"});
            }
            let outcome = compile(&rule.rule)
                .map_err(|e| e.to_string())
                // Transition rules get an old value so that they run too.
                .and_then(|()| {
                    check_rule(&rule, node, &value, Some(&value)).map_err(|e| e.to_string())
                });
            match outcome {
                Err(e) => failures.push(format!("{} {path}: {:?}: {e}", def.kind, rule.rule)),
                // A runtime error is a legitimate answer, but it means the sample did not
                // exercise the whole rule: keep those few and known.
                Ok(causes) if causes.iter().any(|c| c.message.contains("evaluating rule")) => {
                    runtime_errors.push(format!("{} {path}: {:?}: {causes:?}", def.kind, rule.rule))
                }
                Ok(_) => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rules the in-test API server cannot evaluate:\n{}",
        failures.join("\n")
    );
    assert!(runtime_errors.is_empty(), "{}", runtime_errors.join("\n"));
    // The real CRDs carry about 160 rules; far fewer means the walk missed some.
    assert!(count >= 150, "only {count} rules found in the real CRDs");
}

/// A server serving the real CRDs (for `#[tier(upstream)]` tests).
fn real_server() -> FakeApiServer {
    FakeApiServer::start(Options {
        crd_dir: Some(support::upstream::crds()),
        ..Options::default()
    })
}

const MCO: &str = "machineconfiguration.openshift.io/v1";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.";

fn mcn(name: &str, node: &str, pool: &str) -> Value {
    json!({
        "apiVersion": MCO,
        "kind": "MachineConfigNode",
        "metadata": { "name": name },
        "spec": {
            "node": { "name": node },
            "pool": { "name": pool },
            "configVersion": { "desired": "rendered-worker-0123" },
        },
    })
}

/// Asserts a 422 whose causes are exactly `expected` (`field: message`), in any order (the
/// real server walks an object's fields in Go map order).
fn assert_causes(result: Result<Value, ApiError>, expected: &[&str]) {
    let e = rejected(result);
    let mut got = e.cause_messages();
    got.sort();
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(got, expected, "{e}");
}

/// Writes `status` through `/status` of the stored MCN `name`.
fn put_status(api: &FakeApiServer, name: &str, status: Value) -> Result<Value, ApiError> {
    let mut object = api
        .get("MachineConfigNode", None, name)
        .expect("stored MCN");
    object["status"] = status;
    api.update_status(&object)
}

#[tier(upstream)]
#[test]
fn mcn_spec_rules_name_match_and_rfc1123_names() {
    let api = real_server();
    api.create(&mcn("node-1", "node-1", "worker"))
        .expect("valid MCN");
    // Family: spec.node.name matches metadata.name (rule on the resource root).
    assert_causes(
        api.create(&mcn("node-2", "node-3", "worker")),
        &[r#"<nil>: Invalid value: spec.node.name should match metadata.name"#],
    );
    // Family: RFC 1123 subdomain names (format library), on spec.
    let expected = format!(r#"spec.pool.name: Invalid value: "Worker_Pool": {SUBDOMAIN}"#);
    assert_causes(
        api.create(&mcn("node-4", "node-4", "Worker_Pool")),
        &[expected.as_str()],
    );
    let mut bad_version = mcn("node-5", "node-5", "worker");
    bad_version["spec"]["configVersion"]["desired"] = json!("-rendered");
    let expected =
        format!(r#"spec.configVersion.desired: Invalid value: "-rendered": {SUBDOMAIN}"#);
    assert_causes(api.create(&bad_version), &[expected.as_str()]);
    // Server-side apply runs the rules too.
    assert_causes(
        api.apply_as(
            "tester",
            &mcn("node-6", "node-7", "worker"),
            Scope::Main,
            false,
        ),
        &[r#"<nil>: Invalid value: spec.node.name should match metadata.name"#],
    );
}

#[tier(upstream)]
#[test]
fn mcn_status_rules_on_status_writes() {
    let api = real_server();
    api.create(&mcn("node-1", "node-1", "worker"))
        .expect("valid MCN");
    put_status(
        &api,
        "node-1",
        json!({
            "observedGeneration": 1,
            "configVersion": { "desired": "rendered-worker-0123", "current": "rendered-worker-0123" },
            "internalReleaseImage": { "releases": [{
                "name": "ocp-release-bundle-4.21.0-x86_64",
                "image": format!("quay.io/openshift/release@sha256:{}", "a".repeat(64)),
            }]},
            "irreconcilableChanges": [{ "fieldPath": "spec.config.storage.disks[0]", "diff": "x" }],
            "pinnedImageSets": [{ "name": "set-a", "desiredGeneration": 2, "currentGeneration": 1 }],
        }),
    )
    .expect("a valid status");

    // Family: RFC 1123 names in status.
    let expected =
        format!(r#"status.configVersion.current: Invalid value: "Rendered": {SUBDOMAIN}"#);
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 1, "configVersion": { "desired": "rendered-worker-0123", "current": "Rendered" } }),
        ),
        &[expected.as_str()],
    );
    // Family: release image references (digest suffix and image name) and bundle names.
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 1, "internalReleaseImage": { "releases": [{
                "name": "release-4.21",
                "image": "registry/release:latest",
            }]}}),
        ),
        &[
            r#"status.internalReleaseImage.releases[0].image: Invalid value: "registry/release:latest": the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long"#,
            r#"status.internalReleaseImage.releases[0].image: Invalid value: "registry/release:latest": the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme; host must be either 'localhost' or a dot-qualified domain name"#,
            r#"status.internalReleaseImage.releases[0].name: Invalid value: "release-4.21": must be ocp-release-bundle-<version>-<arch|stream> and <= 64 chars"#,
        ],
    );
    // Family: irreconcilable change field paths.
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 1, "irreconcilableChanges": [{ "fieldPath": "metadata.x-y", "diff": "x" }] }),
        ),
        &[
            "status.irreconcilableChanges[0].fieldPath: Invalid value: \"metadata.x-y\": The fieldPath must start with `spec.`",
            "status.irreconcilableChanges[0].fieldPath: Invalid value: \"metadata.x-y\": The fieldPath must consist only of alphanumeric characters, brackets [] and dots ('.').",
        ],
    );
    // Family: pinned image set generations, within one item.
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 1, "pinnedImageSets": [
                { "name": "set-b", "desiredGeneration": 1, "currentGeneration": 2 },
                { "name": "set-c", "desiredGeneration": 1, "lastFailedGeneration": 2 },
            ]}),
        ),
        &[
            r#"status.pinnedImageSets[0]: Invalid value: desired generation must be greater than or equal to the current generation"#,
            r#"status.pinnedImageSets[1]: Invalid value: desired generation must be greater than or equal to the last failed generation"#,
            r#"status.pinnedImageSets[1]: Invalid value: last failed generation error must be defined on image pull and pin failure"#,
        ],
    );
}

#[tier(upstream)]
#[test]
fn mcn_transition_rules_reject_on_update_only() {
    let api = real_server();
    api.create(&mcn("node-1", "node-1", "worker"))
        .expect("valid MCN");
    // A first status may start anywhere (no oldSelf).
    let first = json!({
        "observedGeneration": 5,
        "pinnedImageSets": [{ "name": "set-a", "desiredGeneration": 3, "currentGeneration": 3 }],
    });
    put_status(&api, "node-1", first).expect("first status");
    // Family: observedGeneration must not decrease.
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 4, "pinnedImageSets": [{ "name": "set-a", "desiredGeneration": 3, "currentGeneration": 3 }] }),
        ),
        &[r#"status.observedGeneration: Invalid value: 4: observedGeneration must not decrease"#],
    );
    // Family: pinned image set generations must not decrease (items correlate by name).
    assert_causes(
        put_status(
            &api,
            "node-1",
            json!({ "observedGeneration": 5, "pinnedImageSets": [{ "name": "set-a", "desiredGeneration": 2, "currentGeneration": 2 }] }),
        ),
        &[
            r#"status.pinnedImageSets[0].currentGeneration: Invalid value: 2: currentGeneration must not decrease"#,
            r#"status.pinnedImageSets[0].desiredGeneration: Invalid value: 2: desiredGeneration must not decrease"#,
        ],
    );
    // The same values on a new item (no old item to compare with) and growing values pass.
    put_status(
        &api,
        "node-1",
        json!({ "observedGeneration": 6, "pinnedImageSets": [
            { "name": "set-a", "desiredGeneration": 4, "currentGeneration": 3 },
            { "name": "set-b", "desiredGeneration": 1, "currentGeneration": 1 },
        ]}),
    )
    .expect("growing generations and a new set");
    // A merge patch of the status is an update too.
    rejected(api.merge_patch(
        "MachineConfigNode",
        None,
        "node-1",
        &json!({ "status": { "observedGeneration": 1 } }),
    ));
}

#[tier(upstream)]
#[test]
fn machine_os_build_config_and_pool_rules() {
    let api = real_server();
    let push_spec =
        "image-registry.openshift-image-registry.svc:5000/openshift-mco/os-image:latest";
    let mosb = json!({
        "apiVersion": MCO,
        "kind": "MachineOSBuild",
        "metadata": { "name": "worker-build" },
        "spec": {
            "machineConfig": { "name": "rendered-worker-0123" },
            "machineOSConfig": { "name": "worker" },
            "renderedImagePushSpec": push_spec,
        },
    });
    let stored = api.create(&mosb).expect("valid MachineOSBuild");
    // Transition rule on spec: immutable once set (only an update can break it).
    let mut changed = stored.clone();
    changed["spec"]["machineOSConfig"]["name"] = json!("infra");
    assert_causes(
        api.update(&changed),
        &[r#"spec: Invalid value: machineOSBuildSpec is immutable once set"#],
    );
    // Timestamps: buildEnd after buildStart; builder job only with imageBuilderType Job.
    let mut status = stored.clone();
    status["status"] = json!({
        "buildStart": "2025-01-02T00:00:00Z",
        "buildEnd": "2025-01-01T00:00:00Z",
        "builder": { "imageBuilderType": "Other", "job": { "group": "batch", "resource": "jobs", "namespace": "openshift-mco", "name": "build" } },
    });
    assert_causes(
        api.update_status(&status),
        &[
            r#"status: Invalid value: buildEnd must be after buildStart"#,
            r#"status.builder: Invalid value: job is required when imageBuilderType is Job, and forbidden otherwise"#,
        ],
    );
    status["status"]["buildEnd"] = json!("2025-01-03T00:00:00Z");
    status["status"]["builder"]["imageBuilderType"] = json!("Job");
    api.update_status(&status).expect("valid build status");

    // MachineOSConfig: its name must match the pool's, except on updates that keep the pool
    // (optionalOldSelf).
    let mosc = |name: &str, pool: &str| {
        json!({
            "apiVersion": MCO,
            "kind": "MachineOSConfig",
            "metadata": { "name": name },
            "spec": {
                "machineConfigPool": { "name": pool },
                "imageBuilder": { "imageBuilderType": "Job" },
                "renderedImagePushSecret": { "name": "push-secret" },
                "renderedImagePushSpec": push_spec,
            },
        })
    };
    assert_causes(
        api.create(&mosc("layered", "worker")),
        &[
            r#"<nil>: Invalid value: MachineOSConfig name must match the referenced MachineConfigPool name; can only have one MachineOSConfig per MachineConfigPool"#,
        ],
    );
    let stored = api
        .create(&mosc("worker", "worker"))
        .expect("valid MachineOSConfig");
    let mut bad_spec = stored.clone();
    bad_spec["spec"]["renderedImagePushSpec"] = json!("not an image");
    assert_causes(
        api.update(&bad_spec),
        &[
            r#"spec.renderedImagePushSpec: Invalid value: "not an image": the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme. Or it must be a valid .svc followed by a port, repository, image name, and tag."#,
        ],
    );

    // MachineConfigPool: pool synchronizer counts.
    let pool = json!({
        "apiVersion": MCO,
        "kind": "MachineConfigPool",
        "metadata": { "name": "worker" },
        "spec": {},
    });
    let mut stored = api.create(&pool).expect("valid pool");
    stored["status"] = json!({ "poolSynchronizersStatus": [{
        "poolSynchronizerType": "PinnedImageSets",
        "machineCount": 1, "updatedMachineCount": 2, "availableMachineCount": 1,
        "unavailableMachineCount": 0, "readyMachineCount": 1,
    }]});
    assert_causes(
        api.update_status(&stored),
        &[
            r#"status.poolSynchronizersStatus[0]: Invalid value: machineCount must be greater than or equal to updatedMachineCount"#,
        ],
    );
    stored["status"]["poolSynchronizersStatus"][0]["updatedMachineCount"] = json!(1);
    api.update_status(&stored).expect("valid pool status");
}

/// Creates `object` and writes its status through `/status`, as the operator writes these kinds
/// (create and update, not server-side apply).
fn create_with_status(api: &FakeApiServer, object: &Value) -> Result<(), ApiError> {
    let mut stored = api.create(object)?;
    if let Some(status) = object.get("status").filter(|s| !s.is_null()) {
        stored["status"] = status.clone();
        api.update_status(&stored)?;
    }
    Ok(())
}

#[tier(upstream)]
#[test]
fn the_projects_own_fixtures_pass_the_real_crds_rules() {
    // What our tests feed the server (and our code reads) must be what a real cluster accepts.
    let api = real_server();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/generated");
    let mut texts = vec![(
        "tests/support/controller-config.yaml".to_string(),
        support::CONTROLLER_CONFIG.to_string(),
    )];
    for dir in [
        "cluster",
        "bootstrap-full/controller-config",
        "bootstrap-full/machine-pools",
        "bootstrap-full/machine-configs",
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("fixture dir")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("fixture");
            texts.push((file.display().to_string(), text));
        }
    }
    let mut kinds = Vec::new();
    for (name, text) in texts {
        for object in yaml_objects(&text).expect("YAML") {
            // Two ControllerConfigs share their name: each is checked on its own.
            if let (Some(kind), Some(object_name)) =
                (object["kind"].as_str(), object["metadata"]["name"].as_str())
            {
                let _ = api.delete(kind, None, object_name);
            }
            if let Err(e) = create_with_status(&api, &object) {
                panic!(
                    "{name}: {} {}: {e}",
                    object["kind"], object["metadata"]["name"]
                );
            }
            kinds.push(object["kind"].as_str().unwrap_or_default().to_string());
        }
    }
    for kind in [
        "ControllerConfig",
        "MachineConfigPool",
        "MachineConfig",
        "MachineOSConfig",
        "MachineOSBuild",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} among the fixtures"
        );
    }
}

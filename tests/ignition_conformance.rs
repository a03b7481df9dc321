//! The conformance vectors of the translation spec (ignition-translation.md, section 10), one
//! test per vector, through the public API. Where we deliberately deviate (section 12) the
//! test is named `deviation_*` and asserts our behaviour.

use machine_config_server::ignition::{
    accept::{choose, negotiate},
    check_file_modes, dataurl, empty_config, parse_config, to_value_as, Config, ParseError,
    SpecVersion as V, TranslateError,
};
use serde_json::{json, Value};

const I: &str = "application/vnd.coreos.ignition+json";

fn parse(v: Value) -> Config {
    parse_config(Some(&v)).unwrap_or_else(|e| panic!("parse {v}: {e}"))
}

fn parse_err(v: Value) -> ParseError {
    match parse_config(Some(&v)) {
        Ok(c) => panic!("parse {v} should fail, got {c:?}"),
        Err(e) => e,
    }
}

/// A 3.5 config with the given top-level members.
fn c35(members: Value) -> Config {
    let mut v = json!({"ignition": {"version": "3.5.0"}});
    if let (Some(map), Value::Object(extra)) = (v.as_object_mut(), members) {
        map.extend(extra);
    }
    parse(v)
}

fn out(c: &Config, v: V) -> Value {
    to_value_as(c, v).unwrap_or_else(|e| panic!("translate to {v}: {e}"))
}

fn err(c: &Config, v: V) -> TranslateError {
    match to_value_as(c, v) {
        Ok(value) => panic!("translation to {v} should fail, got {value}"),
        Err(e) => e,
    }
}

fn assert_err(e: &TranslateError, field: &str, text: &str) {
    assert_eq!(e.field(), field, "{e}");
    assert!(
        e.to_string().contains(text),
        "{e:?} should mention {text:?}"
    );
}

// §8 Accept header.

#[test]
fn vector_01_non_ignition_or_versionless_headers_get_2_2() {
    assert_eq!(negotiate(None), Ok(V::V2_2));
    for h in [
        String::new(),
        "*/*".into(),
        "text/plain".into(),
        I.into(),
        "an-invalid-accept-header".into(),
        format!("{I};version=2.4.0, {I}; version=1; q=0.5, */*; q=0.1"),
        "application/VND.coreos.ignition+json;version=3.3.0".into(),
    ] {
        assert_eq!(negotiate(Some(&h)), Ok(V::V2_2), "{h:?}");
    }
}

#[test]
fn vector_02_supported_minor_and_newer_minor() {
    assert_eq!(negotiate(Some(&format!("{I};version=3.4.7"))), Ok(V::V3_4));
    // A newer minor asks for the newest spec (3.6); from a rendered config of 3.5 or older,
    // which is every config this vector set is about, 3.5 is served as by the original
    // (tests/ignition_3_6.rs has the 3.6 side).
    assert_eq!(
        negotiate(Some(&format!("{I};version=3.99.0, */*;q=0.1"))).map(|v| choose(v, V::V3_5)),
        Ok(V::V3_5)
    );
    assert_eq!(
        negotiate(Some("foo/vnd.coreos.ignition+json;version=3.3.0")),
        Ok(V::V3_3)
    );
}

#[test]
fn vector_03_unsupported_versions_are_errors_without_fallback() {
    for h in [
        format!("{I};version=4.0.0"),
        format!("{I};version=2.1.0"),
        format!("{I};version=1.0.0"),
        format!("{I};version=4.0.0, {I};version=3.2.0;q=0.5"),
    ] {
        let e = negotiate(Some(&h)).expect_err(&h);
        assert_eq!(e.header, h);
        assert_eq!(
            e.to_string(),
            format!("unsupported Ignition version in Accept header: {h}")
        );
    }
}

#[test]
fn vector_04_q_order_and_first_valid_parameters() {
    for h in [
        format!("{I};version=3.1.0;q=0.5, {I};version=3.4.0;q=0.5"),
        format!("{I};version=3.1.0;q=abc, {I};version=3.4.0;q=0.9"),
        format!("{I};version=bad;version=3.1.0"),
    ] {
        assert_eq!(negotiate(Some(&h)), Ok(V::V3_1), "{h:?}");
    }
}

// §2 conversion graph.

#[test]
fn deviation_3_0_is_served_through_a_3_1_to_3_0_hop() {
    // Vector 5: the original has no path to 3.0 and answers 500.
    assert_eq!(negotiate(Some(&format!("{I};version=3.0.0"))), Ok(V::V3_0));
    assert_eq!(
        out(&c35(json!({})), V::V3_0),
        json!({"ignition": {"version": "3.0.0"}})
    );
}

#[test]
fn deviation_3_0_hop_fails_on_what_3_0_lacks() {
    let headers = c35(
        json!({"ignition": {"version": "3.5.0", "config": {"merge": [
        {"source": "https://x/c.ign", "httpHeaders": [{"name": "a", "value": "b"}]}]}}}),
    );
    assert_err(
        &err(&headers, V::V3_0),
        "ignition.config.merge[0].httpHeaders",
        "HTTPHeaders in Ignition.Config.Merge are not supported on 3.0",
    );
    let proxy = c35(json!({"ignition": {"version": "3.5.0", "proxy": {"httpProxy": "http://p"}}}));
    assert_err(
        &err(&proxy, V::V3_0),
        "ignition.proxy",
        "not supported on 3.0",
    );
    let mount = c35(json!({"storage": {"filesystems": [
        {"device": "/dev/sdb", "format": "xfs", "path": "/var", "mountOptions": ["ro"]}]}}));
    assert_err(
        &err(&mount, V::V3_0),
        "storage.filesystems[0].mountOptions",
        "MountOptions",
    );
    let sha = format!("sha256-{}", "a".repeat(64));
    let hash = c35(json!({"storage": {"files": [{"path": "/a",
        "contents": {"source": "data:,x", "verification": {"hash": sha}}}]}}));
    assert_err(
        &err(&hash, V::V3_0),
        "storage.files[0].contents.verification.hash",
        "unrecognized hash function",
    );
    let plain = c35(json!({"storage": {"files": [{"path": "/a", "mode": 420,
        "contents": {"source": "data:,x", "compression": ""}}]}}));
    assert_eq!(
        out(&plain, V::V3_0)["storage"]["files"][0],
        json!({"path": "/a", "mode": 420, "contents": {"source": "data:,x", "compression": ""}})
    );
}

// §7 data URLs.

#[test]
fn vector_06_data_url_escape() {
    assert_eq!(dataurl::encode(b"Hello, world!"), "data:,Hello%2C%20world!");
    assert_eq!(dataurl::encode("a\nb é".as_bytes()), "data:,a%0Ab%20%C3%A9");
    assert_eq!(
        dataurl::encode(br#"{"a":"b"}"#),
        "data:,%7B%22a%22%3A%22b%22%7D"
    );
    assert_eq!(dataurl::encode(b""), "data:,");
}

// §6.3 empty config.

#[test]
fn vector_07_empty_config_per_version() {
    assert_eq!(
        out(&empty_config(), V::V2_2),
        json!({"ignition": {"version": "2.2.0"}})
    );
    assert_eq!(
        out(&empty_config(), V::V3_1),
        json!({"ignition": {"version": "3.1.0"}})
    );
    assert_eq!(
        serde_json::to_string(&out(&empty_config(), V::V2_2)).unwrap(),
        r#"{"ignition":{"version":"2.2.0"}}"#
    );
}

// §4.1 3.5→3.4.

#[test]
fn deviation_enabled_cex_fails_translation_to_3_4() {
    // Vector 8: the original drops the cex silently.
    let c = c35(json!({"storage": {"luks": [
        {"name": "x", "device": "/dev/sda", "cex": {"enabled": true}}]}}));
    let e = err(&c, V::V3_4);
    assert_err(
        &e,
        "storage.luks[0].cex",
        "'Cex' type is not supported in spec v3.4",
    );
    assert_eq!(e.target(), V::V3_4);
    assert_eq!(e.kind(), "unsupported");
    assert_eq!(
        out(&c, V::V3_5)["storage"]["luks"][0]["cex"],
        json!({"enabled": true})
    );
}

#[test]
fn deviation_disabled_cex_is_dropped_as_a_default() {
    let c = c35(json!({"storage": {"luks": [
        {"name": "x", "device": "/dev/sda", "cex": {"enabled": false}}]}}));
    assert_eq!(
        out(&c, V::V3_4)["storage"]["luks"],
        json!([{"name": "x", "device": "/dev/sda"}])
    );
}

fn tang_config() -> Config {
    c35(
        json!({"storage": {"luks": [{"name": "x", "device": "/dev/sda", "clevis": {"tang": [
        {"url": "https://tang", "thumbprint": "t", "advertisement": "{\"payload\":\"p\"}"}]}}]}}),
    )
}

#[test]
fn deviation_tang_advertisement_kept_in_3_4() {
    // Vector 9 (3.4): the original's custom copier loses the advertisement.
    assert_eq!(
        out(&tang_config(), V::V3_4)["storage"]["luks"][0]["clevis"]["tang"],
        json!([{"url": "https://tang", "thumbprint": "t", "advertisement": "{\"payload\":\"p\"}"}])
    );
}

#[test]
fn deviation_tang_advertisement_fails_translation_to_3_3() {
    // Vector 9 (3.3): with the advertisement kept, the 3.4→3.3 rule applies.
    assert_err(
        &err(&tang_config(), V::V3_3),
        "storage.luks[0].clevis.tang[0].advertisement",
        "tang offline provisioning is not supported in spec v3.3",
    );
    let plain = c35(
        json!({"storage": {"luks": [{"name": "x", "device": "/dev/sda",
        "clevis": {"tang": [{"url": "https://tang", "thumbprint": "t"}]}}]}}),
    );
    assert_eq!(
        out(&plain, V::V3_3)["storage"]["luks"][0]["clevis"]["tang"],
        json!([{"url": "https://tang", "thumbprint": "t"}])
    );
}

// §4.2 3.4→3.3.

#[test]
fn vector_10_special_file_mode_bits() {
    let c = c35(json!({"storage": {"files": [{"path": "/usr/local/bin/x", "mode": 2541}]}}));
    assert_err(
        &err(&c, V::V3_3),
        "storage.files[0].mode",
        "special mode bits are not supported in spec v3.3",
    );
    assert_eq!(out(&c, V::V3_4)["storage"]["files"][0]["mode"], json!(2541));
}

#[test]
fn vector_11_sticky_directory_fails_2_2() {
    let c = c35(json!({"storage": {"directories": [{"path": "/tmp/x", "mode": 1023}]}}));
    assert_err(
        &err(&c, V::V2_2),
        "storage.directories[0].mode",
        "special mode bits are not supported in spec v3.3",
    );
}

#[test]
fn vector_12_arn_source_fails_3_3() {
    let c = c35(json!({"storage": {"files": [{"path": "/a",
        "contents": {"source": "arn:aws:s3:::bucket/key"}}]}}));
    assert_err(
        &err(&c, V::V3_3),
        "storage.files[0].contents.source",
        "arn: scheme for s3 is not supported in spec v3.3",
    );
    assert!(to_value_as(&c, V::V3_4).is_ok());
}

#[test]
fn vector_13_luks_discard_and_open_options() {
    let luks = |extra: Value| {
        let mut l = json!({"name": "x", "device": "/dev/sda"});
        l.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c35(json!({"storage": {"luks": [l]}}))
    };
    assert_err(
        &err(&luks(json!({"discard": true})), V::V3_3),
        "storage.luks[0].discard",
        "luks discard is not supported in spec v3.3",
    );
    assert_err(
        &err(&luks(json!({"openOptions": ["x"]})), V::V3_3),
        "storage.luks[0].openOptions",
        "luks openOptions is not supported in spec v3.3",
    );
    assert_eq!(
        out(&luks(json!({"discard": false})), V::V3_3)["storage"]["luks"],
        json!([{"name": "x", "device": "/dev/sda"}])
    );
}

// §6.1 / §4.3 kernel arguments.

#[test]
fn vector_14_kernel_arguments_block_3_2_until_migrated() {
    let c = c35(json!({"kernelArguments": {"shouldExist": ["a=b", "c"]}}));
    assert_err(
        &err(&c, V::V3_2),
        "kernelArguments",
        "KernelArguments is not supported on 3.2",
    );
    // What the renderer does before translating below 3.3: the arguments move into the
    // MachineConfig and the Ignition config no longer carries them.
    let mut migrated = c.clone();
    let moved = migrated
        .kernel_arguments
        .take()
        .and_then(|k| k.should_exist)
        .unwrap_or_default();
    assert_eq!(moved, ["a=b", "c"]);
    assert_eq!(
        out(&migrated, V::V3_2),
        json!({"ignition": {"version": "3.2.0"}})
    );
}

#[test]
fn vector_15_should_not_exist_kept_in_3_3() {
    let c = c35(json!({"kernelArguments": {"shouldNotExist": ["a=b"]}}));
    assert!(to_value_as(&c, V::V3_2).is_err());
    assert_eq!(
        out(&c, V::V3_3)["kernelArguments"],
        json!({"shouldNotExist": ["a=b"]})
    );
}

#[test]
fn vector_16_format_none_fails_3_2_output_validation() {
    let c = c35(json!({"storage": {"filesystems": [
        {"device": "/dev/vdb1", "format": "none", "wipeFilesystem": true}]}}));
    let e = err(&c, V::V3_2);
    assert_err(
        &e,
        "storage.filesystems[0].format",
        "invalid filesystem format",
    );
    assert_eq!(e.kind(), "invalid_output");
    assert!(to_value_as(&c, V::V3_3).is_ok());
}

// §4.4 3.2→3.1.

#[test]
fn vector_17_luks_fails_3_1() {
    let c = c35(json!({"storage": {"luks": [{"name": "x", "device": "/dev/sda"}]}}));
    assert_err(
        &err(&c, V::V3_1),
        "storage.luks",
        "LUKS is not supported on 3.1",
    );
}

#[test]
fn vector_18_user_should_exist() {
    let keep = c35(json!({"passwd": {"users": [{"name": "bob", "shouldExist": true}]}}));
    assert_eq!(
        out(&keep, V::V3_1)["passwd"],
        json!({"users": [{"name": "bob"}]})
    );
    let delete = c35(json!({"passwd": {"users": [{"name": "bob", "shouldExist": false}]}}));
    assert_err(
        &err(&delete, V::V3_1),
        "passwd.users[0].shouldExist",
        "ShouldExist in Passwd.Users is not supported on 3.1",
    );
}

#[test]
fn vector_19_partition_resize() {
    let part = |resize: bool| {
        c35(
            json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
            {"number": 1, "resize": resize, "sizeMiB": 100}]}]}}),
        )
    };
    assert_err(
        &err(&part(true), V::V3_1),
        "storage.disks[0].partitions[0].resize",
        "Resize in Storage.Disks.Partitions is not supported on 3.1",
    );
    assert_eq!(
        out(&part(false), V::V3_1)["storage"]["disks"][0]["partitions"],
        json!([{"number": 1, "sizeMiB": 100}])
    );
}

#[test]
fn vector_20_gs_source_fails_3_1_output_validation() {
    let c =
        c35(json!({"storage": {"files": [{"path": "/a", "contents": {"source": "gs://b/o"}}]}}));
    assert_err(
        &err(&c, V::V3_1),
        "storage.files[0].contents.source",
        "invalid url scheme",
    );
    assert!(to_value_as(&c, V::V3_2).is_ok());
}

// §4.5 3.2→2.2.

#[test]
fn vector_21_merge_compression_fails_2_2() {
    let c = c35(
        json!({"ignition": {"version": "3.5.0", "config": {"merge": [
        {"source": "https://x/c.ign", "compression": ""}]}}}),
    );
    assert_err(
        &err(&c, V::V2_2),
        "ignition.config.merge[0].compression",
        "Compression in Ignition.Config.Merge is not supported on 2.2",
    );
}

#[test]
fn vector_22_empty_http_headers_are_absent() {
    let c = c35(
        json!({"ignition": {"version": "3.5.0", "config": {"merge": [
        {"source": "https://x/c.ign", "httpHeaders": []}]}}}),
    );
    assert_eq!(
        out(&c, V::V2_2),
        json!({"ignition": {"config": {"append": [{"source": "https://x/c.ign"}]}, "version": "2.2.0"}})
    );
}

#[test]
fn vector_23_proxy_fails_2_2() {
    let c = c35(json!({"ignition": {"version": "3.5.0", "proxy": {"noProxy": ["a"]}}}));
    assert_err(
        &err(&c, V::V2_2),
        "ignition.proxy",
        "HTTP proxies in Ignition.Proxy are not supported on 2.2",
    );
}

#[test]
fn vector_24_partition_start_fails_2_2() {
    let c = c35(
        json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
        {"number": 1, "startMiB": 0}]}]}}),
    );
    assert_err(
        &err(&c, V::V2_2),
        "storage.disks[0].partitions[0].startMiB",
        "SizeMiB and StartMiB in Storage.Disks.Partitions is not supported on 2.2",
    );
}

#[test]
fn deviation_partition_deletion_fails_in_2_2() {
    // Vector 24 (second half): the original turns "delete partition 1" into "partition 1".
    let c = c35(
        json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
        {"number": 1, "shouldExist": false}]}]}}),
    );
    assert_err(
        &err(&c, V::V2_2),
        "storage.disks[0].partitions[0].shouldExist",
        "not supported on 2.2",
    );
    let wipe = c35(
        json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
        {"number": 1, "wipePartitionEntry": true}]}]}}),
    );
    assert_err(
        &err(&wipe, V::V2_2),
        "storage.disks[0].partitions[0].wipePartitionEntry",
        "not supported on 2.2",
    );
    let keep = c35(
        json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
        {"number": 1, "shouldExist": true, "wipePartitionEntry": false}]}]}}),
    );
    assert_eq!(
        out(&keep, V::V2_2)["storage"]["disks"],
        json!([{"device": "/dev/sda", "partitions": [{"number": 1}]}])
    );
}

fn files_config() -> Config {
    c35(json!({"storage": {"files": [
        {"path": "/etc/foo", "contents": {"source": "data:,hello"}, "mode": 420},
        {"path": "/etc/empty"},
        {"path": "/etc/app", "overwrite": true, "contents": {"source": "data:,base"},
         "append": [{"source": "data:,more"}], "user": {"name": "core"}, "mode": 384}
    ]}}))
}

#[test]
fn vector_25_files_split_into_2_2_entries() {
    let files = out(&files_config(), V::V2_2)["storage"]["files"].clone();
    let find = |path: &str, append: bool| {
        files
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path && f["append"].as_bool().unwrap_or(false) == append)
            .cloned()
            .unwrap_or_else(|| panic!("no {path} append={append} in {files}"))
    };
    assert_eq!(
        find("/etc/foo", false),
        json!({"filesystem": "root", "path": "/etc/foo", "overwrite": false,
               "contents": {"source": "data:,hello"}, "mode": 420})
    );
    assert_eq!(
        find("/etc/app", false),
        json!({"filesystem": "root", "path": "/etc/app", "overwrite": true, "user": {"name": "core"},
               "contents": {"source": "data:,base"}, "mode": 384})
    );
    assert_eq!(
        find("/etc/app", true),
        json!({"filesystem": "root", "path": "/etc/app", "overwrite": false, "user": {"name": "core"},
               "append": true, "contents": {"source": "data:,more"}, "mode": 384})
    );
}

#[test]
fn deviation_sourceless_file_emitted_as_empty_data_url_in_2_2() {
    // Vector 25: the original drops /etc/empty; spec 3 means an empty file.
    let files = out(&files_config(), V::V2_2)["storage"]["files"].clone();
    let empty: Vec<&Value> = files
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"] == "/etc/empty")
        .collect();
    assert_eq!(
        empty,
        [
            &json!({"filesystem": "root", "path": "/etc/empty", "overwrite": false,
                 "contents": {"source": "data:,"}})
        ]
    );
}

#[test]
fn vector_26_filesystems_named_and_nodes_placed() {
    let c = c35(json!({"storage": {
        "filesystems": [
            {"device": "/dev/sdb", "format": "xfs", "path": "/var"},
            {"device": "/dev/sdc", "format": "ext4"},
            {"device": "/dev/sdd", "format": "ext4"}],
        "files": [{"path": "/var/lib/x", "contents": {"source": "data:,x"}},
                  {"path": "/etc/z", "contents": {"source": "data:,z"}}],
        "directories": [{"path": "/var/d"}],
        "links": [{"path": "/var/l", "target": "/etc/z"}]}}));
    let s = out(&c, V::V2_2)["storage"].clone();
    let names: Vec<&Value> = s["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["name"])
        .collect();
    assert_eq!(names, [&json!("/var"), &json!("1"), &json!("2")]);
    let place = |v: &Value| (v["filesystem"].clone(), v["path"].clone());
    assert_eq!(place(&s["files"][0]), (json!("/var"), json!("/lib/x")));
    assert_eq!(place(&s["files"][1]), (json!("root"), json!("/etc/z")));
    assert_eq!(place(&s["directories"][0]), (json!("/var"), json!("/d")));
    assert_eq!(place(&s["links"][0]), (json!("/var"), json!("/l")));
    assert_eq!(
        s["filesystems"][0]["mount"],
        json!({"device": "/dev/sdb", "format": "xfs"})
    );
}

#[test]
fn deviation_filesystem_at_slash_maps_to_root() {
    // Vector 27: the original names it "/" and leaves files with a relative path (500).
    let with_file = c35(json!({"storage": {
        "filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/"}],
        "files": [{"path": "/etc/x", "contents": {"source": "data:,x"}}]}}));
    let s = out(&with_file, V::V2_2)["storage"].clone();
    assert_eq!(s["filesystems"][0]["name"], "root");
    assert_eq!(s["files"][0]["filesystem"], "root");
    assert_eq!(s["files"][0]["path"], "/etc/x");
    let alone = c35(json!({"storage": {
        "filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/"}]}}));
    assert_eq!(
        out(&alone, V::V2_2)["storage"]["filesystems"][0]["name"],
        "root"
    );
}

#[test]
fn deviation_component_wise_filesystem_prefix_matching() {
    // The original matches string prefixes: /var would own /variable/x ("iable/x").
    let c = c35(json!({"storage": {
        "filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/var"}],
        "files": [{"path": "/variable/x", "contents": {"source": "data:,x"}}],
        "directories": [{"path": "/var"}]}}));
    let s = out(&c, V::V2_2)["storage"].clone();
    assert_eq!(s["files"][0]["filesystem"], "root");
    assert_eq!(s["files"][0]["path"], "/variable/x");
    assert_eq!(s["directories"][0]["filesystem"], "/var");
    assert_eq!(s["directories"][0]["path"], "/");
}

#[test]
fn vector_28_sha256_hash() {
    let sha = format!("sha256-{}", "0123456789abcdef".repeat(4));
    let c = c35(json!({"storage": {"files": [{"path": "/a",
        "contents": {"source": "data:,x", "verification": {"hash": sha}}}]}}));
    assert!(to_value_as(&c, V::V3_1).is_ok());
    assert_err(
        &err(&c, V::V2_2),
        "storage.files[0].contents.verification.hash",
        "unrecognized hash function",
    );
}

// §5.1 de-duplication of 2.x configs.

fn v22(storage_etc: Value) -> Value {
    let mut v = json!({"ignition": {"version": "2.2.0"}});
    v.as_object_mut()
        .unwrap()
        .extend(storage_etc.as_object().unwrap().clone());
    v
}

fn root_file(path: &str, source: &str) -> Value {
    json!({"filesystem": "root", "path": path, "contents": {"source": source}, "mode": 420})
}

#[test]
fn vector_29_last_definition_of_a_path_wins() {
    let c = parse(v22(json!({"storage": {"files": [
        root_file("/etc/a", "data:,first"),
        root_file("/etc/b", "data:,b"),
        root_file("/etc/a", "data:,second")]}})));
    assert_eq!(
        out(&c, V::V3_5)["storage"]["files"],
        json!([
            {"path": "/etc/a", "contents": {"source": "data:,second"}, "overwrite": true, "mode": 420},
            {"path": "/etc/b", "contents": {"source": "data:,b"}, "overwrite": true, "mode": 420}
        ])
    );
}

#[test]
fn vector_v2_dedupe_reverses_the_order_as_the_original() {
    // The original walks the files last to first and keeps the first seen of each path: the
    // last definition wins and the list comes out reversed (issue 40: no machine needs the
    // input's order, so the original's bytes are served).
    let c = parse(v22(json!({"storage": {"files": [
        root_file("/etc/b", "data:,b"),
        root_file("/etc/a", "data:,first"),
        root_file("/etc/a", "data:,second")]}})));
    let files = out(&c, V::V3_5)["storage"]["files"].clone();
    assert_eq!(files[0]["path"], "/etc/a");
    assert_eq!(files[0]["contents"]["source"], "data:,second");
    assert_eq!(files[1]["path"], "/etc/b");
    assert_eq!(files.as_array().unwrap().len(), 2);
    // Units too: the last definition wins, earlier ones give it their drop-ins.
    let unit = |name: &str, contents: &str, dropin: &str| json!({"name": name, "contents": contents, "dropins": [{"name": dropin, "contents": "x"}]});
    let c = parse(v22(json!({"systemd": {"units": [
        unit("a.service", "first", "1.conf"),
        unit("b.service", "b", "b.conf"),
        unit("a.service", "second", "2.conf")]}})));
    let units = out(&c, V::V3_5)["systemd"]["units"].clone();
    assert_eq!(units[0]["name"], "a.service");
    assert_eq!(units[0]["contents"], "second");
    assert_eq!(units[0]["dropins"][0]["name"], "2.conf");
    assert_eq!(units[0]["dropins"][1]["name"], "1.conf");
    assert_eq!(units[1]["name"], "b.service");
}

#[test]
fn vector_30_v2_dedupe_keeps_the_last_entry_of_a_path_append_or_not() {
    // The original keeps only the last entry (append c, overwrite false); the MCO allows no
    // appends (its daemon refuses a config with one), so no machine is served better by more.
    let append = |source: &str| {
        let mut f = root_file("/etc/x", source);
        f["append"] = json!(true);
        f
    };
    let c = parse(v22(json!({"storage": {"files": [
        root_file("/etc/x", "data:,a"), append("data:,b"), append("data:,c")]}})));
    assert_eq!(
        out(&c, V::V3_5)["storage"]["files"],
        json!([{"path": "/etc/x", "overwrite": false, "mode": 420,
                "append": [{"source": "data:,c"}]}])
    );
}

#[test]
fn vector_31_users_merged_into_core() {
    let c = parse(v22(json!({"passwd": {"users": [
        {"name": "core", "sshAuthorizedKeys": ["k1", "k2"]},
        {"name": "core", "sshAuthorizedKeys": ["k3", "k1"], "passwordHash": "h"}]}})));
    assert_eq!(
        out(&c, V::V3_5)["passwd"],
        json!({"users": [{"name": "core", "passwordHash": "h", "sshAuthorizedKeys": ["k3", "k1", "k2"]}]})
    );
    let e = parse_err(v22(json!({"passwd": {"users": [{"name": "bob"}]}})));
    assert_eq!(
        e.to_string(),
        "unexpected user with name: bob. Only core user is supported"
    );
}

#[test]
fn vector_32_units_merged_with_dropins() {
    let c = parse(v22(json!({"systemd": {"units": [
        {"name": "a.service", "contents": "[Unit]\nA=1\n", "dropins": [
            {"name": "1.conf", "contents": "[Unit]\nD=1\n"},
            {"name": "2.conf", "contents": "[Unit]\nD=2-first\n"}]},
        {"name": "b.service", "enable": true, "contents": "[Install]\nWantedBy=x\n"},
        {"name": "a.service", "enabled": true, "contents": "[Unit]\nA=2\n[Install]\nWantedBy=x\n",
         "dropins": [{"name": "2.conf", "contents": "[Unit]\nD=2-second\n"}]}]}})));
    assert_eq!(
        out(&c, V::V3_5)["systemd"]["units"],
        json!([
            {"name": "a.service", "enabled": true, "contents": "[Unit]\nA=2\n[Install]\nWantedBy=x\n",
             "dropins": [{"name": "2.conf", "contents": "[Unit]\nD=2-second\n"},
                         {"name": "1.conf", "contents": "[Unit]\nD=1\n"}]},
            {"name": "b.service", "enabled": true, "contents": "[Install]\nWantedBy=x\n"}
        ])
    );
}

// §5.2 / §5.3 2.x → 3.0.

#[test]
fn vector_33_any_2_x_partition_fails() {
    let e = parse_err(v22(json!({"storage": {"disks": [{"device": "/dev/sda",
        "partitions": [{"number": 1, "label": "x"}]}]}})));
    assert!(
        e.to_string()
            .contains("Invalid input config:\ndeprecated: size is deprecated"),
        "{e}"
    );
    assert_eq!(e.kind(), "convert_v2");
}

#[test]
fn vector_34_only_the_root_filesystem_maps() {
    let fs = |name: &str| {
        v22(json!({"storage": {"filesystems": [
            {"name": name, "mount": {"device": "/dev/sdb", "format": "ext4"}}]}}))
    };
    let e = parse_err(fs("data"));
    assert!(
        e.to_string()
            .contains("Config defined filesystem \"data\" but no mapping was defined"),
        "{e}"
    );
    assert_eq!(
        out(&parse(fs("root")), V::V3_5),
        json!({"ignition": {"version": "3.5.0"}})
    );
}

#[test]
fn vector_35_node_under_a_configured_link() {
    let e = parse_err(v22(json!({"storage": {
        "files": [root_file("/etc/foobar/x", "data:,x")],
        "links": [{"filesystem": "root", "path": "/etc/foo", "target": "/tmp"}]}})));
    assert!(
        e.to_string()
            .contains("File: /etc/foobar/x uses link defined in config \"/etc/foo\""),
        "{e}"
    );
}

#[test]
fn vector_36_paths_are_joined_and_cleaned() {
    let c = parse(v22(json!({"storage": {"files": [
        root_file("/etc//x/../y/", "data:,y"),
        {"filesystem": "data", "path": "/x", "contents": {"source": "data:,x"}, "mode": 420}]}})));
    // The de-duplication lists them in reverse, as the original does.
    let files = out(&c, V::V3_5)["storage"]["files"].clone();
    assert_eq!(files[1]["path"], "/etc/y");
    assert_eq!(files[1]["overwrite"], true);
    assert_eq!(files[0]["path"], "/x");
}

#[test]
fn vector_37_append_and_empty_source() {
    let c = parse(v22(json!({"storage": {"files": [
        {"filesystem": "root", "path": "/a", "append": true,
         "contents": {"source": "data:,c", "compression": ""}},
        {"filesystem": "root", "path": "/b", "contents": {"source": ""}}]}})));
    assert_eq!(
        out(&c, V::V3_5)["storage"]["files"],
        // In reverse, as the original's de-duplication lists them.
        json!([
            {"path": "/b", "overwrite": true, "contents": {"source": ""}},
            {"path": "/a", "overwrite": false, "append": [{"source": "data:,c"}]}
        ])
    );
}

// §1 accepted inputs.

#[test]
fn vector_38_unknown_and_invalid_versions() {
    // 3.6.0 is accepted since issue 35 (tests/ignition_3_6.rs), and the lists name it.
    for version in [
        "2.3.0",
        "2.2.1",
        "3.6.0-experimental",
        "3.7.0-experimental",
        "1.0.0",
        "2.1.0-rc",
    ] {
        let e = parse_err(json!({"ignition": {"version": version}}));
        assert_eq!(
            e.to_string(),
            "parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5,3.6",
            "{version}"
        );
    }
    for config in [
        json!({}),
        json!({"ignitionVersion": 1}),
        json!({"ignition": {"version": "3.2"}}),
    ] {
        let e = parse_err(config.clone());
        assert_eq!(
            e.to_string(),
            "parsing Ignition config failed: invalid version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5,3.6",
            "{config}"
        );
    }
    // go-semver accepts leading zeros; the original string stays on the 3.5 identity path.
    let c = parse(json!({"ignition": {"version": "03.5.0"}}));
    assert_eq!(out(&c, V::V3_5), json!({"ignition": {"version": "03.5.0"}}));
}

#[test]
fn vector_39_spec_2_0_files_gain_owners() {
    let c = parse(
        json!({"ignition": {"version": "2.0.0"}, "storage": {"files": [
        {"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,a"}, "mode": 420}]}}),
    );
    assert_eq!(
        out(&c, V::V3_5)["storage"]["files"],
        json!([{"path": "/etc/a", "contents": {"source": "data:,a"}, "mode": 420,
                "overwrite": true, "user": {"id": 0}, "group": {"id": 0}}])
    );
}

#[test]
fn deviation_tang_advertisement_kept_when_parsing_3_4() {
    // Vector 40: the original's 3.4→3.5 translation drops it.
    let c = parse(
        json!({"ignition": {"version": "3.4.0"}, "storage": {"luks": [
        {"name": "x", "device": "/dev/sda", "clevis": {"tang": [
            {"url": "https://tang", "thumbprint": "t", "advertisement": "{}"}]}}]}}),
    );
    assert_eq!(
        out(&c, V::V3_5)["storage"]["luks"][0]["clevis"]["tang"][0]["advertisement"],
        "{}"
    );
}

// §6.2 file-mode validation (render controller rule).

#[test]
fn vector_41_validate_ignition_file_modes() {
    let file = |mode: i64| c35(json!({"storage": {"files": [{"path": "/a", "mode": mode}]}}));
    assert_eq!(
        check_file_modes(&file(2541)).map_err(|e| e.to_string()),
        Err("invalid mode 04755 for /a, cannot exceed 0777".to_string())
    );
    assert_eq!(
        check_file_modes(&file(512)).map_err(|e| e.to_string()),
        Err("invalid mode 01000 for /a, cannot exceed 0777".to_string())
    );
    assert_eq!(check_file_modes(&file(511)), Ok(()));
    let dir = c35(json!({"storage": {"directories": [{"path": "/a", "mode": 1023}]}}));
    assert_eq!(check_file_modes(&dir), Ok(()));
}

// §3 serve-path validation.

#[test]
fn vector_42_duplicate_entries_fail_every_version() {
    // The renderer appends files to a parsed config; a colliding path must fail on the
    // serve path whatever version is asked for.
    let unchecked = |v: Value| -> Config { serde_json::from_value(v).expect("3.5 shape") };
    let two_files = unchecked(json!({"ignition": {"version": "3.5.0"},
        "storage": {"files": [{"path": "/a"}, {"path": "/a"}]}}));
    let file_and_dir = unchecked(json!({"ignition": {"version": "3.5.0"},
        "storage": {"files": [{"path": "/a"}], "directories": [{"path": "/a"}]}}));
    for v in V::ALL {
        let e = err(&two_files, v);
        assert_err(&e, "storage.files[1]", "duplicate entry defined");
        assert_eq!(e.kind(), "invalid");
        assert_err(
            &err(&file_and_dir, v),
            "storage.files[0]",
            "duplicate entry defined",
        );
    }
    // Parsing such a config fails the same way.
    let e = parse_err(json!({"ignition": {"version": "3.5.0"},
        "storage": {"files": [{"path": "/a"}, {"path": "/a"}]}}));
    assert!(e.to_string().contains("duplicate entry defined"), "{e}");
}

use super::*;
use crate::ignition::version::SpecVersion;

fn cfg(json: serde_json::Value) -> Config {
    serde_json::from_value(json).unwrap()
}

fn messages(config: &Config, spec: SpecVersion) -> Vec<String> {
    validate(config, spec)
        .problems
        .into_iter()
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect()
}

#[test]
fn empty_config_is_valid() {
    let c = cfg(serde_json::json!({"ignition": {"version": "3.5.0"}}));
    assert!(validate(&c, SpecVersion::V3_5).is_empty());
}

#[test]
fn vector_42_duplicate_paths() {
    let c = cfg(
        serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
        "files": [{"path": "/a"}, {"path": "/a"}]}}),
    );
    assert_eq!(
        messages(&c, SpecVersion::V3_5),
        ["storage.files[1]: duplicate entry defined"]
    );
    let c = cfg(
        serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
        "files": [{"path": "/a"}], "directories": [{"path": "/a"}]}}),
    );
    assert_eq!(
        messages(&c, SpecVersion::V3_5),
        ["storage.files[0]: duplicate entry defined"]
    );
}

#[test]
fn node_and_resource_rules() {
    let c = cfg(
        serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {
        "files": [
            {"path": "rel"},
            {"path": "/a/../b"},
            {"path": "/c", "mode": 8192},
            {"path": "/d", "overwrite": true},
            {"path": "/e", "contents": {"source": "ftp://x"}},
            {"path": "/f", "contents": {"source": "data:,ok", "compression": "xz"}},
            {"path": "/g", "contents": {"source": "data:,ok", "verification": {"hash": "md5-00"}}},
            {"path": "/h", "user": {"id": 1, "name": "core"}}
        ]}}),
    );
    assert_eq!(
        messages(&c, SpecVersion::V3_5),
        [
            "storage.files[0].path: path not absolute",
            "storage.files[1].path: path is not fully simplified",
            "storage.files[2].mode: illegal file mode",
            "storage.files[3].overwrite: overwrite must be false if source is unspecified",
            "storage.files[4].contents.source: invalid url scheme",
            "storage.files[5].contents.compression: invalid compression method",
            "storage.files[6].contents.verification.hash: unrecognized hash function",
            "storage.files[7].user: cannot set both id and name",
        ]
    );
}

#[test]
fn version_specific_rules() {
    let gs = cfg(
        serde_json::json!({"ignition": {"version": "3.1.0"}, "storage": {
        "files": [{"path": "/a", "contents": {"source": "gs://b/o"}}]}}),
    );
    assert_eq!(
        messages(&gs, SpecVersion::V3_1),
        ["storage.files[0].contents.source: invalid url scheme"]
    );
    let none = cfg(
        serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {
        "filesystems": [{"device": "/dev/vdb1", "format": "none"}]}}),
    );
    assert_eq!(
        messages(&none, SpecVersion::V3_2),
        ["storage.filesystems[0].format: invalid filesystem format"]
    );
    let sha = format!("sha256-{}", "a".repeat(64));
    let sha256 = cfg(
        serde_json::json!({"ignition": {"version": "3.0.0"}, "storage": {
        "files": [{"path": "/a", "contents": {"source": "data:,x", "verification": {"hash": sha}}}]}}),
    );
    assert_eq!(
        messages(&sha256, SpecVersion::V3_0),
        ["storage.files[0].contents.verification.hash: unrecognized hash function"]
    );
}

#[test]
fn luks_raid_units_and_kargs() {
    let c = cfg(serde_json::json!({"ignition": {"version": "3.5.0"},
        "kernelArguments": {"shouldExist": ["a"], "shouldNotExist": ["a"]},
        "storage": {
            "luks": [{"name": "a/b", "device": "/dev/sda", "cex": {"enabled": true},
                      "clevis": {"tpm2": true}}],
            "raid": [{"name": "md0", "level": "raid0", "spares": 1, "devices": ["/dev/a"]}]
        },
        "systemd": {"units": [{"name": "x.foo", "contents": "[Unit"}]}}));
    assert_eq!(
        messages(&c, SpecVersion::V3_5),
        [
            "storage.luks[0].name: device names cannot contain slashes",
            "storage.luks[0].cex: cannot use cex with clevis",
            "storage.raid[0].level: spares unsupported for linear and raid0 arrays",
            "systemd.units[0].name: invalid systemd unit extension",
            "systemd.units[0].contents: invalid unit content: unable to find end of section",
            "kernelArguments.shouldNotExist[0]: duplicate entry defined",
        ]
    );
}

#[test]
fn arn_and_s3_urls() {
    assert_eq!(
        check_url("arn:aws:s3:::bucket/key", SpecVersion::V3_4),
        Ok(())
    );
    assert!(check_url("arn:aws:s3:::bucket/key", SpecVersion::V3_3).is_err());
    assert!(check_url("arn:aws:iam:::bucket/key", SpecVersion::V3_5).is_err());
    assert!(check_url("arn:aws:s3:::bucket", SpecVersion::V3_5).is_err());
    assert_eq!(
        check_url("s3://b/k?versionId=", SpecVersion::V3_5),
        Err("invalid S3 object VersionId".to_string())
    );
    assert_eq!(check_url("s3://b/k?versionId=1", SpecVersion::V3_5), Ok(()));
    assert!(check_url("data:,a b", SpecVersion::V3_5).is_err());
}

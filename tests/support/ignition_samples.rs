//! Shared test data for the ignition integration tests: a corpus of 3.5 configs, each with the
//! oldest spec it can be served in, exercising every translated field.

use machine_config_server::ignition::{parse_config, Config, SpecVersion};
use serde_json::{json, Value};

pub struct Sample {
    pub name: &'static str,
    pub config: Config,
    /// The oldest 3.x spec the config can be served in (all newer ones work too).
    pub oldest_3x: SpecVersion,
    /// Whether it can also be served as 2.2.
    pub serves_2_2: bool,
}

fn sample(name: &'static str, oldest_3x: SpecVersion, serves_2_2: bool, v: Value) -> Sample {
    let config = parse_config(Some(&v)).unwrap_or_else(|e| panic!("sample {name}: {e}"));
    Sample {
        name,
        config,
        oldest_3x,
        serves_2_2,
    }
}

const SHA512: &str = "sha512-cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e";
const SHA256: &str = "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Fields every served spec can carry (including 2.2).
pub fn common() -> Value {
    json!({
        "ignition": {
            "version": "3.5.0",
            "config": {
                "merge": [{"source": "https://example.com/a.ign", "verification": {"hash": SHA512}}],
                "replace": {"source": "https://example.com/r.ign"}
            },
            "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca"}]}},
            "timeouts": {"httpResponseHeaders": 10, "httpTotal": 60}
        },
        "passwd": {
            "users": [{
                "name": "core", "passwordHash": "$6$x", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k1"],
                "uid": 1000, "gecos": "Core", "homeDir": "/home/core", "noCreateHome": true,
                "primaryGroup": "core", "groups": ["wheel"], "noUserGroup": true, "noLogInit": true,
                "shell": "/bin/bash", "system": true
            }],
            "groups": [{"name": "ops", "gid": 2000, "passwordHash": "$6$y", "system": true}]
        },
        "storage": {
            "disks": [{"device": "/dev/sdb", "wipeTable": true, "partitions": [
                {"number": 1, "label": "data", "typeGuid": "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
                 "guid": "5B1C3A3E-0D2A-4C61-9E0C-6A7E4B3B9D11"}]}],
            "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdc", "/dev/sdd"], "spares": 1,
                      "options": ["--assume-clean"]}],
            "filesystems": [
                {"device": "/dev/md/md0", "format": "xfs", "path": "/var/data", "label": "data",
                 "uuid": "6A7E4B3B-0D2A-4C61-9E0C-5B1C3A3E9D11", "wipeFilesystem": true, "options": ["-m", "0"]},
                {"device": "/dev/sde", "format": "ext4"}
            ],
            "files": [
                {"path": "/etc/motd", "contents": {"source": "data:,hello%0A"}, "mode": 420, "overwrite": true},
                {"path": "/etc/app.conf", "contents": {"source": "https://example.com/app.conf",
                  "compression": "gzip", "verification": {"hash": SHA512}},
                 "append": [{"source": "data:,more"}], "mode": 384, "user": {"name": "core"}, "group": {"id": 0}},
                {"path": "/var/data/report", "contents": {"source": "s3://bucket/key"}, "mode": 416},
                {"path": "/etc/empty", "mode": 420}
            ],
            "directories": [{"path": "/etc/app.d", "mode": 493, "user": {"id": 1000}, "overwrite": false}],
            "links": [
                {"path": "/etc/localtime", "target": "/usr/share/zoneinfo/UTC", "overwrite": true},
                {"path": "/etc/hard", "target": "/etc/motd", "hard": true}
            ]
        },
        "systemd": {"units": [
            {"name": "app.service", "enabled": true,
             "contents": "[Unit]\nDescription=app\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
             "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=b\n"}]},
            {"name": "bad.service", "mask": true},
            {"name": "old.service", "enabled": false}
        ]}
    })
}

fn with(base: Value, patch: Value) -> Value {
    let mut v = base;
    merge(&mut v, patch);
    v
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

pub fn corpus() -> Vec<Sample> {
    let minimal = json!({"ignition": {"version": "3.5.0"}});
    vec![
        sample("empty", SpecVersion::V3_0, true, minimal.clone()),
        sample("common", SpecVersion::V3_0, true, common()),
        sample(
            "spec-3.1 fields",
            SpecVersion::V3_1,
            false,
            with(
                minimal.clone(),
                json!({
                    "ignition": {
                        "config": {"merge": [{"source": "https://example.com/h.ign", "compression": "gzip",
                            "httpHeaders": [{"name": "Authorization", "value": "Bearer x"}]}]},
                        "proxy": {"httpProxy": "http://proxy:3128", "httpsProxy": "https://proxy:3129",
                                  "noProxy": ["example.com"]}
                    },
                    "storage": {
                        "filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/srv",
                                         "mountOptions": ["noatime"]}],
                        "files": [{"path": "/srv/x", "contents": {"source": "data:,x",
                            "verification": {"hash": SHA256}}}]
                    }
                }),
            ),
        ),
        sample(
            "spec-3.2 fields",
            SpecVersion::V3_2,
            false,
            with(
                minimal.clone(),
                json!({
                    "passwd": {"users": [{"name": "olduser", "shouldExist": false}],
                               "groups": [{"name": "oldgroup", "shouldExist": false}]},
                    "storage": {
                        "disks": [{"device": "/dev/sdb", "partitions": [
                            {"number": 4, "resize": true, "sizeMiB": 0}]}],
                        "luks": [
                            {"name": "data", "device": "/dev/sdc", "label": "crypt", "wipeVolume": true,
                             "options": ["--cipher", "aes-xts-plain64"],
                             "clevis": {"tpm2": true, "threshold": 1,
                                        "tang": [{"url": "https://tang.example.com", "thumbprint": "abc"}]}},
                            {"name": "keyed", "device": "/dev/sdd", "keyFile": {"source": "data:,secret"}}
                        ],
                        "files": [{"path": "/etc/gs", "contents": {"source": "gs://bucket/object"}}]
                    }
                }),
            ),
        ),
        sample(
            "spec-3.3 fields",
            SpecVersion::V3_3,
            false,
            with(
                minimal.clone(),
                json!({
                    "kernelArguments": {"shouldExist": ["nosmt"], "shouldNotExist": ["quiet"]},
                    "storage": {"filesystems": [{"device": "/dev/vdb1", "format": "none", "wipeFilesystem": true}],
                                "luks": [{"name": "custom", "device": "/dev/sdc",
                                          "clevis": {"custom": {"pin": "tpm2", "config": "{}", "needsNetwork": false}}}]}
                }),
            ),
        ),
        sample(
            "spec-3.4 fields",
            SpecVersion::V3_4,
            false,
            with(
                minimal.clone(),
                json!({
                    "storage": {
                        "luks": [{"name": "data", "device": "/dev/sdc", "discard": true, "openOptions": ["--allow-discards"],
                                  "clevis": {"tang": [{"url": "https://tang.example.com", "thumbprint": "abc",
                                                       "advertisement": "{\"payload\":\"eyJ9\"}"}]}}],
                        "files": [{"path": "/usr/local/bin/suid", "mode": 2541, "contents": {"source": "arn:aws:s3:::bucket/key"}}],
                        "directories": [{"path": "/tmp/sticky", "mode": 1023}]
                    }
                }),
            ),
        ),
        sample(
            "spec-3.5 fields",
            SpecVersion::V3_5,
            false,
            with(
                minimal,
                json!({"storage": {"luks": [{"name": "cex", "device": "/dev/dasdb", "cex": {"enabled": true}}]}}),
            ),
        ),
    ]
}

//! Property tests of the Ignition engine: parsing never panics on arbitrary bytes or JSON,
//! Accept negotiation never panics, and a config that only uses fields two specs share comes
//! back unchanged when translated down to the older spec and parsed back up. Written as spec
//! 3.6, such a config answers every older spec exactly as written as 3.5; with special mode
//! bits it is served as 3.6 only (docs/ignition-3.6.md).

use std::collections::BTreeSet;

use machine_config_server::ignition::{
    accept::negotiate, dataurl, parse_config, parse_config_slice, to_value_as, SpecVersion,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const KEYS: &[&str] = &[
    "ignition",
    "version",
    "config",
    "merge",
    "replace",
    "source",
    "storage",
    "files",
    "path",
    "contents",
    "mode",
    "overwrite",
    "append",
    "directories",
    "links",
    "target",
    "hard",
    "systemd",
    "units",
    "name",
    "enabled",
    "dropins",
    "passwd",
    "users",
    "groups",
    "filesystems",
    "device",
    "format",
    "luks",
    "clevis",
    "tang",
    "disks",
    "partitions",
    "number",
    "kernelArguments",
    "shouldExist",
    "filesystem",
    "verification",
    "hash",
    "compression",
    "httpHeaders",
    "proxy",
];
const VERSIONS: &[&str] = &[
    "3.5.0",
    "3.4.0",
    "3.3.0",
    "3.2.0",
    "3.1.0",
    "3.0.0",
    "2.2.0",
    "2.1.0",
    "2.0.0",
    "3.6.0",
    "03.5.0",
    "3.5.0-",
    "1.0.0",
    "x",
    "03.6.0",
    "3.6.0-experimental",
    "3.7.0",
];

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(VERSIONS).prop_map(Value::from),
        "[/a-z.:%,]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// Arbitrary JSON wrapped so that the version detection usually succeeds and the parsers
/// get deep into the document.
fn config_like_json() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(VERSIONS),
        arbitrary_json(),
        arbitrary_json(),
    )
        .prop_map(|(v, storage, rest)| {
            let mut map = Map::new();
            map.insert("ignition".into(), json!({"version": v}));
            map.insert("storage".into(), storage);
            if let Value::Object(extra) = rest {
                for (k, val) in extra {
                    map.entry(k).or_insert(val);
                }
            }
            Value::Object(map)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_config_slice(&bytes);
    }

    #[test]
    fn parsing_and_translating_arbitrary_json_never_panics(value in prop_oneof![arbitrary_json(), config_like_json()]) {
        if let Ok(config) = parse_config(Some(&value)) {
            for version in SpecVersion::ALL {
                let _ = to_value_as(&config, version);
            }
        }
    }

    #[test]
    fn accept_negotiation_never_panics(header in ".{0,80}") {
        let _ = negotiate(Some(&header));
    }

    #[test]
    fn accept_negotiation_of_structured_headers_never_panics(
        entries in prop::collection::vec(
            (
                prop::sample::select(&["application", "*", "", "foo", "text"][..]),
                prop::sample::select(&["vnd.coreos.ignition+json", "*", "json", ""][..]),
                prop::collection::vec(
                    (
                        prop::sample::select(&["version", "q", "Version", "", "x"][..]),
                        prop_oneof!["[0-9.a-z+-]{0,8}", Just("NaN".to_string()), Just("1e99".to_string())],
                    ),
                    0..3,
                ),
            ),
            0..30,
        )
    ) {
        let header = entries
            .iter()
            .map(|(t, s, params)| {
                let params: String = params.iter().map(|(k, v)| format!(";{k}={v}")).collect();
                format!("{t}/{s}{params}")
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = negotiate(Some(&header));
    }

    #[test]
    fn data_urls_round_trip(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        prop_assert_eq!(dataurl::decode(&dataurl::encode(&bytes)).unwrap(), bytes);
    }

    #[test]
    fn data_url_decoding_never_panics(s in "data:[ -~]{0,40}") {
        let _ = dataurl::decode(&s);
    }

    #[test]
    fn data_url_check_agrees_with_decode(
        s in prop_oneof![
            "data:[ -~]{0,24}",
            "data:(text/plain)?(;charset=utf-8)?;base64,[A-Za-z0-9+/=\n]{0,12}",
            "data:,[a-z%0-9A-F]{0,12}",
        ]
    ) {
        prop_assert_eq!(dataurl::check(&s).is_ok(), dataurl::decode(&s).is_ok(), "{:?}", s);
    }
}

// Round trips: a valid config built only from fields the older spec has.

const UNIT_WITH_INSTALL: &str = "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";

#[derive(Debug, Clone)]
struct FileSpec {
    contents: Option<Vec<u8>>,
    overwrite: bool,
    appends: Vec<Vec<u8>>,
    mode: Option<i64>,
    owner: Option<i64>,
}

fn file_spec() -> impl Strategy<Value = FileSpec> {
    (
        prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), 0..3),
        prop::option::of(0i64..=0o777),
        prop::option::of(0i64..3000),
    )
        .prop_map(|(contents, overwrite, mut appends, mode, owner)| {
            // A file needs contents or appends to mean the same thing in every spec.
            if contents.is_none() && appends.is_empty() {
                appends.push(b"x".to_vec());
            }
            FileSpec {
                contents,
                overwrite,
                appends,
                mode,
                owner,
            }
        })
}

/// Features common to every served spec, 2.2 included.
fn common_config() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(file_spec(), 0..4),
        prop::collection::vec((prop::option::of(0i64..=0o777), prop::option::of(any::<bool>())), 0..3),
        prop::collection::vec((any::<bool>(), prop::option::of(any::<bool>())), 0..3),
        prop::collection::vec(
            (prop::option::of(any::<bool>()), any::<bool>(), any::<bool>(), 0usize..3),
            0..3,
        ),
        prop::option::of((prop::collection::btree_set("[a-z]{1,6}", 0..3), prop::option::of("[a-z$]{1,8}"))),
        prop::collection::vec((prop::option::of(0i64..5000), any::<bool>()), 0..3),
        (0usize..3, 0usize..3, prop::option::of(1i64..3), any::<bool>()),
    )
        .prop_map(|(files, dirs, links, units, core, groups, (merges, disks, spares, timeouts))| {
            let files: Vec<Value> = files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut v = json!({"path": format!("/etc/f{i}.conf")});
                    if let Some(c) = &f.contents {
                        v["contents"] = json!({"source": dataurl::encode(c)});
                        v["overwrite"] = json!(f.overwrite);
                    } else {
                        v["overwrite"] = json!(false);
                    }
                    if !f.appends.is_empty() {
                        v["append"] = f.appends.iter().map(|a| json!({"source": dataurl::encode(a)})).collect();
                    }
                    if let Some(m) = f.mode { v["mode"] = json!(m); }
                    if let Some(id) = f.owner { v["user"] = json!({"id": id}); }
                    v
                })
                .collect();
            let dirs: Vec<Value> = dirs
                .iter()
                .enumerate()
                .map(|(i, (mode, overwrite))| {
                    let mut v = json!({"path": format!("/srv/d{i}.dir")});
                    if let Some(m) = mode { v["mode"] = json!(m); }
                    if let Some(o) = overwrite { v["overwrite"] = json!(o); }
                    v
                })
                .collect();
            let links: Vec<Value> = links
                .iter()
                .enumerate()
                .map(|(i, (hard, overwrite))| {
                    let mut v = json!({"path": format!("/srv/l{i}.lnk"), "target": "/usr/share/x"});
                    if *hard { v["hard"] = json!(true); }
                    if let Some(o) = overwrite { v["overwrite"] = json!(o); }
                    v
                })
                .collect();
            let units: Vec<Value> = units
                .iter()
                .enumerate()
                .map(|(i, (enabled, mask, contents, dropins))| {
                    let mut v = json!({"name": format!("u{i}.service")});
                    if let Some(e) = enabled { v["enabled"] = json!(e); }
                    if *mask { v["mask"] = json!(true); }
                    if *contents { v["contents"] = json!(UNIT_WITH_INSTALL); }
                    if *dropins > 0 {
                        v["dropins"] = (0..*dropins)
                            .map(|j| json!({"name": format!("{j}-x.conf"), "contents": "[Service]\nA=b\n"}))
                            .collect();
                    }
                    v
                })
                .collect();
            let mut config = json!({"ignition": {"version": "3.5.0"}});
            if merges > 0 {
                config["ignition"]["config"] = json!({"merge": (0..merges)
                    .map(|i| json!({"source": format!("https://example.com/{i}.ign")}))
                    .collect::<Vec<_>>()});
            }
            if timeouts {
                config["ignition"]["timeouts"] = json!({"httpTotal": 30});
            }
            let mut passwd = Map::new();
            if let Some((keys, hash)) = core {
                let mut user = json!({"name": "core"});
                let keys: Vec<String> = keys.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
                if !keys.is_empty() { user["sshAuthorizedKeys"] = json!(keys); }
                if let Some(h) = hash { user["passwordHash"] = json!(h); }
                passwd.insert("users".into(), json!([user]));
            }
            if !groups.is_empty() {
                passwd.insert(
                    "groups".into(),
                    groups
                        .iter()
                        .enumerate()
                        .map(|(i, (gid, system))| {
                            let mut g = json!({"name": format!("g{i}")});
                            if let Some(gid) = gid { g["gid"] = json!(gid); }
                            if *system { g["system"] = json!(true); }
                            g
                        })
                        .collect(),
                );
            }
            if !passwd.is_empty() {
                config["passwd"] = Value::Object(passwd);
            }
            let mut storage = Map::new();
            for (key, list) in [("files", files), ("directories", dirs), ("links", links)] {
                if !list.is_empty() { storage.insert(key.into(), Value::Array(list)); }
            }
            if disks > 0 {
                storage.insert("disks".into(), (0..disks).map(|i| json!({"device": format!("/dev/sd{}", ["b", "c", "d"][i]), "wipeTable": true})).collect());
                let mut raid = json!({"name": "md0", "level": "raid1", "devices": ["/dev/vda", "/dev/vdb"]});
                if let Some(s) = spares { raid["spares"] = json!(s); }
                storage.insert("raid".into(), json!([raid]));
            }
            if !storage.is_empty() {
                config["storage"] = Value::Object(storage);
            }
            if !units.is_empty() {
                config["systemd"] = json!({"units": units});
            }
            config
        })
}

/// Add features that exist from `level` on (for 3.x levels).
fn with_level_features(mut config: Value, level: SpecVersion, seed: u8) -> Value {
    let storage = config
        .as_object_mut()
        .map(|m| m.entry("storage").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    let Some(storage) = storage else {
        return config;
    };
    if level >= SpecVersion::V3_0 {
        storage.insert(
            "filesystems".into(),
            json!([{"device": "/dev/vdc", "format": "xfs", "path": "/var/data", "label": "data"}]),
        );
        storage.insert(
            "disks".into(),
            json!([{"device": "/dev/vdd", "partitions": [{"number": 1, "label": "p1", "sizeMiB": 512}]}]),
        );
    }
    if level >= SpecVersion::V3_2 {
        storage.insert(
            "luks".into(),
            json!([{"name": "crypt", "device": "/dev/vde", "clevis": {"tpm2": true}}]),
        );
    }
    if level >= SpecVersion::V3_4 && seed % 2 == 0 {
        if let Some(luks) = storage.get_mut("luks").and_then(|l| l.get_mut(0)) {
            luks["discard"] = json!(true);
            luks["openOptions"] = json!(["--allow-discards"]);
        }
    }
    if level >= SpecVersion::V3_1 {
        config["ignition"]["proxy"] =
            json!({"httpsProxy": "https://proxy:3128", "noProxy": ["example.com"]});
    }
    if level >= SpecVersion::V3_3 {
        config["kernelArguments"] = json!({"shouldExist": ["nosmt"]});
    }
    config
}

fn assert_round_trip(config_json: &Value, older: SpecVersion) -> Result<(), TestCaseError> {
    let config = parse_config(Some(config_json)).map_err(|e| {
        TestCaseError::fail(format!("generated config invalid: {e}\n{config_json}"))
    })?;
    let down = to_value_as(&config, older)
        .map_err(|e| TestCaseError::fail(format!("down to {older}: {e}\n{config_json}")))?;
    let back = parse_config(Some(&down))
        .map_err(|e| TestCaseError::fail(format!("parse {older} output: {e}\n{down}")))?;
    let original = to_value_as(&config, SpecVersion::V3_5).expect("3.5 output");
    let mut again = to_value_as(&back, SpecVersion::V3_5).expect("3.5 output again");
    if older == SpecVersion::V2_2 {
        // Read back as the original reads a spec-2 config: de-duplicated, files and units in
        // reverse (docs/ignition-translation.md §5.1).
        for list in ["/storage/files", "/systemd/units"] {
            if let Some(items) = again.pointer_mut(list).and_then(Value::as_array_mut) {
                items.reverse();
            }
        }
    }
    prop_assert_eq!(
        original,
        again,
        "round trip through {} changed the config",
        older
    );
    Ok(())
}

/// `config` without `append` entries (a file without contents takes its first append's as
/// contents): reading a 2.2 config back keeps one entry per path, as the original does, and
/// the MCO allows no appends.
fn without_appends(config: &Value) -> Value {
    let mut config = config.clone();
    if let Some(files) = config
        .pointer_mut("/storage/files")
        .and_then(Value::as_array_mut)
    {
        for file in files {
            let Some(Value::Array(appends)) = file.as_object_mut().and_then(|f| f.remove("append"))
            else {
                continue;
            };
            if file.get("contents").is_none() {
                if let Some(first) = appends.first() {
                    file["contents"] = first.clone();
                }
            }
        }
    }
    config
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn common_fields_survive_2_2(config in common_config()) {
        assert_round_trip(&without_appends(&config), SpecVersion::V2_2)?;
    }

    #[test]
    fn shared_fields_survive_every_3x_hop(config in common_config(), seed in any::<u8>()) {
        for older in [SpecVersion::V3_0, SpecVersion::V3_1, SpecVersion::V3_2, SpecVersion::V3_3, SpecVersion::V3_4] {
            let config = with_level_features(config.clone(), older, seed);
            assert_round_trip(&config, older)?;
        }
    }
}

/// `config` (written as 3.5) written as 3.6.
fn as_3_6(config: &Value) -> Value {
    let mut config = config.clone();
    config["ignition"]["version"] = json!("3.6.0");
    config
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_3_6_config_answers_every_older_spec_as_its_3_5_twin(config in common_config(), seed in any::<u8>()) {
        for older in [SpecVersion::V2_2, SpecVersion::V3_0, SpecVersion::V3_1, SpecVersion::V3_2, SpecVersion::V3_3, SpecVersion::V3_4, SpecVersion::V3_5] {
            let config = if older == SpecVersion::V2_2 {
                config.clone()
            } else {
                with_level_features(config.clone(), older, seed)
            };
            let written_3_5 = parse_config(Some(&config)).expect("generated 3.5 config");
            let written_3_6 = parse_config(Some(&as_3_6(&config))).expect("the same as 3.6");
            prop_assert_eq!(
                to_value_as(&written_3_6, older).map_err(|e| e.to_string()),
                to_value_as(&written_3_5, older).map_err(|e| e.to_string()),
                "served as {}", older
            );
        }
    }

    #[test]
    fn special_mode_bits_are_served_in_3_6_only(
        config in common_config(),
        bits in 1i64..8,
        permissions in 0i64..=0o777,
        directory in any::<bool>(),
    ) {
        let mode = bits << 9 | permissions;
        let mut config = as_3_6(&config);
        let kind = if directory { "directories" } else { "files" };
        let list = config["storage"][kind].as_array().map_or(0, Vec::len);
        let node = if directory {
            json!({"path": "/var/lib/special", "mode": mode})
        } else {
            json!({"path": "/usr/local/bin/special", "mode": mode, "contents": {"source": "data:,x"}})
        };
        match config["storage"][kind].as_array_mut() {
            Some(nodes) => nodes.push(node),
            None => config["storage"][kind] = json!([node]),
        }
        let parsed = parse_config(Some(&config)).expect("a 3.6 config with special bits");
        let served = to_value_as(&parsed, SpecVersion::V3_6).expect("served as 3.6");
        prop_assert_eq!(&served["storage"][kind][list]["mode"], &json!(mode));
        for older in SpecVersion::ALL.into_iter().filter(|v| *v < SpecVersion::V3_6) {
            let error = to_value_as(&parsed, older).expect_err("refused below 3.6");
            let field = error.field().to_string();
            prop_assert!(field.ends_with(".mode"), "{}: {}", older, error);
            prop_assert!(error.to_string().ends_with("special mode bits are not supported in spec v3.5"));
        }
    }
}

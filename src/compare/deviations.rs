//! The documented deviations from the original (docs/compatibility.md), each named, and how a
//! difference between an answer of the original and this server's is recognised as one. A
//! deviation explains a row only when it accounts for the whole difference: a status
//! difference it predicts from the config, or a body that equals the original's once the
//! deviation is undone. Pure.

use serde_json::Value;

use super::asks::Ask;
use super::local::Local;
use crate::api::MachineConfig;
use crate::ignition::{self, SpecVersion};
use crate::render::layered::DecisionReason;
use crate::render::{ENCAPSULATED_PATH, NODE_ANNOTATIONS_PATH};

/// One documented deviation: its name (as rows and docs/compatibility.md print it) and what it
/// is.
#[derive(Debug, PartialEq, Eq)]
pub struct Deviation {
    pub name: &'static str,
    pub description: &'static str,
}

/// An enabled LUKS `cex` below 3.5: 500 here, the original serves the volume without it.
pub const LUKS_CEX_BELOW_3_5: Deviation = Deviation {
    name: "luks-cex-below-3.5",
    description:
        "an enabled LUKS cex is refused (500) below spec 3.5; the original drops it silently",
};

/// A Tang `advertisement` kept between 3.4 and 3.5, refused below 3.4.
pub const TANG_ADVERTISEMENT: Deviation = Deviation {
    name: "tang-advertisement",
    description: "a Tang advertisement is kept between specs 3.4 and 3.5 and refused (500) below 3.4; the original drops it",
};

/// A file without contents served as an empty file in 2.2.
pub const SOURCELESS_FILES_2_2: Deviation = Deviation {
    name: "sourceless-files-2.2",
    description:
        "a file without contents is an empty file (data:,) in spec 2.2; the original drops it",
};

/// Partition deletion refused in 2.2.
pub const PARTITION_DELETION_2_2: Deviation = Deviation {
    name: "partition-deletion-2.2",
    description: "a partition to delete is refused (500) in spec 2.2; the original serves it as one that exists",
};

/// 2.2 filesystems own whole path components.
pub const FILESYSTEM_PATHS_2_2: Deviation = Deviation {
    name: "filesystem-paths-2.2",
    description: "in spec 2.2 a filesystem owns whole path components (/ is root); the original matches string prefixes and answers 500",
};

/// A rendered config of spec 3.6, which the original at 7ff337a4f cannot read.
pub const SPEC_3_6_CONFIG: Deviation = Deviation {
    name: "spec-3.6-config",
    description:
        "a rendered config of spec 3.6 is served; the original at 7ff337a4f cannot parse it (500)",
};

/// A MachineConfig without an Ignition config.
pub const NO_IGNITION_CONFIG: Deviation = Deviation {
    name: "no-ignition-config",
    description:
        "a MachineConfig without spec.config is served as an empty config; the original answers 500",
};

/// The Node-validated gate of layered pools (cluster mode, with the extras' rights).
pub const LAYERED_NODE_GATE: Deviation = Deviation {
    name: "layered-node-gate",
    description: "a layered pool's image is served once a Node of the pool runs it; the original serves the MachineOSConfig's image once the pool's updatedMachineCount is above 0",
};

/// Every deviation `compare` recognises.
pub const ALL: [&Deviation; 8] = [
    &LUKS_CEX_BELOW_3_5,
    &TANG_ADVERTISEMENT,
    &SOURCELESS_FILES_2_2,
    &PARTITION_DELETION_2_2,
    &FILESYSTEM_PATHS_2_2,
    &SPEC_3_6_CONFIG,
    &NO_IGNITION_CONFIG,
    &LAYERED_NODE_GATE,
];

/// What recognising a deviation needs besides the two answers.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub asked: Ask,
    /// The pool's rendered MachineConfig, when there is one.
    pub machine_config: Option<&'a MachineConfig>,
}

impl<'a> Context<'a> {
    pub fn new(asked: Ask, machine_config: Option<&'a MachineConfig>) -> Self {
        Context {
            asked,
            machine_config,
        }
    }

    /// The rendered config's `spec.config`, inflated ([`crate::api::RawConfig`]); `None` when
    /// absent or `null`.
    fn config(&self) -> Option<Value> {
        self.machine_config
            .and_then(|mc| mc.spec.config.as_ref())
            .map(crate::api::RawConfig::value)
            .filter(|config| !config.is_null())
    }

    fn config_spec(&self) -> Option<SpecVersion> {
        self.config()
            .map(|config| ignition::rendered_spec(ignition::version_text(Some(&config))))
    }
}

/// The deviation that explains this server answering `local.status` where the original
/// answered `theirs`, if one does.
pub fn of_status(local: &Local, theirs: u16, context: &Context<'_>) -> Option<&'static Deviation> {
    let field = local
        .error
        .as_ref()
        .and_then(|e| e.field.as_deref())
        .unwrap_or_default();
    match (local.status, theirs) {
        (500, 200) if field.ends_with(".cex") || field.contains(".cex.") => {
            Some(&LUKS_CEX_BELOW_3_5)
        }
        (500, 200) if field.ends_with(".advertisement") => Some(&TANG_ADVERTISEMENT),
        (500, 200)
            if field.starts_with("storage.disks")
                && (field.ends_with("shouldExist") || field.ends_with("wipePartitionEntry")) =>
        {
            Some(&PARTITION_DELETION_2_2)
        }
        (200, 500) if context.machine_config.is_some() && context.config().is_none() => {
            Some(&NO_IGNITION_CONFIG)
        }
        (200, 500) if context.config_spec() == Some(SpecVersion::V3_6) => Some(&SPEC_3_6_CONFIG),
        (200, 500) if local.served == Some(SpecVersion::V2_2) && has_filesystem_paths(context) => {
            Some(&FILESYSTEM_PATHS_2_2)
        }
        _ => None,
    }
}

fn has_filesystem_paths(context: &Context<'_>) -> bool {
    let config = context.config();
    config
        .as_ref()
        .and_then(|config| config.pointer("/storage/filesystems"))
        .and_then(Value::as_array)
        .is_some_and(|filesystems| filesystems.iter().any(|fs| fs.get("path").is_some()))
}

/// The deviations that account for the whole difference between two 200 answers (`ours` and
/// `theirs`, equal in status): empty when none does.
pub fn of_body(
    ours: &Value,
    theirs: &Value,
    local: &Local,
    context: &Context<'_>,
) -> Vec<&'static Deviation> {
    let (mut ours, mut theirs) = (ours.clone(), theirs.clone());
    let mut undone = Vec::new();
    if undo_tang_advertisement(&mut ours) {
        undone.push(&TANG_ADVERTISEMENT);
    }
    if local.served == Some(SpecVersion::V2_2) && undo_sourceless_files(&mut ours, context) {
        undone.push(&SOURCELESS_FILES_2_2);
    }
    if matches!(
        local.layered,
        Some(DecisionReason::NotValidated | DecisionReason::Validated)
    ) {
        // The image decision shows in the node annotations and the encapsulated MachineConfig
        // only.
        let image_files = [NODE_ANNOTATIONS_PATH, ENCAPSULATED_PATH];
        if drop_files(&mut ours, &image_files) | drop_files(&mut theirs, &image_files) {
            undone.push(&LAYERED_NODE_GATE);
        }
    }
    if !undone.is_empty() && ours == theirs {
        undone
    } else {
        Vec::new()
    }
}

/// Removes every Tang `advertisement`; whether there was one.
fn undo_tang_advertisement(config: &mut Value) -> bool {
    let mut changed = false;
    let volumes = config
        .pointer_mut("/storage/luks")
        .and_then(Value::as_array_mut);
    for volume in volumes.into_iter().flatten() {
        let tangs = volume
            .pointer_mut("/clevis/tang")
            .and_then(Value::as_array_mut);
        for tang in tangs.into_iter().flatten() {
            if let Some(object) = tang.as_object_mut() {
                changed |= object.remove("advertisement").is_some();
            }
        }
    }
    changed
}

/// Removes the empty 2.2 files this server wrote for the rendered config's files without
/// contents; whether there were any.
fn undo_sourceless_files(config: &mut Value, context: &Context<'_>) -> bool {
    let Some(rendered) = context.config() else {
        return false;
    };
    let rendered = &rendered;
    let sourceless: Vec<&str> = rendered
        .pointer("/storage/files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|file| {
            file.pointer("/contents/source").is_none_or(Value::is_null)
                && file
                    .get("append")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty())
        })
        .filter_map(|file| file.get("path").and_then(Value::as_str))
        .collect();
    if sourceless.is_empty() {
        return false;
    }
    let Some(files) = config
        .pointer_mut("/storage/files")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = files.len();
    files.retain(|file| {
        let filesystem = file.get("filesystem").and_then(Value::as_str);
        let path = file.get("path").and_then(Value::as_str).unwrap_or_default();
        let full = match filesystem {
            Some("root") | None => path.to_string(),
            Some(mount) => format!("{mount}{path}"),
        };
        let empty = file.pointer("/contents/source").and_then(Value::as_str) == Some("data:,");
        !(empty && sourceless.contains(&full.as_str()))
    });
    files.len() != before
}

/// Removes the files at `paths`; whether there were any.
fn drop_files(config: &mut Value, paths: &[&str]) -> bool {
    let Some(files) = config
        .pointer_mut("/storage/files")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = files.len();
    files.retain(|file| {
        !file
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|path| paths.contains(&path))
    });
    files.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::local::LocalError;
    use bytes::Bytes;
    use serde_json::json;

    fn machine_config(config: Value) -> MachineConfig {
        serde_json::from_value(
            json!({"metadata": {"name": "rendered-x"}, "spec": {"config": config}}),
        )
        .expect("a MachineConfig")
    }

    fn ok(served: SpecVersion) -> Local {
        Local {
            status: 200,
            body: Bytes::new(),
            served: Some(served),
            error: None,
            layered: None,
        }
    }

    fn failed(field: &str) -> Local {
        Local {
            status: 500,
            body: Bytes::new(),
            served: None,
            error: Some(LocalError {
                kind: "translate",
                message: String::new(),
                field: Some(field.into()),
            }),
            layered: None,
        }
    }

    #[test]
    fn status_deviations_are_recognised_from_the_config_and_the_error() {
        let none = Context::new(Ask::Spec(SpecVersion::V3_4), None);
        assert_eq!(
            of_status(&failed("storage.luks[0].cex"), 200, &none),
            Some(&LUKS_CEX_BELOW_3_5)
        );
        assert_eq!(
            of_status(
                &failed("storage.disks[0].partitions[1].shouldExist"),
                200,
                &none
            ),
            Some(&PARTITION_DELETION_2_2)
        );
        // Another failure, or the original failing too, is no deviation.
        assert_eq!(
            of_status(&failed("storage.files[0].mode"), 200, &none),
            None
        );
        assert_eq!(of_status(&failed("storage.luks[0].cex"), 404, &none), None);

        let v36 = machine_config(json!({"ignition": {"version": "3.6.0"}}));
        let cx = Context::new(Ask::Spec(SpecVersion::V3_4), Some(&v36));
        assert_eq!(
            of_status(&ok(SpecVersion::V3_4), 500, &cx),
            Some(&SPEC_3_6_CONFIG)
        );
        let without = machine_config(Value::Null);
        let cx = Context::new(Ask::NoAccept, Some(&without));
        assert_eq!(
            of_status(&ok(SpecVersion::V2_2), 500, &cx),
            Some(&NO_IGNITION_CONFIG)
        );
        let filesystems = machine_config(json!({"ignition": {"version": "3.5.0"},
            "storage": {"filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/var"}]}}));
        let cx = Context::new(Ask::NoAccept, Some(&filesystems));
        assert_eq!(
            of_status(&ok(SpecVersion::V2_2), 500, &cx),
            Some(&FILESYSTEM_PATHS_2_2)
        );
        assert_eq!(of_status(&ok(SpecVersion::V3_4), 500, &cx), None);
        let plain = machine_config(json!({"ignition": {"version": "3.5.0"}}));
        let cx = Context::new(Ask::NoAccept, Some(&plain));
        assert_eq!(of_status(&ok(SpecVersion::V2_2), 500, &cx), None);
    }

    #[test]
    fn a_body_deviation_explains_a_row_only_when_it_accounts_for_all_of_it() {
        let rendered = machine_config(json!({"ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/etc/empty"}, {"path": "/etc/x", "contents": {"source": "data:,x"}}]}}));
        let cx = Context::new(Ask::NoAccept, Some(&rendered));
        let ours = json!({"storage": {"files": [
            {"filesystem": "root", "path": "/etc/empty", "contents": {"source": "data:,"}},
            {"filesystem": "root", "path": "/etc/x", "contents": {"source": "data:,x"}}]}});
        let theirs = json!({"storage": {"files": [
            {"filesystem": "root", "path": "/etc/x", "contents": {"source": "data:,x"}}]}});
        let served = ok(SpecVersion::V2_2);
        assert_eq!(
            of_body(&ours, &theirs, &served, &cx),
            [&SOURCELESS_FILES_2_2]
        );
        // Something else differs too: not explained.
        let mut other = theirs.clone();
        other["storage"]["files"][0]["mode"] = json!(420);
        assert!(of_body(&ours, &other, &served, &cx).is_empty());
        // Not at 3.x.
        assert!(of_body(&ours, &theirs, &ok(SpecVersion::V3_4), &cx).is_empty());

        let luks =
            |tang: Value| json!({"storage": {"luks": [{"name": "v", "clevis": {"tang": [tang]}}]}});
        let ours = luks(json!({"url": "http://t", "thumbprint": "t", "advertisement": "{}"}));
        let theirs = luks(json!({"url": "http://t", "thumbprint": "t"}));
        assert_eq!(
            of_body(&ours, &theirs, &ok(SpecVersion::V3_4), &cx),
            [&TANG_ADVERTISEMENT]
        );

        let annotations = |image: &str| {
            json!({"storage": {"files": [
            {"path": NODE_ANNOTATIONS_PATH, "contents": {"source": image}},
            {"path": "/etc/x"}]}})
        };
        let mut gated = ok(SpecVersion::V3_5);
        gated.layered = Some(DecisionReason::NotValidated);
        assert_eq!(
            of_body(&annotations("a"), &annotations("b"), &gated, &cx),
            [&LAYERED_NODE_GATE]
        );
        assert!(of_body(
            &annotations("a"),
            &annotations("b"),
            &ok(SpecVersion::V3_5),
            &cx
        )
        .is_empty());
    }

    #[test]
    fn every_deviation_is_documented_by_name() {
        let doc = include_str!("../../docs/compatibility.md");
        for deviation in ALL {
            assert!(
                doc.contains(&format!("`{}`", deviation.name)),
                "docs/compatibility.md names {}",
                deviation.name
            );
        }
    }
}

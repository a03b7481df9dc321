//! Decoding of cluster objects the way the server reads them: a watch event's object through
//! `source::cluster::lenient::Lenient` (cluster mode), and a file of the base directory through
//! `serde_yaml` (bootstrap mode, `source::bootstrap`). Shared by the per-kind targets.
//!
//! Properties: decoding never panics; the lenient decode agrees with a plain typed decode (the
//! same object, or both failing), keeps the object's name and drops `managedFields` (but a MachineConfig's); a decoded
//! object re-serializes (JSON and YAML) and re-decodes to the same value.

use std::fmt::Debug;

use kube::Resource;
use machine_config_server::source::cluster::lenient::Lenient;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Every way the server decodes `data` as a `K`: the objects that decoded.
pub fn decode_all<K>(data: &[u8]) -> Vec<K>
where
    K: DeserializeOwned + Serialize + Debug + Clone + Resource,
    K::DynamicType: Default,
    Lenient<K>: DeserializeOwned,
{
    let mut decoded = Vec::new();
    if let Some(object) = decode_json::<K>(data) {
        decoded.push(object);
    }
    if let Ok(object) = serde_yaml::from_slice::<K>(data) {
        assert_round_trips(&object);
        decoded.push(object);
    }
    decoded
}

/// The cluster (watch) decode: `Lenient<K>` against a typed decode of the same JSON.
pub fn decode_json<K>(data: &[u8]) -> Option<K>
where
    K: DeserializeOwned + Serialize + Debug + Clone + Resource,
    K::DynamicType: Default,
    Lenient<K>: DeserializeOwned,
{
    let lenient = serde_json::from_slice::<Lenient<K>>(data);
    let mut value: serde_json::Value = serde_json::from_slice(data).ok()?;
    let Ok(lenient) = lenient else {
        // Only an input that is not an object, or whose metadata is broken, fails as a whole.
        let metadata_ok = value.as_object().is_some_and(|object| {
            object.get("metadata").is_none_or(|m| {
                serde_json::from_value::<
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                >(m.clone())
                .is_ok()
            })
        });
        assert!(
            !metadata_ok,
            "a decodable object with valid metadata failed the lenient decode"
        );
        return None;
    };
    // A MachineConfig keeps its managedFields (the original serves them in the MachineConfig
    // files it appends); every other kind drops them.
    let keeps_managed_fields = K::kind(&Default::default()) == "MachineConfig";
    if let Some(meta) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
        .filter(|_| !keeps_managed_fields)
    {
        meta.remove("managedFields");
    }
    let typed = serde_json::from_value::<K>(value);
    match (lenient.object(), typed) {
        (Ok(object), Ok(typed)) => {
            assert_eq!(
                as_value(&**object),
                as_value(&typed),
                "the lenient decode is the typed decode"
            );
            assert_eq!(
                lenient.name(),
                object.meta().name.as_deref().unwrap_or_default()
            );
            assert!(
                keeps_managed_fields || object.meta().managed_fields.is_none(),
                "managedFields are dropped"
            );
            assert_round_trips(&typed);
            Some(typed)
        }
        (Err(_), Err(_)) => None,
        (Ok(_), Err(e)) => panic!("only the lenient decode succeeded; typed: {e}"),
        (Err(e), Ok(_)) => panic!("only the typed decode succeeded; lenient: {e}"),
    }
}

/// `object` serialized to a JSON value: how objects are compared (the generated resource
/// types have no `PartialEq`).
pub fn as_value<K: Serialize>(object: &K) -> serde_json::Value {
    serde_json::to_value(object).expect("a decoded object serializes")
}

/// Serialized as JSON and as YAML, `object` decodes to itself.
pub fn assert_round_trips<K>(object: &K)
where
    K: DeserializeOwned + Serialize + Debug,
{
    let json = serde_json::to_vec(object).expect("a decoded object serializes to JSON");
    let again: K = serde_json::from_slice(&json).unwrap_or_else(|e| {
        panic!(
            "re-decoding the JSON failed: {e}\n{}",
            String::from_utf8_lossy(&json)
        )
    });
    assert_eq!(as_value(&again), as_value(object), "JSON round trip");
    let yaml = serde_yaml::to_string(object).expect("a decoded object serializes to YAML");
    let again: K = serde_yaml::from_str(&yaml)
        .unwrap_or_else(|e| panic!("re-decoding the YAML failed: {e}\n{yaml}"));
    assert_eq!(as_value(&again), as_value(object), "YAML round trip");
}

//! A MachineConfig's `spec.config` as the server keeps it: the JSON text, deflated.
//!
//! Why: the watch caches keep every MachineConfig for as long as it exists, and the Ignition
//! config in it is nearly all of a MachineConfig's size (a realistic rendered config is 160 KB
//! of it; the benchmark's large pools 2 MB each). Kept as a `serde_json::Value` it was the
//! largest input the server held (17 MB for 60 rendered MachineConfigs, 42 MB for 20 pools of
//! 2 MB, benches/README.md), while it is read only when a payload is rendered: once per pool,
//! spec version and change, never per request. Deflated (level 3: configs are text, certificates
//! and base64, which compress 2.5 to 4 times) it costs a tenth to a third of that, and a render
//! pays a few milliseconds to inflate it. The original keeps the raw bytes
//! (`runtime.RawExtension`); so does this type, compressed.
//!
//! The text is the value as it was decoded, compact, with its keys in the order they came
//! (`serde_json`'s `preserve_order`), so [`RawConfig::value`] gives back the same value and
//! [`crate::api::go_marshal`] writes the same bytes as from the value itself. The one field
//! every render reads before anything else, `ignition.version`, is kept beside it.
//!
//! Owns the representation only: what a config means is [`crate::ignition`]'s.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The deflate level, measured on the realistic fixture's rendered configs (150 KB) and the
/// benchmark's 2 MB pools (benches/README.md, "Eighth pass"): level 3 keeps 16 to 24% fewer
/// bytes than level 1 (the fastest) for 2 to 3.5 times its time (about 15 ms a MB, once per
/// MachineConfig decoded), and inflates faster (fewer bytes to read); levels above it gain
/// 1 to 4% more at 2.5 to 3.5 times the time again.
const LEVEL: u8 = 3;

/// `spec.config`, deflated (see the module docs). Cheap to clone (shared bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct RawConfig {
    /// The compact JSON text, deflated. Equal texts give equal bytes (the compressor is
    /// deterministic), so comparing these compares the texts.
    deflated: Arc<[u8]>,
    /// The text's length: what inflating it gives, and the most it may give.
    len: usize,
    /// `ignition.version` when it is a string, else empty.
    version: Box<str>,
}

impl RawConfig {
    /// Keeps `value` (its text, deflated).
    pub fn new(value: &Value) -> Self {
        // Writing a `Value` cannot fail (its keys are strings).
        let text = serde_json::to_vec(value).unwrap_or_default();
        RawConfig {
            deflated: Arc::from(miniz_oxide::deflate::compress_to_vec(&text, LEVEL)),
            len: text.len(),
            version: crate::ignition::version_text(Some(value)).into(),
        }
    }

    /// The value back, as it was kept.
    pub fn value(&self) -> Value {
        // What `new` deflated inflates to JSON `Value` wrote: neither step can fail on it.
        miniz_oxide::inflate::decompress_to_vec_with_limit(&self.deflated, self.len)
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok())
            .unwrap_or(Value::Null)
    }

    /// `ignition.version`, empty when it is absent or not a string.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The length of the JSON text.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty text (never: the shortest JSON value has one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Changes the value (inflated, changed, deflated again): for tests and tools, never the
    /// request path.
    pub fn modify(&mut self, change: impl FnOnce(&mut Value)) {
        let mut value = self.value();
        change(&mut value);
        *self = RawConfig::new(&value);
    }
}

impl From<Value> for RawConfig {
    fn from(value: Value) -> Self {
        RawConfig::new(&value)
    }
}

impl fmt::Debug for RawConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawConfig")
            .field("version", &self.version)
            .field("len", &self.len)
            .field("deflated", &self.deflated.len())
            .finish()
    }
}

impl Serialize for RawConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| RawConfig::new(&value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_value_comes_back_as_it_was_kept() {
        let value = json!({
            "storage": {"files": [{"path": "/etc/b", "contents": {"source": "data:,b%0A"}}]},
            "ignition": {"version": "3.4.0"},
            "kernelArguments": {"shouldExist": ["nosmt"]}
        });
        let raw = RawConfig::new(&value);
        assert_eq!(raw.value(), value);
        assert_eq!(raw.version(), "3.4.0");
        assert_eq!(raw.len(), serde_json::to_vec(&value).unwrap().len());
        // Keys stay in the order they came (the served MachineConfig content writes them so).
        let keys: Vec<String> = raw.value().as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["storage", "ignition", "kernelArguments"]);
    }

    #[test]
    fn it_reads_and_writes_as_the_json_value() {
        let text = r#"{"ignition":{"version":"2.2.0"},"passwd":{}}"#;
        let raw: RawConfig = serde_json::from_str(text).unwrap();
        assert_eq!(raw.version(), "2.2.0");
        assert_eq!(serde_json::to_string(&raw).unwrap(), text);
        let no_version: RawConfig = serde_json::from_str(r#"{"ignition":{"version":3}}"#).unwrap();
        assert_eq!(no_version.version(), "");
    }

    #[test]
    fn equal_values_are_equal_and_a_change_is_seen() {
        let value = json!({"ignition": {"version": "3.4.0"}});
        let mut raw = RawConfig::new(&value);
        assert_eq!(raw, RawConfig::new(&value));
        raw.modify(|config| config["ignition"]["version"] = json!("3.5.0"));
        assert_eq!(raw.version(), "3.5.0");
        assert_ne!(raw, RawConfig::new(&value));
    }
}

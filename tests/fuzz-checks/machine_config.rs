//! MachineConfig decoding and serving: the input is a MachineConfig as a watch event (JSON) or a
//! bootstrap file (YAML). Every decoded object is checked by [`super::cluster_objects`] and
//! rendered for a bootstrap pool at every spec version by
//! [`super::render_support::check_renders`] (the Ignition engine's own properties are the
//! `ignition` target's). A JSON input is also YAML: when both decodes give the same object it is
//! rendered once.

use machine_config_server::api::MachineConfig;

use super::cluster_objects::{self, as_value};
use super::render_support;

pub fn check(data: &[u8]) {
    let mut decoded = cluster_objects::decode_all::<MachineConfig>(data);
    if let [json, yaml] = &decoded[..] {
        if as_value(json) == as_value(yaml) {
            decoded.pop();
        }
    }
    for machine_config in decoded {
        let snapshot =
            render_support::snapshot(machine_config, render_support::controller_config());
        render_support::check_renders(&snapshot);
    }
}

//! ControllerConfig decoding and its CA bundles: the input is a ControllerConfig as a watch event
//! (JSON) or the bootstrap file (YAML). Every decoded object is checked by
//! [`super::cluster_objects`]; its CA accessors must not panic, and a small MachineConfig is
//! rendered with it at every spec version ([`super::render_support::check_renders`] checks
//! that each decodable CA bundle is served byte for byte). A bundle that is not base64 must fail
//! the render as `invalid_input` (500), never be served.

use machine_config_server::api::ControllerConfig;
use machine_config_server::ignition::SpecVersion;
use machine_config_server::render;

use super::{cluster_objects, render_support};

pub fn check(data: &[u8]) {
    for controller_config in cluster_objects::decode_all::<ControllerConfig>(data) {
        let broken = controller_config.spec.kube_api_server_serving_ca().is_err()
            || controller_config.spec.cloud_provider_ca().is_err();
        let snapshot =
            render_support::snapshot(render_support::machine_config(), controller_config);
        if broken {
            for version in SpecVersion::ALL {
                match render::render(&snapshot, "master", version) {
                    Err(e) => assert_eq!(e.kind(), "invalid_input", "{e}"),
                    Ok(_) => panic!("a CA bundle that is not base64 was served"),
                }
            }
        } else {
            render_support::check_renders(&snapshot);
        }
    }
}

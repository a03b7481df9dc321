//! MachineConfigNode decoding and what the MCN cache keeps of it: the input is an MCN as a
//! watch event (JSON) or YAML. Every decoded object is checked by [`super::cluster_objects`];
//! then `source::cluster::slim_mcn::keep_what_is_read` must be idempotent, keep what a render
//! reads (the render digest is unchanged) and what the publisher reads (spec, metadata,
//! `configVersion`, `configImage`, whether a status was reported), and the slimmed object must
//! round-trip too.
//!
//! The digest property holds for MCNs whose conditions have unique types: the CRD declares
//! `status.conditions` a list-map keyed by `type`, so the API server never serves two conditions
//! of one type.

use std::collections::BTreeSet;

use machine_config_server::api::machineconfignode::MachineConfigNode;
use machine_config_server::render::layered::machine_config_node_render_digest;
use machine_config_server::source::cluster::slim_mcn::keep_what_is_read;

use super::cluster_objects::{self, as_value};

pub fn check(data: &[u8]) {
    for mcn in cluster_objects::decode_all::<MachineConfigNode>(data) {
        let mut slim = mcn.clone();
        keep_what_is_read(&mut slim);
        let mut twice = slim.clone();
        keep_what_is_read(&mut twice);
        assert_eq!(
            as_value(&twice),
            as_value(&slim),
            "keep_what_is_read is idempotent"
        );
        assert_eq!(slim.metadata, mcn.metadata, "metadata is kept");
        assert_eq!(slim.spec, mcn.spec, "spec is kept");
        let reported = |m: &MachineConfigNode| {
            m.status.as_ref().map(|s| {
                (
                    !s.conditions.is_empty(),
                    s.config_version.clone(),
                    s.config_image.clone(),
                )
            })
        };
        assert_eq!(
            reported(&slim),
            reported(&mcn),
            "what the publisher reads is kept"
        );
        let unique_types = mcn.status.as_ref().is_none_or(|s| {
            let types: BTreeSet<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
            types.len() == s.conditions.len()
        });
        if unique_types {
            assert_eq!(
                machine_config_node_render_digest(&slim),
                machine_config_node_render_digest(&mcn),
                "what a render reads is kept"
            );
        }
        cluster_objects::assert_round_trips(&slim);
    }
}

//! MachineConfigNode: per-node update state, written by the MCN publisher.
//!
//! Placeholder: the MCN publisher work (issue 6) defines this type from `shared/crds/`.

//! Sources own all I/O that produces state and publish immutable [`crate::snapshot::Snapshot`]s.

pub mod bootstrap;
pub mod cluster;

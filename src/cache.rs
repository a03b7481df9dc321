//! Payload cache: serialized bodies per (pool, spec version, snapshot generation).
//!
//! Placeholder: the performance work (issue 8) implements it.

//! MachineConfigNode publisher (cluster mode).
//!
//! Placeholder: the MCN work (issue 6) implements it.

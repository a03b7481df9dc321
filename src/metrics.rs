//! Prometheus metrics registry owned by the application state.
//!
//! Placeholder: the operations work (issue 7) implements it.

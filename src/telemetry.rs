//! Tracing subscriber set-up: human or JSON logs, verbosity mapping.
//!
//! Placeholder: the operations work (issue 7) implements it.

//! HTTP surface: routing, status mapping, TLS and listeners.

pub mod tls;

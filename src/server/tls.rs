//! TLS: profiles, rustls server configs from PEM files, certificate reload.
//!
//! Placeholder: the hardening work (issue 9) implements it.

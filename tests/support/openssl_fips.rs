//! The FIPS end-to-end tier: tests that run the server in FIPS mode need OpenSSL's FIPS provider,
//! which Debian does not ship. `.ci/openssl-fips-provider` builds it from the sources of the
//! `openssl-src` crate (OpenSSL 3.0.8) and `.ci/run` passes its directory as [`VAR`].
//!
//! Without it a test of the tier returns early and records itself under
//! `target/tmp/fips-not-run/`, so that `.ci/run` ends with a `not run: FIPS end-to-end tier` line
//! naming it; with `CI=true` the missing provider fails the test instead. The tier exists only in
//! the OpenSSL build (the ring build refuses FIPS mode, which `tests/fips.rs` checks).
//!
//! Include it with `#[path = "support/openssl_fips.rs"] mod openssl_fips;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The variable naming the directory `.ci/openssl-fips-provider` wrote.
pub const VAR: &str = "MCS_OPENSSL_FIPS_DIR";

/// OpenSSL's variables for a server process that can load the FIPS provider of
/// [`VAR`]'s directory, or `None` (test recorded as not run) when there is none.
pub fn server_env(test: &str) -> Option<Vec<(&'static str, String)>> {
    let Some(dir) = std::env::var_os(VAR).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {VAR} is unset: the FIPS end-to-end tier needs OpenSSL's FIPS provider \
             (.ci/run builds it with .ci/openssl-fips-provider)"
        );
        record_not_run(test);
        return None;
    };
    let dir = PathBuf::from(dir);
    for file in ["fips.so", "openssl.cnf", "fipsmodule.cnf"] {
        assert!(
            dir.join(file).is_file(),
            "{VAR}={}: no {file} (made by .ci/openssl-fips-provider)",
            dir.display()
        );
    }
    Some(vec![
        ("OPENSSL_MODULES", dir.display().to_string()),
        (
            "OPENSSL_CONF",
            dir.join("openssl.cnf").display().to_string(),
        ),
    ])
}

/// Directory where tests that did not run are recorded (one file per test).
pub fn not_run_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("fips-not-run")
}

fn record_not_run(test: &str) {
    let dir = not_run_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(test), format!("{test}\n"));
    }
}

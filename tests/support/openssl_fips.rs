//! OpenSSL's FIPS provider for the FIPS end-to-end tier (`#[tier(openssl_fips)]`): the
//! environment that lets a server process load the provider `.ci/openssl-fips-provider` built
//! (Debian ships none). The tier runs only when `MCS_OPENSSL_FIPS_DIR` names such a directory.

/// The variable naming the directory `.ci/openssl-fips-provider` wrote.
pub const VAR: &str = "MCS_OPENSSL_FIPS_DIR";

/// `OPENSSL_MODULES` and `OPENSSL_CONF` for a server process that can load the FIPS provider.
/// Panics (naming the variable) when it is unset: call it from tests of the tier only.
pub fn server_env() -> Vec<(&'static str, String)> {
    let dir = std::env::var_os(VAR)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("{VAR} is unset: the openssl_fips tier needs it"));
    vec![
        ("OPENSSL_MODULES", dir.display().to_string()),
        (
            "OPENSSL_CONF",
            dir.join("openssl.cnf").display().to_string(),
        ),
    ]
}

//! Probes which test tiers this machine can run, once per build of the `#[tier]` attribute, and
//! bakes the answers into it (`MCS_TIER_<NAME>` = `1` or the reason it cannot run).
//!
//! Cargo builds this again (and so recompiles the tests) when a variable that names an input
//! changes, when a probed tool file appears or goes, or when Debian's package database changes
//! (a tool installed or removed with apt). The probes are the only place that decides a tier.

use std::path::{Path, PathBuf};

/// The upstream assets' parts every test of the tier may use.
const UPSTREAM_PARTS: [&str; 4] = [
    "crds",
    "fixtures/bootstrap-realistic",
    "schemas/ignition",
    "api-corpus",
];
/// Debian's `ignition` package: the client in the initramfs module and the validator.
const IGNITION_FILES: [&str; 2] = [
    "/usr/lib/dracut/modules.d/30ignition/ignition",
    "/usr/bin/ignition-validate",
];
const DPKG_STATUS: &str = "/var/lib/dpkg/status";
/// Debian's `haproxy`: a real load balancer sending the PROXY protocol.
const HAPROXY: &str = "/usr/sbin/haproxy";
/// Debian's `libfaketime` preload library, per architecture (the same list as
/// `support::LIBFAKETIME_PATHS`, which the tests load it from).
const LIBFAKETIME_PATHS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "MCS_IGNITION_VALIDATE",
        "MCS_UPSTREAM_ASSETS",
        "KUBEBUILDER_ASSETS",
        "MCS_OPENSSL_FIPS_DIR",
        "PATH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if Path::new(DPKG_STATUS).exists() {
        println!("cargo:rerun-if-changed={DPKG_STATUS}");
    }
    let upstream = env_dir("MCS_UPSTREAM_ASSETS").map_or_else(
        || Err("set MCS_UPSTREAM_ASSETS to the upstream assets (crds/, fixtures/, schemas/, api-corpus/); .ci/run uses ../shared".to_string()),
        |dir| {
            let missing: Vec<&str> = UPSTREAM_PARTS
                .into_iter()
                .filter(|part| !dir.join(part).exists())
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "MCS_UPSTREAM_ASSETS={} lacks {}",
                    dir.display(),
                    missing.join(", ")
                ))
            }
        },
    );
    let promtool = on_path("promtool")
        .map(|path| watch(&path))
        .ok_or_else(|| "needs promtool: apt-get install prometheus".to_string());
    let ignition = IGNITION_FILES
        .iter()
        .map(|file| {
            let path = Path::new(file);
            if path.is_file() {
                watch(path);
                Ok(())
            } else {
                Err(format!("needs {file}: apt-get install ignition"))
            }
        })
        .collect::<Result<Vec<()>, String>>()
        .map(|_| ());
    let haproxy = if Path::new(HAPROXY).is_file() {
        watch(Path::new(HAPROXY));
        Ok(())
    } else {
        Err(format!("needs {HAPROXY}: apt-get install haproxy"))
    };
    let libfaketime = LIBFAKETIME_PATHS
        .iter()
        .map(Path::new)
        .find(|path| path.is_file())
        .map(watch)
        .ok_or_else(|| "needs libfaketime: apt-get install libfaketime".to_string());
    let ignition_current = ignition_current();
    let real = env_dir("KUBEBUILDER_ASSETS")
        .filter(|dir| dir.join("kube-apiserver").is_file())
        .map(|dir| watch(&dir.join("kube-apiserver")))
        .ok_or_else(|| {
            "needs a real kube-apiserver: set KUBEBUILDER_ASSETS to a directory with kube-apiserver"
                .to_string()
        });
    let in_test = match &real {
        Ok(()) => Err("needs the in-test API server (it changes the cluster while the code under test sees an outage); KUBEBUILDER_ASSETS is set".to_string()),
        Err(_) => Ok(()),
    };
    // OpenSSL's FIPS provider, made loadable by .ci/openssl-fips-provider (Debian ships none).
    let openssl_fips = env_dir("MCS_OPENSSL_FIPS_DIR")
        .ok_or_else(|| {
            "needs OpenSSL's FIPS provider: set MCS_OPENSSL_FIPS_DIR to a directory made by \
             .ci/openssl-fips-provider"
                .to_string()
        })
        .and_then(|dir| {
            for file in ["fips.so", "fipsmodule.cnf", "openssl.cnf"] {
                let path = dir.join(file);
                if !path.is_file() {
                    return Err(format!(
                        "MCS_OPENSSL_FIPS_DIR={} lacks {file}",
                        dir.display()
                    ));
                }
                watch(&path);
            }
            Ok(())
        });
    let netns = netns();
    for (tier, decision) in [
        ("UPSTREAM", upstream),
        ("PROMTOOL", promtool),
        ("IGNITION", ignition),
        ("LIBFAKETIME", libfaketime),
        ("IGNITION_CURRENT", ignition_current),
        ("REAL_APISERVER", real),
        ("IN_TEST_APISERVER", in_test),
        ("OPENSSL_FIPS", openssl_fips),
        ("HAPROXY", haproxy),
        ("NETNS", netns),
    ] {
        let value = match decision {
            Ok(()) => "1".to_string(),
            Err(reason) => reason,
        };
        println!("cargo:rustc-env=MCS_TIER_{tier}={value}");
    }
}

/// A network namespace of its own with its loopback up, as the tests make one for a caller
/// on fixed ports (HyperShift's 22625 and 22626): `unshare --net` needs CAP_SYS_ADMIN (root),
/// `ip` is iproute2's.
fn netns() -> Result<(), String> {
    let probe = std::process::Command::new("unshare")
        .args(["--net", "ip", "link", "set", "lo", "up"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match probe {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "needs a network namespace of its own: `unshare --net ip link set lo up` failed ({status}); run as root (CAP_SYS_ADMIN)"
        )),
        Err(e) => Err(format!(
            "needs a network namespace of its own: unshare or ip cannot run ({e}): apt-get install util-linux iproute2"
        )),
    }
}

/// The oldest Ignition whose validator knows spec 3.6.0 (stable since Ignition 2.26.0).
const IGNITION_CURRENT_MIN: (u64, u64) = (2, 26);

/// `ignition-validate` of a current Ignition (2.26 or newer, which knows spec 3.6), named by
/// `MCS_IGNITION_VALIDATE`: no distribution this project installs from ships one (Debian has
/// 2.14), so it is a binary built where the tests run. It must say its version.
fn ignition_current() -> Result<(), String> {
    let Some(path) = std::env::var_os("MCS_IGNITION_VALIDATE").filter(|v| !v.is_empty()) else {
        return Err(format!(
            "needs ignition-validate of Ignition {}.{} or newer (spec 3.6): set MCS_IGNITION_VALIDATE to it (Debian's 2.14 stops at 3.3)",
            IGNITION_CURRENT_MIN.0, IGNITION_CURRENT_MIN.1
        ));
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!(
            "MCS_IGNITION_VALIDATE={} is not a file",
            path.display()
        ));
    }
    watch(&path);
    let output = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| format!("MCS_IGNITION_VALIDATE={}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let version = text
        .split(|c: char| c.is_whitespace() || c == 'v')
        .find_map(|word| {
            let mut parts = word.split('.').map(str::parse::<u64>);
            match (parts.next(), parts.next()) {
                (Some(Ok(major)), Some(Ok(minor))) => Some((major, minor)),
                _ => None,
            }
        });
    match version {
        Some(v) if v >= IGNITION_CURRENT_MIN => Ok(()),
        Some((major, minor)) => Err(format!(
            "MCS_IGNITION_VALIDATE={} is Ignition {major}.{minor}, older than {}.{}",
            path.display(),
            IGNITION_CURRENT_MIN.0,
            IGNITION_CURRENT_MIN.1
        )),
        None => Err(format!(
            "MCS_IGNITION_VALIDATE={}: --version says no version ({})",
            path.display(),
            text.trim()
        )),
    }
}

fn env_dir(var: &str) -> Option<PathBuf> {
    let value = std::env::var_os(var).filter(|v| !v.is_empty())?;
    Some(PathBuf::from(value)).filter(|dir| dir.is_dir())
}

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(tool))
        .find(|path| path.is_file())
}

/// Rebuild when `path` changes or goes away.
fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

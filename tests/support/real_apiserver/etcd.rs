//! etcd for the real-server tier, as envtest runs it: one member on free loopback ports, a
//! fresh data directory, `--unsafe-no-fsync` (test data need not survive a power cut). The
//! binary is `etcd` in `KUBEBUILDER_ASSETS` when there is one, else the one the
//! `etcd-bin-vendored` crate ships (a path into the crate's source, nothing is embedded in
//! the test binaries). Dropping the handle kills etcd and removes the data directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use super::process::{free_loopback_port, http, poll, Process};

/// How long etcd may take to answer `/health` (it starts in well under a second unloaded).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The `etcd` binary the `etcd-bin-vendored` crate ships for this platform.
pub fn vendored_binary() -> Result<PathBuf, String> {
    etcd_bin_vendored::etcd_bin_path()
        .map(Path::to_path_buf)
        .map_err(|e| e.to_string())
}

/// The flags of a single-member etcd serving clients on `client_port` (envtest's set, plus the
/// peer URLs spelled out so that nothing listens on or advertises the default port 2380).
pub fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
        "--name=default".to_string(),
        "--unsafe-no-fsync=true".to_string(),
        "--log-level=warn".to_string(),
    ]
}

/// A running etcd.
pub struct Etcd {
    // Declared before `dir`: the process is killed before its data directory is removed.
    process: Process,
    client_port: u16,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts `binary` and waits until `/health` answers healthy. A port taken between
    /// choosing and binding it makes etcd exit at once; then it is tried again on new ports.
    pub fn start(binary: &Path) -> Result<Etcd, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("mcs-etcd-")
                .tempdir()
                .map_err(|e| format!("etcd data dir: {e}"))?;
            let data = dir.path().join("data");
            let client_port = free_loopback_port()?;
            let peer_port = free_loopback_port()?;
            let args = etcd_args(&data, client_port, peer_port);
            let process = Process::spawn("etcd", binary, &args, &dir.path().join("etcd.log"))?;
            let mut etcd = Etcd {
                process,
                client_port,
                dir,
            };
            match etcd.wait_healthy() {
                Ok(()) => return Ok(etcd),
                Err(e) => last = format!("{e}\n{}", etcd.process.log_tail()),
            }
        }
        Err(format!("etcd did not start: {last}"))
    }

    fn wait_healthy(&mut self) -> Result<(), String> {
        poll("etcd /health", START_TIMEOUT, || {
            if let Some(status) = self.process.exited() {
                return Err(format!("fatal: etcd exited: {status}"));
            }
            self.healthy().map(|h| h.then_some(()))
        })
    }

    /// `http://127.0.0.1:<port>`, for `--etcd-servers`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The temporary directory holding the data directory and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether `/health` answers `{"health":"true"}`.
    pub fn healthy(&self) -> Result<bool, String> {
        let (code, body) = http(self.client_port, "GET", "/health", "")?;
        let health: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        Ok(code == 200 && health["health"] == "true")
    }

    /// A call of etcd's JSON gateway (`/v3/...`), the response as JSON.
    pub fn call(&self, path: &str, body: &Value) -> Result<Value, String> {
        let (code, text) = http(self.client_port, "POST", path, &body.to_string())?;
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if code == 200 {
            Ok(value)
        } else {
            Err(format!("{path}: {code} {value}"))
        }
    }

    /// The current revision of the key space.
    pub fn revision(&self) -> Result<u64, String> {
        let response = self.call("/v3/kv/range", &json!({ "key": b64("/") }))?;
        response["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| format!("no revision in {response}"))
    }

    /// Compacts the history up to the current revision: reads and watches from an older
    /// revision fail, and kube-apiserver answers 410 Expired for them once its watch cache no
    /// longer holds them (the real counterpart of the fake server's `compact`).
    pub fn compact(&self) -> Result<u64, String> {
        let revision = self.revision()?;
        self.call(
            "/v3/kv/compaction",
            &json!({ "revision": revision.to_string(), "physical": true }),
        )?;
        Ok(revision)
    }
}

/// Base64 of a key or value, as etcd's JSON gateway takes them.
pub fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

//! HyperShift's ignition server as a caller of the binary: how it makes a NodePool's payload
//! (`runMCSAndFetchPayload` in `ignition-server/controllers/local_ignitionprovider.go` of
//! openshift/hypershift, read for its behaviour): a work directory holding what the MCO's and
//! the controller's `bootstrap` rendered plus the bootstrap kubeconfig and a self-signed
//! certificate, the server run as `bootstrap` on ports 22625 and 22626, a Go `http.Client`
//! (5 s timeout) asking `http://localhost:22626/config/master` every second until a 200, then
//! the process killed (`exec.CommandContext`'s cancel: SIGKILL).
//!
//! Those ports are fixed, so every generation runs in a network namespace of its own
//! ([`in_network_namespace`]): nothing else on the machine holds them, and the tests of one
//! binary never meet on them.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The ports HyperShift gives the server (the MCO's own, 22623 and 22624, stay free for a
/// real server on the same host).
pub const SECURE_PORT: u16 = 22625;
pub const INSECURE_PORT: u16 = 22626;
/// The `Accept` header HyperShift's client sends: spec 3.2.0, anything else at low priority.
pub const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1";
/// HyperShift's poll interval and its client's timeout.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The request bytes Go's `http.Client` writes for HyperShift's `GET` (Host, then the
/// default User-Agent, the header the caller added, then the transport's own
/// `Accept-Encoding: gzip`; keep-alive, as Go's transport leaves it).
pub fn request_bytes() -> Vec<u8> {
    format!(
        "GET /config/master HTTP/1.1\r\nHost: localhost:{INSECURE_PORT}\r\nUser-Agent: Go-http-client/1.1\r\nAccept: {ACCEPT}\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    .into_bytes()
}

/// The `mcs` directory of a payload generation: the bootstrap directory's contents, the
/// bootstrap kubeconfig as `kubeconfig`, and `tls.crt`/`tls.key` as HyperShift makes them.
pub struct PayloadDir {
    work: tempfile::TempDir,
    mcs: PathBuf,
}

impl PayloadDir {
    /// `bootstrap` (a directory as the controller's `bootstrap --dest-dir` writes it, with a
    /// `kubeconfig` beside its subdirectories) copied into a fresh work directory.
    pub fn from_bootstrap_dir(bootstrap: &Path) -> PayloadDir {
        let work = tempfile::tempdir().expect("a work directory");
        let mcs = work.path().join("mcs");
        crate::mcs::copy_dir(bootstrap, &mcs);
        assert!(
            mcs.join("kubeconfig").is_file(),
            "{} has no kubeconfig",
            bootstrap.display()
        );
        self_signed_certificate(&mcs.join("tls.crt"), &mcs.join("tls.key"));
        PayloadDir { work, mcs }
    }

    /// `binary` copied alone into the work directory's `bin/`, as HyperShift extracts
    /// `usr/bin/machine-config-server` from the MCO image: nothing of the image or of this
    /// repository beside it.
    pub fn extract(&self, binary: &Path) -> PathBuf {
        let bin = self.work.path().join("bin");
        std::fs::create_dir_all(&bin).expect("the bin directory");
        let extracted = bin.join("machine-config-server");
        std::fs::copy(binary, &extracted).expect("the binary copied");
        extracted
    }

    /// The directory HyperShift passes as `--server-basedir`.
    pub fn path(&self) -> &Path {
        &self.mcs
    }

    /// HyperShift's arguments for this directory, `--payload-version` as a 4.14+ release
    /// gets it.
    pub fn arguments(&self, payload_version: &str) -> Vec<String> {
        let dir = self.mcs.display();
        vec![
            "bootstrap".into(),
            format!("--server-basedir={dir}"),
            format!("--bootstrap-kubeconfig={dir}/kubeconfig"),
            format!("--cert={dir}/tls.crt"),
            format!("--key={dir}/tls.key"),
            format!("--secure-port={SECURE_PORT}"),
            format!("--insecure-port={INSECURE_PORT}"),
            format!("--payload-version={payload_version}"),
        ]
    }
}

/// `<SHA-256 in hex> <length>` of `bytes`: how an answer of the original is recorded
/// (`tests/fixtures/hypershift/`).
pub fn digest(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex} {}", bytes.len())
}

/// A self-signed CA certificate as HyperShift's `getOrGenerateMCSTLSCert` makes it (RSA 2048,
/// `CN=machine-config-server, OU=openshift`, valid one day), made by `openssl`.
fn self_signed_certificate(cert: &Path, key: &Path) {
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/OU=openshift/CN=machine-config-server"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args([
            "-addext",
            "keyUsage=critical,keyEncipherment,digitalSignature,keyCertSign",
        ])
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl could not make the certificate");
}

/// One payload generation as HyperShift times it (`ign_server_payload_generation_seconds`
/// counts from before the exec).
#[derive(Debug)]
pub struct Generation {
    /// The body of the first 200.
    pub payload: Vec<u8>,
    /// `Content-Type` of that answer.
    pub content_type: Option<String>,
    /// From the exec to the first 200 read whole.
    pub elapsed: Duration,
    /// Requests made, the successful one included.
    pub attempts: u32,
    /// What the process printed before it was killed.
    pub output: String,
}

/// Runs `binary` with `arguments` and polls as HyperShift does (the first try at once, then
/// every `interval`; HyperShift's is [`POLL_INTERVAL`]) until a 200 or `deadline`, then
/// SIGKILLs the process and waits for it. `Err` with what the process printed when no 200
/// came in time.
pub fn generate(
    binary: &Path,
    arguments: &[String],
    interval: Duration,
    deadline: Duration,
) -> Result<Generation, String> {
    let start = Instant::now();
    // The environment is the ignition server's, not ours: nothing this repository sets.
    let mut child = Command::new(binary)
        .args(arguments)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let output = collect_output(&mut child);
    let mut attempts = 0;
    // Go's default transport keeps the connection idle in its pool after the answer: it is
    // still open when the process is killed, so the server's side closes first and its port
    // is left with a connection in TIME_WAIT, which the next generation's bind must not mind.
    let mut kept_alive = None;
    let outcome = loop {
        attempts += 1;
        let tried = Instant::now();
        if let Ok(Some((stream, (200, content_type, payload)))) = fetch_once() {
            kept_alive = Some(stream);
            break Ok((payload, content_type));
        }
        if start.elapsed() >= deadline {
            break Err(format!("no 200 within {deadline:?} ({attempts} requests)"));
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!("the server exited ({status}) before a 200"));
        }
        std::thread::sleep(interval.saturating_sub(tried.elapsed()));
    };
    let elapsed = start.elapsed();
    // exec.CommandContext's cancel: SIGKILL, then the process is reaped.
    let _ = child.kill();
    let _ = child.wait();
    drop(kept_alive);
    let output = output.join().unwrap_or_default();
    match outcome {
        Ok((payload, content_type)) => Ok(Generation {
            payload,
            content_type,
            elapsed,
            attempts,
            output,
        }),
        Err(why) => Err(format!("{why}; the server printed:\n{output}")),
    }
}

/// Everything the process prints, read until it exits.
fn collect_output(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text + &errors.join().unwrap_or_default()
    })
}

/// One request as HyperShift's client makes it: `localhost` resolved and each address tried in
/// turn (the server may listen on IPv4 only), the whole exchange within [`CLIENT_TIMEOUT`].
/// `Ok(None)` when nothing accepted the connection; else the connection, kept open, and the
/// status, `Content-Type` and body.
type Answer = (u16, Option<String>, Vec<u8>);
fn fetch_once() -> std::io::Result<Option<(TcpStream, Answer)>> {
    let started = Instant::now();
    let mut last = None;
    for address in ("localhost", INSECURE_PORT).to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, CLIENT_TIMEOUT) {
            Ok(mut stream) => {
                let answer = exchange(&mut stream, started)?;
                return Ok(Some((stream, answer)));
            }
            Err(error) => last = Some(error),
        }
    }
    match last {
        Some(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
        Some(error) => Err(error),
        None => Ok(None),
    }
}

/// Writes the request and reads one response (by `Content-Length`, or chunked), as a
/// keep-alive client does: without waiting for the server to close.
fn exchange(stream: &mut TcpStream, started: Instant) -> std::io::Result<Answer> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let remaining = || {
        CLIENT_TIMEOUT
            .checked_sub(started.elapsed())
            .filter(|left| !left.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
    };
    stream.set_write_timeout(Some(remaining()?))?;
    stream.write_all(&request_bytes())?;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        stream.set_read_timeout(Some(remaining()?))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(invalid("closed before the end of the headers"));
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = crate::mcs::parse_response(&raw[..head_end], true)?;
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let length = head
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok());
    let mut body = raw.split_off(head_end);
    let complete = |body: &[u8]| match (chunked, length) {
        (true, _) => dechunk(body).is_some(),
        (false, Some(length)) => body.len() >= length,
        (false, None) => false,
    };
    while !complete(&body) {
        stream.set_read_timeout(Some(remaining()?))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            if chunked || length.is_some() {
                return Err(invalid("closed before the end of the body"));
            }
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    let body = match (chunked, length) {
        (true, _) => dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?,
        (false, Some(length)) => body[..length].to_vec(),
        (false, None) => body,
    };
    let content_type = head.header("content-type").map(str::to_string);
    Ok((head.status, content_type, body))
}

/// A complete chunked body decoded, or `None` while it is incomplete.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return raw.windows(2).any(|w| w == b"\r\n").then_some(out);
        }
        if raw.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// Runs `work` on a thread of its own in a new network namespace with its loopback up: every
/// socket that thread makes, and every process it starts, sees only that namespace (namespaces
/// belong to threads, and children inherit their parent thread's). Needs CAP_SYS_ADMIN (the
/// `netns` tier).
pub fn in_network_namespace<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
        let up = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .map_err(|e| format!("ip link set lo up: {e}"))?;
        if !up.success() {
            return Err(format!("ip link set lo up: {up}"));
        }
        Ok(work())
    })
    .join()
    // A failed assertion inside is the test's failure, with its own message.
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_decoded_only_once_complete() {
        assert_eq!(dechunk(b"3\r\nabc\r\n0\r\n\r\n"), Some(b"abc".to_vec()));
        assert_eq!(dechunk(b"3\r\nabc\r\n"), None);
        assert_eq!(dechunk(b"3\r\nab"), None);
    }
}

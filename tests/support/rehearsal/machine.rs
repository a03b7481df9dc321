//! A booting machine as the server meets it: Ignition's config fetch (its headers, its
//! timeouts and its retry rule), the first-boot failure report of the machine-config daemon,
//! and Debian's real Ignition client behind a one-machine source NAT, each from the machine's
//! own loopback address.
//!
//! Ignition's rule (`internal/resource/http.go`): a fresh request per attempt; 10 s for the
//! response headers; every 5xx and every connection error or timeout retried, waiting 200 ms
//! doubling to 5 s between attempts; any status below 500 ends the fetch (a 4xx strands the
//! machine). Requests carry `User-Agent: Ignition/<release>`, the release's `Accept` and
//! `Accept-Encoding: identity`, in Go's header order.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::plan::{Client, Machine};

/// Ignition's wait for response headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Ignition's first wait between attempts is twice this; the wait doubles up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Go's dialer and TLS handshake timeouts in Ignition's client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The harness's own bound on reading a body once its headers came.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Debian's Ignition client (its dracut module's binary).
pub const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// Where machines connect: the balancer's two frontends.
#[derive(Clone)]
pub struct Balancer {
    pub tls: SocketAddr,
    pub plain: SocketAddr,
    pub client_config: Arc<rustls::ClientConfig>,
}

/// One attempt of a machine, times from the start of the storm.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub started: Duration,
    pub ended: Duration,
    /// The local address and port of its connection (what the balancer logged), once it was
    /// connected.
    pub local: Option<SocketAddr>,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Status(u16),
    /// A connection error, a reset or a timeout.
    Failed(String),
}

impl Attempt {
    pub fn status(&self) -> Option<u16> {
        match self.outcome {
            Outcome::Status(status) => Some(status),
            Outcome::Failed(_) => None,
        }
    }
}

/// Everything one fetch (or report) went through.
#[derive(Clone, Debug, Default)]
pub struct Exchange {
    pub attempts: Vec<Attempt>,
    /// The final answer's body (a status below 500).
    pub body: Option<Vec<u8>>,
}

impl Exchange {
    /// The final status, if the exchange ended with one below 500.
    pub fn final_status(&self) -> Option<u16> {
        self.attempts
            .last()
            .and_then(Attempt::status)
            .filter(|s| *s < 500)
    }
}

/// `GET /config/<pool>` as the machine's Ignition: attempts until a status below 500, or
/// until `give_up` (the harness's bound: Ignition itself never gives up).
pub async fn fetch_config(
    machine: &Machine,
    balancer: &Balancer,
    t0: Instant,
    give_up: Instant,
) -> Exchange {
    let path = format!("/config/{}", machine.pool.name());
    let request = |host: &SocketAddr| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Ignition/{}\r\nAccept: {}\r\nAccept-Encoding: identity\r\n\r\n",
            machine.release.version, machine.release.accept
        )
        .into_bytes()
    };
    with_retries(machine, balancer, t0, give_up, request).await
}

/// Where the machine-config daemon of a machine served `served` reports a first-boot
/// failure, as upstream PR #6124's daemon decides it: the `machineConfigServerURL` annotation
/// of its config, over TLS trusting only the CA bundle its config carried. The URL's host must
/// be the name the replicas' certificate carries; its port (22623, the balancer's) stands for
/// the balancer's TLS frontend here.
pub fn report_target(served: &super::Served, balancer: &Balancer) -> Result<Balancer, String> {
    use rustls::pki_types::pem::PemObject as _;
    let url = served
        .report_url
        .as_deref()
        .ok_or("its config has no machineConfigServerURL")?;
    let host = url
        .strip_prefix("https://")
        .and_then(|rest| rest.split(':').next())
        .ok_or(format!(
            "machineConfigServerURL {url:?} is not https://HOST:PORT"
        ))?;
    if host != super::cluster::REPORT_HOST {
        return Err(format!("machineConfigServerURL {url:?} names another host"));
    }
    let ca = served
        .report_ca
        .as_deref()
        .ok_or("its config has no mcs-ca-bundle.crt")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca) {
        let cert = cert.map_err(|e| format!("mcs-ca-bundle.crt: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("mcs-ca-bundle.crt: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Balancer {
        tls: balancer.tls,
        plain: balancer.tls,
        client_config: Arc::new(config),
    })
}

/// The machine-config daemon's first-boot failure report (`POST /v1/node-failure`, upstream
/// PR #6124) to `target` ([`report_target`]), over TLS, with the same retry rule.
pub async fn report_failure(
    machine: &Machine,
    target: &Balancer,
    t0: Instant,
    give_up: Instant,
    image: &str,
) -> Exchange {
    let body = serde_json::json!({
        "pool": machine.pool.name(),
        "nodeID": machine.name,
        "stage": "firstboot-update",
        "imageURL": image,
        "errorMessage": format!("rehearsal: {} could not pull its OS image (connection reset by peer)", machine.name),
    })
    .to_string();
    let request = |host: &SocketAddr| {
        format!(
            "POST /v1/node-failure HTTP/1.1\r\nHost: {host}\r\nUser-Agent: machine-config-daemon\r\nContent-Length: {}\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    // The daemon speaks TLS whatever port the machine's Ignition used.
    let daemon = Machine {
        client: Client::Tls,
        ..machine.clone()
    };
    with_retries(&daemon, target, t0, give_up, request).await
}

async fn with_retries(
    machine: &Machine,
    balancer: &Balancer,
    t0: Instant,
    give_up: Instant,
    request: impl Fn(&SocketAddr) -> Vec<u8>,
) -> Exchange {
    let (frontend, tls) = match machine.client {
        Client::Plain => (balancer.plain, None),
        Client::Tls | Client::RealIgnition => (balancer.tls, Some(balancer.client_config.clone())),
    };
    let bytes = request(&frontend);
    let mut exchange = Exchange::default();
    let mut backoff = INITIAL_BACKOFF;
    // Go's transport keeps a connection whose response was read to its end and reuses it for
    // the next attempt (behind a TCP balancer: the same replica), so an empty 5xx is retried
    // on the same connection, as Ignition's client does.
    let mut kept: Option<Kept> = None;
    loop {
        let started = t0.elapsed();
        let (local, result) = attempt(
            &mut kept,
            IpAddr::V4(machine.address),
            frontend,
            tls.clone(),
            &bytes,
        )
        .await;
        let outcome = match &result {
            Ok(response) => Outcome::Status(response.status),
            Err(e) => Outcome::Failed(e.to_string()),
        };
        exchange.attempts.push(Attempt {
            started,
            ended: t0.elapsed(),
            local,
            outcome,
        });
        if let Ok(response) = result {
            if response.status < 500 {
                exchange.body = Some(response.body);
                return exchange;
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
        if Instant::now() + backoff > give_up {
            return exchange;
        }
        tokio::time::sleep(backoff).await;
    }
}

/// A stream of either kind.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A kept-alive connection and its local address.
struct Kept {
    stream: Box<dyn Io>,
    local: SocketAddr,
}

/// One request: on the kept connection when there is one (and, as Go's transport does for a
/// `GET`, once more on a new connection when the kept one turns out closed before any byte
/// of an answer), else on a fresh connection from `source`. Returns the local address of the
/// connection that answered, and the response or why there is none.
async fn attempt(
    kept: &mut Option<Kept>,
    source: IpAddr,
    to: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    request: &[u8],
) -> (Option<SocketAddr>, std::io::Result<crate::mcs::Response>) {
    if let Some(mut old) = kept.take() {
        match exchange_on(&mut old.stream, request).await {
            Ok(response) => {
                let local = old.local;
                if keeps_alive(&response) {
                    *kept = Some(old);
                }
                return (Some(local), Ok(response));
            }
            Err(e) if e.kind() != std::io::ErrorKind::ConnectionAborted => {
                return (Some(old.local), Err(e));
            }
            Err(_) => {} // closed while idle: a new connection, within the same attempt
        }
    }
    let stream = match connect_from(source, to).await {
        Ok(stream) => stream,
        Err(e) => return (None, Err(e)),
    };
    let Ok(local) = stream.local_addr() else {
        return (None, Err(std::io::Error::other("no local address")));
    };
    let mut stream: Box<dyn Io> = match tls {
        None => Box::new(stream),
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
            match tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio_rustls::TlsConnector::from(config).connect(name, stream),
            )
            .await
            {
                Ok(Ok(stream)) => Box::new(stream),
                Ok(Err(e)) => return (Some(local), Err(e)),
                Err(_) => return (Some(local), Err(timed_out("TLS handshake"))),
            }
        }
    };
    let result = exchange_on(&mut stream, request).await;
    if let Ok(response) = &result {
        if keeps_alive(response) {
            *kept = Some(Kept { stream, local });
        }
    }
    (Some(local), result)
}

/// HTTP/1.1 keeps the connection unless the server said `Connection: close`.
fn keeps_alive(response: &crate::mcs::Response) -> bool {
    !response
        .header("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

async fn connect_from(source: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(to)).await {
        Ok(result) => result,
        Err(_) => Err(timed_out("connect")),
    }
}

fn timed_out(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{what} timed out"))
}

/// Writes the request, reads the head within [`HEADER_TIMEOUT`] and the body by its
/// `Content-Length`. A connection that fails before any byte of an answer is
/// `ConnectionAborted` (a kept connection the server had closed).
async fn exchange_on(
    stream: &mut Box<dyn Io>,
    request: &[u8],
) -> std::io::Result<crate::mcs::Response> {
    let aborted = |e: std::io::Error| std::io::Error::new(std::io::ErrorKind::ConnectionAborted, e);
    stream.write_all(request).await.map_err(aborted)?;
    stream.flush().await.map_err(aborted)?;
    let mut raw = Vec::with_capacity(64 * 1024);
    let head_end = tokio::time::timeout(HEADER_TIMEOUT, async {
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                return Ok(end + 4);
            }
            let n = match stream.read(&mut buf).await {
                Ok(n) => n,
                Err(e) if raw.is_empty() => return Err(aborted(e)),
                Err(e) => return Err(e),
            };
            if n == 0 {
                let e = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed before the response headers",
                );
                return Err(if raw.is_empty() { aborted(e) } else { e });
            }
            raw.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .map_err(|_| timed_out("response headers"))??;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    tokio::time::timeout(BODY_TIMEOUT, async {
        let mut buf = vec![0u8; 64 * 1024];
        while raw.len() < head_end + length {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed inside the body",
                ));
            }
            raw.extend_from_slice(&buf[..n]);
        }
        Ok(())
    })
    .await
    .map_err(|_| timed_out("response body"))??;
    crate::mcs::parse_response(&raw[..head_end + length], false)
}

/// A one-machine source NAT for Debian's Ignition client, which cannot choose its source
/// address: it connects to the relay on 127.0.0.1, and the relay connects on to the
/// balancer's TLS frontend from the machine's own address, recording each connection's local
/// address (what the balancer logs), so the server and the balancer see that machine.
pub struct Relay {
    pub address: SocketAddr,
    pub connections: Arc<Mutex<Vec<SocketAddr>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    pub async fn start(source: IpAddr, to: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let connections = Arc::new(Mutex::new(Vec::new()));
        let seen = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = connect_from(source, to).await else {
                        return;
                    };
                    if let Ok(local) = outbound.local_addr() {
                        seen.lock().unwrap().push(local);
                    }
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Ok(Relay {
            address,
            connections,
            task,
        })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The release of Debian's Ignition client (`ignition -version`: `Ignition Debian
/// 2.14.0+ds1-1+b6`), `None` when it does not say.
pub fn real_ignition_release() -> Option<String> {
    let output = std::process::Command::new(IGNITION)
        .arg("-version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    text.split_whitespace()
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

/// What Debian's Ignition fetched.
pub struct RealFetch {
    pub config: Result<serde_json::Value, String>,
    pub log: String,
}

/// Runs Ignition's fetch stage (platform `file`) with a pointer config whose merge source is
/// `url`, trusting `ca_pem`, in `work`.
pub fn run_real_ignition(work: &Path, url: &str, ca_pem: &[u8], timeout: Duration) -> RealFetch {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let pointer = serde_json::json!({
        "ignition": {
            "version": "3.2.0",
            "config": {"merge": [{"source": url}]},
            "security": {"tls": {"certificateAuthorities": [
                {"source": format!("data:text/plain;charset=utf-8;base64,{ca}")}
            ]}}
        }
    });
    let pointer_file = work.join("pointer.ign");
    let cache = work.join("ignition.json");
    if let Err(e) = std::fs::write(&pointer_file, pointer.to_string()) {
        return RealFetch {
            config: Err(format!("pointer config: {e}")),
            log: String::new(),
        };
    }
    let output = std::process::Command::new(IGNITION)
        .args(["-platform", "file", "-stage", "fetch", "-log-to-stdout"])
        .arg("-fetch-timeout")
        .arg(format!("{}s", timeout.as_secs().max(1)))
        .arg("-config-cache")
        .arg(&cache)
        .arg("-state-file")
        .arg(work.join("state"))
        .arg("-neednet")
        .arg(work.join("neednet"))
        .arg("-root")
        .arg(work.join("root"))
        .env("IGNITION_CONFIG_FILE", &pointer_file)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            return RealFetch {
                config: Err(format!("{IGNITION}: {e}")),
                log: String::new(),
            }
        }
    };
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let config = if output.status.success() {
        std::fs::read(&cache)
            .map_err(|e| format!("no cached config: {e}"))
            .and_then(|bytes| {
                serde_json::from_slice(&bytes).map_err(|e| format!("cached config: {e}"))
            })
    } else {
        Err(format!("ignition exited with {}", output.status))
    };
    RealFetch { config, log }
}

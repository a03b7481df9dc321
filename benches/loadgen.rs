//! A load generator for the serving benchmark (`benches/run.sh`) that does what wrk cannot:
//! choose the client's source address. Every connection can come from its own loopback address
//! (the whole 127.0.0.0/8 is local on Linux: the socket is bound to 127.x.y.z before it
//! connects), so the server sees many machines instead of one. Our server keeps a record per
//! client address (the served records of `src/server/served.rs`) and, in cluster mode, an answer
//! that adds a new record waits until that record is durable; what a request costs therefore
//! depends on who asks, and only a generator that varies the address can measure it.
//!
//! Usage:
//! `loadgen --connect 127.0.0.1:PORT --targets "/config/a@3.4.0 /config/b@3.4.0" [options]`
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `--connect ADDR:PORT` | required | the server (HTTPS) |
//! | `--targets "PATH@VERSION ..."` | `$MCS_BENCH_TARGETS` | what to fetch, asked as Ignition asks for VERSION |
//! | `--clients N` | 32 | concurrent clients |
//! | `--threads N` | 2 | runtime worker threads (as wrk's `-t`) |
//! | `--duration S` | 10 | seconds of load |
//! | `--connection keep-alive\|close` | keep-alive | reuse connections, or one per request |
//! | `--source fixed\|per-client\|per-request` | fixed | source address, below |
//! | `--first-address A.B.C.D` | 127.16.0.1 | first source address handed out |
//! | `--ca FILE` | `certs/ca.crt` | the CA the server certificate is checked against |
//! | `--timeout S` | 10 | bound on one request, connection included |
//! | `--warmup N` | 0 | requests each client makes before the clock starts, not counted |
//!
//! Source addresses: `fixed`, the kernel's choice (127.0.0.1, as wrk: one client address);
//! `per-client`, client `i` always connects from the `i`-th address and always fetches the same
//! target (`i` modulo the number of targets: a machine asking for its own pool again);
//! `per-request`, every request on a new connection from an address never used before in this
//! run (a scale-up storm: one fetch per machine). `--first-address` lets consecutive runs
//! against the same server use disjoint addresses. Otherwise client `i`'s requests rotate over
//! the targets, starting at target `i`. With `--warmup N`, every client first makes N requests
//! that are not counted (with `per-client`, its address's first answer: a new record for our
//! server), and the measured duration starts when the last client has finished them.
//!
//! Every answer is checked: status 2xx, a `Content-Length` body read in full, and the same
//! length as the first answer for that target. Latency is measured from the moment the client
//! starts the request (the TCP connect and TLS handshake included when it opens a connection,
//! which wrk leaves out) to the last byte of the body. Only requests completed within the
//! duration count; one still running at the end is abandoned, as wrk does. TLS session
//! resumption is off: a booting machine has no session to resume. The TLS client offers the
//! suites in the order Ignition does (AES-128-GCM first, see `ignition_like_client`).
//!
//! It prints one line, the same fields as `benches/wrk/report.lua`'s plus `body_errors`,
//! `addresses` (distinct source addresses used) and where the time of a request went, as the
//! median and p99 of each phase: `connect` (TCP connect and TLS handshake, about 0 on a reused
//! connection), `head` (request written, response head read), `body` (the rest of the body):
//! `RESULT requests=N duration_us=N bytes=N p50_us=N p90_us=N p99_us=N connect_errors=N
//! read_errors=N write_errors=N status_errors=N timeouts=N body_errors=N addresses=N
//! connect_p50_us=N connect_p99_us=N head_p50_us=N head_p99_us=N body_p50_us=N body_p99_us=N`.
//! The phases' percentiles are each their own (the p99s do not add up to the request's).
//! Exit status 0 when the run happened (errors are counted, not fatal), 64 for bad usage.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Fixed,
    PerClient,
    PerRequest,
}

#[derive(Debug)]
struct Options {
    connect: SocketAddr,
    targets: Vec<Target>,
    clients: usize,
    threads: usize,
    duration: Duration,
    keep_alive: bool,
    source: Source,
    first_address: Ipv4Addr,
    ca: PathBuf,
    timeout: Duration,
    warmup: u64,
}

#[derive(Debug)]
struct Target {
    /// The whole request, written as is.
    request: Vec<u8>,
}

fn usage(what: &str) -> ExitCode {
    eprintln!("loadgen: {what} (see the usage at the top of benches/loadgen.rs)");
    ExitCode::from(64)
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut values: HashMap<String, String> = HashMap::new();
    while let Some(name) = args.next() {
        let Some(key) = name.strip_prefix("--") else {
            return Err(format!("unexpected argument {name:?}"));
        };
        let value = args.next().ok_or_else(|| format!("{name} needs a value"))?;
        values.insert(key.to_owned(), value);
    }
    let take = |key: &str| values.get(key).cloned();
    let number = |key: &str, default: u64| -> Result<u64, String> {
        take(key).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("--{key}: not a number: {v:?}"))
        })
    };
    let connect: SocketAddr = take("connect")
        .ok_or("--connect ADDR:PORT is required")?
        .parse()
        .map_err(|e| format!("--connect: {e}"))?;
    let keep_alive = match take("connection").as_deref() {
        None | Some("keep-alive") => true,
        Some("close") => false,
        Some(other) => return Err(format!("--connection: keep-alive or close, not {other:?}")),
    };
    let source = match take("source").as_deref() {
        None | Some("fixed") => Source::Fixed,
        Some("per-client") => Source::PerClient,
        Some("per-request") => Source::PerRequest,
        Some(other) => {
            return Err(format!(
                "--source: fixed, per-client or per-request, not {other:?}"
            ))
        }
    };
    let first_address: Ipv4Addr = take("first-address")
        .unwrap_or_else(|| "127.16.0.1".to_owned())
        .parse()
        .map_err(|e| format!("--first-address: {e}"))?;
    if first_address.octets()[0] != 127 {
        return Err("--first-address must be a loopback address (127.x.y.z)".into());
    }
    let spec = take("targets")
        .or_else(|| std::env::var("MCS_BENCH_TARGETS").ok())
        .ok_or("--targets (or MCS_BENCH_TARGETS) is required")?;
    let mut targets = Vec::new();
    for entry in spec.split_whitespace() {
        let (path, version) = entry
            .split_once('@')
            .ok_or_else(|| format!("target {entry:?} is not PATH@VERSION"))?;
        targets.push(Target {
            request: format!(
                "GET {path} HTTP/1.1\r\nHost: {connect}\r\n\
                 Accept: application/vnd.coreos.ignition+json;version={version}, */*;q=0.1\r\n\
                 Accept-Encoding: identity\r\nUser-Agent: Ignition/2.20.0\r\n{}\r\n",
                if keep_alive || source == Source::PerRequest {
                    ""
                } else {
                    "Connection: close\r\n"
                }
            )
            .into_bytes(),
        });
    }
    if targets.is_empty() {
        return Err("no targets".into());
    }
    let clients = number("clients", 32)?.max(1) as usize;
    Ok(Options {
        connect,
        targets,
        clients,
        threads: number("threads", 2)?.max(1) as usize,
        duration: Duration::from_secs(number("duration", 10)?.max(1)),
        // A new address is a new connection.
        keep_alive: keep_alive && source != Source::PerRequest,
        source,
        first_address,
        ca: take("ca").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("certs/ca.crt"),
            PathBuf::from,
        ),
        timeout: Duration::from_secs(number("timeout", 10)?.max(1)),
        warmup: number("warmup", 0)?,
    })
}

/// What one client counted.
#[derive(Default)]
struct Counts {
    requests: u64,
    bytes: u64,
    latencies_us: Vec<u32>,
    /// Per request, where its latency went: the phases of the module doc.
    connect_us: Vec<u32>,
    head_us: Vec<u32>,
    body_us: Vec<u32>,
    connect_errors: u64,
    read_errors: u64,
    write_errors: u64,
    status_errors: u64,
    timeouts: u64,
    body_errors: u64,
}

impl Counts {
    /// Adds `other`'s failures only (the warm-up's).
    fn add_errors(&mut self, other: &Counts) {
        self.connect_errors += other.connect_errors;
        self.read_errors += other.read_errors;
        self.write_errors += other.write_errors;
        self.status_errors += other.status_errors;
        self.timeouts += other.timeouts;
        self.body_errors += other.body_errors;
    }

    fn add(&mut self, other: Counts) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.latencies_us.extend(other.latencies_us);
        self.connect_us.extend(other.connect_us);
        self.head_us.extend(other.head_us);
        self.body_us.extend(other.body_us);
        self.connect_errors += other.connect_errors;
        self.read_errors += other.read_errors;
        self.write_errors += other.write_errors;
        self.status_errors += other.status_errors;
        self.timeouts += other.timeouts;
        self.body_errors += other.body_errors;
    }
}

/// One answer read in full, and when its first parts were done.
struct Exchanged {
    bytes: u64,
    /// From the start to the TLS handshake done (zero on a reused connection).
    connected: Duration,
    /// From the start to the response head read.
    head: Duration,
}

/// Why one exchange failed.
enum Failure {
    Connect(std::io::Error),
    Write(std::io::Error),
    Read(String),
    Status(u16),
    /// Not the length first seen for the target.
    Body(String),
}

/// What every client shares.
struct Shared {
    options: Options,
    tls: TlsConnector,
    /// Source addresses handed out so far (as offsets from `first_address`).
    next_address: AtomicU32,
    /// The body length first seen per target.
    lengths: Mutex<Vec<Option<u64>>>,
    /// Every client has made its warm-up requests.
    warm: tokio::sync::Barrier,
    /// The end of the measured duration, set when the warm-up is over.
    deadline: OnceLock<Instant>,
}

impl Shared {
    /// The next unused source address, or None past the end of 127.0.0.0/8.
    fn new_address(&self) -> Option<Ipv4Addr> {
        let offset = self.next_address.fetch_add(1, Ordering::Relaxed);
        let address = u32::from(self.options.first_address).checked_add(offset)?;
        // Stay inside 127.0.0.0/8 and below its broadcast address.
        (address < u32::from(Ipv4Addr::new(127, 255, 255, 255))).then(|| Ipv4Addr::from(address))
    }
}

async fn connect(
    shared: &Shared,
    source: Option<Ipv4Addr>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let socket = TcpSocket::new_v4()?;
    if let Some(source) = source {
        socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    }
    let stream = socket.connect(shared.options.connect).await?;
    stream.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::IpAddress(shared.options.connect.ip().into());
    shared.tls.connect(name, stream).await
}

/// One request on `connection` (opened first when there is none), started at `started`.
async fn exchange(
    shared: &Shared,
    connection: &mut Option<TlsStream<TcpStream>>,
    source: Option<Ipv4Addr>,
    target: usize,
    buffer: &mut [u8],
    started: Instant,
) -> Result<Exchanged, Failure> {
    if connection.is_none() {
        *connection = Some(connect(shared, source).await.map_err(Failure::Connect)?);
    }
    let connected = started.elapsed();
    let stream = connection
        .as_mut()
        .ok_or_else(|| Failure::Read("no connection".into()))?;
    stream
        .write_all(&shared.options.targets[target].request)
        .await
        .map_err(Failure::Write)?;
    // The head: read until the blank line.
    let mut filled = 0;
    let head_end = loop {
        if filled == buffer.len() {
            return Err(Failure::Read("response head larger than the buffer".into()));
        }
        let n = stream
            .read(&mut buffer[filled..])
            .await
            .map_err(|e| Failure::Read(e.to_string()))?;
        if n == 0 {
            return Err(Failure::Read(
                "connection closed before the head ended".into(),
            ));
        }
        filled += n;
        if let Some(at) = buffer[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head_read = started.elapsed();
    let head = std::str::from_utf8(&buffer[..head_end])
        .map_err(|_| Failure::Read("response head is not UTF-8".into()))?;
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Failure::Read("no status line".into()))?;
    let mut length = None;
    let mut close = false;
    for line in head.split("\r\n").skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<u64>().ok();
            } else if name.eq_ignore_ascii_case("connection")
                && value.trim().eq_ignore_ascii_case("close")
            {
                close = true;
            }
        }
    }
    let length = length.ok_or_else(|| Failure::Read("no Content-Length".into()))?;
    let mut body = (filled - head_end) as u64;
    if body > length {
        return Err(Failure::Read("more bytes than Content-Length".into()));
    }
    while body < length {
        let want = buffer.len().min((length - body) as usize);
        let n = stream
            .read(&mut buffer[..want])
            .await
            .map_err(|e| Failure::Read(e.to_string()))?;
        if n == 0 {
            return Err(Failure::Read("body shorter than Content-Length".into()));
        }
        body += n as u64;
    }
    if !shared.options.keep_alive || close {
        *connection = None;
    }
    if !(200..300).contains(&status) {
        return Err(Failure::Status(status));
    }
    let mut lengths = shared.lengths.lock().unwrap_or_else(|e| e.into_inner());
    match lengths[target] {
        None => lengths[target] = Some(length),
        Some(first) if first != length => {
            return Err(Failure::Body(format!(
                "body of {length} bytes, {first} before for the same target"
            )))
        }
        Some(_) => {}
    }
    Ok(Exchanged {
        bytes: head_end as u64 + length,
        connected,
        head: head_read,
    })
}

async fn client(shared: Arc<Shared>, id: usize) -> Counts {
    let options = &shared.options;
    let mut counts = Counts::default();
    let mut warmup = Counts::default();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut connection = None;
    // Per client: its own address for the whole run.
    let own_address = match options.source {
        Source::PerClient => shared.new_address(),
        Source::Fixed | Source::PerRequest => None,
    };
    // The source of the next request: None, the kernel's choice; Err when the addresses ran out.
    let source = || match options.source {
        Source::Fixed => Ok(None),
        Source::PerClient => own_address.map(Some).ok_or(()),
        Source::PerRequest => shared.new_address().map(Some).ok_or(()),
    };
    // Spread the clients' first requests over the targets.
    let mut next = id % options.targets.len();
    for _ in 0..options.warmup {
        let target = next;
        if options.source != Source::PerClient {
            next = (next + 1) % options.targets.len();
        }
        let Ok(source) = source() else {
            break;
        };
        let outcome = tokio::time::timeout(
            options.timeout,
            exchange(
                &shared,
                &mut connection,
                source,
                target,
                &mut buffer,
                Instant::now(),
            ),
        )
        .await;
        if !matches!(outcome, Ok(Ok(_))) {
            connection = None;
        }
        // A failed warm-up request is a failure like any other.
        count(&mut warmup, id, outcome, Duration::ZERO);
    }
    shared.warm.wait().await;
    let deadline = *shared
        .deadline
        .get_or_init(|| Instant::now() + options.duration);
    counts.add_errors(&warmup);
    loop {
        let started = Instant::now();
        if started >= deadline {
            break;
        }
        let target = next;
        if options.source != Source::PerClient {
            next = (next + 1) % options.targets.len();
        }
        let Ok(source) = source() else {
            counts.connect_errors += 1;
            note_error(id, "no source address left in 127.0.0.0/8");
            break;
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(
                options.timeout,
                exchange(&shared, &mut connection, source, target, &mut buffer, started),
            ) => outcome,
            // A request still running at the end is abandoned and not counted.
            _ = tokio::time::sleep_until(deadline.into()) => break,
        };
        let finished = Instant::now();
        if finished > deadline {
            break;
        }
        if !matches!(outcome, Ok(Ok(_))) {
            connection = None;
        }
        count(&mut counts, id, outcome, finished - started);
    }
    counts
}

/// Counts one exchange's outcome (and its latency when it succeeded).
fn count(
    counts: &mut Counts,
    client: usize,
    outcome: Result<Result<Exchanged, Failure>, tokio::time::error::Elapsed>,
    latency: Duration,
) {
    let micros = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
    match outcome {
        Ok(Ok(exchanged)) => {
            counts.requests += 1;
            counts.bytes += exchanged.bytes;
            counts.latencies_us.push(micros(latency));
            counts.connect_us.push(micros(exchanged.connected));
            counts
                .head_us
                .push(micros(exchanged.head.saturating_sub(exchanged.connected)));
            counts
                .body_us
                .push(micros(latency.saturating_sub(exchanged.head)));
        }
        Ok(Err(Failure::Connect(e))) => {
            counts.connect_errors += 1;
            note_error(client, &format!("connect: {e}"));
        }
        Ok(Err(Failure::Write(e))) => {
            counts.write_errors += 1;
            note_error(client, &format!("write: {e}"));
        }
        Ok(Err(Failure::Read(e))) => {
            counts.read_errors += 1;
            note_error(client, &format!("read: {e}"));
        }
        Ok(Err(Failure::Status(status))) => {
            counts.status_errors += 1;
            note_error(client, &format!("status {status}"));
        }
        Ok(Err(Failure::Body(e))) => {
            counts.body_errors += 1;
            note_error(client, &e);
        }
        Err(_) => counts.timeouts += 1,
    }
}

/// The first few errors are worth a line on stderr; the rest only count.
fn note_error(client: usize, what: &str) {
    static SHOWN: AtomicU32 = AtomicU32::new(0);
    if SHOWN.fetch_add(1, Ordering::Relaxed) < 5 {
        eprintln!("loadgen: client {client}: {what}");
    }
}

/// A TLS client that offers what Ignition offers. Debian's Ignition 2.14 (Go's `crypto/tls` on
/// a machine with AES hardware), as `openssl s_server -trace` shows its ClientHello, lists the
/// TLS 1.3 suites AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 in that order and sends one X25519
/// key share (groups X25519, P-256, P-384, P-521). rustls's default order starts with
/// AES-256-GCM, which a server that follows the client's order (nginx and ours both do) would
/// then encrypt every byte with: a machine never asks for that.
fn ignition_like_client(ca: &std::path::Path) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::CipherSuite;
    const GO_TLS13_ORDER: [CipherSuite; 3] = [
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: the TLS 1.2 suites keep their order, after the TLS 1.3 ones.
    provider.cipher_suites.sort_by_key(|suite| {
        GO_TLS13_ORDER
            .iter()
            .position(|go| *go == suite.suite())
            .unwrap_or(GO_TLS13_ORDER.len())
    });
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("CA file") {
        roots.add(cert.expect("CA PEM")).expect("CA cert");
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The `p`-th percentile (0 to 100) of sorted values, nearest rank.
fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(e) => return usage(&e),
    };
    let tls = {
        let mut config = ignition_like_client(&options.ca);
        config.resumption = rustls::client::Resumption::disabled();
        TlsConnector::from(Arc::new(config))
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("loadgen: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let targets = options.targets.len();
    let shared = Arc::new(Shared {
        tls,
        next_address: AtomicU32::new(0),
        lengths: Mutex::new(vec![None; targets]),
        warm: tokio::sync::Barrier::new(options.clients),
        deadline: OnceLock::new(),
        options,
    });
    let totals = runtime.block_on(async {
        let tasks: Vec<_> = (0..shared.options.clients)
            .map(|id| tokio::spawn(client(shared.clone(), id)))
            .collect();
        let mut totals = Counts::default();
        for task in tasks {
            match task.await {
                Ok(counts) => totals.add(counts),
                Err(e) => {
                    eprintln!("loadgen: a client failed: {e}");
                    totals.read_errors += 1;
                }
            }
        }
        totals
    });
    let mut latencies = totals.latencies_us.clone();
    latencies.sort_unstable();
    let addresses = match shared.options.source {
        Source::Fixed => 1,
        _ => u64::from(shared.next_address.load(Ordering::Relaxed)),
    };
    let phases: String = [
        ("connect", &totals.connect_us),
        ("head", &totals.head_us),
        ("body", &totals.body_us),
    ]
    .into_iter()
    .map(|(phase, values)| {
        let mut sorted = values.clone();
        sorted.sort_unstable();
        format!(
            " {phase}_p50_us={} {phase}_p99_us={}",
            percentile(&sorted, 50.0),
            percentile(&sorted, 99.0)
        )
    })
    .collect();
    println!(
        "RESULT requests={} duration_us={} bytes={} p50_us={} p90_us={} p99_us={} \
         connect_errors={} read_errors={} write_errors={} status_errors={} timeouts={} \
         body_errors={} addresses={}{phases}",
        totals.requests,
        shared.options.duration.as_micros(),
        totals.bytes,
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        percentile(&latencies, 99.0),
        totals.connect_errors,
        totals.read_errors,
        totals.write_errors,
        totals.status_errors,
        totals.timeouts,
        totals.body_errors,
        addresses,
    );
    ExitCode::SUCCESS
}

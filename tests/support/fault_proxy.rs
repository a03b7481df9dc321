//! A fault-injecting HTTP proxy between the code under test and the test's API server (the
//! in-test one, or a real kube-apiserver when `KUBEBUILDER_ASSETS` names one): the faults a
//! production control plane shows, switched on and off by the test while the server runs.
//!
//! The code under test gets [`FaultProxy::kubeconfig_file`], which points at the proxy; the
//! proxy forwards each of its connections over one upstream connection of its own (plain HTTP
//! to the in-test server; TLS with the original kubeconfig's client certificate to a real
//! one, while the code under test talks TLS to the proxy under a CA the proxy generated).
//! One proxy per replica, so each replica's requests are logged ([`FaultProxy::log`]) and a
//! fault can hit one replica's path to the API or all of them.
//!
//! The faults ([`Fault`]), as kube-apiserver and the network show them:
//! - `Latency`: every request waits before it is forwarded.
//! - `Resets`: every other request has its connection reset (TCP RST) instead of an answer;
//!   open streams (watches) are reset 2 s after they start.
//! - `Blackhole`: nothing is answered and open streams stop flowing (connections hang, as
//!   when packets are dropped); when the fault ends everything held goes on, as TCP
//!   retransmission delivers it.
//! - `TooManyRequests`: every request is answered 429 with `Retry-After` and the Status
//!   kube-apiserver's priority and fairness sends.
//! - `ServerErrors`: bursts of 500 and 503 (each burst one status; 1 s of errors every 2 s).
//! - `WatchCuts`: every watch stream is cut (connection closed mid-stream) after a few seconds.
//! - `RefuseWatches`: every watch request is answered 500 (lists and writes go through): a path
//!   on which watches cannot resume.
//! - `Gone`: etcd was compacted when the fault began: open watches end with the `ERROR` event
//!   of a 410 `Expired` Status, and a watch from a resourceVersion at or below the compaction
//!   gets the same, so clients must list again.
//!
//! A test can also hold one request that matches a predicate ([`FaultProxy::hold_next`]):
//! before it reaches the API server (dropped if the client dies meanwhile), or after the API
//! server answered (the answer dropped if the client dies), to kill the code under test in the
//! middle of a write.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

type Body = BoxBody<Bytes, std::io::Error>;

/// One fault (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    Latency(Duration),
    Resets,
    Blackhole,
    TooManyRequests { retry_after_secs: u32 },
    ServerErrors,
    WatchCuts { after: Duration },
    RefuseWatches,
    Gone,
}

/// One request as the proxy saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    /// When it arrived at the proxy.
    pub at: Instant,
    pub method: String,
    /// Path and query.
    pub uri: String,
    pub watch: bool,
    /// The status the client got; 0 when it got none (reset, hung, client gone).
    pub status: u16,
    /// True when the proxy answered (a fault), not the API server.
    pub injected: bool,
}

/// Which side of the API server a held request waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldAt {
    /// Before it is forwarded: if the client dies, the API server never sees it.
    BeforeForwarding,
    /// After the API server answered: the write happened, the client never hears of it.
    AfterAnswer,
}

/// A held request's head, for the test (e.g. the `fieldManager` naming the writer).
#[derive(Clone, Debug)]
pub struct Held {
    pub method: String,
    pub uri: String,
}

/// Which request to hold: `(method, path and query, body)`.
type Matcher = Box<dyn Fn(&str, &str, &[u8]) -> bool + Send>;

struct Hold {
    at: HoldAt,
    matches: Matcher,
    seen: std::sync::mpsc::Sender<Held>,
}

struct Control {
    fault: watch::Sender<(Fault, Instant)>,
    log: Mutex<Vec<Logged>>,
    hold: Mutex<Option<Hold>>,
    release: watch::Sender<u64>,
    /// The highest resourceVersion a watch was started from; set as the compaction point
    /// when `Gone` begins.
    newest_watch_version: AtomicU64,
    compacted_at: AtomicU64,
    requests: AtomicU64,
}

/// Where the proxy forwards to.
#[derive(Clone)]
enum Upstream {
    Plain(SocketAddr),
    Tls {
        address: SocketAddr,
        name: rustls::pki_types::ServerName<'static>,
        connector: tokio_rustls::TlsConnector,
    },
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    pub address: SocketAddr,
    control: Arc<Control>,
    kubeconfig: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl FaultProxy {
    /// A proxy in front of the API server of `kubeconfig` (the test API server's kubeconfig
    /// for the code under test), on its own thread and runtime.
    pub fn start(kubeconfig: &Path) -> FaultProxy {
        let config: Value =
            serde_yaml::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
        let cluster = &config["clusters"][0]["cluster"];
        let server = cluster["server"].as_str().unwrap().to_string();
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let (upstream, acceptor, own_config) = if let Some(rest) = server.strip_prefix("http://") {
            let mut own = config.clone();
            own["clusters"][0]["cluster"]["server"] = json!(format!("http://{address}"));
            (Upstream::Plain(rest.parse().unwrap()), None, own)
        } else {
            tls_sides(&config, &server, address)
        };
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, serde_yaml::to_string(&own_config).unwrap()).unwrap();
        let control = Arc::new(Control {
            fault: watch::Sender::new((Fault::None, Instant::now())),
            log: Mutex::new(Vec::new()),
            hold: Mutex::new(None),
            release: watch::Sender::new(0),
            newest_watch_version: AtomicU64::new(0),
            compacted_at: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread_control = control.clone();
        let thread = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).unwrap();
                    tokio::select! {
                        _ = accept_loop(listener, upstream, acceptor, thread_control) => {}
                        _ = stopped => {}
                    }
                });
            })
            .unwrap();
        FaultProxy {
            address,
            control,
            kubeconfig,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// The kubeconfig of the code under test: the proxy instead of the API server.
    pub fn kubeconfig_file(&self) -> &Path {
        &self.kubeconfig
    }

    /// Switches to `fault` (`Fault::None` ends it).
    pub fn set(&self, fault: Fault) {
        if fault == Fault::Gone {
            let newest = self.control.newest_watch_version.load(Ordering::SeqCst);
            self.control.compacted_at.store(newest, Ordering::SeqCst);
        }
        self.control.fault.send_replace((fault, Instant::now()));
    }

    /// Every request so far, in order of arrival.
    pub fn log(&self) -> Vec<Logged> {
        self.control.log.lock().unwrap().clone()
    }

    /// Holds the next request for which `matches(method, uri, body)` is true, at `at`, until
    /// [`FaultProxy::release`]; the receiver gets its head once it is held.
    pub fn hold_next(
        &self,
        at: HoldAt,
        matches: impl Fn(&str, &str, &[u8]) -> bool + Send + 'static,
    ) -> std::sync::mpsc::Receiver<Held> {
        let (seen, held) = std::sync::mpsc::channel();
        *self.control.hold.lock().unwrap() = Some(Hold {
            at,
            matches: Box::new(matches),
            seen,
        });
        held
    }

    /// Holds nothing more (a request already held stays held).
    pub fn clear_hold(&self) {
        *self.control.hold.lock().unwrap() = None;
    }

    /// Lets held requests go on (those whose client is still there).
    pub fn release(&self) {
        self.control.release.send_modify(|n| *n += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// For a TLS API server: the upstream connector with the kubeconfig's CA and client
/// certificate, the proxy's own serving side (a certificate for 127.0.0.1 under a CA it
/// makes) and the kubeconfig that trusts it.
fn tls_sides(
    config: &Value,
    server: &str,
    address: SocketAddr,
) -> (Upstream, Option<tokio_rustls::TlsAcceptor>, Value) {
    use base64::Engine as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let b64 = |v: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .unwrap()
    };
    let cluster = &config["clusters"][0]["cluster"];
    let user = &config["users"][0]["user"];
    let host_port = server
        .strip_prefix("https://")
        .unwrap()
        .trim_end_matches('/');
    let upstream_address: SocketAddr = host_port.parse().unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&b64(&cluster["certificate-authority-data"])) {
        roots.add(cert.unwrap()).unwrap();
    }
    let client = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    // A ServiceAccount's kubeconfig has a token, no client certificate: the token goes on in the
    // forwarded Authorization header, and the proxy must not authenticate as anyone itself.
    let client = if user.get("client-key-data").is_some() {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&b64(&user["client-certificate-data"]))
                .map(Result::unwrap)
                .collect();
        let key = PrivateKeyDer::from_pem_slice(&b64(&user["client-key-data"])).unwrap();
        client.with_client_auth_cert(chain, key).unwrap()
    } else {
        client.with_no_client_auth()
    };
    let upstream = Upstream::Tls {
        address: upstream_address,
        name: rustls::pki_types::ServerName::IpAddress(upstream_address.ip().into()),
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
    };
    // The proxy's serving certificate, under a CA of its own that the new kubeconfig trusts.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let serving = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    let mut own = config.clone();
    own["clusters"][0]["cluster"]["server"] = json!(format!("https://{address}"));
    own["clusters"][0]["cluster"]["certificate-authority-data"] =
        json!(base64::engine::general_purpose::STANDARD.encode(ca.pem()));
    (
        upstream,
        Some(tokio_rustls::TlsAcceptor::from(Arc::new(serving))),
        own,
    )
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

async fn accept_loop(
    listener: TcpListener,
    upstream: Upstream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    control: Arc<Control>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (upstream, acceptor, control) = (upstream.clone(), acceptor.clone(), control.clone());
        tokio::spawn(async move {
            let _ = connection(stream, upstream, acceptor, control).await;
        });
    }
}

/// One client connection: its own upstream connection, requests served in order, and a
/// reset (RST) when a fault asks for one.
async fn connection(
    stream: TcpStream,
    upstream: Upstream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    control: Arc<Control>,
) -> std::io::Result<()> {
    // A second handle on the socket, to reset it (linger 0, then close) whatever hyper holds.
    let std_stream = stream.into_std()?;
    let resetter = socket2::Socket::from(std_stream.try_clone()?);
    let stream = TcpStream::from_std(std_stream)?;
    let client: Box<dyn Io> = match &acceptor {
        Some(acceptor) => Box::new(acceptor.accept(stream).await?),
        None => Box::new(stream),
    };
    let upstream_io: Box<dyn Io> = match &upstream {
        Upstream::Plain(address) => Box::new(TcpStream::connect(address).await?),
        Upstream::Tls {
            address,
            name,
            connector,
        } => {
            let tcp = TcpStream::connect(address).await?;
            Box::new(connector.connect(name.clone(), tcp).await?)
        }
    };
    let (sender, upstream_connection) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(upstream_io))
            .await
            .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        let _ = upstream_connection.await;
    });
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let reset = Arc::new(Notify::new());
    let service_reset = reset.clone();
    let service = service_fn(move |request| {
        let (control, sender, reset) = (control.clone(), sender.clone(), service_reset.clone());
        async move { Ok::<_, Infallible>(handle(request, control, sender, reset).await) }
    });
    let served =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(client), service);
    tokio::select! {
        _ = served => {}
        _ = reset.notified() => {
            let _ = resetter.set_linger(Some(Duration::ZERO));
        }
    }
    Ok(())
}

fn query_value<'a>(uri: &'a str, key: &str) -> Option<&'a str> {
    uri.split_once('?')?
        .1
        .split('&')
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn answer(code: u16, headers: &[(&'static str, String)], body: Vec<u8>) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = hyper::StatusCode::from_u16(code).unwrap();
    let out = response.headers_mut();
    out.insert("content-type", "application/json".parse().unwrap());
    for (name, value) in headers {
        out.insert(*name, value.parse().unwrap());
    }
    response
}

/// The 410 a watch from a compacted resourceVersion gets from kube-apiserver: a 200 stream
/// whose only event is an `ERROR` with the Status.
fn expired_watch(version: u64) -> hyper::Response<Body> {
    let event = json!({"type": "ERROR", "object": status_body(
        410, "Expired", &format!("too old resource version: {version}"))});
    answer(200, &[], format!("{event}\n").into_bytes())
}

/// Waits while the fault is a blackhole.
async fn through_blackhole(fault: &mut watch::Receiver<(Fault, Instant)>) {
    let _ = fault
        .wait_for(|(fault, _)| *fault != Fault::Blackhole)
        .await;
}

async fn handle(
    request: hyper::Request<Incoming>,
    control: Arc<Control>,
    sender: Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Full<Bytes>>>>,
    reset: Arc<Notify>,
) -> hyper::Response<Body> {
    let (parts, body) = request.into_parts();
    let uri = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let method = parts.method.to_string();
    let watch = matches!(query_value(&uri, "watch"), Some("true" | "1"));
    let index = {
        let mut log = control.log.lock().unwrap();
        log.push(Logged {
            at: Instant::now(),
            method: method.clone(),
            uri: uri.clone(),
            watch,
            status: 0,
            injected: false,
        });
        log.len() - 1
    };
    let outcome = |status: u16, injected: bool| {
        let mut log = control.log.lock().unwrap();
        log[index].status = status;
        log[index].injected = injected;
    };
    let number = control.requests.fetch_add(1, Ordering::SeqCst);
    let version = query_value(&uri, "resourceVersion")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v > 0);
    if watch {
        if let Some(version) = version {
            control
                .newest_watch_version
                .fetch_max(version, Ordering::SeqCst);
        }
    }
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return answer(400, &[], Vec::new()),
    };

    let mut fault_rx = control.fault.subscribe();
    let (fault, since) = fault_rx.borrow().clone();
    match fault {
        Fault::None | Fault::WatchCuts { .. } => {}
        Fault::Latency(delay) => tokio::time::sleep(delay).await,
        Fault::Resets if number % 2 == 0 => {
            reset.notify_one();
            return std::future::pending().await;
        }
        Fault::Resets => {}
        Fault::Blackhole => through_blackhole(&mut fault_rx).await,
        Fault::TooManyRequests { retry_after_secs } => {
            outcome(429, true);
            let mut status = status_body(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            );
            status["details"] = json!({"retryAfterSeconds": retry_after_secs});
            return answer(
                429,
                &[("retry-after", retry_after_secs.to_string())],
                status.to_string().into_bytes(),
            );
        }
        Fault::ServerErrors => {
            // 1 s of errors every 2 s; bursts alternate between 500 and 503.
            let elapsed = since.elapsed().as_millis();
            if elapsed % 2000 < 1000 {
                let (code, reason) = if (elapsed / 2000) % 2 == 0 {
                    (500, "InternalError")
                } else {
                    (503, "ServiceUnavailable")
                };
                outcome(code, true);
                let status = status_body(code, reason, "injected by the fault proxy");
                return answer(code, &[], status.to_string().into_bytes());
            }
        }
        Fault::RefuseWatches if watch => {
            outcome(500, true);
            let status = status_body(500, "InternalError", "injected by the fault proxy");
            return answer(500, &[], status.to_string().into_bytes());
        }
        Fault::RefuseWatches => {}
        Fault::Gone => {
            let compacted = control.compacted_at.load(Ordering::SeqCst);
            if let Some(version) = version.filter(|v| watch && *v <= compacted) {
                outcome(200, true);
                return expired_watch(version);
            }
        }
    }

    let hold = {
        let mut slot = control.hold.lock().unwrap();
        let matched = slot
            .as_ref()
            .is_some_and(|hold| (hold.matches)(&method, &uri, &body));
        if matched {
            slot.take()
        } else {
            None
        }
    };
    let mut release = control.release.subscribe();
    let announce = |hold: &Hold| {
        let _ = hold.seen.send(Held {
            method: method.clone(),
            uri: uri.clone(),
        });
    };
    if let Some(hold) = hold.as_ref().filter(|h| h.at == HoldAt::BeforeForwarding) {
        release.mark_unchanged();
        announce(hold);
        // If the client goes away meanwhile, hyper drops this future: never forwarded.
        let _ = release.changed().await;
    }

    let mut upstream_request = hyper::Request::from_parts(parts, Full::new(body));
    *upstream_request.uri_mut() = uri.parse().unwrap();
    let response = {
        let mut sender = sender.lock().await;
        if sender.ready().await.is_err() {
            reset.notify_one();
            return std::future::pending().await;
        }
        match sender.send_request(upstream_request).await {
            Ok(response) => response,
            Err(_) => {
                reset.notify_one();
                return std::future::pending().await;
            }
        }
    };
    if let Some(hold) = hold.as_ref().filter(|h| h.at == HoldAt::AfterAnswer) {
        release.mark_unchanged();
        announce(hold);
        let _ = release.changed().await;
    }
    outcome(response.status().as_u16(), false);
    let (parts, upstream_body) = response.into_parts();
    hyper::Response::from_parts(parts, pump(upstream_body, watch, control, reset))
}

/// The upstream body, frame by frame, as the faults let it through: held during a blackhole,
/// a watch cut after a while (`WatchCuts`), reset (`Resets`), or ended by the 410 of `Gone`.
fn pump(upstream: Incoming, watch: bool, control: Arc<Control>, reset: Arc<Notify>) -> Body {
    let (frames, receiver) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let opened = Instant::now();
        let mut fault = control.fault.subscribe();
        let mut upstream = upstream;
        loop {
            let (current, since) = fault.borrow_and_update().clone();
            let cut_at = match current {
                Fault::WatchCuts { after } if watch => Some(started.max(since.into()) + after),
                Fault::Resets if watch => Some(started.max(since.into()) + Duration::from_secs(2)),
                _ => None,
            };
            // Compaction ends the watches that were open when it happened.
            if current == Fault::Gone && watch && since >= opened {
                let compacted = control.compacted_at.load(Ordering::SeqCst);
                let event = json!({"type": "ERROR", "object": status_body(
                    410, "Expired", &format!("too old resource version: {compacted}"))});
                let _ = frames
                    .send(Ok(Frame::data(Bytes::from(format!("{event}\n")))))
                    .await;
                return;
            }
            if current == Fault::Blackhole {
                through_blackhole(&mut fault).await;
                continue;
            }
            let cut = async {
                match cut_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                frame = upstream.frame() => match frame {
                    Some(Ok(frame)) => {
                        if frames.send(Ok(frame)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(error)) => {
                        let _ = frames.send(Err(std::io::Error::other(error))).await;
                        return;
                    }
                    None => return,
                },
                _ = fault.changed() => {}
                _ = cut => {
                    if current == Fault::Resets {
                        reset.notify_one();
                    } else {
                        let _ = frames.send(Err(std::io::Error::other("watch cut by the fault proxy"))).await;
                    }
                    return;
                }
            }
        }
    });
    let mut receiver = receiver;
    let stream = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
    BodyExt::boxed(StreamBody::new(stream))
}

/// Requests per second in each whole second from `from` to `to`, over `logs`.
pub fn rate_per_second(logs: &[&[Logged]], from: Instant, to: Instant) -> Vec<usize> {
    let seconds = to.saturating_duration_since(from).as_secs() as usize;
    let mut counts = vec![0usize; seconds.max(1)];
    for log in logs {
        for entry in log.iter() {
            if entry.at < from || entry.at >= to {
                continue;
            }
            let second = entry.at.duration_since(from).as_secs() as usize;
            if let Some(count) = counts.get_mut(second) {
                *count += 1;
            }
        }
    }
    counts
}

/// Requests by status over `logs` (0: no answer).
pub fn by_status(logs: &[&[Logged]]) -> BTreeMap<u16, usize> {
    let mut out = BTreeMap::new();
    for log in logs {
        for entry in log.iter() {
            *out.entry(entry.status).or_default() += 1;
        }
    }
    out
}

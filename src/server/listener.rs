//! Listeners: accept loops for the TLS and plain-HTTP ports, HTTP/1.1 connections, graceful
//! shutdown.
//!
//! Each connection gets the router as a hyper service with its remote address attached. TLS
//! connections use the current `rustls::ServerConfig` from a `watch` channel, so a reloaded
//! certificate applies to new connections while existing ones finish undisturbed.
//!
//! With the PROXY protocol on ([`super::proxy_protocol`], serving ports only), a connection's
//! header is read first, in the connection's own task (before the TLS handshake), and the
//! client it names is the remote address; off, the accepted socket goes on as it is.
//!
//! An accepted socket keeps at most [`UNSENT_LOW_WATER`] bytes of an answer queued in the kernel
//! beyond what is in flight; the rest waits in the answer's shared buffer until the client takes
//! it.
//!
//! The serving ports count their open connections for the group commit
//! ([`super::commit::GroupCommit::connection`]): from the accept to the connection's end.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use tokio::sync::Semaphore;

use super::commit::GroupCommit;
use super::proxy_protocol::ProxyProtocol;
use super::stall::StallGuard;
use super::RemoteAddr;
use crate::metrics::Metrics;

/// Connection-level limits and timeouts.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Time allowed for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed to receive a request's headers (slowloris guard). hyper re-arms it whenever
    /// it waits for the next request, so it is also the idle keep-alive timeout.
    pub header_read_timeout: Duration,
    /// A response write that makes no progress for this long ends the connection (clients that
    /// stop reading).
    pub write_stall_timeout: Duration,
    /// Largest request head accepted (request line and headers); larger gets 431.
    pub max_header_bytes: usize,
    /// Connections served at once per listener; beyond it, accepting pauses.
    pub max_connections: usize,
    /// How long in-flight responses may take to finish after shutdown starts.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            handshake_timeout: Duration::from_secs(10),
            // Ignition itself waits 10 s for response headers, so a legitimate client never
            // needs longer to send its own.
            header_read_timeout: Duration::from_secs(10),
            write_stall_timeout: Duration::from_secs(30),
            max_header_bytes: 64 * 1024,
            max_connections: 4096,
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

/// hyper's smallest allowed read buffer.
const MIN_HEADER_BUFFER: usize = 8192;

/// TLS for a listener: the current server config, replaced on certificate reload.
pub type TlsConfigs = watch::Receiver<Arc<rustls::ServerConfig>>;

/// What a listener serves: the router, and for a serving port (not the admin listener) the
/// group commit its connections are counted for.
#[derive(Clone)]
pub struct Service {
    pub router: Router,
    pub commit: Option<GroupCommit>,
}

/// A router alone: nothing counted (the admin listener, tests).
impl From<Router> for Service {
    fn from(router: Router) -> Self {
        Service {
            router,
            commit: None,
        }
    }
}

/// How much of an answer not yet sent may sit in an accepted socket's kernel buffer
/// (`TCP_NOTSENT_LOWAT`): the socket takes no more bytes while this many wait unsent, whatever
/// is in flight. Without it the kernel lets a socket's send queue grow to megabytes (up to the
/// `tcp_wmem` maximum): a machine that reads slowly or stops reading holds that much of its
/// answer in kernel memory, which the pod's memory cgroup is charged for (3.7 MB of a 4 MB
/// answer per stalled machine without it, at most about this much with it).
///
/// 1 MiB: a typical rendered config (the realistic fixture's master answer is 0.4 MB) goes to
/// the kernel whole, in the poll that starts it; a multi-megabyte one goes out just in time.
/// At 128 KiB (before issue 58) a 0.4 MB answer took four or more wake-ups, and its TLS
/// records, allocated in one poll and freed in another, often on the other worker thread,
/// went back to the allocator's arena and were purged and faulted in again (`dirty_decay_ms:0`
/// in `.cargo/config.toml`): with a connection per request the server's CPU per answer was a
/// quarter higher and the client's a tenth (benches/README.md, "The per-connection row").
/// In-flight data (the congestion window) is not limited, so a long, fast path still fills.
pub const UNSENT_LOW_WATER: u32 = 1024 * 1024;

/// Socket options of an accepted connection: answers go out as they are written (no Nagle
/// delay), and little of one waits in the kernel ([`UNSENT_LOW_WATER`]). Best effort: a socket
/// that refuses an option is served as it is.
fn tune_accepted(stream: &tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = socket2::SockRef::from(stream).set_tcp_notsent_lowat(UNSENT_LOW_WATER);
}

/// Accept connections on `listener` until `shutdown` resolves, then let in-flight requests finish
/// within the grace period. With `proxy_protocol`, every connection goes through its intake
/// first.
///
/// At shutdown the connections the kernel has already completed but nobody accepted yet are
/// taken too, and every open connection whose first request has not arrived gets that request
/// answered before it closes: a balancer that has not yet seen this replica go handed those
/// clients to it, and a reset or a silent close is, to a booting machine, a failed fetch.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsConfigs>,
    service: impl Into<Service>,
    limits: ConnectionLimits,
    proxy_protocol: Option<Arc<ProxyProtocol>>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let Service { router, commit } = service.into();
    // Held until the backlog's connections at shutdown are handed over: the records writer's
    // last writes wait for those answers too.
    let listening = commit.as_ref().map(GroupCommit::listener);
    // Every connection holds a receiver: the sender sees them all gone once drained.
    let (stopping, stopping_rx) = watch::channel(false);
    let local = listener.local_addr().ok();
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let spawn = |stream: tokio::net::TcpStream, remote: SocketAddr, permit| {
        tune_accepted(&stream);
        let open = commit.as_ref().map(GroupCommit::connection);
        let connection = Connection {
            tls: tls
                .as_ref()
                .map(|configs| tokio_rustls::TlsAcceptor::from(configs.borrow().clone())),
            router: router.clone(),
            limits: limits.clone(),
            metrics: metrics.clone(),
            stopping: stopping_rx.clone(),
        };
        let proxy_protocol = proxy_protocol.clone();
        tokio::spawn(async move {
            let _permit: Option<tokio::sync::OwnedSemaphorePermit> = permit;
            let _open = open;
            match proxy_protocol {
                None => connection.run(stream, remote).await,
                Some(proxy_protocol) => {
                    let Some((stream, client)) = proxy_protocol
                        .intake(stream, remote, &connection.metrics)
                        .await
                    else {
                        return;
                    };
                    connection.run(stream, client).await
                }
            }
        });
    };
    let mut at_capacity = false;
    tokio::pin!(shutdown);
    loop {
        // Pause accepting while at the cap: new clients wait in the kernel's backlog (Ignition
        // retries on timeouts) instead of being accepted and starved.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !at_capacity {
                    at_capacity = true;
                    tracing::warn!(address = ?local, max_connections = limits.max_connections, "connection limit reached; pausing accept");
                }
                tokio::select! {
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    _ = &mut shutdown => break,
                }
            }
        };
        if at_capacity && permits.available_permits() > limits.max_connections / 10 {
            at_capacity = false;
            tracing::info!(address = ?local, "below the connection limit again; accepting");
        }
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        spawn(stream, remote, Some(permit));
    }
    stopping.send_replace(true);
    let pending = take_pending(listener);
    if !pending.is_empty() {
        tracing::info!(address = ?local, connections = pending.len(), "taking the connections already waiting to be accepted before closing");
    }
    for (stream, remote) in pending {
        spawn(stream, remote, permits.clone().try_acquire_owned().ok());
    }
    // Every connection this listener will serve now counts as open.
    drop(listening);
    drop(stopping_rx);
    tracing::info!(address = ?local, "listener stopped accepting; draining connections");
    if tokio::time::timeout(limits.shutdown_grace, stopping.closed())
        .await
        .is_err()
    {
        tracing::warn!(address = ?local, "grace period over; closing remaining connections");
    }
}

/// Closes `listener` after accepting, without waiting, every connection already completed in
/// its backlog (closing it with them there would reset them).
fn take_pending(listener: TcpListener) -> Vec<(tokio::net::TcpStream, SocketAddr)> {
    let Ok(listener) = listener.into_std() else {
        return Vec::new();
    };
    let mut pending = Vec::new();
    // A non-blocking accept: WouldBlock once the backlog is empty.
    while let Ok((stream, remote)) = listener.accept() {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(stream));
        match stream {
            Ok(stream) => pending.push((stream, remote)),
            Err(e) => {
                tracing::debug!(%remote, error = %e, "a waiting connection could not be taken")
            }
        }
    }
    pending
}

/// What serving one accepted connection needs.
struct Connection {
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    /// Turns true at shutdown; dropped when the connection ends.
    stopping: watch::Receiver<bool>,
}

impl Connection {
    /// The TLS handshake (on the secure port) and HTTP/1.1 for the client at `remote`.
    async fn run<S>(self, stream: S, remote: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            tls,
            router,
            limits,
            metrics,
            stopping,
        } = self;
        let stream = StallGuard::new(stream, limits.write_stall_timeout);
        match tls {
            Some(acceptor) => {
                let handshake =
                    tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream)).await;
                match handshake {
                    Ok(Ok(stream)) => {
                        serve_connection(stream, remote, router, &limits, stopping).await
                    }
                    Ok(Err(e)) => {
                        metrics.tls_handshake_failure();
                        tracing::debug!(%remote, error = %e, "TLS handshake failed")
                    }
                    Err(_) => {
                        metrics.tls_handshake_failure();
                        tracing::debug!(%remote, "TLS handshake timed out")
                    }
                }
            }
            None => serve_connection(stream, remote, router, &limits, stopping).await,
        }
    }
}

async fn serve_connection<S>(
    stream: S,
    remote: SocketAddr,
    router: Router,
    limits: &ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Turns true once the connection's first request has arrived.
    let (arrived, mut first_request) = watch::channel(false);
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        arrived.send_replace(true);
        request.extensions_mut().insert(RemoteAddr(remote));
        router.clone().oneshot(request.map(Body::new))
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BUFFER))
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => Some(ended),
        _ = stopping.wait_for(|stopping| *stopping) => None,
    };
    let ended = match ended {
        Some(ended) => ended,
        None => {
            // Shutdown: the first request, when it has not come yet, is waited for (as long
            // as a client may take to send its headers); then whatever is in flight finishes
            // and the connection closes.
            let ended = tokio::select! {
                ended = connection.as_mut() => Some(ended),
                _ = first_request.wait_for(|arrived| *arrived) => None,
                () = tokio::time::sleep(limits.header_read_timeout) => None,
            };
            match ended {
                Some(ended) => ended,
                None => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%remote, error = %e, "connection ended with an error");
    }
}

//! A real load balancer in front of the server: Debian's `haproxy` in TCP mode, sending the
//! PROXY protocol (`send-proxy` for v1, `send-proxy-v2`) to its backends from an address of its
//! own, as a balancer in front of port 22623 that does not keep client addresses (`#[tier(haproxy)]`
//! tests). Killed on drop.
//!
//! [`Haproxy::start`] routes each frontend to one backend; [`Haproxy::balance`] spreads each
//! frontend over several replicas, health-checks each (`GET /healthz`, with the PROXY header
//! as the replicas require it from the balancer), and logs every connection, so a test knows
//! which replica served which client ([`Haproxy::connections`]).

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::mcs::{free_port, poll};

/// Debian's haproxy.
pub const HAPROXY: &str = "/usr/sbin/haproxy";

/// Which header haproxy sends to a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// `send-proxy`: the v1 text line.
    V1,
    /// `send-proxy-v2`: the binary header.
    V2,
}

/// A running haproxy with one frontend per route.
pub struct Haproxy {
    child: Child,
    /// The frontend of each route, in order.
    pub frontends: Vec<SocketAddr>,
    output: Arc<Mutex<String>>,
    connections: Arc<Mutex<Vec<Connection>>>,
    states: Arc<Mutex<Vec<(Instant, String)>>>,
    /// The runtime API's socket ([`Haproxy::set_state`]), when the configuration has one.
    admin: Option<std::path::PathBuf>,
    _dir: tempfile::TempDir,
}

/// Where haproxy's connections to the backends come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Its own address, with a PROXY header naming the client (the replicas trust it with
    /// `--proxy-protocol-from`).
    Proxied(IpAddr, Header),
    /// The client's own address (`usesrc clientip`, Linux's transparent proxying; loopback
    /// addresses are all local, so no routing is needed): a balancer that keeps client
    /// addresses, as a cloud network load balancer does, and needs no flag of the servers
    /// (the original speaks no PROXY protocol). Needs CAP_NET_ADMIN.
    ClientAddress,
}

/// How haproxy checks a replica's health: `GET /healthz` over plain HTTP or over TLS (as the
/// `api-int` load balancer checks `https://<node>:22623/healthz`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Http,
    Https,
}

/// One balanced frontend: the replicas' ports behind it and how each is checked.
#[derive(Clone, Debug)]
pub struct Balance {
    pub backends: Vec<SocketAddr>,
    pub check: Check,
}

/// One client connection as haproxy logged it when it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The client's address and port.
    pub client: SocketAddr,
    /// The frontend's index in [`Haproxy::frontends`].
    pub frontend: usize,
    /// The backend's index in its [`Balance::backends`]; `None` when no server took it.
    pub backend: Option<usize>,
    /// Bytes sent to the client.
    pub bytes: u64,
    /// haproxy's two-letter termination state (`--` for a normal end).
    pub termination: String,
    /// When the harness read the log line (the connection had ended).
    pub seen: Instant,
}

/// The log line of one connection: `conn <client ip>:<port> f<frontend> <server> <bytes>
/// <termination>`, where the server is `r<backend>` or `<NOSRV>`.
const LOG_FORMAT: &str = "conn %ci:%cp %f %s %B %ts";

/// `b<frontend>/r<backend> is DOWN` (or `UP`) from haproxy's line about a health check's
/// verdict (`Server b0/r1 is DOWN, reason: ...`).
fn state_change(line: &str) -> Option<String> {
    let rest = &line[line.find("Server ")? + "Server ".len()..];
    let mut words = rest.split_whitespace();
    let server = words.next()?;
    if words.next()? != "is" {
        return None;
    }
    let state = words.next()?.trim_end_matches(',');
    matches!(state, "DOWN" | "UP").then(|| format!("{server} is {state}"))
}

fn parse_connection(line: &str, seen: Instant) -> Option<Connection> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "conn" {
        return None;
    }
    let client = fields.next()?.parse().ok()?;
    let frontend = fields.next()?.strip_prefix('f')?.parse().ok()?;
    let server = fields.next()?;
    let backend = server.strip_prefix('r').and_then(|i| i.parse().ok());
    let bytes = fields.next()?.parse().ok()?;
    let termination = fields.next()?.to_string();
    Some(Connection {
        client,
        frontend,
        backend,
        bytes,
        termination,
        seen,
    })
}

impl Haproxy {
    /// One TCP frontend on a free loopback port per `(backend, header)`; haproxy connects to
    /// each backend from `source` and sends `header` first.
    pub fn start(routes: &[(SocketAddr, Header)], source: IpAddr) -> Haproxy {
        let dir = tempfile::tempdir().expect("a directory for haproxy.cfg");
        let mut config = String::from(
            "global\n    maxconn 512\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n",
        );
        let mut frontends = Vec::new();
        for (index, (backend, header)) in routes.iter().enumerate() {
            let frontend: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let send = match header {
                Header::V1 => "send-proxy",
                Header::V2 => "send-proxy-v2",
            };
            config.push_str(&format!(
                "\nfrontend f{index}\n    bind {frontend}\n    default_backend b{index}\n\nbackend b{index}\n    server s{index} {backend} {send} source {source}\n"
            ));
            frontends.push(frontend);
        }
        Haproxy::run(dir, &config, frontends)
    }

    /// One TCP frontend on a free loopback port per [`Balance`], spreading connections over
    /// its backends round-robin. haproxy connects to the backends from `source` and sends
    /// `header` first, on health checks too; a replica is taken out after two failed checks
    /// 500 ms apart and back in after two good ones, and a connection it refuses is sent to
    /// another (`retries`, `option redispatch`). Every connection is logged
    /// ([`Haproxy::connections`]).
    pub fn balance(pools: &[Balance], header: Header, source: IpAddr) -> Haproxy {
        Haproxy::balance_from(pools, Source::Proxied(source, header))
    }

    /// [`Haproxy::balance`] with connections to the backends from `source`; a runtime API
    /// socket lets [`Haproxy::set_state`] drain a backend or put it back.
    pub fn balance_from(pools: &[Balance], source: Source) -> Haproxy {
        let dir = tempfile::tempdir().expect("a directory for haproxy.cfg");
        let admin = dir.path().join("admin.sock");
        let (send, check_send, from) = match source {
            Source::Proxied(address, Header::V1) => (
                "send-proxy",
                " check-send-proxy",
                format!("source {address}"),
            ),
            Source::Proxied(address, Header::V2) => (
                "send-proxy-v2",
                " check-send-proxy",
                format!("source {address}"),
            ),
            Source::ClientAddress => ("", "", "source 0.0.0.0 usesrc clientip".to_string()),
        };
        let mut config = format!(
            "global\n    maxconn 4096\n    log stdout format raw local0 info\n    stats socket {} mode 600 level admin\n\ndefaults\n    mode tcp\n    log global\n    log-format \"{LOG_FORMAT}\"\n    timeout connect 2s\n    timeout client 60s\n    timeout server 60s\n    timeout check 2s\n    retries 3\n    option redispatch\n",
            admin.display()
        );
        let mut frontends = Vec::new();
        for (index, pool) in pools.iter().enumerate() {
            let frontend: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let check_tls = match pool.check {
                Check::Http => "",
                Check::Https => " check-ssl verify none",
            };
            config.push_str(&format!(
                "\nfrontend f{index}\n    bind {frontend}\n    default_backend b{index}\n\nbackend b{index}\n    balance roundrobin\n    option httpchk GET /healthz\n    http-check expect status 200\n    default-server {send} check{check_send} inter 500ms fall 2 rise 2 {from}\n"
            ));
            for (replica, backend) in pool.backends.iter().enumerate() {
                config.push_str(&format!("    server r{replica} {backend}{check_tls}\n"));
            }
            frontends.push(frontend);
        }
        let mut haproxy = Haproxy::run(dir, &config, frontends);
        haproxy.admin = Some(admin);
        haproxy
    }

    /// Sets backend `backend` of every frontend to `state` through the runtime API: `drain`
    /// (no new connection, open ones finish), `maint` (out of the balancer) or `ready` (back
    /// in, its health checks deciding).
    pub fn set_state(&self, backend: usize, state: &str) -> Result<(), String> {
        use std::io::Write as _;
        let socket = self
            .admin
            .as_ref()
            .ok_or("this haproxy has no runtime API")?;
        for frontend in 0..self.frontends.len() {
            let mut stream = std::os::unix::net::UnixStream::connect(socket)
                .map_err(|e| format!("{}: {e}", socket.display()))?;
            writeln!(stream, "set server b{frontend}/r{backend} state {state}")
                .map_err(|e| format!("haproxy's runtime API: {e}"))?;
            let mut answer = String::new();
            stream
                .read_to_string(&mut answer)
                .map_err(|e| format!("haproxy's runtime API: {e}"))?;
            if !answer.trim().is_empty() {
                return Err(format!("haproxy: {}", answer.trim()));
            }
        }
        Ok(())
    }

    fn run(dir: tempfile::TempDir, config: &str, frontends: Vec<SocketAddr>) -> Haproxy {
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).expect("haproxy.cfg");
        check(&path, config);
        let mut child = Command::new(HAPROXY)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("haproxy starts");
        let output = Arc::new(Mutex::new(String::new()));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let states = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("stderr")) as Box<dyn Read + Send>,
        ] {
            let output = output.clone();
            let connections = connections.clone();
            let states = states.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Some(change) = state_change(&line) {
                        states.lock().unwrap().push((Instant::now(), change));
                    }
                    // Connection lines are many (one per machine's attempt): kept parsed only.
                    if let Some(connection) = parse_connection(&line, Instant::now()) {
                        connections.lock().unwrap().push(connection);
                        continue;
                    }
                    let mut output = output.lock().unwrap();
                    output.push_str(&line);
                    output.push('\n');
                }
            });
        }
        let mut haproxy = Haproxy {
            child,
            frontends,
            output,
            connections,
            states,
            admin: None,
            _dir: dir,
        };
        for frontend in haproxy.frontends.clone() {
            poll("haproxy's frontends", Duration::from_secs(10), || {
                if let Ok(Some(status)) = haproxy.child.try_wait() {
                    panic!("haproxy exited ({status}):\n{}", haproxy.output());
                }
                TcpStream::connect_timeout(&frontend, Duration::from_millis(200))
                    .ok()
                    .map(|_| ())
            });
        }
        haproxy
    }

    /// What haproxy printed so far (but the connection log lines).
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// When haproxy took a backend out or put it back (`b0/r1 is DOWN`, `b0/r1 is UP`), as the
    /// harness read it.
    pub fn state_changes(&self) -> Vec<(Instant, String)> {
        self.states.lock().unwrap().clone()
    }

    /// Every connection haproxy logged so far, in the order they ended.
    pub fn connections(&self) -> Vec<Connection> {
        self.connections.lock().unwrap().clone()
    }
}

/// `haproxy -c`: the configuration is valid (a clear failure instead of an exit at start).
fn check(path: &Path, config: &str) {
    let out = Command::new(HAPROXY)
        .arg("-c")
        .arg("-f")
        .arg(path)
        .output()
        .expect("haproxy -c runs");
    assert!(
        out.status.success(),
        "haproxy rejects its configuration:\n{config}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

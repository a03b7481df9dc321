//! Test harness for the real `machine-config-server` binary: start it on free loopback ports,
//! wait until it serves, and talk HTTP/1.1 to it over plain TCP or TLS (rustls), byte for byte.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Path of the binary under test: `machine-config-server` of the target directory the running
/// test was built in (cargo builds a package's binaries before its integration tests, and puts
/// the tests in `deps/` beside them).
pub fn bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe
        .parent()
        .expect("the test executable's directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("machine-config-server");
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with cargo, which builds the binary first",
        bin.display()
    );
    bin
}

/// Repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// A free loopback port (bound then released; the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Poll `check` until it returns `Some` or the deadline passes.
pub fn poll<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll_every(Duration::from_millis(20), timeout, check)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Calls `check` every `interval` until it gives a value, or `None` once `timeout` has passed
/// (for harnesses that report a timeout instead of panicking, and benches that time the wait).
pub fn poll_every<T>(
    interval: Duration,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(interval);
    }
}

/// A flag that a test's helper threads and tasks poll to know when to stop.
///
/// Set it through the guard [`StopFlag::set_on_drop`] returns, made at the top of the scope
/// that owns the helpers: the flag is then set on every path out of that scope, a failed
/// assertion's panic included. A `std::thread::scope` whose body panics still joins its
/// threads, and waits forever for one that loops until a flag that nobody sets.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// True once the helpers should stop.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Tells the helpers to stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// A guard that sets the flag when it is dropped (also while unwinding from a panic).
    #[must_use = "the flag is set when the guard is dropped"]
    pub fn set_on_drop(&self) -> SetOnDrop {
        SetOnDrop(self.clone())
    }
}

/// See [`StopFlag::set_on_drop`].
pub struct SetOnDrop(StopFlag);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// The three loopback ports of one server process: TLS, plain HTTP and the admin listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub secure: u16,
    pub insecure: u16,
    pub metrics: u16,
}

impl Ports {
    /// Three free loopback ports, all different: each is released before the next is asked
    /// for, so the kernel may hand out the same one twice (the server then refuses the metrics
    /// address as a serving port's, a usage error, not a bind failure to retry).
    pub fn free() -> Ports {
        let mut taken: Vec<u16> = Vec::with_capacity(3);
        let mut next = || loop {
            let port = free_port();
            if !taken.contains(&port) {
                taken.push(port);
                return port;
            }
        };
        Ports {
            secure: next(),
            insecure: next(),
            metrics: next(),
        }
    }
}

/// A running server process; killed on drop.
pub struct Server {
    child: Child,
    pub secure: SocketAddr,
    pub insecure: SocketAddr,
    pub metrics: SocketAddr,
    output: Arc<Mutex<String>>,
    /// How it was started, so that [`Server::restart`] starts it again the same way.
    args: Vec<String>,
    env: Vec<(String, String)>,
    binary: PathBuf,
    /// Started with exactly `args` ([`Server::start_exact`]): no flag of the harness added.
    exact: bool,
}

impl Server {
    /// `machine-config-server <args…>` with the dev certificate and free ports; waits for the
    /// insecure port's `/healthz`.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with_env(args, &[])
    }

    /// `machine-config-server start` against the API server of `kubeconfig`, with the node
    /// bootstrapper token directory `token_dir`, `apiserver_url` written into the served
    /// kubeconfig and extra environment variables (e.g. the `MCS_MCN_*_MS` timings).
    pub fn start_cluster(
        kubeconfig: &Path,
        apiserver_url: &str,
        token_dir: &Path,
        env: &[(&str, &str)],
    ) -> Server {
        Server::start_cluster_with_flags(kubeconfig, apiserver_url, token_dir, &[], env)
    }

    /// [`Self::start_cluster`] with more command-line flags after the common ones.
    pub fn start_cluster_with_flags(
        kubeconfig: &Path,
        apiserver_url: &str,
        token_dir: &Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let kubeconfig = kubeconfig.to_str().expect("UTF-8 kubeconfig path");
        let token_dir = token_dir.to_str().expect("UTF-8 token directory path");
        let mut args = vec![
            "start",
            "--kubeconfig",
            kubeconfig,
            "--apiserver-url",
            apiserver_url,
            "--bootstrap-token-dir",
            token_dir,
        ];
        args.extend_from_slice(flags);
        Server::start_with_env(&args, env)
    }

    /// [`Self::start`] with extra environment variables for the process.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        // A free port can be taken by another test between `free_port` and the server's bind:
        // then the server exits naming the port, and we try again with new ones.
        let mut last_output = String::new();
        for _ in 0..5 {
            match Server::start_on(Ports::free(), args, env) {
                Ok(server) => return server,
                Err(output) if output.contains("cannot listen") => last_output = output,
                Err(output) => panic!("server exited before serving:\n{output}"),
            }
        }
        panic!("server could not bind free ports in 5 attempts:\n{last_output}");
    }

    /// `machine-config-server <args…>` on the given `ports` (a replica a load balancer knows
    /// by its ports); waits for the insecure port's `/healthz`. `Err(output)` when the process
    /// exited first (for example because a port was taken).
    pub fn start_on(ports: Ports, args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
        Server::start_on_binary(None, ports, args, env)
    }

    /// [`Server::start_on`] with another build of the server (`None`: [`bin`]).
    pub fn start_on_binary(
        binary: Option<&Path>,
        ports: Ports,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Server, String> {
        let binary = binary.map(Path::to_path_buf).unwrap_or_else(bin);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut server = Server::spawn(binary, ports, args, env, false);
        server.wait_started().map(|()| server)
    }

    /// `binary` with exactly `args` (which must make it listen on `ports`' serving ports: the
    /// harness adds no flag, so any build of any server runs as its caller runs it, the
    /// original included); waits for the insecure port's `/healthz`. `ports.metrics` is where
    /// its admin listener is, if it has one.
    pub fn start_exact(
        binary: &Path,
        ports: Ports,
        args: &[String],
        env: &[(String, String)],
    ) -> Result<Server, String> {
        let mut server = Server::spawn(
            binary.to_path_buf(),
            ports,
            args.to_vec(),
            env.to_vec(),
            true,
        );
        server.wait_started().map(|()| server)
    }

    /// Starts the process again, with the same arguments, environment and ports, after it
    /// ended (a [`Server::kill`]: the way a DaemonSet's pod comes back on its node). Retries
    /// while a port is still held by the old process's connections.
    pub fn restart(&mut self) -> Result<(), String> {
        let ports = Ports {
            secure: self.secure.port(),
            insecure: self.insecure.port(),
            metrics: self.metrics.port(),
        };
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut last = String::new();
        for _ in 0..20 {
            let mut next = Server::spawn(
                self.binary.clone(),
                ports,
                self.args.clone(),
                self.env.clone(),
                self.exact,
            );
            match next.wait_started() {
                Ok(()) => {
                    // The old output stays: a restarted replica's log continues it.
                    let old = std::mem::take(&mut *self.output.lock().unwrap());
                    let new = std::mem::take(&mut *next.output.lock().unwrap());
                    *next.output.lock().unwrap() = old + &new;
                    std::mem::swap(self, &mut next);
                    return Ok(());
                }
                Err(output) if output.contains("cannot listen") => {
                    last = output;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(output) => return Err(output),
            }
        }
        Err(format!("could not bind its ports again:\n{last}"))
    }

    fn spawn(
        binary: PathBuf,
        ports: Ports,
        args: Vec<String>,
        env: Vec<(String, String)>,
        exact: bool,
    ) -> Server {
        let Ports {
            secure,
            insecure,
            metrics,
        } = ports;
        let certs = repo().join("certs");
        let mut command = Command::new(&binary);
        if !exact {
            command
                .args(["--bind-address", "127.0.0.1"])
                .args(["--secure-port", &secure.to_string()])
                .args(["--insecure-port", &insecure.to_string()])
                .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")]);
        }
        // The development certificate, unless the test gives its own pair.
        if !exact
            && !args
                .iter()
                .any(|a| a == "--cert" || a.starts_with("--cert="))
        {
            command
                .arg("--cert")
                .arg(certs.join("tls.crt"))
                .arg("--key")
                .arg(certs.join("tls.key"));
        }
        command
            .args(&args)
            .env("RUST_LOG", "debug")
            // As the MCO's DaemonSet runs it: a replica's identity only when a test gives one.
            .env_remove("POD_NAME")
            .env_remove("NODE_NAME")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("cannot start the server binary");
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("stderr")) as Box<dyn Read + Send>,
        ] {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    output.lock().unwrap().push_str(&line);
                    output.lock().unwrap().push('\n');
                }
            });
        }
        Server {
            child,
            secure: ([127, 0, 0, 1], secure).into(),
            insecure: ([127, 0, 0, 1], insecure).into(),
            metrics: ([127, 0, 0, 1], metrics).into(),
            output,
            args,
            env,
            binary,
            exact,
        }
    }

    /// Waits until `/readyz` answers 200 and, in cluster mode, `/status` shows every pool
    /// ready (a layered pool waits for its own caches, its Nodes say, after the server is
    /// ready).
    pub fn wait_every_pool_ready(&self, timeout: Duration) {
        poll("every pool ready", timeout, || {
            if request(self.metrics, None, "GET", "/readyz", &[]).status != 200 {
                return None;
            }
            let page = request(self.metrics, None, "GET", "/status", &[]).json();
            let pools = page["readiness"].as_object().cloned().unwrap_or_default();
            pools
                .values()
                .all(|pool| pool["ready"] == true)
                .then_some(())
        });
    }

    /// The admin listener's `/status` page.
    pub fn admin_status(&self) -> serde_json::Value {
        request(self.metrics, None, "GET", "/status", &[]).json()
    }

    /// The value of the sample of `name` whose labels include `labels`, summed over the
    /// samples that match (`None` when none does), from one scrape of `/metrics`.
    pub fn metric_value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let scraped = request(self.metrics, None, "GET", "/metrics", &[]);
        let text = String::from_utf8_lossy(&scraped.body);
        let mut total = None;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let (metric, label_text) = series.split_once('{').unwrap_or((series, ""));
            let matches = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
            if let (true, Ok(value)) = (matches, value.parse::<f64>()) {
                *total.get_or_insert(0.0) += value;
            }
        }
        total
    }

    /// Bootstrap mode on `base_dir` with its `kubeconfig` file.
    pub fn bootstrap(base_dir: &Path, extra: &[&str]) -> Server {
        let base = base_dir.to_str().expect("utf-8 path");
        let kubeconfig = base_dir.join("kubeconfig");
        let mut args = vec![
            "bootstrap",
            "--server-basedir",
            base,
            "--bootstrap-kubeconfig",
        ];
        let kubeconfig = kubeconfig.to_str().expect("utf-8 path").to_string();
        args.push(&kubeconfig);
        args.extend_from_slice(extra);
        Server::start(&args)
    }

    /// Wait for `/healthz` on the insecure port; `Err(output)` if the process exited first.
    fn wait_started(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(response) = try_request(self.insecure, None, "GET", "/healthz", &[]) {
                if response.status == 200 {
                    return Ok(());
                }
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                // Let the reader threads collect the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return Err(self.output());
            }
            assert!(
                Instant::now() < deadline,
                "server did not become healthy:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The process id (part of identities the server derives, such as its lease holder).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the server printed so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Plain-HTTP request on the insecure port.
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        request(self.insecure, None, method, path, headers)
    }

    /// TLS request on the secure port, trusting the development CA.
    pub fn https(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        request(self.secure, Some(dev_ca_client()), method, path, headers)
    }

    /// Send SIGTERM.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// SIGKILL ([`Child::kill`]), as an OOM kill, a kernel panic or a power loss ends it: no
    /// final write, no lease release. Returns once the process is gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Wait for the process to exit (after [`Self::terminate`]).
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response as received.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A rustls client config trusting `certs/ca.crt`.
pub fn dev_ca_client() -> Arc<rustls::ClientConfig> {
    client_trusting(&repo().join("certs/ca.crt"))
}

/// A rustls client config trusting the CA in `ca_file`.
pub fn client_trusting(ca_file: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).expect("CA file") {
        roots.add(cert.expect("CA PEM")).expect("CA cert");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// One request on a fresh connection (`Connection: close`), panicking on transport errors.
pub fn request(
    address: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Response {
    try_request(address, tls, method, path, headers)
        .unwrap_or_else(|e| panic!("{method} {path} on {address}: {e}"))
}

/// Raw request bytes: `METHOD PATH HTTP/1.1`, Host, the given headers, `Connection: close`.
pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    raw.into_bytes()
}

/// Raw bytes of a `POST` of the JSON `body` to `path` (`Content-Length` set, `Connection:
/// close`), with extra `headers`.
pub fn post_json_bytes(path: &str, body: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    raw.into_bytes()
}

/// One request; transport errors returned.
pub fn try_request(
    address: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let raw = exchange(address, tls, &request_bytes(method, path, headers))?;
    parse_response(&raw, method == "HEAD")
}

/// Write `bytes` on a fresh connection and read until the server closes it.
pub fn exchange(
    address: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    bytes: &[u8],
) -> std::io::Result<Vec<u8>> {
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut out = Vec::new();
    match tls {
        None => {
            let mut stream = stream;
            stream.write_all(bytes)?;
            stream.read_to_end(&mut out)?;
        }
        Some(config) => {
            let mut stream = tls_client(config, stream)?;
            stream.write_all(bytes)?;
            read_to_close(&mut stream, &mut out)?;
        }
    }
    Ok(out)
}

/// A TLS client for `localhost` over `stream`, trusting what `config` trusts; the handshake
/// happens on the first write or read.
pub fn tls_client(
    config: Arc<rustls::ClientConfig>,
    stream: TcpStream,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    let connection = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    Ok(rustls::StreamOwned::new(connection, stream))
}

/// Reads a TLS stream until the server closes it, appending to `out`. Servers may close without
/// close_notify once the response is complete: that end is not an error.
pub fn read_to_close(
    stream: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    match stream.read_to_end(out) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
        Err(e) => Err(e),
    }
}

/// [`exchange`] from the local address `source` (any 127.0.0.0/8 address on loopback): a
/// machine of its own as far as the server, or a load balancer in front of it, can tell.
pub fn exchange_from(
    source: std::net::IpAddr,
    address: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    bytes: &[u8],
) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let deadline = Duration::from_secs(30);
        let socket = if source.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.bind(SocketAddr::new(source, 0))?;
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(address))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        let mut out = Vec::new();
        let exchange = async {
            match tls {
                None => {
                    let mut stream = stream;
                    stream.write_all(bytes).await?;
                    stream.read_to_end(&mut out).await?;
                }
                Some(config) => {
                    let name =
                        rustls::pki_types::ServerName::try_from("localhost").expect("server name");
                    let mut stream = tokio_rustls::TlsConnector::from(config)
                        .connect(name, stream)
                        .await?;
                    stream.write_all(bytes).await?;
                    match stream.read_to_end(&mut out).await {
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok::<(), std::io::Error>(())
        };
        tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        Ok(out)
    })
}

/// One request from the local address `source` ([`exchange_from`]).
pub fn request_from(
    source: std::net::IpAddr,
    address: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let raw = exchange_from(source, address, tls, &request_bytes(method, path, headers))?;
    parse_response(&raw, method == "HEAD")
}

/// Parse one HTTP/1.1 response (body by Content-Length, or to the end).
pub fn parse_response(raw: &[u8], head: bool) -> std::io::Result<Response> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head_text = std::str::from_utf8(&raw[..end]).map_err(|_| invalid("headers not UTF-8"))?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().ok_or_else(|| invalid("no status line"))?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let mut headers = BTreeMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| invalid("bad header"))?;
        headers
            .entry(name.trim().to_ascii_lowercase())
            .and_modify(|v: &mut String| {
                v.push_str(", ");
                v.push_str(value.trim())
            })
            .or_insert_with(|| value.trim().to_string());
    }
    let rest = &raw[end + 4..];
    let body = if head {
        Vec::new()
    } else {
        match headers
            .get("content-length")
            .and_then(|v| v.parse::<usize>().ok())
        {
            Some(len) => rest
                .get(..len)
                .ok_or_else(|| invalid("body shorter than Content-Length"))?
                .to_vec(),
            None => rest.to_vec(),
        }
    };
    if head && !rest.is_empty() {
        return Err(invalid("HEAD response carried a body"));
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Copy a directory tree (for tests that modify a base directory).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The files of a served Ignition config (any spec) by path: decoded contents of each entry.
pub fn served_files(config: &serde_json::Value) -> Vec<(String, Vec<u8>)> {
    config["storage"]["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|file| {
                    let path = file["path"].as_str().unwrap_or_default().to_string();
                    let source = file["contents"]["source"].as_str().unwrap_or_default();
                    let data = machine_config_server::ignition::dataurl::decode(source)
                        .unwrap_or_default();
                    (path, data)
                })
                .collect()
        })
        .unwrap_or_default()
}

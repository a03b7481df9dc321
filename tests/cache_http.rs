//! Payload cache correctness at the HTTP level: the real binary in bootstrap mode on an ephemeral
//! loopback port, serving a temporary copy of `config/bootstrap`, asked by a plain HTTP/1.1 client.
//!
//! - Every input of a render (the MachineConfig, the pool's choice of MachineConfig, the
//!   kubeconfig, the ControllerConfig) is served as soon as the server notices the change: a
//!   cached body is never served for a newer generation.
//! - `HEAD` and `GET` agree on `Content-Length`, whichever comes first (cold or cached).
//!
//! The plain-HTTP port is used: TLS has its own tests and does not change what the cache serves.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Ignition's own Accept header shape, asking for the canonical spec.
const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1";
const DEADLINE: Duration = Duration::from_secs(20);

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn content_length(&self) -> usize {
        self.header("content-length")
            .expect("Content-Length header")
            .parse()
            .expect("numeric Content-Length")
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh connection (`Connection: close`), the way a booting machine asks.
fn request(address: SocketAddr, method: &str, path: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAccept: {ACCEPT}\r\n\
         User-Agent: Ignition/2.20.0\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response has a header block");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn get_config(address: SocketAddr) -> Response {
    let response = request(address, "GET", "/config/master").expect("GET /config/master");
    assert_eq!(
        response.status,
        200,
        "GET /config/master: {}",
        response.text()
    );
    response
}

/// The real binary, killed when dropped.
struct Server {
    child: Child,
    address: SocketAddr,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// Starts the server on `base_dir`. A port picked free can be taken before the server binds
/// it, so a start that exits early is retried on another port.
fn start(base_dir: &Path, log: PathBuf) -> Server {
    for _ in 0..3 {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_machine-config-server"))
            .arg("bootstrap")
            .arg("--server-basedir")
            .arg(base_dir)
            .arg("--bootstrap-kubeconfig")
            .arg(base_dir.join("kubeconfig"))
            .args(["--secure-port", "0", "--insecure-port", &port.to_string()])
            .args(["--bind-address", "127.0.0.1", "--metrics-bind-address", ""])
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start machine-config-server");
        let mut server = Server {
            child,
            address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            log: log.clone(),
        };
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                break;
            }
            if matches!(request(server.address, "GET", "/healthz"), Ok(r) if r.status == 200) {
                return server;
            }
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!("server did not become ready; log:\n{}", server.log());
    }
    panic!("machine-config-server did not start");
}

/// A writable copy of the example bootstrap directory.
fn base_dir() -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/bootstrap");
    let temp = tempfile::tempdir().expect("temp dir");
    copy_dir(&source, temp.path());
    temp
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Replaces `from` by `to` in a file (panics if `from` is absent: the edit must be real).
fn edit(path: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).expect("read file to edit");
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    fs::write(path, text.replace(from, to)).expect("write edited file");
}

/// GETs until the body contains `marker`, within the deadline; returns that body.
fn wait_for_body_with(server: &Server, marker: &str) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let body = get_config(server.address).text();
        if body.contains(marker) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "the change ({marker:?}) was not served within {DEADLINE:?}; log:\n{}",
            server.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_changed_input_is_served_on_the_next_request() {
    let dir = base_dir();
    let server = start(dir.path(), dir.path().join("server.log"));
    let mc = dir
        .path()
        .join("machine-configs/rendered-master-example.yaml");

    let first = get_config(server.address).text();
    assert!(
        first.contains("Served%20by%20machine-config-server%20(example)"),
        "{first}"
    );
    // Warm the cache: the same body again.
    assert_eq!(get_config(server.address).text(), first);

    // 1. The rendered MachineConfig's content.
    edit(&mc, "(example)%0A", "(edited1)%0A");
    let body = wait_for_body_with(&server, "(edited1)");
    assert!(
        !body.contains("(example)%0A"),
        "old content served with the new"
    );
    // Once the change is served it stays served: no flip back to an older cached body.
    for _ in 0..5 {
        assert!(get_config(server.address).text().contains("(edited1)"));
    }

    // 2. The kubeconfig written to the node.
    let kubeconfig = dir.path().join("kubeconfig");
    let mut text = fs::read_to_string(&kubeconfig).expect("kubeconfig");
    text.push_str("# cachemarkerkubeconfig\n");
    fs::write(&kubeconfig, text).expect("write kubeconfig");
    wait_for_body_with(&server, "cachemarkerkubeconfig");

    // 3. The pool switches to another rendered MachineConfig.
    let next = dir.path().join("machine-configs/rendered-master-next.yaml");
    let mc_text = fs::read_to_string(&mc).expect("read mc");
    fs::write(
        &next,
        mc_text
            .replace("rendered-master-example", "rendered-master-next")
            .replace("(edited1)%0A", "(next)%0A"),
    )
    .expect("write next mc");
    edit(
        &dir.path().join("machine-pools/master.yaml"),
        "name: rendered-master-example",
        "name: rendered-master-next",
    );
    let body = wait_for_body_with(&server, "rendered-master-next");
    assert!(
        body.contains("(next)"),
        "the new MachineConfig's content is served"
    );

    // 4. Back to exactly the first MachineConfig content: a new generation, not a stale entry.
    edit(
        &dir.path().join("machine-pools/master.yaml"),
        "name: rendered-master-next",
        "name: rendered-master-example",
    );
    let body = wait_for_body_with(&server, "rendered-master-example");
    assert!(
        body.contains("(edited1)"),
        "the current content of the old file is served"
    );
}

#[test]
fn head_and_get_agree_on_content_length() {
    let dir = base_dir();
    let server = start(dir.path(), dir.path().join("server.log"));

    // HEAD first: the cold render is triggered by a HEAD.
    let cold_head = request(server.address, "HEAD", "/config/master").expect("HEAD");
    assert_eq!(cold_head.status, 200, "log:\n{}", server.log());
    assert!(cold_head.body.is_empty(), "HEAD has no body");
    let get = get_config(server.address);
    assert_eq!(
        get.content_length(),
        get.body.len(),
        "GET's Content-Length is exact"
    );
    assert_eq!(cold_head.content_length(), get.content_length());
    assert_eq!(get.header("content-type"), Some("application/json"));
    assert_eq!(cold_head.header("content-type"), Some("application/json"));
    let warm_head = request(server.address, "HEAD", "/config/master").expect("HEAD");
    assert_eq!(warm_head.content_length(), get.content_length());
    assert!(warm_head.body.is_empty());

    // After a change, GET first (cold), then HEAD (cached): still the same length.
    let mc = dir
        .path()
        .join("machine-configs/rendered-master-example.yaml");
    edit(&mc, "(example)%0A", "(a%20longer%20edited%20text)%0A");
    let changed = wait_for_body_with(&server, "longer");
    let head = request(server.address, "HEAD", "/config/master").expect("HEAD");
    assert_eq!(head.content_length(), changed.len());
    assert_ne!(
        head.content_length(),
        get.content_length(),
        "the length moved with the body"
    );
}

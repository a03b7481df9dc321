//! A real load balancer in front of the server: Debian's `haproxy` in TCP mode, sending the
//! PROXY protocol (`send-proxy` for v1, `send-proxy-v2`) to its backends from an address of its
//! own, as a balancer in front of port 22623 that does not keep client addresses (`#[tier(haproxy)]`
//! tests). Killed on drop.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    _dir: tempfile::TempDir,
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
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, &config).expect("haproxy.cfg");
        check(&path, &config);
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
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("stderr")) as Box<dyn Read + Send>,
        ] {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
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

    /// What haproxy printed so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
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

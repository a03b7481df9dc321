//! Child processes of the real-server tier: free loopback ports, a child that is killed and
//! reaped when its handle drops, its log kept in a file for failure messages, and polling with
//! a deadline.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 that was free a moment ago (the OS picked it for a listener that is
/// closed again). Another process may take it before ours binds it: callers that start a
/// server on it retry with a new port when the server exits early.
pub fn free_loopback_port() -> Result<u16, String> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// A running child process; dropping the handle kills it and waits for it.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program args`, stdout and stderr appended to `log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Self, String> {
        let open = || {
            File::options()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| format!("{}: {e}", log.display()))
        };
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(open()?)
            .stderr(open()?)
            .spawn()
            .map_err(|e| format!("starting {name} ({}): {e}", program.display()))?;
        Ok(Process {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(30);
        format!(
            "{} log ({}), last lines:\n{}",
            self.name,
            self.log.display(),
            lines[start..].join("\n")
        )
    }

    /// Kills the process (SIGKILL, like a crash) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Calls `check` until it returns `Ok(Some(value))`, an error, or `timeout` passes. `check`
/// returns `Ok(None)` for "not yet".
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        match check() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) if e.starts_with("fatal: ") => return Err(e),
            Err(e) => last = e,
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what}: not within {timeout:?} (last error: {last})"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A plain-HTTP request to `127.0.0.1:port` (HTTP/1.0, so the body is never chunked): the
/// status code and the body.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    let timeout = Some(Duration::from_secs(10));
    let _ = stream.set_read_timeout(timeout);
    let _ = stream.set_write_timeout(timeout);
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("read: {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {response:?}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

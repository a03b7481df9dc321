//! A real Prometheus (Debian's `prometheus` server) on loopback, scraping the servers a test
//! names through file service discovery, and its HTTP API: a range query as a console panel
//! asks it, and the raw samples of a series. The rehearsal's operator view
//! (`rehearsal::dashboard`) is its user: the console dashboard's queries evaluated over a
//! storm that Prometheus scraped as the cluster's monitoring scrapes the replicas.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::Value;

/// Debian's Prometheus server (package `prometheus`, beside `promtool`).
pub const PROMETHEUS: &str = "/usr/bin/prometheus";

/// How often every target is scraped: the storm lasts about a minute, so the console's default
/// 30 s would leave a panel two points.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

/// One scrape target: a server's admin listener (`/metrics` over plain HTTP) and the `pod`
/// label Prometheus puts on its series (what the ServiceMonitor's endpoints add in a cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub pod: String,
    pub address: SocketAddr,
}

/// One series of a query's answer: its labels and its `(unix seconds, value)` points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(f64, f64)>,
}

/// The running server; killed and its storage removed on drop.
pub struct Prometheus {
    child: Child,
    pub address: SocketAddr,
    targets_file: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` every [`SCRAPE_INTERVAL`]; returns once it is ready.
    pub fn start(targets: &[Target]) -> Result<Prometheus, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a directory for Prometheus: {e}"))?;
        let config = dir.path().join("prometheus.yml");
        let targets_file = dir.path().join("targets.json");
        let interval = format!("{}s", SCRAPE_INTERVAL.as_secs());
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n  evaluation_interval: {interval}\n\
                 scrape_configs:\n  - job_name: machine-config-server\n    file_sd_configs:\n      - files: ['{}']\n",
                targets_file.display()
            ),
        )
        .map_err(|e| format!("{}: {e}", config.display()))?;
        write_targets(&targets_file, targets)?;
        let log = dir.path().join("prometheus.log");
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut last = String::new();
        // A free port can be taken between its probe and Prometheus binding it: a few tries.
        for _ in 0..5 {
            let address = SocketAddr::from(([127, 0, 0, 1], crate::mcs::free_port()));
            let output = || log_file.try_clone().map_err(|e| e.to_string());
            let mut child = Command::new(PROMETHEUS)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={address}"))
                .arg("--log.level=warn")
                .stdin(Stdio::null())
                .stdout(output()?)
                .stderr(output()?)
                .spawn()
                .map_err(|e| format!("{PROMETHEUS}: {e} (install Debian's prometheus)"))?;
            let ready =
                crate::mcs::poll_every(Duration::from_millis(100), Duration::from_secs(30), || {
                    if matches!(child.try_wait(), Ok(Some(_))) {
                        return Some(false);
                    }
                    get(address, "/-/ready").ok().map(|_| true)
                });
            if ready == Some(true) {
                return Ok(Prometheus {
                    child,
                    address,
                    targets_file,
                    log,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            last = std::fs::read_to_string(&log).unwrap_or_default();
            if !last.contains("address already in use") {
                return Err(format!(
                    "Prometheus did not become ready on {address}:\n{last}"
                ));
            }
        }
        Err(format!("Prometheus found no free port:\n{last}"))
    }

    /// What it scrapes from now on (Prometheus watches the file and picks the change up at
    /// once, as it does a ServiceMonitor's endpoints changing).
    pub fn set_targets(&self, targets: &[Target]) -> Result<(), String> {
        write_targets(&self.targets_file, targets)
    }

    /// `query` evaluated every `step` from `start` to `end` (unix seconds), as a panel asks.
    pub fn query_range(
        &self,
        query: &str,
        start: f64,
        end: f64,
        step: Duration,
    ) -> Result<Vec<Series>, String> {
        let path = format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={}",
            utf8_percent_encode(query, NON_ALPHANUMERIC),
            step.as_secs_f64()
        );
        let data = self.data(&path)?;
        series_of(&data)
    }

    /// The raw samples of `selector` scraped in the `range` before `at` (unix seconds): each
    /// series' every scrape, as stored.
    pub fn samples(&self, selector: &str, at: f64, range: Duration) -> Result<Vec<Series>, String> {
        let query = format!("{selector}[{}s]", range.as_secs().max(1));
        let path = format!(
            "/api/v1/query?query={}&time={at:.3}",
            utf8_percent_encode(&query, NON_ALPHANUMERIC)
        );
        let data = self.data(&path)?;
        series_of(&data)
    }

    /// Everything Prometheus logged (warnings and errors).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The `data` of an API answer whose `status` is `success`.
    fn data(&self, path: &str) -> Result<Value, String> {
        let body = get(self.address, path)?;
        let answer: Value =
            serde_json::from_slice(&body).map_err(|e| format!("GET {path}: not JSON ({e})"))?;
        if answer["status"] != "success" {
            return Err(format!("GET {path}: {answer}"));
        }
        Ok(answer["data"].clone())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` as HTTP/1.0, so that the answer comes whole and unchunked, its connection
/// closed after it.
fn get(address: SocketAddr, path: &str) -> Result<Vec<u8>, String> {
    use std::io::{Read, Write};
    let fail = |e: std::io::Error| format!("GET {path}: {e}");
    let mut stream =
        std::net::TcpStream::connect_timeout(&address, Duration::from_secs(5)).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(fail)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").map_err(fail)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(fail)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("GET {path}: no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head.split(' ').nth(1).unwrap_or_default();
    let body = raw[split + 4..].to_vec();
    if status != "200" {
        return Err(format!(
            "GET {path}: {status} {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(body)
}

/// The file service discovery's file, replaced whole (Prometheus never reads half of it).
fn write_targets(path: &std::path::Path, targets: &[Target]) -> Result<(), String> {
    let groups: Vec<Value> = targets
        .iter()
        .map(|t| {
            serde_json::json!({
                "targets": [t.address.to_string()],
                "labels": {"pod": t.pod},
            })
        })
        .collect();
    let next = path.with_extension("json.next");
    std::fs::write(&next, Value::Array(groups).to_string())
        .and_then(|()| std::fs::rename(&next, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// A `matrix` or `vector` answer as series (a vector's sample is one point).
pub fn series_of(data: &Value) -> Result<Vec<Series>, String> {
    let point = |pair: &Value| -> Option<(f64, f64)> {
        let at = pair.get(0)?.as_f64()?;
        // Prometheus sends values as strings ("NaN" and "+Inf" included).
        let value = pair.get(1)?.as_str()?.parse::<f64>().ok()?;
        Some((at, value))
    };
    let results = data["result"]
        .as_array()
        .ok_or_else(|| format!("no result in {data}"))?;
    Ok(results
        .iter()
        .map(|result| {
            let labels = result["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let points = match (result.get("values"), result.get("value")) {
                (Some(values), _) => values
                    .as_array()
                    .map(|values| values.iter().filter_map(point).collect())
                    .unwrap_or_default(),
                (None, Some(value)) => point(value).into_iter().collect(),
                (None, None) => Vec::new(),
            };
            Series { labels, points }
        })
        .collect())
}

/// How much a counter grew over its samples, counting a drop as a restart from zero (what
/// `increase` does, without its extrapolation to the window's edges): `baseline` is its value
/// before the window (0 when the series began inside it).
pub fn counter_growth(points: &[(f64, f64)], baseline: f64) -> f64 {
    let mut previous = baseline;
    let mut grown = 0.0;
    for &(_, value) in points {
        if value >= previous {
            grown += value - previous;
        } else {
            grown += value;
        }
        previous = value;
    }
    grown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_grows_across_a_restart() {
        let points = [(1.0, 3.0), (2.0, 5.0), (3.0, 1.0), (4.0, 4.0)];
        assert_eq!(counter_growth(&points, 0.0), 9.0);
        assert_eq!(counter_growth(&points, 3.0), 6.0);
    }

    #[test]
    fn matrix_and_vector_answers_read_as_series() {
        let data = serde_json::json!({"resultType": "matrix", "result": [
            {"metric": {"pool": "worker"}, "values": [[10.5, "1"], [11.5, "NaN"]]},
        ]});
        let series = series_of(&data).unwrap();
        assert_eq!(series[0].labels["pool"], "worker");
        assert_eq!(series[0].points[0], (10.5, 1.0));
        assert!(series[0].points[1].1.is_nan());
        let data = serde_json::json!({"resultType": "vector", "result": [
            {"metric": {}, "value": [10.0, "2"]},
        ]});
        assert_eq!(series_of(&data).unwrap()[0].points, vec![(10.0, 2.0)]);
    }
}

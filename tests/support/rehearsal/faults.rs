//! The control plane's bad day during the scale-up, beyond the SIGKILL and the brownout: the
//! kube-apiserver restarted (every watch broken at once), its history compacted (each watch
//! resumes too late: 410 Gone, a relist), the serving certificate rotated on disk, one replica
//! cut off from the API while the others are fine, one replica's clock minutes ahead. This
//! module owns the stage they need (the serving certificate as a Secret volume, the skewed
//! replica's clock), which fault each replica's API path carries at any moment, and one verdict
//! per fault: what it cost the machines, what it cost the cluster, and its rule.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::verdict::{busiest_window, percentile, replica_of, served_by, verdict, Verdict};
use super::{Facts, FaultKind, FaultMark, Knobs, MachineRun};
use crate::fault_proxy::Fault;

/// The replica whose clock runs ahead all day.
pub const SKEWED_REPLICA: usize = 2;

/// What the replicas are started with for the faults: the serving certificate in a directory
/// laid out as the kubelet mounts a Secret (`tls.crt -> ..data/tls.crt`, `..data -> ..v1`,
/// swapped atomically on rotation), and libfaketime for the skewed replica.
pub struct Stage {
    dir: tempfile::TempDir,
    clock_ahead: Option<Duration>,
    generation: Mutex<u32>,
}

impl Stage {
    pub fn new(knobs: &Knobs) -> Result<Stage, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a certificate volume: {e}"))?;
        let certs = crate::mcs::repo().join("certs");
        let first = dir.path().join("..v1");
        std::fs::create_dir(&first).map_err(|e| e.to_string())?;
        for file in ["tls.crt", "tls.key"] {
            std::fs::copy(certs.join(file), first.join(file))
                .map_err(|e| format!("{file}: {e}"))?;
        }
        symlink("..v1", &dir.path().join("..data"))?;
        for file in ["tls.crt", "tls.key"] {
            symlink(&format!("..data/{file}"), &dir.path().join(file))?;
        }
        let clock_ahead = (knobs.clock_ahead > Duration::ZERO).then_some(knobs.clock_ahead);
        if clock_ahead.is_some() && crate::libfaketime().is_none() {
            return Err("the skewed clock needs libfaketime (Debian package `libfaketime`), or set MCS_REHEARSAL_CLOCK_AHEAD_SECONDS=0".into());
        }
        Ok(Stage {
            dir,
            clock_ahead,
            generation: Mutex::new(1),
        })
    }

    /// `--cert` and `--key` of every replica: the volume's paths.
    pub fn serving_args(&self) -> Vec<String> {
        vec![
            "--cert".into(),
            self.dir.path().join("tls.crt").display().to_string(),
            "--key".into(),
            self.dir.path().join("tls.key").display().to_string(),
        ]
    }

    /// Replica `index`'s environment for the faults: the skewed one's libfaketime (the wall
    /// clock ahead, the monotonic clock left alone, as NTP leaves it).
    pub fn env_of(&self, index: usize) -> Vec<(String, String)> {
        match (self.clock_ahead, crate::libfaketime()) {
            (Some(ahead), Some(library)) if index == SKEWED_REPLICA => vec![
                ("LD_PRELOAD".into(), library.display().to_string()),
                ("FAKETIME".into(), format!("+{}s", ahead.as_secs())),
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
                ("FAKETIME_DONT_RESET".into(), "1".into()),
            ],
            _ => Vec::new(),
        }
    }

    pub fn clock_ahead(&self) -> Option<Duration> {
        self.clock_ahead
    }

    /// A new pair for the same names, signed by the same CA, swapped in as the kubelet swaps a
    /// Secret's files (one rename); returns the new certificate's serial (hex, as openssl
    /// prints it).
    pub fn rotate(&self) -> Result<String, String> {
        let mut generation = self.generation.lock().unwrap();
        *generation += 1;
        let name = format!("..v{generation}");
        let next = self.dir.path().join(&name);
        std::fs::create_dir(&next).map_err(|e| e.to_string())?;
        let serial = format!("{:016X}", 0x5EED_0000_0000_0000u64 + u64::from(*generation));
        issue_serving_pair(&next, &serial)?;
        let link = self.dir.path().join("..data_next");
        symlink(&name, &link)?;
        std::fs::rename(&link, self.dir.path().join("..data")).map_err(|e| e.to_string())?;
        Ok(serial)
    }
}

fn symlink(target: &str, link: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, link).map_err(|e| format!("{}: {e}", link.display()))
}

/// A serving pair like the development one (ECDSA P-256, `localhost`, `127.0.0.1`, `::1`),
/// signed by the development CA, with `serial`, written as `tls.crt` and `tls.key` in `dir`.
fn issue_serving_pair(dir: &Path, serial: &str) -> Result<(), String> {
    let certs = crate::mcs::repo().join("certs");
    let run = |args: &[&str]| -> Result<(), String> {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(&[
        "ecparam",
        "-genkey",
        "-name",
        "prime256v1",
        "-noout",
        "-out",
        "ec.key",
    ])?;
    run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", "ec.key", "-out", "tls.key",
    ])?;
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| e.to_string())?;
    run(&[
        "req",
        "-new",
        "-key",
        "tls.key",
        "-subj",
        "/O=machine-config-server development/CN=localhost",
        "-out",
        "tls.csr",
    ])?;
    let ca = certs.join("ca.crt").display().to_string();
    let ca_key = certs.join("ca.key").display().to_string();
    run(&[
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        &ca,
        "-CAkey",
        &ca_key,
        "-set_serial",
        &format!("0x{serial}"),
        "-days",
        "30",
        "-extfile",
        "ext.cnf",
        "-out",
        "tls.crt",
    ])?;
    for scratch in ["ec.key", "tls.csr", "ext.cnf"] {
        let _ = std::fs::remove_file(dir.join(scratch));
    }
    Ok(())
}

/// The serial of the certificate a TLS server at `address` presents (`None`: no handshake).
pub fn presented_serial(address: std::net::SocketAddr) -> Option<String> {
    let stream = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut tls = crate::mcs::tls_client(crate::mcs::dev_ca_client(), stream).ok()?;
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).ok()?;
    }
    let der = tls.conn.peer_certificates()?.first()?.to_vec();
    let out = std::process::Command::new("openssl")
        .args(["x509", "-inform", "DER", "-noout", "-serial"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take()?.write_all(&der).ok()?;
            child.wait_with_output().ok()
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .strip_prefix("serial=")
        .map(|s| s.to_uppercase())
}

/// When each replica first presented the rotated certificate (watched from a thread of its
/// own so that the day's script keeps its times).
#[derive(Clone, Debug, Default)]
pub struct RotationSeen {
    pub serial: String,
    /// Per replica: when it first presented the new serial (`None`: not within the watch).
    pub presented: Vec<Option<Duration>>,
}

pub fn watch_rotation(
    secure: Vec<std::net::SocketAddr>,
    serial: String,
    t0: Instant,
) -> Arc<Mutex<RotationSeen>> {
    let seen = Arc::new(Mutex::new(RotationSeen {
        serial: serial.clone(),
        presented: vec![None; secure.len()],
    }));
    let noted = seen.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let mut all = true;
            for (index, address) in secure.iter().enumerate() {
                if noted.lock().unwrap().presented[index].is_some() {
                    continue;
                }
                all = false;
                if presented_serial(*address).as_deref() == Some(serial.as_str()) {
                    noted.lock().unwrap().presented[index] = Some(t0.elapsed());
                }
            }
            if all {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    seen
}

/// Which fault each replica's API path carries, from the day's state: a broken path (the
/// negative knob) over a cut-off over the brownout's latency. (The compaction is a moment,
/// not a state: its `Fault::Gone` ends the watches open then, and setting it again would
/// compact again.)
#[derive(Clone, Debug, Default)]
pub struct Paths {
    pub broken: Option<usize>,
    pub cut: Option<usize>,
    pub latency: Option<Duration>,
}

impl Paths {
    pub fn fault_of(&self, index: usize) -> Fault {
        if self.broken == Some(index) {
            Fault::RefuseWatches
        } else if self.cut == Some(index) {
            Fault::Blackhole
        } else if let Some(latency) = self.latency {
            Fault::Latency(latency)
        } else {
            Fault::None
        }
    }
}

/// What a fault cost the machines that met it: those whose fetch overlapped its window (plus
/// the replicas' settle time), against the machines that met no fault at all.
struct Cost {
    met: usize,
    retries: usize,
    longest: Duration,
    p99: Duration,
    p99_outside: Duration,
    transport_errors: usize,
}

fn fetch_span(run: &MachineRun) -> Option<(Duration, Duration)> {
    let first = run.fetch.attempts.first()?;
    let last = run.fetch.attempts.last()?;
    Some((first.started, last.ended))
}

fn cost(facts: &Facts, window: (Duration, Duration)) -> Cost {
    let (began, ended) = (window.0, window.1 + facts.knobs.settle);
    let overlaps = |(a, b): (Duration, Duration), (c, d): (Duration, Duration)| a <= d && c <= b;
    let in_any_fault = |span: (Duration, Duration)| {
        fault_windows(facts)
            .iter()
            .any(|w| overlaps(span, (w.0, w.1 + facts.knobs.settle)))
    };
    let (mut met, mut retries, mut longest, mut transport_errors) = (0, 0, Duration::ZERO, 0);
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for run in &facts.machines {
        let Some(span) = fetch_span(run) else {
            continue;
        };
        let took = span.1.saturating_sub(span.0);
        if overlaps(span, (began, ended)) {
            met += 1;
            retries += run.fetch.attempts.len().saturating_sub(1);
            transport_errors += run
                .fetch
                .attempts
                .iter()
                .filter(|a| a.status().is_none() && a.ended >= began && a.started <= ended)
                .count();
            longest = longest.max(took);
            inside.push(took);
        } else if !in_any_fault(span) {
            outside.push(took);
        }
    }
    Cost {
        met,
        retries,
        longest,
        p99: percentile(&inside, 0.99),
        p99_outside: percentile(&outside, 0.99),
        transport_errors,
    }
}

/// Every fault's window (the skewed clock's, all day, left out: it is no moment of the storm).
fn fault_windows(facts: &Facts) -> Vec<(Duration, Duration)> {
    let mut windows: Vec<(Duration, Duration)> = facts
        .marks
        .faults
        .iter()
        .filter(|f| f.kind != FaultKind::ClockAhead)
        .map(|f| (f.began, f.ended))
        .collect();
    windows.extend(
        facts
            .marks
            .kill
            .map(|k| (k, facts.marks.restarted.unwrap_or(k))),
    );
    windows.extend(facts.marks.brownout);
    windows
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

impl Cost {
    fn text(&self) -> String {
        format!(
            "{} machines met it: {} retries, {} connection errors, longest wait {}, p99 {} (outside every fault {})",
            self.met,
            self.retries,
            self.transport_errors,
            secs(self.longest),
            secs(self.p99),
            secs(self.p99_outside)
        )
    }
}

/// The API writes of every replica in the busiest second of the ten after `at`.
fn busiest_writes_after(facts: &Facts, at: Duration) -> usize {
    let times: Vec<Duration> = facts
        .replicas
        .iter()
        .flat_map(|r| &r.writes)
        .map(|w| w.at)
        .filter(|t| *t >= at && *t <= at + Duration::from_secs(10))
        .collect();
    busiest_window(&times, Duration::from_secs(1))
}

/// Per replica: its first list after `at`, and how many it made in the 15 s after.
fn relists_after(facts: &Facts, at: Duration) -> Vec<(String, Option<Duration>, usize)> {
    facts
        .replicas
        .iter()
        .map(|r| {
            let after: Vec<Duration> = r
                .lists
                .iter()
                .copied()
                .filter(|t| *t >= at && *t <= at + Duration::from_secs(15))
                .collect();
            (
                r.name.clone(),
                after.first().map(|t| t.saturating_sub(at)),
                after.len(),
            )
        })
        .collect()
}

/// For the machines a replica (or any) served within `window`: the longest time from `from`
/// (the API's return) to their MCN carrying its record (the monitor's view), and how many
/// never did.
fn durable_after(
    facts: &Facts,
    window: (Duration, Duration),
    from: Duration,
    replica: Option<usize>,
) -> (usize, Duration, usize) {
    let (mut served, mut longest, mut never) = (0, Duration::ZERO, 0);
    for run in &facts.machines {
        let Some(s) = &run.served else { continue };
        if s.at < window.0 || s.at > window.1 || run.joined.is_none() {
            continue;
        }
        if replica.is_some() && served_by(facts, run) != replica {
            continue;
        }
        served += 1;
        match facts.mcn_complete.get(&run.plan.name) {
            Some(done) => longest = longest.max(done.saturating_sub(from)),
            None => never += 1,
        }
    }
    (served, longest, never)
}

/// One verdict per fault the day played, in the order they happened.
pub fn verdicts(facts: &Facts) -> Vec<Verdict> {
    let mut faults = facts.marks.faults.clone();
    faults.sort_by_key(|f| f.began);
    faults
        .iter()
        .map(|fault| match fault.kind {
            FaultKind::ApiRestart => api_restart(facts, fault),
            FaultKind::Compaction => compaction(facts, fault),
            FaultKind::Rotation => rotation(facts, fault),
            FaultKind::CutOff => cut_off(facts, fault),
            FaultKind::ClockAhead => clock_ahead(facts, fault),
        })
        .collect()
}

fn stranded(facts: &Facts) -> usize {
    facts
        .machines
        .iter()
        .filter(|m| m.fetch.final_status() != Some(200))
        .count()
}

fn api_restart(facts: &Facts, fault: &FaultMark) -> Verdict {
    let cost = cost(facts, (fault.began, fault.ended));
    // Every replica's watches resumed: a watch the API answered, begun after it was back.
    let mut resumed = Vec::new();
    let mut stuck = Vec::new();
    for replica in &facts.replicas {
        let first = replica
            .watches
            .iter()
            .filter(|(at, status)| *at >= fault.ended && *status == 200)
            .map(|(at, _)| *at)
            .next();
        // And they stayed resumed: the last watch it began was answered (200, or still open).
        let last_failed = replica
            .watches
            .last()
            .is_some_and(|(at, status)| *at >= fault.ended && *status >= 400);
        match first.filter(|_| !last_failed) {
            Some(at) => resumed.push(format!(
                "{} +{}",
                replica.name,
                secs(at.saturating_sub(fault.ended))
            )),
            None => stuck.push(match replica.watches.last() {
                Some((at, status)) => format!(
                    "{} (its last watch, at {}, got {status})",
                    replica.name,
                    secs(*at)
                ),
                None => replica.name.clone(),
            }),
        }
    }
    let relists: Vec<String> = relists_after(facts, fault.ended)
        .into_iter()
        .map(|(name, _, n)| format!("{name} {n}"))
        .collect();
    let (served, longest, never) = durable_after(
        facts,
        (fault.began, fault.ended + DURABLE_WAIT),
        fault.ended,
        None,
    );
    let stranded = stranded(facts);
    verdict(
        "the API server's restart: every replica's watches resumed",
        stuck.is_empty() && stranded == 0 && never == 0,
        format!(
            "down {} to {}; {}; watches resumed after it: {}{}; lists in the 15 s after: {}; {served} machines served while it was down (or within the bounded wait after), their MCN records all there {} after its return ({never} never); API writes in the busiest second after: {}; {stranded} stranded",
            secs(fault.began),
            secs(fault.ended),
            cost.text(),
            resumed.join(", "),
            if stuck.is_empty() {
                String::new()
            } else {
                format!(" [NEVER RESUMED: {}]", stuck.join(", "))
            },
            relists.join(", "),
            secs(longest),
            busiest_writes_after(facts, fault.ended)
        ),
    )
}

fn compaction(facts: &Facts, fault: &FaultMark) -> Verdict {
    let cost = cost(facts, (fault.began, fault.ended));
    let relists = relists_after(facts, fault.began);
    // A replica cut off or killed at the time relists when its path comes back; what counts is
    // that every replica relisted.
    let missing: Vec<String> = relists
        .iter()
        .filter(|(_, first, _)| first.is_none())
        .map(|(name, _, _)| name.clone())
        .collect();
    let text: Vec<String> = relists
        .iter()
        .map(|(name, first, n)| match first {
            Some(first) => format!("{name} relisted +{} ({n} lists)", secs(*first)),
            None => format!("{name} NEVER relisted"),
        })
        .collect();
    let stranded = stranded(facts);
    verdict(
        "the watch that resumed too late (410 Gone): every replica relisted",
        missing.is_empty() && stranded == 0,
        format!(
            "at {}; {}; {}; API writes in the busiest second after: {}; {stranded} stranded (the rollout and image rules above hold for every answer after it)",
            secs(fault.began),
            cost.text(),
            text.join(", "),
            busiest_writes_after(facts, fault.began)
        ),
    )
}

fn rotation(facts: &Facts, fault: &FaultMark) -> Verdict {
    let cost = cost(facts, (fault.began, fault.ended));
    let seen = facts.rotation.clone().unwrap_or_default();
    let presented: Vec<String> = facts
        .replicas
        .iter()
        .enumerate()
        .map(
            |(index, r)| match seen.presented.get(index).copied().flatten() {
                Some(at) => format!("{} +{}", r.name, secs(at.saturating_sub(fault.began))),
                None => format!("{} NEVER", r.name),
            },
        )
        .collect();
    let all =
        seen.presented.len() == facts.replicas.len() && seen.presented.iter().all(Option::is_some);
    let stranded = stranded(facts);
    verdict(
        "the serving certificate rotated on disk: new connections get the new one, none refused",
        all && cost.transport_errors == 0 && stranded == 0,
        format!(
            "serial {} at {}; presented by {}; {}; {stranded} stranded",
            seen.serial,
            secs(fault.began),
            presented.join(", "),
            cost.text()
        ),
    )
}

/// The bound a new machine's answer waits for its record to become durable (docs/ha.md).
const DURABLE_WAIT: Duration = Duration::from_secs(2);

/// How soon after its path comes back a cut-off replica's records must be durable again.
const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(5);

fn cut_off(facts: &Facts, fault: &FaultMark) -> Verdict {
    let cost = cost(facts, (fault.began, fault.ended));
    let Some(index) = fault.replica else {
        return verdict(
            "one replica cut off from the API",
            false,
            "no replica".into(),
        );
    };
    let name = super::verdict::backend_name(facts, index);
    // What the machines the cut-off replica answered while cut off waited, by the balancer's
    // log: the bounded wait, never longer (plus a second for the way there and back).
    let mut by_it = 0;
    let mut slowest = Duration::ZERO;
    for run in &facts.machines {
        for attempt in &run.fetch.attempts {
            // Answered while cut off: sent after it began (a request that came just before
            // waits its bound inside it), asked before it ended.
            if attempt.status() != Some(200)
                || attempt.ended < fault.began
                || attempt.started > fault.ended
            {
                continue;
            }
            if attempt
                .local
                .and_then(|l| replica_of(facts, l, attempt.started))
                == Some(index)
            {
                by_it += 1;
                slowest = slowest.max(attempt.ended.saturating_sub(attempt.started));
            }
        }
    }
    let bounded = slowest <= DURABLE_WAIT + Duration::from_secs(1);
    let (served, caught_up, never) = durable_after(
        facts,
        (fault.began, fault.ended + DURABLE_WAIT),
        fault.ended,
        Some(index),
    );
    let before_durable = facts.replicas.get(index).map_or(0.0, |r| {
        r.end.before_durable + r.before_kill.as_ref().map_or(0.0, |s| s.before_durable)
    });
    // Caught up: the records it kept while cut off are durable again (its first accepted write
    // of the shared records after the return carries all of them). Their MCNs follow at the
    // publisher's pace, which at a thousand machines is its write budget's backlog (the MCN
    // verdict's Node-to-MCN figures), not this replica's doing: told, not judged here.
    let durable_again = facts.replicas.get(index).and_then(|r| {
        r.writes
            .iter()
            .find(|w| {
                w.kind == super::verdict::WriteKind::Records
                    && w.at >= fault.ended
                    && (200..300).contains(&w.status)
            })
            .map(|w| w.at.saturating_sub(fault.ended))
    });
    let caught_up_in_time = durable_again.is_some_and(|d| d <= CAUGHT_UP_WITHIN);
    verdict(
        "one replica cut off from the API: it kept serving within its bounded wait and caught up",
        by_it > 0 && bounded && never == 0 && caught_up_in_time && stranded(facts) == 0,
        format!(
            "{name} black-holed {} to {}; it answered {by_it} config requests meanwhile, the slowest in {} (bound {} + 1 s); {} answers of its day sent before their record was durable; its records durable again {} after the API came back (at most {}); {served} of its machines that joined: every MCN record there {} after ({never} never); {}; API writes in the busiest second after: {}",
            secs(fault.began),
            secs(fault.ended),
            secs(slowest),
            secs(DURABLE_WAIT),
            before_durable,
            durable_again.map_or("NEVER".to_string(), secs),
            secs(CAUGHT_UP_WITHIN),
            secs(caught_up),
            cost.text(),
            busiest_writes_after(facts, fault.ended)
        ),
    )
}

fn clock_ahead(facts: &Facts, fault: &FaultMark) -> Verdict {
    let Some(index) = fault.replica else {
        return verdict("one replica's clock ahead", false, "no replica".into());
    };
    let name = super::verdict::backend_name(facts, index);
    let mut served = 0;
    let mut matched = 0;
    let mut wrong = Vec::new();
    for run in &facts.machines {
        if run.served.is_none() || run.joined.is_none() || served_by(facts, run) != Some(index) {
            continue;
        }
        served += 1;
        let by = facts
            .mcns
            .get(&run.plan.name)
            .and_then(|m| crate::cluster::mcn_annotation(m, "bootstrap-served-by"));
        if by.as_deref() == Some(name.as_str()) {
            matched += 1;
        } else {
            wrong.push(format!("{}: {by:?}", run.plan.name));
        }
    }
    let ahead = facts.knobs.clock_ahead;
    verdict(
        "one replica's clock ahead: its records still match their Nodes",
        served > 0 && wrong.is_empty(),
        format!(
            "{name}'s wall clock {} s ahead all day; {matched} of the {served} machines it served that joined carry its record on their MCN{}",
            ahead.as_secs(),
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", super::verdict::list(&wrong))
            }
        ),
    )
}

/// The cut-off replica and when it was cut off, for the rules that allow it what it cannot
/// help (a stale cache while cut off, answers before their record was durable).
pub fn cut_off_window(facts: &Facts) -> Option<(usize, Duration, Duration)> {
    facts
        .marks
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::CutOff)
        .and_then(|f| Some((f.replica?, f.began, f.ended)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_carries_the_strongest_fault() {
        let mut paths = Paths::default();
        assert_eq!(paths.fault_of(0), Fault::None);
        paths.latency = Some(Duration::from_millis(400));
        assert_eq!(
            paths.fault_of(0),
            Fault::Latency(Duration::from_millis(400))
        );
        paths.cut = Some(1);
        assert_eq!(paths.fault_of(1), Fault::Blackhole);
        assert_eq!(
            paths.fault_of(0),
            Fault::Latency(Duration::from_millis(400))
        );
        paths.broken = Some(1);
        assert_eq!(paths.fault_of(1), Fault::RefuseWatches);
    }
}

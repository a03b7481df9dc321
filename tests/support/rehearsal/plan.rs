//! Who arrives when, asking for what: the machines of one rehearsal and the day's script of
//! cluster events, decided up front from the knobs and a seed (pure: no I/O, no clock), so a
//! run can be repeated and its verdicts read against a plan that did not move.

use std::net::Ipv4Addr;
use std::time::Duration;

use super::Knobs;

/// The three pools machines join: the control plane, the default workers, and the layered
/// (image-mode) pool of the realistic fixture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pool {
    Master,
    Worker,
    Layered,
}

impl Pool {
    pub const ALL: [Pool; 3] = [Pool::Master, Pool::Worker, Pool::Layered];

    /// The MachineConfigPool's name (the path segment of `/config/<pool>`).
    pub fn name(self) -> &'static str {
        match self {
            Pool::Master => "master",
            Pool::Worker => "worker",
            Pool::Layered => "layered-worker",
        }
    }

    /// The `node-role.kubernetes.io/<role>` labels a kubelet of this pool registers with.
    pub fn roles(self) -> &'static [&'static str] {
        match self {
            Pool::Master => &["master", "control-plane"],
            Pool::Worker => &["worker"],
            Pool::Layered => &["worker", "layered-worker"],
        }
    }
}

/// An Ignition release a boot image carries, and what its config fetch sends: `User-Agent:
/// Ignition/<release>` and an `Accept` naming the newest config spec it reads (Ignition's
/// `internal/resource/url.go`; the spec each release made stable is in its release notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub version: &'static str,
    pub accept: &'static str,
    /// The spec the server should answer with when the rendered config is of spec `3.5.0` or
    /// newer (a newer request is answered at the config's own spec).
    pub asks: &'static str,
}

/// A mix of boot images a long-lived cluster scales up from: RHCOS boot images of several
/// OpenShift releases, from Ignition 0.x (spec 2.2, the 4.1 to 4.5 boot images) to 2.26.
pub const RELEASES: [Release; 7] = [
    Release {
        version: "0.35.0",
        accept: "application/vnd.coreos.ignition+json; version=2.2.0, application/vnd.coreos.ignition+json; version=1; q=0.5, */*; q=0.1",
        asks: "2.2.0",
    },
    Release {
        version: "2.6.0",
        accept: "application/vnd.coreos.ignition+json;version=3.1.0, */*;q=0.1",
        asks: "3.1.0",
    },
    Release {
        version: "2.9.0",
        accept: "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1",
        asks: "3.2.0",
    },
    Release {
        version: "2.14.0",
        accept: "application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1",
        asks: "3.3.0",
    },
    Release {
        version: "2.16.2",
        accept: "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1",
        asks: "3.4.0",
    },
    Release {
        version: "2.20.0",
        accept: "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
        asks: "3.5.0",
    },
    Release {
        version: "2.26.0",
        accept: "application/vnd.coreos.ignition+json;version=3.6.0, */*;q=0.1",
        asks: "3.6.0",
    },
];

/// The newest config spec an Ignition release made stable (its release notes: 3.1.0 in 2.3.0,
/// 3.2.0 in 2.7.0, 3.3.0 in 2.11.0, 3.4.0 in 2.15.0, 3.5.0 in 2.20.0, 3.6.0 in 2.26.0): what
/// its config fetch asks for. `None` for a version that does not parse.
pub fn newest_stable_spec(release: &str) -> Option<&'static str> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(match (major, minor) {
        (0, _) | (1, _) => "2.2.0",
        (2, m) if m >= 26 => "3.6.0",
        (2, m) if m >= 20 => "3.5.0",
        (2, m) if m >= 15 => "3.4.0",
        (2, m) if m >= 11 => "3.3.0",
        (2, m) if m >= 7 => "3.2.0",
        (2, m) if m >= 3 => "3.1.0",
        (2, _) => "3.0.0",
        _ => return None,
    })
}

/// What becomes of a machine after Ignition fetched its config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Its first boot succeeds: the kubelet registers its Node, the daemon reports.
    Joins,
    /// Its first boot fails after the fetch (the daemon's `firstboot-update`): it reports the
    /// failure to the server and never becomes a Node.
    FailsForGood,
    /// It reports a first-boot failure, reboots, and joins on its second boot.
    FailsThenJoins,
}

/// How a machine reaches the balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// The harness speaking as Ignition does, over TLS (the pointer config's `https://`).
    Tls,
    /// The same over the plain port.
    Plain,
    /// Debian's real Ignition client (fetch stage through a pointer config), over TLS.
    RealIgnition,
}

/// One machine of the scale-up.
#[derive(Clone, Debug)]
pub struct Machine {
    pub index: usize,
    /// Its Node's name once it joins.
    pub name: String,
    pub pool: Pool,
    /// The loopback address it connects from: its `InternalIP`.
    pub address: Ipv4Addr,
    pub release: Release,
    pub client: Client,
    /// When it powers on, from the start of the storm.
    pub arrives: Duration,
    pub fate: Fate,
    /// From its config to its Node registering (a boot), jittered per machine.
    pub boot: Duration,
}

/// The cluster's side of the day, as offsets from the start of the storm.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// The layered pool's new MachineOSBuild starts building.
    pub build_starts: Duration,
    /// The worker pool moves to a new rendered config (`updatedMachineCount` 0).
    pub rollout: Duration,
    /// The new build turns `Succeeded`.
    pub build_succeeds: Duration,
    /// One replica (the Lease holder) is SIGKILLed; restarted after `restart_after`.
    pub kill: Option<Duration>,
    pub restart_after: Duration,
    /// A worker node reports the new rendered config and the pool counts it updated.
    pub worker_proof: Duration,
    /// A layered node reports the new image, done.
    pub layered_proof: Duration,
    /// Every replica's API calls slowed by `latency` for `length`.
    pub brownout: Option<Brownout>,
    /// The kube-apiserver itself stops (every watch of every replica broken at once) and
    /// starts again `.1` later on the same port and storage.
    pub api_restart: Option<(Duration, Duration)>,
    /// The API's history is compacted and every open watch ended: each replica's watch
    /// resumes too late (410 Gone) and relists.
    pub compaction: Option<Duration>,
    /// The replicas' serving certificate is replaced on disk (as the MCO's cert controller
    /// rotates the secret).
    pub rotation: Option<Duration>,
    /// One replica's path to the API black-holed from `.0` for `.1`.
    pub cutoff: Option<(Duration, Duration)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Brownout {
    pub at: Duration,
    pub latency: Duration,
    pub length: Duration,
}

/// One thing the cluster does during the storm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    BuildStarts,
    Rollout,
    BuildSucceeds,
    WorkerProof,
    LayeredProof,
    Kill,
    Restart,
    Brownout(Duration),
    BrownoutEnds,
    ApiStops,
    ApiStarts,
    Compaction,
    Rotation,
    CutOff,
    CutOffEnds,
}

impl Script {
    /// The script as events in the order they happen.
    pub fn events(&self) -> Vec<(Duration, Event)> {
        let mut events = vec![
            (self.build_starts, Event::BuildStarts),
            (self.rollout, Event::Rollout),
            (self.build_succeeds, Event::BuildSucceeds),
            (self.worker_proof, Event::WorkerProof),
            (self.layered_proof, Event::LayeredProof),
        ];
        if let Some(kill) = self.kill {
            events.push((kill, Event::Kill));
            events.push((kill + self.restart_after, Event::Restart));
        }
        if let Some(brownout) = self.brownout {
            events.push((brownout.at, Event::Brownout(brownout.latency)));
            events.push((brownout.at + brownout.length, Event::BrownoutEnds));
        }
        if let Some((at, down)) = self.api_restart {
            events.push((at, Event::ApiStops));
            events.push((at + down, Event::ApiStarts));
        }
        if let Some(at) = self.compaction {
            events.push((at, Event::Compaction));
        }
        if let Some(at) = self.rotation {
            events.push((at, Event::Rotation));
        }
        if let Some((at, length)) = self.cutoff {
            events.push((at, Event::CutOff));
            events.push((at + length, Event::CutOffEnds));
        }
        events.sort_by_key(|(at, _)| *at);
        events
    }
}

/// Machine `index`'s address, from 127.20.0.1 on (the balancer has its own,
/// [`BALANCER_ADDRESS`]).
pub fn machine_address(index: usize) -> Ipv4Addr {
    let index = u32::try_from(index).expect("fewer than 2^32 machines");
    let host = index % 250 + 1;
    let subnet = index / 250;
    Ipv4Addr::new(
        127,
        20,
        u8::try_from(subnet).expect("at most 64000 machines"),
        host as u8,
    )
}

/// The address the balancer connects to the replicas from (the replicas trust only it).
pub const BALANCER_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 19, 0, 1);

/// A small deterministic generator (splitmix64): the plan is a function of the seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The machines of a run: a burst (`burst_percent` of them within `burst`), then a steady
/// trickle over `trickle`, and a second wave (`wave_percent` within `wave`) that begins half a
/// second before the kill (the switch: the rolling update back), so the replica stops with
/// requests in flight; pools about 10% master, 25% layered, the rest worker (at least two
/// of each); releases drawn from [`RELEASES`]; one in ten over the plain port; a share
/// `failure_percent` failing their first boot (alternately for good and joining on a second
/// boot, at least one of each when the share is above 0). With `real_ignition`, the first
/// worker of the burst is Debian's Ignition client.
pub fn machines(knobs: &Knobs) -> Vec<Machine> {
    let mut rng = Rng::new(knobs.seed);
    let n = knobs.machines;
    let burst_count = ((n as f64) * knobs.burst_percent / 100.0).round() as usize;
    let wave_count = (((n as f64) * knobs.wave_percent / 100.0).round() as usize)
        .min(n.saturating_sub(burst_count));
    let trickled = n - burst_count - wave_count;
    // The second wave starts half a second before the kill (or where it would be); in the
    // switch, before the rolling update back, when this server's replicas stop.
    let disruption = match knobs.scenario {
        super::Scenario::Switch => SWITCH_BACK_AT,
        _ => KILL_AT,
    };
    let wave_start = (knobs.burst + knobs.trickle)
        .mul_f64(disruption)
        .saturating_sub(Duration::from_millis(500));
    let failures = if knobs.failure_percent > 0.0 {
        (((n as f64) * knobs.failure_percent / 100.0).round() as usize).max(2)
    } else {
        0
    };
    let mut out = Vec::with_capacity(n);
    for index in 0..n {
        let arrives = if index < burst_count {
            knobs.burst.mul_f64(rng.unit())
        } else if index < burst_count + wave_count {
            wave_start + knobs.wave.mul_f64(rng.unit())
        } else {
            let step = knobs.trickle.as_secs_f64() / trickled.max(1) as f64;
            let k = index - burst_count - wave_count;
            knobs.burst + Duration::from_secs_f64(step * k as f64)
        };
        let pool = match index % 20 {
            0 | 10 => Pool::Master,
            1 | 5 | 9 | 13 | 17 => Pool::Layered,
            _ => Pool::Worker,
        };
        let release = RELEASES[rng.below(RELEASES.len())];
        let client = if rng.below(10) == 0 {
            Client::Plain
        } else {
            Client::Tls
        };
        let boot = knobs.boot.mul_f64(0.5 + rng.unit());
        out.push(Machine {
            index,
            name: format!("{}-r{index:04}", pool.name()),
            pool,
            address: machine_address(index),
            release,
            client,
            arrives,
            fate: Fate::Joins,
            boot,
        });
    }
    // Failures among the non-master machines spread over the run (a control-plane machine
    // that fails its first boot is an installer's problem, not a scale-up's).
    let candidates: Vec<usize> = (0..n).filter(|&i| out[i].pool != Pool::Master).collect();
    if failures > 0 && !candidates.is_empty() {
        // Spread over the run, and over both pools (a fixed stride would land on one pool).
        let stride = (candidates.len() / failures).max(1);
        for k in 0..failures.min(candidates.len()) {
            let i = candidates[(k * stride + k % stride.min(5)).min(candidates.len() - 1)];
            out[i].fate = if k % 2 == 0 {
                Fate::FailsForGood
            } else {
                Fate::FailsThenJoins
            };
        }
    }
    if knobs.real_ignition {
        if let Some(first) = out
            .iter_mut()
            .find(|m| m.pool == Pool::Worker && m.fate == Fate::Joins && m.client == Client::Tls)
        {
            first.client = Client::RealIgnition;
            first.name = format!("worker-ignition-{:04}", first.index);
        }
    }
    out
}

/// When the Lease holder is killed, as a fraction of the arrival window.
const KILL_AT: f64 = 0.45;
/// The switch: when the rolling update to this server starts, and the one back to the
/// original, as fractions of the arrival window.
pub const SWITCH_TO_AT: f64 = 0.2;
pub const SWITCH_BACK_AT: f64 = 0.6;

/// The day's script over the arrival window `burst + trickle` (fractions of it, so a small
/// rehearsal keeps the same order of events as a large one).
pub fn script(knobs: &Knobs) -> Script {
    let window = knobs.burst + knobs.trickle;
    let at = |fraction: f64| window.mul_f64(fraction);
    Script {
        build_starts: at(0.10),
        rollout: at(0.20),
        build_succeeds: at(0.30),
        kill: knobs.kill.then(|| at(KILL_AT)),
        restart_after: knobs.restart_after,
        worker_proof: at(0.60),
        layered_proof: at(0.70),
        brownout: (knobs.brownout_length > Duration::ZERO).then(|| Brownout {
            at: at(0.80),
            latency: knobs.brownout_latency,
            length: knobs.brownout_length,
        }),
        api_restart: (knobs.api_down > Duration::ZERO).then(|| (at(0.25), knobs.api_down)),
        compaction: knobs.compaction.then(|| at(0.38)),
        rotation: knobs.rotation.then(|| at(0.57)),
        cutoff: (knobs.cutoff > Duration::ZERO).then(|| (at(0.50), knobs.cutoff)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_every_pool_fate_and_client_and_is_repeatable() {
        let knobs = Knobs {
            machines: 30,
            real_ignition: true,
            ..Knobs::default()
        };
        let a = machines(&knobs);
        let b = machines(&knobs);
        assert_eq!(a.len(), 30);
        for pool in Pool::ALL {
            assert!(a.iter().filter(|m| m.pool == pool).count() >= 2, "{pool:?}");
        }
        for fate in [Fate::Joins, Fate::FailsForGood, Fate::FailsThenJoins] {
            assert!(a.iter().any(|m| m.fate == fate), "{fate:?}");
        }
        let big = machines(&Knobs::default());
        // The second wave lands on the kill.
        let kill = script(&Knobs::default()).kill.unwrap();
        let around = big
            .iter()
            .filter(|m| m.arrives + Duration::from_millis(500) >= kill)
            .filter(|m| m.arrives <= kill + Duration::from_secs(1))
            .count();
        assert!(around >= 45, "{around} machines arrive around the kill");
        for pool in [Pool::Worker, Pool::Layered] {
            assert!(
                big.iter().any(|m| m.pool == pool && m.fate != Fate::Joins),
                "no failure in {pool:?}"
            );
        }
        assert_eq!(
            a.iter()
                .filter(|m| m.client == Client::RealIgnition)
                .count(),
            1
        );
        let addresses: std::collections::BTreeSet<_> = a.iter().map(|m| m.address).collect();
        assert_eq!(addresses.len(), 30);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.arrives == y.arrives && x.name == y.name));
    }

    #[test]
    fn every_release_of_the_mix_asks_for_its_newest_stable_spec() {
        for release in RELEASES {
            assert_eq!(
                newest_stable_spec(release.version),
                Some(release.asks),
                "{release:?}"
            );
            assert!(release.accept.contains(release.asks), "{release:?}");
        }
        assert_eq!(newest_stable_spec("2.14.0+ds1-1+b6"), Some("3.3.0"));
        assert_eq!(newest_stable_spec("Debian"), None);
    }

    #[test]
    fn the_script_keeps_its_order_at_any_size() {
        let script = script(&Knobs::default());
        let events: Vec<Event> = script.events().into_iter().map(|(_, e)| e).collect();
        assert_eq!(
            events,
            [
                Event::BuildStarts,
                Event::Rollout,
                Event::ApiStops,
                Event::ApiStarts,
                Event::BuildSucceeds,
                Event::Compaction,
                Event::Kill,
                Event::Restart,
                Event::CutOff,
                Event::Rotation,
                Event::WorkerProof,
                Event::LayeredProof,
                Event::Brownout(Duration::from_millis(400)),
                Event::CutOffEnds,
                Event::BrownoutEnds,
            ]
        );
        assert!(script.build_starts < script.rollout);
        assert!(script.rollout < script.build_succeeds);
        assert!(script.build_succeeds < script.kill.unwrap());
        assert!(script.kill.unwrap() < script.worker_proof);
        assert!(script.worker_proof < script.layered_proof);
        assert!(script.layered_proof < script.brownout.unwrap().at);
    }
}

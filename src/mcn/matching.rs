//! Which served record belongs to which Node: the one place where a bootstrap record is matched
//! to a joining Node. Pure: no I/O, no clock (the caller passes the time), no logging.
//!
//! The records come from every replica ([`MergedRecords::merge`]: this replica's memory plus
//! what the other replicas published, see [`super::exchange`]); a Node is matched by its
//! `InternalIP` addresses ([`match_node`]). The source address is all a request tells about the
//! machine (it carries no host name), so the rules are about when that address can be trusted:
//!
//! 1. Only records served before the Node was created count (its `creationTimestamp`, with
//!    [`CLOCK_SKEW`] allowance between the replica's clock and the API server's): a record served
//!    later was for another machine that reused the address.
//! 2. Only records of the pool family the Node boots from count: a control-plane Node
//!    (`node-role.kubernetes.io/master` or `control-plane`) only `master` records, an arbiter
//!    only `arbiter` ones, every other Node only records of other pools (custom pools boot from
//!    `worker`). A worker's record on a control-plane Node's address is a proxy's doing (the API
//!    load balancer runs on control-plane nodes on premises), even in the clock-skew window.
//! 3. When the address is also an `InternalIP` of another Node, the address is shared (a proxy or
//!    NAT in front of the server, e.g. the API load balancer on a control-plane node, or an
//!    address reused while the old Node is still there): the record's source is unknown.
//! 4. When the records for the node's addresses name different pools or rendered configs, the
//!    address served several machines (or a NAT hides them): the source is unknown.
//! 5. Otherwise the newest record wins; the replicas that served older records for the same
//!    address are named too (a retry that the load balancer sent elsewhere).
//!
//! A "source unknown" result is written on the MCN as such; it never names a record that may be
//! another machine's. No record at all leaves the MCN without a bootstrap record (the node was
//! not booted from this server, or its address was rewritten to one no Node has).
//!
//! First-boot failure reports ([`match_failure`]) follow rules 1 to 3 (reported before the Node
//! was created, from the pool family it boots from, on an address no other Node has); the
//! newest wins, unless a config was served to the node's addresses after it and before the
//! Node was created (the machine started over from Ignition: the failure is history). A
//! failure that cannot be told to be the node's own is never written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;

use crate::api::node::{created as node_created, internal_ips, name as node_name};
use crate::server::served::{FailureRecord, ServedRecord};

/// The key of the installer's bootstrap server (`bootstrap --served-records-kubeconfig`): a
/// name no Node can have (Node names are DNS subdomains, without `_`), so it never meets a
/// replica's key; `bootstrap-served-by` says it on the MCNs it gave a record.
pub const BOOTSTRAP_SERVER_KEY: &str = "bootstrap_server";
/// How long the bootstrap server's records are merged and kept: longer than any install takes.
/// The installer waits up to 40 minutes for bootstrapping and as long again for the cluster;
/// a bare-metal install can take two hours and more (slow firmware, retried PXE), and the
/// cluster's replicas start only after that. A day also covers an install left running
/// overnight; the Lease holder removes the key sooner, once every control-plane Node's MCN
/// carries a bootstrap record ([`super::exchange::stale_keys`]).
pub const BOOTSTRAP_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long `replica`'s records are merged and kept: [`BOOTSTRAP_TTL`] for the bootstrap
/// server's key, `ttl` for every replica's.
pub fn record_ttl(replica: &str, ttl: Duration) -> Duration {
    if replica == BOOTSTRAP_SERVER_KEY {
        ttl.max(BOOTSTRAP_TTL)
    } else {
        ttl
    }
}

/// How much later than the Node's creation a served record may be and still be the node's own
/// (the record's time is a replica's clock, the creation time the API server's). A machine is
/// served minutes before its kubelet registers the Node, so only clock skew has to be allowed,
/// and it is kept small: a record served to the address of a Node that joined earlier (e.g. a
/// load balancer on a control-plane node during installation) must not count as that Node's.
/// A replica whose clock runs further ahead only loses its records (no record, never a wrong
/// one).
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// One record, with the replica that served it (empty: unknown, e.g. a test lookup).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub replica: String,
    pub record: ServedRecord,
}

/// One failure report, with the replica that received it (empty: unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub replica: String,
    pub failure: FailureRecord,
}

/// Where the publisher looks up what was served to an address (every replica's records).
pub trait ServedLookup {
    /// Every replica's last record for `address`, in any order.
    fn served_to(&self, address: IpAddr) -> Vec<Served>;

    /// Every replica's last failure report from `address`, in any order (none by default).
    fn failures_from(&self, _address: IpAddr) -> Vec<Reported> {
        Vec::new()
    }
}

/// A plain lookup of one record per address (one replica, name unknown).
impl<F: Fn(IpAddr) -> Option<ServedRecord>> ServedLookup for F {
    fn served_to(&self, address: IpAddr) -> Vec<Served> {
        self(address)
            .map(|record| Served {
                replica: String::new(),
                record,
            })
            .into_iter()
            .collect()
    }
}

/// Every replica's unexpired records and failure reports, by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergedRecords {
    by_address: HashMap<IpAddr, Vec<Served>>,
    failures_by_address: HashMap<IpAddr, Vec<Reported>>,
}

impl MergedRecords {
    /// Merges this replica's own records (`own`, named `own_replica`) with every replica's
    /// published ones (`published`, by replica name; this replica's own published entry is
    /// skipped, memory is newer). Records served more than `ttl` before `now` are left out
    /// (the bootstrap server's: more than [`BOOTSTRAP_TTL`]).
    pub fn merge(
        own_replica: &str,
        own: Vec<(IpAddr, ServedRecord)>,
        published: &BTreeMap<String, Vec<(IpAddr, ServedRecord)>>,
        now: SystemTime,
        ttl: Duration,
    ) -> Self {
        let fresh = |replica: &str, record: &ServedRecord| {
            now.duration_since(record.served_at)
                .map_or(true, |age| age <= record_ttl(replica, ttl))
        };
        let mut by_address: HashMap<IpAddr, Vec<Served>> = HashMap::new();
        let others = published
            .iter()
            .filter(|(replica, _)| replica.as_str() != own_replica)
            .flat_map(|(replica, entries)| entries.iter().map(move |e| (replica.as_str(), e)));
        let own = own.iter().map(|entry| (own_replica, entry));
        for (replica, (address, record)) in own.chain(others) {
            if fresh(replica, record) {
                by_address
                    .entry(address.to_canonical())
                    .or_default()
                    .push(Served {
                        replica: replica.to_owned(),
                        record: record.clone(),
                    });
            }
        }
        MergedRecords {
            by_address,
            failures_by_address: HashMap::new(),
        }
    }

    /// Adds the failure reports, merged as [`MergedRecords::merge`] merges records: this
    /// replica's own (`own`) and every other replica's published ones; older than `ttl` left
    /// out.
    pub fn with_failures(
        mut self,
        own_replica: &str,
        own: Vec<(IpAddr, FailureRecord)>,
        published: &BTreeMap<String, Vec<(IpAddr, FailureRecord)>>,
        now: SystemTime,
        ttl: Duration,
    ) -> Self {
        let fresh = |failure: &FailureRecord| {
            now.duration_since(failure.reported_at)
                .map_or(true, |age| age <= ttl)
        };
        let others = published
            .iter()
            .filter(|(replica, _)| replica.as_str() != own_replica)
            .flat_map(|(replica, entries)| entries.iter().map(move |e| (replica.as_str(), e)));
        let own = own.iter().map(|entry| (own_replica, entry));
        for (replica, (address, failure)) in own.chain(others) {
            if fresh(failure) {
                self.failures_by_address
                    .entry(address.to_canonical())
                    .or_default()
                    .push(Reported {
                        replica: replica.to_owned(),
                        failure: failure.clone(),
                    });
            }
        }
        self
    }

    /// Every merged failure report with its address.
    pub fn failures(&self) -> impl Iterator<Item = (IpAddr, &FailureRecord)> {
        self.failures_by_address
            .iter()
            .flat_map(|(address, reports)| reports.iter().map(|r| (*address, &r.failure)))
    }

    /// How many (replica, address) records were merged.
    pub fn len(&self) -> usize {
        self.by_address.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }
}

impl ServedLookup for MergedRecords {
    fn served_to(&self, address: IpAddr) -> Vec<Served> {
        self.by_address
            .get(&address.to_canonical())
            .cloned()
            .unwrap_or_default()
    }

    fn failures_from(&self, address: IpAddr) -> Vec<Reported> {
        self.failures_by_address
            .get(&address.to_canonical())
            .cloned()
            .unwrap_or_default()
    }
}

impl ServedLookup for &MergedRecords {
    fn served_to(&self, address: IpAddr) -> Vec<Served> {
        (*self).served_to(address)
    }

    fn failures_from(&self, address: IpAddr) -> Vec<Reported> {
        (*self).failures_from(address)
    }
}

/// A first-boot failure report matched to a Node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureMatch {
    /// The address it was reported from (one of the node's `InternalIP`s).
    pub address: IpAddr,
    pub failure: FailureRecord,
}

/// The first-boot failure reported by `node`'s machine, if one can be told to be its own (rules
/// in the module docs). `owners` is [`nodes_by_address`] of every Node in the cluster.
pub fn match_failure(
    node: &Node,
    lookup: &impl ServedLookup,
    owners: &HashMap<IpAddr, BTreeSet<&str>>,
) -> Option<FailureMatch> {
    let created = node_created(node);
    let name = node_name(node);
    let role = node_family(node);
    let addresses = internal_ips(node);
    let mut candidates: Vec<(IpAddr, Reported)> = addresses
        .iter()
        .flat_map(|address| {
            lookup
                .failures_from(*address)
                .into_iter()
                .map(move |r| (*address, r))
        })
        .filter(|(_, r)| served_before(r.failure.reported_at, created))
        .filter(|(_, r)| pool_family(&r.failure.pool) == role)
        .collect();
    candidates.sort_by(|(_, a), (_, b)| {
        b.failure
            .reported_at
            .cmp(&a.failure.reported_at)
            .then_with(|| a.replica.cmp(&b.replica))
    });
    let (address, newest) = candidates.first()?.clone();
    let shared = candidates.iter().any(|(address, _)| {
        owners
            .get(address)
            .is_some_and(|names| names.iter().any(|owner| *owner != name))
    });
    if shared {
        return None;
    }
    let started_over = addresses.iter().any(|address| {
        lookup.served_to(*address).iter().any(|s| {
            s.record.served_at > newest.failure.reported_at
                && served_before(s.record.served_at, created)
        })
    });
    (!started_over).then_some(FailureMatch {
        address,
        failure: newest.failure,
    })
}

/// A served-request record matched to a Node by one of its `InternalIP` addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bootstrap {
    pub address: IpAddr,
    pub record: ServedRecord,
    /// The replica that served it, when known.
    pub served_by: Option<String>,
    /// Other replicas that served the same address earlier (sorted).
    pub also_served_by: Vec<String>,
}

/// Why a record's source is unknown (the value of the MCN's `bootstrap-source-unknown`
/// annotation and the `reason` metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UnknownReason {
    /// The address is also another Node's `InternalIP` (rule 3).
    AddressOfAnotherNode,
    /// The address was served different pools or configs (rule 4).
    AddressServedDifferentConfigs,
}

impl UnknownReason {
    pub const ALL: [UnknownReason; 2] = [
        UnknownReason::AddressOfAnotherNode,
        UnknownReason::AddressServedDifferentConfigs,
    ];

    /// The reason an annotation value names, if it is one of ours.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|reason| reason.as_str() == value)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UnknownReason::AddressOfAnotherNode => "address-of-another-node",
            UnknownReason::AddressServedDifferentConfigs => "address-served-different-configs",
        }
    }
}

/// The outcome of matching one Node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapMatch {
    /// No record for any of its addresses (from before it joined).
    NoRecord,
    /// The record that was served to this node.
    Matched(Bootstrap),
    /// Records exist for its address, but they cannot be told to be this node's.
    SourceUnknown {
        address: IpAddr,
        reason: UnknownReason,
    },
}

/// Rule 1: a record served at `served_at` can be a Node's own only if the Node (created at
/// `created`, the API server's clock; unknown counts as later) came after it, within
/// [`CLOCK_SKEW`].
pub fn served_before(served_at: SystemTime, created: Option<SystemTime>) -> bool {
    created.is_none_or(|created| served_at <= created + CLOCK_SKEW)
}

/// The Nodes of each `InternalIP` address (for rule 3).
pub fn nodes_by_address<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
) -> HashMap<IpAddr, BTreeSet<&'a str>> {
    let mut out: HashMap<IpAddr, BTreeSet<&str>> = HashMap::new();
    for node in nodes {
        for address in internal_ips(node) {
            out.entry(address).or_default().insert(node_name(node));
        }
    }
    out
}

/// Matches `node` to the records served to its `InternalIP` addresses (rules in the module
/// docs). `owners` is [`nodes_by_address`] of every Node in the cluster.
pub fn match_node(
    node: &Node,
    served: &impl ServedLookup,
    owners: &HashMap<IpAddr, BTreeSet<&str>>,
) -> BootstrapMatch {
    let created = node_created(node);
    let name = node_name(node);
    let role = node_family(node);
    let mut candidates: Vec<(IpAddr, Served)> = internal_ips(node)
        .into_iter()
        .flat_map(|address| {
            served
                .served_to(address)
                .into_iter()
                .map(move |s| (address, s))
        })
        .filter(|(_, s)| served_before(s.record.served_at, created))
        .filter(|(_, s)| pool_family(&s.record.pool) == role)
        .collect();
    if candidates.is_empty() {
        return BootstrapMatch::NoRecord;
    }
    // Newest first; equal times by replica name, so the outcome does not depend on order.
    candidates.sort_by(|(_, a), (_, b)| {
        b.record
            .served_at
            .cmp(&a.record.served_at)
            .then_with(|| a.replica.cmp(&b.replica))
    });
    let (address, newest) = candidates[0].clone();
    let shared = candidates.iter().find(|(address, _)| {
        owners
            .get(address)
            .is_some_and(|names| names.iter().any(|owner| *owner != name))
    });
    if let Some((address, _)) = shared {
        return BootstrapMatch::SourceUnknown {
            address: *address,
            reason: UnknownReason::AddressOfAnotherNode,
        };
    }
    let differs = candidates.iter().any(|(_, s)| {
        s.record.pool != newest.record.pool
            || s.record.rendered_config != newest.record.rendered_config
    });
    if differs {
        return BootstrapMatch::SourceUnknown {
            address,
            reason: UnknownReason::AddressServedDifferentConfigs,
        };
    }
    let also_served_by: Vec<String> = candidates[1..]
        .iter()
        .map(|(_, s)| s.replica.clone())
        .filter(|replica| !replica.is_empty() && *replica != newest.replica)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    BootstrapMatch::Matched(Bootstrap {
        address,
        record: newest.record,
        served_by: (!newest.replica.is_empty()).then_some(newest.replica),
        also_served_by,
    })
}

/// Which machines boot from a pool: control-plane, arbiter, or every other Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    ControlPlane,
    Arbiter,
    Other,
}

fn pool_family(pool: &str) -> Family {
    match pool {
        "master" => Family::ControlPlane,
        "arbiter" => Family::Arbiter,
        _ => Family::Other,
    }
}

/// Whether `node` is a control-plane or arbiter Node: the machines the installer's bootstrap
/// server serves (its other pools answer 500).
pub fn boots_from_the_bootstrap_server(node: &Node) -> bool {
    node_family(node) != Family::Other
}

fn node_family(node: &Node) -> Family {
    let has = |role: &str| {
        node.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(&format!("node-role.kubernetes.io/{role}")))
    };
    if has("master") || has("control-plane") {
        Family::ControlPlane
    } else if has("arbiter") {
        Family::Arbiter
    } else {
        Family::Other
    }
}

#[cfg(test)]
mod tests;

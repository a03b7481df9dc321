//! What `compare` asks for: every pool (or those named) at every spec version a machine may
//! ask for, each as the request a machine sends. Pure.

use crate::ignition::SpecVersion;
use crate::snapshot::{LoadError, Snapshot};

/// One spec version a machine may ask for, as its Accept header says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ask {
    /// No Accept header (curl, a machine's pointer config fetched by hand): spec 2.2.
    NoAccept,
    /// `Accept: application/vnd.coreos.ignition+json;version=<v>, */*;q=0.1`, as Ignition
    /// writes it.
    Spec(SpecVersion),
}

/// The spec versions a machine may ask for, in the order they are compared: none, then 2.2.0
/// (Ignition 0.x) and 3.1.0 to 3.6.0 (Ignition 2.x; no released Ignition of an OpenShift boot
/// image asks for 3.0.0).
pub const ASKS: [Ask; 8] = [
    Ask::NoAccept,
    Ask::Spec(SpecVersion::V2_2),
    Ask::Spec(SpecVersion::V3_1),
    Ask::Spec(SpecVersion::V3_2),
    Ask::Spec(SpecVersion::V3_3),
    Ask::Spec(SpecVersion::V3_4),
    Ask::Spec(SpecVersion::V3_5),
    Ask::Spec(SpecVersion::V3_6),
];

impl Ask {
    /// The request's Accept header (`None`: none is sent).
    pub fn accept_header(self) -> Option<String> {
        match self {
            Ask::NoAccept => None,
            Ask::Spec(version) => Some(format!(
                "application/vnd.coreos.ignition+json;version={version}, */*;q=0.1"
            )),
        }
    }

    /// How rows name it: the version, or `none`.
    pub fn label(self) -> &'static str {
        match self {
            Ask::NoAccept => "none",
            Ask::Spec(version) => version.as_str(),
        }
    }
}

/// The pools to compare: those named, in the order given (duplicates dropped), or every pool
/// the snapshot knows, sorted (bootstrap mode: `master` and `arbiter` when their files exist;
/// cluster mode: every MachineConfigPool).
pub fn pools(snapshot: &Snapshot, named: &[String]) -> Vec<String> {
    if named.is_empty() {
        return snapshot
            .pools
            .iter()
            .filter(|(_, pool)| !matches!(pool, Err(LoadError::NotFound(_))))
            .map(|(name, _)| name.clone())
            .collect();
    }
    let mut pools: Vec<String> = Vec::new();
    for pool in named {
        if !pools.contains(pool) {
            pools.push(pool.clone());
        }
    }
    pools
}

/// Every (pool, ask) pair, pool by pool.
pub fn matrix(pools: &[String]) -> Vec<(String, Ask)> {
    pools
        .iter()
        .flat_map(|pool| ASKS.into_iter().map(move |ask| (pool.clone(), ask)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::accept;
    use crate::snapshot::Mode;

    #[test]
    fn every_ask_negotiates_the_spec_it_names() {
        for ask in ASKS {
            let negotiated = accept::negotiate(ask.accept_header().as_deref()).unwrap();
            match ask {
                Ask::NoAccept => assert_eq!(negotiated, SpecVersion::V2_2),
                Ask::Spec(version) => assert_eq!(negotiated, version),
            }
        }
        assert_eq!(
            ASKS.map(Ask::label),
            ["none", "2.2.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "3.6.0"]
        );
    }

    #[test]
    fn pools_are_those_named_or_every_known_one() {
        let mut snapshot = Snapshot::empty(Mode::Bootstrap);
        snapshot
            .pools
            .insert("master".into(), Err(LoadError::NotFound("file".into())));
        snapshot.pools.insert(
            "arbiter".into(),
            Err(LoadError::Invalid {
                what: "file".into(),
                reason: "not YAML".into(),
            }),
        );
        // A pool whose file is missing is no pool; a broken one is compared (both answer 500).
        assert_eq!(pools(&snapshot, &[]), ["arbiter"]);
        let named = ["worker".to_string(), "master".into(), "worker".into()];
        assert_eq!(pools(&snapshot, &named), ["worker", "master"]);
        let asked = matrix(&["a".to_string(), "b".to_string()]);
        assert_eq!(asked.len(), 16);
        assert_eq!(asked[8], ("b".to_string(), Ask::NoAccept));
    }
}

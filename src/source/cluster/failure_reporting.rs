//! `--advertise-failure-reporting` in cluster mode: where served configs tell a machine to
//! report a first-boot failure.
//!
//! Upstream's PR #6124 reads the Infrastructure `cluster` once at start, with a 10 s timeout,
//! and derives this server's URL from it ([`crate::api::infrastructure::ignition_host`]); when
//! the object cannot be read (missing, refused, too slow, undecodable) or gives no address, it
//! logs a warning and serves every config without the URL annotation (the root CA file still).
//! Here the read waits for the rights probe: it runs once the feature's one right (`get` on the
//! Infrastructure) is granted, once per process, as upstream's. A 403 is a refusal
//! ([`Rights::refused`]): the feature is off, every answer the original's, and the read is tried
//! again when a later probe grants it. While the rights are unknown the [`Advertisement`] is
//! pending and the snapshot builder publishes nothing (upstream serves nothing before its read
//! either), so no machine gets a config that a moment later would have said more.
//!
//! Owns that read and the [`Advertisement`] channel; the snapshot builder follows it.

use std::time::Duration;

use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::rights::Rights;
use crate::api::infrastructure::{ignition_host, Infrastructure, NAME};
use crate::rights::{read_infrastructure, Feature};
use crate::snapshot::FailureReporting;
use crate::telemetry::ErrorChain;

/// How long the Infrastructure read may take (upstream's).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What served configs carry, as far as the flag, the rights and the Infrastructure allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Advertisement {
    /// Not decided yet (the rights are unknown, or the first read runs): nothing is served.
    Pending,
    /// The original's answers: the flag is not given, or the right is not granted.
    Off,
    /// The root CA file, and the URL annotation when the Infrastructure gave one.
    On(FailureReporting),
}

impl Advertisement {
    /// What a snapshot carries (`None` while pending: no snapshot yet).
    pub fn reporting(&self) -> Option<Option<FailureReporting>> {
        match self {
            Advertisement::Pending => None,
            Advertisement::Off => Some(None),
            Advertisement::On(reporting) => Some(Some(reporting.clone())),
        }
    }
}

/// The advertisement of a server without the flag: always off.
pub fn off() -> watch::Receiver<Advertisement> {
    watch::channel(Advertisement::Off).1
}

/// Starts following the rights; the Infrastructure is read the first time the feature is on.
pub fn start(
    client: Client,
    rights: Rights,
    shutdown: watch::Receiver<bool>,
) -> (watch::Receiver<Advertisement>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Advertisement::Pending);
    let task = tokio::spawn(run(Api::all(client), rights, tx, shutdown));
    (rx, task)
}

async fn run(
    api: Api<Infrastructure>,
    rights: Rights,
    tx: watch::Sender<Advertisement>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut grants = rights.subscribe();
    // The URL as read (once per process): `Some(None)` when the read gave none.
    let mut read: Option<Option<String>> = None;
    loop {
        let current = grants.borrow_and_update().clone();
        if current.is_known() {
            if current.enabled(Feature::AdvertiseFailureReporting) && read.is_none() {
                match read_server_url(&api).await {
                    Some(url) => read = Some(url),
                    None => rights.refused(
                        Feature::AdvertiseFailureReporting,
                        &read_infrastructure().to_string(),
                    ),
                }
            }
            // A refusal above changed the grants: decide from the latest.
            let enabled = rights.current().enabled(Feature::AdvertiseFailureReporting);
            let next = match (&read, enabled) {
                (Some(url), true) => Advertisement::On(FailureReporting {
                    server_url: url.clone(),
                }),
                _ => Advertisement::Off,
            };
            if *tx.borrow() != next {
                if let Advertisement::On(FailureReporting { server_url }) = &next {
                    match server_url {
                        Some(url) => info!(%url, "served configs tell machines where to report first-boot failures: the root CA file and the machineConfigServerURL annotation"),
                        None => info!("served configs carry the root CA file for first-boot failure reports, without the machineConfigServerURL annotation"),
                    }
                }
                tx.send_replace(next);
            }
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            changed = grants.changed() => if changed.is_err() { return },
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// Reads the Infrastructure as upstream does: `Some(Some(url))`, `Some(None)` when it gives
/// no URL (logged once, as upstream's warning), `None` when the API server refused the read
/// (403).
async fn read_server_url(api: &Api<Infrastructure>) -> Option<Option<String>> {
    let without = "serving configs without the machineConfigServerURL annotation, as upstream";
    let infrastructure = match tokio::time::timeout(READ_TIMEOUT, api.get(NAME)).await {
        Err(_) => {
            warn!(
                "the Infrastructure {NAME:?} did not arrive within {} s; {without}",
                READ_TIMEOUT.as_secs()
            );
            return Some(None);
        }
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => return None,
        Ok(Err(error)) => {
            warn!(error = %ErrorChain(&error), "cannot read the Infrastructure {NAME:?}; {without}");
            return Some(None);
        }
        Ok(Ok(infrastructure)) => infrastructure,
    };
    match ignition_host(&infrastructure.status.unwrap_or_default()) {
        Ok(host) => Some(Some(format!("https://{host}"))),
        Err(error) => {
            warn!(%error, "no machine-config-server address in the Infrastructure {NAME:?}; {without}");
            Some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_advertisement_holds_snapshots_back() {
        assert_eq!(Advertisement::Pending.reporting(), None);
        assert_eq!(Advertisement::Off.reporting(), Some(None));
        let on = FailureReporting {
            server_url: Some("https://h:22623".into()),
        };
        assert_eq!(Advertisement::On(on.clone()).reporting(), Some(Some(on)));
        assert_eq!(*off().borrow(), Advertisement::Off);
    }
}

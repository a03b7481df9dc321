//! What this server would answer one request of `compare`, from a snapshot, through the
//! serving code paths in the config handler's order (as `explain` does): the pool from the
//! path ([`pool_path::parse`]), Accept negotiation ([`accept::negotiate`]), readiness, the
//! render ([`render::render`]) and its status ([`server::status_for`]). Decides nothing the
//! server does not decide. Pure.

use bytes::Bytes;
use http::StatusCode;

use super::asks::Ask;
use crate::ignition::{accept, SpecVersion};
use crate::render::layered::DecisionReason;
use crate::render::{self, RenderError};
use crate::server::{self, pool_path};
use crate::snapshot::Snapshot;
use crate::telemetry::ErrorChain;

/// This server's answer to one request.
#[derive(Clone, Debug)]
pub struct Local {
    pub status: u16,
    /// The served bytes on 200; empty otherwise (every error answer has an empty body).
    pub body: Bytes,
    /// The spec version served, when a render succeeded.
    pub served: Option<SpecVersion>,
    /// Why there is no config, when there is none.
    pub error: Option<LocalError>,
    /// Cluster mode: why the layered-image decision served the image it did (or none).
    pub layered: Option<DecisionReason>,
}

/// Why this server would not serve a config: the error's kind, its message and, for a config
/// that cannot be expressed in the asked spec, the field that blocks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalError {
    pub kind: &'static str,
    pub message: String,
    /// `storage.luks[0].cex`: the translation's blocking field (`None` for other errors).
    pub field: Option<String>,
}

/// This server's answer to `GET /config/<pool>` with the Accept header of `ask`, from
/// `snapshot` (`ready`: the source's readiness, always true in bootstrap mode).
pub fn answer(snapshot: &Snapshot, ready: bool, pool: &str, ask: Ask) -> Local {
    let failed = |status: StatusCode, error: LocalError| Local {
        status: status.as_u16(),
        body: Bytes::new(),
        served: None,
        error: Some(error),
        layered: None,
    };
    if let Err(e) = pool_path::parse(&format!("/config/{pool}")) {
        return failed(e.status(), plain("invalid_pool_path", &e));
    }
    let version = match accept::negotiate(ask.accept_header().as_deref()) {
        Ok(version) => version,
        Err(e) => return failed(StatusCode::BAD_REQUEST, plain(e.kind(), &e)),
    };
    if !ready {
        let e = RenderError::NotReady(render::waiting_for(snapshot, pool));
        return failed(server::status_for(&e), of_render(&e));
    }
    match render::render(snapshot, pool, version) {
        Ok(rendered) => Local {
            status: StatusCode::OK.as_u16(),
            body: rendered.body,
            served: Some(rendered.version),
            error: None,
            layered: rendered.layered.map(|decision| decision.reason),
        },
        Err(e) => failed(server::status_for(&e), of_render(&e)),
    }
}

fn plain(kind: &'static str, error: &(dyn std::error::Error + 'static)) -> LocalError {
    LocalError {
        kind,
        message: ErrorChain(error).to_string(),
        field: None,
    }
}

fn of_render(error: &RenderError) -> LocalError {
    LocalError {
        field: match error {
            RenderError::Translate { source, .. } => Some(source.field().to_string()),
            _ => None,
        },
        ..plain(error.kind(), error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Mode;

    #[test]
    fn answers_follow_the_handlers_order() {
        let snapshot = Snapshot::empty(Mode::Bootstrap);
        // Bootstrap mode serves master and arbiter only (500), a missing pool file is 404.
        let worker = answer(&snapshot, true, "worker", Ask::NoAccept);
        assert_eq!(worker.status, 500);
        assert_eq!(worker.error.unwrap().kind, "pool_not_served");
        let master = answer(&snapshot, true, "master", Ask::Spec(SpecVersion::V3_4));
        assert_eq!((master.status, master.body.len()), (404, 0));
        // Cluster mode before its caches synced: 503.
        let cluster = Snapshot::empty(Mode::Cluster);
        assert_eq!(answer(&cluster, false, "worker", Ask::NoAccept).status, 503);
    }
}

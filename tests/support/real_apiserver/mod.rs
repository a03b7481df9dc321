//! The real-server tier, the envtest convention: when `KUBEBUILDER_ASSETS` names a directory
//! holding `kube-apiserver` (and optionally `etcd`), the cluster tests run against a real
//! kube-apiserver started on loopback, with the real CRDs of the upstream tier loaded
//! (`MCS_UPSTREAM_ASSETS`: this tier requires them). Otherwise they run on the in-test server;
//! the tests that only a real server can run are marked `#[tier(real_apiserver)]`, and
//! `.ci/run`'s summary says whether the tier ran.
//!
//! This module owns [`RealApiServer`]: etcd ([`etcd`]) and kube-apiserver ([`kube_apiserver`])
//! as child processes in a temporary directory, readiness, the CRDs loaded and Established,
//! kubeconfig files, and the fake server's test powers as kube-apiserver has them (outage,
//! compaction, request log). The fixture operations are [`client::ApiClient`]'s (it derefs to
//! one). Dropping it stops both processes and removes the directory. Tests get it through
//! `support::api_server`.

pub mod client;
pub mod etcd;
pub mod kube_apiserver;
pub mod process;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::fake_apiserver::RequestRecord;
use client::ApiClient;
use etcd::Etcd;
use kube_apiserver::{Credentials, KubeApiServer, Pki};

/// The variable naming the directory with `kube-apiserver` (and optionally `etcd`), as
/// envtest and `setup-envtest` name it.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The binaries of the tier.
#[derive(Clone, Debug)]
pub struct Assets {
    pub kube_apiserver: PathBuf,
    /// `etcd` of the assets directory, else the one of the `etcd-bin-vendored` crate.
    pub etcd: PathBuf,
}

/// The binaries named by `KUBEBUILDER_ASSETS`, or `None` when it is unset or empty. A set
/// variable without `kube-apiserver` in it is a broken set-up: that panics, never skips.
pub fn assets() -> Option<Assets> {
    assets_in(std::env::var_os(ASSETS_VAR))
}

/// [`assets`] for a value of the variable.
pub fn assets_in(value: Option<std::ffi::OsString>) -> Option<Assets> {
    let dir = PathBuf::from(value.filter(|v| !v.is_empty())?);
    let kube_apiserver = dir.join("kube-apiserver");
    assert!(
        kube_apiserver.is_file(),
        "{ASSETS_VAR}={} has no kube-apiserver",
        dir.display()
    );
    let etcd = match dir.join("etcd") {
        path if path.is_file() => path,
        _ => etcd::vendored_binary().unwrap_or_else(|e| panic!("no etcd: {e}")),
    };
    Some(Assets {
        kube_apiserver,
        etcd,
    })
}

/// A real kube-apiserver with its etcd, on loopback.
pub struct RealApiServer {
    // Dropped in declaration order: the client, then kube-apiserver, then etcd
    // (which removes its data directory), then the directory of certificates and logs.
    api: ApiClient,
    kube_apiserver: Mutex<KubeApiServer>,
    etcd: Etcd,
    pki: Pki,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl RealApiServer {
    /// Starts etcd and kube-apiserver, waits for `/readyz`, loads every CRD of `crd_dir`
    /// (without the Route CRD unless `routes`) and the upstream assets' `config.openshift.io`
    /// CRDs (the Infrastructure, [`crate::upstream::config_crds_if_present`]), and waits until
    /// they are Established and served.
    pub fn start(assets: &Assets, crd_dir: &Path, routes: bool) -> Result<Self, String> {
        Self::start_serving(assets, crd_dir, routes, None)
    }

    /// [`RealApiServer::start`], serving the chain of `serving` (a directory with `tls.crt`,
    /// `tls.key` and `ca.crt`) when given: its clients trust that chain's CA.
    pub fn start_serving(
        assets: &Assets,
        crd_dir: &Path,
        routes: bool,
        serving: Option<&Path>,
    ) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::start_once(assets, serving) {
                Ok(server) => {
                    server.load_crds(crd_dir, routes)?;
                    if let Some(config) = crate::upstream::config_crds_if_present() {
                        server.load_crds(&config, routes)?;
                    }
                    return Ok(server);
                }
                // kube-apiserver exited before it was ready, e.g. because another process took
                // its port between choosing and binding it: again, on new ports.
                Err((true, e)) => last = e,
                Err((false, e)) => return Err(e),
            }
        }
        Err(last)
    }

    /// Starts both processes and waits for readiness; the error says whether kube-apiserver
    /// exited (worth another try).
    fn start_once(assets: &Assets, serving: Option<&Path>) -> Result<Self, (bool, String)> {
        let fail = |e: String| (false, e);
        let dir = tempfile::Builder::new()
            .prefix("mcs-kube-apiserver-")
            .tempdir()
            .map_err(|e| fail(format!("tempdir: {e}")))?;
        let mut pki = Pki::generate().map_err(fail)?;
        if let Some(serving) = serving {
            pki = pki.serving_from(serving).map_err(fail)?;
        }
        pki.write(dir.path()).map_err(fail)?;
        let etcd = Etcd::start(&assets.etcd).map_err(fail)?;
        let kube_apiserver =
            KubeApiServer::spawn(&assets.kube_apiserver, dir.path(), &etcd.url()).map_err(fail)?;
        let url = kube_apiserver.url();
        let kubeconfig = dir.path().join("kubeconfig");
        let under_test = kube_apiserver::kubeconfig_yaml(
            &url,
            &pki.serving_ca_pem,
            Credentials::Certificate(&pki.under_test),
        );
        std::fs::write(&kubeconfig, under_test).map_err(|e| fail(format!("kubeconfig: {e}")))?;
        let fixtures_kubeconfig = dir.path().join("kubeconfig-fixtures");
        let fixtures = kube_apiserver::kubeconfig_yaml(
            &url,
            &pki.serving_ca_pem,
            Credentials::Certificate(&pki.fixtures),
        );
        std::fs::write(&fixtures_kubeconfig, fixtures)
            .map_err(|e| fail(format!("kubeconfig: {e}")))?;

        let api = ApiClient::connect(&fixtures_kubeconfig).map_err(fail)?;
        let server = RealApiServer {
            api,
            kube_apiserver: Mutex::new(kube_apiserver),
            etcd,
            pki,
            kubeconfig,
            _dir: dir,
        };
        match server.wait_ready() {
            Ok(()) => Ok(server),
            Err(e) => Err((server.server().check_running().is_err(), e)),
        }
    }

    fn server(&self) -> std::sync::MutexGuard<'_, KubeApiServer> {
        match self.kube_apiserver.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Polls `/readyz` until it answers `ok`; fails early with the log if the process exits.
    fn wait_ready(&self) -> Result<(), String> {
        process::poll(
            "kube-apiserver /readyz",
            kube_apiserver::READY_TIMEOUT,
            || {
                self.server().check_running()?;
                Ok(self.api.readyz().unwrap_or(false).then_some(()))
            },
        )
        .map_err(|e| format!("{e}\n{}", self.server().log_tail()))
    }

    /// A kubeconfig file for the code under test (user [`kube_apiserver::UNDER_TEST_USER`],
    /// cluster-admin): its requests are the ones [`RealApiServer::requests`] returns.
    pub fn kubeconfig_file(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.server().url()
    }

    /// The CA that signed the serving certificate (what a client of the server trusts).
    pub fn serving_ca_pem(&self) -> &str {
        &self.pki.serving_ca_pem
    }

    /// A kubeconfig with a token (e.g. a ServiceAccount's, from [`RealApiServer::token_for`]).
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        kube_apiserver::kubeconfig_yaml(
            &self.url(),
            &self.pki.serving_ca_pem,
            Credentials::Token(token),
        )
    }

    /// Kills kube-apiserver (an outage: connections reset, port refused); etcd keeps the state.
    pub fn stop(&self) {
        self.server().stop();
    }

    /// Starts kube-apiserver again on the same port and storage and waits until it is ready.
    pub fn restart(&self) {
        if let Err(e) = self.server().restart() {
            panic!("{e}");
        }
        if let Err(e) = self.wait_ready() {
            panic!("{e}");
        }
    }

    /// etcd compaction at the current revision (see [`Etcd::compact`]).
    pub fn compact(&self) {
        if let Err(e) = self.etcd.compact() {
            panic!("etcd compaction: {e}");
        }
    }

    /// The requests of the code under test (the identity of
    /// [`RealApiServer::kubeconfig_file`]), from the audit log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.server().requests(kube_apiserver::UNDER_TEST_USER)
    }

    /// The requests of any `user` (e.g. `system:serviceaccount:<namespace>:<name>`).
    pub fn requests_of(&self, user: &str) -> Vec<RequestRecord> {
        self.server().requests(user)
    }

    pub fn clear_requests(&self) {
        self.server().clear_requests();
    }
}

/// The fixture operations, on the fixture user's client.
impl std::ops::Deref for RealApiServer {
    type Target = ApiClient;

    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

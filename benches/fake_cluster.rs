//! A Kubernetes API for the serving benchmark (`benches/run.sh`): the tests' fake API server
//! (tests/support/fake_apiserver, honest list/watch semantics over plain HTTP on loopback),
//! holding the realistic cluster plus every pool and rendered MachineConfig of a directory
//! written by `benches/gen_bootstrap.py`, so that `machine-config-server start` serves many
//! multi-megabyte pools from one process (bootstrap mode serves only two).
//!
//! Usage: `fake_cluster DIR` (DIR with `machine-pools/` and `machine-configs/`). It prints
//! `KUBECONFIG=<file>` and `TOKEN_DIR=<dir>` (the node-bootstrapper token directory for
//! `--bootstrap-token-dir`), then serves until SIGTERM or SIGINT, and removes its files.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use support::fake_apiserver::{FakeApiServer, Options};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fake_cluster DIR");
        return ExitCode::from(64);
    };
    let api = match FakeApiServer::try_start(Options::default()) {
        Ok(api) => api,
        Err(e) => {
            eprintln!("fake_cluster: cannot start the fake API server: {e}");
            return ExitCode::FAILURE;
        }
    };
    support::cluster::load_realistic_cluster(&api);
    for sub in ["machine-configs", "machine-pools"] {
        if let Err(e) = api.load_yaml_dir(dir.join(sub)) {
            eprintln!("fake_cluster: loading {}: {e}", dir.join(sub).display());
            return ExitCode::FAILURE;
        }
    }
    let tokens = support::cluster::token_dir();
    println!("KUBECONFIG={}", api.kubeconfig_file().display());
    println!("TOKEN_DIR={}", tokens.path().display());
    let _ = std::io::stdout().flush();

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fake_cluster: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    });
    // Dropping `api` and `tokens` stops the server and removes the temporary files.
    ExitCode::SUCCESS
}

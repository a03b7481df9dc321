//! Entry point: parse the command line, set up logging, run. All logic lives in the library.

use std::process::ExitCode;

use clap::Parser as _;
use machine_config_server::app;
use machine_config_server::cli::{Cli, Command, LogFormatArg, RunError};
use machine_config_server::telemetry::{self, LogFormat};

/// jemalloc instead of glibc's malloc, for memory that stays low while the watch caches churn.
/// glibc gives threads their own arenas and keeps what is freed in them; with 5000 Nodes whose
/// watch events decode into short-lived buffers among long-lived cached objects, the server
/// rested at 143 to 153 MB with glibc and at 113 to 122 MB with jemalloc (`benches/scale.sh`,
/// benches/README.md), and the gap widens with the worker threads of a larger node (161 to 166
/// MB with 16 workers). mimalloc was measured too and kept more (194 to 197 MB).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `EX_USAGE`: bad flags or files.
const EXIT_USAGE: u8 = 64;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if matches!(cli.command, Command::Version) {
        println!("machine-config-server {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let format = match cli.root.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    };
    // `cleanup` says in one line why the API could not be asked; kube's request log would say
    // it again.
    let silenced: &[&str] = match cli.command {
        Command::Cleanup(_) => &["kube_client::client::builder"],
        _ => &[],
    };
    if let Err(e) = telemetry::init_silencing(format, cli.root.verbosity, silenced) {
        eprintln!("machine-config-server: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("machine-config-server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(app::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (RunError::Usage(_) | RunError::Left(_))) => {
            eprintln!("machine-config-server: {e}");
            ExitCode::from(e.exit_code())
        }
        Err(RunError::Other(e)) => {
            eprintln!("machine-config-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

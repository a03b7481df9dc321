//! Entry point: parse the command line, set up logging, run. All logic lives in the library.

use std::process::ExitCode;

use clap::Parser as _;
use machine_config_server::app::{self, RunError};
use machine_config_server::cli::{Cli, Command};

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
    // TEMPORARY until the telemetry module lands.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("machine-config-server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(app::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(RunError::Usage(e)) => {
            eprintln!("machine-config-server: {e}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(RunError::Other(e)) => {
            eprintln!("machine-config-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

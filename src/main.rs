//! Entry point: parse the command line, set up logging, run. All logic lives in the library.

use std::process::ExitCode;

use clap::Parser as _;
use machine_config_server::app;
use machine_config_server::cli::{Cli, Command, LogFormatArg, RunError};
use machine_config_server::telemetry::{self, LogFormat};

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
    if let Err(e) = telemetry::init(format, cli.root.verbosity) {
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

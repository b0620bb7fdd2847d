use std::process::ExitCode;

use servery::cli;
use servery::static_files::Files;

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let result = cli::parse().and_then(|cli| cli::run(cli, Files::factory));
    result.unwrap_or_else(|e| cli::report(&e))
}

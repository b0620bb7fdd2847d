use std::process::ExitCode;

use servery::cli;
use servery::sites::Sites;

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let result = cli::parse().and_then(|cli| {
        cli::run(cli, |c| {
            Sites::factory(&c.sites, c.worker_processes(), c.workers.get())
        })
    });
    result.unwrap_or_else(|e| cli::report(&e))
}

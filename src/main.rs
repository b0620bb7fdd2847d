use std::process::ExitCode;

use servery::cli;
use servery::static_files::Files;

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let result = cli::parse().and_then(|cli| {
        cli::run(cli, |config| {
            let root = config.root.clone();
            let files = config.files.clone();
            move |_worker: usize| Files::open(&root, files.clone())
        })
    });
    result.unwrap_or_else(|e| cli::report(&e))
}

//! `servery-load`: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = servery_bench::cli::Cli::parse();
    match servery_bench::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("servery-load: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

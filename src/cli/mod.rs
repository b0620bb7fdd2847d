//! The `servery` command line.
//!
//! Owns: argument parsing (clap), merging flags over the `--config` file,
//! signal forwarding, the ready line on stdout, and mapping outcomes to exit
//! codes: 0 clean, 1 runtime failure, 2 bad configuration (before anything
//! binds), 130 when a second SIGINT abandons the drain. The only module (with
//! `main.rs`) that uses `anyhow`, adding what an operator should do.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::app::ServiceFactory;
use crate::config::{Config, RawConfig};
use crate::supervisor::{Error as SupervisorError, Server, Signal};

/// A thread-per-core io_uring HTTP/1.1 static file server.
#[derive(Debug, Parser)]
#[command(name = "servery", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve ROOT over HTTP/1.1.
    Serve(ServeArgs),
    /// Validate the configuration, print the effective config, exit 0 or 2.
    CheckConfig(ServeArgs),
    /// Internal: one worker process, started by a supervisor with its
    /// control socket at fd 3 (`--isolation process`).
    #[command(hide = true)]
    Worker,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Directory to serve (default: the config file's `root`, else `.`).
    pub root: Option<PathBuf>,
    /// TOML config file; its keys are the flag names with `_` for `-`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub raw: RawConfig,
}

/// An error whose exit code is 2: the configuration was refused.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ConfigRefused(#[from] pub crate::config::Error);

/// Exit code for a second SIGINT (128 + SIGINT).
pub const EXIT_ABANDONED: u8 = 130;

impl ServeArgs {
    /// Merge file ← flags and validate.
    pub fn config(self) -> Result<Config, ConfigRefused> {
        let file = match &self.config {
            Some(p) => RawConfig::load(p)?,
            None => RawConfig::default(),
        };
        let mut flags = self.raw;
        flags.root = self.root;
        Ok(file.merge(flags).validate()?)
    }
}

/// Parse the process's arguments. `--help`, `--version` and usage errors end
/// the process as clap does; a word a setting does not take (`--driver
/// kqueue`) is a refused configuration like any other bad value (exit 2,
/// `servery: --driver: ...`).
pub fn parse() -> anyhow::Result<Cli> {
    Cli::try_parse().or_else(|e| match unknown_choice(&e) {
        Some(refused) => Err(ConfigRefused(refused).into()),
        None => e.exit(),
    })
}

/// The config error for clap's "invalid value" of a word-valued setting.
fn unknown_choice(e: &clap::Error) -> Option<crate::config::Error> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidValue {
        return None;
    }
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    // The argument as clap shows it: `--driver <auto|uring|epoll>`.
    let flag = text(ContextKind::InvalidArg)?.split(' ').next()?;
    let word = text(ContextKind::InvalidValue)?;
    let Some(ContextValue::Strings(allowed)) = e.get(ContextKind::ValidValue) else {
        return None;
    };
    crate::config::Error::unknown_choice(flag, word, allowed)
}

/// Run the command line with the service `make` builds from the config.
pub fn run<F, M>(cli: Cli, make: M) -> anyhow::Result<ExitCode>
where
    F: ServiceFactory,
    M: FnOnce(&Config) -> F,
{
    match cli.command {
        Command::CheckConfig(args) => {
            let config = args.config()?;
            print!("{}", config.to_toml());
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let config = args.clone().config()?;
            serve(config, args, make)
        }
        Command::Worker => match crate::worker::process::main(make) {
            Ok(crate::worker::State::Exited) => Ok(ExitCode::SUCCESS),
            Ok(_) => Ok(ExitCode::FAILURE),
            Err(e) => Err(anyhow::anyhow!(e)).context("worker process"),
        },
    }
}

fn serve<F, M>(config: Config, args: ServeArgs, make: M) -> anyhow::Result<ExitCode>
where
    F: ServiceFactory,
    M: FnOnce(&Config) -> F,
{
    let factory = make(&config);
    // SIGHUP re-reads the same file and flags.
    let reloader = Box::new(move || args.clone().config().map_err(|e| e.to_string()));
    let server = Server::new(config, factory).with_reloader(reloader);
    forward_signals(server.handle()).context("cannot install signal handlers")?;
    let result = server.run(|ready| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{ready}");
        let _ = out.flush();
    });
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(SupervisorError::Abandoned) => {
            eprintln!("servery: second SIGINT, exiting without finishing the drain");
            Ok(ExitCode::from(EXIT_ABANDONED))
        }
        Err(e @ SupervisorError::Listeners(_)) => Err(e).context(
            "cannot set up listeners; is another process on that port? pick another --bind",
        ),
        Err(e @ SupervisorError::ConnectionsCut { .. }) => {
            Err(e).context("raise --drain-timeout to let slow clients finish")
        }
        Err(e @ SupervisorError::Survivors { .. }) => {
            Err(e).context("workers did not stop; abandoning them")
        }
        Err(e) => Err(e).context("servery stopped"),
    }
}

fn forward_signals(handle: crate::supervisor::Handle) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])?;
    std::thread::Builder::new()
        .name("servery-signals".into())
        .spawn(move || {
            for s in signals.forever() {
                let sig = match s {
                    SIGTERM => Signal::Terminate,
                    SIGINT => Signal::Interrupt,
                    SIGUSR1 => Signal::Reopen,
                    _ => Signal::Hangup,
                };
                handle.signal(sig);
            }
        })?;
    Ok(())
}

/// Map a top-level error to its message and exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    eprintln!("servery: {e:#}");
    if e.downcast_ref::<ConfigRefused>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn refusal(args: &[&str]) -> Option<String> {
        let e = Cli::try_parse_from(args).unwrap_err();
        unknown_choice(&e).map(|c| c.to_string())
    }

    #[test]
    fn a_word_a_setting_does_not_take_is_a_refused_setting() {
        assert_eq!(
            refusal(&["servery", "check-config", "--driver", "kqueue"]).as_deref(),
            Some("--driver: \"kqueue\" is not a choice; use auto, uring or epoll")
        );
        assert_eq!(
            refusal(&["servery", "serve", "--isolation="]).as_deref(),
            Some("--isolation: \"\" is not a choice; use thread or process")
        );
    }

    #[test]
    fn other_usage_errors_stay_clap_errors() {
        assert_eq!(refusal(&["servery", "serve", "--bogus"]), None);
        assert_eq!(
            refusal(&["servery", "serve", "--drain-timeout", "abc"]),
            None
        );
    }
}

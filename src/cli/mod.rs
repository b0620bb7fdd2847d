//! The `servery` command line.
//!
//! Owns: argument parsing (clap), merging flags over the `--config` file,
//! signal forwarding, the ready line on stdout, what servery says about
//! itself (`--help`, `help TOPIC`, `man`, `completions`), and mapping
//! outcomes to exit codes: 0 clean, 1 runtime failure, 2 bad configuration
//! or command line (before anything binds), 130 when a second SIGINT
//! abandons the drain. The only module (with `main.rs`) that uses `anyhow`,
//! adding what an operator should do.
//!
//! # Layout
//! - `args`: [`ServeArgs`], the flags of `serve` and `check-config`, grouped
//!   by topic in `--help`, each with its default;
//! - `topic`: the concerns flags are grouped by, and the table from each
//!   setting to its topic;
//! - `defaults`: each flag's default, read back from the effective config of
//!   an empty one;
//! - `manual`: `help [TOPIC]`, the man page and the completion scripts.
//!
//! clap's own `help` subcommand is replaced by ours, which takes a topic
//! (`servery help tls`) or, as clap's did, a command (`servery help serve`
//! prints what `servery serve --help` does); the words it takes are checked
//! by clap, so an unknown one exits 2 listing them.

mod args;
mod defaults;
mod manual;
mod topic;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use args::ServeArgs;

use crate::app::ServiceFactory;
use crate::config::{Config, RawConfig};
use crate::supervisor::{Error as SupervisorError, Server, Signal};

/// A thread-per-core io_uring HTTP/1.1 static file server.
#[derive(Debug, Parser)]
#[command(name = "servery", version, about, disable_help_subcommand = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve ROOT over HTTP/1.1 and HTTP/2.
    // A negative number is a value, so it gets the setting's own refusal
    // (`--drain-timeout: -1 is not a number of seconds ...`), not clap's
    // tip to write `-- -1`.
    #[command(allow_negative_numbers = true)]
    Serve(ServeArgs),
    /// Validate the configuration, print the effective config, exit 0 or 2.
    #[command(allow_negative_numbers = true)]
    CheckConfig(ServeArgs),
    /// Explain a topic (a group of flags: listeners, tls, ...) or a command.
    Help {
        /// A topic or a command; without one, the list of both.
        #[arg(value_name = "TOPIC")]
        topic: Option<String>,
    },
    /// Print the man page (roff) of servery(1).
    Man,
    /// Print a shell completion script.
    Completions {
        /// The shell the script is for.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Internal: one worker process, started by a supervisor with its
    /// control socket at fd 3 (`--isolation process`).
    #[command(hide = true)]
    Worker,
}

/// The whole command line as clap sees it: the derived [`Cli`], with the
/// words `help` takes (every topic and every visible command) as its
/// possible values, so that clap refuses an unknown one and completions
/// offer them.
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let words = manual::words(&cmd);
    cmd.mut_subcommand("help", |help| {
        help.mut_arg("topic", |topic| {
            topic.value_parser(clap::builder::PossibleValuesParser::new(
                words
                    .into_iter()
                    .map(|(word, about)| clap::builder::PossibleValue::new(word).help(about)),
            ))
        })
    })
}

/// An error whose exit code is [`EXIT_REFUSED`]: the configuration was
/// refused.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ConfigRefused(#[from] pub crate::config::Error);

/// Exit code for a refused configuration or command line (clap's own).
pub const EXIT_REFUSED: u8 = 2;

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
    command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
        .or_else(|e| match unknown_choice(&e) {
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
    M: Fn(&Config) -> F + Send + 'static,
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
        Command::Help { topic } => {
            let mut text = Vec::new();
            manual::help(&mut command(), topic.as_deref(), &mut text)?;
            print(&text, "the help")
        }
        Command::Man => {
            let mut text = Vec::new();
            manual::man(&command(), &mut text)?;
            print(&text, "the man page")
        }
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics if its writer fails.
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut command(), "servery", &mut text);
            print(&text, "the completion script")
        }
        Command::Worker => match crate::supervisor::process_worker::main(make) {
            Ok(crate::worker::State::Exited) => Ok(ExitCode::SUCCESS),
            Ok(_) => Ok(ExitCode::FAILURE),
            Err(e) => Err(anyhow::anyhow!(e)).context("worker process"),
        },
    }
}

/// Write `text` (`what` names it) to stdout. A reader that went away early
/// (`servery man | head`) is no failure: it has what it wanted.
fn print(text: &[u8], what: &str) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context(format!("cannot write {what} to stdout")),
    }
}

fn serve<F, M>(config: Config, args: ServeArgs, make: M) -> anyhow::Result<ExitCode>
where
    F: ServiceFactory,
    M: Fn(&Config) -> F + Send + 'static,
{
    let factory = make(&config);
    // SIGHUP re-reads the same file and flags, and each generation's
    // services are made from its own config.
    let reloader = Box::new(move || args.clone().config().map_err(|e| e.to_string()));
    let server = Server::new(config, factory)
        .with_reloader(reloader)
        .remaking(Box::new(make));
    forward_signals(server.handle()).context("cannot install signal handlers")?;
    let result = server.run(|ready| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{ready}");
        let _ = out.flush();
    });
    match result {
        Ok(()) => {
            // The other end of the ready line: said once every worker has
            // drained and exited (SIGTERM, SIGINT).
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "servery: stopped: every request finished, every worker exited"
            );
            let _ = out.flush();
            Ok(ExitCode::SUCCESS)
        }
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
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: &[&str]) -> Option<String> {
        let e = command().try_get_matches_from(args).unwrap_err();
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

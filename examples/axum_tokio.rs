//! The baseline of the app benchmarks: the Router of `examples/axum/routes.rs` on its usual
//! runtime, `axum::serve` on a tokio current-thread runtime: one thread, which
//! `servery-load matrix` pins with `taskset` like every other server.
//!
//! `cargo run --release --example axum_tokio -- --bind 127.0.0.1:8080`
//!
//! Prints nothing while serving. SIGTERM or ctrl-c stops accepting, lets the connections finish
//! their responses (axum's graceful shutdown) and exits 0; a bad argument exits 2 with a
//! message, a socket that cannot be bound exits 1.
//!
//! Flow:
//! 1. Parse `--bind ADDR` from `std::env::args` (default [`DEFAULT_BIND`]).
//! 2. Build the current-thread runtime, install the SIGTERM handler, bind the listener; any
//!    failure here is reported before anything is served.
//! 3. Serve until a signal, then drain and return.

#[path = "axum/routes.rs"]
mod routes;

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Where it listens without `--bind`: the port servery's own examples use.
const DEFAULT_BIND: &str = "127.0.0.1:8080";

const USAGE: &str = "usage: axum_tokio [--bind ADDR]   (default 127.0.0.1:8080)";

/// Why the command line was refused.
#[derive(Debug, PartialEq, Eq)]
enum Usage {
    Help,
    MissingValue,
    BadAddr { value: String },
    Unknown { arg: String },
}

fn main() -> ExitCode {
    let bind = match parse_args(std::env::args().skip(1)) {
        Ok(bind) => bind,
        Err(Usage::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(usage) => {
            eprintln!("axum_tokio: {}\n{USAGE}", describe(&usage));
            return ExitCode::from(2);
        }
    };
    match run(bind) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--bind ADDR` or `--bind=ADDR`, once at most; nothing else.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<SocketAddr, Usage> {
    let mut bind = DEFAULT_BIND.to_string();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Err(Usage::Help),
            "--bind" => bind = args.next().ok_or(Usage::MissingValue)?,
            _ => match arg.strip_prefix("--bind=") {
                Some(value) => bind = value.to_string(),
                None => return Err(Usage::Unknown { arg }),
            },
        }
    }
    bind.parse().map_err(|_| Usage::BadAddr {
        value: bind.clone(),
    })
}

fn describe(usage: &Usage) -> String {
    match usage {
        Usage::Help => USAGE.to_string(),
        Usage::MissingValue => "--bind needs a value, e.g. --bind 127.0.0.1:8080".to_string(),
        Usage::BadAddr { value } => {
            format!("--bind {value:?} is not an IP:PORT socket address, e.g. 127.0.0.1:8080")
        }
        Usage::Unknown { arg } => format!("unknown argument {arg:?}"),
    }
}

/// Serves [`routes::router`] on `bind` until SIGTERM or ctrl-c.
fn run(bind: SocketAddr) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Installed before binding, so a SIGTERM that arrives once the port is open is ours.
        let terminate = signal(SignalKind::terminate())?;
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {bind}: {e}")))?;
        axum::serve(listener, routes::router())
            .with_graceful_shutdown(stopped(terminate))
            .await
    })
}

/// Resolves on SIGTERM or ctrl-c (SIGINT).
async fn stopped(mut terminate: Signal) {
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<SocketAddr, Usage> {
        parse_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn bind_defaults_to_loopback_8080_and_takes_both_spellings() {
        assert_eq!(args(&[]), Ok("127.0.0.1:8080".parse().expect("addr")));
        assert_eq!(
            args(&["--bind", "0.0.0.0:9000"]),
            Ok("0.0.0.0:9000".parse().expect("addr"))
        );
        assert_eq!(
            args(&["--bind=[::1]:1"]),
            Ok("[::1]:1".parse().expect("addr"))
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        assert_eq!(args(&["--bind"]), Err(Usage::MissingValue));
        assert_eq!(
            args(&["--bind", "localhost"]),
            Err(Usage::BadAddr {
                value: "localhost".into()
            })
        );
        assert_eq!(
            args(&["--port", "1"]),
            Err(Usage::Unknown {
                arg: "--port".into()
            })
        );
        assert_eq!(args(&["-h"]), Err(Usage::Help));
    }
}

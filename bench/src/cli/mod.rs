//! The `servery-load` command line: syntax, conversion into a [`Plan`], and output.
//!
//! Owns: flags and their help text, the `validate` and `matrix` subcommands, where the summary
//! and JSON go, and exit codes (0 ran, 1 validation or setup failed, 2 usage error from clap).
//! Does not own: defaults (`plan` documents them) or any measuring.
//!
//! The top level is `servery-load [OPTIONS] URL...`; subcommands (`validate`, `matrix`) sit
//! beside it. A URL always contains `://`, so it can never be mistaken for a
//! subcommand name, and adding one never changes what a plain `servery-load URL` does.
//!
//! Flow:
//! 1. clap parses [`Cli`]; [`LoadArgs::plan`] turns flags into a checked [`Plan`].
//! 2. Unless `--no-validate`, `validate::check` must pass, or we exit 1 with its message.
//! 3. `load::run` measures; the summary goes to stdout (stderr when JSON goes to stdout), the
//!    JSON to `--json FILE`.

mod matrix;
mod parse;

use std::fs;
use std::io::Write as _;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

pub use matrix::MatrixArgs;

use crate::plan::{self, CpuSet, Mode, Plan};
use crate::{load, validate};

/// An HTTP/1.1 (and, with --h3, HTTP/3) load generator: closed or open loop, pipelining,
/// connection churn, response validation, HdrHistogram latencies and JSON output.
#[derive(Debug, Parser)]
#[command(
    name = "servery-load",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Request each URL once, check it like a load run would, print status, length and
    /// SHA-256, and exit (1 if a check failed). No load.
    Validate(RequestArgs),
    /// Benchmark matrix: scenarios × servers (servery thread and process mode, nginx, h2o, Caddy, and
    /// axum on tokio for the app scenarios) × workers × trials, on disjoint server and client
    /// CPUs. Writes bench/results/matrix-*.json
    /// (identity and every raw trial), a markdown table file and two SVG charts, prints the
    /// tables, and shows progress on stderr.
    Matrix(MatrixArgs),
    /// Write the matrix's docroot (the files every static and app-1k scenario serves, the same
    /// bytes on every run) into DIR and print each file's name, length and SHA-256, one per
    /// line: what scripts/scaling-kit.sh checks each server against before a run.
    Docroot(DocrootArgs),
    /// A minimal io_uring responder (one pinned thread, a fixed response to every request
    /// head) for measuring receive and send mechanisms servery's runtime does not expose:
    /// multishot receive over provided buffers, zero-copy send, against single-shot receive.
    /// For decision records (docs/decisions/), not a server.
    Probe(ProbeArgs),
}

/// `servery-load docroot` options.
#[derive(Debug, Args)]
pub struct DocrootArgs {
    /// Directory to write the files into (created if missing; files there are overwritten).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `servery-load probe` options.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Address to listen on (port 0: any free port; the ready line says which).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub bind: std::net::SocketAddr,
    /// How connections receive.
    #[arg(long, value_enum, default_value = "single")]
    pub recv: crate::probe::Recv,
    /// How responses are sent.
    #[arg(long, value_enum, default_value = "writev")]
    pub send: crate::probe::Send,
    /// Directory whose top-level files are served by name (read into memory at start).
    #[arg(long)]
    pub root: std::path::PathBuf,
    /// CPU to pin the probe's thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// What to request and what a good answer is; shared by the load run and `validate`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    /// http:// URLs on one server; several are requested round-robin.
    #[arg(value_name = "URL", required = true)]
    pub urls: Vec<String>,
    /// Extra request header, e.g. -H 'Accept-Encoding: gzip' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Request method [default: GET, or POST with --body-file].
    #[arg(short = 'X', long, value_name = "METHOD")]
    pub method: Option<String>,
    /// Send this file as the body of every request, with its Content-Length (read once, up
    /// front; the request is serialized with it like the head).
    #[arg(long, value_parser = parse::body_file, value_name = "FILE")]
    pub body_file: Option<BodyFile>,
    /// Per-request timeout (10s, 500ms, ...) [default: 2s].
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
    /// Status every response must have.
    #[arg(long, default_value_t = plan::DEFAULT_EXPECT_STATUS, value_name = "CODE")]
    pub expect_status: u16,
    /// SHA-256 (hex) the body must have, checked once per URL before the run.
    #[arg(long, value_name = "HEX")]
    pub expect_sha256: Option<String>,
    /// Body length the response must have, checked once per URL before the run.
    #[arg(long, value_name = "BYTES")]
    pub expect_length: Option<u64>,
    /// HTTP/3 over QUIC (UDP) to https:// URLs (port 443 unless given), with the same checks
    /// and report: --connections QUIC connections, each carrying --pipeline concurrent request
    /// streams (each sends its next request when its last is answered), --churn a handshake
    /// per request. Any server certificate is accepted (self-signed welcome). Transfer counts
    /// response bodies only: HTTP/3 heads are compressed.
    #[arg(long)]
    pub h3: bool,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Connections in total, split evenly over threads.
    #[arg(short, long, default_value_t = plan::DEFAULT_CONNECTIONS, value_name = "N")]
    pub connections: NonZeroUsize,
    /// Worker threads, each an event loop over its connections.
    #[arg(short, long, default_value_t = plan::DEFAULT_THREADS, value_name = "N")]
    pub threads: NonZeroUsize,
    /// CPUs to pin worker threads to, round-robin: '1', '2-3,8'.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuSet>,
    /// Timed window [default: 10s].
    #[arg(short, long, value_parser = parse::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Untimed warm-up before the window; its connections carry over [default: 1s].
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,
    /// Requests in flight per connection, written together in one write (--h3: concurrent
    /// request streams per connection).
    #[arg(short, long, default_value = "1", value_name = "N")]
    pub pipeline: NonZeroUsize,
    /// New connection per request, sending 'Connection: close'.
    #[arg(long)]
    pub churn: bool,
    /// Open loop: send this many requests per second in total and count latency from each
    /// request's scheduled time, so queueing behind a slow server is measured.
    #[arg(short = 'R', long, value_name = "REQ/S")]
    pub rate: Option<f64>,
    /// Stop after exactly N timed requests (sent and answered); --duration still caps the run.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<NonZeroU64>,
    /// Skip the pre-run check of each URL (for measuring error paths on purpose).
    #[arg(long)]
    pub no_validate: bool,
    /// Write the JSON report to FILE ('-' for stdout; the summary then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print no human summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// The bytes of a `--body-file`, read when the command line is parsed.
#[derive(Clone)]
pub struct BodyFile(pub Vec<u8>);

impl std::fmt::Debug for BodyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BodyFile({} bytes)", self.0.len())
    }
}

impl RequestArgs {
    /// A plan for these URLs with this request shape and every other field defaulted.
    pub fn plan(&self) -> Result<Plan, plan::Error> {
        let mut plan = if self.h3 {
            crate::http3::plan(&self.urls)?
        } else {
            Plan::new(&self.urls)?
        };
        plan.body = self.body_file.as_ref().map(|b| b.0.clone());
        plan.method = match (&self.method, &plan.body) {
            (Some(method), _) => method.clone(),
            (None, Some(_)) => "POST".to_string(),
            (None, None) => plan::DEFAULT_METHOD.to_string(),
        };
        plan.headers = self
            .headers
            .iter()
            .map(|h| plan::parse_header(h))
            .collect::<Result<_, _>>()?;
        if let Some(timeout) = self.timeout {
            plan.timeout = timeout;
        }
        plan.expect.status = self.expect_status;
        plan.expect.sha256 = self
            .expect_sha256
            .as_deref()
            .map(plan::parse_sha256)
            .transpose()?;
        plan.expect.length = self.expect_length;
        Ok(plan)
    }
}

impl LoadArgs {
    /// The checked plan these flags describe.
    pub fn plan(&self) -> Result<Plan, plan::Error> {
        let mut plan = self.request.plan()?;
        plan.connections = self.connections;
        plan.threads = self.threads;
        plan.cpus = self.cpus.clone();
        if let Some(duration) = self.duration {
            plan.duration = duration;
        }
        if let Some(warmup) = self.warmup {
            plan.warmup = warmup;
        }
        plan.pipeline = self.pipeline;
        plan.churn = self.churn;
        plan.mode = match self.rate {
            Some(rate) => Mode::Open { rate },
            None => Mode::Closed,
        };
        plan.requests = self.requests;
        plan.check()?;
        Ok(plan)
    }
}

/// Runs what the command line asked for.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Validate(args)) => {
            let plan = args.plan().context("invalid options")?;
            match check(&args, &plan) {
                Ok(checked) => {
                    for c in &checked {
                        println!(
                            "{}  status {}  {} bytes{}  sha256 {}",
                            c.url,
                            c.status,
                            c.length,
                            if c.chunked { " (chunked)" } else { "" },
                            c.sha256
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("servery-load: validation failed: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Some(Command::Matrix(args)) => matrix::run(&args),
        Some(Command::Docroot(args)) => {
            let files = crate::matrix::scenario::write_docroot(&args.dir)
                .with_context(|| format!("cannot write the docroot into {}", args.dir.display()))?;
            for (name, length, sha256) in files {
                println!("{name} {length} {sha256}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Probe(args)) => {
            crate::probe::run(&crate::probe::Options {
                bind: args.bind,
                recv: args.recv,
                send: args.send,
                root: args.root,
                cpu: args.cpu,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        None => run_load(&cli.load),
    }
}

fn run_load(args: &LoadArgs) -> anyhow::Result<ExitCode> {
    let plan = args.plan().context("invalid options")?;
    let json_to_stdout = args.json.as_deref() == Some("-".as_ref());
    if !args.no_validate {
        match check(&args.request, &plan) {
            Ok(checked) => {
                if !args.quiet {
                    for c in &checked {
                        eprintln!(
                            "validated {}: status {}, {} bytes, sha256 {}",
                            c.url, c.status, c.length, c.sha256
                        );
                    }
                }
            }
            Err(e) => {
                eprintln!("servery-load: validation failed: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let report = if args.request.h3 {
        load::h3::run(&plan)
    } else {
        load::run(&plan)
    };
    let report = report.context("the load run could not start")?;
    if !args.quiet {
        // The report has no protocol field; say it where people read it.
        let h3 = if args.request.h3 {
            "HTTP/3 over QUIC: pipeline is concurrent streams per connection, transfer is bodies\n"
        } else {
            ""
        };
        if json_to_stdout {
            eprint!("{h3}{}", report.summary());
        } else {
            print!("{h3}{}", report.summary());
        }
    }
    if let Some(path) = &args.json {
        let json = report.to_json();
        if json_to_stdout {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{json}").context("cannot write JSON to stdout")?;
        } else {
            fs::write(path, json + "\n")
                .with_context(|| format!("cannot write JSON report to {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pre-run check over the protocol the arguments ask for.
fn check(args: &RequestArgs, plan: &Plan) -> anyhow::Result<Vec<validate::Checked>> {
    Ok(if args.h3 {
        crate::http3::check(plan)?
    } else {
        validate::check(plan)?
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The command line `servery-load ARGS...`, parsed (shared with the
    /// matrix flags' tests).
    pub(crate) fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("servery-load").chain(args.iter().copied()))
    }

    #[test]
    fn plain_urls_are_a_load_run() {
        let cli = parse(&[
            "-c",
            "8",
            "-t",
            "2",
            "--cpus",
            "0-1",
            "-d",
            "500ms",
            "--warmup",
            "0",
            "-p",
            "4",
            "-H",
            "X-A: 1",
            "-n",
            "100",
            "http://127.0.0.1:9/a",
            "http://127.0.0.1:9/b",
        ])
        .expect("parse");
        assert!(cli.command.is_none());
        let plan = cli.load.plan().expect("plan");
        assert_eq!(plan.connections.get(), 8);
        assert_eq!(plan.threads.get(), 2);
        assert_eq!(
            plan.cpus.as_ref().map(|c| c.ids().to_vec()),
            Some(vec![0, 1])
        );
        assert_eq!(plan.duration, Duration::from_millis(500));
        assert_eq!(plan.warmup, Duration::ZERO);
        assert_eq!(plan.pipeline.get(), 4);
        assert_eq!(plan.target.paths, ["/a", "/b"]);
        assert_eq!(plan.headers, [("X-A".to_string(), "1".to_string())]);
        assert_eq!(plan.requests.map(|n| n.get()), Some(100));
        assert_eq!(plan.mode, Mode::Closed);
    }

    #[test]
    fn help_states_the_real_defaults() {
        use clap::CommandFactory as _;
        let help = Cli::command().render_long_help().to_string();
        for (flag, default) in [
            ("--timeout", plan::DEFAULT_TIMEOUT),
            ("--duration", plan::DEFAULT_DURATION),
            ("--warmup", plan::DEFAULT_WARMUP),
        ] {
            let line = help
                .lines()
                .skip_while(|l| !l.contains(flag))
                .take_while(|l| !l.trim().is_empty())
                .collect::<String>();
            let text = format!("[default: {}s]", default.as_secs());
            assert!(line.contains(&text), "{flag} help lacks {text}: {line}");
        }
    }

    #[test]
    fn a_body_file_is_posted_unless_a_method_is_given() {
        let path = std::env::temp_dir().join(format!("servery-load-body-{}", std::process::id()));
        fs::write(&path, [1u8, 2, 3]).expect("write");
        let file = path.display().to_string();
        let cli = parse(&["--body-file", &file, "http://127.0.0.1:9/digest"]).expect("parse");
        let plan = cli.load.plan().expect("plan");
        assert_eq!(
            (plan.method.as_str(), plan.body.as_deref()),
            ("POST", Some(&[1u8, 2, 3][..]))
        );
        let cli =
            parse(&["-X", "PUT", "--body-file", &file, "http://127.0.0.1:9/"]).expect("parse");
        assert_eq!(cli.load.plan().expect("plan").method, "PUT");
        let cli = parse(&["-X", "DELETE", "http://127.0.0.1:9/"]).expect("parse");
        let plan = cli.load.plan().expect("plan");
        assert_eq!(
            (plan.method.as_str(), plan.body.is_none()),
            ("DELETE", true)
        );
        assert!(parse(&["-X", "GE T", "http://127.0.0.1:9/"])
            .expect("parse")
            .load
            .plan()
            .is_err());
        let _ = fs::remove_file(&path);
        assert!(parse(&["--body-file", &file, "http://127.0.0.1:9/"]).is_err());
    }

    #[test]
    fn h3_takes_https_urls_and_the_http_flags() {
        let cli = parse(&[
            "--h3",
            "-c",
            "2",
            "-p",
            "4",
            "https://localhost/a",
            "https://localhost/b",
        ])
        .expect("parse");
        assert!(cli.load.request.h3);
        let plan = cli.load.plan().expect("plan");
        assert_eq!(plan.target.addr.port(), 443);
        assert_eq!(plan.target.paths, ["/a", "/b"]);
        assert_eq!(
            plan.target.urls,
            ["https://localhost/a", "https://localhost/b"]
        );
        assert_eq!((plan.connections.get(), plan.pipeline.get()), (2, 4));
        let cli = parse(&["--h3", "http://127.0.0.1:9/"]).expect("parse");
        assert!(cli.load.plan().is_err(), "QUIC is always encrypted");
        let cli = parse(&["https://127.0.0.1:9/"]).expect("parse");
        assert!(cli.load.plan().is_err(), "HTTP/1.1 is cleartext only");
        let cli = parse(&["validate", "--h3", "https://127.0.0.1:9/"]).expect("parse");
        assert!(matches!(cli.command, Some(Command::Validate(args)) if args.h3));
    }

    #[test]
    fn rate_selects_open_loop() {
        let cli = parse(&["-R", "1000", "http://127.0.0.1:9/"]).expect("parse");
        assert_eq!(
            cli.load.plan().expect("plan").mode,
            Mode::Open { rate: 1000.0 }
        );
    }

    #[test]
    fn validate_is_a_subcommand_beside_plain_urls() {
        let cli =
            parse(&["validate", "--expect-status", "404", "http://127.0.0.1:9/"]).expect("parse");
        match cli.command {
            Some(Command::Validate(args)) => {
                assert_eq!(args.plan().expect("plan").expect.status, 404)
            }
            _ => panic!("validate not recognised"),
        }
    }

    #[test]
    fn rejects_missing_urls_and_bad_values() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["-d", "soon", "http://127.0.0.1:9/"]).is_err());
        assert!(parse(&["-t", "0", "http://127.0.0.1:9/"]).is_err());
        assert!(parse(&["-c", "0", "http://127.0.0.1:9/"]).is_err());
        assert!(parse(&["--cpus", "3-1", "http://127.0.0.1:9/"]).is_err());
        let cli = parse(&["--churn", "-p", "2", "http://127.0.0.1:9/"]).expect("parse");
        assert!(cli.load.plan().is_err());
    }
}

//! The `servery-load matrix` flags and their conversion into [`matrix::Options`]: defaults
//! (the seed's, or `--quick`'s), the prebuilt-binary flags, where results go; then running it
//! and printing where the files went.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::parse;
use crate::matrix;
use crate::matrix::h2load;
use crate::matrix::preset::Preset;
use crate::matrix::scenario::Scenario;
use crate::matrix::server::Server;
use crate::plan::CpuSet;

/// `servery-load matrix` options; the defaults are the seed's (7 trials × 10 s after 3 s).
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// 3 trials × 3 s after a 1 s warm-up (explicit --trials/--duration/--warmup still win).
    #[arg(long, conflicts_with = "preset")]
    pub quick: bool,
    /// A named matrix. `scaling` (issue 15): static-1k, app-1k, static-64k and the pipelined
    /// series static-1k-pipelined and app-1k-pipelined on servery-thread, servery-process,
    /// nginx and h2o at 1, 2, 4 and 8 workers, 3 trials × 1 s after 0.5 s, planned to end
    /// within 8 minutes with start-up (refused before it starts if it would not). Explicit
    /// flags still win.
    #[arg(long, value_parser = parse::preset, value_name = "NAME")]
    pub preset: Option<Preset>,
    /// Trials per point [default: 7; --quick: 3].
    #[arg(long, value_name = "N")]
    pub trials: Option<NonZeroUsize>,
    /// Timed window per trial [default: 10s; --quick: 3s].
    #[arg(short, long, value_parser = parse::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Warm-up before each window [default: 3s; --quick: 1s].
    #[arg(long, value_parser = parse::duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,
    /// Scenarios, comma-separated [default: static-1k, static-64k, static-8m,
    /// static-churn-1k, static-range-64k, static-not-modified, app-1k, app-json, app-post-4k,
    /// h2-static-1k, h2-static-64k, h2-static-8m, h2-app-1k, h3-static-1k, h3-static-64k,
    /// h3-static-8m, gzip-64k-js; also static-1k-pipelined and app-1k-pipelined, 8 requests
    /// in flight per connection, when named or in --preset scaling]. Each is measured on the
    /// servers that can serve it: app-json and app-post-4k on servery and axum-tokio,
    /// gzip-64k-js on servery and nginx, h3-* on servery and caddy (nginx and h2o as Debian
    /// packages them have no HTTP/3), the others on servery, nginx, h2o and caddy. The h2-*
    /// scenarios are their HTTP/1.1 twins over HTTP/2, loaded by h2load (skipped, with a note,
    /// when h2load or curl is not installed); the h3-* ones are over HTTP/3 (QUIC), loaded by
    /// this program's own HTTP/3 engine (what `servery-load --h3` runs).
    #[arg(long, value_delimiter = ',', value_parser = parse::scenario, value_name = "LIST")]
    pub scenarios: Vec<Scenario>,
    /// Servers, comma-separated [default: servery-thread, servery-process, nginx, h2o, caddy,
    /// axum-tokio]. axum-tokio is one thread, so it runs in 1-worker points only. caddy runs
    /// over TLS or h2c in the h2-* scenarios, HTTP/3 off, and over TLS with HTTP/3 on in the
    /// h3-* ones; servery likewise (--h3 off, --h3 on).
    #[arg(long, value_delimiter = ',', value_parser = parse::server, value_name = "LIST")]
    pub servers: Vec<Server>,
    /// Worker counts, comma-separated; counts the server side has no cores for are skipped
    /// (and reported) [default: 1,2,4].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workers: Vec<NonZeroUsize>,
    /// CPUs for the servers (one worker per physical core) [default: the first half of the
    /// physical cores, or every core --client-cpus leaves].
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<CpuSet>,
    /// CPUs for the load generator, one thread each; must not overlap --server-cpus
    /// [default: the physical cores the servers do not get].
    #[arg(long, value_name = "LIST")]
    pub client_cpus: Option<CpuSet>,
    /// servery binary to measure [default: build it with cargo in --repo].
    #[arg(long, value_name = "PATH")]
    pub servery_bin: Option<PathBuf>,
    /// examples/hello binary for app-1k [default: build it with cargo in --repo].
    #[arg(long, value_name = "PATH")]
    pub hello_bin: Option<PathBuf>,
    /// examples/axum binary (the axum Router on servery) for app-json [default: build it with
    /// cargo in --repo].
    #[arg(long, value_name = "PATH")]
    pub axum_bin: Option<PathBuf>,
    /// examples/upload binary (a POSTed body's SHA-256) for app-post-4k [default: build it
    /// with cargo in --repo].
    #[arg(long, value_name = "PATH")]
    pub upload_bin: Option<PathBuf>,
    /// examples/axum_tokio binary, the axum-tokio server [default: build it with cargo in
    /// --repo].
    #[arg(long, value_name = "PATH")]
    pub axum_tokio_bin: Option<PathBuf>,
    /// HTTP/2 connections h2load opens in the h2 scenarios (-c), and QUIC connections in the
    /// h3 ones [default: 8].
    #[arg(long, value_name = "N")]
    pub h2_connections: Option<NonZeroUsize>,
    /// Concurrent streams per HTTP/2 connection (h2load -m), and per QUIC connection in the h3
    /// scenarios [default: 8].
    #[arg(long, value_name = "N")]
    pub h2_streams: Option<NonZeroUsize>,
    /// h2load threads (-t), at most --h2-connections; each gets a client CPU of its own
    /// [default: 1].
    #[arg(long, value_name = "N")]
    pub h2_threads: Option<NonZeroUsize>,
    /// Run the h2 scenarios in the clear with HTTP/2 by prior knowledge (h2c) instead of over
    /// TLS with ALPN h2.
    #[arg(long)]
    pub h2c: bool,
    /// The servery checkout (cargo builds there; scripts/lib has the peer configs)
    /// [default: the checkout this binary was built from, else the current directory].
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Where the result files go [default: REPO/bench/results].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Do not print the tables on stdout (the files are written all the same).
    #[arg(short, long)]
    pub quiet: bool,
}

impl MatrixArgs {
    /// The matrix these flags describe, defaults filled in.
    pub fn options(&self) -> matrix::Options {
        let repo = self.repo.clone().unwrap_or_else(default_repo);
        // The defaults: a preset's plan, else `--quick`'s, else the seed's.
        let plan = self.preset.map(Preset::plan);
        let pick = |given: Option<Duration>, preset: Option<Duration>, quick, normal| {
            given
                .or(preset)
                .unwrap_or(if self.quick { quick } else { normal })
        };
        matrix::Options {
            scenarios: or_default(
                &self.scenarios,
                plan.as_ref()
                    .map_or_else(Scenario::default_set, |p| p.scenarios.clone()),
            ),
            servers: or_default(
                &self.servers,
                plan.as_ref()
                    .map_or_else(|| Server::ALL.to_vec(), |p| p.servers.clone()),
            ),
            workers: if self.workers.is_empty() {
                plan.as_ref()
                    .map_or_else(|| matrix::DEFAULT_WORKERS.to_vec(), |p| p.workers.clone())
            } else {
                self.workers.iter().map(|w| w.get()).collect()
            },
            trials: self.trials.map_or(
                match (&plan, self.quick) {
                    (Some(p), _) => p.trials,
                    (None, true) => matrix::QUICK_TRIALS,
                    (None, false) => matrix::DEFAULT_TRIALS,
                },
                NonZeroUsize::get,
            ),
            duration: pick(
                self.duration,
                plan.as_ref().map(|p| p.duration),
                matrix::QUICK_DURATION,
                matrix::DEFAULT_DURATION,
            ),
            warmup: pick(
                self.warmup,
                plan.as_ref().map(|p| p.warmup),
                matrix::QUICK_WARMUP,
                matrix::DEFAULT_WARMUP,
            ),
            quick: self.quick,
            preset: self.preset,
            budget: plan.as_ref().map(|p| p.budget),
            server_cpus: self.server_cpus.clone(),
            client_cpus: self.client_cpus.clone(),
            servery_bin: self.servery_bin.clone(),
            hello_bin: self.hello_bin.clone(),
            axum_bin: self.axum_bin.clone(),
            upload_bin: self.upload_bin.clone(),
            axum_tokio_bin: self.axum_tokio_bin.clone(),
            h2: {
                let default = h2load::Settings::default();
                h2load::Settings {
                    connections: self.h2_connections.unwrap_or(default.connections),
                    streams: self.h2_streams.unwrap_or(default.streams),
                    threads: self.h2_threads.unwrap_or(default.threads),
                    transport: if self.h2c {
                        h2load::Transport::H2c
                    } else {
                        h2load::Transport::Tls
                    },
                }
            },
            out_dir: self
                .out
                .clone()
                .unwrap_or_else(|| repo.join("bench/results")),
            repo,
            command: std::env::args().collect(),
        }
    }
}

/// `given` when the flag was given, else `default`.
fn or_default<T: Clone>(given: &[T], default: Vec<T>) -> Vec<T> {
    if given.is_empty() {
        default
    } else {
        given.to_vec()
    }
}

/// The checkout this binary was built from (bench/..), if it is still there, else `.`.
fn default_repo() -> PathBuf {
    let built = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    if built.join("scripts/lib").is_dir() {
        std::fs::canonicalize(&built).unwrap_or(built)
    } else {
        PathBuf::from(".")
    }
}

pub(super) fn run(args: &MatrixArgs) -> anyhow::Result<ExitCode> {
    let options = args.options();
    if options.duration.is_zero() {
        anyhow::bail!("--duration must be greater than zero");
    }
    if options.h2.threads > options.h2.connections {
        anyhow::bail!(
            "--h2-threads {} is more than --h2-connections {}: h2load gives each thread a \
             connection at least",
            options.h2.threads,
            options.h2.connections
        );
    }
    let outcome = matrix::run(&options).context("the matrix could not run")?;
    if !args.quiet {
        print!("{}", outcome.markdown);
    }
    eprintln!("results: {}", outcome.json.display());
    eprintln!("tables:  {}", outcome.markdown_path.display());
    for chart in &outcome.charts {
        eprintln!("chart:   {}", chart.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::cli::tests::parse;
    use crate::cli::Command;

    #[test]
    fn matrix_defaults_are_the_seed_and_quick_shortens_them() {
        let options = |args: &[&str]| match parse(args).expect("parse").command {
            Some(Command::Matrix(m)) => m.options(),
            _ => panic!("matrix not recognised"),
        };
        let full = options(&["matrix"]);
        assert_eq!(full.trials, 7);
        assert_eq!(full.duration, Duration::from_secs(10));
        assert_eq!(full.warmup, Duration::from_secs(3));
        assert_eq!(full.workers, [1, 2, 4]);
        assert_eq!(full.scenarios.len(), 17);
        assert!(full.scenarios.contains(&Scenario::H3Static8m));
        assert_eq!(full.h2, h2load::Settings::default());
        assert_eq!(full.h2.transport, h2load::Transport::Tls);
        assert_eq!(full.servers.len(), 6);
        assert!(full.servers.contains(&Server::Caddy));
        assert!(full.axum_bin.is_none() && full.upload_bin.is_none());
        let quick = options(&["matrix", "--quick"]);
        assert_eq!(
            (quick.trials, quick.duration, quick.warmup),
            (3, Duration::from_secs(3), Duration::from_secs(1))
        );
        let custom = options(&[
            "matrix",
            "--quick",
            "--trials",
            "5",
            "--scenarios",
            "static-1k,app-1k",
            "--servers",
            "nginx",
            "--workers",
            "1,2",
            "--server-cpus",
            "0",
            "--client-cpus",
            "1",
        ]);
        assert_eq!(custom.trials, 5);
        assert_eq!(custom.scenarios, [Scenario::Static1k, Scenario::App1k]);
        assert_eq!(custom.servers, [Server::Nginx]);
        assert_eq!(custom.workers, [1, 2]);
        assert_eq!(custom.client_cpus.map(|c| c.to_string()), Some("1".into()));
        assert!(parse(&["matrix", "--scenarios", "static-2k"]).is_err());
        let apps = options(&[
            "matrix",
            "--scenarios",
            "app-json,app-post-4k",
            "--servers",
            "servery-thread,axum-tokio",
            "--axum-bin",
            "/b/axum",
            "--upload-bin",
            "/b/upload",
            "--axum-tokio-bin",
            "/b/axum_tokio",
        ]);
        assert_eq!(apps.scenarios, [Scenario::AppJson, Scenario::AppPost4k]);
        assert_eq!(apps.servers, [Server::ServeryThread, Server::AxumTokio]);
        assert_eq!(apps.axum_bin, Some(PathBuf::from("/b/axum")));
        assert_eq!(apps.upload_bin, Some(PathBuf::from("/b/upload")));
        assert_eq!(apps.axum_tokio_bin, Some(PathBuf::from("/b/axum_tokio")));
        assert!(parse(&["matrix", "--servers", "apache"]).is_err());
        let h2 = options(&[
            "matrix",
            "--scenarios",
            "h2-static-1k,h2-app-1k",
            "--h2-connections",
            "4",
            "--h2-streams",
            "32",
            "--h2-threads",
            "2",
            "--h2c",
        ]);
        assert_eq!(h2.scenarios, [Scenario::H2Static1k, Scenario::H2App1k]);
        assert_eq!(
            (
                h2.h2.connections.get(),
                h2.h2.streams.get(),
                h2.h2.threads.get()
            ),
            (4, 32, 2)
        );
        assert_eq!(h2.h2.transport, h2load::Transport::H2c);
        assert_eq!(h2.h2.in_flight(), 128);
        assert!(parse(&["matrix", "--h2-streams", "0"]).is_err());
        let h3 = options(&[
            "matrix",
            "--scenarios",
            "h3-static-1k,h3-static-64k,h3-static-8m",
            "--servers",
            "servery-thread,caddy",
            "--h2-connections",
            "2",
        ]);
        assert_eq!(
            h3.scenarios,
            [
                Scenario::H3Static1k,
                Scenario::H3Static64k,
                Scenario::H3Static8m
            ]
        );
        let shape = crate::matrix::h3::Settings::of(&h3.h2);
        assert_eq!((shape.connections.get(), shape.streams.get()), (2, 8));
        assert!(parse(&["matrix", "--scenarios", "h3-app-1k"]).is_err());
    }

    #[test]
    fn the_scaling_preset_fills_the_defaults_and_flags_still_win() {
        let options = |args: &[&str]| match parse(args).expect("parse").command {
            Some(Command::Matrix(m)) => m.options(),
            _ => panic!("matrix not recognised"),
        };
        let scaling = options(&["matrix", "--preset", "scaling", "--out", "/tmp/x"]);
        let plan = Preset::Scaling.plan();
        assert_eq!(scaling.scenarios, plan.scenarios);
        assert_eq!(scaling.servers, plan.servers);
        assert_eq!(scaling.workers, [1, 2, 4, 8]);
        assert_eq!(
            (scaling.trials, scaling.warmup, scaling.duration),
            (3, Duration::from_millis(500), Duration::from_secs(1))
        );
        assert_eq!(scaling.budget, Some(Duration::from_secs(480)));
        assert_eq!(scaling.preset, Some(Preset::Scaling));
        assert_eq!(scaling.out_dir, PathBuf::from("/tmp/x"));
        // The kit's dry run: the same preset, one worker.
        let dry = options(&["matrix", "--preset", "scaling", "--workers", "1"]);
        assert_eq!((dry.workers, dry.scenarios.len()), (vec![1], 5));
        let plain = options(&["matrix"]);
        assert_eq!((plain.preset, plain.budget), (None, None));
        assert!(!plain.scenarios.iter().any(|s| s.is_pipelined()));
        assert!(parse(&["matrix", "--preset", "scaling", "--quick"]).is_err());
        assert!(parse(&["matrix", "--preset", "fast"]).is_err());
    }
}

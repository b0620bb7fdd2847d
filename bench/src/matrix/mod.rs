//! `servery-load matrix`: every scenario × server × worker count × trial, measured the same
//! way, kept raw, and summarized into the seed's tables and charts.
//!
//! Owns: the order of the run (server order rotates across trials, so no server always goes
//! first or last), starting and stopping servers, sampling them from `/proc`, and writing the
//! artifact set under `bench/results/`: `matrix-STAMP.json` (identity and every raw trial),
//! `matrix-STAMP.md` (the tables) and two SVG charts.
//! Does not own: load generation (`load::run_with`; h2load for the h2 scenarios, [`h2load`];
//! `load::h3::run_with` for the h3 ones, [`h3`]) or checking answers (`validate`; [`curl`]
//! over HTTP/2; `http3::check` over HTTP/3; [`encoded`] decodes a compressed one).
//!
//! Flow:
//! 1. Split the CPUs into a server side and a client side ([`cores`]); drop worker counts the
//!    server side has no physical cores for, saying so.
//! 2. Line up each scenario's servers ([`lineup`]: the selected ones that can serve it); build
//!    the programs they run or take them from `--servery-bin`, `--hello-bin`, `--axum-bin`,
//!    `--upload-bin`, `--axum-tokio-bin` ([`programs`]); find the peers; leave out, with a
//!    note, servers whose program or peer is missing, and h2 scenarios whose tools are
//!    ([`lineup::with_tools`]); record the [`identity`]. Pin this thread to a client CPU.
//! 3. Write the docroot ([`scenario`]) into a temp directory, and the peers' TLS
//!    [`certificate`] when a peer takes part in a scenario over TLS (h2 over TLS, h3).
//! 4. Estimate the whole run ([`preset::estimate`]), print it, and refuse it if it is longer
//!    than the budget (`--preset scaling`: 8 minutes). For each scenario, worker count and
//!    trial, for each server of the lineup that runs that many workers, in the trial's
//!    rotated order (`trial`): start it on a fresh port under `taskset`, wait for its first valid answer, validate the scenario's request, run warm-up
//!    and window while sampling its memory, read its CPU time at the window's edges, stop it.
//! 5. Summarize each point ([`point`]), compute scaling, render the tables ([`render`]) and
//!    charts ([`chart`]), write the files.

pub mod certificate;
pub mod chart;
pub mod cores;
pub mod curl;
pub mod encoded;
pub mod h2load;
pub mod h3;
pub mod identity;
pub mod lineup;
pub mod point;
pub mod preset;
pub mod probe;
pub mod procfs;
pub mod programs;
pub mod progress;
pub mod render;
pub mod scenario;
pub mod server;
pub mod stats;
mod trial;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde::Serialize;

use crate::plan::CpuSet;
use cores::{Assignment, Topology};
use identity::Identity;
use lineup::Lineup;
use point::Point;
use preset::Preset;
use programs::{Program, Programs};
use progress::Progress;
use scenario::Scenario;
use server::Server;

/// The seed's trial count: seven gives a median and MAD that one bad trial cannot move much.
pub const DEFAULT_TRIALS: usize = 7;
/// The seed's window.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The seed's warm-up.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(3);
/// `--quick`: the fewest trials that still have a median and a MAD.
pub const QUICK_TRIALS: usize = 3;
/// `--quick` window.
pub const QUICK_DURATION: Duration = Duration::from_secs(3);
/// `--quick` warm-up: 1 s instead of 3 s keeps the full 7 × 4 matrix of a 2-core machine
/// (84 trials) well under 10 minutes; connections and caches settle within it on loopback.
pub const QUICK_WARMUP: Duration = Duration::from_secs(1);
/// The seed's worker counts, capped by the server side's physical cores.
pub const DEFAULT_WORKERS: [usize; 3] = [1, 2, 4];
/// Identifies the artifact's JSON layout; bump on any incompatible change.
pub const SCHEMA: &str = "servery-matrix/1";

/// A validated matrix request.
#[derive(Clone, Debug)]
pub struct Options {
    pub scenarios: Vec<Scenario>,
    pub servers: Vec<Server>,
    pub workers: Vec<usize>,
    pub trials: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub quick: bool,
    /// The named matrix these options came from, if any.
    pub preset: Option<Preset>,
    /// The whole run must fit in this ([`preset::estimate`]); a plan that does not is refused
    /// before any server starts.
    pub budget: Option<Duration>,
    pub server_cpus: Option<CpuSet>,
    pub client_cpus: Option<CpuSet>,
    /// Prebuilt binaries; when absent the matrix runs `cargo build --profile release-lto` for those its
    /// lineup needs.
    pub servery_bin: Option<PathBuf>,
    pub hello_bin: Option<PathBuf>,
    pub axum_bin: Option<PathBuf>,
    pub upload_bin: Option<PathBuf>,
    pub axum_tokio_bin: Option<PathBuf>,
    /// The h2 scenarios' load (h2load `-c`, `-m`, `-t`) and transport.
    pub h2: h2load::Settings,
    /// The servery checkout: where cargo builds, `scripts/lib` lives and git is asked.
    pub repo: PathBuf,
    /// Where the artifact files go.
    pub out_dir: PathBuf,
    /// The command line, recorded in the artifact.
    pub command: Vec<String>,
}

/// A matrix that could not run (a server failing inside a trial is recorded instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Cores(#[from] cores::Error),
    #[error("none of the requested worker counts {wanted:?} fits the server side's {cores} physical core(s); pass --workers 1 or give the server more CPUs")]
    NoWorkers { wanted: Vec<usize>, cores: usize },
    #[error("no server left to measure: {reasons}")]
    NoServers { reasons: String },
    #[error("cannot run cargo in {repo:?}: {source} (or pass --servery-bin, --hello-bin, --axum-bin, --upload-bin and --axum-tokio-bin)")]
    Cargo { repo: PathBuf, source: io::Error },
    #[error("`{command}` failed ({status})")]
    Build { command: String, status: ExitStatus },
    #[error("{path:?} is not an executable file ({flag})")]
    Binary { path: PathBuf, flag: &'static str },
    #[error("cannot pin the matrix to client CPU {cpu}")]
    Pin { cpu: usize },
    #[error("{path:?}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Chart(#[from] chart::Error),
    #[error("cannot make the peers' TLS certificate: {0}")]
    Certificate(#[from] certificate::Error),
    #[error("{trials} trials would take about {} with start-up, more than the budget of {}; \
             pass fewer --scenarios, --servers or --workers, or a shorter --duration", progress::clock(*planned), progress::clock(*budget))]
    OverBudget {
        trials: usize,
        planned: Duration,
        budget: Duration,
    },
}

/// The files a run wrote, and its tables.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub json: PathBuf,
    pub markdown_path: PathBuf,
    pub charts: Vec<PathBuf>,
    pub markdown: String,
}

/// The settings block of the artifact.
#[derive(Clone, Debug, Serialize)]
struct Settings {
    quick: bool,
    preset: Option<Preset>,
    /// The plan's estimate of the whole run, start-up included ([`preset::estimate`]), and
    /// its budget, if it has one.
    planned_s: f64,
    budget_s: Option<f64>,
    trials: usize,
    duration_s: f64,
    warmup_s: f64,
    scenarios: Vec<Scenario>,
    servers: Vec<Server>,
    /// The servers measured in each scenario run.
    lineups: Vec<Lineup>,
    workers: Vec<usize>,
    workers_skipped: Vec<usize>,
    static_connections: usize,
    large_connections: usize,
    app_connections: usize,
    /// Requests in flight per connection in the `*-pipelined` scenarios.
    pipeline_depth: usize,
    /// The h2 scenarios' h2load settings, and the streams they keep in flight.
    h2: h2load::Settings,
    h2_streams_in_flight: usize,
    /// The h3 scenarios' shape (the h2 one), the streams it keeps in flight, and its load
    /// threads (one per client CPU, at most one per connection).
    h3: h3::Settings,
    h3_streams_in_flight: usize,
    h3_threads: usize,
    client_bound_busy: f64,
}

#[derive(Serialize)]
struct Artifact<'a> {
    schema: &'static str,
    identity: &'a Identity,
    settings: &'a Settings,
    assignment: &'a Assignment,
    programs: &'a Programs,
    /// Each peer's config text as first written for each worker count ("nginx/1"), and for
    /// the h2 scenarios ("nginx/1/h2" over TLS, "nginx/1/h2c" in the clear) and the h3 ones
    /// ("caddy/1/h3").
    configs: &'a BTreeMap<String, String>,
    notes: &'a [String],
    points: &'a [Point],
    /// Which trial's CDF each latency chart curve is: (scenario, server, trial).
    cdf_trials: Vec<(Scenario, Server, usize)>,
    tables_markdown: &'a str,
    charts: Vec<String>,
}

/// Runs the matrix `options` describes; see the module docs for the flow.
pub fn run(options: &Options) -> Result<Outcome, Error> {
    // 1. CPUs.
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    let topology = Topology::read(&allowed);
    let assignment = cores::assign(
        &topology,
        options.server_cpus.as_ref(),
        options.client_cpus.as_ref(),
    )?;
    let (workers, workers_skipped) = cores::cap_workers(&options.workers, assignment.server_cores);
    if workers.is_empty() {
        return Err(Error::NoWorkers {
            wanted: options.workers.clone(),
            cores: assignment.server_cores,
        });
    }
    let mut notes: Vec<String> = assignment.notes.clone();
    if !workers_skipped.is_empty() {
        notes.push(format!(
            "Worker counts {workers_skipped:?} skipped: the server side has {} physical core(s) \
             (CPUs {:?}; client CPUs {:?}), and a worker never shares a core. Scaling figures \
             need a machine with more cores.",
            assignment.server_cores, assignment.server, assignment.client
        ));
    }

    // 2. Lineups, programs and identity.
    let (lineups, lineup_notes) = lineup::wanted(&options.scenarios, &options.servers);
    notes.extend(lineup_notes);
    let (programs, unavailable) = programs::resolve(options, &lineup::needed(&lineups))?;
    let mut servers = Vec::new();
    let mut missing = Vec::new();
    for &server in &options.servers {
        let absent = match server {
            Server::Nginx => programs.nginx.is_none(),
            Server::H2o => programs.h2o.is_none(),
            Server::Caddy => programs.caddy.is_none(),
            _ => false,
        };
        if absent {
            missing.push(server);
        } else {
            servers.push(server);
        }
    }
    let names = |list: &[Server]| list.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
    if !missing.is_empty() {
        notes.push(format!(
            "Not installed, so not measured: {} (scripts/install-peers.sh installs them).",
            names(&missing)
        ));
    }
    let mut lineups = lineups;
    for l in &mut lineups {
        l.servers.retain(|s| !missing.contains(s));
    }
    let (lineups, cut_notes) = lineup::without(lineups, &unavailable);
    notes.extend(cut_notes);
    let tls = options.h2.transport == h2load::Transport::Tls;
    let (lineups, h2_notes) = lineup::with_tools(
        lineups,
        lineup::Tools {
            h2load: programs.h2load.is_some(),
            curl: programs.curl.is_some(),
            openssl: programs.openssl.is_some(),
            tls,
        },
    );
    notes.extend(h2_notes);
    notes.extend(lineup::worker_notes(&lineups, &workers));
    if lineups.is_empty() {
        return Err(Error::NoServers {
            reasons: format!(
                "{} not installed; programs neither built nor given: {}",
                if missing.is_empty() {
                    "none".to_string()
                } else {
                    names(&missing)
                },
                unavailable
                    .iter()
                    .map(|p| format!("{} ({})", p.target(), p.flag()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    notes.extend(lineup::app_notes(&lineups));
    let (started_utc, stamp) = identity::utc_now();
    let version = |p: &Option<PathBuf>, args: &[&str]| {
        p.as_deref().and_then(|p| identity::first_line(p, args))
    };
    let wrk = programs::which("wrk");
    let sha256 = |p: Program| {
        programs
            .get(p)
            .and_then(|path| identity::sha256_file(path).ok())
    };
    let identity = Identity {
        started_utc,
        command: identity::shell_quote(&options.command),
        git_commit: identity::git_commit(&options.repo),
        git_dirty: identity::git_dirty(&options.repo),
        servery_sha256: sha256(Program::Servery),
        hello_sha256: sha256(Program::Hello),
        axum_sha256: sha256(Program::Axum),
        upload_sha256: sha256(Program::Upload),
        axum_tokio_sha256: sha256(Program::AxumTokio),
        nginx_version: version(&programs.nginx, &["-v"]),
        h2o_version: version(&programs.h2o, &["--version"]),
        caddy_version: version(&programs.caddy, &["version"]),
        wrk_version: version(&wrk, &["--version"]),
        h2load_version: version(&programs.h2load, &["--version"]),
        curl_version: version(&programs.curl, &["--version"]),
        openssl_version: version(&programs.openssl, &["version"]),
        kernel: identity::kernel(),
        cpu_model: identity::cpu_model(),
        logical_cpus: topology.logical_cpus(),
        physical_cores: topology.physical_cores().len(),
    };
    let client = assignment.client[0];
    if !crate::sys::affinity::pin(client) {
        return Err(Error::Pin { cpu: client });
    }

    // 3. Docroot.
    let work = WorkDir::create()?;
    let docroot = work.path.join("docroot");
    let _files = scenario::write_docroot(&docroot).map_err(|source| Error::Io {
        path: docroot.clone(),
        source,
    })?;
    let peers_on_tls = lineups
        .iter()
        .any(|l| lineup::over_tls(l.scenario, tls) && l.servers.iter().any(|s| s.is_peer()));
    let certificate = match (&programs.openssl, peers_on_tls) {
        (Some(openssl), true) => Some(certificate::make(openssl, &work.path)?),
        _ => None,
    };

    // 4. Trials, after the plan's length is known and fits.
    let total = lineup::trials(&lineups, &workers, options.trials);
    let planned = preset::estimate(total, options.warmup, options.duration);
    eprintln!(
        "matrix: plan: {total} trials × ({} s warm-up + {} s window + {} s start/stop) + {} s \
         start-up ≈ {}{}",
        options.warmup.as_secs_f64(),
        options.duration.as_secs_f64(),
        preset::TRIAL_OVERHEAD.as_secs_f64(),
        preset::STARTUP.as_secs_f64(),
        progress::clock(planned),
        options
            .budget
            .map(|b| format!(" (budget {})", progress::clock(b)))
            .unwrap_or_default()
    );
    if let Some(budget) = options.budget.filter(|&b| planned > b) {
        return Err(Error::OverBudget {
            trials: total,
            planned,
            budget,
        });
    }
    let h3_shape = h3::Settings::of(&options.h2);
    let settings = Settings {
        quick: options.quick,
        preset: options.preset,
        planned_s: planned.as_secs_f64(),
        budget_s: options.budget.map(|b| b.as_secs_f64()),
        trials: options.trials,
        duration_s: options.duration.as_secs_f64(),
        warmup_s: options.warmup.as_secs_f64(),
        scenarios: options.scenarios.clone(),
        servers: servers.clone(),
        lineups: lineups.clone(),
        workers: workers.clone(),
        workers_skipped,
        static_connections: scenario::STATIC_CONNECTIONS,
        large_connections: scenario::LARGE_CONNECTIONS,
        app_connections: scenario::APP_CONNECTIONS,
        pipeline_depth: scenario::PIPELINE_DEPTH,
        h2: options.h2,
        h2_streams_in_flight: options.h2.in_flight(),
        h3: h3_shape,
        h3_streams_in_flight: h3_shape.in_flight(),
        h3_threads: h3_shape.threads(assignment.client.len()),
        client_bound_busy: stats::CLIENT_BOUND_BUSY,
    };
    let context = trial::Context {
        programs: &programs,
        docroot: &docroot,
        work: &work.path,
        client_cpus: CpuSet::from_ids(assignment.client.clone()).ok_or(Error::Pin { cpu: 0 })?,
        duration: options.duration,
        warmup: options.warmup,
        h2: options.h2,
        h3: h3_shape,
        certificate: certificate.as_ref(),
    };
    let guess = options.warmup + options.duration + Duration::from_millis(500);
    let mut progress = Progress::new(total, guess);
    let mut points: Vec<Point> = Vec::new();
    let mut configs = BTreeMap::new();
    for lineup in &lineups {
        let scenario = lineup.scenario;
        for &n in &workers {
            let here = lineup.at(n);
            if here.is_empty() {
                continue;
            }
            let cpus =
                CpuSet::from_ids(assignment.server[..n].to_vec()).ok_or(Error::NoWorkers {
                    wanted: vec![n],
                    cores: assignment.server_cores,
                })?;
            for t in 1..=options.trials {
                for (position, server) in rotated(&here, t - 1).into_iter().enumerate() {
                    progress.begin(&format!(
                        "{} · {} · {n} worker(s) · trial {t}/{}",
                        scenario.name(),
                        server.name(),
                        options.trials
                    ));
                    let (record, config) = context.run(scenario, server, &cpus, t, position);
                    if let Some(text) = config {
                        let mut key = format!("{}/{n}", server.name());
                        if scenario.is_h2() {
                            key.push('/');
                            key.push_str(options.h2.transport.protocol());
                        } else if scenario.is_h3() {
                            key.push_str("/h3");
                        }
                        configs.entry(key).or_insert(text);
                    }
                    progress.finish_one();
                    let index = match points.iter().position(|p| {
                        p.scenario == scenario && p.server == server && p.workers == n
                    }) {
                        Some(i) => i,
                        None => {
                            points.push(Point {
                                scenario,
                                server,
                                workers: n,
                                server_cpus: cpus.ids().to_vec(),
                                trials: Vec::new(),
                                summary: point::Summary::default(),
                            });
                            points.len() - 1
                        }
                    };
                    points[index].trials.push(record);
                }
            }
        }
    }
    progress.close();

    // 5. Summaries, tables, charts, files. Rows go scenario, server, workers.
    for p in &mut points {
        p.summary = point::summarize(&p.trials);
    }
    point::fill_scaling(&mut points);
    notes.extend(negotiated(&points));
    let order = |s: Server| servers.iter().position(|&x| x == s);
    points.sort_by_key(|p| {
        (
            options.scenarios.iter().position(|&s| s == p.scenario),
            order(p.server),
            p.workers,
        )
    });
    fs::create_dir_all(&options.out_dir).map_err(|source| Error::Io {
        path: options.out_dir.clone(),
        source,
    })?;
    let base = options.out_dir.join(format!("matrix-{stamp}"));
    let charts = [
        (
            base.with_extension("rps.svg"),
            chart::rps_vs_workers(&points)?,
        ),
        (
            base.with_extension("latency.svg"),
            chart::latency_cdf(&points)?,
        ),
    ];
    let markdown = markdown(&identity, &settings, &assignment, &notes, &points, &charts);
    let json_path = base.with_extension("json");
    let md_path = base.with_extension("md");
    let artifact = Artifact {
        schema: SCHEMA,
        identity: &identity,
        settings: &settings,
        assignment: &assignment,
        programs: &programs,
        configs: &configs,
        notes: &notes,
        points: &points,
        cdf_trials: chart::cdf_sources(&points),
        tables_markdown: &markdown,
        charts: charts.iter().map(|(p, _)| file_name(p)).collect(),
    };
    let json = serde_json::to_string_pretty(&artifact).map_err(|e| Error::Io {
        path: json_path.clone(),
        source: e.into(),
    })?;
    let write = |path: &Path, text: &str| {
        fs::write(path, text).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    write(&json_path, &(json + "\n"))?;
    write(&md_path, &markdown)?;
    for (path, svg) in &charts {
        write(path, svg)?;
    }
    Ok(Outcome {
        json: json_path,
        markdown_path: md_path,
        charts: charts.into_iter().map(|(p, _)| p).collect(),
        markdown,
    })
}

/// `servers` rotated left by `by`: trial 1 runs A B C D, trial 2 B C D A, and so on.
pub fn rotated<T: Copy>(servers: &[T], by: usize) -> Vec<T> {
    if servers.is_empty() {
        return Vec::new();
    }
    let by = by % servers.len();
    servers[by..]
        .iter()
        .chain(&servers[..by])
        .copied()
        .collect()
}

/// The run's markdown: what ran, on what, then the tables and the charts.
fn markdown(
    identity: &Identity,
    settings: &Settings,
    assignment: &Assignment,
    notes: &[String],
    points: &[Point],
    charts: &[(PathBuf, String)],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Command: `{}`\n", identity.command);
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_string());
    let _ = writeln!(
        out,
        "- Started {} on {} ({} logical CPU(s), {} physical core(s)), kernel {}",
        identity.started_utc,
        opt(&identity.cpu_model),
        identity.logical_cpus,
        identity.physical_cores,
        opt(&identity.kernel)
    );
    let hashes: Vec<String> = [
        ("servery", &identity.servery_sha256),
        ("hello", &identity.hello_sha256),
        ("axum", &identity.axum_sha256),
        ("upload", &identity.upload_sha256),
        ("axum_tokio", &identity.axum_tokio_sha256),
    ]
    .iter()
    .filter_map(|(name, hash)| Some(format!("{name} sha256 {}", hash.as_ref()?)))
    .collect();
    let _ = writeln!(
        out,
        "- Commit {}{}; {}",
        opt(&identity.git_commit),
        match identity.git_dirty {
            Some(true) => " (dirty)",
            _ => "",
        },
        if hashes.is_empty() {
            "no binary of this checkout".to_string()
        } else {
            hashes.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "- Peers: {}, {}, caddy {}",
        opt(&identity.nginx_version),
        opt(&identity.h2o_version),
        opt(&identity.caddy_version)
    );
    let _ = writeln!(
        out,
        "- Server CPUs {:?}, client CPUs {:?} (one load thread each); {} trial(s) × {} s after \
         {} s warm-up; c{} static (c{} for static-8m), c{} app; server order rotates each trial",
        assignment.server,
        assignment.client,
        settings.trials,
        settings.duration_s,
        settings.warmup_s,
        settings.static_connections,
        settings.large_connections,
        settings.app_connections
    );
    if settings.lineups.iter().any(|l| l.scenario.is_pipelined()) {
        let _ = writeln!(
            out,
            "- `*-pipelined` scenarios: their base scenario's request, connections and answer \
             with {} requests in flight per connection, written in one batch",
            settings.pipeline_depth
        );
    }
    if let Some(preset) = settings.preset {
        let _ = writeln!(
            out,
            "- Preset `{}`: planned {} with start-up{}",
            preset.name(),
            progress::clock(Duration::from_secs_f64(settings.planned_s)),
            settings
                .budget_s
                .map(|b| format!(", budget {}", progress::clock(Duration::from_secs_f64(b))))
                .unwrap_or_default()
        );
    }
    if settings.lineups.iter().any(|l| l.scenario.is_h2()) {
        let h2 = &settings.h2;
        let _ = writeln!(
            out,
            "- h2 scenarios: {} `-c {} -m {} -t {}` ({} streams in flight) {}, on the first {} \
             client CPU(s); curl checks readiness and one answer's bytes over HTTP/2 first. \
             Client core there is h2load's utime + stime over the window, whose edges are \
             h2load's own phase lines",
            opt(&identity.h2load_version),
            h2.connections,
            h2.streams,
            h2.threads,
            settings.h2_streams_in_flight,
            match h2.transport {
                h2load::Transport::Tls =>
                    "over TLS (ALPN h2; the peers with a self-signed P-256 certificate made for \
                     the run, servery with its own from --tls-self-signed; HTTP/3 off on all, \
                     so none sends Alt-Svc)",
                h2load::Transport::H2c => "in the clear (h2c, by prior knowledge)",
            },
            h2.threads.get().min(assignment.client.len()),
        );
    }
    if settings.lineups.iter().any(|l| l.scenario.is_h3()) {
        let h3 = &settings.h3;
        let _ = writeln!(
            out,
            "- h3 scenarios: servery-load's HTTP/3 engine (`servery-load --h3 -c {} -p {} -t {}`, \
             `-p {}` in h3-static-8m: quinn and h3 on one pinned current-thread tokio runtime \
             per load thread; {} streams in flight, the h2 shape) on the first {} client CPU(s), \
             over QUIC with TLS 1.3 to the TLS port's number over UDP (Caddy with the run's \
             certificate and `protocols h1 h2 h3`, servery with its own and `--h3 on`); one \
             answer's bytes are checked over HTTP/3 first. Client core there is the load \
             threads' CPU time, as for HTTP/1.1",
            h3.connections,
            h3.streams,
            settings.h3_threads,
            h3.large_streams,
            settings.h3_streams_in_flight,
            settings.h3_threads,
        );
    }
    for note in notes {
        let _ = writeln!(out, "- {note}");
    }
    out.push('\n');
    out.push_str(&render::tables(points));
    out.push('\n');
    let _ = writeln!(
        out,
        "Charts: {} (median RPS against workers per scenario; latency CDF of each server's \
         median-RPS trial at the scenario's largest worker count).",
        charts
            .iter()
            .map(|(p, _)| format!("`{}`", file_name(p)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}

/// A note of the TLS version and cipher h2load negotiated with each server in the h2
/// scenarios (one line when all agree), so a reader sees that the handshakes and record
/// encryption compared were the same.
fn negotiated(points: &[Point]) -> Option<String> {
    let mut seen: Vec<(Server, String)> = Vec::new();
    for p in points.iter().filter(|p| p.scenario.is_h2()) {
        for out in p
            .trials
            .iter()
            .filter_map(|t| Some(&t.h2load.as_ref()?.output))
        {
            let (Some(version), Some(cipher)) = (&out.tls_protocol, &out.cipher) else {
                continue;
            };
            let tls = format!("{version} {cipher}");
            if !seen.iter().any(|(s, t)| *s == p.server && *t == tls) {
                seen.push((p.server, tls));
            }
        }
    }
    let first = seen.first()?.1.clone();
    if seen.iter().all(|(_, t)| *t == first) {
        return Some(format!(
            "h2 over TLS: h2load negotiated {first} with every server."
        ));
    }
    let each: Vec<String> = seen
        .iter()
        .map(|(s, t)| format!("{} {t}", s.label()))
        .collect();
    Some(format!(
        "h2 over TLS: h2load negotiated {} (they differ, so record encryption cost differs \
         too).",
        each.join("; ")
    ))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A private temp directory for the docroot, configs and logs, removed on drop.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn create() -> Result<WorkDir, Error> {
        let path = std::env::temp_dir().join(format!("servery-matrix.{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_negotiated_cipher_is_noted_once_when_all_agree() {
        let with = |server, cipher: &str| Point {
            scenario: Scenario::H2Static1k,
            server,
            workers: 1,
            server_cpus: vec![0],
            trials: vec![point::Trial {
                h2load: Some(h2load::Record {
                    output: h2load::Output {
                        tls_protocol: Some("TLSv1.3".into()),
                        cipher: Some(cipher.into()),
                        ..h2load::Output::default()
                    },
                    ..h2load::Record::default()
                }),
                ..point::Trial::default()
            }],
            summary: point::Summary::default(),
        };
        let aes = "TLS_AES_128_GCM_SHA256";
        let same = [with(Server::ServeryThread, aes), with(Server::Nginx, aes)];
        assert_eq!(
            negotiated(&same).as_deref(),
            Some(
                "h2 over TLS: h2load negotiated TLSv1.3 TLS_AES_128_GCM_SHA256 with every server."
            )
        );
        let differ = [
            with(Server::ServeryThread, "TLS_AES_256_GCM_SHA384"),
            with(Server::Nginx, aes),
        ];
        let note = negotiated(&differ).expect("note");
        assert!(
            note.contains(
                "servery (thread) TLSv1.3 TLS_AES_256_GCM_SHA384; nginx TLSv1.3 TLS_AES_128"
            ),
            "{note}"
        );
        assert_eq!(negotiated(&[]), None);
    }

    #[test]
    fn server_order_rotates_across_trials() {
        let s = ["a", "b", "c", "d"];
        assert_eq!(rotated(&s, 0), ["a", "b", "c", "d"]);
        assert_eq!(rotated(&s, 1), ["b", "c", "d", "a"]);
        assert_eq!(rotated(&s, 5), ["b", "c", "d", "a"]);
        assert!(rotated::<u8>(&[], 3).is_empty());
    }
}

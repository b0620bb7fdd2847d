//! The records a matrix run keeps: every trial's raw numbers ([`Trial`]) and, per point
//! (scenario × server × workers), their summary ([`Summary`]). Summaries are pure functions of
//! the trials, so they can be recomputed from the JSON artifact.

use serde::Serialize;

use super::h2load;
use super::procfs::Memory;
use super::scenario::Scenario;
use super::server::{Ready, Server, Stopped};
use super::stats::{self, Scaling};
use crate::report::{Quantile, Report};

/// One start, measurement and stop of one server.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Trial {
    /// 1-based trial number.
    pub trial: usize,
    /// This server's place (0-based) in the trial's rotated server order.
    pub position: usize,
    pub port: u16,
    pub ready: Option<Ready>,
    /// Summed over the process tree right after the first valid response.
    pub ready_memory: Option<Memory>,
    /// The largest sums seen, sampled every 100 ms through warm-up and window.
    pub peak_memory: Option<Memory>,
    /// CPU time of the server's process tree over the timed window (clock-tick resolution).
    pub server_cpu_s: Option<f64>,
    /// Wall time over which `server_cpu_s` was measured.
    pub server_window_s: Option<f64>,
    /// Processes in the tree when the window opened and when it closed.
    pub processes: Option<(usize, usize)>,
    /// Busy time (`/proc/stat`, see `procfs::CpuTimes`) of the point's server CPUs over the
    /// window: the server's own CPU plus whatever else ran there.
    pub server_side_busy_s: Option<f64>,
    /// The same for the client CPUs (the load threads plus anything else).
    pub client_side_busy_s: Option<f64>,
    /// Time the hypervisor stole from all those CPUs over the window.
    pub steal_s: Option<f64>,
    /// How many CPUs `server_side_busy_s` covers.
    pub server_side_cpus: usize,
    /// Load threads (one per client CPU, at most one per connection).
    pub client_threads: usize,
    /// The load generator's report for the timed window (for an h2 scenario, made from
    /// h2load's output: see `h2load::report`).
    pub report: Option<Report>,
    /// What h2load printed and used, in an h2 scenario.
    pub h2load: Option<h2load::Record>,
    pub latency_cdf: Vec<Quantile>,
    pub stopped: Option<Stopped>,
    /// Why the trial has no (or no valid) measurement: the server did not start, or failed
    /// validation, or the load run could not start.
    pub failure: Option<String>,
}

impl Trial {
    /// Fraction of its CPUs the client kept busy in the window.
    pub fn client_busy(&self) -> Option<f64> {
        let r = self.report.as_ref()?;
        stats::client_busy(r.client_cpu_s, r.duration_s, self.client_threads)
    }

    /// Share of the server-side CPUs that other tasks (not the server's tree) used during the
    /// window.
    pub fn foreign_server(&self) -> Option<f64> {
        let window = self.server_window_s?;
        let cpus = self.server_side_cpus as f64;
        (window > 0.0 && cpus > 0.0).then_some(())?;
        let other = (self.server_side_busy_s? - self.server_cpu_s?).max(0.0);
        Some(other / (window * cpus))
    }

    /// Share of the client CPUs that tasks other than the load threads used during the window
    /// (the matrix's own sampling included, which is small).
    pub fn foreign_client(&self) -> Option<f64> {
        let window = self.server_window_s?;
        let cpus = self.client_threads as f64;
        (window > 0.0 && cpus > 0.0).then_some(())?;
        let other = (self.client_side_busy_s? - self.report.as_ref()?.client_cpu_s).max(0.0);
        Some(other / (window * cpus))
    }
}

/// Medians over a point's trials, and its verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub trials: usize,
    /// Trials that produced a report.
    pub measured: usize,
    pub rps_median: Option<f64>,
    pub rps_mad_pct: Option<f64>,
    pub p99_median_us: Option<f64>,
    pub p99_mad_us: Option<f64>,
    /// Failed requests over all trials.
    pub errors: u64,
    /// Trials that failed (see [`Trial::failure`]).
    pub failed_trials: usize,
    /// Trials whose window timed no request at all (every connection still busy with warm-up
    /// requests, or nothing answered).
    pub empty_trials: usize,
    /// Any error, failed trial or empty trial makes the point invalid.
    pub invalid: bool,
    /// Against the same server's 1-worker point in the same scenario (filled in afterwards).
    pub scaling: Option<Scaling>,
    /// Ready PSS each worker beyond the first adds, against the same server's 1-worker point
    /// in the same scenario, KiB ([`stats::per_extra_worker`]; filled in with `scaling`).
    pub pss_per_extra_worker_kib: Option<f64>,
    pub start_ms: Option<f64>,
    pub ready_ms: Option<f64>,
    pub ready_rss_kib: Option<f64>,
    pub ready_pss_kib: Option<f64>,
    pub peak_rss_kib: Option<f64>,
    pub peak_pss_kib: Option<f64>,
    /// Server CPU seconds per wall second of the window.
    pub cpu_cores: Option<f64>,
    pub cpu_us_per_request: Option<f64>,
    pub client_busy: Option<f64>,
    /// Median client busy ≥ [`stats::CLIENT_BOUND_BUSY`].
    pub client_bound: bool,
    /// Median share of the server-side and client CPUs other tasks took (see
    /// [`Trial::foreign_server`]).
    pub foreign_server: Option<f64>,
    pub foreign_client: Option<f64>,
    /// Median steal as a share of the window (all measured CPUs together).
    pub steal: Option<f64>,
    /// Either foreign share ≥ [`stats::CONTENDED_FOREIGN`]: the machine was not quiet.
    pub contended: bool,
}

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub scenario: Scenario,
    pub server: Server,
    pub workers: usize,
    pub server_cpus: Vec<usize>,
    pub trials: Vec<Trial>,
    pub summary: Summary,
}

/// Summarizes `trials` (scaling is left to [`fill_scaling`]).
pub fn summarize(trials: &[Trial]) -> Summary {
    let reports: Vec<&Report> = trials.iter().filter_map(|t| t.report.as_ref()).collect();
    let of =
        |f: &dyn Fn(&Trial) -> Option<f64>| -> Vec<f64> { trials.iter().filter_map(f).collect() };
    let rps: Vec<f64> = reports.iter().map(|r| r.rps).collect();
    let p99: Vec<f64> = reports.iter().map(|r| r.latency_us.p99 as f64).collect();
    let errors = reports.iter().map(|r| r.errors.total).sum();
    let failed = trials.iter().filter(|t| t.failure.is_some()).count();
    let empty = reports.iter().filter(|r| r.requests == 0).count();
    let cpu_cores = of(&|t| Some(t.server_cpu_s? / t.server_window_s.filter(|&w| w > 0.0)?));
    let cpu_per_request = of(&|t| {
        let requests = t.report.as_ref()?.requests;
        let cpu_s = t.server_cpu_s?;
        (requests > 0).then(|| cpu_s * 1e6 / requests as f64)
    });
    let client_busy = stats::median(&of(&|t| t.client_busy()));
    let foreign_server = stats::median(&of(&|t| t.foreign_server()));
    let foreign_client = stats::median(&of(&|t| t.foreign_client()));
    Summary {
        trials: trials.len(),
        measured: reports.len(),
        rps_median: stats::median(&rps),
        rps_mad_pct: stats::mad_percent(&rps),
        p99_median_us: stats::median(&p99),
        p99_mad_us: stats::mad(&p99),
        errors,
        failed_trials: failed,
        empty_trials: empty,
        invalid: errors > 0 || failed > 0 || empty > 0 || reports.is_empty(),
        scaling: None,
        pss_per_extra_worker_kib: None,
        start_ms: stats::median(&of(&|t| Some(t.ready?.start_ms))),
        ready_ms: stats::median(&of(&|t| Some(t.ready?.ready_ms))),
        ready_rss_kib: stats::median(&of(&|t| Some(t.ready_memory?.rss_kib as f64))),
        ready_pss_kib: stats::median(&of(&|t| Some(t.ready_memory?.pss_kib as f64))),
        peak_rss_kib: stats::median(&of(&|t| Some(t.peak_memory?.rss_kib as f64))),
        peak_pss_kib: stats::median(&of(&|t| Some(t.peak_memory?.pss_kib as f64))),
        cpu_cores: stats::median(&cpu_cores),
        cpu_us_per_request: stats::median(&cpu_per_request),
        client_busy,
        client_bound: client_busy.is_some_and(stats::client_bound),
        foreign_server,
        foreign_client,
        steal: stats::median(&of(&|t| {
            Some(t.steal_s? / t.server_window_s.filter(|&w| w > 0.0)?)
        })),
        contended: [foreign_server, foreign_client]
            .into_iter()
            .flatten()
            .any(stats::contended),
    }
}

/// Sets each point's scaling, and the ready PSS each extra worker adds, against the same
/// server's 1-worker point of the same scenario.
pub fn fill_scaling(points: &mut [Point]) {
    let baselines: Vec<(Scenario, Server, Summary)> = points
        .iter()
        .filter(|p| p.workers == 1)
        .map(|p| (p.scenario, p.server, p.summary.clone()))
        .collect();
    for point in points.iter_mut() {
        let base = baselines
            .iter()
            .find(|(sc, sv, _)| *sc == point.scenario && *sv == point.server)
            .map(|b| &b.2);
        let s = &mut point.summary;
        s.scaling = match (s.rps_median, base.and_then(|b| b.rps_median)) {
            (Some(rps), Some(base)) => stats::scaling(rps, base, point.workers),
            _ => None,
        };
        s.pss_per_extra_worker_kib = match (s.ready_pss_kib, base.and_then(|b| b.ready_pss_kib)) {
            (Some(pss), Some(base)) => stats::per_extra_worker(pss, base, point.workers),
            _ => None,
        };
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::{Errors, Latency};

    /// A report with these numbers and everything else zero.
    pub(crate) fn report(rps: f64, p99: u64, errors: u64, client_cpu_s: f64) -> Report {
        Report {
            schema: crate::report::SCHEMA,
            mode: "closed",
            urls: vec!["http://127.0.0.1:1/".into()],
            method: "GET".into(),
            request_body_bytes: None,
            connections: 256,
            threads: 1,
            pipeline: 1,
            churn: false,
            rate: None,
            requests_limit: None,
            warmup_s: 1.0,
            duration_s: 3.0,
            requests: (rps * 3.0) as u64,
            bytes: 0,
            rps,
            bytes_per_sec: 0.0,
            latency_us: Latency {
                min: 1,
                mean: 1.0,
                p50: p99 / 2,
                p90: p99 / 2,
                p99,
                p999: p99,
                max: p99,
            },
            errors: Errors {
                connect: 0,
                read: errors,
                timeout: 0,
                status: 0,
                short_body: 0,
                total: errors,
            },
            connects: 0,
            unsent: 0,
            unfinished: 0,
            client_cpu_s,
            latency_cdf: Vec::new(),
        }
    }

    pub(crate) fn trial(rps: f64, p99: u64, errors: u64) -> Trial {
        Trial {
            trial: 1,
            client_threads: 1,
            server_cpu_s: Some(3.0),
            server_window_s: Some(3.0),
            ready: Some(Ready {
                start_ms: 2.0,
                ready_ms: 3.0,
            }),
            ready_memory: Some(Memory {
                rss_kib: 4096,
                pss_kib: 2048,
            }),
            peak_memory: Some(Memory {
                rss_kib: 8192,
                pss_kib: 4096,
            }),
            report: Some(report(rps, p99, errors, 1.5)),
            ..Trial::default()
        }
    }

    #[test]
    fn summary_takes_medians_and_flags_errors() {
        let trials = [
            trial(100.0, 500, 0),
            trial(110.0, 700, 0),
            trial(90.0, 600, 0),
        ];
        let s = summarize(&trials);
        assert_eq!(s.rps_median, Some(100.0));
        assert_eq!(s.rps_mad_pct, Some(10.0));
        assert_eq!(s.p99_median_us, Some(600.0));
        assert_eq!(s.p99_mad_us, Some(100.0));
        assert!(!s.invalid);
        assert_eq!(s.cpu_cores, Some(1.0));
        assert_eq!(s.cpu_us_per_request, Some(1e4));
        assert_eq!(s.client_busy, Some(0.5));
        assert!(!s.client_bound);
        assert_eq!(s.ready_pss_kib, Some(2048.0));

        let s = summarize(&[trial(100.0, 500, 0), trial(100.0, 500, 3)]);
        assert!(s.invalid);
        assert_eq!(s.errors, 3);
        let failed = Trial {
            failure: Some("did not start".into()),
            ..Trial::default()
        };
        let s = summarize(&[trial(100.0, 500, 0), failed]);
        assert!(s.invalid);
        assert_eq!((s.trials, s.measured), (2, 1));
        assert!(summarize(&[]).invalid);
        let s = summarize(&[trial(100.0, 500, 0), trial(0.0, 0, 0)]);
        assert!(s.invalid);
        assert_eq!(s.empty_trials, 1);
    }

    #[test]
    fn other_tasks_on_our_cpus_mark_the_point_contended() {
        let mut t = trial(100.0, 500, 0);
        t.server_side_cpus = 1;
        t.server_side_busy_s = Some(3.0); // all of it the server's own 3.0 s
        t.client_side_busy_s = Some(1.8); // load threads 1.5 s, other 0.3 s of 3 s
        let s = summarize(std::slice::from_ref(&t));
        assert_eq!(s.foreign_server, Some(0.0));
        assert!((s.foreign_client.expect("client") - 0.1).abs() < 1e-9);
        assert!(s.contended);
        t.client_side_busy_s = Some(1.6);
        assert!(!summarize(&[t]).contended);
    }

    #[test]
    fn a_busy_client_marks_the_point() {
        let mut t = trial(100.0, 500, 0);
        t.report = Some(report(100.0, 500, 0, 2.85));
        assert!(summarize(&[t]).client_bound);
    }

    #[test]
    fn scaling_is_against_the_same_server_and_scenario() {
        let point = |server, workers, rps| Point {
            scenario: Scenario::Static1k,
            server,
            workers,
            server_cpus: Vec::new(),
            trials: Vec::new(),
            summary: Summary {
                rps_median: Some(rps),
                ..Summary::default()
            },
        };
        let mut points = vec![
            point(Server::Nginx, 1, 100.0),
            point(Server::Nginx, 2, 150.0),
            point(Server::H2o, 2, 150.0),
        ];
        points[0].summary.ready_pss_kib = Some(4096.0);
        points[1].summary.ready_pss_kib = Some(6144.0);
        points[2].summary.ready_pss_kib = Some(6144.0);
        fill_scaling(&mut points);
        assert_eq!(points[0].summary.scaling.map(|s| s.factor), Some(1.0));
        assert_eq!(points[1].summary.scaling.map(|s| s.efficiency), Some(0.75));
        assert_eq!(points[2].summary.scaling, None);
        assert_eq!(points[0].summary.pss_per_extra_worker_kib, None);
        assert_eq!(points[1].summary.pss_per_extra_worker_kib, Some(2048.0));
        assert_eq!(points[2].summary.pss_per_extra_worker_kib, None);
    }
}

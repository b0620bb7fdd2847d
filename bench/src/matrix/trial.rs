//! One trial: start a server, check it, load it, sample it, stop it. Whatever goes wrong with
//! the server is recorded in the [`Trial`] (and makes its point invalid) rather than stopping
//! the matrix.
//!
//! An HTTP/1.1 scenario is probed, validated and loaded by this crate (`probe`, `validate`,
//! `load`). An h2 scenario is probed and validated with curl over HTTP/2 and loaded by h2load
//! on the first client CPUs (one per h2load thread), the window's edges being h2load's phase
//! lines; its report is made from h2load's output and log (`h2load`). An h3 scenario is
//! probed, validated and loaded over HTTP/3 by this crate too (`h3`, `http3::check`,
//! `load::h3`), on a port free over both TCP and UDP.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::certificate::Certificate;
use super::encoded;
use super::point::Trial;
use super::procfs::{self, CpuTimes, Memory};
use super::programs::Programs;
use super::scenario::Scenario;
use super::server::{Listener, Running, Server, Wire};
use super::{curl, h2load, h3, probe};
use crate::plan::{CpuSet, Plan};
use crate::report::Report;
use crate::sys::process::clock_ticks_per_sec;
use crate::{http3, load, validate};

/// How often the server's memory is sampled for its peak.
const MEMORY_SAMPLE: Duration = Duration::from_millis(100);
/// Memory samples between two walks of `/proc` for the server's process tree.
const TREE_REFRESH: u32 = 10;

/// What every trial of a run shares.
pub(super) struct Context<'a> {
    pub(super) programs: &'a Programs,
    pub(super) docroot: &'a Path,
    pub(super) work: &'a Path,
    pub(super) client_cpus: CpuSet,
    pub(super) duration: Duration,
    pub(super) warmup: Duration,
    /// The h2 scenarios' load and transport.
    pub(super) h2: h2load::Settings,
    /// The h3 scenarios' load.
    pub(super) h3: h3::Settings,
    /// What the peers present over TLS in the h2 and h3 scenarios.
    pub(super) certificate: Option<&'a Certificate>,
}

/// How long curl may take for one probe or validation request.
const CURL_TIMEOUT: Duration = Duration::from_secs(5);

/// A server being measured, with the window's edge readings.
struct Edge {
    at: Instant,
    ticks: u64,
    processes: usize,
    server_side: CpuTimes,
    client_side: CpuTimes,
}

impl Edge {
    fn read(pid: u32, server_side: &[usize], client_side: &[usize]) -> Edge {
        let tree = procfs::tree(pid);
        Edge {
            at: Instant::now(),
            ticks: procfs::cpu_ticks(&tree),
            processes: tree.len(),
            server_side: procfs::cpu_times(server_side),
            client_side: procfs::cpu_times(client_side),
        }
    }
}

impl<'a> Context<'a> {
    /// Runs trial `number` of `server` on `cpus` for `scenario`; also returns the peer's config
    /// text, if it has one.
    pub(super) fn run(
        &self,
        scenario: Scenario,
        server: Server,
        cpus: &CpuSet,
        number: usize,
        position: usize,
    ) -> (Trial, Option<String>) {
        let mut trial = Trial {
            trial: number,
            position,
            ..Trial::default()
        };
        let port = match free_port(scenario.is_h3()) {
            Ok(port) => port,
            Err(e) => {
                trial.failure = Some(format!("no free port: {e}"));
                return (trial, None);
            }
        };
        trial.port = port;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let prefix = self.work.join(format!("{}-{port}", server.name()));
        let listener = Listener {
            port,
            wire: self.wire(scenario),
        };
        let launch = match server.launch(
            self.programs,
            scenario,
            self.docroot,
            listener,
            cpus,
            &prefix,
        ) {
            Ok(launch) => launch,
            Err(e) => {
                trial.failure = Some(e.to_string());
                return (trial, None);
            }
        };
        let config = launch
            .config
            .as_ref()
            .and_then(|p| fs::read_to_string(p).ok());
        let log = self.work.join(format!("{}-{port}.log", server.name()));
        let mut running = match Running::spawn(&launch, cpus, &log) {
            Ok(running) => running,
            Err(e) => {
                trial.failure = Some(e.to_string());
                return (trial, config);
            }
        };
        let probe = scenario.probe();
        let ready = if scenario.is_h2() {
            let url = self.url(port, probe.path);
            running.wait_ready(addr, || self.curl(&url).map(|a| a.status), 200)
        } else if scenario.is_h3() {
            running.wait_ready(addr, || h3::status(port, probe.path), 200)
        } else {
            running.wait_ready(
                addr,
                || probe::send(addr, &probe, Duration::from_secs(2)).map(|a| a.status),
                200,
            )
        };
        match ready {
            Ok(ready) => trial.ready = Some(ready),
            Err(e) => {
                trial.failure = Some(e.to_string());
                trial.stopped = Some(running.stop());
                return (trial, config);
            }
        }
        let pid = running.pid;
        let ready_memory = procfs::memory(&procfs::tree(pid));
        trial.ready_memory = Some(ready_memory);
        let measured = if scenario.is_h2() {
            self.measure_h2(&mut trial, scenario, port, pid, cpus, ready_memory)
        } else if scenario.is_h3() {
            self.measure_h3(&mut trial, scenario, port, pid, cpus, ready_memory)
        } else {
            self.measure(&mut trial, scenario, addr, pid, cpus, ready_memory)
        };
        if let Err(e) = measured {
            trial.failure = Some(e);
        }
        let stopped = running.stop();
        if trial.failure.is_none() && (stopped.killed || stopped.code != Some(0)) {
            trial.failure = Some(format!(
                "did not exit cleanly after SIGTERM (exit code {:?}, killed {})",
                stopped.code, stopped.killed
            ));
        }
        trial.stopped = Some(stopped);
        (trial, config)
    }

    /// Validates the scenario's request, then runs the load while sampling the server.
    fn measure(
        &self,
        trial: &mut Trial,
        scenario: Scenario,
        addr: SocketAddr,
        pid: u32,
        cpus: &CpuSet,
        ready_memory: Memory,
    ) -> Result<(), String> {
        let etag = if scenario == Scenario::StaticNotModified {
            let answer = probe::get(addr, "/1k.bin", &[], Duration::from_secs(2))
                .map_err(|e| format!("cannot fetch the ETag of /1k.bin: {e}"))?;
            Some(
                answer
                    .etag
                    .ok_or("/1k.bin has no ETag, so If-None-Match cannot be tested")?,
            )
        } else {
            None
        };
        let plan = self.plan(scenario, addr, etag.as_deref())?;
        trial.client_threads = plan.threads.get();
        validate::check(&plan).map_err(|e| format!("validation failed: {e}"))?;
        let request = scenario.request(etag.as_deref());
        if let Some(expect) = &request.encoded {
            encoded::check(addr, &request, expect, request.timeout)
                .map_err(|e| format!("validation failed: {e}"))?;
        }

        let sampled = Sampled {
            pid,
            server: cpus,
            client: &self.client_cpus,
            ready_memory,
        };
        sampled.run(trial, |at_window| load::run_with(&plan, at_window))
    }

    /// Validates the h3 scenario's answer over HTTP/3, then runs the HTTP/3 load on the first
    /// client CPUs (one per load thread) while sampling the server.
    fn measure_h3(
        &self,
        trial: &mut Trial,
        scenario: Scenario,
        port: u16,
        pid: u32,
        cpus: &CpuSet,
        ready_memory: Memory,
    ) -> Result<(), String> {
        let plan = self
            .h3
            .plan(
                scenario,
                port,
                &self.client_cpus,
                self.warmup,
                self.duration,
            )
            .map_err(|e| e.to_string())?;
        let client = plan.cpus.clone().ok_or("no client CPU")?;
        trial.client_threads = plan.threads.get();
        http3::check(&plan).map_err(|e| format!("validation failed: {e}"))?;
        let sampled = Sampled {
            pid,
            server: cpus,
            client: &client,
            ready_memory,
        };
        sampled.run(trial, |at_window| load::h3::run_with(&plan, at_window))
    }

    /// Validates the h2 scenario's answer with curl, then runs h2load while sampling the
    /// server; a run h2load reports any failure in fails the trial (its numbers are kept).
    fn measure_h2(
        &self,
        trial: &mut Trial,
        scenario: Scenario,
        port: u16,
        pid: u32,
        cpus: &CpuSet,
        ready_memory: Memory,
    ) -> Result<(), String> {
        let h2load_program = self
            .programs
            .h2load
            .as_deref()
            .ok_or("h2load is not installed")?;
        let request = scenario.request(None);
        let url = self.url(port, request.path);
        let answer = self
            .curl(&url)
            .map_err(|e| format!("validation failed: {e}"))?;
        answer
            .expect(request.status, request.length, request.sha256)
            .map_err(|e| format!("validation failed: {url}: {e}"))?;

        // One client CPU per h2load thread: busy and foreign shares are then over its CPUs.
        let threads = self.h2.threads.get().min(self.client_cpus.ids().len());
        let client =
            CpuSet::from_ids(self.client_cpus.ids()[..threads].to_vec()).ok_or("no client CPU")?;
        trial.client_threads = threads;
        let log = self.work.join(format!("h2load-{port}.log"));
        let job = h2load::Job {
            program: h2load_program,
            args: self.h2.args(&url, self.warmup, self.duration, &log),
            cpus: &client,
            threads: self.h2.threads.get(),
            log: &log,
            limit: self.warmup + self.duration + h2load::GRACE,
        };
        let stop = AtomicBool::new(false);
        let (mut start, mut end) = (None, None);
        let (result, peak) = std::thread::scope(|s| {
            let sampler = s.spawn(|| peak_memory(pid, ready_memory, &stop));
            let (server_side, client_side) = (cpus.ids(), client.ids());
            let result = h2load::run(
                &job,
                || start = Some(Edge::read(pid, server_side, client_side)),
                || end = Some(Edge::read(pid, server_side, client_side)),
            );
            stop.store(true, Ordering::Relaxed);
            (result, sampler.join().unwrap_or(ready_memory))
        });
        trial.peak_memory = Some(peak);
        let run = result.map_err(|e| e.to_string())?;
        if let (Some(start), Some(end)) = (&start, &end) {
            window(trial, start, end, cpus);
        }
        let report = h2load::report(&run, &self.h2, &url, self.warmup, self.duration);
        let verdict = h2load::check(&run.record.output, self.h2.transport, request.length);
        trial.latency_cdf = report.latency_cdf.clone();
        trial.report = Some(report);
        trial.h2load = Some(run.record);
        verdict.map_err(|e| e.to_string())
    }

    /// What `server` speaks for `scenario`.
    fn wire(&self, scenario: Scenario) -> Wire<'a> {
        if scenario.is_h3() {
            return Wire::H3(self.certificate);
        }
        if !scenario.is_h2() {
            return Wire::Http1;
        }
        match self.h2.transport {
            h2load::Transport::Tls => Wire::Tls(self.certificate),
            h2load::Transport::H2c => Wire::H2c,
        }
    }

    /// The h2 URL of `path` on `port`.
    fn url(&self, port: u16, path: &str) -> String {
        format!("{}://127.0.0.1:{port}{path}", self.h2.transport.scheme())
    }

    /// One GET of `url` with curl over the run's h2 transport.
    fn curl(&self, url: &str) -> std::io::Result<curl::Answer> {
        let program = self
            .programs
            .curl
            .as_deref()
            .ok_or_else(|| std::io::Error::other("curl is not installed"))?;
        curl::get(program, url, self.h2.transport, CURL_TIMEOUT)
    }

    /// The load plan for `scenario` against `addr`.
    fn plan(
        &self,
        scenario: Scenario,
        addr: SocketAddr,
        etag: Option<&str>,
    ) -> Result<Plan, String> {
        let request = scenario.request(etag);
        let mut plan =
            Plan::new(&[format!("http://{addr}{}", request.path)]).map_err(|e| e.to_string())?;
        let connections = NonZeroUsize::new(request.connections).ok_or("zero connections")?;
        plan.connections = connections;
        plan.threads = NonZeroUsize::new(self.client_cpus.ids().len().min(connections.get()))
            .ok_or("no client CPU")?;
        plan.cpus = Some(self.client_cpus.clone());
        plan.duration = self.duration;
        plan.warmup = self.warmup;
        plan.churn = request.churn;
        plan.pipeline = NonZeroUsize::new(request.pipeline).ok_or("zero pipeline depth")?;
        plan.method = request.method.to_string();
        plan.headers = request.headers;
        plan.body = request.body;
        plan.timeout = request.timeout;
        plan.expect.status = request.status;
        plan.expect.length = request.length;
        plan.expect.sha256 = request.sha256;
        plan.check().map_err(|e| e.to_string())?;
        Ok(plan)
    }
}

/// A server under load, sampled: its process tree's memory through the run, and its CPU
/// time and both sides' CPUs at the window's edges.
struct Sampled<'c> {
    pid: u32,
    /// The point's server CPUs.
    server: &'c CpuSet,
    /// The CPUs the load threads run on.
    client: &'c CpuSet,
    ready_memory: Memory,
}

impl Sampled<'_> {
    /// Runs `load`, which must call the callback it is given when the timed window opens (as
    /// `load::run_with` does) and return when it closes; fills `trial` from the report and
    /// the edges.
    fn run<L>(&self, trial: &mut Trial, load: L) -> Result<(), String>
    where
        L: FnOnce(&mut dyn FnMut()) -> Result<Report, load::Error>,
    {
        let (pid, ready_memory) = (self.pid, self.ready_memory);
        let stop = AtomicBool::new(false);
        let mut start = None;
        let (result, end, peak) = std::thread::scope(|s| {
            let sampler = s.spawn(|| peak_memory(pid, ready_memory, &stop));
            let (server_side, client_side) = (self.server.ids(), self.client.ids());
            let result = load(&mut || {
                start = Some(Edge::read(pid, server_side, client_side));
            });
            let end = Edge::read(pid, server_side, client_side);
            stop.store(true, Ordering::Relaxed);
            (result, end, sampler.join().unwrap_or(ready_memory))
        });
        trial.peak_memory = Some(peak);
        let report = result.map_err(|e| format!("the load run did not start: {e}"))?;
        if let Some(start) = start {
            window(trial, &start, &end, self.server);
        }
        trial.latency_cdf = report.latency_cdf.clone();
        trial.report = Some(report);
        Ok(())
    }
}

/// Fills `trial`'s CPU and window figures from the window's edge readings.
fn window(trial: &mut Trial, start: &Edge, end: &Edge, cpus: &CpuSet) {
    let hz = clock_ticks_per_sec() as f64;
    let seconds = |from: u64, to: u64| to.saturating_sub(from) as f64 / hz;
    trial.server_cpu_s = Some(seconds(start.ticks, end.ticks));
    trial.server_window_s = Some(end.at.duration_since(start.at).as_secs_f64());
    trial.processes = Some((start.processes, end.processes));
    trial.server_side_busy_s = Some(seconds(start.server_side.busy, end.server_side.busy));
    trial.client_side_busy_s = Some(seconds(start.client_side.busy, end.client_side.busy));
    trial.steal_s = Some(
        seconds(start.server_side.steal, end.server_side.steal)
            + seconds(start.client_side.steal, end.client_side.steal),
    );
    trial.server_side_cpus = cpus.ids().len();
}

/// The largest memory sums of `pid`'s tree, sampled every [`MEMORY_SAMPLE`] until `stop`.
fn peak_memory(pid: u32, ready: Memory, stop: &AtomicBool) -> Memory {
    let mut peak = ready;
    let mut tree = procfs::tree(pid);
    let mut samples = 0u32;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(MEMORY_SAMPLE);
        // Walking all of /proc costs the client core more than reading a few smaps_rollup
        // files, and servers do not fork under load: refresh the tree once a second.
        samples += 1;
        if samples % TREE_REFRESH == 0 {
            tree = procfs::tree(pid);
        }
        peak = peak.max(procfs::memory(&tree));
    }
    peak
}

/// A port on 127.0.0.1 that nothing listens on now (the kernel's pick for port 0), and with
/// `udp` also one no UDP socket holds (HTTP/3 takes the TLS port's number over UDP). A fresh
/// one per trial keeps a server from meeting the last one's TIME_WAIT connections.
fn free_port(udp: bool) -> std::io::Result<u16> {
    /// Kernel picks to try for one free over UDP too; a clash is rare, ten in a row is not.
    const TRIES: usize = 10;
    let mut last = None;
    for _ in 0..TRIES {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if !udp {
            return Ok(port);
        }
        match UdpSocket::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(_) => return Ok(port),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port free over TCP and UDP")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_h3_port_is_free_over_udp_as_well_as_tcp() {
        let port = free_port(true).expect("port");
        let _tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("tcp");
        let _udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).expect("udp");
        assert_ne!(free_port(false).expect("port"), port, "taken now");
    }
}

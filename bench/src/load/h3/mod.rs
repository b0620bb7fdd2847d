//! `--h3`: the load engine over HTTP/3, with the books of the HTTP/1.1 one.
//!
//! Why not `worker`: that engine frames HTTP/1.1 bytes itself over epoll. HTTP/3 runs over QUIC,
//! which takes a QUIC stack (`http3`: quinn, h3), and quinn's runs on an async runtime. So each
//! client thread runs one current-thread tokio runtime and nothing else: quinn's endpoint and
//! connection drivers, h3's drivers and every request run on that thread, pinned like a
//! `worker` thread, and `RUSAGE_THREAD` over the window is the client's whole CPU cost, which
//! is what the client-busy check (`matrix::stats::client_busy`) divides by the window.
//!
//! Owns: per thread, pinning, the runtime, one UDP endpoint per connection, the connection and
//! stream loops (`conn`), the open-loop dispatcher (`open`), and the thread's `Tally`.
//! Does not own: threads, the gate, the `--requests` budget, merging and the report (the
//! parent's `drive`, shared with HTTP/1.1), nor QUIC and HTTP/3 (`http3`).
//!
//! The same books as HTTP/1.1: `--connections` QUIC connections split over `--threads`; each
//! carries `--pipeline` concurrent request streams, each stream sending its next request as
//! soon as its last is answered (closed loop), or taking due requests from the schedule (open
//! loop, `--rate`; latency from the due time). A request is timed if it was sent (closed) or due
//! (open) inside the window; warm-up requests and connections are not counted. A timed request
//! counts once: answered with the expected status (latency recorded, body bytes added),
//! `status`, `read` (failed before a complete head), `short_body` (failed inside the body, or a
//! clean end short of `content-length`), `timeout`, or `connect` per failed handshake.
//! `--churn` makes a QUIC connection per request, latency counted from before the handshake.
//!
//! Flow:
//! 1. [`run_with`] checks the plan, builds the QUIC client configuration and each path's
//!    request once, and hands the parent's `drive` a worker for each thread.
//! 2. Each thread pins itself, builds its runtime and endpoints, and waits at the gate.
//! 3. It runs its connections (and the dispatcher) until the window ends, or until the
//!    `--requests` budget is spent and answered; a probe samples the thread's CPU time when
//!    the window opens.
//! 4. At the end whatever still runs is dropped: timed requests in flight are `unfinished`,
//!    due requests never sent are `unsent`. Then, outside the window, the endpoints close their
//!    connections so that servers do not hold them until an idle timeout.

mod conn;
mod open;

use std::cell::{Cell, RefCell};
use std::io;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt as _};

use super::gate::Arrival;
use super::pacer::Pacer;
use super::{Error, Shared, Tally, Worked};
use crate::http3::{self, Client, Request, Server};
use crate::plan::{Mode, Plan};
use crate::report::Report;
use crate::sys::rusage;

/// Runs `plan` over HTTP/3 (without checking the server first: see `http3::check`) and reports
/// the timed window as [`super::run`] does.
pub fn run(plan: &Plan) -> Result<Report, Error> {
    run_with(plan, || {})
}

/// [`run`], calling `at_window` when the timed window opens, as [`super::run_with`] does.
pub fn run_with<F: FnOnce()>(plan: &Plan, at_window: F) -> Result<Report, Error> {
    plan.check()?;
    let client = Client::new()?;
    let server = Server::new(&plan.target);
    let requests = Request::all(plan)?;
    let context = Context {
        client: &client,
        server: &server,
        requests: &requests,
    };
    super::drive(plan, at_window, |shared, index, connections| {
        work(shared, &context, index, connections)
    })
}

/// What every thread of a run uses, built once.
struct Context<'r> {
    client: &'r Client,
    server: &'r Server,
    requests: &'r [Request],
}

/// The timed window on this thread's clock.
#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

/// A request to make: which path, where its latency counts from, whether it is timed.
#[derive(Clone, Copy, Debug)]
struct Job {
    /// Index into the requests.
    path: usize,
    /// The send time (closed loop; before the handshake with `--churn`) or the due time (open).
    origin: Instant,
    /// Part of the timed window.
    counted: bool,
}

/// One thread's run: set up, wait at the gate, run, report.
fn work(
    shared: &Shared<'_>,
    context: &Context<'_>,
    index: usize,
    connections: usize,
) -> Result<Worked, Error> {
    let arrival = Arrival::new(&shared.gate);
    let setup = Setup::new(shared.plan, context, index, connections);
    let Some(zero) = arrival.arrive(setup.is_ok()) else {
        return setup.map(|_| Worked {
            tally: Tally::new(),
            zero: None,
        });
    };
    let tally = setup?.run(shared, context, index, zero);
    Ok(Worked {
        tally,
        zero: Some(zero),
    })
}

/// A thread ready to run: pinned, with its runtime and one endpoint per connection.
struct Setup {
    runtime: tokio::runtime::Runtime,
    endpoints: Vec<quinn::Endpoint>,
}

impl Setup {
    fn new(
        plan: &Plan,
        context: &Context<'_>,
        index: usize,
        connections: usize,
    ) -> Result<Setup, Error> {
        super::pin(plan, index)?;
        let setup = |source| Error::Setup {
            worker: index,
            source,
        };
        // Current-thread: the runtime runs on this pinned thread and starts no other.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(setup)?;
        let endpoints = {
            let _entered = runtime.enter();
            (0..connections)
                .map(|_| context.client.endpoint(context.server))
                .collect::<io::Result<Vec<_>>>()
                .map_err(setup)?
        };
        Ok(Setup { runtime, endpoints })
    }

    fn run(self, shared: &Shared<'_>, context: &Context<'_>, index: usize, zero: Instant) -> Tally {
        let plan = shared.plan;
        let start = zero + plan.warmup;
        let window = Window {
            start,
            end: start + plan.duration,
        };
        let jobs = match plan.mode {
            Mode::Closed => None,
            Mode::Open { rate } => {
                let threads = plan.threads.get() as f64;
                let phase = index as f64 / threads;
                Some(open::Jobs::new(Pacer::new(zero, rate / threads, phase)))
            }
        };
        let worker = Worker {
            plan,
            shared,
            client: context.client,
            server: context.server,
            requests: context.requests,
            window,
            next_path: Cell::new(index % context.requests.len().max(1)),
            exhausted: Cell::new(false),
            in_flight: Cell::new(0),
            tally: RefCell::new(Tally::new()),
            jobs,
        };
        let cpu_start = Cell::new(None);
        let Setup { runtime, endpoints } = self;
        let stopped = runtime.block_on(async {
            let probe = async {
                tokio::time::sleep_until(window.start.into()).await;
                cpu_start.set(rusage::thread_cpu().ok());
            };
            let dispatch = async {
                if let Some(jobs) = &worker.jobs {
                    jobs.dispatch(&worker).await;
                }
            };
            let connections = endpoints
                .iter()
                .map(|endpoint| worker.connection(endpoint))
                .collect::<FuturesUnordered<_>>()
                .collect::<()>();
            tokio::select! {
                _ = async { tokio::join!(probe, dispatch, connections) } => {}
                _ = tokio::time::sleep_until(window.end.into()) => {}
            }
            Instant::now()
        });
        let mut tally = worker.finish(stopped);
        if let (Some(start), Ok(end)) = (cpu_start.get(), rusage::thread_cpu()) {
            tally.cpu = end.saturating_sub(start);
        }
        runtime.block_on(async {
            for endpoint in &endpoints {
                endpoint.close(0u32.into(), b"");
            }
            let idle = endpoints.iter().map(quinn::Endpoint::wait_idle);
            let drained = futures_util::future::join_all(idle);
            let _ = tokio::time::timeout(http3::CLOSE_GRACE, drained).await;
        });
        tally
    }
}

/// One thread's state while it runs, shared by reference among its connection futures (all on
/// this thread: cells, not locks).
struct Worker<'w> {
    plan: &'w Plan,
    shared: &'w Shared<'w>,
    client: &'w Client,
    server: &'w Server,
    requests: &'w [Request],
    window: Window,
    /// Round-robin position over the request paths.
    next_path: Cell<usize>,
    /// The `--requests` budget is spent: start nothing new.
    exhausted: Cell<bool>,
    /// Timed requests sent and not yet answered or failed.
    in_flight: Cell<u64>,
    tally: RefCell<Tally>,
    /// Open loop: the due requests and the schedule; `None` for closed loop.
    jobs: Option<open::Jobs>,
}

impl Worker<'_> {
    fn next_path(&self) -> usize {
        let path = self.next_path.get();
        self.next_path.set((path + 1) % self.requests.len());
        path
    }

    /// Closed loop: the next request, sent now, unless the budget is spent or the window over.
    fn claim(&self) -> Option<Job> {
        let now = Instant::now();
        if self.exhausted.get() || now >= self.window.end {
            return None;
        }
        let counted = now >= self.window.start;
        if counted && !self.shared.claim() {
            self.exhausted.set(true);
            return None;
        }
        Some(Job {
            path: self.next_path(),
            origin: now,
            counted,
        })
    }

    /// The next request to make, waiting for it in open loop; `None` once there will be none.
    async fn next_job(&self) -> Option<Job> {
        match &self.jobs {
            None => self.claim(),
            Some(jobs) => jobs.take().await,
        }
    }

    /// Nothing more will be asked of the connections.
    fn finished(&self) -> bool {
        let done = match &self.jobs {
            None => self.exhausted.get(),
            Some(jobs) => jobs.finished(),
        };
        done || self.over(Instant::now())
    }

    /// The window has closed at `now`: the run is ending (the thread is late to notice).
    fn over(&self, now: Instant) -> bool {
        now >= self.window.end
    }

    /// The tally, closed at `now`.
    fn finish(self, now: Instant) -> Tally {
        let mut tally = self.tally.into_inner();
        let stopped = now.min(self.window.end);
        tally.stopped = Some(stopped.max(self.window.start));
        tally.unfinished = self.in_flight.get();
        if let Some(jobs) = &self.jobs {
            tally.unsent = jobs.unsent(self.window.start, stopped, self.exhausted.get());
        }
        tally
    }
}

#[cfg(test)]
mod tests;

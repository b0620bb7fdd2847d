//! A worker: one pinned OS thread running one monoio runtime.
//!
//! Owns: the worker's life ([`State`], one writer: `Lifecycle::enter`),
//! choosing its runtime's driver (building it is `runtime`'s), accepting
//! (`accept`), and the connection loop (`conn`). Does not own when to commit or drain (the supervisor sends
//! [`Control`] messages) nor what a request means (`app::Service`).
//!
//! Flow:
//! 1. Starting: pin to its CPU, build the runtime (io_uring, or epoll when
//!    `auto` finds io_uring unavailable), make the service.
//! 2. Prepared: report, then wait for COMMIT holding bound, non-listening
//!    sockets. Any other message, or the supervisor going away, ends the
//!    worker without it ever accepting.
//! 3. Running: listen, spawn one accept loop per socket, report READY.
//! 4. Draining (on DRAIN): cancel the accepts (dropping the sockets refuses
//!    new connections), shut the read side of idle connections, let busy
//!    ones finish with `Connection: close`. FORCE cuts whatever is left.
//! 5. Exited once no connection is open; Aborted on any failure.
//!
//! The states, messages and reports of this life are `control`'s (the
//! supervisor speaks them too); the keep-alive sweeper of parked connections
//! runs here beside the accept loops, for the worker's whole life.

mod accept;
pub(crate) mod budget;
mod conn;
pub mod fault;
mod heap;
mod quic;
mod registry;
mod runtime;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use monoio::io::Canceller;
use socket2::Socket;

use crate::app::ServiceFactory;
use crate::http::date::DateCache;
use crate::telemetry::WorkerStats;
use conn::Ctx;
use registry::Registry;

pub use crate::control::{Control, Driver, Report, State};
pub use runtime::DriverChoice;

pub use conn::{ConnSettings, H2c, Http2Conn, KtlsChoice};
pub use quic::{Http3Conn, Switch as H3Switch, ZeroRtt as H3ZeroRtt};

/// Everything a worker thread starts with.
pub(crate) struct Init<F> {
    pub index: usize,
    /// The generation the worker belongs to (its QUIC connection IDs say it).
    pub generation: u64,
    pub cpu: Option<usize>,
    pub sockets: Vec<Socket>,
    pub driver: DriverChoice,
    pub settings: ConnSettings,
    pub factory: Arc<F>,
    pub stats: Arc<WorkerStats>,
    pub control: flume::Receiver<Control>,
    pub report: Arc<dyn Fn(Report) + Send + Sync>,
    /// The connection budget shared by all workers: `--max-connections`, a
    /// total for the server.
    pub budget: Option<Arc<crate::sys::shm::SharedCounter>>,
    /// Which of `sockets` are TLS listeners (same order).
    pub tls_flags: Vec<bool>,
    /// The worker's UDP sockets for HTTP/3, one per TLS listener's port
    /// (each in its port's group, at this worker's slot).
    pub udp: Vec<Socket>,
    /// Where other workers hand this one the datagrams of its QUIC
    /// connections, and the inboxes of the workers it may hand datagrams to
    /// (its generation's and older ones', by the owner their IDs name).
    pub inbox: Option<std::os::unix::net::UnixDatagram>,
    pub post: Vec<(crate::quic::cid::Owner, std::os::unix::net::UnixDatagram)>,
    /// The TLS configuration for those listeners.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// How names find sites: what a TLS connection's SNI chose.
    pub sites: Arc<crate::sites::router::Router>,
    /// The access log's sink and format, when there is a log.
    pub access_log: Option<crate::access_log::Setup>,
    /// The `[[headers]]` rules an app's responses get (the static files
    /// keep their own, per site).
    pub header_rules: Arc<[crate::http::rules::HeaderRule]>,
}

/// The one writer of a worker's [`State`].
struct Lifecycle {
    worker: usize,
    state: Cell<State>,
    report: Arc<dyn Fn(Report) + Send + Sync>,
}

impl Lifecycle {
    fn enter(&self, state: State, driver: Option<Driver>, reason: Option<String>, cut: usize) {
        let from = self.state.replace(state);
        match &reason {
            Some(r) => {
                tracing::warn!(worker = self.worker, ?from, to = ?state, reason = %r, "worker transition")
            }
            None => tracing::debug!(worker = self.worker, ?from, to = ?state, "worker transition"),
        }
        (self.report)(Report {
            worker: self.worker,
            state,
            driver,
            reason,
            cut,
            beat: None,
        });
    }

    /// Answer a beat without changing state.
    fn beat(&self, seq: u64) {
        (self.report)(Report {
            worker: self.worker,
            state: self.state.get(),
            driver: None,
            reason: None,
            cut: 0,
            beat: Some(seq),
        });
    }

    fn abort(&self, reason: String) {
        self.enter(State::Aborted, None, Some(reason), 0);
    }
}

/// Body of a worker thread. Reports every transition; returns the final
/// state (Exited or Aborted).
pub(crate) fn run<F: ServiceFactory>(init: Init<F>) -> State {
    let life = Lifecycle {
        worker: init.index,
        state: Cell::new(State::Starting),
        report: init.report.clone(),
    };
    life.enter(State::Starting, None, None, 0);
    if let Some(cpu) = init.cpu {
        if let Err(e) = crate::sys::affinity::pin_current_thread(cpu) {
            life.abort(format!("cannot pin to cpu {cpu}: {e}"));
            return State::Aborted;
        }
    }
    match fault::for_worker(init.index) {
        Some(fault::Fault::FailPrepare) => {
            life.abort("injected prepare failure (SERVERY_TEST_FAULT)".into());
            return State::Aborted;
        }
        Some(fault::Fault::DelayPrepare(d)) => std::thread::sleep(d),
        Some(fault::Fault::IgnoreDrain) | Some(fault::Fault::HangAfterReady) | None => {}
    }
    let outcome = match init.driver {
        DriverChoice::Epoll => on_epoll(init, &life),
        DriverChoice::Uring => match runtime::uring(init.index) {
            Ok(mut rt) => rt.block_on(lifecycle(init, &life, Driver::IoUring)),
            Err(e) => Err(format!(
                "io_uring is unavailable ({e}); use --driver epoll or auto"
            )),
        },
        DriverChoice::Auto => match runtime::uring(init.index) {
            Ok(mut rt) => rt.block_on(lifecycle(init, &life, Driver::IoUring)),
            Err(e) => {
                tracing::info!(worker = init.index, error = %e, "io_uring unavailable, using epoll");
                on_epoll(init, &life)
            }
        },
    };
    match outcome {
        Ok(cut) => life.enter(State::Exited, None, None, cut),
        Err(reason) => life.abort(reason),
    }
    life.state.get()
}

fn on_epoll<F: ServiceFactory>(init: Init<F>, life: &Lifecycle) -> Result<usize, String> {
    let mut rt = runtime::epoll().map_err(|e| format!("cannot build the epoll runtime: {e}"))?;
    rt.block_on(lifecycle(init, life, Driver::Epoll))
}

/// Runs inside the runtime: Prepared → (COMMIT) → Running → Draining.
/// Returns the number of connections cut by FORCE.
async fn lifecycle<F: ServiceFactory>(
    init: Init<F>,
    life: &Lifecycle,
    driver: Driver,
) -> Result<usize, String> {
    let service = init
        .factory
        .make(init.index)
        .map_err(|e| format!("cannot make the service: {e}"))?;
    life.enter(State::Prepared, Some(driver), None, 0);

    loop {
        match init.control.recv_async().await {
            Ok(Control::Commit) => break,
            Ok(Control::Beat(seq)) => life.beat(seq),
            Ok(other) => {
                tracing::debug!(worker = init.index, ?other, "rolled back before commit");
                return Ok(0);
            }
            Err(_) => {
                tracing::warn!(
                    worker = init.index,
                    "supervisor gone before commit; exiting without serving"
                );
                return Ok(0);
            }
        }
    }

    if init.tls_flags.iter().any(|&t| t) && init.tls.is_none() {
        return Err("a TLS listener without a TLS configuration".into());
    }
    let mut listeners = Vec::with_capacity(init.sockets.len());
    for s in init.sockets {
        let l = accept::listen(s)
            .and_then(monoio::net::TcpListener::from_std)
            .map_err(|e| format!("cannot listen: {e}"))?;
        listeners.push(l);
    }
    let h3 = init.settings.http3;
    let alt_svc = if h3.on() && init.tls.is_some() {
        let mut ports: Vec<u16> = init
            .udp
            .iter()
            .filter_map(|s| Some(s.local_addr().ok()?.as_socket()?.port()))
            .collect();
        ports.dedup();
        ports
            .into_iter()
            .map(|port| conn::AltSvc::new(port, h3.alt_svc_max_age))
            .collect()
    } else {
        Vec::new()
    };
    let ctx = Rc::new(Ctx {
        service,
        index: init.index,
        settings: init.settings,
        stats: init.stats.clone(),
        date: RefCell::new(DateCache::default()),
        registry: Rc::new(Registry::new(init.budget.clone())),
        draining: Cell::new(false),
        driver,
        pool: Rc::default(),
        heads: RefCell::new(bytes::BytesMut::new()),
        panic_on: fault::panic_target(),
        log: init
            .access_log
            .map(|setup| crate::access_log::Log::new(setup, init.stats.clone())),
        connections: Cell::new(0),
        sites: init.sites.clone(),
        header_rules: init.header_rules.clone(),
        output: Rc::new(conn::WorkerBudget::new(
            init.settings.worker_output_bytes,
            init.stats.clone(),
        )),
        ktls_missing: Cell::new(false),
        handshakes: conn::HandshakeBudget::new(init.settings.tls_handshake_buffer_bytes),
        alt_svc,
    });
    let canceller = Canceller::new();
    let accepting = Rc::new(Cell::new(listeners.len()));
    for (i, l) in listeners.into_iter().enumerate() {
        let tls = match (init.tls_flags.get(i).copied().unwrap_or(false), &init.tls) {
            (true, Some(config)) => Some(config.clone()),
            (true, None) | (false, _) => None,
        };
        monoio::spawn(accept::accept_loop(
            l,
            ctx.clone(),
            canceller.handle(),
            accepting.clone(),
            tls,
        ));
    }
    let endpoints = start_quic(
        &ctx,
        Quic {
            udp: init.udp,
            generation: init.generation,
            inbox: init.inbox,
            post: init.post,
        },
        init.tls.as_deref(),
        &accepting,
    )?;
    // The worker's own background tasks end with it: monoio keeps no list
    // of its tasks, so one still sleeping when the runtime is dropped is
    // never freed, nor what it holds (the connection context, and with it
    // the service: a thread worker's docroot and caches, at every reload).
    let ending = Rc::new(Ending::default());
    let mut background = vec![monoio::spawn(sweep_keepalive(ctx.clone(), ending.clone()))];
    heap::start();
    if ctx.log.is_some() {
        background.push(monoio::spawn(flush_log(ctx.clone(), ending.clone())));
    }
    life.enter(State::Running, None, None, 0);
    // Held across the loop's awaits, so the optimiser cannot see it is
    // always false without `failpoints`: the arm that reads it is compiled
    // only with the feature.
    #[cfg(feature = "failpoints")]
    let ignore_drain = matches!(
        fault::for_worker(init.index),
        Some(fault::Fault::IgnoreDrain)
    );
    if let Some(fault::Fault::HangAfterReady) = fault::for_worker(init.index) {
        tracing::warn!(worker = init.index, "injected hang (SERVERY_TEST_FAULT)");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    let mut canceller = Some(canceller);
    let mut cut = 0;
    let mut supervisor_gone = false;
    let finished = || ctx.draining.get() && accepting.get() == 0 && ctx.registry.len() == 0;
    loop {
        let msg = if supervisor_gone {
            // Nobody will send FORCE: keep the deadlines ourselves. At the
            // drain timeout cut what is left; never outlive the force timeout.
            let drain = ctx.settings.drain_timeout;
            if monoio::time::timeout(drain, ctx.registry.wait_for(finished))
                .await
                .is_err()
            {
                let n =
                    ctx.registry.cut_all() + endpoints.iter().map(|q| q.cut_all()).sum::<usize>();
                tracing::warn!(
                    worker = init.index,
                    cut = n,
                    "orphaned drain timed out: connections cut"
                );
                cut += n;
                let rest = ctx.settings.force_timeout.saturating_sub(drain);
                let _ = monoio::time::timeout(rest, ctx.registry.wait_for(finished)).await;
            }
            None
        } else {
            monoio::select! {
                m = init.control.recv_async() => Some(m),
                _ = ctx.registry.wait_for(finished) => None,
            }
        };
        let drain = match msg {
            None => break,
            Some(Ok(Control::Force)) => {
                let n =
                    ctx.registry.cut_all() + endpoints.iter().map(|q| q.cut_all()).sum::<usize>();
                if n > 0 {
                    tracing::warn!(
                        worker = init.index,
                        cut = n,
                        "drain timeout: connections cut"
                    );
                }
                cut += n;
                false
            }
            // The sink reopens on the supervisor's side (threads) or in the
            // process's control reader (processes); nothing to do here.
            Some(Ok(Control::Commit)) | Some(Ok(Control::ReopenLog)) => false,
            Some(Ok(Control::Beat(seq))) => {
                life.beat(seq);
                false
            }
            #[cfg(feature = "failpoints")]
            Some(Ok(Control::Drain)) | Some(Ok(Control::Abort)) if ignore_drain => {
                tracing::warn!(
                    worker = init.index,
                    "injected: ignoring DRAIN (SERVERY_TEST_FAULT)"
                );
                false
            }
            Some(Ok(Control::Drain)) | Some(Ok(Control::Abort)) => true,
            Some(Ok(Control::Handover)) => {
                for q in &endpoints {
                    q.hand_over();
                }
                false
            }
            Some(Err(_)) => {
                tracing::warn!(worker = init.index, "supervisor gone; draining");
                supervisor_gone = true;
                true
            }
        };
        if drain && !ctx.draining.replace(true) {
            life.enter(State::Draining, None, None, 0);
            if let Some(c) = canceller.take() {
                c.cancel();
            }
            for q in &endpoints {
                q.drain();
            }
            ctx.registry.close_idle();
        }
    }
    // Drained: the last lines go to the writer now (the sink writes them
    // when it is closed, after every worker of the process is done).
    if let Some(log) = &ctx.log {
        log.flush();
    }
    ending.end();
    for task in background {
        task.await;
    }
    Ok(cut)
}

/// What a worker's QUIC endpoints start from.
struct Quic {
    udp: Vec<Socket>,
    generation: u64,
    inbox: Option<std::os::unix::net::UnixDatagram>,
    post: Vec<(crate::quic::cid::Owner, std::os::unix::net::UnixDatagram)>,
}

/// Start the worker's QUIC endpoints, one per UDP port, when HTTP/3 is
/// on: each reads the port's sockets it was given (its own group member's,
/// and any a lowered worker count left to it) and counts in `accepting`
/// until it has drained. One task reads the worker's inbox for all of them.
fn start_quic<H: crate::app::Service>(
    ctx: &Rc<Ctx<H>>,
    q: Quic,
    tls: Option<&rustls::ServerConfig>,
    accepting: &Rc<Cell<usize>>,
) -> Result<Vec<Rc<quic::Quic>>, String> {
    let settings = &ctx.settings;
    let (Some(tls), true) = (tls, settings.http3.on()) else {
        return Ok(Vec::new());
    };
    let Quic {
        udp,
        generation,
        inbox,
        post,
    } = q;
    let post = Rc::new(quic::Post::new(post).map_err(|e| format!("HTTP/3: the post: {e}"))?);
    let stop = Rc::new(quic::Stop::default());
    // The sockets by address, each address's own member first (the order
    // `ListenerPlan::udp_of_slot` gives).
    let mut ports: Vec<(Option<std::net::SocketAddr>, Vec<Socket>)> = Vec::new();
    for socket in udp {
        let addr = socket.local_addr().ok().and_then(|a| a.as_socket());
        match ports.iter_mut().find(|(a, _)| *a == addr) {
            Some((_, sockets)) => sockets.push(socket),
            None => ports.push((addr, vec![socket])),
        }
    }
    let running = Rc::new(Cell::new(ports.len()));
    let owner = crate::quic::cid::Owner {
        slot: ctx.index as u8,
        generation: generation as u8,
    };
    let mut endpoints = Vec::new();
    for (_, sockets) in ports {
        let (endpoint, server) = quic::config(ctx.index, generation, &settings.http3, tls)
            .map_err(|e| format!("HTTP/3: {e}"))?;
        let sockets = sockets
            .into_iter()
            .map(quic::socket)
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("HTTP/3: the UDP socket: {e}"))?;
        let socket = quic::Sockets::new(sockets);
        let q = quic::endpoint(
            endpoint,
            server,
            ctx.stats.clone(),
            ctx.output.clone(),
            quic::Limits {
                max_connections: settings.max_connections.get(),
                handshake_timeout: settings.tls_handshake_timeout,
                retry_threshold: settings.http3.retry_threshold,
                output_buffer_bytes: settings.output_buffer_bytes as u64,
            },
            socket.port(),
        );
        accepting.set(accepting.get() + 1);
        let (ctx, accepting, quic, post) =
            (ctx.clone(), accepting.clone(), q.clone(), post.clone());
        let (stop, running) = (stop.clone(), running.clone());
        monoio::spawn(async move {
            let serving = ctx.clone();
            quic::drive(quic, socket, owner, ctx.stats.clone(), post, move |conn| {
                monoio::spawn(conn::serve_h3(serving.clone(), conn));
            })
            .await;
            // Under io_uring the socket's close is an operation queued on
            // the ring: let the ring take it before the worker may end, or
            // the descriptor outlives the worker (the UDP socket then stays
            // in its port's group, unread).
            running.set(running.get() - 1);
            if running.get() == 0 {
                stop.stop();
            }
            monoio::time::sleep(Duration::from_millis(1)).await;
            accepting.set(accepting.get() - 1);
            ctx.registry.wake_closed();
        });
        endpoints.push(q);
    }
    if let Some(inbox) = inbox {
        let inbox = quic::Inbox::new(inbox).map_err(|e| format!("HTTP/3: the inbox: {e}"))?;
        monoio::spawn(quic::read_inbox(
            inbox,
            endpoints.clone(),
            ctx.stats.clone(),
            stop,
        ));
    }
    Ok(endpoints)
}

/// Hand a partial buffer of access-log lines to the writer every
/// `--access-log-flush`, so a quiet worker's lines are not held.
async fn flush_log<H>(ctx: Rc<Ctx<H>>, ending: Rc<Ending>) {
    let Some(log) = &ctx.log else {
        return;
    };
    while ending.sleep(log.interval()).await {
        log.flush();
    }
}

/// Tells the worker's background tasks that it is ending.
#[derive(Default)]
struct Ending {
    ended: Cell<bool>,
    waiters: RefCell<Vec<std::task::Waker>>,
}

impl Ending {
    fn end(&self) {
        self.ended.set(true);
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Sleep `d`: `true` when it passed, `false` when the worker ends.
    async fn sleep(&self, d: Duration) -> bool {
        let mut sleep = std::pin::pin!(monoio::time::sleep(d));
        std::future::poll_fn(|cx| {
            if self.ended.get() {
                return std::task::Poll::Ready(false);
            }
            let mut waiters = self.waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            std::future::Future::poll(sleep.as_mut(), cx).map(|()| true)
        })
        .await
    }
}

/// The keep-alive timeout of parked connections (see `registry`): one
/// sweep per interval for the worker's whole life.
async fn sweep_keepalive<H>(ctx: Rc<Ctx<H>>, ending: Rc<Ending>) {
    while ending.sleep(registry::SWEEP_INTERVAL).await {
        ctx.registry.sweep();
    }
}

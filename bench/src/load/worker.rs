//! One worker thread's event loop over its connections.
//!
//! Closed loop: every slot keeps one batch of `pipeline` requests in flight and writes the
//! next batch (one write(2)) as soon as the last response of the previous one is read.
//! Open loop: a [`Pacer`] says when each request is due; a due request goes to a slot with
//! room (the `ready` stack) and otherwise waits, its latency still counting from the due time.
//!
//! Each turn of the loop:
//! 1. Note the time; open the window's books when warm-up ends; stop at the window's end or
//!    when the `--requests` budget is spent and every request answered.
//! 2. Open loop: hand every due request to a ready slot, then flush the touched slots.
//! 3. Every [`SWEEP_INTERVAL`]: time out stuck requests, retry backed-off connects, give up
//!    on servers that never send their FIN.
//! 4. Arm the timer for the next deadline and wait in epoll; handle each ready socket:
//!    finish a connect, flush pending bytes, read and frame responses.
//!
//! The hot path (closed loop, keep-alive) is read → frame → record → write, with no
//! allocation: buffers are sized once per slot, request bytes are copied from the
//! pre-serialized ones.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use super::gate::Arrival;
use super::pacer::Pacer;
use super::slot::{Pending, Phase, Slot};
use super::tally::{ErrorClass, Tally};
use super::{Error, Shared, Worked};
use crate::http::response::{Eof, Step, MAX_HEAD_BYTES};
use crate::plan::Mode;
use crate::sys::epoll::{Epoll, Events, Interest};
use crate::sys::rusage;
use crate::sys::timer::Timer;

/// Per-thread read buffer. Large enough that a big static file arrives in few read(2)s, small
/// enough to stay cache-resident; must exceed `MAX_HEAD_BYTES` so a partial head plus new
/// bytes always fit.
const READ_BUFFER_BYTES: usize = 256 * 1024;
const _: () = assert!(READ_BUFFER_BYTES > 2 * MAX_HEAD_BYTES);

/// How often timeouts and reconnect back-offs are checked: the resolution of `--timeout`.
const SWEEP_INTERVAL: Duration = Duration::from_millis(10);

/// Wait before retrying a failed connect, so a dead server costs one attempt per slot per
/// interval rather than a busy loop of refused connects.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// The most epoll events taken per wait.
const MAX_EVENTS: usize = 1024;

/// The epoll token of the worker's timer; slots use their index.
const TIMER_TOKEN: u64 = u64::MAX;

/// Runs worker `index` with `connections` slots: set up, wait at the gate, loop, report.
pub(crate) fn work(shared: &Shared<'_>, index: usize, connections: usize) -> Result<Worked, Error> {
    let arrival = Arrival::new(&shared.gate);
    let setup = Worker::new(shared, index, connections);
    let Some(zero) = arrival.arrive(setup.is_ok()) else {
        return setup.map(|_| Worked {
            tally: Tally::new(),
            zero: None,
        });
    };
    let tally = setup?.run(zero);
    Ok(Worked {
        tally,
        zero: Some(zero),
    })
}

/// What framing a read's bytes left the connection needing.
enum Framed {
    /// Keep reading responses on this connection.
    More,
    /// The server announced it closes; the slot is `Closing`, waiting for the FIN.
    ServerCloses,
    /// Churn: the client ends the connection after its one response.
    ClientCloses,
}

/// The timed window on this worker's clock.
#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

struct Worker<'s, 'p> {
    shared: &'s Shared<'p>,
    index: usize,
    epoll: Epoll,
    events: Events,
    timer: Timer,
    slots: Vec<Slot>,
    /// Open loop: slots that may have room for another request (entries can be stale and are
    /// re-checked when popped).
    ready: Vec<usize>,
    /// Open loop: slots given requests this turn, flushed together at the end of dispatch.
    dirty: Vec<usize>,
    read_buf: Box<[u8]>,
    /// Round-robin position over the request paths.
    next_path: usize,
    pacer: Option<Pacer>,
    /// Requests queued or in flight across all slots.
    outstanding: usize,
    /// The `--requests` budget is spent: send nothing new.
    exhausted: bool,
    window: Window,
    /// The window has started (warm-up is over).
    counting: bool,
    cpu_start: Option<Duration>,
    tally: Tally,
}

impl<'s, 'p> Worker<'s, 'p> {
    fn new(shared: &'s Shared<'p>, index: usize, connections: usize) -> Result<Self, Error> {
        let plan = shared.plan;
        super::pin(plan, index)?;
        let setup = |source| Error::Setup {
            worker: index,
            source,
        };
        let epoll = Epoll::new().map_err(setup)?;
        let timer = Timer::new().map_err(setup)?;
        epoll
            .add(timer.as_fd(), TIMER_TOKEN, Interest::ReadEdge)
            .map_err(setup)?;
        let request_len = shared.requests.iter().map(Vec::len).max().unwrap_or(0);
        let pipeline = plan.pipeline.get();
        let now = Instant::now();
        Ok(Worker {
            shared,
            index,
            epoll,
            events: Events::with_capacity((connections + 1).min(MAX_EVENTS)),
            timer,
            slots: (0..connections)
                .map(|_| Slot::new(pipeline, request_len))
                .collect(),
            ready: Vec::with_capacity(connections),
            dirty: Vec::with_capacity(connections),
            read_buf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            next_path: index % shared.requests.len().max(1),
            pacer: None,
            outstanding: 0,
            exhausted: false,
            window: Window {
                start: now,
                end: now,
            },
            counting: false,
            cpu_start: None,
            tally: Tally::new(),
        })
    }

    fn open_loop(&self) -> bool {
        self.pacer.is_some()
    }

    fn run(mut self, zero: Instant) -> Tally {
        let plan = self.shared.plan;
        let start = zero + plan.warmup;
        self.window = Window {
            start,
            end: start + plan.duration,
        };
        if let Mode::Open { rate } = plan.mode {
            let threads = plan.threads.get() as f64;
            self.pacer = Some(Pacer::new(
                zero,
                rate / threads,
                self.index as f64 / threads,
            ));
        }
        let mut now = zero;
        if now >= self.window.start {
            // No warm-up: the initial connects and requests are already timed.
            self.counting = true;
            self.cpu_start = rusage::thread_cpu().ok();
        }
        for i in 0..self.slots.len() {
            if self.open_loop() && plan.churn {
                self.mark_ready(i);
            } else {
                self.reopen(i, zero);
            }
        }
        let mut next_sweep = zero + SWEEP_INTERVAL;
        loop {
            // Fresh each turn: handling the last batch of events took time.
            now = Instant::now();
            if !self.counting && now >= self.window.start {
                self.counting = true;
                self.cpu_start = rusage::thread_cpu().ok();
            }
            if now >= self.window.end || (self.exhausted && self.outstanding == 0) {
                break;
            }
            if self.open_loop() {
                self.dispatch(now);
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_INTERVAL;
            }
            let mut deadline = self.window.end.min(next_sweep);
            if !self.counting {
                deadline = deadline.min(self.window.start);
            }
            if let Some(pacer) = &self.pacer {
                if !self.ready.is_empty() && !self.exhausted {
                    deadline = deadline.min(pacer.due());
                }
            }
            self.wait(deadline, now);
            now = Instant::now();
            for k in 0..self.events.len() {
                let event = self.events.get(k);
                if event.token == TIMER_TOKEN {
                    self.timer.fired();
                    continue;
                }
                let i = event.token as usize;
                if i >= self.slots.len() {
                    continue;
                }
                if matches!(self.slots[i].phase, Phase::Connecting { .. }) {
                    self.finish_connect(i, now);
                }
                let slot = &self.slots[i];
                if matches!(slot.phase, Phase::Open) && event.writable() && !slot.out.is_empty() {
                    self.flush(i, now);
                }
                if matches!(self.slots[i].phase, Phase::Open | Phase::Closing { .. })
                    && event.readable()
                {
                    self.receive(i);
                }
            }
        }
        self.finish(now)
    }

    /// Blocks until `deadline` or socket activity.
    fn wait(&mut self, deadline: Instant, now: Instant) {
        let result = if deadline <= now {
            self.epoll.wait(&mut self.events, Some(Duration::ZERO))
        } else {
            match self.timer.arm(deadline, now) {
                Ok(()) => self.epoll.wait(&mut self.events, None),
                // Without the timer, fall back to epoll's millisecond timeout.
                Err(_) => self.epoll.wait(
                    &mut self.events,
                    Some(deadline.saturating_duration_since(now)),
                ),
            }
        };
        if result.is_err() {
            // epoll_wait only fails on programming errors (EBADF, EINVAL); avoid spinning.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn finish(mut self, now: Instant) -> Tally {
        let stopped = now.min(self.window.end);
        self.tally.stopped = Some(stopped.max(self.window.start));
        if let (Some(start), Ok(end)) = (self.cpu_start, rusage::thread_cpu()) {
            self.tally.cpu = end.saturating_sub(start);
        }
        self.tally.unfinished = self
            .slots
            .iter()
            .flat_map(|s| s.in_flight.iter())
            .filter(|p| p.counted)
            .count() as u64;
        if let (Some(pacer), false) = (&self.pacer, self.exhausted) {
            self.tally.unsent = pacer.unsent(self.window.start, stopped);
        }
        self.tally
    }

    // ---- pacing -------------------------------------------------------------------------

    /// Open loop: hands every due request to a slot with room, then flushes those slots.
    fn dispatch(&mut self, now: Instant) {
        let Some(mut pacer) = self.pacer else {
            return;
        };
        while !self.exhausted {
            let due = pacer.due();
            if due > now {
                break;
            }
            let Some(i) = self.ready_slot() else {
                break;
            };
            let counted = due >= self.window.start;
            if counted && !self.shared.claim() {
                self.exhausted = true;
                break;
            }
            if self.slots[i].phase == Phase::Idle {
                self.connect(i, now);
            }
            let path = self.next_path();
            self.queue(i, path, due, now, counted);
            pacer.advance();
            if !self.slots[i].dirty {
                self.slots[i].dirty = true;
                self.dirty.push(i);
            }
            if !self.has_room(i) {
                self.ready.pop();
                self.slots[i].ready = false;
            }
        }
        self.pacer = Some(pacer);
        let mut dirty = std::mem::take(&mut self.dirty);
        for &i in &dirty {
            self.slots[i].dirty = false;
            self.flush(i, now);
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// The top of the ready stack that really has room, dropping stale entries.
    fn ready_slot(&mut self) -> Option<usize> {
        while let Some(&i) = self.ready.last() {
            if self.has_room(i) {
                return Some(i);
            }
            self.ready.pop();
            self.slots[i].ready = false;
        }
        None
    }

    /// Open loop: whether slot `i` can take another request now.
    fn has_room(&self, i: usize) -> bool {
        let slot = &self.slots[i];
        let churn = self.shared.plan.churn;
        match slot.phase {
            Phase::Open | Phase::Connecting { .. } => {
                !churn && slot.in_flight.len() < self.shared.plan.pipeline.get()
            }
            Phase::Idle => churn,
            Phase::Backoff { .. } | Phase::Closing { .. } => false,
        }
    }

    fn mark_ready(&mut self, i: usize) {
        if self.open_loop() && !self.slots[i].ready && self.has_room(i) {
            self.slots[i].ready = true;
            self.ready.push(i);
        }
    }

    fn next_path(&mut self) -> usize {
        let path = self.next_path;
        self.next_path = (path + 1) % self.shared.requests.len();
        path
    }

    /// Appends a request to slot `i`'s output and in-flight queue (not yet written).
    fn queue(&mut self, i: usize, path: usize, origin: Instant, now: Instant, counted: bool) {
        let slot = &mut self.slots[i];
        slot.out.extend_from_slice(&self.shared.requests[path]);
        slot.in_flight.push_back(Pending {
            path,
            origin,
            sent: now,
            counted,
        });
        self.outstanding += 1;
    }

    /// Closed loop: queues and writes the next batch of up to `pipeline` requests.
    fn refill(&mut self, i: usize, now: Instant) {
        self.fill(i, now);
        self.flush(i, now);
    }

    /// Closed loop: queues the next batch of up to `pipeline` requests without writing it.
    fn fill(&mut self, i: usize, now: Instant) {
        let counted = now >= self.window.start;
        for _ in 0..self.shared.plan.pipeline.get() {
            if self.exhausted || (counted && !self.shared.claim()) {
                self.exhausted = true;
                break;
            }
            let path = self.next_path();
            self.queue(i, path, now, now, counted);
        }
    }

    // ---- connection lifecycle -------------------------------------------------------------

    /// Opens a new connection for slot `i` and gives it work: the requests it still owes, or
    /// (closed loop) a fresh batch. A closed-loop slot with nothing left to send (the
    /// `--requests` budget is spent) stays idle instead of opening a connection it won't use.
    fn reopen(&mut self, i: usize, now: Instant) {
        if !self.open_loop() && self.slots[i].in_flight.is_empty() {
            self.fill(i, now);
            if self.slots[i].in_flight.is_empty() {
                return;
            }
        }
        self.connect(i, now);
        if matches!(self.slots[i].phase, Phase::Backoff { .. }) {
            return;
        }
        let slot = &self.slots[i];
        if slot.out.is_empty() && !slot.in_flight.is_empty() {
            self.requeue(i, now);
        }
        self.mark_ready(i);
    }

    /// Starts a non-blocking connect; on immediate failure the slot backs off.
    fn connect(&mut self, i: usize, now: Instant) {
        let stream = match TcpStream::connect(self.shared.plan.target.addr) {
            Ok(stream) => stream,
            Err(_) => return self.connect_failed(i, now),
        };
        // Requests are small and latency-bound: don't let Nagle hold them back.
        let _ = stream.set_nodelay(true);
        if self
            .epoll
            .add(stream.as_fd(), i as u64, Interest::ReadWrite)
            .is_err()
        {
            return self.connect_failed(i, now);
        }
        let slot = &mut self.slots[i];
        slot.stream = Some(stream);
        slot.phase = Phase::Connecting { since: now };
        slot.interest = Interest::ReadWrite;
        if self.counting {
            self.tally.connects += 1;
        }
    }

    /// Checks a connecting slot after epoll reported it; moves it to `Open` or backs off.
    fn finish_connect(&mut self, i: usize, now: Instant) {
        let Some(stream) = self.slots[i].stream.as_ref() else {
            return;
        };
        // mio's documented way to learn a non-blocking connect's outcome.
        let outcome = match stream.take_error() {
            Ok(Some(_)) | Err(_) => Err(()),
            Ok(None) => match stream.peer_addr() {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                Err(_) => Err(()),
            },
        };
        match outcome {
            Ok(true) => {
                self.slots[i].phase = Phase::Open;
                self.flush(i, now);
            }
            Ok(false) => {}
            Err(()) => self.connect_failed(i, now),
        }
    }

    fn connect_failed(&mut self, i: usize, now: Instant) {
        if now >= self.window.start {
            self.tally.error(ErrorClass::Connect);
        }
        let slot = &mut self.slots[i];
        slot.teardown();
        slot.phase = Phase::Backoff {
            until: now + CONNECT_BACKOFF,
        };
    }

    /// Rewrites slot `i`'s output from its in-flight requests, for a fresh connection.
    fn requeue(&mut self, i: usize, now: Instant) {
        let requests = &self.shared.requests;
        let slot = &mut self.slots[i];
        slot.out.clear();
        slot.written = 0;
        for pending in slot.in_flight.iter_mut() {
            slot.out.extend_from_slice(&requests[pending.path]);
            pending.sent = now;
        }
        self.flush(i, now);
    }

    /// After a connection ended: open the next one, or (open loop with churn, nothing owed)
    /// wait idle for the next scheduled request.
    fn after_close(&mut self, i: usize, now: Instant) {
        self.slots[i].teardown();
        if self.open_loop() && self.shared.plan.churn && self.slots[i].in_flight.is_empty() {
            self.mark_ready(i);
        } else {
            self.reopen(i, now);
        }
    }

    /// Drops slot `i`'s connection after a failure; each timed request it had in flight
    /// counts once as a `class` error. Then reconnects.
    fn fail(&mut self, i: usize, class: ErrorClass, now: Instant) {
        let slot = &mut self.slots[i];
        let lost = slot.in_flight.len();
        for pending in slot.in_flight.drain(..) {
            if pending.counted {
                self.tally.error(class);
            }
        }
        self.outstanding -= lost;
        self.after_close(i, now);
    }

    /// Periodic checks: back-offs that expired, requests past their timeout, connects that
    /// hang, servers that never close after `Connection: close`.
    fn sweep(&mut self, now: Instant) {
        let timeout = self.shared.plan.timeout;
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            let overdue = slot
                .in_flight
                .front()
                .is_some_and(|p| now >= p.sent + timeout);
            let phase = slot.phase;
            match phase {
                Phase::Backoff { until } if now >= until => self.after_close(i, now),
                Phase::Closing { since } if now >= since + timeout => self.after_close(i, now),
                Phase::Connecting { .. } | Phase::Open if overdue => {
                    self.fail(i, ErrorClass::Timeout, now)
                }
                Phase::Connecting { since } if now >= since + timeout => {
                    self.connect_failed(i, now)
                }
                _ => {}
            }
        }
    }

    // ---- I/O -------------------------------------------------------------------------------

    /// Writes as much of slot `i`'s output as the socket takes, and asks epoll for
    /// writability only while something is left.
    fn flush(&mut self, i: usize, now: Instant) {
        let slot = &mut self.slots[i];
        if slot.phase != Phase::Open {
            return;
        }
        let Some(stream) = slot.stream.as_mut() else {
            return;
        };
        let mut failed = false;
        while slot.written < slot.out.len() {
            match stream.write(&slot.out[slot.written..]) {
                Ok(0) => {
                    failed = true;
                    break;
                }
                Ok(n) => slot.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            // A write refused by a reset connection: the same failure a read would see.
            return self.fail(i, ErrorClass::Read, now);
        }
        if slot.written == slot.out.len() {
            slot.out.clear();
            slot.written = 0;
        }
        let want = if slot.out.is_empty() {
            Interest::Read
        } else {
            Interest::ReadWrite
        };
        if want != slot.interest {
            if let Some(stream) = slot.stream.as_ref() {
                if self.epoll.modify(stream.as_fd(), i as u64, want).is_err() {
                    return self.fail(i, ErrorClass::Read, now);
                }
            }
            self.slots[i].interest = want;
        }
    }

    /// Reads what slot `i`'s socket has, frames responses, and gives the slot its next work.
    fn receive(&mut self, i: usize) {
        let mut now;
        loop {
            let slot = &mut self.slots[i];
            let Some(stream) = slot.stream.as_mut() else {
                return;
            };
            let carried = slot.carry.len();
            let read = stream.read(&mut self.read_buf[carried..]);
            now = Instant::now();
            match read {
                Ok(0) => return self.on_eof(i, now),
                Ok(n) => {
                    if matches!(slot.phase, Phase::Closing { .. }) {
                        // Nothing may follow a `Connection: close` response; ignore it.
                        continue;
                    }
                    // The read went after the carried bytes, so prepend them in place.
                    self.read_buf[..carried].copy_from_slice(&slot.carry);
                    slot.carry.clear();
                    match self.frame(i, carried + n, now) {
                        Err(class) => return self.fail(i, class, now),
                        Ok(Framed::ClientCloses) => return self.after_close(i, now),
                        // The FIN usually arrives with or right after the response: read
                        // again now rather than after another epoll round trip.
                        Ok(Framed::ServerCloses) => continue,
                        Ok(Framed::More) => {}
                    }
                    if carried + n < self.read_buf.len() {
                        // A short read drained the socket; level-triggered epoll will report
                        // it again when more arrives.
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail(i, ErrorClass::Read, now),
            }
        }
        self.next_work(i, now);
    }

    /// After responses were read on slot `i`: closed loop sends the next batch once the last
    /// one is answered; open loop offers the slot's free room to the schedule.
    fn next_work(&mut self, i: usize, now: Instant) {
        if self.slots[i].phase != Phase::Open {
            return;
        }
        if self.open_loop() {
            self.mark_ready(i);
        } else if self.slots[i].in_flight.is_empty() {
            self.refill(i, now);
        }
    }

    /// Frames `read_buf[..len]` on slot `i`, completing responses; keeps a partial tail in the
    /// slot's carry. A `Connection: close` response moves the slot to `Closing`.
    fn frame(&mut self, i: usize, len: usize, now: Instant) -> Result<Framed, ErrorClass> {
        let expected = self.shared.plan.expect.status;
        let churn = self.shared.plan.churn;
        let slot = &mut self.slots[i];
        let buf = &self.read_buf[..len];
        let mut pos = 0;
        loop {
            let progress = slot.parser.advance(&buf[pos..]).map_err(|e| {
                if e.in_body() {
                    ErrorClass::ShortBody
                } else {
                    ErrorClass::Read
                }
            })?;
            pos += progress.consumed;
            slot.response_bytes += progress.consumed as u64;
            match progress.step {
                Step::NeedMore => break,
                Step::Framing | Step::Body => {}
                Step::Head(head) => {
                    if slot.in_flight.is_empty() {
                        // A response nobody asked for: the stream is out of sync.
                        return Err(ErrorClass::Read);
                    }
                    slot.status = head.status;
                }
                Step::Done { keep_alive } => {
                    let Some(pending) = slot.in_flight.pop_front() else {
                        return Err(ErrorClass::Read);
                    };
                    self.outstanding -= 1;
                    let bytes = std::mem::take(&mut slot.response_bytes);
                    if pending.counted {
                        if slot.status == expected {
                            self.tally
                                .record(now.saturating_duration_since(pending.origin));
                            self.tally.bytes += bytes;
                        } else {
                            self.tally.error(ErrorClass::Status);
                        }
                    }
                    if !keep_alive {
                        slot.phase = Phase::Closing { since: now };
                        return Ok(Framed::ServerCloses);
                    }
                    if churn {
                        // We asked for `Connection: close` and the server kept the
                        // connection anyway; churn means one request per connection.
                        return Ok(Framed::ClientCloses);
                    }
                }
            }
        }
        slot.carry.extend_from_slice(&buf[pos..]);
        Ok(Framed::More)
    }

    /// The server closed slot `i`'s connection.
    fn on_eof(&mut self, i: usize, now: Instant) {
        let slot = &mut self.slots[i];
        if matches!(slot.phase, Phase::Closing { .. }) {
            return self.after_close(i, now);
        }
        match slot.parser.on_eof(slot.carry.len()) {
            Eof::Complete => {
                // Completes a close-delimited body: one more step reports `Done`.
                slot.carry.clear();
                match self.frame(i, 0, now) {
                    Err(class) => self.fail(i, class, now),
                    Ok(_) => self.after_close(i, now),
                }
            }
            // An idle keep-alive connection closed by the server is not an error; one with
            // requests outstanding lost them.
            Eof::Idle if slot.in_flight.is_empty() => self.after_close(i, now),
            Eof::Idle | Eof::Truncated { in_body: false } => self.fail(i, ErrorClass::Read, now),
            Eof::Truncated { in_body: true } => self.fail(i, ErrorClass::ShortBody, now),
        }
    }
}

//! The supervisor's state machine: one event loop's worth of decisions.
//!
//! Owns: the server's [`Phase`], the current generation, the one passing
//! its barrier (at start or on reload) or rolling back, the ones draining,
//! and what each event and each timer does to them. It does no I/O and
//! reads no clock: [`Machine::step`] takes an event (or none, for timers)
//! and the time, and acts through the [`Host`] (spawn, reload plan, stats,
//! readiness) and each member's [`Worker`] handle. That is what lets the
//! unit tests below drive it with a fake host and a fake clock.
//!
//! Flow of one step:
//! 1. The event: a worker's report, a reaped process, or a signal.
//! 2. Timers: barrier deadline, rollback give-up, replacements due, beats,
//!    drain and kill deadlines, the shutdown's give-up.
//! 3. Progress: a barrier that reached quorum commits or completes; a
//!    rollback or a drain whose workers have all ended is finished; a
//!    shutdown with nothing left sets the outcome.
//!
//! Reload and shutdown live in `reload.rs` and `shutdown.rs`, the slot and
//! stage types in `generation.rs`, the bookkeeping of beats, of the restart
//! budget and of ACME acknowledgements in `beats.rs`, `restart.rs` and
//! `acks.rs`; the steps that apply the first two are methods of
//! [`Machine`] in this folder (`beating.rs`, `restarting.rs`), so the
//! bookkeeping below never names the machine above it.

mod beating;
mod restarting;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::acks::Acks;
use super::beats::{Beat, Beats};
use super::generation::{Force, Generation, Quorum, Rules, SlotState, Stage};
use super::journal::{Journal, Transition};
use super::restart::Restarts;
pub(crate) use super::types::Worker;
use super::types::{Cause, Death};
use super::{Error, Event, Phase, Signal};
use crate::control::{Control, Driver, Report, State};
use crate::telemetry::Snapshot;

/// A generation's resources as the host made them.
pub(crate) trait Plan {
    fn rules(&self) -> Rules;
    /// Shutdown: drop the supervisor's copies of the listening sockets, so
    /// new connections are refused once the workers close theirs.
    fn close_listeners(&mut self);
    /// SIGUSR1: reopen the access log this generation's worker threads
    /// share (worker processes are told through their channel).
    fn reopen_log(&self) {}
    /// Whether its workers read UDP sockets (HTTP/3): a generation it
    /// replaces hands those over (`Control::Handover`).
    fn reads_udp(&self) -> bool {
        false
    }
}

/// What the host tells the outside world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Serving (first start, or a reload finished or failed).
    Ready,
    /// Shutdown begun.
    Stopping,
}

/// Everything the machine asks of the world.
pub(crate) trait Host {
    type Member: Worker;
    type Plan: Plan;
    fn spawn(
        &mut self,
        generation: u64,
        plan: &Self::Plan,
        slot: usize,
    ) -> Result<Self::Member, Error>;
    /// SIGHUP: the next generation's plan, or `None` when the reload is
    /// refused (the host logs why and keeps serving).
    fn reload(&mut self, current: &Self::Plan) -> Option<Self::Plan>;
    fn notify(&mut self, notice: Notice);
    /// `slot`'s counters summed over its live workers.
    fn publish(&mut self, slot: usize, live: &Snapshot);
    /// A worker of `slot` ended with these counters: keep them if the
    /// mode needs it; true if `slot`'s figures should be published again.
    fn retire(&mut self, slot: usize, last: &Snapshot) -> bool;
    /// A replacement for `slot`'s worker, which died for `cause`, was
    /// started: count it.
    fn restarted(&mut self, slot: usize, cause: Cause);
}

pub(crate) type Gen<H> = Generation<<H as Host>::Member, <H as Host>::Plan>;

/// The state machine.
pub(crate) struct Machine<H: Host> {
    pub(super) host: H,
    pub(super) phase: Phase,
    /// Serving; `None` until the first barrier passes.
    pub(super) current: Option<Gen<H>>,
    /// Passing its barrier, or rolling back.
    pub(super) next: Option<Gen<H>>,
    /// Draining.
    pub(super) old: Vec<Gen<H>>,
    pub(super) next_id: u64,
    pub(super) restarts: Restarts,
    pub(super) beats: Beats,
    /// The shutdown came from SIGINT: a second one abandons the drain.
    pub(super) interrupted: bool,
    /// Signals that arrived while a reload rolled back, replayed after; at
    /// most two of each kind (a second SIGINT means something; a third adds
    /// nothing), so a signal flood cannot grow it.
    pub(super) deferred: VecDeque<Signal>,
    /// A crash loop: the shutdown it caused reports it.
    pub(super) fatal: Option<Error>,
    /// When the shutdown stops waiting for survivors.
    pub(super) give_up: Option<Instant>,
    /// ACME updates waiting for every worker process to have them.
    pub(super) acks: Acks,
    /// The first barrier passed on this driver (taken by the loop).
    pub(super) started: Option<Driver>,
    pub(super) outcome: Option<Result<(), Error>>,
    pub(super) journal: Journal,
}

/// Timers never fire sooner than this after a step (no busy loop).
const MIN_WAIT: Duration = Duration::from_millis(1);
/// How long a reaped worker's FAILED report may trail its reap.
const LATE_REASON: Duration = Duration::from_millis(200);

impl<H: Host> Machine<H> {
    /// Spawn generation 1 from `plan`; its barrier is due by
    /// `started + startup_timeout`.
    pub(crate) fn start(host: H, plan: H::Plan, started: Instant, journal: Journal) -> Self {
        let mut m = Machine {
            host,
            phase: Phase::Starting,
            current: None,
            next: None,
            old: Vec::new(),
            next_id: 1,
            restarts: Restarts::default(),
            beats: Beats::new(started),
            interrupted: false,
            deferred: VecDeque::new(),
            fatal: None,
            give_up: None,
            acks: Acks::default(),
            started: None,
            outcome: None,
            journal,
        };
        m.launch(plan, started, started);
        m
    }

    /// The driver of the first generation, once, when it passed its barrier.
    pub(crate) fn take_started(&mut self) -> Option<Driver> {
        self.started.take()
    }

    /// How the server ended, once it has.
    pub(crate) fn take_outcome(&mut self) -> Option<Result<(), Error>> {
        self.outcome.take()
    }

    pub(crate) fn current_plan(&self) -> Option<&H::Plan> {
        self.current.as_ref().map(|g| &g.plan)
    }

    pub(super) fn enter(&mut self, to: Phase) {
        if self.phase != to {
            self.journal.record(Transition::Phase {
                from: self.phase,
                to,
            });
            self.phase = to;
        }
    }

    /// A new generation from `plan`, spawned and put behind the barrier.
    pub(super) fn launch(&mut self, plan: H::Plan, started: Instant, now: Instant) {
        let id = self.next_id;
        self.next_id += 1;
        let rules = plan.rules();
        let mut g = Generation::new(id, plan, rules, started, &mut self.journal);
        for slot in 0..rules.workers {
            match self.host.spawn(id, &g.plan, slot) {
                Ok(member) => g.push(member, &mut self.journal),
                Err(e) => {
                    self.fail(&mut g, e, now);
                    break;
                }
            }
        }
        self.next = Some(g);
    }

    /// The barrier of `g` failed: roll it back.
    fn fail(&mut self, g: &mut Gen<H>, error: Error, now: Instant) {
        g.roll_back(error, now, &mut self.journal);
        if self.phase != Phase::Draining {
            self.enter(Phase::RollingBack);
        }
    }

    /// The next instant a timer falls due.
    pub(crate) fn next_wakeup(&self, now: Instant) -> Instant {
        let beats = self
            .current
            .as_ref()
            .filter(|_| self.beating())
            .map(|_| self.beats.next_at());
        self.generations()
            .filter_map(Generation::next_deadline)
            .chain(beats)
            .chain(self.give_up)
            .min()
            .unwrap_or(now + Duration::from_secs(1))
            .max(now + MIN_WAIT)
    }

    pub(super) fn beating(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Reloading)
    }

    fn generations(&self) -> impl Iterator<Item = &Gen<H>> {
        self.current.iter().chain(&self.next).chain(&self.old)
    }

    /// Generation `id`, and the journal to record its changes in.
    fn generation_mut(&mut self, id: u64) -> Option<(&mut Gen<H>, &mut Journal)> {
        let journal = &mut self.journal;
        self.current
            .iter_mut()
            .chain(self.next.iter_mut())
            .chain(self.old.iter_mut())
            .find(|g| g.id == id)
            .map(|g| (g, journal))
    }

    /// One event (or none: timers only), then timers, then progress.
    pub(crate) fn step(&mut self, event: Option<Event>, now: Instant) {
        if self.outcome.is_some() {
            return;
        }
        match event {
            Some(Event::Worker {
                generation,
                report,
                snapshot,
            }) => self.on_report(generation, report, snapshot, now),
            Some(Event::Exited {
                generation,
                slot,
                pid,
                death,
            }) => self.on_reaped(generation, slot, pid, death, now),
            Some(Event::Signal(s)) => self.on_signal(s, now),
            Some(Event::Acme { update, done }) => {
                // Every live generation: an old one still draining serves
                // its last requests with the new certificate too.
                let seq = self.acks.next_seq();
                let mut owed = Vec::new();
                for g in self.current.iter().chain(&self.next).chain(&self.old) {
                    for i in g.live() {
                        if g.slots[i].member.publish(seq, &update) {
                            owed.push((g.id, i));
                        }
                    }
                }
                if let Some(done) = done {
                    self.acks.wait(seq, owed, done, now);
                }
            }
            Some(Event::Applied {
                generation,
                slot,
                seq,
            }) => self.acks.answered(generation, slot, seq),
            None => {}
        }
        if self.outcome.is_none() {
            self.timers(now);
        }
        if self.outcome.is_none() {
            self.progress(now);
        }
    }

    fn on_report(
        &mut self,
        id: u64,
        report: Report,
        snapshot: Option<Box<Snapshot>>,
        now: Instant,
    ) {
        let is_current = self.current.as_ref().is_some_and(|g| g.id == id);
        let Some((g, journal)) = self.generation_mut(id) else {
            return;
        };
        let i = report.worker;
        let Some(slot) = g.slots.get_mut(i) else {
            return;
        };
        if let Some(seq) = report.beat {
            if let SlotState::Ready { beat } = &mut slot.state {
                beat.answered(seq);
            }
            if let Some(snap) = snapshot {
                slot.snapshot = *snap;
                self.publish(i);
            }
            return;
        }
        g.cut += report.cut;
        let state = g.slots[i].state;
        match report.state {
            State::Starting | State::Draining => {}
            State::Prepared => {
                if let Stage::Barrier { driver, .. } = &mut g.stage {
                    if driver.is_none() {
                        *driver = report.driver;
                    }
                }
                if state == SlotState::Starting {
                    g.set(i, SlotState::Prepared, journal);
                    if is_current {
                        // A replacement passed its own barrier: commit it.
                        g.slots[i].member.send(Control::Commit);
                        g.set(i, SlotState::Committed, journal);
                    }
                }
            }
            State::Running => {
                if matches!(
                    state,
                    SlotState::Starting | SlotState::Prepared | SlotState::Committed
                ) {
                    let ready = SlotState::Ready {
                        beat: Beat::default(),
                    };
                    g.set(i, ready, journal);
                }
            }
            State::Exited | State::Aborted => {
                let (death, error) = if report.state == State::Exited {
                    let death = Death::Code(0);
                    (death, Error::WorkerExited { worker: i, death })
                } else {
                    let reason = report.reason.clone().unwrap_or_default();
                    (Death::Code(1), Error::WorkerFailed { worker: i, reason })
                };
                let in_barrier = matches!(g.stage, Stage::Barrier { .. });
                let mut error = Some(error);
                match &mut g.stage {
                    Stage::Barrier { .. } => {}
                    Stage::RollingBack {
                        error: first,
                        reason,
                        ..
                    } => {
                        // The cause of a reap seen first.
                        if reason.is_some_and(|(s, _)| s == i) && report.reason.is_some() {
                            if let Some(e) = error.take() {
                                *first = e;
                            }
                            *reason = None;
                        }
                    }
                    _ => {
                        if let Some(r) = &report.reason {
                            tracing::error!(worker = i, generation = id, reason = %r, "worker aborted");
                        }
                    }
                }
                if g.slots[i].member.ends_by_report() && g.slots[i].state.live() {
                    self.ended(id, i, death, now);
                }
                if let Some(e) = error.filter(|_| in_barrier) {
                    self.fail_next(e, now);
                }
            }
        }
    }

    /// The generation behind the barrier failed it.
    fn fail_next(&mut self, error: Error, now: Instant) {
        if let Some(mut g) = self.next.take() {
            self.fail(&mut g, error, now);
            self.next = Some(g);
        }
    }

    fn on_reaped(&mut self, id: u64, i: usize, pid: u32, death: Death, now: Instant) {
        let Some((g, _)) = self.generation_mut(id) else {
            return;
        };
        let Some(slot) = g.slots.get(i) else {
            return;
        };
        if slot.member.pid() != Some(pid) || !slot.state.live() {
            return;
        }
        let cut_by_us = matches!(
            slot.state,
            SlotState::Draining {
                forced: Force::Cut | Force::Killed,
                ..
            }
        );
        if cut_by_us && matches!(g.stage, Stage::Draining { .. }) {
            g.cut += 1;
        }
        tracing::debug!(worker = i, generation = id, pid, %death, "worker process reaped");
        let in_barrier = matches!(g.stage, Stage::Barrier { .. });
        self.ended(id, i, death, now);
        if in_barrier {
            self.fail_next(Error::WorkerExited { worker: i, death }, now);
            // Its FAILED report (with the cause) travels on another thread
            // and may arrive just after the reap: wait a moment for it.
            if let Some(Stage::RollingBack { reason, .. }) =
                self.next.as_mut().map(|g| &mut g.stage)
            {
                *reason = Some((i, now + LATE_REASON));
            }
        }
    }

    /// A worker's end was seen. A death nobody asked for, in the serving
    /// generation while serving, is a crash: count it and schedule a
    /// replacement, or stop the server on a crash loop.
    fn ended(&mut self, id: u64, i: usize, how: Death, now: Instant) {
        let serving = self.beating() && self.current.as_ref().is_some_and(|g| g.id == id);
        self.acks.ended(id, i);
        let Some((g, journal)) = self.generation_mut(id) else {
            return;
        };
        let asked = matches!(g.slots[i].state, SlotState::Draining { .. });
        let cause = match g.slots[i].state {
            SlotState::Ready { beat } if beat.was_killed() => Cause::BeatTimeout,
            _ => Cause::Crash,
        };
        let last = std::mem::take(&mut g.slots[i].snapshot);
        g.slots[i].member.finish();
        g.set(i, SlotState::Exited { how }, journal);
        if self.host.retire(i, &last) {
            self.publish(i);
        }
        if asked || !serving {
            return;
        }
        self.crashed(i, how, cause, now);
    }

    /// Sum what every live worker of `slot` reported.
    fn publish(&mut self, slot: usize) {
        let mut total = Snapshot::default();
        for g in self.current.iter().chain(&self.next).chain(&self.old) {
            if let Some(s) = g.slots.get(slot) {
                total.add(&s.snapshot);
            }
        }
        self.host.publish(slot, &total);
    }

    fn on_signal(&mut self, s: Signal, now: Instant) {
        if s == Signal::Reopen {
            // In every phase: the log files belong to every live generation.
            tracing::info!("SIGUSR1: reopening the access log");
            for g in self.current.iter().chain(&self.next).chain(&self.old) {
                g.plan.reopen_log();
                for i in g.live() {
                    g.slots[i].member.send(Control::ReopenLog);
                }
            }
            return;
        }
        match (self.phase, s) {
            (Phase::Starting | Phase::Reloading, Signal::Hangup) => {
                tracing::warn!("SIGHUP while a generation is starting: ignored");
            }
            (Phase::Starting | Phase::Reloading, _) => {
                if self.phase == Phase::Reloading {
                    self.defer(s);
                }
                self.fail_next(Error::Interrupted { signal: s }, now);
            }
            (Phase::RollingBack, _) if self.current.is_some() => self.defer(s),
            (Phase::RollingBack, Signal::Interrupt) => {
                // The operator insists: leave now. Workers still alive see
                // their control channel close and exit without serving
                // (nothing was committed to the world yet).
                if let Some(g) = &self.next {
                    for i in g.live() {
                        g.slots[i].member.kill();
                    }
                }
                self.outcome = Some(Err(Error::Abandoned));
            }
            (Phase::RollingBack, _) => {}
            (Phase::Running, Signal::Hangup) => self.reload(now),
            (Phase::Running, _) => {
                tracing::info!(signal = ?s, "shutting down: draining");
                self.interrupted = s == Signal::Interrupt;
                self.begin_shutdown(now);
            }
            (Phase::Draining, Signal::Interrupt) if self.interrupted => {
                self.outcome = Some(Err(Error::Abandoned));
            }
            (Phase::Draining, Signal::Interrupt) => self.interrupted = true,
            (Phase::Draining | Phase::Stopped, _) => {}
        }
    }

    /// Keep `s` for after the rollback (bounded: see `deferred`).
    fn defer(&mut self, s: Signal) {
        if self.deferred.iter().filter(|&&d| d == s).count() < 2 {
            self.deferred.push_back(s);
        }
    }

    fn timers(&mut self, now: Instant) {
        // The barrier's deadline.
        if let Some(mut g) = self.next.take() {
            if let Stage::Barrier { deadline, .. } = g.stage {
                if now >= deadline {
                    let (workers, phase) = g.laggards();
                    let timeout = g.rules.startup_timeout;
                    let error = Error::StartupTimeout {
                        workers,
                        phase,
                        timeout,
                    };
                    self.fail(&mut g, error, now);
                }
            }
            self.next = Some(g);
        }
        self.replace_crashed(now);
        self.beat(now);
        self.acks.expire(now);
        let gens = self
            .current
            .iter_mut()
            .chain(self.next.iter_mut())
            .chain(self.old.iter_mut());
        for g in gens {
            g.enforce_deadlines(now);
        }
    }

    fn progress(&mut self, now: Instant) {
        if let Some(mut g) = self.next.take() {
            match g.quorum(&mut self.journal) {
                Quorum::Ready(driver) => {
                    self.passed(g, driver, now);
                    return self.progress_drains(now);
                }
                Quorum::Waiting | Quorum::Committed => {}
            }
            let over = match &g.stage {
                Stage::RollingBack {
                    give_up, reason, ..
                } => {
                    let waiting_reason = reason.is_some_and(|(_, until)| now < until);
                    (g.gone() && !waiting_reason) || now >= *give_up
                }
                _ => false,
            };
            if over {
                self.rolled_back(g, now);
            } else {
                self.next = Some(g);
            }
        }
        self.progress_drains(now);
    }

    /// A rollback is over: report it, and go back to what was before.
    fn rolled_back(&mut self, mut g: Gen<H>, now: Instant) {
        if !g.gone() {
            tracing::error!(survivors = ?g.survivors(), "rollback: workers still running; giving up on them");
        }
        g.finish();
        let Stage::RollingBack { error, .. } = g.stage else {
            return;
        };
        if self.phase == Phase::Draining {
            return;
        }
        if self.current.is_none() {
            self.enter(Phase::Stopped);
            self.outcome = Some(Err(error));
            return;
        }
        match error {
            Error::Interrupted { signal } => {
                tracing::warn!(?signal, "reload interrupted; new generation rolled back");
            }
            e => {
                tracing::error!(error = %e, "reload failed: new generation rolled back; still serving the old one");
            }
        }
        self.enter(Phase::Running);
        self.host.notify(Notice::Ready);
        let deferred: Vec<Signal> = self.deferred.drain(..).collect();
        for s in deferred {
            self.on_signal(s, now);
        }
    }
}

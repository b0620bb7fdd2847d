//! The state machine driven by a fake host and a fake clock.
//!
//! Each test feeds [`Machine::step`] the events a real server would see
//! (reports, reaps, signals) at chosen instants from one `t0`, and asserts
//! the sequence of transitions the journal kept and the calls made on the
//! fake members: no threads, no processes, no sleeps. This file holds the
//! fake host and the rig; `barrier` tests startup and rollback, `serving`
//! crashes, beats, reloads and shutdown, `acme` the acknowledged ACME
//! updates.

mod acme;
mod barrier;
mod serving;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::generation::Rules;
use super::journal::Journal;
use super::machine::{Host, Machine, Notice, Plan, Worker};
use super::restart::Cause;
use super::{Death, Error, Event, Signal};
use crate::control::{Control, Driver, Report, State};
use crate::telemetry::Snapshot;

type Log = Rc<RefCell<Vec<String>>>;

pub(super) struct FakeMember {
    name: String,
    pid: Option<u32>,
    log: Log,
}

impl FakeMember {
    fn call(&self, what: &str) {
        self.log.borrow_mut().push(format!("{} {what}", self.name));
    }
}

impl Worker for FakeMember {
    fn pid(&self) -> Option<u32> {
        self.pid
    }
    fn ends_by_report(&self) -> bool {
        self.pid.is_none()
    }
    fn send(&self, c: Control) {
        self.call(&format!("{c:?}"));
    }
    fn terminate(&self) {
        self.call("terminate");
    }
    fn kill(&self) {
        self.call("kill");
    }
    fn finish(&mut self) {}
    fn publish(&self, seq: u64, _: &crate::sites::published::Update) -> bool {
        self.call(&format!("publish {seq}"));
        self.pid.is_some()
    }
}

impl Drop for FakeMember {
    fn drop(&mut self) {
        self.call("dropped");
    }
}

pub(super) struct FakePlan(Rules);

impl Plan for FakePlan {
    fn rules(&self) -> Rules {
        self.0
    }
    fn close_listeners(&mut self) {}
    fn reads_udp(&self) -> bool {
        true
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Thread,
    Process,
}

pub(super) struct Fake {
    kind: Kind,
    log: Log,
    next_pid: u32,
    /// What the next SIGHUP gets (`None`: refused).
    pub(super) reload: Option<Rules>,
    /// (generation, slot) whose spawn fails.
    failing_spawn: Option<(u64, usize)>,
    pub(super) notices: Vec<Notice>,
    /// Restarts counted, as `w{slot} {reason}`.
    pub(super) restarts: Vec<String>,
}

impl Host for Fake {
    type Member = FakeMember;
    type Plan = FakePlan;

    fn spawn(&mut self, generation: u64, _: &FakePlan, slot: usize) -> Result<FakeMember, Error> {
        if self.failing_spawn == Some((generation, slot)) {
            return Err(Error::Spawn {
                worker: slot,
                source: std::io::Error::other("no more processes"),
            });
        }
        self.next_pid += 1;
        Ok(FakeMember {
            name: format!("g{generation}/w{slot}"),
            pid: (self.kind == Kind::Process).then_some(self.next_pid),
            log: self.log.clone(),
        })
    }
    fn reload(&mut self, _: &FakePlan) -> Option<FakePlan> {
        self.reload.map(FakePlan)
    }
    fn notify(&mut self, notice: Notice) {
        self.notices.push(notice);
    }
    fn publish(&mut self, _: usize, _: &Snapshot) {}
    fn retire(&mut self, _: usize, _: &Snapshot) -> bool {
        false
    }
    fn restarted(&mut self, slot: usize, cause: Cause) {
        self.restarts.push(format!("w{slot} {}", cause.label()));
    }
}

pub(super) fn rules(workers: usize) -> Rules {
    Rules {
        workers,
        startup_timeout: Duration::from_secs(10),
        drain_timeout: Duration::from_secs(30),
        force_timeout: Duration::from_secs(35),
        max_restarts: 2,
        restart_window: Duration::from_secs(60),
        beat_interval: Duration::from_secs(1),
        beat_timeout: Duration::from_secs(1),
    }
}

pub(super) struct Rig {
    pub(super) m: Machine<Fake>,
    pub(super) t0: Instant,
    pub(super) log: Log,
}

pub(super) const MS: Duration = Duration::from_millis(1);

impl Rig {
    pub(super) fn new(kind: Kind, r: Rules) -> Rig {
        Rig::with(kind, r, None)
    }

    pub(super) fn with(kind: Kind, r: Rules, failing_spawn: Option<(u64, usize)>) -> Rig {
        let log = Log::default();
        let host = Fake {
            kind,
            log: log.clone(),
            next_pid: 100,
            reload: Some(r),
            failing_spawn,
            notices: Vec::new(),
            restarts: Vec::new(),
        };
        let t0 = Instant::now();
        let m = Machine::start(host, FakePlan(r), t0, Journal::keeping());
        Rig { m, t0, log }
    }

    /// One step at `t0 + at`.
    pub(super) fn step(&mut self, at: Duration, event: Option<Event>) {
        self.m.step(event, self.t0 + at);
    }

    pub(super) fn report(&mut self, at: Duration, generation: u64, worker: usize, state: State) {
        self.step(at, Some(report(generation, worker, state)));
    }

    pub(super) fn reap(&mut self, at: Duration, generation: u64, slot: usize, death: Death) {
        let pid = self.m.generations_for_test(generation, slot);
        let event = Event::Exited {
            generation,
            slot,
            pid,
            death,
        };
        self.step(at, Some(event));
    }

    pub(super) fn signal(&mut self, at: Duration, s: Signal) {
        self.step(at, Some(Event::Signal(s)));
    }

    /// Generation `g` through its barrier at `at`.
    pub(super) fn ready(&mut self, at: Duration, g: u64, workers: usize) {
        for w in 0..workers {
            self.report(at, g, w, State::Prepared);
        }
        for w in 0..workers {
            self.report(at, g, w, State::Running);
        }
    }

    pub(super) fn transitions(&mut self) -> Vec<String> {
        self.m.journal.take()
    }

    pub(super) fn calls(&mut self) -> Vec<String> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    /// The calls other than beats.
    pub(super) fn orders(&mut self) -> Vec<String> {
        let mut calls = self.calls();
        calls.retain(|c| !c.contains("Beat("));
        calls
    }
}

pub(super) fn report(generation: u64, worker: usize, state: State) -> Event {
    Event::Worker {
        generation,
        report: Report {
            worker,
            state,
            driver: (state == State::Prepared).then_some(Driver::IoUring),
            reason: None,
            cut: 0,
            beat: None,
        },
        snapshot: None,
    }
}

pub(super) fn failed(generation: u64, worker: usize, reason: &str) -> Event {
    let mut e = report(generation, worker, State::Aborted);
    if let Event::Worker { report, .. } = &mut e {
        report.reason = Some(reason.into());
    }
    e
}

pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Machine<Fake> {
    /// The pid of generation `g`'s slot (for reap events).
    pub(super) fn generations_for_test(&self, g: u64, slot: usize) -> u32 {
        self.current
            .iter()
            .chain(&self.next)
            .chain(&self.old)
            .find(|x| x.id == g)
            .and_then(|x| x.slots[slot].member.pid)
            .expect("a process member")
    }
}

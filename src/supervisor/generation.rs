//! A generation: the workers started together from one configuration.
//!
//! Owns: [`Slot`] and its [`SlotState`] (one worker's life as the
//! supervisor sees it), the generation's [`Stage`] (barrier, serving,
//! rolling back, draining), the [`Rules`] it was started with, the barrier's
//! quorum test and the per-slot drain deadlines. Every change of a slot's
//! state or a generation's stage goes through [`Generation::set`] or
//! [`Generation::stage_to`], which record it in the [`Journal`]: the one
//! place transitions are logged. Does not own what a transition means for
//! the server (the machine decides), nor how a worker is started or
//! signalled (the host's [`Worker`]).

use std::time::{Duration, Instant};

use super::beats::Beat;
use super::journal::{Journal, Transition};
use super::types::{Cause, Death, Worker};
use super::Error;
use crate::config::Config;
use crate::control::{Control, Driver};
use crate::telemetry::Snapshot;

/// What the supervisor needs of a generation's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    pub workers: usize,
    pub startup_timeout: Duration,
    pub drain_timeout: Duration,
    pub force_timeout: Duration,
    pub max_restarts: usize,
    pub restart_window: Duration,
    pub beat_interval: Duration,
    pub beat_timeout: Duration,
}

impl Rules {
    pub(crate) fn from_config(c: &Config) -> Rules {
        Rules {
            workers: c.workers.get(),
            startup_timeout: c.startup_timeout,
            drain_timeout: c.conn.drain_timeout,
            force_timeout: c.conn.force_timeout,
            max_restarts: c.max_restarts,
            restart_window: c.restart_window,
            beat_interval: c.beat_interval,
            beat_timeout: c.beat_timeout,
        }
    }
}

/// How far past its drain deadline a stopping worker has been pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Force {
    /// Not yet: it is finishing its connections.
    None,
    /// FORCE (threads) or SIGTERM (processes) sent at the drain deadline.
    Cut,
    /// SIGKILL sent at the force deadline.
    Killed,
}

/// One worker slot's life, as the supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Spawned: pinning, building its runtime and service.
    Starting,
    /// PREPARED: could accept, admits nobody until COMMIT.
    Prepared,
    /// COMMIT sent: waiting for READY.
    Committed,
    /// READY: accepting and serving; beaten every interval.
    Ready { beat: Beat },
    /// Told to DRAIN (or to ABORT before COMMIT): its end is not a crash.
    /// At `deadline` it is cut (FORCE / SIGTERM), at `kill_at` killed.
    Draining {
        deadline: Instant,
        kill_at: Instant,
        forced: Force,
    },
    /// Its end was seen (final report, or reaped).
    Exited { how: Death },
    /// Died unasked while serving (for `cause`); a replacement starts at
    /// `restart_at`.
    Crashed {
        how: Death,
        cause: Cause,
        restart_at: Instant,
    },
}

impl SlotState {
    /// The variant's name, for the journal.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            SlotState::Starting => "Starting",
            SlotState::Prepared => "Prepared",
            SlotState::Committed => "Committed",
            SlotState::Ready { .. } => "Ready",
            SlotState::Draining { .. } => "Draining",
            SlotState::Exited { .. } => "Exited",
            SlotState::Crashed { .. } => "Crashed",
        }
    }

    /// Still running (its end not seen).
    pub(crate) fn live(&self) -> bool {
        !matches!(self, SlotState::Exited { .. } | SlotState::Crashed { .. })
    }
}

/// One worker of a generation.
pub(crate) struct Slot<M> {
    pub member: M,
    pub state: SlotState,
    /// Counters from its last beat reply.
    pub snapshot: Snapshot,
}

/// A generation's stage.
#[derive(Debug)]
pub(crate) enum Stage {
    /// Passing the startup barrier by `deadline`: every slot PREPARED, then
    /// COMMIT (`committed`), then every slot READY. `driver` is the first
    /// one a worker reported.
    Barrier {
        deadline: Instant,
        committed: bool,
        driver: Option<Driver>,
    },
    /// Barrier passed; the current generation.
    Serving,
    /// The barrier failed with `error`: ABORT sent; over once every slot
    /// has ended, or at `give_up`. `reason`: a reaped worker's FAILED report
    /// (with the cause) may still be in flight until then.
    RollingBack {
        error: Error,
        give_up: Instant,
        reason: Option<(usize, Instant)>,
    },
    /// DRAIN sent (replaced by a reload, or shut down).
    Draining { force_at: Instant },
}

impl Stage {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Stage::Barrier { .. } => "Barrier",
            Stage::Serving => "Serving",
            Stage::RollingBack { .. } => "RollingBack",
            Stage::Draining { .. } => "Draining",
        }
    }
}

/// What the barrier says after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Quorum {
    /// Still waiting.
    Waiting,
    /// Every slot PREPARED: COMMIT was just sent.
    Committed,
    /// Every slot READY, on this driver.
    Ready(Driver),
}

/// Workers started together from one plan (configuration, sockets, TLS).
pub(crate) struct Generation<M, P> {
    pub id: u64,
    pub plan: P,
    pub rules: Rules,
    pub slots: Vec<Slot<M>>,
    pub stage: Stage,
    /// Connections cut at the drain deadline (reported at exit).
    pub cut: usize,
}

/// Most time a rollback waits for ABORTed workers before killing them.
const ROLLBACK_KILL_AFTER: Duration = Duration::from_secs(5);
/// After the rollback's kill, how long until its survivors are given up on.
const ROLLBACK_GIVE_UP_AFTER: Duration = Duration::from_secs(2);

impl<M: Worker, P> Generation<M, P> {
    /// A generation about to spawn its workers, its barrier due by
    /// `started + startup_timeout`.
    pub(crate) fn new(
        id: u64,
        plan: P,
        rules: Rules,
        started: Instant,
        journal: &mut Journal,
    ) -> Self {
        journal.record(Transition::Stage {
            generation: id,
            to: "Barrier",
        });
        Generation {
            id,
            plan,
            rules,
            slots: Vec::new(),
            stage: Stage::Barrier {
                deadline: started + rules.startup_timeout,
                committed: false,
                driver: None,
            },
            cut: 0,
        }
    }

    /// Add a spawned worker as the next slot.
    pub(crate) fn push(&mut self, member: M, journal: &mut Journal) {
        journal.record(Transition::Spawned {
            generation: self.id,
            slot: self.slots.len(),
            pid: member.pid(),
        });
        self.slots.push(Slot {
            member,
            state: SlotState::Starting,
            snapshot: Snapshot::default(),
        });
    }

    /// Change slot `i`'s state (logged).
    pub(crate) fn set(&mut self, i: usize, to: SlotState, journal: &mut Journal) {
        let slot = &mut self.slots[i];
        if slot.state.name() != to.name() {
            journal.record(Transition::Slot {
                generation: self.id,
                slot: i,
                from: slot.state.name(),
                to: to.name(),
                pid: slot.member.pid(),
            });
        }
        slot.state = to;
    }

    /// Change the generation's stage (logged).
    pub(crate) fn stage_to(&mut self, to: Stage, journal: &mut Journal) {
        journal.record(Transition::Stage {
            generation: self.id,
            to: to.name(),
        });
        self.stage = to;
    }

    pub(crate) fn gone(&self) -> bool {
        self.slots.iter().all(|s| !s.state.live())
    }

    pub(crate) fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&i| self.slots[i].state.live())
    }

    /// The barrier after an event: COMMIT once every slot is PREPARED,
    /// done once every slot is READY.
    pub(crate) fn quorum(&mut self, journal: &mut Journal) -> Quorum {
        let Stage::Barrier {
            committed, driver, ..
        } = &mut self.stage
        else {
            return Quorum::Waiting;
        };
        let full = self.slots.len() == self.rules.workers;
        if !*committed {
            if !full || !self.slots.iter().all(|s| s.state == SlotState::Prepared) {
                return Quorum::Waiting;
            }
            *committed = true;
            for i in 0..self.slots.len() {
                self.slots[i].member.send(Control::Commit);
                self.set(i, SlotState::Committed, journal);
            }
            return Quorum::Committed;
        }
        if full
            && self
                .slots
                .iter()
                .all(|s| matches!(s.state, SlotState::Ready { .. }))
        {
            return Quorum::Ready(driver.unwrap_or(Driver::Epoll));
        }
        Quorum::Waiting
    }

    /// The slots the barrier still waits for, and for what.
    pub(crate) fn laggards(&self) -> (Vec<usize>, &'static str) {
        let committed = matches!(
            self.stage,
            Stage::Barrier {
                committed: true,
                ..
            }
        );
        let behind = |s: &SlotState| {
            if committed {
                !matches!(s, SlotState::Ready { .. })
            } else {
                *s != SlotState::Prepared
            }
        };
        let workers = (0..self.slots.len())
            .filter(|&i| behind(&self.slots[i].state))
            .collect();
        (workers, if committed { "ready" } else { "prepared" })
    }

    /// The barrier failed: ABORT every live worker, kill what is left after
    /// a grace, give up two seconds later.
    pub(crate) fn roll_back(&mut self, error: Error, now: Instant, journal: &mut Journal) {
        let kill_at = now + self.rules.drain_timeout.min(ROLLBACK_KILL_AFTER);
        self.stop_all(Control::Abort, kill_at, kill_at, journal);
        self.stage_to(
            Stage::RollingBack {
                error,
                give_up: kill_at + ROLLBACK_GIVE_UP_AFTER,
                reason: None,
            },
            journal,
        );
    }

    /// DRAIN every live worker with the generation's deadlines; a pending
    /// replacement is cancelled.
    pub(crate) fn drain(&mut self, now: Instant, journal: &mut Journal) {
        let deadline = now + self.rules.drain_timeout;
        let force_at = now + self.rules.force_timeout;
        for i in 0..self.slots.len() {
            if let SlotState::Crashed { how, .. } = self.slots[i].state {
                self.set(i, SlotState::Exited { how }, journal);
            }
        }
        self.stop_all(Control::Drain, deadline, force_at, journal);
        self.stage_to(Stage::Draining { force_at }, journal);
    }

    fn stop_all(&mut self, c: Control, deadline: Instant, kill_at: Instant, journal: &mut Journal) {
        for i in self.live().collect::<Vec<_>>() {
            self.slots[i].member.send(c);
            let to = SlotState::Draining {
                deadline,
                kill_at,
                forced: Force::None,
            };
            self.set(i, to, journal);
        }
    }

    /// Past a slot's drain deadline: FORCE or SIGTERM it; past its kill
    /// deadline: SIGKILL.
    pub(crate) fn enforce_deadlines(&mut self, now: Instant) {
        let mut warned = false;
        for slot in &mut self.slots {
            let SlotState::Draining {
                deadline,
                kill_at,
                forced,
            } = &mut slot.state
            else {
                continue;
            };
            if *forced == Force::None && now >= *deadline {
                if !warned && matches!(self.stage, Stage::Draining { .. }) {
                    tracing::warn!(generation = self.id, "drain timeout: cutting what is left");
                    warned = true;
                }
                slot.member.terminate();
                *forced = Force::Cut;
            }
            if *forced == Force::Cut && now >= *kill_at {
                tracing::error!(generation = self.id, pid = ?slot.member.pid(), "force timeout: killing");
                slot.member.kill();
                *forced = Force::Killed;
            }
        }
    }

    /// The next instant a deadline of this generation falls due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let slots = self.slots.iter().filter_map(|s| match s.state {
            SlotState::Draining {
                deadline,
                forced: Force::None,
                ..
            } => Some(deadline),
            SlotState::Draining {
                kill_at,
                forced: Force::Cut,
                ..
            } => Some(kill_at),
            SlotState::Crashed { restart_at, .. } => Some(restart_at),
            _ => None,
        });
        let stage = match &self.stage {
            Stage::Barrier { deadline, .. } => Some(*deadline),
            Stage::RollingBack {
                give_up, reason, ..
            } => Some(reason.map_or(*give_up, |(_, until)| until.min(*give_up))),
            _ => None,
        };
        slots.chain(stage).min()
    }

    /// Workers still running, for the give-up report.
    pub(crate) fn survivors(&self) -> Vec<String> {
        self.live()
            .map(|i| match self.slots[i].member.pid() {
                Some(pid) => format!("worker {i} (generation {}, pid {pid})", self.id),
                None => format!("worker {i} (generation {}, thread)", self.id),
            })
            .collect()
    }

    /// Join finished threads (processes were reaped by the child watch).
    pub(crate) fn finish(&mut self) {
        for s in &mut self.slots {
            s.member.finish();
        }
    }
}

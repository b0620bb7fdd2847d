//! Shutdown: drain every generation within the deadlines, then report.
//!
//! Owns: what SIGTERM/SIGINT (or a crash loop) does once serving: the
//! current generation is told to DRAIN and joins the draining ones, a
//! generation behind its barrier is rolled back, the supervisor's copies of
//! the listening sockets close (new connections are refused once the
//! workers close theirs), and the outcome once every worker has ended: a
//! clean drain, connections cut at the drain deadline, the crash loop that
//! caused it, or, a second after the last force deadline, the survivors.
//! Draining generations left by reloads are reaped here too. The per-slot
//! deadlines themselves (FORCE/SIGTERM, then SIGKILL) are the generation's.

use std::time::{Duration, Instant};

use super::generation::Stage;
use super::machine::{Host, Machine, Notice, Plan};
use super::{Error, Phase};

/// After the last force deadline, how long SIGKILLed workers get to be
/// reaped before they are reported as survivors.
const REAP_GRACE: Duration = Duration::from_secs(1);

impl<H: Host> Machine<H> {
    pub(super) fn begin_shutdown(&mut self, now: Instant) {
        self.enter(Phase::Draining);
        self.host.notify(Notice::Stopping);
        if let Some(mut g) = self.current.take() {
            g.drain(now, &mut self.journal);
            self.old.push(g);
        }
        if let Some(g) = self.next.as_mut() {
            if matches!(g.stage, Stage::Barrier { .. }) {
                g.roll_back(
                    Error::Interrupted {
                        signal: super::Signal::Terminate,
                    },
                    now,
                    &mut self.journal,
                );
            }
            g.plan.close_listeners();
        }
        for g in self.old.iter_mut() {
            g.plan.close_listeners();
        }
        let force = self.old.iter().filter_map(|g| match g.stage {
            Stage::Draining { force_at } => Some(force_at + REAP_GRACE),
            _ => None,
        });
        let rollback = self.next.iter().filter_map(|g| match g.stage {
            Stage::RollingBack { give_up, .. } => Some(give_up),
            _ => None,
        });
        self.give_up = Some(force.chain(rollback).max().unwrap_or(now));
    }

    /// Reap drained generations; during shutdown, finish once all are gone.
    pub(super) fn progress_drains(&mut self, now: Instant) {
        if self.phase != Phase::Draining {
            let before = self.old.len();
            self.old.retain_mut(|g| {
                if !g.gone() {
                    return true;
                }
                g.finish();
                tracing::info!(generation = g.id, "old generation drained and reaped");
                false
            });
            if self.old.len() != before {
                tracing::debug!(draining = self.old.len(), "generations still draining");
            }
            return;
        }
        let all_gone = self.next.is_none() && self.old.iter().all(|g| g.gone());
        if !all_gone {
            if self.give_up.is_some_and(|t| now >= t) {
                let survivors: Vec<String> = self
                    .next
                    .iter()
                    .chain(&self.old)
                    .flat_map(|g| g.survivors())
                    .collect();
                tracing::error!(?survivors, "still running at the force timeout");
                self.outcome = Some(Err(Error::Survivors {
                    survivors: survivors.join(", "),
                }));
            }
            return;
        }
        let cut: usize = self.old.iter().map(|g| g.cut).sum();
        for g in self.old.iter_mut() {
            g.finish();
        }
        self.old.clear();
        self.enter(Phase::Stopped);
        tracing::info!(cut, "all workers stopped");
        self.outcome = Some(match self.fatal.take() {
            Some(e) => Err(e),
            None if cut > 0 => Err(Error::ConnectionsCut { connections: cut }),
            None => Ok(()),
        });
    }
}

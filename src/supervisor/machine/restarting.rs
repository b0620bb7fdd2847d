//! `Machine::crashed` and `Machine::replace_crashed`: the restart budget
//! (`supervisor::restart`) applied to the current generation's slots.

use std::time::Instant;

use super::{Host, Machine};
use crate::supervisor::generation::SlotState;
use crate::supervisor::journal::Transition;
use crate::supervisor::types::{Cause, Death, Worker};

impl<H: Host> Machine<H> {
    /// Count a crash (of `cause`) of the current generation's slot `i`.
    pub(in crate::supervisor) fn crashed(
        &mut self,
        i: usize,
        how: Death,
        cause: Cause,
        now: Instant,
    ) {
        let Some(g) = self.current.as_mut() else {
            return;
        };
        let pid = g.slots[i].member.pid();
        match cause {
            Cause::Crash => {
                tracing::error!(worker = i, generation = g.id, ?pid, %how, "worker died unexpectedly");
            }
            Cause::BeatTimeout => {
                tracing::error!(worker = i, generation = g.id, ?pid, %how, "worker killed for missed beats is gone");
            }
        }
        match self.restarts.crashed(i, how, now, &g.rules) {
            Ok(delay) => {
                let restart_at = now + delay;
                let state = SlotState::Crashed {
                    how,
                    cause,
                    restart_at,
                };
                g.set(i, state, &mut self.journal);
            }
            Err(e) => {
                tracing::error!(error = %e, "crash loop: stopping");
                self.fatal = Some(e);
                self.begin_shutdown(now);
            }
        }
    }

    /// Replacements due: spawn each on its slot (same sockets).
    pub(in crate::supervisor) fn replace_crashed(&mut self, now: Instant) {
        let Some(g) = self.current.as_ref() else {
            return;
        };
        let due: Vec<(usize, Death, Cause)> = (0..g.slots.len())
            .filter_map(|i| match g.slots[i].state {
                SlotState::Crashed {
                    how,
                    cause,
                    restart_at,
                } if restart_at <= now => Some((i, how, cause)),
                _ => None,
            })
            .collect();
        for (i, how, cause) in due {
            let Some(g) = self.current.as_mut() else {
                return;
            };
            match self.host.spawn(g.id, &g.plan, i) {
                Ok(member) => {
                    tracing::info!(worker = i, generation = g.id, pid = ?member.pid(), reason = cause.label(), "replacing crashed worker");
                    self.journal.record(Transition::Spawned {
                        generation: g.id,
                        slot: i,
                        pid: member.pid(),
                    });
                    g.slots[i].member = member;
                    g.set(i, SlotState::Starting, &mut self.journal);
                    self.host.restarted(i, cause);
                }
                Err(e) => {
                    // Still the same death's replacement: same cause.
                    tracing::error!(error = %e, worker = i, "cannot replace worker");
                    g.set(i, SlotState::Exited { how }, &mut self.journal);
                    self.crashed(i, Death::Code(-1), cause, now);
                }
            }
        }
    }
}

//! `Machine::beat`: the beat rule (`supervisor::beats`) applied to the
//! current generation's ready slots, once per beat interval.

use std::time::Instant;

use super::{Host, Machine};
use crate::control::Control;
use crate::supervisor::beats::Verdict;
use crate::supervisor::generation::SlotState;
use crate::supervisor::types::Worker;

impl<H: Host> Machine<H> {
    /// Beat every serving worker of the current generation.
    pub(in crate::supervisor) fn beat(&mut self, now: Instant) {
        if !self.beating() {
            return;
        }
        let Some(g) = self.current.as_mut() else {
            return;
        };
        let Some(seq) = self.beats.due(now, g.rules.beat_interval) else {
            return;
        };
        let timeout = g.rules.beat_timeout;
        for (i, slot) in g.slots.iter_mut().enumerate() {
            let SlotState::Ready { beat } = &mut slot.state else {
                continue;
            };
            match beat.tick(seq, now, timeout) {
                Verdict::Send(n) => slot.member.send(Control::Beat(n)),
                Verdict::Wait => {}
                Verdict::Wedged { .. } if !slot.member.ends_by_report() => {
                    tracing::error!(worker = i, pid = ?slot.member.pid(), "missed two beats: killing");
                    slot.member.kill();
                    beat.killed();
                }
                Verdict::Wedged { first: true } => {
                    tracing::error!(worker = i, "worker thread missed two beats; threads cannot be killed (use --isolation process)");
                }
                Verdict::Wedged { first: false } => {}
            }
        }
    }
}

//! The supervisor's transitions, logged from one place.
//!
//! Owns: [`Transition`] (a phase change, a generation's stage, a slot's
//! state, a spawn) and the [`Journal`] every change goes through: each is
//! logged at debug level (info for the ones an operator follows) and, when
//! the journal keeps them (the state machine's unit tests), appended to a
//! list that tests assert on as a sequence rather than with sleeps
//! (pingora's `ExecutionPhase` logging is the model).

use super::Phase;

/// One change of the supervisor's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transition {
    Phase {
        from: Phase,
        to: Phase,
    },
    Stage {
        generation: u64,
        to: &'static str,
    },
    Spawned {
        generation: u64,
        slot: usize,
        pid: Option<u32>,
    },
    Slot {
        generation: u64,
        slot: usize,
        from: &'static str,
        to: &'static str,
        pid: Option<u32>,
    },
}

impl std::fmt::Display for Transition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transition::Phase { from, to } => write!(f, "phase {from:?} -> {to:?}"),
            Transition::Stage { generation, to } => write!(f, "g{generation} {to}"),
            Transition::Spawned {
                generation, slot, ..
            } => write!(f, "g{generation}/w{slot} spawned"),
            Transition::Slot {
                generation,
                slot,
                from,
                to,
                ..
            } => write!(f, "g{generation}/w{slot} {from} -> {to}"),
        }
    }
}

/// Where transitions go.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    kept: Option<Vec<Transition>>,
}

impl Journal {
    /// A journal that also keeps every transition (for tests).
    #[cfg(test)]
    pub(crate) fn keeping() -> Journal {
        Journal {
            kept: Some(Vec::new()),
        }
    }

    /// The transitions kept so far, as text, emptying the list.
    #[cfg(test)]
    pub(crate) fn take(&mut self) -> Vec<String> {
        self.kept
            .as_mut()
            .map(|k| k.drain(..).map(|t| t.to_string()).collect())
            .unwrap_or_default()
    }

    pub(crate) fn record(&mut self, t: Transition) {
        match &t {
            Transition::Phase { from, to } => {
                tracing::debug!(from = ?from, to = ?to, "supervisor transition");
            }
            Transition::Stage { generation, to } => {
                tracing::debug!(generation, stage = to, "generation transition");
            }
            Transition::Spawned {
                generation,
                slot,
                pid,
            } => tracing::debug!(generation, worker = slot, ?pid, "worker spawned"),
            Transition::Slot {
                generation,
                slot,
                from,
                to,
                pid,
            } => {
                if *to == "Ready" {
                    // A worker thread has no pid of its own: no `pid=None`.
                    match pid {
                        Some(pid) => {
                            tracing::info!(worker = slot, generation, pid, "worker ready")
                        }
                        None => tracing::info!(worker = slot, generation, "worker ready"),
                    }
                }
                tracing::debug!(
                    generation,
                    worker = slot,
                    ?pid,
                    from,
                    to,
                    "worker transition"
                );
            }
        }
        if let Some(k) = &mut self.kept {
            k.push(t);
        }
    }
}

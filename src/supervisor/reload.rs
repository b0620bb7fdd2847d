//! Rolling reload (SIGHUP): a new generation behind the barrier, then the
//! old one drains.
//!
//! Owns: when a reload may start (serving, not already reloading), the
//! swap once the new generation reaches its READY quorum, and the host's
//! side of planning it ([`listeners_for`]): which changes a reload refuses
//! (isolation), which it ignores (addresses under socket activation), and
//! when the listening sockets are kept (same addresses and worker count:
//! the very sockets, so no queued connection is lost), re-planned per
//! worker, or bound anew. A generation that fails its barrier is rolled
//! back by the machine and the old one keeps serving.

use std::sync::Arc;
use std::time::Instant;

use super::generation::Stage;
use super::machine::{Gen, Host, Machine, Notice, Plan as _};
use super::types::Worker as _;
use super::Phase;
use crate::config::Config;
use crate::control::Driver;
use crate::net::{ListenerPlan, Source};

impl<H: Host> Machine<H> {
    /// SIGHUP while serving.
    pub(super) fn reload(&mut self, now: Instant) {
        let Some(current) = self.current.as_ref() else {
            return;
        };
        let Some(plan) = self.host.reload(&current.plan) else {
            return;
        };
        self.enter(Phase::Reloading);
        self.launch(plan, now, now);
    }

    /// `g` reached its READY quorum: it serves; the one it replaces drains.
    pub(super) fn passed(&mut self, mut g: Gen<H>, driver: Driver, now: Instant) {
        tracing::info!(
            generation = g.id,
            workers = g.slots.len(),
            "generation ready"
        );
        g.stage_to(Stage::Serving, &mut self.journal);
        let id = g.id;
        let g_reads_udp = g.plan.reads_udp();
        match self.current.replace(g) {
            None => self.started = Some(driver),
            Some(mut old) => {
                // The new generation reads the shared UDP sockets from now
                // on (all of them: a slot a reload removed has its socket
                // read by another, `ListenerPlan::udp_of_slot`) and hands
                // the old one its connections' datagrams.
                if g_reads_udp {
                    for i in old.live() {
                        old.slots[i].member.send(crate::control::Control::Handover);
                    }
                }
                old.drain(now, &mut self.journal);
                self.old.push(old);
                tracing::info!(
                    generation = id,
                    "reload complete; previous generation draining"
                );
            }
        }
        self.enter(Phase::Running);
        self.host.notify(Notice::Ready);
    }
}

/// Why a reload is refused before anything starts.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `--isolation` differs: threads and processes cannot be swapped live.
    Isolation,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Isolation => {
                write!(f, "--isolation cannot change on reload; restart instead")
            }
        }
    }
}

/// The listening sockets of the generation `next` replaces one started
/// from `prev` with `old` sockets.
pub(crate) fn listeners_for(
    prev: &Config,
    next: &Config,
    old: &Arc<ListenerPlan>,
) -> Result<Result<Arc<ListenerPlan>, crate::net::Error>, Refusal> {
    if next.isolation != prev.isolation {
        return Err(Refusal::Isolation);
    }
    let tls_binds = |c: &Config| c.tls.as_ref().map(|t| t.binds.clone()).unwrap_or_default();
    let inherited = old.source == Source::Systemd;
    let moved = next.binds != prev.binds || tls_binds(next) != tls_binds(prev);
    if inherited && moved {
        tracing::warn!("reload: --bind changes are ignored under socket activation (the sockets come from systemd)");
    }
    let same_addresses = inherited || (!moved && next.listener == prev.listener);
    let same_h3 = next.conn.http3.on() == prev.conn.http3.on();
    if same_addresses && next.workers == prev.workers && same_h3 {
        return Ok(Ok(old.clone()));
    }
    let plan = if same_addresses {
        old.with_workers(next.workers.get())
            .and_then(|p| p.with_h3(next))
    } else if tls_binds(next) == tls_binds(prev) && next.conn.http3.on() {
        // The plain listeners moved, the TLS ones did not: HTTP/3 keeps its
        // very sockets (new ones would join the same groups behind them,
        // where the steering program's index names the old ones).
        ListenerPlan::bind_without_udp(next).and_then(|p| p.with_udp_of(old, next))
    } else {
        ListenerPlan::bind(next)
    };
    Ok(plan.map(Arc::new))
}

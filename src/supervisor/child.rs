//! Watching worker processes end: pidfds, or SIGCHLD with a waitpid sweep.
//!
//! With pidfds each child gets a small thread that polls its pidfd, reaps it
//! with waitid(P_PIDFD) and posts `Event::Exited`. Without them (kernel <
//! 5.3, or `--child-watch sigchld`) one thread takes SIGCHLD and, because
//! signals coalesce, re-checks every known child with waitpid(WNOHANG).
//! The choice is probed once and logged.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::types::Death;
use super::Event;
use crate::config::ChildWatchChoice;
use crate::sys::pidfd::{self, ChildWatch};

struct Watched {
    generation: u64,
    slot: usize,
    pid: u32,
    reaped: Arc<AtomicBool>,
}

/// The child watch of one supervisor.
pub(crate) struct ChildWatcher {
    kind: ChildWatch,
    events: Sender<Event>,
    children: Arc<Mutex<Vec<Watched>>>,
}

fn death(status: WaitStatus) -> Option<Death> {
    match status {
        WaitStatus::Exited(_, code) => Some(Death::Code(code)),
        WaitStatus::Signaled(_, sig, _) => Some(Death::Signal(sig as i32)),
        _ => None,
    }
}

impl ChildWatcher {
    /// Choose (probe once) and start the watch.
    pub(crate) fn start(
        choice: ChildWatchChoice,
        events: Sender<Event>,
    ) -> io::Result<ChildWatcher> {
        let kind = match choice {
            ChildWatchChoice::Auto => pidfd::probe(),
            ChildWatchChoice::Pidfd => {
                if pidfd::probe() != ChildWatch::Pidfd {
                    return Err(io::Error::other("pidfds are not available on this kernel; use --child-watch sigchld or auto"));
                }
                ChildWatch::Pidfd
            }
            ChildWatchChoice::Sigchld => ChildWatch::Sigchld,
        };
        tracing::info!(child_watch = kind.name(), "watching worker processes");
        let w = ChildWatcher {
            kind,
            events,
            children: Arc::new(Mutex::new(Vec::new())),
        };
        if kind == ChildWatch::Sigchld {
            let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGCHLD])?;
            let children = w.children.clone();
            let events = w.events.clone();
            std::thread::Builder::new()
                .name("servery-sigchld".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        sweep(&children, &events);
                    }
                })?;
        }
        Ok(w)
    }

    pub(crate) fn kind(&self) -> ChildWatch {
        self.kind
    }

    /// Watch a freshly spawned child until it is reaped.
    pub(crate) fn watch(
        &self,
        generation: u64,
        slot: usize,
        pid: u32,
        pidfd: Option<Arc<OwnedFd>>,
        reaped: Arc<AtomicBool>,
    ) {
        match pidfd {
            Some(fd) => {
                let events = self.events.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("servery-pidfd{slot}"))
                    .spawn(move || {
                        let status = pidfd::wait_readable(fd.as_fd())
                            .ok()
                            .and_then(|()| waitid(Id::PIDFd(fd.as_fd()), WaitPidFlag::WEXITED).ok())
                            .and_then(death);
                        reaped.store(true, Ordering::Release);
                        let _ = events.send(Event::Exited {
                            generation,
                            slot,
                            pid,
                            death: status.unwrap_or(Death::Code(-1)),
                        });
                    });
                if let Err(e) = spawned {
                    tracing::error!(error = %e, pid, "cannot start a pidfd watch thread");
                }
            }
            None => {
                if let Ok(mut c) = self.children.lock() {
                    c.push(Watched {
                        generation,
                        slot,
                        pid,
                        reaped,
                    });
                }
                // It may have died before it was in the list.
                sweep(&self.children, &self.events);
            }
        }
    }
}

/// Reap every child that has exited (SIGCHLDs coalesce: check them all).
fn sweep(children: &Mutex<Vec<Watched>>, events: &Sender<Event>) {
    let Ok(mut list) = children.lock() else {
        return;
    };
    list.retain(|w| {
        match waitpid(Pid::from_raw(w.pid as i32), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => true,
            Ok(status) => match death(status) {
                Some(d) => {
                    w.reaped.store(true, Ordering::Release);
                    let _ = events.send(Event::Exited {
                        generation: w.generation,
                        slot: w.slot,
                        pid: w.pid,
                        death: d,
                    });
                    false
                }
                None => true,
            },
            // ECHILD: already reaped elsewhere; stop watching.
            Err(_) => {
                w.reaped.store(true, Ordering::Release);
                let _ = events.send(Event::Exited {
                    generation: w.generation,
                    slot: w.slot,
                    pid: w.pid,
                    death: Death::Code(-1),
                });
                false
            }
        }
    });
}

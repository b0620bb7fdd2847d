//! One worker of a generation: a thread of this process or a child process.
//!
//! Both kinds take the same [`Control`] messages and report the same
//! [`Report`]s into the supervisor's event channel; they differ in how they
//! start, how they are stopped by force and how their end is seen:
//! - a thread's end is its final report (Exited or Aborted), then a join;
//! - a process's end is seen by the child watch (pidfd or SIGCHLD) and
//!   reaped there; it is signalled through its pidfd, and killed by process
//!   group (it leads its own; see `sys::spawn`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use socket2::Socket;

use super::child::ChildWatcher;
use super::protocol::{self, FromWorker, ToWorker, MAX_MESSAGE};
use super::Event;
use crate::app::ServiceFactory;
use crate::config::Config;
use crate::sys::pidfd;
use crate::sys::shm::SharedCounter;
use crate::telemetry::{Snapshot, WorkerStats};
use crate::tls::identity::GenerationTls;
use crate::worker::{self, Control, Report, State};

/// What a new worker needs, whatever its kind.
pub(crate) struct Spawn<'a, F> {
    pub generation: u64,
    pub slot: usize,
    pub config: &'a Arc<Config>,
    pub sockets: &'a [Socket],
    /// The worker's UDP sockets for HTTP/3 (none when it is off).
    pub udp: Vec<&'a Socket>,
    /// Its inbox for QUIC datagrams and those it may send to.
    pub delivery: Option<super::mail::Delivery>,
    pub factory: &'a Arc<F>,
    pub stats: &'a Arc<WorkerStats>,
    pub budget: Option<&'a Arc<SharedCounter>>,
    pub events: &'a Sender<Event>,
    /// Which sockets are TLS listeners, and the generation's TLS identity.
    pub tls_flags: &'a [bool],
    pub tls: Option<&'a GenerationTls>,
    /// The access log worker threads share.
    pub access_log: Option<&'a crate::access_log::Setup>,
}

/// A running (or finished, not yet dropped) worker.
pub(crate) enum Member {
    Thread {
        control: flume::Sender<Control>,
        thread: Option<JoinHandle<()>>,
    },
    Process {
        pid: u32,
        pidfd: Option<Arc<OwnedFd>>,
        control: OwnedFd,
        /// Set by the child watch once reaped: the pid is no longer ours.
        reaped: Arc<AtomicBool>,
    },
}

impl Member {
    /// Start worker `slot` as a thread of this process.
    pub(crate) fn thread<F: ServiceFactory>(s: Spawn<'_, F>) -> io::Result<Member> {
        let (control, control_rx) = flume::unbounded();
        let sockets = s
            .sockets
            .iter()
            .map(Socket::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        let events = s.events.clone();
        let generation = s.generation;
        let stats = s.stats.clone();
        let udp = s
            .udp
            .iter()
            .map(|u| u.try_clone())
            .collect::<io::Result<Vec<_>>>()?;
        let (inbox, post) = match s.delivery {
            Some(d) => (Some(d.inbox), d.post),
            None => (None, Vec::new()),
        };
        let init = worker::Init {
            index: s.slot,
            generation: s.generation,
            udp,
            inbox,
            post,
            cpu: s.config.cpus.as_ref().map(|c| c[s.slot]),
            sockets,
            driver: s.config.driver,
            settings: s.config.conn,
            factory: s.factory.clone(),
            stats: s.stats.clone(),
            control: control_rx,
            report: Arc::new(move |report: Report| {
                let snapshot = report.beat.map(|_| Box::new(Snapshot::take(&stats)));
                let _ = events.send(Event::Worker {
                    generation,
                    report,
                    snapshot,
                });
            }),
            budget: s.budget.cloned(),
            tls_flags: s.tls_flags.to_vec(),
            tls: s.tls.map(|t| t.config.clone()),
            sites: s.config.sites.router.clone(),
            header_rules: s.config.files.rules.clone().into(),
            access_log: s.access_log.cloned(),
        };
        let slot = s.slot;
        let events = s.events.clone();
        let thread = std::thread::Builder::new()
            .name(format!("servery-w{slot}"))
            .spawn(move || {
                // A panic must still be reported, or the supervisor would wait
                // for this worker forever (release builds abort instead).
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker::run(init)));
                if result.is_err() {
                    let _ = events.send(Event::Worker {
                        generation,
                        report: Report {
                            worker: slot,
                            state: State::Aborted,
                            driver: None,
                            reason: Some("worker thread panicked".into()),
                            cut: 0,
                            beat: None,
                        },
                        snapshot: None,
                    });
                }
            })?;
        Ok(Member::Thread {
            control,
            thread: Some(thread),
        })
    }

    /// Start worker `slot` as a process: re-execute `exe worker` as the
    /// leader of a new process group, send it `Init` with its sockets, watch it.
    pub(crate) fn process<F>(
        s: Spawn<'_, F>,
        exe: &Path,
        watch: &ChildWatcher,
    ) -> io::Result<Member> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut cmd = Command::new(exe);
        cmd.arg("worker").stdin(Stdio::null());
        crate::sys::spawn::prepare(&mut cmd, theirs.as_fd());
        let child = cmd.spawn()?;
        let pid = child.id();
        drop(theirs);
        // The child is unreaped, so `pid` cannot have been reused yet.
        let pidfd = match watch.kind() {
            pidfd::ChildWatch::Pidfd => Some(Arc::new(pidfd::open(pid)?)),
            pidfd::ChildWatch::Sigchld => None,
        };
        let reaped = Arc::new(AtomicBool::new(false));
        watch.watch(s.generation, s.slot, pid, pidfd.clone(), reaped.clone());

        let init = protocol::Init {
            slot: s.slot,
            generation: s.generation,
            cpu: s.config.cpus.as_ref().map(|c| c[s.slot]),
            config: s.config.raw.clone(),
            listeners: s.sockets.len(),
            udp: s.udp.len(),
            inbox: s.delivery.is_some(),
            post: s
                .delivery
                .iter()
                .flat_map(|d| d.post.iter().map(|(o, _)| (o.slot, o.generation)))
                .collect(),
            budget: s.budget.is_some(),
            tls_flags: s.tls_flags.to_vec(),
            tls: s.tls.map(|t| (t.identities.clone(), t.secret.clone())),
            acme: crate::sites::published::global().updates(),
        };
        let mail = s.delivery.iter().flat_map(|d| {
            std::iter::once(d.inbox.as_fd()).chain(d.post.iter().map(|(_, p)| p.as_fd()))
        });
        let mut fds: Vec<std::os::fd::BorrowedFd<'_>> = s
            .sockets
            .iter()
            .chain(s.udp.iter().copied())
            .map(AsFd::as_fd)
            .chain(mail)
            .collect();
        if let Some(b) = s.budget {
            fds.push(b.fd());
        }
        let member = Member::Process {
            pid,
            pidfd,
            control: ours,
            reaped,
        };
        let Member::Process { control, .. } = &member else {
            unreachable!("just built a process member")
        };
        if let Err(e) = protocol::send(control.as_fd(), &ToWorker::Init(Box::new(init)), &fds) {
            member.kill();
            return Err(e);
        }
        let reader = control.try_clone()?;
        let events = s.events.clone();
        let generation = s.generation;
        let slot = s.slot;
        std::thread::Builder::new()
            .name(format!("servery-ctl{slot}"))
            .spawn(move || {
                let mut buf = vec![0u8; MAX_MESSAGE];
                while let Ok(Some((message, _))) =
                    protocol::recv::<FromWorker>(reader.as_fd(), &mut buf)
                {
                    let event = match message {
                        FromWorker::Report { report, snapshot } => Event::Worker {
                            generation,
                            report,
                            snapshot,
                        },
                        FromWorker::Applied(seq) => Event::Applied {
                            generation,
                            slot,
                            seq,
                        },
                    };
                    let _ = events.send(event);
                }
            })?;
        Ok(member)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Member::Thread { .. } => None,
            Member::Process { pid, .. } => Some(*pid),
        }
    }

    /// Whether this worker's end is its final report (threads) rather than
    /// a reaped exit (processes).
    pub(crate) fn ends_by_report(&self) -> bool {
        matches!(self, Member::Thread { .. })
    }

    /// Hand a worker process ACME update `seq`; true if it was sent, so
    /// an acknowledgement will follow (threads share the supervisor's
    /// table, already updated).
    pub(crate) fn publish(&self, seq: u64, update: &crate::sites::published::Update) -> bool {
        let Member::Process { control, .. } = self else {
            return false;
        };
        let message = ToWorker::Acme {
            seq,
            update: update.clone(),
        };
        protocol::send(control.as_fd(), &message, &[]).is_ok()
    }

    pub(crate) fn send(&self, c: Control) {
        match self {
            Member::Thread { control, .. } => {
                let _ = control.send(c);
            }
            Member::Process { control, .. } => {
                let _ = protocol::send(control.as_fd(), &ToWorker::Control(c), &[]);
            }
        }
    }

    /// Past the drain deadline: threads cut their connections (FORCE),
    /// processes get SIGTERM.
    pub(crate) fn terminate(&self) {
        match self {
            Member::Thread { .. } => self.send(Control::Force),
            Member::Process { .. } => self.signal(libc::SIGTERM),
        }
    }

    /// Past the force deadline (or a missed beat): SIGKILL the process group.
    /// Threads cannot be killed; they are reported instead.
    pub(crate) fn kill(&self) {
        if let Member::Process { pid, reaped, .. } = self {
            if !reaped.load(Ordering::Acquire) {
                let _ = pidfd::kill_group(*pid, libc::SIGKILL);
            }
            self.signal(libc::SIGKILL);
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if let Member::Process {
            pid, pidfd, reaped, ..
        } = self
        {
            match pidfd {
                Some(fd) => {
                    let _ = pidfd::send_signal(fd.as_fd(), sig);
                }
                None if !reaped.load(Ordering::Acquire) => {
                    let _ = pidfd::kill(*pid, sig);
                }
                None => {}
            }
        }
    }

    /// After the end was seen: join the thread. (A process was reaped by the
    /// child watch; its fds close when the member drops.)
    pub(crate) fn finish(&mut self) {
        if let Member::Thread { thread, .. } = self {
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

//! A worker as its own process: the `servery worker` entry point, the
//! other end of `member`'s process spawn. It lives with the supervisor
//! because it does what the supervisor does for a worker thread (validate
//! the config, build the worker's `Init`), in the child; the worker itself
//! (`worker::run`) knows nothing of the config.
//!
//! The supervisor re-executes its binary with the hidden `worker` subcommand
//! as the leader of a new process group, with the control socket at fd 3.
//! Here we:
//! 1. adopt fd 3 (validated as SOCK_SEQPACKET) and read `Init`, whose
//!    listening sockets (and budget memfd) arrive as SCM_RIGHTS;
//! 2. validate the sent config into the same `Config` the supervisor holds
//!    and make the handler;
//! 3. forward control messages from a reader thread into the worker's
//!    channel; EOF (the supervisor died) disconnects it, which the worker
//!    treats as "exit before COMMIT, drain after READY";
//! 4. run the worker on this thread (pinned) and exit 0 when it Exited,
//!    1 when it Aborted.

use std::os::fd::AsFd;
use std::sync::Arc;

use super::protocol::{self, FromWorker, ToWorker, MAX_MESSAGE};
use crate::app::ServiceFactory;
use crate::config::Config;
use crate::telemetry::{Snapshot, WorkerStats};
use crate::worker::{self, Init as WorkerInit, Report, State};

/// Run this process as one worker. `make` builds the handler factory from
/// the config, exactly as the supervisor's binary does.
pub fn main<F, M>(make: M) -> Result<State, String>
where
    F: ServiceFactory,
    M: FnOnce(&Config) -> F,
{
    let control = Arc::new(crate::sys::spawn::take_control_fd().map_err(|e| e.to_string())?);
    let mut buf = vec![0u8; MAX_MESSAGE];
    let (first, mut fds) = protocol::recv::<ToWorker>(control.as_fd(), &mut buf)
        .map_err(|e| format!("control channel: {e}"))?
        .ok_or("supervisor closed the control channel before sending Init")?;
    let ToWorker::Init(init) = first else {
        return Err("first control message was not Init".into());
    };
    let expected = init.listeners
        + init.udp
        + usize::from(init.inbox)
        + init.post.len()
        + usize::from(init.budget);
    if fds.len() != expected {
        return Err(format!(
            "Init carried {} fds, expected {expected}",
            fds.len()
        ));
    }
    let budget = if init.budget {
        let fd = fds.pop().ok_or("missing budget fd")?;
        Some(Arc::new(
            crate::sys::shm::SharedCounter::map(fd).map_err(|e| format!("budget: {e}"))?,
        ))
    } else {
        None
    };
    let mut rest = fds.split_off(init.listeners);
    let mut mail = rest.split_off(init.udp);
    let sockets: Vec<socket2::Socket> = fds.into_iter().map(socket2::Socket::from).collect();
    let udp: Vec<socket2::Socket> = rest.into_iter().map(socket2::Socket::from).collect();
    let post_fds = mail.split_off(usize::from(init.inbox));
    let inbox = mail.pop().map(std::os::unix::net::UnixDatagram::from);
    let post = init
        .post
        .iter()
        .zip(post_fds)
        .map(|(&(slot, generation), fd)| {
            (
                crate::quic::cid::Owner { slot, generation },
                std::os::unix::net::UnixDatagram::from(fd),
            )
        })
        .collect();
    let config = init
        .config
        .clone()
        .validate()
        .map_err(|e| format!("config sent by the supervisor is invalid here: {e}"))?;
    if let Some(worker::fault::Fault::IgnoreDrain) = worker::fault::for_worker(init.slot) {
        crate::sys::spawn::ignore_sigterm();
    }
    let factory = make(&config);
    // This process's own writer on the log's path (appends of whole
    // buffers, beside its sibling processes').
    let access_log = crate::access_log::Setup::open(&config.access_log).map_err(|e| {
        format!(
            "cannot open the access log {}: {e}",
            config.access_log.target_shown()
        )
    })?;
    let reopen = access_log.as_ref().map(|s| s.sink.clone());
    // `systemctl kill -s USR1` signals every process of the unit: a worker
    // process takes SIGUSR1 as its own reopen rather than die of it.
    let mut usr1 = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])
        .map_err(|e| format!("cannot handle SIGUSR1: {e}"))?;
    let on_usr1 = reopen.clone();
    std::thread::Builder::new()
        .name("servery-usr1".into())
        .spawn(move || {
            for _ in usr1.forever() {
                if let Some(sink) = &on_usr1 {
                    sink.reopen();
                }
            }
        })
        .map_err(|e| format!("cannot start the SIGUSR1 thread: {e}"))?;

    let (tx, rx) = flume::unbounded();
    let reader = control.clone();
    let acme_delay = worker::fault::acme_delay();
    std::thread::Builder::new()
        .name("servery-control".into())
        .spawn(move || {
            let mut buf = vec![0u8; MAX_MESSAGE];
            loop {
                let c = match protocol::recv::<ToWorker>(reader.as_fd(), &mut buf) {
                    Ok(Some((ToWorker::Control(c), _))) => c,
                    Ok(Some((ToWorker::Acme { seq, update }, _))) => {
                        if let Some(d) = acme_delay {
                            std::thread::sleep(d);
                        }
                        if let Err(e) = crate::sites::published::global().apply(&update) {
                            tracing::warn!(error = %e, "refused an ACME certificate");
                        }
                        // Applied (or refused: the old one stays): the
                        // supervisor may announce the challenge now.
                        let _ = protocol::send(reader.as_fd(), &FromWorker::Applied(seq), &[]);
                        continue;
                    }
                    _ => break,
                };
                // SIGUSR1 is the writer thread's business, not the loop's.
                if c == crate::control::Control::ReopenLog {
                    if let Some(sink) = &reopen {
                        sink.reopen();
                    }
                    continue;
                }
                if tx.send(c).is_err() {
                    break;
                }
            }
            // Dropping `tx` disconnects the worker's channel: supervisor gone.
        })
        .map_err(|e| format!("cannot start the control reader: {e}"))?;

    let stats = Arc::new(WorkerStats::default());
    let report_stats = stats.clone();
    let writer = control.clone();
    let report = Arc::new(move |r: Report| {
        let snapshot = r.beat.map(|_| Box::new(Snapshot::take(&report_stats)));
        let _ = protocol::send(
            writer.as_fd(),
            &FromWorker::Report {
                report: r,
                snapshot,
            },
            &[],
        );
    });
    let settings = config.conn;
    for update in &init.acme {
        crate::sites::published::global()
            .apply(update)
            .map_err(|e| format!("TLS: what ACME published: {e}"))?;
    }
    let tls = match &init.tls {
        Some((identities, secret)) => Some(
            crate::tls::server_config(
                identities,
                &config.sites.for_tls(),
                config.answers_tls_alpn01(),
                secret,
                config.tls_ticket_rotate(),
                &config.http2.alpn_ids(),
            )
            .map_err(|e| format!("TLS: {e}"))?,
        ),
        None => None,
    };
    let closing = access_log.as_ref().map(|s| s.sink.clone());
    let state = worker::run(WorkerInit {
        index: init.slot,
        generation: init.generation,
        cpu: init.cpu,
        sockets,
        udp,
        inbox,
        post,
        driver: config.driver,
        settings,
        factory: Arc::new(factory),
        stats,
        control: rx,
        report,
        budget,
        tls_flags: init.tls_flags.clone(),
        tls,
        sites: config.sites.router.clone(),
        access_log,
        header_rules: config.files.rules.clone().into(),
    });
    // The last lines, handed over at the drain, are written before the
    // process exits (the signal and control threads keep the sink alive, so
    // dropping it would not close it).
    if let Some(sink) = closing {
        sink.close(crate::access_log::CLOSE_WAIT);
    }
    Ok(state)
}

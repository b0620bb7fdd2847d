//! Accepting: one loop per listening socket, from READY until the drain.
//!
//! Owns: taking connections off a socket within the worker's cap and the
//! global budget, registering each before its task is spawned, and, once a
//! drain cancels the accept, sweeping what is still queued on the socket
//! (the next generation shares it). Does not own what a connection speaks
//! (`conn`) nor when to drain (the worker's life in `mod.rs`).

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::app::Service;
use crate::telemetry::WorkerStats;

use super::conn::{self, Ctx};
use super::Driver;

/// Accept queue length asked of listen(2); the kernel caps it at somaxconn.
const LISTEN_BACKLOG: i32 = 4096;

/// Start listening (at COMMIT: the sockets were bound by the supervisor,
/// `net`, and held unlistening until then) and hand the socket over as a
/// std listener.
pub(super) fn listen(s: socket2::Socket) -> std::io::Result<std::net::TcpListener> {
    s.listen(LISTEN_BACKLOG)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

pub(super) async fn accept_loop<H: Service>(
    listener: monoio::net::TcpListener,
    ctx: Rc<Ctx<H>>,
    cancel: monoio::io::CancelHandle,
    accepting: Rc<Cell<usize>>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let max = ctx.settings.max_connections.get();
    let port = listener.local_addr().ok().map(|a| a.port());
    while !ctx.draining.get() {
        if ctx.registry.len() >= max {
            // At the cap, leave new connections queued in the kernel (as
            // nginx does at worker_connections) until one closes.
            monoio::select! {
                _ = ctx.registry.wait_below(max) => {},
                _ = monoio::time::sleep(Duration::from_millis(50)) => {},
            }
            continue;
        }
        match listener.cancelable_accept(cancel.clone()).await {
            Ok((stream, peer)) => {
                if !admit(stream, Some(peer), &ctx, &tls, port).await {
                    break;
                }
            }
            Err(e) if ctx.draining.get() => {
                tracing::trace!(error = %e, "accept cancelled by drain");
                break;
            }
            Err(e) => accept_error(e).await,
        }
    }
    sweep_queue(&listener, &ctx, &tls, port).await;
    accepting.set(accepting.get() - 1);
    ctx.registry.wake_closed();
    drop(listener);
}

/// Take in one accepted connection: TCP_NODELAY, the global budget, the
/// registry, then its task. `false` (and the connection closed) when the
/// budget is spent and the worker is draining, so cannot wait for it.
async fn admit<H: Service>(
    stream: monoio::net::TcpStream,
    peer: Option<std::net::SocketAddr>,
    ctx: &Rc<Ctx<H>>,
    tls: &Option<Arc<rustls::ServerConfig>>,
    port: Option<u16>,
) -> bool {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY failed; closing");
        return true;
    }
    WorkerStats::add(&ctx.stats.connections_accepted, 1);
    if let Some(budget) = &ctx.registry.budget {
        let limit = ctx.settings.max_connections.get() as u64;
        // The global budget is spent: hold this connection (and accept no
        // more) until any worker frees a unit.
        while !budget.try_acquire(limit) {
            if ctx.draining.get() {
                return false;
            }
            monoio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // Register before spawning, so the cap check in the accept loop sees it.
    let registration = ctx.registry.register(
        crate::sys::socket::Registered::new(crate::sys::socket::stream_fd(&stream)),
        tls.is_some(),
    );
    let id = ctx.connections.get();
    ctx.connections.set(id + 1);
    let facts = crate::app::Connection {
        peer,
        worker: ctx.index,
        id,
        tls: None,
        local_port: port,
    };
    match tls {
        Some(config) => {
            monoio::spawn(conn::serve_tls(
                stream,
                registration,
                ctx.clone(),
                config.clone(),
                facts,
            ));
        }
        None => {
            monoio::spawn(conn::serve(stream, registration, ctx.clone(), facts));
        }
    }
    true
}

/// After the accept was cancelled by a drain: take whatever is queued on
/// the socket now. io_uring waits for accept exclusively, so a connection
/// whose wake-up went to our (now cancelled) accept would otherwise sit in
/// the queue of a socket the next generation shares until another
/// connection arrives to wake it. Draining, these get one answer each with
/// `Connection: close`.
async fn sweep_queue<H: Service>(
    listener: &monoio::net::TcpListener,
    ctx: &Rc<Ctx<H>>,
    tls: &Option<Arc<rustls::ServerConfig>>,
    port: Option<u16>,
) {
    loop {
        let fd =
            match crate::sys::socket::accept_nonblocking(crate::sys::socket::listener_fd(listener))
            {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "queue sweep stopped");
                    return;
                }
            };
        let std_stream = std::net::TcpStream::from(fd);
        // Each driver wants its sockets as its own accept makes them:
        // non-blocking for epoll, blocking for io_uring.
        if std_stream
            .set_nonblocking(ctx.driver == Driver::Epoll)
            .is_err()
        {
            continue;
        }
        match monoio::net::TcpStream::from_std(std_stream) {
            Ok(stream) => {
                // Draining: without budget it is closed rather than held.
                let peer = stream.peer_addr().ok();
                admit(stream, peer, ctx, tls, port).await;
            }
            Err(e) => tracing::debug!(error = %e, "swept connection not adopted"),
        }
    }
}

async fn accept_error(e: io::Error) {
    match e.raw_os_error() {
        // Out of descriptors: back off instead of spinning (nginx does the same).
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM) => {
            tracing::warn!(error = %e, "accept failed; backing off");
            monoio::time::sleep(Duration::from_millis(10)).await;
        }
        _ => tracing::debug!(error = %e, "accept failed"),
    }
}

//! HTTP/3 across reloads (issue 27): 20 SIGHUPs while clients keep QUIC
//! connections open and others open fresh ones, in both isolations. The
//! new generation takes the very UDP sockets; datagrams of the old
//! generation's connections are handed to it until they close; no request
//! fails and no connection is closed with an error.
//!
//! What a client may do and still count as served (RFC 9114 §5.2, §4.1.1):
//! a request the server never processed, refused with H3_REQUEST_REJECTED
//! or not sent because the connection is going away (GOAWAY), is sent
//! again on a new connection. Anything else is a failure: a timeout, a
//! reset of a request the server took, a wrong answer, or a connection
//! closed with any code but H3_NO_ERROR.
//!
//! One test at a time (a reload under load is timing-sensitive).

#[macro_use]
mod common;
#[path = "common/quic.rs"]
mod quic;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestServer;

static ALONE: Mutex<()> = Mutex::new(());

/// What the clients saw.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    /// Requests sent again: refused unprocessed, or not sent (GOAWAY).
    again: u64,
    /// Connections closed by the server with H3_NO_ERROR after a GOAWAY.
    drained: u64,
    failures: Vec<String>,
}

/// How a request's error reads: one the server never processed (safe to
/// send again on a new connection), or a failure.
fn unprocessed(e: &str) -> bool {
    e.contains("REQUEST_REJECTED")
        || e.starts_with("send:")
        || e.contains("H3_NO_ERROR")
        || e.contains("going away")
}

/// The close of `quic`, if it was not a graceful one.
fn abnormal(quic: &quinn::Connection) -> Option<String> {
    match quic.close_reason()? {
        quinn::ConnectionError::ApplicationClosed(c) if c.error_code.into_inner() == 0x100 => None,
        quinn::ConnectionError::LocallyClosed => None,
        other => Some(other.to_string()),
    }
}

/// A client on one connection at a time, GETting in a loop; `fresh`
/// opens a new connection (from a new port) for every request.
fn client(addr: SocketAddr, stop: Arc<AtomicBool>, fresh: bool) -> Tally {
    let c = quic::Client::new();
    let mut t = Tally::default();
    c.rt.block_on(async {
        let mut conn: Option<quic::Conn> = None;
        while !stop.load(Ordering::Relaxed) {
            if conn.is_none() {
                if fresh {
                    c.rebind();
                }
                match c.connect_async(addr).await {
                    Ok(new) => conn = Some(new),
                    // A connection the old generation took just before its
                    // handover, closed gracefully at its drain before any
                    // request: nothing was processed.
                    Err(e) if e.contains("H3_NO_ERROR") => {
                        t.again += 1;
                        continue;
                    }
                    Err(e) => {
                        t.failures.push(format!("connect: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
            }
            let Some(live) = conn.as_mut() else { continue };
            match live.get("/small.txt", &[]).await {
                Ok(a) if a.status == 200 && a.body == b"small\n" => t.ok += 1,
                Ok(a) => t
                    .failures
                    .push(format!("answer: {} {:?}", a.status, a.body)),
                Err(e) if unprocessed(&e) => {
                    t.again += 1;
                    if let Some(old) = conn.take() {
                        // Let its close arrive, then judge it.
                        let _ =
                            tokio::time::timeout(Duration::from_secs(5), old.quic.closed()).await;
                        match abnormal(&old.quic) {
                            None => t.drained += 1,
                            Some(why) => t.failures.push(format!("closed: {why}")),
                        }
                    }
                    continue;
                }
                Err(e) => {
                    t.failures.push(format!("request: {e}"));
                    if let Some(old) = conn.take() {
                        if let Some(why) = abnormal(&old.quic) {
                            t.failures.push(format!("closed: {why}"));
                        }
                    }
                    continue;
                }
            }
            if fresh {
                if let Some(old) = conn.take() {
                    old.close();
                }
            }
        }
    });
    t
}

fn reloads_under_h3_load_fail_no_request(isolation: &str) {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let root = common::docroot(0);
    let server = TestServer::builder()
        .root(root.path())
        .tls_self_signed()
        .isolation(isolation)
        .args(&["--workers", "2", "--drain-timeout", "10"])
        .env("RUST_LOG", "warn,servery::supervisor=info")
        .start();
    let addr = server.https();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || client(addr, stop, i >= 2))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for n in 1..=20 {
        server.signal(nix::sys::signal::Signal::SIGHUP);
        let done = common::wait_until(Duration::from_secs(10), || {
            server.stderr().matches("reload complete").count() >= n
        });
        assert!(done, "reload {n} did not complete:\n{}", server.stderr());
        std::thread::sleep(Duration::from_millis(200));
    }
    // The last generations' connections go on: a few more requests.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut all = Tally::default();
    for c in clients {
        let t = c.join().expect("client panicked");
        all.ok += t.ok;
        all.again += t.again;
        all.drained += t.drained;
        all.failures.extend(t.failures);
    }
    eprintln!(
        "20 reloads ({isolation}) under HTTP/3: ok {} sent again {} drained connections {} failed {}",
        all.ok,
        all.again,
        all.drained,
        all.failures.len()
    );
    assert!(all.ok > 100, "{all:?}");
    assert!(all.failures.is_empty(), "{:?}", all.failures);
    // Long-lived connections were drained by GOAWAY, not cut.
    assert!(all.drained > 0, "{all:?}");
}

/// Write `text` to `config`, reload, and wait for the reload to complete.
fn reloader<'a>(server: &'a TestServer, config: &'a common::ConfigFile) -> impl FnMut(&str) + 'a {
    let mut reloads = 0;
    move |text: &str| {
        config.write(text);
        reloads += 1;
        server.signal(nix::sys::signal::Signal::SIGHUP);
        let n = reloads;
        assert!(
            common::wait_until(Duration::from_secs(10), || {
                server.stderr().matches("reload complete").count() >= n
            }),
            "{}",
            server.stderr()
        );
    }
}

/// A reload that moves only the plain listener keeps HTTP/3's very UDP
/// sockets; one that turns HTTP/3 off stops it; one that turns it on again
/// serves it on the same port.
fn reloads_that_change_h3_or_the_plain_listener(isolation: &str) {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let root = common::docroot(0);
    let plain = |port: u16| format!("bind = [\"127.0.0.1:{port}\"]\nworkers = 2\n");
    let first = common::free_port().port();
    let config = common::ConfigFile::new(&plain(first));
    // A fixed TLS port: `127.0.0.1:0` would be bound anew (another port)
    // by the reload that moves the plain listener.
    let tls = common::free_port();
    let server = TestServer::builder()
        .root(root.path())
        .no_bind()
        .tls_bind(tls.to_string())
        .tls_self_signed()
        .isolation(isolation)
        .args(&["--config", config.arg()])
        .env("RUST_LOG", "warn,servery::supervisor=info")
        .start();
    let addr = server.https();
    let mut reload = reloader(&server, &config);
    let client = quic::Client::new();
    assert_eq!(
        quic::get_once(&client, addr, "/small.txt").unwrap().status,
        200
    );

    // The plain listener moves; HTTP/3's sockets stay, so the new
    // generation's handshakes complete at once (new sockets would join the
    // groups behind the old ones, which the steering program's index names).
    let second = common::free_port().port();
    reload(&plain(second));
    for _ in 0..10 {
        client.rebind();
        assert_eq!(
            quic::get_once(&client, addr, "/small.txt").unwrap().status,
            200
        );
    }

    // Our connections close (their CONNECTION_CLOSE leaves now), so the
    // generation that has them drains at once.
    client.rt.block_on(client.settle());

    // Off: no new HTTP/3 connection is answered.
    reload(&format!("{}h3 = \"off\"\n", plain(second)));
    client.rebind();
    let refused = client.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), client.connect_async(addr)).await
    });
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "HTTP/3 answered with --h3 off"
    );

    // On again, on the same port, once the generation that had it has
    // drained and closed its sockets (new ones bound while the old are open
    // would join their groups behind them).
    std::thread::sleep(Duration::from_secs(1));
    reload(&plain(second));
    // A client of its own: the last one's socket met the closed port.
    let client = quic::Client::new();
    assert_eq!(
        quic::get_once(&client, addr, "/small.txt").unwrap().status,
        200
    );
}

/// Reloads that change the worker count while an older generation still
/// drains a connection: every fresh client is served, whichever socket of
/// the group its first packet reaches (one whose slot the new generation
/// no longer has included), and the long-lived connection goes on until
/// its generation's GOAWAY.
fn reloads_that_change_the_worker_count_keep_h3(isolation: &str) {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let root = common::docroot(1024 * 1024);
    let workers = |n: usize| format!("workers = {n}\ndrain_timeout = \"20s\"\n");
    let config = common::ConfigFile::new(&workers(2));
    let server = TestServer::builder()
        .root(root.path())
        .tls_self_signed()
        .isolation(isolation)
        .args(&["--config", config.arg()])
        .env("RUST_LOG", "warn,servery::supervisor=info")
        .start();
    let addr = server.https();
    let mut reload = reloader(&server, &config);
    // A connection of the first generation with a response in flight that
    // its client reads nothing of (1 KiB of credit): the generation drains
    // it, and keeps its workers and their sockets, across the reloads.
    let keeper = quic::Client::with_receive_windows(1024, 1 << 20);
    let mut kept = keeper.connect(addr).unwrap();
    let req = http::Request::get("https://localhost/big.bin")
        .body(())
        .unwrap();
    let in_flight = keeper.rt.block_on(async {
        let mut s = kept.send_only(req).await.unwrap();
        let head = s.recv_response().await.unwrap();
        assert_eq!(head.status(), 200);
        s
    });
    let fresh = |what: &str| {
        let client = quic::Client::new();
        let mut failed = Vec::new();
        for i in 0..40 {
            client.rebind();
            match quic::get_once(&client, addr, "/small.txt") {
                Ok(a) if a.status == 200 => {}
                other => failed.push(format!("{what}, client {i}: {other:?}")),
            }
        }
        assert!(failed.is_empty(), "{failed:#?}");
    };
    for n in [1, 3, 2] {
        reload(&workers(n));
        fresh(&format!("after the reload to {n} workers"));
    }
    // The first generation is still draining its connection, not cut.
    keeper.rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    assert_eq!(abnormal(&kept.quic), None);
    assert!(
        kept.quic.close_reason().is_none(),
        "closed before its drain deadline: {:?}\n{}",
        kept.quic.close_reason(),
        server.stderr()
    );
    drop(in_flight);
}

variant_tests!(
    [threads = "thread", processes = "process"]
    [
        reloads_under_h3_load_fail_no_request,
        reloads_that_change_h3_or_the_plain_listener,
        reloads_that_change_the_worker_count_keep_h3,
    ]
);

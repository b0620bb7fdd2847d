//! One connection's life, over and over: handshake, `--pipeline` stream loops beside the h3
//! driver, close; and each stream loop's requests, classed and counted.
//!
//! A request that never reached a live connection (`Failure::NotSent`: the connection closed
//! or sent GOAWAY first) is not an error: it stays with its stream slot, latency still counting
//! from its origin, and goes out first on the next connection, as HTTP/1.1 resends requests a
//! `Connection: close` left unanswered. Any other failure counts once, in its class.
//!
//! Flow of [`Worker::connection`]:
//! 1. With `--churn`, take the request first, so its latency includes the handshake.
//! 2. Handshake within `--timeout`; a failure counts as `connect` and backs off.
//! 3. Run the stream loops and poll the h3 driver until every loop has ended: the connection
//!    closed or is going away, the budget is spent, or (churn) the one request is answered.
//! 4. Close the connection and go round again, unless nothing is left to do.

use std::cell::Cell;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use tokio::sync::Notify;

use super::{Job, Worker};
use crate::http3::{self, Failure, Sender, Session};
use crate::load::ErrorClass;

/// Wait before a new handshake after a failed one, so a dead server costs one attempt per
/// connection per interval (the HTTP/1.1 worker's `CONNECT_BACKOFF`, for the same reason).
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// Raised when a connection's stream loops should stop taking requests: the connection ended
/// or is going away. Loops waiting for a due request (open loop) wake up and end.
#[derive(Default)]
struct Closing {
    raised: Cell<bool>,
    notify: Notify,
}

impl Closing {
    fn raise(&self) {
        self.raised.set(true);
        self.notify.notify_waiters();
    }

    fn raised(&self) -> bool {
        self.raised.get()
    }

    async fn wait(&self) {
        // One thread: nothing can raise it between this check and the wait's registration.
        if !self.raised() {
            self.notify.notified().await;
        }
    }
}

impl Worker<'_> {
    /// Keeps one connection slot busy from `endpoint` until the run ends (the caller drops
    /// this future at the window's end) or nothing is left to send.
    pub(super) async fn connection(&self, endpoint: &quinn::Endpoint) {
        let plan = self.plan;
        // Plan::check holds --churn to one request in flight.
        let mut carried: Vec<Option<Job>> = vec![None; plan.pipeline.get()];
        loop {
            if plan.churn && carried[0].is_none() {
                match self.next_job().await {
                    Some(job) => carried[0] = Some(job),
                    None => return,
                }
            } else if self.finished() && carried.iter().all(Option::is_none) {
                return;
            }
            if Instant::now() >= self.window.start {
                self.tally.borrow_mut().connects += 1;
            }
            let connect = self.client.connect(endpoint, self.server);
            match tokio::time::timeout(plan.timeout, connect).await {
                Ok(Ok(session)) => self.serve(session, &mut carried).await,
                Ok(Err(_)) | Err(_) => {
                    if Instant::now() >= self.window.start {
                        self.tally.borrow_mut().error(ErrorClass::Connect);
                    }
                    tokio::time::sleep(CONNECT_BACKOFF).await;
                }
            }
        }
    }

    /// Runs one stream loop per slot of `carried` on `session` until all have ended, polling
    /// the h3 driver beside them; then closes the connection.
    async fn serve(&self, session: Session, carried: &mut [Option<Job>]) {
        let closing = Closing::default();
        let Session {
            quic,
            mut driver,
            sender,
        } = session;
        let mut streams = carried
            .iter_mut()
            .map(|carry| self.stream(&quic, sender.clone(), carry, &closing))
            .collect::<FuturesUnordered<_>>();
        drop(sender);
        let mut driving = true;
        loop {
            tokio::select! {
                biased;
                ended = streams.next() => if ended.is_none() {
                    break;
                },
                _ = driver.wait_idle(), if driving => {
                    // The connection is gone; loops in the middle of a request fail with it.
                    driving = false;
                    closing.raise();
                }
            }
        }
        drop(streams);
        http3::close(&quic);
    }

    /// One request stream slot: sends a request, reads its answer, counts it, and goes again
    /// until the connection ends, the run has nothing left, or (churn) after one request.
    async fn stream(
        &self,
        quic: &quinn::Connection,
        mut sender: Sender,
        carry: &mut Option<Job>,
        closing: &Closing,
    ) {
        let plan = self.plan;
        loop {
            let job = match carry.take() {
                Some(job) => job,
                None => match self.wait_job(quic, closing).await {
                    Some(job) => job,
                    None => return,
                },
            };
            if job.counted {
                self.in_flight.set(self.in_flight.get() + 1);
            }
            let request = &self.requests[job.path];
            let exchange = http3::exchange(&mut sender, request, |_| {});
            let outcome = tokio::time::timeout(plan.timeout, exchange).await;
            let now = Instant::now();
            if self.over(now) {
                // Answered after the window closed: it stays unfinished, as it was then.
                return;
            }
            if job.counted {
                self.in_flight.set(self.in_flight.get() - 1);
            }
            let class = match outcome {
                Ok(Err(Failure::NotSent)) => {
                    *carry = Some(job);
                    closing.raise();
                    return;
                }
                Ok(Ok(answer)) if answer.status == plan.expect.status => {
                    if job.counted {
                        let mut tally = self.tally.borrow_mut();
                        tally.record(now.saturating_duration_since(job.origin));
                        tally.bytes += answer.length;
                    }
                    None
                }
                Ok(Ok(_)) => Some(ErrorClass::Status),
                Ok(Err(Failure::Head)) => Some(ErrorClass::Read),
                Ok(Err(Failure::Body | Failure::Length { .. })) => Some(ErrorClass::ShortBody),
                Err(_elapsed) => Some(ErrorClass::Timeout),
            };
            if let (Some(class), true) = (class, job.counted) {
                self.tally.borrow_mut().error(class);
            }
            if plan.churn || closing.raised() || quic.close_reason().is_some() {
                return;
            }
        }
    }

    /// The next request for a stream of a live connection: at once in closed loop; in open
    /// loop when one is due, or `None` when the connection ends first.
    async fn wait_job(&self, quic: &quinn::Connection, closing: &Closing) -> Option<Job> {
        if self.jobs.is_none() {
            return self.claim();
        }
        tokio::select! {
            job = self.next_job() => job,
            _ = quic.closed() => None,
            _ = closing.wait() => None,
        }
    }
}

//! The pre-run check over HTTP/3: `validate::check`'s contract (one request per URL before
//! any timing; status, `content-length`, `--expect-length`, `--expect-sha256`) on one QUIC
//! connection, with the same verdicts ([`Checked`]) and errors ([`validate::Error`]).
//!
//! Flow:
//! 1. Check the plan, build each path's request, start a current-thread runtime.
//! 2. Connect once (within `--timeout`); the h3 driver is polled beside each exchange.
//! 3. Per URL: one exchange within `--timeout`, hashing the body; then compare, in
//!    `validate`'s order, status, length and digest. The first mismatch is the error.

use std::future::Future;
use std::io;

use sha2::{Digest, Sha256};

use super::{Client, Error, Failure, Request, Server, Session};
use crate::plan::{hex, Plan};
use crate::validate::{self, Checked};

/// Sends one HTTP/3 request per URL of `plan` and checks each answer against `plan.expect`.
pub fn check(plan: &Plan) -> Result<Vec<Checked>, Error> {
    plan.check().map_err(validate::Error::from)?;
    let requests = Request::all(plan)?;
    let client = Client::new()?;
    let server = Server::new(&plan.target);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(async {
        let first = plan.target.urls.first().map_or("", String::as_str);
        let connect_error = |source| validate::Error::Connect {
            url: first.to_string(),
            addr: server.addr,
            source,
        };
        let endpoint = client.endpoint(&server).map_err(connect_error)?;
        let connect = client.connect(&endpoint, &server);
        let mut session = within(plan, connect)
            .await
            .and_then(|r| r)
            .map_err(connect_error)?;
        let mut checked = Vec::with_capacity(requests.len());
        for (url, request) in plan.target.urls.iter().zip(&requests) {
            checked.push(check_one(plan, &mut session, url, request).await?);
        }
        super::close(&session.quic);
        let _ = tokio::time::timeout(super::CLOSE_GRACE, endpoint.wait_idle()).await;
        Ok(checked)
    })
}

/// `future`, or a timeout error after `--timeout`.
async fn within<T>(plan: &Plan, future: impl Future<Output = T>) -> io::Result<T> {
    tokio::time::timeout(plan.timeout, future)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer within --timeout"))
}

async fn check_one(
    plan: &Plan,
    session: &mut Session,
    url: &str,
    request: &Request,
) -> Result<Checked, validate::Error> {
    let mut hasher = Sha256::new();
    let answer = {
        let exchange = super::exchange(&mut session.sender, request, |chunk| hasher.update(chunk));
        tokio::pin!(exchange);
        let driver = &mut session.driver;
        let mut driving = true;
        within(plan, async {
            loop {
                tokio::select! {
                    answer = &mut exchange => break answer,
                    // The connection ended; the exchange fails with it.
                    _ = driver.wait_idle(), if driving => driving = false,
                }
            }
        })
        .await
    };
    let io_error = |source| validate::Error::Io {
        url: url.to_string(),
        source,
    };
    let answer = match answer.map_err(io_error)? {
        Ok(answer) => answer,
        Err(Failure::Length { declared, got }) => {
            return Err(validate::Error::ContentLength {
                url: url.to_string(),
                declared,
                got,
            })
        }
        Err(Failure::Body) => {
            return Err(validate::Error::Truncated {
                url: url.to_string(),
            })
        }
        Err(failure @ (Failure::NotSent | Failure::Head)) => {
            let what = match failure {
                Failure::NotSent => "the connection closed before the request was sent",
                _ => "the request failed before a complete response head",
            };
            return Err(io_error(io::Error::other(what)));
        }
    };
    let checked = Checked {
        url: url.to_string(),
        status: answer.status,
        length: answer.length,
        sha256: hex(&hasher.finalize()),
        chunked: false,
    };
    let expect = &plan.expect;
    if checked.status != expect.status {
        return Err(validate::Error::Status {
            url: checked.url,
            expected: expect.status,
            got: checked.status,
        });
    }
    if let Some(expected) = expect.length {
        if expected != checked.length {
            return Err(validate::Error::Length {
                url: checked.url,
                expected,
                got: checked.length,
            });
        }
    }
    if let Some(expected) = expect.sha256 {
        let expected = hex(&expected);
        if expected != checked.sha256 {
            return Err(validate::Error::Sha256 {
                url: checked.url,
                expected,
                got: checked.sha256,
            });
        }
    }
    Ok(checked)
}

//! The engine's loop on the `servery-acme` thread: the next due site, its
//! attempt, its next due time. One attempt at a time; sites wait their turn.
//!
//! Due times are wall-clock ([`SystemTime`], as certificates are dated); the
//! loop sleeps at most [`NAP`] before looking at the clock again, so a
//! suspended machine or a clock step is noticed within that.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{order, schedule, store, Answer, Certificate, Error, Order, Responder, Settings};

/// The longest sleep between two looks at the clock.
const NAP: Duration = Duration::from_secs(600);
/// The bound on one whole attempt (account, order, challenges, chain): each
/// step has its own bound; this one catches a CA that answers slowly at
/// every step.
const ATTEMPT: Duration = Duration::from_secs(300);

/// One site's place in the schedule.
struct Site {
    order: Order,
    /// When to try next.
    due: SystemTime,
    /// Failures in a row, for the backoff.
    failures: u32,
}

/// Run until dropped (the caller's stop signal).
pub(super) async fn run(settings: Settings, orders: Vec<Order>, responder: Arc<dyn Responder>) {
    let responder = Guarded(responder);
    let now = SystemTime::now();
    let mut sites: Vec<Site> = orders
        .into_iter()
        .map(|order| {
            let due = match store::stored(&settings.state_dir, &order.site) {
                Ok(Some(cert)) if store::covers(&cert.material, &order.domains) => {
                    schedule::renew_at(cert.not_before, cert.not_after)
                }
                Ok(Some(_)) => {
                    tracing::info!(site = order.site, domains = ?order.domains, "stored certificate does not name every domain: ordering a new one");
                    now
                }
                Ok(None) => now,
                Err(e) => {
                    tracing::warn!(site = order.site, error = %e, "stored certificate unusable: ordering a new one");
                    now
                }
            };
            if due > now {
                tracing::info!(
                    site = order.site,
                    in_s = schedule::until(due, now).as_secs(),
                    "stored certificate is good: renewal scheduled"
                );
            }
            Site {
                order,
                due,
                failures: 0,
            }
        })
        .collect();
    let mut account = None;
    loop {
        let Some(site) = sites.iter_mut().min_by_key(|s| s.due) else {
            // No orders: nothing to do until stopped.
            std::future::pending::<()>().await;
            return;
        };
        let wait = schedule::until(site.due, SystemTime::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait.min(NAP)).await;
            continue;
        }
        let attempt = tokio::time::timeout(
            ATTEMPT,
            attempt(&settings, &mut account, &site.order, &responder),
        )
        .await
        .unwrap_or(Err(Error::Timeout {
            what: "the whole attempt",
        }));
        let now = SystemTime::now();
        match attempt {
            Ok(cert) => {
                site.failures = 0;
                let renew = schedule::renew_at(cert.not_before, cert.not_after);
                // A certificate already due (a skewed clock, a tiny lifetime)
                // must not make the loop spin against the CA.
                site.due = renew.max(now + settings.retry_min);
                tracing::info!(
                    site = site.order.site,
                    domains = ?site.order.domains,
                    not_after = store::epoch(cert.not_after),
                    renew_in_s = schedule::until(site.due, now).as_secs(),
                    "certificate issued"
                );
                responder.issued(&site.order.site, &cert);
            }
            Err(e) => {
                site.failures = site.failures.saturating_add(1);
                let retry =
                    schedule::backoff(site.failures, settings.retry_min, settings.retry_max);
                site.due = now + retry;
                tracing::warn!(
                    site = site.order.site,
                    error = %e,
                    failures = site.failures,
                    retry_in_s = retry.as_secs_f64(),
                    "certificate order failed"
                );
                // A failure may come from the account (revoked, another
                // directory): open it afresh next time.
                account = None;
                responder.failed(&site.order.site, &e, retry);
            }
        }
    }
}

/// One try for `order`: open the account if needed, issue, store.
async fn attempt(
    settings: &Settings,
    account: &mut Option<instant_acme::Account>,
    order: &Order,
    responder: &dyn Responder,
) -> Result<Certificate, Error> {
    let acct = match account {
        Some(a) => a,
        None => account.insert(order::account(settings).await?),
    };
    let cert = order::issue(acct, order, settings.challenge, responder).await?;
    store::save(&settings.state_dir, &order.site, &cert.material)?;
    Ok(cert)
}

/// The caller's responder, each call caught if it panics: a bug there is
/// logged and must not end renewals for every site.
struct Guarded(Arc<dyn Responder>);

impl Guarded {
    fn call(&self, what: &'static str, f: impl FnOnce(&dyn Responder)) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&*self.0)));
        if r.is_err() {
            tracing::error!(call = what, "the ACME responder panicked");
        }
    }
}

impl Responder for Guarded {
    fn publish(&self, answer: &Answer) {
        self.call("publish", |r| r.publish(answer));
    }
    fn withdraw(&self, answer: &Answer) {
        self.call("withdraw", |r| r.withdraw(answer));
    }
    fn issued(&self, site: &str, cert: &Certificate) {
        self.call("issued", |r| r.issued(site, cert));
    }
    fn failed(&self, site: &str, error: &Error, retry_in: Duration) {
        self.call("failed", |r| r.failed(site, error, retry_in));
    }
}

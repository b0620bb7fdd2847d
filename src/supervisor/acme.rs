//! The supervisor's ACME: one [`crate::acme::Manager`] for the whole
//! server, never one per worker, and how what it obtains reaches the
//! workers.
//!
//! Owns [`Ordering`] (the manager and the settings it was started with)
//! and [`Publisher`], the manager's [`Responder`]. Does not own the ACME
//! protocol, storage or schedule (`acme`) nor serving the answers
//! (`sites`, `tls::resolver`).
//!
//! Flow:
//! 1. Each generation's resources call [`Ordering::sync`]: the same ACME
//!    settings and orders keep the running manager (a reload does not
//!    re-order); changed ones stop it and start another, which first reads
//!    the stored certificates (so nothing is ordered that is not due);
//!    none stop it.
//! 2. The manager publishes a challenge answer, or an issued certificate,
//!    through [`Publisher`]: into this process's table first (worker
//!    threads read it at once), then as [`Event::Acme`] to the machine,
//!    which sends it to every live worker process.
//! 3. A challenge answer is only announced to the CA once every live
//!    worker process has acknowledged it (`super::acks`), or after
//!    [`ACK_TIMEOUT`] with a warning (the CA may then fail the order, which
//!    step 4 handles). Worker threads read this process's table, so in
//!    thread isolation nothing is waited for.
//! 4. A failed order is logged with the CA's reason and counted; the
//!    certificate in use stays until a new one is issued.

use std::sync::atomic::Ordering as Atomic;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use super::acks::ACK_TIMEOUT;
use super::Event;
use crate::acme::{Answer, Certificate, Challenge, Error, Manager, Order, Responder, Settings};
use crate::config::{AcmeChallenge, AcmeConfig, Config, ACME_RETRY_MAX};
use crate::sites::published::{self, Update};
use crate::telemetry::AcmeStats;

/// The running manager and what it was started for.
pub(crate) struct Ordering {
    running: Option<(AcmeConfig, Vec<Order>, Manager)>,
}

impl Ordering {
    pub(crate) fn new() -> Ordering {
        Ordering { running: None }
    }

    /// Make the manager match `config` (step 1).
    pub(crate) fn sync(&mut self, config: &Config, events: &Sender<Event>) -> Result<(), Error> {
        let wanted = config.ordering().map(|a| {
            let orders = config.sites.acme_orders().into_iter();
            let orders = orders.map(|(site, domains)| Order { site, domains });
            (a.clone(), orders.collect::<Vec<_>>())
        });
        if let (Some((a, o, _)), Some((wa, wo))) = (&self.running, &wanted) {
            if a == wa && o == wo {
                return Ok(());
            }
        }
        self.stop();
        let Some((acme, orders)) = wanted else {
            return Ok(());
        };
        let settings = Settings {
            directory: acme.directory.clone(),
            contact: acme.contact.clone(),
            state_dir: acme.state_dir.clone(),
            ca_roots: acme.ca_roots.clone(),
            challenge: match acme.challenge {
                AcmeChallenge::Http01 => Challenge::Http01,
                AcmeChallenge::TlsAlpn01 => Challenge::TlsAlpn01,
            },
            retry_min: acme.retry,
            retry_max: ACME_RETRY_MAX.max(acme.retry),
            eab: acme.eab.as_ref().map(|e| e.account.clone()),
        };
        let publisher = Publisher {
            events: events.clone(),
        };
        let manager = Manager::start(settings, orders.clone(), Arc::new(publisher))?;
        tracing::info!(
            sites = orders.len(),
            directory = %acme.directory,
            "ACME: ordering and renewing certificates"
        );
        self.running = Some((acme, orders, manager));
        Ok(())
    }

    /// Stop the manager, if one runs.
    pub(crate) fn stop(&mut self) {
        if let Some((_, _, m)) = self.running.take() {
            m.stop();
        }
    }
}

impl Drop for Ordering {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Puts what the manager obtains where the workers read it (steps 2–4).
struct Publisher {
    /// The machine's channel.
    events: Sender<Event>,
}

impl Publisher {
    /// Publish `update` here, then to every worker process; return at once.
    fn tell(&self, update: Update) {
        if !here(&update) {
            return;
        }
        let _ = self.events.send(Event::Acme { update, done: None });
    }

    /// [`Publisher::tell`], then wait until every worker process has it
    /// (or [`ACK_TIMEOUT`] passed).
    fn tell_and_wait(&self, update: Update) {
        if !here(&update) {
            return;
        }
        let (done, heard) = mpsc::channel();
        let event = Event::Acme {
            update,
            done: Some(done),
        };
        if self.events.send(event).is_ok() && heard.recv_timeout(ACK_TIMEOUT).is_err() {
            tracing::warn!(
                timeout_s = ACK_TIMEOUT.as_secs_f64(),
                "ACME: not every worker process confirmed the challenge answer; announcing it anyway"
            );
        }
    }
}

/// Apply `update` to this process's table; false (logged) if refused.
fn here(update: &Update) -> bool {
    let applied = published::global().apply(update);
    if let Err(e) = &applied {
        tracing::warn!(error = %e, "ACME: refused to publish");
    }
    applied.is_ok()
}

impl Responder for Publisher {
    fn publish(&self, answer: &Answer) {
        let update = match answer {
            Answer::Http01 {
                token,
                key_authorization,
            } => Update::Http01 {
                token: token.clone(),
                key_authorization: key_authorization.clone(),
            },
            Answer::TlsAlpn01 { domain, material } => Update::TlsAlpn01 {
                domain: domain.clone(),
                material: material.clone(),
            },
        };
        self.tell_and_wait(update);
    }

    fn withdraw(&self, answer: &Answer) {
        self.tell(match answer {
            Answer::Http01 { token, .. } => Update::WithdrawHttp01 {
                token: token.clone(),
            },
            Answer::TlsAlpn01 { domain, .. } => Update::WithdrawTlsAlpn01 {
                domain: domain.clone(),
            },
        });
    }

    fn issued(&self, site: &str, cert: &Certificate) {
        AcmeStats::global().issued.fetch_add(1, Atomic::Relaxed);
        tracing::info!(
            site,
            fingerprint = %cert.material.fingerprint(),
            "ACME: new certificate in use"
        );
        self.tell(Update::Certificate {
            site: site.to_owned(),
            material: cert.material.clone(),
        });
    }

    fn failed(&self, site: &str, error: &Error, retry_in: Duration) {
        AcmeStats::global().failed.fetch_add(1, Atomic::Relaxed);
        tracing::warn!(
            site,
            error = %error,
            retry_in_s = retry_in.as_secs_f64(),
            "ACME: order failed; the current certificate stays in use"
        );
    }
}

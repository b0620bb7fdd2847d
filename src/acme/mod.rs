//! ACME (RFC 8555) certificates: one engine for the whole server, run by the
//! supervisor on a thread of its own.
//!
//! Owns: the ACME account (created once, kept in `state_dir/account.json`),
//! the order flow for each site (through the `instant-acme` crate), the
//! challenge answers the server must publish (HTTP-01 tokens, TLS-ALPN-01
//! certificates), the certificates on disk (`state_dir/sites/<site>/`), and
//! when to renew or retry. Does not own serving: the caller's [`Responder`]
//! publishes answers on its listeners and installs issued certificates (a
//! new TLS generation, `tls::Material`); nor the config that produces
//! [`Settings`] and [`Order`]s.
//!
//! Flow:
//! 1. [`Manager::start`] checks the state dir (created 0700; refused if
//!    group/world-writable or owned by another user), the site names and
//!    domains, and starts the `servery-acme` thread with a current-thread
//!    tokio runtime. Before that, the caller serves what [`stored`] finds.
//! 2. Each order is due at once if nothing usable is stored, the stored
//!    certificate does not name every domain, or it is past [`renew_at`];
//!    otherwise it sleeps until then.
//! 3. A due order opens the account (the stored one, or a new one with the
//!    terms agreed), orders the domains, picks the configured
//!    [`Challenge`] for each pending authorization, [`Responder::publish`]es
//!    its [`Answer`], tells the CA it is ready, and polls the order within a
//!    bounded time. Once the authorizations are decided every published
//!    answer is [`Responder::withdraw`]n, success or not.
//! 4. A ready order is finalized with a CSR for a fresh ECDSA P-256 key; the
//!    chain is downloaded, stored atomically (the old pair stays until the
//!    new one is complete), then handed to [`Responder::issued`].
//! 5. A failure goes to [`Responder::failed`] with the next try's delay,
//!    [`backoff`] of the failures in a row; the old certificate stays.
//! 6. [`Manager::stop`] wakes the thread at once; an order in flight is
//!    abandoned (its answers withdrawn).
//!
//! Files: `store` (state dir, account, certificates on disk), `schedule`
//! (renewal time and backoff), `order` (the instant-acme flow), `answer`
//! (challenge answers), `engine` (the thread's loop).

mod answer;
mod engine;
mod order;
mod schedule;
mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

pub use answer::ACME_TLS_ALPN;
pub use schedule::{backoff, renew_at};
pub use store::stored;

/// How long [`Manager::stop`] waits for the thread before leaving it behind.
const STOP_JOIN: Duration = Duration::from_secs(2);
/// The shortest retry delay: a zero `retry_min` must not make the engine
/// spin against the CA.
const RETRY_FLOOR: Duration = Duration::from_secs(1);

/// What the engine needs to know, for every order.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The ACME directory URL (`https://…/directory`).
    pub directory: String,
    /// Account contacts, e.g. `mailto:ops@example.com`; may be empty.
    pub contact: Vec<String>,
    /// Where the account and the certificates live (created 0700).
    pub state_dir: PathBuf,
    /// PEM roots to trust for the directory's HTTPS instead of the
    /// platform's (tests, private CAs).
    pub ca_roots: Option<PathBuf>,
    /// The challenge type answered for every authorization.
    pub challenge: Challenge,
    /// The first retry delay after a failure (production: 60 s; at least
    /// 1 s).
    pub retry_min: Duration,
    /// The cap on retry delays (production: 24 h).
    pub retry_max: Duration,
    /// The External Account Binding a CA may require to create an account
    /// (RFC 8555 §7.3.4: ZeroSSL, Google Trust Services, private CAs).
    pub eab: Option<ExternalAccount>,
}

/// A key identifier and MAC key the CA issued for binding a new ACME
/// account to an account of its own.
#[derive(Clone, PartialEq, Eq)]
pub struct ExternalAccount {
    pub kid: String,
    /// The HMAC key, decoded (CAs show it in base64url).
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for ExternalAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalAccount")
            .field("kid", &self.kid)
            .field("hmac_key", &"<redacted>")
            .finish()
    }
}

/// The challenge type the server answers (RFC 8555 §8.3, RFC 8737).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Challenge {
    /// A token over plain HTTP on port 80.
    Http01,
    /// A special certificate over TLS on port 443, ALPN `acme-tls/1`.
    TlsAlpn01,
}

impl std::fmt::Display for Challenge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Challenge::Http01 => "http-01",
            Challenge::TlsAlpn01 => "tls-alpn-01",
        })
    }
}

/// One certificate to keep: its site and the names it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// A file-name-safe site name: the state sub-directory.
    pub site: String,
    /// DNS names, no wildcards (HTTP-01 and TLS-ALPN-01 cannot prove them).
    pub domains: Vec<String>,
}

/// A published challenge answer.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Serve `key_authorization` as text/plain for GET
    /// /.well-known/acme-challenge/{token} on the plain listeners.
    Http01 {
        token: String,
        key_authorization: String,
    },
    /// Present `material` (self-signed for `domain`, with the critical
    /// acmeIdentifier extension, OID 1.3.6.1.5.5.7.1.31, holding SHA-256 of
    /// the key authorization, RFC 8737 §3) to a TLS client whose SNI is
    /// `domain` and whose only ALPN is `acme-tls/1`.
    TlsAlpn01 {
        domain: String,
        material: crate::tls::Material,
    },
}

/// An issued (or stored) certificate with its validity.
#[derive(Clone, Debug)]
pub struct Certificate {
    /// The chain as the CA returned it and its PKCS#8 key.
    pub material: crate::tls::Material,
    /// The leaf's notBefore.
    pub not_before: SystemTime,
    /// The leaf's notAfter.
    pub not_after: SystemTime,
}

/// The server side of the engine: called on the engine's thread, so each
/// call should hand its work over and return; only `publish` may wait.
pub trait Responder: Send + Sync + 'static {
    /// Serve `answer`: called before the CA is told the challenge is ready,
    /// which happens when this returns, so it may block (briefly, bounded)
    /// until every place that answers the CA holds it.
    fn publish(&self, answer: &Answer);
    /// Stop serving `answer`: called once its authorization is decided,
    /// success or not.
    fn withdraw(&self, answer: &Answer);
    /// A new certificate for `site`, already stored on disk.
    fn issued(&self, site: &str, cert: &Certificate);
    /// An attempt for `site` failed; the next is in `retry_in`. The old
    /// certificate, if any, stays on disk and in service.
    fn failed(&self, site: &str, error: &Error, retry_in: Duration);
}

/// Why the engine could not start, or an attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ACME directory {url:?} is not an https:// URL")]
    Directory { url: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state dir {path} is {mode:04o}: make it writable by its owner only (chmod 700)")]
    StateDirMode { path: PathBuf, mode: u32 },
    #[error("state dir {path} belongs to uid {owner}, not to this process (uid {uid})")]
    StateDirOwner { path: PathBuf, owner: u32, uid: u32 },
    #[error("site name {site:?} {reason}")]
    Site { site: String, reason: &'static str },
    #[error("domain {domain:?} of site {site:?} {reason}")]
    Domain {
        site: String,
        domain: String,
        reason: &'static str,
    },
    #[error("{path}: not an account file of this engine: {source}")]
    Account {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("CA roots {path}: {detail}")]
    Roots { path: PathBuf, detail: String },
    #[error("ACME {step}: {source}")]
    Acme {
        step: &'static str,
        source: instant_acme::Error,
    },
    #[error("the CA offers no {challenge} challenge for {domain}")]
    NoChallenge {
        domain: String,
        challenge: Challenge,
    },
    #[error("the CA could not validate {domain}: {detail}")]
    Challenge { domain: String, detail: String },
    #[error("the order became invalid: {detail}")]
    OrderInvalid { detail: String },
    #[error("timed out waiting for {what}")]
    Timeout { what: &'static str },
    #[error("bad certificate from {origin}: {detail}")]
    BadCertificate { origin: String, detail: String },
    #[error("cannot make {what}: {source}")]
    Key {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("cannot start the ACME thread: {0}")]
    Spawn(std::io::Error),
}

/// The running engine. Dropping it stops the thread too, without waiting
/// for it.
pub struct Manager {
    stop: tokio::sync::watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    thread: JoinHandle<()>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts the thread; for each order: if a stored certificate exists and
    /// is not yet due, sleep until due; otherwise order now.
    pub fn start(
        settings: Settings,
        orders: Vec<Order>,
        responder: Arc<dyn Responder>,
    ) -> Result<Manager, Error> {
        if !settings.directory.starts_with("https://") {
            return Err(Error::Directory {
                url: settings.directory,
            });
        }
        if let Some(roots) = &settings.ca_roots {
            order::load_roots(roots)?;
        }
        store::prepare(&settings.state_dir)?;
        for (i, order) in orders.iter().enumerate() {
            validate(order)?;
            if orders[..i].iter().any(|o| o.site == order.site) {
                return Err(Error::Site {
                    site: order.site.clone(),
                    reason: "names two orders: each site has one certificate",
                });
            }
        }
        let settings = Settings {
            retry_min: settings.retry_min.max(RETRY_FLOOR),
            ..settings
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Spawn)?;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (done_tx, done) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("servery-acme".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = engine::run(settings, orders, responder) => {}
                        _ = stopped.wait_for(|s| *s) => {}
                    }
                });
                let _ = done_tx.send(());
            })
            .map_err(Error::Spawn)?;
        Ok(Manager { stop, done, thread })
    }

    /// Stop the thread: wakes it at once, abandons an order in flight, and
    /// waits up to ~2 s for it to end.
    pub fn stop(self) {
        let _ = self.stop.send(true);
        match self.done.recv_timeout(STOP_JOIN) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if self.thread.join().is_err() {
                    tracing::warn!("the ACME thread panicked");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!(
                    "the ACME thread did not stop within {STOP_JOIN:?}; leaving it behind"
                );
            }
        }
    }
}

/// An order the engine can carry out: a safe site name and plain DNS names.
fn validate(order: &Order) -> Result<(), Error> {
    store::check_site(&order.site)?;
    let bad = |domain: &str, reason| Error::Domain {
        site: order.site.clone(),
        domain: domain.to_owned(),
        reason,
    };
    if order.domains.is_empty() {
        return Err(bad("", "is missing: an order needs at least one domain"));
    }
    for d in &order.domains {
        if d.contains('*') {
            return Err(bad(d, "is a wildcard, which needs DNS-01 (unsupported)"));
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        if d.is_empty() || d.len() > 253 || !d.chars().all(plain) || d.starts_with('.') {
            return Err(bad(d, "is not a DNS name (letters, digits, '-' and '.')"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(site: &str, domains: &[&str]) -> Order {
        Order {
            site: site.into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn accepts_plain_names() {
        validate(&order("www", &["example.com", "www.example.com"])).unwrap();
    }

    struct Nobody;
    impl Responder for Nobody {
        fn publish(&self, _: &Answer) {}
        fn withdraw(&self, _: &Answer) {}
        fn issued(&self, _: &str, _: &Certificate) {}
        fn failed(&self, _: &str, _: &Error, _: Duration) {}
    }

    #[test]
    fn start_refuses_what_cannot_work() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = Settings {
            directory: "https://ca.test/dir".into(),
            contact: vec![],
            state_dir: tmp.path().join("acme"),
            ca_roots: None,
            challenge: Challenge::Http01,
            retry_min: Duration::from_secs(60),
            retry_max: Duration::from_secs(86_400),
            eab: None,
        };
        let start = |s: Settings, orders: Vec<Order>| Manager::start(s, orders, Arc::new(Nobody));
        let plain = Settings {
            directory: "http://ca.test/dir".into(),
            ..settings.clone()
        };
        assert!(matches!(start(plain, vec![]), Err(Error::Directory { .. })));
        let junk = tmp.path().join("junk.pem");
        std::fs::write(&junk, "not PEM").unwrap();
        let roots = Settings {
            ca_roots: Some(junk),
            ..settings.clone()
        };
        assert!(matches!(start(roots, vec![]), Err(Error::Roots { .. })));
        let twice = vec![order("a", &["a.test"]), order("a", &["b.test"])];
        assert!(matches!(
            start(settings.clone(), twice),
            Err(Error::Site { .. })
        ));
        // Nothing to order: starts, and stops at once.
        let m = start(settings, vec![]).unwrap();
        let t = std::time::Instant::now();
        m.stop();
        assert!(t.elapsed() < STOP_JOIN);
    }

    #[test]
    fn rejects_wildcards_and_junk() {
        assert!(matches!(
            validate(&order("a", &["*.example.com"])),
            Err(Error::Domain { .. })
        ));
        assert!(validate(&order("a", &["exa mple.com"])).is_err());
        assert!(validate(&order("a", &[])).is_err());
        assert!(validate(&order("../a", &["example.com"])).is_err());
    }
}

//! HTTP Basic authentication (RFC 7617) of a site's paths: `[[auth]]`
//! rules, their users files, and the gate a request passes before its
//! file is looked up.
//!
//! A bcrypt verification is slow by design (59 ms at cost 10 here, seconds
//! at cost 16), so this is built around doing few and never on a worker's
//! event loop:
//! - `users`: the users file, read with the config (a reload reads it
//!   again): htpasswd `user:hash` lines, bcrypt only; anything else is a
//!   config error naming the file and line.
//! - `verifier`: one thread per process hashes, fed by a bounded queue
//!   (past it, 503 with `Retry-After`); the request's task awaits it.
//! - `limits`: per worker, the credentials it verified (a digest, never the
//!   password), and per process each client address's failures (a token
//!   bucket; past it, 429 with `Retry-After` and no hash), both bounded.
//!
//! Flow for a request whose decoded path (or rewritten path) a rule
//! matches, in [`Gate`] terms (`static_files` asks and answers):
//! 1. Over plain HTTP, unless `auth_over_http`: [`Gate::Refused`] 403; the
//!    client is never asked for credentials it would send in clear.
//! 2. No `Authorization: Basic` it can read: 401 with `WWW-Authenticate`.
//! 3. Verified before on this worker: [`Gate::Passed`].
//! 4. The client's address over its failures: 429.
//! 5. Else [`Gate::Verify`]: the verifier's answer is taken by
//!    [`Gate::after`]: a match passes and is remembered, a mismatch is a
//!    failure of the address and 401. An unknown user is checked against a
//!    hash of the file's own, so a name that exists answers no faster.
//!
//! Does not own the answers' bodies or the `Cache-Control: private` a
//! passed answer gets (`static_files`), nor reading the rules from the
//! config (`config::auth`).

pub mod limits;
pub mod users;
pub mod verifier;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::http::rules::Glob;
pub use users::Users;

/// Most `[[auth]]` tables.
pub const MAX_RULES: usize = 64;
/// Longest realm.
pub const MAX_REALM: usize = 128;
/// Longest `Authorization` value read (user and password, base64).
const MAX_CREDENTIALS: usize = 4096;

/// One validated `[[auth]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRule {
    /// The paths it guards.
    pub glob: Glob,
    /// Shown by browsers in the login prompt.
    pub realm: String,
    pub users_file: PathBuf,
    pub users: Arc<Users>,
}

impl AuthRule {
    /// The `WWW-Authenticate` value of a 401.
    pub fn challenge(&self) -> String {
        format!("Basic realm=\"{}\", charset=\"UTF-8\"", self.realm)
    }
}

/// What the gate says of one request.
#[derive(Debug)]
pub enum Gate<'r> {
    /// No rule guards its path.
    Open,
    /// Its credentials are good.
    Passed,
    /// Refused with this status (403, 401, 429 or 503) and, for 401, the
    /// rule whose challenge goes with it; `retry` for 429 and 503.
    Refused {
        status: u16,
        rule: &'r AuthRule,
        retry: Option<Duration>,
    },
    /// Its credentials need the verifier.
    Verify(Pending<'r>),
}

/// A verification to be done.
#[derive(Debug)]
pub struct Pending<'r> {
    pub rule: &'r AuthRule,
    /// The hash to check against.
    pub hash: String,
    pub password: Vec<u8>,
    known: bool,
    digest: limits::Digest,
    peer: Option<IpAddr>,
}

/// The request facts the gate needs.
pub struct Asked<'a> {
    /// The `Authorization` field, if any.
    pub authorization: Option<&'a [u8]>,
    /// Whether it came over TLS (or QUIC).
    pub secure: bool,
    pub peer: Option<IpAddr>,
}

impl<'r> Gate<'r> {
    /// Step 1 to 5 for a request `rule` guards.
    pub fn ask(rule: &'r AuthRule, asked: &Asked<'_>, over_http: bool) -> Gate<'r> {
        let refused = |status, retry| Gate::Refused {
            status,
            rule,
            retry,
        };
        if !asked.secure && !over_http {
            return refused(403, None);
        }
        let Some((user, password)) = asked.authorization.and_then(basic) else {
            return refused(401, None);
        };
        let now = Instant::now();
        let digest = limits::digest(rule.users.id(), &user, &password);
        if limits::verified(|v| v.contains(&digest, now)) {
            return Gate::Passed;
        }
        if let Some(peer) = asked.peer {
            if let Some(wait) = limits::failures(|f| f.wait(peer, now)) {
                return refused(429, Some(wait));
            }
        }
        // A name that is not UTF-8 is no user's ("" is none either).
        let (hash, known) = rule.users.hash_of(std::str::from_utf8(&user).unwrap_or(""));
        Gate::Verify(Pending {
            rule,
            hash: hash.to_owned(),
            password,
            known,
            digest,
            peer: asked.peer,
        })
    }

    /// Step 5's end: the verifier said `matched` of `pending`'s password
    /// (`None`: it could not take the job).
    pub fn after(pending: Pending<'r>, matched: Option<bool>) -> Gate<'r> {
        let now = Instant::now();
        match matched {
            None => Gate::Refused {
                status: 503,
                rule: pending.rule,
                retry: Some(Duration::from_secs(1)),
            },
            Some(true) if pending.known => {
                limits::verified(|v| v.insert(pending.digest, now));
                Gate::Passed
            }
            Some(_) => {
                if let Some(peer) = pending.peer {
                    limits::failures(|f| f.fail(peer, now));
                }
                tracing::info!(
                    peer = ?pending.peer,
                    realm = %pending.rule.realm,
                    "basic auth: wrong user or password"
                );
                Gate::Refused {
                    status: 401,
                    rule: pending.rule,
                    retry: None,
                }
            }
        }
    }

    /// [`Gate::after`] with the answer awaited from the verifier.
    pub async fn verified(mut pending: Pending<'r>) -> Gate<'r> {
        // The verifier takes the password (and zeroes it when done).
        let password = std::mem::take(&mut pending.password);
        let matched = match verifier::submit(&pending.hash, password) {
            Ok(answer) => answer.recv_async().await.ok(),
            Err(verifier::Busy::Full) => None,
        };
        Gate::after(pending, matched)
    }

    /// [`Gate::after`] verified on this thread.
    pub fn verified_here(pending: Pending<'r>) -> Gate<'r> {
        let matched = verifier::verify_here(&pending.hash, &pending.password);
        Gate::after(pending, Some(matched))
    }
}

/// The user and password of an `Authorization: Basic` value; `None` for
/// another scheme, bad base64 or no `:`.
fn basic(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if value.len() > MAX_CREDENTIALS {
        return None;
    }
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at(value.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim_ascii())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "alice:$2y$04$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2\n";

    fn rule() -> AuthRule {
        AuthRule {
            glob: Glob::new("/private/**").unwrap(),
            realm: "Staff".into(),
            users_file: "users".into(),
            users: Arc::new(Users::parse(FILE).unwrap()),
        }
    }

    fn header(user: &str, password: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {b64}").into_bytes()
    }

    fn asked<'a>(authorization: Option<&'a [u8]>, peer: &str) -> Asked<'a> {
        Asked {
            authorization,
            secure: true,
            peer: Some(peer.parse().unwrap()),
        }
    }

    fn status(g: &Gate<'_>) -> u16 {
        match g {
            Gate::Refused { status, .. } => *status,
            Gate::Passed => 200,
            Gate::Open => 0,
            Gate::Verify(_) => 1,
        }
    }

    #[test]
    fn basic_values_are_read_strictly() {
        assert_eq!(
            basic(b"Basic YWxpY2U6czpl"),
            Some((b"alice".to_vec(), b"s:e".to_vec()))
        );
        assert_eq!(
            basic(b"basic   YWxpY2U6"),
            Some((b"alice".to_vec(), vec![]))
        );
        assert_eq!(basic(b"Bearer YWxpY2U6czpl"), None);
        assert_eq!(basic(b"Basic !!!"), None);
        assert_eq!(basic(b"Basic YWxpY2U="), None, "no colon");
        assert_eq!(basic(b"Basic"), None);
        assert_eq!(basic(&[b'a'; MAX_CREDENTIALS + 1]), None);
    }

    #[test]
    fn right_wrong_missing_and_plain_http() {
        let r = rule();
        let good = header("alice", "secret");
        let plain = Asked {
            authorization: Some(&good),
            secure: false,
            peer: None,
        };
        assert_eq!(status(&Gate::ask(&r, &plain, false)), 403);
        assert_eq!(
            status(&Gate::ask(&r, &asked(None, "192.0.2.1"), false)),
            401
        );
        let Gate::Verify(p) = Gate::ask(&r, &asked(Some(&good), "192.0.2.1"), false) else {
            panic!("verify first")
        };
        assert_eq!(status(&Gate::verified_here(p)), 200);
        // Remembered: no second hash.
        assert_eq!(
            status(&Gate::ask(&r, &asked(Some(&good), "192.0.2.1"), false)),
            200
        );
        let bad = header("alice", "guess");
        let Gate::Verify(p) = Gate::ask(&r, &asked(Some(&bad), "192.0.2.1"), false) else {
            panic!("verify")
        };
        assert_eq!(status(&Gate::verified_here(p)), 401);
        // An unknown user whose password is the decoy's still fails.
        let nobody = header("mallory", "secret");
        let Gate::Verify(p) = Gate::ask(&r, &asked(Some(&nobody), "192.0.2.1"), false) else {
            panic!("verify")
        };
        assert_eq!(status(&Gate::verified_here(p)), 401);
        // Over plain HTTP when allowed.
        let plain = Asked {
            authorization: Some(&good),
            secure: false,
            peer: None,
        };
        assert_eq!(status(&Gate::ask(&r, &plain, true)), 200);
    }

    #[test]
    fn an_address_past_its_failures_is_not_hashed() {
        let r = rule();
        let bad = header("alice", "guess");
        let peer = "198.51.100.9";
        for _ in 0..limits::FAILURE_BURST {
            let Gate::Verify(p) = Gate::ask(&r, &asked(Some(&bad), peer), false) else {
                panic!("verify")
            };
            assert_eq!(status(&Gate::after(p, Some(false))), 401);
        }
        match Gate::ask(&r, &asked(Some(&bad), peer), false) {
            Gate::Refused {
                status: 429,
                retry: Some(_),
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        // Even the right password waits.
        let good = header("alice", "secret");
        assert_eq!(
            status(&Gate::ask(&r, &asked(Some(&good), peer), false)),
            429
        );
        assert_eq!(
            status(&Gate::after(
                match Gate::ask(&r, &asked(Some(&good), "198.51.100.10"), false) {
                    Gate::Verify(p) => p,
                    other => panic!("{other:?}"),
                },
                None
            )),
            503
        );
    }
}

//! `[[auth]]` as a site's files meet it: which rule guards a request, the
//! gate's answer turned into a response, and `Cache-Control: private` on
//! what passes.
//!
//! A rule guards a request when its glob takes the request's decoded path
//! or, with `[[rewrite]]`s, the path a rewrite gives it (a rewrite cannot
//! reach a guarded file from an unguarded path). OPTIONS is never guarded:
//! a browser's CORS preflight carries no credentials. A path that does not
//! resolve is guarded by nothing and answered 400 as before.
//!
//! An answer that passed gets `Cache-Control: private` (a shared cache
//! must not hand it to someone else), replacing `--cache-control`'s, unless
//! a `[[headers]]` rule of its path sets `Cache-Control` itself (the
//! operator said otherwise). The refusals are the static files' errors
//! (`[[error_page]]` pages included) with their fields: `WWW-Authenticate`
//! on 401, `Retry-After` on 429 and 503.

use crate::app::Connection;
use crate::auth::{Asked, AuthRule, Gate};
use crate::http::{Fields, Head, Method, Refusal, Response};

use super::Files;

/// What the gate leaves the answer to do.
pub(super) enum Guarded {
    /// Serve; `true` when credentials passed (the answer is private).
    Serve(bool),
    /// Answer this instead.
    Refused(Response),
    /// Verification is needed and cannot be awaited here.
    Defer,
}

impl Files {
    /// The rule that guards `head`, if any.
    pub(super) fn guard(&self, head: &Head<'_>) -> Option<&AuthRule> {
        if self.config.auth.is_empty() || head.method == Method::Options {
            return None;
        }
        let path = self.decoded(head)?;
        let rewritten = self.rewritten(head).ok().flatten();
        let rewritten = rewritten
            .as_deref()
            .map(|p| p.split('?').next().unwrap_or_default().as_bytes());
        self.config.auth.iter().find(|rule| {
            rule.glob.matches(&path).is_some()
                || rewritten.is_some_and(|p| rule.glob.matches(p).is_some())
        })
    }

    /// The gate of `head` on `conn`: `Open` when no rule guards it.
    pub(super) fn gate(&self, head: &Head<'_>, conn: &Connection) -> Gate<'_> {
        let Some(rule) = self.guard(head) else {
            return Gate::Open;
        };
        let asked = Asked {
            authorization: head.header("authorization"),
            secure: conn.tls.is_some(),
            peer: conn.peer.map(|p| p.ip()),
        };
        Gate::ask(rule, &asked, self.config.auth_over_http)
    }

    /// The gate's answer for `head`: `verdict` when the caller has it
    /// (awaited), else asked now; a verification is done on this thread
    /// unless `defer`.
    pub(super) fn guarded(
        &self,
        head: &Head<'_>,
        conn: &Connection,
        verdict: Option<Gate<'_>>,
        defer: bool,
    ) -> Guarded {
        let gate = match verdict {
            Some(g) => g,
            None => self.gate(head, conn),
        };
        let gate = match gate {
            Gate::Verify(_) if defer => return Guarded::Defer,
            Gate::Verify(pending) => Gate::verified_here(pending),
            g => g,
        };
        match gate {
            Gate::Open => Guarded::Serve(false),
            Gate::Passed => Guarded::Serve(true),
            Gate::Refused {
                status,
                rule,
                retry,
            } => {
                let (refusal, secure) = match status {
                    401 => (Refusal::Unauthorized, true),
                    429 => (Refusal::TooManyRequests, true),
                    503 => (Refusal::Busy, true),
                    _ => (Refusal::Forbidden, false),
                };
                if !secure {
                    tracing::debug!(
                        realm = %rule.realm,
                        "a guarded path asked over plain HTTP: 403 (auth_over_http = true allows it)"
                    );
                }
                let mut resp = self.refused(&refusal, head);
                if status == 401 {
                    resp = resp.header("WWW-Authenticate", rule.challenge());
                }
                if let Some(wait) = retry {
                    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                    resp = resp.header("Retry-After", secs.max(1).to_string());
                }
                Guarded::Refused(resp)
            }
            Gate::Verify(_) => Guarded::Refused(self.refused(&Refusal::Internal, head)),
        }
    }

    /// A passed answer made private, unless a `[[headers]]` rule of its
    /// path sets `Cache-Control`.
    pub(super) fn private(&self, mut resp: Response, head: &Head<'_>) -> Response {
        let path = self.decoded(head);
        let ruled = path.as_deref().is_some_and(|p| {
            self.config.rules.iter().any(|r| {
                r.matches(p)
                    && r.set
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
            })
        });
        if ruled {
            return resp;
        }
        if let Fields::List(fields) = &mut resp.fields {
            fields.retain(|(n, _)| !n.eq_ignore_ascii_case("cache-control"));
            fields.push(("Cache-Control".into(), "private".into()));
        }
        resp
    }
}

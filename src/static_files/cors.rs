//! Cross-origin reads of a site's files (CORS, the Fetch standard's HTTP
//! part): which origins may read the answers, and the preflight answer.
//!
//! Owns [`Cors`] (what `config::cors` validated) and the fields it puts on
//! answers. Does not own reading it (`config::cors`) nor the answers
//! themselves (`Files::handle`).
//!
//! What a client gets:
//! - origins `*` (without credentials): `Access-Control-Allow-Origin: *` on
//!   every answer, prebuilt into each file's head (`Files::extra_fields`):
//!   no request pays for it;
//! - listed origins: `Vary: Origin` on every answer (prebuilt too: a cache
//!   must not give one origin's answer to another), and on an answer to a
//!   listed `Origin`, `Access-Control-Allow-Origin` with that origin (and
//!   `Access-Control-Allow-Credentials: true` when allowed). An `Origin`
//!   not listed gets no CORS field, and is never echoed: only a listed
//!   origin's own bytes go back;
//! - a preflight (OPTIONS with `Origin` and
//!   `Access-Control-Request-Method`) from an allowed origin: 204 with the
//!   allowed methods, request fields and `Access-Control-Max-Age`; the
//!   browser checks the request against them. From any other origin, the
//!   plain OPTIONS answer (no CORS field: the browser refuses).

use std::time::Duration;

use crate::http::{Body, Head, Response, Status};

/// The CORS settings of a site's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// Serialized origins (`https://app.example`, lowercase), or `*` alone;
    /// empty: CORS off.
    pub origins: Vec<String>,
    /// Methods a preflight may ask for.
    pub methods: Vec<String>,
    /// Request fields a preflight may ask for (lowercase).
    pub headers: Vec<String>,
    /// How long a browser may keep a preflight's answer.
    pub max_age: Duration,
    /// Requests with credentials (cookies) may read the answers; never
    /// with `*` (`config::cors` refuses it, as the standard does).
    pub credentials: bool,
}

impl Cors {
    #[inline]
    pub fn is_on(&self) -> bool {
        !self.origins.is_empty()
    }

    fn any(&self) -> bool {
        self.origins.len() == 1 && self.origins[0] == "*"
    }

    /// The fields every answer of the site carries, whatever the request
    /// (prebuilt into file heads).
    #[inline]
    pub(super) fn fixed_fields(&self) -> Option<(&'static str, &'static str)> {
        match (self.is_on(), self.any()) {
            (false, _) => None,
            (true, true) => Some(("Access-Control-Allow-Origin", "*")),
            (true, false) => Some(("Vary", "Origin")),
        }
    }

    /// The request's `Origin` if it is listed (not for `*`: that answer is
    /// fixed).
    fn listed<'h>(&self, head: &Head<'h>) -> Option<&'h [u8]> {
        if !self.is_on() || self.any() {
            return None;
        }
        let origin = head.header("origin")?;
        self.origins
            .iter()
            .any(|o| o.as_bytes() == origin)
            .then_some(origin)
    }

    /// `resp` with what a listed `Origin` is allowed (the fixed field is
    /// on every answer already: `Files::ruled`, `Files::extra_fields`).
    pub(super) fn on_answer(&self, mut resp: Response, head: &Head<'_>) -> Response {
        if let Some(origin) = self.listed(head) {
            // Listed: ASCII, so the bytes are the listed string.
            let origin = String::from_utf8_lossy(origin).into_owned();
            resp = resp.header("Access-Control-Allow-Origin", origin);
            if self.credentials {
                resp = resp.header("Access-Control-Allow-Credentials", "true");
            }
        }
        resp
    }

    /// The answer to a preflight from an allowed origin, or `None` (not a
    /// preflight, or an origin not allowed).
    pub(super) fn preflight(&self, head: &Head<'_>) -> Option<Response> {
        if !self.is_on() {
            return None;
        }
        head.header("access-control-request-method")?;
        head.header("origin")?;
        let allowed = if self.any() {
            "*".to_owned()
        } else {
            String::from_utf8_lossy(self.listed(head)?).into_owned()
        };
        let mut resp = Response::new(Status::NO_CONTENT, Body::Empty)
            .header("Access-Control-Allow-Origin", allowed)
            .header("Access-Control-Allow-Methods", self.methods.join(", "))
            .header("Access-Control-Max-Age", self.max_age.as_secs().to_string());
        if !self.headers.is_empty() {
            resp = resp.header("Access-Control-Allow-Headers", self.headers.join(", "));
        }
        if self.credentials {
            resp = resp.header("Access-Control-Allow-Credentials", "true");
        }
        let vary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
        Some(resp.header("Vary", vary))
    }
}

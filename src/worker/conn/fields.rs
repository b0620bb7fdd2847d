//! A response's fields as HTTP/2 and HTTP/3 send them: a header map, the
//! connection-specific fields gone (RFC 9113 §8.2.2, RFC 9114 §4.2), its
//! length said as `http::finish` decides for every protocol, `server` and
//! `date` set, and the response counted.
//!
//! Also what a mapped request's authority may be ([`authority_error`]).
//!
//! Owns the one finish of a mapped head; HTTP/1.1 writes its head as bytes
//! (`output`, `http::response`) from the same `http::finish` rules.

use http::header::{self, HeaderValue};

use super::Ctx;
use crate::http::finish::{self, Length};
use crate::http::ParseError;
use crate::telemetry::Protocol;

/// Finish `parts` of a response with a body of `len` bytes (`None`: not
/// known ahead) to a request that was a HEAD or not; whether it goes out
/// without a body.
pub(super) fn finish<H>(
    ctx: &Ctx<H>,
    parts: &mut http::response::Parts,
    head_only: bool,
    len: Option<u64>,
    protocol: Protocol,
    alt_svc: Option<&HeaderValue>,
) -> bool {
    finish::remove_connection_specific(&mut parts.headers);
    // A static head's map holds an empty `alt-svc` in its place (`heads`),
    // so setting it does not grow a cloned map; without one it goes.
    match (alt_svc, parts.headers.get(header::ALT_SVC)) {
        (Some(v), None) => {
            parts.headers.insert(header::ALT_SVC, v.clone());
        }
        (Some(v), Some(had)) if had.is_empty() => {
            parts.headers.insert(header::ALT_SVC, v.clone());
        }
        (None, Some(had)) if had.is_empty() => {
            parts.headers.remove(header::ALT_SVC);
        }
        _ => {}
    }
    let status = parts.status;
    let no_content = status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED;
    // `content-length` when known (a stream's end says the rest); a HEAD's
    // or a 304's keeps the one the service said of the GET.
    let declared = (head_only || status == http::StatusCode::NOT_MODIFIED)
        .then(|| finish::declared_length(&parts.headers))
        .flatten();
    match finish::length(status.as_u16(), head_only, declared, len) {
        Length::Known(n) if declared == Some(n) => {}
        Length::Known(n) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        Length::None | Length::Unknown => {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
    }
    if !parts.headers.contains_key(header::SERVER) {
        parts
            .headers
            .insert(header::SERVER, HeaderValue::from_static(finish::SERVER));
    }
    if let Ok(date) = HeaderValue::from_bytes(ctx.date.borrow_mut().now()) {
        parts.headers.insert(header::DATE, date);
    }
    ctx.stats.response(protocol, status.as_u16());
    head_only || no_content || len == Some(0)
}

/// Why the request's authority (`:authority`, else `host`) is refused: the
/// HTTP/1.1 Host grammar (`http::host`), no userinfo (RFC 9113 §8.3.1), one
/// `host` at most, and the two agreeing when both are sent.
pub(super) fn authority_error(parts: &http::request::Parts) -> Option<ParseError> {
    let hosts: Vec<&[u8]> = parts
        .headers
        .get_all(header::HOST)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    let pseudo = parts.uri.authority().map(|a| a.as_str().as_bytes());
    authority_check(pseudo, &hosts)
}

/// [`authority_error`] of an `:authority` and the `host` fields as sent.
pub(super) fn authority_check(pseudo: Option<&[u8]>, hosts: &[&[u8]]) -> Option<ParseError> {
    use crate::http::host;
    if hosts.len() > 1 {
        return Some(ParseError::BadHost { count: hosts.len() });
    }
    let field = hosts.first().copied();
    let invalid = |in_target, error| ParseError::InvalidHost { in_target, error };
    if let Some(a) = pseudo {
        if let Err(e) = host::validate_uri(a) {
            return Some(invalid(true, e));
        }
    }
    if let Some(h) = field {
        if let Err(e) = host::validate(h) {
            return Some(invalid(false, e));
        }
        if pseudo.is_some_and(|a| !a.eq_ignore_ascii_case(h)) {
            return Some(ParseError::BadHost { count: 2 });
        }
    }
    None
}

//! What every response gets before a protocol encodes it, whatever the
//! protocol: whether and how its length is said, the `Server` field, and
//! which fields belong to the connection rather than to the response.
//!
//! Owns [`length`] (RFC 9110 §8.6, §9.3.2, §15.3.5, §15.4.5: no body for
//! 1xx, 204 and 304 and a HEAD, a length a service set kept where it
//! describes the GET's), [`SERVER`], [`connection_field`] (what the
//! connection writes itself) and [`remove_connection_specific`] (what
//! HTTP/2 and HTTP/3 forbid, RFC 9113 §8.2.2). Does not own encoding: HTTP/1.1 writes
//! `Content-Length` or chunked for [`Length`] (`response::write_service_head`),
//! HTTP/2 sets or removes `content-length` (`worker::conn::h2::send`).
//!
//! Both protocols call [`length`] with the same facts, so a response says
//! the same length over each; before it, each wrote the rules again and
//! they had to be kept in step by hand.

/// The `Server` field's value on every response that does not set its own.
pub const SERVER: &str = "servery";
/// The same as an HTTP/1.1 field line (a test keeps the two the same).
pub const SERVER_FIELD: &[u8] = b"Server: servery\r\n";

/// How a response's length is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// No length at all: no body follows and none is described (1xx, 204,
    /// or a HEAD or 304 whose GET's length is not known).
    None,
    /// This many bytes: the body's, or for a HEAD or 304 the length the
    /// service declared for the GET.
    Known(u64),
    /// A body whose length is known only at its end (HTTP/1.1 chunks it, or
    /// closes after it on HTTP/1.0; HTTP/2 ends the stream).
    Unknown,
}

/// The length a response tells: its `status`, whether the request was a
/// HEAD (`head_method`), the `Content-Length` the service set (`declared`,
/// when it parses), and its body's length if known ahead (`body`).
pub fn length(status: u16, head_method: bool, declared: Option<u64>, body: Option<u64>) -> Length {
    if (100..200).contains(&status) || status == 204 {
        return Length::None;
    }
    // HEAD and 304 send no body: a length the service set describes the
    // GET's and is kept; an empty body says nothing of the GET's
    // (`Content-Length: 0` would claim it).
    let bodiless = head_method || status == 304;
    match (declared, body) {
        (Some(n), _) if bodiless => Length::Known(n),
        (_, Some(0)) | (_, None) if bodiless => Length::None,
        (_, Some(n)) => Length::Known(n),
        (_, None) => Length::Unknown,
    }
}

/// The `Content-Length` of a header map (a service's response, an HTTP/2
/// request), when it is one number.
pub fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Whether a service's field `name` is one the connection writes itself,
/// on every protocol: framing (`Content-Length`, `Transfer-Encoding`),
/// persistence (`Connection`, `Keep-Alive`) and `Date` (from the worker's
/// clock). HTTP/1.1 leaves the service's out and writes its own.
pub fn connection_field(name: &http::HeaderName) -> bool {
    use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
    name == CONTENT_LENGTH
        || name == TRANSFER_ENCODING
        || name == CONNECTION
        || name == DATE
        || name == "keep-alive"
}

/// Remove the connection-specific fields, which HTTP/2 forbids in a
/// message (RFC 9113 §8.2.2; HTTP/3 the same, RFC 9114 §4.2): `Connection`
/// and the fields it would name (`Keep-Alive`, `Proxy-Connection`,
/// `Transfer-Encoding`, `Upgrade`), and `TE`, which a response has no use
/// for. HTTP/1.1 passes `Upgrade` on (a 101 needs it).
pub fn remove_connection_specific(headers: &mut http::HeaderMap) {
    use http::header::{CONNECTION, TE, TRANSFER_ENCODING, UPGRADE};
    for name in [CONNECTION, TRANSFER_ENCODING, UPGRADE, TE] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(name);
    }
}

/// A field name (lowercase) HTTP/2 and HTTP/3 do not carry (RFC 9113
/// §8.2.2, RFC 9114 §4.2).
pub fn is_connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection"
            | b"transfer-encoding"
            | b"upgrade"
            | b"te"
            | b"keep-alive"
            | b"proxy-connection"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodiless_statuses_tell_no_length() {
        for status in [100, 101, 103, 204] {
            assert_eq!(length(status, false, Some(5), Some(5)), Length::None);
        }
    }

    #[test]
    fn head_and_304_keep_the_declared_length_and_claim_none_else() {
        assert_eq!(length(200, true, Some(10), Some(0)), Length::Known(10));
        assert_eq!(length(304, false, Some(10), None), Length::Known(10));
        assert_eq!(length(304, false, None, Some(0)), Length::None);
        assert_eq!(length(200, true, None, None), Length::None);
        // A HEAD's body, if a service made one, still tells the length.
        assert_eq!(length(200, true, None, Some(7)), Length::Known(7));
    }

    #[test]
    fn other_answers_tell_the_body_or_stream_it() {
        assert_eq!(length(200, false, Some(99), Some(3)), Length::Known(3));
        assert_eq!(length(200, false, None, Some(0)), Length::Known(0));
        assert_eq!(length(404, false, None, None), Length::Unknown);
    }

    #[test]
    fn the_connection_owns_framing_persistence_and_date() {
        let name = http::HeaderName::from_static;
        for n in [
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "date",
        ] {
            assert!(connection_field(&name(n)), "{n}");
        }
        for n in [
            "content-type",
            "server",
            "upgrade",
            "te",
            "proxy-connection",
        ] {
            assert!(!connection_field(&name(n)), "{n}");
        }
        let mut headers = http::HeaderMap::new();
        for n in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
            "upgrade",
            "te",
        ] {
            headers.insert(name(n), http::HeaderValue::from_static("x"));
        }
        for n in ["content-length", "date", "server", "content-type"] {
            headers.insert(name(n), http::HeaderValue::from_static("x"));
        }
        remove_connection_specific(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(|n| n.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["content-length", "content-type", "date", "server"]);
    }

    #[test]
    fn the_server_field_line_is_the_server_name() {
        assert_eq!(SERVER_FIELD, format!("Server: {SERVER}\r\n").as_bytes());
    }
}

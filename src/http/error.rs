//! Refusals and the one place that answers them.
//!
//! Every refusal, wherever it is decided (the parser, the static-file
//! pipeline, dispatch, the admin listener), is a [`Refusal`], and
//! [`on_error`] (hyper's `on_error`) turns it into its status and short body
//! here and nowhere else. [`ParseError::status`] is the parser's part of that
//! table; a parse error always closes the connection.

use bytes::Bytes;

use super::chunked;
use super::response::{Body, Response, Status};

/// Why a request head (or its framing) was refused.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("request head larger than {limit} bytes")]
    HeadTooLarge { limit: usize },
    #[error("request line longer than {limit} bytes")]
    UriTooLong { limit: usize },
    #[error("more than {limit} header fields")]
    TooManyHeaders { limit: usize },
    #[error("malformed request head: {0}")]
    Malformed(httparse::Error),
    #[error("Content-Length together with Transfer-Encoding")]
    ContentLengthWithTransferEncoding,
    #[error("Content-Length is not 1*DIGIT")]
    InvalidContentLength,
    #[error("repeated Content-Length with different values")]
    ConflictingContentLength,
    #[error("{count} Host header fields (exactly one required)")]
    BadHost { count: usize },
    #[error("invalid {} authority: {error}", if *in_target { "request-target" } else { "Host" })]
    InvalidHost {
        /// The authority of an absolute-form target, not the Host field.
        in_target: bool,
        error: super::host::Error,
    },
    #[error("Transfer-Encoding on an HTTP/1.0 request")]
    TransferEncodingOnHttp10,
    #[error("Transfer-Encoding is not a list of transfer codings")]
    MalformedTransferEncoding,
    #[error("chunked transfer coding applied more than once")]
    RepeatedChunked,
    #[error("Transfer-Encoding does not end in chunked")]
    TransferEncodingNotChunked,
    #[error("transfer coding other than chunked")]
    UnsupportedTransferEncoding,
    #[error("declared request body of {length} bytes is larger than the body limit")]
    BodyTooLarge { length: u64 },
    /// The chunked body after an accepted head (400, or 413 when too large).
    #[error("chunked body: {0}")]
    Chunked(#[from] chunked::Error),
}

impl ParseError {
    /// The status this error is answered with. Every parse error closes the
    /// connection: after a framing error the byte stream cannot be trusted.
    pub fn status(&self) -> Status {
        match self {
            ParseError::HeadTooLarge { .. } | ParseError::TooManyHeaders { .. } => {
                Status::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            ParseError::UriTooLong { .. } => Status::URI_TOO_LONG,
            ParseError::UnsupportedTransferEncoding => Status::NOT_IMPLEMENTED,
            ParseError::BodyTooLarge { .. }
            | ParseError::Chunked(chunked::Error::TooLarge { .. }) => Status::PAYLOAD_TOO_LARGE,
            ParseError::Malformed(_)
            | ParseError::Chunked(_)
            | ParseError::TransferEncodingOnHttp10
            | ParseError::MalformedTransferEncoding
            | ParseError::RepeatedChunked
            | ParseError::TransferEncodingNotChunked
            | ParseError::ContentLengthWithTransferEncoding
            | ParseError::InvalidContentLength
            | ParseError::ConflictingContentLength
            | ParseError::BadHost { .. }
            | ParseError::InvalidHost { .. } => Status::BAD_REQUEST,
        }
    }
}

/// Methods the static-file service (and the example apps) answer: the
/// `Allow` of their OPTIONS and of every 405.
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// Every way a request is refused, from any layer.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The head, its framing or a chunked body (400, 413, 414, 431, 501).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A method other than GET, HEAD or OPTIONS.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A path that cannot name a file (bad encoding, climbs above the root).
    #[error("bad path")]
    BadPath,
    /// Nothing there (or something we will not reveal).
    #[error("not found")]
    NotFound,
    /// There, but not readable by the server.
    #[error("forbidden")]
    Forbidden,
    /// If-Match / If-Unmodified-Since failed (RFC 9110 §13.1.1, §13.1.4).
    #[error("precondition failed")]
    PreconditionFailed,
    /// No requested range overlaps the representation (RFC 9110 §15.5.17).
    #[error("range not satisfiable")]
    RangeNotSatisfiable,
    /// The server failed (an I/O error, logged where it happened).
    #[error("internal error")]
    Internal,
    /// A request body a service was reading stopped coming for the body
    /// timeout (408, RFC 9110 §15.5.9).
    #[error("request body timed out")]
    BodyTimedOut,
    /// A head the service's request types cannot hold although the parser
    /// took it (a disagreement of two grammars: `app::head::Mismatch`).
    #[error("request head not representable")]
    Unrepresentable,
    /// No site has the request's Host (with `unknown_host = "421"`), or
    /// over TLS the Host names another site than the SNI did (RFC 9110
    /// §15.5.20).
    #[error("misdirected request")]
    Misdirected,
    /// The handler panicked; the worker caught it and keeps serving.
    #[error("handler panicked")]
    HandlerPanicked,
    /// A guarded path without good credentials (RFC 9110 §15.5.2; the
    /// caller adds the challenge).
    #[error("unauthorized")]
    Unauthorized,
    /// A client that failed too often; it may try again later (RFC 6585 §4;
    /// the caller adds `Retry-After`).
    #[error("too many requests")]
    TooManyRequests,
    /// A queue the request needs is full; it may try again shortly (the
    /// caller adds `Retry-After`).
    #[error("busy")]
    Busy,
}

impl Refusal {
    /// The status this refusal is answered with.
    pub fn status(&self) -> Status {
        match self {
            Refusal::Parse(e) => e.status(),
            Refusal::MethodNotAllowed => Status::METHOD_NOT_ALLOWED,
            Refusal::BadPath | Refusal::Unrepresentable => Status::BAD_REQUEST,
            Refusal::BodyTimedOut => Status::REQUEST_TIMEOUT,
            Refusal::NotFound => Status::NOT_FOUND,
            Refusal::Forbidden => Status::FORBIDDEN,
            Refusal::Unauthorized => Status::UNAUTHORIZED,
            Refusal::TooManyRequests => Status::TOO_MANY_REQUESTS,
            Refusal::Busy => Status::SERVICE_UNAVAILABLE,
            Refusal::PreconditionFailed => Status::PRECONDITION_FAILED,
            Refusal::RangeNotSatisfiable => Status::RANGE_NOT_SATISFIABLE,
            Refusal::Misdirected => Status::MISDIRECTED_REQUEST,
            Refusal::Internal | Refusal::HandlerPanicked => Status::INTERNAL_SERVER_ERROR,
        }
    }
}

/// The response to a refusal: its status, a short `text/plain` body naming
/// the status, and the fields the status requires (`Allow` on 405,
/// RFC 9110 §15.5.6). Callers may add representation fields (a 416 adds its
/// `Content-Range`).
pub fn on_error(refusal: &Refusal) -> Response {
    on_error_for(refusal, false)
}

/// [`on_error`]'s answer with its body as a small HTML page when `html`
/// (a client that accepts HTML, [`accepts_html`]: a browser then shows a
/// page, not a line of text in the corner of a blank one); the same
/// status and fields otherwise.
pub fn on_error_for(refusal: &Refusal, html: bool) -> Response {
    let status = refusal.status();
    if let Refusal::Parse(e) = refusal {
        tracing::debug!(error = %e, status = status.code(), "request refused");
    }
    // The reason phrase is the status's own (`Status::reason`).
    let name = match status.reason() {
        "" => "error".to_owned(),
        reason => format!("{} {reason}", status.code()),
    };
    let body = if html {
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{name}</title></head>\n\
             <body><h1>{name}</h1></body></html>\n"
        )
    } else {
        format!("{name}\n")
    };
    let content_type = if html {
        "text/html; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let resp =
        Response::new(status, Body::Bytes(Bytes::from(body))).header("Content-Type", content_type);
    match refusal {
        Refusal::MethodNotAllowed => resp.header("Allow", ALLOW),
        _ => resp,
    }
}

/// Whether an `Accept` value lists `text/html` (or `text/*`) with a
/// quality above zero (RFC 9110 §12.5.1): a browser's navigation does,
/// `curl` (`*/*`) and most API clients do not, so they keep the text
/// answer. A value that cannot be read is no.
pub fn accepts_html(accept: Option<&[u8]>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    accept.split(|&b| b == b',').any(|range| {
        let mut parts = range.split(|&b| b == b';');
        let media = parts.next().unwrap_or_default().trim_ascii();
        let wanted =
            media.eq_ignore_ascii_case(b"text/html") || media.eq_ignore_ascii_case(b"text/*");
        let refused = parts.any(|p| {
            let p = p.trim_ascii();
            p.len() >= 2
                && p[..2].eq_ignore_ascii_case(b"q=")
                && p[2..].iter().all(|&b| b == b'0' || b == b'.')
        });
        wanted && !refused
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_for_clients_that_accept_it() {
        let browser = b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(accepts_html(Some(browser)));
        assert!(accepts_html(Some(b"TEXT/*")));
        assert!(!accepts_html(Some(b"*/*")));
        assert!(!accepts_html(Some(b"application/json")));
        assert!(!accepts_html(Some(b"text/html;q=0, */*")));
        assert!(!accepts_html(Some(b"text/html; q=0.000")));
        assert!(!accepts_html(None));
        let page = on_error_for(&Refusal::NotFound, true);
        let Body::Bytes(b) = &page.body else {
            panic!("a page")
        };
        assert!(b.starts_with(b"<!doctype html>"), "{b:?}");
        assert!(b.windows(13).any(|w| w == b"404 Not Found"));
        let crate::http::Fields::List(f) = &page.fields else {
            panic!("fields")
        };
        assert!(f
            .iter()
            .any(|(n, v)| n == "Content-Type" && v.starts_with("text/html")));
        let text = on_error_for(&Refusal::MethodNotAllowed, false);
        let Body::Bytes(b) = &text.body else {
            panic!("text")
        };
        assert_eq!(&b[..], b"405 Method Not Allowed\n");
    }

    #[test]
    fn limits_map_to_431_and_414() {
        assert_eq!(
            ParseError::HeadTooLarge { limit: 1 }.status(),
            Status::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        assert_eq!(
            ParseError::TooManyHeaders { limit: 1 }.status(),
            Status::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        assert_eq!(
            ParseError::UriTooLong { limit: 1 }.status(),
            Status::URI_TOO_LONG
        );
        assert_eq!(
            ParseError::ContentLengthWithTransferEncoding.status(),
            Status::BAD_REQUEST
        );
    }

    #[test]
    fn framing_errors_map_to_400_413_and_501() {
        for (e, code) in [
            (ParseError::TransferEncodingOnHttp10, 400),
            (ParseError::MalformedTransferEncoding, 400),
            (ParseError::RepeatedChunked, 400),
            (ParseError::TransferEncodingNotChunked, 400),
            (ParseError::UnsupportedTransferEncoding, 501),
            (ParseError::BodyTooLarge { length: 2 }, 413),
            (ParseError::Chunked(chunked::Error::SizeOverflow), 400),
            (ParseError::Chunked(chunked::Error::BareLf), 400),
            (
                ParseError::Chunked(chunked::Error::TooLarge { limit: 1 }),
                413,
            ),
        ] {
            assert_eq!(e.status().code(), code, "{e}");
            let resp = on_error(&Refusal::Parse(e));
            assert_eq!(resp.status.code(), code);
        }
    }

    #[test]
    fn every_refusal_gets_its_status_and_a_body_naming_it() {
        for (r, code) in [
            (Refusal::MethodNotAllowed, 405),
            (Refusal::BadPath, 400),
            (Refusal::NotFound, 404),
            (Refusal::Forbidden, 403),
            (Refusal::PreconditionFailed, 412),
            (Refusal::RangeNotSatisfiable, 416),
            (Refusal::Internal, 500),
            (Refusal::BodyTimedOut, 408),
            (Refusal::Unrepresentable, 400),
            (Refusal::Parse(ParseError::BodyTooLarge { length: 9 }), 413),
        ] {
            let resp = on_error(&r);
            assert_eq!(resp.status.code(), code);
            let Body::Bytes(b) = &resp.body else {
                panic!("no body for {code}")
            };
            assert!(b.starts_with(code.to_string().as_bytes()));
        }
    }

    #[test]
    fn method_not_allowed_says_what_is_allowed() {
        let resp = on_error(&Refusal::MethodNotAllowed);
        let super::super::response::Fields::List(fields) = &resp.fields else {
            unreachable!()
        };
        assert!(fields.iter().any(|(n, v)| n == "Allow" && v == ALLOW));
    }
}

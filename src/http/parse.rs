//! The I/O-free request-head parser.
//!
//! `parse` takes the bytes buffered so far and answers `Ok(None)` when more
//! bytes are needed, `Ok(Some((head, consumed)))` for one complete head, or a
//! `ParseError` that the connection turns into a status (see `http::error`).
//! httparse does the tokenising; the framing rules of RFC 9112 that httparse
//! leaves to its caller are enforced here, so they are unit-tested without a
//! socket (those tests are half of this file). That includes the Host rules
//! (RFC 9112 §3.2, §3.2.2): exactly one Host field on 1.1, its value in the
//! authority grammar (`http::host`), and an absolute-form target's authority
//! taking the Host field's place. And the framing rules (RFC 9112 §6.1,
//! §6.3): Content-Length is `1*DIGIT` and repeats agree; Transfer-Encoding
//! is a list of codings that, in a request, must end in one `chunked` (the
//! only coding we decode), never on HTTP/1.0 and never beside a
//! Content-Length. What survives is recorded in [`Head`] for `http::body`.

use super::error::ParseError;
use super::host;
use super::token::{is_tchar, trim_ows};

/// Bounds on a request head, from the validated config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest head (request line + headers + blank line) accepted → else 431.
    pub max_head_bytes: usize,
    /// Largest request line accepted → else 414.
    pub max_request_line_bytes: usize,
    /// Most header fields accepted → else 431.
    pub max_headers: usize,
}

/// nginx accepts 4 × 8 KiB header buffers; 16 KiB heads cover real browsers
/// with large cookies while bounding per-connection memory.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 * 1024;
/// A request line longer than one nginx large header buffer is a 414.
pub const DEFAULT_MAX_REQUEST_LINE_BYTES: usize = 8 * 1024;
/// Browsers send ~20 fields; 100 leaves room and bounds parse work (hyper's
/// default is 100 as well).
pub const DEFAULT_MAX_HEADERS: usize = 100;

/// Hard ceiling on `max_headers`: the parser's header array lives on the stack.
pub const MAX_HEADERS_CEILING: usize = 256;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_request_line_bytes: DEFAULT_MAX_REQUEST_LINE_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
        }
    }
}

/// Request methods the server distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Options,
    /// Any other syntactically valid method: answered with 405.
    Other,
}

/// HTTP minor version: 1.0 or 1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// What a request's Transfer-Encoding leaves for framing, once `parse` has
/// refused every list it cannot frame (RFC 9112 §6.1, §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferEncoding {
    /// No Transfer-Encoding field: Content-Length (or nothing) frames the body.
    Absent,
    /// The codings are exactly `chunked`: the body is chunked (§7.1).
    Chunked,
}

/// One parsed request head, borrowing the connection's read buffer.
#[derive(Debug)]
pub struct Head<'a> {
    pub method: Method,
    /// The method token as sent (for logs and `Other`).
    pub method_token: &'a str,
    /// The request-target exactly as sent (origin-form path and query, or `*`).
    pub target: &'a [u8],
    pub version: Version,
    /// All header fields in order.
    pub headers: Vec<(&'a str, &'a [u8])>,
    /// The authority the request is for, validated (`http::host`): the
    /// authority of an absolute-form target if there is one (RFC 9112
    /// §3.2.2), else the one Host value (RFC 9112 §3.2), if present.
    pub host: Option<&'a [u8]>,
    /// Declared body length (validated: 1*DIGIT, repeats agree).
    pub content_length: Option<u64>,
    /// The Transfer-Encoding, validated (ends in one `chunked`, nothing
    /// before it, no Content-Length beside it, not on HTTP/1.0).
    pub transfer_encoding: TransferEncoding,
    /// The client asked to keep the connection open (after version defaults).
    pub keep_alive: bool,
}

impl<'a> Head<'a> {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &'a [u8] {
        match self.target.iter().position(|&b| b == b'?') {
            Some(i) => &self.target[..i],
            None => self.target,
        }
    }

    /// The target's query (after `?`), if any.
    pub fn query(&self) -> Option<&'a [u8]> {
        self.target
            .iter()
            .position(|&b| b == b'?')
            .map(|i| &self.target[i + 1..])
    }
}

/// Parse one request head from the start of `buf`.
///
/// Returns `Ok(None)` when the head is incomplete and still within limits.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(Head<'a>, usize)>, ParseError> {
    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the
    // request line. We skip any number of them (bounded by the head limit).
    let leading = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let rest = &buf[leading..];

    let line_end = memchr_newline(rest);
    match line_end {
        None if rest.len() > limits.max_request_line_bytes => {
            return Err(ParseError::UriTooLong {
                limit: limits.max_request_line_bytes,
            })
        }
        Some(end) if end > limits.max_request_line_bytes => {
            return Err(ParseError::UriTooLong {
                limit: limits.max_request_line_bytes,
            })
        }
        _ => {}
    }

    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CEILING];
    let max = limits.max_headers.min(MAX_HEADERS_CEILING);
    let mut req = httparse::Request::new(&mut storage[..max]);
    let status = match req.parse(rest) {
        Ok(s) => s,
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ParseError::TooManyHeaders {
                limit: limits.max_headers,
            })
        }
        Err(e) => return Err(ParseError::Malformed(e)),
    };
    let head_len = match status {
        httparse::Status::Partial => {
            if buf.len() > limits.max_head_bytes {
                return Err(ParseError::HeadTooLarge {
                    limit: limits.max_head_bytes,
                });
            }
            return Ok(None);
        }
        httparse::Status::Complete(n) => n,
    };
    if leading + head_len > limits.max_head_bytes {
        return Err(ParseError::HeadTooLarge {
            limit: limits.max_head_bytes,
        });
    }

    let method_token = req.method.unwrap_or("");
    let method = match method_token {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "OPTIONS" => Method::Options,
        _ => Method::Other,
    };
    let (target_authority, target) = origin_form(req.path.unwrap_or("").as_bytes());
    let version = match req.version {
        Some(0) => Version::Http10,
        _ => Version::Http11,
    };

    let mut headers = Vec::with_capacity(req.headers.len());
    let mut host_field = None;
    let mut host_count = 0usize;
    let mut content_length: Option<u64> = None;
    let mut codings = Codings::default();
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    for h in req.headers.iter() {
        let value = trim_ows(h.value);
        headers.push((h.name, value));
        if h.name.eq_ignore_ascii_case("host") {
            host_count += 1;
            host_field = Some(value);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 §6.3: a list of identical values may be taken as one;
            // anything else is an unrecoverable framing error.
            for part in value.split(|&b| b == b',') {
                let n = parse_content_length(trim_ows(part))?;
                match content_length {
                    Some(prev) if prev != n => return Err(ParseError::ConflictingContentLength),
                    _ => content_length = Some(n),
                }
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            codings.add(value);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',') {
                let token = trim_ows(token);
                if token.eq_ignore_ascii_case(b"close") {
                    conn_close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    conn_keep_alive = true;
                }
            }
        }
    }

    // RFC 9112 §6.1: Transfer-Encoding with Content-Length is a smuggling
    // vector; answer 400 and close.
    if codings.seen && content_length.is_some() {
        return Err(ParseError::ContentLengthWithTransferEncoding);
    }
    // RFC 9112 §6.1: a Transfer-Encoding in an HTTP/1.0 message MUST be
    // treated as faulty framing (1.0 has no chunked coding to end a body).
    if codings.seen && version == Version::Http10 {
        return Err(ParseError::TransferEncodingOnHttp10);
    }
    let transfer_encoding = codings.framing()?;
    // RFC 9112 §3.2: a 1.1 request without exactly one Host is a 400.
    if version == Version::Http11 && host_count != 1 {
        return Err(ParseError::BadHost { count: host_count });
    }
    if host_count > 1 {
        return Err(ParseError::BadHost { count: host_count });
    }
    // RFC 9112 §3.2: a Host field with an invalid value is a 400. It is
    // checked even when an absolute-form target overrides it below: the
    // message is malformed either way, and a proxy in front may have read it.
    if let Some(value) = host_field {
        host::validate(value).map_err(|error| ParseError::InvalidHost {
            in_target: false,
            error,
        })?;
    }
    // RFC 9112 §3.2.2: with an absolute-form target the server MUST ignore
    // the Host field and use the target's authority instead.
    let host = match target_authority {
        Some(authority) => {
            host::validate_uri(authority).map_err(|error| ParseError::InvalidHost {
                in_target: true,
                error,
            })?;
            Some(authority)
        }
        None => host_field,
    };
    // RFC 9112 §9.3: 1.1 defaults to persistent, 1.0 needs keep-alive.
    let keep_alive = !conn_close
        && match version {
            Version::Http11 => true,
            Version::Http10 => conn_keep_alive,
        };

    Ok(Some((
        Head {
            method,
            method_token,
            target,
            version,
            headers,
            host,
            content_length,
            transfer_encoding,
            keep_alive,
        },
        leading + head_len,
    )))
}

/// RFC 9112 §3.2.2: a server MUST accept the absolute-form
/// (`http://host/path`); we serve its path and query (origin-form). Returns
/// the authority (unchecked; `None` for any other form) and that origin-form.
fn origin_form(target: &[u8]) -> (Option<&[u8]>, &[u8]) {
    let lower: Vec<u8> = target.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let scheme = if lower.starts_with(b"http://") {
        7
    } else if lower.starts_with(b"https://") {
        8
    } else {
        return (None, target);
    };
    let rest = &target[scheme..];
    match rest.iter().position(|&b| b == b'/' || b == b'?') {
        Some(i) if rest[i] == b'/' => (Some(&rest[..i]), &rest[i..]),
        // `http://host` or `http://host?q`: the path is empty, i.e. `/`.
        Some(i) => (Some(&rest[..i]), b"/"),
        None => (Some(rest), b"/"),
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// RFC 9112 §6.3: Content-Length = 1*DIGIT; no sign, no spaces, no overflow.
fn parse_content_length(v: &[u8]) -> Result<u64, ParseError> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::InvalidContentLength);
    }
    v.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::InvalidContentLength)
    })
}

/// Every transfer coding of a request's Transfer-Encoding fields, seen in
/// order (several fields combine as one list: RFC 9110 §5.3), reduced to
/// what the framing rules ask of them.
#[derive(Debug, Default)]
struct Codings {
    /// A Transfer-Encoding field was present.
    seen: bool,
    /// How many codings were named `chunked`.
    chunked: usize,
    /// The last coding was `chunked` (without parameters).
    last_is_chunked: bool,
    /// A coding other than `chunked` came.
    other: bool,
    /// An element that is not `token *( OWS ";" ... )`, or a `chunked`
    /// with parameters (it defines none).
    malformed: bool,
}

impl Codings {
    /// Add one field value: `#transfer-coding` (RFC 9112 §6.1), where
    /// `transfer-coding = token *( OWS ";" OWS transfer-parameter )`.
    fn add(&mut self, value: &[u8]) {
        self.seen = true;
        for element in value.split(|&b| b == b',') {
            let element = trim_ows(element);
            // RFC 9110 §5.6.1.2: empty list elements are ignored.
            if element.is_empty() {
                continue;
            }
            let (name, params) = match element.iter().position(|&b| b == b';') {
                Some(i) => (trim_ows(&element[..i]), true),
                None => (element, false),
            };
            if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
                self.malformed = true;
            }
            // RFC 9112 §7: transfer coding names are case-insensitive.
            self.last_is_chunked = name.eq_ignore_ascii_case(b"chunked");
            if self.last_is_chunked {
                self.chunked += 1;
                self.malformed |= params;
                self.last_is_chunked = !params;
            } else {
                self.other = true;
            }
        }
    }

    /// The framing the list allows, or why it is refused.
    fn framing(&self) -> Result<TransferEncoding, ParseError> {
        if !self.seen {
            return Ok(TransferEncoding::Absent);
        }
        if self.malformed {
            return Err(ParseError::MalformedTransferEncoding);
        }
        // RFC 9112 §7: a sender MUST NOT apply chunked more than once.
        if self.chunked > 1 {
            return Err(ParseError::RepeatedChunked);
        }
        // RFC 9112 §6.3: in a request whose final coding is not chunked the
        // body length cannot be determined reliably: 400, then close.
        if !self.last_is_chunked {
            return Err(ParseError::TransferEncodingNotChunked);
        }
        // RFC 9112 §6.1: a coding the server does not understand SHOULD be
        // a 501; we decode chunked only.
        if self.other {
            return Err(ParseError::UnsupportedTransferEncoding);
        }
        Ok(TransferEncoding::Chunked)
    }
}

#[cfg(test)]
mod tests;

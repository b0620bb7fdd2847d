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
//! taking the Host field's place.

use super::error::ParseError;
use super::host;

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
    /// Transfer-Encoding was present (we accept no request bodies with it).
    pub transfer_encoding: bool,
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
    let mut transfer_encoding = false;
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
            transfer_encoding = true;
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
    if transfer_encoding && content_length.is_some() {
        return Err(ParseError::ContentLengthWithTransferEncoding);
    }
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

/// Strip optional whitespace (RFC 9110 §5.6.3: SP and HTAB) at both ends.
pub(crate) fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_head_bytes: 1024,
            max_request_line_bytes: 256,
            max_headers: 8,
        }
    }

    fn ok(buf: &[u8]) -> (Head<'_>, usize) {
        parse(buf, &limits()).unwrap().unwrap()
    }

    #[test]
    fn parses_simple_get() {
        let buf = b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\nrest";
        let (h, n) = ok(buf);
        assert_eq!(n, buf.len() - 4);
        assert_eq!(h.method, Method::Get);
        assert_eq!(h.path(), b"/a");
        assert_eq!(h.query(), Some(&b"b=1"[..]));
        assert!(h.keep_alive);
        assert_eq!(h.host, Some(&b"x"[..]));
    }

    #[test]
    fn partial_head_needs_more() {
        assert!(parse(b"GET / HTTP/1.1\r\nHost:", &limits())
            .unwrap()
            .is_none());
    }

    #[test]
    fn long_request_line_is_uri_too_long() {
        let mut buf = b"GET /".to_vec();
        buf.extend(std::iter::repeat_n(b'a', 300));
        assert!(matches!(
            parse(&buf, &limits()),
            Err(ParseError::UriTooLong { .. })
        ));
        buf.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(
            parse(&buf, &limits()),
            Err(ParseError::UriTooLong { .. })
        ));
    }

    #[test]
    fn oversized_head_is_431() {
        let mut buf = b"GET / HTTP/1.1\r\nX: ".to_vec();
        buf.extend(std::iter::repeat_n(b'a', 2000));
        assert!(matches!(
            parse(&buf, &limits()),
            Err(ParseError::HeadTooLarge { .. })
        ));
    }

    #[test]
    fn too_many_headers_is_431() {
        let mut buf = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..9 {
            buf.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse(&buf, &limits()),
            Err(ParseError::TooManyHeaders { .. })
        ));
    }

    #[test]
    fn content_length_with_transfer_encoding_is_rejected() {
        let buf =
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(
            parse(buf, &limits()),
            Err(ParseError::ContentLengthWithTransferEncoding)
        ));
    }

    #[test]
    fn non_digit_content_length_is_rejected() {
        for v in ["+1", "-1", "1 2", "0x10", "", "99999999999999999999999"] {
            let buf = format!("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: {v}\r\n\r\n");
            assert!(
                matches!(
                    parse(buf.as_bytes(), &limits()),
                    Err(ParseError::InvalidContentLength)
                ),
                "{v}"
            );
        }
    }

    #[test]
    fn repeated_content_length_must_agree() {
        let same = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(ok(same).0.content_length, Some(3));
        let diff = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
        assert!(matches!(
            parse(diff, &limits()),
            Err(ParseError::ConflictingContentLength)
        ));
        let list = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\n";
        assert!(matches!(
            parse(list, &limits()),
            Err(ParseError::ConflictingContentLength)
        ));
    }

    #[test]
    fn missing_or_repeated_host_on_11_is_rejected() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n", &limits()),
            Err(ParseError::BadHost { count: 0 })
        ));
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &limits()),
            Err(ParseError::BadHost { count: 2 })
        ));
        assert!(ok(b"GET / HTTP/1.0\r\n\r\n").0.host.is_none());
    }

    #[test]
    fn keep_alive_defaults_follow_version() {
        assert!(!ok(b"GET / HTTP/1.0\r\n\r\n").0.keep_alive);
        assert!(
            ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(
            !ok(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .0
                .keep_alive
        );
    }

    #[test]
    fn rejects_obs_fold() {
        let buf = b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n";
        assert!(matches!(
            parse(buf, &limits()),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn skips_leading_empty_lines() {
        let buf = b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (_, n) = ok(buf);
        assert_eq!(n, buf.len());
    }

    #[test]
    fn absolute_form_becomes_origin_form() {
        let (h, _) = ok(b"GET http://example.com/a/b?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        assert_eq!(h.target, b"/a/b?q=1");
        let (h, _) = ok(b"GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
        assert_eq!(h.target, b"/");
    }

    fn host_error(buf: &[u8]) -> (bool, host::Error) {
        match parse(buf, &limits()) {
            Err(ParseError::InvalidHost { in_target, error }) => (in_target, error),
            other => panic!("expected InvalidHost, got {other:?}"),
        }
    }

    #[test]
    fn valid_host_forms_are_accepted() {
        for value in [
            "example.com",
            "example.com:8080",
            "127.0.0.1",
            "[::1]:80",
            "host:",
            "[v1.x]",
        ] {
            let buf = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
            let (h, _) = ok(buf.as_bytes());
            assert_eq!(h.host, Some(value.as_bytes()), "{value}");
        }
    }

    #[test]
    fn empty_host_value_is_accepted() {
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
        assert_eq!(h.host, Some(&b""[..]));
    }

    #[test]
    fn host_value_is_validated_after_trimming_ows() {
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: \t example.com:80 \t\r\n\r\n");
        assert_eq!(h.host, Some(&b"example.com:80"[..]));
    }

    #[test]
    fn invalid_host_value_is_rejected() {
        for (value, want) in [
            ("user@example.com", host::Error::UserInfo { at: 4 }),
            ("example.com/x", host::Error::Path { byte: b'/', at: 11 }),
            ("a, b", host::Error::List { at: 1 }),
            ("a b", host::Error::BadChar { byte: b' ', at: 1 }),
            (
                "example.com:http",
                host::Error::BadPort { byte: b'h', at: 12 },
            ),
            (
                "example.com:65536",
                host::Error::PortOutOfRange { value: 65536 },
            ),
            ("[::1", host::Error::UnbalancedBracket { at: 0 }),
        ] {
            let buf = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
            assert_eq!(host_error(buf.as_bytes()), (false, want), "{value}");
        }
    }

    #[test]
    fn invalid_host_is_400() {
        let err = parse(b"GET / HTTP/1.1\r\nHost: u@x\r\n\r\n", &limits()).unwrap_err();
        assert_eq!(err.status(), crate::http::Status::BAD_REQUEST);
        assert_eq!(
            err.to_string(),
            "invalid Host authority: `@` at byte 1: userinfo is not allowed"
        );
    }

    #[test]
    fn invalid_host_on_10_is_rejected() {
        assert_eq!(
            host_error(b"GET / HTTP/1.0\r\nHost: a/b\r\n\r\n"),
            (false, host::Error::Path { byte: b'/', at: 1 })
        );
    }

    #[test]
    fn host_count_is_checked_before_the_value() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost: a b\r\nHost: c\r\n\r\n", &limits()),
            Err(ParseError::BadHost { count: 2 })
        ));
    }

    #[test]
    fn absolute_form_authority_wins_over_host() {
        let (h, _) = ok(b"GET http://example.com/file.txt HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!(h.host, Some(&b"example.com"[..]));
        assert_eq!(h.target, b"/file.txt");
        let (h, _) = ok(b"GET https://[::1]:8443?q HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!(h.host, Some(&b"[::1]:8443"[..]));
        assert_eq!(h.target, b"/");
        let (h, _) = ok(b"GET http://example.com:8080 HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!(h.host, Some(&b"example.com:8080"[..]));
    }

    #[test]
    fn absolute_form_on_10_needs_no_host_field() {
        let (h, _) = ok(b"GET http://example.com/a HTTP/1.0\r\n\r\n");
        assert_eq!(h.host, Some(&b"example.com"[..]));
    }

    #[test]
    fn absolute_form_with_bad_authority_is_rejected() {
        for (target, want) in [
            ("http://u@x/file.txt", host::Error::UserInfo { at: 1 }),
            ("http://u:p@x/", host::Error::UserInfo { at: 3 }),
            (
                "http://x:99999/",
                host::Error::PortOutOfRange { value: 99999 },
            ),
            ("http://x:8o/", host::Error::BadPort { byte: b'o', at: 3 }),
            ("http://[::1/", host::Error::UnbalancedBracket { at: 0 }),
            ("http://x,y/", host::Error::List { at: 1 }),
            // RFC 9110 §4.2.1: an http URI's host must not be empty.
            ("http:///file.txt", host::Error::EmptyHost),
            ("http://:80/", host::Error::EmptyHost),
        ] {
            let buf = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(host_error(buf.as_bytes()), (true, want), "{target}");
        }
    }

    #[test]
    fn absolute_form_still_needs_exactly_one_host_on_11() {
        assert!(matches!(
            parse(b"GET http://example.com/ HTTP/1.1\r\n\r\n", &limits()),
            Err(ParseError::BadHost { count: 0 })
        ));
    }

    #[test]
    fn host_field_is_validated_even_with_absolute_form() {
        assert_eq!(
            host_error(b"GET http://example.com/ HTTP/1.1\r\nHost: a b\r\n\r\n"),
            (false, host::Error::BadChar { byte: b' ', at: 1 })
        );
    }

    #[test]
    fn origin_form_has_no_authority() {
        assert_eq!(origin_form(b"/a?b"), (None, &b"/a?b"[..]));
        assert_eq!(origin_form(b"*"), (None, &b"*"[..]));
        assert_eq!(
            origin_form(b"HTTP://h:1/p"),
            (Some(&b"h:1"[..]), &b"/p"[..])
        );
    }

    #[test]
    fn other_methods_are_other() {
        let (h, _) = ok(b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(h.method, Method::Other);
        assert_eq!(h.method_token, "DELETE");
    }
}

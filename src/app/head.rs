//! A request head in the `http` crate's types, for services that want them.
//!
//! Owns turning the parser's borrowed [`Head`] into an owned
//! [`http::request::Parts`] without copying the bytes it points into: the
//! connection freezes the bytes of the head into one [`Bytes`], and the
//! target and every field value become slices of it (reference counted,
//! not copied). Field names are interned by `http` when standard, copied
//! otherwise (they are short). Only app services get this: building it costs
//! ~0.37 µs for a six-field head (docs/decisions/0006), which the static
//! files, reading the borrowed head, never pay.
//!
//! Does not own validation: the head was parsed and validated by
//! `http::parse` (tokens, field syntax, Host), so a value `http` would
//! refuse is a disagreement between the two grammars, reported as
//! [`Mismatch`] and answered 400 by the caller.

use bytes::Bytes;

use crate::http::{Head, Method, TransferEncoding, Version};

/// The head holds something the `http` crate's types refuse although
/// `http::parse` accepted it (answered 400).
#[derive(Debug, thiserror::Error)]
#[error("request head not representable in http types: {what}")]
pub struct Mismatch {
    pub what: &'static str,
}

/// The owned head of `head`, whose slices point into `bytes`. A slice that
/// is not inside `bytes` (a caller that parsed another buffer) is copied
/// rather than trusted.
pub fn to_parts(head: &Head<'_>, bytes: &Bytes) -> Result<http::request::Parts, Mismatch> {
    let shared = |s: &[u8]| -> Bytes {
        let inside = bytes.as_ptr_range();
        let range = s.as_ptr_range();
        if s.is_empty() || (inside.start <= range.start && range.end <= inside.end) {
            bytes.slice_ref(s)
        } else {
            Bytes::copy_from_slice(s)
        }
    };
    let method = http::Method::from_bytes(head.method_token.as_bytes())
        .map_err(|_| Mismatch { what: "method" })?;
    let uri = http::Uri::from_maybe_shared(shared(head.target))
        .map_err(|_| Mismatch { what: "target" })?;
    let mut headers = http::HeaderMap::with_capacity(head.headers.len());
    for (name, value) in &head.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Mismatch { what: "field name" })?;
        let value = http::HeaderValue::from_maybe_shared(shared(value)).map_err(|_| Mismatch {
            what: "field value",
        })?;
        headers.append(name, value);
    }
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = match head.version {
        Version::Http10 => http::Version::HTTP_10,
        Version::Http11 => http::Version::HTTP_11,
    };
    parts.headers = headers;
    Ok(parts)
}

/// The parser's view of an owned head, borrowing it: for services that
/// answer from a [`Head`] (the static files) when they are called with a
/// `Request` (composed into an app) rather than from the read buffer. The
/// body is the caller's, so the head says it has none.
pub fn borrow(parts: &http::request::Parts) -> Head<'_> {
    let token = parts.method.as_str();
    let method = match parts.method {
        http::Method::GET => Method::Get,
        http::Method::HEAD => Method::Head,
        http::Method::OPTIONS => Method::Options,
        _ => Method::Other,
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let headers: Vec<(&str, &[u8])> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let host = parts
        .uri
        .authority()
        .map(|a| a.as_str().as_bytes())
        .or_else(|| parts.headers.get(http::header::HOST).map(|v| v.as_bytes()));
    Head {
        method,
        method_token: token,
        target: target.as_bytes(),
        version: if parts.version == http::Version::HTTP_10 {
            Version::Http10
        } else {
            Version::Http11
        },
        headers,
        host,
        content_length: None,
        transfer_encoding: TransferEncoding::Absent,
        keep_alive: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{parse, Limits};

    fn parts_of(raw: &'static [u8]) -> (http::request::Parts, Bytes) {
        let bytes = Bytes::from_static(raw);
        let (head, _) = parse(&bytes, &Limits::default()).unwrap().unwrap();
        (to_parts(&head, &bytes).unwrap(), bytes)
    }

    #[test]
    fn method_target_version_and_fields_carry_over_in_order() {
        let (p, _) = parts_of(
            b"POST /up/load?x=1 HTTP/1.0\r\nHost: a.example\r\nX-Tag: one\r\nx-tag: two\r\n\r\n",
        );
        assert_eq!(p.method, http::Method::POST);
        assert_eq!(p.uri.path(), "/up/load");
        assert_eq!(p.uri.query(), Some("x=1"));
        assert_eq!(p.version, http::Version::HTTP_10);
        assert_eq!(p.headers["host"], "a.example");
        let tags: Vec<_> = p.headers.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["one", "two"]);
    }

    #[test]
    fn values_and_target_point_into_the_read_bytes() {
        let (p, bytes) = parts_of(b"GET /a HTTP/1.1\r\nHost: h\r\nUser-Agent: probe/1\r\n\r\n");
        let inside = bytes.as_ptr_range();
        let agent = p.headers["user-agent"].as_bytes().as_ptr_range();
        assert!(
            inside.start <= agent.start && agent.end <= inside.end,
            "copied"
        );
    }

    #[test]
    fn an_unknown_method_and_the_asterisk_target_are_kept() {
        let (p, _) = parts_of(b"BREW * HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(p.method.as_str(), "BREW");
        assert_eq!(p.uri, "*");
    }

    #[test]
    fn an_owned_head_reads_back_as_the_parsed_one() {
        let (p, bytes) =
            parts_of(b"OPTIONS /a/b?q=1 HTTP/1.1\r\nHost: h.example\r\nAccept: */*\r\n\r\n");
        let (parsed, _) = parse(&bytes, &Limits::default()).unwrap().unwrap();
        let head = borrow(&p);
        assert_eq!(head.method, Method::Options);
        assert_eq!(head.target, parsed.target);
        assert_eq!(head.path(), b"/a/b");
        assert_eq!(head.host, Some(&b"h.example"[..]));
        assert_eq!(head.header("accept"), Some(&b"*/*"[..]));
    }

    #[test]
    fn slices_from_another_buffer_are_copied_not_trusted() {
        let raw = b"GET /elsewhere HTTP/1.1\r\nHost: h\r\n\r\n".to_vec();
        let (head, _) = parse(&raw, &Limits::default()).unwrap().unwrap();
        let unrelated = Bytes::from_static(b"nothing to do with it");
        let p = to_parts(&head, &unrelated).unwrap();
        assert_eq!(p.uri.path(), "/elsewhere");
        assert_eq!(p.headers["host"], "h");
    }
}

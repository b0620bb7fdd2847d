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

/// The header fields of a parsed head, kept as offsets into the received
/// bytes until someone asks for them as a [`http::HeaderMap`]: building the
/// map costs more than the rest of the owned head, and many services (the
/// app benchmark's among them) never read a field.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    bytes: Bytes,
    /// `(name start, name end, value start, value end)` in `bytes`.
    spans: Vec<[u32; 4]>,
}

impl Fields {
    /// The fields of `head`, whose slices point into `bytes` (a field that
    /// does not is copied, as [`to_parts`] does).
    pub fn of(head: &Head<'_>, bytes: &Bytes) -> Fields {
        let inside = bytes.as_ptr_range();
        let base = inside.start as usize;
        let span = |s: &[u8]| -> Option<[u32; 2]> {
            let r = s.as_ptr_range();
            if inside.start <= r.start && r.end <= inside.end {
                Some([
                    (r.start as usize - base) as u32,
                    (r.end as usize - base) as u32,
                ])
            } else {
                None
            }
        };
        let mut spans = Vec::with_capacity(head.headers.len());
        for (name, value) in &head.headers {
            match (span(name.as_bytes()), span(value)) {
                (Some([ns, ne]), Some([vs, ve])) => spans.push([ns, ne, vs, ve]),
                // Not from `bytes`: copy the whole head's fields instead.
                _ => return Fields::copied(head),
            }
        }
        Fields {
            bytes: bytes.clone(),
            spans,
        }
    }

    fn copied(head: &Head<'_>) -> Fields {
        let mut buf = Vec::new();
        let mut spans = Vec::with_capacity(head.headers.len());
        for (name, value) in &head.headers {
            let ns = buf.len() as u32;
            buf.extend_from_slice(name.as_bytes());
            let vs = buf.len() as u32;
            buf.extend_from_slice(value);
            spans.push([ns, vs, vs, buf.len() as u32]);
        }
        Fields {
            bytes: Bytes::from(buf),
            spans,
        }
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The fields as a map; values are slices of the received bytes.
    pub fn to_map(&self) -> Result<http::HeaderMap, Mismatch> {
        let mut headers = http::HeaderMap::with_capacity(self.spans.len());
        for &[ns, ne, vs, ve] in &self.spans {
            let name = http::HeaderName::from_bytes(&self.bytes[ns as usize..ne as usize])
                .map_err(|_| Mismatch { what: "field name" })?;
            let value =
                http::HeaderValue::from_maybe_shared(self.bytes.slice(vs as usize..ve as usize))
                    .map_err(|_| Mismatch {
                        what: "field value",
                    })?;
            headers.append(name, value);
        }
        Ok(headers)
    }
}

/// The owned head of `head` without its fields (`parts.headers` is empty:
/// they are [`Fields`]), whose target points into `bytes`.
pub fn to_parts_lazy(head: &Head<'_>, bytes: &Bytes) -> Result<http::request::Parts, Mismatch> {
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
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = match head.version {
        Version::Http10 => http::Version::HTTP_10,
        Version::Http11 => http::Version::HTTP_11,
    };
    Ok(parts)
}

/// The owned head of `head`, whose slices point into `bytes`. A slice that
/// is not inside `bytes` (a caller that parsed another buffer) is copied
/// rather than trusted.
pub fn to_parts(head: &Head<'_>, bytes: &Bytes) -> Result<http::request::Parts, Mismatch> {
    let mut parts = to_parts_lazy(head, bytes)?;
    parts.headers = Fields::of(head, bytes).to_map()?;
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
    fn lazy_fields_build_the_same_map() {
        let (p, bytes) = parts_of(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\n\r\n");
        let (head, _) = parse(&bytes, &Limits::default()).unwrap().unwrap();
        let fields = Fields::of(&head, &bytes);
        assert_eq!(fields.len(), 3);
        assert_eq!(fields.to_map().unwrap(), p.headers);
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec();
        let (head, _) = parse(&raw, &Limits::default()).unwrap().unwrap();
        let copied = Fields::of(&head, &Bytes::from_static(b"unrelated"));
        assert_eq!(copied.to_map().unwrap()["host"], "h");
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

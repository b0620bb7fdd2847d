//! A request's head read from the fields our HPACK decoder wrote: as the
//! parser's borrowed [`Head`] for the static files ([`view`]: no map, no
//! copy), and as the `http` crate's types for an app's call ([`parts`]: the
//! list's bytes become one [`Bytes`] and the target, the authority and every
//! field value are slices of it, reference counted, not copied; names are
//! interned by `http` when standard).
//!
//! Does not own validation: `http::h2::request` checked the pseudo-header
//! fields and names; what `http` still refuses (a byte its `HeaderValue` or
//! `Uri` does not take) makes the request malformed (RST_STREAM
//! PROTOCOL_ERROR, RFC 9113 §8.1.1).

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};

use super::super::fields::authority_check;
use crate::http::h2::RequestHead;
use crate::http::{Head, Method, ParseError, TransferEncoding, Version};

/// The request as the parser's borrowed head: method, `:path` as the
/// target, the regular fields, and `:authority` (else `host`) as the host.
/// `Err` for a method that is not UTF-8 (answered 400).
pub(super) fn view(head: &RequestHead) -> Result<Head<'_>, ()> {
    let list = &head.fields;
    let p = &head.pseudo;
    let value = |i: Option<usize>| i.map(|i| list.get(i).1);
    let token = std::str::from_utf8(value(p.method).ok_or(())?).map_err(|_| ())?;
    let method = match token {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "OPTIONS" => Method::Options,
        _ => Method::Other,
    };
    let mut headers = Vec::with_capacity(list.len() - p.first_field);
    let mut host = None;
    for i in p.first_field..list.len() {
        let (name, value) = list.get(i);
        // Names were checked to be lowercase tokens (`http::h2::request`).
        let name = std::str::from_utf8(name).map_err(|_| ())?;
        if host.is_none() && name == "host" {
            host = Some(value);
        }
        headers.push((name, value));
    }
    Ok(Head {
        method,
        method_token: token,
        target: value(p.path).unwrap_or(b"/"),
        version: Version::Http11,
        headers,
        host: value(p.authority).or(host),
        content_length: p.content_length,
        transfer_encoding: TransferEncoding::Absent,
        keep_alive: true,
    })
}

/// Why the request's authority is refused (`fields::authority_check`).
pub(super) fn authority_error(head: &RequestHead, view: &Head<'_>) -> Option<ParseError> {
    let pseudo = head.pseudo.authority.map(|i| head.fields.get(i).1);
    let mut hosts = [&[][..]; 2];
    let mut n = 0;
    for (name, value) in &view.headers {
        if *name == "host" {
            if n < 2 {
                hosts[n] = value;
            }
            n += 1;
        }
    }
    if n > 2 {
        return Some(ParseError::BadHost { count: n });
    }
    authority_check(pseudo, &hosts[..n])
}

/// The request `head` describes, with its list's bytes taken (the list is
/// left empty, to be recycled).
pub(super) fn parts(head: &mut RequestHead) -> Result<http::request::Parts, ()> {
    let list = &mut head.fields;
    let spans = std::mem::take(&mut list.spans);
    let bytes = Bytes::from(std::mem::take(&mut list.bytes));
    let p = head.pseudo;
    let value = |i: usize| {
        let [_, v, e] = spans[i];
        bytes.slice(v as usize..e as usize)
    };
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.version = http::Version::HTTP_2;
    let method = p.method.ok_or(())?;
    parts.method = http::Method::from_bytes(&value(method)).map_err(|_| ())?;
    let authority = match p.authority {
        Some(i) => Some(Authority::from_maybe_shared(value(i)).map_err(|_| ())?),
        None => None,
    };
    let mut uri = http::uri::Parts::default();
    if let Some(i) = p.path {
        uri.path_and_query = Some(PathAndQuery::from_maybe_shared(value(i)).map_err(|_| ())?);
        // `http` takes a scheme only with an authority.
        if authority.is_some() {
            if let Some(s) = p.scheme {
                uri.scheme = Some(Scheme::try_from(&value(s)[..]).map_err(|_| ())?);
            }
        }
    }
    uri.authority = authority;
    parts.uri = http::Uri::from_parts(uri).map_err(|_| ())?;
    let mut headers = http::HeaderMap::with_capacity(spans.len() - p.first_field);
    for &[n, v, e] in &spans[p.first_field..] {
        let name = http::HeaderName::from_bytes(&bytes[n as usize..v as usize]).map_err(|_| ())?;
        let value = http::HeaderValue::from_maybe_shared(bytes.slice(v as usize..e as usize))
            .map_err(|_| ())?;
        headers.append(name, value);
    }
    parts.headers = headers;
    list.spans = spans;
    list.spans.clear();
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h2::hpack::FieldList;
    use crate::http::h2::request::check;

    fn head(fields: &[(&str, &str)]) -> RequestHead {
        let mut l = FieldList::default();
        for (n, v) in fields {
            let s = l.bytes.len() as u32;
            l.bytes.extend_from_slice(n.as_bytes());
            let m = l.bytes.len() as u32;
            l.bytes.extend_from_slice(v.as_bytes());
            l.spans.push([s, m, l.bytes.len() as u32]);
        }
        let pseudo = check(&l, false).unwrap();
        RequestHead { fields: l, pseudo }
    }

    #[test]
    fn a_request_becomes_parts_with_its_uri_whole() {
        let mut h = head(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "example.com:8443"),
            (":path", "/a/b?c=d"),
            ("accept", "*/*"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
        ]);
        let p = parts(&mut h).unwrap();
        assert_eq!(p.method, http::Method::GET);
        assert_eq!(p.uri.to_string(), "https://example.com:8443/a/b?c=d");
        assert_eq!(p.version, http::Version::HTTP_2);
        assert_eq!(p.headers["accept"], "*/*");
        assert_eq!(p.headers.get_all("cookie").iter().count(), 2);
        assert!(h.fields.bytes.is_empty());
        let mut no_authority = head(&[(":method", "POST"), (":scheme", "http"), (":path", "/x")]);
        assert_eq!(parts(&mut no_authority).unwrap().uri, "/x");
        let mut connect = head(&[(":method", "CONNECT"), (":authority", "example.com:443")]);
        assert_eq!(
            parts(&mut connect).unwrap().uri.authority().unwrap(),
            "example.com:443"
        );
    }

    #[test]
    fn the_view_reads_the_fields_where_they_lie() {
        let h = head(&[
            (":method", "HEAD"),
            (":scheme", "https"),
            (":path", "/a?b"),
            ("host", "example.com"),
            ("accept", "*/*"),
            ("content-length", "0"),
        ]);
        let v = view(&h).unwrap();
        assert_eq!(v.method, Method::Head);
        assert_eq!(v.method_token, "HEAD");
        assert_eq!(v.target, b"/a?b");
        assert_eq!(v.path(), b"/a");
        assert_eq!(v.host, Some(&b"example.com"[..]));
        assert_eq!(v.header("accept"), Some(&b"*/*"[..]));
        assert_eq!(v.content_length, Some(0));
        assert!(authority_error(&h, &v).is_none());
        // :authority wins over host, and the two must agree.
        let h = head(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a.example"),
            (":path", "/"),
            ("host", "b.example"),
        ]);
        let v = view(&h).unwrap();
        assert_eq!(v.host, Some(&b"a.example"[..]));
        assert!(matches!(
            authority_error(&h, &v),
            Some(ParseError::BadHost { count: 2 })
        ));
        let h = head(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            ("host", "a"),
            ("host", "a"),
            ("host", "a"),
        ]);
        let v = view(&h).unwrap();
        assert!(matches!(
            authority_error(&h, &v),
            Some(ParseError::BadHost { count: 3 })
        ));
    }

    #[test]
    fn what_http_refuses_is_malformed() {
        let mut h = head(&[(":method", "GET"), (":scheme", "https"), (":path", "/a b")]);
        assert!(parts(&mut h).is_err());
        let mut h = head(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            ("x", "\x01"),
        ]);
        assert!(parts(&mut h).is_err());
    }
}

//! A request's head as the `http` crate's types, made from the fields our
//! HPACK decoder wrote: the list's bytes become one [`Bytes`] and the
//! target, the authority and every field value are slices of it (reference
//! counted, not copied); names are interned by `http` when standard.
//!
//! Does not own validation: `http::h2::request` checked the pseudo-header
//! fields and names; what `http` still refuses (a byte its `HeaderValue` or
//! `Uri` does not take) makes the request malformed (RST_STREAM
//! PROTOCOL_ERROR, RFC 9113 §8.1.1).

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};

use crate::http::h2::RequestHead;

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
        assert_eq!(parts(&mut connect).unwrap().uri.authority().unwrap(), "example.com:443");
    }

    #[test]
    fn what_http_refuses_is_malformed() {
        let mut h = head(&[(":method", "GET"), (":scheme", "https"), (":path", "/a b")]);
        assert!(parts(&mut h).is_err());
        let mut h = head(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), ("x", "\x01")]);
        assert!(parts(&mut h).is_err());
    }
}

//! The static files' response heads as header maps (HTTP/3, and HTTP/2
//! for heads that are not prebuilt) and HPACK-encoded (HTTP/2).
//!
//! A cached file answers with a prebuilt head (`http::HeadBlock`), the same
//! one for every hit. HTTP/2 and HTTP/3 need it as a `HeaderMap`; reading the block
//! back into one costs ~3,500 instructions a request (callgrind, a 1 KiB
//! file), against a few hundred for cloning a map made once. So the map is
//! made by the first HTTP/2 request and kept in the head itself, beside the
//! HTTP/1.1 block, for as long as the file cache keeps the entry: no table
//! of its own, and no bound of its own beyond the cache's.

use bytes::Bytes;

use crate::app::response::{static_fields, with_fields};
use crate::app::Body;
use crate::http::Fields;

/// The fields of a prebuilt head's HTTP/1.1 block (past its status line),
/// HPACK-encoded for HTTP/2: names in lowercase, values Huffman-coded where
/// shorter, nothing indexed (`http::h2::hpack::encode`), so the same bytes
/// serve every connection. Made once per cached head
/// (`HeadBlock::hpack`).
pub(super) fn hpack(block: &Bytes) -> Bytes {
    use crate::http::h2::hpack::encode;
    let mut out = Vec::with_capacity(block.len());
    let mut name = Vec::new();
    for line in block.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        name.clear();
        name.extend(line[..colon].iter().map(u8::to_ascii_lowercase));
        if crate::http::finish::is_connection_specific(&name) {
            continue;
        }
        encode::field(&mut out, &name, line[colon + 1..].trim_ascii());
    }
    Bytes::from(out)
}

/// A static-files response as the `http` crate's; a prebuilt head's map is
/// made once and cloned after.
pub(super) fn response(resp: crate::http::Response) -> http::Response<Body> {
    let headers = match &resp.fields {
        Fields::Prebuilt(head) => head
            .map(|block| with_connection_fields(static_fields(&resp.fields), block))
            .clone(),
        Fields::List(_) => static_fields(&resp.fields),
    };
    with_fields(resp, headers)
}

/// `headers` with the fields the connection writes on every response
/// already in place: `server`, `date` (a placeholder, replaced per
/// response) and the block's `content-length`. Replacing a field is cheap;
/// adding one to a cloned map reallocates it (its capacity is its length),
/// which cost ~670 instructions per added field.
fn with_connection_fields(mut headers: http::HeaderMap, block: &Bytes) -> http::HeaderMap {
    use http::header::{HeaderValue, ALT_SVC, CONTENT_LENGTH, DATE, SERVER};
    headers.reserve(4);
    if !headers.contains_key(SERVER) {
        headers.insert(
            SERVER,
            HeaderValue::from_static(crate::http::finish::SERVER),
        );
    }
    headers.insert(DATE, HeaderValue::from_static(""));
    // Filled or removed per connection (`fields::finish`).
    if !headers.contains_key(ALT_SVC) {
        headers.insert(ALT_SVC, HeaderValue::from_static(""));
    }
    let length = block.split(|&b| b == b'\n').find_map(|line| {
        let (name, value) = line.split_at(line.iter().position(|&b| b == b':')?);
        name.eq_ignore_ascii_case(b"content-length")
            .then(|| value[1..].trim_ascii())
            .and_then(|v| HeaderValue::from_bytes(v).ok())
    });
    if let Some(length) = length {
        headers.insert(CONTENT_LENGTH, length);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::{prebuild_head, HeadBlock};
    use crate::http::{Response, Status};

    fn prebuilt(head: &HeadBlock) -> Response {
        Response {
            status: Status::OK,
            fields: Fields::Prebuilt(head.clone()),
            body: crate::http::Body::Empty,
        }
    }

    #[test]
    fn a_heads_hpack_decodes_to_its_fields_in_lowercase() {
        let h = prebuild_head(
            Status::OK,
            &[
                ("Content-Type".into(), "text/plain; charset=utf-8".into()),
                ("ETag".into(), "\"abc\"".into()),
            ],
            3,
        );
        let block = h.hpack(hpack).clone();
        assert_eq!(h.hpack(|_| unreachable!("made once")), &block);
        let mut d = crate::http::h2::hpack::Decoder::new(4096);
        let mut list = crate::http::h2::hpack::FieldList::default();
        d.decode(&block, 1 << 16, &mut list).unwrap();
        let got: Vec<(String, String)> = list
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect();
        let map = response(prebuilt(&h));
        for (n, v) in &got {
            assert_eq!(n, &n.to_ascii_lowercase());
            if n != "date" {
                assert_eq!(map.headers()[n.as_str()], v.as_str(), "{n}");
            }
        }
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"content-type") && names.contains(&"etag"));
        assert!(names.contains(&"content-length") && names.contains(&"server"));
    }

    #[test]
    fn a_head_answers_with_its_own_map_made_once() {
        let a = prebuild_head(
            Status::OK,
            &[("Content-Type".into(), "text/plain".into())],
            3,
        );
        let b = prebuild_head(
            Status::OK,
            &[("Content-Type".into(), "text/html".into())],
            3,
        );
        let first = response(prebuilt(&a));
        let again = response(prebuilt(&a));
        assert_eq!(first.headers(), again.headers());
        assert_eq!(again.headers()["content-type"], "text/plain");
        assert_eq!(
            response(prebuilt(&b)).headers()["content-type"],
            "text/html"
        );
        // The block's length, and the fields the connection fills in.
        assert_eq!(first.headers()["content-length"], "3");
        assert_eq!(first.headers()["server"], "servery");
        assert!(first.headers().contains_key("date"));
        // Made once: the head keeps the first map.
        let kept = a.map(|_| unreachable!("the map is made already"));
        assert_eq!(kept, first.headers());
    }
}

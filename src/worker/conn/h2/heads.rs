//! The static files' response heads as HTTP/2 header maps, kept per worker.
//!
//! A cached file answers with a prebuilt HTTP/1.1 head block
//! (`http::Fields::Prebuilt`), the same `Bytes` for every hit. HTTP/2 needs
//! it as a `HeaderMap`; reading the block back into one costs ~3,500
//! instructions a request (callgrind, a 1 KiB file), against a few hundred
//! for cloning a map made once. So each worker thread keeps the maps of the
//! blocks it has answered with, keyed by the block itself: the entry holds
//! the block's `Bytes`, so its address cannot be reused for another while
//! the entry lives, and the key compares address and length only.
//!
//! Bounded: past [`MAX_HEADS`] entries the whole map is dropped and refilled
//! as requests come (a file cache's churn costs a parse a request, never
//! memory).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use bytes::Bytes;

use crate::app::response::{static_fields, with_fields};
use crate::app::Body;
use crate::http::Fields;

/// Most heads a worker keeps (a few hundred bytes each).
const MAX_HEADS: usize = 1024;

/// A prebuilt block, by identity.
struct Block(Bytes);

impl PartialEq for Block {
    fn eq(&self, other: &Block) -> bool {
        self.0.as_ptr() == other.0.as_ptr() && self.0.len() == other.0.len()
    }
}

impl Eq for Block {}

impl Hash for Block {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0.as_ptr() as usize).hash(state);
        self.0.len().hash(state);
    }
}

thread_local! {
    static HEADS: RefCell<HashMap<Block, http::HeaderMap>> = RefCell::new(HashMap::new());
}

/// A static-files response as the `http` crate's, its head from the
/// worker's map when it is a prebuilt block seen before.
pub(super) fn response(resp: crate::http::Response) -> http::Response<Body> {
    let headers = match &resp.fields {
        Fields::Prebuilt(block) => HEADS.with(|heads| {
            let mut heads = heads.borrow_mut();
            let key = Block(block.clone());
            if let Some(h) = heads.get(&key) {
                return h.clone();
            }
            if heads.len() >= MAX_HEADS {
                heads.clear();
            }
            let h = with_connection_fields(static_fields(&resp.fields), block);
            heads.insert(key, h.clone());
            h
        }),
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
    use http::header::{HeaderValue, CONTENT_LENGTH, DATE, SERVER};
    headers.reserve(3);
    if !headers.contains_key(SERVER) {
        headers.insert(SERVER, HeaderValue::from_static("servery"));
    }
    headers.insert(DATE, HeaderValue::from_static(""));
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
    use crate::http::response::prebuild_head;
    use crate::http::{Response, Status};

    fn prebuilt(block: &Bytes) -> Response {
        Response {
            status: Status::OK,
            fields: Fields::Prebuilt(block.clone()),
            body: crate::http::Body::Empty,
        }
    }

    #[test]
    fn a_block_seen_again_gives_the_same_head_and_a_new_block_its_own() {
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
        // The same bytes in another allocation are another block.
        let copy = Bytes::copy_from_slice(&a);
        assert_eq!(
            response(prebuilt(&copy)).headers()["content-type"],
            "text/plain"
        );
    }

    #[test]
    fn the_map_is_bounded() {
        let blocks: Vec<Bytes> = (0..MAX_HEADS + 10)
            .map(|i| prebuild_head(Status::OK, &[("X-N".into(), i.to_string().into())], 0))
            .collect();
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(
                response(prebuilt(b)).headers()["x-n"],
                i.to_string().as_str()
            );
        }
        HEADS.with(|h| assert!(h.borrow().len() <= MAX_HEADS));
    }
}

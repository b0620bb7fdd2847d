//! `[[redirect]]` and `[[rewrite]]`: path rules a site's requests meet
//! before the file lookup.
//!
//! Owns the rules (what `config::files` validated), matching a request's
//! decoded path against their globs with captures, and building a
//! redirect's `Location` or a rewrite's new path. Does not own the lookup
//! that follows a rewrite (`Files::serve`) nor the answer's other fields.
//!
//! Flow, for a request whose path resolves (`uri_path`): its decoded path
//! (`/` and the segments, a trailing `/` kept) meets every `[[redirect]]`
//! in order, then every `[[rewrite]]`; the first that matches decides.
//! A redirect answers its status with a `Location` made from its `to`:
//! each capture percent-encoded (so nothing the client sent is echoed as
//! it came: a decoded `%0D%0A` goes back as `%0D%0A`), the request's query
//! kept unless `to` has its own. A rewrite changes the path the file
//! lookup sees, inside the server, with no round trip; its result is not
//! matched again, and resolves as any request path (it cannot leave the
//! root). `config::files` refuses a redirect whose target another
//! redirect would take again (a loop or a chain).
//!
//! Globs are `http::rules`'s, the same as `[[headers]]` match with (`**` any
//! bytes, `*` any bytes but `/`, `?` one byte but `/`); here each wildcard
//! is a capture, `$1` to `$9` in `to`.

use std::fmt::Write as _;

use std::borrow::Cow;

use super::{uri_path, Error, Files};
use crate::http::{Body, Head, Response, Status};

pub use crate::http::rules::{Glob, MAX_CAPTURES};

/// A `[[redirect]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub from: Glob,
    /// A path (`/new/$1`) or an absolute `http(s)` URL, `$N` its captures.
    pub to: String,
    /// 301, 302, 307 or 308.
    pub status: u16,
}

/// A `[[rewrite]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub from: Glob,
    /// A path from the root, `$N` its captures.
    pub to: String,
}

/// `to` with each `$N` replaced by capture N of `path`, percent-encoded
/// (`/` kept: a `**` capture spans segments).
pub fn fill(to: &str, path: &[u8], caps: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(to.len() + path.len());
    let t = to.as_bytes();
    let mut i = 0;
    while i < t.len() {
        if t[i] == b'$' && i + 1 < t.len() && t[i + 1].is_ascii_digit() && t[i + 1] != b'0' {
            let n = usize::from(t[i + 1] - b'1');
            if let Some(&(a, b)) = caps.get(n) {
                uri_path::encode_into(&mut out, &path[a..b], CAPTURE_KEEPS);
            }
            i += 2;
            continue;
        }
        out.push(t[i] as char);
        i += 1;
    }
    out
}

/// What a capture keeps as it is, besides the unreserved: RFC 3986 §3.3's pchar (the
/// sub-delims, `:`, `@`) and `/` (a `**` capture spans segments).
const CAPTURE_KEEPS: &[u8] = b"!$&'()*+,;=:@/";

/// The request's query as a `Location` may carry it: bytes outside the
/// visible ASCII range, and `#`, encoded (every redirect's, the directory
/// slash's too).
pub(super) fn query_into(out: &mut String, query: &[u8]) {
    out.push('?');
    for &b in query {
        if (0x21..=0x7e).contains(&b) && b != b'#' {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// The first redirect that takes `path` (decoded): its status and
/// `Location`.
pub fn redirect(rules: &[Redirect], path: &[u8], query: Option<&[u8]>) -> Option<(u16, String)> {
    rules.iter().find_map(|r| {
        let caps = r.from.matches(path)?;
        let mut location = fill(&r.to, path, &caps);
        if let (false, Some(q)) = (r.to.contains('?'), query) {
            query_into(&mut location, q);
        }
        Some((r.status, location))
    })
}

/// The first rewrite that takes `path` (decoded): the new target (a path,
/// percent-encoded, and its query if `to` has one), for `uri_path` to
/// resolve as any request's.
pub fn rewrite(rules: &[Rewrite], path: &[u8]) -> Option<String> {
    rules.iter().find_map(|r| {
        let caps = r.from.matches(path)?;
        Some(fill(&r.to, path, &caps))
    })
}

/// The rules as the site's `Files` meets them.
impl Files {
    /// The request's path decoded as rules see it (`/`, the segments, a
    /// trailing `/` kept); `None` if it does not resolve.
    pub(super) fn decoded<'h>(&self, head: &Head<'h>) -> Option<Cow<'h, [u8]>> {
        let path = head.path();
        if uri_path::is_plain(path) {
            return Some(Cow::Borrowed(path));
        }
        let r = uri_path::resolve(path).ok()?;
        let mut p = format!("/{}", r.relative_path());
        if r.trailing_slash && p.len() > 1 {
            p.push('/');
        }
        Some(Cow::Owned(p.into_bytes()))
    }

    /// The answer of the first `[[redirect]]` that takes the request.
    pub(super) fn redirected(&self, head: &Head<'_>) -> Option<Response> {
        if self.config.redirects.is_empty() {
            return None;
        }
        let path = self.decoded(head)?;
        let (code, location) = redirect(&self.config.redirects, &path, head.query())?;
        let status = Status::from_code(code)?;
        Some(Response::new(status, Body::Empty).header("Location", location))
    }

    /// The path the first `[[rewrite]]` that takes the request gives it.
    pub(super) fn rewritten(&self, head: &Head<'_>) -> Result<Option<String>, Error> {
        if self.config.rewrites.is_empty() {
            return Ok(None);
        }
        let Some(path) = self.decoded(head) else {
            // Not a path: `resolve` says why.
            return uri_path::resolve(head.path())
                .map(|_| None)
                .map_err(Error::from);
        };
        Ok(rewrite(&self.config.rewrites, &path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_encode_what_the_client_sent() {
        let r = [Redirect {
            from: Glob::new("/old/**").unwrap(),
            to: "/new/$1".into(),
            status: 301,
        }];
        let path = b"/old/a b/\r\nSet-Cookie: x";
        let (status, loc) = redirect(&r, path, Some(b"q=1&x=\xff#")).unwrap();
        assert_eq!(status, 301);
        assert_eq!(loc, "/new/a%20b/%0D%0ASet-Cookie:%20x?q=1&x=%FF%23");
        assert!(!loc.bytes().any(|b| b.is_ascii_control()));
        let r = [Redirect {
            from: Glob::new("/shop/*").unwrap(),
            to: "https://shop.example/item/$1?ref=old".into(),
            status: 308,
        }];
        assert_eq!(
            redirect(&r, b"/shop/42", Some(b"a=b")),
            Some((308, "https://shop.example/item/42?ref=old".into()))
        );
        assert_eq!(redirect(&r, b"/other", None), None);
    }

    #[test]
    fn rewrites_fill_their_path() {
        let r = [Rewrite {
            from: Glob::new("/blog/*").unwrap(),
            to: "/posts/$1.html".into(),
        }];
        assert_eq!(
            rewrite(&r, b"/blog/hello world"),
            Some("/posts/hello%20world.html".into())
        );
        assert_eq!(rewrite(&r, b"/blog/a/b"), None);
    }
}

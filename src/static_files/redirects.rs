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
//! Globs are `http::rules`'s (`**` any bytes, `*` any bytes but `/`, `?`
//! one byte but `/`); each wildcard is a capture, `$1` to `$9` in `to`.
//! Matching is one pass over the path with every pattern position tracked
//! (a Pike VM: captures ride with each position, greedy first), so a
//! client's path costs its length times the pattern's, whatever it holds.

use std::fmt::Write as _;

/// Wildcards a pattern may hold (`$1` to `$9`).
pub const MAX_CAPTURES: usize = 9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Byte(u8),
    One,
    Star,
    Stars,
}

/// Capture spans (start, end) into the matched path.
type Caps = [(usize, usize); MAX_CAPTURES];

/// A glob with captures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
    /// The bytes before the first wildcard: a path without them is no
    /// match, found with no pass at all (most paths, against most rules).
    prefix: usize,
    tokens: Vec<Token>,
    /// The capture of each wildcard token.
    cap_of: Vec<usize>,
    captures: usize,
}

impl Glob {
    /// `None` with more than [`MAX_CAPTURES`] wildcards.
    pub fn new(pattern: &str) -> Option<Glob> {
        let p = pattern.as_bytes();
        let (mut tokens, mut cap_of, mut captures) = (Vec::new(), Vec::new(), 0);
        let mut i = 0;
        while i < p.len() {
            let (t, width) = match &p[i..] {
                [b'*', b'*', ..] => (Token::Stars, 2),
                [b'*', ..] => (Token::Star, 1),
                [b'?', ..] => (Token::One, 1),
                [c, ..] => (Token::Byte(*c), 1),
                [] => break,
            };
            // A wildcard's capture is the next number; a byte has none.
            cap_of.push(captures);
            if !matches!(t, Token::Byte(_)) {
                captures += 1;
            }
            tokens.push(t);
            i += width;
        }
        let prefix = p
            .iter()
            .position(|&b| b == b'*' || b == b'?')
            .unwrap_or(p.len());
        (captures <= MAX_CAPTURES).then(|| Glob {
            pattern: pattern.to_owned(),
            prefix,
            tokens,
            cap_of,
            captures,
        })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn captures(&self) -> usize {
        self.captures
    }

    /// The spans of each capture if `path` matches.
    fn matches(&self, path: &[u8]) -> Option<Vec<(usize, usize)>> {
        let literal = &self.pattern.as_bytes()[..self.prefix];
        // By hand: most paths differ within a byte or two, where a call to
        // `memcmp` would cost more than the comparison.
        if literal.len() > path.len() || !literal.iter().zip(path).all(|(a, b)| a == b) {
            return None;
        }
        if self.captures == 0 {
            return (path.len() == literal.len()).then(Vec::new);
        }
        let n = self.tokens.len();
        let mut list: Vec<(usize, Caps)> = Vec::with_capacity(n + 1);
        let mut next: Vec<(usize, Caps)> = Vec::with_capacity(n + 1);
        let mut seen = vec![false; n + 1];
        self.add(&mut list, &mut seen, 0, [(0, 0); MAX_CAPTURES], 0, true);
        for (pos, &b) in path.iter().enumerate() {
            next.clear();
            seen.iter_mut().for_each(|s| *s = false);
            for &(k, caps) in &list {
                let at = pos + 1;
                match self.tokens.get(k) {
                    Some(Token::Byte(x)) if *x == b => {
                        self.add(&mut next, &mut seen, k + 1, caps, at, true)
                    }
                    Some(Token::One) if b != b'/' => {
                        let mut c = caps;
                        c[self.cap_of[k]].1 = at;
                        self.add(&mut next, &mut seen, k + 1, c, at, true);
                    }
                    Some(Token::Star) if b != b'/' => {
                        self.add(&mut next, &mut seen, k, caps, at, false)
                    }
                    Some(Token::Stars) => self.add(&mut next, &mut seen, k, caps, at, false),
                    _ => {}
                }
            }
            if next.is_empty() {
                return None;
            }
            std::mem::swap(&mut list, &mut next);
        }
        let (_, caps) = list.iter().find(|(k, _)| *k == n)?;
        Some(caps[..self.captures].to_vec())
    }

    /// Reach token `k` at `pos` (`entering`: from before it), and what is
    /// reachable from there with no byte, in priority order.
    fn add(
        &self,
        list: &mut Vec<(usize, Caps)>,
        seen: &mut [bool],
        k: usize,
        caps: Caps,
        pos: usize,
        entering: bool,
    ) {
        if seen[k] {
            return;
        }
        seen[k] = true;
        match self.tokens.get(k) {
            Some(Token::Star | Token::Stars) => {
                let ci = self.cap_of[k];
                let mut c = caps;
                if entering {
                    c[ci].0 = pos;
                }
                // Greedy: staying in the wildcard comes first.
                list.push((k, c));
                let mut skip = c;
                skip[ci].1 = pos;
                self.add(list, seen, k + 1, skip, pos, true);
            }
            Some(Token::One) => {
                let mut c = caps;
                c[self.cap_of[k]].0 = pos;
                list.push((k, c));
            }
            _ => list.push((k, caps)),
        }
    }
}

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
                encode_into(&mut out, &path[a..b], b"/");
            }
            i += 2;
            continue;
        }
        out.push(t[i] as char);
        i += 1;
    }
    out
}

/// Percent-encode every byte but the unreserved, sub-delims, `:`, `@`
/// and `keep` (RFC 3986 §3.3's pchar).
fn encode_into(out: &mut String, bytes: &[u8], keep: &[u8]) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// The request's query as a `Location` may carry it: bytes outside the
/// visible ASCII range, and `#`, encoded.
fn query_into(out: &mut String, query: &[u8]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn caps<'p>(pattern: &str, path: &'p str) -> Option<Vec<&'p str>> {
        let g = Glob::new(pattern).unwrap();
        g.matches(path.as_bytes())
            .map(|c| c.iter().map(|&(a, b)| &path[a..b]).collect())
    }

    #[test]
    fn captures_are_the_wildcards_in_order() {
        assert_eq!(caps("/old/**", "/old/a/b.html"), Some(vec!["a/b.html"]));
        assert_eq!(caps("/old/**", "/old/"), Some(vec![""]));
        assert_eq!(caps("/old/**", "/older"), None);
        assert_eq!(caps("/*/x/*", "/a/x/b"), Some(vec!["a", "b"]));
        assert_eq!(caps("/*/x/*", "/a/b/x/c"), None);
        assert_eq!(caps("/p?.html", "/p1.html"), Some(vec!["1"]));
        assert_eq!(
            caps("/blog/*.html", "/blog/post.v2.html"),
            Some(vec!["post.v2"])
        );
        assert_eq!(caps("/**/index.html", "/a/b/index.html"), Some(vec!["a/b"]));
        assert_eq!(caps("/exact", "/exact"), Some(vec![]));
        assert_eq!(caps("/exact", "/exact/"), None);
        // Greedy: the first wildcard takes what it can.
        assert_eq!(caps("/**/**", "/a/b/c"), Some(vec!["a/b", "c"]));
        assert!(Glob::new("/*/*/*/*/*/*/*/*/*/*").is_none());
    }

    #[test]
    fn a_long_hostile_path_costs_one_pass() {
        let g = Glob::new("/**a**a**a**a**a**a**b").unwrap();
        let path = format!("/{}", "a".repeat(100_000));
        let t = std::time::Instant::now();
        assert!(g.matches(path.as_bytes()).is_none());
        // One pass of 100k bytes times 14 tokens: far under a second even
        // unoptimized (a backtracking matcher would never finish).
        assert!(t.elapsed() < std::time::Duration::from_secs(10));
    }

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

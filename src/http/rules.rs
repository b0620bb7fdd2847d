//! `[[headers]]` rules: header fields set on the responses to matching
//! paths, whatever answered them.
//!
//! Owns: the validated rule ([`HeaderRule`]), its path glob, and setting a
//! rule's fields on a response's field list or an app's header map (a rule
//! replaces a field of the same name; later rules win). Does not own where
//! rules come from (`config`, per site in `sites`) nor which responses get
//! them: the static files put them in each cached entry's fields (so the
//! prebuilt HTTP/1.1 head carries them at no cost a request) and on their
//! errors and redirects; the dispatcher sets them on an app's response.
//!
//! Matching is against the path (the static files' decoded one, an app's as
//! sent); a glob ([`Glob`], also what `[[redirect]]` and `[[rewrite]]` match
//! with, their wildcards captured) is `**` (any bytes), `*` (any bytes but
//! `/`) and `?` (one byte but `/`). The operator writes the patterns but a
//! client chooses the path, so a match walks the path once with the set of
//! pattern positions it could be at (a Pike VM: pattern length times path
//! length steps, captures riding with each position, greedy first), never
//! backtracking: `/**/**/**/x` against a long path costs what `/x` does,
//! times the pattern's length; a path without the pattern's literal
//! prefix is no match before any pass.

use std::borrow::Cow;

/// A validated `[[headers]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// Its path glob, parsed once (any number of wildcards; none captured
    /// for use).
    pub glob: Glob,
    pub set: Vec<(String, String)>,
}

impl HeaderRule {
    /// Whether `path` (decoded, from `/`) matches the rule's glob.
    pub fn matches(&self, path: &[u8]) -> bool {
        self.glob.matches(path).is_some()
    }
}

/// The fields of the `rules` that match `path`, in order: a later rule's
/// field replaces an earlier one of the same name (case-insensitive).
pub fn set_on_fields(
    rules: &[HeaderRule],
    path: &[u8],
    fields: &mut Vec<(Cow<'static, str>, Cow<'static, str>)>,
) {
    for rule in rules.iter().filter(|r| r.matches(path)) {
        for (name, value) in &rule.set {
            fields.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            fields.push((name.clone().into(), value.clone().into()));
        }
    }
}

/// [`set_on_fields`] for an app's response headers. A rule's name and value
/// were checked as field syntax when the config was validated.
pub fn set_on_map(rules: &[HeaderRule], path: &[u8], headers: &mut http::HeaderMap) {
    for rule in rules.iter().filter(|r| r.matches(path)) {
        for (name, value) in &rule.set {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(value),
            ) {
                headers.insert(n, v);
            }
        }
    }
}

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
    /// The capture of each wildcard token (the first [`MAX_CAPTURES`]).
    cap_of: Vec<Option<usize>>,
    captures: usize,
}

impl Glob {
    /// A glob whose wildcards are captures: `None` with more than
    /// [`MAX_CAPTURES`] wildcards.
    pub fn new(pattern: &str) -> Option<Glob> {
        let g = Glob::any(pattern);
        (g.captures <= MAX_CAPTURES).then_some(g)
    }

    /// A glob with any number of wildcards, the first [`MAX_CAPTURES`]
    /// captured.
    pub fn any(pattern: &str) -> Glob {
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
            if matches!(t, Token::Byte(_)) {
                cap_of.push(None);
            } else {
                cap_of.push((captures < MAX_CAPTURES).then_some(captures));
                captures += 1;
            }
            tokens.push(t);
            i += width;
        }
        let prefix = p
            .iter()
            .position(|&b| b == b'*' || b == b'?')
            .unwrap_or(p.len());
        Glob {
            pattern: pattern.to_owned(),
            prefix,
            tokens,
            cap_of,
            captures,
        }
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn captures(&self) -> usize {
        self.captures
    }

    /// The spans of each capture if `path` matches.
    pub fn matches(&self, path: &[u8]) -> Option<Vec<(usize, usize)>> {
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
                        if let Some(ci) = self.cap_of[k] {
                            c[ci].1 = at;
                        }
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
        Some(caps[..self.captures.min(MAX_CAPTURES)].to_vec())
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
                let mut c = caps;
                if let (true, Some(ci)) = (entering, self.cap_of[k]) {
                    c[ci].0 = pos;
                }
                // Greedy: staying in the wildcard comes first.
                list.push((k, c));
                let mut skip = c;
                if let Some(ci) = self.cap_of[k] {
                    skip[ci].1 = pos;
                }
                self.add(list, seen, k + 1, skip, pos, true);
            }
            Some(Token::One) => {
                let mut c = caps;
                if let Some(ci) = self.cap_of[k] {
                    c[ci].0 = pos;
                }
                list.push((k, c));
            }
            _ => list.push((k, caps)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `path` matches the glob `pattern`, captures unused.
    fn glob_match(pattern: &[u8], path: &[u8]) -> bool {
        Glob::any(&String::from_utf8_lossy(pattern))
            .matches(path)
            .is_some()
    }

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
    fn globs_match_segments_and_subtrees() {
        assert!(glob_match(b"/assets/**", b"/assets/a/b.js"));
        assert!(!glob_match(b"/assets/**", b"/other/a.js"));
        assert!(glob_match(b"/*.html", b"/index.html"));
        assert!(!glob_match(b"/*.html", b"/a/index.html"));
        assert!(glob_match(b"/**/*.css", b"/a/b/c.css"));
        assert!(glob_match(b"/a?c", b"/abc"));
        assert!(!glob_match(b"/a?c", b"/a/c"));
    }

    fn rule(pattern: &str, set: &[(&str, &str)]) -> HeaderRule {
        HeaderRule {
            glob: Glob::any(pattern),
            set: set
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn a_later_rule_replaces_a_field_of_the_same_name() {
        let rules = [
            rule("/**", &[("X-A", "1"), ("Cache-Control", "no-cache")]),
            rule("/assets/**", &[("cache-control", "immutable")]),
            rule("/never", &[("X-Never", "1")]),
        ];
        let mut fields = vec![("Cache-Control".into(), "max-age=1".into())];
        set_on_fields(&rules, b"/assets/a.js", &mut fields);
        assert_eq!(
            fields,
            [
                (Cow::from("X-A"), Cow::from("1")),
                ("cache-control".into(), "immutable".into())
            ]
        );
        let mut map = http::HeaderMap::new();
        map.insert("cache-control", "max-age=1".parse().unwrap());
        set_on_map(&rules, b"/assets/a.js", &mut map);
        assert_eq!(map["cache-control"], "immutable");
        assert_eq!(map["x-a"], "1");
        assert!(map.get("x-never").is_none());
    }

    /// Many `**` against a long path that misses: one pass, not a
    /// backtracking search over every split (which would not end here).
    #[test]
    fn many_wildcards_on_a_long_path_cost_one_pass() {
        let pattern = format!("/{}x", "**/*".repeat(20));
        let path = "/a".repeat(4000);
        assert!(!glob_match(pattern.as_bytes(), path.as_bytes()));
        assert!(glob_match(
            pattern.as_bytes(),
            format!("{path}/x").as_bytes()
        ));
    }

    #[test]
    fn stars_match_nothing_and_stop_at_slashes() {
        assert!(glob_match(b"/**", b"/"));
        assert!(glob_match(b"/a*", b"/a"));
        assert!(glob_match(b"**", b""));
        assert!(!glob_match(b"/a*", b"/ab/c"));
        assert!(glob_match(b"/a**", b"/ab/c"));
        assert!(!glob_match(b"/a", b"/ab"));
    }
}

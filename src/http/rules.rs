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
//! sent); a glob is `**` (any bytes), `*`
//! (any bytes but `/`) and `?` (one byte but `/`). The operator writes the
//! patterns but a client chooses the path, so a match walks the path once
//! with the set of pattern positions it could be at (pattern length times
//! path length steps), never backtracking: `/**/**/**/x` against a long
//! path costs what `/x` does, times the pattern's length.

use std::borrow::Cow;

/// A validated `[[headers]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    pub pattern: String,
    pub set: Vec<(String, String)>,
}

impl HeaderRule {
    /// Whether `path` (decoded, from `/`) matches the rule's glob.
    pub fn matches(&self, path: &[u8]) -> bool {
        glob_match(self.pattern.as_bytes(), path)
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

/// Match a glob: `**` any bytes, `*` any bytes but `/`, `?` one byte but
/// `/`. One pass over `path`, tracking every pattern position reachable so
/// far (a Thompson simulation of the glob).
pub fn glob_match(pattern: &[u8], path: &[u8]) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Token {
        Byte(u8),
        One,
        Star,
        Stars,
    }
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        match &pattern[i..] {
            [b'*', b'*', ..] => {
                tokens.push(Token::Stars);
                i += 2;
            }
            [b'*', ..] => {
                tokens.push(Token::Star);
                i += 1;
            }
            [b'?', ..] => {
                tokens.push(Token::One);
                i += 1;
            }
            [c, ..] => {
                tokens.push(Token::Byte(*c));
                i += 1;
            }
            [] => break,
        }
    }
    // at[k]: the path so far can end just before token k.
    let mut at = vec![false; tokens.len() + 1];
    let mut next = vec![false; tokens.len() + 1];
    // A star matches nothing too: what is reachable reaches past it.
    let close = |set: &mut [bool]| {
        for k in 0..tokens.len() {
            if set[k] && matches!(tokens[k], Token::Star | Token::Stars) {
                set[k + 1] = true;
            }
        }
    };
    at[0] = true;
    close(&mut at);
    for &c in path {
        next.iter_mut().for_each(|n| *n = false);
        for (k, t) in tokens.iter().enumerate() {
            if !at[k] {
                continue;
            }
            match *t {
                Token::Byte(b) if b == c => next[k + 1] = true,
                Token::One if c != b'/' => next[k + 1] = true,
                Token::Star if c != b'/' => next[k] = true,
                Token::Stars => next[k] = true,
                _ => {}
            }
        }
        close(&mut next);
        if !next.contains(&true) {
            return false;
        }
        std::mem::swap(&mut at, &mut next);
    }
    at[tokens.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

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
            pattern: pattern.into(),
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

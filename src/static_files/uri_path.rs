//! Request-target path → a relative path that cannot leave the document root.
//!
//! This is the only place that turns attacker-controlled URI bytes into file-system names, so it
//! is deliberately strict and does no I/O (symlinks and `openat2` containment are the caller's
//! second line of defence, not this module's).
//!
//! Steps, in order:
//! 1. The path must be absolute (`/`-rooted): RFC 9112 §3.2.1 origin-form.
//! 2. Split on *literal* `/` first, so a decoded `%2F` can be told apart from a separator.
//! 3. Percent-decode each segment exactly once (RFC 3986 §2.1): `%252e` becomes the literal
//!    name `%2e`, never `.`. Malformed escapes, NUL, `/`, `\` and non-UTF-8 are errors.
//! 4. Remove dot segments on the *decoded* segments (RFC 3986 §5.2.4), so `%2e%2e` is `..`;
//!    unlike §5.2.4, a `..` that would climb above the root is an error, not silently dropped.
//! 5. Empty segments (`//`) collapse.
//!
//! Every [`PathError`] is the client's fault (a 400); the mapping to a status lives with the
//! caller's single error-to-status function.
//!
//! The way back, [`encode_into`], is here too: every path servery writes for a client (a
//! listing's links, a redirect's `Location`) is percent-encoded by it.

use std::fmt::Write as _;

use thiserror::Error;

/// `bytes` percent-encoded onto `out` (RFC 3986 §2.1): the unreserved characters (§2.3) and
/// those in `keep` as they are, every other byte as `%XX`.
pub(crate) fn encode_into(out: &mut String, bytes: &[u8], keep: &[u8]) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// [`encode_into`] of a segment (a name): nothing but the unreserved kept.
pub(crate) fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    encode_into(&mut out, segment.as_bytes(), b"");
    out
}

/// Why a request path was refused. `offset` is the byte offset into the path given to
/// [`resolve`], pointing at the escape or segment at fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum PathError {
    /// The path is empty or does not start with `/` (RFC 9112 §3.2.1 origin-form).
    #[error("request path does not start with '/'")]
    NotAbsolute,
    /// A `%` not followed by two hex digits (RFC 3986 §2.1).
    #[error("malformed percent escape at byte {offset}")]
    BadPercentEscape { offset: usize },
    /// A segment's decoded bytes are not UTF-8 (this also rejects overlong forms like `%C0%AE`).
    #[error("path segment at byte {offset} is not valid UTF-8 once decoded")]
    NotUtf8 { offset: usize },
    /// A NUL byte, literal or `%00`; it would truncate the name at the syscall boundary.
    #[error("NUL byte in path at byte {offset}")]
    Nul { offset: usize },
    /// `%2F` inside a segment: a decoded slash would change the segment structure.
    #[error("encoded '/' in path at byte {offset}")]
    EncodedSlash { offset: usize },
    /// A backslash, literal or `%5C`; never a separator here, refused so no layer may treat it
    /// as one.
    #[error("backslash in path at byte {offset}")]
    Backslash { offset: usize },
    /// A `..` segment that would climb above the document root.
    #[error("path segment at byte {offset} climbs above the root")]
    ClimbsAboveRoot { offset: usize },
}

/// A decoded, dot-free path relative to the document root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Resolved {
    /// Decoded segments in order; each is non-empty, never `.` or `..`, and holds no `/`, `\`
    /// or NUL.
    pub(crate) segments: Vec<String>,
    /// The request path named a directory: it ended in `/` (or in a `.`/`..` segment, which
    /// RFC 3986 §5.2.4 turns into a trailing `/`). The root path `/` has `trailing_slash: true`.
    pub(crate) trailing_slash: bool,
}

impl Resolved {
    /// The segments joined by `/`, with no leading slash; empty for the root.
    pub(crate) fn relative_path(&self) -> String {
        self.segments.join("/")
    }

    /// Whether any segment is hidden (starts with `.`, e.g. `.git`, `.env`).
    pub(crate) fn has_dotfile(&self) -> bool {
        self.segments.iter().any(|segment| segment.starts_with('.'))
    }
}

/// The common path whose resolution is itself: `/`-rooted, printable ASCII
/// without `%` or `\\`, no empty segment but a last one (`/dir/`), and no
/// segment starting with `.` (no dot segment, no dotfile). Its key (what
/// [`Resolved::relative_path`] and a trailing `/` would make) is the path
/// without its leading `/`, with no decoding and no allocation; `None`
/// sends the path to [`resolve`].
pub(crate) fn plain(target_path: &[u8]) -> Option<&str> {
    if !is_plain(target_path) {
        return None;
    }
    std::str::from_utf8(&target_path[1..]).ok()
}

/// Whether [`plain`] takes `target_path` (without making its `str`).
pub(crate) fn is_plain(target_path: &[u8]) -> bool {
    let Some(rest) = target_path.strip_prefix(b"/") else {
        return false;
    };
    let mut after_slash = true;
    for &b in rest {
        let ok = match b {
            b'/' => !after_slash,
            b'.' => !after_slash,
            b'%' | b'\\' => false,
            _ => b.is_ascii_graphic(),
        };
        if !ok {
            return false;
        }
        after_slash = b == b'/';
    }
    true
}

/// Turns the path part of a request target (before `?`) into a [`Resolved`] relative path.
pub(crate) fn resolve(target_path: &[u8]) -> Result<Resolved, PathError> {
    if target_path.first() != Some(&b'/') {
        return Err(PathError::NotAbsolute);
    }
    let mut resolved = Resolved::default();
    // Offset of the current raw segment; starts just past the leading '/'.
    let mut start = 1;
    for raw in target_path[1..].split(|&byte| byte == b'/') {
        let segment = decode_segment(raw, start)?;
        // A segment that leaves the path pointing at a directory; the last one decides.
        resolved.trailing_slash = match segment.as_str() {
            // RFC 3986 §5.2.4: empty segments collapse (our choice), "." is dropped.
            "" | "." => true,
            ".." => {
                if resolved.segments.pop().is_none() {
                    return Err(PathError::ClimbsAboveRoot { offset: start });
                }
                true
            }
            _ => {
                resolved.segments.push(segment);
                false
            }
        };
        start += raw.len() + 1;
    }
    Ok(resolved)
}

/// Percent-decodes one raw segment exactly once and checks what it may contain. `offset` is the
/// segment's position in the whole path, for error reports.
fn decode_segment(raw: &[u8], offset: usize) -> Result<String, PathError> {
    let mut decoded = Vec::with_capacity(raw.len());
    let mut at = 0;
    while at < raw.len() {
        let here = offset + at;
        let (byte, width) = match raw[at] {
            b'%' => match (raw.get(at + 1), raw.get(at + 2)) {
                (Some(&high), Some(&low)) => match (hex_value(high), hex_value(low)) {
                    (Some(high), Some(low)) => ((high << 4) | low, 3),
                    _ => return Err(PathError::BadPercentEscape { offset: here }),
                },
                _ => return Err(PathError::BadPercentEscape { offset: here }),
            },
            other => (other, 1),
        };
        match byte {
            0 => return Err(PathError::Nul { offset: here }),
            // Only reachable decoded: the caller split on literal '/'.
            b'/' => return Err(PathError::EncodedSlash { offset: here }),
            b'\\' => return Err(PathError::Backslash { offset: here }),
            _ => decoded.push(byte),
        }
        at += width;
    }
    // `from_utf8` rejects overlong encodings and surrogates (RFC 3629 §3), so `%C0%AE` cannot
    // smuggle a '.' past the dot-segment check.
    String::from_utf8(decoded).map_err(|_| PathError::NotUtf8 { offset })
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plain_path_is_its_own_key() {
        for path in [
            &b"/"[..],
            b"/a",
            b"/dir/",
            b"/css/site.css",
            b"/a-b_c~d!$&'()*+,;=:@/x",
        ] {
            let key = plain(path).expect("plain");
            let r = resolve(path).unwrap();
            let mut want = r.relative_path();
            if r.trailing_slash && !want.is_empty() {
                want.push('/');
            }
            assert_eq!(key, want, "{:?}", String::from_utf8_lossy(path));
            assert!(!r.has_dotfile());
        }
        for path in [
            &b""[..],
            b"a",
            b"//",
            b"/a//b",
            b"/.",
            b"/..",
            b"/a/../b",
            b"/.env",
            b"/a/.git/x",
            b"/%41",
            b"/a\\b",
            b"/a b",
            b"/\xc3\xa9",
            b"/a\x00",
        ] {
            assert_eq!(plain(path), None, "{:?}", String::from_utf8_lossy(path));
        }
    }

    proptest::proptest! {
        /// Wherever the fast path answers, `resolve` agrees.
        #[test]
        fn plain_agrees_with_resolve(
            path in proptest::collection::vec(
                proptest::sample::select(b"/./a.%2e\\ \x00\xff".to_vec()),
                0..16,
            )
        ) {
            if let Some(key) = plain(&path) {
                let r = resolve(&path).expect("a plain path resolves");
                let mut want = r.relative_path();
                if r.trailing_slash && !want.is_empty() {
                    want.push('/');
                }
                proptest::prop_assert_eq!(key, want);
                proptest::prop_assert!(!r.has_dotfile());
            }
        }
    }

    use super::*;

    fn segments(path: &str) -> Vec<String> {
        resolve(path.as_bytes()).unwrap().segments
    }

    #[test]
    fn root_is_empty_with_trailing_slash() {
        let resolved = resolve(b"/").unwrap();
        assert!(resolved.segments.is_empty());
        assert!(resolved.trailing_slash);
        assert_eq!(resolved.relative_path(), "");
    }

    #[test]
    fn plain_path_splits_into_segments() {
        let resolved = resolve(b"/assets/css/site.css").unwrap();
        assert_eq!(resolved.segments, ["assets", "css", "site.css"]);
        assert!(!resolved.trailing_slash);
        assert_eq!(resolved.relative_path(), "assets/css/site.css");
    }

    #[test]
    fn directory_path_keeps_trailing_slash() {
        let resolved = resolve(b"/docs/").unwrap();
        assert_eq!(resolved.segments, ["docs"]);
        assert!(resolved.trailing_slash);
    }

    #[test]
    fn rejects_empty_and_relative_paths() {
        assert_eq!(resolve(b""), Err(PathError::NotAbsolute));
        assert_eq!(resolve(b"index.html"), Err(PathError::NotAbsolute));
        assert_eq!(resolve(b"*"), Err(PathError::NotAbsolute));
        assert_eq!(resolve(b"http://x/"), Err(PathError::NotAbsolute));
    }

    #[test]
    fn decodes_percent_escapes_once() {
        assert_eq!(segments("/a%20b/%E2%82%AC.txt"), ["a b", "€.txt"]);
        assert_eq!(segments("/%252e%252e/x"), ["%2e%2e", "x"]);
        assert_eq!(segments("/%252e"), ["%2e"]);
    }

    #[test]
    fn accepts_lower_and_upper_case_hex() {
        assert_eq!(segments("/%7e%7E"), ["~~"]);
    }

    #[test]
    fn rejects_malformed_percent_escapes() {
        assert_eq!(
            resolve(b"/a%"),
            Err(PathError::BadPercentEscape { offset: 2 })
        );
        assert_eq!(
            resolve(b"/a%2"),
            Err(PathError::BadPercentEscape { offset: 2 })
        );
        assert_eq!(
            resolve(b"/x/%zz"),
            Err(PathError::BadPercentEscape { offset: 3 })
        );
        assert_eq!(
            resolve(b"/%2g"),
            Err(PathError::BadPercentEscape { offset: 1 })
        );
    }

    #[test]
    fn rejects_overlong_utf8_dot() {
        assert_eq!(
            resolve(b"/%c0%ae%c0%ae/etc/passwd"),
            Err(PathError::NotUtf8 { offset: 1 })
        );
        assert_eq!(
            resolve(b"/a/%e0%80%ae"),
            Err(PathError::NotUtf8 { offset: 3 })
        );
    }

    #[test]
    fn rejects_invalid_utf8() {
        assert_eq!(resolve(b"/%ff"), Err(PathError::NotUtf8 { offset: 1 }));
        assert_eq!(resolve(b"/\xff"), Err(PathError::NotUtf8 { offset: 1 }));
        // An encoded UTF-16 surrogate (U+D800).
        assert_eq!(
            resolve(b"/%ed%a0%80"),
            Err(PathError::NotUtf8 { offset: 1 })
        );
    }

    #[test]
    fn rejects_nul_encoded_or_literal() {
        assert_eq!(
            resolve(b"/index.html%00.png"),
            Err(PathError::Nul { offset: 11 })
        );
        assert_eq!(resolve(b"/a\0b"), Err(PathError::Nul { offset: 2 }));
    }

    #[test]
    fn rejects_encoded_slash() {
        assert_eq!(
            resolve(b"/a%2fb"),
            Err(PathError::EncodedSlash { offset: 2 })
        );
        assert_eq!(
            resolve(b"/..%2F..%2Fetc"),
            Err(PathError::EncodedSlash { offset: 3 })
        );
    }

    #[test]
    fn rejects_backslash_encoded_or_literal() {
        assert_eq!(
            resolve(b"/a\\..\\b"),
            Err(PathError::Backslash { offset: 2 })
        );
        assert_eq!(
            resolve(b"/..%5c..%5cwindows"),
            Err(PathError::Backslash { offset: 3 })
        );
    }

    #[test]
    fn removes_dot_segments() {
        assert_eq!(segments("/a/./b/../c"), ["a", "c"]);
        assert_eq!(segments("/./a"), ["a"]);
        assert_eq!(segments("/a/b/c/../../d"), ["a", "d"]);
    }

    #[test]
    fn removes_encoded_dot_segments() {
        assert_eq!(segments("/a/%2e/b/%2E%2e/c"), ["a", "c"]);
        assert_eq!(segments("/a/.%2e/b"), ["b"]);
    }

    #[test]
    fn trailing_dot_segment_means_directory() {
        let up = resolve(b"/a/b/..").unwrap();
        assert_eq!(up.segments, ["a"]);
        assert!(up.trailing_slash);
        let here = resolve(b"/a/.").unwrap();
        assert_eq!(here.segments, ["a"]);
        assert!(here.trailing_slash);
        let root = resolve(b"/a/..").unwrap();
        assert!(root.segments.is_empty());
        assert!(root.trailing_slash);
    }

    #[test]
    fn rejects_climb_above_root() {
        assert_eq!(
            resolve(b"/.."),
            Err(PathError::ClimbsAboveRoot { offset: 1 })
        );
        assert_eq!(
            resolve(b"/../etc/passwd"),
            Err(PathError::ClimbsAboveRoot { offset: 1 })
        );
        assert_eq!(
            resolve(b"/a/../../b"),
            Err(PathError::ClimbsAboveRoot { offset: 6 })
        );
        assert_eq!(
            resolve(b"/%2e%2e/x"),
            Err(PathError::ClimbsAboveRoot { offset: 1 })
        );
        assert_eq!(
            resolve(b"//../x"),
            Err(PathError::ClimbsAboveRoot { offset: 2 })
        );
    }

    #[test]
    fn collapses_empty_segments() {
        let resolved = resolve(b"//a///b//").unwrap();
        assert_eq!(resolved.segments, ["a", "b"]);
        assert!(resolved.trailing_slash);
        assert_eq!(resolved.relative_path(), "a/b");
        assert!(resolve(b"//").unwrap().segments.is_empty());
    }

    #[test]
    fn keeps_names_that_only_look_like_dots() {
        assert_eq!(segments("/.../a..b/..c"), ["...", "a..b", "..c"]);
    }

    #[test]
    fn detects_dotfiles_anywhere() {
        assert!(resolve(b"/.env").unwrap().has_dotfile());
        assert!(resolve(b"/repo/.git/config").unwrap().has_dotfile());
        assert!(resolve(b"/%2egit/HEAD").unwrap().has_dotfile());
        assert!(!resolve(b"/a/./b").unwrap().has_dotfile());
        assert!(!resolve(b"/a.b/c.").unwrap().has_dotfile());
    }

    #[test]
    fn resolved_segments_are_always_safe() {
        let paths: [&[u8]; 6] = [
            b"/a/b/../c/./d/",
            b"/%2e/%2e%2e/..",
            b"//x//.//y/%2e%2e",
            b"/a/%252f/b",
            b"/.hidden/../v",
            b"/%20/%09",
        ];
        for path in paths {
            let Ok(resolved) = resolve(path) else {
                continue;
            };
            for segment in &resolved.segments {
                assert!(!segment.is_empty());
                assert!(segment != "." && segment != "..");
                assert!(!segment.contains(['/', '\\', '\0']));
            }
        }
    }
}

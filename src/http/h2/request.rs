//! What a request's field block must be (RFC 9113 §8.2, §8.3): the
//! pseudo-header fields first, each once, only the request's; names in
//! lowercase; no connection-specific fields; values without NUL, CR or LF
//! and without whitespace at either end. A block that breaks these is
//! malformed: a stream error of type PROTOCOL_ERROR (§8.1.1).
//!
//! Reads a decoded [`FieldList`] and says where the pseudo-header fields
//! are, so the connection builds its request head from the list without
//! another copy.

use super::hpack::FieldList;
use crate::http::token::is_tchar;

/// Where a valid request's pseudo-header fields are in its list (indices),
/// and what its content-length says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pseudo {
    pub method: Option<usize>,
    pub scheme: Option<usize>,
    pub authority: Option<usize>,
    pub path: Option<usize>,
    /// The first regular field: the fields are `first_field..`.
    pub first_field: usize,
    /// A `content-length` (its repeats agree).
    pub content_length: Option<u64>,
}

/// Why a field block is malformed (answered RST_STREAM PROTOCOL_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("pseudo-header field {0} unknown, repeated, or after a regular field")]
    Pseudo(usize),
    #[error("field {0}: a name that is not a lowercase token")]
    Name(usize),
    #[error("field {0}: NUL, CR, LF, or whitespace at an end of the value")]
    Value(usize),
    #[error("field {0}: connection-specific")]
    ConnectionSpecific(usize),
    #[error("a request without :method, :scheme or :path, or an empty :path")]
    Missing,
    #[error("content-length not a number, or repeats that disagree")]
    ContentLength,
}

/// Check a request's fields (`trailers`: a trailer section, which has no
/// pseudo-header fields).
pub fn check(list: &FieldList, trailers: bool) -> Result<Pseudo, Malformed> {
    let mut p = Pseudo::default();
    let mut regular = false;
    for i in 0..list.len() {
        let (name, value) = list.get(i);
        if !value_ok(value) {
            return Err(Malformed::Value(i));
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if regular || trailers {
                return Err(Malformed::Pseudo(i));
            }
            let slot = match pseudo {
                b"method" => &mut p.method,
                b"scheme" => &mut p.scheme,
                b"authority" => &mut p.authority,
                b"path" => &mut p.path,
                _ => return Err(Malformed::Pseudo(i)),
            };
            if slot.replace(i).is_some() {
                return Err(Malformed::Pseudo(i));
            }
            continue;
        }
        if !regular {
            regular = true;
            p.first_field = i;
        }
        if name.is_empty() || !name.iter().all(|&b| LOWER_TCHAR[usize::from(b)]) {
            return Err(Malformed::Name(i));
        }
        match name {
            // §8.2.2: fields of HTTP/1.1's connection management.
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err(Malformed::ConnectionSpecific(i)),
            b"te" if value != b"trailers" => return Err(Malformed::ConnectionSpecific(i)),
            b"content-length" if !trailers => {
                let n = digits(value).ok_or(Malformed::ContentLength)?;
                if p.content_length.is_some_and(|m| m != n) {
                    return Err(Malformed::ContentLength);
                }
                p.content_length = Some(n);
            }
            _ => {}
        }
    }
    if !regular {
        p.first_field = list.len();
    }
    if trailers {
        return Ok(p);
    }
    let connect = p.method.is_some_and(|i| list.get(i).1 == b"CONNECT");
    let complete = if connect {
        // §8.5: CONNECT names an authority and nothing else.
        p.authority.is_some() && p.scheme.is_none() && p.path.is_none()
    } else {
        p.method.is_some()
            && p.scheme.is_some()
            && p.path.is_some_and(|i| !list.get(i).1.is_empty())
    };
    if !complete {
        return Err(Malformed::Missing);
    }
    Ok(p)
}

/// §8.2.1: no NUL, CR or LF, and no SP or HTAB at either end.
fn value_ok(v: &[u8]) -> bool {
    let ends = |b: Option<&u8>| !matches!(b, Some(b' ' | b'\t'));
    if !ends(v.first()) || !ends(v.last()) {
        return false;
    }
    // NUL, LF and CR are all below 0x0e: eight bytes at a time, and only a
    // word with a byte below 0x0e gets the exact look (the "has a byte less
    // than n" test).
    let mut words = v.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let low = x.wrapping_sub(0x0e0e_0e0e_0e0e_0e0e) & !x & 0x8080_8080_8080_8080;
        if low != 0 && w.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
            return false;
        }
    }
    !words
        .remainder()
        .iter()
        .any(|&b| matches!(b, 0 | b'\r' | b'\n'))
}

/// The bytes of a field name: a token's (RFC 9110 §5.6.2), in lowercase
/// (RFC 9113 §8.2.1), as a table (a request's names are checked byte by
/// byte).
static LOWER_TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = is_tchar(b as u8) && !(b as u8).is_ascii_uppercase();
        b += 1;
    }
    t
};

fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(fields: &[(&str, &str)]) -> FieldList {
        let mut l = FieldList::default();
        for (n, v) in fields {
            let s = l.bytes.len() as u32;
            l.bytes.extend_from_slice(n.as_bytes());
            let m = l.bytes.len() as u32;
            l.bytes.extend_from_slice(v.as_bytes());
            l.spans.push([s, m, l.bytes.len() as u32]);
        }
        l
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> FieldList {
        let mut f: Vec<(&str, &str)> = GET.to_vec();
        f.extend_from_slice(extra);
        list(&f)
    }

    #[test]
    fn a_request_is_read() {
        let p = check(
            &with(&[
                ("accept", "*/*"),
                ("content-length", "5"),
                ("content-length", "5"),
            ]),
            false,
        )
        .unwrap();
        assert_eq!(
            p,
            Pseudo {
                method: Some(0),
                scheme: Some(1),
                authority: Some(2),
                path: Some(3),
                first_field: 4,
                content_length: Some(5)
            }
        );
        let connect = list(&[(":method", "CONNECT"), (":authority", "example.com:443")]);
        assert!(check(&connect, false).is_ok());
        assert!(check(&list(&[("x-t", "1")]), true).is_ok());
    }

    #[test]
    fn values_are_checked_at_every_position() {
        for len in 1..40 {
            for at in 0..len {
                for bad in [0u8, b'\r', b'\n'] {
                    let mut v = vec![b'a'; len];
                    v[at] = bad;
                    assert!(!value_ok(&v), "{len} {at} {bad}");
                }
                let mut v = vec![b'a'; len];
                v[at] = 0x0b;
                assert!(value_ok(&v), "{len} {at}");
            }
        }
        assert!(value_ok(b""));
        assert!(value_ok("caf\u{e9} \u{1f600}".as_bytes()));
    }

    #[test]
    fn the_name_table_is_the_token_grammar_in_lowercase() {
        for b in 0..=255u8 {
            let want = is_tchar(b) && !b.is_ascii_uppercase();
            assert_eq!(LOWER_TCHAR[usize::from(b)], want, "{b:#04x}");
        }
    }

    #[test]
    fn malformed_requests_are_refused() {
        let cases: Vec<(FieldList, Malformed)> = vec![
            (with(&[("Accept", "x")]), Malformed::Name(4)),
            (with(&[("x y", "x")]), Malformed::Name(4)),
            (with(&[(":status", "200")]), Malformed::Pseudo(4)),
            (with(&[("a", "b"), (":path", "/x")]), Malformed::Pseudo(5)),
            (with(&[(":method", "GET")]), Malformed::Pseudo(4)),
            (with(&[(":foo", "x")]), Malformed::Pseudo(4)),
            (
                with(&[("connection", "close")]),
                Malformed::ConnectionSpecific(4),
            ),
            (with(&[("te", "gzip")]), Malformed::ConnectionSpecific(4)),
            (with(&[("x", "a\r\nb")]), Malformed::Value(4)),
            (with(&[("x", " a")]), Malformed::Value(4)),
            (
                with(&[("content-length", "5"), ("content-length", "6")]),
                Malformed::ContentLength,
            ),
            (with(&[("content-length", "-1")]), Malformed::ContentLength),
            (
                list(&[(":method", "GET"), (":scheme", "https")]),
                Malformed::Missing,
            ),
            (
                list(&[(":method", "GET"), (":scheme", "https"), (":path", "")]),
                Malformed::Missing,
            ),
            (
                list(&[
                    (":method", "CONNECT"),
                    (":authority", "a:1"),
                    (":path", "/"),
                ]),
                Malformed::Missing,
            ),
        ];
        for (l, want) in cases {
            assert_eq!(check(&l, false), Err(want));
        }
        assert_eq!(
            check(&list(&[(":path", "/")]), true),
            Err(Malformed::Pseudo(0))
        );
        assert!(check(&with(&[("te", "trailers")]), false).is_ok());
    }
}

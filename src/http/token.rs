//! The token grammar every header parser shares (RFC 9110 §5.6): which
//! bytes make a token, and optional whitespace around a field value.
//!
//! At the bottom of `http/`: the head parser, the chunked decoder and the
//! static-file headers (ranges, conditionals, encodings) read with it, and
//! it reads nothing of theirs.

/// RFC 9110 §5.6.2: tchar, the bytes of a token.
pub const fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// Strip optional whitespace (RFC 9110 §5.6.3: SP and HTAB) at both ends.
pub fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

//! The HTTP/3 frames of an answer, encoded here: HEADERS (a response head
//! or trailers, QPACK-encoded) and DATA frame headers (RFC 9114 §7.2,
//! RFC 9204).
//!
//! Why our own: `h3` Huffman-codes every field of every response and builds
//! it from a `HeaderMap`; profiled, that was the largest cost of a small
//! response over HTTP/3. Here a field is the static table's entry when the
//! table has it whole (`:status 200`, `accept-ranges bytes`, common
//! content types), its name's entry and the value as it is otherwise, and
//! both literal for a name the table lacks. No Huffman coding (a few bytes
//! more a response, no work) and no dynamic table: our SETTINGS give the
//! client's encoder none, and we use none of its, so the field section's
//! prefix is always zero (Required Insert Count 0, Base 0) and a client
//! never waits on QPACK's streams for our answers.

use bytes::{BufMut, BytesMut};
use http::header::{HeaderMap, HeaderName};
use http::StatusCode;

/// HTTP/3 frame types (RFC 9114 §7.2).
const DATA: u8 = 0x00;
const HEADERS: u8 = 0x01;

/// The most a DATA frame's header takes: its type and an 8-byte length.
pub(super) const DATA_HEADER_MAX: usize = 9;

/// Append a HEADERS frame with `status` and `fields` to `out`.
pub(super) fn head(out: &mut BytesMut, status: StatusCode, fields: &HeaderMap) {
    section(out, Some(status), fields);
}

/// Append a HEADERS frame of trailers to `out`.
pub(super) fn trailers(out: &mut BytesMut, fields: &HeaderMap) {
    section(out, None, fields);
}

/// A DATA frame's header for `len` bytes of payload: the bytes and how
/// many of them there are.
pub(super) fn data_header(len: u64) -> ([u8; DATA_HEADER_MAX], usize) {
    let mut b = [0u8; DATA_HEADER_MAX];
    b[0] = DATA;
    let n = varint(&mut b[1..], len);
    (b, 1 + n)
}

/// A HEADERS frame: its type, its length, then the field section.
fn section(out: &mut BytesMut, status: Option<StatusCode>, fields: &HeaderMap) {
    let start = out.len();
    // The length goes in two bytes (up to 16,383) and is filled in after;
    // a longer section moves once.
    out.put_slice(&[HEADERS, 0x40, 0]);
    // Required Insert Count 0; Base 0 (sign 0, delta 0).
    out.put_slice(&[0, 0]);
    if let Some(status) = status {
        field(out, b":status", status.as_str().as_bytes());
    }
    for (name, value) in fields {
        if !connection_specific(name) {
            field(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    let len = out.len() - start - 3;
    if len < 1 << 14 {
        out[start + 1] = 0x40 | (len >> 8) as u8;
        out[start + 2] = len as u8;
    } else {
        let body = out.split_off(start + 1);
        let mut l = [0u8; 8];
        let n = varint(&mut l, (len) as u64);
        out.put_slice(&l[..n]);
        out.put_slice(&body[2..]);
    }
}

/// Fields HTTP/3 forbids (RFC 9114 §4.2); `fields::finish` leaves none,
/// this keeps an app's from going out.
fn connection_specific(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// One field line (RFC 9204 §4.5).
fn field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    match lookup(name, value) {
        Static::Whole(i) => {
            // Indexed field line, static table: 1 T=1 index.
            int(out, 0b1100_0000, 6, i as u64);
        }
        Static::Name(i) => {
            // Literal with name reference, static table: 0 1 N=0 T=1 index.
            int(out, 0b0101_0000, 4, i as u64);
            string(out, value);
        }
        Static::None => {
            // Literal with literal name: 0 0 1 N=0 H=0 length.
            int(out, 0b0010_0000, 3, name.len() as u64);
            out.put_slice(name);
            string(out, value);
        }
    }
}

/// A string literal without Huffman coding: H=0, a 7-bit prefix length.
fn string(out: &mut BytesMut, s: &[u8]) {
    int(out, 0, 7, s.len() as u64);
    out.put_slice(s);
}

/// An integer with an `n`-bit prefix, the byte's other bits `flags`
/// (RFC 7541 §5.1, as RFC 9204 §4.1.1 uses it).
fn int(out: &mut BytesMut, flags: u8, n: u32, mut v: u64) {
    let max = (1u64 << n) - 1;
    if v < max {
        out.put_u8(flags | v as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.put_u8((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.put_u8(v as u8);
}

/// A QUIC variable-length integer into `b` (RFC 9000 §16): its length.
fn varint(b: &mut [u8], v: u64) -> usize {
    if v < 1 << 6 {
        b[0] = v as u8;
        1
    } else if v < 1 << 14 {
        b[..2].copy_from_slice(&(v as u16 | 0x4000).to_be_bytes());
        2
    } else if v < 1 << 30 {
        b[..4].copy_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
        4
    } else {
        b[..8].copy_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
        8
    }
}

/// What QPACK's static table (RFC 9204 Appendix A) has of a field.
#[derive(Debug, PartialEq, Eq)]
enum Static {
    Whole(u8),
    Name(u8),
    None,
}

/// The static table's entries a response may use: by name, the index of
/// the name's first entry and those with a value.
fn lookup(name: &[u8], value: &[u8]) -> Static {
    let (first, whole): (u8, &[(&[u8], u8)]) = match name {
        b":status" => (
            24,
            &[
                (b"200", 25),
                (b"304", 26),
                (b"404", 27),
                (b"206", 65),
                (b"302", 66),
                (b"400", 67),
                (b"403", 68),
                (b"500", 71),
                (b"503", 28),
                (b"204", 64),
                (b"100", 63),
                (b"103", 24),
                (b"421", 69),
                (b"425", 70),
            ],
        ),
        b"age" => (2, &[(b"0", 2)]),
        b"content-disposition" => (3, &[]),
        b"content-length" => (4, &[(b"0", 4)]),
        b"date" => (6, &[]),
        b"etag" => (7, &[]),
        b"last-modified" => (10, &[]),
        b"link" => (11, &[]),
        b"location" => (12, &[]),
        b"set-cookie" => (14, &[]),
        b"accept-ranges" => (32, &[(b"bytes", 32)]),
        b"access-control-allow-headers" => (
            33,
            &[(b"cache-control", 33), (b"content-type", 34), (b"*", 75)],
        ),
        b"access-control-allow-origin" => (35, &[(b"*", 35)]),
        b"cache-control" => (
            36,
            &[
                (b"max-age=0", 36),
                (b"max-age=2592000", 37),
                (b"max-age=604800", 38),
                (b"no-cache", 39),
                (b"no-store", 40),
                (b"public, max-age=31536000", 41),
            ],
        ),
        b"content-encoding" => (42, &[(b"br", 42), (b"gzip", 43)]),
        b"content-type" => (
            44,
            &[
                (b"application/dns-message", 44),
                (b"application/javascript", 45),
                (b"application/json", 46),
                (b"application/x-www-form-urlencoded", 47),
                (b"image/gif", 48),
                (b"image/jpeg", 49),
                (b"image/png", 50),
                (b"text/css", 51),
                (b"text/html; charset=utf-8", 52),
                (b"text/plain", 53),
                (b"text/plain;charset=utf-8", 54),
            ],
        ),
        b"strict-transport-security" => (
            56,
            &[
                (b"max-age=31536000", 56),
                (b"max-age=31536000; includesubdomains", 57),
                (b"max-age=31536000; includesubdomains; preload", 58),
            ],
        ),
        b"vary" => (59, &[(b"accept-encoding", 59), (b"origin", 60)]),
        b"x-content-type-options" => (61, &[(b"nosniff", 61)]),
        b"x-xss-protection" => (62, &[(b"1; mode=block", 62)]),
        b"access-control-allow-credentials" => (73, &[(b"FALSE", 73), (b"TRUE", 74)]),
        b"access-control-allow-methods" => (
            76,
            &[(b"get", 76), (b"get, post, options", 77), (b"options", 78)],
        ),
        b"access-control-expose-headers" => (79, &[(b"content-length", 79)]),
        b"alt-svc" => (83, &[(b"clear", 83)]),
        b"content-security-policy" => (
            85,
            &[(b"script-src 'none'; object-src 'none'; base-uri 'none'", 85)],
        ),
        b"server" => (92, &[]),
        b"timing-allow-origin" => (93, &[(b"*", 93)]),
        b"x-frame-options" => (97, &[(b"deny", 97), (b"sameorigin", 98)]),
        _ => return Static::None,
    };
    match whole.iter().find(|(v, _)| *v == value) {
        Some(&(_, i)) => Static::Whole(i),
        None => Static::Name(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_their_prefix_then_continuation_bytes() {
        // RFC 7541 C.1.1-C.1.3: 10 and 1337 with a 5-bit prefix, 42 with 8.
        let mut b = BytesMut::new();
        int(&mut b, 0, 5, 10);
        int(&mut b, 0, 5, 1337);
        int(&mut b, 0, 8, 42);
        assert_eq!(&b[..], &[10, 31, 154, 10, 42]);
        let mut v = [0u8; 8];
        assert_eq!(varint(&mut v, 37), 1);
        assert_eq!(varint(&mut v, 15_293), 2);
        assert_eq!(&v[..2], &[0x7b, 0xbd]);
        assert_eq!(varint(&mut v, 494_878_333), 4);
        assert_eq!(&v[..4], &[0x9d, 0x7f, 0x3e, 0x7d]);
    }

    #[test]
    fn a_head_uses_the_static_table_and_literals() {
        let mut fields = HeaderMap::new();
        fields.insert("content-type", "text/plain".parse().unwrap());
        fields.insert("etag", "\"x\"".parse().unwrap());
        fields.insert("x-a", "b".parse().unwrap());
        fields.insert("connection", "close".parse().unwrap());
        let mut out = BytesMut::new();
        head(&mut out, StatusCode::OK, &fields);
        let section: &[u8] = &[
            0,
            0,         // the prefix
            0xc0 | 25, // :status 200
            0xc0 | 53, // content-type text/plain
            0x50 | 7,
            3,
            b'"',
            b'x',
            b'"', // etag, its name's entry
            0x20 | 3,
            b'x',
            b'-',
            b'a',
            1,
            b'b', // both literal
        ];
        assert_eq!(&out[..3], &[HEADERS, 0x40, section.len() as u8]);
        assert_eq!(&out[3..], section);
    }

    #[test]
    fn a_long_section_has_its_length_in_as_many_bytes_as_it_needs() {
        let mut fields = HeaderMap::new();
        fields.insert("x-long", "v".repeat(20_000).parse().unwrap());
        let mut out = BytesMut::new();
        trailers(&mut out, &fields);
        let len = out.len() - 5;
        assert_eq!(out[0], HEADERS);
        assert_eq!(&out[1..5], &(len as u32 | 0x8000_0000).to_be_bytes());
        assert_eq!(&out[5..7], &[0, 0]);
    }

    #[test]
    fn data_headers_carry_the_length() {
        let (b, n) = data_header(1024);
        assert_eq!(&b[..n], &[DATA, 0x44, 0x00]);
        let (b, n) = data_header(5);
        assert_eq!(&b[..n], &[DATA, 5]);
    }
}

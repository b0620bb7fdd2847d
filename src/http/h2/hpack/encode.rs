//! HPACK encoding (RFC 7541 §6) of response heads, without the dynamic
//! table: every field is a literal "without indexing" (its name by static
//! index where the table has it), and a status the static table has is one
//! byte. Nothing depends on what came before, so a head encoded once can be
//! sent on any connection (the file cache keeps static files' heads so).
//!
//! Values are Huffman-coded where that is shorter ([`field`]); a value made
//! per response (a date, a length) can skip the search ([`field_raw`]).

use super::huffman;
use super::table::static_name;

/// Append integer `value` with a `prefix`-bit prefix (RFC 7541 §5.1), the
/// first byte's high bits being `first`.
pub fn integer(out: &mut Vec<u8>, first: u8, prefix: u8, value: usize) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(first | value as u8);
        return;
    }
    out.push(first | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// `:status`, indexed where the static table has it (§6.1).
pub fn status(out: &mut Vec<u8>, code: u16) {
    let index = match code {
        200 => 8,
        204 => 9,
        206 => 10,
        304 => 11,
        400 => 12,
        404 => 13,
        500 => 14,
        _ => {
            // Literal without indexing, name `:status` (index 8).
            out.push(0x08);
            let mut digits = itoa::Buffer::new();
            string_raw(out, digits.format(code).as_bytes());
            return;
        }
    };
    out.push(0x80 | index);
}

/// A field (lowercase name), its value Huffman-coded where shorter.
pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    name_part(out, name);
    string(out, value);
}

/// A field (lowercase name), its value as it is.
pub fn field_raw(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    name_part(out, name);
    string_raw(out, value);
}

/// What [`date`] writes: `date`'s name index and length, and the 29 bytes
/// of an IMF-fixdate.
pub const DATE_FIELD: usize = 32;

/// The `date` field as [`field_raw`] encodes it, into an array: a head made
/// per response needs no buffer kept for it. `date` is static index 33
/// (15, then 33 − 15 in the next byte); 29 fits the length's 7-bit prefix.
pub fn date(value: &[u8; 29]) -> [u8; DATE_FIELD] {
    let mut out = [0; DATE_FIELD];
    out[..3].copy_from_slice(&[0x0f, 33 - 15, 29]);
    out[3..].copy_from_slice(value);
    out
}

/// A dynamic table size update (§6.3).
pub fn size_update(out: &mut Vec<u8>, size: usize) {
    integer(out, 0x20, 5, size);
}

/// The name of a literal without indexing (§6.2.2): its static index, or
/// itself.
fn name_part(out: &mut Vec<u8>, name: &[u8]) {
    match static_name(name) {
        Some(i) => integer(out, 0x00, 4, i),
        None => {
            out.push(0x00);
            string(out, name);
        }
    }
}

/// A string literal (§5.2), Huffman-coded where that is shorter.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer(out, 0x80, 7, coded);
        huffman::encode(s, out);
    } else {
        string_raw(out, s);
    }
}

fn string_raw(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::super::decode::{Decoder, FieldList};
    use super::*;

    #[test]
    fn integers_are_the_rfc_examples() {
        // RFC 7541 C.1.1-C.1.3.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);
        out.clear();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        out.clear();
        integer(&mut out, 0, 8, 42);
        assert_eq!(out, [0x2a]);
    }

    #[test]
    fn the_date_array_is_the_raw_field() {
        let now = b"Sun, 06 Dec 2026 08:49:37 GMT";
        let mut out = Vec::new();
        field_raw(&mut out, b"date", now);
        assert_eq!(&date(now)[..], &out[..]);
    }

    #[test]
    fn a_head_decodes_to_what_was_encoded() {
        let mut out = Vec::new();
        size_update(&mut out, 0);
        status(&mut out, 200);
        status(&mut out, 418);
        field(&mut out, b"content-type", b"text/html; charset=utf-8");
        field_raw(&mut out, b"content-length", b"1024");
        field(&mut out, b"x-custom-name", b"\x01\xff odd bytes");
        field(&mut out, b"etag", b"");
        let mut d = Decoder::new(4096);
        let mut list = FieldList::default();
        d.decode(&out, 1 << 16, &mut list).unwrap();
        let got: Vec<(&[u8], &[u8])> = list.iter().collect();
        assert_eq!(
            got,
            [
                (&b":status"[..], &b"200"[..]),
                (b":status", b"418"),
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", b"1024"),
                (b"x-custom-name", b"\x01\xff odd bytes"),
                (b"etag", b""),
            ]
        );
        // Nothing entered the table.
        assert_eq!(d.table_size(), 0);
    }
}

//! `Range: bytes=…` parsing (RFC 9110 §14.1–14.2) and `multipart/byteranges` framing
//! (RFC 9110 §14.6), as pure functions over the header bytes and the representation length.
//!
//! The caller decides *whether* a range applies (GET only, If-Range via `conditional`); this
//! module only answers *which bytes*:
//! 1. Anything that is not a valid `bytes` ranges-specifier is ignored ([`RangeOutcome::Full`]),
//!    as RFC 9110 §14.2 permits.
//! 2. Each range-spec is clamped to the representation; unsatisfiable ones are dropped
//!    (§14.1.1). None left is [`RangeOutcome::Unsatisfiable`] (416).
//! 3. Abusive sets (too many, overlapping, larger than the file) are ignored too, which §14.2
//!    allows and which defends against amplification (CVE-2011-3192, "Apache Killer").

use crate::http::token::trim_ows;

use bytes::Bytes;

use super::cache::Entry;
use super::{slice, Chosen, Files};
use crate::http::{Body, Fields, Part, Response, Status};
/// The most range-specs served; more and the header is ignored (nginx's `max_ranges` idea).
/// 16 covers real clients (PDF viewers, media seeking) while bounding per-request part work.
const MAX_RANGES: usize = 16;

/// What to send for a `Range` header against a representation of a known length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeOutcome {
    /// Ignore the header and send the whole representation with 200: invalid syntax, another
    /// unit, or a set refused as abusive (more than [`MAX_RANGES`], overlapping, or summing to
    /// more than the length).
    Full,
    /// One satisfiable range: a 206 with `Content-Range`.
    Single(ByteRange),
    /// Two or more satisfiable ranges, in the order requested: a 206 `multipart/byteranges`.
    Multi(Vec<ByteRange>),
    /// A valid header with no satisfiable range: 416 with [`unsatisfied_content_range`].
    Unsatisfiable,
}

/// A non-empty, in-bounds byte range of a representation; both ends inclusive as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRange {
    /// Offset of the first byte.
    pub(crate) start: u64,
    /// Offset of the last byte; always `>= start` and `< len` of the representation.
    pub(crate) end_inclusive: u64,
}

impl ByteRange {
    /// Number of bytes in the range (at least 1).
    pub(crate) fn len(&self) -> u64 {
        self.end_inclusive - self.start + 1
    }

    /// The `Content-Range` field value for this range (RFC 9110 §14.4): `bytes 0-499/1234`.
    pub(crate) fn content_range(&self, total: u64) -> String {
        format!("bytes {}-{}/{}", self.start, self.end_inclusive, total)
    }
}

/// The `Content-Range` field value of a 416 (RFC 9110 §14.4): `bytes */1234`.
pub(crate) fn unsatisfied_content_range(total: u64) -> String {
    format!("bytes */{total}")
}

/// Parses a `Range` field value against a representation of `len` bytes.
pub(crate) fn parse(header: &[u8], len: u64) -> RangeOutcome {
    let Some(set) = strip_bytes_unit(trim_ows(header)) else {
        return RangeOutcome::Full;
    };
    let mut ranges = Vec::new();
    let mut specs = 0;
    // RFC 9110 §5.6.1: a list may carry empty elements and OWS around commas.
    for element in set.split(|&byte| byte == b',').map(trim_ows) {
        if element.is_empty() {
            continue;
        }
        specs += 1;
        if specs > MAX_RANGES {
            return RangeOutcome::Full;
        }
        let Some(spec) = Spec::parse(element) else {
            return RangeOutcome::Full;
        };
        if let Some(range) = spec.clamp(len) {
            ranges.push(range);
        }
    }
    // `1#range-spec`: at least one element.
    if specs == 0 {
        return RangeOutcome::Full;
    }
    let sum = ranges
        .iter()
        .fold(0u64, |sum, range| sum.saturating_add(range.len()));
    if overlaps(&ranges) || sum > len {
        return RangeOutcome::Full;
    }
    match ranges.len() {
        0 => RangeOutcome::Unsatisfiable,
        1 => RangeOutcome::Single(ranges[0]),
        _ => RangeOutcome::Multi(ranges),
    }
}

/// One syntactically valid range-spec (RFC 9110 §14.1.1), before clamping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    /// `first-pos "-" [ last-pos ]`; an absent last-pos means "to the end".
    Int { first: u64, last: Option<u64> },
    /// `"-" suffix-length`: the final `length` bytes.
    Suffix { length: u64 },
}

impl Spec {
    fn parse(element: &[u8]) -> Option<Spec> {
        let dash = element.iter().position(|&byte| byte == b'-')?;
        let (first, last) = (&element[..dash], &element[dash + 1..]);
        if first.is_empty() {
            return Some(Spec::Suffix {
                length: parse_digits(last)?,
            });
        }
        let first = parse_digits(first)?;
        if last.is_empty() {
            return Some(Spec::Int { first, last: None });
        }
        let last = parse_digits(last)?;
        // §14.1.1: last-pos < first-pos makes the range-spec, and so the header, invalid.
        if last < first {
            return None;
        }
        Some(Spec::Int {
            first,
            last: Some(last),
        })
    }

    /// The satisfiable part of this spec for `len` bytes, if any (§14.1.1). A zero-length
    /// representation satisfies nothing, not even a suffix (as nginx does): there is no byte to
    /// name in `Content-Range`.
    fn clamp(self, len: u64) -> Option<ByteRange> {
        let last_byte = len.checked_sub(1)?;
        match self {
            // "If the last-pos value is absent, or if the value is greater than or equal to
            // the current length … the byte range is interpreted as the remainder."
            Spec::Int { first, last } => (first < len).then(|| ByteRange {
                start: first,
                end_inclusive: last.map_or(last_byte, |last| last.min(last_byte)),
            }),
            // "If the selected representation is shorter than the specified suffix-length,
            // the entire representation is used." A zero suffix-length is unsatisfiable.
            Spec::Suffix { length } => (length > 0).then(|| ByteRange {
                start: len.saturating_sub(length),
                end_inclusive: last_byte,
            }),
        }
    }
}

/// `1*DIGIT` as a u64; values past `u64::MAX` saturate, which keeps their meaning here (a huge
/// first-pos is unsatisfiable, a huge last-pos or suffix-length covers the rest of the file).
fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        byte.is_ascii_digit().then(|| {
            value
                .saturating_mul(10)
                .saturating_add(u64::from(byte - b'0'))
        })
    })
}

/// Strips the case-insensitive `bytes=` prefix (§14.1: range units are case-insensitive).
fn strip_bytes_unit(value: &[u8]) -> Option<&[u8]> {
    const UNIT: &[u8] = b"bytes=";
    let prefix = value.get(..UNIT.len())?;
    prefix
        .eq_ignore_ascii_case(UNIT)
        .then(|| &value[UNIT.len()..])
}

/// Whether any two ranges share a byte; at most [`MAX_RANGES`] of them, so sorting a copy is
/// cheap and keeps the requested order for the response.
fn overlaps(ranges: &[ByteRange]) -> bool {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable_by_key(|range| range.start);
    sorted
        .windows(2)
        .any(|pair| pair[1].start <= pair[0].end_inclusive)
}

/// A `multipart/byteranges` boundary (RFC 2046 §5.1.1: at most 70 characters from `bchars`).
/// `seed` should vary per response (e.g. a per-worker counter mixed with start-up entropy) so
/// file content cannot predict, and so contain, the delimiter.
pub(crate) fn multipart_boundary(seed: u64) -> String {
    // SplitMix64 finaliser: spreads sequential seeds over all 64 bits.
    let mut mixed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^= mixed >> 31;
    format!("servery-{mixed:016x}")
}

/// The `Content-Type` field value of a multipart range response (RFC 9110 §14.6).
pub(crate) fn multipart_content_type(boundary: &str) -> String {
    format!("multipart/byteranges; boundary={boundary}")
}

/// The bytes sent before one part's content. Each part opens with CRLF so the first one needs
/// no special case: RFC 2046 §5.1.1 lets the body start with an empty preamble and CRLF.
pub(crate) fn multipart_part_header(
    boundary: &str,
    content_type: &str,
    range: &ByteRange,
    total: u64,
) -> String {
    format!(
        "\r\n--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: {}\r\n\r\n",
        range.content_range(total)
    )
}

/// The close-delimiter that ends the multipart body (RFC 2046 §5.1.1).
pub(crate) fn multipart_trailer(boundary: &str) -> String {
    format!("\r\n--{boundary}--\r\n")
}

/// The exact `Content-Length` of a multipart body built from [`multipart_part_header`], each
/// range's bytes, and [`multipart_trailer`], so it can be sent before any part is read.
pub(crate) fn multipart_len(
    boundary: &str,
    content_type: &str,
    ranges: &[ByteRange],
    total: u64,
) -> u64 {
    let parts: u64 = ranges
        .iter()
        .map(|range| {
            let header = multipart_part_header(boundary, content_type, range, total);
            header.len() as u64 + range.len()
        })
        .sum();
    parts + multipart_trailer(boundary).len() as u64
}

/// Step 5's multipart answer, as the site's `Files` makes it.
impl Files {
    /// A 206 of several ranges (`multipart/byteranges`).
    pub(super) fn multipart(
        &self,
        entry: &Entry,
        rep: &Chosen<'_>,
        ranges: &[ByteRange],
    ) -> Response {
        let seed = self.boundary_seed.get().wrapping_add(1);
        self.boundary_seed.set(seed);
        let boundary = multipart_boundary(seed);
        let total = rep.len;
        let mut parts = Vec::with_capacity(ranges.len() * 2 + 1);
        for r in ranges {
            let h = multipart_part_header(&boundary, &entry.content_type, r, total);
            parts.push(Part::Bytes(Bytes::from(h)));
            parts.push(match slice(rep, r.start, r.len()) {
                Body::Bytes(b) => Part::Bytes(b),
                Body::File(f) => Part::File(f),
                Body::Empty | Body::Parts(_) => Part::Bytes(Bytes::new()),
            });
        }
        parts.push(Part::Bytes(Bytes::from(multipart_trailer(&boundary))));
        let mut fields = self.fields(entry, rep.etag, rep.coding, false);
        fields.insert(
            0,
            (
                "Content-Type".into(),
                multipart_content_type(&boundary).into(),
            ),
        );
        let body = Body::Parts(parts);
        debug_assert_eq!(
            body.len(),
            multipart_len(&boundary, &entry.content_type, ranges, total)
        );
        Response {
            status: Status::PARTIAL_CONTENT,
            fields: Fields::List(fields),
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, end_inclusive: u64) -> ByteRange {
        ByteRange {
            start,
            end_inclusive,
        }
    }

    fn single(start: u64, end_inclusive: u64) -> RangeOutcome {
        RangeOutcome::Single(range(start, end_inclusive))
    }

    #[test]
    fn closed_range() {
        assert_eq!(parse(b"bytes=0-499", 10_000), single(0, 499));
        assert_eq!(parse(b"bytes=500-999", 10_000), single(500, 999));
        assert_eq!(parse(b"bytes=0-0", 1), single(0, 0));
    }

    #[test]
    fn open_range_runs_to_end() {
        assert_eq!(parse(b"bytes=500-", 10_000), single(500, 9_999));
        assert_eq!(parse(b"bytes=9999-", 10_000), single(9_999, 9_999));
    }

    #[test]
    fn suffix_range_takes_final_bytes() {
        assert_eq!(parse(b"bytes=-500", 10_000), single(9_500, 9_999));
        assert_eq!(parse(b"bytes=-1", 10_000), single(9_999, 9_999));
    }

    #[test]
    fn suffix_longer_than_file_is_whole_file() {
        assert_eq!(parse(b"bytes=-500", 100), single(0, 99));
        assert_eq!(parse(b"bytes=-99999999999999999999999", 100), single(0, 99));
    }

    #[test]
    fn zero_suffix_is_416() {
        assert_eq!(parse(b"bytes=-0", 100), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn end_beyond_eof_clamps() {
        assert_eq!(parse(b"bytes=50-5000", 100), single(50, 99));
        assert_eq!(
            parse(b"bytes=0-99999999999999999999999", 100),
            single(0, 99)
        );
    }

    #[test]
    fn start_at_or_past_eof_is_416() {
        assert_eq!(parse(b"bytes=100-", 100), RangeOutcome::Unsatisfiable);
        assert_eq!(parse(b"bytes=100-200", 100), RangeOutcome::Unsatisfiable);
        assert_eq!(
            parse(b"bytes=99999999999999999999999-", 100),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(
            parse(b"bytes=200-300, 400-", 100),
            RangeOutcome::Unsatisfiable
        );
    }

    #[test]
    fn empty_file_satisfies_no_range() {
        for header in [&b"bytes=0-"[..], b"bytes=0-0", b"bytes=-1", b"bytes=-500"] {
            assert_eq!(parse(header, 0), RangeOutcome::Unsatisfiable);
        }
    }

    #[test]
    fn drops_unsatisfiable_ranges_from_a_set() {
        assert_eq!(parse(b"bytes=0-9, 500-600", 100), single(0, 9));
        assert_eq!(
            parse(b"bytes=500-600,0-9,-0,20-29", 100),
            RangeOutcome::Multi(vec![range(0, 9), range(20, 29)])
        );
    }

    #[test]
    fn multiple_ranges_keep_requested_order() {
        assert_eq!(
            parse(b"bytes=50-59,0-9,-10", 100),
            RangeOutcome::Multi(vec![range(50, 59), range(0, 9), range(90, 99)])
        );
    }

    #[test]
    fn tolerates_whitespace_and_empty_list_elements() {
        assert_eq!(
            parse(b" bytes=0-9 ,\t20-29 , ,", 100),
            RangeOutcome::Multi(vec![range(0, 9), range(20, 29)])
        );
        assert_eq!(parse(b"bytes=,0-9", 100), single(0, 9));
    }

    #[test]
    fn unit_is_case_insensitive() {
        assert_eq!(parse(b"Bytes=0-9", 100), single(0, 9));
        assert_eq!(parse(b"BYTES=0-9", 100), single(0, 9));
    }

    #[test]
    fn other_unit_is_ignored() {
        assert_eq!(parse(b"items=0-9", 100), RangeOutcome::Full);
        assert_eq!(parse(b"bytes 0-9", 100), RangeOutcome::Full);
        assert_eq!(parse(b"bytesx=0-9", 100), RangeOutcome::Full);
        assert_eq!(parse(b"", 100), RangeOutcome::Full);
    }

    #[test]
    fn invalid_syntax_is_ignored() {
        for header in [
            &b"bytes="[..],
            b"bytes=,",
            b"bytes=-",
            b"bytes=abc",
            b"bytes=1",
            b"bytes=1-2-3",
            b"bytes=+1-2",
            b"bytes=0x10-20",
            b"bytes=1 -2",
            b"bytes=--5",
            b"bytes=0-9,x",
        ] {
            assert_eq!(
                parse(header, 100),
                RangeOutcome::Full,
                "{:?}",
                String::from_utf8_lossy(header)
            );
        }
    }

    #[test]
    fn last_before_first_is_ignored() {
        assert_eq!(parse(b"bytes=10-5", 100), RangeOutcome::Full);
        // Even beside a valid range: the whole ranges-specifier is invalid.
        assert_eq!(parse(b"bytes=0-1,10-5", 100), RangeOutcome::Full);
    }

    #[test]
    fn more_than_sixteen_ranges_is_ignored() {
        let sixteen: Vec<String> = (0..16).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
        let header = format!("bytes={}", sixteen.join(","));
        assert!(matches!(
            parse(header.as_bytes(), 100),
            RangeOutcome::Multi(ranges) if ranges.len() == 16
        ));
        let header = format!("{header},40-41");
        assert_eq!(parse(header.as_bytes(), 100), RangeOutcome::Full);
    }

    #[test]
    fn overlapping_ranges_are_ignored() {
        assert_eq!(parse(b"bytes=0-10,10-20", 100), RangeOutcome::Full);
        assert_eq!(parse(b"bytes=50-60,0-99", 100), RangeOutcome::Full);
        assert_eq!(parse(b"bytes=0-,0-", 100), RangeOutcome::Full);
        // Overlap only after clamping suffix to the file still counts.
        assert_eq!(parse(b"bytes=-200,0-0", 100), RangeOutcome::Full);
    }

    #[test]
    fn adjacent_ranges_are_not_overlapping() {
        assert_eq!(
            parse(b"bytes=0-9,10-19", 100),
            RangeOutcome::Multi(vec![range(0, 9), range(10, 19)])
        );
    }

    #[test]
    fn whole_file_as_single_range_is_still_a_range() {
        assert_eq!(parse(b"bytes=0-", 100), single(0, 99));
    }

    #[test]
    fn byte_range_len_counts_inclusive_ends() {
        assert_eq!(range(0, 0).len(), 1);
        assert_eq!(range(0, 499).len(), 500);
    }

    #[test]
    fn content_range_values() {
        assert_eq!(range(0, 499).content_range(1234), "bytes 0-499/1234");
        assert_eq!(unsatisfied_content_range(1234), "bytes */1234");
    }

    #[test]
    fn boundary_is_valid_and_varies_with_seed() {
        let first = multipart_boundary(0);
        let second = multipart_boundary(1);
        assert_ne!(first, second);
        for boundary in [first, second] {
            assert!(!boundary.is_empty() && boundary.len() <= 70);
            assert!(boundary
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-'));
        }
        assert_eq!(
            multipart_content_type("b"),
            "multipart/byteranges; boundary=b"
        );
    }

    #[test]
    fn multipart_body_has_rfc_framing() {
        let body: String = [range(0, 1), range(4, 5)]
            .iter()
            .map(|r| multipart_part_header("B", "text/plain", r, 6) + "xx")
            .collect::<String>()
            + &multipart_trailer("B");
        assert_eq!(
            body,
            "\r\n--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/6\r\n\r\nxx\
             \r\n--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 4-5/6\r\n\r\nxx\
             \r\n--B--\r\n"
        );
    }

    #[test]
    fn multipart_len_matches_built_body() {
        let file: Vec<u8> = (0..=255).collect();
        let total = file.len() as u64;
        let ranges = [range(0, 9), range(100, 199), range(250, 255)];
        let boundary = multipart_boundary(42);
        let mut body = Vec::new();
        for r in &ranges {
            let header = multipart_part_header(&boundary, "application/octet-stream", r, total);
            body.extend_from_slice(header.as_bytes());
            body.extend_from_slice(&file[r.start as usize..=r.end_inclusive as usize]);
        }
        body.extend_from_slice(multipart_trailer(&boundary).as_bytes());
        assert_eq!(
            multipart_len(&boundary, "application/octet-stream", &ranges, total),
            body.len() as u64
        );
    }
}

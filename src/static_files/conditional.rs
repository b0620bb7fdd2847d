//! Conditional requests (RFC 9110 §13): decides 304, 412, or proceed — and whether a `Range`
//! may be honoured — from the request's precondition fields and the file's validators.
//!
//! Pure: the caller extracts header values and `stat`s the file; this module only compares.
//! [`evaluate`] follows the RFC 9110 §13.2.2 order exactly:
//! 1. `If-Match` present: false → 412.
//! 2. Else `If-Unmodified-Since` (a valid HTTP-date): false → 412.
//! 3. `If-None-Match` present: false → 304 for GET/HEAD, 412 otherwise.
//! 4. Else, for GET/HEAD, `If-Modified-Since` (a valid HTTP-date): false → 304.
//! 5. `If-Range` present: false → serve the full representation (ignore `Range`).
//!
//! [`etag_for`] makes the strong ETag these comparisons are against.

use crate::http::token::trim_ows;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Files;
use crate::http::Head;

/// The request's precondition field values, raw as received; `None` when absent.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Headers<'a> {
    pub(crate) if_match: Option<&'a [u8]>,
    pub(crate) if_none_match: Option<&'a [u8]>,
    pub(crate) if_modified_since: Option<&'a [u8]>,
    pub(crate) if_unmodified_since: Option<&'a [u8]>,
    pub(crate) if_range: Option<&'a [u8]>,
    /// GET or HEAD: the methods for which a failed `If-None-Match`/`If-Modified-Since` is a
    /// 304 rather than a 412 (§13.1.2, §13.1.3).
    pub(crate) method_is_get_or_head: bool,
}

/// The selected representation's validators, as sent in `ETag` and `Last-Modified`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Validators<'a> {
    /// A strong entity-tag including its quotes, e.g. from [`etag_for`].
    pub(crate) etag: &'a str,
    /// Compared at whole-second precision, the resolution of an HTTP-date (§5.6.7).
    pub(crate) last_modified: SystemTime,
}

/// What the preconditions allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precondition {
    /// Perform the request; `honor_range` is false when `If-Range` did not match, so any
    /// `Range` must be ignored and the whole representation sent (§13.1.5).
    Proceed { honor_range: bool },
    /// 304 Not Modified: the client's cached copy is current.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Evaluates the preconditions in RFC 9110 §13.2.2 order.
pub(crate) fn evaluate(headers: &Headers<'_>, validators: &Validators<'_>) -> Precondition {
    // Most requests carry no precondition: nothing to parse or compare.
    if headers.if_match.is_none()
        && headers.if_none_match.is_none()
        && headers.if_modified_since.is_none()
        && headers.if_unmodified_since.is_none()
        && headers.if_range.is_none()
    {
        return Precondition::Proceed { honor_range: true };
    }
    let current = EntityTag::parse(validators.etag.as_bytes());
    let modified = unix_seconds(validators.last_modified);

    // Step 1 (§13.1.1): "*" is true because a current representation exists.
    if let Some(if_match) = headers.if_match {
        if !list_matches(if_match, current, Comparison::Strong) {
            return Precondition::Failed;
        }
    } else if let Some(since) = headers.if_unmodified_since.and_then(parse_date) {
        // Step 2 (§13.1.4): ignored when If-Match is present or the date is invalid.
        if modified > since {
            return Precondition::Failed;
        }
    }

    // Step 3 (§13.1.2): weak comparison, and "*" matches any current representation.
    if let Some(if_none_match) = headers.if_none_match {
        if list_matches(if_none_match, current, Comparison::Weak) {
            return if headers.method_is_get_or_head {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if headers.method_is_get_or_head {
        // Step 4 (§13.1.3): ignored when If-None-Match is present, for other methods, and
        // when the date is invalid; "not modified" means modified at or before the date.
        if let Some(since) = headers.if_modified_since.and_then(parse_date) {
            if modified <= since {
                return Precondition::NotModified;
            }
        }
    }

    // Step 5 (§13.1.5).
    let honor_range = headers
        .if_range
        .is_none_or(|if_range| if_range_matches(if_range, current, modified));
    Precondition::Proceed { honor_range }
}

/// A strong ETag for a file, quoted: `"<len>-<mtime_ns>"` in hex, plus `+<coding>` for a
/// content-coded variant. RFC 9110 §8.8.3.3: each content coding is a different representation
/// and must carry a different strong tag, or a cache could answer a gzip request with brotli
/// bytes. Pass the metadata of the file actually sent (e.g. the `.br` sibling's).
///
/// No inode: replicas of an origin (pods, or servers behind one CDN) serve copies of the same
/// files, with the same sizes and modification times (`cp -p`, `rsync -t`, an image layer) but
/// their own inodes, and a CDN revalidating against any of them must get its 304. nginx's tag
/// is the same two facts (`<mtime_s>-<len>`); servery's mtime has nanoseconds. The open-file
/// cache still tells files apart by inode (`cache::Identity`).
///
/// Hex digits and `-` never contain `+`, so base and coding cannot run into each other.
pub(crate) fn etag_for(len: u64, mtime_ns: i128, encoding: Option<&str>) -> String {
    let mut etag = format!("\"{len:x}-{mtime_ns:x}");
    if let Some(coding) = encoding {
        etag.push('+');
        // §8.8.3: only etagc may appear inside the quotes.
        etag.extend(coding.chars().filter(|&c| c.is_ascii_graphic() && c != '"'));
    }
    etag.push('"');
    etag
}

/// The two entity-tag comparison functions of RFC 9110 §8.8.3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    /// Both strong and the opaque-tags identical (If-Match, If-Range).
    Strong,
    /// The opaque-tags identical, either may be weak (If-None-Match).
    Weak,
}

/// An entity-tag (RFC 9110 §8.8.3): `[ "W/" ] DQUOTE *etagc DQUOTE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntityTag<'a> {
    weak: bool,
    /// The opaque-tag without its quotes.
    opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses exactly one entity-tag, with optional surrounding OWS.
    fn parse(value: &'a [u8]) -> Option<EntityTag<'a>> {
        match EntityTag::parse_prefix(trim_ows(value))? {
            (tag, []) => Some(tag),
            _ => None,
        }
    }

    /// Parses an entity-tag at the start of `input`, returning it and the rest.
    fn parse_prefix(input: &'a [u8]) -> Option<(EntityTag<'a>, &'a [u8])> {
        // §8.8.3: the "W/" prefix is case-sensitive (%s"W/").
        let (weak, input) = match input.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, input),
        };
        let input = input.strip_prefix(b"\"")?;
        let close = input.iter().position(|&byte| byte == b'"')?;
        let opaque = &input[..close];
        // etagc = %x21 / %x23-7E / obs-text
        if !opaque.iter().all(|&byte| byte == 0x21 || byte >= 0x23) || opaque.contains(&0x7f) {
            return None;
        }
        Some((EntityTag { weak, opaque }, &input[close + 1..]))
    }

    fn matches(self, other: EntityTag<'_>, comparison: Comparison) -> bool {
        let strength_ok = match comparison {
            Comparison::Strong => !self.weak && !other.weak,
            Comparison::Weak => true,
        };
        strength_ok && self.opaque == other.opaque
    }
}

/// Whether an `If-Match`/`If-None-Match` value is `*` or lists a tag equal to `current` under
/// `comparison`. A malformed list matches nothing: for If-Match that fails safe (412), for
/// If-None-Match it serves a fresh 200.
fn list_matches(value: &[u8], current: Option<EntityTag<'_>>, comparison: Comparison) -> bool {
    // A representation always exists here, so "*" is satisfied (§13.1.1, §13.1.2).
    if trim_ows(value) == b"*" {
        return true;
    }
    let (Some(current), Some(tags)) = (current, parse_list(value)) else {
        return false;
    };
    tags.into_iter().any(|tag| tag.matches(current, comparison))
}

/// Parses `#entity-tag` (§5.6.1: OWS around commas, empty elements allowed). The list is
/// tokenised rather than split on commas because etagc includes `,`.
fn parse_list(mut input: &[u8]) -> Option<Vec<EntityTag<'_>>> {
    let mut tags = Vec::new();
    loop {
        while let [b' ' | b'\t' | b',', rest @ ..] = input {
            input = rest;
        }
        if input.is_empty() {
            return Some(tags);
        }
        let (tag, rest) = EntityTag::parse_prefix(input)?;
        tags.push(tag);
        input = trim_ows(rest);
        if !input.is_empty() && input[0] != b',' {
            return None;
        }
    }
}

/// §13.1.5: an entity-tag must match strongly (so a weak one never does); an HTTP-date must
/// equal Last-Modified exactly. Anything else is a mismatch, so the full representation is
/// sent, which is always safe.
fn if_range_matches(value: &[u8], current: Option<EntityTag<'_>>, modified: u64) -> bool {
    let value = trim_ows(value);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        return match (EntityTag::parse(value), current) {
            (Some(tag), Some(current)) => tag.matches(current, Comparison::Strong),
            _ => false,
        };
    }
    parse_date(value) == Some(modified)
}

/// An HTTP-date (§5.6.7, including the obsolete RFC 850 and asctime forms) as Unix seconds.
fn parse_date(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(trim_ows(value)).ok()?;
    httpdate::parse_http_date(text).ok().map(unix_seconds)
}

/// Whole seconds since the epoch; times before it count as the epoch, which no HTTP-date
/// precedes.
fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Step 4 as the site's `Files` meets it.
impl Files {
    /// Step 4 for a representation with `etag`.
    pub(super) fn precondition(
        &self,
        head: &Head<'_>,
        etag: &str,
        last_modified: SystemTime,
    ) -> Precondition {
        // One pass over the fields for the five (a name of RFC 9110 §13.1
        // starts with `if-`; most requests have none).
        let mut h = Headers {
            if_match: None,
            if_none_match: None,
            if_modified_since: None,
            if_unmodified_since: None,
            if_range: None,
            method_is_get_or_head: true,
        };
        for &(name, value) in &head.headers {
            let name = name.as_bytes();
            if name.len() < 5 || !name[..3].eq_ignore_ascii_case(b"if-") {
                continue;
            }
            let slot = match &name[3..] {
                n if n.eq_ignore_ascii_case(b"match") => &mut h.if_match,
                n if n.eq_ignore_ascii_case(b"none-match") => &mut h.if_none_match,
                n if n.eq_ignore_ascii_case(b"modified-since") => &mut h.if_modified_since,
                n if n.eq_ignore_ascii_case(b"unmodified-since") => &mut h.if_unmodified_since,
                n if n.eq_ignore_ascii_case(b"range") => &mut h.if_range,
                _ => continue,
            };
            // The first of each, as `Head::header` finds it.
            slot.get_or_insert(value);
        }
        evaluate(
            &h,
            &Validators {
                etag,
                last_modified,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const ETAG: &str = "\"abc-10-5f\"";
    /// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
    const MODIFIED_SECS: u64 = 784_111_777;
    const MODIFIED: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const EARLIER: &str = "Sun, 06 Nov 1994 08:49:36 GMT";
    const LATER: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

    fn validators() -> Validators<'static> {
        Validators {
            etag: ETAG,
            last_modified: UNIX_EPOCH + Duration::from_secs(MODIFIED_SECS),
        }
    }

    fn get() -> Headers<'static> {
        Headers {
            method_is_get_or_head: true,
            ..Headers::default()
        }
    }

    fn put() -> Headers<'static> {
        Headers::default()
    }

    fn eval(headers: Headers<'_>) -> Precondition {
        evaluate(&headers, &validators())
    }

    const PROCEED: Precondition = Precondition::Proceed { honor_range: true };
    const FULL: Precondition = Precondition::Proceed { honor_range: false };

    #[test]
    fn no_preconditions_proceeds() {
        assert_eq!(eval(get()), PROCEED);
        assert_eq!(eval(put()), PROCEED);
    }

    #[test]
    fn if_match_star_or_listed_tag_proceeds() {
        for value in [&b"*"[..], b"\"abc-10-5f\"", b"\"x\", \"abc-10-5f\""] {
            let headers = Headers {
                if_match: Some(value),
                ..get()
            };
            assert_eq!(eval(headers), PROCEED);
        }
    }

    #[test]
    fn if_match_mismatch_is_412() {
        let headers = Headers {
            if_match: Some(b"\"other\""),
            ..get()
        };
        assert_eq!(eval(headers), Precondition::Failed);
    }

    #[test]
    fn if_match_uses_strong_comparison() {
        let headers = Headers {
            if_match: Some(b"W/\"abc-10-5f\""),
            ..get()
        };
        assert_eq!(eval(headers), Precondition::Failed);
    }

    #[test]
    fn malformed_if_match_is_412() {
        for value in [&b"abc-10-5f"[..], b"\"abc-10-5f", b"\"abc-10-5f\" x", b""] {
            let headers = Headers {
                if_match: Some(value),
                ..get()
            };
            assert_eq!(eval(headers), Precondition::Failed);
        }
    }

    #[test]
    fn if_unmodified_since_after_modification_proceeds() {
        for date in [MODIFIED, LATER] {
            let headers = Headers {
                if_unmodified_since: Some(date.as_bytes()),
                ..put()
            };
            assert_eq!(eval(headers), PROCEED);
        }
    }

    #[test]
    fn if_unmodified_since_before_modification_is_412() {
        let headers = Headers {
            if_unmodified_since: Some(EARLIER.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), Precondition::Failed);
    }

    #[test]
    fn invalid_if_unmodified_since_is_ignored() {
        let headers = Headers {
            if_unmodified_since: Some(b"yesterday"),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_match_overrides_if_unmodified_since() {
        let headers = Headers {
            if_match: Some(ETAG.as_bytes()),
            if_unmodified_since: Some(EARLIER.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_none_match_hit_is_304_for_get() {
        for value in [
            &b"\"abc-10-5f\""[..],
            b"W/\"abc-10-5f\"",
            b"\"a\",W/\"abc-10-5f\"",
            b" \"a\" , , \"abc-10-5f\" ",
            b"*",
        ] {
            let headers = Headers {
                if_none_match: Some(value),
                ..get()
            };
            assert_eq!(
                eval(headers),
                Precondition::NotModified,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn if_none_match_hit_is_412_for_other_methods() {
        let headers = Headers {
            if_none_match: Some(b"*"),
            ..put()
        };
        assert_eq!(eval(headers), Precondition::Failed);
    }

    #[test]
    fn if_none_match_miss_proceeds() {
        for value in [
            &b"\"abc-10-5\""[..],
            b"\"abc-10-5f+br\"",
            b"w/\"abc-10-5f\"",
        ] {
            let headers = Headers {
                if_none_match: Some(value),
                ..get()
            };
            assert_eq!(eval(headers), PROCEED);
        }
    }

    #[test]
    fn etag_containing_comma_is_one_tag() {
        let validators = Validators {
            etag: "\"a,b\"",
            ..validators()
        };
        let headers = Headers {
            if_none_match: Some(b"\"x\", \"a,b\""),
            ..get()
        };
        assert_eq!(evaluate(&headers, &validators), Precondition::NotModified);
        let headers = Headers {
            if_none_match: Some(b"\"a\", \"b\""),
            ..get()
        };
        assert_eq!(evaluate(&headers, &validators), PROCEED);
    }

    #[test]
    fn if_modified_since_not_modified_is_304() {
        for date in [MODIFIED, LATER] {
            let headers = Headers {
                if_modified_since: Some(date.as_bytes()),
                ..get()
            };
            assert_eq!(eval(headers), Precondition::NotModified);
        }
    }

    #[test]
    fn if_modified_since_modified_proceeds() {
        let headers = Headers {
            if_modified_since: Some(EARLIER.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_modified_since_accepts_obsolete_date_forms() {
        for date in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            let headers = Headers {
                if_modified_since: Some(date.as_bytes()),
                ..get()
            };
            assert_eq!(eval(headers), Precondition::NotModified, "{date}");
        }
    }

    #[test]
    fn invalid_if_modified_since_is_ignored() {
        let headers = Headers {
            if_modified_since: Some(b"Sun, 06 Nov 1994 08:49:37"),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_modified_since_ignored_for_other_methods() {
        let headers = Headers {
            if_modified_since: Some(LATER.as_bytes()),
            ..put()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_none_match_overrides_if_modified_since() {
        let headers = Headers {
            if_none_match: Some(b"\"other\""),
            if_modified_since: Some(LATER.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn sub_second_modification_time_is_truncated() {
        let validators = Validators {
            last_modified: UNIX_EPOCH + Duration::new(MODIFIED_SECS, 999_999_999),
            ..validators()
        };
        let headers = Headers {
            if_modified_since: Some(MODIFIED.as_bytes()),
            if_range: Some(MODIFIED.as_bytes()),
            ..get()
        };
        assert_eq!(evaluate(&headers, &validators), Precondition::NotModified);
        let headers = Headers {
            if_range: Some(MODIFIED.as_bytes()),
            ..get()
        };
        assert_eq!(evaluate(&headers, &validators), PROCEED);
    }

    #[test]
    fn if_match_failure_beats_if_none_match() {
        let headers = Headers {
            if_match: Some(b"\"other\""),
            if_none_match: Some(ETAG.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), Precondition::Failed);
    }

    #[test]
    fn if_range_strong_etag_match_honors_range() {
        let headers = Headers {
            if_range: Some(ETAG.as_bytes()),
            ..get()
        };
        assert_eq!(eval(headers), PROCEED);
    }

    #[test]
    fn if_range_weak_or_other_etag_sends_full() {
        for value in [
            &b"W/\"abc-10-5f\""[..],
            b"\"other\"",
            b"\"abc-10-5f\", \"x\"",
        ] {
            let headers = Headers {
                if_range: Some(value),
                ..get()
            };
            assert_eq!(eval(headers), FULL);
        }
    }

    #[test]
    fn if_range_date_must_equal_last_modified() {
        let exact = Headers {
            if_range: Some(MODIFIED.as_bytes()),
            ..get()
        };
        assert_eq!(eval(exact), PROCEED);
        for date in [EARLIER, LATER, "garbage"] {
            let headers = Headers {
                if_range: Some(date.as_bytes()),
                ..get()
            };
            assert_eq!(eval(headers), FULL, "{date}");
        }
    }

    #[test]
    fn etag_for_is_strong_quoted_and_well_formed() {
        let etag = etag_for(4096, 1_700_000_000_123_456_789, None);
        assert_eq!(etag, "\"1000-17979cfe3d85cd15\"");
        let tag = EntityTag::parse(etag.as_bytes()).unwrap();
        assert!(!tag.weak);
        let negative = etag_for(1, -1, Some("br"));
        assert!(EntityTag::parse(negative.as_bytes()).is_some());
    }

    #[test]
    fn etag_for_differs_per_encoding() {
        let identity = etag_for(100, 42, None);
        let brotli = etag_for(100, 42, Some("br"));
        let gzip = etag_for(100, 42, Some("gzip"));
        assert_eq!(brotli, "\"64-2a+br\"");
        assert_ne!(identity, brotli);
        assert_ne!(brotli, gzip);
        assert_ne!(identity, gzip);
    }

    #[test]
    fn etag_for_changes_with_each_input() {
        let base = etag_for(2, 3, None);
        assert_ne!(base, etag_for(9, 3, None));
        assert_ne!(base, etag_for(2, 9, None));
        // Copies of one file on two replicas: the same tag.
        assert_eq!(base, etag_for(2, 3, None));
    }
}

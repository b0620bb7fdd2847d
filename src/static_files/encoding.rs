//! `Accept-Encoding` negotiation (RFC 9110 §12.5.3) between the client's preferences and the
//! precompressed siblings that exist on disk (`file.br`, `file.zst`, `file.gz`).
//!
//! Pure: the caller probes which siblings exist and passes them as [`Available`]; [`choose`]
//! returns the coding to send, or `None` for the file as-is (identity):
//! 1. Parse each list element into a coding and a qvalue; a malformed element is dropped.
//! 2. Weigh each available coding by its own entry, else by `*`; `q=0` means "not acceptable".
//! 3. Take the highest weight, ties broken by [`Coding::PREFERENCE`] (smallest output first).
//! 4. Send identity instead only if the client listed it (or `*`) with a strictly higher weight.
//!
//! Identity is never refused here: with `identity;q=0` and nothing else acceptable the file is
//! still sent as-is, which RFC 9110 §12.5.3 permits in place of a 406.

use crate::http::token::trim_ows;
/// A content coding we can serve from a precompressed sibling file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Coding {
    /// `br` (RFC 7932).
    Brotli,
    /// `zstd` (RFC 8878).
    Zstd,
    /// `gzip` (RFC 1952); `x-gzip` is accepted as an alias (RFC 9110 §8.4.1.3).
    Gzip,
}

impl Coding {
    /// Server preference when the client weighs codings equally: typically the smallest
    /// output first for static assets.
    pub(crate) const PREFERENCE: [Coding; 3] = [Coding::Brotli, Coding::Zstd, Coding::Gzip];

    /// The content-coding token for `Content-Encoding`.
    pub(crate) fn token(&self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The suffix of the precompressed sibling file, e.g. `app.js` → `app.js.br`.
    pub(crate) fn file_suffix(&self) -> &'static str {
        match self {
            Coding::Brotli => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Coding::Brotli => 1,
            Coding::Zstd => 2,
            Coding::Gzip => 4,
        }
    }

    /// Its position in [`Coding::PREFERENCE`] (and in per-coding arrays).
    pub(crate) fn index(self) -> usize {
        match self {
            Coding::Brotli => 0,
            Coding::Zstd => 1,
            Coding::Gzip => 2,
        }
    }
}

/// The set of codings that have a precompressed sibling for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Available(u8);

impl Available {
    /// No precompressed siblings.
    pub(crate) const NONE: Available = Available(0);
    /// Every coding: what on-the-fly compression can make.
    pub(crate) const ALL: Available = Available(0b111);

    /// This set plus `coding`.
    pub(crate) fn with(self, coding: Coding) -> Available {
        Available(self.0 | coding.bit())
    }

    pub(crate) fn contains(self, coding: Coding) -> bool {
        self.0 & coding.bit() != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// A qvalue in thousandths (RFC 9110 §12.4.2 allows at most three decimals), 0..=1000.
type Weight = u16;

const MAX_WEIGHT: Weight = 1000;

/// Picks the coding to send for an `Accept-Encoding` value, or `None` for identity.
///
/// A missing header is `None`: RFC 9110 §12.5.3 lets "any coding" be assumed, but real clients
/// that omit it (scripts, health checks) usually cannot decode anything. Several
/// `Accept-Encoding` lines must be joined with `,` by the caller first (RFC 9110 §5.3).
pub(crate) fn choose(accept_encoding: Option<&[u8]>, available: Available) -> Option<Coding> {
    let value = accept_encoding?;
    if available.is_empty() {
        return None;
    }
    let weights = Weights::parse(value);

    let mut best: Option<(Coding, Weight)> = None;
    for coding in Coding::PREFERENCE {
        if !available.contains(coding) {
            continue;
        }
        // §12.5.3: "*" matches any coding not explicitly listed.
        let Some(weight) = weights.codings[coding.index()].or(weights.star) else {
            continue;
        };
        // Strictly greater, so the earlier (preferred) coding wins a tie; q=0 never wins.
        if weight > best.map_or(0, |(_, best)| best) {
            best = Some((coding, weight));
        }
    }
    let (coding, weight) = best?;
    // Identity is acceptable by default; it beats a coding only when the client ranked it
    // (directly or through "*") strictly higher.
    match weights.identity.or(weights.star) {
        Some(identity) if identity > weight => None,
        _ => Some(coding),
    }
}

/// The weights the client gave, per coding we care about; `None` when not listed. The first
/// entry for a coding wins.
#[derive(Debug, Default)]
struct Weights {
    /// Indexed by [`Coding::index`].
    codings: [Option<Weight>; 3],
    identity: Option<Weight>,
    star: Option<Weight>,
}

impl Weights {
    fn parse(value: &[u8]) -> Weights {
        let mut weights = Weights::default();
        // §5.6.1: empty elements and OWS around commas are allowed.
        for element in value.split(|&byte| byte == b',') {
            let Some((token, weight)) = parse_element(element) else {
                continue;
            };
            let slot = if token.eq_ignore_ascii_case(b"br") {
                &mut weights.codings[Coding::Brotli.index()]
            } else if token.eq_ignore_ascii_case(b"zstd") {
                &mut weights.codings[Coding::Zstd.index()]
            } else if token.eq_ignore_ascii_case(b"gzip") || token.eq_ignore_ascii_case(b"x-gzip") {
                &mut weights.codings[Coding::Gzip.index()]
            } else if token.eq_ignore_ascii_case(b"identity") {
                &mut weights.identity
            } else if token == b"*" {
                &mut weights.star
            } else {
                continue;
            };
            if slot.is_none() {
                *slot = Some(weight);
            }
        }
        weights
    }
}

/// `codings [ weight ]` where `weight = OWS ";" OWS "q=" qvalue` (§12.4.2, §12.5.3). Returns
/// `None` for an empty or malformed element, including any parameter other than one `q`.
fn parse_element(element: &[u8]) -> Option<(&[u8], Weight)> {
    let mut parts = element.splitn(2, |&byte| byte == b';');
    let token = trim_ows(parts.next()?);
    if token.is_empty() || !token.iter().copied().all(is_tchar) {
        return None;
    }
    let Some(parameter) = parts.next() else {
        return Some((token, MAX_WEIGHT));
    };
    let parameter = trim_ows(parameter);
    // "q=" is case-insensitive (ABNF string literals are, RFC 5234 §2.3).
    let name = parameter.get(..2)?;
    if !name.eq_ignore_ascii_case(b"q=") {
        return None;
    }
    Some((token, parse_qvalue(&parameter[2..])?))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` in thousandths (§12.4.2).
fn parse_qvalue(text: &[u8]) -> Option<Weight> {
    let (whole, fraction) = match text {
        [digit] => (*digit, &[][..]),
        [digit, b'.', fraction @ ..] if fraction.len() <= 3 => (*digit, fraction),
        _ => return None,
    };
    let mut thousandths: Weight = 0;
    let mut scale: Weight = 100;
    for &digit in fraction {
        if !digit.is_ascii_digit() {
            return None;
        }
        thousandths += Weight::from(digit - b'0') * scale;
        scale /= 10;
    }
    match whole {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(MAX_WEIGHT),
        _ => None,
    }
}

/// `tchar` (RFC 9110 §5.6.2).
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Available = Available::ALL;

    fn pick(header: &str, available: Available) -> Option<Coding> {
        choose(Some(header.as_bytes()), available)
    }

    #[test]
    fn missing_header_is_identity() {
        assert_eq!(choose(None, ALL), None);
    }

    #[test]
    fn empty_header_is_identity() {
        assert_eq!(pick("", ALL), None);
        assert_eq!(pick("  ", ALL), None);
        assert_eq!(pick(" , ,", ALL), None);
    }

    #[test]
    fn nothing_available_is_identity() {
        assert_eq!(pick("br, gzip, *", Available::NONE), None);
    }

    #[test]
    fn browser_header_prefers_brotli() {
        assert_eq!(pick("gzip, deflate, br, zstd", ALL), Some(Coding::Brotli));
        assert_eq!(
            pick(
                "gzip, deflate, br, zstd",
                Available::NONE.with(Coding::Zstd).with(Coding::Gzip)
            ),
            Some(Coding::Zstd)
        );
    }

    #[test]
    fn only_available_codings_are_chosen() {
        let gzip_only = Available::NONE.with(Coding::Gzip);
        assert_eq!(pick("br, gzip", gzip_only), Some(Coding::Gzip));
        assert_eq!(pick("br", gzip_only), None);
    }

    #[test]
    fn higher_q_beats_preference() {
        assert_eq!(pick("br;q=0.5, gzip;q=0.8", ALL), Some(Coding::Gzip));
        assert_eq!(pick("br;q=0.999, zstd", ALL), Some(Coding::Zstd));
    }

    #[test]
    fn ties_go_to_br_then_zstd_then_gzip() {
        assert_eq!(
            pick("gzip;q=0.5, zstd;q=0.5, br;q=0.5", ALL),
            Some(Coding::Brotli)
        );
        assert_eq!(pick("gzip, zstd", ALL), Some(Coding::Zstd));
    }

    #[test]
    fn q_zero_excludes() {
        assert_eq!(pick("br;q=0, gzip", ALL), Some(Coding::Gzip));
        assert_eq!(pick("br;q=0.000, gzip;q=0", ALL), None);
        assert_eq!(pick("gzip;q=0.", ALL), None);
    }

    #[test]
    fn star_covers_unlisted_codings() {
        assert_eq!(pick("*", ALL), Some(Coding::Brotli));
        assert_eq!(pick("br;q=0, *", ALL), Some(Coding::Zstd));
        assert_eq!(pick("gzip;q=0.9, *;q=0.1", ALL), Some(Coding::Gzip));
        assert_eq!(pick("*;q=0", ALL), None);
        assert_eq!(pick("gzip, *;q=0", ALL), Some(Coding::Gzip));
    }

    #[test]
    fn identity_preferred_only_when_ranked_higher() {
        assert_eq!(pick("gzip;q=0.5, identity", ALL), None);
        assert_eq!(pick("gzip;q=0.5, identity;q=0.5", ALL), Some(Coding::Gzip));
        assert_eq!(pick("gzip;q=0.5", ALL), Some(Coding::Gzip));
        assert_eq!(pick("identity", ALL), None);
        assert_eq!(pick("identity;q=0, br", ALL), Some(Coding::Brotli));
    }

    #[test]
    fn star_weighs_identity_when_not_listed() {
        assert_eq!(
            pick("gzip;q=0.3, *;q=0.5", Available::NONE.with(Coding::Gzip)),
            None
        );
        assert_eq!(
            pick(
                "gzip;q=0.3, identity;q=0.1, *;q=0.5",
                Available::NONE.with(Coding::Gzip)
            ),
            Some(Coding::Gzip)
        );
    }

    #[test]
    fn tokens_are_case_insensitive() {
        assert_eq!(pick("BR", ALL), Some(Coding::Brotli));
        assert_eq!(pick("GZip;Q=1", ALL), Some(Coding::Gzip));
        assert_eq!(
            pick("ZSTD", Available::NONE.with(Coding::Zstd)),
            Some(Coding::Zstd)
        );
    }

    #[test]
    fn x_gzip_is_gzip() {
        assert_eq!(pick("x-gzip", ALL), Some(Coding::Gzip));
        assert_eq!(pick("X-GZIP;q=0.5, br;q=0.4", ALL), Some(Coding::Gzip));
    }

    #[test]
    fn tolerates_whitespace() {
        assert_eq!(
            pick("  br ; q=0.2 ,\tgzip\t;\tq=0.9  ", ALL),
            Some(Coding::Gzip)
        );
    }

    #[test]
    fn invalid_q_drops_the_token() {
        for header in [
            "br;q=2, gzip;q=0.1",
            "br;q=1.5, gzip;q=0.1",
            "br;q=1.0001, gzip;q=0.1",
            "br;q=0.1234, gzip;q=0.1",
            "br;q=, gzip;q=0.1",
            "br;q=abc, gzip;q=0.1",
            "br;q=-1, gzip;q=0.1",
            "br;q=.5, gzip;q=0.1",
            "br;level=5, gzip;q=0.1",
            "br;, gzip;q=0.1",
            "br;q=0.5;x=1, gzip;q=0.1",
        ] {
            assert_eq!(pick(header, ALL), Some(Coding::Gzip), "{header}");
        }
    }

    #[test]
    fn accepts_all_valid_qvalue_forms() {
        assert_eq!(parse_qvalue(b"1"), Some(1000));
        assert_eq!(parse_qvalue(b"1."), Some(1000));
        assert_eq!(parse_qvalue(b"1.000"), Some(1000));
        assert_eq!(parse_qvalue(b"0"), Some(0));
        assert_eq!(parse_qvalue(b"0.5"), Some(500));
        assert_eq!(parse_qvalue(b"0.05"), Some(50));
        assert_eq!(parse_qvalue(b"0.001"), Some(1));
        assert_eq!(parse_qvalue(b"1.001"), None);
    }

    #[test]
    fn first_entry_for_a_coding_wins() {
        assert_eq!(pick("br;q=0, br", ALL), None);
        assert_eq!(pick("br, br;q=0", ALL), Some(Coding::Brotli));
    }

    #[test]
    fn unknown_and_malformed_tokens_are_ignored() {
        assert_eq!(pick("deflate, compress", ALL), None);
        assert_eq!(pick("g zip, gzip", ALL), Some(Coding::Gzip));
        assert_eq!(pick("\"br\", zstd", ALL), Some(Coding::Zstd));
    }

    #[test]
    fn coding_names_and_suffixes() {
        let names: Vec<_> = Coding::PREFERENCE
            .iter()
            .map(|coding| (coding.token(), coding.file_suffix()))
            .collect();
        assert_eq!(names, [("br", ".br"), ("zstd", ".zst"), ("gzip", ".gz")]);
    }

    #[test]
    fn available_set_operations() {
        let mut set = Available::NONE;
        assert!(set.is_empty());
        set = set.with(Coding::Zstd);
        assert!(set.contains(Coding::Zstd));
        assert!(!set.contains(Coding::Brotli));
        assert_eq!(set, Available::NONE.with(Coding::Zstd));
        assert!(ALL.contains(Coding::Brotli) && ALL.contains(Coding::Gzip));
    }
}

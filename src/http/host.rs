//! The authority grammar: is a `Host` field value (or the authority of an
//! absolute-form target) one host and at most one port, and nothing else?
//!
//! Why a grammar and not "any bytes": the Host value names the origin a
//! request is for, and whatever we accept here is what later code (logs,
//! virtual hosting, redirects) will trust. RFC 9112 §3.2 makes an invalid
//! Host a 400, and a lenient reading is where request smuggling and cache
//! poisoning live: `a@b` (userinfo, RFC 9110 §4.2.4), `a/b` (a path hidden
//! in the host), `a, b` (two hosts), `a:80x` (a port a proxy reads
//! differently). The grammar is RFC 9110 §7.2 / RFC 3986 §3.2.2–3.2.3:
//!
//! ```text
//! Host        = uri-host [ ":" port ]
//! uri-host    = IP-literal / IPv4address / reg-name
//! IP-literal  = "[" ( IPv6address / IPvFuture ) "]"
//! IPvFuture   = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
//! reg-name    = *( unreserved / pct-encoded / sub-delims )
//! port        = *DIGIT
//! ```
//!
//! No I/O and no allocation: [`validate`] borrows the value and answers an
//! [`Authority`] or an [`Error`] saying which byte broke which rule; the
//! parser (`http::parse`) turns the error into a 400.
//!
//! Flow of [`validate`]:
//! 1. Scan once for the delimiters no authority may hold (`@`, `/`, `?`,
//!    `#`) and for brackets out of place, so `user@host:80` is refused as
//!    userinfo, not as a bad port.
//! 2. Split the host from the port: after the `]` of an IP-literal, else at
//!    the first `:` (neither IPv4address nor reg-name contains one).
//! 3. Check the host (IPv6address, IPvFuture, IPv4address, else reg-name)
//!    and the port (digits, at most 65535; empty means absent).
//!
//! Nearly half of this file is its unit tests, one per rule and per refusal:
//! a grammar is where an untested branch becomes a smuggling vector.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A valid `uri-host [ ":" port ]`, borrowing the request's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authority<'a> {
    /// The host part, classified.
    pub name: Name<'a>,
    /// The port, or `None` when there is none or it is empty (`host:`):
    /// RFC 3986 §3.2.3 treats an empty port as the scheme's default.
    pub port: Option<u16>,
}

/// The host part of an [`Authority`] (RFC 3986 §3.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// `[` IPv6address `]`.
    Ipv6(Ipv6Addr),
    /// `[` IPvFuture `]`: the bytes between the brackets, e.g. `v7.abc`.
    IpvFuture(&'a [u8]),
    /// A dotted quad in the strict RFC 3986 form (no leading zeros).
    Ipv4(Ipv4Addr),
    /// A registered name as sent (percent-encoding kept); may be empty
    /// (RFC 9112 §3.2: a Host for a target without an authority).
    RegName(&'a [u8]),
}

impl Name<'_> {
    /// The empty reg-name (`Host:` with no value, or `Host: :80`).
    pub fn is_empty(&self) -> bool {
        matches!(self, Name::RegName(name) if name.is_empty())
    }
}

/// Which IP-literal grammar a bracketed host was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Literal {
    /// `[` IPv6address `]` (RFC 3986 §3.2.2, RFC 4291 §2.2 text forms).
    Ipv6,
    /// `[v` HEXDIG `.` ... `]`.
    IpvFuture,
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Literal::Ipv6 => "IPv6address",
            Literal::IpvFuture => "IPvFuture",
        })
    }
}

/// Why a value is not `uri-host [ ":" port ]`. Offsets (`at`) count bytes
/// from the start of the value given to [`validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `user@host`: RFC 9110 §4.2.4 forbids userinfo in http(s) URIs, and a
    /// Host field has no place for it at all.
    #[error("`@` at byte {at}: userinfo is not allowed")]
    UserInfo { at: usize },
    /// `/`, `?` or `#`: the start of a path, query or fragment.
    #[error("{:?} at byte {at} starts a path, query or fragment", char::from(*byte))]
    Path { byte: u8, at: usize },
    /// `,` in a reg-name. The grammar allows it (a sub-delim), but a comma
    /// in a field value is how two Host lines look once combined (RFC 9110
    /// §5.3), and more than one Host is a 400 (RFC 9112 §3.2); no DNS name
    /// holds one.
    #[error("`,` at byte {at}: a list of hosts")]
    List { at: usize },
    /// A byte no rule of the host grammar takes (whitespace, controls,
    /// obs-text, `"`, `<`, ...).
    #[error("byte {byte:#04x} at {at} is not allowed in a host")]
    BadChar { byte: u8, at: usize },
    /// `%` not followed by two hex digits.
    #[error("`%` at byte {at} is not followed by two hex digits")]
    BadPercent { at: usize },
    /// A `[` that does not open the value, a `]` without its `[`, or a `[`
    /// never closed.
    #[error("unbalanced bracket at byte {at}")]
    UnbalancedBracket { at: usize },
    /// The bytes between the brackets are not the grammar they start as.
    #[error("IP literal is not a valid {kind}")]
    BadIpLiteral { kind: Literal },
    /// The port holds a byte other than a digit.
    #[error("port byte {byte:#04x} at {at} is not a digit")]
    BadPort { byte: u8, at: usize },
    /// The port's digits are above 65535 (`value` saturates at `u64::MAX`).
    #[error("port {value} is above 65535")]
    PortOutOfRange { value: u64 },
    /// An http(s) URI with an empty host (RFC 9110 §4.2.1: a recipient
    /// MUST reject it); only [`validate_uri`] answers this.
    #[error("the URI's host is empty")]
    EmptyHost,
}

/// Check a Host field value (already OWS-trimmed): `uri-host [ ":" port ]`.
/// An empty value is valid (RFC 9112 §3.2).
pub fn validate(value: &[u8]) -> Result<Authority<'_>, Error> {
    match plain(value) {
        Some(authority) => Ok(authority),
        None => full(value),
    }
}

/// Whether a byte may appear in a reg-name as it is: unreserved or a
/// sub-delim other than `,` (RFC 3986 §3.2.2; a comma is a list here).
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b';'
                    | b'='
            );
        b += 1;
    }
    t
};

/// The common value in one pass: a name of [`NAME_BYTE`]s (no brackets,
/// percent signs or delimiters) and an optional port of at most five
/// digits, what [`full`] would answer for it. `None` for anything else,
/// which [`full`] then checks (and names the error of).
fn plain(value: &[u8]) -> Option<Authority<'_>> {
    let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
    let host = &value[..end];
    let mut digits_and_dots = true;
    for &b in host {
        if !NAME_BYTE[usize::from(b)] {
            return None;
        }
        digits_and_dots &= b.is_ascii_digit() || b == b'.';
    }
    let port = match value.get(end + 1..) {
        None | Some([]) => None,
        Some(digits) if digits.len() <= 5 => {
            let mut n = 0u32;
            for &d in digits {
                if !d.is_ascii_digit() {
                    return None;
                }
                n = n * 10 + u32::from(d - b'0');
            }
            Some(u16::try_from(n).ok()?)
        }
        Some(_) => return None,
    };
    let name = match digits_and_dots.then(|| ipv4(host)).flatten() {
        Some(addr) => Name::Ipv4(addr),
        None => Name::RegName(host),
    };
    Some(Authority { name, port })
}

/// Every rule, in steps: delimiters, the name (an IP-literal, IPv4 or a
/// reg-name with percent-encodings), the port.
fn full(value: &[u8]) -> Result<Authority<'_>, Error> {
    scan_delimiters(value)?;

    let (name, rest) = if value.first() == Some(&b'[') {
        // scan_delimiters allowed at most one `]`, and only with this `[`.
        let close = value
            .iter()
            .position(|&b| b == b']')
            .ok_or(Error::UnbalancedBracket { at: 0 })?;
        (ip_literal(&value[1..close])?, close + 1)
    } else {
        let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
        (ipv4_or_reg_name(&value[..end])?, end)
    };

    let port = match &value[rest..] {
        [] => None,
        [b':', digits @ ..] => port(digits, rest + 1)?,
        // After `]`: `[::1]x`.
        [byte, ..] => {
            return Err(Error::BadChar {
                byte: *byte,
                at: rest,
            })
        }
    };
    Ok(Authority { name, port })
}

/// Check the authority of an http(s) absolute-form target: the Host grammar,
/// and the host must not be empty (RFC 9110 §4.2.1).
pub fn validate_uri(authority: &[u8]) -> Result<Authority<'_>, Error> {
    let parsed = validate(authority)?;
    if parsed.name.is_empty() {
        return Err(Error::EmptyHost);
    }
    Ok(parsed)
}

/// Step 1: delimiters that end an authority or belong to userinfo, and
/// brackets anywhere but around a leading IP-literal.
fn scan_delimiters(value: &[u8]) -> Result<(), Error> {
    let bracketed = value.first() == Some(&b'[');
    let mut closed = false;
    for (at, &byte) in value.iter().enumerate() {
        match byte {
            b'@' => return Err(Error::UserInfo { at }),
            b'/' | b'?' | b'#' => return Err(Error::Path { byte, at }),
            b'[' if at != 0 => return Err(Error::UnbalancedBracket { at }),
            b']' if !bracketed || closed => return Err(Error::UnbalancedBracket { at }),
            b']' => closed = true,
            _ => {}
        }
    }
    Ok(())
}

/// RFC 3986 §3.2.2: a host that matches IPv4address is one; anything else
/// is checked as a reg-name (so `1.2.3.04` is a valid name, not an address).
fn ipv4_or_reg_name(host: &[u8]) -> Result<Name<'_>, Error> {
    if let Some(addr) = ipv4(host) {
        return Ok(Name::Ipv4(addr));
    }
    let mut at = 0;
    while let Some(&byte) = host.get(at) {
        match byte {
            b'%' => {
                let hex = |i: usize| host.get(i).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(at + 1) && hex(at + 2)) {
                    return Err(Error::BadPercent { at });
                }
                at += 3;
                continue;
            }
            b',' => return Err(Error::List { at }),
            _ if is_unreserved(byte) || is_sub_delim(byte) => {}
            _ => return Err(Error::BadChar { byte, at }),
        }
        at += 1;
    }
    Ok(Name::RegName(host))
}

/// The bytes between `[` and `]`.
fn ip_literal(inner: &[u8]) -> Result<Name<'_>, Error> {
    // RFC 3986 §3.2.2: the "v" is case-insensitive.
    if let [b'v' | b'V', rest @ ..] = inner {
        return if is_ipv_future(rest) {
            Ok(Name::IpvFuture(inner))
        } else {
            Err(Error::BadIpLiteral {
                kind: Literal::IpvFuture,
            })
        };
    }
    ipv6(inner).map(Name::Ipv6).ok_or(Error::BadIpLiteral {
        kind: Literal::Ipv6,
    })
}

/// IPvFuture after the "v": `1*HEXDIG "." 1*( unreserved / sub-delims / ":" )`.
fn is_ipv_future(rest: &[u8]) -> bool {
    let Some(dot) = rest.iter().position(|&b| b == b'.') else {
        return false;
    };
    let (version, tail) = (&rest[..dot], &rest[dot + 1..]);
    !version.is_empty()
        && version.iter().all(u8::is_ascii_hexdigit)
        && !tail.is_empty()
        && tail
            .iter()
            .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':')
}

/// RFC 3986 §3.2.2 IPv6address: eight h16 groups, the last two of which may
/// be a dotted quad (ls32), with one `::` standing for one or more zero
/// groups (so at most seven written groups around it). Zone identifiers
/// (RFC 6874) are not part of the http URI grammar and are refused.
fn ipv6(text: &[u8]) -> Option<Ipv6Addr> {
    let mut groups = [0u16; 8];
    match text.windows(2).position(|w| w == b"::") {
        None => {
            if pieces(text, true, &mut groups)? != 8 {
                return None;
            }
        }
        Some(gap) => {
            let (mut head, mut tail) = ([0u16; 8], [0u16; 8]);
            let written = pieces(&text[..gap], false, &mut head)?;
            let after = pieces(&text[gap + 2..], true, &mut tail)?;
            if written + after > 7 {
                return None;
            }
            groups[..written].copy_from_slice(&head[..written]);
            groups[8 - after..].copy_from_slice(&tail[..after]);
        }
    }
    Some(Ipv6Addr::from(groups))
}

/// `h16 *( ":" h16 )` into `out`, the last piece optionally a dotted quad
/// (two groups) when `ls32` is set; the empty side of a `::` is zero groups.
/// Returns how many groups were written, or `None` if the side is invalid.
fn pieces(side: &[u8], ls32: bool, out: &mut [u16; 8]) -> Option<usize> {
    if side.is_empty() {
        return Some(0);
    }
    let mut written = 0;
    let mut parts = side.split(|&b| b == b':').peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        if last && ls32 && part.contains(&b'.') {
            let [a, b, c, d] = ipv4(part)?.octets();
            let slots = out.get_mut(written..written + 2)?;
            slots[0] = u16::from_be_bytes([a, b]);
            slots[1] = u16::from_be_bytes([c, d]);
            written += 2;
        } else {
            *out.get_mut(written)? = h16(part)?;
            written += 1;
        }
    }
    Some(written)
}

/// `h16 = 1*4HEXDIG`.
fn h16(part: &[u8]) -> Option<u16> {
    if part.is_empty() || part.len() > 4 {
        return None;
    }
    part.iter().try_fold(0u16, |acc, &b| {
        let digit = char::from(b).to_digit(16)?;
        // Four hex digits fit in a u16, so neither step overflows.
        Some((acc << 4) | digit as u16)
    })
}

/// RFC 3986 §3.2.2 IPv4address: four dec-octets, each 0–255 without a
/// leading zero (`01` is not one).
fn ipv4(text: &[u8]) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut rest = text;
    for (i, octet) in octets.iter_mut().enumerate() {
        let end = rest.iter().position(|&b| b == b'.').unwrap_or(rest.len());
        *octet = dec_octet(&rest[..end])?;
        // Three dots exactly: one after each of the first three octets.
        match (i, rest.get(end + 1..)) {
            (3, None) => {}
            (3, Some(_)) | (_, None) => return None,
            (_, Some(next)) => rest = next,
        }
    }
    Some(Ipv4Addr::from(octets))
}

fn dec_octet(digits: &[u8]) -> Option<u8> {
    let leading_zero = digits.len() > 1 && digits[0] == b'0';
    if digits.is_empty() || digits.len() > 3 || leading_zero {
        return None;
    }
    let value = digits.iter().try_fold(0u16, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u16::from(b - b'0'))
    })?;
    u8::try_from(value).ok()
}

/// `port = *DIGIT`, at most 65535; `offset` is where the digits start in
/// the whole value (for the error). Empty is `None` (RFC 3986 §3.2.3).
fn port(digits: &[u8], offset: usize) -> Result<Option<u16>, Error> {
    if digits.is_empty() {
        return Ok(None);
    }
    let mut value = 0u64;
    for (i, &byte) in digits.iter().enumerate() {
        if !byte.is_ascii_digit() {
            return Err(Error::BadPort {
                byte,
                at: offset + i,
            });
        }
        value = value
            .saturating_mul(10)
            .saturating_add(u64::from(byte - b'0'));
    }
    u16::try_from(value)
        .map(Some)
        .map_err(|_| Error::PortOutOfRange { value })
}

/// RFC 3986 §2.3: `ALPHA / DIGIT / "-" / "." / "_" / "~"`.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 §2.2: `"!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="`.
fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

#[cfg(test)]
mod tests;

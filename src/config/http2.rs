//! HTTP/2: which protocols each listener speaks, and what one HTTP/2
//! connection may cost (`--alpn`, `--h2c`, `--h2-*`).
//!
//! Owns the defaults and bounds of those settings and [`Http2Config`], the
//! validated set. What each connection applies, [`Http2Conn`], is the
//! HTTP/2 layer's type (`worker::conn::h2`); `raw`'s table fills its fields
//! from the settings marked `h2`, so a new `--h2-*` setting touches three
//! files: its entry in `raw.rs` (with its default and bound), its field and
//! the code that applies it in `worker/conn/h2/mod.rs`, and
//! `docs/http2.md`. Does not own negotiating or enforcing them
//! (`tls::server_config` offers the ALPN list, `worker::conn::h2` applies
//! the limits).
//!
//! The defaults follow the peers where they agree and the attack write-ups
//! where they do not: 128 concurrent streams (nginx's
//! `http2_max_concurrent_streams`), a header list as large as an HTTP/1.1
//! head may be (`--max-head-bytes`' default), RFC 9113's 4 KiB HPACK table,
//! and a cap on client resets that an honest browser never reaches but a
//! rapid-reset attack (CVE-2023-44487) passes within milliseconds.

use super::raw::Checked;
use super::setting::{Echo, Field};
use super::Error;
use crate::choice::choice;
pub use crate::worker::{H2c, Http2Conn};

/// ALPN, in the server's order of preference: h2 first, as every peer does.
pub const DEFAULT_ALPN: [Protocol; 2] = [Protocol::H2, Protocol::Http11];
/// Plain listeners take HTTP/2 with prior knowledge (RFC 9113 §3.3).
pub const DEFAULT_H2C: H2c = H2c::PriorKnowledge;
/// Streams a client may have open at once on one connection; past it a new
/// stream is refused with REFUSED_STREAM (nginx: 128).
pub const DEFAULT_H2_MAX_CONCURRENT_STREAMS: u64 = 128;
/// Largest decoded header list of one request (SETTINGS_MAX_HEADER_LIST_SIZE,
/// RFC 9113 §6.5.2), the same as an HTTP/1.1 head may be. A larger one, in
/// however many CONTINUATION frames (CVE-2024-27316), is refused.
pub const DEFAULT_H2_MAX_HEADER_LIST_BYTES: u64 = 16 * 1024;
/// The HPACK dynamic table a client's encoder may use (SETTINGS_HEADER_TABLE_SIZE,
/// RFC 7541 §4.2): the protocol's default, 4 KiB.
pub const DEFAULT_H2_HEADER_TABLE_BYTES: u64 = 4096;
/// Streams a client may reset per connection within 10 s (`worker::conn::h2`'s
/// window) before
/// the connection is closed with GOAWAY ENHANCE_YOUR_CALM (rapid reset,
/// CVE-2023-44487). A browser cancels a handful of requests a page.
pub const DEFAULT_H2_MAX_RESETS: u64 = 200;

/// `--h2-max-concurrent-streams`: RFC 9113's SETTINGS_MAX_CONCURRENT_STREAMS
/// bound by what a worker should hold per connection.
pub(crate) const CONCURRENT_STREAMS: std::ops::RangeInclusive<usize> = 1..=4096;
/// `--h2-max-header-list-bytes`: room for a request line's worth, at most 1 MiB.
pub(crate) const HEADER_LIST_BYTES: std::ops::RangeInclusive<usize> = 1024..=1024 * 1024;
/// `--h2-header-table-bytes`: 0 (no dynamic table) to 64 KiB.
pub(crate) const HEADER_TABLE_BYTES: std::ops::RangeInclusive<usize> = 0..=64 * 1024;
/// `--h2-max-resets`: at least one reset, at most a million per window.
pub(crate) const RESETS: std::ops::RangeInclusive<usize> = 1..=1_000_000;

choice! {
    /// A protocol ALPN may select on a TLS listener.
    pub enum Protocol {
        /// HTTP/2 (RFC 9113).
        H2 = "h2",
        /// HTTP/1.1.
        Http11 = "http/1.1",
    }
}

impl Protocol {
    /// The ALPN identifier (RFC 7301).
    pub fn id(self) -> &'static [u8] {
        self.name().as_bytes()
    }
}

/// The validated HTTP/2 settings of the listeners: what TLS listeners
/// offer. What each connection applies is [`Http2Conn`], in the workers'
/// `ConnSettings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http2Config {
    /// What TLS listeners offer, in order of preference.
    pub alpn: Vec<Protocol>,
}

impl Http2Config {
    /// The ALPN identifiers TLS listeners offer, in order of preference.
    pub fn alpn_ids(&self) -> Vec<&'static [u8]> {
        self.alpn.iter().map(|p| p.id()).collect()
    }
}

/// The HTTP/2 settings of the checked table.
pub(super) fn settings(c: &Checked) -> Http2Config {
    Http2Config {
        alpn: c.alpn.clone(),
    }
}

/// `--alpn`: one or both of `h2` and `http/1.1`, each once, in order of
/// preference.
pub(crate) fn alpn(field: Field, words: Vec<String>) -> Result<Vec<Protocol>, Error> {
    let mut out = Vec::new();
    for w in words.iter().flat_map(|w| w.split(',')).map(str::trim) {
        let p: Protocol = w.parse().map_err(|_| {
            field.invalid(crate::choice::not_a_choice(
                w,
                [Protocol::H2.name(), Protocol::Http11.name()].into_iter(),
            ))
        })?;
        if out.contains(&p) {
            return Err(field.invalid(format!("{w} is given twice")));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(field.invalid("empty; use h2,http/1.1 or one of them"));
    }
    Ok(out)
}

impl Echo<Option<Vec<String>>> for Vec<Protocol> {
    fn echo(&self) -> Option<Vec<String>> {
        Some(self.iter().map(|p| p.name().to_owned()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Field = Field {
        key: "alpn",
        flag: "--alpn",
    };

    #[test]
    fn alpn_keeps_the_order_given_and_refuses_repeats_and_strangers() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            alpn(F, words(&["http/1.1,h2"])).unwrap(),
            [Protocol::Http11, Protocol::H2]
        );
        assert_eq!(alpn(F, words(&["h2"])).unwrap(), [Protocol::H2]);
        let e = alpn(F, words(&["h2", "h2"])).unwrap_err().to_string();
        assert_eq!(e, "--alpn: h2 is given twice");
        let e = alpn(F, words(&["h3"])).unwrap_err().to_string();
        assert_eq!(e, "--alpn: \"h3\" is not a choice; use h2 or http/1.1");
        assert!(alpn(F, Vec::new()).is_err());
    }
}

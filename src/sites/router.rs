//! Which site a name belongs to: the `Host` of a request, or the SNI of a
//! TLS handshake, matched by one [`Router`] so the two always agree.
//!
//! The rules (nginx's `server_name` order, without regular expressions):
//! 1. A name is compared without its port, without a trailing dot and in
//!    lower case (DNS names are case-insensitive, RFC 4343).
//! 2. An exact name wins: one hash lookup, O(1) in the number of names.
//! 3. Else the longest matching wildcard: `*.example.com` matches
//!    `a.example.com` and `a.b.example.com`, never `example.com` itself; a
//!    name is tried against its suffixes from the longest, one hash lookup
//!    per label.
//! 4. Else the default site, or no site at all when unknown names are
//!    refused (`unknown_host = "421"`).
//!
//! With one site and a default, every name is that site and nothing is
//! looked at ([`Router::single`]).

use std::collections::HashMap;

/// The longest DNS name (RFC 1035 §2.3.4), without its trailing dot.
const MAX_NAME: usize = 253;

/// A site's position in the config (`[[site]]` order).
pub type SiteIndex = usize;

/// Names to sites.
#[derive(Debug, Clone, Default)]
pub struct Router {
    exact: HashMap<Box<str>, SiteIndex>,
    /// By the suffix after `*.` (`example.com` for `*.example.com`).
    wildcard: HashMap<Box<str>, SiteIndex>,
    /// The site of names no rule matches; `None`: those are refused.
    default: Option<SiteIndex>,
    /// One site, and it is the default: no lookup at all.
    single: bool,
    /// The sites' names, by index (the access log's `$site`).
    names: Vec<Box<str>>,
}

/// Why a name cannot be a site's host pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("{0:?} is not a host name (letters, digits, '-' and '.', or an IP address)")]
    NotAName(String),
    #[error("{0:?}: a wildcard is only allowed as the whole first label, as in *.example.com")]
    BadWildcard(String),
}

impl Router {
    /// A router over `sites`' names and host patterns (already normalized
    /// with [`normalize_pattern`] and checked unique), in index order,
    /// unknown names going to `default`.
    pub fn new<'a>(
        sites: impl IntoIterator<Item = (&'a str, &'a [String])>,
        default: Option<SiteIndex>,
    ) -> Router {
        let mut router = Router {
            default,
            ..Router::default()
        };
        for (index, (name, hosts)) in sites.into_iter().enumerate() {
            router.names.push(name.into());
            for host in hosts {
                match host.strip_prefix("*.") {
                    Some(suffix) => router.wildcard.insert(suffix.into(), index),
                    None => router.exact.insert(host.as_str().into(), index),
                };
            }
        }
        router.single = router.names.len() == 1 && default.is_some();
        router
    }

    /// The site answering a request for `host` (its Host, or `None` for an
    /// HTTP/1.0 request without one) on a connection whose SNI chose `sni`;
    /// `None`: 421. Over TLS a Host of another site than the SNI's is 421;
    /// without a Host the SNI's site answers.
    pub fn request(&self, host: Option<&[u8]>, sni: Option<SiteIndex>) -> Option<SiteIndex> {
        if self.single {
            return self.default;
        }
        let Some(host) = host else {
            return sni.or(self.default);
        };
        let site = self.route(host)?;
        match sni {
            Some(s) if s != site => None,
            _ => Some(site),
        }
    }

    /// The name of the site [`Router::request`] picks (the access log's
    /// `$site`); `None` when the request is 421.
    pub fn request_name(&self, host: Option<&[u8]>, sni: Option<SiteIndex>) -> Option<&str> {
        self.request(host, sni).and_then(|i| self.name(i))
    }

    /// Site `site`'s name.
    pub fn name(&self, site: SiteIndex) -> Option<&str> {
        self.names.get(site).map(|n| &**n)
    }

    /// Whether every name is the one site.
    pub fn single(&self) -> bool {
        self.single
    }

    /// The site of a `Host` value or SNI name (`host[:port]`), or `None`
    /// when no site has it and unknown names are refused.
    pub fn route(&self, name: &[u8]) -> Option<SiteIndex> {
        if self.single {
            return self.default;
        }
        let mut buf = [0u8; MAX_NAME];
        let Some(name) = lower(strip_port(name), &mut buf) else {
            return self.default;
        };
        if let Some(&i) = self.exact.get(name) {
            return Some(i);
        }
        if !self.wildcard.is_empty() {
            let mut rest = name;
            while let Some((_, suffix)) = rest.split_once('.') {
                if let Some(&i) = self.wildcard.get(suffix) {
                    return Some(i);
                }
                rest = suffix;
            }
        }
        self.default
    }
}

/// `host[:port]` → `host`; an IPv6 literal keeps its brackets.
fn strip_port(name: &[u8]) -> &[u8] {
    if name.first() == Some(&b'[') {
        return match name.iter().position(|&b| b == b']') {
            Some(end) => &name[..=end],
            None => name,
        };
    }
    match name.iter().position(|&b| b == b':') {
        Some(colon) => &name[..colon],
        None => name,
    }
}

/// `name` without a trailing dot, in ASCII lower case, in `buf`; `None`
/// when it is too long or not ASCII (no site can have it).
fn lower<'b>(name: &[u8], buf: &'b mut [u8; MAX_NAME]) -> Option<&'b str> {
    let name = name.strip_suffix(b".").unwrap_or(name);
    if name.len() > MAX_NAME || !name.is_ascii() {
        return None;
    }
    let out = &mut buf[..name.len()];
    for (o, b) in out.iter_mut().zip(name) {
        *o = b.to_ascii_lowercase();
    }
    std::str::from_utf8(out).ok()
}

/// A host pattern as the config wrote it, normalized (lower case, no
/// trailing dot) and checked: a DNS name, an IP address (IPv6 in brackets
/// or bare), or `*.` and a DNS name.
pub fn normalize_pattern(written: &str) -> Result<String, PatternError> {
    let lowered = written.trim_end_matches('.').to_ascii_lowercase();
    if let Ok(ip) = lowered.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        return Ok(match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            std::net::IpAddr::V4(v4) => v4.to_string(),
        });
    }
    let (wild, name) = match lowered.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lowered.as_str()),
    };
    if name.contains('*') {
        return Err(PatternError::BadWildcard(written.to_owned()));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.is_empty() || name.len() > MAX_NAME || !name.split('.').all(label_ok) {
        return Err(PatternError::NotAName(written.to_owned()));
    }
    Ok(if wild {
        format!("*.{name}")
    } else {
        name.to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(default: Option<SiteIndex>) -> Router {
        let a = ["example.com".to_owned(), "www.example.com".to_owned()];
        let b = ["*.example.com".to_owned()];
        let c = ["*.static.example.com".to_owned(), "[::1]".to_owned()];
        Router::new([("a", &a[..]), ("b", &b[..]), ("c", &c[..])], default)
    }

    #[test]
    fn exact_names_win_over_wildcards() {
        let r = router(Some(0));
        assert_eq!(r.route(b"www.example.com"), Some(0));
        assert_eq!(r.route(b"api.example.com"), Some(1));
        assert_eq!(r.route(b"example.com"), Some(0));
    }

    #[test]
    fn the_longest_wildcard_wins_and_a_wildcard_needs_a_label() {
        let r = router(None);
        assert_eq!(r.route(b"img.static.example.com"), Some(2));
        assert_eq!(r.route(b"a.b.example.com"), Some(1));
        assert_eq!(r.route(b"static.example.com"), Some(1));
        assert_eq!(r.route(b"example.org"), None);
        assert_eq!(r.route(b"com"), None);
    }

    #[test]
    fn case_port_and_trailing_dot_do_not_matter() {
        let r = router(None);
        assert_eq!(r.route(b"WWW.Example.COM:8080"), Some(0));
        assert_eq!(r.route(b"www.example.com."), Some(0));
        assert_eq!(r.route(b"[::1]:443"), Some(2));
    }

    #[test]
    fn unknown_names_go_to_the_default_or_nowhere() {
        assert_eq!(router(Some(1)).route(b"other.test"), Some(1));
        assert_eq!(router(None).route(b"other.test"), None);
        assert_eq!(router(Some(0)).route(&[b'a'; 300]), Some(0));
        assert_eq!(router(None).route("é.example.com".as_bytes()), None);
    }

    #[test]
    fn one_default_site_answers_without_a_lookup() {
        let hosts = ["a.test".to_owned()];
        let r = Router::new([("a", &hosts[..])], Some(0));
        assert!(r.single());
        assert_eq!(r.route(b"anything"), Some(0));
        let r = Router::new([("a", &hosts[..])], None);
        assert!(!r.single());
        assert_eq!(r.route(b"anything"), None);
    }

    #[test]
    fn a_request_needs_its_host_and_sni_to_agree() {
        let r = router(Some(2));
        assert_eq!(r.request(Some(b"example.com"), None), Some(0));
        assert_eq!(r.request(Some(b"example.com"), Some(0)), Some(0));
        assert_eq!(r.request(Some(b"api.example.com"), Some(0)), None);
        assert_eq!(r.request(None, Some(1)), Some(1));
        assert_eq!(r.request(None, None), Some(2));
        assert_eq!(r.name(1), Some("b"));
        assert_eq!(router(None).request(None, None), None);
    }

    #[test]
    fn patterns_are_normalized_or_refused() {
        assert_eq!(
            normalize_pattern("WWW.Example.com.").unwrap(),
            "www.example.com"
        );
        assert_eq!(normalize_pattern("*.Example.com").unwrap(), "*.example.com");
        assert_eq!(normalize_pattern("::1").unwrap(), "[::1]");
        assert_eq!(normalize_pattern("127.0.0.1").unwrap(), "127.0.0.1");
        assert!(matches!(
            normalize_pattern("a.*.com"),
            Err(PatternError::BadWildcard(_))
        ));
        assert!(matches!(
            normalize_pattern("*example.com"),
            Err(PatternError::BadWildcard(_))
        ));
        for bad in ["", "a b.com", "a..com", "-a.com", "a/b"] {
            assert!(
                matches!(normalize_pattern(bad), Err(PatternError::NotAName(_))),
                "{bad}"
            );
        }
    }
}

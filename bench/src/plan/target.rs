//! The server a run talks to, parsed from `http://` URLs.

use std::net::{SocketAddr, ToSocketAddrs};

use super::Error;

/// One server address and the request paths to rotate through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The resolved address every connection goes to.
    pub addr: SocketAddr,
    /// `host[:port]` as written in the URL, sent as the `Host` header.
    pub authority: String,
    /// Request targets (path and query), one per URL, used round-robin.
    pub paths: Vec<String>,
    /// The URLs as given, for reports.
    pub urls: Vec<String>,
}

impl Target {
    /// Parses `http://host[:port][/path][?query]` URLs (fragments dropped). All must share the
    /// same authority, since connections are reused across paths.
    pub fn parse<S: AsRef<str>>(urls: &[S]) -> Result<Target, Error> {
        let mut authority: Option<String> = None;
        let mut paths = Vec::with_capacity(urls.len());
        for url in urls {
            let url = url.as_ref();
            let (auth, path) = split(url)?;
            match &authority {
                None => authority = Some(auth.to_string()),
                Some(first) if first != auth => {
                    return Err(Error::MixedHosts {
                        first: first.clone(),
                        other: auth.to_string(),
                    })
                }
                Some(_) => {}
            }
            paths.push(path);
        }
        let authority = authority.ok_or(Error::NoUrls)?;
        let addr = resolve(&authority)?;
        Ok(Target {
            addr,
            authority,
            paths,
            urls: urls.iter().map(|u| u.as_ref().to_string()).collect(),
        })
    }
}

fn split(url: &str) -> Result<(&str, String), Error> {
    let bad = |reason| Error::Url {
        url: url.to_string(),
        reason,
    };
    let scheme_end = url
        .find("://")
        .ok_or_else(|| bad("missing http:// scheme"))?;
    let scheme = &url[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err(bad("https is not supported; use http://"));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad("only http:// URLs are supported"));
    }
    let rest = &url[scheme_end + 3..];
    let rest = rest.split('#').next().unwrap_or(rest);
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(auth_end);
    if auth.is_empty() {
        return Err(bad("missing host"));
    }
    if auth.contains('@') {
        return Err(bad("credentials in URLs are not supported"));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad(
            "path contains spaces or control characters; percent-encode them",
        ));
    }
    let path = match path.as_bytes().first() {
        None => "/".to_string(),
        Some(b'?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    Ok((auth, path))
}

fn resolve(authority: &str) -> Result<SocketAddr, Error> {
    // An authority without a port (`host`, `[::1]`) gets HTTP's default 80.
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let with_port = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let resolve_err = |source| Error::Resolve {
        authority: authority.to_string(),
        source,
    };
    let mut addrs = with_port.to_socket_addrs().map_err(resolve_err)?;
    addrs.next().ok_or_else(|| {
        resolve_err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no addresses",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_and_default_port() {
        let t = Target::parse(&["http://127.0.0.1:8080/a?x=1#frag", "http://127.0.0.1:8080"])
            .expect("parse");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(t.authority, "127.0.0.1:8080");
        assert_eq!(t.paths, ["/a?x=1", "/"]);
        let t = Target::parse(&["http://127.0.0.1?q"]).expect("parse");
        assert_eq!(t.addr.port(), 80);
        assert_eq!(t.paths, ["/?q"]);
    }

    #[test]
    fn parses_ipv6_literals() {
        let t = Target::parse(&["http://[::1]:9000/x"]).expect("parse");
        assert_eq!(t.addr, "[::1]:9000".parse().expect("addr"));
        assert_eq!(
            Target::parse(&["http://[::1]/"])
                .expect("parse")
                .addr
                .port(),
            80
        );
    }

    #[test]
    fn rejects_unsupported_urls() {
        for url in [
            "https://127.0.0.1/",
            "ftp://x/",
            "127.0.0.1:80/",
            "http:///x",
            "http://a@b/",
        ] {
            assert!(Target::parse(&[url]).is_err(), "{url} accepted");
        }
        assert!(matches!(
            Target::parse(&["http://127.0.0.1:1/", "http://127.0.0.1:2/"]),
            Err(Error::MixedHosts { .. })
        ));
        assert!(matches!(Target::parse::<&str>(&[]), Err(Error::NoUrls)));
    }
}

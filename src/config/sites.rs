//! Sites: `[[site]]` tables (virtual hosts), `--unknown-host`, and each
//! site's root, file settings and TLS identity.
//!
//! Owns building the validated [`SitesConfig`] from the `[[site]]` tables
//! ([`SiteRaw`], declared with every setting in `raw`'s table, whose
//! `per site` settings a site overrides through `Checked::for_site`) (a `sites` type, with the [`Router`] every
//! worker and the TLS resolver match names with), and the rules:
//! - without `[[site]]`, the server is one site: the root, the file
//!   settings and the TLS identity of the top level, answering every Host;
//! - a site inherits every top-level file setting and the top-level TLS
//!   identity it does not set itself (nginx's `http` → `server`);
//! - every host pattern is a DNS name, an IP address or `*.` and a name,
//!   and belongs to one site; a site without hosts must be the default;
//! - the default site is the one marked `default = true`, else the first;
//!   `unknown_host = "421"` has none (and refuses `default = true`);
//! - a site's identity is a cert and key pair, `acme = true` (its exact
//!   DNS names, no wildcards or addresses), or the top level's.
//!
//! Does not own the validated types nor matching (`sites::settings`,
//! `sites::router`), serving (`sites`), loading
//! certificates for serving (`tls`) nor ordering them (`acme`).

use std::path::PathBuf;
use std::sync::Arc;

use super::files::{self, FilesConfig};
use super::raw::Checked;
pub use super::raw::SiteRaw;
use super::setting::{Echo, Field};
use super::tls::TlsSource;
use super::{invalid, Error};
use crate::sites::router::{normalize_pattern, Router};
pub use crate::sites::{SiteConfig, SiteTls, SitesConfig, UnknownHost};

/// An unknown Host goes to the default site, as nginx's `default_server`.
pub const DEFAULT_UNKNOWN_HOST: UnknownHost = UnknownHost::Default;
/// The site name of the one-site case (no `[[site]]`).
pub const ONLY_SITE: &str = "default";

impl Echo<Option<Vec<SiteRaw>>> for SitesConfig {
    fn echo(&self) -> Option<Vec<SiteRaw>> {
        if !self.written {
            return None;
        }
        let shown = self.list.iter().enumerate().map(|(i, s)| {
            let (tls_cert, tls_key) = match &s.tls {
                Some(SiteTls::Files { cert, key }) => (Some(cert.clone()), Some(key.clone())),
                _ => (None, None),
            };
            SiteRaw {
                name: Some(s.name.clone()),
                hosts: s.hosts.clone(),
                default: self.unknown == UnknownHost::Default && i == self.default,
                root: Some(s.root.clone()),
                tls_cert,
                tls_key,
                acme: s.by_acme(),
                ..SiteRaw::default()
            }
            .showing(&s.files)
        });
        Some(shown.collect())
    }
}

/// The sites of `c`: `written` (its `[[site]]` tables, taken out of it),
/// or the one site of the top level. `base` is the top level's file
/// settings, `tls` the top level's identity.
pub(super) fn config(
    c: &Checked,
    written: &[SiteRaw],
    base: &FilesConfig,
    tls: Option<&TlsSource>,
) -> Result<SitesConfig, Error> {
    let inherited = tls.map(|t| match t {
        TlsSource::Files { cert, key } => SiteTls::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        TlsSource::SelfSigned => SiteTls::SelfSigned,
    });
    if written.is_empty() {
        let only = SiteConfig {
            name: ONLY_SITE.to_owned(),
            hosts: Vec::new(),
            root: canonical(&c.root),
            files: base.clone(),
            tls: inherited,
        };
        let default = (c.unknown_host == UnknownHost::Default).then_some(0);
        return Ok(SitesConfig {
            router: Arc::new(Router::new(
                [(only.name.as_str(), &only.hosts[..])],
                default,
            )),
            list: vec![only],
            unknown: c.unknown_host,
            default: 0,
            written: false,
        });
    }
    let mut list: Vec<SiteConfig> = Vec::with_capacity(written.len());
    let mut marked = None;
    for (i, raw) in written.iter().enumerate() {
        let site = one(raw, c, inherited.as_ref())?;
        if list.iter().any(|s| s.name == site.name) {
            return Err(site_err(
                "site.name",
                &site.name,
                "is the name of two sites; give each its own `name`",
            ));
        }
        for host in &site.hosts {
            if let Some(other) = list.iter().find(|s| s.hosts.contains(host)) {
                return Err(site_err(
                    "site.hosts",
                    &site.name,
                    format!(
                        "{host} is also a host of site {:?}; a name belongs to one site",
                        other.name
                    ),
                ));
            }
        }
        if raw.default {
            if c.unknown_host == UnknownHost::Misdirected {
                return Err(site_err(
                    "site.default",
                    &site.name,
                    "unknown_host = \"421\" refuses unknown hosts, so no site is their default; \
                     remove `default = true` or set unknown_host = \"default\"",
                ));
            }
            if let Some(m) = marked.replace(i) {
                let first: &SiteConfig = &list[m];
                return Err(site_err(
                    "site.default",
                    &site.name,
                    format!(
                        "site {:?} is the default already; mark one site",
                        first.name
                    ),
                ));
            }
        }
        if site.hosts.is_empty() && !(raw.default || (i == 0 && written.len() == 1)) {
            return Err(site_err(
                "site.hosts",
                &site.name,
                "missing: a site that is not the default needs hosts = [\"example.com\"]",
            ));
        }
        list.push(site);
    }
    let (default, routed) = match c.unknown_host {
        UnknownHost::Default => {
            let d = marked.unwrap_or(0);
            (d, Some(d))
        }
        UnknownHost::Misdirected => (list.iter().position(|s| s.tls.is_some()).unwrap_or(0), None),
    };
    let router = Router::new(list.iter().map(|s| (s.name.as_str(), &s.hosts[..])), routed);
    Ok(SitesConfig {
        router: Arc::new(router),
        list,
        unknown: c.unknown_host,
        default,
        written: true,
    })
}

fn one(raw: &SiteRaw, c: &Checked, inherited: Option<&SiteTls>) -> Result<SiteConfig, Error> {
    let mut hosts = Vec::with_capacity(raw.hosts.len());
    for written in &raw.hosts {
        let host = normalize_pattern(written).map_err(|e| {
            let who = raw.name.as_deref().unwrap_or(written);
            site_err("site.hosts", who, e.to_string())
        })?;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    let name = match &raw.name {
        Some(n) => n.clone(),
        None => match hosts.first() {
            Some(h) => h.replace("*.", "wildcard.").replace([':', '[', ']'], "_"),
            None => ONLY_SITE.to_owned(),
        },
    };
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !name_ok {
        return Err(site_err(
            "site.name",
            &name,
            "is not a site name; use letters, digits, '-', '_' and '.' (not first; at most 64)",
        ));
    }
    let field = |key: &'static str| Field { key, flag: key };
    let root = match &raw.root {
        Some(r) => files::root(field("site.root"), r.clone())
            .map_err(|e| site_err("site.root", &name, strip_field(e)))?,
        None => c.root.clone(),
    };
    // The file settings marked `per site` in raw's table, each through its
    // own rule, and the same cross-field rules as the top level's.
    let f = files::settings(&c.for_site(raw)?)?;
    let tls = match (&raw.tls_cert, &raw.tls_key, raw.acme) {
        (Some(_), _, true) | (_, Some(_), true) => {
            return Err(site_err(
                "site.acme",
                &name,
                "cannot be combined with tls_cert/tls_key; choose one",
            ))
        }
        (Some(cert), Some(key), false) => {
            crate::tls::Material::load(cert, key)
                .map_err(|e| site_err("site.tls_cert", &name, e.to_string()))?;
            Some(SiteTls::Files {
                cert: cert.clone(),
                key: key.clone(),
            })
        }
        (Some(_), None, _) => {
            return Err(site_err(
                "site.tls_key",
                &name,
                "missing: tls_cert needs its tls_key",
            ))
        }
        (None, Some(_), _) => {
            return Err(site_err(
                "site.tls_cert",
                &name,
                "missing: tls_key needs its tls_cert",
            ))
        }
        (None, None, true) => {
            if let Some(h) = hosts.iter().find(|h| h.starts_with("*.")) {
                return Err(site_err(
                    "site.acme",
                    &name,
                    format!("{h}: HTTP-01 and TLS-ALPN-01 cannot prove a wildcard; list the names"),
                ));
            }
            if let Some(h) = hosts
                .iter()
                .find(|h| h.parse::<std::net::Ipv4Addr>().is_ok() || h.starts_with('['))
            {
                return Err(site_err(
                    "site.acme",
                    &name,
                    format!("{h} is an address; ACME here orders DNS names only"),
                ));
            }
            if hosts.is_empty() {
                return Err(site_err(
                    "site.acme",
                    &name,
                    "needs hosts to order a certificate for",
                ));
            }
            Some(SiteTls::Acme)
        }
        (None, None, false) => inherited.cloned(),
    };
    Ok(SiteConfig {
        name,
        hosts,
        root: canonical(&root),
        files: f,
        tls,
    })
}

/// An error about site `name`.
fn site_err(field: &'static str, name: &str, problem: impl Into<String>) -> Error {
    invalid(field, format!("site {name:?}: {}", problem.into()))
}

/// The problem of a field error, without the field (it is re-attributed).
fn strip_field(e: Error) -> String {
    match e {
        Error::Invalid { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// The absolute path of an existing directory, else as written.
pub(super) fn canonical(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::Compress;
    use crate::config::RawConfig;

    fn site(hosts: &[&str]) -> SiteRaw {
        SiteRaw {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            ..SiteRaw::default()
        }
    }

    fn with(sites: Vec<SiteRaw>) -> RawConfig {
        RawConfig {
            site: Some(sites),
            ..raw()
        }
    }

    #[test]
    fn without_sites_the_top_level_is_the_one_site() {
        let s = ok(raw()).sites;
        assert_eq!(s.list.len(), 1);
        assert_eq!(s.list[0].name, ONLY_SITE);
        assert!(s.router.single());
        assert_eq!(s.router.route(b"whatever.test"), Some(0));
    }

    #[test]
    fn sites_inherit_what_they_do_not_set() {
        let mut a = site(&["a.test"]);
        a.index = Some(vec!["home.html".into()]);
        a.compress = Some(Compress::Off);
        let r = RawConfig {
            cache_control: Some("max-age=60".into()),
            ..with(vec![a, site(&["B.test."])])
        };
        let s = ok(r).sites;
        assert_eq!(s.list[0].files.index, ["home.html"]);
        assert!(s.list[0].files.compression.is_none());
        assert_eq!(s.list[1].files.index, ["index.html"]);
        assert!(s.list[1].files.compression.is_some());
        assert_eq!(s.list[1].files.cache_control.as_deref(), Some("max-age=60"));
        assert_eq!(s.list[1].name, "b.test");
        assert_eq!(s.router.route(b"b.test"), Some(1));
        assert_eq!(s.router.route(b"unknown.test"), Some(0));
    }

    #[test]
    fn the_marked_default_gets_unknown_hosts() {
        let mut b = site(&["b.test"]);
        b.default = true;
        let s = ok(with(vec![site(&["a.test"]), b])).sites;
        assert_eq!(s.default, 1);
        assert_eq!(s.router.route(b"c.test"), Some(1));
    }

    #[test]
    fn refused_sites_name_the_site_and_the_fix() {
        let e = err(with(vec![site(&["a.test"]), site(&["A.test"])]));
        assert!(
            e.starts_with("site.name: site \"a.test\": is the name of two"),
            "{e}"
        );
        let mut dup = site(&["x.test", "a.test"]);
        dup.name = Some("x".into());
        let e = err(with(vec![site(&["a.test"]), dup]));
        assert_eq!(
            e,
            "site.hosts: site \"x\": a.test is also a host of site \"a.test\"; a name belongs to one site"
        );
        let e = err(with(vec![site(&["a.test"]), site(&[])]));
        assert!(
            e.starts_with("site.hosts: site \"default\": missing"),
            "{e}"
        );
        let e = err(with(vec![site(&["a b"])]));
        assert!(
            e.starts_with("site.hosts: site \"a b\": \"a b\" is not a host name"),
            "{e}"
        );
        let mut wild = site(&["*.a.test"]);
        wild.acme = true;
        let e = err(with(vec![wild]));
        assert!(e.contains("cannot prove a wildcard"), "{e}");
        let mut d = site(&["a.test"]);
        d.default = true;
        let r = RawConfig {
            unknown_host: Some(UnknownHost::Misdirected),
            ..with(vec![d])
        };
        assert!(err(r).starts_with("site.default: site \"a.test\": unknown_host = \"421\""));
    }

    #[test]
    fn misdirected_has_no_default_route() {
        let r = RawConfig {
            unknown_host: Some(UnknownHost::Misdirected),
            ..with(vec![site(&["a.test"]), site(&["*.b.test"])])
        };
        let s = ok(r).sites;
        assert_eq!(s.router.route(b"a.test"), Some(0));
        assert_eq!(s.router.route(b"x.b.test"), Some(1));
        assert_eq!(s.router.route(b"c.test"), None);
    }

    #[test]
    fn every_per_site_setting_overrides_and_reads_back() {
        let text = "[[site]]\nhosts = [\"a.test\"]\nindex = [\"home.htm\"]\n\
                    autoindex = true\ncache_control = \"no-store\"\nsymlinks = \"never\"\n\
                    dotfiles = \"allow\"\ncompress = \"off\"\n\
                    fallback = \"/app.html\"\nfallback_files = true\n\
                    cors_allow_origins = [\"https://a.example\"]\ncors_allow_methods = [\"GET\"]\n\
                    cors_allow_headers = [\"x-a\"]\ncors_allow_credentials = true\n\
                    [[site.error_page]]\nstatus = [404]\npath = \"/lost.html\"\n\
                    [[site.headers]]\nmatch = \"/**\"\nset = { X-Site = \"a\" }\n\
                    [[site]]\nhosts = [\"b.test\"]\n";
        let c = ok(RawConfig {
            root: raw().root,
            ..toml::from_str(text).unwrap()
        });
        let (a, b) = (&c.sites.list[0].files, &c.sites.list[1].files);
        assert_eq!(a.index, ["home.htm"]);
        assert!(a.autoindex && a.dotfiles && a.compression.is_none());
        assert_eq!(a.cache_control.as_deref(), Some("no-store"));
        assert_eq!(a.fallback.as_deref(), Some("/app.html"));
        assert!(a.fallback_files);
        assert_eq!(a.error_pages.len(), 1);
        assert_eq!(a.error_pages[0].path, "/lost.html");
        assert_eq!(a.cors.origins, ["https://a.example"]);
        assert_eq!(
            (&a.cors.methods[..], &a.cors.headers[..]),
            (&["GET".to_owned()][..], &["x-a".to_owned()][..])
        );
        assert!(a.cors.credentials);
        assert_eq!(a.symlinks, crate::config::Symlinks::Never);
        assert_eq!(a.rules.len(), 1);
        // The other site keeps the top level's.
        let shown = |f: &FilesConfig| format!("{f:?}");
        assert_eq!(shown(b), shown(&c.files));
        // Shown and read back, each site gives the same settings again.
        let again = ok(toml::from_str(&c.to_toml()).unwrap());
        assert_eq!(shown(&again.sites.list[0].files), shown(a));
        assert_eq!(shown(&again.sites.list[1].files), shown(b));
        assert_eq!(again.to_toml(), c.to_toml());
    }

    #[test]
    fn the_sites_doc_lists_every_per_site_setting() {
        let doc = include_str!("../../docs/sites.md");
        let row = doc
            .lines()
            .find(|l| l.starts_with("| `index`"))
            .expect("docs/sites.md's row of per-site settings");
        let listed: Vec<&str> = row
            .split('|')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|k| k.trim().trim_matches('`'))
            .collect();
        let mut keys = super::super::raw::SITE_KEYS.to_vec();
        let mut listed_sorted = listed.clone();
        keys.sort_unstable();
        listed_sorted.sort_unstable();
        assert_eq!(listed_sorted, keys, "docs/sites.md: {row}");
    }

    #[test]
    fn a_bad_per_site_value_names_the_site_key() {
        let mut a = site(&["a.test"]);
        a.cache_control = Some("no\nstore".into());
        let e = err(with(vec![a]));
        assert!(e.starts_with("site.cache_control: "), "{e}");
        let mut a = site(&["a.test"]);
        a.index = Some(vec!["../x".into()]);
        let e = err(with(vec![a]));
        assert!(e.starts_with("site.index: "), "{e}");
    }

    #[test]
    fn sites_echo_in_the_effective_config() {
        let c = ok(with(vec![site(&["a.test"]), site(&["*.b.test"])]));
        let text = c.to_toml();
        let back: RawConfig = toml::from_str(&text).unwrap();
        let sites = back.site.unwrap();
        assert_eq!(sites[1].name.as_deref(), Some("wildcard.b.test"));
        assert!(sites[0].default);
        assert!(ok(raw()).to_toml().find("[[site]]").is_none());
    }
}

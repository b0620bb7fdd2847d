//! What the static file handler serves and how: the root, `--symlinks`,
//! `--dotfiles`, `--index`, `--autoindex`, `--fallback`, `--cache-control`,
//! the `[[headers]]` rules, the `[[error_page]]` pages and the file caches.
//!
//! Owns [`FilesConfig`] and the rules of those settings: the root is an
//! existing directory, an index is a bare file name, a header rule's path
//! starts with `/` and sets only fields the server does not compute, no value
//! carries a line break. Does not own serving (`static_files`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::raw::Checked;
use super::setting::{Echo, Field};
use super::{invalid, Error};
use crate::choice::choice;
pub use crate::static_files::{AutoindexFormat, FilesConfig, Symlinks};

/// Served when no root is given: the current directory, like
/// `python -m http.server`.
pub const DEFAULT_ROOT: &str = ".";
/// Links that stay under the root are followed; none can leak files above it.
pub const DEFAULT_SYMLINKS: Symlinks = Symlinks::Inside;
/// Dotfiles (`.git/`, `.env`) are usually secrets or tooling, not content.
pub const DEFAULT_DOTFILES: Dotfiles = Dotfiles::Deny;
/// Listings for people unless asked.
pub const DEFAULT_AUTOINDEX_FORMAT: AutoindexFormat = AutoindexFormat::Html;
/// nginx's default index name.
pub const DEFAULT_INDEX: &str = "index.html";
/// A replaced file is served new within this many seconds.
pub const DEFAULT_FILE_CACHE_TTL_S: f64 = 1.0;
/// Open-file cache entries per worker (nginx examples use 1000–10000).
pub const DEFAULT_FILE_CACHE_ENTRIES: usize = 4096;
/// Files up to 64 KiB are answered from memory with one write.
pub const DEFAULT_SMALL_FILE_MAX_BYTES: u64 = 64 * 1024;
/// Memory for small files per worker: about a thousand 64 KiB files.
pub const DEFAULT_MEMORY_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Longest `--file-cache-ttl`: an hour-old view of the disk is the most a
/// cache may serve.
const MAX_FILE_CACHE_TTL_S: f64 = 3600.0;
/// Largest `--small-file-max`: above this, zero-copy sends beat a copy.
const MAX_SMALL_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Fields the server computes; a rule that set them would corrupt framing or
/// validators.
const RESERVED_FIELDS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "content-range",
    "content-encoding",
    "etag",
    "last-modified",
    "date",
];

choice! {
    /// Whether paths with a segment starting with `.` are served.
    pub enum Dotfiles {
        /// Answered 404, as if absent.
        Deny = "deny",
        /// Served like any file.
        Allow = "allow",
    }
}

impl From<&FilesConfig> for Dotfiles {
    /// The word for what `files` does with dotfiles.
    fn from(files: &FilesConfig) -> Dotfiles {
        if files.dotfiles {
            Dotfiles::Allow
        } else {
            Dotfiles::Deny
        }
    }
}

/// One `[[headers]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HeaderRuleRaw {
    /// A path glob: `*` within a segment, `**` across segments, `?` one byte.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Header fields to set on matching responses.
    pub set: BTreeMap<String, String>,
}

/// A validated `[[headers]]` rule: the type belongs to the responses it
/// changes (`http::rules`).
pub use crate::http::rules::HeaderRule;

impl Echo<Option<Vec<HeaderRuleRaw>>> for Vec<HeaderRule> {
    fn echo(&self) -> Option<Vec<HeaderRuleRaw>> {
        let raw = self.iter().map(|r| HeaderRuleRaw {
            pattern: r.glob.pattern().to_owned(),
            set: r.set.iter().cloned().collect(),
        });
        Some(raw.collect())
    }
}

/// One `[[error_page]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ErrorPageRaw {
    /// The error statuses (400 to 599) this page answers.
    pub status: Vec<u16>,
    /// The page: a file's path from the site's root (`/404.html`).
    pub path: String,
}

pub use crate::static_files::ErrorPage;

impl Echo<Option<Vec<ErrorPageRaw>>> for Vec<ErrorPage> {
    fn echo(&self) -> Option<Vec<ErrorPageRaw>> {
        let raw = self.iter().map(|p| ErrorPageRaw {
            status: p.statuses.clone(),
            path: p.path.clone(),
        });
        Some(raw.collect())
    }
}

/// Most `[[error_page]]` tables (a site's, or the top level's).
const MAX_ERROR_PAGES: usize = 64;

/// `[[error_page]]`: each a list of error statuses and a page's path, as
/// `--fallback` (`fallback`); no status in two tables.
pub(crate) fn error_pages(_: Field, raw: Vec<ErrorPageRaw>) -> Result<Vec<ErrorPage>, Error> {
    if raw.len() > MAX_ERROR_PAGES {
        return Err(invalid(
            "error_page",
            format!(
                "{} tables; at most {MAX_ERROR_PAGES} (one table may list many statuses)",
                raw.len()
            ),
        ));
    }
    let mut pages: Vec<ErrorPage> = Vec::with_capacity(raw.len());
    for page in raw {
        if page.status.is_empty() {
            return Err(invalid(
                "error_page.status",
                format!(
                    "{:?} lists no status; give some, like status = [404]",
                    page.path
                ),
            ));
        }
        for &code in &page.status {
            if !(400..=599).contains(&code) {
                return Err(invalid(
                    "error_page.status",
                    format!("{code} is not an error status; give 400 to 599"),
                ));
            }
            if let Some(other) = pages.iter().find(|p| p.statuses.contains(&code)) {
                return Err(invalid(
                    "error_page.status",
                    format!(
                        "{code} has two pages, {:?} and {:?}; keep one",
                        other.path, page.path
                    ),
                ));
            }
        }
        let field = Field {
            key: "error_page.path",
            flag: "error_page.path",
        };
        pages.push(ErrorPage {
            statuses: page.status,
            path: fallback(field, page.path)?,
        });
    }
    Ok(pages)
}

/// The top level's file settings (each site starts from them).
pub(super) fn settings(c: &Checked) -> Result<FilesConfig, Error> {
    Ok(FilesConfig {
        symlinks: c.symlinks,
        dotfiles: c.dotfiles == Dotfiles::Allow,
        index: c.index.clone(),
        autoindex: c.autoindex,
        autoindex_format: c.autoindex_format,
        fallback: c.fallback.clone(),
        fallback_files: c.fallback_files,
        error_pages: c.error_page.clone(),
        redirects: c.redirect.clone(),
        rewrites: c.rewrite.clone(),
        auth: c.auth.clone(),
        auth_over_http: c.auth_over_http,
        cors: super::cors::settings(c)?,
        cache_control: c.cache_control.clone(),
        rules: c.headers.clone(),
        file_cache_ttl: c.file_cache_ttl,
        file_cache_entries: c.file_cache_entries,
        small_file_max: c.small_file_max,
        memory_cache_bytes: c.memory_cache_bytes,
        compression: super::compression::settings(c)?,
    })
}

/// The root: an existing directory. It is the argument, not a flag, so its
/// errors name it `root`.
pub(crate) fn root(field: Field, root: PathBuf) -> Result<PathBuf, Error> {
    match std::fs::metadata(&root) {
        Ok(m) if m.is_dir() => Ok(root),
        Ok(_) => Err(invalid(
            field.key,
            format!(
                "{} is not a directory; give the directory to serve",
                root.display()
            ),
        )),
        Err(e) => Err(invalid(
            field.key,
            format!(
                "cannot open {}: {e}; give an existing directory",
                root.display()
            ),
        )),
    }
}

/// `--index`: bare file names, tried in order.
pub(crate) fn index_names(field: Field, names: Vec<String>) -> Result<Vec<String>, Error> {
    for name in &names {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(field.invalid(format!(
                "{name:?} is not a file name; give a name like index.html"
            )));
        }
    }
    Ok(names)
}

/// `--fallback`: a file's path from the root (`/index.html`), as a request
/// would name it: no query, no dot segment, no hidden segment, no trailing
/// slash (a directory's index is named by its file).
pub(crate) fn fallback(field: Field, v: String) -> Result<String, Error> {
    let fix = "give a file's path from the root, like /index.html";
    if !v.starts_with('/') || v.contains('?') || v.contains('#') {
        return Err(field.invalid(format!("{v:?} is not a path from the root; {fix}")));
    }
    match crate::static_files::uri_path::resolve(v.as_bytes()) {
        Ok(r) if r.trailing_slash => Err(field.invalid(format!(
            "{v:?} names a directory; {fix} (a directory's index by its file name)"
        ))),
        Ok(r) if r.has_dotfile() => Err(field.invalid(format!(
            "{v:?} has a hidden segment (starting with .); {fix}"
        ))),
        Ok(r) if r.relative_path() != v[1..] => Err(field.invalid(format!(
            "{v:?} is not written plainly (dot segments, empty segments or escapes); \
             write it as /{}",
            r.relative_path()
        ))),
        Ok(_) => Ok(v),
        Err(e) => Err(field.invalid(format!("{v:?}: {e}; {fix}"))),
    }
}

/// `--cache-control`: a header field value.
pub(crate) fn cache_control(field: Field, v: String) -> Result<String, Error> {
    field_value(field.flag, &v)?;
    Ok(v)
}

/// `[[headers]]`: each path a glob from `/`, each field a token the server
/// does not compute, each value one line.
pub(crate) fn header_rules(_: Field, raw: Vec<HeaderRuleRaw>) -> Result<Vec<HeaderRule>, Error> {
    let mut rules = Vec::new();
    for rule in raw {
        if !rule.pattern.starts_with('/') {
            return Err(invalid(
                "headers.match",
                format!("{:?} must start with / (e.g. \"/assets/**\")", rule.pattern),
            ));
        }
        let mut set = Vec::new();
        for (name, value) in rule.set {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(invalid(
                    "headers.set",
                    format!("{name:?} is not a header name"),
                ));
            }
            if RESERVED_FIELDS.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(invalid(
                    "headers.set",
                    format!("{name} is set by the server itself and cannot be overridden"),
                ));
            }
            field_value("headers.set", &value)?;
            set.push((name, value));
        }
        rules.push(HeaderRule {
            glob: crate::http::rules::Glob::any(&rule.pattern),
            set,
        });
    }
    Ok(rules)
}

/// A header field value is one line without NUL (RFC 9110 §5.5).
fn field_value(field: &'static str, v: &str) -> Result<(), Error> {
    if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(invalid(
            field,
            format!("{v:?} contains a line break or NUL"),
        ));
    }
    Ok(())
}

/// `--file-cache-ttl`: seconds in `[0, MAX_FILE_CACHE_TTL_S]`; 0 checks the
/// disk on every request.
pub(crate) fn cache_ttl(field: Field, ttl: f64) -> Result<Duration, Error> {
    if !(ttl.is_finite() && (0.0..=MAX_FILE_CACHE_TTL_S).contains(&ttl)) {
        return Err(field.invalid(format!(
            "{ttl} is not in [0, {MAX_FILE_CACHE_TTL_S}] seconds"
        )));
    }
    Ok(Duration::from_secs_f64(ttl))
}

/// `--small-file-max`: at most [`MAX_SMALL_FILE_BYTES`].
pub(crate) fn small_file_max(field: Field, n: u64) -> Result<u64, Error> {
    if n > MAX_SMALL_FILE_BYTES {
        return Err(field.invalid(format!(
            "{n} is above 16 MiB; larger files are sent zero-copy"
        )));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, raw};
    use crate::config::RawConfig;
    use crate::config::Seconds;

    fn rule(pattern: &str, name: &str, value: &str) -> RawConfig {
        RawConfig {
            headers: Some(vec![HeaderRuleRaw {
                pattern: pattern.into(),
                set: [(name.to_owned(), value.to_owned())].into(),
            }]),
            ..raw()
        }
    }

    #[test]
    fn header_rules_name_the_part_that_is_wrong() {
        assert!(err(rule("x", "X", "1")).starts_with("headers.match: \"x\" must start with /"));
        assert_eq!(
            err(rule("/x", "bad name", "1")),
            "headers.set: \"bad name\" is not a header name"
        );
        assert_eq!(
            err(rule("/x", "ETag", "1")),
            "headers.set: ETag is set by the server itself and cannot be overridden"
        );
        assert_eq!(
            err(rule("/x", "X", "a\r\nb")),
            "headers.set: \"a\\r\\nb\" contains a line break or NUL"
        );
    }

    #[test]
    fn a_fallback_is_a_plain_path_to_a_file() {
        let with = |v: &str| RawConfig {
            fallback: Some(v.into()),
            ..raw()
        };
        let c = crate::config::tests::ok(with("/index.html"));
        assert_eq!(c.files.fallback.as_deref(), Some("/index.html"));
        assert!(!c.files.fallback_files);
        let c = crate::config::tests::ok(with("/app/shell.html"));
        assert_eq!(c.files.fallback.as_deref(), Some("/app/shell.html"));
        for (v, why) in [
            ("index.html", "is not a path from the root"),
            ("/index.html?x=1", "is not a path from the root"),
            ("/", "names a directory"),
            ("/app/", "names a directory"),
            ("/.hidden/index.html", "has a hidden segment"),
            ("/a/../index.html", "is not written plainly"),
            ("//index.html", "is not written plainly"),
            ("/%69ndex.html", "is not written plainly"),
            ("/../index.html", "climbs above the root"),
        ] {
            let e = err(with(v));
            assert!(e.starts_with("--fallback: "), "{v}: {e}");
            assert!(e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn error_pages_name_what_is_wrong() {
        let with = |pages: &[(&[u16], &str)]| RawConfig {
            error_page: Some(
                pages
                    .iter()
                    .map(|(status, path)| ErrorPageRaw {
                        status: status.to_vec(),
                        path: (*path).into(),
                    })
                    .collect(),
            ),
            ..raw()
        };
        let c =
            crate::config::tests::ok(with(&[(&[404, 410], "/404.html"), (&[500], "/e/500.html")]));
        assert_eq!(c.files.error_pages.len(), 2);
        assert_eq!(c.files.error_pages[0].statuses, [404, 410]);
        for (pages, want) in [
            (
                vec![(&[][..], "/404.html")],
                "error_page.status: \"/404.html\" lists no status",
            ),
            (
                vec![(&[200][..], "/ok.html")],
                "error_page.status: 200 is not an error status",
            ),
            (
                vec![(&[600][..], "/x.html")],
                "error_page.status: 600 is not an error status",
            ),
            (
                vec![(&[404][..], "/a.html"), (&[410, 404][..], "/b.html")],
                "error_page.status: 404 has two pages, \"/a.html\" and \"/b.html\"",
            ),
            (
                vec![(&[404][..], "404.html")],
                "error_page.path: \"404.html\" is not a path",
            ),
            (
                vec![(&[404][..], "/errors/")],
                "error_page.path: \"/errors/\" names a directory",
            ),
        ] {
            let e = err(with(&pages));
            assert!(e.starts_with(want), "{e}");
        }
        let many: Vec<(&[u16], &str)> = vec![(&[404][..], "/x.html"); 65];
        assert!(err(with(&many)).starts_with("error_page: 65 tables; at most 64"));
    }

    #[test]
    fn a_root_that_is_a_file_is_refused_as_root() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let r = RawConfig {
            root: Some(file.path().into()),
            ..RawConfig::default()
        };
        assert!(err(r).starts_with("root: "));
    }

    #[test]
    fn file_settings_reach_the_handler() {
        let r = RawConfig {
            dotfiles: Some(Dotfiles::Allow),
            symlinks: Some(Symlinks::Never),
            index: Some(vec!["a.htm".into()]),
            file_cache_ttl: Some(Seconds(0.0)),
            ..rule("/a/**", "X-A", "b")
        };
        let c = crate::config::tests::ok(r).files;
        assert!(c.dotfiles);
        assert_eq!(c.symlinks, Symlinks::Never);
        assert_eq!(c.index, ["a.htm"]);
        assert_eq!(c.file_cache_ttl, Duration::ZERO);
        assert_eq!(c.rules[0].set, [("X-A".to_owned(), "b".to_owned())]);
    }

    #[test]
    fn cache_bounds_are_named() {
        let r = RawConfig {
            file_cache_ttl: Some(Seconds(3601.0)),
            ..raw()
        };
        assert_eq!(err(r), "--file-cache-ttl: 3601 is not in [0, 3600] seconds");
        let r = RawConfig {
            index: Some(vec!["..".into()]),
            ..raw()
        };
        assert!(err(r).starts_with("--index: \"..\" is not a file name"));
    }
}

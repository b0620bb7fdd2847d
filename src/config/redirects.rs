//! `[[redirect]]` and `[[rewrite]]` (config file only, per site or for
//! all): their rules, and the one between them: no redirect may send a
//! client to a path another redirect takes (a loop, or a chain a client
//! pays a round trip for each step of).
//!
//! Does not own matching or answering (`static_files::redirects`).

use serde::{Deserialize, Serialize};

use super::setting::{Echo, Field};
use super::{invalid, Error};
use crate::static_files::redirects::{fill, Glob, Redirect, Rewrite, MAX_CAPTURES};

/// Most `[[redirect]]` tables, and most `[[rewrite]]` tables.
pub const MAX_RULES: usize = 1000;

/// One `[[redirect]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RedirectRaw {
    /// A path glob: `*`, `**`, `?`, each a capture.
    pub from: String,
    /// A path from the root or an `http(s)://` URL; `$1`..`$9` the captures.
    pub to: String,
    /// 301 (the default), 302, 307 or 308.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// One `[[rewrite]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RewriteRaw {
    pub from: String,
    /// A path from the root; `$1`..`$9` the captures.
    pub to: String,
}

impl Echo<Option<Vec<RedirectRaw>>> for Vec<Redirect> {
    fn echo(&self) -> Option<Vec<RedirectRaw>> {
        let raw = self.iter().map(|r| RedirectRaw {
            from: r.from.pattern().to_owned(),
            to: r.to.clone(),
            status: Some(r.status),
        });
        Some(raw.collect())
    }
}

impl Echo<Option<Vec<RewriteRaw>>> for Vec<Rewrite> {
    fn echo(&self) -> Option<Vec<RewriteRaw>> {
        let raw = self.iter().map(|r| RewriteRaw {
            from: r.from.pattern().to_owned(),
            to: r.to.clone(),
        });
        Some(raw.collect())
    }
}

/// A `from`: a glob from `/` of at most [`MAX_CAPTURES`] wildcards.
fn from(key: &'static str, pattern: &str) -> Result<Glob, Error> {
    if !pattern.starts_with('/') {
        return Err(invalid(
            key,
            format!("{pattern:?} must start with / (e.g. \"/old/**\")"),
        ));
    }
    Glob::new(pattern).ok_or_else(|| {
        invalid(
            key,
            format!(
                "{pattern:?} has more than {MAX_CAPTURES} wildcards; $1 to $9 are all there are"
            ),
        )
    })
}

/// A `to`: visible ASCII with no space, `"`, `<`, `>`, `\` or `#` (it goes
/// into `Location` as written), `$N` only for captures `from` has.
fn to(key: &'static str, to: &str, glob: &Glob, url: bool) -> Result<(), Error> {
    let local = to.starts_with('/') && !to.starts_with("//");
    let absolute = url
        && ["http://", "https://"].iter().any(|s| {
            to.len() > s.len()
                && to[..s.len()].eq_ignore_ascii_case(s)
                && !to[s.len()..].starts_with('/')
        });
    if !local && !absolute {
        let want = if url {
            "a path from the root (/new/$1) or an http(s):// URL"
        } else {
            "a path from the root (/new/$1)"
        };
        return Err(invalid(key, format!("{to:?} is not {want}")));
    }
    if let Some(b) = to
        .bytes()
        .find(|&b| !(0x21..=0x7e).contains(&b) || b"\"<>\\#`{}|^".contains(&b))
    {
        return Err(invalid(
            key,
            format!("{to:?} holds {:?}; percent-encode it", b as char),
        ));
    }
    let t = to.as_bytes();
    for (i, &b) in t.iter().enumerate() {
        if b == b'$' {
            let n = t.get(i + 1).copied().unwrap_or(b' ');
            let ok = (b'1'..=b'9').contains(&n) && usize::from(n - b'0') <= glob.captures();
            if !ok {
                return Err(invalid(
                    key,
                    format!(
                        "{to:?}: ${} is not a capture of {:?} (it has {})",
                        n as char,
                        glob.pattern(),
                        glob.captures()
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn bounded(key: &'static str, n: usize) -> Result<(), Error> {
    if n > MAX_RULES {
        return Err(invalid(key, format!("{n} tables; at most {MAX_RULES}")));
    }
    Ok(())
}

/// `[[redirect]]`: each checked, then no redirect's local target taken by
/// a redirect again.
pub(crate) fn redirects(_: Field, raw: Vec<RedirectRaw>) -> Result<Vec<Redirect>, Error> {
    bounded("redirect", raw.len())?;
    let mut out = Vec::with_capacity(raw.len());
    for r in raw {
        let glob = from("redirect.from", &r.from)?;
        to("redirect.to", &r.to, &glob, true)?;
        let status = r.status.unwrap_or(301);
        if ![301, 302, 307, 308].contains(&status) {
            return Err(invalid(
                "redirect.status",
                format!("{status} is not a redirect; give 301, 302, 307 or 308"),
            ));
        }
        out.push(Redirect {
            from: glob,
            to: r.to,
            status,
        });
    }
    for r in &out {
        if !r.to.starts_with('/') {
            continue;
        }
        // The target with each capture a plain segment, as a client would
        // ask for it next.
        // A filler no literal rule names, which any wildcard takes.
        const FILLER: &[u8] = b"servery-sample";
        let sample = fill(&r.to, FILLER, &[(0, FILLER.len()); MAX_CAPTURES]);
        let sample = sample.split('?').next().unwrap_or_default();
        if let Some(other) = out
            .iter()
            .find(|o| o.from.matches(sample.as_bytes()).is_some())
        {
            return Err(invalid(
                "redirect.to",
                format!(
                    "{:?} (from {:?}) is taken again by the redirect from {:?}: a loop or a \
                     chain; point it at the final place",
                    r.to,
                    r.from.pattern(),
                    other.from.pattern()
                ),
            ));
        }
    }
    Ok(out)
}

/// `[[rewrite]]`: each checked; a target is a path from the root.
pub(crate) fn rewrites(_: Field, raw: Vec<RewriteRaw>) -> Result<Vec<Rewrite>, Error> {
    bounded("rewrite", raw.len())?;
    raw.into_iter()
        .map(|r| {
            let glob = from("rewrite.from", &r.from)?;
            to("rewrite.to", &r.to, &glob, false)?;
            Ok(Rewrite {
                from: glob,
                to: r.to,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::RawConfig;

    fn redirect(from: &str, to: &str, status: Option<u16>) -> RedirectRaw {
        RedirectRaw {
            from: from.into(),
            to: to.into(),
            status,
        }
    }

    fn with(r: Vec<RedirectRaw>) -> RawConfig {
        RawConfig {
            redirect: Some(r),
            ..raw()
        }
    }

    #[test]
    fn redirects_read_and_say_what_is_wrong() {
        let c = ok(with(vec![
            redirect("/old/**", "/new/$1", None),
            redirect("/shop/*", "https://shop.example/$1", Some(308)),
        ]));
        assert_eq!(c.files.redirects.len(), 2);
        assert_eq!(c.files.redirects[0].status, 301);
        for (r, want) in [
            (
                redirect("old/**", "/new", None),
                "redirect.from: \"old/**\" must start with /",
            ),
            (
                redirect("/a/*", "/b/$2", None),
                "redirect.to: \"/b/$2\": $2 is not a capture",
            ),
            (
                redirect("/a", "/b", Some(200)),
                "redirect.status: 200 is not a redirect",
            ),
            (
                redirect("/a", "b", None),
                "redirect.to: \"b\" is not a path",
            ),
            (
                redirect("/a", "//evil.example/", None),
                "redirect.to: \"//evil.example/\" is not",
            ),
            (
                redirect("/a", "javascript:x", None),
                "redirect.to: \"javascript:x\" is not",
            ),
            (
                redirect("/a", "/b\r\nX: y", None),
                "redirect.to: \"/b\\r\\nX: y\" holds '\\r'",
            ),
            (
                redirect("/a", "/b c", None),
                "redirect.to: \"/b c\" holds ' '",
            ),
            (
                redirect("/*/*/*/*/*/*/*/*/*/*", "/", None),
                "has more than 9 wildcards",
            ),
        ] {
            let e = err(with(vec![r]));
            assert!(e.starts_with(want) || e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_redirect_loop_or_chain_is_refused() {
        for rules in [
            vec![redirect("/a/**", "/a/b/$1", None)],
            vec![redirect("/a", "/b", None), redirect("/b", "/a", None)],
            vec![redirect("/a", "/b", None), redirect("/b", "/c", None)],
        ] {
            let e = err(with(rules));
            assert!(e.contains("a loop or a chain"), "{e}");
        }
        // Elsewhere, and off-site, is fine.
        ok(with(vec![
            redirect("/a/**", "/b/$1", None),
            redirect("/b/x", "https://other.example/b/x", None),
        ]));
    }

    #[test]
    fn rewrites_are_paths() {
        let rw = |from: &str, to: &str| RawConfig {
            rewrite: Some(vec![RewriteRaw {
                from: from.into(),
                to: to.into(),
            }]),
            ..raw()
        };
        assert_eq!(ok(rw("/blog/*", "/posts/$1.html")).files.rewrites.len(), 1);
        assert!(err(rw("/a", "https://x.example/")).starts_with("rewrite.to: "));
        let many: Vec<RewriteRaw> = (0..1001)
            .map(|i| RewriteRaw {
                from: format!("/r{i}"),
                to: "/x".into(),
            })
            .collect();
        let e = err(RawConfig {
            rewrite: Some(many),
            ..raw()
        });
        assert!(e.starts_with("rewrite: 1001 tables; at most 1000"), "{e}");
    }
}

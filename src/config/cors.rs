//! Cross-origin reads of the files (`--cors-allow-origins`,
//! `--cors-allow-methods`, `--cors-allow-headers`, `--cors-max-age`,
//! `--cors-allow-credentials`), per site or for all.
//!
//! Owns each setting's rule and the one rule between them: credentials
//! need listed origins (the Fetch standard refuses `*` with credentials, and
//! a browser would refuse every such answer). Does not own the answers
//! (`static_files::cors`).

use super::raw::Checked;
use super::setting::Field;
use super::{invalid, Error};
use crate::static_files::Cors;

/// Methods a preflight may ask for unless set: what the files answer.
pub const DEFAULT_CORS_METHODS: [&str; 2] = ["GET", "HEAD"];
/// Chromium keeps a preflight at most two hours; Firefox a day.
pub const DEFAULT_CORS_MAX_AGE_S: f64 = 600.0;
/// A day: longer than any browser keeps a preflight.
pub const MAX_CORS_MAX_AGE_S: f64 = 86_400.0;
/// Most origins, methods or fields in one list.
const MAX_LIST: usize = 256;

pub(crate) fn default_methods() -> Vec<String> {
    DEFAULT_CORS_METHODS.iter().map(|&m| m.to_owned()).collect()
}

fn bounded(field: Field, list: &[String]) -> Result<(), Error> {
    if list.len() > MAX_LIST {
        return Err(field.invalid(format!("{} entries; at most {MAX_LIST}", list.len())));
    }
    Ok(())
}

/// `--cors-allow-origins`: `*` alone, or origins as browsers send them
/// (`https://app.example`, `http://localhost:8080`): a scheme, `://`, a
/// host and an optional port; no path, no trailing slash. Lowercased.
pub(crate) fn origins(field: Field, list: Vec<String>) -> Result<Vec<String>, Error> {
    bounded(field, &list)?;
    if list.iter().any(|o| o == "*") {
        if list.len() > 1 {
            return Err(field.invalid("* allows every origin; give it alone or list origins"));
        }
        return Ok(list);
    }
    let mut out = Vec::with_capacity(list.len());
    for o in list {
        let lower = o.to_ascii_lowercase();
        let ok = match lower.split_once("://") {
            Some((scheme, rest)) => {
                matches!(scheme, "http" | "https")
                    && !rest.is_empty()
                    && crate::http::host::validate(rest.as_bytes())
                        .is_ok_and(|a| !a.name.is_empty())
                    && !rest.contains(['/', '?', '#', '@'])
            }
            None => false,
        };
        if !ok {
            return Err(field.invalid(format!(
                "{o:?} is not an origin; write scheme://host[:port] (https://app.example), \
                 with no path, or * alone"
            )));
        }
        out.push(lower);
    }
    Ok(out)
}

/// A list of tokens (methods, field names); `lower` lowercases them.
fn tokens(field: Field, list: Vec<String>, what: &str, lower: bool) -> Result<Vec<String>, Error> {
    bounded(field, &list)?;
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    list.into_iter()
        .map(|t| {
            let t = t.trim().to_owned();
            if !token(&t) {
                return Err(field.invalid(format!("{t:?} is not {what}")));
            }
            Ok(if lower { t.to_ascii_lowercase() } else { t })
        })
        .collect()
}

/// `--cors-allow-methods`: method tokens, as written (methods are
/// case-sensitive).
pub(crate) fn methods(field: Field, list: Vec<String>) -> Result<Vec<String>, Error> {
    tokens(field, list, "a method (GET, PUT)", false)
}

/// `--cors-allow-headers`: field names, lowercased.
pub(crate) fn headers(field: Field, list: Vec<String>) -> Result<Vec<String>, Error> {
    tokens(field, list, "a header field name (content-type)", true)
}

/// The CORS settings, checked together.
pub(super) fn settings(c: &Checked) -> Result<Cors, Error> {
    let any = c.cors_allow_origins.iter().any(|o| o == "*");
    if any && c.cors_allow_credentials {
        return Err(invalid(
            "--cors-allow-credentials",
            "cannot be on with --cors-allow-origins *: browsers refuse credentials with *; \
             list the origins",
        ));
    }
    Ok(Cors {
        origins: c.cors_allow_origins.clone(),
        methods: c.cors_allow_methods.clone(),
        headers: c.cors_allow_headers.clone(),
        max_age: c.cors_max_age,
        credentials: c.cors_allow_credentials,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err, ok, raw};
    use crate::config::RawConfig;

    fn list(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn origins_are_origins_and_credentials_need_them_listed() {
        let c = ok(RawConfig {
            cors_allow_origins: list(&["https://App.Example", "http://localhost:8080"]),
            cors_allow_credentials: true,
            ..raw()
        });
        let cors = &c.files.cors;
        assert_eq!(
            cors.origins,
            ["https://app.example", "http://localhost:8080"]
        );
        assert_eq!(cors.methods, ["GET", "HEAD"]);
        assert!(cors.credentials && cors.is_on());
        assert!(!ok(raw()).files.cors.is_on());
        for (origins, want) in [
            (&["https://app.example/"][..], "is not an origin"),
            (&["https://app.example/path"], "is not an origin"),
            (&["app.example"], "is not an origin"),
            (&["ftp://app.example"], "is not an origin"),
            (&["https://"], "is not an origin"),
            (&["https://user@app.example"], "is not an origin"),
            (&["*", "https://app.example"], "give it alone"),
        ] {
            let e = err(RawConfig {
                cors_allow_origins: list(origins),
                ..raw()
            });
            assert!(e.starts_with("--cors-allow-origins: "), "{e}");
            assert!(e.contains(want), "{origins:?}: {e}");
        }
        let e = err(RawConfig {
            cors_allow_origins: list(&["*"]),
            cors_allow_credentials: true,
            ..raw()
        });
        assert!(
            e.starts_with("--cors-allow-credentials: cannot be on with"),
            "{e}"
        );
        let e = err(RawConfig {
            cors_allow_methods: list(&["GET", "BAD METHOD"]),
            ..raw()
        });
        assert!(
            e.starts_with("--cors-allow-methods: \"BAD METHOD\" is not a method"),
            "{e}"
        );
        let e = err(RawConfig {
            cors_allow_headers: list(&["x\ny"]),
            ..raw()
        });
        assert!(e.starts_with("--cors-allow-headers: "), "{e}");
        let many: Vec<String> = (0..300).map(|i| format!("https://a{i}.example")).collect();
        let e = err(RawConfig {
            cors_allow_origins: Some(many),
            ..raw()
        });
        assert!(e.contains("300 entries; at most 256"), "{e}");
    }
}

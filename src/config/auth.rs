//! `[[auth]]` (config file only, per site or for all) and
//! `--auth-over-http`: which paths need a user and password, whose users,
//! and whether plain HTTP may carry them.
//!
//! Owns reading the tables and their users files (each read now, so a bad
//! line is an error of the config, naming the file and line). Does not own
//! checking requests (`auth`, `static_files`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::setting::{Echo, Field};
use super::Error;
use crate::auth::{AuthRule, Users, MAX_REALM, MAX_RULES};
use crate::http::rules::Glob;

/// The realm a rule without one shows.
pub const DEFAULT_REALM: &str = "restricted";

/// One `[[auth]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuthRaw {
    /// A path glob (as `[[headers]]`): `/private/**`, `/**` for the whole site.
    #[serde(rename = "match")]
    pub pattern: String,
    /// An htpasswd file of bcrypt hashes (`htpasswd -B -c FILE USER`).
    pub users_file: PathBuf,
    /// Shown in the browser's login prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realm: Option<String>,
}

impl Echo<Option<Vec<AuthRaw>>> for Vec<AuthRule> {
    fn echo(&self) -> Option<Vec<AuthRaw>> {
        let raw = self.iter().map(|r| AuthRaw {
            pattern: r.glob.pattern().to_owned(),
            users_file: r.users_file.clone(),
            realm: Some(r.realm.clone()),
        });
        Some(raw.collect())
    }
}

/// `[[auth]]`: each a glob from `/`, a users file that reads, a realm of
/// visible ASCII without `"` or `\`.
pub(crate) fn rules(field: Field, raw: Vec<AuthRaw>) -> Result<Vec<AuthRule>, Error> {
    if raw.len() > MAX_RULES {
        return Err(field.invalid(format!("{} tables; at most {MAX_RULES}", raw.len())));
    }
    let mut rules = Vec::with_capacity(raw.len());
    for r in raw {
        if !r.pattern.starts_with('/') {
            return Err(field.invalid(format!(
                "match {:?} must start with / (e.g. \"/private/**\")",
                r.pattern
            )));
        }
        let glob = Glob::new(&r.pattern).ok_or_else(|| {
            field.invalid(format!("match {:?} has too many wildcards", r.pattern))
        })?;
        let realm = r.realm.unwrap_or_else(|| DEFAULT_REALM.to_owned());
        if realm.is_empty()
            || realm.len() > MAX_REALM
            || !realm
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            return Err(field.invalid(format!(
                "realm {realm:?}: 1 to {MAX_REALM} printable ASCII characters without \" or \\"
            )));
        }
        let users =
            Users::read(&r.users_file).map_err(|e| field.invalid(format!("users_file {e}")))?;
        rules.push(AuthRule {
            glob,
            realm,
            users_file: r.users_file,
            users: Arc::new(users),
        });
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field() -> Field {
        Field {
            key: "auth",
            flag: "auth",
        }
    }

    fn raw(pattern: &str, file: &std::path::Path, realm: Option<&str>) -> AuthRaw {
        AuthRaw {
            pattern: pattern.into(),
            users_file: file.into(),
            realm: realm.map(Into::into),
        }
    }

    #[test]
    fn tables_and_their_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("users");
        std::fs::write(
            &good,
            "alice:$2y$04$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2\n",
        )
        .unwrap();
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "# staff\nbob:$apr1$x$y\n").unwrap();
        let rules = rules(field(), vec![raw("/private/**", &good, None)]).unwrap();
        assert_eq!(rules[0].realm, DEFAULT_REALM);
        assert_eq!(rules[0].users.len(), 1);
        for (r, want) in [
            (raw("private/**", &good, None), "auth: match"),
            (
                raw("/p/**", &bad, None),
                "line 2: user \"bob\": an MD5 hash",
            ),
            (raw("/p/**", &dir.path().join("none"), None), "cannot read"),
            (raw("/p/**", &good, Some("a\"b")), "auth: realm"),
            (raw("/p/**", &good, Some("")), "auth: realm"),
        ] {
            let e = rules_err(vec![r]);
            assert!(e.contains(want), "{want}: {e}");
        }
        let many = (0..=MAX_RULES).map(|_| raw("/p", &good, None)).collect();
        assert!(rules_err(many).contains("at most"));
    }

    fn rules_err(raw: Vec<AuthRaw>) -> String {
        rules(field(), raw).unwrap_err().to_string()
    }
}

//! A users file: htpasswd lines of `user:hash`, bcrypt hashes only.
//!
//! Read when the config is (a reload reads it again), so a bad line is a
//! config error naming the file, the line and the fix, and a request never
//! meets an unreadable hash. bcrypt is what `htpasswd -B` and Caddy's
//! `hash-password` write; htpasswd's other formats (`$apr1$` MD5, `{SHA}`,
//! crypt) are refused: they are cracked in seconds, and accepting them
//! would keep them in use. A cost above [`MAX_COST`] is refused too: each
//! verification of such a hash holds the verifier for seconds.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Highest bcrypt cost accepted: 2^16 rounds, ~4 s a verification here
/// (cost 10 is 59 ms, release build).
pub const MAX_COST: u32 = 16;
/// Lowest bcrypt cost there is.
const MIN_COST: u32 = 4;
/// Most users one file may hold.
pub const MAX_USERS: usize = 10_000;
/// Largest users file read.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The users of one file, by name.
#[derive(Clone)]
pub struct Users {
    by_name: HashMap<String, String>,
    /// A hash of the file's own (the first user's) checked when a client
    /// names no user of the file, so an unknown name costs what a known
    /// one does and timing says nothing of who exists.
    decoy: String,
    /// This reading's number in the process: what a verified credential
    /// is remembered under, so a file read again (a reload) starts with
    /// nothing verified.
    id: u64,
}

/// The same users and hashes, whichever reading.
impl PartialEq for Users {
    fn eq(&self, other: &Users) -> bool {
        self.by_name == other.by_name
    }
}

impl Eq for Users {}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("users", &self.by_name.len())
            .finish()
    }
}

impl Users {
    /// The file at `path`; `Err` says what is wrong and where.
    pub fn read(path: &Path) -> Result<Users, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{shown} is {} bytes; a users file may hold at most {MAX_FILE_BYTES}",
                meta.len()
            ));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        Users::parse(&text).map_err(|e| format!("{shown}: {e}"))
    }

    /// `user:hash` lines; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Users, String> {
        let mut by_name = HashMap::new();
        let mut first = None;
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.split_once(':') else {
                return Err(format!(
                    "line {n}: not user:hash; write one user a line as `htpasswd -B` does"
                ));
            };
            if user.is_empty() || user.chars().any(|c| c.is_control()) {
                return Err(format!(
                    "line {n}: the user name is empty or holds a control character"
                ));
            }
            check_hash(hash).map_err(|why| format!("line {n}: user {user:?}: {why}"))?;
            if by_name.insert(user.to_owned(), hash.to_owned()).is_some() {
                return Err(format!(
                    "line {n}: user {user:?} is listed twice; keep one line"
                ));
            }
            if by_name.len() > MAX_USERS {
                return Err(format!("more than {MAX_USERS} users"));
            }
            first.get_or_insert_with(|| hash.to_owned());
        }
        let decoy = first.ok_or("no users: add `user:hash` lines (htpasswd -B -c FILE USER)")?;
        static READINGS: AtomicU64 = AtomicU64::new(0);
        let id = READINGS.fetch_add(1, Ordering::Relaxed);
        Ok(Users { by_name, decoy, id })
    }

    /// The hash to check `user`'s password against, and whether the user
    /// exists (the decoy's answer never lets anyone in).
    pub fn hash_of(&self, user: &str) -> (&str, bool) {
        match self.by_name.get(user) {
            Some(hash) => (hash, true),
            None => (&self.decoy, false),
        }
    }

    /// This reading's number (see the field).
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// A bcrypt hash `bcrypt::verify` can read, of a cost within bounds.
fn check_hash(hash: &str) -> Result<(), String> {
    let weak = |what: &str| {
        Err(format!(
            "{what} hash; servery takes bcrypt only ($2y$, from `htpasswd -B` or \
             `caddy hash-password`): re-create the line with `htpasswd -B FILE USER`"
        ))
    };
    if hash.starts_with("$apr1$") || hash.starts_with("$1$") {
        return weak("an MD5");
    }
    if hash.starts_with("{SHA}") || hash.starts_with("$5$") || hash.starts_with("$6$") {
        return weak("a SHA");
    }
    if hash.starts_with("$argon2") {
        return weak("an argon2");
    }
    let parts: Vec<&str> = hash.split('$').collect();
    let ok_shape = parts.len() == 4
        && parts[0].is_empty()
        && matches!(parts[1], "2a" | "2b" | "2y")
        && parts[2].len() == 2
        && parts[3].len() == 53
        && parts[3]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
    if !ok_shape {
        return weak("not a bcrypt (nor any)");
    }
    let cost: u32 = parts[2]
        .parse()
        .map_err(|_| "a bcrypt cost that is not a number")?;
    if !(MIN_COST..=MAX_COST).contains(&cost) {
        return Err(format!(
            "bcrypt cost {cost}; use {MIN_COST} to {MAX_COST} (10 to 12 is usual: each step \
             doubles the time a verification holds the server)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `htpasswd -nbB -C 4 alice secret`.
    const ALICE: &str = "alice:$2y$04$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2";

    #[test]
    fn bcrypt_lines_are_read_and_the_rest_refused_by_line() {
        let users = Users::parse(&format!("# users\n\n{ALICE}\r\nbob:{}\n", &ALICE[6..])).unwrap();
        assert_eq!(users.len(), 2);
        assert!(users.hash_of("alice").1);
        assert!(!users.hash_of("mallory").1);
        assert_eq!(users.hash_of("mallory").0, users.hash_of("alice").0);
        for (text, want) in [
            ("alice", "line 1: not user:hash"),
            ("alice:$apr1$abc$def", "line 1: user \"alice\": an MD5 hash"),
            ("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "a SHA hash"),
            ("alice:plaintext", "not a bcrypt"),
            (
                "alice:$2y$03$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2",
                "cost 3",
            ),
            (
                "alice:$2y$17$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2",
                "cost 17",
            ),
            (
                "alice:$2y$04$hK8Vx6rxbgbC!jl7L0aAuO9fH7q1xGyD8uEphLSUQMgsMjcBcXNmm",
                "not a bcrypt",
            ),
            (
                ":$2y$04$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2",
                "empty",
            ),
            ("# only a comment\n", "no users"),
        ] {
            let e = Users::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let twice = format!("{ALICE}\n{ALICE}\n");
        assert!(Users::parse(&twice)
            .unwrap_err()
            .contains("line 2: user \"alice\" is listed twice"));
    }

    #[test]
    fn the_hashes_verify() {
        let users = Users::parse(ALICE).unwrap();
        let (hash, known) = users.hash_of("alice");
        assert!(known);
        assert!(bcrypt::verify("secret", hash).unwrap());
        assert!(!bcrypt::verify("Secret", hash).unwrap());
    }
}

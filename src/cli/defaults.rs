//! The default each flag shows in `--help`, read back from the
//! configuration that nothing at all validates to.
//!
//! Owns [`Defaults`]: the effective config of an empty `RawConfig`, and the
//! text `[default: ...]` of each flag. Does not own any default (each is a
//! `const` beside its rule in `config/`) nor where the text goes (`args`).
//!
//! A default is written once, in `config/`; the help must not keep a second
//! copy that could drift. So:
//! 1. an empty `RawConfig` (only its root set, to `/`, which always exists
//!    and which no flag shows) is validated against a one-CPU set, so what
//!    the help says does not depend on the machine it runs on;
//! 2. [`crate::config::Config::effective`] echoes every setting in file
//!    form, as `check-config` prints it;
//! 3. each flag's value there is its default, written as the flag takes it
//!    (`30`, `auto`, `h2,http/1.1`). Switches show none (they are off unless
//!    given), settings left unset show none (they have no default), and two
//!    settings worked out from others say from what: `--cpus` (from
//!    `--workers` and the CPU set) and `--force-timeout` (a margin past the
//!    drain timeout, the margin itself read from the two defaults).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::config::{CpuSet, RawConfig, Seconds, DEFAULT_WORKERS};

/// The validated defaults in file form, by setting key.
#[derive(Debug)]
pub(crate) struct Defaults {
    effective: toml::Table,
}

impl Defaults {
    /// The defaults, worked out once per process; the error says why they
    /// could not be (the help then says so instead of showing them).
    pub(crate) fn get() -> Result<&'static Defaults, &'static str> {
        static DEFAULTS: OnceLock<Result<Defaults, String>> = OnceLock::new();
        DEFAULTS
            .get_or_init(Defaults::work_out)
            .as_ref()
            .map_err(String::as_str)
    }

    fn work_out() -> Result<Defaults, String> {
        let empty = RawConfig {
            root: Some(PathBuf::from("/")),
            ..RawConfig::default()
        };
        let one_cpu = CpuSet([0].into_iter().collect());
        let config = empty
            .validate_with(&one_cpu, &[0])
            .map_err(|e| format!("the empty configuration is refused: {e}"))?;
        let effective = toml::Table::try_from(config.effective())
            .map_err(|e| format!("the effective configuration has no file form: {e}"))?;
        Ok(Defaults { effective })
    }

    /// What `[default: ...]` says for the flag of setting `key`, whose
    /// values are separated by `delimiter` on the command line (`--alpn`);
    /// `None` when it has no default to show.
    pub(crate) fn text(&self, key: &str, delimiter: Option<char>) -> Option<String> {
        match key {
            "cpus" => return Some("one per worker, physical cores first".to_owned()),
            // As written: the effective config shows what `auto` came to.
            "workers" => return Some(DEFAULT_WORKERS.to_owned()),
            "force_timeout" => {
                let seconds = |k: &str| {
                    let v = self.effective.get(k)?.clone();
                    Seconds::deserialize(v).ok()
                };
                let margin = seconds("force_timeout")?.0 - seconds("drain_timeout")?.0;
                return Some(format!("--drain-timeout + {}", Seconds(margin)));
            }
            _ => {}
        }
        match self.effective.get(key)? {
            toml::Value::Array(items) if items.is_empty() => None,
            toml::Value::Array(items) => {
                let words: Option<Vec<String>> = items.iter().map(word).collect();
                let separator = delimiter.map_or_else(|| ", ".to_owned(), String::from);
                Some(words?.join(&separator))
            }
            value => word(value),
        }
    }
}

/// One value as a flag takes it: no quotes, whole seconds without `.0`;
/// `None` for a switch (its default is not to be given).
fn word(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        // `Display` for f64 writes 30.0 as `30` and 0.25 as `0.25`.
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(_)
        | toml::Value::Datetime(_)
        | toml::Value::Array(_)
        | toml::Value::Table(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_FORCE_TIMEOUT_S, DEFAULT_LISTENER};

    fn text(key: &str) -> Option<String> {
        Defaults::get().unwrap().text(key, None)
    }

    #[test]
    fn the_defaults_are_the_effective_config_of_nothing() {
        assert_eq!(
            text("drain_timeout"),
            Some(Seconds(DEFAULT_DRAIN_TIMEOUT_S).to_string())
        );
        assert_eq!(text("workers").as_deref(), Some("auto"));
        assert_eq!(text("listener").as_deref(), Some(DEFAULT_LISTENER.name()));
        assert_eq!(text("bind").as_deref(), Some(crate::config::DEFAULT_BIND));
    }

    #[test]
    fn durations_and_sizes_are_written_with_units() {
        assert_eq!(text("drain_timeout").as_deref(), Some("30s"));
        assert_eq!(text("output_buffer_bytes").as_deref(), Some("256KiB"));
        assert_eq!(word(&toml::Value::Float(0.25)).as_deref(), Some("0.25"));
    }

    #[test]
    fn lists_are_joined_as_the_flag_takes_them() {
        let d = Defaults::get().unwrap();
        assert_eq!(d.text("alpn", Some(',')).as_deref(), Some("h2,http/1.1"));
        assert_eq!(d.text("tls_bind", None), None, "no TLS listener by default");
    }

    #[test]
    fn switches_and_unset_settings_show_no_default() {
        for key in [
            "no_pin",
            "autoindex",
            "tls_self_signed",
            "admin",
            "cache_control",
        ] {
            assert_eq!(text(key), None, "{key}");
        }
    }

    #[test]
    fn derived_settings_say_what_they_follow() {
        let margin = DEFAULT_FORCE_TIMEOUT_S - DEFAULT_DRAIN_TIMEOUT_S;
        assert_eq!(
            text("force_timeout"),
            Some(format!("--drain-timeout + {}", Seconds(margin)))
        );
        assert!(text("cpus").unwrap().starts_with("one per worker"));
    }
}

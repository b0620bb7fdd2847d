//! The arguments of `serve` and `check-config`: ROOT, `--config`, and every
//! setting's flag, grouped by topic, each showing its default.
//!
//! Owns [`ServeArgs`] and its clap `Args` impl. Does not own the flags (each
//! is declared once in `config/raw.rs`), their topics (`topic`) nor their
//! defaults (`defaults`).
//!
//! The impl is written by hand rather than derived for one reason: clap
//! lists help headings in the order their first flag was added, and the
//! settings are declared in their own order (that of the effective config
//! and of the checks). So the flags are taken as `RawConfig`'s derive
//! declares them and added again topic by topic:
//! 1. ROOT and `--config`;
//! 2. every flag of `RawConfig::augment_args`, built on a scratch command;
//! 3. for each topic in order, its flags (in `topic::FLAGS` order), each with
//!    its help heading and `[default: ...]` appended to its help;
//! 4. any flag the table lacks, last, under "Options", so it still works (a
//!    test in `topic` fails until it has a topic).
//!
//! Reading the matches back is `RawConfig`'s derived `FromArgMatches`, which
//! finds each flag by its id whatever the order. Defaults are never given to
//! clap as `default_value`: a flag left out must stay unset, or it would
//! override the config file's value when the two are merged.

use std::path::PathBuf;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use super::defaults::Defaults;
use super::topic::{self, Topic};
use crate::config::{RawConfig, DURATION_FORMS, SIZE_FORMS};

/// What `serve` and `check-config` are given.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// Directory to serve (default: the config file's `root`, else `.`).
    pub root: Option<PathBuf>,
    /// TOML config file; its keys are the flag names with `_` for `-`.
    pub config: Option<PathBuf>,
    /// Every setting's flag.
    pub raw: RawConfig,
}

/// The ids of the two arguments that are not settings.
const ROOT: &str = "root";
const CONFIG: &str = "config";

impl FromArgMatches for ServeArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }

    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        Ok(ServeArgs {
            root: m.remove_one(ROOT),
            config: m.remove_one(CONFIG),
            raw: RawConfig::from_arg_matches_mut(m)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.update_from_arg_matches_mut(&mut m.clone())
    }

    fn update_from_arg_matches_mut(&mut self, m: &mut ArgMatches) -> Result<(), clap::Error> {
        if let Some(root) = m.remove_one(ROOT) {
            self.root = Some(root);
        }
        if let Some(config) = m.remove_one(CONFIG) {
            self.config = Some(config);
        }
        self.raw.update_from_arg_matches_mut(m)
    }
}

impl Args for ServeArgs {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        augment(cmd)
    }
}

/// `cmd` with ROOT, `--config` and the grouped flags (see the module doc).
fn augment(cmd: Command) -> Command {
    let mut cmd = cmd
        .arg(
            Arg::new(ROOT)
                .value_name("ROOT")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Directory to serve (default: the config file's `root`, else `.`)"),
        )
        .arg(
            Arg::new(CONFIG)
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("TOML config file; its keys are the flag names with `_` for `-`"),
        );
    let declared = RawConfig::augment_args(Command::new("settings"));
    let flags: Vec<&Arg> = declared.get_arguments().collect();
    let defaults = Defaults::get();
    for topic in Topic::ALL {
        for key in topic.keys() {
            if let Some(arg) = flags.iter().find(|a| a.get_id() == key) {
                let arg = (*arg).clone().help_heading(topic.heading());
                cmd = cmd.arg(with_default(arg, defaults));
            }
        }
    }
    for arg in flags
        .iter()
        .filter(|a| topic::of(a.get_id().as_str()).is_none())
    {
        cmd = cmd.arg(with_default((*arg).clone(), defaults));
    }
    let mut after = format!("A DURATION is {DURATION_FORMS}.\nA SIZE is {SIZE_FORMS}.");
    if let Err(why) = defaults {
        after.push_str(&format!("\nDefaults are not shown: {why}."));
    }
    cmd.after_help(after)
}

/// `arg` with ` [default: ...]` after its help, if it has a default.
fn with_default(arg: Arg, defaults: Result<&Defaults, &str>) -> Arg {
    let Ok(defaults) = defaults else {
        return arg;
    };
    if !arg.get_action().takes_values() {
        // A switch: off unless given, nothing to show.
        return arg;
    }
    let Some(text) = defaults.text(arg.get_id().as_str(), arg.get_value_delimiter()) else {
        return arg;
    };
    let append = |help: Option<&clap::builder::StyledStr>| {
        let help = help.map(ToString::to_string).unwrap_or_default();
        format!("{help} [default: {text}]")
    };
    let short = append(arg.get_help());
    let long = arg.get_long_help().map(|h| append(Some(h)));
    let arg = arg.help(short);
    match long {
        Some(long) => arg.long_help(long),
        None => arg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{http2, Seconds, DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_MAX_CONNECTIONS};

    fn serve() -> Command {
        ServeArgs::augment_args(Command::new("serve"))
    }

    /// The help of the flag `--long`, as `--help` prints it.
    fn help(long: &str) -> String {
        let cmd = serve();
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .unwrap_or_else(|| panic!("no --{long}"));
        arg.get_help().map(ToString::to_string).unwrap_or_default()
    }

    #[test]
    fn the_help_says_how_durations_and_sizes_are_written() {
        let help = serve().render_help().to_string();
        assert!(
            help.contains("A DURATION is seconds, or with units: 500ms"),
            "{help}"
        );
        assert!(
            help.contains("A SIZE is bytes, or with a unit: 64k, 1MiB"),
            "{help}"
        );
        assert!(help.contains("--drain-timeout <DURATION>"), "{help}");
        assert!(help.contains("--max-body-bytes <SIZE>"), "{help}");
    }

    #[test]
    fn defaults_shown_are_the_effective_defaults() {
        assert!(
            help("drain-timeout")
                .ends_with(&format!("[default: {}]", Seconds(DEFAULT_DRAIN_TIMEOUT_S))),
            "{}",
            help("drain-timeout")
        );
        assert!(help("workers").ends_with("[default: auto]"));
        assert!(help("max-connections").ends_with(&format!("[default: {DEFAULT_MAX_CONNECTIONS}]")));
        assert!(help("h2-max-concurrent-streams").ends_with(&format!(
            "[default: {}]",
            http2::DEFAULT_H2_MAX_CONCURRENT_STREAMS
        )));
        assert!(help("driver").ends_with("[default: auto]"));
        assert!(help("tls-handshake-timeout").ends_with(&format!(
            "[default: {}]",
            Seconds(crate::config::DEFAULT_TLS_HANDSHAKE_TIMEOUT_S)
        )));
    }

    #[test]
    fn only_optional_settings_and_switches_show_no_default() {
        let cmd = serve();
        let mut without: Vec<&str> = cmd
            .get_arguments()
            .filter(|a| a.get_long().is_some() && a.get_action().takes_values())
            .filter(|a| {
                !a.get_help()
                    .is_some_and(|h| h.to_string().contains("[default: "))
            })
            .filter_map(Arg::get_long)
            .collect();
        without.sort_unstable();
        // Unset unless given: no made-up default. A new flag that has a
        // default but shows none (its echo leaves it out) fails here.
        assert_eq!(
            without,
            [
                "acme-ca-roots",
                "acme-contact",
                "acme-eab-hmac-key-file",
                "acme-eab-kid",
                "admin",
                "cache-control",
                "config",
                "cors-allow-headers",
                "cors-allow-origins",
                "fallback",
                "max-connections-total",
                "tls-bind",
                "tls-cert",
                "tls-key"
            ]
        );
        for switch in [
            "no-pin",
            "autoindex",
            "fallback-files",
            "cors-allow-credentials",
            "tls-self-signed",
        ] {
            assert!(!help(switch).contains("[default"), "--{switch}");
        }
    }

    #[test]
    fn flags_are_grouped_in_topic_order() {
        let cmd = serve();
        let mut headings: Vec<&str> = Vec::new();
        for a in cmd.get_arguments() {
            if let Some(h) = a.get_help_heading() {
                if headings.last() != Some(&h) {
                    assert!(!headings.contains(&h), "{h} is split");
                    headings.push(h);
                }
            }
        }
        let want: Vec<&str> = Topic::ALL
            .iter()
            .filter(|t| t.keys().next().is_some())
            .map(|t| t.heading())
            .collect();
        assert_eq!(headings, want);
    }

    #[test]
    fn a_flag_left_out_stays_unset() {
        let m = Command::new("t")
            .args(serve().get_arguments().cloned())
            .try_get_matches_from(["t", "--workers", "2"])
            .unwrap();
        let args = ServeArgs::from_arg_matches(&m).unwrap();
        assert_eq!(args.raw.drain_timeout, None);
        assert_eq!(args.raw.driver, None);
        assert!(args.root.is_none() && args.config.is_none());
        assert_eq!(args.raw.workers, Some(crate::config::WorkerCount::Count(2)));
    }

    #[test]
    fn root_and_config_are_read_back() {
        let m = serve()
            .try_get_matches_from(["serve", "site", "--config", "s.toml", "--no-pin"])
            .unwrap();
        let args = ServeArgs::from_arg_matches(&m).unwrap();
        assert_eq!(args.root, Some(PathBuf::from("site")));
        assert_eq!(args.config, Some(PathBuf::from("s.toml")));
        assert!(args.raw.no_pin);
    }
}

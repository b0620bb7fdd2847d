//! A flag given a word not on its list (`--driver kqueue`).
//!
//! Owns the one refusal of such a word, naming the setting. Does not own
//! the `choice!` macro nor the words' text (`crate::choice`), nor the enums
//! (each with the feature it configures).
//!
//! A word the file gets wrong is refused while the file is read (the error
//! names the file, line and key); one a flag gets wrong is refused by clap,
//! and `cli` reports it through [`Error::unknown_choice`] like any other
//! refused setting. Both say `"kqueue" is not a choice; use auto, uring or
//! epoll`.

use crate::choice::not_a_choice;

use super::raw::FIELDS;
use super::Error;

impl Error {
    /// The refusal of `word` given to the flag `flag`, which takes one of
    /// `allowed`; `None` when `flag` is no setting's flag.
    pub fn unknown_choice(flag: &str, word: &str, allowed: &[impl AsRef<str>]) -> Option<Error> {
        let field = FIELDS.iter().find(|f| f.flag == flag)?;
        Some(field.invalid(not_a_choice(word, allowed.iter().map(AsRef::as_ref))))
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    use super::*;
    use crate::config::tests::{raw, set};
    use crate::config::RawConfig;

    /// Every word-valued flag, with its TOML key and its words.
    fn choices() -> Vec<(String, String, Vec<String>)> {
        let cmd = RawConfig::augment_args(Command::new("t"));
        let out: Vec<_> = cmd
            .get_arguments()
            .filter(|a| a.get_action().takes_values() && !a.get_possible_values().is_empty())
            .map(|a| {
                let long = a.get_long().unwrap().to_owned();
                let words = a.get_possible_values();
                let words = words.iter().map(|v| v.get_name().to_owned()).collect();
                (long.replace('-', "_"), long, words)
            })
            .collect();
        assert!(out.len() >= 6, "{out:?}");
        out
    }

    fn effective(r: RawConfig) -> toml::Table {
        let c = RawConfig {
            root: raw().root,
            ..r
        };
        let text = c.validate_with(&set(&[0, 1]), &[0, 1]).unwrap().to_toml();
        text.parse().unwrap()
    }

    #[test]
    fn every_word_round_trips_flag_file_and_effective_output() {
        for (key, long, words) in choices() {
            for word in words {
                let flag = format!("--{long}={word}");
                let cmd = RawConfig::augment_args(Command::new("t"));
                let m = cmd.try_get_matches_from(["t", flag.as_str()]).unwrap();
                let from_flag = <RawConfig as clap::FromArgMatches>::from_arg_matches(&m).unwrap();
                let from_file: RawConfig = toml::from_str(&format!("{key} = {word:?}")).unwrap();
                for r in [from_flag, from_file] {
                    let shown = effective(r);
                    assert_eq!(shown[&key].as_str(), Some(word.as_str()), "{key}");
                }
            }
        }
    }

    #[test]
    fn help_shows_exactly_the_words() {
        let cmd = RawConfig::augment_args(Command::new("t"));
        for (_, long, words) in choices() {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(&long))
                .unwrap();
            let shown: Vec<_> = arg.get_value_names().unwrap().iter().collect();
            assert_eq!(shown[0].as_str(), words.join("|"), "--{long}");
        }
    }

    #[test]
    fn driver_alias_is_read_but_shown_as_its_word() {
        let r: RawConfig = toml::from_str("driver = \"io_uring\"").unwrap();
        assert_eq!(effective(r)["driver"].as_str(), Some("uring"));
    }

    #[test]
    fn a_wrong_word_names_the_setting_and_the_words() {
        let e = Error::unknown_choice("--listener", "both", &["reuseport", "shared"]).unwrap();
        assert_eq!(
            e.to_string(),
            "--listener: \"both\" is not a choice; use reuseport or shared"
        );
        assert!(Error::unknown_choice("--nope", "x", &["a"]).is_none());
        let e = toml::from_str::<RawConfig>("child_watch = \"poll\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("child_watch = \"poll\""), "{e}");
        assert!(
            e.contains("\"poll\" is not a choice; use auto, pidfd or sigchld"),
            "{e}"
        );
    }
}

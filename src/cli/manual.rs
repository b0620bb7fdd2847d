//! What servery says about itself beyond `--help`: `servery help [TOPIC]`,
//! `servery man` and `servery completions SHELL`.
//!
//! Owns the text of a topic's page, the list of topics, the man page's
//! layout and the completion scripts. Does not own the flags, their topics
//! or defaults (`args`, `topic`, `defaults`): every page here is rendered
//! from the same clap `Command` that parses the command line, so none of
//! them can drift from what the binary accepts.
//!
//! The man page is generated when asked for, not at build time: it is the
//! same `Command`, so it cannot disagree with the binary it comes with, and
//! a build script would have to compile the whole CLI a second time.
//! Its layout:
//! 1. title, NAME and SYNOPSIS as clap_mangen renders them;
//! 2. DESCRIPTION: what servery is, the config file, and one paragraph per
//!    topic (the text of `servery help TOPIC`);
//! 3. COMMANDS: each visible subcommand with its arguments;
//! 4. the options of `serve` and `check-config`, one section per topic, as
//!    clap_mangen renders them from the help headings;
//! 5. EXIT STATUS, SEE ALSO, and clap_mangen's VERSION.
//!
//! Each part written with roff (clap_mangen's and ours) opens with roff's
//! two-line apostrophe preamble (`.ie \n(.g .ds Aq \(aq`), which defines the
//! `\*(Aq` the text uses for `'`. The page keeps the first one, at its top,
//! and drops the repeats, which would only define the same string again.

use std::io::{self, Write};

use clap::error::ErrorKind;
use clap::{Args, Command};
use clap_mangen::roff::{bold, italic, roman, Roff};
use clap_mangen::Man;

use super::args::ServeArgs;
use super::topic::{wrap, Topic};
use super::{EXIT_ABANDONED, EXIT_REFUSED};

/// The width topic pages are wrapped to.
const WIDTH: usize = 80;

/// `servery help`, with `topic` a topic's or a command's name (clap has
/// checked it is one), or none for the list of both.
pub(crate) fn help(cmd: &mut Command, topic: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
    let Some(name) = topic else {
        return out.write_all(index(cmd).as_bytes());
    };
    if let Some(topic) = Topic::named(name) {
        return out.write_all(page(topic).as_bytes());
    }
    // A command: exactly what `servery COMMAND --help` prints, by asking
    // clap for it the same way (which help, short or long, is clap's call).
    match cmd.try_get_matches_from_mut(["servery", name, "--help"]) {
        Err(e) if e.kind() == ErrorKind::DisplayHelp => write!(out, "{}", e.render()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is neither a topic nor a command"),
        )),
    }
}

/// What `servery help` takes, one word each: every topic, then every
/// visible command of `cmd`.
pub(crate) fn words(cmd: &Command) -> Vec<(String, String)> {
    let topics = Topic::ALL
        .iter()
        .map(|t| (t.name().to_owned(), t.summary().to_owned()));
    let commands = visible(cmd).map(|c| {
        let about = c.get_about().map(ToString::to_string).unwrap_or_default();
        (c.get_name().to_owned(), about)
    });
    topics.chain(commands).collect()
}

fn visible(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|c| !c.is_hide_set())
}

/// The list of topics and commands `servery help` prints.
fn index(cmd: &Command) -> String {
    let words = words(cmd);
    let width = words.iter().map(|(w, _)| w.len()).max().unwrap_or(0);
    let line = |(word, about): &(String, String)| format!("  {word:width$}  {about}\n");
    let mut out = String::from("Usage: servery help [TOPIC|COMMAND]\n\n");
    out.push_str("Topics: the flags of one concern, their defaults, and what it is about:\n");
    for w in &words[..Topic::ALL.len()] {
        out.push_str(&line(w));
    }
    out.push_str("\nCommands: the same as servery COMMAND --help:\n");
    for w in &words[Topic::ALL.len()..] {
        out.push_str(&line(w));
    }
    out.push_str(
        "\nEvery flag is also a key of the --config file (`_` for `-`).\n\
         `servery man` prints the whole manual.\n",
    );
    out
}

/// The flags of `topic`, as `serve --help` lists them.
fn flags(topic: Topic) -> Command {
    let all = ServeArgs::augment_args(Command::new("servery serve"));
    let mine = all
        .get_arguments()
        .filter(|a| a.get_help_heading() == Some(topic.heading()))
        .cloned();
    Command::new("servery serve")
        .disable_help_flag(true)
        .help_template("{all-args}")
        .args(mine)
}

/// `servery help TOPIC`: what the concern is about, its flags with their
/// defaults, and where it is documented.
fn page(topic: Topic) -> String {
    let mut flags = flags(topic);
    let mut out = format!(
        "{}: {}\n\n{}\n\n",
        topic.heading(),
        topic.summary(),
        wrap(topic.about(), WIDTH)
    );
    // Every topic has flags (`topic::tests::every_topic_has_a_flag`).
    out.push_str(&flags.render_help().to_string());
    out.push('\n');
    out.push_str(&format!("More: {}.\n", topic.docs()));
    out
}

/// roff's apostrophe preamble, as the roff crate writes it before every part
/// it renders.
const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// `servery man`: the roff source of servery(1).
pub(crate) fn man(cmd: &Command, out: &mut dyn Write) -> io::Result<()> {
    let top = Man::new(cmd.clone());
    let mut page = Vec::new();
    top.render_title(&mut page)?;
    top.render_name_section(&mut page)?;
    top.render_synopsis_section(&mut page)?;
    description().to_writer(&mut page)?;
    commands(cmd).to_writer(&mut page)?;
    Man::new(ServeArgs::augment_args(Command::new("serve"))).render_options_section(&mut page)?;
    exit_status().to_writer(&mut page)?;
    see_also().to_writer(&mut page)?;
    top.render_version_section(&mut page)?;
    let page =
        String::from_utf8(page).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    out.write_all(preamble_once(&page).as_bytes())
}

/// `page` with its first [`PREAMBLE`] kept and every later one removed.
fn preamble_once(page: &str) -> String {
    match page.split_once(PREAMBLE) {
        Some((before, after)) => format!("{before}{PREAMBLE}{}", after.replace(PREAMBLE, "")),
        None => page.to_owned(),
    }
}

fn description() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["DESCRIPTION"]);
    roff.text([roman(
        "servery serves the files under ROOT over HTTP/1.1 and HTTP/2, in the clear \
         and over TLS, from pinned workers that each run an io_uring (or epoll) \
         event loop. It prints its ready line on stdout once every worker is ready, \
         and on SIGTERM drains: every request already read is answered, then one \
         line on stdout says it stopped.",
    )]);
    roff.control("PP", []);
    roff.text([roman(
        "Every flag of serve and check-config is also a key of the TOML file given \
         with --config, spelled with _ for -; a flag given on the command line wins \
         over the file. A value is checked before anything binds: a bad one exits 2 \
         naming the flag and the fix. The flags are grouped by concern; each concern \
         is described here, its flags are listed in the section of its name below, \
         and servery help TOPIC prints the two together.",
    )]);
    for topic in Topic::ALL {
        roff.control("TP", []);
        roff.text([bold(topic.name())]);
        roff.text([roman(format!("{} See {}.", topic.about(), topic.docs()))]);
    }
    roff
}

fn commands(cmd: &Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    for sub in visible(cmd) {
        roff.control("TP", []);
        roff.text([
            bold(format!("servery {}", sub.get_name())),
            roman(" "),
            italic(synopsis(sub)),
        ]);
        let about = sub.get_long_about().or(sub.get_about());
        roff.text([roman(about.map(ToString::to_string).unwrap_or_default())]);
    }
    roff
}

/// `[OPTIONS] [ROOT]`: what a command takes after its name.
fn synopsis(cmd: &Command) -> String {
    let mut words = Vec::new();
    if cmd.get_arguments().any(|a| !a.is_positional()) {
        words.push("[OPTIONS]".to_owned());
    }
    for p in cmd.get_positionals() {
        let id = p.get_id().as_str().to_uppercase();
        let name = p
            .get_value_names()
            .and_then(|n| n.first())
            .map_or(id, ToString::to_string);
        words.push(if p.is_required_set() {
            format!("<{name}>")
        } else {
            format!("[{name}]")
        });
    }
    words.join(" ")
}

fn exit_status() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in [
        (
            0,
            "a clean stop: every connection finished before --drain-timeout",
        ),
        (
            1,
            "a runtime failure: start-up failed (a port in use, a worker failed or was \
             slow, a signal), connections were cut at the drain timeout, workers \
             outlived the force timeout, or a crash loop",
        ),
        (
            EXIT_REFUSED,
            "the configuration or the command line was refused; nothing was bound",
        ),
        (EXIT_ABANDONED, "a second SIGINT abandoned the drain"),
    ] {
        roff.control("TP", []);
        roff.text([bold(code.to_string())]);
        roff.text([roman(meaning)]);
    }
    roff
}

fn see_also() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(
        "The docs folder of servery's source: architecture.md, operations.md \
         (signals, reloads, deadlines, systemd), static-files.md, tls.md, \
         http2.md, apps.md. systemd.socket(5), sd_notify(3), openat2(2).",
    )]);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        super::super::command()
    }

    fn help_text(word: Option<&str>) -> String {
        let mut out = Vec::new();
        help(&mut cli(), word, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_index_lists_every_topic_and_command() {
        let text = help_text(None);
        for topic in Topic::ALL {
            assert!(text.contains(&format!("  {}", topic.name())), "{text}");
        }
        for command in ["serve", "check-config", "help", "man", "completions"] {
            assert!(text.contains(&format!("  {command}")), "{text}");
        }
        assert!(
            !text.contains("worker "),
            "the internal command is hidden: {text}"
        );
    }

    #[test]
    fn a_topic_page_has_its_paragraph_flags_defaults_and_doc() {
        let text = help_text(Some("tls"));
        assert!(text.starts_with("TLS: "), "{text}");
        for flag in ["--tls-bind", "--tls-cert", "--tls-key", "--tls-self-signed"] {
            assert!(text.contains(flag), "{flag}: {text}");
        }
        assert!(text.contains("[default: 1h]"), "{text}");
        assert!(
            !text.contains("--drain-timeout <"),
            "another topic's flag: {text}"
        );
        assert!(text.ends_with("More: docs/tls.md.\n"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }

    #[test]
    fn the_logging_topic_lists_the_access_log() {
        let text = help_text(Some("logging"));
        assert!(text.contains("RUST_LOG"), "{text}");
        assert!(text.contains("--access-log <PATH|stderr|off>"), "{text}");
        assert!(text.contains("[default: off]"), "{text}");
        assert!(text.contains("[default: 64KiB]"), "{text}");
    }

    #[test]
    fn a_command_gets_its_own_help() {
        let text = help_text(Some("serve"));
        assert!(
            text.contains("Usage: servery serve [OPTIONS] [ROOT]"),
            "{text}"
        );
        assert!(text.contains("Listeners:"), "{text}");
    }

    #[test]
    fn no_topic_is_named_like_a_command() {
        let cmd = cli();
        let names: Vec<_> = words(&cmd).into_iter().map(|(w, _)| w).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} is both a topic and a command");
        }
    }

    #[test]
    fn the_man_page_has_every_section_and_flag() {
        let mut out = Vec::new();
        man(&cli(), &mut out).unwrap();
        let roff = String::from_utf8(out).unwrap();
        for section in [
            ".TH servery 1",
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH COMMANDS",
            ".SH OPTIONS",
            ".SH LISTENERS",
            ".SH TLS",
            ".SH \"EXIT STATUS\"",
            ".SH VERSION",
        ] {
            assert!(roff.contains(section), "{section}");
        }
        // roff escapes every `-` of a flag as `\-`.
        let serve = ServeArgs::augment_args(Command::new("serve"));
        // Hidden flags (one kept only to say what replaced it) are not shown.
        let shown = serve.get_arguments().filter(|a| !a.is_hide_set());
        for long in shown.filter_map(|a| a.get_long()) {
            let escaped = format!("\\-\\-{}", long.replace('-', "\\-"));
            assert!(roff.contains(&escaped), "--{long} is not in the man page");
        }
        assert!(roff.contains("[default: 30s]"), "defaults are shown");
    }

    #[test]
    fn the_man_page_has_one_preamble_title_and_description() {
        let mut out = Vec::new();
        man(&cli(), &mut out).unwrap();
        let roff = String::from_utf8(out).unwrap();
        assert!(roff.starts_with(PREAMBLE), "{roff}");
        assert_eq!(
            roff.matches(".ds Aq").count(),
            2,
            "one .ie/.el pair:\n{roff}"
        );
        assert_eq!(roff.matches(".TH ").count(), 1, "{roff}");
        assert_eq!(roff.matches(".SH DESCRIPTION").count(), 1, "{roff}");
        assert_eq!(
            roff.matches("servery serves the files under ROOT").count(),
            1
        );
        // The string the preamble defines is still used, after it.
        assert!(roff.find("\\*(Aq") > roff.find(PREAMBLE), "{roff}");
    }

    #[test]
    fn synopsis_names_what_a_command_takes() {
        let cmd = cli();
        let sub = |n| cmd.find_subcommand(n).unwrap();
        assert_eq!(synopsis(sub("serve")), "[OPTIONS] [ROOT]");
        assert_eq!(synopsis(sub("completions")), "<SHELL>");
        assert_eq!(synopsis(sub("man")), "");
    }
}

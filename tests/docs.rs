//! The docs against the binary they describe: what README.md and docs/
//! show a reader to type must be what `servery` accepts, or this fails
//! and says which line to fix.
//!
//! - The synopsis under README.md's "Using it" (the `servery serve` entry
//!   of its first `sh` block) names exactly the flags `servery serve
//!   --help` lists, each with a value placeholder of the same kind: the
//!   same choices (`reuseport|shared`), a switch as a switch, and a
//!   duration or a size whatever the unit word (`SECONDS`, `DURATION` and
//!   `S` are one kind; `BYTES` and `SIZE` another), so renaming a
//!   placeholder within its kind does not fail here. `--help` is read from
//!   the binary at test time, never copied.
//! - Every ` ```toml ` block of README.md and of the Markdown under docs/
//!   goes through `servery check-config --config BLOCK`, which must accept
//!   it (exit 0). A word after `toml` in the fence says a block is not a
//!   config to run as it stands, and what is checked instead:
//!   - `production`: a config for a real host, naming its paths (`/srv`,
//!     `/etc/servery`). It must read (every key known, every value of its
//!     type: those are checked before any path) and be refused only for a
//!     path it names.
//!   - `cargo`: a Cargo manifest excerpt, not a servery config. It must be
//!     TOML that depends on `servery` with features the crate has.
//!
//!   Any other word fails, so a new marker is a decision made here.
//!
//! - docs/tls.md's quick start runs as written, on a free port instead of
//!   8443: the server's ready line says its TLS listener speaks h2 and
//!   http/1.1, and the doc's curl line (where curl is installed) gets
//!   `hello.txt` over HTTP/2.
//! - docs/http2.md has a table row for every HTTP/2 flag of `--help`.
//! - Every test docs/tls.md names exists (a `fn` of that name under
//!   tests/ or src/), so a claim cannot point at a test that was renamed
//!   or removed.
//!
//! Relative paths in the examples are relative to the directory servery is
//! started in, and the blocks run from the repository root. The test makes
//! no file for a block, on purpose: whatever a block needs must already be
//! in a checkout, so the reader who copies it can run it there as the test
//! did. An example serves `examples/site`, a TLS example uses
//! `tls_self_signed` (no certificate files), an access log goes under
//! `target/`, which every build makes. A block without a top-level `root`
//! gets an empty temporary directory as ROOT, so that it does not serve the
//! repository.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

mod common;

/// The repository root: the blocks' working directory.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn servery(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servery"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run servery")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------
// The synopsis

/// A flag and the placeholder of its value (`None`: a switch).
type Flag = (String, Option<String>);

/// The flags `servery serve --help` lists, with their value names, and the
/// positionals of its usage line (`[ROOT]`).
fn help_flags() -> (Vec<Flag>, Vec<String>) {
    let out = servery(&["serve", "--help"]);
    assert!(out.status.success(), "serve --help: {}", text(&out.stderr));
    let help = text(&out.stdout);
    let usage = help
        .lines()
        .find_map(|l| l.strip_prefix("Usage: servery serve "))
        .expect("a usage line");
    let positionals = usage
        .split_whitespace()
        .filter(|w| *w != "[OPTIONS]")
        .map(str::to_owned)
        .collect();
    // clap puts an option at two spaces (`  -h, --help`) or six
    // (`      --bind <ADDR>`); its help, wrapped, is indented further.
    let flags = help
        .lines()
        .filter(|l| l.starts_with("  -") || l.starts_with("      --"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| w.starts_with("--"))?;
            let value = words
                .get(at + 1)
                .and_then(|w| w.strip_prefix('<')?.strip_suffix('>'));
            Some((words[at].to_owned(), value.map(str::to_owned)))
        })
        .filter(|(name, _)| name != "--help")
        .collect();
    (flags, positionals)
}

/// The `servery serve` entry of the first `sh` block under "## Using it":
/// its first line and the flags it shows.
fn readme_synopsis() -> (String, Vec<Flag>) {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## Using it\n")
        .nth(1)
        .expect("README.md has a \"## Using it\" section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("an sh block under \"## Using it\"");
    let mut lines = block
        .lines()
        .skip_while(|l| !l.starts_with("servery serve "));
    let first = lines.next().expect("a `servery serve` line").to_owned();
    let entry: Vec<&str> = std::iter::once(first.as_str())
        .chain(lines.take_while(|l| !l.starts_with("servery ")))
        .collect();
    let flags = synopsis_flags(&entry);
    (first, flags)
}

/// The flags a synopsis shows, each with the word after it unless that is
/// another flag or a `|`: `[--bind ADDR]...`, `[--no-pin]`,
/// `[--tls-cert FILE --tls-key FILE | --tls-self-signed]`. A `#` starts a
/// comment.
fn synopsis_flags(lines: &[&str]) -> Vec<Flag> {
    let mut flags = Vec::new();
    let mut words = lines
        .iter()
        .map(|l| l.split(" #").next().unwrap_or(l))
        .flat_map(|l| l.split_whitespace())
        .map(|w| {
            w.trim_start_matches('[')
                .trim_end_matches("...")
                .trim_end_matches(']')
        })
        .filter(|w| !w.is_empty())
        .peekable();
    while let Some(w) = words.next() {
        if !w.starts_with("--") {
            continue;
        }
        let value = words
            .next_if(|v| !v.starts_with("--") && *v != "|")
            .map(str::to_owned);
        flags.push((w.to_owned(), value));
    }
    flags
}

/// What kind of value a placeholder stands for: its choices in order, with
/// the words of one kind made one (`SECONDS` is `DURATION`).
fn kind(placeholder: &Option<String>) -> String {
    let Some(p) = placeholder else {
        return "(a switch)".into();
    };
    let words: Vec<&str> = p
        .split('|')
        .map(|w| match w {
            "S" | "SECONDS" | "DURATION" => "a duration",
            "BYTES" | "SIZE" => "a size",
            w => w,
        })
        .collect();
    words.join("|")
}

fn shown(flag: &Flag) -> String {
    match &flag.1 {
        Some(v) => format!("{} {v}", flag.0),
        None => flag.0.clone(),
    }
}

#[test]
fn the_readme_synopsis_shows_every_flag_of_serve_help() {
    let (help, positionals) = help_flags();
    let (first, readme) = readme_synopsis();
    assert!(help.len() > 40, "too few flags read from --help: {help:?}");
    let find = |list: &[Flag], name: &str| list.iter().find(|(n, _)| n == name).cloned();
    let mut problems = Vec::new();
    for p in &positionals {
        if !first.contains(p.as_str()) {
            problems.push(format!("`{first}` does not show the argument {p}"));
        }
    }
    for flag in &help {
        match find(&readme, &flag.0) {
            None => problems.push(format!("missing: {} (add it)", shown(flag))),
            Some(mine) if kind(&mine.1) != kind(&flag.1) => problems.push(format!(
                "{}: the README shows {:?}, --help says {:?}",
                flag.0,
                mine.1.as_deref().unwrap_or("no value"),
                flag.1.as_deref().unwrap_or("no value"),
            )),
            Some(_) => {}
        }
    }
    for flag in &readme {
        if find(&help, &flag.0).is_none() {
            problems.push(format!(
                "extra: {} is not a flag of serve (remove it)",
                flag.0
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "README.md's synopsis (\"## Using it\") disagrees with `servery serve --help`:\n  {}",
        problems.join("\n  ")
    );
}

/// docs/http2.md's table of settings has a row for every HTTP/2 flag
/// `servery serve --help` lists (`--alpn`, `--h2c`, `--h2-*`): a new
/// HTTP/2 setting's doc is that row.
#[test]
fn the_http2_doc_has_a_row_for_every_http2_flag() {
    let doc = std::fs::read_to_string(repo().join("docs/http2.md")).expect("docs/http2.md");
    let (flags, _) = help_flags();
    let http2: Vec<&str> = flags
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|n| n.starts_with("--h2") || *n == "--alpn")
        .collect();
    assert!(http2.len() >= 7, "HTTP/2 flags in --help: {http2:?}");
    let missing: Vec<&&str> = http2
        .iter()
        .filter(|f| {
            !doc.lines()
                .any(|l| l.starts_with('|') && l.contains(&format!("`{f}")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/http2.md has no row for {missing:?}"
    );
}

#[test]
fn the_synopsis_is_read_as_flags_values_and_kinds() {
    let flags = synopsis_flags(&[
        "servery serve [ROOT] [--bind ADDR]... [--no-pin] [--workers N|auto]",
        "   [--tls-cert FILE --tls-key FILE | --tls-self-signed]  # a comment --not-a-flag",
    ]);
    let some = |n: &str, v: Option<&str>| (n.to_owned(), v.map(str::to_owned));
    assert_eq!(
        flags,
        vec![
            some("--bind", Some("ADDR")),
            some("--no-pin", None),
            some("--workers", Some("N|auto")),
            some("--tls-cert", Some("FILE")),
            some("--tls-key", Some("FILE")),
            some("--tls-self-signed", None),
        ]
    );
    let k = |v: &str| kind(&Some(v.to_owned()));
    assert_eq!(k("SECONDS"), k("DURATION"));
    assert_eq!(k("S"), k("DURATION"));
    assert_eq!(k("BYTES"), k("SIZE"));
    assert_ne!(k("N"), k("SIZE"));
    assert_ne!(kind(&None), k("N"));
    assert_ne!(k("reuseport|shared"), k("shared"));
}

// ---------------------------------------------------------------------------
// TOML blocks

/// A ` ```toml ` block: where it is, the words after `toml`, its text.
struct Block {
    file: PathBuf,
    line: usize,
    marker: Option<String>,
    text: String,
}

impl Block {
    fn place(&self) -> String {
        let file = self.file.strip_prefix(repo()).unwrap_or(&self.file);
        format!("{}:{}", file.display(), self.line)
    }
}

/// README.md and every Markdown file under docs/, in a stable order.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read docs/") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut files);
    files[1..].sort();
    files
}

/// Where [`toml_blocks`] is in a Markdown file.
enum Fence {
    Outside,
    Toml(Block),
    Other,
}

/// The ` ```toml ` blocks of `file`. As in CommonMark, a fence with an info
/// string opens a block and only a bare fence closes it.
fn toml_blocks(file: &Path) -> Vec<Block> {
    let markdown = std::fs::read_to_string(file).expect("a Markdown file");
    let mut blocks = Vec::new();
    let mut state = Fence::Outside;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        let closing = fence.is_some_and(|rest| rest.trim().is_empty());
        state = match (state, fence) {
            (Fence::Outside, None) => Fence::Outside,
            (Fence::Outside, Some(info)) => {
                let mut words = info.split_whitespace();
                match words.next() {
                    Some("toml") => Fence::Toml(Block {
                        file: file.to_owned(),
                        line: i + 1,
                        marker: words.next().map(str::to_owned),
                        text: String::new(),
                    }),
                    _ => Fence::Other,
                }
            }
            (Fence::Toml(b), _) if closing => {
                blocks.push(b);
                Fence::Outside
            }
            (Fence::Toml(mut b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
                Fence::Toml(b)
            }
            (Fence::Other, _) if closing => Fence::Outside,
            (Fence::Other, _) => Fence::Other,
        };
    }
    blocks
}

/// Runs `block` through check-config: `None` if it passes, else why not.
fn check(block: &Block, dir: &Path) -> Option<String> {
    let config = dir.join("block.toml");
    std::fs::write(&config, &block.text).expect("write the block");
    let table: Result<toml::Table, _> = block.text.parse();
    let root_given = table.as_ref().is_ok_and(|t| t.contains_key("root"));
    let empty_root = dir.join("root");
    std::fs::create_dir_all(&empty_root).expect("an empty root");
    let mut args = vec!["check-config".to_owned()];
    if !root_given {
        args.push(empty_root.display().to_string());
    }
    args.extend(["--config".to_owned(), config.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = servery(&args);
    let stderr = text(&out.stderr);
    match block.marker.as_deref() {
        None if out.status.success() => None,
        None => Some(format!(
            "check-config refused it ({}): {stderr}",
            out.status
        )),
        Some("production") => {
            let paths: Vec<String> = block
                .text
                .split("\"/")
                .skip(1)
                .filter_map(|s| s.split('"').next())
                .map(|p| format!("/{p}"))
                .collect();
            let names_one = paths.iter().any(|p| stderr.contains(p.as_str()));
            // A parse error quotes the line it is on, path and all.
            let read = !stderr.contains("parse error");
            if out.status.success() {
                Some("runs as it is: drop the `production` marker".into())
            } else if out.status.code() != Some(2) || !names_one || !read {
                Some(format!(
                    "a `production` block may be refused only for one of its paths \
                     {paths:?}; check-config said ({}): {stderr}",
                    out.status
                ))
            } else {
                None
            }
        }
        Some(other) => Some(format!("unknown marker `toml {other}`")),
    }
}

/// A ` ```toml cargo ` block: TOML whose `servery` dependency asks only for
/// features the crate has.
fn check_cargo(block: &Block) -> Option<String> {
    let table: toml::Table = match block.text.parse() {
        Ok(t) => t,
        Err(e) => return Some(format!("not TOML: {e}")),
    };
    let Some(dep) = table.get("servery") else {
        return Some("a `cargo` block must show the servery dependency".into());
    };
    let manifest: toml::Table = std::fs::read_to_string(repo().join("Cargo.toml"))
        .expect("Cargo.toml")
        .parse()
        .expect("Cargo.toml is TOML");
    let features = manifest["features"].as_table().expect("[features]");
    let asked = dep.get("features").and_then(|f| f.as_array());
    let unknown: Vec<_> = asked
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str())
        .filter(|f| !features.contains_key(*f))
        .collect();
    (!unknown.is_empty()).then(|| format!("servery has no feature {unknown:?}"))
}

#[test]
fn every_toml_block_in_the_docs_is_a_config_servery_accepts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let blocks: Vec<Block> = markdown_files()
        .iter()
        .flat_map(|f| toml_blocks(f))
        .collect();
    let mut failures = Vec::new();
    let mut runnable = Vec::new();
    for block in &blocks {
        let failed = match block.marker.as_deref() {
            Some("cargo") => check_cargo(block),
            marker => {
                if marker.is_none() {
                    runnable.push(block.place());
                }
                check(block, dir.path())
            }
        };
        if let Some(why) = failed {
            failures.push(format!("{}: {why}", block.place()));
        }
    }
    assert!(
        failures.is_empty(),
        "TOML blocks in the docs that servery does not accept as shown \
         (fix the block, or mark its fence as tests/docs.rs explains):\n{}",
        failures.join("\n")
    );
    // The examples an operator is pointed at are among the runnable ones.
    for doc in [
        "docs/operations.md",
        "docs/sites.md",
        "docs/static-files.md",
    ] {
        assert!(
            runnable.iter().any(|p| p.starts_with(doc)),
            "{doc} has no runnable TOML block; runnable: {runnable:?}"
        );
    }
}

#[test]
fn fences_are_read_with_their_markers_and_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let md = dir.path().join("x.md");
    std::fs::write(
        &md,
        "# x\n```toml\na = 1\n```\n\n```sh\n```toml not a fence opening here\n```\n\
         ```toml production\nroot = \"/srv\"\n```\n",
    )
    .expect("write");
    let blocks = toml_blocks(&md);
    let seen: Vec<_> = blocks
        .iter()
        .map(|b| (b.line, b.marker.clone(), b.text.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (2, None, "a = 1\n".to_owned()),
            (
                9,
                Some("production".to_owned()),
                "root = \"/srv\"\n".to_owned()
            ),
        ]
    );
}

// ---------------------------------------------------------------------------
// docs/tls.md

/// The commands of the first `sh` block under `heading` in `doc`, comments
/// cut, as words.
fn commands(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let markdown = std::fs::read_to_string(repo().join(doc)).expect(doc);
    let section = markdown
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has no {heading:?}"));
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap_or_else(|| panic!("no sh block under {heading:?} in {doc}"));
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or(l))
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|words| !words.is_empty())
        .collect()
}

/// A server this test started; killed when dropped, so a failed assertion
/// leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_tls_quick_start_serves_http2_with_a_self_signed_certificate() {
    const PORT: &str = "8443";
    let lines = commands("docs/tls.md", "## Quick start");
    let find = |program: &str| {
        lines
            .iter()
            .find(|w| w[0] == program)
            .unwrap_or_else(|| panic!("the quick start has no {program} line: {lines:?}"))
    };
    let serve: Vec<String> = find("servery")[1..]
        .iter()
        .map(|w| w.replace(&format!(":{PORT}"), ":0"))
        .collect();
    let mut server = Running(
        Command::new(env!("CARGO_BIN_EXE_servery"))
            .args(&serve)
            .current_dir(repo())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start servery"),
    );
    let mut ready = String::new();
    let stdout = server.0.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut ready)
        .expect("read the ready line");
    assert!(
        ready.contains(" tls sha256 ") && ready.contains("https speaks h2+http/1.1"),
        "servery {serve:?}: {ready:?}"
    );
    let port = ready
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("an https listener on 127.0.0.1");

    let curl: Vec<String> = find("curl")[1..]
        .iter()
        .map(|w| w.replace(&format!(":{PORT}/"), &format!(":{port}/")))
        .collect();
    if Command::new("curl").arg("--version").output().is_err() {
        common::skipped("curl not found: the quick start's curl line is not run");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let body = dir.path().join("body");
    let out = Command::new("curl")
        .args(&curl)
        .args(["-sS", "--max-time", "10", "-w", "%{http_version}", "-o"])
        .arg(&body)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {curl:?}: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "2", "curl {curl:?} did not get HTTP/2");
    let want = std::fs::read(repo().join("examples/site/hello.txt")).expect("hello.txt");
    assert!(
        std::fs::read(&body).expect("curl's body") == want,
        "curl {curl:?}: another body"
    );
}

/// Whether a `fn name` is defined in a Rust file under `dirs`.
fn defined(name: &str, dirs: &[&str]) -> bool {
    fn walk(dir: &Path, needle: &str) -> bool {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let path = e.path();
                if path.is_dir() {
                    walk(&path, needle)
                } else {
                    path.extension().is_some_and(|x| x == "rs")
                        && std::fs::read_to_string(&path).is_ok_and(|t| t.contains(needle))
                }
            })
    }
    // `name_` stands for every test it begins (`…_sighup_*` in the doc).
    let needle = match name.ends_with('_') {
        true => format!("fn {name}"),
        false => format!("fn {name}("),
    };
    dirs.iter().any(|d| walk(&repo().join(d), &needle))
}

/// The names in `` `code` `` spans of `markdown` that read as test names:
/// five or more snake_case words, not a metric (`servery_…`); `uring::` and
/// such module prefixes dropped, and `name_*` kept as `name_`.
fn cited_tests(markdown: &str) -> Vec<String> {
    let mut names: Vec<String> = markdown
        .split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| w.split('_').count() >= 5 && !w.starts_with("servery_"))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_lowercase()))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_test_docs_tls_cites_exists() {
    let doc = std::fs::read_to_string(repo().join("docs/tls.md")).expect("docs/tls.md");
    let cited = cited_tests(&doc);
    assert!(
        cited.len() > 20,
        "too few tests found in docs/tls.md: {cited:?}"
    );
    let missing: Vec<_> = cited
        .iter()
        .filter(|name| !defined(name, &["tests", "src"]))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/tls.md cites tests that do not exist (renamed? removed?): {missing:?}"
    );
}

#[test]
fn test_names_are_told_from_metrics_and_keys() {
    let md = "| a | `uring::` / `epoll::a_silent_client_is_closed` | `servery_tls_failed_total` \
              `tls_handshake_timeout` `h2_max_concurrent_streams` `a_b_c_d_e_*`";
    assert_eq!(
        cited_tests(md),
        vec!["a_b_c_d_e_", "a_silent_client_is_closed"]
    );
}

//! The source's structure as a test: no import cycle inside the folders
//! `scripts/check-cycles.py` holds to (issue 25), and the checker itself
//! finds a cycle when there is one, so a green run means something.
//!
//! The checker is Python (it reads `use` lines and paths, no build); where
//! `python3` is missing the tests say `SKIPPED:` on the terminal.

use std::path::Path;
use std::process::{Command, Output};

mod common;

/// `python3 scripts/check-cycles.py ARGS`, or `None` without python3.
fn check_cycles(args: &[&str]) -> Option<Output> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-cycles.py");
    match Command::new("python3").arg(script).args(args).output() {
        Ok(out) => Some(out),
        Err(e) => {
            common::skipped(&format!("python3 unavailable: {e}"));
            None
        }
    }
}

#[test]
fn the_checked_folders_have_no_import_cycle() {
    let Some(out) = check_cycles(&[]) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "no import cycle in top, http, supervisor, supervisor::machine, worker, \
             worker::conn, worker::conn::h1, worker::conn::h2, worker::conn::h3, \
             worker::conn::transport, worker::quic, quic"
        ),
        "{text}"
    );
}

#[test]
fn a_cycle_is_found_and_named_with_the_lines_that_make_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "use crate::b::{X, self};\npub struct Y;\n",
    )
    .unwrap();
    // A path in code counts as much as a `use`; a test module's does not.
    std::fs::write(
        src.join("b.rs"),
        "pub struct X(pub crate::a::Y);\n#[cfg(test)]\nmod tests {\n    use crate::c::Z;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "use crate::a::Y;\npub struct Z;\n").unwrap();
    let Some(out) = check_cycles(&["--src", src.to_str().unwrap(), "--scope", "top"]) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cycle in top: a, b\n"), "{text}");
    assert!(
        text.contains("a -> b: src/a/mod.rs names crate::b::X"),
        "{text}"
    );
    assert!(
        text.contains("b -> a: src/b.rs names crate::a::Y"),
        "{text}"
    );
    assert!(
        !text.contains("c ->") && !text.contains("-> c"),
        "c -> a alone is no cycle: {text}"
    );
}

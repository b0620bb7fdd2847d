//! One fact about this machine for the test suite: whether h2spec, the
//! HTTP/2 conformance tool `tests/h2spec.rs` runs, is here. Where it is not,
//! the build sets `--cfg no_h2spec` and those tests are `#[ignore]`d with a
//! reason, so `cargo test` prints `ignored, no h2spec …` instead of a pass
//! that ran nothing.
//!
//! Why a build script: libtest marks a test ignored only by an attribute,
//! fixed when the test compiles; h2spec's place is fixed (`$H2SPEC`, else
//! `../shared/tools/h2spec` from the repository root), so it can be looked
//! up then. pebble, which the ACME tests install when they run, cannot, and
//! says `SKIPPED:` at run time instead (`tests/common/pebble.rs`).
//!
//! What it costs: the script is std only and runs once on a fresh clone;
//! after that, only when what it looked at changes (`H2SPEC`, the binary,
//! or the directory where the binary would appear). cargo treats a watched
//! path that does not exist as changed on every build, and a change reruns
//! the script and rebuilds the whole package, so only paths that exist are
//! watched, and never a directory holding the repository (its `target/`
//! changes on every build). A clone with no `../shared` therefore does not
//! notice an h2spec put there later until `build.rs` changes or `H2SPEC` is
//! set; the ignore reason says so.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=H2SPEC");
    println!("cargo::rustc-check-cfg=cfg(no_h2spec)");
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let h2spec = match std::env::var_os("H2SPEC") {
        Some(p) if !p.is_empty() => root.join(p),
        _ => root.join("../shared/tools/h2spec"),
    };
    if let Some(watch) = watched(&h2spec, &root) {
        println!("cargo::rerun-if-changed={}", watch.display());
    }
    if !h2spec.is_file() {
        println!("cargo::rustc-cfg=no_h2spec");
    }
}

/// What to watch for `tool` appearing, changing or going: the file itself,
/// else its nearest directory that exists, unless that one holds `root`.
/// The path as the tests spell it, not where its links lead: a link
/// removed is a change.
fn watched(tool: &Path, root: &Path) -> Option<PathBuf> {
    let path = tool.ancestors().find(|p| p.exists())?;
    let root = root.canonicalize().ok()?;
    (!root.starts_with(path.canonicalize().ok()?)).then(|| path.to_owned())
}

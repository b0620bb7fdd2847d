//! The programs the servers run as: the ones this checkout builds (servery and its examples)
//! and the peers found installed (nginx, h2o, Caddy).
//!
//! Owns: which cargo target each built program is, its `--*-bin` flag, where cargo leaves it,
//! and whether this checkout can build it at all (the servery side of `app-json` and
//! `app-post-4k`, `examples/axum.rs` and `examples/upload.rs`, may not be written yet).
//! Does not own: which program a server runs for a scenario (`Server::program`) or starting it.
//!
//! Flow:
//! 1. The matrix asks [`resolve`] for the programs its lineup needs.
//! 2. A program given with its flag is taken as is. Otherwise, if its source is in the
//!    checkout, it is built in the measured profile, [`PROFILE`] (fat LTO, one codegen unit;
//!    `cargo build --release` is the quicker first-run build): `cargo build --profile
//!    release-lto --bin servery` on its own, so the measured servery is the binary that
//!    command makes alone (building it beside the examples would unify the examples'
//!    dev-dependency features into it), then every needed example in one `cargo build
//!    --profile release-lto --example ...`. Another profile's directory is never touched, so
//!    a matrix run leaves `cargo build --release` with nothing to do.
//! 3. Every given or built path must be a file. A program neither given nor in the checkout
//!    is returned as unavailable, and the matrix leaves out the servers that need it.
//! 4. nginx, h2o and caddy are looked up on `PATH` (and `/usr/sbin`), and so are the h2
//!    scenarios' tools: h2load (the load), curl (readiness and the answer's bytes over
//!    HTTP/2) and openssl (the peers' certificate).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::{Error, Options};

/// A program this checkout builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Program {
    /// `src/main.rs`: the static file server.
    Servery,
    /// `examples/hello.rs`: a fixed 1 KiB handler (`app-1k`).
    Hello,
    /// `examples/axum.rs`: the Router of `examples/axum/routes.rs` on servery (`app-json`).
    Axum,
    /// `examples/upload.rs`: streams a POSTed body through SHA-256 (`app-post-4k`).
    Upload,
    /// `examples/axum_tokio.rs`: the same Router on `axum::serve` and tokio (`axum-tokio`).
    AxumTokio,
}

impl Program {
    pub const ALL: [Program; 5] = [
        Program::Servery,
        Program::Hello,
        Program::Axum,
        Program::Upload,
        Program::AxumTokio,
    ];

    /// Its cargo target name (`--bin servery`, else `--example NAME`).
    pub fn target(self) -> &'static str {
        match self {
            Program::Servery => "servery",
            Program::Hello => "hello",
            Program::Axum => "axum",
            Program::Upload => "upload",
            Program::AxumTokio => "axum_tokio",
        }
    }

    /// The `servery-load matrix` flag that gives it prebuilt.
    pub fn flag(self) -> &'static str {
        match self {
            Program::Servery => "--servery-bin",
            Program::Hello => "--hello-bin",
            Program::Axum => "--axum-bin",
            Program::Upload => "--upload-bin",
            Program::AxumTokio => "--axum-tokio-bin",
        }
    }

    fn is_example(self) -> bool {
        self != Program::Servery
    }

    /// Whether `repo` has its source (cargo's layouts: `examples/NAME.rs` or
    /// `examples/NAME/main.rs`).
    fn in_checkout(self, repo: &Path) -> bool {
        if self.is_example() {
            let examples = repo.join("examples");
            examples.join(format!("{}.rs", self.target())).is_file()
                || examples.join(self.target()).join("main.rs").is_file()
        } else {
            repo.join("src/main.rs").is_file()
        }
    }

    /// Where `cargo build --profile release-lto` leaves it under the target directory.
    fn artifact(self, target_dir: &Path) -> PathBuf {
        if self.is_example() {
            target_dir
                .join(PROFILE)
                .join("examples")
                .join(self.target())
        } else {
            target_dir.join(PROFILE).join(self.target())
        }
    }
}

/// The programs the servers run as, absolute; `None` for one the run does not use (or, for a
/// peer, one that is not installed).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Programs {
    pub servery: Option<PathBuf>,
    /// servery's `examples/hello`, the `app-1k` server.
    pub hello: Option<PathBuf>,
    /// servery's `examples/axum`, the `app-json` server.
    pub axum: Option<PathBuf>,
    /// servery's `examples/upload`, the `app-post-4k` server.
    pub upload: Option<PathBuf>,
    /// `examples/axum_tokio`, the `axum-tokio` server.
    pub axum_tokio: Option<PathBuf>,
    pub nginx: Option<PathBuf>,
    pub h2o: Option<PathBuf>,
    /// Caddy 2 (Debian package caddy; bookworm has 2.6).
    pub caddy: Option<PathBuf>,
    /// nghttp2's HTTP/2 load generator (Debian nghttp2-client), for the h2 scenarios.
    pub h2load: Option<PathBuf>,
    /// curl, which checks readiness and one answer over HTTP/2 in the h2 scenarios.
    pub curl: Option<PathBuf>,
    /// openssl, which makes the peers' certificate for the h2 scenarios over TLS.
    pub openssl: Option<PathBuf>,
    /// `scripts/lib`, where the peers' config writers live.
    pub scripts_lib: PathBuf,
}

impl Programs {
    pub fn get(&self, program: Program) -> Option<&Path> {
        match program {
            Program::Servery => self.servery.as_deref(),
            Program::Hello => self.hello.as_deref(),
            Program::Axum => self.axum.as_deref(),
            Program::Upload => self.upload.as_deref(),
            Program::AxumTokio => self.axum_tokio.as_deref(),
        }
    }

    fn set(&mut self, program: Program, path: PathBuf) {
        let slot = match program {
            Program::Servery => &mut self.servery,
            Program::Hello => &mut self.hello,
            Program::Axum => &mut self.axum,
            Program::Upload => &mut self.upload,
            Program::AxumTokio => &mut self.axum_tokio,
        };
        *slot = Some(path);
    }
}

/// The path `options` gives for `program`, if any.
fn given(options: &Options, program: Program) -> Option<&PathBuf> {
    match program {
        Program::Servery => options.servery_bin.as_ref(),
        Program::Hello => options.hello_bin.as_ref(),
        Program::Axum => options.axum_bin.as_ref(),
        Program::Upload => options.upload_bin.as_ref(),
        Program::AxumTokio => options.axum_tokio_bin.as_ref(),
    }
}

/// Gives, builds or finds every program in `needed` (see the module docs); also returns the
/// needed ones this checkout cannot build and no flag gave.
pub fn resolve(options: &Options, needed: &[Program]) -> Result<(Programs, Vec<Program>), Error> {
    let mut programs = Programs {
        nginx: which("nginx"),
        h2o: which("h2o"),
        caddy: which("caddy"),
        h2load: which("h2load"),
        curl: which("curl"),
        openssl: which("openssl"),
        scripts_lib: absolute(options.repo.join("scripts/lib")),
        ..Programs::default()
    };
    let mut unavailable = Vec::new();
    let mut build = Vec::new();
    for &program in Program::ALL.iter().filter(|p| needed.contains(p)) {
        match given(options, program) {
            Some(path) => programs.set(program, path.clone()),
            None if program.in_checkout(&options.repo) => build.push(program),
            None => unavailable.push(program),
        }
    }
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => options.repo.join(dir),
        None => options.repo.join("target"),
    };
    let (bins, examples): (Vec<Program>, Vec<Program>) =
        build.iter().partition(|p| !p.is_example());
    for group in [bins, examples] {
        if group.is_empty() {
            continue;
        }
        cargo_build(&options.repo, &group)?;
        for program in group {
            programs.set(program, program.artifact(&target_dir));
        }
    }
    for &program in &Program::ALL {
        let Some(path) = programs.get(program).map(Path::to_path_buf) else {
            continue;
        };
        if !path.is_file() {
            return Err(Error::Binary {
                path,
                flag: program.flag(),
            });
        }
        programs.set(program, absolute(path));
    }
    Ok((programs, unavailable))
}

/// The cargo profile the matrix builds and measures (Cargo.toml: fat LTO, one codegen unit).
pub const PROFILE: &str = "release-lto";

/// The `cargo build --profile release-lto` arguments that build `group`.
pub fn cargo_args(group: &[Program]) -> Vec<&'static str> {
    let mut args = vec!["build", "--profile", PROFILE];
    for program in group {
        args.push(if program.is_example() {
            "--example"
        } else {
            "--bin"
        });
        args.push(program.target());
    }
    args
}

/// Whether `name` is one of the variables `cargo run` sets for the program
/// it runs (the package's identity, not the user's configuration). A build
/// that inherits them differs from a plain `cargo build`: ring's build
/// script reruns on `CARGO_MANIFEST_DIR`, so the matrix rebuilt servery and
/// the next plain build rebuilt it again. `CARGO_HOME`, `CARGO_TARGET_DIR`,
/// `CARGO_BUILD_*` and the like are the user's and stay.
pub fn set_by_cargo_run(name: &str) -> bool {
    matches!(
        name,
        "CARGO"
            | "CARGO_MANIFEST_DIR"
            | "CARGO_MANIFEST_PATH"
            | "CARGO_CRATE_NAME"
            | "CARGO_BIN_NAME"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_RUSTC_CURRENT_DIR"
            | "CARGO_TARGET_TMPDIR"
    ) || name.starts_with("CARGO_PKG_")
}

fn cargo_build(repo: &Path, group: &[Program]) -> Result<(), Error> {
    let args = cargo_args(group);
    let mut cargo = Command::new("cargo");
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_run) {
            cargo.env_remove(&name);
        }
    }
    let status = cargo
        .args(&args)
        .current_dir(repo)
        .status()
        .map_err(|source| Error::Cargo {
            repo: repo.to_path_buf(),
            source,
        })?;
    if !status.success() {
        return Err(Error::Build {
            command: format!("cargo {}", args.join(" ")),
            status,
        });
    }
    Ok(())
}

fn absolute(path: PathBuf) -> PathBuf {
    fs::canonicalize(&path).unwrap_or(path)
}

/// `name` on `PATH`, or in `/usr/sbin` (where nginx lives and a non-root `PATH` may not look).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cargo_run_sets_is_not_passed_to_the_build_and_the_users_settings_are() {
        for name in [
            "CARGO",
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_BIN_NAME",
        ] {
            assert!(set_by_cargo_run(name), "{name}");
        }
        for name in ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS", "PATH"] {
            assert!(!set_by_cargo_run(name), "{name}");
        }
    }

    #[test]
    fn servery_builds_alone_and_examples_together() {
        assert_eq!(
            cargo_args(&[Program::Servery]),
            ["build", "--profile", "release-lto", "--bin", "servery"]
        );
        assert_eq!(
            cargo_args(&[Program::Hello, Program::AxumTokio]),
            [
                "build",
                "--profile",
                "release-lto",
                "--example",
                "hello",
                "--example",
                "axum_tokio"
            ]
        );
    }

    #[test]
    fn artifacts_are_where_cargo_puts_them() {
        let t = Path::new("/t");
        assert_eq!(
            Program::Servery.artifact(t),
            Path::new("/t/release-lto/servery")
        );
        assert_eq!(
            Program::AxumTokio.artifact(t),
            Path::new("/t/release-lto/examples/axum_tokio")
        );
        assert_eq!(
            Program::Upload.artifact(t),
            Path::new("/t/release-lto/examples/upload")
        );
    }

    #[test]
    fn this_checkout_has_hello_and_axum_tokio() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for program in [Program::Servery, Program::Hello, Program::AxumTokio] {
            assert!(program.in_checkout(&repo), "{program:?}");
        }
        assert!(!Program::Upload.in_checkout(Path::new("/nonexistent")));
    }

    #[test]
    fn every_program_has_its_own_flag() {
        let flags: std::collections::HashSet<_> = Program::ALL.iter().map(|p| p.flag()).collect();
        assert_eq!(flags.len(), Program::ALL.len());
        let mut programs = Programs::default();
        for p in Program::ALL {
            assert!(programs.get(p).is_none());
            programs.set(p, PathBuf::from(p.target()));
            assert_eq!(programs.get(p), Some(Path::new(p.target())));
        }
    }
}

//! [`Builder`]: what a [`TestServer`] is started with, and starting it.
//!
//! Owns the command line (`serve ROOT --bind 127.0.0.1:0 --no-pin
//! --workers 1` unless told otherwise, then the options asked for, then
//! extra arguments), the temp docroot and the files written into it, the environment (the
//! [`Tag`], fault injection), an inherited systemd socket, and the process
//! group. Does not own the running process (`server`).
//!
//! Flow of [`Builder::spawn`]:
//! 1. Make the docroot (a fresh temp dir unless given) and write its files.
//! 2. Build the command; with a systemd socket, `sh` puts `LISTEN_PID` (its
//!    own pid, kept by `exec`) in the environment and the socket at fd 3.
//! 3. Spawn the child as the leader of a new process group, with a fresh
//!    [`Tag`] in its environment, and hand it to [`TestServer`], which reads
//!    its output. [`Builder::start`] and [`Builder::try_start`] then wait
//!    for the ready line.

use std::ffi::{OsStr, OsString};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::process::{Tag, TAG_VAR};
use super::server::{StartFailure, TestServer};
use super::{BIN, FAULT, READY_TIMEOUT};

/// Which plain listeners the command line asks for.
#[derive(Debug, Default)]
enum Bind {
    /// `--bind 127.0.0.1:0`, unless a systemd socket is inherited.
    #[default]
    Default,
    /// No `--bind` (a TLS-only server, or the config file's `bind`).
    None,
    /// `--bind` each of these.
    Addrs(Vec<String>),
}

/// Where a TLS listener's identity comes from.
#[derive(Debug)]
enum Identity {
    /// `--tls-self-signed`.
    SelfSigned,
    /// `--tls-cert CERT --tls-key KEY`.
    Files { cert: PathBuf, key: PathBuf },
}

/// Options for a [`TestServer`]: every server gets `serve ROOT --bind
/// 127.0.0.1:0 --no-pin` over a fresh empty temp docroot unless told
/// otherwise, a [`Tag`] in its environment, and its own process group.
#[derive(Debug, Default)]
pub struct Builder {
    program: Option<PathBuf>,
    root: Option<PathBuf>,
    files: Vec<(PathBuf, Vec<u8>)>,
    bind: Bind,
    tls_bind: Vec<String>,
    identity: Option<Identity>,
    admin: bool,
    pinned: bool,
    auto_workers: bool,
    driver: Option<String>,
    isolation: Option<String>,
    child_watch: Option<String>,
    systemd_socket: Option<TcpListener>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Builder {
    /// Run `program` instead of the binary under test (a copy of it, or a
    /// script that execs it).
    pub fn program(mut self, program: impl AsRef<Path>) -> Self {
        self.program = Some(program.as_ref().to_owned());
        self
    }

    /// Serve `dir` instead of a fresh empty temp directory.
    pub fn root(mut self, dir: impl AsRef<Path>) -> Self {
        self.root = Some(dir.as_ref().to_owned());
        self
    }

    /// Write `contents` to `rel` (parents created) under the docroot before
    /// the server starts.
    pub fn file(mut self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> Self {
        self.files
            .push((rel.as_ref().to_owned(), contents.as_ref().to_vec()));
        self
    }

    /// Listen on `addr` (e.g. a [`free_port`](super::free_port)) instead of
    /// `127.0.0.1:0`; repeat for several listeners.
    pub fn bind(mut self, addr: impl Into<String>) -> Self {
        match &mut self.bind {
            Bind::Addrs(v) => v.push(addr.into()),
            b => *b = Bind::Addrs(vec![addr.into()]),
        }
        self
    }

    /// No `--bind` at all: a TLS-only server, or one whose listeners come
    /// from its config file.
    pub fn no_bind(mut self) -> Self {
        self.bind = Bind::None;
        self
    }

    /// A TLS listener on `addr` (`--tls-bind`); repeat for several. Without
    /// one, a TLS identity gets `--tls-bind 127.0.0.1:0`.
    pub fn tls_bind(mut self, addr: impl Into<String>) -> Self {
        self.tls_bind.push(addr.into());
        self
    }

    /// TLS with the server's self-signed identity (`--tls-self-signed`); the
    /// ready line's fingerprint is [`TestServer::fingerprint`].
    pub fn tls_self_signed(mut self) -> Self {
        self.identity = Some(Identity::SelfSigned);
        self
    }

    /// TLS with the certificate chain and key in these PEM files.
    pub fn tls_files(mut self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        self.identity = Some(Identity::Files {
            cert: cert.as_ref().to_owned(),
            key: key.as_ref().to_owned(),
        });
        self
    }

    /// An admin listener on `127.0.0.1:0` (`/healthz`, `/readyz`,
    /// `/metrics`): [`TestServer::admin`].
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Leave out `--no-pin` (the test passes its own `--cpus`/`--workers`).
    pub fn pinned(mut self) -> Self {
        self.pinned = true;
        self
    }

    /// Leave out `--workers 1`: the server's default, one worker per
    /// physical core.
    pub fn default_workers(mut self) -> Self {
        self.auto_workers = true;
        self
    }

    /// `--driver DRIVER`; the ready line must name it (the case really runs
    /// on the driver it is named after).
    pub fn driver(mut self, driver: &str) -> Self {
        self.driver = Some(driver.to_owned());
        self
    }

    /// `--isolation MODE` (`thread` or `process`); in process isolation the
    /// ready line must say `processes`.
    pub fn isolation(mut self, mode: &str) -> Self {
        self.isolation = Some(mode.to_owned());
        self
    }

    /// `--child-watch WATCH` (`pidfd` or `sigchld`).
    pub fn child_watch(mut self, watch: &str) -> Self {
        self.child_watch = Some(watch.to_owned());
        self
    }

    /// Start as systemd would with one socket: `listener` as fd 3,
    /// `LISTEN_FDS=1`, `LISTEN_PID` the server's pid, and no default
    /// `--bind`. The harness closes its copy once the child is spawned.
    pub fn systemd_socket(mut self, listener: TcpListener) -> Self {
        self.systemd_socket = Some(listener);
        self
    }

    /// Extra command-line arguments, after the ones the harness writes.
    pub fn args<S: AsRef<OsStr>>(mut self, args: &[S]) -> Self {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// An environment variable for the child.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A test-only fault (`SERVERY_TEST_FAULT`, `src/worker/fault.rs`).
    pub fn fault(self, spec: &str) -> Self {
        self.env(FAULT, spec)
    }

    /// Start and wait for the ready line; panics (with the child's stderr)
    /// if it does not come within [`READY_TIMEOUT`].
    pub fn start(self) -> TestServer {
        match self.try_start() {
            Ok(s) => s,
            Err(f) => panic!(
                "servery did not become ready (exit: {:?})\nstdout:\n{}\nstderr:\n{}",
                f.status, f.stdout, f.stderr
            ),
        }
    }

    /// Start and wait for the ready line, or report how the start failed.
    pub fn try_start(self) -> Result<TestServer, StartFailure> {
        let mut server = self.spawn();
        match server.wait_ready(READY_TIMEOUT) {
            Some(_) => Ok(server),
            None => Err(server.start_failure()),
        }
    }

    /// Start without waiting for anything: for tests that watch the start
    /// (its barrier, its failure) or signal it early. The addresses are
    /// known once [`TestServer::wait_ready`] has seen the ready line.
    pub fn spawn(self) -> TestServer {
        let (own_root, root) = match &self.root {
            Some(r) => (None, r.clone()),
            None => {
                let dir = tempfile::tempdir().expect("create temp docroot");
                let path = dir.path().to_owned();
                (Some(dir), path)
            }
        };
        for (rel, contents) in &self.files {
            let path = root.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("create docroot directories");
            }
            std::fs::write(&path, contents)
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        let tag = Tag::new();
        let mut cmd = self.command(&root, &tag);
        let child = cmd.spawn().expect("spawn servery");
        // The child has its copy of an inherited socket now.
        drop(self.systemd_socket);
        let mut expect = Vec::new();
        if let Some(d) = &self.driver {
            let shown = if d == "uring" { "io_uring" } else { d.as_str() };
            expect.push(format!(", {shown}, "));
        }
        if self.isolation.as_deref() == Some("process") {
            expect.push("processes".to_owned());
        }
        TestServer::launch(child, root, own_root, tag, expect)
    }

    /// Whether the test chose a worker count: `--workers`, or a `workers`
    /// key in the file given with `--config`.
    fn says_workers(&self) -> bool {
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            if arg == "--workers" {
                return true;
            }
            if arg == "--config" {
                let text = args
                    .next()
                    .and_then(|path| std::fs::read_to_string(path).ok())
                    .unwrap_or_default();
                let file: toml::Table = text.parse().unwrap_or_default();
                if file.contains_key("workers") {
                    return true;
                }
            }
        }
        false
    }

    /// The command line and environment.
    fn command(&self, root: &Path, tag: &Tag) -> Command {
        let program = self.program.as_deref().unwrap_or(Path::new(BIN));
        let mut cmd = match &self.systemd_socket {
            None => Command::new(program),
            Some(listener) => {
                // `$$` is the shell's pid, which `exec` keeps for servery.
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@""#)
                    .arg(program);
                inherit_as_fd3(&mut c, listener);
                c
            }
        };
        cmd.arg("serve").arg(root);
        let binds: &[String] = match &self.bind {
            Bind::Default if self.systemd_socket.is_none() => &["127.0.0.1:0".to_owned()],
            Bind::Default | Bind::None => &[],
            Bind::Addrs(v) => v,
        };
        for b in binds {
            cmd.arg("--bind").arg(b);
        }
        if !self.pinned {
            cmd.arg("--no-pin");
        }
        // One worker unless the test says how many (a flag, or its config
        // file's `workers`): the server's default is one per physical core,
        // and the suite's counts, orders and timings must not depend on the
        // machine's.
        if !self.auto_workers && !self.says_workers() {
            cmd.args(["--workers", "1"]);
        }
        for (flag, value) in [
            ("--driver", &self.driver),
            ("--isolation", &self.isolation),
            ("--child-watch", &self.child_watch),
        ] {
            if let Some(v) = value {
                cmd.arg(flag).arg(v);
            }
        }
        if self.admin {
            cmd.args(["--admin", "127.0.0.1:0"]);
        }
        if let Some(identity) = &self.identity {
            if self.tls_bind.is_empty() {
                cmd.args(["--tls-bind", "127.0.0.1:0"]);
            }
            match identity {
                Identity::SelfSigned => {
                    cmd.arg("--tls-self-signed");
                }
                Identity::Files { cert, key } => {
                    cmd.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
                }
            }
        }
        for b in &self.tls_bind {
            cmd.arg("--tls-bind").arg(b);
        }
        cmd.args(&self.args)
            .env(TAG_VAR, tag.name())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        cmd
    }
}

/// Make `listener` the child's fd 3, inheritable.
#[allow(unsafe_code)]
fn inherit_as_fd3(cmd: &mut Command, listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    let fd = listener.as_raw_fd();
    // SAFETY: between fork and exec only dup2/fcntl run, which are
    // async-signal-safe; the builder keeps `listener` open until the child
    // is spawned.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps FD_CLOEXEC: clear it instead.
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

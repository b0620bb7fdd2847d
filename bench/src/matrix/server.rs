//! The servers under test: how each is configured and started for a point, how the matrix
//! knows it is ready, and how it is stopped.
//!
//! Every server is started through `taskset -c SERVER_CPUS`, so nothing of it (servery's
//! supervisor, nginx's master, h2o's threads, Caddy's Go runtime, axum-tokio's one thread)
//! runs on the client's CPUs; servery and nginx additionally pin worker `i` to the `i`-th CPU.
//! servery runs as itself for the static scenarios and as one of its examples for the app
//! scenarios, all with servery's command line. The peers' configs come from
//! `scripts/lib/nginx.sh`, `scripts/lib/h2o.sh` and `scripts/lib/caddy.sh`, the writers
//! `scripts/bench-quick.sh` and `scripts/install-peers.sh --configs` use, so there is one
//! definition of "the peer's benchmark config". Caddy also takes its environment from its
//! writer (`caddy.env`: `GOMAXPROCS` = the worker count, its home and XDG directories in the
//! prefix), since a Go program has no per-thread affinity to configure.
//!
//! In the h2 scenarios a server listens with TLS (servery: `--tls-bind --tls-self-signed --h3
//! off`; the peers: the run's certificate, `listen ... ssl http2`, h2o's `ssl:` and Caddy's
//! `tls`, HTTP/3 left off, so that no one opens a UDP socket or sends `Alt-Svc`) or, with
//! `--h2c`, in the clear, where all of them take HTTP/2 by prior knowledge (Caddy with
//! `protocols h1 h2c`) ([`Wire`]). In the h3 scenarios servery and Caddy listen the same way
//! over TLS with HTTP/3 on: QUIC on the same port number over UDP (servery's `--h3 on`,
//! Caddy's `protocols h1 h2 h3`).

use std::fs::{self, File};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::certificate::Certificate;
use super::programs::{Program, Programs};
use super::scenario::Scenario;
use crate::plan::CpuSet;
use crate::sys::process::{signal, Signal};

/// Longest a server may take from spawn to its first valid response.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a server may take to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often readiness is polled: fine enough for millisecond start times.
const POLL: Duration = Duration::from_millis(1);

/// A server configuration under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// servery, workers as threads of one process (`--isolation thread`, the default).
    ServeryThread,
    /// servery, workers as child processes of a supervisor (`--isolation process`).
    ServeryProcess,
    /// nginx: a master and one worker process per requested core.
    Nginx,
    /// h2o: one process with one event-loop thread per requested core.
    H2o,
    /// Caddy: one Go process with `GOMAXPROCS` = the requested cores, pinned as a whole.
    Caddy,
    /// The axum Router of `examples/axum/routes.rs` on `axum::serve` and a tokio
    /// current-thread runtime (`examples/axum_tokio.rs`): one thread, so 1-worker points only.
    AxumTokio,
}

/// What a server speaks on its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire<'a> {
    /// HTTP/1.1 in the clear: every HTTP/1.1 scenario.
    Http1,
    /// TLS, HTTP/2 by ALPN. The peers present this certificate (none: they cannot take
    /// part); servery makes its own (`--tls-self-signed`).
    Tls(Option<&'a Certificate>),
    /// HTTP/2 by prior knowledge in the clear (`--h2c`).
    H2c,
    /// [`Wire::Tls`], and HTTP/3 over QUIC on the same port number over UDP: every h3
    /// scenario.
    H3(Option<&'a Certificate>),
}

impl Wire<'_> {
    /// The PROTOCOL argument of `write_nginx_conf`, `write_h2o_conf` and `write_caddy_conf`,
    /// and the certificate and key files after it (`h3`, TLS with HTTP/3 on the same port,
    /// only `write_caddy_conf` takes: no other peer serves an h3 scenario).
    fn config_args(self, server: &'static str) -> Result<Vec<String>, Error> {
        let (protocol, certificate) = match self {
            Wire::Http1 => return Ok(vec!["http1".into()]),
            Wire::H2c => return Ok(vec!["h2c".into()]),
            Wire::Tls(certificate) => ("h2", certificate),
            Wire::H3(certificate) => ("h3", certificate),
        };
        let c = certificate.ok_or(Error::NoCertificate { server })?;
        Ok(vec![
            protocol.into(),
            c.cert.display().to_string(),
            c.key.display().to_string(),
        ])
    }
}

/// Where and how a server listens for one trial (always on 127.0.0.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener<'a> {
    pub port: u16,
    pub wire: Wire<'a>,
}

/// A command line ready to spawn, the variables it adds to the environment, and the config
/// file it reads, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub config: Option<PathBuf>,
}

/// Why a server could not be set up or did not become ready. Kept as text in the trial.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{server} is not installed (run scripts/install-peers.sh)")]
    Missing { server: &'static str },
    #[error("{server} runs `{target}`, which was neither built nor given (pass {flag})")]
    NotBuilt {
        server: &'static str,
        target: &'static str,
        flag: &'static str,
    },
    #[error("{server} has no certificate to serve TLS with (is openssl installed?)")]
    NoCertificate { server: &'static str },
    #[error("{server} does not serve {scenario}")]
    NotServed {
        server: &'static str,
        scenario: &'static str,
    },
    #[error("cannot run bash to write the {server} config: {source}")]
    ConfigSpawn {
        server: &'static str,
        source: io::Error,
    },
    #[error("writing the {server} config failed ({status}): {stderr}")]
    Config {
        server: &'static str,
        status: ExitStatus,
        stderr: String,
    },
    #[error("cannot read {path:?}, the environment the {server} config writer made: {source}")]
    Env {
        server: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cannot start {program:?} under taskset: {source}")]
    Spawn { program: PathBuf, source: io::Error },
    #[error("exited ({status}) before answering; log: {log}")]
    Exited { status: ExitStatus, log: String },
    #[error("no valid answer within {timeout:?} (last: {last}); log: {log}")]
    NotReady {
        timeout: Duration,
        last: String,
        log: String,
    },
}

/// Spawn-relative times of a server start, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ready {
    /// Spawn until the port first accepted a TCP connection.
    pub start_ms: f64,
    /// Spawn until the first response with the expected status.
    pub ready_ms: f64,
}

/// How a server ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// It ignored SIGTERM for [`STOP_GRACE`] and was killed (with its whole tree).
    pub killed: bool,
}

impl Server {
    pub const ALL: [Server; 6] = [
        Server::ServeryThread,
        Server::ServeryProcess,
        Server::Nginx,
        Server::H2o,
        Server::Caddy,
        Server::AxumTokio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Server::ServeryThread => "servery-thread",
            Server::ServeryProcess => "servery-process",
            Server::Nginx => "nginx",
            Server::H2o => "h2o",
            Server::Caddy => "caddy",
            Server::AxumTokio => "axum-tokio",
        }
    }

    /// How tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Server::ServeryThread => "servery (thread)",
            Server::ServeryProcess => "servery (process)",
            Server::Nginx => "nginx",
            Server::H2o => "h2o",
            Server::Caddy => "caddy",
            Server::AxumTokio => "axum (tokio)",
        }
    }

    pub fn parse(name: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn is_servery(self) -> bool {
        matches!(self, Server::ServeryThread | Server::ServeryProcess)
    }

    /// An installed static server (nginx, h2o, Caddy): configured by a script of
    /// `scripts/lib`, and over TLS presenting the run's certificate.
    pub fn is_peer(self) -> bool {
        matches!(self, Server::Nginx | Server::H2o | Server::Caddy)
    }

    /// The most workers it can run; `None` when it takes one per CPU it is given.
    pub fn max_workers(self) -> Option<usize> {
        match self {
            Server::AxumTokio => Some(1),
            _ => None,
        }
    }

    /// The program of this checkout it runs as for `scenario`; `None` for the installed peers
    /// and for a scenario it does not serve.
    pub fn program(self, scenario: Scenario) -> Option<Program> {
        if !scenario.servers().contains(&self) {
            return None;
        }
        match (self, scenario.base()) {
            (Server::ServeryThread | Server::ServeryProcess, Scenario::App1k) => {
                Some(Program::Hello)
            }
            (Server::ServeryThread | Server::ServeryProcess, Scenario::AppJson) => {
                Some(Program::Axum)
            }
            (Server::ServeryThread | Server::ServeryProcess, Scenario::AppPost4k) => {
                Some(Program::Upload)
            }
            (Server::ServeryThread | Server::ServeryProcess, _) => Some(Program::Servery),
            (Server::AxumTokio, _) => Some(Program::AxumTokio),
            (Server::Nginx | Server::H2o | Server::Caddy, _) => None,
        }
    }

    /// The command that starts this server for `scenario` on `listener` with one worker per
    /// CPU of `cpus`, serving `docroot` (servery's app examples take it too; axum-tokio has
    /// none). Peer configs are written under `prefix`.
    pub fn launch(
        self,
        programs: &Programs,
        scenario: Scenario,
        docroot: &Path,
        listener: Listener,
        cpus: &CpuSet,
        prefix: &Path,
    ) -> Result<Launch, Error> {
        let port = listener.port;
        if !scenario.servers().contains(&self) {
            return Err(Error::NotServed {
                server: self.name(),
                scenario: scenario.name(),
            });
        }
        let built = |program: Program| {
            programs
                .get(program)
                .map(Path::to_path_buf)
                .ok_or(Error::NotBuilt {
                    server: self.name(),
                    target: program.target(),
                    flag: program.flag(),
                })
        };
        let workers = cpus.ids().len();
        match self {
            Server::ServeryThread | Server::ServeryProcess => Ok(Launch {
                program: built(self.program(scenario).unwrap_or(Program::Servery))?,
                args: servery_args(docroot, listener, cpus, self == Server::ServeryProcess),
                env: Vec::new(),
                config: None,
            }),
            Server::AxumTokio if listener.wire != Wire::Http1 => Err(Error::NotServed {
                server: self.name(),
                scenario: scenario.name(),
            }),
            Server::AxumTokio => Ok(Launch {
                program: built(Program::AxumTokio)?,
                args: vec!["--bind".into(), format!("127.0.0.1:{port}")],
                env: Vec::new(),
                config: None,
            }),
            Server::Nginx => {
                let program = programs
                    .nginx
                    .clone()
                    .ok_or(Error::Missing { server: "nginx" })?;
                write_config(
                    &programs.scripts_lib,
                    "nginx",
                    "write_nginx_conf",
                    &[
                        prefix.display().to_string(),
                        docroot.display().to_string(),
                        port.to_string(),
                        workers.to_string(),
                        cpus.to_string(),
                    ]
                    .into_iter()
                    .chain(listener.wire.config_args("nginx")?)
                    .collect::<Vec<_>>(),
                )?;
                let p = prefix.display();
                // nginx_args in scripts/lib/nginx.sh: the same three flags.
                Ok(Launch {
                    program,
                    args: vec![
                        "-p".into(),
                        format!("{p}/"),
                        "-e".into(),
                        format!("{p}/error.log"),
                        "-c".into(),
                        format!("{p}/nginx.conf"),
                    ],
                    env: Vec::new(),
                    config: Some(prefix.join("nginx.conf")),
                })
            }
            Server::H2o => {
                let program = programs
                    .h2o
                    .clone()
                    .ok_or(Error::Missing { server: "h2o" })?;
                write_config(
                    &programs.scripts_lib,
                    "h2o",
                    "write_h2o_conf",
                    &[
                        prefix.display().to_string(),
                        docroot.display().to_string(),
                        port.to_string(),
                        workers.to_string(),
                    ]
                    .into_iter()
                    .chain(listener.wire.config_args("h2o")?)
                    .collect::<Vec<_>>(),
                )?;
                // h2o_args in scripts/lib/h2o.sh.
                Ok(Launch {
                    program,
                    args: vec!["-c".into(), format!("{}/h2o.conf", prefix.display())],
                    env: Vec::new(),
                    config: Some(prefix.join("h2o.conf")),
                })
            }
            Server::Caddy => {
                let program = programs
                    .caddy
                    .clone()
                    .ok_or(Error::Missing { server: "caddy" })?;
                write_config(
                    &programs.scripts_lib,
                    "caddy",
                    "write_caddy_conf",
                    &[
                        prefix.display().to_string(),
                        docroot.display().to_string(),
                        port.to_string(),
                        workers.to_string(),
                    ]
                    .into_iter()
                    .chain(listener.wire.config_args("caddy")?)
                    .collect::<Vec<_>>(),
                )?;
                // caddy_args in scripts/lib/caddy.sh: the same arguments, and caddy.env.
                let caddyfile = prefix.join("Caddyfile");
                Ok(Launch {
                    program,
                    args: vec![
                        "run".into(),
                        "--config".into(),
                        caddyfile.display().to_string(),
                        "--adapter".into(),
                        "caddyfile".into(),
                    ],
                    env: read_env("caddy", &prefix.join("caddy.env"))?,
                    config: Some(caddyfile),
                })
            }
        }
    }
}

/// The `KEY=VALUE` lines of an environment file a config writer made (`caddy.env`).
fn read_env(server: &'static str, path: &Path) -> Result<Vec<(String, String)>, Error> {
    let text = fs::read_to_string(path).map_err(|source| Error::Env {
        server,
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect())
}

/// `servery serve` arguments for one point; servery's examples (hello, axum, upload) take the
/// same, since they run through servery's own command line. Over TLS only the TLS listener is
/// opened (`--tls-bind` without `--bind`), with a certificate servery makes at start, and
/// HTTP/3 on its port number over UDP only in the h3 scenarios (`--h3`; it is on by default).
pub fn servery_args(
    docroot: &Path,
    listener: Listener,
    cpus: &CpuSet,
    process: bool,
) -> Vec<String> {
    let addr = format!("127.0.0.1:{}", listener.port);
    let tls = |h3: &str| ["--tls-bind", &addr, "--tls-self-signed", "--h3", h3].map(String::from);
    let listen = match listener.wire {
        Wire::Tls(_) => tls("off").to_vec(),
        Wire::H3(_) => tls("on").to_vec(),
        Wire::Http1 | Wire::H2c => vec!["--bind".to_string(), addr],
    };
    let mut args = vec!["serve".to_string(), docroot.display().to_string()];
    args.extend(listen);
    args.extend([
        "--workers".to_string(),
        cpus.ids().len().to_string(),
        "--cpus".to_string(),
        cpus.to_string(),
    ]);
    if process {
        args.extend(["--isolation".to_string(), "process".to_string()]);
    }
    args
}

/// Sources `lib/common.sh` and `lib/NAME.sh` and calls `function` with `args`.
fn write_config(
    lib: &Path,
    server: &'static str,
    function: &str,
    args: &[String],
) -> Result<(), Error> {
    let script =
        format!("set -euo pipefail; . \"$0/common.sh\"; . \"$0/{server}.sh\"; {function} \"$@\"");
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(lib)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::ConfigSpawn { server, source })?;
    if !out.status.success() {
        return Err(Error::Config {
            server,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// A started server.
pub struct Running {
    child: Child,
    pub pid: u32,
    log: PathBuf,
    spawned: Instant,
}

impl Running {
    /// Starts `launch` pinned to `cpus` with its environment variables added, its stdout and
    /// stderr going to `log`.
    pub fn spawn(launch: &Launch, cpus: &CpuSet, log: &Path) -> Result<Running, Error> {
        let spawn_err = |source| Error::Spawn {
            program: launch.program.clone(),
            source,
        };
        let out = File::create(log).map_err(spawn_err)?;
        let err = out.try_clone().map_err(spawn_err)?;
        let spawned = Instant::now();
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpus.to_string())
            .arg(&launch.program)
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(spawn_err)?;
        Ok(Running {
            pid: child.id(),
            child,
            log: log.to_path_buf(),
            spawned,
        })
    }

    /// Polls `addr` until it accepts a connection (start) and `ask` (one request, giving its
    /// status) sees `status` (ready).
    pub fn wait_ready(
        &mut self,
        addr: SocketAddr,
        mut ask: impl FnMut() -> io::Result<u16>,
        status: u16,
    ) -> Result<Ready, Error> {
        let since = |t: Instant| t.duration_since(self.spawned).as_secs_f64() * 1e3;
        let mut start_ms = None;
        let mut last = "nothing yet".to_string();
        while self.spawned.elapsed() < READY_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::Exited {
                    status,
                    log: self.log_tail(),
                });
            }
            if start_ms.is_none() && TcpStream::connect_timeout(&addr, POLL * 100).is_ok() {
                start_ms = Some(since(Instant::now()));
            }
            if let Some(start_ms) = start_ms {
                match ask() {
                    Ok(got) if got == status => {
                        return Ok(Ready {
                            start_ms,
                            ready_ms: since(Instant::now()),
                        })
                    }
                    Ok(got) => last = format!("status {got}"),
                    Err(e) => last = e.to_string(),
                }
            }
            std::thread::sleep(POLL);
        }
        Err(Error::NotReady {
            timeout: READY_TIMEOUT,
            last,
            log: self.log_tail(),
        })
    }

    /// SIGTERM, then up to [`STOP_GRACE`] for it to exit; after that SIGKILL to the root and
    /// every descendant (a supervisor's workers would otherwise outlive it).
    pub fn stop(mut self) -> Stopped {
        let tree = super::procfs::tree(self.pid);
        let _ = signal(self.pid, Signal::Term);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Stopped {
                    code: status.code(),
                    killed: false,
                };
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for pid in tree {
            let _ = signal(pid, Signal::Kill);
        }
        let code = self.child.wait().ok().and_then(|s| s.code());
        Stopped { code, killed: true }
    }

    /// The last lines of the server's output, for error messages.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Server::ALL {
            assert_eq!(Server::parse(s.name()), Some(s));
        }
        assert_eq!(Server::parse("apache"), None);
        let json = serde_json::to_string(&Server::ALL).expect("json");
        assert_eq!(
            json,
            r#"["servery-thread","servery-process","nginx","h2o","caddy","axum-tokio"]"#
        );
    }

    #[test]
    fn servery_runs_the_example_of_each_app_scenario() {
        let runs = |server: Server, scenario| server.program(scenario);
        for s in [Server::ServeryThread, Server::ServeryProcess] {
            assert_eq!(runs(s, Scenario::Static1k), Some(Program::Servery));
            assert_eq!(runs(s, Scenario::App1k), Some(Program::Hello));
            assert_eq!(runs(s, Scenario::AppJson), Some(Program::Axum));
            assert_eq!(runs(s, Scenario::AppPost4k), Some(Program::Upload));
        }
        assert_eq!(
            runs(Server::AxumTokio, Scenario::AppJson),
            Some(Program::AxumTokio)
        );
        assert_eq!(
            runs(Server::AxumTokio, Scenario::AppPost4k),
            Some(Program::AxumTokio)
        );
        assert_eq!(runs(Server::AxumTokio, Scenario::Static1k), None);
        assert_eq!(runs(Server::Nginx, Scenario::Static1k), None);
        assert_eq!(runs(Server::Nginx, Scenario::AppJson), None);
        assert_eq!(runs(Server::Caddy, Scenario::H2Static1k), None);
        assert_eq!(Server::AxumTokio.max_workers(), Some(1));
        assert_eq!(Server::Caddy.max_workers(), None);
        assert_eq!(Server::ServeryThread.max_workers(), None);
    }

    #[test]
    fn axum_tokio_binds_the_port_and_serves_only_the_router_scenarios() {
        let programs = Programs {
            axum_tokio: Some("/bin/axum_tokio".into()),
            upload: Some("/bin/upload".into()),
            ..Programs::default()
        };
        let cpus: CpuSet = "1".parse().expect("cpus");
        let (root, prefix) = (Path::new("/srv"), Path::new("/tmp/x"));
        let plain = Listener {
            port: 8080,
            wire: Wire::Http1,
        };
        let launch = |server: Server, scenario| {
            server.launch(&programs, scenario, root, plain, &cpus, prefix)
        };
        let tokio = launch(Server::AxumTokio, Scenario::AppPost4k).expect("launch");
        assert_eq!(tokio.program, Path::new("/bin/axum_tokio"));
        assert_eq!(tokio.args, ["--bind", "127.0.0.1:8080"]);
        assert!(tokio.config.is_none());
        let upload = launch(Server::ServeryThread, Scenario::AppPost4k).expect("launch");
        assert_eq!(upload.program, Path::new("/bin/upload"));
        assert_eq!(upload.args[..2], ["serve", "/srv"]);
        assert!(matches!(
            launch(Server::AxumTokio, Scenario::Static1k),
            Err(Error::NotServed { .. })
        ));
        assert!(matches!(
            launch(Server::Nginx, Scenario::AppJson),
            Err(Error::NotServed { .. })
        ));
        assert!(matches!(
            launch(Server::ServeryProcess, Scenario::AppJson),
            Err(Error::NotBuilt {
                flag: "--axum-bin",
                ..
            })
        ));
        let tls = Listener {
            port: 8443,
            wire: Wire::Tls(None),
        };
        assert!(matches!(
            Server::AxumTokio.launch(&programs, Scenario::H2App1k, root, tls, &cpus, prefix),
            Err(Error::NotServed { .. })
        ));
    }

    #[test]
    fn servery_gets_one_worker_per_cpu() {
        let cpus: CpuSet = "2-3".parse().expect("cpus");
        let plain = Listener {
            port: 8080,
            wire: Wire::Http1,
        };
        let args = servery_args(Path::new("/srv"), plain, &cpus, false);
        assert_eq!(
            args,
            [
                "serve",
                "/srv",
                "--bind",
                "127.0.0.1:8080",
                "--workers",
                "2",
                "--cpus",
                "2-3"
            ]
        );
        let args = servery_args(Path::new("/srv"), plain, &cpus, true);
        assert_eq!(args[args.len() - 2..], ["--isolation", "process"]);
        let tls = Listener {
            port: 8443,
            wire: Wire::Tls(None),
        };
        assert_eq!(
            servery_args(Path::new("/srv"), tls, &cpus, false)[..7],
            [
                "serve",
                "/srv",
                "--tls-bind",
                "127.0.0.1:8443",
                "--tls-self-signed",
                "--h3",
                "off"
            ]
        );
        let h3 = Listener {
            port: 8444,
            wire: Wire::H3(None),
        };
        let args = servery_args(Path::new("/srv"), h3, &cpus, true);
        assert_eq!(
            args[2..7],
            [
                "--tls-bind",
                "127.0.0.1:8444",
                "--tls-self-signed",
                "--h3",
                "on"
            ]
        );
        assert_eq!(args[args.len() - 2..], ["--isolation", "process"]);
        let h2c = Listener {
            port: 8081,
            wire: Wire::H2c,
        };
        assert_eq!(
            servery_args(Path::new("/srv"), h2c, &cpus, false)[2..4],
            ["--bind", "127.0.0.1:8081"]
        );
    }

    #[test]
    fn servery_runs_hello_for_both_app_1k_scenarios() {
        for s in [Server::ServeryThread, Server::ServeryProcess] {
            assert_eq!(s.program(Scenario::H2App1k), Some(Program::Hello));
            assert_eq!(s.program(Scenario::H2Static8m), Some(Program::Servery));
        }
        assert_eq!(Server::Nginx.program(Scenario::H2Static1k), None);
    }

    #[test]
    fn peers_use_the_scripts_config_writers() {
        let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib");
        let dir = std::env::temp_dir().join(format!("servery-matrix-test-{}", std::process::id()));
        let root = dir.join("root");
        fs::create_dir_all(&root).expect("mkdir");
        let programs = Programs {
            servery: Some("servery".into()),
            hello: Some("hello".into()),
            nginx: Some("nginx".into()),
            h2o: Some("h2o".into()),
            scripts_lib: lib,
            ..Programs::default()
        };
        let cpus: CpuSet = "0,2".parse().expect("cpus");
        let on = |port, wire| Listener { port, wire };
        let nginx = Server::Nginx
            .launch(
                &programs,
                Scenario::Static1k,
                &root,
                on(8081, Wire::Http1),
                &cpus,
                &dir.join("nginx"),
            )
            .expect("nginx config");
        let conf = fs::read_to_string(nginx.config.expect("config")).expect("read");
        assert!(conf.contains("worker_processes 2;"), "{conf}");
        assert!(conf.contains("worker_cpu_affinity 0001 0100;"), "{conf}");
        assert!(conf.contains("access_log off;") && conf.contains("sendfile on;"));
        assert!(conf.contains("listen 127.0.0.1:8081 reuseport;"), "{conf}");
        assert!(!conf.contains("ssl"), "{conf}");
        let h2o = Server::H2o
            .launch(
                &programs,
                Scenario::Static1k,
                &root,
                on(8082, Wire::Http1),
                &cpus,
                &dir.join("h2o"),
            )
            .expect("h2o config");
        let conf = fs::read_to_string(h2o.config.expect("config")).expect("read");
        assert!(conf.contains("num-threads: 2"), "{conf}");
        assert!(conf.contains("port: 8082") && !conf.contains("access-log:"));
        assert!(!conf.contains("ssl:"), "{conf}");

        // HTTP/2 over TLS: the run's certificate, nginx's ssl + http2 listener, h2o's ssl.
        let certificate = Certificate {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        fs::write(&certificate.cert, "cert").expect("cert");
        fs::write(&certificate.key, "key").expect("key");
        let tls = Wire::Tls(Some(&certificate));
        let nginx = Server::Nginx
            .launch(
                &programs,
                Scenario::H2Static1k,
                &root,
                on(8443, tls),
                &cpus,
                &dir.join("nginx-h2"),
            )
            .expect("nginx h2 config");
        let conf = fs::read_to_string(nginx.config.expect("config")).expect("read");
        assert!(
            conf.contains("listen 127.0.0.1:8443 ssl http2 reuseport;"),
            "{conf}"
        );
        assert!(conf.contains(&format!(
            "ssl_certificate \"{}\";",
            certificate.cert.display()
        )));
        assert!(conf.contains(&format!(
            "ssl_certificate_key \"{}\";",
            certificate.key.display()
        )));
        assert!(conf.contains("ssl_protocols TLSv1.2 TLSv1.3;"));
        assert!(conf.contains("keepalive_requests 1000000;") && conf.contains("access_log off;"));
        let h2o = Server::H2o
            .launch(
                &programs,
                Scenario::H2Static8m,
                &root,
                on(8444, tls),
                &cpus,
                &dir.join("h2o-h2"),
            )
            .expect("h2o h2 config");
        let conf = fs::read_to_string(h2o.config.expect("config")).expect("read");
        assert!(
            conf.contains(&format!(
                "  port: 8444\n  ssl:\n    certificate-file: \"{}\"\n    key-file: \"{}\"\n",
                certificate.cert.display(),
                certificate.key.display()
            )),
            "{conf}"
        );
        assert!(conf.contains("minimum-version: TLSv1.2") && conf.contains("num-threads: 2"));
        // h2c: nginx's http2 listener without ssl; h2o's plain listener takes h2c as it is.
        let nginx = Server::Nginx
            .launch(
                &programs,
                Scenario::H2Static1k,
                &root,
                on(8085, Wire::H2c),
                &cpus,
                &dir.join("nginx-h2c"),
            )
            .expect("nginx h2c config");
        let conf = fs::read_to_string(nginx.config.expect("config")).expect("read");
        assert!(
            conf.contains("listen 127.0.0.1:8085 http2 reuseport;"),
            "{conf}"
        );
        let h2o = Server::H2o
            .launch(
                &programs,
                Scenario::H2Static1k,
                &root,
                on(8086, Wire::H2c),
                &cpus,
                &dir.join("h2o-h2c"),
            )
            .expect("h2o h2c config");
        let conf = fs::read_to_string(h2o.config.expect("config")).expect("read");
        assert!(
            conf.contains("port: 8086") && !conf.contains("ssl:"),
            "{conf}"
        );
        assert!(matches!(
            Server::Nginx.launch(
                &programs,
                Scenario::H2Static1k,
                &root,
                on(1, Wire::Tls(None)),
                &cpus,
                &dir.join("x")
            ),
            Err(Error::NoCertificate { server: "nginx" })
        ));
        // A certificate that is not there is the writer's error, named.
        let gone = Certificate {
            cert: dir.join("none.pem"),
            key: dir.join("none.key"),
        };
        let err = Server::H2o
            .launch(
                &programs,
                Scenario::H2Static1k,
                &root,
                on(1, Wire::Tls(Some(&gone))),
                &cpus,
                &dir.join("y"),
            )
            .expect_err("no certificate file");
        assert!(
            err.to_string()
                .contains("h2o h2 needs a certificate and key file"),
            "{err}"
        );
        let no_h2o = Programs {
            h2o: None,
            ..programs
        };
        assert!(matches!(
            Server::H2o.launch(
                &no_h2o,
                Scenario::Static1k,
                &root,
                on(1, Wire::Http1),
                &cpus,
                &dir.join("x")
            ),
            Err(Error::Missing { server: "h2o" })
        ));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn caddy_runs_its_caddyfile_with_one_go_thread_per_worker_and_http3_in_h3_only() {
        let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib");
        let dir = std::env::temp_dir().join(format!("servery-caddy-test-{}", std::process::id()));
        let root = dir.join("root");
        fs::create_dir_all(&root).expect("mkdir");
        let programs = Programs {
            caddy: Some("/usr/bin/caddy".into()),
            scripts_lib: lib.clone(),
            ..Programs::default()
        };
        let cpus: CpuSet = "0,2".parse().expect("cpus");
        let on = |port, wire| Listener { port, wire };
        let launch = |scenario, listener, name: &str| {
            Server::Caddy.launch(&programs, scenario, &root, listener, &cpus, &dir.join(name))
        };
        let read = |launch: &Launch| {
            fs::read_to_string(launch.config.as_ref().expect("config")).expect("read")
        };

        // HTTP/1.1: caddy_args' command line; GOMAXPROCS and every path Caddy writes in caddy.env.
        let prefix = dir.join("h1");
        let h1 = launch(Scenario::Static1k, on(8081, Wire::Http1), "h1").expect("caddy config");
        assert_eq!(h1.program, Path::new("/usr/bin/caddy"));
        let caddyfile = prefix.join("Caddyfile").display().to_string();
        assert_eq!(
            h1.args,
            ["run", "--config", &caddyfile, "--adapter", "caddyfile"]
        );
        let p = prefix.display();
        let env: Vec<(String, String)> = [
            ("GOMAXPROCS", "2".to_string()),
            ("HOME", format!("{p}")),
            ("XDG_CONFIG_HOME", format!("{p}/config")),
            ("XDG_DATA_HOME", format!("{p}/data")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(h1.env, env);
        let conf = read(&h1);
        assert!(conf.contains("\tadmin off\n\tauto_https off\n"), "{conf}");
        assert!(conf.contains("protocols h1 h2\n"), "{conf}");
        assert!(conf.contains("idle 75s") && conf.contains("grace_period 5s"));
        assert!(
            conf.contains("http://127.0.0.1:8081 {\n\tbind 127.0.0.1\n"),
            "{conf}"
        );
        assert!(conf.contains(&format!("root * \"{}\"", root.display())));
        assert!(
            conf.contains("\tfile_server\n") && !conf.contains("\tlog"),
            "{conf}"
        );
        assert!(!conf.contains("tls"), "{conf}");

        // HTTP/2 over TLS: the run's certificate, and no HTTP/3 (no UDP socket, no Alt-Svc).
        let certificate = Certificate {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        fs::write(&certificate.cert, "cert").expect("cert");
        fs::write(&certificate.key, "key").expect("key");
        let h2 = launch(
            Scenario::H2Static1k,
            on(8443, Wire::Tls(Some(&certificate))),
            "h2",
        )
        .expect("caddy h2 config");
        let conf = read(&h2);
        assert!(
            conf.contains(&format!(
                "https://127.0.0.1:8443 {{\n\ttls \"{}\" \"{}\" {{\n\t\tprotocols tls1.2 tls1.3\n",
                certificate.cert.display(),
                certificate.key.display()
            )),
            "{conf}"
        );
        assert!(
            conf.contains("protocols h1 h2\n") && !conf.contains("h3"),
            "{conf}"
        );
        assert_eq!(h2.env[0], ("GOMAXPROCS".to_string(), "2".to_string()));

        // h2c: prior knowledge in the clear, beside HTTP/1.1 (Caddy 2.6 needs h1 for it).
        let h2c = launch(Scenario::H2Static8m, on(8085, Wire::H2c), "h2c").expect("h2c config");
        let conf = read(&h2c);
        assert!(conf.contains("protocols h1 h2c\n"), "{conf}");
        assert!(conf.contains("http://127.0.0.1:8085 {") && !conf.contains("tls"));

        // HTTP/3 in the h3 scenarios: the same TLS site, with h3 in its protocols.
        let h3 = launch(
            Scenario::H3Static64k,
            on(8446, Wire::H3(Some(&certificate))),
            "h3",
        )
        .expect("caddy h3 config");
        let conf = read(&h3);
        assert!(conf.contains("protocols h1 h2 h3\n"), "{conf}");
        assert!(
            conf.contains(&format!(
                "https://127.0.0.1:8446 {{\n\ttls \"{}\" \"{}\" {{\n",
                certificate.cert.display(),
                certificate.key.display()
            )),
            "{conf}"
        );
        assert!(conf.contains("\tbind 127.0.0.1\n") && conf.contains("\tfile_server\n"));
        let caddyfile = dir.join("h3/Caddyfile").display().to_string();
        assert_eq!(h3.args[1..3], ["--config", caddyfile.as_str()]);
        for peer in [Server::Nginx, Server::H2o] {
            let wire = on(8447, Wire::H3(Some(&certificate)));
            assert!(matches!(
                peer.launch(&programs, Scenario::H3Static1k, &root, wire, &cpus, &dir),
                Err(Error::NotServed { .. })
            ));
        }
        assert!(matches!(
            launch(Scenario::H3Static1k, on(1, Wire::H3(None)), "x"),
            Err(Error::NoCertificate { server: "caddy" })
        ));
        let args = |protocol: &str| {
            [&dir.join("h4"), &root]
                .iter()
                .map(|p| p.display().to_string())
                .chain(["8446".into(), "1".into(), protocol.into()])
                .chain([&certificate.cert, &certificate.key].map(|p| p.display().to_string()))
                .collect::<Vec<_>>()
        };
        let err = write_config(&lib, "caddy", "write_caddy_conf", &args("h4"))
            .expect_err("unknown protocol");
        assert!(
            err.to_string()
                .contains("caddy protocol must be http1, h2, h2c or h3"),
            "{err}"
        );

        // What it does not serve, and what is not there.
        assert!(matches!(
            launch(Scenario::Gzip64kJs, on(1, Wire::Http1), "x"),
            Err(Error::NotServed { .. })
        ));
        assert!(matches!(
            launch(Scenario::AppJson, on(1, Wire::Http1), "x"),
            Err(Error::NotServed { .. })
        ));
        assert!(matches!(
            launch(Scenario::H2Static1k, on(1, Wire::Tls(None)), "x"),
            Err(Error::NoCertificate { server: "caddy" })
        ));
        let gone = Certificate {
            cert: dir.join("none.pem"),
            key: dir.join("none.key"),
        };
        let err = launch(Scenario::H2Static1k, on(1, Wire::Tls(Some(&gone))), "y")
            .expect_err("no certificate file");
        assert!(
            err.to_string()
                .contains("caddy h2 needs a certificate and key file"),
            "{err}"
        );
        let no_caddy = Programs {
            caddy: None,
            ..programs.clone()
        };
        assert!(matches!(
            Server::Caddy.launch(
                &no_caddy,
                Scenario::Static1k,
                &root,
                on(1, Wire::Http1),
                &cpus,
                &dir.join("z")
            ),
            Err(Error::Missing { server: "caddy" })
        ));
        assert!(Server::Caddy.is_peer() && !Server::AxumTokio.is_peer());
        let _ = fs::remove_dir_all(&dir);
    }
}

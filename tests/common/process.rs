//! Processes a test starts: the [`Tag`] that finds every one of them by its
//! environment (worker processes and their replacements included, orphans
//! too) and kills what is left when dropped, the `/proc` readers it and the
//! tests use ([`stat`], [`alive`], [`starttime`], [`is_worker`],
//! [`rss_bytes`]), output
//! capture, and running a command to completion with a bound
//! ([`run_bounded`], [`servery`]).
//!
//! Why a tag and not the process group: a worker process calls `setsid`
//! (`src/sys/spawn.rs`), so it leads a group of its own and a kill of the
//! supervisor's group does not reach it; its environment, inherited from the
//! supervisor, does.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{wait_until, BIN};

/// The environment variable that marks the processes of one server.
pub const TAG_VAR: &str = "SERVERY_TEST_TAG";

/// The processes one server started, found by their environment. Dropping
/// it SIGKILLs, pid by pid, every live process still carrying the tag.
#[derive(Debug)]
pub struct Tag {
    name: String,
    /// Every process seen carrying the tag, as (pid, start time): an
    /// exiting process's environment reads empty before its files are
    /// closed, so "gone" is judged by these, not by the environment.
    seen: Mutex<BTreeSet<(u32, u64)>>,
}

impl Tag {
    /// A tag no other server of this test process has.
    pub fn new() -> Tag {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Tag {
            name: format!(
                "{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            seen: Mutex::new(BTreeSet::new()),
        }
    }

    /// The value of [`TAG_VAR`] in the tagged processes' environment.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Live processes carrying this tag (a zombie's environment reads empty).
    pub fn processes(&self) -> Vec<u32> {
        let needle = format!("\0{TAG_VAR}={}\0", self.name);
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            let mut hay = Vec::with_capacity(env.len() + 2);
            hay.push(0);
            hay.extend_from_slice(&env);
            hay.push(0);
            if contains(&hay, needle.as_bytes()) && alive(pid) {
                out.push(pid);
            }
        }
        out.sort_unstable();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.extend(out.iter().map(|&p| (p, starttime(p))));
        out
    }

    /// Live `servery worker` processes carrying this tag.
    pub fn workers(&self) -> Vec<u32> {
        self.processes()
            .into_iter()
            .filter(|&p| is_worker(p))
            .collect()
    }

    /// Nothing carries the tag, and every process seen with it has exited
    /// (gone, or a zombie: its files are closed).
    pub fn all_gone(&self) -> bool {
        self.processes().is_empty()
            && self
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .all(|&(pid, start)| !(alive(pid) && starttime(pid) == start))
    }

    /// Wait (bounded) for [`Tag::all_gone`].
    pub fn wait_gone(&self, limit: Duration) -> bool {
        wait_until(limit, || self.all_gone())
    }

    /// Whether a live tagged process has a TCP socket open on local `port`
    /// (listening, connected or only bound), judged by the socket inodes
    /// of `/proc/net/tcp{,6}` against the processes' `/proc/PID/fd`.
    pub fn holds_port(&self, port: u16) -> bool {
        let inodes: BTreeSet<u64> = tcp_sockets_on(port)
            .into_iter()
            .map(|s| s.inode)
            .filter(|&i| i != 0)
            .collect();
        !inodes.is_empty()
            && self.processes().into_iter().any(|pid| {
                socket_inodes(pid)
                    .iter()
                    .any(|inode| inodes.contains(inode))
            })
    }
}

impl Default for Tag {
    fn default() -> Tag {
        Tag::new()
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in left {
                signal(pid, Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Fields of /proc/PID/stat after the `(comm)`: [0] state, [1] ppid,
/// [2] pgrp, [3] session, ..., [19] starttime.
pub fn stat(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Running (neither gone nor a zombie).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|f| f[0] != "Z" && f[0] != "X")
}

/// The process's start time in clock ticks since boot (0 if gone): with the
/// pid, it names one process even after the pid is reused.
pub fn starttime(pid: u32) -> u64 {
    stat(pid).and_then(|f| f[19].parse().ok()).unwrap_or(0)
}

/// A `servery worker` process (its first argument is `worker`).
pub fn is_worker(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).nth(1) == Some(b"worker".as_slice()))
}

/// kill(2); a process already gone is not an error.
pub fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// Drain `source` on a thread into a shared buffer; the thread holds the
/// only other reference until it reaches EOF (see [`settle`]).
pub(crate) fn capture(mut source: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = source.read(&mut chunk) {
            sink.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

/// Wait (up to a second) for the [`capture`] thread of `buf` to reach EOF.
pub(crate) fn settle(buf: &Arc<Mutex<Vec<u8>>>) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Arc::strong_count(buf) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a [`capture`] buffer holds so far, as text.
pub(crate) fn text(buf: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

/// Run `cmd` to completion, killing it after `limit` (then panicking).
/// stdout and stderr are captured.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = capture(child.stdout.take().expect("stdout"));
    let err = capture(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {limit:?}\nstderr:\n{}",
                text(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The pipes close with the process; let the capture threads finish.
    settle(&out);
    settle(&err);
    let take =
        |b: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()));
    Output {
        status,
        stdout: take(out),
        stderr: take(err),
    }
}

/// `servery` with `args`, run to completion within 10 s (a command that
/// prints and exits, such as `check-config`; a server is a [`TestServer`]).
///
/// [`TestServer`]: super::TestServer
pub fn servery(args: &[&str]) -> Output {
    run_bounded(Command::new(BIN).args(args), Duration::from_secs(10))
}

/// The CPU time a process has used, user and system, in seconds (fields
/// 14 and 15 of `/proc/<pid>/stat`, every thread's).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/stat: {e}"));
    // The command may hold spaces: fields count from after its `)`.
    let rest = &stat[stat.rfind(')').expect("a /proc stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // In USER_HZ, which Linux fixes at 100 for what /proc shows.
    ticks as f64 / 100.0
}

/// The server's resident set size in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"));
    let kib: u64 = line
        .trim()
        .strip_suffix("kB")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("unparsable VmRSS line {line:?}"));
    kib * 1024
}

/// One row of `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    /// The kernel's state number (`0x0A` is LISTEN).
    pub state: u8,
    /// The socket's inode (0 once no file refers to it, e.g. TIME_WAIT).
    pub inode: u64,
}

/// The kernel's TCP state number for LISTEN.
pub const TCP_LISTEN: u8 = 0x0A;

/// Every IPv4 and IPv6 TCP socket whose local port is `port`.
pub fn tcp_sockets_on(port: u16) -> Vec<TcpSocket> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(st), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let Some((_, p)) = local.rsplit_once(':') else {
                continue;
            };
            if u16::from_str_radix(p, 16) != Ok(port) {
                continue;
            }
            if let (Ok(state), Ok(inode)) = (u8::from_str_radix(st, 16), inode.parse()) {
                out.push(TcpSocket { state, inode });
            }
        }
    }
    out
}

/// The inodes of the sockets `pid` has open (its `socket:[N]` descriptors).
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?;
            l.parse().ok()
        })
        .collect()
}

/// The soft and hard `RLIMIT_NOFILE` of this process, from
/// `/proc/self/limits`.
pub fn nofile_limits() -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut nums = line["Max open files".len()..].split_whitespace();
    let soft = nums.next()?.parse().ok()?;
    let hard = nums.next()?.parse().unwrap_or(u64::MAX); // "unlimited"
    Some((soft, hard))
}

/// Whether this process may open `need` files, raising the soft limit (with
/// prlimit(1), so no unsafe here) when the hard limit allows. Tests that
/// hold many connections call it and print SKIPPED when it says no.
pub fn ensure_nofile(need: u64) -> bool {
    let Some((soft, hard)) = nofile_limits() else {
        return false;
    };
    if soft >= need {
        return true;
    }
    if hard < need {
        return false;
    }
    let raised = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg(format!("--nofile={need}:"))
        .status()
        .is_ok_and(|s| s.success());
    raised && nofile_limits().is_some_and(|(soft, _)| soft >= need)
}

//! The command line: `check-config` output and refusals (exit 2, naming the
//! field), config files merged under flags, `serve`'s start-up outcomes
//! (ready line, exit 2 before binding, exit 1 on a busy port, exit 0 on
//! SIGTERM), and what servery says about itself (grouped `--help` with
//! defaults, `help TOPIC`, `man`, `completions`). Not per driver: nothing
//! here depends on the I/O driver.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{free_port, servery, Signal, TestServer};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `check-config` with `args`, expecting success; the printed TOML, parsed.
fn effective(args: &[&str]) -> toml::Table {
    let mut all = vec!["check-config"];
    all.extend_from_slice(args);
    let out = servery(&all);
    assert!(
        out.status.success(),
        "check-config {args:?}: {:?}\n{}",
        out.status,
        stderr(&out)
    );
    let text = stdout(&out);
    text.parse()
        .unwrap_or_else(|e| panic!("check-config printed invalid TOML ({e}):\n{text}"))
}

/// `check-config` with `args`, expecting exit 2; its stderr.
fn refused(args: &[&str]) -> String {
    let mut all = vec!["check-config"];
    all.extend_from_slice(args);
    let out = servery(&all);
    assert_eq!(
        out.status.code(),
        Some(2),
        "check-config {args:?} should exit 2; stdout:\n{}\nstderr:\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).is_empty(),
        "a refused config prints nothing on stdout"
    );
    stderr(&out)
}

fn dir_arg(dir: &Path) -> String {
    dir.to_str().expect("UTF-8 temp path").to_owned()
}

/// A duration in the effective config (`"30s"`, or a number of seconds),
/// in seconds.
fn seconds(c: &toml::Table, key: &str) -> f64 {
    use serde::Deserialize;
    servery::config::Seconds::deserialize(c[key].clone())
        .unwrap_or_else(|e| panic!("{key}: {e}: {c:?}"))
        .0
}

/// A size in the effective config (`"256KiB"`, or a number), in bytes.
fn bytes(c: &toml::Table, key: &str) -> u64 {
    use serde::Deserialize;
    servery::config::Size::deserialize(c[key].clone())
        .unwrap_or_else(|e| panic!("{key}: {e}: {c:?}"))
        .0
}

/// This process's CPUs grouped by physical core (package and core id),
/// as sysfs tells them: what `--workers auto` counts.
fn physical_cores() -> Vec<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    let mut cores: Vec<((String, String), Vec<usize>)> = Vec::new();
    for cpu in (0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)) {
        let read = |f: &str| {
            std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| cpu.to_string())
        };
        let id = (read("physical_package_id"), read("core_id"));
        match cores.iter_mut().find(|(k, _)| *k == id) {
            Some((_, cpus)) => cpus.push(cpu),
            None => cores.push((id, vec![cpu])),
        }
    }
    cores.into_iter().map(|(_, cpus)| cpus).collect()
}

/// The lowest CPU this process may run on.
fn first_allowed_cpu() -> usize {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    (0..nix::sched::CpuSet::count())
        .find(|&c| set.is_set(c).unwrap_or(false))
        .expect("an allowed CPU")
}

#[test]
fn check_config_prints_effective_defaults() {
    let root = tempfile::tempdir().unwrap();
    let c = effective(&[&dir_arg(root.path())]);
    let int = |k: &str| c[k].as_integer().unwrap_or_else(|| panic!("{k}: {c:?}"));
    let float = |k: &str| seconds(&c, k);
    assert_eq!(c["root"].as_str(), Some(dir_arg(root.path()).as_str()));
    assert_eq!(
        c["bind"].as_array().map(|a| a.len()),
        Some(1),
        "{:?}",
        c["bind"]
    );
    assert_eq!(c["bind"][0].as_str(), Some("127.0.0.1:8080"));
    // `auto`: one worker per physical core of this process's CPU set, each
    // on its own core.
    let cores = physical_cores();
    assert_eq!(int("workers"), cores.len() as i64, "{cores:?}");
    assert_eq!(c["no_pin"].as_bool(), Some(false));
    let cpus: Vec<usize> = c["cpus"]
        .as_str()
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cpus.len(), cores.len(), "{cpus:?}");
    assert!(cpus
        .iter()
        .all(|c| cores.iter().any(|core| core.contains(c))));
    assert_eq!(cpus[0], first_allowed_cpu());
    assert_eq!(c["listener"].as_str(), Some("reuseport"));
    assert_eq!(c["driver"].as_str(), Some("auto"));
    assert_eq!(float("startup_timeout"), 10.0);
    assert_eq!(float("drain_timeout"), 30.0);
    assert_eq!(float("force_timeout"), 35.0);
    assert_eq!(float("header_timeout"), 20.0);
    assert_eq!(float("keepalive_timeout"), 75.0);
    assert_eq!(int("max_connections"), 16384);
    assert_eq!(bytes(&c, "max_head_bytes"), 16384);
    assert_eq!(
        c["max_head_bytes"].as_str(),
        Some("16KiB"),
        "shown with its unit"
    );
    assert_eq!(
        c["drain_timeout"].as_str(),
        Some("30s"),
        "shown with its unit"
    );
    assert_eq!(int("max_headers"), 100);
    assert!(!c.contains_key("admin"), "no admin by default: {c:?}");
}

#[test]
fn check_config_output_is_a_valid_config_file() {
    let root = tempfile::tempdir().unwrap();
    let first = servery(&[
        "check-config",
        &dir_arg(root.path()),
        "--workers",
        "3",
        "--no-pin",
        "--admin",
        "127.0.0.1:9999",
        "--drain-timeout",
        "2.5",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let file = root.path().join("effective.toml");
    std::fs::write(&file, &first.stdout).unwrap();
    let again = servery(&["check-config", "--config", &dir_arg(&file)]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(stdout(&again), stdout(&first));
}

#[test]
fn cpu_outside_the_cpu_set_exits_2() {
    let root = tempfile::tempdir().unwrap();
    let cpus = format!("{},999", first_allowed_cpu());
    let err = refused(&[&dir_arg(root.path()), "--cpus", &cpus]);
    assert!(
        err.contains("cpu 999 is not in this process's CPU set"),
        "{err}"
    );
    assert!(err.starts_with("servery: --cpus:"), "{err}");
}

#[test]
fn zero_workers_exits_2_naming_the_flag() {
    let root = tempfile::tempdir().unwrap();
    let err = refused(&[&dir_arg(root.path()), "--workers", "0"]);
    assert!(err.starts_with("servery: --workers:"), "{err}");
}

#[test]
fn bad_bind_exits_2() {
    let root = tempfile::tempdir().unwrap();
    for bind in ["nope", "127.0.0.1", "127.0.0.1:99999", "localhost:80"] {
        let err = refused(&[&dir_arg(root.path()), "--bind", bind]);
        assert!(err.starts_with("servery: --bind:"), "{bind}: {err}");
    }
    let err = refused(&[
        &dir_arg(root.path()),
        "--bind",
        "127.0.0.1:1",
        "--bind",
        "127.0.0.1:1",
    ]);
    assert!(err.contains("given twice"), "{err}");
}

#[test]
fn force_timeout_not_above_drain_timeout_exits_2() {
    let root = tempfile::tempdir().unwrap();
    let err = refused(&[
        &dir_arg(root.path()),
        "--force-timeout",
        "1",
        "--drain-timeout",
        "2",
    ]);
    assert!(err.starts_with("servery: --force-timeout:"), "{err}");
    let err = refused(&[
        &dir_arg(root.path()),
        "--force-timeout",
        "2",
        "--drain-timeout",
        "2",
    ]);
    assert!(err.starts_with("servery: --force-timeout:"), "{err}");
}

#[test]
fn bad_values_exit_2_naming_their_field() {
    let root = tempfile::tempdir().unwrap();
    let root = dir_arg(root.path());
    for (args, field) in [
        (&["--driver", "kqueue"][..], "--driver"),
        (&["--listener", "both"], "--listener"),
        (&["--workers", "lots"], "--workers"),
        (&["--workers", "100000", "--no-pin"], "--workers"),
        (&["--header-timeout=-1"], "--header-timeout"),
        (&["--keepalive-timeout", "0"], "--keepalive-timeout"),
        (&["--drain-timeout", "nan"], "--drain-timeout"),
        (&["--max-head-bytes", "10"], "--max-head-bytes"),
        (&["--max-headers", "0"], "--max-headers"),
        (&["--max-headers", "100000"], "--max-headers"),
        (&["--max-connections", "0"], "--max-connections"),
        // Merged into --max-connections (a total since issue 29).
        (
            &["--max-connections-total", "10"],
            "--max-connections-total",
        ),
        (&["--admin", "nope"], "--admin"),
        (&["--no-pin", "--cpus", "0"], "--cpus"),
    ] {
        let mut all = vec![root.as_str()];
        all.extend_from_slice(args);
        let err = refused(&all);
        assert!(
            err.starts_with(&format!("servery: {field}:")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn unknown_key_in_config_file_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servery.toml");
    std::fs::write(&file, "workers = 1\nbogus_key = true\n").unwrap();
    let err = refused(&[&dir_arg(dir.path()), "--config", &dir_arg(&file)]);
    assert!(err.contains(&dir_arg(&file)), "{err}");
    assert!(err.contains("bogus_key"), "{err}");
    // Flag spellings are not file keys.
    std::fs::write(&file, "drain-timeout = 1\n").unwrap();
    let err = refused(&[&dir_arg(dir.path()), "--config", &dir_arg(&file)]);
    assert!(err.contains(&dir_arg(&file)), "{err}");
}

#[test]
fn unreadable_or_invalid_config_file_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let err = refused(&[&dir_arg(dir.path()), "--config", &dir_arg(&missing)]);
    assert!(err.contains(&dir_arg(&missing)), "{err}");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "workers = [\n").unwrap();
    let err = refused(&[&dir_arg(dir.path()), "--config", &dir_arg(&broken)]);
    assert!(err.contains(&dir_arg(&broken)), "{err}");
}

#[test]
fn config_file_values_are_used_and_flags_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servery.toml");
    std::fs::write(
        &file,
        "workers = 3\nno_pin = true\ndrain_timeout = 4.0\nkeepalive_timeout = 9.0\n\
         max_headers = 50\nbind = [\"127.0.0.1:7001\"]\n",
    )
    .unwrap();
    let c = effective(&[
        &dir_arg(dir.path()),
        "--config",
        &dir_arg(&file),
        "--drain-timeout",
        "5",
        "--max-headers",
        "60",
    ]);
    // From the file.
    assert_eq!(c["workers"].as_integer(), Some(3));
    assert_eq!(c["no_pin"].as_bool(), Some(true));
    assert_eq!(seconds(&c, "keepalive_timeout"), 9.0);
    assert_eq!(c["bind"][0].as_str(), Some("127.0.0.1:7001"));
    // Flags win.
    assert_eq!(seconds(&c, "drain_timeout"), 5.0);
    assert_eq!(c["max_headers"].as_integer(), Some(60));
    // Untouched by either: the default.
    assert_eq!(seconds(&c, "header_timeout"), 20.0);
}

#[test]
fn config_file_root_is_used_without_a_root_argument() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    let file = dir.path().join("servery.toml");
    std::fs::write(
        &file,
        format!("root = {:?}\nno_pin = true\n", dir_arg(&site)),
    )
    .unwrap();
    let c = effective(&["--config", &dir_arg(&file)]);
    assert_eq!(c["root"].as_str(), Some(dir_arg(&site).as_str()));
    // A root argument overrides it.
    let c = effective(&[&dir_arg(dir.path()), "--config", &dir_arg(&file)]);
    assert_eq!(c["root"].as_str(), Some(dir_arg(dir.path()).as_str()));
}

#[test]
fn serve_on_a_nonexistent_root_exits_2_and_listens_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let addr = free_port();
    let failure = match TestServer::builder()
        .root(&missing)
        .bind(addr.to_string())
        .try_start()
    {
        Ok(s) => panic!("served a missing root: {}", s.ready_line()),
        Err(f) => f,
    };
    assert_eq!(
        failure.status.and_then(|s| s.code()),
        Some(2),
        "{failure:?}"
    );
    assert!(failure.stderr.starts_with("servery: root:"), "{failure:?}");
    assert!(
        failure.stderr.contains("no-such-dir"),
        "names the path: {failure:?}"
    );
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "something listens on {addr} after a refused start"
    );
    // A file is not a root either.
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let failure = match TestServer::builder().root(&file).try_start() {
        Ok(s) => panic!("served a file as root: {}", s.ready_line()),
        Err(f) => f,
    };
    assert_eq!(failure.status.and_then(|s| s.code()), Some(2));
    assert!(failure.stderr.contains("not a directory"), "{failure:?}");
}

#[test]
fn serve_on_a_port_in_use_exits_1_naming_the_address() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let failure = match TestServer::builder().bind(addr.to_string()).try_start() {
        Ok(s) => panic!("started on a busy port: {}", s.ready_line()),
        Err(f) => f,
    };
    assert_eq!(
        failure.status.and_then(|s| s.code()),
        Some(1),
        "{failure:?}"
    );
    assert!(
        failure.stderr.contains(&addr.to_string()),
        "stderr does not name {addr}: {}",
        failure.stderr
    );
    assert!(failure.stdout.is_empty(), "{failure:?}");
    drop(taken);
}

#[test]
fn ready_line_reports_workers_driver_and_admin() {
    let server = TestServer::start(&[
        "--workers",
        "2",
        "--driver",
        "epoll",
        "--admin",
        "127.0.0.1:0",
    ]);
    let line = server.ready_line();
    let addr = server.addr();
    assert_ne!(addr.port(), 0);
    assert_eq!(
        line,
        format!(
            "servery: ready on http://{addr} — 2 workers, epoll, reuseport, unpinned, admin http://{}, \
             http speaks http/1.1+h2c",
            server.admin()
        )
    );
    assert_eq!(server.admin_get("/readyz").status, 200);
}

#[test]
fn by_default_one_pinned_worker_runs_per_physical_core() {
    let server = TestServer::builder()
        .pinned()
        .default_workers()
        .args(&["--driver", "epoll"])
        .start();
    let line = server.ready_line();
    let cores = physical_cores();
    let n = cores.len();
    let workers = if n == 1 {
        "1 worker".to_owned()
    } else {
        format!("{n} workers")
    };
    assert!(
        line.contains(&format!(" — {workers}, epoll, ")),
        "{line} ({cores:?})"
    );
    assert!(line.contains(", cpus "), "pinned: {line}");
}

#[test]
fn ready_line_reports_pinned_cpus() {
    let cpu = first_allowed_cpu().to_string();
    let server = TestServer::builder()
        .pinned()
        .args(&["--workers", "1", "--cpus", &cpu, "--driver", "epoll"])
        .start();
    assert!(
        server.ready_line().ends_with(&format!(
            " — 1 worker, epoll, reuseport, cpus {cpu}, http speaks http/1.1+h2c"
        )),
        "{}",
        server.ready_line()
    );
    assert_eq!(server.get("/").status, 404);
}

#[test]
fn serve_exits_0_on_sigterm() {
    let mut server = TestServer::start(&["--drain-timeout", "5"]);
    assert_eq!(server.get("/missing").status, 404);
    server.signal(Signal::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("still running 10 s after SIGTERM");
    assert!(status.success(), "{status:?}\n{}", server.stderr());
    assert!(
        TcpStream::connect_timeout(&server.addr(), Duration::from_secs(1)).is_err(),
        "still accepting after exit"
    );
}

/// `servery args`, expecting exit 0; its stdout.
fn printed(args: &[&str]) -> String {
    let out = servery(args);
    assert!(
        out.status.success(),
        "servery {args:?}: {:?}\n{}",
        out.status,
        stderr(&out)
    );
    stdout(&out)
}

/// `text` with every run of whitespace one space, so a check does not depend
/// on where the help was wrapped.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The long flags a help text lists (`--drain-timeout`), in order: clap
/// indents them, a paragraph is not.
fn flags_in(help: &str) -> Vec<String> {
    help.lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', '=']).next())
        .map(|f| format!("--{f}"))
        .collect()
}

const HEADINGS: [&str; 10] = [
    "Listeners:",
    "Workers:",
    "Lifecycle:",
    "Limits:",
    "Files:",
    "Compression:",
    "TLS:",
    "HTTP/2:",
    "Admin:",
    "Logging:",
];

#[test]
fn serve_help_groups_flags_by_concern_and_shows_defaults() {
    for command in ["serve", "check-config"] {
        let help = printed(&[command, "--help"]);
        let lines: Vec<&str> = help.lines().collect();
        let at: Vec<usize> = HEADINGS
            .iter()
            .map(|h| {
                lines
                    .iter()
                    .position(|l| l == h)
                    .unwrap_or_else(|| panic!("{command}: no {h}\n{help}"))
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{command}: headings out of order\n{help}"
        );
        let help = flat(&help);
        for shown in [
            "--drain-timeout <DURATION> Time in-flight requests get after SIGTERM before being cut [default: 30s]",
            "--workers <N|auto> Worker count, or `auto` for one per physical core [default: auto]",
            "--driver <auto|uring|epoll> I/O driver: `auto` (io_uring, else epoll), `uring` or `epoll` [default: auto]",
            "[default: 128]",
            "--force-timeout <DURATION> Time after SIGTERM when surviving workers are abandoned [default: --drain-timeout + 5s]",
        ] {
            assert!(help.contains(shown), "{command}: {shown:?} not in\n{help}");
        }
        // Unset unless given: no default is made up.
        let admin = "--admin <ADDR> Address of the admin listener (/healthz, /readyz, /metrics)";
        assert!(help.contains(admin), "{help}");
        assert!(!help.contains(&format!("{admin} [default")), "{help}");
    }
}

#[test]
fn help_topic_prints_its_flags_defaults_and_doc() {
    let page = printed(&["help", "tls"]);
    for flag in [
        "--tls-bind",
        "--tls-cert",
        "--tls-key",
        "--tls-self-signed",
        "--tls-handshake-timeout",
        "--tls-ticket-rotate",
        "--ktls",
        "--tls-handshake-buffer-bytes",
    ] {
        assert!(page.contains(flag), "{flag}:\n{page}");
    }
    assert_eq!(flags_in(&page).len(), 8, "only the TLS flags:\n{page}");
    assert!(flat(&page).contains("[default: 1h]"), "{page}");
    assert!(page.contains("docs/tls.md"), "{page}");
    let index = printed(&["help"]);
    for topic in [
        "listeners",
        "workers",
        "lifecycle",
        "limits",
        "files",
        "tls",
        "http2",
        "admin",
        "logging",
    ] {
        assert!(index.contains(&format!("  {topic} ")), "{topic}:\n{index}");
    }
}

#[test]
fn help_of_a_command_is_its_own_help() {
    assert_eq!(printed(&["help", "serve"]), printed(&["serve", "--help"]));
}

#[test]
fn help_on_an_unknown_topic_exits_2_naming_the_topics() {
    let out = servery(&["help", "nonsense"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stdout(&out).is_empty(), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("nonsense"), "{err}");
    for topic in ["listeners", "tls", "http2", "logging", "serve"] {
        assert!(err.contains(topic), "{topic}: {err}");
    }
}

#[test]
fn man_page_is_roff_with_every_flag_and_command() {
    let page = printed(&["man"]);
    assert!(
        page.starts_with(".ie ") || page.starts_with(".TH "),
        "{page}"
    );
    assert!(page.contains(".TH servery 1"), "{page}");
    for section in [".SH COMMANDS", ".SH OPTIONS", ".SH LIFECYCLE", ".SH HTTP/2"] {
        assert!(page.contains(section), "{section}");
    }
    let flags = flags_in(&printed(&["serve", "--help"]));
    assert!(flags.len() > 40, "{flags:?}");
    for flag in flags {
        // roff writes every `-` as `\-`.
        assert!(
            page.contains(&flag.replace('-', "\\-")),
            "{flag} not in the man page"
        );
    }
    for command in [
        "servery serve",
        "servery check\\-config",
        "servery completions",
    ] {
        assert!(page.contains(command), "{command}");
    }
    assert!(
        page.contains("[default: 30s]"),
        "defaults are in the man page"
    );
}

#[test]
fn completions_name_the_flags() {
    let bash = printed(&["completions", "bash"]);
    assert!(bash.contains("--drain-timeout"), "{bash}");
    assert!(bash.contains("check-config"), "{bash}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(
            printed(&["completions", shell]).contains("drain-timeout"),
            "{shell}"
        );
    }
    let out = servery(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn output_budgets_have_defaults_bounds_and_a_rule_between_them() {
    let root = tempfile::tempdir().unwrap();
    let dir = dir_arg(root.path());
    let c = effective(&[&dir]);
    assert_eq!(bytes(&c, "output_buffer_bytes"), 256 * 1024);
    assert_eq!(bytes(&c, "worker_output_bytes"), 32 * 1024 * 1024);
    let err = refused(&[&dir, "--output-buffer-bytes", "100"]);
    assert!(
        err.contains("--output-buffer-bytes: 100 is outside 32768..=67108864"),
        "{err}"
    );
    let err = refused(&[
        &dir,
        "--output-buffer-bytes",
        "2097152",
        "--worker-output-bytes",
        "1048576",
    ]);
    assert!(
        err.contains("--worker-output-bytes: 1048576 is below --output-buffer-bytes (2097152)")
            && err.contains("raise it or lower --output-buffer-bytes"),
        "{err}"
    );
}

#[test]
fn a_negative_number_gets_the_settings_own_refusal() {
    let root = tempfile::tempdir().unwrap();
    let err = refused(&[&dir_arg(root.path()), "--drain-timeout", "-1"]);
    assert!(
        err.contains("--drain-timeout: -1 is not a duration in (0, 1d]"),
        "{err}"
    );
    assert!(!err.contains("tip:"), "{err}");
}

#[test]
fn sizes_and_durations_take_units_on_flags_and_in_the_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = dir_arg(root.path());
    let c = effective(&[
        &dir,
        "--max-body-bytes",
        "1MiB",
        "--drain-timeout",
        "30s",
        "--header-timeout",
        "500ms",
        "--output-buffer-bytes",
        "64k",
        "--memory-cache-bytes",
        "1000000",
    ]);
    assert_eq!(c["max_body_bytes"].as_str(), Some("1MiB"));
    assert_eq!(c["drain_timeout"].as_str(), Some("30s"));
    assert_eq!(c["header_timeout"].as_str(), Some("500ms"));
    assert_eq!(c["output_buffer_bytes"].as_str(), Some("64KiB"));
    // Not a whole number of KiB: shown as bytes.
    assert_eq!(c["memory_cache_bytes"].as_integer(), Some(1_000_000));
    // Bare numbers are still bytes and seconds.
    let c = effective(&[&dir, "--max-body-bytes", "2048", "--drain-timeout", "1.5"]);
    assert_eq!(bytes(&c, "max_body_bytes"), 2048);
    assert_eq!(seconds(&c, "drain_timeout"), 1.5);

    let file = root.path().join("servery.toml");
    std::fs::write(
        &file,
        "max_body_bytes = \"64k\"\ndrain_timeout = \"2m\"\nsend_timeout = 7\n\
         compress_max_bytes = 1048576\n",
    )
    .unwrap();
    let c = effective(&[&dir, "--config", &dir_arg(&file)]);
    assert_eq!(bytes(&c, "max_body_bytes"), 64 * 1024);
    assert_eq!(seconds(&c, "drain_timeout"), 120.0);
    assert_eq!(seconds(&c, "send_timeout"), 7.0);
    assert_eq!(c["compress_max_bytes"].as_str(), Some("1MiB"));

    // Wrong units name the field and the forms.
    let err = refused(&[&dir, "--max-body-bytes", "1.5"]);
    assert!(
        err.contains("--max-body-bytes") && err.contains("1MiB"),
        "{err}"
    );
    let err = refused(&[&dir, "--drain-timeout", "30 parsecs"]);
    assert!(
        err.contains("--drain-timeout") && err.contains("500ms"),
        "{err}"
    );
    std::fs::write(&file, "max_body_bytes = -1\n").unwrap();
    let err = refused(&[&dir, "--config", &dir_arg(&file)]);
    assert!(
        err.contains("max_body_bytes") && err.contains("cannot be negative"),
        "{err}"
    );
}

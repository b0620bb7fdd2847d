//! `[[auth]]`: HTTP Basic authentication of a site's paths (src/auth), the
//! same over HTTP/1.1 and HTTP/2 over TLS (each case asks both ways), both
//! drivers: right, wrong and missing credentials; plain HTTP refused
//! unless `--auth-over-http`; a rewrite that would reach a guarded file; a
//! thousand wrong passwords from one address within a CPU budget; bad
//! users files and realms refused when the config is read.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::time::Instant;

use base64::Engine as _;

use crate::common::h2::{tls_config, Client, Exchange};
use crate::common::{self, cpu_seconds, TestServer};

const SECRET: &[u8] = b"only for staff\n";
const OPEN: &[u8] = b"for everyone\n";

struct Site {
    _tmp: tempfile::TempDir,
    server: TestServer,
}

/// A site whose `/private/**` needs alice's password (a bcrypt hash of
/// `cost`), with `extra` config and `args`.
fn site(driver: &str, cost: u32, extra: &str, args: &[&str]) -> Site {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    for (rel, body) in [
        ("private/a.txt", SECRET),
        ("private/ruled.txt", SECRET),
        ("open.txt", OPEN),
    ] {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    let users = tmp.path().join("users");
    let hash = bcrypt::hash("secret", cost).unwrap();
    fs::write(&users, format!("# staff\nalice:{hash}\n")).unwrap();
    let config = tmp.path().join("servery.toml");
    fs::write(
        &config,
        format!(
            "[[auth]]\nmatch = \"/private/**\"\nusers_file = {:?}\nrealm = \"Staff\"\n\
             [[headers]]\nmatch = \"/private/ruled.txt\"\nset = {{ \"Cache-Control\" = \"no-store\" }}\n\
             {extra}",
            users.display().to_string()
        ),
    )
    .unwrap();
    let server = TestServer::builder()
        .root(&root)
        .driver(driver)
        .tls_self_signed()
        .args(&["--cache-control", "public, max-age=60"])
        .args(args)
        .args(&[OsStr::new("--config"), config.as_os_str()])
        .start();
    Site { _tmp: tmp, server }
}

fn basic(user: &str, password: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {b64}")
}

/// What a case compares: status, the auth fields, the body.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    challenge: Option<String>,
    cache_control: Option<String>,
    retry_after: bool,
    body: Vec<u8>,
}

impl Seen {
    fn of<'a>(status: u16, field: impl Fn(&str) -> Option<&'a str>, body: &[u8]) -> Seen {
        Seen {
            status,
            challenge: field("www-authenticate").map(str::to_owned),
            cache_control: field("cache-control").map(str::to_owned),
            retry_after: field("retry-after").is_some(),
            body: body.to_vec(),
        }
    }
}

impl Site {
    /// `GET path` (with `authorization`) over HTTP/1.1 over TLS.
    fn h1(&self, path: &str, authorization: Option<&str>) -> Seen {
        let config = common::tls::pinned(self.server.fingerprint(), common::tls::TLS13);
        let mut s = common::tls::connected(&config, self.server.https());
        let extra = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
        let r = common::tls::get(&mut s, path, &extra);
        Seen::of(r.status, |n| r.header(n), &r.body)
    }

    /// The same over HTTP/2 (ALPN h2).
    fn h2(&self, path: &str, authorization: Option<&str>) -> Seen {
        let config = tls_config(self.server.fingerprint(), &[b"h2"]);
        let mut client = Client::tls(self.server.https(), config).expect("h2 by ALPN");
        let mut ex = Exchange::get(path);
        if let Some(a) = authorization {
            ex = ex.field("authorization", a);
        }
        let r = client.send(&ex);
        Seen::of(r.status, |n| r.header(n), &r.body)
    }

    /// Both ways, asserted the same: the answer.
    fn both(&self, path: &str, authorization: Option<&str>) -> Seen {
        let one = self.h1(path, authorization);
        let two = self.h2(path, authorization);
        assert_eq!(one, two, "{path} {authorization:?}: HTTP/1.1 then HTTP/2");
        one
    }
}

const CHALLENGE: &str = "Basic realm=\"Staff\", charset=\"UTF-8\"";

fn right_wrong_and_missing_credentials(driver: &str) {
    let site = site(driver, 4, "", &[]);
    let missing = site.both("/private/a.txt", None);
    assert_eq!(missing.status, 401);
    assert_eq!(missing.challenge.as_deref(), Some(CHALLENGE));
    let wrong = site.both("/private/a.txt", Some(&basic("alice", "guess")));
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.challenge.as_deref(), Some(CHALLENGE));
    let nobody = site.both("/private/a.txt", Some(&basic("mallory", "secret")));
    assert_eq!(nobody.status, 401);
    for other in ["Bearer abc", "Basic !!!", "Basic YWxpY2U="] {
        assert_eq!(
            site.both("/private/a.txt", Some(other)).status,
            401,
            "{other}"
        );
    }
    // Right: the file, private whatever --cache-control says.
    let right = site.both("/private/a.txt", Some(&basic("alice", "secret")));
    assert_eq!(right.status, 200);
    assert_eq!(right.body, SECRET);
    assert_eq!(right.cache_control.as_deref(), Some("private"));
    assert_eq!(right.challenge, None);
    // A [[headers]] rule of the path says otherwise.
    let ruled = site.both("/private/ruled.txt", Some(&basic("alice", "secret")));
    assert_eq!(ruled.cache_control.as_deref(), Some("no-store"));
    // A missing file behind the gate is 404 only for those let in.
    assert_eq!(site.both("/private/none", None).status, 401);
    let none = site.both("/private/none", Some(&basic("alice", "secret")));
    assert_eq!(none.status, 404);
    // Dot segments and escapes reach the same gate.
    assert_eq!(site.both("/open/../private/a.txt", None).status, 401);
    assert_eq!(site.both("/%70rivate/a.txt", None).status, 401);
    // Unguarded paths are as before.
    let open = site.both("/open.txt", None);
    assert_eq!(open.status, 200);
    assert_eq!(open.cache_control.as_deref(), Some("public, max-age=60"));
}

fn plain_http_is_refused_unless_allowed(driver: &str) {
    let site = site(driver, 4, "", &[]);
    let right = basic("alice", "secret");
    let mut s = common::connect(site.server.addr());
    write!(
        s,
        "GET /private/a.txt HTTP/1.1\r\nHost: t\r\nAuthorization: {right}\r\n\r\n"
    )
    .unwrap();
    let r = common::read_response(&mut s);
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.header("www-authenticate"), None, "never asks in clear");
    let mut h2c = Client::connect(site.server.addr());
    let a = h2c.send(&Exchange::get("/private/a.txt").field("authorization", &right));
    assert_eq!(a.status, 403);
    drop(site);

    let allowed = self::site(driver, 4, "", &["--auth-over-http"]);
    let mut s = common::connect(allowed.server.addr());
    write!(s, "GET /private/a.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let r = common::read_response(&mut s);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some(CHALLENGE));
    write!(
        s,
        "GET /private/a.txt HTTP/1.1\r\nHost: t\r\nAuthorization: {right}\r\n\r\n"
    )
    .unwrap();
    let r = common::read_response(&mut s);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, SECRET);
}

fn a_rewrite_cannot_reach_around_the_gate(driver: &str) {
    let site = site(
        driver,
        4,
        "[[rewrite]]\nfrom = \"/shared/*\"\nto = \"/private/$1\"\n",
        &[],
    );
    assert_eq!(site.both("/shared/a.txt", None).status, 401);
    let right = site.both("/shared/a.txt", Some(&basic("alice", "secret")));
    assert_eq!(right.status, 200);
    assert_eq!(right.body, SECRET);
}

/// One address guessing: after its burst every answer is 429 with
/// `Retry-After` and costs no hash. At cost 10 (59 ms a hash, release
/// speed: the bcrypt crates are optimized in test builds too) hashing all
/// thousand would take a minute of CPU; the server must stay within 5 s.
#[test]
fn a_thousand_wrong_passwords_from_one_address_stay_within_a_cpu_budget() {
    let site = site("uring", 10, "", &["--auth-over-http"]);
    let pid = site.server.pid();
    let wrong = basic("alice", "guess");
    let mut s = common::connect(site.server.addr());
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    let mut by_status = std::collections::BTreeMap::new();
    for _ in 0..1000 {
        write!(
            s,
            "GET /private/a.txt HTTP/1.1\r\nHost: t\r\nAuthorization: {wrong}\r\n\r\n"
        )
        .unwrap();
        let r = common::read_response(&mut s);
        if r.status == 429 {
            assert!(r.header("retry-after").is_some(), "{r:?}");
        }
        *by_status.entry(r.status).or_insert(0u32) += 1;
    }
    let (cpu, secs) = (cpu_seconds(pid) - cpu0, t0.elapsed().as_secs_f64());
    eprintln!("1,000 wrong passwords: {by_status:?} in {secs:.1} s, server CPU {cpu:.2} s");
    let hashed = by_status.get(&401).copied().unwrap_or(0);
    // The burst, and one more each 6 s the run took.
    let allowed = 10 + (secs / 6.0).ceil() as u32 + 1;
    assert!(hashed >= 10 && hashed <= allowed, "{by_status:?}");
    assert_eq!(hashed + by_status.get(&429).copied().unwrap_or(0), 1000);
    assert!(cpu < 5.0, "server CPU {cpu:.2} s for 1,000 refusals");
    // The right password from that address waits too (it was never
    // verified); the throttle is the address's.
    write!(
        s,
        "GET /private/a.txt HTTP/1.1\r\nHost: t\r\nAuthorization: {}\r\n\r\n",
        basic("alice", "secret")
    )
    .unwrap();
    assert_eq!(common::read_response(&mut s).status, 429);
}

#[test]
fn bad_users_files_and_rules_are_config_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let users = root.join("users");
    let good = format!("alice:{}\n", bcrypt::hash("secret", 4).unwrap());
    let check = |users_body: &str, table: &str| -> (Option<i32>, String) {
        fs::write(&users, users_body).unwrap();
        let config = root.join("servery.toml");
        fs::write(
            &config,
            table.replace("USERS", &users.display().to_string()),
        )
        .unwrap();
        let out = std::process::Command::new(common::BIN)
            .arg("check-config")
            .arg(root)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let table = "[[auth]]\nmatch = \"/p/**\"\nusers_file = \"USERS\"\n";
    assert_eq!(check(&good, table).0, Some(0));
    for (body, want) in [
        (
            format!("{good}bob:$apr1$salt$hash\n"),
            "line 2: user \"bob\": an MD5 hash",
        ),
        (format!("{good}carol\n"), "line 2: not user:hash"),
        (
            format!("{good}dave:secret\n"),
            "line 2: user \"dave\": not a bcrypt",
        ),
        ("# nobody\n".to_owned(), "no users"),
    ] {
        let (code, err) = check(&body, table);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("auth: users_file") && err.contains(want),
            "{want}: {err}"
        );
    }
    let (code, err) = check(
        &good,
        "[[auth]]\nmatch = \"p/**\"\nusers_file = \"USERS\"\n",
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("auth: match"), "{err}");
    // Per site, the same rules.
    let site = "[[site]]\nname = \"a\"\nhosts = [\"a.test\"]\nroot = \"ROOT\"\n\
                [[site.auth]]\nmatch = \"/**\"\nusers_file = \"USERS\"\n"
        .replace("ROOT", &root.display().to_string());
    assert_eq!(check(&good, &site).0, Some(0), "{}", check(&good, &site).1);
    let (code, err) = check("bob:$apr1$x$y\n", &site);
    assert_eq!(code, Some(2));
    assert!(err.contains("site.auth: users_file"), "{err}");
}

driver_tests! {
    right_wrong_and_missing_credentials,
    plain_http_is_refused_unless_allowed,
    a_rewrite_cannot_reach_around_the_gate,
}

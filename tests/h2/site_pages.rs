//! The pages a site answers beyond its files: `--fallback` (a single-page
//! app's shell for a missing path), `[[error_page]]` (a site's own page for
//! an error status), the built-in error answers (HTML for a browser),
//! directory listings (sorted HTML, JSON), and `[[redirect]]` and
//! `[[rewrite]]` rules.
//! Each answers the same over HTTP/1.1 and HTTP/2: each case asks the real
//! binary on a new HTTP/1.1 connection and on one h2c connection, and the
//! two answers must be the same `View` (`common::h2::assert_same`). Both
//! drivers (`driver_tests!` at the bottom).
//!
//! The app's root: `index.html` (the shell, with a `[[headers]]` rule of
//! its own path), `assets/app.js`, `docs/guide/index.html` (a directory
//! with an index, which comes before the fallback), and the error pages
//! `404.html` and `errors/400.html`.

use std::ffi::OsStr;
use std::fs;

use crate::common::h2::{assert_same, Client, Exchange, View};
use crate::common::TestServer;

const SHELL: &[u8] = b"<!doctype html><title>app</title><div id=app></div>\n";
const APP_JS: &[u8] = b"console.log('app');\n";
const GUIDE: &[u8] = b"<title>guide</title>\n";
const PAGE_404: &[u8] = b"<!doctype html><title>Lost?</title><a href=/>home</a>\n";
const PAGE_400: &[u8] = b"<!doctype html><title>That address is broken</title>\n";
/// A browser's navigation `Accept`.
const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// The app's root and config, a server on it, and one h2c connection
/// (`cors` uses it too).
pub(crate) struct App {
    _tmp: tempfile::TempDir,
    server: TestServer,
    h2: Client,
}

impl App {
    pub(crate) fn start(driver: &str, args: &[&str]) -> App {
        App::with_config(driver, args, "")
    }

    /// The app with `config` added to its config file.
    fn with_config(driver: &str, args: &[&str], extra: &str) -> App {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        for (rel, body) in [
            ("index.html", SHELL),
            ("assets/app.js", APP_JS),
            ("docs/guide/index.html", GUIDE),
            ("404.html", PAGE_404),
            ("errors/400.html", PAGE_400),
        ] {
            let p = root.join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(p, body).expect("write fixture");
        }
        let config = tmp.path().join("servery.toml");
        let rule =
            "[[headers]]\nmatch = \"/index.html\"\nset = { \"Cache-Control\" = \"no-cache\" }\n";
        fs::write(&config, format!("{rule}{extra}")).expect("config file");
        let server = TestServer::builder()
            .root(&root)
            .driver(driver)
            .args(args)
            .args(&[OsStr::new("--config"), config.as_os_str()])
            .start();
        let h2 = Client::connect(server.addr());
        App {
            _tmp: tmp,
            server,
            h2,
        }
    }

    /// `ex` over HTTP/1.1 and over HTTP/2, asserted the same: HTTP/2's view.
    /// `ex` over HTTP/1.1 alone.
    pub(crate) fn h1(&self, ex: &Exchange) -> View {
        View::h1(&ex.h1(self.server.addr()))
    }

    pub(crate) fn same(&mut self, ex: &Exchange) -> View {
        let h1 = View::h1(&ex.h1(self.server.addr()));
        let h2 = View::h2(&self.h2.send(ex));
        assert_same(ex, &h1, &h2);
        h2
    }
}

/// A deep link gets the shell as itself (200, its ETag and its own rules);
/// a missing asset stays 404; files and a directory's index come first;
/// a client that has the shell gets 304; HEAD falls back, POST does not;
/// a path that does not resolve is still 400.
fn deep_links_get_the_shell(driver: &str) {
    let mut app = App::start(driver, &["--fallback", "/index.html"]);
    let shell = app.same(&Exchange::get("/index.html"));
    assert_eq!(shell.status, 200);
    let etag = shell.field("etag").expect("the shell's etag").to_owned();
    for path in [
        "/users/42",
        "/users/42/",
        "/a/b/c?tab=2",
        "/docs/missing",
        "/v1.2/users",
    ] {
        let got = app.same(&Exchange::get(path));
        assert_eq!(got.status, 200, "{path}");
        assert!(got.body == SHELL, "{path}: not the shell");
        assert_eq!(got.field("etag"), Some(etag.as_str()), "{path}");
        assert_eq!(got.field("cache-control"), Some("no-cache"), "{path}");
        assert_eq!(
            got.field("content-type"),
            shell.field("content-type"),
            "{path}"
        );
    }
    for path in [
        "/app.js",
        "/assets/missing.css",
        "/img/logo.png",
        "/users/42.json",
    ] {
        assert_eq!(app.same(&Exchange::get(path)).status, 404, "{path}");
    }
    let js = app.same(&Exchange::get("/assets/app.js"));
    assert_eq!((js.status, &js.body[..]), (200, APP_JS));
    let guide = app.same(&Exchange::get("/docs/guide/"));
    assert_eq!((guide.status, &guide.body[..]), (200, GUIDE));
    assert_eq!(app.same(&Exchange::get("/docs/guide")).status, 301);

    let cached = app.same(&Exchange::get("/users/7").field("if-none-match", &etag));
    assert_eq!(cached.status, 304);
    let head = app.same(&Exchange::new("HEAD", "/users/7"));
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        app.same(&Exchange::new("POST", "/users/7").body("x"))
            .status,
        405
    );
    assert_eq!(app.same(&Exchange::get("/users/%zz")).status, 400);
}

/// `--fallback-files`: a missing path that looks like a file gets the
/// shell too (nginx's `try_files` behaviour).
fn fallback_files_answers_missing_assets_too(driver: &str) {
    let mut app = App::start(driver, &["--fallback", "/index.html", "--fallback-files"]);
    for path in ["/app.js", "/users/42", "/img/logo.png"] {
        let got = app.same(&Exchange::get(path));
        assert_eq!(got.status, 200, "{path}");
        assert!(got.body == SHELL, "{path}: not the shell");
    }
    let js = app.same(&Exchange::get("/assets/app.js"));
    assert_eq!((js.status, &js.body[..]), (200, APP_JS));
}

/// A fallback that is missing itself is a plain 404 (it never falls back
/// again), and no fallback leaves every missing path 404.
fn a_missing_fallback_is_404(driver: &str) {
    let mut app = App::start(driver, &["--fallback", "/gone.html", "--fallback-files"]);
    for path in ["/users/42", "/gone.html", "/app.js"] {
        assert_eq!(app.same(&Exchange::get(path)).status, 404, "{path}");
    }
    let mut app = App::start(driver, &[]);
    assert_eq!(app.same(&Exchange::get("/users/42")).status, 404);
}

const PAGES: &str = "[[error_page]]\nstatus = [404, 410]\npath = \"/404.html\"\n\
                     [[error_page]]\nstatus = [400, 412]\npath = \"/errors/400.html\"\n\
                     [[error_page]]\nstatus = [405]\npath = \"/missing-page.html\"\n";

/// A configured page answers its statuses with the status kept and its
/// own content type; a missing page falls back to the built-in answer.
fn error_pages_keep_their_status(driver: &str) {
    let mut app = App::with_config(driver, &[], PAGES);
    for ex in [
        Exchange::get("/missing"),
        Exchange::get("/assets/gone.js").field("accept", BROWSER),
        Exchange::get("/index.html/"),
    ] {
        let got = app.same(&ex);
        assert_eq!(got.status, 404, "{}", ex.path);
        assert!(got.body == PAGE_404, "{}: not the page", ex.path);
        assert_eq!(
            got.field("content-type"),
            Some("text/html; charset=utf-8"),
            "{}",
            ex.path
        );
    }
    let head = app.same(&Exchange::new("HEAD", "/missing"));
    assert_eq!(head.status, 404);
    assert!(head.body.is_empty());
    let bad = app.same(&Exchange::get("/a/%zz"));
    assert_eq!(bad.status, 400);
    assert!(bad.body == PAGE_400, "not the 400 page");
    let failed = app.same(&Exchange::get("/assets/app.js").field("if-match", "\"other\""));
    assert_eq!(failed.status, 412);
    assert!(failed.body == PAGE_400, "not the 412 page");
    // The page for 405 is missing: the built-in answer, `Allow` and all.
    let post = app.same(&Exchange::new("POST", "/assets/app.js").body("x"));
    assert_eq!(post.status, 405);
    assert_eq!(&post.body[..], b"405 Method Not Allowed\n");
    assert!(post.field("allow").is_some());
    // The page is a file too.
    let page = app.same(&Exchange::get("/404.html"));
    assert_eq!((page.status, &page.body[..]), (200, PAGE_404));
    // With a fallback, routes get the shell and missing files the page.
    let mut app = App::with_config(driver, &["--fallback", "/index.html"], PAGES);
    let deep = app.same(&Exchange::get("/users/42"));
    assert_eq!((deep.status, &deep.body[..]), (200, SHELL));
    let asset = app.same(&Exchange::get("/app.js"));
    assert_eq!((asset.status, &asset.body[..]), (404, PAGE_404));
}

/// With no page, a browser gets a small HTML page and anything else a line
/// of text, each marked `Vary: Accept`.
fn built_in_errors_are_html_for_browsers(driver: &str) {
    let mut app = App::start(driver, &[]);
    let page = app.same(&Exchange::get("/missing").field("accept", BROWSER));
    assert_eq!(page.status, 404);
    assert!(page.body.starts_with(b"<!doctype html>"), "{:?}", page.body);
    assert_eq!(page.field("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(page.field("vary"), Some("Accept"));
    for accept in [
        None,
        Some("*/*"),
        Some("application/json"),
        Some("text/html;q=0"),
    ] {
        let mut ex = Exchange::get("/missing");
        if let Some(a) = accept {
            ex = ex.field("accept", a);
        }
        let text = app.same(&ex);
        assert_eq!(text.status, 404, "{accept:?}");
        assert_eq!(&text.body[..], b"404 Not Found\n", "{accept:?}");
        assert_eq!(
            text.field("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(text.field("vary"), Some("Accept"));
    }
}

/// A listing, HTML sorted or JSON, is the same over both protocols.
fn listings_answer_the_same(driver: &str) {
    let mut app = App::start(driver, &["--autoindex"]);
    for path in [
        "/assets/",
        "/docs/?sort=size&order=desc",
        "/docs/?sort=mtime",
    ] {
        let got = app.same(&Exchange::get(path));
        assert_eq!(got.status, 200, "{path}");
        assert_eq!(got.field("content-type"), Some("text/html; charset=utf-8"));
    }
    let mut app = App::start(driver, &["--autoindex", "--autoindex-format", "json"]);
    let got = app.same(&Exchange::get("/assets/"));
    assert_eq!(got.field("content-type"), Some("application/json"));
    let list: Vec<serde_json::Value> = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "app.js");
    assert_eq!(list[0]["size"], APP_JS.len());
}

const RULES: &str = "[[redirect]]\nfrom = \"/old/**\"\nto = \"/assets/$1\"\n\
                     [[redirect]]\nfrom = \"/temp/*\"\nto = \"/docs/$1/\"\nstatus = 302\n\
                     [[redirect]]\nfrom = \"/keep/*\"\nto = \"/assets/$1\"\nstatus = 307\n\
                     [[redirect]]\nfrom = \"/move/*\"\nto = \"/assets/$1?from=move\"\nstatus = 308\n\
                     [[redirect]]\nfrom = \"/away\"\nto = \"https://other.example/\"\n\
                     [[rewrite]]\nfrom = \"/js/*\"\nto = \"/assets/$1\"\n\
                     [[rewrite]]\nfrom = \"/escape/**\"\nto = \"/$1\"\n";

/// Redirects answer their status with a `Location` made from the decoded
/// path (captures encoded, the query kept unless replaced); rewrites
/// answer the other file at once; neither escapes the root.
fn redirects_and_rewrites_answer_the_same(driver: &str) {
    let mut app = App::with_config(driver, &[], RULES);
    for (path, status, location) in [
        ("/old/app.js", 301, "/assets/app.js"),
        ("/old/a/b.js?v=2", 301, "/assets/a/b.js?v=2"),
        ("/temp/guide", 302, "/docs/guide/"),
        ("/keep/app.js", 307, "/assets/app.js"),
        ("/move/app.js?x=1", 308, "/assets/app.js?from=move"),
        ("/away?q=1", 301, "https://other.example/?q=1"),
        // Decoded, then encoded: what the client sent is never echoed raw.
        (
            "/old/%0D%0ASet-Cookie:%20x",
            301,
            "/assets/%0D%0ASet-Cookie:%20x",
        ),
        ("/old/a%2520b", 301, "/assets/a%2520b"),
        ("/old/../old/app.js", 301, "/assets/app.js"),
    ] {
        let got = app.same(&Exchange::get(path));
        assert_eq!(got.status, status, "{path}");
        assert_eq!(got.field("location"), Some(location), "{path}");
    }
    // Every method is redirected (a POST gets its 307/308 to repeat).
    let post = app.same(&Exchange::new("POST", "/keep/app.js").body("x"));
    assert_eq!(
        (post.status, post.field("location")),
        (307, Some("/assets/app.js"))
    );
    let js = app.same(&Exchange::get("/js/app.js"));
    assert_eq!((js.status, &js.body[..]), (200, APP_JS));
    assert_eq!(app.same(&Exchange::get("/js/missing.js")).status, 404);
    // A rewrite's result resolves as any path: it cannot climb out.
    let out = app.same(&Exchange::get("/escape/..%2F..%2Fetc%2Fpasswd"));
    assert_eq!(out.status, 400);
    let inside = app.same(&Exchange::get("/escape/assets/app.js"));
    assert_eq!((inside.status, &inside.body[..]), (200, APP_JS));
}

driver_tests! {
    redirects_and_rewrites_answer_the_same,
    listings_answer_the_same,
    deep_links_get_the_shell,
    fallback_files_answers_missing_assets_too,
    a_missing_fallback_is_404,
    error_pages_keep_their_status,
    built_in_errors_are_html_for_browsers,
}

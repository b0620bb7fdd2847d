//! A `[[headers]]` rule matching every path (`/**`) is on every kind of
//! answer, over HTTP/1.1 and over HTTP/2: a file (200), a range of it
//! (206), a revalidation (304), a missing file (404), a range past its end
//! (416), the redirect to a directory's slash (301) and an app's response.
//! An operator adding `Strict-Transport-Security` or a CSP this way expects
//! it on error pages and redirects too (nginx's `add_header ... always`).

#[macro_use]
mod common;

use common::app::AppServer;
use common::h2::{Client, Exchange, View};
use common::{ConfigFile, TestServer};
use servery::app::{MakeError, Request, Response, Service};

/// An app that answers every request with the same 200.
struct Hello;

impl Service for Hello {
    type Body = servery::app::Body;

    async fn call(&self, _req: Request) -> Response {
        Response::new("from the app\n".into())
    }
}

const RULE: &str = "[[headers]]\nmatch = \"/**\"\nset = { \"X-Rule\" = \"everywhere\" }\n";

fn server(config: &ConfigFile) -> TestServer {
    TestServer::builder()
        .file("a.txt", "hello, rules\n")
        .file("dir/index.html", "<p>dir</p>\n")
        .args(&["--config", config.arg()])
        .start()
}

/// `ex` over HTTP/1.1 and over h2c: both answers, which must have `status`
/// and carry the rule's field.
fn both(server: &TestServer, ex: &Exchange, status: u16) -> (View, View) {
    let h1 = View::h1(&ex.h1(server.addr()));
    let h2 = View::h2(&Client::connect(server.addr()).send(ex));
    for (protocol, view) in [("HTTP/1.1", &h1), ("HTTP/2", &h2)] {
        assert_eq!(view.status, status, "{protocol} {}: {view:?}", ex.path);
        assert_eq!(
            view.fields.get("x-rule").map(Vec::as_slice),
            Some(&["everywhere".to_owned()][..]),
            "{protocol} {}: {view:?}",
            ex.path
        );
    }
    (h1, h2)
}

#[test]
fn a_rule_is_on_a_200() {
    let config = ConfigFile::new(RULE);
    both(&server(&config), &Exchange::get("/a.txt"), 200);
}

#[test]
fn a_rule_is_on_a_206() {
    let config = ConfigFile::new(RULE);
    let (h1, _) = both(
        &server(&config),
        &Exchange::get("/a.txt").field("range", "bytes=0-4"),
        206,
    );
    assert_eq!(h1.body, b"hello");
}

#[test]
fn a_rule_is_on_a_304() {
    let config = ConfigFile::new(RULE);
    let server = server(&config);
    let etag = server.get("/a.txt").header("etag").unwrap().to_owned();
    both(
        &server,
        &Exchange::get("/a.txt").field("if-none-match", &etag),
        304,
    );
}

#[test]
fn a_rule_is_on_a_404() {
    let config = ConfigFile::new(RULE);
    both(&server(&config), &Exchange::get("/missing.txt"), 404);
}

#[test]
fn a_rule_is_on_a_416() {
    let config = ConfigFile::new(RULE);
    let (h1, _) = both(
        &server(&config),
        &Exchange::get("/a.txt").field("range", "bytes=1000-"),
        416,
    );
    assert_eq!(h1.field("content-range"), Some("bytes */13"));
}

#[test]
fn a_rule_is_on_a_redirect() {
    let config = ConfigFile::new(RULE);
    let (h1, _) = both(&server(&config), &Exchange::get("/dir"), 301);
    assert_eq!(h1.field("location"), Some("/dir/"));
}

#[test]
fn a_rule_is_on_an_app_response() {
    let server = AppServer::builder()
        .raw(|raw| {
            raw.headers = toml::from_str::<servery::config::RawConfig>(RULE)
                .expect("the rule parses")
                .headers;
        })
        .start(|_worker: usize| Ok::<_, MakeError>(Hello));
    let ex = Exchange::get("/anything");
    let h1 = View::h1(&ex.h1(server.addr()));
    let h2 = View::h2(&Client::connect(server.addr()).send(&ex));
    for (protocol, view) in [("HTTP/1.1", &h1), ("HTTP/2", &h2)] {
        assert_eq!(view.status, 200, "{protocol}: {view:?}");
        assert_eq!(view.body, b"from the app\n", "{protocol}");
        assert_eq!(
            view.field("x-rule"),
            Some("everywhere"),
            "{protocol}: {view:?}"
        );
    }
}

//! Cross-origin reads (`--cors-*`) answer the same over HTTP/1.1 and
//! HTTP/2 (`site_pages::App`: each request on both, the views compared),
//! both drivers. A listed origin reads files and errors; any other origin
//! gets no CORS field and is never echoed; a preflight from a listed
//! origin gets the allowed methods and fields; `*` is one fixed field.

use crate::common::h2::{Exchange, View};
use crate::site_pages::App;

const APP: &str = "https://app.example";
const OTHER: &str = "https://evil.example";

/// Whether any `Vary` field of `v` names `Origin`.
fn vary_has_origin(v: &View) -> bool {
    v.fields.get("vary").is_some_and(|all| {
        all.iter()
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("origin"))
    })
}

fn listed_origins_read_and_others_do_not(driver: &str) {
    let origins = format!("{APP},http://localhost:8080");
    let mut app = App::start(
        driver,
        &[
            "--cors-allow-origins",
            &origins,
            "--cors-allow-credentials",
            "--cors-allow-headers",
            "Content-Type,X-Token",
        ],
    );
    for path in ["/assets/app.js", "/missing.js", "/docs/guide"] {
        let got = app.same(&Exchange::get(path).field("origin", APP));
        assert_eq!(
            got.field("access-control-allow-origin"),
            Some(APP),
            "{path}"
        );
        assert_eq!(
            got.field("access-control-allow-credentials"),
            Some("true"),
            "{path}"
        );
        assert!(
            vary_has_origin(&got),
            "{path}: {:?}",
            got.fields.get("vary")
        );
        let other = app.same(&Exchange::get(path).field("origin", OTHER));
        assert_eq!(other.field("access-control-allow-origin"), None, "{path}");
        assert_eq!(
            other.field("access-control-allow-credentials"),
            None,
            "{path}"
        );
        assert!(vary_has_origin(&other), "{path}");
        let none = app.same(&Exchange::get(path));
        assert_eq!(none.field("access-control-allow-origin"), None, "{path}");
        assert!(vary_has_origin(&none), "{path}");
    }
    // Origins compare as browsers send them: another port is another origin.
    let port = app.same(&Exchange::get("/assets/app.js").field("origin", "http://localhost:8081"));
    assert_eq!(port.field("access-control-allow-origin"), None);

    let preflight = |origin: &str| {
        Exchange::new("OPTIONS", "/assets/app.js")
            .field("origin", origin)
            .field("access-control-request-method", "PUT")
            .field("access-control-request-headers", "content-type")
    };
    let ok = app.same(&preflight(APP));
    assert_eq!(ok.status, 204);
    assert_eq!(ok.field("access-control-allow-origin"), Some(APP));
    assert_eq!(ok.field("access-control-allow-methods"), Some("GET, HEAD"));
    assert_eq!(
        ok.field("access-control-allow-headers"),
        Some("content-type, x-token")
    );
    assert_eq!(ok.field("access-control-max-age"), Some("600"));
    assert_eq!(ok.field("access-control-allow-credentials"), Some("true"));
    assert!(vary_has_origin(&ok));
    let refused = app.same(&preflight(OTHER));
    assert_eq!(refused.status, 204);
    assert_eq!(refused.field("access-control-allow-origin"), None);
    assert!(refused.field("allow").is_some());
    // An `Origin` past the head limits is refused, never echoed: 20 KiB is
    // 431 both ways; 64 KiB is 431 over HTTP/1.1 and, over HTTP/2, past
    // the field-block bound, which ends the connection (tests/h2_attacks).
    let long = format!("https://{}.example", "a".repeat(20 * 1024));
    let got = app.same(&Exchange::get("/assets/app.js").field("origin", &long));
    assert_eq!(got.status, 431);
    assert_eq!(got.field("access-control-allow-origin"), None);
    let huge = format!("https://{}.example", "a".repeat(64 * 1024));
    let h1 = app.h1(&Exchange::get("/assets/app.js").field("origin", &huge));
    assert_eq!(h1.status, 431);
    assert_eq!(h1.field("access-control-allow-origin"), None);
}

fn any_origin_is_one_fixed_field(driver: &str) {
    let mut app = App::start(
        driver,
        &["--cors-allow-origins", "*", "--cors-max-age", "2h"],
    );
    for (path, origin) in [
        ("/assets/app.js", Some(OTHER)),
        ("/missing.js", Some(APP)),
        ("/assets/app.js", None),
    ] {
        let mut ex = Exchange::get(path);
        if let Some(o) = origin {
            ex = ex.field("origin", o);
        }
        let got = app.same(&ex);
        assert_eq!(
            got.field("access-control-allow-origin"),
            Some("*"),
            "{path} {origin:?}"
        );
        assert!(!vary_has_origin(&got), "{path}");
    }
    let pre = app.same(
        &Exchange::new("OPTIONS", "/x")
            .field("origin", OTHER)
            .field("access-control-request-method", "GET"),
    );
    assert_eq!(pre.status, 204);
    assert_eq!(pre.field("access-control-allow-origin"), Some("*"));
    assert_eq!(pre.field("access-control-max-age"), Some("7200"));
    assert_eq!(pre.field("access-control-allow-headers"), None);
}

driver_tests! {
    listed_origins_read_and_others_do_not,
    any_origin_is_one_fixed_field,
}

//! Spike for docs/decisions/0006: an axum Router on a monoio runtime, with no
//! tokio in the build, and what a Router call and an owned `http::Request`
//! head cost on one core.
//!
//! `cargo build --release --manifest-path bench/spikes/axum-on-monoio/Cargo.toml`
//! then `taskset -c 0 bench/spikes/axum-on-monoio/target/release/axum-on-monoio`.

use axum::{extract::Path, routing::{get, post}, Json, Router};
use http_body_util::{BodyExt, Full};
use tower::{Service, ServiceExt};

#[derive(serde::Deserialize, serde::Serialize)]
struct Item { name: String, n: u32 }

async fn hello() -> &'static str { "hello" }
async fn item(Path(id): Path<u32>) -> Json<Item> { Json(Item { name: "x".into(), n: id }) }
async fn echo(Json(i): Json<Item>) -> Json<Item> { Json(Item { name: i.name, n: i.n + 1 }) }

fn main() {
    let app: Router = Router::new()
        .route("/", get(hello))
        .route("/item/{id}", get(item))
        .route("/echo", post(echo));
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    rt.block_on(async move {
        let mut svc = app.clone();
        for (m, uri, body) in [("GET", "/", ""), ("GET", "/item/7", ""), ("POST", "/echo", r#"{"name":"a","n":1}"#), ("GET", "/nope", "")] {
            let req = http::Request::builder().method(m).uri(uri)
                .header("content-type", "application/json")
                .body(axum::body::Body::new(Full::new(bytes::Bytes::from(body)))).unwrap();
            let resp = ServiceExt::<http::Request<axum::body::Body>>::ready(&mut svc).await.unwrap().call(req).await.unwrap();
            let status = resp.status();
            let b = resp.into_body().collect().await.unwrap().to_bytes();
            println!("{m} {uri} -> {status} {}", String::from_utf8_lossy(&b));
        }
        // A Router call on this runtime, timed.
        let t = std::time::Instant::now();
        let n = 200_000;
        for _ in 0..n {
            let req = http::Request::builder().uri("/item/3").body(axum::body::Body::empty()).unwrap();
            let resp = ServiceExt::<http::Request<axum::body::Body>>::ready(&mut svc).await.unwrap().call(req).await.unwrap();
            let _ = resp.into_body().collect().await.unwrap();
        }
        println!("{:.0} ns per Router call (JSON GET, incl. body collect)", t.elapsed().as_nanos() as f64 / n as f64);
        // Building the request head in http's types from parsed slices, as servery would.
        let raw: [(&[u8], &[u8]); 6] = [(b"Host", b"example.com"), (b"User-Agent", b"curl/8.5.0"), (b"Accept", b"*/*"),
            (b"Accept-Encoding", b"gzip, br"), (b"Connection", b"keep-alive"), (b"X-Request-Id", b"0123456789abcdef")];
        let shared = bytes::Bytes::from_static(b"GET /static/app.css?v=3 HTTP/1.1");
        let t = std::time::Instant::now();
        let mut total = 0usize;
        for _ in 0..n {
            let mut headers = http::HeaderMap::with_capacity(8);
            for (k, v) in raw {
                headers.append(http::HeaderName::from_bytes(k).unwrap(), http::HeaderValue::from_bytes(v).unwrap());
            }
            let uri = http::Uri::from_maybe_shared(shared.slice(4..23)).unwrap();
            let mut req = http::Request::new(());
            *req.uri_mut() = uri;
            *req.headers_mut() = headers;
            total += std::hint::black_box(&req).headers().len();
        }
        println!("{:.0} ns per http::Request head (6 fields) [{total}]", t.elapsed().as_nanos() as f64 / n as f64);
        // The same with values sliced from one shared buffer (servery's app::head).
        let wire = bytes::Bytes::from_static(b"example.comcurl/8.5.0*/*gzip, brkeep-alive0123456789abcdef");
        let mut at = 0;
        let spans: Vec<(&[u8], std::ops::Range<usize>)> = raw.iter().map(|(k, v)| { let r = at..at + v.len(); at += v.len(); (*k, r) }).collect();
        let t = std::time::Instant::now();
        for _ in 0..n {
            let mut headers = http::HeaderMap::with_capacity(8);
            for (k, r) in &spans {
                headers.append(http::HeaderName::from_bytes(k).unwrap(), http::HeaderValue::from_maybe_shared(wire.slice(r.clone())).unwrap());
            }
            let uri = http::Uri::from_maybe_shared(shared.slice(4..23)).unwrap();
            let mut req = http::Request::new(());
            *req.uri_mut() = uri;
            *req.headers_mut() = headers;
            total += std::hint::black_box(&req).headers().len();
        }
        println!("{:.0} ns per http::Request head (6 fields, values shared) [{total}]", t.elapsed().as_nanos() as f64 / n as f64);
    });
}

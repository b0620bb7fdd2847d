//! Serializing a request once, head and body together, so the hot path only copies bytes.

/// The `User-Agent` the generator announces, so server logs can tell load from real traffic.
const USER_AGENT: &str = concat!("servery-load/", env!("CARGO_PKG_VERSION"));

/// What to send, apart from where: the method, the target, the extra headers and the body.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape<'a> {
    /// A token (checked by `Plan::check`), e.g. `GET` or `POST`.
    pub(crate) method: &'a str,
    /// Origin-form target: path and query.
    pub(crate) path: &'a str,
    /// Extra fields, in order; they override the defaults of the same name.
    pub(crate) headers: &'a [(String, String)],
    /// Sent after the head with its `Content-Length`; `None` sends neither.
    pub(crate) body: Option<&'a [u8]>,
    /// Ask the server to close after answering.
    pub(crate) close: bool,
}

/// Builds `{method} {path} HTTP/1.1` with `Host`, `User-Agent`, the extra headers and, when
/// `close` is set, `Connection: close` (RFC 9112 §9.6) so the server ends the connection after
/// answering. A body goes right after the head, framed by `Content-Length` (RFC 9112 §6.2;
/// `Plan::check` refuses a body with a `Content-Length` or `Transfer-Encoding` of the
/// caller's, so the framing cannot disagree with the bytes).
pub(crate) fn serialize(shape: &Shape<'_>, host: &str) -> Vec<u8> {
    let has = |name: &str| {
        shape
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let mut out = format!("{} {} HTTP/1.1\r\n", shape.method, shape.path);
    if !has("host") {
        out.push_str(&format!("Host: {host}\r\n"));
    }
    if !has("user-agent") {
        out.push_str(&format!("User-Agent: {USER_AGENT}\r\n"));
    }
    for (name, value) in shape.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if shape.close && !has("connection") {
        out.push_str("Connection: close\r\n");
    }
    if let Some(body) = shape.body {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(shape.body.unwrap_or_default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(path: &'a str, headers: &'a [(String, String)], close: bool) -> Shape<'a> {
        Shape {
            method: "GET",
            path,
            headers,
            body: None,
            close,
        }
    }

    #[test]
    fn writes_host_agent_and_terminator() {
        let req = serialize(&get("/a?b=1", &[], false), "127.0.0.1:8080");
        let text = String::from_utf8(req).expect("ascii");
        assert!(text.starts_with("GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(text.contains("User-Agent: servery-load/"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.contains("Connection"));
        assert!(!text.contains("Content-Length"));
    }

    #[test]
    fn extra_headers_override_defaults_and_close_is_added() {
        let headers = vec![
            ("Host".to_string(), "example".to_string()),
            ("Accept".to_string(), "*/*".to_string()),
        ];
        let text = String::from_utf8(serialize(&get("/", &headers, true), "h:1")).expect("ascii");
        assert_eq!(text.matches("Host:").count(), 1);
        assert!(text.contains("Host: example\r\n"));
        assert!(text.contains("Accept: */*\r\n"));
        assert!(text.contains("Connection: close\r\n"));
    }

    #[test]
    fn a_body_follows_the_head_with_its_content_length() {
        let body: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        let shape = Shape {
            method: "POST",
            body: Some(&body),
            ..get("/digest", &[], false)
        };
        let req = serialize(&shape, "h:1");
        let end = req
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("head end")
            + 4;
        let head = std::str::from_utf8(&req[..end]).expect("ascii");
        assert!(head.starts_with("POST /digest HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Length: 4096\r\n"), "{head}");
        assert_eq!(&req[end..], &body[..]);
        let empty = Shape {
            body: Some(&[]),
            ..shape
        };
        let text = String::from_utf8(serialize(&empty, "h:1")).expect("ascii");
        assert!(text.ends_with("Content-Length: 0\r\n\r\n"), "{text}");
    }
}

//! Serializing a GET request once, so the hot path only copies bytes.

/// The `User-Agent` the generator announces, so server logs can tell load from real traffic.
const USER_AGENT: &str = concat!("servery-load/", env!("CARGO_PKG_VERSION"));

/// Builds `GET {path} HTTP/1.1` with `Host`, `User-Agent`, the extra `headers` (which override
/// the defaults of the same name) and, when `close` is set, `Connection: close`
/// (RFC 9112 §9.6) so the server ends the connection after answering.
pub(crate) fn serialize(
    path: &str,
    host: &str,
    headers: &[(String, String)],
    close: bool,
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut out = format!("GET {path} HTTP/1.1\r\n");
    if !has("host") {
        out.push_str(&format!("Host: {host}\r\n"));
    }
    if !has("user-agent") {
        out.push_str(&format!("User-Agent: {USER_AGENT}\r\n"));
    }
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if close && !has("connection") {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_host_agent_and_terminator() {
        let req = serialize("/a?b=1", "127.0.0.1:8080", &[], false);
        let text = String::from_utf8(req).expect("ascii");
        assert!(text.starts_with("GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(text.contains("User-Agent: servery-load/"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.contains("Connection"));
    }

    #[test]
    fn extra_headers_override_defaults_and_close_is_added() {
        let headers = vec![
            ("Host".to_string(), "example".to_string()),
            ("Accept".to_string(), "*/*".to_string()),
        ];
        let text = String::from_utf8(serialize("/", "h:1", &headers, true)).expect("ascii");
        assert_eq!(text.matches("Host:").count(), 1);
        assert!(text.contains("Host: example\r\n"));
        assert!(text.contains("Accept: */*\r\n"));
        assert!(text.contains("Connection: close\r\n"));
    }
}

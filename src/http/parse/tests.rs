//! Unit tests of `http::parse` (their own file: the module is long).

use super::*;

fn limits() -> Limits {
    Limits {
        max_head_bytes: 1024,
        max_request_line_bytes: 256,
        max_headers: 8,
    }
}

fn ok(buf: &[u8]) -> (Head<'_>, usize) {
    parse(buf, &limits()).unwrap().unwrap()
}

#[test]
fn parses_simple_get() {
    let buf = b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\nrest";
    let (h, n) = ok(buf);
    assert_eq!(n, buf.len() - 4);
    assert_eq!(h.method, Method::Get);
    assert_eq!(h.path(), b"/a");
    assert_eq!(h.query(), Some(&b"b=1"[..]));
    assert!(h.keep_alive);
    assert_eq!(h.host, Some(&b"x"[..]));
}

#[test]
fn partial_head_needs_more() {
    assert!(parse(b"GET / HTTP/1.1\r\nHost:", &limits())
        .unwrap()
        .is_none());
}

#[test]
fn long_request_line_is_uri_too_long() {
    let mut buf = b"GET /".to_vec();
    buf.extend(std::iter::repeat_n(b'a', 300));
    assert!(matches!(
        parse(&buf, &limits()),
        Err(ParseError::UriTooLong { .. })
    ));
    buf.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(matches!(
        parse(&buf, &limits()),
        Err(ParseError::UriTooLong { .. })
    ));
}

#[test]
fn oversized_head_is_431() {
    let mut buf = b"GET / HTTP/1.1\r\nX: ".to_vec();
    buf.extend(std::iter::repeat_n(b'a', 2000));
    assert!(matches!(
        parse(&buf, &limits()),
        Err(ParseError::HeadTooLarge { .. })
    ));
}

#[test]
fn too_many_headers_is_431() {
    let mut buf = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..9 {
        buf.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    buf.extend_from_slice(b"\r\n");
    assert!(matches!(
        parse(&buf, &limits()),
        Err(ParseError::TooManyHeaders { .. })
    ));
}

#[test]
fn content_length_with_transfer_encoding_is_rejected() {
    let buf =
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(
        parse(buf, &limits()),
        Err(ParseError::ContentLengthWithTransferEncoding)
    ));
}

#[test]
fn content_length_with_any_transfer_encoding_is_rejected_first() {
    for te in ["gzip, chunked", "gzip", "chunked, chunked"] {
        let buf = format!(
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {te}\r\nContent-Length: 0\r\n\r\n"
        );
        assert!(
            matches!(
                parse(buf.as_bytes(), &limits()),
                Err(ParseError::ContentLengthWithTransferEncoding)
            ),
            "{te}"
        );
    }
}

/// Parse a 1.1 request with these Transfer-Encoding field values.
fn with_te(values: &[&str]) -> Result<TransferEncoding, ParseError> {
    let mut buf = String::from("POST / HTTP/1.1\r\nHost: x\r\n");
    for v in values {
        buf.push_str(&format!("Transfer-Encoding: {v}\r\n"));
    }
    buf.push_str("\r\n");
    parse(buf.as_bytes(), &limits()).map(|r| r.unwrap().0.transfer_encoding)
}

#[test]
fn chunked_transfer_encoding_is_recorded() {
    assert_eq!(with_te(&[]).unwrap(), TransferEncoding::Absent);
    for values in [
        &["chunked"][..],
        &["Chunked"],
        &["CHUNKED"],
        &[" \tchunked\t "],
        // RFC 9110 §5.6.1.2: empty list elements are ignored.
        &[", chunked ,"],
        &["", "chunked"],
    ] {
        assert_eq!(
            with_te(values).unwrap(),
            TransferEncoding::Chunked,
            "{values:?}"
        );
    }
}

#[test]
fn transfer_encoding_not_ending_in_chunked_is_400() {
    for values in [
        &["gzip"][..],
        &["identity"],
        &["chunked, gzip"],
        &["chunked", "gzip"],
        &[""],
        &[" , "],
    ] {
        let e = with_te(values).unwrap_err();
        assert!(
            matches!(e, ParseError::TransferEncodingNotChunked),
            "{values:?}: {e}"
        );
        assert_eq!(e.status(), crate::http::Status::BAD_REQUEST);
    }
}

#[test]
fn chunked_applied_twice_is_400() {
    for values in [
        &["chunked, chunked"][..],
        &["chunked", "chunked"],
        &["chunked,gzip,chunked"],
    ] {
        let e = with_te(values).unwrap_err();
        assert!(matches!(e, ParseError::RepeatedChunked), "{values:?}: {e}");
        assert_eq!(e.status(), crate::http::Status::BAD_REQUEST);
    }
}

#[test]
fn unknown_coding_before_chunked_is_501() {
    for values in [
        &["gzip, chunked"][..],
        &["GZIP,chunked"],
        &["gzip", "chunked"],
        &["x-custom;p=1, chunked"],
    ] {
        let e = with_te(values).unwrap_err();
        assert!(
            matches!(e, ParseError::UnsupportedTransferEncoding),
            "{values:?}: {e}"
        );
        assert_eq!(e.status(), crate::http::Status::NOT_IMPLEMENTED);
    }
}

#[test]
fn malformed_transfer_encoding_is_400() {
    for values in [
        &["chun ked"][..],
        &["chunked;x=1"],
        &["chunked, chunked;x=1"],
        &["@, chunked"],
        &[";a, chunked"],
        &["\"gzip\", chunked"],
    ] {
        let e = with_te(values).unwrap_err();
        assert!(
            matches!(e, ParseError::MalformedTransferEncoding),
            "{values:?}: {e}"
        );
        assert_eq!(e.status(), crate::http::Status::BAD_REQUEST);
    }
}

#[test]
fn transfer_encoding_on_http10_is_400() {
    let buf = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let e = parse(buf, &limits()).unwrap_err();
    assert!(matches!(e, ParseError::TransferEncodingOnHttp10), "{e}");
    assert_eq!(e.status(), crate::http::Status::BAD_REQUEST);
}

#[test]
fn non_digit_content_length_is_rejected() {
    for v in ["+1", "-1", "1 2", "0x10", "", "99999999999999999999999"] {
        let buf = format!("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: {v}\r\n\r\n");
        assert!(
            matches!(
                parse(buf.as_bytes(), &limits()),
                Err(ParseError::InvalidContentLength)
            ),
            "{v}"
        );
    }
}

#[test]
fn repeated_content_length_must_agree() {
    let same = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(ok(same).0.content_length, Some(3));
    let diff = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
    assert!(matches!(
        parse(diff, &limits()),
        Err(ParseError::ConflictingContentLength)
    ));
    let list = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\n";
    assert!(matches!(
        parse(list, &limits()),
        Err(ParseError::ConflictingContentLength)
    ));
}

#[test]
fn missing_or_repeated_host_on_11_is_rejected() {
    assert!(matches!(
        parse(b"GET / HTTP/1.1\r\n\r\n", &limits()),
        Err(ParseError::BadHost { count: 0 })
    ));
    assert!(matches!(
        parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &limits()),
        Err(ParseError::BadHost { count: 2 })
    ));
    assert!(ok(b"GET / HTTP/1.0\r\n\r\n").0.host.is_none());
}

#[test]
fn keep_alive_defaults_follow_version() {
    assert!(!ok(b"GET / HTTP/1.0\r\n\r\n").0.keep_alive);
    assert!(
        ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .0
            .keep_alive
    );
    assert!(
        !ok(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .0
            .keep_alive
    );
}

#[test]
fn rejects_obs_fold() {
    let buf = b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n";
    assert!(matches!(
        parse(buf, &limits()),
        Err(ParseError::Malformed(_))
    ));
}

#[test]
fn skips_leading_empty_lines() {
    let buf = b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let (_, n) = ok(buf);
    assert_eq!(n, buf.len());
}

#[test]
fn absolute_form_becomes_origin_form() {
    let (h, _) = ok(b"GET http://example.com/a/b?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(h.target, b"/a/b?q=1");
    let (h, _) = ok(b"GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(h.target, b"/");
}

fn host_error(buf: &[u8]) -> (bool, host::Error) {
    match parse(buf, &limits()) {
        Err(ParseError::InvalidHost { in_target, error }) => (in_target, error),
        other => panic!("expected InvalidHost, got {other:?}"),
    }
}

#[test]
fn valid_host_forms_are_accepted() {
    for value in [
        "example.com",
        "example.com:8080",
        "127.0.0.1",
        "[::1]:80",
        "host:",
        "[v1.x]",
    ] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
        let (h, _) = ok(buf.as_bytes());
        assert_eq!(h.host, Some(value.as_bytes()), "{value}");
    }
}

#[test]
fn empty_host_value_is_accepted() {
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
    assert_eq!(h.host, Some(&b""[..]));
}

#[test]
fn host_value_is_validated_after_trimming_ows() {
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: \t example.com:80 \t\r\n\r\n");
    assert_eq!(h.host, Some(&b"example.com:80"[..]));
}

#[test]
fn invalid_host_value_is_rejected() {
    for (value, want) in [
        ("user@example.com", host::Error::UserInfo { at: 4 }),
        ("example.com/x", host::Error::Path { byte: b'/', at: 11 }),
        ("a, b", host::Error::List { at: 1 }),
        ("a b", host::Error::BadChar { byte: b' ', at: 1 }),
        (
            "example.com:http",
            host::Error::BadPort { byte: b'h', at: 12 },
        ),
        (
            "example.com:65536",
            host::Error::PortOutOfRange { value: 65536 },
        ),
        ("[::1", host::Error::UnbalancedBracket { at: 0 }),
    ] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
        assert_eq!(host_error(buf.as_bytes()), (false, want), "{value}");
    }
}

#[test]
fn invalid_host_is_400() {
    let err = parse(b"GET / HTTP/1.1\r\nHost: u@x\r\n\r\n", &limits()).unwrap_err();
    assert_eq!(err.status(), crate::http::Status::BAD_REQUEST);
    assert_eq!(
        err.to_string(),
        "invalid Host authority: `@` at byte 1: userinfo is not allowed"
    );
}

#[test]
fn invalid_host_on_10_is_rejected() {
    assert_eq!(
        host_error(b"GET / HTTP/1.0\r\nHost: a/b\r\n\r\n"),
        (false, host::Error::Path { byte: b'/', at: 1 })
    );
}

#[test]
fn host_count_is_checked_before_the_value() {
    assert!(matches!(
        parse(b"GET / HTTP/1.1\r\nHost: a b\r\nHost: c\r\n\r\n", &limits()),
        Err(ParseError::BadHost { count: 2 })
    ));
}

#[test]
fn absolute_form_authority_wins_over_host() {
    let (h, _) = ok(b"GET http://example.com/file.txt HTTP/1.1\r\nHost: other\r\n\r\n");
    assert_eq!(h.host, Some(&b"example.com"[..]));
    assert_eq!(h.target, b"/file.txt");
    let (h, _) = ok(b"GET https://[::1]:8443?q HTTP/1.1\r\nHost: other\r\n\r\n");
    assert_eq!(h.host, Some(&b"[::1]:8443"[..]));
    assert_eq!(h.target, b"/");
    let (h, _) = ok(b"GET http://example.com:8080 HTTP/1.1\r\nHost: other\r\n\r\n");
    assert_eq!(h.host, Some(&b"example.com:8080"[..]));
}

#[test]
fn absolute_form_on_10_needs_no_host_field() {
    let (h, _) = ok(b"GET http://example.com/a HTTP/1.0\r\n\r\n");
    assert_eq!(h.host, Some(&b"example.com"[..]));
}

#[test]
fn absolute_form_with_bad_authority_is_rejected() {
    for (target, want) in [
        ("http://u@x/file.txt", host::Error::UserInfo { at: 1 }),
        ("http://u:p@x/", host::Error::UserInfo { at: 3 }),
        (
            "http://x:99999/",
            host::Error::PortOutOfRange { value: 99999 },
        ),
        ("http://x:8o/", host::Error::BadPort { byte: b'o', at: 3 }),
        ("http://[::1/", host::Error::UnbalancedBracket { at: 0 }),
        ("http://x,y/", host::Error::List { at: 1 }),
        // RFC 9110 §4.2.1: an http URI's host must not be empty.
        ("http:///file.txt", host::Error::EmptyHost),
        ("http://:80/", host::Error::EmptyHost),
    ] {
        let buf = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(host_error(buf.as_bytes()), (true, want), "{target}");
    }
}

#[test]
fn absolute_form_still_needs_exactly_one_host_on_11() {
    assert!(matches!(
        parse(b"GET http://example.com/ HTTP/1.1\r\n\r\n", &limits()),
        Err(ParseError::BadHost { count: 0 })
    ));
}

#[test]
fn host_field_is_validated_even_with_absolute_form() {
    assert_eq!(
        host_error(b"GET http://example.com/ HTTP/1.1\r\nHost: a b\r\n\r\n"),
        (false, host::Error::BadChar { byte: b' ', at: 1 })
    );
}

#[test]
fn origin_form_has_no_authority() {
    assert_eq!(origin_form(b"/a?b"), (None, &b"/a?b"[..]));
    assert_eq!(origin_form(b"*"), (None, &b"*"[..]));
    assert_eq!(
        origin_form(b"HTTP://h:1/p"),
        (Some(&b"h:1"[..]), &b"/p"[..])
    );
}

#[test]
fn other_methods_are_other() {
    let (h, _) = ok(b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(h.method, Method::Other);
    assert_eq!(h.method_token, "DELETE");
}

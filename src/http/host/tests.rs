//! Unit tests of `http::host` (their own file: the module is long).

use super::*;

fn name(value: &[u8]) -> Name<'_> {
    validate(value).unwrap().name
}

fn port_of(value: &[u8]) -> Option<u16> {
    validate(value).unwrap().port
}

fn v6(text: &str) -> Name<'static> {
    Name::Ipv6(text.parse().unwrap())
}

#[test]
fn accepts_reg_name() {
    assert_eq!(name(b"example.com"), Name::RegName(b"example.com"));
    assert_eq!(port_of(b"example.com"), None);
}

#[test]
fn accepts_reg_name_with_port() {
    let a = validate(b"example.com:8080").unwrap();
    assert_eq!(a.name, Name::RegName(b"example.com"));
    assert_eq!(a.port, Some(8080));
}

#[test]
fn accepts_every_unreserved_and_sub_delim_but_comma() {
    let value = b"aZ09-._~!$&'()*+;=";
    assert_eq!(name(value), Name::RegName(value));
}

#[test]
fn accepts_percent_encoded_reg_name() {
    assert_eq!(name(b"ex%41mple%2e"), Name::RegName(b"ex%41mple%2e"));
}

#[test]
fn empty_value_is_an_empty_reg_name() {
    let a = validate(b"").unwrap();
    assert!(a.name.is_empty());
    assert_eq!(a.port, None);
}

#[test]
fn empty_host_with_port_is_valid_for_the_field() {
    let a = validate(b":80").unwrap();
    assert!(a.name.is_empty());
    assert_eq!(a.port, Some(80));
}

#[test]
fn empty_port_is_absent() {
    let a = validate(b"host:").unwrap();
    assert_eq!(a.name, Name::RegName(b"host"));
    assert_eq!(a.port, None);
    assert_eq!(port_of(b"[::1]:"), None);
}

#[test]
fn port_bounds_are_inclusive() {
    assert_eq!(port_of(b"h:0"), Some(0));
    assert_eq!(port_of(b"h:65535"), Some(65535));
    assert_eq!(port_of(b"h:0080"), Some(80));
}

#[test]
fn port_out_of_range_is_rejected() {
    assert_eq!(
        validate(b"h:65536"),
        Err(Error::PortOutOfRange { value: 65536 })
    );
    assert_eq!(
        validate(b"h:99999999999999999999999999"),
        Err(Error::PortOutOfRange { value: u64::MAX })
    );
}

#[test]
fn non_numeric_port_is_rejected() {
    assert_eq!(
        validate(b"example.com:http"),
        Err(Error::BadPort { byte: b'h', at: 12 })
    );
    assert_eq!(validate(b"h:+1"), Err(Error::BadPort { byte: b'+', at: 2 }));
    assert_eq!(
        validate(b"h:8 0"),
        Err(Error::BadPort { byte: b' ', at: 3 })
    );
}

#[test]
fn second_colon_is_a_bad_port() {
    assert_eq!(
        validate(b"a:1:2"),
        Err(Error::BadPort { byte: b':', at: 3 })
    );
    // An unbracketed IPv6 address reads as an empty host and a bad port.
    assert_eq!(validate(b"::1"), Err(Error::BadPort { byte: b':', at: 1 }));
}

#[test]
fn accepts_ipv4() {
    assert_eq!(name(b"127.0.0.1"), Name::Ipv4(Ipv4Addr::LOCALHOST));
    assert_eq!(name(b"255.255.255.255"), Name::Ipv4(Ipv4Addr::BROADCAST));
    let a = validate(b"10.0.0.1:443").unwrap();
    assert_eq!(a.name, Name::Ipv4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(a.port, Some(443));
}

#[test]
fn ipv4_lookalikes_are_reg_names() {
    // RFC 3986 §3.2.2: only the strict dotted quad is an address.
    for value in [&b"256.0.0.1"[..], b"01.2.3.4", b"1.2.3", b"1.2.3.4.5"] {
        assert_eq!(name(value), Name::RegName(value));
    }
}

#[test]
fn accepts_ipv6_literal() {
    assert_eq!(name(b"[::1]"), v6("::1"));
    assert_eq!(name(b"[::]"), v6("::"));
    assert_eq!(name(b"[2001:DB8::a:b]"), v6("2001:db8::a:b"));
    assert_eq!(name(b"[1:2:3:4:5:6:7:8]"), v6("1:2:3:4:5:6:7:8"));
    assert_eq!(name(b"[1:2:3:4:5:6:7::]"), v6("1:2:3:4:5:6:7:0"));
    assert_eq!(name(b"[::2:3:4:5:6:7:8]"), v6("0:2:3:4:5:6:7:8"));
}

#[test]
fn accepts_ipv6_literal_with_port() {
    let a = validate(b"[::1]:80").unwrap();
    assert_eq!(a.name, v6("::1"));
    assert_eq!(a.port, Some(80));
}

#[test]
fn accepts_ipv6_with_embedded_ipv4() {
    assert_eq!(name(b"[::ffff:192.0.2.1]"), v6("::ffff:192.0.2.1"));
    assert_eq!(name(b"[1:2:3:4:5:6:1.2.3.4]"), v6("1:2:3:4:5:6:102:304"));
}

#[test]
fn malformed_ipv6_is_rejected() {
    let bad = Err(Error::BadIpLiteral {
        kind: Literal::Ipv6,
    });
    for value in [
        &b"[]"[..],
        b"[:]",
        b"[:::]",
        b"[1::2::3]",
        b"[1:2:3:4:5:6:7]",
        b"[1:2:3:4:5:6:7:8:9]",
        // `::` stands for at least one group.
        b"[1:2:3:4::5:6:7:8]",
        b"[:1:2:3:4:5:6:7]",
        b"[1:2:3:4:5:6:7:]",
        b"[12345::]",
        b"[g::]",
        b"[::1.2.3.04]",
        b"[1.2.3.4::]",
        b"[::1.2.3.4:5]",
        b"[1:2:3:4:5:6:7:1.2.3.4]",
        // RFC 6874 zone identifiers are not in the http URI grammar.
        b"[fe80::1%25eth0]",
        b"[127.0.0.1]",
    ] {
        assert_eq!(validate(value), bad, "{}", String::from_utf8_lossy(value));
    }
}

#[test]
fn accepts_ipv_future() {
    assert_eq!(
        name(b"[v1.fe80::a+en1]"),
        Name::IpvFuture(b"v1.fe80::a+en1")
    );
    assert_eq!(name(b"[VF.x]"), Name::IpvFuture(b"VF.x"));
}

#[test]
fn malformed_ipv_future_is_rejected() {
    let bad = Err(Error::BadIpLiteral {
        kind: Literal::IpvFuture,
    });
    for value in [
        &b"[v]"[..],
        b"[v1]",
        b"[v.x]",
        b"[v1.]",
        b"[vg.x]",
        b"[v1.%41]",
    ] {
        assert_eq!(validate(value), bad, "{}", String::from_utf8_lossy(value));
    }
}

#[test]
fn rejects_userinfo() {
    assert_eq!(validate(b"user@host"), Err(Error::UserInfo { at: 4 }));
    assert_eq!(
        validate(b"user:pass@host:80"),
        Err(Error::UserInfo { at: 9 })
    );
    assert_eq!(validate(b"@host"), Err(Error::UserInfo { at: 0 }));
}

#[test]
fn rejects_path_query_and_fragment() {
    assert_eq!(validate(b"host/x"), Err(Error::Path { byte: b'/', at: 4 }));
    assert_eq!(
        validate(b"host:80/x"),
        Err(Error::Path { byte: b'/', at: 7 })
    );
    assert_eq!(validate(b"h?q"), Err(Error::Path { byte: b'?', at: 1 }));
    assert_eq!(validate(b"h#f"), Err(Error::Path { byte: b'#', at: 1 }));
}

#[test]
fn rejects_comma_list() {
    assert_eq!(validate(b"a,b"), Err(Error::List { at: 1 }));
    assert_eq!(validate(b"a, b"), Err(Error::List { at: 1 }));
}

#[test]
fn rejects_whitespace_inside() {
    assert_eq!(validate(b"a b"), Err(Error::BadChar { byte: b' ', at: 1 }));
    assert_eq!(
        validate(b"a\tb"),
        Err(Error::BadChar { byte: b'\t', at: 1 })
    );
    assert_eq!(validate(b" a"), Err(Error::BadChar { byte: b' ', at: 0 }));
}

#[test]
fn rejects_bytes_outside_the_grammar() {
    for (value, byte, at) in [
        (&b"a\"b"[..], b'"', 1),
        (b"a<b", b'<', 1),
        (b"a\\b", b'\\', 1),
        (b"caf\xc3\xa9", 0xc3, 3),
        (b"a\x00", 0, 1),
        (b"a\x7f", 0x7f, 1),
    ] {
        assert_eq!(validate(value), Err(Error::BadChar { byte, at }));
    }
}

#[test]
fn malformed_percent_encoding_is_rejected() {
    assert_eq!(validate(b"a%"), Err(Error::BadPercent { at: 1 }));
    assert_eq!(validate(b"a%4"), Err(Error::BadPercent { at: 1 }));
    assert_eq!(validate(b"a%4g"), Err(Error::BadPercent { at: 1 }));
}

#[test]
fn unbalanced_brackets_are_rejected() {
    for (value, at) in [
        (&b"[::1"[..], 0),
        (b"[::1:80", 0),
        (b"::1]", 3),
        (b"a]", 1),
        (b"a[b]", 1),
        (b"[::1]]", 5),
        (b"[[::1]]", 1),
        (b"[::1]:80]", 8),
    ] {
        assert_eq!(
            validate(value),
            Err(Error::UnbalancedBracket { at }),
            "{}",
            String::from_utf8_lossy(value)
        );
    }
}

#[test]
fn junk_after_ip_literal_is_rejected() {
    assert_eq!(
        validate(b"[::1]x"),
        Err(Error::BadChar { byte: b'x', at: 5 })
    );
    assert_eq!(
        validate(b"[::1]:8x"),
        Err(Error::BadPort { byte: b'x', at: 7 })
    );
}

#[test]
fn uri_authority_must_name_a_host() {
    assert_eq!(validate_uri(b""), Err(Error::EmptyHost));
    assert_eq!(validate_uri(b":80"), Err(Error::EmptyHost));
    assert_eq!(validate_uri(b"u@x"), Err(Error::UserInfo { at: 1 }));
    assert_eq!(validate_uri(b"example.com:8080").unwrap().port, Some(8080));
}

#[test]
fn errors_name_the_offending_byte() {
    assert_eq!(
        Error::BadChar { byte: b' ', at: 1 }.to_string(),
        "byte 0x20 at 1 is not allowed in a host"
    );
    assert_eq!(
        Error::BadIpLiteral {
            kind: Literal::Ipv6
        }
        .to_string(),
        "IP literal is not a valid IPv6address"
    );
}

proptest::proptest! {
    /// The one-pass check answers as the full one wherever it answers, for
    /// values of the bytes that matter (digits, dots, colons, brackets,
    /// percent signs, delimiters, letters and a few others).
    #[test]
    fn the_plain_check_agrees_with_the_full_one(
        value in proptest::collection::vec(
            proptest::sample::select(b"0123456789.:.:[]%@/?#,aZ-_~!;=x\x7f \xff".to_vec()),
            0..24,
        )
    ) {
        if let Some(a) = plain(&value) {
            proptest::prop_assert_eq!(Ok(a), full(&value));
        }
    }

    /// Dotted digits: IPv4 exactly where the full check says so.
    #[test]
    fn dotted_digits_agree(parts in proptest::collection::vec(0u32..400, 1..6), port in proptest::option::of(0u32..70000)) {
        let mut value = parts.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
        if let Some(p) = port {
            value.push_str(&format!(":{p}"));
        }
        proptest::prop_assert_eq!(validate(value.as_bytes()), full(value.as_bytes()));
    }
}

#[test]
fn ipv4_needs_four_octets_exactly() {
    assert_eq!(ipv4(b"1.2.3.4"), Some(Ipv4Addr::new(1, 2, 3, 4)));
    for bad in [
        &b"1.2.3"[..],
        b"1.2.3.4.",
        b"1.2.3.4.5",
        b".1.2.3",
        b"1..2.3",
        b"256.1.1.1",
        b"01.1.1.1",
        b"",
    ] {
        assert_eq!(ipv4(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

//! Unit tests of the chunked decoder (their own file: the grammar has many
//! cases).

use super::*;

/// Feed `input` to `dec` until it is used up or the body ends; the data
/// found and the bytes consumed.
fn feed(dec: &mut Decoder, input: &[u8]) -> Result<(Vec<u8>, usize), Error> {
    let mut data = Vec::new();
    let mut used = 0;
    while used < input.len() && !dec.is_done() {
        let step = dec.decode(&input[used..])?;
        data.extend_from_slice(&input[used..][step.data.clone()]);
        used += step.consumed;
        assert_eq!(step.done, dec.is_done());
    }
    Ok((data, used))
}

/// A whole body in one slice: its data, consumed bytes and the decoder.
fn decode(input: &[u8]) -> Result<(Vec<u8>, usize, Decoder), Error> {
    let mut dec = Decoder::new(u64::MAX);
    let (data, used) = feed(&mut dec, input)?;
    Ok((data, used, dec))
}

/// The body `input` must decode to, ending exactly before `rest`.
fn body(input: &str, rest: &str) -> Vec<u8> {
    let wire = format!("{input}{rest}");
    let (data, used, dec) = decode(wire.as_bytes()).unwrap_or_else(|e| panic!("{input:?}: {e}"));
    assert!(dec.is_done(), "{input:?} did not end");
    assert_eq!(used, input.len(), "{input:?}");
    data
}

fn err(input: &[u8]) -> Error {
    match decode(input) {
        Err(e) => e,
        Ok((_, _, dec)) => panic!("{:?} accepted ({dec:?})", String::from_utf8_lossy(input)),
    }
}

#[test]
fn decodes_chunks_and_stops_at_the_body_end() {
    assert_eq!(
        body(
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            "GET / HTTP/1.1\r\n"
        ),
        b"hello world"
    );
    assert_eq!(body("0\r\n\r\n", "x"), b"");
}

#[test]
fn data_ranges_point_into_the_input() {
    let wire = b"3\r\nabc\r\n0\r\n\r\n";
    let mut dec = Decoder::new(100);
    let step = dec.decode(wire).unwrap();
    assert_eq!(
        step,
        Step {
            consumed: 6,
            data: 3..6,
            done: false
        }
    );
    let step = dec.decode(&wire[6..]).unwrap();
    assert_eq!(
        step,
        Step {
            consumed: 7,
            data: 7..7,
            done: true
        }
    );
    assert_eq!(dec.decoded(), 3);
}

#[test]
fn nothing_is_consumed_after_the_end() {
    let mut dec = Decoder::new(100);
    let (_, used) = feed(&mut dec, b"0\r\n\r\nGET").unwrap();
    assert_eq!(used, 5);
    let step = dec.decode(b"GET").unwrap();
    assert_eq!((step.consumed, step.done), (0, true));
}

#[test]
fn hex_sizes_take_either_case_and_leading_zeros() {
    let ten = "0123456789";
    assert_eq!(
        body(&format!("a\r\n{ten}\r\nA\r\n{ten}\r\n0\r\n\r\n"), "").len(),
        20
    );
    assert_eq!(body("0005\r\nhello\r\n000\r\n\r\n", ""), b"hello");
    let zeros = "0".repeat(40);
    assert_eq!(body(&format!("{zeros}1\r\nx\r\n0\r\n\r\n"), ""), b"x");
}

#[test]
fn extensions_are_accepted_and_ignored() {
    for line in [
        "5;a",
        "5;a=b",
        "5;a;b=c;d=\"e\"",
        "5 ; a = b ; c",
        "5\t;\ta\t=\tb",
        "5;a=\"q \\\" x\"",
        "5;a=\"\"",
        "5;a=\"\\\\\"",
        "5;na!#$%&'*+-.^_`|~me=v!#$%&'*+-.^_`|~al",
        "5;a=\"obs-text \u{e9}\"",
    ] {
        assert_eq!(
            body(&format!("{line}\r\nhello\r\n0;last\r\n\r\n"), ""),
            b"hello",
            "{line:?}"
        );
    }
}

#[test]
fn malformed_extensions_are_rejected() {
    for (line, byte) in [
        ("5;", b'\r'),
        ("5;=b", b'='),
        ("5;a=", b'\r'),
        ("5;a b", b'b'),
        ("5;a=b c", b'c'),
        ("5 5", b'5'),
        // BWS must be followed by `;` or `=`, never by the line end.
        ("5 ", b'\r'),
        ("5;a ", b'\r'),
        ("5;a=b\t", b'\r'),
        ("5;a@b", b'@'),
        ("5;a=\"x", b'\r'),
        ("5;a=\"x\x01\"", 0x01),
        ("5;a=\"x\\\x01\"", 0x01),
        ("5;a=\"x\"y", b'y'),
    ] {
        let wire = format!("{line}\r\nhello\r\n0\r\n\r\n");
        assert_eq!(
            err(wire.as_bytes()),
            Error::BadExtension { byte },
            "{line:?}"
        );
    }
}

#[test]
fn bad_hex_is_rejected() {
    for (line, byte) in [
        ("g", b'g'),
        ("", b'\r'),
        ("-1", b'-'),
        ("+5", b'+'),
        (" 5", b' '),
        ("0x5", b'x'),
        ("5g", b'g'),
        ("5,", b','),
    ] {
        let wire = format!("{line}\r\nhello\r\n0\r\n\r\n");
        assert_eq!(err(wire.as_bytes()), Error::BadSize { byte }, "{line:?}");
    }
}

#[test]
fn sizes_past_64_bits_overflow() {
    // 16 significant digits fit; the 17th overflows, leading zeros or not.
    let mut dec = Decoder::new(u64::MAX);
    feed(&mut dec, b"ffffffffffffffff\r\n").unwrap();
    assert_eq!(dec.state, State::Data { left: u64::MAX });
    assert_eq!(err(b"10000000000000000\r\n"), Error::SizeOverflow);
    assert_eq!(
        err(b"00000000000000000000010000000000000000\r\n"),
        Error::SizeOverflow
    );
    assert_eq!(err(b"ffffffffffffffffff"), Error::SizeOverflow);
}

#[test]
fn data_must_end_in_crlf() {
    assert_eq!(err(b"5\r\nhelloX\r\n"), Error::MissingCrlf { byte: b'X' });
    assert_eq!(err(b"5\r\nhello\rX"), Error::MissingCrlf { byte: b'X' });
    assert_eq!(err(b"5\rX"), Error::MissingCrlf { byte: b'X' });
    assert_eq!(err(b"5;a\r\r"), Error::MissingCrlf { byte: b'\r' });
    // A body cut short is not an error, only unfinished.
    let (data, used, dec) = decode(b"5\r\nhel").unwrap();
    assert_eq!((&data[..], used, dec.is_done()), (&b"hel"[..], 6, false));
}

#[test]
fn bare_lf_is_rejected_everywhere() {
    for wire in [
        &b"5\nhello\r\n0\r\n\r\n"[..],
        b"5;a\nhello\r\n0\r\n\r\n",
        b"5;a=\"x\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"\n",
        b"0\n\r\n",
        b"0\r\n\n",
        b"0\r\nX: y\n\r\n",
        b"0\r\nX: y\r\n\n",
    ] {
        assert_eq!(
            err(wire),
            Error::BareLf,
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
}

#[test]
fn a_size_line_past_its_limit_is_rejected() {
    let long_ext = format!("1;{}", "a".repeat(MAX_SIZE_LINE_BYTES));
    assert_eq!(
        err(long_ext.as_bytes()),
        Error::LineTooLong {
            limit: MAX_SIZE_LINE_BYTES
        }
    );
    let zeros = format!("{}1\r\n", "0".repeat(MAX_SIZE_LINE_BYTES));
    assert_eq!(
        err(zeros.as_bytes()),
        Error::LineTooLong {
            limit: MAX_SIZE_LINE_BYTES
        }
    );
    // Just within: the line, CRLF included, is exactly the limit.
    let fits = format!(
        "1;{}\r\nx\r\n0\r\n\r\n",
        "a".repeat(MAX_SIZE_LINE_BYTES - 4)
    );
    assert_eq!(body(&fits, ""), b"x");
}

#[test]
fn extensions_over_a_body_are_bounded() {
    let chunk = format!("1;{}\r\nx\r\n", "a".repeat(4000));
    let four = chunk.repeat(4);
    assert_eq!(body(&format!("{four}0\r\n\r\n"), "").len(), 4);
    let five = chunk.repeat(5);
    assert_eq!(
        err(five.as_bytes()),
        Error::ExtensionsTooLarge {
            limit: MAX_EXTENSION_BYTES
        }
    );
}

#[test]
fn trailers_are_parsed_and_kept() {
    let wire = "3\r\nabc\r\n0\r\nChecksum: abc\r\nX-Two: \t v2 \r\nchecksum: again\r\n\r\n";
    let mut dec = Decoder::new(100);
    let (data, used) = feed(&mut dec, format!("{wire}NEXT").as_bytes()).unwrap();
    assert_eq!((&data[..], used), (&b"abc"[..], wire.len()));
    let t = dec.trailers();
    assert_eq!(t.len(), 3);
    assert_eq!(t.get("CHECKSUM"), Some(&b"abc"[..]));
    assert_eq!(t.get("x-two"), Some(&b"v2"[..]));
    let names: Vec<_> = t.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["Checksum", "X-Two", "checksum"]);
}

#[test]
fn a_body_without_trailers_has_none() {
    let (_, _, dec) = decode(b"0\r\n\r\n").unwrap();
    assert!(dec.trailers().is_empty());
    assert_eq!(dec.raw_trailers.capacity(), 0);
}

#[test]
fn a_trailer_section_past_its_limit_is_rejected() {
    let wire = format!("0\r\nX: {}\r\n\r\n", "a".repeat(MAX_TRAILER_BYTES));
    assert_eq!(
        err(wire.as_bytes()),
        Error::TrailersTooLarge {
            limit: MAX_TRAILER_BYTES
        }
    );
    // Exactly at the limit, the final CRLF included, is accepted.
    let value = "a".repeat(MAX_TRAILER_BYTES - "X: \r\n\r\n".len());
    let (_, _, dec) = decode(format!("0\r\nX: {value}\r\n\r\n").as_bytes()).unwrap();
    assert_eq!(dec.trailers().get("x").map(<[u8]>::len), Some(value.len()));
}

#[test]
fn too_many_trailers_are_rejected() {
    let fields: String = (0..=MAX_TRAILERS).map(|i| format!("T{i}: v\r\n")).collect();
    assert_eq!(
        err(format!("0\r\n{fields}\r\n").as_bytes()),
        Error::TooManyTrailers {
            limit: MAX_TRAILERS
        }
    );
    let fields: String = (0..MAX_TRAILERS).map(|i| format!("T{i}: v\r\n")).collect();
    let (_, _, dec) = decode(format!("0\r\n{fields}\r\n").as_bytes()).unwrap();
    assert_eq!(dec.trailers().len(), MAX_TRAILERS);
}

#[test]
fn malformed_trailers_are_rejected_as_head_fields_are() {
    for wire in [
        &b"0\r\nNo colon\r\n\r\n"[..],
        // RFC 9112 §5.1: no whitespace between name and colon.
        b"0\r\nX : a\r\n\r\n",
        // RFC 9112 §5.2: obs-fold.
        b"0\r\nX: a\r\n b\r\n\r\n",
        b"0\r\nX: a\x00b\r\n\r\n",
        b"0\r\n: empty name\r\n\r\n",
    ] {
        assert!(
            matches!(err(wire), Error::BadTrailer(_)),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
    assert_eq!(
        err(b"0\r\nX: a\rb\r\n\r\n"),
        Error::MissingCrlf { byte: b'b' }
    );
}

#[test]
fn declared_sizes_past_the_body_limit_are_too_large() {
    let mut dec = Decoder::new(10);
    // Refused at the size line, before any of its data.
    assert_eq!(feed(&mut dec, b"b\r\n"), Err(Error::TooLarge { limit: 10 }));
    let mut dec = Decoder::new(10);
    assert_eq!(
        feed(&mut dec, b"5\r\nhello\r\n6\r\n"),
        Err(Error::TooLarge { limit: 10 })
    );
    let mut dec = Decoder::new(10);
    let (data, _) = feed(&mut dec, b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n").unwrap();
    assert_eq!((data.len(), dec.is_done()), (10, true));
    let mut dec = Decoder::new(10);
    assert_eq!(
        feed(&mut dec, b"ffffffffffffffff\r\n"),
        Err(Error::TooLarge { limit: 10 })
    );
}

#[test]
fn errors_are_sticky() {
    let mut dec = Decoder::new(100);
    assert_eq!(dec.decode(b"z"), Err(Error::BadSize { byte: b'z' }));
    assert_eq!(dec.decode(b"0\r\n\r\n"), Err(Error::BadSize { byte: b'z' }));
    assert_eq!(dec.decode(b""), Err(Error::BadSize { byte: b'z' }));
}

#[test]
fn every_split_and_single_bytes_decode_the_same() {
    let wire: &[u8] =
        b"4;x=\"y\"\r\nWiki\r\n05\r\npedia\r\nE ; z\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\nNEXT";
    let end = wire.len() - 4;
    let (whole, used, dec) = decode(wire).unwrap();
    assert_eq!(whole, b"Wikipedia in\r\n\r\nchunks.");
    assert_eq!(used, end);
    let trailers = dec.trailers().clone();
    for cut in 0..=wire.len() {
        let mut dec = Decoder::new(u64::MAX);
        let (mut data, used) = feed(&mut dec, &wire[..cut]).unwrap();
        let (more, used2) = feed(&mut dec, &wire[used..]).unwrap();
        data.extend_from_slice(&more);
        assert_eq!((data, used + used2), (whole.clone(), end), "cut at {cut}");
        assert_eq!(dec.trailers(), &trailers);
    }
    let mut dec = Decoder::new(u64::MAX);
    let mut data = Vec::new();
    for (i, b) in wire.iter().enumerate() {
        if dec.is_done() {
            assert_eq!(i, end);
            break;
        }
        let (d, used) = feed(&mut dec, std::slice::from_ref(b)).unwrap();
        assert_eq!(used, 1);
        data.extend_from_slice(&d);
    }
    assert_eq!(data, whole);
    assert_eq!(dec.trailers(), &trailers);
}

//! Unit tests of body framing.

use super::*;
use crate::http::{parse, Limits};

fn framing(raw: &[u8], max: u64) -> Result<Framing, ParseError> {
    let (head, _) = parse(raw, &Limits::default()).unwrap().unwrap();
    Framing::of(&head, max)
}

#[test]
fn no_length_is_an_empty_body() {
    assert_eq!(
        framing(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 10).unwrap(),
        Framing::Empty
    );
    assert_eq!(
        framing(
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            10
        )
        .unwrap(),
        Framing::Empty
    );
}

#[test]
fn length_above_the_limit_is_413() {
    let e = framing(
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
        10,
    );
    assert!(matches!(e, Err(ParseError::BodyTooLarge { length: 11 })));
    assert_eq!(
        framing(
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
            10
        )
        .unwrap(),
        Framing::Length(10)
    );
}

#[test]
fn chunked_transfer_encoding_is_chunked_framing() {
    for te in ["chunked", "Chunked", " CHUNKED ", ", chunked,"] {
        let raw = format!("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert_eq!(
            framing(raw.as_bytes(), 10).unwrap(),
            Framing::Chunked,
            "{te}"
        );
    }
}

#[test]
fn a_length_body_counts_down_across_reads() {
    let mut d = Framing::Length(10).decoder(10);
    let step = d.decode(b"abcd").unwrap();
    assert_eq!(
        step,
        Step {
            consumed: 4,
            data: 0..4,
            done: false
        }
    );
    assert!(!d.is_done());
    let step = d.decode(b"efghijGET /").unwrap();
    assert_eq!(
        step,
        Step {
            consumed: 6,
            data: 0..6,
            done: true
        }
    );
    assert_eq!(d.decode(b"GET /").unwrap().consumed, 0);
    assert!(d.trailers().is_none());
}

#[test]
fn an_empty_body_is_done_at_once() {
    let d = Framing::Empty.decoder(10);
    assert!(d.is_done());
    assert!(Decoder::default().is_done());
}

#[test]
fn skip_discards_a_chunked_body_up_to_the_next_request() {
    let mut d = Framing::Chunked.decoder(100);
    assert_eq!(d.skip(b"3\r\nab").unwrap(), 5);
    assert!(!d.is_done());
    let rest = b"c\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\n";
    assert_eq!(d.skip(rest).unwrap(), rest.len() - 16);
    assert!(d.is_done());
    assert_eq!(d.trailers().and_then(|t| t.get("t")), Some(&b"1"[..]));
    assert_eq!(d.skip(b"GET").unwrap(), 0);
}

#[test]
fn skip_reports_a_malformed_or_too_large_chunked_body() {
    let mut d = Framing::Chunked.decoder(100);
    assert_eq!(
        d.skip(b"3\r\nabcX"),
        Err(chunked::Error::MissingCrlf { byte: b'X' })
    );
    let mut d = Framing::Chunked.decoder(2);
    assert_eq!(d.skip(b"3\r\n"), Err(chunked::Error::TooLarge { limit: 2 }));
}

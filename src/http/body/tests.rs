//! Unit tests of body framing, and the property that a request with a body
//! reads the same wherever its bytes are split (their own file: the
//! property test's generator is long).

use proptest::prelude::*;

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

// ------------------------------------------------- split-anywhere property

const MAX_BODY: u64 = 1024 * 1024;
/// The pipelined request after the one under test: it must be read whole,
/// starting exactly where the body ends.
const NEXT: &[u8] = b"GET /next HTTP/1.1\r\nHost: n\r\n\r\n";

/// What a reader takes from the wire: the head (its `Debug` text covers
/// every field), the body, the trailers and the next request's target.
#[derive(Debug, PartialEq, Eq)]
struct Taken {
    head: String,
    body: Vec<u8>,
    trailers: Option<Vec<(String, Vec<u8>)>>,
    next: String,
}

/// Read one request and the next one's head from `wire` as a connection would,
/// the bytes arriving in the pieces `cuts` (offsets, any order) make: the
/// buffer holds what is unread, the head is parsed once whole, the body
/// is decoded from whatever follows it, read after read.
fn take(wire: &[u8], cuts: &[usize]) -> Taken {
    let limits = Limits::default();
    let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(wire.len())).collect();
    bounds.push(wire.len());
    bounds.sort_unstable();
    let mut buf = Vec::new();
    let mut from = 0;
    let mut head = None;
    let mut decoder = None::<Decoder>;
    let mut body = Vec::new();
    let mut next = None;
    for to in bounds {
        buf.extend_from_slice(&wire[from..to]);
        from = to;
        loop {
            match (&head, &mut decoder) {
                (None, _) => {
                    let Some((h, n)) = parse(&buf, &limits).unwrap() else {
                        break;
                    };
                    head = Some(format!("{h:?}"));
                    decoder = Some(Framing::of(&h, MAX_BODY).unwrap().decoder(MAX_BODY));
                    buf.drain(..n);
                }
                (Some(_), Some(d)) if !d.is_done() => {
                    let step = d.decode(&buf).unwrap();
                    body.extend_from_slice(&buf[step.data]);
                    buf.drain(..step.consumed);
                    if step.consumed == 0 {
                        break;
                    }
                }
                _ => {
                    if next.is_none() {
                        if let Some((h, n)) = parse(&buf, &limits).unwrap() {
                            next = Some(String::from_utf8_lossy(h.target).into_owned());
                            assert_eq!(n, buf.len(), "bytes after the next request");
                        }
                    }
                    break;
                }
            }
        }
    }
    let trailers = decoder
        .as_ref()
        .and_then(Decoder::trailers)
        .map(|t| t.iter().map(|(n, v)| (n.to_owned(), v.to_vec())).collect());
    Taken {
        head: head.expect("a head"),
        body,
        trailers,
        next: next.expect("the next request"),
    }
}

/// One generated chunk: its data, leading zeros and case of its size, and
/// its extensions.
#[derive(Debug, Clone)]
struct Chunk {
    data: Vec<u8>,
    zeros: usize,
    upper: bool,
    ext: &'static str,
}

/// A generated request: its bytes (the next request after them) and what
/// a reader must take from them.
#[derive(Debug, Clone)]
struct Case {
    wire: Vec<u8>,
    body: Vec<u8>,
    trailers: Option<Vec<(String, Vec<u8>)>>,
}

const EXTENSIONS: [&str; 6] = [
    "",
    ";a",
    ";name=value",
    " ; a = b ;c",
    ";q=\"quoted \\\" ; \"",
    "\t;x=\"\"",
];
const TRAILER_NAMES: [&str; 4] = ["Checksum", "X-Trailer", "grpc-status", "Expires"];

fn chunk() -> impl Strategy<Value = Chunk> {
    (
        prop::collection::vec(any::<u8>(), 1..40),
        0..3usize,
        any::<bool>(),
        prop::sample::select(&EXTENSIONS[..]),
    )
        .prop_map(|(data, zeros, upper, ext)| Chunk {
            data,
            zeros,
            upper,
            ext,
        })
}

fn case() -> impl Strategy<Value = Case> {
    let method = prop::sample::select(&["GET", "POST", "PUT", "OPTIONS"][..]);
    let fields = prop::collection::vec(("X-[A-Za-z]{1,6}", "[ -~]{0,12}"), 0..3);
    let length = prop::collection::vec(any::<u8>(), 0..80).prop_map(|b| (b.clone(), b, None));
    let chunked = (
        prop::collection::vec(chunk(), 0..5),
        prop::sample::select(&EXTENSIONS[..]),
        prop::collection::vec(
            (
                prop::sample::select(&TRAILER_NAMES[..]),
                "[!-~]([ -~]{0,10}[!-~])?",
            ),
            0..3,
        ),
        prop::sample::select(&["chunked", "Chunked", " chunked ", ", chunked"][..]),
    )
        .prop_map(|(chunks, last_ext, trailers, te)| {
            let mut wire = Vec::new();
            let mut body = Vec::new();
            for c in &chunks {
                let size = if c.upper {
                    format!("{:X}", c.data.len())
                } else {
                    format!("{:x}", c.data.len())
                };
                wire.extend(format!("{}{size}{}\r\n", "0".repeat(c.zeros), c.ext).bytes());
                wire.extend_from_slice(&c.data);
                wire.extend_from_slice(b"\r\n");
                body.extend_from_slice(&c.data);
            }
            wire.extend(format!("0{last_ext}\r\n").bytes());
            for (name, value) in &trailers {
                wire.extend(format!("{name}: {value}\r\n").bytes());
            }
            wire.extend_from_slice(b"\r\n");
            let trailers = trailers
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v.into_bytes()))
                .collect();
            (wire, body, Some((te, trailers)))
        });
    let body = prop_oneof![length, chunked];
    (method, fields, body).prop_map(|(method, fields, (framed, body, chunked))| {
        let mut wire = format!("{method} /upload?x=1 HTTP/1.1\r\nHost: test\r\n");
        for (name, value) in &fields {
            wire.push_str(&format!("{name}: {value}\r\n"));
        }
        let trailers = match chunked {
            Some((te, trailers)) => {
                wire.push_str(&format!("Transfer-Encoding: {te}\r\n"));
                Some(trailers)
            }
            None => {
                wire.push_str(&format!("Content-Length: {}\r\n", body.len()));
                None
            }
        };
        wire.push_str("\r\n");
        let mut wire = wire.into_bytes();
        wire.extend_from_slice(&framed);
        wire.extend_from_slice(NEXT);
        Case {
            wire,
            body,
            trailers,
        }
    })
}

proptest! {
    /// A request with a body parses to the same head, body and trailers,
    /// and the next request starts where it should, wherever the input is
    /// split (here: at up to six random points).
    #[test]
    fn a_request_reads_the_same_wherever_it_is_split(
        case in case(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let whole = take(&case.wire, &[]);
        prop_assert_eq!(&whole.body, &case.body);
        prop_assert_eq!(&whole.trailers, &case.trailers);
        prop_assert_eq!(&whole.next, "/next");
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(case.wire.len() + 1)).collect();
        prop_assert_eq!(take(&case.wire, &cuts), whole);
    }

    /// The same, split once at every offset in turn.
    #[test]
    fn a_request_reads_the_same_split_at_every_offset(case in case()) {
        let whole = take(&case.wire, &[]);
        prop_assert_eq!(&whole.body, &case.body);
        for cut in 0..=case.wire.len() {
            prop_assert_eq!(&take(&case.wire, &[cut]), &whole, "cut at {}", cut);
        }
    }
}

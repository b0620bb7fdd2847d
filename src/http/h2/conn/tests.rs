use super::*;
use crate::http::h2::frame::{head as write_head, Head};
use crate::http::h2::hpack::encode;

const SETTINGS: Settings = Settings {
    max_concurrent_streams: 4,
    max_header_list_bytes: 16 * 1024,
    header_table_bytes: 4096,
    initial_window: 65_535,
};

/// A frame as bytes.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    write_head(&mut b, payload.len(), kind, flags, stream);
    b.extend_from_slice(payload);
    b
}

fn block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    encode::field_raw(&mut b, b":method", b"GET");
    encode::field_raw(&mut b, b":scheme", b"https");
    encode::field_raw(&mut b, b":authority", b"example.com");
    encode::field(&mut b, b":path", path.as_bytes());
    for (n, v) in extra {
        encode::field(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

fn get(stream: u32, path: &str) -> Vec<u8> {
    frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        stream,
        &block(path, &[]),
    )
}

/// A written frame, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn parse_out(bytes: &[u8]) -> Vec<Out> {
    let mut frames = Vec::new();
    let mut b = bytes;
    while !b.is_empty() {
        let h = Head::read(b);
        frames.push(Out {
            kind: h.kind,
            flags: h.flags,
            stream: h.stream,
            payload: b[HEADER_LEN..HEADER_LEN + h.len].to_vec(),
        });
        b = &b[HEADER_LEN + h.len..];
    }
    frames
}

/// A server connection past its handshake, its output cleared.
struct Peer {
    conn: Conn,
    buf: BytesMut,
}

impl Peer {
    fn new(settings: Settings) -> Peer {
        let mut p = Peer {
            conn: Conn::new(settings),
            buf: BytesMut::new(),
        };
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(kind::SETTINGS, 0, 0, &[]));
        hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
        p.send(&hello).unwrap();
        let out = p.take();
        assert_eq!(out[0].kind, kind::SETTINGS);
        assert_eq!(out.last().unwrap().flags, flag::ACK);
        p
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        self.buf.extend_from_slice(bytes);
        self.conn.recv(&mut self.buf)
    }

    fn take(&mut self) -> Vec<Out> {
        let all: Vec<u8> = self.conn.output().chunks().flatten().copied().collect();
        self.conn.output().clear();
        parse_out(&all)
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.conn.event()).collect()
    }

    fn goaway(&mut self) -> Option<ErrorCode> {
        self.take()
            .iter()
            .find(|f| f.kind == kind::GOAWAY)
            .map(|f| ErrorCode(u32::from_be_bytes(f.payload[4..8].try_into().unwrap())))
    }

    fn rst(&mut self) -> Vec<(u32, ErrorCode)> {
        self.take()
            .iter()
            .filter(|f| f.kind == kind::RST_STREAM)
            .map(|f| {
                (
                    f.stream,
                    ErrorCode(u32::from_be_bytes(f.payload[..4].try_into().unwrap())),
                )
            })
            .collect()
    }
}

fn path_of(e: &Event) -> Option<String> {
    match e {
        Event::Request { head, .. } => head
            .pseudo
            .path
            .map(|i| String::from_utf8_lossy(head.fields.get(i).1).into_owned()),
        _ => None,
    }
}

#[test]
fn a_request_arrives_whole_however_its_bytes_are_cut() {
    let mut wire = PREFACE.to_vec();
    wire.extend(frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]));
    wire.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::PADDED,
        1,
        &[
            &[2u8][..],
            &block("/a", &[("content-length", "3")]),
            &[0, 0],
        ]
        .concat(),
    ));
    wire.extend(frame(kind::DATA, flag::END_STREAM, 1, b"abc"));
    for cut in 1..wire.len() {
        let mut conn = Conn::new(SETTINGS);
        let mut buf = BytesMut::new();
        for piece in wire.chunks(cut) {
            buf.extend_from_slice(piece);
            conn.recv(&mut buf).unwrap();
        }
        assert!(buf.is_empty(), "cut {cut}");
        let events: Vec<Event> = std::iter::from_fn(|| conn.event()).collect();
        assert_eq!(events.len(), 2, "cut {cut}: {events:?}");
        assert_eq!(path_of(&events[0]).as_deref(), Some("/a"));
        match &events[1] {
            Event::Data {
                stream: 1,
                data,
                end_stream: true,
            } => assert_eq!(&data[..], b"abc"),
            e => panic!("{e:?}"),
        }
    }
}

#[test]
fn a_bad_preface_or_a_first_frame_that_is_not_settings_ends_the_connection() {
    let mut c = Conn::new(SETTINGS);
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    assert_eq!(
        c.recv(&mut buf).unwrap_err().code,
        ErrorCode::PROTOCOL_ERROR
    );
    let mut c = Conn::new(SETTINGS);
    let mut buf = BytesMut::from(&[PREFACE, &get(1, "/")[..]].concat()[..]);
    assert_eq!(
        c.recv(&mut buf).unwrap_err().code,
        ErrorCode::PROTOCOL_ERROR
    );
}

#[test]
fn settings_and_pings_are_acknowledged_and_windows_follow_settings() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[]),
    ))
    .unwrap();
    assert_eq!(p.conn.send_window(1), 65_535);
    // INITIAL_WINDOW_SIZE 100: the open stream's window moves by -65,435.
    p.send(&frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 100]))
        .unwrap();
    p.send(&frame(kind::PING, 0, 0, b"12345678")).unwrap();
    let out = p.take();
    assert_eq!(out[0].kind, kind::SETTINGS);
    assert_eq!(out[0].flags, flag::ACK);
    assert_eq!(out[1].kind, kind::PING);
    assert_eq!(
        (out[1].flags, &out[1].payload[..]),
        (flag::ACK, &b"12345678"[..])
    );
    assert_eq!(p.conn.send_window(1), 100);
    let mut body = Bytes::from_static(&[7; 300]);
    assert_eq!(p.conn.send_data(1, &mut body, true), 100);
    assert_eq!(body.len(), 200);
    p.send(&frame(kind::WINDOW_UPDATE, 0, 1, &500u32.to_be_bytes()))
        .unwrap();
    assert!(p.conn.windows_grew());
    assert_eq!(p.conn.send_data(1, &mut body, true), 200);
    let out = p.take();
    assert_eq!(out.len(), 3);
    assert_eq!(out[1].flags, flag::END_STREAM);
    // The request's body had not ended: the rest of it is not wanted.
    assert_eq!(out[2].kind, kind::RST_STREAM);
    // The window past 2^31 - 1.
    p.send(&frame(
        kind::WINDOW_UPDATE,
        0,
        0,
        &frame::MAX_WINDOW.to_be_bytes(),
    ))
    .unwrap_err();
    assert_eq!(p.goaway(), Some(ErrorCode::FLOW_CONTROL_ERROR));
}

#[test]
fn credit_goes_back_as_the_body_is_read() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[]),
    ))
    .unwrap();
    let data = vec![1u8; 16_384];
    for _ in 0..3 {
        p.send(&frame(kind::DATA, 0, 1, &data)).unwrap();
    }
    assert!(p.take().is_empty());
    p.conn.release(1, 16_384);
    assert!(p.take().is_empty());
    p.conn.release(1, 16_384);
    let ups: Vec<_> = p
        .take()
        .into_iter()
        .map(|f| (f.stream, f.payload))
        .collect();
    assert_eq!(
        ups,
        [
            (0, 32_768u32.to_be_bytes().to_vec()),
            (1, 32_768u32.to_be_bytes().to_vec())
        ]
    );
    // Past the windows: 65,535 - 49,152 + 32,768 = 49,151 left.
    for _ in 0..2 {
        p.send(&frame(kind::DATA, 0, 1, &data)).unwrap();
    }
    p.send(&frame(kind::DATA, 0, 1, &data)).unwrap_err();
    assert_eq!(p.goaway(), Some(ErrorCode::FLOW_CONTROL_ERROR));
}

#[test]
fn a_stream_past_its_own_window_is_reset() {
    let mut p = Peer::new(Settings {
        initial_window: 20_000,
        ..SETTINGS
    });
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[]),
    ))
    .unwrap();
    p.send(&frame(kind::DATA, 0, 1, &[0; 16_384])).unwrap();
    p.send(&frame(kind::DATA, 0, 1, &[0; 4_000])).unwrap();
    assert_eq!(p.rst(), [(1, ErrorCode::FLOW_CONTROL_ERROR)]);
    // The connection goes on, and the reset stream's DATA gave its credit back.
    p.send(&get(3, "/")).unwrap();
    assert_eq!(p.conn.open_streams(), 1);
}

#[test]
fn trailers_end_a_request_and_content_length_is_held_to() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[("content-length", "2")]),
    ))
    .unwrap();
    p.send(&frame(kind::DATA, 0, 1, b"ab")).unwrap();
    let mut t = Vec::new();
    encode::field(&mut t, b"x-checksum", b"1");
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &t,
    ))
    .unwrap();
    let events = p.events();
    assert!(
        matches!(events[2], Event::Trailers { stream: 1, .. }),
        "{events:?}"
    );
    // A body longer than its content-length.
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        3,
        &block("/", &[("content-length", "1")]),
    ))
    .unwrap();
    p.send(&frame(kind::DATA, 0, 3, b"ab")).unwrap();
    // Shorter, at its end.
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        5,
        &block("/", &[("content-length", "3")]),
    ))
    .unwrap();
    p.send(&frame(kind::DATA, flag::END_STREAM, 5, b"ab"))
        .unwrap();
    // Trailers without END_STREAM.
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        7,
        &block("/", &[]),
    ))
    .unwrap();
    p.send(&frame(kind::HEADERS, flag::END_HEADERS, 7, &t))
        .unwrap();
    assert_eq!(
        p.rst(),
        [
            (3, ErrorCode::PROTOCOL_ERROR),
            (5, ErrorCode::PROTOCOL_ERROR),
            (7, ErrorCode::PROTOCOL_ERROR)
        ]
    );
}

#[test]
fn streams_past_the_limit_are_refused_and_malformed_ones_reset() {
    let mut p = Peer::new(SETTINGS);
    for id in [1, 3, 5, 7] {
        p.send(&frame(
            kind::HEADERS,
            flag::END_HEADERS,
            id,
            &block("/", &[]),
        ))
        .unwrap();
    }
    p.send(&get(9, "/")).unwrap();
    p.send(&frame(kind::RST_STREAM, 0, 1, &8u32.to_be_bytes()))
        .unwrap();
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        11,
        &block("/", &[("Upper", "x")]),
    ))
    .unwrap();
    assert_eq!(
        p.rst(),
        [
            (9, ErrorCode::REFUSED_STREAM),
            (11, ErrorCode::PROTOCOL_ERROR)
        ]
    );
    let events = p.events();
    assert!(matches!(
        events[4],
        Event::Reset {
            stream: 1,
            code: ErrorCode::CANCEL,
            by_peer: true
        }
    ));
    assert_eq!(events.len(), 5);
    // Frames in flight on a stream we reset are ignored; HEADERS on one the
    // peer reset is STREAM_CLOSED; a lower new id, PROTOCOL_ERROR.
    p.send(&frame(kind::DATA, 0, 9, b"late")).unwrap();
    assert!(p.take().iter().all(|f| f.kind != kind::RST_STREAM));
    let mut q = Peer::new(SETTINGS);
    q.send(&get(5, "/")).unwrap();
    q.send(&get(3, "/")).unwrap_err();
    assert_eq!(q.goaway(), Some(ErrorCode::PROTOCOL_ERROR));
    p.send(&get(1, "/")).unwrap_err();
    assert_eq!(p.goaway(), Some(ErrorCode::STREAM_CLOSED));
}

#[test]
fn frames_on_idle_streams_and_even_ids_end_the_connection() {
    for bad in [
        frame(kind::DATA, 0, 1, b"x"),
        frame(kind::RST_STREAM, 0, 1, &[0; 4]),
        frame(kind::WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()),
        frame(kind::CONTINUATION, flag::END_HEADERS, 1, &[]),
        get(2, "/"),
    ] {
        let mut p = Peer::new(SETTINGS);
        assert_eq!(
            p.send(&bad).unwrap_err().code,
            ErrorCode::PROTOCOL_ERROR,
            "{bad:02x?}"
        );
        assert_eq!(p.goaway(), Some(ErrorCode::PROTOCOL_ERROR));
        // Nothing more is taken.
        assert!(p.send(&get(3, "/")).is_err());
    }
    // PRIORITY on an idle stream is fine.
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(kind::PRIORITY, 0, 9, &[0, 0, 0, 1, 16]))
        .unwrap();
    p.send(&get(1, "/")).unwrap();
}

#[test]
fn a_block_split_into_continuations_decodes_and_interleaving_is_an_error() {
    let b = block("/split", &[("x-long", &"v".repeat(100))]);
    let mut wire = frame(kind::HEADERS, flag::END_STREAM, 1, &b[..10]);
    wire.extend(frame(kind::CONTINUATION, 0, 1, &b[10..50]));
    wire.extend(frame(kind::CONTINUATION, flag::END_HEADERS, 1, &b[50..]));
    let mut p = Peer::new(SETTINGS);
    p.send(&wire).unwrap();
    assert_eq!(path_of(&p.events()[0]).as_deref(), Some("/split"));
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(kind::HEADERS, 0, 1, &b[..10])).unwrap();
    assert!(p.send(&frame(kind::PING, 0, 0, b"12345678")).is_err());
    assert_eq!(p.goaway(), Some(ErrorCode::PROTOCOL_ERROR));
}

#[test]
fn continuation_floods_are_calmed() {
    for payload in [vec![], vec![b'a'; 16_000]] {
        let mut p = Peer::new(SETTINGS);
        p.send(&frame(kind::HEADERS, 0, 1, &block("/", &[])))
            .unwrap();
        let one = frame(kind::CONTINUATION, 0, 1, &payload);
        let mut n = 0;
        let err = loop {
            n += 1;
            if let Err(e) = p.send(&one) {
                break e;
            }
        };
        assert_eq!(err.code, ErrorCode::ENHANCE_YOUR_CALM);
        assert!(n <= 33, "{n} frames");
    }
}

#[test]
fn empty_data_floods_are_calmed() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[]),
    ))
    .unwrap();
    let empty = frame(kind::DATA, 0, 1, &[]);
    for _ in 0..MAX_EMPTY_DATA {
        p.send(&empty).unwrap();
    }
    assert_eq!(
        p.send(&empty).unwrap_err().code,
        ErrorCode::ENHANCE_YOUR_CALM
    );
}

#[test]
fn control_frames_unwritten_stop_the_reading() {
    let mut p = Peer::new(SETTINGS);
    let ping = frame(kind::PING, 0, 0, b"12345678");
    let flood: Vec<u8> = ping
        .iter()
        .copied()
        .cycle()
        .take(ping.len() * 5_000)
        .collect();
    p.buf.extend_from_slice(&flood);
    p.conn.recv(&mut p.buf).unwrap();
    assert!(!p.conn.wants_read());
    let queued = p.conn.output().len();
    assert!(queued <= CONTROL_BYTES + 17, "{queued}");
    assert!(p.buf.len() > 4_000 * 17);
    // Written: it goes on.
    let mut acks = p.take().len();
    while !p.buf.is_empty() {
        p.conn.recv(&mut p.buf).unwrap();
        acks += p.take().len();
    }
    assert_eq!(acks, 5_000);
}

#[test]
fn a_header_list_past_the_limit_is_too_large_and_the_table_stays_in_step() {
    let mut p = Peer::new(SETTINGS);
    // A 4,000-byte field into the table, then five references: ~20 KB.
    let mut b = block("/", &[]);
    b.extend([0x40, 0x06]);
    b.extend(b"x-bomb");
    b.extend([0x7f, 0x80 | 33, 30]);
    b.extend(std::iter::repeat_n(b'a', 4000));
    b.extend(std::iter::repeat_n(0xbe, 5));
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &b,
    ))
    .unwrap();
    // The next block refers to the entry.
    let mut next = block("/next", &[]);
    next.push(0xbe);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        3,
        &next,
    ))
    .unwrap();
    let events = p.events();
    assert!(matches!(
        events[0],
        Event::TooLarge {
            stream: 1,
            end_stream: true
        }
    ));
    match &events[1] {
        Event::Request { head, .. } => {
            assert_eq!(head.fields.get(4).0, b"x-bomb");
            assert_eq!(head.fields.get(4).1.len(), 4000);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_size_update_past_our_setting_is_a_compression_error() {
    let mut p = Peer::new(SETTINGS);
    let mut b = vec![0x3f, 0xe1, 0x3f];
    b.extend(block("/", &[]));
    assert_eq!(
        p.send(&frame(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            &b
        ))
        .unwrap_err()
        .code,
        ErrorCode::COMPRESSION_ERROR
    );
}

#[test]
fn a_stream_depending_on_itself_is_reset_and_its_block_still_decoded() {
    let mut p = Peer::new(SETTINGS);
    let mut b = vec![0, 0, 0, 1, 16];
    b.extend([0x40, 0x01, b'x', 0x01, b'y']);
    b.extend(block("/", &[]));
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM | flag::PRIORITY,
        1,
        &b,
    ))
    .unwrap();
    assert_eq!(p.rst(), [(1, ErrorCode::PROTOCOL_ERROR)]);
    let mut next = block("/", &[]);
    next.push(0xbe);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        3,
        &next,
    ))
    .unwrap();
    match &p.events()[0] {
        Event::Request { head, .. } => assert_eq!(head.fields.get(4), (&b"x"[..], &b"y"[..])),
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_response_longer_than_a_frame_is_split_and_a_lowered_table_is_announced() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(kind::SETTINGS, 0, 0, &[0, 1, 0, 0, 0, 0]))
        .unwrap();
    p.send(&get(1, "/")).unwrap();
    p.take();
    let mut head = Vec::new();
    encode::status(&mut head, 200);
    let big = vec![b'v'; 20_000];
    encode::field_raw(&mut head, b"x-big", &big);
    assert!(p.conn.send_headers(1, &[&head], false));
    let mut body = Bytes::from(vec![3u8; 40_000]);
    assert_eq!(p.conn.send_data(1, &mut body, true), 40_000);
    let out = p.take();
    let kinds: Vec<u8> = out.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            kind::HEADERS,
            kind::CONTINUATION,
            kind::DATA,
            kind::DATA,
            kind::DATA
        ]
    );
    assert_eq!(out[1].flags, flag::END_HEADERS);
    assert_eq!(out[4].flags, flag::END_STREAM);
    // The block starts with a size update to 0.
    let block: Vec<u8> = [out[0].payload.clone(), out[1].payload.clone()].concat();
    assert_eq!(block[0], 0x20);
    let mut d = Decoder::new(4096);
    let mut l = FieldList::default();
    d.decode(&block, 1 << 20, &mut l).unwrap();
    assert_eq!(l.get(1).1.len(), 20_000);
    // The stream is done: nothing more goes out on it.
    assert!(!p.conn.send_headers(1, &[&head], true));
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn a_response_before_the_body_ends_resets_the_rest() {
    let mut p = Peer::new(SETTINGS);
    p.send(&frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block("/", &[]),
    ))
    .unwrap();
    let mut head = Vec::new();
    encode::status(&mut head, 413);
    p.conn.send_headers(1, &[&head], true);
    assert_eq!(p.rst(), [(1, ErrorCode::NO_ERROR)]);
    // The body still in flight is ignored, its credit given back.
    for _ in 0..4 {
        p.send(&frame(kind::DATA, 0, 1, &[0; 16_000])).unwrap();
    }
    let out = p.take();
    assert!(
        out.iter()
            .all(|f| f.kind == kind::WINDOW_UPDATE && f.stream == 0),
        "{out:?}"
    );
    assert!(p.events().iter().all(|e| !matches!(e, Event::Data { .. })));
}

#[test]
fn a_drain_goes_away_twice_around_a_ping() {
    let mut p = Peer::new(SETTINGS);
    p.send(&get(1, "/")).unwrap();
    p.take();
    p.conn.drain();
    let out = p.take();
    assert_eq!(out[0].kind, kind::GOAWAY);
    assert_eq!(out[0].payload[..4], frame::MAX_WINDOW.to_be_bytes());
    assert_eq!(out[1].kind, kind::PING);
    p.send(&get(3, "/")).unwrap();
    p.send(&frame(kind::PING, flag::ACK, 0, &DRAIN_PING))
        .unwrap();
    let out = p.take();
    assert_eq!(out[0].kind, kind::GOAWAY);
    assert_eq!(out[0].payload[..4], 3u32.to_be_bytes());
    // Streams past the last are ignored.
    p.send(&get(5, "/")).unwrap();
    let paths: Vec<_> = p.events().iter().filter_map(path_of).collect();
    assert_eq!(paths, ["/", "/"]);
}

#[test]
fn output_chunks_keep_their_order() {
    let mut o = Output::default();
    o.extend(b"ab");
    o.payload(Bytes::from(vec![b'X'; COPY_BELOW]));
    o.extend(b"cd");
    o.payload(Bytes::from_static(b"y"));
    o.payload(Bytes::from(vec![b'Z'; COPY_BELOW]));
    let all: Vec<u8> = o.chunks().flatten().copied().collect();
    let want = [&b"ab"[..], &[b'X'; COPY_BELOW], b"cdy", &[b'Z'; COPY_BELOW]].concat();
    assert_eq!(all, want);
    assert_eq!(o.len(), want.len());
    // Taken a few bytes at a time, the rest reads the same and written
    // payloads go.
    let mut taken = Vec::new();
    while !o.is_empty() {
        let first = o.chunks().next().unwrap();
        let k = first.len().min(700);
        taken.extend_from_slice(&first[..k]);
        o.advance(k);
        let rest: Vec<u8> = o.chunks().flatten().copied().collect();
        assert_eq!([&taken[..], &rest[..]].concat(), want);
    }
    assert_eq!(o.len(), 0);
}

//! Property tests of the frame reader, the connection and HPACK under
//! random input (stable toolchain, `cargo test`; `fuzz/` runs the same
//! targets coverage-guided): nothing panics, nothing grows past its bound,
//! and a valid request reads the same however its bytes are cut.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::super::frame::{head as write_head, kind, MAX_FRAME};
use super::super::hpack::{encode, huffman, Decoder, FieldList};
use super::super::PREFACE;
use super::{Conn, Event, Settings, CONTROL_BYTES, DEFAULT_TABLE};

const SETTINGS: Settings = Settings {
    max_concurrent_streams: 8,
    max_header_list_bytes: 4096,
    header_table_bytes: 4096,
    initial_window: 65_535,
};

fn frame(k: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    write_head(&mut b, payload.len(), k, flags, stream);
    b.extend_from_slice(payload);
    b
}

fn request_block(path: &[u8], extra: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    encode::field_raw(&mut b, b":method", b"POST");
    encode::field_raw(&mut b, b":scheme", b"https");
    encode::field(&mut b, b":path", path);
    for (n, v) in extra {
        encode::field(&mut b, n, v);
    }
    b
}

/// A frame a fuzzing client might send: any type, flags and payload, on a
/// stream from a small set, with valid request blocks and credit among them.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    let stream = prop_oneof![
        Just(0u32),
        Just(1),
        Just(2),
        Just(3),
        Just(5),
        Just(7),
        1u32..40
    ];
    prop_oneof![
        (
            0u8..12,
            any::<u8>(),
            stream.clone(),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(k, f, s, p)| frame(k, f, s, &p)),
        (stream.clone(), any::<u8>(), "/[a-z]{0,8}").prop_map(|(s, f, p)| frame(
            kind::HEADERS,
            f & 0x25,
            s,
            &request_block(p.as_bytes(), &[])
        )),
        (stream.clone(), any::<bool>(), 0usize..3000).prop_map(|(s, end, n)| frame(
            kind::DATA,
            u8::from(end),
            s,
            &vec![7; n]
        )),
        (stream, 1u32..100_000).prop_map(|(s, n)| frame(
            kind::WINDOW_UPDATE,
            0,
            s,
            &n.to_be_bytes()
        )),
    ]
}

/// A task that answers each request at once and reads every body byte.
fn serve(conn: &mut Conn) {
    while let Some(e) = conn.event() {
        match e {
            Event::Request { stream, head, .. } => {
                conn.recycle(head.fields);
                let mut h = Vec::new();
                encode::status(&mut h, 200);
                conn.send_headers(stream, &[&h], false);
                let mut body = Bytes::from_static(&[1; 2000]);
                conn.send_data(stream, &mut body, true);
            }
            Event::TooLarge { stream, .. } => {
                let mut h = Vec::new();
                encode::status(&mut h, 431);
                conn.send_headers(stream, &[&h], true);
            }
            Event::Data { stream, data, .. } => conn.release(stream, data.len()),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_frames_never_panic_nor_pass_a_bound(
        frames in prop::collection::vec(any_frame(), 0..60),
        cut in 1usize..200,
    ) {
        let mut conn = Conn::new(SETTINGS);
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(kind::SETTINGS, 0, 0, &[]));
        for f in &frames {
            wire.extend_from_slice(f);
        }
        let mut buf = BytesMut::new();
        let mut failed = false;
        for piece in wire.chunks(cut) {
            buf.extend_from_slice(piece);
            let r = conn.recv(&mut buf);
            if failed {
                prop_assert!(r.is_err(), "a failed connection took more");
            }
            failed |= r.is_err();
            prop_assert!(conn.out.frame_bytes() <= CONTROL_BYTES + 64);
            prop_assert!(conn.streams.len() <= SETTINGS.max_concurrent_streams as usize);
            prop_assert!(conn.block.len() <= SETTINGS.max_header_list_bytes + MAX_FRAME);
            prop_assert!(conn.decoder.table_size() <= DEFAULT_TABLE);
            prop_assert!(conn.closed.len() <= super::REMEMBERED);
            prop_assert!(conn.events.len() <= 2 * frames.len() + 2);
            serve(&mut conn);
            conn.output().clear();
        }
    }

    #[test]
    fn a_request_reads_the_same_however_it_is_cut(
        path in "/[a-z0-9/._-]{0,40}",
        extra in prop::collection::vec(("[a-z][a-z0-9-]{0,12}", "[ -~]{0,30}"), 0..6),
        body in prop::collection::vec(any::<u8>(), 0..3000),
        cut in 1usize..64,
    ) {
        let extra: Vec<(Vec<u8>, Vec<u8>)> = extra
            .into_iter()
            .map(|(n, v)| (n.into_bytes(), v.trim_matches([' ', '\t']).as_bytes().to_vec()))
            .filter(|(n, _)| !matches!(&n[..], b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" | b"te" | b"content-length"))
            .collect();
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(kind::SETTINGS, 0, 0, &[]));
        wire.extend(frame(kind::HEADERS, 0x4, 1, &request_block(path.as_bytes(), &extra)));
        for chunk in body.chunks(1000) {
            wire.extend(frame(kind::DATA, 0, 1, chunk));
        }
        wire.extend(frame(kind::DATA, 1, 1, &[]));
        let read = |cut: usize| {
            let mut conn = Conn::new(SETTINGS);
            let mut buf = BytesMut::new();
            let mut fields = Vec::new();
            let mut got = Vec::new();
            for piece in wire.chunks(cut) {
                buf.extend_from_slice(piece);
                conn.recv(&mut buf).unwrap();
                while let Some(e) = conn.event() {
                    match e {
                        Event::Request { head, .. } => {
                            fields = head.fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
                        }
                        Event::Data { data, .. } => got.extend_from_slice(&data),
                        e => panic!("{e:?}"),
                    }
                }
            }
            (fields, got)
        };
        let (whole_fields, whole_body) = read(wire.len());
        prop_assert_eq!(&whole_body, &body);
        prop_assert_eq!(whole_fields.len(), 3 + extra.len());
        prop_assert_eq!(read(cut), (whole_fields, whole_body));
    }

    #[test]
    fn any_block_decodes_or_fails_within_its_limit(
        block in prop::collection::vec(any::<u8>(), 0..2000),
        limit in 0usize..8192,
    ) {
        let mut d = Decoder::new(4096);
        let mut out = FieldList::default();
        if d.decode(&block, limit, &mut out).is_ok() {
            prop_assert!(out.bytes.len() <= limit);
        }
        prop_assert!(d.table_size() <= 4096);
    }

    #[test]
    fn fields_round_trip_through_the_encoder(
        fields in prop::collection::vec(("[a-z][a-z0-9-]{0,20}", prop::collection::vec(any::<u8>(), 0..80), any::<bool>()), 0..12),
    ) {
        let mut block = Vec::new();
        for (n, v, huff) in &fields {
            if *huff {
                encode::field(&mut block, n.as_bytes(), v);
            } else {
                encode::field_raw(&mut block, n.as_bytes(), v);
            }
        }
        let mut d = Decoder::new(4096);
        let mut out = FieldList::default();
        d.decode(&block, usize::MAX, &mut out).unwrap();
        let got: Vec<(Vec<u8>, Vec<u8>)> = out.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = fields.iter().map(|(n, v, _)| (n.as_bytes().to_vec(), v.clone())).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn any_frame_reads_or_is_refused_within_its_payload(
        kind in 0u8..12,
        flags in any::<u8>(),
        stream in any::<u32>(),
        payload in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        use super::super::frame::{self, Frame, Head};
        let head = Head { len: payload.len(), kind, flags, stream: stream & frame::MAX_WINDOW };
        match frame::read(&head, &payload) {
            Ok(Frame::Data { data, flow, .. }) => {
                prop_assert!(data.len() <= flow && flow == payload.len());
            }
            Ok(Frame::Headers { block, .. }) | Ok(Frame::Continuation { block, .. }) => {
                prop_assert!(block.len() <= payload.len());
            }
            Ok(Frame::Settings { params, .. }) => {
                prop_assert_eq!(frame::settings(params).count() * 6, params.len());
            }
            _ => {}
        }
    }

    #[test]
    fn huffman_round_trips_any_bytes(s in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut coded = Vec::new();
        huffman::encode(&s, &mut coded);
        prop_assert_eq!(coded.len(), huffman::encoded_len(&s));
        let mut back = Vec::new();
        huffman::decode(&coded, &mut back).unwrap();
        prop_assert_eq!(back, s);
    }
}

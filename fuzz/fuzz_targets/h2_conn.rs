//! A server connection fed the preface, SETTINGS and then any bytes, cut
//! into reads as the first byte says, with a task that answers every
//! request and reads every body: never a panic, control frames queued
//! within their bound, streams within the limit, and a failed connection
//! takes nothing more.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use servery::http::h2::conn::CONTROL_BYTES;
use servery::http::h2::hpack::encode;
use servery::http::h2::{Conn, Event, Settings, PREFACE};

const SETTINGS: Settings = Settings {
    max_concurrent_streams: 8,
    max_header_list_bytes: 4096,
    header_table_bytes: 4096,
    initial_window: 65_535,
};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).max(1);
    let mut wire = PREFACE.to_vec();
    wire.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    wire.extend_from_slice(rest);
    let mut conn = Conn::new(SETTINGS);
    let mut buf = BytesMut::new();
    let mut failed = false;
    for piece in wire.chunks(cut) {
        buf.extend_from_slice(piece);
        let result = conn.recv(&mut buf);
        assert!(!(failed && result.is_ok()), "a failed connection took more");
        failed |= result.is_err();
        assert!(conn.output().frame_bytes() <= CONTROL_BYTES + 64);
        assert!(conn.open_streams() <= SETTINGS.max_concurrent_streams as usize);
        while let Some(event) = conn.event() {
            match event {
                Event::Request { stream, head, .. } => {
                    conn.recycle(head.fields);
                    let mut h = Vec::new();
                    encode::status(&mut h, 200);
                    conn.send_headers(stream, &[&h], false);
                    let mut body = Bytes::from_static(&[1; 3000]);
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
        conn.output().clear();
    }
});

//! Any 9-byte header and payload through the frame reader: an error or a
//! frame, never a panic; a frame's parts lie within its payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servery::http::h2::frame::{self, Frame, Head, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER_LEN {
        return;
    }
    let mut head = Head::read(data);
    let payload = &data[HEADER_LEN..];
    head.len = payload.len();
    match frame::read(&head, payload) {
        Ok(Frame::Data { data, flow, .. }) => assert!(data.len() <= flow && flow == payload.len()),
        Ok(Frame::Headers { block, .. }) | Ok(Frame::Continuation { block, .. }) => {
            assert!(block.len() <= payload.len())
        }
        Ok(Frame::Settings { params, .. }) => {
            assert_eq!(frame::settings(params).count() * 6, params.len())
        }
        _ => {}
    }
});

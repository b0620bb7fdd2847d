//! Field blocks through one HPACK decoder in turn (the table carried from
//! block to block): an error or fields within the limit, never a panic; the
//! table within its size. The first byte picks the list limit; 0xff bytes
//! cut the input into blocks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servery::http::h2::hpack::{Decoder, FieldList};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let limit = usize::from(pick) * 64;
    let mut decoder = Decoder::new(4096);
    for block in rest.split(|&b| b == 0xff) {
        let mut out = FieldList::default();
        match decoder.decode(block, limit, &mut out) {
            Ok(()) => {
                assert!(out.bytes.len() <= limit);
                for (name, value) in out.iter() {
                    assert!(name.len() + value.len() <= limit);
                }
            }
            Err(_) => break,
        }
        assert!(decoder.table_size() <= 4096);
    }
});

//! HPACK, HTTP/2's field compression (RFC 7541): the Huffman code, the
//! tables, a decoder with its bounds, and an encoder that never indexes.
//!
//! Owns the bytes of field blocks only; which fields a request may carry,
//! and what a block too large means, belong to the frame layer above
//! (`http::h2::conn`).

pub mod decode;
pub mod encode;
pub mod huffman;
pub mod table;

pub use decode::{Decoder, Error, FieldList};

/// Bytes from hex digits (whitespace ignored): the RFC's examples.
#[cfg(test)]
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

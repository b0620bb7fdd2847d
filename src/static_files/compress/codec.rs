//! One buffer in, its encoding out: gzip (flate2 on zlib-rs), brotli (the
//! `brotli` crate, pure Rust) and zstd (`zstd`, the C library), each at the
//! level the settings give. Pure CPU: no I/O, no locks, called by a worker
//! for a small file and by the background compressor for the others.

use std::io::{self, Write};

use super::super::encoding::Coding;

/// Brotli's smallest and largest window (RFC 7932 §9.1: WBITS 10..=24); the
/// window need not exceed the input, and a smaller one is less memory.
const BROTLI_WINDOW_BITS: std::ops::RangeInclusive<u32> = 10..=22;

/// `input` encoded with `coding` at `level` (already checked against the
/// coding's range by the config).
pub(crate) fn encode(coding: Coding, level: u32, input: &[u8]) -> io::Result<Vec<u8>> {
    match coding {
        Coding::Gzip => {
            let out = Vec::with_capacity(input.len() / 3 + 64);
            let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
            gz.write_all(input)?;
            gz.finish()
        }
        Coding::Brotli => {
            let bits = usize::BITS - input.len().max(1).leading_zeros();
            let window = bits.clamp(*BROTLI_WINDOW_BITS.start(), *BROTLI_WINDOW_BITS.end());
            let params = brotli::enc::BrotliEncoderParams {
                quality: level as i32,
                size_hint: input.len(),
                lgwin: window as i32,
                ..Default::default()
            };
            let mut out = Vec::with_capacity(input.len() / 4 + 64);
            brotli::BrotliCompress(&mut &input[..], &mut out, &params)?;
            Ok(out)
        }
        Coding::Zstd => zstd::bulk::compress(input, level as i32),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Text that compresses like source code: repeated words, some variety.
    fn text(len: usize) -> Vec<u8> {
        let words = [
            "function", "return", "const", "value", "=>", "{", "}", "(", ")", ";",
        ];
        let mut out = Vec::with_capacity(len + 16);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        while out.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.extend_from_slice(words[(state % words.len() as u64) as usize].as_bytes());
            out.push(if state & 0x30 == 0 { b'\n' } else { b' ' });
            if state & 0x700 == 0 {
                out.extend_from_slice(format!("x{}", state % 1000).as_bytes());
            }
        }
        out.truncate(len);
        out
    }

    pub(in crate::static_files::compress) fn decode(coding: Coding, bytes: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Brotli => {
                brotli::Decompressor::new(bytes, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => out = zstd::stream::decode_all(bytes).unwrap(),
        }
        out
    }

    #[test]
    fn every_coding_round_trips_at_its_extreme_levels() {
        let input = text(100_000);
        for (coding, levels) in [
            (Coding::Gzip, [1, 9]),
            (Coding::Brotli, [0, 11]),
            (Coding::Zstd, [1, 19]),
        ] {
            for level in levels {
                let out = encode(coding, level, &input).unwrap();
                assert!(
                    out.len() < input.len() / 2,
                    "{coding:?} {level}: {}",
                    out.len()
                );
                assert_eq!(decode(coding, &out), input, "{coding:?} {level}");
            }
        }
    }

    #[test]
    fn the_same_input_encodes_to_the_same_bytes() {
        // A strong ETag per variant needs this: two workers that compress
        // the same file must produce byte-identical variants.
        let input = text(20_000);
        for coding in Coding::PREFERENCE {
            assert_eq!(
                encode(coding, 5, &input).unwrap(),
                encode(coding, 5, &input).unwrap(),
                "{coding:?}"
            );
        }
    }

    #[test]
    fn empty_and_tiny_inputs_encode() {
        for coding in Coding::PREFERENCE {
            for input in [&b""[..], b"a"] {
                let out = encode(coding, 3, input).unwrap();
                assert_eq!(decode(coding, &out), input, "{coding:?}");
            }
        }
    }
}

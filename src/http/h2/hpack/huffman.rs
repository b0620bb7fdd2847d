//! The Huffman code of HPACK (RFC 7541 §5.2, Appendix B): string literals
//! are decoded through a table of 4-bit steps, and encoded when that makes
//! them shorter.
//!
//! The code is canonical: each symbol's code follows from the code lengths
//! alone (symbols ordered by length, then by value, each code the previous
//! one plus one, shifted to its length). So only the 257 lengths of
//! Appendix B are written here; the codes and the decoding table are built
//! from them at compile time, and the RFC's examples (Appendix C.4, C.6)
//! are the tests that the build is the RFC's code.
//!
//! Decoding walks the code's binary tree four bits at a time: a state is an
//! internal node (256 of them), and each (state, nibble) entry says where the
//! walk ends, which symbol it completed on the way (at most one: no code is
//! shorter than 5 bits), and whether it hit EOS (an error, RFC 7541 §5.2).
//! A string may end only on a node reached from the root by at most 7 one
//! bits (padding is a prefix of EOS).

/// Bits of the code of each byte value, then of EOS (256). RFC 7541
/// Appendix B, column "len in bits".
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The code of each symbol, right-aligned.
const CODES: [u32; 257] = codes();

const fn codes() -> [u32; 257] {
    let mut out = [0u32; 257];
    let mut code: u32 = 0;
    let mut first = true;
    let mut prev = 0u8;
    let mut len = 5u8;
    while len <= 30 {
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] == len {
                if first {
                    first = false;
                } else {
                    code = (code + 1) << (len - prev);
                }
                prev = len;
                out[sym] = code;
            }
            sym += 1;
        }
        len += 1;
    }
    out
}

/// One step of the decoding table: the next state in the low 8 bits, then
/// flags, then the symbol completed in bits 16..24.
type Step = u32;
const EMIT: Step = 1 << 8;
const FAIL: Step = 1 << 9;
/// The walk ends where a string may end (the root, or up to 7 one bits of
/// EOS below it).
const ACCEPT: Step = 1 << 10;

/// States (internal nodes) × 16 nibbles.
static STEPS: [Step; 256 * 16] = steps();

/// The code's tree: each internal node's two children, a child being
/// another internal node (`>= 0`) or a symbol (`-1 - symbol`).
const fn tree() -> [[i32; 2]; 256] {
    let mut nodes = [[i32::MIN; 2]; 256];
    let mut used: i32 = 1;
    let mut sym = 0;
    while sym < 257 {
        let len = LENGTHS[sym] as u32;
        let code = CODES[sym];
        let mut node = 0usize;
        let mut bit = len;
        while bit > 1 {
            bit -= 1;
            let b = ((code >> bit) & 1) as usize;
            if nodes[node][b] == i32::MIN {
                nodes[node][b] = used;
                used += 1;
            }
            node = nodes[node][b] as usize;
        }
        nodes[node][(code & 1) as usize] = -1 - sym as i32;
        sym += 1;
    }
    nodes
}

const fn steps() -> [Step; 256 * 16] {
    let nodes = tree();
    // How many one bits lead from the root to each node, if only ones do.
    let mut ones = [u8::MAX; 256];
    ones[0] = 0;
    let mut node = 0usize;
    let mut depth = 0u8;
    while nodes[node][1] >= 0 {
        depth += 1;
        node = nodes[node][1] as usize;
        ones[node] = depth;
    }
    let mut out = [0 as Step; 256 * 16];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step: Step = 0;
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = nodes[node][(nibble >> bit) & 1];
                if child >= 0 {
                    node = child as usize;
                } else {
                    let sym = (-1 - child) as u32;
                    if sym == 256 {
                        step |= FAIL;
                    } else {
                        step |= EMIT | sym << 16;
                    }
                    node = 0;
                }
            }
            if ones[node] <= 7 {
                step |= ACCEPT;
            }
            out[state * 16 + nibble] = step | node as Step;
            nibble += 1;
        }
        state += 1;
    }
    out
}

/// A Huffman-coded string that does not decode (RFC 7541 §5.2: EOS in it,
/// or padding longer than 7 bits or not of ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

/// Decode `src`, appending the bytes to `out` (at most `src.len() * 8 / 5`
/// of them).
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), Invalid> {
    out.reserve(src.len() * 8 / 5);
    let mut state = 0usize;
    let mut accept = true;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0xf] {
            let step = STEPS[state * 16 + nibble as usize];
            if step & FAIL != 0 {
                return Err(Invalid);
            }
            if step & EMIT != 0 {
                out.push((step >> 16) as u8);
            }
            state = (step & 0xff) as usize;
            accept = step & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(Invalid)
    }
}

/// Bytes `src` takes Huffman-coded.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Append `src` Huffman-coded to `out`, padded with the high bits of EOS.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len(src));
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let len = u32::from(LENGTHS[b as usize]);
        acc = acc << len | u64::from(CODES[b as usize]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push((acc << (8 - bits) | (0xff >> bits)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    /// RFC 7541 Appendix C.4 and C.6: strings and their Huffman codes.
    const EXAMPLES: &[(&str, &str)] = &[
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("private", "aec3 771a 4b"),
        (
            "Mon, 21 Oct 2013 20:13:21 GMT",
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            "https://www.example.com",
            "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
        ),
        (
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];

    #[test]
    fn the_rfc_examples_encode_and_decode() {
        for (text, code) in EXAMPLES {
            let code = hex(code);
            let mut out = Vec::new();
            encode(text.as_bytes(), &mut out);
            assert_eq!(out, code, "{text}");
            assert_eq!(encoded_len(text.as_bytes()), code.len(), "{text}");
            let mut back = Vec::new();
            decode(&code, &mut back).unwrap();
            assert_eq!(back, text.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for n in 0..all.len() {
            let mut out = Vec::new();
            encode(&all[..n], &mut out);
            let mut back = Vec::new();
            decode(&out, &mut back).unwrap();
            assert_eq!(back, &all[..n]);
        }
    }

    #[test]
    fn eos_and_bad_padding_are_refused() {
        // EOS itself (30 ones), padded to 32 bits.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new()),
            Err(Invalid)
        );
        // "0" is 00000 (5 bits): padding of 3 zeros is not EOS's prefix.
        assert_eq!(decode(&[0x00], &mut Vec::new()), Err(Invalid));
        // "0" padded with ones, then a whole byte of ones: 11 bits of padding.
        assert_eq!(decode(&[0x07, 0xff], &mut Vec::new()), Err(Invalid));
        let mut ok = Vec::new();
        decode(&[0x07], &mut ok).unwrap();
        assert_eq!(ok, b"0");
        // The empty string.
        assert_eq!(decode(&[], &mut Vec::new()), Ok(()));
    }
}

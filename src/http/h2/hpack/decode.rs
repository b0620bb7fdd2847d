//! HPACK decoding (RFC 7541 §6): a field block into a [`FieldList`], the
//! dynamic table kept in step.
//!
//! Bounds, checked before anything is kept:
//! - a string is no longer than what is left of the block (the block is
//!   bounded by the connection), and a Huffman string decodes to at most
//!   8/5 of its length;
//! - the list keeps fields only while their size (RFC 9113 §6.5.2: name,
//!   value and 32 each) is within the caller's limit; past it decoding goes
//!   on (the table must stay in step) but nothing more is kept, and the list
//!   says so ([`FieldList::over`]), so a block of references to one large
//!   entry (an "HPACK bomb") costs time bounded by its length and no memory;
//! - a dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE, or
//!   after the block's first field, is an error (RFC 7541 §4.2, §6.3).

use super::huffman;
use super::table::{Dynamic, ENTRY_OVERHEAD};

/// A field block that does not decode: a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("field block ends inside a representation")]
    Truncated,
    #[error("integer past 2^35")]
    Integer,
    #[error("index {0} names no table entry")]
    Index(usize),
    #[error("Huffman string does not decode")]
    Huffman,
    #[error("dynamic table size update to {size} past the {limit} our SETTINGS allow")]
    SizeUpdate { size: usize, limit: usize },
    #[error("dynamic table size update after a field")]
    SizeUpdateLate,
}

/// The fields of one block: names and values in one buffer, by offsets.
#[derive(Debug, Default)]
pub struct FieldList {
    /// Every kept name and value, back to back.
    pub bytes: Vec<u8>,
    /// Per field: (name start, name end = value start, value end).
    pub spans: Vec<[u32; 3]>,
    /// The list's size by RFC 9113 §6.5.2, kept fields and dropped ones.
    pub size: usize,
    /// Fields past the limit were dropped.
    pub over: bool,
}

impl FieldList {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.size = 0;
        self.over = false;
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Field `i`: (name, value).
    pub fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let [n, v, e] = self.spans[i];
        (
            &self.bytes[n as usize..v as usize],
            &self.bytes[v as usize..e as usize],
        )
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.len()).map(move |i| self.get(i))
    }
}

/// A connection's HPACK decoder.
#[derive(Debug)]
pub struct Decoder {
    table: Dynamic,
    /// SETTINGS_HEADER_TABLE_SIZE as the peer may use it: a size update
    /// above it is an error.
    limit: usize,
    /// Where strings of dropped fields are decoded (they may still enter
    /// the table).
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table may grow to `limit` bytes (it starts there,
    /// RFC 7541 §4.2: the peer uses up to the setting without an update).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: Dynamic::new(limit),
            limit,
            scratch: Vec::new(),
        }
    }

    /// A new SETTINGS_HEADER_TABLE_SIZE in force (acknowledged).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        if self.table.max() > limit {
            self.table.set_max(limit);
        }
    }

    /// Free the scratch buffer (an idle connection's).
    pub fn shed(&mut self) {
        self.scratch = Vec::new();
    }

    /// The dynamic table's size, by RFC 7541's count.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Decode `block` into `out` (appended), keeping fields while the
    /// list's size is within `limit`.
    pub fn decode(&mut self, block: &[u8], limit: usize, out: &mut FieldList) -> Result<(), Error> {
        let mut src = block;
        let mut fields = 0usize;
        while let Some(&b) = src.first() {
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer(&mut src, 7)?;
                let (name, value) = self.table.get(index).ok_or(Error::Index(index))?;
                keep(out, limit, name, value);
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the fields.
                if fields > 0 {
                    return Err(Error::SizeUpdateLate);
                }
                let size = integer(&mut src, 5)?;
                if size > self.limit {
                    return Err(Error::SizeUpdate {
                        size,
                        limit: self.limit,
                    });
                }
                self.table.set_max(size);
                continue;
            } else {
                // Literals (§6.2): with incremental indexing (01), without
                // (0000) or never indexed (0001).
                let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                self.literal(&mut src, prefix, index, limit, out)?;
            }
            fields += 1;
        }
        Ok(())
    }

    fn literal(
        &mut self,
        src: &mut &[u8],
        prefix: u8,
        index: bool,
        limit: usize,
        out: &mut FieldList,
    ) -> Result<(), Error> {
        let name_index = integer(src, prefix)?;
        // Decode into the list while it keeps fields, else into scratch.
        let keeping = !out.over;
        let buf = if keeping {
            &mut out.bytes
        } else {
            self.scratch.clear();
            &mut self.scratch
        };
        let start = buf.len();
        if name_index == 0 {
            string(src, buf)?;
        } else {
            let (name, _) = self.table.get(name_index).ok_or(Error::Index(name_index))?;
            buf.extend_from_slice(name);
        }
        let mid = buf.len();
        string(src, buf)?;
        let end = buf.len();
        if index {
            self.table.insert(&buf[start..mid], &buf[mid..end]);
        }
        out.size += end - start + ENTRY_OVERHEAD;
        if keeping {
            if out.size <= limit {
                out.spans.push([start as u32, mid as u32, end as u32]);
            } else {
                out.bytes.truncate(start);
                out.over = true;
            }
        }
        Ok(())
    }
}

/// Keep (name, value) in `out` if the list stays within `limit`.
fn keep(out: &mut FieldList, limit: usize, name: &[u8], value: &[u8]) {
    out.size += name.len() + value.len() + ENTRY_OVERHEAD;
    if out.over || out.size > limit {
        out.over = true;
        return;
    }
    let start = out.bytes.len();
    out.bytes.extend_from_slice(name);
    let mid = out.bytes.len();
    out.bytes.extend_from_slice(value);
    out.spans
        .push([start as u32, mid as u32, out.bytes.len() as u32]);
}

/// An integer with a `prefix`-bit prefix (RFC 7541 §5.1), taken from `src`.
fn integer(src: &mut &[u8], prefix: u8) -> Result<usize, Error> {
    let (&first, rest) = src.split_first().ok_or(Error::Truncated)?;
    *src = rest;
    let mask = (1u8 << prefix) - 1;
    let mut value = usize::from(first & mask);
    if value < usize::from(mask) {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let (&b, rest) = src.split_first().ok_or(Error::Truncated)?;
        *src = rest;
        value += usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
        if shift > 28 {
            return Err(Error::Integer);
        }
    }
}

/// A string literal (RFC 7541 §5.2) from `src`, appended to `out`.
fn string(src: &mut &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
    let huffman = src.first().ok_or(Error::Truncated)? & 0x80 != 0;
    let len = integer(src, 7)?;
    if len > src.len() {
        return Err(Error::Truncated);
    }
    let (s, rest) = src.split_at(len);
    *src = rest;
    if huffman {
        huffman::decode(s, out).map_err(|_| Error::Huffman)
    } else {
        out.extend_from_slice(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    fn fields(list: &FieldList) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 Appendix C.3 (requests without Huffman) and C.4 (with),
    /// three blocks each on one decoder, with the table sizes given there.
    #[test]
    fn the_rfc_request_examples_decode() {
        let blocks = [
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                vec![
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                ],
                57,
            ),
            (
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8286 84be 5886 a8eb 1064 9cbf",
                vec![
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ],
                110,
            ),
            (
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
                vec![
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ],
                164,
            ),
        ];
        for huffman in [false, true] {
            let mut d = Decoder::new(4096);
            for (plain, coded, want, size) in &blocks {
                let mut out = FieldList::default();
                let block = hex(if huffman { coded } else { plain });
                d.decode(&block, 1 << 16, &mut out).unwrap();
                assert_eq!(fields(&out), pairs(want));
                assert_eq!(d.table_size(), *size);
            }
        }
    }

    /// RFC 7541 Appendix C.5: responses with a 256-byte table, evicting.
    #[test]
    fn the_rfc_response_examples_decode_with_evictions() {
        let mut d = Decoder::new(256);
        let blocks = [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
             3d31",
        ];
        let sizes = [222, 222, 215];
        let mut last = FieldList::default();
        for (block, size) in blocks.iter().zip(sizes) {
            last.clear();
            d.decode(&hex(block), 1 << 16, &mut last).unwrap();
            assert_eq!(d.table_size(), size);
        }
        assert_eq!(
            fields(&last),
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
                ),
            ])
        );
    }

    #[test]
    fn a_bomb_is_counted_not_kept() {
        let mut d = Decoder::new(4096);
        // One 4,000-byte value into the table, then 10,000 references.
        let mut block = vec![0x40, 0x06];
        block.extend_from_slice(b"x-bomb");
        block.extend_from_slice(&[0x7f, 0x80 | 33, 30]); // 127 + 33 + 30 * 128
        block.extend(std::iter::repeat_n(b'a', 4000));
        block.extend(std::iter::repeat_n(0xbe, 10_000));
        let mut out = FieldList::default();
        d.decode(&block, 16 * 1024, &mut out).unwrap();
        assert!(out.over);
        assert_eq!(out.size, 10_001 * (6 + 4000 + 32));
        assert!(out.bytes.len() <= 16 * 1024, "{}", out.bytes.len());
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn size_updates_are_bounded_and_come_first() {
        let mut d = Decoder::new(4096);
        let mut out = FieldList::default();
        // 001 11111 + 8192 - 31 = 8161 = 0x1fe1 -> e1 3f
        assert_eq!(
            d.decode(&[0x3f, 0xe1, 0x3f, 0x82], 1 << 16, &mut out),
            Err(Error::SizeUpdate {
                size: 8192,
                limit: 4096
            })
        );
        assert_eq!(
            d.decode(&[0x82, 0x20], 1 << 16, &mut out),
            Err(Error::SizeUpdateLate)
        );
        out.clear();
        d.decode(&[0x20, 0x3f, 0xe1, 0x1f, 0x82], 1 << 16, &mut out)
            .unwrap();
        assert_eq!(fields(&out), pairs(&[(":method", "GET")]));
    }

    #[test]
    fn broken_blocks_are_errors_not_panics() {
        let cases: &[(&[u8], Error)] = &[
            (&[0x80], Error::Index(0)),
            (&[0xff, 0x80], Error::Truncated),
            (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], Error::Integer),
            (&[0xbe], Error::Index(62)),
            (&[0x40, 0x05, b'a'], Error::Truncated),
            (&[0x00, 0x81, 0x00, 0x00], Error::Huffman),
            (&[0x0f], Error::Truncated),
        ];
        for (block, want) in cases {
            let mut d = Decoder::new(4096);
            let mut out = FieldList::default();
            assert_eq!(
                d.decode(block, 1 << 16, &mut out),
                Err(*want),
                "{block:02x?}"
            );
        }
    }
}

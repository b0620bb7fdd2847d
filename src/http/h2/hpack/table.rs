//! HPACK's tables (RFC 7541 §2.3): the static table of Appendix A and a
//! decoder's dynamic table, bounded by the size our SETTINGS allow.

use std::collections::VecDeque;

/// RFC 7541 Appendix A: index 1 is the first entry.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The static index of a field name (its first entry), for encoding.
pub fn static_name(name: &[u8]) -> Option<usize> {
    // Names a response carries most, first; then the table.
    match name {
        b"content-type" => Some(31),
        b"content-length" => Some(28),
        b"date" => Some(33),
        b"server" => Some(54),
        b"etag" => Some(34),
        b"last-modified" => Some(44),
        b"accept-ranges" => Some(18),
        b"cache-control" => Some(24),
        b"vary" => Some(59),
        b"content-encoding" => Some(26),
        _ => STATIC.iter().position(|(n, _)| *n == name).map(|i| i + 1),
    }
}

/// What an entry costs in the table: its bytes and 32 (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// A decoder's dynamic table: newest entry first (index 62).
#[derive(Debug, Default)]
pub struct Dynamic {
    /// Name and value in one allocation, with the name's length.
    entries: VecDeque<(Box<[u8]>, usize)>,
    /// Sum of the entries' sizes.
    size: usize,
    /// The most `size` may be (the last size update, at most our setting).
    max: usize,
}

impl Dynamic {
    pub fn new(max: usize) -> Dynamic {
        Dynamic {
            entries: VecDeque::new(),
            size: 0,
            max,
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes the entries hold, by RFC 7541's count.
    pub fn size(&self) -> usize {
        self.size
    }

    /// A new maximum size; entries are evicted to fit (RFC 7541 §4.3).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
    }

    fn evict_to(&mut self, room: usize) {
        while self.size > room {
            match self.entries.pop_back() {
                Some((bytes, _)) => self.size -= bytes.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    /// Add an entry; one larger than the table empties it (RFC 7541 §4.4).
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let need = name.len() + value.len() + ENTRY_OVERHEAD;
        if need > self.max {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max - need);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries
            .push_front((bytes.into_boxed_slice(), name.len()));
        self.size += need;
    }

    /// Entry `index` of the combined index space (1 is the static table's
    /// first; the dynamic table starts at 62).
    pub fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        match index {
            0 => None,
            1..=61 => Some(STATIC[index - 1]),
            _ => self
                .entries
                .get(index - 62)
                .map(|(bytes, n)| bytes.split_at(*n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_evicted_oldest_first_and_one_too_large_empties_the_table() {
        let mut t = Dynamic::new(100);
        t.insert(b"a", b"1234567890"); // 43
        t.insert(b"b", b"1234567890"); // 86
        assert_eq!(t.get(62), Some((&b"b"[..], &b"1234567890"[..])));
        assert_eq!(t.get(63), Some((&b"a"[..], &b"1234567890"[..])));
        t.insert(b"c", b"12"); // 35: a goes
        assert_eq!(t.size(), 43 + 35);
        assert_eq!(t.get(64), None);
        assert_eq!(t.get(63).unwrap().0, b"b");
        t.insert(b"d", &[b'x'; 100]);
        assert_eq!(t.size(), 0);
        assert_eq!(t.get(62), None);
        t.insert(b"e", b"1");
        t.set_max(0);
        assert_eq!(t.get(62), None);
    }

    #[test]
    fn static_names_are_found() {
        for (i, (name, _)) in STATIC.iter().enumerate() {
            let first = STATIC.iter().position(|(n, _)| n == name).unwrap();
            assert_eq!(static_name(name), Some(first + 1), "{i}");
        }
        assert_eq!(static_name(b"x-custom"), None);
    }
}

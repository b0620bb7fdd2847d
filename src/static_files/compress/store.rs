//! The variant cache: compressed bodies by file identity and coding, within
//! one byte budget, least recently used out first.
//!
//! Owns [`Store`]: the map, the recency list, the bytes held, the keys being
//! compressed in the background (so a file is queued once), and the
//! counters it keeps in [`CompressStats`]. Does not own making variants
//! (`codec`, `background`) nor deciding what to compress (`compress`).
//!
//! One `Mutex` for the whole store, shared by every worker thread of the
//! process: a hit holds it for a hash lookup, two list relinks and a `Bytes`
//! clone (tens of nanoseconds; docs/decisions/0008 has the measured cost),
//! and no compression ever runs under it.
//!
//! Flow of [`Store::insert`]:
//! 1. A variant whose cost (body + [`ENTRY_OVERHEAD`]) exceeds the whole
//!    budget is not kept (counted as skipped).
//! 2. Least recently used entries are evicted until it fits.
//! 3. It goes in at the front; the bytes held never pass the budget.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::super::cache::Identity;
use super::super::encoding::Coding;
use crate::telemetry::CompressStats;

/// What one entry costs beyond its body: the key, the list links, the map
/// slot and the `Bytes` header, rounded up.
pub(crate) const ENTRY_OVERHEAD: usize = 128;

/// A variant's key: the file version (a change in any field is a different
/// file, never a stale variant) and the coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) len: u64,
    pub(crate) mtime_ns: i128,
    pub(crate) coding: Coding,
}

impl Key {
    pub(crate) fn new(identity: &Identity, coding: Coding) -> Key {
        Key {
            dev: identity.dev,
            ino: identity.ino,
            len: identity.len,
            mtime_ns: identity.mtime_ns,
            coding,
        }
    }
}

impl Hash for Key {
    /// One word for the whole key, mixed by [`KeyHasher`]: SipHash over the
    /// key's 41 bytes was ~200 instructions of a hit (callgrind). A keyed
    /// hash is not needed: a client picks which files it asks for, never
    /// their inode or mtime.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let coding = self.coding.index() as u64;
        let word = self.ino.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (self.mtime_ns as u64).rotate_left(17)
            ^ ((self.mtime_ns >> 64) as u64)
            ^ self.len.rotate_left(41)
            ^ self.dev.rotate_left(7)
            ^ coding.rotate_left(59);
        state.write_u64(word);
    }
}

/// The store's hasher: the key's one word through murmur3's finalizer, so
/// both the bucket bits and the control bits of the map are well spread.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is ever called (`Key::hash`); fold anything else.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 ^= word;
    }

    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}

type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;
type KeySet = HashSet<Key, BuildHasherDefault<KeyHasher>>;

/// What the cache knows of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cached {
    /// The compressed body.
    Variant(Bytes),
    /// Compressing did not make it smaller: send identity, do not retry.
    NoGain,
}

impl Cached {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD
            + match self {
                Cached::Variant(b) => b.len(),
                Cached::NoGain => 0,
            }
    }
}

/// No neighbour in the recency list.
const NIL: usize = usize::MAX;

struct Node {
    key: Key,
    value: Cached,
    /// Towards the most recently used.
    prev: usize,
    /// Towards the least recently used.
    next: usize,
}

/// The map and the recency list (nodes in a slab, linked by index).
struct Lru {
    map: KeyMap<usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    /// Most recently used.
    head: usize,
    /// Least recently used: the next eviction.
    tail: usize,
    /// Sum of the entries' costs; never above the budget.
    used: usize,
    /// Keys queued for or being compressed by the background compressor.
    pending: KeySet,
}

/// The variant cache of one process (see the module doc).
pub(crate) struct Store {
    lru: Mutex<Lru>,
    budget: usize,
    stats: &'static CompressStats,
}

impl Store {
    /// An empty cache of `budget` bytes counting into `stats`.
    pub(crate) fn new(budget: usize, stats: &'static CompressStats) -> Store {
        Store {
            lru: Mutex::new(Lru {
                map: KeyMap::default(),
                nodes: Vec::new(),
                free: Vec::new(),
                head: NIL,
                tail: NIL,
                used: 0,
                pending: KeySet::default(),
            }),
            budget,
            stats,
        }
    }

    pub(crate) fn stats(&self) -> &'static CompressStats {
        self.stats
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // No code under the lock can leave the list half-linked on a panic
        // (no allocation happens between relinks), so a poisoned lock's
        // state is still whole.
        self.lru
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached value of `key`, now the most recently used.
    pub(crate) fn get(&self, key: &Key) -> Option<Cached> {
        let mut lru = self.lock();
        let i = *lru.map.get(key)?;
        lru.unlink(i);
        lru.push_front(i);
        Some(lru.nodes[i].value.clone())
    }

    /// Keep `value` for `key` within the budget (module doc, flow); false
    /// when it is larger than the whole budget.
    pub(crate) fn insert(&self, key: Key, value: Cached) -> bool {
        let cost = value.cost();
        if cost > self.budget {
            CompressStats::add(&self.stats.skipped, 1);
            return false;
        }
        let mut lru = self.lock();
        if let Some(i) = lru.map.get(&key).copied() {
            // Another worker made it meanwhile: same bytes, keep one.
            lru.unlink(i);
            lru.push_front(i);
            return true;
        }
        let mut evicted = 0;
        while lru.used + cost > self.budget {
            let last = lru.tail;
            if last == NIL {
                break;
            }
            lru.remove(last);
            evicted += 1;
        }
        let node = Node {
            key,
            value,
            prev: NIL,
            next: NIL,
        };
        let i = match lru.free.pop() {
            Some(i) => {
                lru.nodes[i] = node;
                i
            }
            None => {
                lru.nodes.push(node);
                lru.nodes.len() - 1
            }
        };
        lru.map.insert(key, i);
        lru.push_front(i);
        lru.used += cost;
        let (used, entries) = (lru.used, lru.map.len());
        drop(lru);
        self.publish(used, entries);
        CompressStats::add(&self.stats.evictions, evicted);
        true
    }

    /// Mark `key` as queued for the background compressor; false when it is
    /// already queued or cached (nothing to do).
    pub(crate) fn begin(&self, key: Key) -> bool {
        let mut lru = self.lock();
        !lru.map.contains_key(&key) && lru.pending.insert(key)
    }

    /// `key` is no longer queued (made, refused or failed).
    pub(crate) fn end(&self, key: &Key) {
        self.lock().pending.remove(key);
    }

    /// Bytes held now (the gauge's value).
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.lock().used
    }

    fn publish(&self, used: usize, entries: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.cache_bytes.store(used as u64, Relaxed);
        self.stats.cache_entries.store(entries as u64, Relaxed);
    }
}

impl Lru {
    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        match prev {
            NIL => self.head = next,
            p => self.nodes[p].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n].prev = prev,
        }
        self.nodes[i].prev = NIL;
        self.nodes[i].next = NIL;
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].next = self.head;
        self.nodes[i].prev = NIL;
        match self.head {
            NIL => self.tail = i,
            h => self.nodes[h].prev = i,
        }
        self.head = i;
    }

    /// Drop entry `i`; its slot is reused by the next insert.
    fn remove(&mut self, i: usize) {
        self.unlink(i);
        let key = self.nodes[i].key;
        self.map.remove(&key);
        let value = std::mem::replace(&mut self.nodes[i].value, Cached::NoGain);
        self.used -= value.cost();
        self.free.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> &'static CompressStats {
        Box::leak(Box::new(CompressStats::new()))
    }

    fn key(ino: u64, coding: Coding) -> Key {
        Key {
            dev: 1,
            ino,
            len: 10,
            mtime_ns: 5,
            coding,
        }
    }

    fn body(n: usize) -> Cached {
        Cached::Variant(Bytes::from(vec![b'x'; n]))
    }

    #[test]
    fn a_hit_returns_the_same_bytes() {
        let s = Store::new(10_000, stats());
        assert!(s.insert(key(1, Coding::Gzip), body(100)));
        assert_eq!(s.get(&key(1, Coding::Gzip)), Some(body(100)));
        assert_eq!(s.get(&key(1, Coding::Brotli)), None);
        assert_eq!(s.used(), 100 + ENTRY_OVERHEAD);
    }

    #[test]
    fn another_identity_is_another_key() {
        let s = Store::new(10_000, stats());
        let k = key(1, Coding::Gzip);
        s.insert(k, body(100));
        for changed in [
            Key { mtime_ns: 6, ..k },
            Key { len: 11, ..k },
            Key { ino: 2, ..k },
            Key { dev: 2, ..k },
        ] {
            assert_eq!(s.get(&changed), None, "{changed:?}");
        }
    }

    #[test]
    fn the_budget_is_never_passed_and_the_least_recent_goes_first() {
        let st = stats();
        let cost = 1000 + ENTRY_OVERHEAD;
        let s = Store::new(3 * cost, st);
        for ino in 1..=3 {
            s.insert(key(ino, Coding::Zstd), body(1000));
        }
        // 1 is used again, so 2 is now the least recent.
        s.get(&key(1, Coding::Zstd));
        for ino in 4..=20 {
            s.insert(key(ino, Coding::Zstd), body(1000));
            assert!(s.used() <= 3 * cost);
            if ino == 4 {
                assert!(s.get(&key(1, Coding::Zstd)).is_some());
                assert!(s.get(&key(2, Coding::Zstd)).is_none());
            }
        }
        assert_eq!(s.used(), 3 * cost);
        assert_eq!(st.evictions.load(std::sync::atomic::Ordering::Relaxed), 17);
        assert_eq!(
            st.cache_bytes.load(std::sync::atomic::Ordering::Relaxed),
            3 * cost as u64
        );
    }

    #[test]
    fn a_variant_larger_than_the_budget_is_not_kept() {
        let st = stats();
        let s = Store::new(500, st);
        s.insert(key(1, Coding::Gzip), body(100));
        assert!(!s.insert(key(2, Coding::Gzip), body(500)));
        assert!(
            s.get(&key(1, Coding::Gzip)).is_some(),
            "nothing evicted for it"
        );
        assert_eq!(st.skipped.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn a_big_variant_evicts_as_many_as_it_needs() {
        let s = Store::new(10 * (100 + ENTRY_OVERHEAD), stats());
        for ino in 0..10 {
            s.insert(key(ino, Coding::Gzip), body(100));
        }
        s.insert(key(99, Coding::Gzip), body(5 * 100));
        assert!(s.used() <= 10 * (100 + ENTRY_OVERHEAD));
        assert!(s.get(&key(99, Coding::Gzip)).is_some());
        assert!(s.get(&key(0, Coding::Gzip)).is_none());
        assert!(s.get(&key(9, Coding::Gzip)).is_some());
    }

    #[test]
    fn a_key_is_queued_once_until_it_ends() {
        let s = Store::new(10_000, stats());
        let k = key(1, Coding::Brotli);
        assert!(s.begin(k));
        assert!(!s.begin(k));
        s.end(&k);
        assert!(s.begin(k));
        s.end(&k);
        s.insert(k, Cached::NoGain);
        assert!(!s.begin(k), "cached: nothing to queue");
    }

    #[test]
    fn keys_that_differ_in_one_field_hash_apart() {
        let hash = |k: &Key| {
            let mut h = KeyHasher::default();
            k.hash(&mut h);
            h.finish()
        };
        let k = key(1, Coding::Gzip);
        let mut seen = std::collections::HashSet::new();
        for changed in [
            k,
            Key { ino: 2, ..k },
            Key { dev: 2, ..k },
            Key { len: 11, ..k },
            Key { mtime_ns: 6, ..k },
            Key {
                mtime_ns: 5 + (1 << 64),
                ..k
            },
            Key {
                coding: Coding::Brotli,
                ..k
            },
        ] {
            assert!(seen.insert(hash(&changed)), "{changed:?}");
        }
        // Consecutive inodes spread over the map's buckets and control bits.
        let low: std::collections::HashSet<u64> = (0..1024)
            .map(|i| hash(&key(i, Coding::Gzip)) & 1023)
            .collect();
        let top: std::collections::HashSet<u64> = (0..1024)
            .map(|i| hash(&key(i, Coding::Gzip)) >> 57)
            .collect();
        assert!(
            low.len() > 600 && top.len() > 100,
            "{} {}",
            low.len(),
            top.len()
        );
    }

    #[test]
    fn slots_are_reused_after_eviction() {
        let s = Store::new(2 * (10 + ENTRY_OVERHEAD), stats());
        for ino in 0..1000 {
            s.insert(key(ino, Coding::Gzip), body(10));
        }
        assert!(s.lock().nodes.len() <= 3);
    }
}

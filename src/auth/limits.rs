//! What the server remembers of credentials: those a worker verified, and
//! the failures of each client address. Both are bounded, so no client can
//! grow them.
//!
//! - [`Verified`]: a digest of (the users file's reading, the user, the
//!   password), never the password, with when it was verified; at most
//!   [`VERIFIED_ENTRIES`], each kept [`VERIFIED_FOR`]; one per worker
//!   thread, for all its sites, asked with no lock. A browser sends its
//!   credentials with every request; only the first costs a hash.
//! - [`Failures`]: a token bucket per address (an IPv6 address counts by
//!   its /64, what one client usually holds): [`FAILURE_BURST`] failures,
//!   then one more each [`FAILURE_REFILL`]. Past it, 429 and no hash: 1,000
//!   wrong passwords from one address cost [`FAILURE_BURST`] hashes and a
//!   few more as the bucket refills. At most [`FAILURE_ADDRESSES`]; when
//!   full, buckets that refilled go first, then the least recently failed.
//!   One table for the process (a mutex, taken only for credentials not
//!   verified before), so an address meets the same limit whichever worker
//!   its connections land on; with `--isolation process` each worker
//!   process has its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Credentials a worker remembers as verified.
pub const VERIFIED_ENTRIES: usize = 1024;
/// How long a verification is remembered.
pub const VERIFIED_FOR: Duration = Duration::from_secs(15 * 60);
/// Failures an address may have before it must wait.
pub const FAILURE_BURST: u32 = 10;
/// How long an address waits for one more try.
pub const FAILURE_REFILL: Duration = Duration::from_secs(6);
/// Addresses whose failures a worker counts.
pub const FAILURE_ADDRESSES: usize = 4096;

/// A credential's digest (SHA-256).
pub type Digest = [u8; 32];

/// The digest of `user` and `password` under the users file reading
/// `users` (`Users::id`: two sites' same user, or a file read again, never
/// share an entry).
pub fn digest(users: u64, user: &[u8], password: &[u8]) -> Digest {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&users.to_le_bytes());
    ctx.update(&(user.len() as u64).to_le_bytes());
    ctx.update(user);
    ctx.update(password);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The credentials this worker verified.
#[derive(Default)]
pub struct Verified {
    when: HashMap<Digest, Instant>,
}

impl Verified {
    pub fn contains(&self, d: &Digest, now: Instant) -> bool {
        self.when
            .get(d)
            .is_some_and(|&t| now.duration_since(t) < VERIFIED_FOR)
    }

    pub fn insert(&mut self, d: Digest, now: Instant) {
        if self.when.len() >= VERIFIED_ENTRIES && !self.when.contains_key(&d) {
            self.when
                .retain(|_, t| now.duration_since(*t) < VERIFIED_FOR);
            if self.when.len() >= VERIFIED_ENTRIES {
                if let Some(oldest) = self.when.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                    self.when.remove(&oldest);
                }
            }
        }
        self.when.insert(d, now);
    }

    pub fn len(&self) -> usize {
        self.when.len()
    }

    pub fn is_empty(&self) -> bool {
        self.when.is_empty()
    }
}

/// One address's failures.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tries left, as of `at`.
    tokens: u32,
    at: Instant,
}

impl Bucket {
    /// Refilled to `now`.
    fn now(self, now: Instant) -> Bucket {
        let gained = now.duration_since(self.at).as_secs_f64() / FAILURE_REFILL.as_secs_f64();
        let whole = gained.floor() as u64;
        if whole == 0 {
            return self;
        }
        let tokens = (u64::from(self.tokens) + whole).min(u64::from(FAILURE_BURST)) as u32;
        let at = if tokens == FAILURE_BURST {
            now
        } else {
            self.at + FAILURE_REFILL * whole as u32
        };
        Bucket { tokens, at }
    }
}

/// Failures by client address.
#[derive(Default)]
pub struct Failures {
    by_address: HashMap<IpAddr, Bucket>,
}

/// What counts as one client: an IPv4 address, an IPv6 /64.
fn key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
    }
}

impl Failures {
    /// `None` if `addr` may try now, else how long until it may.
    pub fn wait(&self, addr: IpAddr, now: Instant) -> Option<Duration> {
        let b = self.by_address.get(&key(addr))?.now(now);
        (b.tokens == 0).then(|| FAILURE_REFILL.saturating_sub(now.duration_since(b.at)))
    }

    /// `addr` failed once.
    pub fn fail(&mut self, addr: IpAddr, now: Instant) {
        let k = key(addr);
        if !self.by_address.contains_key(&k) && self.by_address.len() >= FAILURE_ADDRESSES {
            self.by_address
                .retain(|_, b| b.now(now).tokens < FAILURE_BURST);
            if self.by_address.len() >= FAILURE_ADDRESSES {
                if let Some(oldest) = self
                    .by_address
                    .iter()
                    .min_by_key(|(_, b)| b.at)
                    .map(|(k, _)| *k)
                {
                    self.by_address.remove(&oldest);
                }
            }
        }
        let fresh = Bucket {
            tokens: FAILURE_BURST,
            at: now,
        };
        let b = self.by_address.get(&k).copied().unwrap_or(fresh).now(now);
        self.by_address.insert(
            k,
            Bucket {
                tokens: b.tokens.saturating_sub(1),
                at: b.at,
            },
        );
    }

    pub fn len(&self) -> usize {
        self.by_address.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }
}

thread_local! {
    static VERIFIED: RefCell<Verified> = RefCell::new(Verified::default());
}

/// `f` with this thread's (worker's) verified credentials.
pub fn verified<T>(f: impl FnOnce(&mut Verified) -> T) -> T {
    VERIFIED.with(|v| f(&mut v.borrow_mut()))
}

/// `f` with the process's failures.
pub fn failures<T>(f: impl FnOnce(&mut Failures) -> T) -> T {
    static FAILURES: Mutex<Option<Failures>> = Mutex::new(None);
    let mut table = FAILURES.lock().unwrap_or_else(|p| p.into_inner());
    f(table.get_or_insert_with(Failures::default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_waits_after_its_burst_and_gets_tries_back() {
        let mut f = Failures::default();
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..FAILURE_BURST {
            assert_eq!(f.wait(a, t0), None);
            f.fail(a, t0);
        }
        let wait = f.wait(a, t0).expect("must wait");
        assert!(wait <= FAILURE_REFILL);
        // Another address is not held.
        assert_eq!(f.wait("192.0.2.8".parse().unwrap(), t0), None);
        // One refill later, one try.
        let t1 = t0 + FAILURE_REFILL;
        assert_eq!(f.wait(a, t1), None);
        f.fail(a, t1);
        assert!(f.wait(a, t1).is_some());
        // A whole burst later, all of them.
        let t2 = t1 + FAILURE_REFILL * FAILURE_BURST;
        for _ in 0..FAILURE_BURST {
            assert_eq!(f.wait(a, t2), None);
            f.fail(a, t2);
        }
        assert!(f.wait(a, t2).is_some());
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let mut f = Failures::default();
        let t = Instant::now();
        for i in 0..FAILURE_BURST {
            let a: IpAddr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            f.fail(a, t);
        }
        assert!(f.wait("2001:db8:1:2:ffff::1".parse().unwrap(), t).is_some());
        assert_eq!(f.wait("2001:db8:1:3::1".parse().unwrap(), t), None);
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn the_tables_stay_bounded_whatever_the_clients() {
        let mut f = Failures::default();
        let mut v = Verified::default();
        let t = Instant::now();
        for i in 0..(FAILURE_ADDRESSES as u32 * 3) {
            f.fail(IpAddr::V4(i.into()), t);
            v.insert(digest(1, &i.to_le_bytes(), b"p"), t);
        }
        assert_eq!(f.len(), FAILURE_ADDRESSES);
        assert_eq!(v.len(), VERIFIED_ENTRIES);
        // The last verified is still there.
        let last = FAILURE_ADDRESSES as u32 * 3 - 1;
        assert!(v.contains(&digest(1, &last.to_le_bytes(), b"p"), t));
        assert!(!v.contains(&digest(1, &last.to_le_bytes(), b"p"), t + VERIFIED_FOR));
    }

    #[test]
    fn digests_tell_users_passwords_and_rules_apart() {
        assert_ne!(digest(1, b"ab", b"c"), digest(1, b"a", b"bc"));
        assert_ne!(digest(1, b"a", b"b"), digest(2, b"a", b"b"));
        assert_eq!(digest(1, b"a", b"b"), digest(1, b"a", b"b"));
    }
}

//! Session tickets every worker can open.
//!
//! Keys are derived, not stored: key(period) = HKDF-SHA256(secret, period
//! number), where the period is wall-clock time divided by the rotation
//! interval. Workers that share the secret agree on the keys without talking,
//! rotate at the same instant, and accept tickets of the current and the
//! previous period. A ticket is `period (8 bytes) || nonce (12) ||
//! ChaCha20-Poly1305(state)`; the period names the key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};

/// Derives ticket keys from a shared secret and the time.
pub(crate) struct Ticketer {
    secret: hkdf::Prk,
    period: Duration,
    rng: SystemRandom,
}

impl std::fmt::Debug for Ticketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticketer")
            .field("period", &self.period)
            .finish()
    }
}

struct KeyLen;

impl hkdf::KeyType for KeyLen {
    fn len(&self) -> usize {
        CHACHA20_POLY1305.key_len()
    }
}

impl Ticketer {
    pub(crate) fn new(secret: [u8; 32], period: Duration) -> Ticketer {
        Ticketer {
            secret: hkdf::Salt::new(hkdf::HKDF_SHA256, b"servery ticket keys").extract(&secret),
            period: period.max(Duration::from_secs(1)),
            rng: SystemRandom::new(),
        }
    }

    fn now_period(&self) -> u64 {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        secs / self.period.as_secs().max(1)
    }

    fn key(&self, period: u64) -> Option<LessSafeKey> {
        let info = period.to_be_bytes();
        let info = [&info[..]];
        let okm = self.secret.expand(&info, KeyLen).ok()?;
        let mut bytes = [0u8; 32];
        okm.fill(&mut bytes).ok()?;
        UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .ok()
            .map(LessSafeKey::new)
    }

    /// A ticket holding `plain`, under the key of `period`.
    fn seal(&self, period: u64, plain: &[u8]) -> Option<Vec<u8>> {
        let key = self.key(period)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(8 + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&period.to_be_bytes());
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&out[..8]),
            &mut body,
        )
        .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    /// What `cipher` holds, if it is a ticket of period `now` or the one
    /// before, sealed with this secret and untouched.
    fn open(&self, cipher: &[u8], now: u64) -> Option<Vec<u8>> {
        if cipher.len() < 8 + NONCE_LEN + 16 {
            return None;
        }
        let period = u64::from_be_bytes(cipher[..8].try_into().ok()?);
        if period != now && period.checked_add(1) != Some(now) {
            return None;
        }
        let key = self.key(period)?;
        let nonce = Nonce::try_assume_unique_for_key(&cipher[8..8 + NONCE_LEN]).ok()?;
        let mut body = cipher[8 + NONCE_LEN..].to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(&cipher[..8]), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

impl rustls::server::ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // Valid through the next period (we accept current and previous).
        self.period.as_secs().min(u64::from(u32::MAX / 2)) as u32 * 2
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal(self.now_period(), plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open(cipher, self.now_period())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets;

    #[test]
    fn two_ticketers_with_one_secret_open_each_others_tickets() {
        let a = Ticketer::new([7; 32], Duration::from_secs(3600));
        let b = Ticketer::new([7; 32], Duration::from_secs(3600));
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(b.decrypt(&t).unwrap(), b"session state");
        let other = Ticketer::new([8; 32], Duration::from_secs(3600));
        assert!(other.decrypt(&t).is_none());
        let mut tampered = t.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(b.decrypt(&tampered).is_none());
    }

    #[test]
    fn a_ticket_opens_in_its_period_and_the_next_only() {
        let t = Ticketer::new([7; 32], Duration::from_secs(3600));
        let ticket = t.seal(100, b"session state").unwrap();
        assert_eq!(t.open(&ticket, 100).unwrap(), b"session state");
        assert_eq!(t.open(&ticket, 101).unwrap(), b"session state");
        assert!(t.open(&ticket, 102).is_none(), "two rotations later");
        assert!(t.open(&ticket, 99).is_none(), "from the future");
        // The period is authenticated: relabelling a ticket does not
        // extend its life.
        let mut relabelled = ticket.clone();
        relabelled[..8].copy_from_slice(&101u64.to_be_bytes());
        assert!(t.open(&relabelled, 102).is_none());
        // The lifetime clients are told covers both periods.
        assert_eq!(t.lifetime(), 7200);
    }
}

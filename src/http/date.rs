//! The `Date` header, formatted once per second per worker.
//!
//! RFC 9110 §6.6.1 requires an origin with a clock to send Date. Formatting an
//! IMF-fixdate costs far more than reading the clock (vDSO), so each worker
//! keeps the last second's text and reformats only when the second changes.

use std::time::{SystemTime, UNIX_EPOCH};

/// Per-worker cache of the current `Date` value.
#[derive(Debug)]
pub struct DateCache {
    second: u64,
    text: [u8; 29],
}

impl Default for DateCache {
    fn default() -> Self {
        let mut c = DateCache {
            second: u64::MAX,
            text: [b' '; 29],
        };
        c.refresh();
        c
    }
}

impl DateCache {
    /// The IMF-fixdate for now, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    pub fn now(&mut self) -> &[u8; 29] {
        self.refresh();
        &self.text
    }

    fn refresh(&mut self) {
        let now = SystemTime::now();
        let second = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if second != self.second {
            let s = httpdate::fmt_http_date(now);
            let bytes = s.as_bytes();
            if bytes.len() == self.text.len() {
                self.text.copy_from_slice(bytes);
            }
            self.second = second;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_imf_fixdate() {
        let mut c = DateCache::default();
        let s = std::str::from_utf8(c.now()).unwrap().to_owned();
        assert!(s.ends_with(" GMT"), "{s}");
        assert!(httpdate::parse_http_date(&s).is_ok());
    }
}

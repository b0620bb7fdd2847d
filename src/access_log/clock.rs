//! The time of an access-log line: both its spellings (RFC 3339 and the
//! common log format, UTC), formatted once per second per worker as the
//! `Date` header is (`http::date`), since formatting costs far more than
//! reading the clock.

/// The time of a line in both spellings, formatted once per second.
#[derive(Debug, Clone)]
pub struct Stamp {
    second: u64,
    iso: String,
    common: String,
}

impl Stamp {
    /// The time `second` (Unix, UTC) spelled both ways.
    pub fn at(second: u64) -> Stamp {
        let (y, mo, d) = civil(second / 86_400);
        let rem = second % 86_400;
        let (h, mi, s) = (rem / 3600, rem / 60 % 60, rem % 60);
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        Stamp {
            second,
            iso: format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
            common: format!(
                "{d:02}/{}/{y:04}:{h:02}:{mi:02}:{s:02} +0000",
                MONTHS[(mo - 1) as usize]
            ),
        }
    }

    pub fn iso8601(&self) -> &str {
        &self.iso
    }

    pub fn common(&self) -> &str {
        &self.common
    }
}

/// A worker's clock for its lines: the stamp is rebuilt when the second
/// changes, as the `Date` header's is.
#[derive(Debug)]
pub struct Clock {
    stamp: Stamp,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock {
            stamp: Stamp::at(unix_now()),
        }
    }
}

impl Clock {
    /// The stamp for now.
    pub fn now(&mut self) -> &Stamp {
        let now = unix_now();
        if now != self.stamp.second {
            self.stamp = Stamp::at(now);
        }
        &self.stamp
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Year, month (1-12) and day of the `days`th day after 1970-01-01, in the
/// proleptic Gregorian calendar (the days-from-civil inversion over 400-year
/// eras of 146,097 days).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_spell_rfc3339_and_common_log_time() {
        // 2026-12-01T16:48:34Z
        let s = Stamp::at(1_796_143_714);
        assert_eq!(s.iso8601(), "2026-12-01T16:48:34Z");
        assert_eq!(s.common(), "01/Dec/2026:16:48:34 +0000");
        assert_eq!(Stamp::at(0).iso8601(), "1970-01-01T00:00:00Z");
        // A leap day.
        assert_eq!(Stamp::at(951_782_400).iso8601(), "2000-02-29T00:00:00Z");
    }
}

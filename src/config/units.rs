//! Sizes and durations as an operator types them: `64k`, `1MiB`, `30s`,
//! `500ms`, with a bare number still read as bytes or seconds.
//!
//! Owns [`Size`] and [`Seconds`]: the raw form of every `*_bytes`-like and
//! every timeout-like setting, on the command line and in the file alike
//! (`FromStr` for clap, `Deserialize` for TOML), and how the effective
//! config writes them back (`Serialize`: the largest unit that is exact, so
//! `262144` reads `256KiB`). Does not own any bound: the rules in
//! `setting.rs` and the concern modules check the number as before, so a
//! negative duration still gets the setting's own message.
//!
//! The units are nginx's and systemd's where they agree: `k`, `m`, `g` are
//! powers of 1024 (as are `KiB`, `MiB`, `GiB`), while `kB`, `MB`, `GB` are
//! powers of 1000 as in Caddy and SI, so no spelling means two things.
//! Durations take `ms`, `s`, `m`, `h`, `d` (and `us`), one or several
//! (`1m30s`).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A number of bytes, written bare or with a unit (`64k`, `1MiB`, `1MB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// A number of seconds, written bare (`1.5`) or with units (`500ms`, `2m`,
/// `1m30s`). Kept as written (a float) so each setting's own rule decides
/// what is out of range, negative values included.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

impl From<u64> for Size {
    fn from(n: u64) -> Size {
        Size(n)
    }
}

impl From<Size> for u64 {
    fn from(s: Size) -> u64 {
        s.0
    }
}

impl From<f64> for Seconds {
    fn from(s: f64) -> Seconds {
        Seconds(s)
    }
}

impl From<Seconds> for f64 {
    fn from(s: Seconds) -> f64 {
        s.0
    }
}

impl From<std::time::Duration> for Seconds {
    fn from(d: std::time::Duration) -> Seconds {
        Seconds(d.as_secs_f64())
    }
}

/// What a size may be written as, for errors and help.
pub const SIZE_FORMS: &str = "bytes, or with a unit: 64k, 1MiB, 1GiB (powers of 1024), 1MB (10^6)";
/// What a duration may be written as, for errors and help.
pub const DURATION_FORMS: &str = "seconds, or with units: 500ms, 30s, 2m, 1h, 1m30s";

/// Splits `s` into its leading number and the rest (the unit).
fn number_and_unit(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

impl FromStr for Size {
    type Err = String;

    fn from_str(written: &str) -> Result<Size, String> {
        let s = written.trim();
        let refuse = |why: &str| format!("{written:?} is not a size{why}; write {SIZE_FORMS}");
        if s.starts_with('-') {
            return Err(refuse(" (sizes cannot be negative)"));
        }
        if let Ok(n) = s.parse::<u64>() {
            return Ok(Size(n));
        }
        let (number, unit) = number_and_unit(s);
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            _ => return Err(refuse("")),
        };
        if number.is_empty() {
            return Err(refuse(""));
        }
        // A whole number scales exactly; a fraction (`1.5MiB`) must come to
        // whole bytes.
        if let Ok(n) = number.parse::<u64>() {
            return n
                .checked_mul(scale)
                .map(Size)
                .ok_or_else(|| refuse(" (too large)"));
        }
        let n: f64 = number.parse().map_err(|_| refuse(""))?;
        let bytes = n * scale as f64;
        if bytes.fract() != 0.0 {
            return Err(refuse(" (not a whole number of bytes)"));
        }
        if bytes >= u64::MAX as f64 {
            return Err(refuse(" (too large)"));
        }
        Ok(Size(bytes as u64))
    }
}

impl fmt::Display for Size {
    /// The largest power-of-1024 unit that is exact; bytes otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.binary_unit() {
            Some((n, unit)) => write!(f, "{n}{unit}"),
            None => write!(f, "{}", self.0),
        }
    }
}

impl Size {
    /// `(count, unit)` for the largest exact unit from KiB up, if any.
    fn binary_unit(self) -> Option<(u64, &'static str)> {
        if self.0 == 0 {
            return None;
        }
        [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)]
            .into_iter()
            .find(|(_, shift)| self.0 % (1 << shift) == 0)
            .map(|(unit, shift)| (self.0 >> shift, unit))
    }
}

impl Serialize for Size {
    /// With a unit where one is exact (`"256KiB"`), else a plain integer.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.binary_unit() {
            Some(_) => s.serialize_str(&self.to_string()),
            None => s.serialize_u64(self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a size: {SIZE_FORMS}")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n).map(Size).map_err(|_| {
                    E::custom(format!(
                        "{n} is not a size (sizes cannot be negative); write {SIZE_FORMS}"
                    ))
                })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Size, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Nanoseconds in each duration unit, longest first (the order `Display`
/// tries them in).
const DURATION_UNITS: [(&str, u64); 6] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
];

impl FromStr for Seconds {
    type Err = String;

    fn from_str(written: &str) -> Result<Seconds, String> {
        let s = written.trim();
        let refuse = || format!("{written:?} is not a duration; write {DURATION_FORMS}");
        // A bare number, negative ones included: the setting's own rule
        // says what range it takes.
        if let Ok(n) = s.parse::<f64>() {
            return Ok(Seconds(n));
        }
        if let Some(positive) = s.strip_prefix('-') {
            return positive
                .parse::<Seconds>()
                .map(|p| Seconds(-p.0))
                .map_err(|_| refuse());
        }
        let mut rest = s;
        let mut total = 0.0;
        while !rest.is_empty() {
            let (number, after) = number_and_unit(rest);
            let unit_len = after
                .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
                .unwrap_or(after.len());
            let unit = &after[..unit_len];
            let unit = if unit == "µs" { "us" } else { unit };
            let nanos = DURATION_UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, nanos)| *nanos)
                .ok_or_else(refuse)?;
            let n: f64 = number.parse().map_err(|_| refuse())?;
            total += n * nanos as f64 / 1e9;
            rest = after[unit_len..].trim_start();
        }
        if s.is_empty() {
            return Err(refuse());
        }
        Ok(Seconds(total))
    }
}

impl Seconds {
    /// Whole nanoseconds, if the value is a non-negative finite number of
    /// them (what every validated duration is).
    fn nanos(self) -> Option<u64> {
        let nanos = (self.0 * 1e9).round();
        let exact = self.0.is_finite()
            && self.0 >= 0.0
            && nanos < u64::MAX as f64
            && (nanos / 1e9 - self.0).abs() <= self.0 * 1e-12;
        exact.then_some(nanos as u64)
    }

    /// The value with a unit, where one writes it exactly: the largest of
    /// d, h, m, s that divides it (`30s`, `2m`, `1d`); from a second up with
    /// a fraction, seconds (`5.1s`); below a second, ms or us (`500ms`).
    /// `None` for zero, a negative value, or one finer than a microsecond.
    fn with_unit(self) -> Option<String> {
        let nanos = self.nanos().filter(|n| *n > 0 && n % 1_000 == 0)?;
        let (big, small) = DURATION_UNITS.split_at(4);
        if let Some((name, per)) = big.iter().find(|(_, per)| nanos % per == 0) {
            return Some(format!("{}{name}", nanos / per));
        }
        if nanos >= 1_000_000_000 {
            return Some(format!("{}s", self.0));
        }
        let (name, per) = small.iter().find(|(_, per)| nanos % per == 0)?;
        Some(format!("{}{name}", nanos / per))
    }
}

impl fmt::Display for Seconds {
    /// With a unit where one is exact (`Seconds::with_unit`); seconds as
    /// a plain number otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.with_unit() {
            Some(text) => f.write_str(&text),
            None => write!(f, "{}", self.0),
        }
    }
}

impl Serialize for Seconds {
    /// With a unit where one is exact (`"30s"`), else seconds as a float.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.with_unit() {
            Some(text) => s.serialize_str(&text),
            None => s.serialize_f64(self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seconds, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a duration: {DURATION_FORMS}")
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Seconds, E> {
                Ok(Seconds(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Seconds, E> {
                Ok(Seconds(n as f64))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Seconds, E> {
                Ok(Seconds(n as f64))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Seconds, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> Result<u64, String> {
        s.parse::<Size>().map(|s| s.0)
    }

    fn secs(s: &str) -> Result<f64, String> {
        s.parse::<Seconds>().map(|s| s.0)
    }

    #[test]
    fn sizes_take_bare_bytes_and_binary_and_decimal_units() {
        assert_eq!(size("1048576"), Ok(1 << 20));
        assert_eq!(size("64k"), Ok(64 << 10));
        assert_eq!(size("64K"), Ok(64 << 10));
        assert_eq!(size("64KiB"), Ok(64 << 10));
        assert_eq!(size("1MiB"), Ok(1 << 20));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert_eq!(size("2 GiB"), Ok(2 << 30));
        assert_eq!(size("1MB"), Ok(1_000_000));
        assert_eq!(size("1kB"), Ok(1_000));
        assert_eq!(size("512B"), Ok(512));
        assert_eq!(size("1.5MiB"), Ok(3 << 19));
        assert_eq!(size("0"), Ok(0));
    }

    #[test]
    fn sizes_refuse_what_is_not_a_whole_positive_number_of_bytes() {
        for bad in ["-1", "1.5", "1x", "MiB", "", "k", "0.3k", "99999999999T"] {
            let e = size(bad).unwrap_err();
            assert!(e.contains("is not a size"), "{bad}: {e}");
            assert!(e.contains("1MiB"), "{bad}: the error shows a form: {e}");
        }
        assert!(size("-1").unwrap_err().contains("negative"));
    }

    #[test]
    fn durations_take_bare_seconds_and_units() {
        assert_eq!(secs("30"), Ok(30.0));
        assert_eq!(secs("1.5"), Ok(1.5));
        assert_eq!(secs("30s"), Ok(30.0));
        assert_eq!(secs("500ms"), Ok(0.5));
        assert_eq!(secs("2m"), Ok(120.0));
        assert_eq!(secs("1h"), Ok(3600.0));
        assert_eq!(secs("1d"), Ok(86_400.0));
        assert_eq!(secs("1m30s"), Ok(90.0));
        assert_eq!(secs("1m 30s"), Ok(90.0));
        assert_eq!(secs("250us"), Ok(0.000_25));
        // Negative values pass through to the setting's own rule.
        assert_eq!(secs("-1"), Ok(-1.0));
        assert_eq!(secs("-2s"), Ok(-2.0));
        for bad in ["", "s", "30x", "1.2.3s", "ms30"] {
            let e = secs(bad).unwrap_err();
            assert!(e.contains("is not a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn values_show_in_their_largest_exact_unit() {
        assert_eq!(Size(262_144).to_string(), "256KiB");
        assert_eq!(Size(32 << 20).to_string(), "32MiB");
        assert_eq!(Size(1_000_000).to_string(), "1000000");
        assert_eq!(Size(0).to_string(), "0");
        assert_eq!(Seconds(30.0).to_string(), "30s");
        assert_eq!(Seconds(0.5).to_string(), "500ms");
        assert_eq!(Seconds(1.5).to_string(), "1.5s");
        assert_eq!(Seconds(5.1).to_string(), "5.1s");
        assert_eq!(Seconds(0.000_25).to_string(), "250us");
        assert_eq!(Seconds(120.0).to_string(), "2m");
        assert_eq!(Seconds(86_400.0).to_string(), "1d");
        assert_eq!(Seconds(0.1).to_string(), "100ms");
        for shown in ["256KiB", "32MiB", "1000000"] {
            assert_eq!(shown.parse::<Size>().unwrap().to_string(), shown);
        }
        for shown in ["30s", "500ms", "1.5s", "2m", "1d", "100ms", "250us"] {
            assert_eq!(shown.parse::<Seconds>().unwrap().to_string(), shown);
        }
    }

    #[test]
    fn the_file_takes_numbers_and_strings_and_the_effective_config_round_trips() {
        #[derive(Deserialize, Serialize)]
        struct T {
            size: Size,
            time: Seconds,
        }
        let t: T = toml::from_str("size = \"1MiB\"\ntime = \"30s\"").unwrap();
        assert_eq!((t.size, t.time), (Size(1 << 20), Seconds(30.0)));
        let t: T = toml::from_str("size = 1000\ntime = 0.25").unwrap();
        assert_eq!((t.size, t.time), (Size(1000), Seconds(0.25)));
        let text = toml::to_string(&T {
            size: Size(1 << 20),
            time: Seconds(0.25),
        })
        .unwrap();
        assert_eq!(text, "size = \"1MiB\"\ntime = \"250ms\"\n");
        let e = toml::from_str::<T>("size = -1\ntime = 1").err().unwrap();
        assert!(e.to_string().contains("cannot be negative"), "{e}");
    }
}

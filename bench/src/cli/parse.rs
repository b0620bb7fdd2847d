//! Value parsers for command-line arguments that clap does not know.

use std::time::Duration;

use crate::matrix::scenario::Scenario;
use crate::matrix::server::Server;

/// Parses `10s`, `500ms`, `2m`, `1h`, `250us`, `1.5s`; a bare number is seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10s, 500ms or 2m"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use us, ms, s, m or h"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("{text:?}: {e}"))
}

/// `--body-file`: the file's bytes, read now so a missing file is a usage error.
pub(crate) fn body_file(text: &str) -> Result<super::BodyFile, String> {
    std::fs::read(text)
        .map(super::BodyFile)
        .map_err(|e| format!("cannot read {text:?}: {e}"))
}

/// A matrix scenario by name.
pub(crate) fn scenario(text: &str) -> Result<Scenario, String> {
    Scenario::parse(text.trim()).ok_or_else(|| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown scenario {text:?}; choose from {}",
            names.join(", ")
        )
    })
}

/// A matrix preset by name.
pub(crate) fn preset(text: &str) -> Result<crate::matrix::preset::Preset, String> {
    crate::matrix::preset::Preset::parse(text.trim())
        .ok_or_else(|| format!("unknown preset {text:?}; the one preset is scaling"))
}

/// A matrix server by name.
pub(crate) fn server(text: &str) -> Result<Server, String> {
    Server::parse(text.trim()).ok_or_else(|| {
        let names: Vec<&str> = Server::ALL.iter().map(|s| s.name()).collect();
        format!("unknown server {text:?}; choose from {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "s", "10x", "-1s", "1..2s"] {
            assert!(duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}

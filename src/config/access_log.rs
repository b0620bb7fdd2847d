//! The access log's settings (`--access-log*`): where lines go, how they
//! read, and what the log may hold in memory.
//!
//! Owns the defaults and the rules that build [`AccessLogConfig`] (the
//! validated set, `access_log`'s type). Does not own formatting or writing
//! (`access_log`).
//!
//! The defaults follow nginx where it has one: off unless asked (nginx's
//! packages turn it on in their config, servery has no such file),
//! `combined`, a 64 KiB buffer per worker flushed every second (nginx's
//! `access_log ... buffer=64k flush=1s` as commonly set). The backlog is
//! ours: nginx's workers write themselves and block on a slow disk.

use std::path::PathBuf;
use std::time::Duration;

use super::setting::{Echo, Field};
use super::Error;
use crate::access_log::{Format, Target};

/// No access log unless one is asked for.
pub const DEFAULT_ACCESS_LOG: &str = "off";
/// nginx's predefined format.
pub const DEFAULT_ACCESS_LOG_FORMAT: &str = "combined";
/// A worker hands its buffer to the writer when it holds this much: some
/// 300 combined lines, one write for all of them.
pub const DEFAULT_ACCESS_LOG_BUFFER_BYTES: u64 = 64 * 1024;
/// A partial buffer waits at most this long, so a quiet server's lines
/// still reach the file within a second.
pub const DEFAULT_ACCESS_LOG_FLUSH_S: f64 = 1.0;
/// Bytes handed to the writer and not yet written, per process, past which
/// lines are dropped (and counted) rather than held: 64 full buffers, a few
/// seconds of a busy server's lines when the disk stalls.
pub const DEFAULT_ACCESS_LOG_BACKLOG_BYTES: u64 = 4 * 1024 * 1024;

/// `--access-log-buffer`: from a line or two to 16 MiB.
pub(crate) const BUFFER_BYTES: std::ops::RangeInclusive<usize> = 512..=16 * 1024 * 1024;
/// `--access-log-backlog`: at least one buffer's worth, at most 1 GiB.
pub(crate) const BACKLOG_BYTES: std::ops::RangeInclusive<usize> = 512..=1024 * 1024 * 1024;
/// `--access-log-flush`: at most a minute.
pub(crate) const FLUSH_MAX_S: f64 = 60.0;

/// `--access-log` as checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    Off,
    Stderr,
    File(PathBuf),
}

/// The validated access-log settings: the log's own type (the feature
/// owns its settings; this module builds them).
pub use crate::access_log::AccessLogConfig;

/// `--access-log`: `off`, `stderr`, or a file path whose directory exists.
pub(crate) fn target(field: Field, v: String) -> Result<LogTarget, Error> {
    match v.as_str() {
        "off" => Ok(LogTarget::Off),
        "stderr" => Ok(LogTarget::Stderr),
        "" => Err(field.invalid("empty; use off, stderr or a file path")),
        path => {
            let path = PathBuf::from(path);
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
                _ => PathBuf::from("."),
            };
            if path.is_dir() {
                return Err(field.invalid(format!(
                    "{} is a directory; name a file in it, e.g. {}",
                    path.display(),
                    path.join("access.log").display()
                )));
            }
            if !dir.is_dir() {
                return Err(field.invalid(format!(
                    "the directory {} does not exist; create it or use another path",
                    dir.display()
                )));
            }
            Ok(LogTarget::File(path))
        }
    }
}

/// `--access-log-format`: `combined`, `json`, or a template.
pub(crate) fn format(field: Field, v: String) -> Result<Format, Error> {
    Format::parse(&v).map_err(|e| field.invalid(e.to_string()))
}

impl AccessLogConfig {
    pub(super) fn new(
        target: &LogTarget,
        format: &Format,
        buffer_bytes: usize,
        flush: Duration,
        backlog_bytes: usize,
    ) -> Result<AccessLogConfig, Error> {
        if backlog_bytes < buffer_bytes {
            return Err(super::invalid(
                super::raw::field::access_log_backlog.flag,
                format!(
                    "{backlog_bytes} is less than --access-log-buffer ({buffer_bytes}): \
                     no buffer could be written; raise it"
                ),
            ));
        }
        Ok(AccessLogConfig {
            target: match target {
                LogTarget::Off => None,
                LogTarget::Stderr => Some(Target::Stderr),
                LogTarget::File(p) => Some(Target::File(p.clone())),
            },
            format: format.clone(),
            buffer_bytes,
            flush,
            backlog_bytes,
        })
    }

    /// `--access-log` as the effective config shows it.
    pub fn target_shown(&self) -> LogTarget {
        match &self.target {
            None => LogTarget::Off,
            Some(Target::Stderr) => LogTarget::Stderr,
            Some(Target::File(p)) => LogTarget::File(p.clone()),
        }
    }
}

impl std::fmt::Display for LogTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogTarget::Off => f.write_str("off"),
            LogTarget::Stderr => f.write_str("stderr"),
            LogTarget::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Echo<Option<String>> for LogTarget {
    fn echo(&self) -> Option<String> {
        Some(match self {
            LogTarget::Off => "off".into(),
            LogTarget::Stderr => "stderr".into(),
            LogTarget::File(p) => p.display().to_string(),
        })
    }
}

impl Echo<Option<String>> for Format {
    fn echo(&self) -> Option<String> {
        Some(self.written().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::Size;

    #[test]
    fn off_by_default_and_combined() {
        let c = ok(raw());
        assert_eq!(c.access_log.target, None);
        assert_eq!(c.access_log.format, Format::Combined);
        assert_eq!(c.access_log.buffer_bytes, 64 * 1024);
        assert_eq!(c.access_log.flush, Duration::from_secs(1));
    }

    #[test]
    fn targets_and_formats_are_checked_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = raw();
        r.access_log = Some(dir.path().join("a.log").display().to_string());
        r.access_log_format = Some("json".into());
        let c = ok(r);
        assert_eq!(
            c.access_log.target,
            Some(Target::File(dir.path().join("a.log")))
        );
        assert_eq!(c.access_log.format, Format::Json);

        let mut r = raw();
        r.access_log = Some("/nonexistent-dir/a.log".into());
        assert_eq!(
            err(r),
            "--access-log: the directory /nonexistent-dir does not exist; create it or use another path"
        );
        let mut r = raw();
        r.access_log = Some(dir.path().display().to_string());
        assert!(err(r).contains("is a directory; name a file in it"));
        let mut r = raw();
        r.access_log_format = Some("$nope".into());
        assert!(err(r).starts_with("--access-log-format: unknown field $nope; fields are"));
        let mut r = raw();
        r.access_log_buffer = Some(Size(65536));
        r.access_log_backlog = Some(Size(4096));
        assert!(err(r).starts_with("--access-log-backlog: 4096 is less than --access-log-buffer"));
        let mut r = raw();
        r.access_log = Some("stderr".into());
        assert_eq!(ok(r).access_log.target, Some(Target::Stderr));
    }
}

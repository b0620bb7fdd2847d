//! The validated settings of on-the-fly compression.
//!
//! Owns [`CompressConfig`] (absent when compression is off) and
//! [`MimePatterns`], the types it compresses, with their matching. Does not
//! own reading them or their defaults and bounds (`config::compression`,
//! which documents each with its flag).

/// One `--compress-types` element, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// `type/subtype`.
    Exact(String),
    /// `type/*`: the whole top-level type.
    AnySubtype(String),
    /// `type/*+suffix`: a structured syntax suffix (RFC 6838 §4.2.8), e.g.
    /// `application/*+json` matches `application/ld+json`.
    Suffix { top: String, suffix: String },
}

/// The MIME types compressed on the fly, as written (lower case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MimePatterns {
    written: Vec<String>,
    patterns: Vec<Pattern>,
}

impl MimePatterns {
    /// `type/subtype`, `type/*` or `type/*+suffix` each (any case; kept
    /// lower case). `Err` holds the first element that is none of them.
    pub fn parse(written: Vec<String>) -> Result<MimePatterns, String> {
        let mut patterns = Vec::with_capacity(written.len());
        let mut kept = Vec::with_capacity(written.len());
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        for raw in written {
            let lower = raw.trim().to_ascii_lowercase();
            let Some((top, sub)) = lower.split_once('/') else {
                return Err(raw);
            };
            if !token(top) {
                return Err(raw);
            }
            let pattern = if sub == "*" {
                Pattern::AnySubtype(top.to_owned())
            } else if let Some(suffix) = sub.strip_prefix("*+") {
                if !token(suffix) || suffix.contains('+') {
                    return Err(raw);
                }
                Pattern::Suffix {
                    top: top.to_owned(),
                    suffix: suffix.to_owned(),
                }
            } else if token(sub) {
                Pattern::Exact(lower.clone())
            } else {
                return Err(raw);
            };
            patterns.push(pattern);
            kept.push(lower);
        }
        Ok(MimePatterns {
            written: kept,
            patterns,
        })
    }

    /// The patterns as written (lower case).
    pub fn written(&self) -> &[String] {
        &self.written
    }

    /// Whether a `Content-Type` value (parameters allowed) is listed.
    pub fn matches(&self, content_type: &str) -> bool {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        let essence = essence.to_ascii_lowercase();
        let Some((top, sub)) = essence.split_once('/') else {
            return false;
        };
        self.patterns.iter().any(|p| match p {
            Pattern::Exact(e) => *e == essence,
            Pattern::AnySubtype(t) => t == top,
            Pattern::Suffix { top: t, suffix } => {
                t == top
                    && sub
                        .rsplit_once('+')
                        .is_some_and(|(_, s)| s == suffix.as_str())
            }
        })
    }
}

/// The validated compression settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressConfig {
    pub types: MimePatterns,
    /// Smaller files are never compressed (and get no `Vary`).
    pub min_bytes: u64,
    /// Larger files are never compressed (and get no `Vary`).
    pub max_bytes: u64,
    /// Files up to this size are compressed by the worker for the request
    /// that first asks; larger ones by the background compressor.
    pub inline_max_bytes: u64,
    /// Bytes of variants one server holds (see `cache_bytes_per_cache`).
    pub cache_bytes: u64,
    pub level_br: u32,
    pub level_zstd: u32,
    pub level_gzip: u32,
    /// Answers a worker compresses at once as they are sent (above
    /// `inline_max_bytes`, before the variant is stored); 0: none.
    pub streams: u32,
}

impl CompressConfig {
    /// The budget of one cache: the whole `--compress-cache-bytes` when the
    /// workers are threads of one process (they share one cache), an equal
    /// share when each worker is a process of its own (each has its own).
    pub fn cache_bytes_per_cache(&self, processes: usize) -> u64 {
        self.cache_bytes / processes.max(1) as u64
    }
}

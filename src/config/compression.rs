//! On-the-fly compression of static files: `--compress`, `--compress-types`,
//! `--compress-min-bytes`, `--compress-max-bytes`,
//! `--compress-inline-max-bytes`, `--compress-streams`, `--compress-cache-bytes` and the levels
//! `--compress-level-br`, `--compress-level-zstd`, `--compress-level-gzip`.
//!
//! Owns the defaults and bounds of those settings (each a documented const
//! below) and building [`CompressConfig`], the validated set (absent when
//! `--compress off`), with its [`MimePatterns`]. Does not own those types,
//! compressing, caching or choosing a coding (`static_files::compress`,
//! `static_files::encoding`).
//!
//! The rules: every pattern is `type/subtype`, `type/*` or `type/*+suffix`;
//! min ≤ inline max ≤ max ≤ [`MAX_COMPRESS_BYTES`]; a cache of at least one
//! byte (`--compress off` is how to have none); each level within its
//! coding's range. Why each default is what it is: docs/decisions/0008.

use super::raw::{field, Checked};
use super::setting::{Echo, Field};
use super::Error;
use crate::choice::choice;
pub use crate::static_files::compress::{CompressConfig, MimePatterns};

/// On: with the variants cached, a file is compressed once, not once per
/// request (the cost that makes nginx ship `gzip off`); static-web-server
/// also compresses by default. Only the types below, and only when the
/// client asks.
pub const DEFAULT_COMPRESS: Compress = Compress::On;
/// Text, scripts, data and vector images: what compresses 3–10×. Images,
/// video, fonts in woff/woff2 and archives are compressed already.
pub const DEFAULT_COMPRESS_TYPES: [&str; 8] = [
    "text/*",
    "application/javascript",
    "application/json",
    "application/xml",
    "application/wasm",
    "image/svg+xml",
    "application/*+json",
    "application/*+xml",
];
/// Below 1 KiB a response fits one TCP segment either way; compressing it
/// saves no packet (nginx's `gzip_min_length` is 20, its docs suggest more).
pub const DEFAULT_COMPRESS_MIN_BYTES: u64 = 1024;
/// Files up to 8 MiB are compressed (a large JavaScript bundle); larger ones
/// go out as they are, zero-copy.
pub const DEFAULT_COMPRESS_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// A worker compresses a file of up to 64 KiB itself, so the first answer is
/// already compressed (what a CDN in front stores). At the default levels
/// that holds the worker for 0.6 ms (zstd), 1.8 ms (gzip) or 3.1 ms (br) once
/// per file and coding (docs/benchmarks.md). Larger files go to the
/// background compressor and are sent identity until their variant is
/// cached.
pub const DEFAULT_COMPRESS_INLINE_MAX_BYTES: u64 = 64 * 1024;
/// Answers a worker compresses as they are sent at once (a file above the
/// inline limit whose variant is not stored yet), each an encoder at a fast
/// level, a 64 KiB read buffer and the piece being written: ~1 MiB each
/// (measured with stalled clients, `tests/compress.rs`), so 8 is ~8 MiB
/// and a few cores' worth of fast compression a worker at most. Past it,
/// identity until the variant is stored.
pub const DEFAULT_COMPRESS_STREAMS: u64 = 8;
/// Most `--compress-streams` a worker may run.
const MAX_COMPRESS_STREAMS: u64 = 1024;
/// Compressed variants held in memory by the whole server (one cache shared
/// by the worker threads; divided among worker processes).
pub const DEFAULT_COMPRESS_CACHE_BYTES: u64 = 64 * 1024 * 1024;
/// Brotli quality 6: on JavaScript it costs what quality 5 does (~47 µs a
/// KiB here) for 5 % smaller output; 9 costs six times more for 8 % less
/// (docs/decisions/0008 has the sweep).
pub const DEFAULT_COMPRESS_LEVEL_BR: u64 = 6;
/// zstd's own default level: 8 µs a KiB here; 6 doubles that for 3 % less.
pub const DEFAULT_COMPRESS_LEVEL_ZSTD: u64 = 3;
/// zlib's own default level, 27 µs a KiB here (nginx's `gzip_comp_level` is
/// 1, a third less compression, because nginx compresses on every request;
/// a cached variant is made once).
pub const DEFAULT_COMPRESS_LEVEL_GZIP: u64 = 6;

/// Largest `--compress-max-bytes`: the compressor holds the whole file and
/// its output in memory while it works.
pub const MAX_COMPRESS_BYTES: u64 = 64 * 1024 * 1024;
/// `--compress-level-br`: brotli's qualities.
const LEVELS_BR: std::ops::RangeInclusive<u64> = 0..=11;
/// `--compress-level-zstd`: zstd's regular levels (20–22 need windows of
/// up to 128 MiB, "ultra" mode).
const LEVELS_ZSTD: std::ops::RangeInclusive<u64> = 1..=19;
/// `--compress-level-gzip`: zlib's levels.
const LEVELS_GZIP: std::ops::RangeInclusive<u64> = 1..=9;

choice! {
    /// Whether files are compressed on the fly.
    pub enum Compress {
        /// Compressible types without a precompressed sibling are compressed
        /// when the client accepts a coding.
        On = "on",
        /// Only precompressed siblings are ever sent encoded.
        Off = "off",
    }
}

/// `None` when `--compress off`.
pub(super) fn settings(c: &Checked) -> Result<Option<CompressConfig>, Error> {
    if c.compress == Compress::Off {
        return Ok(None);
    }
    always(c).map(Some)
}

/// The settings whether or not `--compress` is on (what a site that
/// turns compression on gets).
pub(super) fn always(c: &Checked) -> Result<CompressConfig, Error> {
    if c.compress_min_bytes > c.compress_max_bytes {
        return Err(field::compress_min_bytes.invalid(format!(
            "{} is above --compress-max-bytes {}; lower it or raise the maximum",
            c.compress_min_bytes, c.compress_max_bytes
        )));
    }
    if c.compress_inline_max_bytes > c.compress_max_bytes {
        return Err(field::compress_inline_max_bytes.invalid(format!(
            "{} is above --compress-max-bytes {}; files above the maximum are \
                 never compressed, so lower it to at most the maximum",
            c.compress_inline_max_bytes, c.compress_max_bytes
        )));
    }
    Ok(CompressConfig {
        types: c.compress_types.clone(),
        min_bytes: c.compress_min_bytes,
        max_bytes: c.compress_max_bytes,
        inline_max_bytes: c.compress_inline_max_bytes,
        cache_bytes: c.compress_cache_bytes,
        level_br: c.compress_level_br,
        level_zstd: c.compress_level_zstd,
        level_gzip: c.compress_level_gzip,
        streams: c.compress_streams,
    })
}

/// `--compress-types`: MIME types, `type/*` or `type/*+suffix`.
pub(crate) fn types(field: Field, written: Vec<String>) -> Result<MimePatterns, Error> {
    MimePatterns::parse(written).map_err(|raw| {
        field.invalid(format!(
            "{raw:?} is not a MIME type; write type/subtype (application/json), \
             type/* (text/*) or type/*+suffix (application/*+xml)"
        ))
    })
}

/// `--compress-max-bytes` (and the other sizes): at most
/// [`MAX_COMPRESS_BYTES`].
pub(crate) fn size(field: Field, n: u64) -> Result<u64, Error> {
    if n > MAX_COMPRESS_BYTES {
        return Err(field.invalid(format!(
            "{n} is above {MAX_COMPRESS_BYTES} (64 MiB): the compressor holds a file \
             and its output in memory; larger files are sent as they are"
        )));
    }
    Ok(n)
}

/// `--compress-cache-bytes`: at least one byte.
pub(crate) fn cache_bytes(field: Field, n: u64) -> Result<u64, Error> {
    if n == 0 {
        return Err(field.invalid(
            "0 leaves no room for any variant; give a budget, or --compress off to turn \
             compression off",
        ));
    }
    Ok(n)
}

/// `--compress-streams`: at most [`MAX_COMPRESS_STREAMS`].
pub(crate) fn streams(field: Field, n: u64) -> Result<u32, Error> {
    if n > MAX_COMPRESS_STREAMS {
        return Err(field.invalid(format!(
            "{n} is above {MAX_COMPRESS_STREAMS}: each holds an encoder and a read buffer \
             on the worker; 0 turns compressing as a file is sent off"
        )));
    }
    Ok(n as u32)
}

/// `--compress-level-br`.
pub(crate) fn level_br(field: Field, n: u64) -> Result<u32, Error> {
    level(field, n, LEVELS_BR)
}

/// `--compress-level-zstd`.
pub(crate) fn level_zstd(field: Field, n: u64) -> Result<u32, Error> {
    level(field, n, LEVELS_ZSTD)
}

/// `--compress-level-gzip`.
pub(crate) fn level_gzip(field: Field, n: u64) -> Result<u32, Error> {
    level(field, n, LEVELS_GZIP)
}

fn level(field: Field, n: u64, range: std::ops::RangeInclusive<u64>) -> Result<u32, Error> {
    if range.contains(&n) {
        Ok(n as u32)
    } else {
        Err(field.invalid(format!(
            "{n} is not a level of this coding; use {}..={}",
            range.start(),
            range.end()
        )))
    }
}

impl Echo<Option<Vec<String>>> for MimePatterns {
    fn echo(&self) -> Option<Vec<String>> {
        Some(self.written().to_vec())
    }
}

impl Echo<Option<u64>> for Option<u32> {
    fn echo(&self) -> Option<u64> {
        self.map(u64::from)
    }
}

impl Echo<Option<Vec<String>>> for Option<&MimePatterns> {
    fn echo(&self) -> Option<Vec<String>> {
        self.and_then(Echo::echo)
    }
}

/// The patterns the defaults are made of, for `or(...)`.
pub(crate) fn default_types() -> Vec<String> {
    DEFAULT_COMPRESS_TYPES
        .iter()
        .map(|&t| t.to_owned())
        .collect()
}

/// Written back in file form: the switch as `on`/`off` (with `off`, the
/// effective config leaves the other compression keys out).
pub(crate) fn shown(c: &Option<CompressConfig>) -> Compress {
    if c.is_some() {
        Compress::On
    } else {
        Compress::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::RawConfig;
    use crate::config::Size;

    fn patterns(list: &[&str]) -> MimePatterns {
        let f = Field {
            key: "compress_types",
            flag: "--compress-types",
        };
        types(f, list.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn default_types_cover_text_scripts_data_and_svg() {
        let p = patterns(&DEFAULT_COMPRESS_TYPES);
        for t in [
            "text/html; charset=utf-8",
            "text/css",
            "text/javascript; charset=utf-8",
            "application/javascript",
            "application/json",
            "application/ld+json",
            "application/rss+xml",
            "image/svg+xml; charset=utf-8",
            "application/wasm",
            "TEXT/PLAIN",
        ] {
            assert!(p.matches(t), "{t}");
        }
        for t in [
            "image/png",
            "application/octet-stream",
            "font/woff2",
            "application/zip",
            "video/mp4",
            "textual",
            "",
        ] {
            assert!(!p.matches(t), "{t}");
        }
    }

    #[test]
    fn a_suffix_pattern_needs_the_suffix_and_the_type() {
        let p = patterns(&["application/*+json"]);
        assert!(p.matches("application/manifest+json"));
        assert!(!p.matches("application/json"));
        assert!(!p.matches("text/x+json"));
        assert!(!p.matches("application/jsonx"));
    }

    #[test]
    fn bad_types_name_the_flag_and_the_forms() {
        for bad in [
            "json",
            "*/*",
            "text/",
            "/x",
            "a/b c",
            "application/*+",
            "a/*+x+y",
        ] {
            let r = RawConfig {
                compress_types: Some(vec![bad.into()]),
                ..raw()
            };
            let e = err(r);
            assert!(e.starts_with("--compress-types: "), "{bad}: {e}");
            assert!(e.contains("type/*+suffix"), "{e}");
        }
    }

    #[test]
    fn sizes_must_nest_and_stay_bounded() {
        let r = RawConfig {
            compress_min_bytes: Some(Size(10)),
            compress_max_bytes: Some(Size(5)),
            compress_inline_max_bytes: Some(Size(5)),
            ..raw()
        };
        assert_eq!(
            err(r),
            "--compress-min-bytes: 10 is above --compress-max-bytes 5; lower it or raise \
             the maximum"
        );
        let r = RawConfig {
            compress_inline_max_bytes: Some(Size(DEFAULT_COMPRESS_MAX_BYTES + 1)),
            ..raw()
        };
        assert!(err(r).starts_with("--compress-inline-max-bytes: "));
        let r = RawConfig {
            compress_max_bytes: Some(Size(MAX_COMPRESS_BYTES + 1)),
            ..raw()
        };
        assert!(err(r).starts_with("--compress-max-bytes: 67108865 is above"));
        let r = RawConfig {
            compress_cache_bytes: Some(Size(0)),
            ..raw()
        };
        assert!(err(r).contains("--compress off"));
    }

    #[test]
    fn levels_are_each_codings_own() {
        for (r, flag) in [
            (
                RawConfig {
                    compress_level_br: Some(12),
                    ..raw()
                },
                "--compress-level-br: 12 is not a level of this coding; use 0..=11",
            ),
            (
                RawConfig {
                    compress_level_zstd: Some(0),
                    ..raw()
                },
                "--compress-level-zstd: 0 is not a level of this coding; use 1..=19",
            ),
            (
                RawConfig {
                    compress_level_gzip: Some(10),
                    ..raw()
                },
                "--compress-level-gzip: 10 is not a level of this coding; use 1..=9",
            ),
        ] {
            assert_eq!(err(r), flag);
        }
    }

    #[test]
    fn off_leaves_no_compression_and_defaults_are_on() {
        let c = ok(raw()).files.compression.expect("on by default");
        assert_eq!(c.min_bytes, DEFAULT_COMPRESS_MIN_BYTES);
        assert_eq!(c.cache_bytes_per_cache(1), DEFAULT_COMPRESS_CACHE_BYTES);
        assert_eq!(c.cache_bytes_per_cache(4), DEFAULT_COMPRESS_CACHE_BYTES / 4);
        let off = RawConfig {
            compress: Some(Compress::Off),
            // Contradictory sizes do not matter when nothing is compressed.
            compress_min_bytes: Some(Size(10)),
            compress_max_bytes: Some(Size(5)),
            ..raw()
        };
        assert!(ok(off).files.compression.is_none());
    }
}

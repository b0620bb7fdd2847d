//! On-the-fly compression: step 3 of the pipeline for a compressible file
//! that has no precompressed sibling.
//!
//! Owns [`Compression`] (one per process: the settings, the variant cache
//! and the background compressor, shared by every worker thread), which
//! files are eligible, the variants' ETags, and what a request gets when
//! its variant is or is not cached. Does not own negotiating the coding
//! (`encoding::choose`, the same function the siblings use, so both always
//! agree) nor the rest of the pipeline (conditional, range, send in
//! `mod.rs`).
//!
//! # Layout
//! - `codec`: one buffer in, its gzip/br/zstd encoding out.
//! - `store`: the variant cache, one byte budget, least recently used out.
//! - `background`: the compressor thread, its bounded queue.
//! - `stream`: one answer compressed as it is sent, and the worker's bound
//!   on how many at once.
//!
//! # Flow, one request for an eligible file (`Files::on_the_fly`)
//! 1. Eligible means: `--compress on`, no sibling, a type on
//!    `--compress-types`, a size within `--compress-min-bytes` and
//!    `--compress-max-bytes`. Every response for such a file carries
//!    `Vary: Accept-Encoding`, identity ones too.
//! 2. `encoding::choose` against all three codings picks one, or identity.
//! 3. Cached: the variant is sent (200, ranges of it, or 304 against its
//!    ETag, `"<identity tag>+<coding>.<level>"`).
//! 4. Not cached, and the request's preconditions already decide (304 or
//!    412 against the variant's ETag): answered without compressing.
//! 5. Not cached, file ≤ `--compress-inline-max-bytes`: the worker
//!    compresses it now, caches it, and sends it.
//! 6. Not cached, larger: queued for the background compressor (or refused
//!    at its bound). This request, a GET or HEAD without `Range`, gets the
//!    file compressed as it is sent (`stream`) while one of the worker's
//!    `--compress-streams` is free; otherwise identity: its own ETag, its
//!    own ranges. Never ranges of a variant that is not whole in memory.
//!
//! The key is the file's identity (dev, inode, size, mtime) and the coding,
//! taken from the open-file cache entry: a file changed on disk is a new
//! entry after `--file-cache-ttl`, so a new key, and the old variant is
//! never reached again (it ages out of the cache). Bytes read for a variant
//! are checked against the identity after reading, so a file changed
//! between its stat and its read is never cached under the old identity.

mod background;
mod codec;
mod settings;
mod store;
mod stream;

use std::sync::Arc;

use bytes::Bytes;

use super::cache::{Entry, Identity, OnTheFly};
use super::encoding::Coding;
use super::{conditional, Chosen, Files, Source};
use crate::http::response::prebuild_head;
use crate::http::{Head, Method, Status};
use crate::telemetry::CompressStats;
use background::{Background, Submitted};
pub use settings::{CompressConfig, MimePatterns};
use store::{Cached, Key, Store};
use stream::Permit;
pub(crate) use stream::Stream;

/// Whether the answer being made may be a [`Stream`] (step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streams {
    /// No: identity until the variant is stored (`Files::handle`).
    Never,
    /// Say so ([`super::Source::Compressing`] without a stream) when one
    /// would be made: an answer made from a borrowed head defers it to
    /// `call`, which makes it.
    Defer,
    /// Make it, taking one of the worker's permits.
    Make,
}

/// One process's on-the-fly compression, shared by its worker threads.
pub struct Compression {
    config: CompressConfig,
    store: Arc<Store>,
    background: Background,
}

impl Compression {
    /// The compression of a process with `processes` worker processes
    /// (1 when the workers are threads): its cache gets the whole
    /// `--compress-cache-bytes` when the workers are threads, a worker's
    /// share when each is a process. The background thread may run on any
    /// CPU of `cpus`.
    pub fn start(
        config: CompressConfig,
        processes: usize,
        cpus: Option<crate::sys::affinity::CpuSet>,
    ) -> std::io::Result<Compression> {
        let budget = config.cache_bytes_per_cache(processes) as usize;
        Compression::with(config, budget, cpus, CompressStats::global())
    }

    fn with(
        config: CompressConfig,
        budget: usize,
        cpus: Option<crate::sys::affinity::CpuSet>,
        stats: &'static CompressStats,
    ) -> std::io::Result<Compression> {
        let store = Arc::new(Store::new(budget, stats));
        let bound = background::queue_bytes(config.max_bytes);
        let background = Background::start(store.clone(), bound, cpus)?;
        Ok(Compression {
            config,
            store,
            background,
        })
    }

    /// Step 1 of the flow, for a file without siblings.
    pub(super) fn eligible(&self, content_type: &str, len: u64) -> bool {
        (self.config.min_bytes..=self.config.max_bytes).contains(&len)
            && self.config.types.matches(content_type)
    }

    fn level(&self, coding: Coding) -> u32 {
        match coding {
            Coding::Brotli => self.config.level_br,
            Coding::Zstd => self.config.level_zstd,
            Coding::Gzip => self.config.level_gzip,
        }
    }

    /// What an entry of an eligible file keeps: each variant's ETag, the
    /// identity's with `+<coding>.<level>` (RFC 9110 §8.8.3.3: a coding is
    /// another representation; the level is in it because another level is
    /// other bytes, and a range resumed across a restart must not splice
    /// them).
    pub(super) fn on_the_fly(&self, identity: &Identity) -> OnTheFly {
        let tag = |coding: Coding| {
            let suffix = format!("{}.{}", coding.token(), self.level(coding));
            conditional::etag_for(identity.len, identity.mtime_ns, Some(&suffix))
        };
        OnTheFly {
            etags: Coding::PREFERENCE.map(tag),
            heads: Default::default(),
        }
    }
}

impl Files {
    /// Steps 3 to 6 of the flow for `coding`; `None` sends identity.
    pub(super) fn on_the_fly<'e>(
        &self,
        entry: &'e Entry,
        otf: &'e OnTheFly,
        coding: Coding,
        head: &Head<'_>,
        streams: Streams,
    ) -> Option<Chosen<'e>> {
        let shared = self.compression.as_ref()?;
        let stats = shared.store.stats();
        let identity = &entry.reps[0];
        let key = Key::new(&identity.identity, coding);
        // 3. cached
        match shared.store.get(&key) {
            Some(Cached::Variant(body)) => {
                CompressStats::add(&stats.hits, 1);
                return Some(self.variant(entry, otf, coding, body));
            }
            Some(Cached::NoGain) => return None,
            None => CompressStats::add(&stats.misses, 1),
        }
        // 4. the preconditions answer without the bytes
        let etag = &otf.etags[coding.index()];
        if !matches!(
            self.precondition(head, etag, entry.last_modified),
            conditional::Precondition::Proceed { .. }
        ) {
            return Some(Chosen {
                coding: Some(coding),
                etag,
                len: 0,
                body: Source::Unread,
                prebuilt: None,
            });
        }
        let level = shared.level(coding);
        if identity.identity.len > shared.config.inline_max_bytes {
            // 6. background; a stream or identity meanwhile
            let _: Submitted = shared.background.submit(key, &identity.file, level);
            return self.streamed(shared, identity, otf, coding, head, streams);
        }
        // 5. inline
        let read;
        let input: &[u8] = match &identity.small {
            Some((_, body)) => body,
            None => match background::read_whole(&identity.file, &key) {
                Ok(Some(bytes)) => {
                    read = bytes;
                    &read
                }
                Ok(None) => {
                    // Changed since its stat: the entry is renewed after the TTL.
                    CompressStats::add(&stats.skipped, 1);
                    return None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a file to compress it");
                    return None;
                }
            },
        };
        let out = match codec::encode(coding, level, input) {
            Ok(out) => out,
            Err(e) => {
                tracing::warn!(error = %e, "on-the-fly compression failed");
                return None;
            }
        };
        CompressStats::add(&stats.inline, 1);
        if out.len() >= input.len() {
            shared.store.insert(key, Cached::NoGain);
            return None;
        }
        let body = Bytes::from(out);
        shared.store.insert(key, Cached::Variant(body.clone()));
        Some(self.variant(entry, otf, coding, body))
    }

    /// Step 6's answer while the variant is made: the file compressed as it
    /// is sent, if the request may have one and the worker has a permit
    /// free; `None` (identity) otherwise.
    fn streamed<'e>(
        &self,
        shared: &Compression,
        identity: &'e super::cache::Rep,
        otf: &'e OnTheFly,
        coding: Coding,
        head: &Head<'_>,
        streams: Streams,
    ) -> Option<Chosen<'e>> {
        let max = shared.config.streams;
        if max == 0 || streams == Streams::Never || head.header("range").is_some() {
            return None;
        }
        let stats = shared.store.stats();
        let stream = match (streams, head.method) {
            // A HEAD gets the GET's fields and no body: nothing to hold.
            (Streams::Make, Method::Get) => match Permit::take(max) {
                Some(permit) => {
                    match Stream::new(identity.file.clone(), identity.identity, coding, permit) {
                        Ok(s) => Some(Box::new(s)),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot start a compression stream");
                            return None;
                        }
                    }
                }
                None => {
                    CompressStats::add(&stats.streams_busy, 1);
                    return None;
                }
            },
            _ if Permit::available(max) => None,
            _ => {
                CompressStats::add(&stats.streams_busy, 1);
                return None;
            }
        };
        if stream.is_some() {
            CompressStats::add(&stats.streams, 1);
        }
        Some(Chosen {
            coding: Some(coding),
            etag: &otf.etags[coding.index()],
            len: 0,
            body: Source::Compressing(stream),
            prebuilt: None,
        })
    }

    /// The representation of a variant in hand, its 200 head prebuilt once
    /// per entry and coding.
    fn variant<'e>(
        &self,
        entry: &'e Entry,
        otf: &'e OnTheFly,
        coding: Coding,
        body: Bytes,
    ) -> Chosen<'e> {
        let i = coding.index();
        let len = body.len() as u64;
        let mut chosen = Chosen {
            coding: Some(coding),
            etag: &otf.etags[i],
            len,
            body: Source::Memory(body),
            prebuilt: None,
        };
        let mut heads = otf.heads.borrow_mut();
        let head = match &heads[i] {
            Some((made_for, head)) if *made_for == len => head.clone(),
            _ => {
                let fields = self.fields(entry, chosen.etag, chosen.coding, true);
                let head = prebuild_head(Status::OK, &fields, len);
                heads[i] = Some((len, head.clone()));
                head
            }
        };
        chosen.prebuilt = Some(head);
        chosen
    }
}

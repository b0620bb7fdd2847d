//! The open-file cache: step 2 of the pipeline (lookup).
//!
//! Owns: what a worker remembers of a file ([`Entry`]: its representations,
//! identity and encoded variants as [`Rep`]s, validators, per-path fields,
//! the small ones' prebuilt 200 response, the ETags and heads of on-the-fly
//! variants), when an entry is trusted (within
//! `--file-cache-ttl`; then re-checked against the disk and kept, memory
//! copy and all, when the same files are still there), its bounds
//! (`--file-cache-entries`, and `--memory-cache-bytes` of file bodies held
//! in memory), and loading from disk beneath the root with openat2
//! (directories: redirect, index file or listing). Does not own what a
//! request gets from an entry (the rest of the pipeline, in `mod.rs`).

use std::cell::RefCell;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;

use super::encoding::{Available, Coding};
use super::{autoindex, conditional, content_type, Error, FieldList, Files};
use crate::http::response::{prebuild_head, HeadBlock};
use crate::http::{Head, Response, Status};
use crate::sys::openat2::{open_beneath, Target};

/// Identity of a file version: a change in any field invalidates the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) len: u64,
    pub(super) mtime_ns: i128,
}

impl Identity {
    pub(super) fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// One representation of a file: the identity bytes or an encoded variant.
pub(super) struct Rep {
    pub(super) coding: Option<Coding>,
    pub(super) file: Rc<File>,
    pub(super) identity: Identity,
    pub(super) etag: String,
    /// Whole-file 200 response prebuilt (head block, body) when small.
    pub(super) small: Option<(HeadBlock, Bytes)>,
}

/// An open-file cache entry: a file and its variants, with validators.
pub(super) struct Entry {
    pub(super) checked: Instant,
    /// Path relative to the root of the file actually served.
    pub(super) rel: String,
    pub(super) content_type: String,
    pub(super) last_modified: SystemTime,
    pub(super) last_modified_text: String,
    /// Per-path fields (Cache-Control, rules) added to every response.
    pub(super) extra: FieldList,
    pub(super) reps: Vec<Rep>,
    pub(super) available: Available,
    /// Set when the file is compressed on the fly (`compress`): no
    /// siblings, an eligible type and size.
    pub(super) otf: Option<Rc<OnTheFly>>,
}

/// What an entry keeps of its on-the-fly variants (the bodies live in the
/// process's shared cache, `compress::store`).
pub(super) struct OnTheFly {
    /// Each variant's ETag, by `Coding::index`.
    pub(super) etags: [String; 3],
    /// Each variant's prebuilt 200 head and the body length it was made
    /// for, by `Coding::index`; made at the first hit on this worker.
    pub(super) heads: RefCell<[Option<(u64, HeadBlock)>; 3]>,
}

impl Entry {
    pub(super) fn rep(&self, coding: Option<Coding>) -> &Rep {
        self.reps
            .iter()
            .find(|r| r.coding == coding)
            .unwrap_or(&self.reps[0])
    }

    /// The memory the entry's small representations count against
    /// `--memory-cache-bytes`: each body, and its head twice (the block, and
    /// the header map HTTP/2 makes of it on its first request there, which
    /// holds the same fields).
    pub(super) fn memory(&self) -> usize {
        self.reps
            .iter()
            .filter_map(|r| r.small.as_ref())
            .map(|(h, b)| 2 * h.block().len() + b.len())
            .sum()
    }
}

/// What a path resolves to.
pub(super) enum Found {
    File(Rc<Entry>),
    Redirect,
    Listing(Response),
}

impl Files {
    /// The cache entry for `key`, (re)built from disk when missing or stale.
    pub(super) fn lookup(&self, key: &str, head: &Head<'_>) -> Result<Found, Error> {
        let cached = self.cache.borrow().get(key).cloned();
        if let Some(entry) = &cached {
            if entry.checked.elapsed() < self.config.file_cache_ttl {
                return Ok(Found::File(entry.clone()));
            }
        }
        let found = self.load(key, head)?;
        if let Found::File(fresh) = &found {
            // Same files on disk: keep the old entry (and its memory copy).
            if let Some(old) = cached.filter(|old| same_files(old, fresh)) {
                let renewed = Rc::new(Entry {
                    checked: Instant::now(),
                    reps: old.reps.iter().map(Rep::share).collect(),
                    rel: old.rel.clone(),
                    content_type: old.content_type.clone(),
                    last_modified: old.last_modified,
                    last_modified_text: old.last_modified_text.clone(),
                    extra: old.extra.clone(),
                    available: old.available,
                    otf: old.otf.clone(),
                });
                self.cache
                    .borrow_mut()
                    .insert(key.to_owned(), renewed.clone());
                return Ok(Found::File(renewed));
            }
            self.insert(key, fresh.clone());
        }
        Ok(found)
    }

    fn insert(&self, key: &str, entry: Rc<Entry>) {
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= self.config.file_cache_entries.get() && !cache.contains_key(key) {
            // Full: start over rather than track recency on the hot path;
            // the working set refills within a TTL.
            cache.clear();
            self.memory_used.set(0);
        }
        let added = entry.memory();
        if let Some(old) = cache.insert(key.to_owned(), entry) {
            self.memory_used
                .set(self.memory_used.get().saturating_sub(old.memory()));
        }
        self.memory_used.set(self.memory_used.get() + added);
    }

    /// Open `key` from disk into a fresh entry.
    fn load(&self, key: &str, head: &Head<'_>) -> Result<Found, Error> {
        let trailing = key.ends_with('/') || key.is_empty();
        let rel = key.trim_end_matches('/');
        let file = File::from(
            open_beneath(self.root.as_fd(), rel, Target::Read, self.links())
                .map_err(Error::from_open)?,
        );
        let meta = file.metadata().map_err(Error::Io)?;
        if meta.is_dir() {
            if !trailing {
                return Ok(Found::Redirect);
            }
            for name in &self.config.index {
                if !self.config.dotfiles && name.starts_with('.') {
                    continue;
                }
                let inner = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                match self.load_file(&inner) {
                    Ok(e) => return Ok(Found::File(Rc::new(e))),
                    Err(Error::NotFound) => continue,
                    Err(e) => return Err(e),
                }
            }
            if self.config.autoindex {
                let (path, query) = (head.path(), head.query());
                let format = self.config.autoindex_format;
                return autoindex::render(&file, path, query, self.config.dotfiles, format)
                    .map(Found::Listing)
                    .map_err(Error::Io);
            }
            return Err(Error::NotFound);
        }
        // A file is not a directory: `/index.html/` is 404 (as nginx
        // answers), or a page's relative links would resolve beneath it.
        if !meta.is_file() || trailing {
            return Err(Error::NotFound);
        }
        drop(file);
        self.load_file(rel).map(|e| Found::File(Rc::new(e)))
    }

    /// Build the entry of the regular file at `rel` and its variants.
    fn load_file(&self, rel: &str) -> Result<Entry, Error> {
        let open = |p: &str| -> Result<(File, std::fs::Metadata), Error> {
            let f = File::from(
                open_beneath(self.root.as_fd(), p, Target::Read, self.links())
                    .map_err(Error::from_open)?,
            );
            let m = f.metadata().map_err(Error::Io)?;
            if !m.is_file() {
                return Err(Error::NotFound);
            }
            Ok((f, m))
        };
        let (file, meta) = open(rel)?;
        let last_modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let content_type = content_type(rel);
        let otf = self
            .compression
            .as_ref()
            .filter(|c| c.eligible(&content_type, meta.len()))
            .map(|c| Rc::new(c.on_the_fly(&Identity::of(&meta))));
        let mut entry = Entry {
            checked: Instant::now(),
            rel: rel.to_owned(),
            content_type,
            last_modified,
            last_modified_text: httpdate::fmt_http_date(last_modified),
            extra: self.extra_fields(rel),
            reps: Vec::with_capacity(1),
            available: Available::NONE,
            otf,
        };
        entry.reps.push(self.rep(&entry, None, file, &meta)?);
        for coding in Coding::PREFERENCE {
            let name = format!("{rel}{}", coding.file_suffix());
            match open(&name) {
                Ok((f, m)) => {
                    let rep = self.rep(&entry, Some(coding), f, &m)?;
                    entry.reps.push(rep);
                    entry.available = entry.available.with(coding);
                }
                Err(Error::NotFound) | Err(Error::Forbidden) => {}
                Err(e) => return Err(e),
            }
        }
        if !entry.available.is_empty() {
            // Siblings are served instead of on-the-fly variants (and
            // negotiated the same way).
            entry.otf = None;
            // The prebuilt heads were made before we knew of variants; make
            // them again now that Vary belongs in them.
            for i in 0..entry.reps.len() {
                if let Some((_, body)) = entry.reps[i].small.take() {
                    let rep = &entry.reps[i];
                    let head = prebuild_head(
                        Status::OK,
                        &self.fields(&entry, &rep.etag, rep.coding, true),
                        body.len() as u64,
                    );
                    entry.reps[i].small = Some((head, body));
                }
            }
        }
        Ok(entry)
    }

    fn rep(
        &self,
        entry: &Entry,
        coding: Option<Coding>,
        mut file: File,
        meta: &std::fs::Metadata,
    ) -> Result<Rep, Error> {
        let identity = Identity::of(meta);
        let etag =
            conditional::etag_for(identity.len, identity.mtime_ns, coding.map(|c| c.token()));
        let mut rep = Rep {
            coding,
            file: Rc::new(File::from(OwnedFd::from(
                file.try_clone().map_err(Error::Io)?,
            ))),
            identity,
            etag,
            small: None,
        };
        let budget = self
            .config
            .memory_cache_bytes
            .saturating_sub(self.memory_used.get());
        if identity.len <= self.config.small_file_max && (identity.len as usize) < budget {
            let mut body = Vec::with_capacity(identity.len as usize);
            file.read_to_end(&mut body).map_err(Error::Io)?;
            // A file that changed size while we read it is served from the
            // fd (with its stat length) next time instead of a torn copy.
            if body.len() as u64 == identity.len {
                let fields = self.fields(entry, &rep.etag, rep.coding, true);
                let head = prebuild_head(Status::OK, &fields, identity.len);
                rep.small = Some((head, Bytes::from(body)));
            }
        }
        Ok(rep)
    }
}

impl Rep {
    /// A second handle on the same representation (shares fd and memory).
    fn share(&self) -> Rep {
        Rep {
            coding: self.coding,
            file: self.file.clone(),
            identity: self.identity,
            etag: self.etag.clone(),
            small: self.small.clone(),
        }
    }
}

fn same_files(a: &Entry, b: &Entry) -> bool {
    a.rel == b.rel
        && a.reps.len() == b.reps.len()
        && a.reps
            .iter()
            .zip(&b.reps)
            .all(|(x, y)| x.coding == y.coding && x.identity == y.identity)
}

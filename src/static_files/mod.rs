//! Static files: the request path to bytes on disk, never outside the root.
//!
//! Owns: turning a GET/HEAD target into a file response — path resolution,
//! containment, directories and index files, types, and the per-worker
//! memory cache. Does not own framing, keep-alive or HEAD body stripping
//! (the connection loop) nor errors of the protocol itself (`http::error`).
//!
//! Pipeline, one request:
//! 1. resolve: `uri_path::resolve` percent-decodes once, rejects NUL, `%2f`,
//!    backslashes and bad UTF-8, removes dot segments and refuses any climb
//!    above the root (400). Dotfiles are 404.
//! 2. cache: a fresh in-memory entry (file ≤ `SMALL_FILE_MAX_BYTES`) answers
//!    with its prebuilt head and body: one memcpy, no syscall.
//! 3. open: `sys::openat2::open_beneath` from the root's fd, so the kernel
//!    enforces containment (symlinks that leave the root fail).
//! 4. directories: `/dir` → 301 `/dir/` (query kept); `/dir/` → `index.html`.
//! 5. send: small files are read once and cached; larger ones go out as a
//!    `Body::File` range streamed by the connection.

#[allow(dead_code)]
mod conditional;
#[allow(dead_code)]
mod encoding;
#[allow(dead_code)]
mod range;
#[allow(dead_code)]
mod uri_path;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

use crate::app::{Handler, MakeError};
use crate::http::response::prebuild_head;
use crate::http::{Body, Fields, FileRange, Head, Response, Status};
use crate::sys::openat2::{open_beneath, Target};

/// Files up to this size are kept in memory as one prebuilt response.
pub const SMALL_FILE_MAX_BYTES: u64 = 64 * 1024;
/// Memory cache budget per worker: room for ~1000 small files.
pub const MEMORY_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// A cached entry is re-checked against the disk after this long, so an
/// atomically replaced file is served new within a second.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
/// The index file served for a directory.
pub const INDEX_FILE: &str = "index.html";

/// Why a file could not be served; mapped to a status in one place.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("bad path: {0}")]
    BadPath(#[from] uri_path::PathError),
    #[error("not found")]
    NotFound,
    #[error("permission denied")]
    Forbidden,
    #[error("I/O error: {0}")]
    Io(io::Error),
}

impl Error {
    fn from_open(e: io::Error) -> Error {
        match e.raw_os_error() {
            // ENOENT/ENOTDIR: missing. EXDEV/ELOOP: resolution would leave the
            // root (openat2 RESOLVE_BENEATH) or a symlink was refused: we
            // answer as if nothing were there.
            Some(libc::ENOENT)
            | Some(libc::ENOTDIR)
            | Some(libc::EXDEV)
            | Some(libc::ELOOP)
            | Some(libc::ENAMETOOLONG) => Error::NotFound,
            Some(libc::EACCES) | Some(libc::EPERM) => Error::Forbidden,
            _ => Error::Io(e),
        }
    }

    /// The one place a file error becomes a response.
    fn response(&self) -> Response {
        match self {
            Error::BadPath(_) => Response::text(Status::BAD_REQUEST, "400 Bad Request\n"),
            Error::NotFound => Response::text(Status::NOT_FOUND, "404 Not Found\n"),
            Error::Forbidden => Response::text(Status::FORBIDDEN, "403 Forbidden\n"),
            Error::Io(e) => {
                tracing::error!(error = %e, "I/O error serving a file");
                Response::text(Status::INTERNAL_SERVER_ERROR, "500 Internal Server Error\n")
            }
        }
    }
}

/// Identity of a file version: a change in any field invalidates the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

struct Cached {
    identity: Identity,
    checked: Instant,
    head: Bytes,
    body: Bytes,
}

/// The per-worker file handler.
pub struct Files {
    root: OwnedFd,
    cache: RefCell<HashMap<String, Cached>>,
    cache_bytes: RefCell<usize>,
}

impl Files {
    /// Open `root` for this worker.
    pub fn open(root: &Path) -> Result<Files, MakeError> {
        let dir =
            File::open(root).map_err(|e| format!("cannot open root {}: {e}", root.display()))?;
        if !dir.metadata()?.is_dir() {
            return Err(format!("root {} is not a directory", root.display()).into());
        }
        Ok(Files {
            root: dir.into(),
            cache: RefCell::new(HashMap::new()),
            cache_bytes: RefCell::new(0),
        })
    }

    fn serve(&self, head: &Head<'_>) -> Result<Response, Error> {
        let resolved = uri_path::resolve(head.path())?;
        if resolved.has_dotfile() {
            return Err(Error::NotFound);
        }
        let mut rel = resolved.relative_path();
        if let Some(hit) = self.cached(&rel) {
            return Ok(hit);
        }
        let file = open_beneath(self.root.as_fd(), &rel, Target::Read).map_err(Error::from_open)?;
        let mut file = File::from(file);
        let mut meta = file.metadata().map_err(Error::Io)?;
        if meta.is_dir() {
            if !resolved.trailing_slash && !rel.is_empty() {
                return Ok(redirect_to_slash(head));
            }
            rel = if rel.is_empty() {
                INDEX_FILE.to_owned()
            } else {
                format!("{rel}/{INDEX_FILE}")
            };
            if let Some(hit) = self.cached(&rel) {
                return Ok(hit);
            }
            let dir = file;
            file = File::from(
                open_beneath(dir.as_fd(), INDEX_FILE, Target::Read).map_err(Error::from_open)?,
            );
            meta = file.metadata().map_err(Error::Io)?;
        }
        if !meta.is_file() {
            return Err(Error::NotFound);
        }
        let identity = Identity::of(&meta);
        let fields = vec![
            ("Content-Type".into(), content_type(&rel).into()),
            (
                "Last-Modified".into(),
                httpdate::fmt_http_date(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)).into(),
            ),
        ];
        if identity.len <= SMALL_FILE_MAX_BYTES {
            let mut body = Vec::with_capacity(identity.len as usize);
            file.read_to_end(&mut body).map_err(Error::Io)?;
            // A file that changed size while we read it: serve what we read,
            // with its true length, and do not cache the torn view.
            let torn = body.len() as u64 != identity.len;
            let head_block = prebuild_head(Status::OK, &fields, body.len() as u64);
            let body = Bytes::from(body);
            if !torn {
                self.insert(rel, identity, head_block.clone(), body.clone());
            }
            return Ok(Response {
                status: Status::OK,
                fields: Fields::Prebuilt(head_block),
                body: Body::Bytes(body),
            });
        }
        Ok(Response {
            status: Status::OK,
            fields: Fields::List(fields),
            body: Body::File(FileRange {
                file: Rc::new(file),
                offset: 0,
                len: identity.len,
            }),
        })
    }

    /// A fresh cache hit, re-validating against the disk after `CACHE_TTL`.
    fn cached(&self, rel: &str) -> Option<Response> {
        let mut cache = self.cache.borrow_mut();
        let entry = cache.get_mut(rel)?;
        if entry.checked.elapsed() >= CACHE_TTL {
            let still = open_beneath(
                self.root.as_fd(),
                if rel.is_empty() { "." } else { rel },
                Target::Path,
            )
            .ok()
            .and_then(|fd| File::from(fd).metadata().ok())
            .map(|m| Identity::of(&m) == entry.identity)
            .unwrap_or(false);
            if !still {
                let gone = cache.remove(rel).map_or(0, |e| e.head.len() + e.body.len());
                *self.cache_bytes.borrow_mut() -= gone;
                return None;
            }
            entry.checked = Instant::now();
        }
        Some(Response {
            status: Status::OK,
            fields: Fields::Prebuilt(entry.head.clone()),
            body: Body::Bytes(entry.body.clone()),
        })
    }

    fn insert(&self, rel: String, identity: Identity, head: Bytes, body: Bytes) {
        let size = head.len() + body.len();
        let mut used = self.cache_bytes.borrow_mut();
        if *used + size > MEMORY_CACHE_BYTES {
            // Over budget: start over rather than track recency on the hot
            // path; the working set refills within a TTL.
            self.cache.borrow_mut().clear();
            *used = 0;
        }
        if let Some(old) = self.cache.borrow_mut().insert(
            rel,
            Cached {
                identity,
                checked: Instant::now(),
                head,
                body,
            },
        ) {
            *used -= old.head.len() + old.body.len();
        }
        *used += size;
    }
}

impl Handler for Files {
    fn handle(&self, head: &Head<'_>) -> Response {
        self.serve(head).unwrap_or_else(|e| e.response())
    }
}

fn redirect_to_slash(head: &Head<'_>) -> Response {
    let mut location = String::from_utf8_lossy(head.path()).into_owned();
    location.push('/');
    if let Some(q) = head.query() {
        location.push('?');
        location.push_str(&String::from_utf8_lossy(q));
    }
    Response::text(Status::MOVED_PERMANENTLY, "301 Moved Permanently\n")
        .header("Location", location)
}

/// MIME type by extension; `charset=utf-8` on text types.
fn content_type(rel: &str) -> String {
    match mime_guess::from_path(rel).first() {
        Some(m) => {
            let textual = m.type_() == mime_guess::mime::TEXT
                || matches!(m.subtype().as_str(), "javascript" | "json" | "xml" | "svg")
                || m.suffix()
                    .is_some_and(|s| s == mime_guess::mime::XML || s == mime_guess::mime::JSON);
            if textual && m.get_param(mime_guess::mime::CHARSET).is_none() {
                format!("{}; charset=utf-8", m.essence_str())
            } else {
                m.essence_str().to_owned()
            }
        }
        None => "application/octet-stream".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types_get_a_charset() {
        assert_eq!(content_type("a.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("a/b.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("x.png"), "image/png");
        assert_eq!(content_type("x.svg"), "image/svg+xml; charset=utf-8");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }
}

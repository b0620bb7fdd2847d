//! Static files for a CDN origin: the request path to bytes on disk, with
//! the HTTP semantics an nginx operator relies on, never outside the root.
//!
//! Owns: the whole file pipeline below and the per-worker caches. Does not
//! own framing, keep-alive or HEAD body stripping (the connection loop) nor
//! protocol errors (`http::error`).
//!
//! Pipeline, one request (each step a function of this file):
//! 0. method: GET and HEAD go on; OPTIONS is 204 with `Allow`; any other
//!    method is 405 with `Allow` (every method reaches the handler; this is
//!    the static-file service's answer, an app's may differ).
//! 1. resolve: `uri_path::resolve` percent-decodes once, rejects NUL, `%2f`,
//!    backslashes and bad UTF-8, removes dot segments and refuses any climb
//!    above the root (400). Dotfiles are 404 unless `--dotfiles allow`.
//! 2. lookup: the open-file cache answers with the file's fd, metadata,
//!    validators and precompressed variants, re-checked against the disk
//!    after `--file-cache-ttl`. A miss opens from the root's fd with openat2
//!    (`RESOLVE_BENEATH`, per `--symlinks`), so the kernel enforces
//!    containment; directories redirect (`/dir` → `/dir/`), serve an index
//!    file, or are listed with `--autoindex`.
//! 3. encoding: `encoding::choose` picks `.br`/`.zst`/`.gz` by
//!    Accept-Encoding; a compressible file without siblings gets a variant
//!    compressed on the fly (`compress`: cached per process, made by the
//!    worker for a small file, in the background for a large one) or
//!    identity. Every response for a file with variants of either kind has
//!    `Vary: Accept-Encoding`. What is chosen is a `Chosen`: the steps
//!    below see only it.
//! 4. conditional: `conditional::evaluate` in RFC 9110 §13.2.2 order →
//!    304 / 412 / proceed (and whether `If-Range` lets a range through).
//! 5. range: `range::parse` → 206 (single or multipart), 416, or the whole.
//! 6. send: small files (≤ `--small-file-max`) from memory as one prebuilt
//!    head + body (one write); larger ones as file ranges the connection
//!    sends zero-copy with explicit offsets.

mod autoindex;
mod cache;
pub(crate) mod compress;
mod conditional;
mod cors;
mod encoding;
mod errors;
mod range;
pub(crate) mod redirects;
mod settings;
pub(crate) mod uri_path;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

pub use autoindex::AutoindexFormat;
use bytes::Bytes;
pub use cors::Cors;
pub use settings::{ErrorPage, FilesConfig, Symlinks};

use crate::app::{head, MakeError, Request, Service};
use crate::http::error::ALLOW;
use crate::http::rules;
use crate::http::{
    on_error, Body, Fields, FileRange, Head, Method, Part, Refusal, Response, Status,
};
use crate::sys::openat2::Links;
use cache::{Entry, Found, Rep};
pub use compress::Compression;
use encoding::{Available, Coding};
use range::RangeOutcome;

type FieldList = Vec<(Cow<'static, str>, Cow<'static, str>)>;

/// Why a file could not be served; answered as a [`Refusal`].
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
            // root (RESOLVE_BENEATH) or a link was refused by policy: answer
            // as if nothing were there, revealing nothing about the outside.
            Some(libc::ENOENT)
            | Some(libc::ENOTDIR)
            | Some(libc::EXDEV)
            | Some(libc::ELOOP)
            | Some(libc::ENAMETOOLONG) => Error::NotFound,
            Some(libc::EACCES) | Some(libc::EPERM) => Error::Forbidden,
            _ => Error::Io(e),
        }
    }

    /// The refusal a file error is answered with (`http::on_error` decides
    /// its status and body).
    fn refusal(&self) -> Refusal {
        match self {
            Error::BadPath(_) => Refusal::BadPath,
            Error::NotFound => Refusal::NotFound,
            Error::Forbidden => Refusal::Forbidden,
            Error::Io(e) => {
                tracing::error!(error = %e, "I/O error serving a file");
                Refusal::Internal
            }
        }
    }
}

/// The per-worker file handler.
pub struct Files {
    root: OwnedFd,
    config: FilesConfig,
    cache: RefCell<HashMap<String, Rc<Entry>>>,
    memory_used: Cell<usize>,
    boundary_seed: Cell<u64>,
    /// The process's on-the-fly compression, shared with the other workers.
    compression: Option<Arc<Compression>>,
}

/// The representation a request gets: the file, a precompressed sibling or
/// an on-the-fly variant. Steps 4 to 6 see only this.
struct Chosen<'e> {
    coding: Option<Coding>,
    etag: &'e str,
    /// The representation's length (the variant's, when encoded).
    len: u64,
    body: Source<'e>,
    /// The whole 200 response's head, prebuilt (small files, variants).
    prebuilt: Option<crate::http::response::HeadBlock>,
}

/// Where a representation's bytes are.
enum Source<'e> {
    Memory(Bytes),
    File(&'e Rc<File>),
    /// Not in hand: the preconditions answer without a body (304, 412).
    Unread,
}

impl<'e> Chosen<'e> {
    fn of(rep: &'e Rep) -> Chosen<'e> {
        let (prebuilt, body) = match &rep.small {
            Some((head, body)) => (Some(head.clone()), Source::Memory(body.clone())),
            None => (None, Source::File(&rep.file)),
        };
        Chosen {
            coding: rep.coding,
            etag: &rep.etag,
            len: rep.identity.len,
            body,
            prebuilt,
        }
    }
}

impl Files {
    /// Open `root` for one worker, compressing with `compression`.
    pub fn open(
        root: &std::path::Path,
        config: FilesConfig,
        compression: Option<Arc<Compression>>,
    ) -> Result<Files, MakeError> {
        let dir =
            File::open(root).map_err(|e| format!("cannot open root {}: {e}", root.display()))?;
        if !dir.metadata()?.is_dir() {
            return Err(format!("root {} is not a directory", root.display()).into());
        }
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id());
        Ok(Files {
            root: dir.into(),
            config,
            cache: RefCell::new(HashMap::new()),
            memory_used: Cell::new(0),
            boundary_seed: Cell::new(seed),
            compression,
        })
    }

    fn links(&self) -> Links {
        match self.config.symlinks {
            Symlinks::Inside => Links::Beneath,
            Symlinks::Never => Links::None,
            Symlinks::Follow => Links::Any,
        }
    }

    fn serve(&self, head: &Head<'_>) -> Result<Response, Error> {
        // 0. a `[[rewrite]]` changes the path looked up (its query is not
        // the files' concern)
        let rewritten = if self.config.rewrites.is_empty() {
            None
        } else {
            self.rewritten(head)?
        };
        let path = match &rewritten {
            Some(p) => p.split('?').next().unwrap_or_default().as_bytes(),
            None => head.path(),
        };
        // 1. resolve (a plain path is its own key)
        let key: std::borrow::Cow<'_, str> = match uri_path::plain(path) {
            Some(key) => key.into(),
            None => {
                let resolved = uri_path::resolve(path)?;
                if !self.config.dotfiles && resolved.has_dotfile() {
                    return Err(Error::NotFound);
                }
                let mut key = resolved.relative_path();
                if resolved.trailing_slash && !key.is_empty() {
                    key.push('/');
                }
                key.into()
            }
        };
        // 2. lookup (a missing path: the fallback, if one is set)
        let found = match self.lookup(&key, head) {
            Err(Error::NotFound) => self.fallback(head).ok_or(Error::NotFound)?,
            found => found?,
        };
        let entry = match found {
            Found::File(e) => e,
            Found::Redirect => {
                let resolved = uri_path::resolve(path)?;
                return Ok(self.ruled(redirect_to_slash(&resolved, head), head));
            }
            Found::Listing(r) => return Ok(self.ruled(r, head)),
        };
        // 3. encoding
        let rep = self.choose(&entry, head);
        // 4. conditional
        let honor_range = match self.precondition(head, rep.etag, entry.last_modified) {
            conditional::Precondition::NotModified => {
                let fields = self.fields(&entry, rep.etag, rep.coding, false);
                return Ok(Response {
                    status: Status::NOT_MODIFIED,
                    fields: Fields::List(fields),
                    body: Body::Empty,
                });
            }
            conditional::Precondition::Failed => {
                return Ok(self.refused(&Refusal::PreconditionFailed, head))
            }
            conditional::Precondition::Proceed { honor_range } => honor_range,
        };
        // 5. range. RFC 9110 §14.2 defines ranges for GET; a HEAD gets the
        // header fields the same GET would (§9.3.2), so 206 and its
        // Content-Range too (as nginx answers); the connection drops the body.
        let total = rep.len;
        let get_or_head = matches!(head.method, Method::Get | Method::Head);
        if let (true, Some(value), true) = (get_or_head, head.header("range"), honor_range) {
            match range::parse(value, total) {
                RangeOutcome::Full => {}
                RangeOutcome::Unsatisfiable => {
                    let mut resp = on_error(&Refusal::RangeNotSatisfiable);
                    if let Fields::List(fields) = &mut resp.fields {
                        fields.extend(self.fields(&entry, rep.etag, rep.coding, false));
                        fields.push((
                            "Content-Range".into(),
                            range::unsatisfied_content_range(total).into(),
                        ));
                    }
                    return Ok(resp);
                }
                RangeOutcome::Single(r) => {
                    let mut fields = self.fields(&entry, rep.etag, rep.coding, true);
                    fields.push(("Content-Range".into(), r.content_range(total).into()));
                    return Ok(Response {
                        status: Status::PARTIAL_CONTENT,
                        fields: Fields::List(fields),
                        body: slice(&rep, r.start, r.len()),
                    });
                }
                RangeOutcome::Multi(ranges) => return Ok(self.multipart(&entry, &rep, &ranges)),
            }
        }
        // 6. send the whole representation
        if let (Some(head_block), Source::Memory(body)) = (&rep.prebuilt, &rep.body) {
            return Ok(Response {
                status: Status::OK,
                fields: Fields::Prebuilt(head_block.clone()),
                body: Body::Bytes(body.clone()),
            });
        }
        Ok(Response {
            status: Status::OK,
            fields: Fields::List(self.fields(&entry, rep.etag, rep.coding, true)),
            body: slice(&rep, 0, total),
        })
    }

    /// Step 3: a sibling when the file has any, else an on-the-fly variant
    /// when it is eligible and one is acceptable, else the file itself.
    fn choose<'e>(&self, entry: &'e Entry, head: &Head<'_>) -> Chosen<'e> {
        if !entry.available.is_empty() {
            let accept = head.header("accept-encoding");
            return Chosen::of(entry.rep(encoding::choose(accept, entry.available)));
        }
        if let Some(otf) = &entry.otf {
            let accept = head.header("accept-encoding");
            if let Some(coding) = encoding::choose(accept, Available::ALL) {
                if let Some(variant) = self.on_the_fly(entry, otf, coding, head) {
                    return variant;
                }
            }
        }
        Chosen::of(&entry.reps[0])
    }

    /// The request's path decoded as rules see it (`/`, the segments, a
    /// trailing `/` kept); `None` if it does not resolve.
    fn decoded<'h>(&self, head: &Head<'h>) -> Option<Cow<'h, [u8]>> {
        let path = head.path();
        if uri_path::is_plain(path) {
            return Some(Cow::Borrowed(path));
        }
        let r = uri_path::resolve(path).ok()?;
        let mut p = format!("/{}", r.relative_path());
        if r.trailing_slash && p.len() > 1 {
            p.push('/');
        }
        Some(Cow::Owned(p.into_bytes()))
    }

    /// The answer of the first `[[redirect]]` that takes the request.
    fn redirected(&self, head: &Head<'_>) -> Option<Response> {
        if self.config.redirects.is_empty() {
            return None;
        }
        let path = self.decoded(head)?;
        let (code, location) = redirects::redirect(&self.config.redirects, &path, head.query())?;
        let status = Status::from_code(code)?;
        Some(Response::new(status, Body::Empty).header("Location", location))
    }

    /// The path the first `[[rewrite]]` that takes the request gives it.
    fn rewritten(&self, head: &Head<'_>) -> Result<Option<String>, Error> {
        if self.config.rewrites.is_empty() {
            return Ok(None);
        }
        let Some(path) = self.decoded(head) else {
            // Not a path: `resolve` says why.
            return uri_path::resolve(head.path())
                .map(|_| None)
                .map_err(Error::from);
        };
        Ok(redirects::rewrite(&self.config.rewrites, &path))
    }

    /// `--fallback`'s file for a GET or HEAD of a missing path, unless the
    /// path looks like a file's (a `.` in its last segment) and
    /// `--fallback-files` is off. `None` without one, or when the fallback
    /// is missing too: then 404 (a fallback never falls back).
    fn fallback(&self, head: &Head<'_>) -> Option<Found> {
        let path = self.config.fallback.as_deref()?;
        if !matches!(head.method, Method::Get | Method::Head) {
            return None;
        }
        if !self.config.fallback_files && looks_like_file(head.path()) {
            return None;
        }
        // Validated plain (`config::files::fallback`): its key is itself.
        match self.lookup(&path[1..], head) {
            Ok(found @ Found::File(_)) => Some(found),
            _ => None,
        }
    }

    /// Step 4 for a representation with `etag`.
    fn precondition(
        &self,
        head: &Head<'_>,
        etag: &str,
        last_modified: SystemTime,
    ) -> conditional::Precondition {
        // One pass over the fields for the five (a name of RFC 9110 §13.1
        // starts with `if-`; most requests have none).
        let mut h = conditional::Headers {
            if_match: None,
            if_none_match: None,
            if_modified_since: None,
            if_unmodified_since: None,
            if_range: None,
            method_is_get_or_head: true,
        };
        for &(name, value) in &head.headers {
            let name = name.as_bytes();
            if name.len() < 5 || !name[..3].eq_ignore_ascii_case(b"if-") {
                continue;
            }
            let slot = match &name[3..] {
                n if n.eq_ignore_ascii_case(b"match") => &mut h.if_match,
                n if n.eq_ignore_ascii_case(b"none-match") => &mut h.if_none_match,
                n if n.eq_ignore_ascii_case(b"modified-since") => &mut h.if_modified_since,
                n if n.eq_ignore_ascii_case(b"unmodified-since") => &mut h.if_unmodified_since,
                n if n.eq_ignore_ascii_case(b"range") => &mut h.if_range,
                _ => continue,
            };
            // The first of each, as `Head::header` finds it.
            slot.get_or_insert(value);
        }
        conditional::evaluate(
            &h,
            &conditional::Validators {
                etag,
                last_modified,
            },
        )
    }

    /// The header fields (all but framing) of `entry`'s representation
    /// with `etag` and `coding`. `with_type` false leaves out Content-Type
    /// (304, 416 bodies are not the file's).
    fn fields(
        &self,
        entry: &Entry,
        etag: &str,
        coding: Option<Coding>,
        with_type: bool,
    ) -> FieldList {
        let mut f: FieldList = Vec::with_capacity(8 + entry.extra.len());
        if with_type {
            f.push(("Content-Type".into(), entry.content_type.clone().into()));
        }
        f.push((
            "Last-Modified".into(),
            entry.last_modified_text.clone().into(),
        ));
        f.push(("ETag".into(), etag.to_owned().into()));
        f.push(("Accept-Ranges".into(), "bytes".into()));
        if let Some(c) = coding {
            f.push(("Content-Encoding".into(), c.token().into()));
        }
        if !entry.available.is_empty() || entry.otf.is_some() {
            f.push(("Vary".into(), "Accept-Encoding".into()));
        }
        f.extend(entry.extra.iter().cloned());
        f
    }

    fn multipart(&self, entry: &Entry, rep: &Chosen<'_>, ranges: &[range::ByteRange]) -> Response {
        let seed = self.boundary_seed.get().wrapping_add(1);
        self.boundary_seed.set(seed);
        let boundary = range::multipart_boundary(seed);
        let total = rep.len;
        let mut parts = Vec::with_capacity(ranges.len() * 2 + 1);
        for r in ranges {
            let h = range::multipart_part_header(&boundary, &entry.content_type, r, total);
            parts.push(Part::Bytes(Bytes::from(h)));
            parts.push(match slice(rep, r.start, r.len()) {
                Body::Bytes(b) => Part::Bytes(b),
                Body::File(f) => Part::File(f),
                Body::Empty | Body::Parts(_) => Part::Bytes(Bytes::new()),
            });
        }
        parts.push(Part::Bytes(Bytes::from(range::multipart_trailer(
            &boundary,
        ))));
        let mut fields = self.fields(entry, rep.etag, rep.coding, false);
        fields.insert(
            0,
            (
                "Content-Type".into(),
                range::multipart_content_type(&boundary).into(),
            ),
        );
        let body = Body::Parts(parts);
        debug_assert_eq!(
            body.len(),
            range::multipart_len(&boundary, &entry.content_type, ranges, total)
        );
        Response {
            status: Status::PARTIAL_CONTENT,
            fields: Fields::List(fields),
            body,
        }
    }

    /// Cache-Control and `[[headers]]` rules that apply to `/rel`.
    fn extra_fields(&self, rel: &str) -> FieldList {
        let mut f: FieldList = Vec::new();
        if let Some(cc) = &self.config.cache_control {
            f.push(("Cache-Control".into(), cc.clone().into()));
        }
        if let Some((name, value)) = self.config.cors.fixed_fields() {
            f.push((name.into(), value.into()));
        }
        let path = format!("/{rel}");
        rules::set_on_fields(&self.config.rules, path.as_bytes(), &mut f);
        f
    }

    /// What every answer of the site carries, on one that is not a file's
    /// (an error, a redirect, a listing, OPTIONS): the fixed CORS field and
    /// the `[[headers]]` rules. A file's entry holds them already.
    fn ruled(&self, mut resp: Response, head: &Head<'_>) -> Response {
        if let Some((name, value)) = self.config.cors.fixed_fields() {
            resp = resp.header(name, value);
        }
        self.rules_only(resp, head)
    }

    /// `[[headers]]` rules on an answer that is not a file's.
    fn rules_only(&self, mut resp: Response, head: &Head<'_>) -> Response {
        if self.config.rules.is_empty() {
            return resp;
        }
        if let Fields::List(fields) = &mut resp.fields {
            // The decoded path, as a file's rules see it; the path as sent
            // when it does not resolve (a rule on `/**` still applies).
            let path = self.decoded(head).unwrap_or(Cow::Borrowed(head.path()));
            rules::set_on_fields(&self.config.rules, &path, fields);
        }
        resp
    }
}

/// `len` bytes of a representation from `start`: from memory when held.
fn slice(rep: &Chosen<'_>, start: u64, len: u64) -> Body {
    match &rep.body {
        Source::Memory(body) => Body::Bytes(body.slice(start as usize..(start + len) as usize)),
        Source::File(file) => Body::File(FileRange {
            file: Rc::clone(file),
            offset: start,
            len,
        }),
        // Only a 304 or 412 is answered for an unread variant.
        Source::Unread => Body::Empty,
    }
}

impl Service for Files {
    type Body = crate::app::Body;

    /// The static files composed into an app: the same answer, from the
    /// owned head.
    async fn call(&self, req: Request) -> crate::app::Response {
        let (parts, _body, _) = req.into_parts();
        crate::app::response::from_static(self.handle(&head::borrow(&parts)))
    }

    const BORROWS_HEADS: bool = true;

    fn respond_to_head(&self, head: &Head<'_>, _: &crate::app::Connection) -> Option<Response> {
        Some(self.handle(head))
    }
}

impl Files {
    /// Answer `head`: GET and HEAD serve, OPTIONS says what is allowed,
    /// anything else is 405.
    pub fn handle(&self, head: &Head<'_>) -> Response {
        let cors = &self.config.cors;
        // Each rule is one check when it is not configured: what a site
        // without rules pays.
        if !self.config.redirects.is_empty() {
            if let Some(resp) = self.redirected(head) {
                return cors.on_answer(self.ruled(resp, head), head);
            }
        }
        let resp = match head.method {
            Method::Get | Method::Head => match self.serve(head) {
                Ok(resp) => resp,
                Err(e) => self.refused(&e.refusal(), head),
            },
            Method::Options => match cors.preflight(head) {
                Some(resp) => return self.rules_only(resp, head),
                None => self.ruled(
                    Response::new(Status::NO_CONTENT, Body::Empty).header("Allow", ALLOW),
                    head,
                ),
            },
            Method::Other => self.refused(&Refusal::MethodNotAllowed, head),
        };
        if cors.is_on() {
            cors.on_answer(resp, head)
        } else {
            resp
        }
    }
}

/// Whether a request's path names a file by its look: its last decoded
/// segment holds a `.` (`/app.js`, `/img/logo.png`), not a route of an app
/// (`/users/42`, `/about/`). A path that does not resolve is not routed.
fn looks_like_file(path: &[u8]) -> bool {
    match uri_path::resolve(path) {
        Ok(r) => !r.trailing_slash && r.segments.last().is_some_and(|s| s.contains('.')),
        Err(_) => true,
    }
}

/// 301 to the directory with a slash. The Location is rebuilt from the
/// resolved segments (re-encoded), never echoed from the request: `//dir`
/// must not become the protocol-relative `//dir/` (an open redirect).
fn redirect_to_slash(resolved: &uri_path::Resolved, head: &Head<'_>) -> Response {
    let mut location = String::from("/");
    for seg in &resolved.segments {
        location.push_str(&autoindex::percent_encode(seg));
        location.push('/');
    }
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
                || matches!(m.subtype().as_str(), "javascript" | "json" | "xml")
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

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
//!    worker for a small file, in the background for a large one, which
//!    is compressed as it is sent meanwhile) or identity. Every response
//!    for a file with variants of either kind has `Vary: Accept-Encoding`.
//!    What is chosen is a `Chosen`: the steps below see only it.
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
mod guard;
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

use crate::app::{head, Connection, MakeError, Request, Service};
use crate::http::error::ALLOW;
use crate::http::rules;
use crate::http::{on_error, Body, Fields, FileRange, Head, Method, Refusal, Response, Status};
use crate::sys::openat2::Links;
use cache::{Entry, Found, Rep};
pub use compress::Compression;
use compress::Streams;
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
    /// Compressed as it is sent (`compress::stream`): the stream, or none
    /// for a HEAD or when [`Streams::Defer`] asked only whether.
    Compressing(Option<Box<compress::Stream>>),
}

/// An answer of the files.
pub(crate) enum Served {
    /// Whole, as any static answer.
    Now(Response),
    /// A 200 compressed as it is sent: its head (`Body::Empty`) and its
    /// body, none for a HEAD or when [`Streams::Defer`] asked.
    Compressing(Response, Option<Box<compress::Stream>>),
    /// Not answerable from a borrowed head (credentials to verify, or a
    /// stream to make): the request goes to `call`.
    Deferred,
}

impl From<Response> for Served {
    fn from(r: Response) -> Served {
        Served::Now(r)
    }
}

impl Served {
    fn map(self, f: impl FnOnce(Response) -> Response) -> Served {
        match self {
            Served::Now(r) => Served::Now(f(r)),
            Served::Compressing(r, s) => Served::Compressing(f(r), s),
            Served::Deferred => Served::Deferred,
        }
    }

    /// The answer to a borrowed head; `None` hands the request to `call`
    /// (the stream is made there).
    pub(crate) fn now(self) -> Option<Response> {
        match self {
            Served::Now(r) => Some(r),
            Served::Compressing(..) | Served::Deferred => None,
        }
    }

    /// As an app's response (`Service::call`).
    pub(crate) fn into_app(self) -> crate::app::Response {
        match self {
            Served::Now(r) => crate::app::response::from_static(r),
            Served::Compressing(r, stream) => {
                let mut out = crate::app::response::from_static(r);
                if let Some(stream) = stream {
                    *out.body_mut() = crate::app::Body::stream(*stream);
                }
                out
            }
            // `call` awaits what a borrowed head defers.
            Served::Deferred => crate::app::response::from_static(on_error(&Refusal::Internal)),
        }
    }
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

    fn serve(&self, head: &Head<'_>, streams: Streams, private: bool) -> Result<Served, Error> {
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
                return Ok(self.ruled(redirect_to_slash(&resolved, head), head).into());
            }
            Found::Listing(r) => return Ok(self.ruled(r, head).into()),
        };
        // 3. encoding
        let mut rep = self.choose(&entry, head, streams);
        // 4. conditional
        let honor_range = match self.precondition(head, rep.etag, entry.last_modified) {
            conditional::Precondition::NotModified => {
                let fields = self.fields(&entry, rep.etag, rep.coding, false);
                return Ok(Response {
                    status: Status::NOT_MODIFIED,
                    fields: Fields::List(fields),
                    body: Body::Empty,
                }
                .into());
            }
            conditional::Precondition::Failed => {
                return Ok(self.refused(&Refusal::PreconditionFailed, head).into())
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
                    return Ok(resp.into());
                }
                RangeOutcome::Single(r) => {
                    let mut fields = self.fields(&entry, rep.etag, rep.coding, true);
                    fields.push(("Content-Range".into(), r.content_range(total).into()));
                    return Ok(Response {
                        status: Status::PARTIAL_CONTENT,
                        fields: Fields::List(fields),
                        body: slice(&rep, r.start, r.len()),
                    }
                    .into());
                }
                RangeOutcome::Multi(ranges) => {
                    return Ok(self.multipart(&entry, &rep, &ranges).into())
                }
            }
        }
        // 6. send the whole representation (a private answer's fields
        // change: not from the prebuilt head)
        if let (Some(head_block), Source::Memory(body), false) = (&rep.prebuilt, &rep.body, private)
        {
            return Ok(Response {
                status: Status::OK,
                fields: Fields::Prebuilt(head_block.clone()),
                body: Body::Bytes(body.clone()),
            }
            .into());
        }
        if let Source::Compressing(stream) = &mut rep.body {
            let stream = stream.take();
            // Other bytes than the stored variant's, decoding to the same:
            // its ETag, weak (`compress::stream`).
            let weak = format!("W/{}", rep.etag);
            let fields = self.fields(&entry, &weak, rep.coding, true);
            let head = Response {
                status: Status::OK,
                fields: Fields::List(fields),
                body: Body::Empty,
            };
            return Ok(Served::Compressing(head, stream));
        }
        Ok(Response {
            status: Status::OK,
            fields: Fields::List(self.fields(&entry, rep.etag, rep.coding, true)),
            body: slice(&rep, 0, total),
        }
        .into())
    }

    /// Step 3: a sibling when the file has any, else an on-the-fly variant
    /// when it is eligible and one is acceptable, else the file itself.
    fn choose<'e>(&self, entry: &'e Entry, head: &Head<'_>, streams: Streams) -> Chosen<'e> {
        if !entry.available.is_empty() {
            let accept = head.header("accept-encoding");
            return Chosen::of(entry.rep(encoding::choose(accept, entry.available)));
        }
        if let Some(otf) = &entry.otf {
            let accept = head.header("accept-encoding");
            if let Some(coding) = encoding::choose(accept, Available::ALL) {
                if let Some(variant) = self.on_the_fly(entry, otf, coding, head, streams) {
                    return variant;
                }
            }
        }
        Chosen::of(&entry.reps[0])
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
        // Only a 304 or 412 is answered for an unread variant; a stream is
        // never asked for a range (`compress::stream`).
        Source::Unread | Source::Compressing(_) => Body::Empty,
    }
}

impl Service for Files {
    type Body = crate::app::Body;

    /// The static files composed into an app: the same answer, from the
    /// owned head.
    async fn call(&self, req: Request) -> crate::app::Response {
        // Boxed: a verification awaited makes this state large, and the
        // connection's busy state would carry it for every request.
        Box::pin(async move {
            let (parts, _body, conn) = req.into_parts();
            self.answer_async(&head::borrow(&parts), &conn)
                .await
                .into_app()
        })
        .await
    }

    const BORROWS_HEADS: bool = true;

    fn respond_to_head(&self, head: &Head<'_>, conn: &Connection) -> Option<Response> {
        self.answer(head, conn, Streams::Defer, None).now()
    }
}

impl Files {
    /// Answer `head` whole: GET and HEAD serve, OPTIONS says what is
    /// allowed, anything else is 405. A file whose compressed variant is
    /// not stored yet goes identity (the connection's path through
    /// [`Service`] compresses it as it is sent).
    ///
    /// `conn` says whether the request came over TLS and from where
    /// (`[[auth]]`); a credential not verified before is verified on the
    /// caller's thread.
    pub fn handle(&self, head: &Head<'_>, conn: &Connection) -> Response {
        match self.answer(head, conn, Streams::Never, None) {
            Served::Now(r) => r,
            Served::Compressing(..) | Served::Deferred => {
                unreachable!("Streams::Never neither streams nor defers")
            }
        }
    }

    /// The answer of `call`: credentials verified by the verifier thread
    /// while this request's task waits, a stream where one is due.
    pub(crate) async fn answer_async(&self, head: &Head<'_>, conn: &Connection) -> Served {
        let verdict = match self.gate(head, conn) {
            crate::auth::Gate::Verify(pending) => crate::auth::Gate::verified(pending).await,
            gate => gate,
        };
        self.answer(head, conn, Streams::Make, Some(verdict))
    }

    /// [`Files::handle`], with a stream where `streams` allows one, and the
    /// `[[auth]]` gate's `verdict` when the caller has it.
    pub(crate) fn answer(
        &self,
        head: &Head<'_>,
        conn: &Connection,
        streams: Streams,
        verdict: Option<crate::auth::Gate<'_>>,
    ) -> Served {
        let cors = &self.config.cors;
        // Each rule is one check when it is not configured: what a site
        // without rules pays.
        if !self.config.redirects.is_empty() {
            if let Some(resp) = self.redirected(head) {
                return cors.on_answer(self.ruled(resp, head), head).into();
            }
        }
        let private = if self.config.auth.is_empty() {
            false
        } else {
            match self.guarded(head, conn, verdict, streams == Streams::Defer) {
                guard::Guarded::Serve(private) => private,
                guard::Guarded::Refused(resp) => return cors.on_answer(resp, head).into(),
                guard::Guarded::Defer => return Served::Deferred,
            }
        };
        let served = match head.method {
            Method::Get | Method::Head => match self.serve(head, streams, private) {
                Ok(served) => served,
                Err(e) => self.refused(&e.refusal(), head).into(),
            },
            Method::Options => match cors.preflight(head) {
                Some(resp) => return self.rules_only(resp, head).into(),
                None => self
                    .ruled(
                        Response::new(Status::NO_CONTENT, Body::Empty).header("Allow", ALLOW),
                        head,
                    )
                    .into(),
            },
            Method::Other => self.refused(&Refusal::MethodNotAllowed, head).into(),
        };
        let served = if private {
            served.map(|r| self.private(r, head))
        } else {
            served
        };
        if cors.is_on() {
            served.map(|r| cors.on_answer(r, head))
        } else {
            served
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
        uri_path::encode_into(&mut location, seg.as_bytes(), b"");
        location.push('/');
    }
    if let Some(q) = head.query() {
        redirects::query_into(&mut location, q);
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

//! Sites (virtual hosts): the service the binary serves, which picks a
//! site's static files by the request's Host.
//!
//! Owns [`Sites`] (one [`Files`] per `[[site]]`, each with its root and
//! file settings), the Host/SNI consistency rule and 421, the answers to
//! ACME's HTTP-01 challenges (`published`), and name matching (`router`).
//! Owns the sites' validated settings too (`settings`; `config::sites`
//! reads them from the file). Does not own certificates
//! (`tls`, which selects them by SNI through the same router) nor ordering
//! them (`acme`).
//!
//! Flow of a request:
//! 1. A path under `/.well-known/acme-challenge/` whose token the
//!    supervisor published is answered with its key authorization, for any
//!    Host (RFC 8555 §8.3: the CA asks on port 80 with the name as Host).
//! 2. One site and it is the default: it answers, nothing is looked at.
//! 3. Else the Host (the authority, without its port) picks the site:
//!    exact name, longest wildcard, else the default site or 421.
//! 4. Over TLS, a Host naming another site than the SNI did is 421
//!    (RFC 9110 §15.5.20: the connection was made for the other site, and
//!    its certificate may not cover this one). Without a Host (HTTP/1.0)
//!    the SNI's site answers.
//! 5. The site's files answer as any static request.
//!
//! Each site's file caches get an even share of the per-worker bounds
//! (`--file-cache-entries`, `--memory-cache-bytes`), so a worker holds no
//! more with many sites than with one.

pub mod published;
pub mod router;
mod settings;

use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::app::{Connection, MakeError, Request, Service};
use crate::http::error::{on_error, Refusal};
use crate::http::response::{Body, Response, Status};
use crate::http::Head;
use crate::static_files::compress::{Compression, Streams};
use crate::static_files::Files;
use router::Router;
pub use settings::{SiteConfig, SiteTls, SitesConfig, UnknownHost};

/// The static files of every site, on one worker.
pub struct Sites {
    /// By site index.
    files: Vec<Files>,
    router: Arc<Router>,
}

impl Sites {
    /// The factory the binary serves: on each worker, every site's files,
    /// all of a process's sharing one [`Compression`], started by the
    /// first worker of the process that builds its service (so a
    /// supervisor of worker processes never starts one). `processes`: how
    /// many worker processes share the compression cache's budget (1 when
    /// the workers are threads).
    pub fn factory(
        sites: &SitesConfig,
        processes: usize,
        workers: usize,
    ) -> impl Fn(usize) -> Result<Sites, MakeError> + Send + Sync + 'static {
        let sites = sites.clone();
        // Read before any worker pins itself: the compressor thread, started
        // from a pinned worker, takes the whole set back.
        let cpus = crate::sys::affinity::allowed_cpus().ok();
        let shared: OnceLock<Option<Arc<Compression>>> = OnceLock::new();
        move |_worker: usize| {
            let compression = match shared.get() {
                Some(c) => c.clone(),
                None => {
                    // Every site that compresses has the same settings; one
                    // on is enough.
                    let on = sites.list.iter().find_map(|s| s.files.compression.clone());
                    let started = on
                        .map(|c| Compression::start(c, processes, cpus.clone()))
                        .transpose()
                        .map_err(|e| format!("cannot start the compressor thread: {e}"))?
                        .map(Arc::new);
                    shared.get_or_init(|| started).clone()
                }
            };
            // The caches' settings are totals for the server: a worker's
            // share (`Config::file_cache_shares`), split among its sites.
            let n = sites.list.len().max(1);
            let share = workers.max(1) * n;
            let mut files = Vec::with_capacity(n);
            for site in &sites.list {
                let mut settings = site.files.clone();
                settings.file_cache_entries =
                    NonZeroUsize::new(settings.file_cache_entries.get() / share)
                        .unwrap_or(NonZeroUsize::MIN);
                settings.memory_cache_bytes /= share;
                let compression = settings.compression.as_ref().and(compression.clone());
                let f = Files::open(&site.root, settings, compression)
                    .map_err(|e| format!("site {:?}: {e}", site.name))?;
                files.push(f);
            }
            Ok(Sites {
                files,
                router: sites.router.clone(),
            })
        }
    }

    /// The site that answers `head` on `conn`, or the answer itself (an
    /// ACME challenge, a misdirected request).
    fn route(&self, head: &Head<'_>, conn: &Connection) -> Result<&Files, Response> {
        let path = head.path();
        if path.starts_with(published::HTTP01_PREFIX) {
            if let Some(key_authorization) = published::global().http01(path) {
                return Err(
                    Response::new(Status::OK, Body::Bytes(Bytes::from(key_authorization)))
                        .header("Content-Type", "text/plain"),
                );
            }
        }
        match self
            .router
            .request(head.host, conn.tls.and_then(|t| t.site))
        {
            Some(i) => Ok(&self.files[i]),
            None => Err(on_error(&Refusal::Misdirected)),
        }
    }
}

impl Service for Sites {
    type Body = crate::app::Body;

    /// The sites composed into an app: the same answer, from the owned head.
    async fn call(&self, req: Request) -> crate::app::Response {
        // Boxed: a verification awaited makes this state large, and the
        // connection's busy state would carry it for every request.
        Box::pin(async move {
            let (parts, _body, conn) = req.into_parts();
            let head = crate::app::head::borrow(&parts);
            match self.route(&head, &conn) {
                Ok(files) => files.answer_async(&head, &conn).await.into_app(),
                Err(resp) => crate::app::response::from_static(resp),
            }
        })
        .await
    }

    const BORROWS_HEADS: bool = true;

    fn respond_to_head(&self, head: &Head<'_>, conn: &Connection) -> Option<Response> {
        match self.route(head, conn) {
            Ok(files) => files.answer(head, conn, Streams::Defer, None).now(),
            Err(resp) => Some(resp),
        }
    }
}

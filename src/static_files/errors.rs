//! The static files' error answers: a site's own page for the status
//! (`[[error_page]]`), else the built-in answer, a small HTML page for a
//! client that accepts HTML and a line of text for any other.
//!
//! Owns choosing the page and reading it. Does not own the status of an
//! error nor the built-in bodies (`http::error::on_error_for`, the one
//! place errors become statuses), nor the `[[headers]]` rules put on the
//! answer (`Files::ruled`).
//!
//! A page is a file under the site's root, found through the open-file
//! cache (so through the same containment as any file), answered with the
//! error's status and its own `Content-Type`; a page that is missing or
//! cannot be read is logged once per worker and the built-in answer goes
//! out instead. A page is never looked up through the error pages again, so
//! no chain of pages can loop.

use std::cell::Cell;

use super::cache::Found;
use super::{slice, Chosen, Files};
use crate::http::error::{accepts_html, on_error_for};
use crate::http::{Body, Fields, Head, Refusal, Response};

impl Files {
    /// The answer to `refusal` for `head`, its rules set.
    pub(super) fn refused(&self, refusal: &Refusal, head: &Head<'_>) -> Response {
        let status = refusal.status();
        let resp = match self.error_page(status.code(), head) {
            Some((body, content_type)) => {
                let mut resp = on_error_for(refusal, false);
                if let Fields::List(fields) = &mut resp.fields {
                    for (name, value) in fields.iter_mut() {
                        if name.eq_ignore_ascii_case("content-type") {
                            *value = content_type.clone().into();
                        }
                    }
                }
                resp.body = body;
                resp
            }
            None => {
                // The body depends on `Accept`: a cache must know.
                on_error_for(refusal, accepts_html(head.header("accept"))).header("Vary", "Accept")
            }
        };
        self.ruled(resp, head)
    }

    /// The configured page for `code`, read: its body and content type.
    fn error_page(&self, code: u16, head: &Head<'_>) -> Option<(Body, String)> {
        let page = self
            .config
            .error_pages
            .iter()
            .find(|p| p.statuses.contains(&code))?;
        // Validated plain (`config::files::fallback`): its key is itself.
        match self.lookup(&page.path[1..], head) {
            Ok(Found::File(entry)) => {
                let rep = Chosen::of(&entry.reps[0]);
                let body = slice(&rep, 0, rep.len);
                Some((body, entry.content_type.clone()))
            }
            _ => {
                thread_local! {
                    static WARNED: Cell<bool> = const { Cell::new(false) };
                }
                if !WARNED.with(|w| w.replace(true)) {
                    tracing::warn!(
                        page = %page.path,
                        status = code,
                        "error page missing or unreadable; the built-in answer goes out instead \
                         (said once per worker)"
                    );
                }
                None
            }
        }
    }
}

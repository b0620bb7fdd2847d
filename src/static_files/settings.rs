//! The validated settings of one site's static files.
//!
//! Owns [`FilesConfig`] (what [`super::Files`] is opened with) and the
//! word-valued [`Symlinks`]. Does not own reading or checking them: the
//! config file and flags are `config::files`, which builds these, and the
//! defaults and bounds are documented there with their flags.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::compress::CompressConfig;
use crate::choice::choice;
use crate::http::rules::HeaderRule;

choice! {
    /// How the file handler treats symbolic links.
    pub enum Symlinks {
        /// Links whose resolution stays under the root are followed (openat2
        /// RESOLVE_BENEATH); escaping ones are refused.
        Inside = "inside",
        /// No link is followed (RESOLVE_NO_SYMLINKS).
        Never = "never",
        /// Links are followed anywhere (the request path itself still cannot
        /// climb above the root).
        Follow = "follow",
    }
}

/// Settings of the static file handler.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    pub symlinks: Symlinks,
    /// Serve paths with a segment starting with `.`.
    pub dotfiles: bool,
    pub index: Vec<String>,
    pub autoindex: bool,
    /// What a listing is written as.
    pub autoindex_format: super::AutoindexFormat,
    /// The file (its path from the root, `/index.html`) that answers a GET
    /// or HEAD of a missing path, as a single-page app's router expects.
    pub fallback: Option<String>,
    /// The fallback answers missing paths that look like files (a `.` in
    /// their last segment) too; else those stay 404.
    pub fallback_files: bool,
    pub cache_control: Option<String>,
    pub rules: Vec<HeaderRule>,
    /// Pages answered for error statuses (`[[error_page]]`).
    pub error_pages: Vec<ErrorPage>,
    /// `[[redirect]]` rules, in order.
    pub redirects: Vec<super::redirects::Redirect>,
    /// `[[rewrite]]` rules, in order.
    pub rewrites: Vec<super::redirects::Rewrite>,
    /// `[[auth]]` rules, in order: the first whose glob takes a path guards it.
    pub auth: Vec<crate::auth::AuthRule>,
    /// `[[auth]]` credentials may come over plain HTTP.
    pub auth_over_http: bool,
    /// Cross-origin reads (`--cors-*`); off without origins.
    pub cors: super::Cors,
    pub file_cache_ttl: Duration,
    pub file_cache_entries: NonZeroUsize,
    pub small_file_max: u64,
    pub memory_cache_bytes: usize,
    /// On-the-fly compression; `None` with `--compress off`.
    pub compression: Option<CompressConfig>,
}

/// A page the static files answer an error status with (`[[error_page]]`),
/// keeping the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPage {
    /// Error statuses (400 to 599), none in two pages.
    pub statuses: Vec<u16>,
    /// The page's path from the root, written plainly (`/404.html`).
    pub path: String,
}

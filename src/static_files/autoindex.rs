//! `--autoindex`: a listing of a directory without an index file, as HTML
//! (a table sortable by name, size and modification time through links,
//! no script) or as JSON (`--autoindex-format json`, nginx's
//! `autoindex_format json` fields).
//!
//! Names are HTML-escaped and percent-encoded in links (and JSON-escaped in
//! JSON), so a file called `<script>` lists as text. Dotfiles are left out
//! unless allowed. The directory is read through the fd that was opened
//! beneath the root (`/proc/self/fd/N`), never by path, so a swapped-in
//! symlink cannot redirect the listing. At most [`MAX_ENTRIES`] entries
//! are read (the first the directory gives), sorted and listed, with a
//! note when there were more: a directory of a million files costs a
//! bounded read, not a million `stat`s.
//!
//! A listing is made for its request (~1.5 MB at 10,000 entries) and held
//! until the connection has sent it, which a client that does not read can
//! make forever: an HTTP/2 client that opens a hundred streams and no
//! window would hold a hundred. So a worker holds at most
//! [`HELD_BYTES_PER_WORKER`] of listings at once (a count on its thread,
//! given back as each listing's bytes are dropped); past it a listing is
//! 503 with `Retry-After` and costs no directory read.

use std::cell::Cell;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::SystemTime;

use bytes::Bytes;

use super::uri_path;
use crate::access_log::escape_json;
use crate::choice::choice;
use crate::http::error::{on_error, Refusal};
use crate::http::{Body, Response, Status};

/// Entries a listing reads and shows at most.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// Bytes of listings a worker holds at once: about ten of the largest.
pub(crate) const HELD_BYTES_PER_WORKER: usize = 16 * 1024 * 1024;

thread_local! {
    /// Bytes of this worker's listings not yet dropped.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A listing's bytes, counted in [`HELD`] while they live. Made and
/// dropped on the worker's thread (a response never leaves it).
struct Held(Vec<u8>);

impl Held {
    fn bytes(body: Vec<u8>) -> Bytes {
        HELD.with(|h| h.set(h.get() + body.len()));
        Bytes::from_owner(Held(body))
    }
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(self.0.len())));
    }
}

choice! {
    /// What a directory listing is written as.
    pub enum AutoindexFormat {
        /// A page for people: a table of name, size and date, sortable.
        Html = "html",
        /// For programs: an array of `{name, type, mtime, size}`.
        Json = "json",
    }
}

/// One listed entry.
struct Entry {
    name: String,
    kind: Kind,
    /// Bytes, for a file.
    size: Option<u64>,
    modified: Option<SystemTime>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    File,
    Other,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Directory => "directory",
            Kind::File => "file",
            Kind::Other => "other",
        }
    }
}

/// The order a listing is in: `?sort=name|size|mtime&order=asc|desc`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Name,
    Size,
    Modified,
}

impl Key {
    fn word(self) -> &'static str {
        match self {
            Key::Name => "name",
            Key::Size => "size",
            Key::Modified => "mtime",
        }
    }
}

/// The sort a query asks for (anything unknown: by name, ascending).
fn sort_of(query: Option<&[u8]>) -> (Key, bool) {
    let (mut key, mut descending) = (Key::Name, false);
    for pair in query.unwrap_or_default().split(|&b| b == b'&') {
        match pair {
            b"sort=name" => key = Key::Name,
            b"sort=size" => key = Key::Size,
            b"sort=mtime" => key = Key::Modified,
            b"order=desc" => descending = true,
            b"order=asc" => descending = false,
            _ => {}
        }
    }
    (key, descending)
}

/// Render the listing of the open directory `dir`, requested as `path`
/// with `query`.
pub(crate) fn render(
    dir: &File,
    path: &[u8],
    query: Option<&[u8]>,
    dotfiles: bool,
    format: AutoindexFormat,
) -> io::Result<Response> {
    if HELD.with(Cell::get) >= HELD_BYTES_PER_WORKER {
        tracing::debug!("listings held at the worker's bound: 503");
        return Ok(on_error(&Refusal::Busy).header("Retry-After", "1"));
    }
    let mut more = false;
    let mut entries = Vec::new();
    for e in std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))? {
        let Ok(e) = e else { continue };
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if !dotfiles && name.starts_with('.') {
            continue;
        }
        if entries.len() == MAX_ENTRIES {
            more = true;
            break;
        }
        // Not followed: a link lists as itself (its target may be outside).
        let meta = e.metadata().ok();
        let kind = match meta.as_ref().map(|m| m.file_type()) {
            Some(t) if t.is_dir() => Kind::Directory,
            Some(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        entries.push(Entry {
            name,
            kind,
            size: meta.as_ref().filter(|m| m.is_file()).map(|m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
        });
    }
    let (key, descending) = sort_of(query);
    entries.sort_by(|a, b| {
        let by = match key {
            Key::Name => a.name.cmp(&b.name),
            Key::Size => a.size.cmp(&b.size).then_with(|| a.name.cmp(&b.name)),
            Key::Modified => a
                .modified
                .cmp(&b.modified)
                .then_with(|| a.name.cmp(&b.name)),
        };
        if descending {
            by.reverse()
        } else {
            by
        }
    });
    let (body, content_type) = match format {
        AutoindexFormat::Html => (
            html(&entries, path, key, descending, more).into_bytes(),
            "text/html; charset=utf-8",
        ),
        AutoindexFormat::Json => (json(&entries), "application/json"),
    };
    let mut resp = Response::new(Status::OK, Body::Bytes(Held::bytes(body)))
        .header("Content-Type", content_type);
    if more {
        resp = resp.header("X-Listing-Truncated", MAX_ENTRIES.to_string());
    }
    Ok(resp)
}

fn html(entries: &[Entry], path: &[u8], key: Key, descending: bool, more: bool) -> String {
    let title = escape(&String::from_utf8_lossy(path));
    let mut out = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n\
         <body><h1>Index of {title}</h1>\n<table>\n<tr>"
    );
    // Each column's link sorts by it, the other way if it is the sort now.
    for (k, label) in [
        (Key::Name, "Name"),
        (Key::Size, "Size"),
        (Key::Modified, "Modified"),
    ] {
        let order = if k == key && !descending {
            "desc"
        } else {
            "asc"
        };
        let _ = write!(
            out,
            "<th><a href=\"?sort={}&amp;order={order}\">{label}</a></th>",
            k.word()
        );
    }
    out.push_str("</tr>\n<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    for e in entries {
        let slash = if e.kind == Kind::Directory { "/" } else { "" };
        let size = e.size.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
        let date = e.modified.map(httpdate::fmt_http_date).unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td><a href=\"{}{slash}\">{}{slash}</a></td><td>{size}</td><td>{date}</td></tr>",
            uri_path::encode_segment(&e.name),
            escape(&e.name)
        );
    }
    out.push_str("</table>\n");
    if more {
        let _ = writeln!(
            out,
            "<p>Only the first {MAX_ENTRIES} entries the directory gave are listed.</p>"
        );
    }
    out.push_str("</body></html>\n");
    out
}

/// nginx's `autoindex_format json`: `[{"name":…,"type":…,"mtime":…,"size":…}]`,
/// `size` for files only; strings escaped as the access log's JSON lines are.
fn json(entries: &[Entry]) -> Vec<u8> {
    let string = |out: &mut Vec<u8>, s: &str| {
        out.push(b'"');
        escape_json(out, s.as_bytes());
        out.push(b'"');
    };
    let mut out = b"[".to_vec();
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\n{\"name\":");
        string(&mut out, &e.name);
        out.extend_from_slice(b",\"type\":\"");
        out.extend_from_slice(e.kind.word().as_bytes());
        out.push(b'"');
        if let Some(t) = e.modified {
            out.extend_from_slice(b",\"mtime\":");
            string(&mut out, &httpdate::fmt_http_date(t));
        }
        if let Some(n) = e.size {
            out.extend_from_slice(b",\"size\":");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"\n]\n");
    out
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_encoded() {
        assert_eq!(escape("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
        assert_eq!(uri_path::encode_segment("a b/<c>"), "a%20b%2F%3Cc%3E");
        // The JSON listing's names come back as they were, whatever they hold.
        let name = "a\"b\\c\n\u{1}<é>";
        let listed = json(&[Entry {
            name: name.into(),
            kind: Kind::File,
            size: Some(3),
            modified: None,
        }]);
        let v: serde_json::Value = serde_json::from_slice(&listed).unwrap();
        assert_eq!(v[0]["name"], name);
        assert_eq!(v[0]["type"], "file");
        assert_eq!(v[0]["size"], 3);
    }

    #[test]
    fn the_query_picks_the_sort() {
        assert!(sort_of(None) == (Key::Name, false));
        assert!(sort_of(Some(b"sort=size&order=desc")) == (Key::Size, true));
        assert!(sort_of(Some(b"order=desc&sort=mtime")) == (Key::Modified, true));
        assert!(sort_of(Some(b"sort=evil<script>")) == (Key::Name, false));
    }

    #[test]
    fn held_listing_bytes_are_counted_until_dropped() {
        let before = HELD.with(Cell::get);
        let a = Held::bytes(vec![1; 1000]);
        let part = a.slice(10..20);
        assert_eq!(HELD.with(Cell::get), before + 1000);
        drop(a);
        assert_eq!(HELD.with(Cell::get), before + 1000, "a slice keeps it");
        drop(part);
        assert_eq!(HELD.with(Cell::get), before);
    }
}

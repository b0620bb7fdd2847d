//! `--autoindex`: an HTML listing of a directory without an index file.
//!
//! Names are HTML-escaped and percent-encoded in links, so a file called
//! `<script>` lists as text. Dotfiles are left out unless allowed. The
//! directory is read through the fd that was opened beneath the root
//! (`/proc/self/fd/N`), never by path, so a swapped-in symlink cannot
//! redirect the listing.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use bytes::Bytes;

use crate::http::{Body, Response, Status};

/// Render the listing of the open directory `dir`, requested as `path`.
pub(crate) fn render(dir: &File, path: &[u8], dotfiles: bool) -> io::Result<Response> {
    let mut names: Vec<(String, bool)> =
        std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let is_dir = e.file_type().ok()?.is_dir();
                (dotfiles || !name.starts_with('.')).then_some((name, is_dir))
            })
            .collect();
    names.sort();
    let title = escape(&String::from_utf8_lossy(path));
    let mut html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1><ul>\n<li><a href=\"../\">../</a></li>\n"
    );
    for (name, is_dir) in names {
        let slash = if is_dir { "/" } else { "" };
        let _ = writeln!(
            html,
            "<li><a href=\"{}{slash}\">{}{slash}</a></li>",
            percent_encode(&name),
            escape(&name)
        );
    }
    html.push_str("</ul></body></html>\n");
    Ok(Response::new(Status::OK, Body::Bytes(Bytes::from(html)))
        .header("Content-Type", "text/html; charset=utf-8"))
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

/// RFC 3986 §2.1: everything but unreserved characters is percent-encoded.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
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
        assert_eq!(percent_encode("a b/<c>"), "a%20b%2F%3Cc%3E");
    }
}

//! What an access-log line says and how it is spelled: the formats
//! (`combined`, `json`, a `$field` template), the fields, and the escaping
//! that keeps a client from forging lines.
//!
//! Pure: [`Format::parse`] checks a format once, at config time;
//! [`Format::write`] appends one line for a [`Line`] to a buffer. The
//! escaping follows the peers: nginx's `\xHH` for `"`, `\` and every byte
//! outside printable ASCII in `combined` and templates (so a CR, LF or quote
//! in a user agent cannot start a line or end a field), JSON's string
//! escapes in `json` (a byte that is not UTF-8 becomes `\u00HH`, so the line
//! stays valid JSON).
//!
//! Past 600 lines by its tests: each format, the escaping of hostile bytes
//! and the template errors are tested here, beside the code they pin.

use std::fmt::Write as _;
use std::net::SocketAddr;

use super::clock::Stamp;

/// One request's facts, borrowed for as long as its line is written.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub peer: Option<SocketAddr>,
    pub method: &'a [u8],
    pub target: &'a [u8],
    pub protocol: Protocol,
    /// The status sent; 499 when the client left before any answer (nginx's
    /// "client closed request").
    pub status: u16,
    /// Bytes of the response after its head that reached the socket (or,
    /// over HTTP/2, the connection's send buffer).
    pub body_bytes: u64,
    /// From the request's first bytes to its response's last.
    pub duration_us: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    pub host: Option<&'a [u8]>,
    /// The name of the site that answered (`None`: 421, or refused before
    /// its head was read).
    pub site: Option<&'a [u8]>,
    /// `TLSv1.2`/`TLSv1.3` on TLS connections.
    pub tls_version: Option<&'static str>,
    pub tls_resumed: Option<bool>,
    pub worker: usize,
    /// The connection's number within its worker.
    pub connection: u64,
}

/// The protocol a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http10,
    Http11,
    Http2,
    Http3,
}

impl Protocol {
    /// As nginx's `$server_protocol` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http10 => "HTTP/1.0",
            Protocol::Http11 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2.0",
            Protocol::Http3 => "HTTP/3.0",
        }
    }
}

/// A field a template may name (`$name` or `${name}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// RFC 3339, UTC: `2026-12-01T16:48:34Z`.
    TimeIso8601,
    /// Common log format: `01/Dec/2026:16:48:34 +0000`.
    TimeLocal,
    RemoteAddr,
    RemotePort,
    RequestMethod,
    /// The request target as sent (path and query).
    RequestUri,
    ServerProtocol,
    /// `METHOD TARGET PROTOCOL`, as the request line was.
    Request,
    Status,
    BodyBytesSent,
    RequestTimeUs,
    HttpReferer,
    HttpUserAgent,
    Host,
    /// The name of the `[[site]]` that answered.
    Site,
    TlsVersion,
    TlsResumed,
    Worker,
    Connection,
}

impl Field {
    /// Every field, by its template name (nginx's where nginx has one).
    pub const ALL: [(&'static str, Field); 19] = [
        ("time_iso8601", Field::TimeIso8601),
        ("time_local", Field::TimeLocal),
        ("remote_addr", Field::RemoteAddr),
        ("remote_port", Field::RemotePort),
        ("request_method", Field::RequestMethod),
        ("request_uri", Field::RequestUri),
        ("server_protocol", Field::ServerProtocol),
        ("request", Field::Request),
        ("status", Field::Status),
        ("body_bytes_sent", Field::BodyBytesSent),
        ("request_time_us", Field::RequestTimeUs),
        ("http_referer", Field::HttpReferer),
        ("http_user_agent", Field::HttpUserAgent),
        ("host", Field::Host),
        ("site", Field::Site),
        ("tls_version", Field::TlsVersion),
        ("tls_resumed", Field::TlsResumed),
        ("worker", Field::Worker),
        ("connection", Field::Connection),
    ];

    fn named(name: &str) -> Option<Field> {
        Field::ALL.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
    }

    fn name(self) -> &'static str {
        Field::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }
}

/// A checked `--access-log-format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// nginx's `combined`: the template [`COMBINED`].
    Combined,
    /// One JSON object per line with every field.
    Json,
    /// A template of literal text and fields, as written.
    Template { written: String, pieces: Vec<Piece> },
}

/// nginx's predefined `combined` format, as a template.
pub const COMBINED: &str = "$remote_addr - - [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// [`COMBINED`]'s pieces, parsed once.
static COMBINED_PIECES: std::sync::LazyLock<Vec<Piece>> =
    std::sync::LazyLock::new(|| pieces(COMBINED).unwrap_or_default());

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Field(Field),
}

/// Why a template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("unknown field ${name}; fields are {}", field_names())]
    UnknownField { name: String },
    #[error("`$` at byte {at} names no field; write `$$` for a literal `$`")]
    Dangling { at: usize },
    #[error("`${{` at byte {at} is not closed by `}}`")]
    Unclosed { at: usize },
    #[error("a template must name at least one field, e.g. \"$remote_addr $request $status\"")]
    NoField,
    #[error("a template must be one line (no CR or LF)")]
    Newline,
}

fn field_names() -> String {
    Field::ALL
        .iter()
        .map(|(n, _)| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Format {
    /// `combined`, `json`, or a template with `$name` / `${name}` fields and
    /// `$$` for a literal `$`.
    pub fn parse(written: &str) -> Result<Format, FormatError> {
        match written {
            "combined" => return Ok(Format::Combined),
            "json" => return Ok(Format::Json),
            _ => {}
        }
        Ok(Format::Template {
            written: written.to_owned(),
            pieces: pieces(written)?,
        })
    }

    /// The format as written in the config.
    pub fn written(&self) -> &str {
        match self {
            Format::Combined => "combined",
            Format::Json => "json",
            Format::Template { written, .. } => written,
        }
    }

    /// Append `line`, stamped `time`, and its `\n` to `out`.
    pub fn write(&self, out: &mut Vec<u8>, time: &Stamp, line: &Line<'_>) {
        let line = &Stamped { time, line };
        match self {
            Format::Combined => write_pieces(out, &COMBINED_PIECES, line),
            Format::Json => {
                out.push(b'{');
                for (i, &(name, field)) in Field::ALL.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.push(b'"');
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(b"\":");
                    json_field(out, field, line);
                }
                out.push(b'}');
            }
            Format::Template { pieces, .. } => write_pieces(out, pieces, line),
        }
        out.push(b'\n');
    }
}

/// A template's text and fields (`$name`, `${name}`, `$$`).
fn pieces(written: &str) -> Result<Vec<Piece>, FormatError> {
    if written.contains(['\r', '\n']) {
        return Err(FormatError::Newline);
    }
    let mut pieces = Vec::new();
    let mut text = String::new();
    let bytes = written.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            let next = written[i..].find('$').map_or(bytes.len(), |n| i + n);
            text.push_str(&written[i..next]);
            i = next;
            continue;
        }
        let at = i;
        i += 1;
        let name = if bytes.get(i) == Some(&b'$') {
            text.push('$');
            i += 1;
            continue;
        } else if bytes.get(i) == Some(&b'{') {
            let close = written[i..].find('}').ok_or(FormatError::Unclosed { at })?;
            let name = &written[i + 1..i + close];
            i += close + 1;
            name
        } else {
            let len = bytes[i..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if len == 0 {
                return Err(FormatError::Dangling { at });
            }
            let name = &written[i..i + len];
            i += len;
            name
        };
        let field = Field::named(name).ok_or_else(|| FormatError::UnknownField {
            name: name.to_owned(),
        })?;
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Field(field));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    if !pieces.iter().any(|p| matches!(p, Piece::Field(_))) {
        return Err(FormatError::NoField);
    }
    Ok(pieces)
}

/// A line with its time.
struct Stamped<'a, 'l> {
    time: &'a Stamp,
    line: &'a Line<'l>,
}

fn write_pieces(out: &mut Vec<u8>, pieces: &[Piece], line: &Stamped<'_, '_>) {
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
            Piece::Field(f) => text_field(out, *f, line),
        }
    }
}

/// What a field holds for one line.
enum Value<'a> {
    /// The client's IP address.
    Ip(std::net::IpAddr),
    /// Client-controlled (or otherwise free) bytes: escaped.
    Bytes(&'a [u8]),
    /// Text we made (numbers, times, names): written as is.
    Plain(&'a str),
    Number(u64),
    Bool(bool),
    /// Absent: `-` in text, `null` in JSON.
    None,
}

fn value<'a>(field: Field, stamped: &Stamped<'a, 'a>) -> Value<'a> {
    let line = stamped.line;
    match field {
        Field::TimeIso8601 => Value::Plain(stamped.time.iso8601()),
        Field::TimeLocal => Value::Plain(stamped.time.common()),
        Field::RemoteAddr => line.peer.map_or(Value::None, |p| Value::Ip(p.ip())),
        Field::RemotePort => line
            .peer
            .map_or(Value::None, |p| Value::Number(p.port().into())),
        Field::RequestMethod => Value::Bytes(line.method),
        Field::RequestUri => Value::Bytes(line.target),
        Field::ServerProtocol => Value::Plain(line.protocol.name()),
        // Assembled by the writers (three values, one field).
        Field::Request => Value::None,
        Field::Status => Value::Number(line.status.into()),
        Field::BodyBytesSent => Value::Number(line.body_bytes),
        Field::RequestTimeUs => Value::Number(line.duration_us),
        Field::HttpReferer => line.referer.map_or(Value::None, Value::Bytes),
        Field::HttpUserAgent => line.user_agent.map_or(Value::None, Value::Bytes),
        Field::Host => line.host.map_or(Value::None, Value::Bytes),
        Field::Site => line.site.map_or(Value::None, Value::Bytes),
        Field::TlsVersion => line.tls_version.map_or(Value::None, Value::Plain),
        Field::TlsResumed => line.tls_resumed.map_or(Value::None, Value::Bool),
        Field::Worker => Value::Number(line.worker as u64),
        Field::Connection => Value::Number(line.connection),
    }
}

/// A field in `combined` or a template.
fn text_field(out: &mut Vec<u8>, field: Field, stamped: &Stamped<'_, '_>) {
    let line = stamped.line;
    if field == Field::Request {
        escape_text(out, line.method);
        out.push(b' ');
        escape_text(out, line.target);
        out.push(b' ');
        out.extend_from_slice(line.protocol.name().as_bytes());
        return;
    }
    match value(field, stamped) {
        Value::Ip(ip) => write_ip(out, ip),
        Value::Bytes(b) => escape_text(out, b),
        Value::Plain(s) => out.extend_from_slice(s.as_bytes()),
        Value::Number(n) => number(out, n),
        Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::None => out.push(b'-'),
    }
}

/// A field in `json`.
fn json_field(out: &mut Vec<u8>, field: Field, stamped: &Stamped<'_, '_>) {
    let line = stamped.line;
    if field == Field::Request {
        out.push(b'"');
        escape_json(out, line.method);
        out.push(b' ');
        escape_json(out, line.target);
        out.push(b' ');
        out.extend_from_slice(line.protocol.name().as_bytes());
        out.push(b'"');
        return;
    }
    match value(field, stamped) {
        Value::Ip(ip) => {
            out.push(b'"');
            write_ip(out, ip);
            out.push(b'"');
        }
        Value::Bytes(b) => {
            out.push(b'"');
            escape_json(out, b);
            out.push(b'"');
        }
        Value::Plain(s) => {
            out.push(b'"');
            escape_json(out, s.as_bytes());
            out.push(b'"');
        }
        Value::Number(n) => number(out, n),
        Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::None => out.extend_from_slice(b"null"),
    }
}

fn number(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// An IP address as `Display` spells it; IPv4 (the common case) without
/// the formatting machinery, which costs more than the rest of a line.
fn write_ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                number(out, octet.into());
            }
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(VecWriter(out), "{v6}");
        }
    }
}

/// `fmt::Write` into a byte buffer.
struct VecWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for VecWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Whether nginx's log escaping leaves `b` as it is.
fn plain(b: u8) -> bool {
    b != b'"' && b != b'\\' && (0x20..0x7f).contains(&b)
}

/// nginx's escaping of variables in a log line: `"`, `\` and every byte
/// outside printable ASCII as `\xHH`. Runs of plain bytes (all of an honest
/// field) are copied at once.
pub fn escape_text(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let run = rest.iter().position(|&b| !plain(b)).unwrap_or(rest.len());
        out.extend_from_slice(&rest[..run]);
        let Some(&b) = rest.get(run) else {
            break;
        };
        out.extend_from_slice(&[
            b'\\',
            b'x',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 15)],
        ]);
        rest = &rest[run + 1..];
    }
}

/// A JSON string's contents (RFC 8259 §7): quotes, backslashes and control
/// characters escaped, UTF-8 kept, any byte that is not UTF-8 as `\u00HH`.
pub fn escape_json(out: &mut Vec<u8>, bytes: &[u8]) {
    let plain = |b: u8| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f;
    for chunk in bytes.utf8_chunks() {
        let mut valid = chunk.valid().as_bytes();
        while let Some(run) = valid.iter().position(|&b| !plain(b)) {
            out.extend_from_slice(&valid[..run]);
            let b = valid[run];
            valid = &valid[run + 1..];
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                _ => unicode_escape(out, b),
            }
        }
        out.extend_from_slice(valid);
        for &b in chunk.invalid() {
            unicode_escape(out, b);
        }
    }
}

fn unicode_escape(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        b'0',
        b'0',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 15)],
    ]);
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> Line<'static> {
        Line {
            peer: Some("127.0.0.1:40000".parse().unwrap()),
            method: b"GET",
            target: b"/a?b=c",
            protocol: Protocol::Http11,
            status: 200,
            body_bytes: 1024,
            duration_us: 57,
            referer: None,
            user_agent: Some(b"curl/8.0"),
            host: Some(b"example.com"),
            site: Some(b"example"),
            tls_version: None,
            tls_resumed: None,
            worker: 1,
            connection: 9,
        }
    }

    fn text(f: &Format, stamp: &Stamp, l: &Line<'_>) -> String {
        let mut out = Vec::new();
        f.write(&mut out, stamp, l);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn combined_is_nginxs() {
        let s = Stamp::at(1_796_143_714);
        assert_eq!(
            text(&Format::Combined, &s, &line()),
            "127.0.0.1 - - [01/Dec/2026:16:48:34 +0000] \"GET /a?b=c HTTP/1.1\" 200 1024 \"-\" \"curl/8.0\"\n"
        );
    }

    #[test]
    fn json_has_every_field_and_nulls_for_the_absent() {
        let s = Stamp::at(1_796_143_714);
        let out = text(&Format::Json, &s, &line());
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(v["time_iso8601"], "2026-12-01T16:48:34Z");
        assert_eq!(v["remote_addr"], "127.0.0.1");
        assert_eq!(v["remote_port"], 40000);
        assert_eq!(v["request"], "GET /a?b=c HTTP/1.1");
        assert_eq!(v["status"], 200);
        assert_eq!(v["body_bytes_sent"], 1024);
        assert_eq!(v["request_time_us"], 57);
        assert_eq!(v["http_referer"], serde_json::Value::Null);
        assert_eq!(v["host"], "example.com");
        assert_eq!(v["site"], "example");
        assert_eq!(v["tls_resumed"], serde_json::Value::Null);
        assert_eq!(v["worker"], 1);
        assert_eq!(v["connection"], 9);
        assert_eq!(v.as_object().unwrap().len(), Field::ALL.len());
    }

    #[test]
    fn hostile_bytes_cannot_forge_a_line() {
        let s = Stamp::at(0);
        let mut l = line();
        l.user_agent = Some(b"x\"\n127.0.0.1 - - [fake] \"GET /admin\\ \xff\x1b");
        l.target = b"/\r\nGET";
        let out = text(&Format::Combined, &s, &l);
        assert_eq!(out.matches('\n').count(), 1, "{out}");
        assert!(out.contains("\"GET /\\x0D\\x0AGET HTTP/1.1\""), "{out}");
        assert!(
            out.ends_with("\"x\\x22\\x0A127.0.0.1 - - [fake] \\x22GET /admin\\x5C \\xFF\\x1B\"\n"),
            "{out}"
        );
        let json = text(&Format::Json, &s, &l);
        assert_eq!(json.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
        assert_eq!(
            v["http_user_agent"],
            "x\"\n127.0.0.1 - - [fake] \"GET /admin\\ \u{ff}\u{1b}"
        );
        assert_eq!(v["request_uri"], "/\r\nGET");
    }

    #[test]
    fn json_keeps_utf8_and_escapes_what_is_not() {
        let mut out = Vec::new();
        escape_json(&mut out, "é\u{7f}".as_bytes());
        escape_json(&mut out, b"\xc3");
        assert_eq!(out, b"\xc3\xa9\\u007F\\u00C3");
    }

    #[test]
    fn templates_name_fields_and_say_which_exist() {
        let f = Format::parse("$remote_addr:$remote_port ${status}x $$ $request_time_us").unwrap();
        let s = Stamp::at(0);
        assert_eq!(text(&f, &s, &line()), "127.0.0.1:40000 200x $ 57\n");
        let f = Format::parse("$tls_version $tls_resumed $worker/$connection $host").unwrap();
        let mut l = line();
        assert_eq!(text(&f, &s, &l), "- - 1/9 example.com\n");
        l.tls_version = Some("TLSv1.3");
        l.tls_resumed = Some(true);
        l.protocol = Protocol::Http2;
        assert_eq!(text(&f, &s, &l), "TLSv1.3 true 1/9 example.com\n");
        let f = Format::parse("$server_protocol $request_method $time_iso8601").unwrap();
        assert_eq!(text(&f, &s, &l), "HTTP/2.0 GET 1970-01-01T00:00:00Z\n");

        let e = Format::parse("$nope").unwrap_err().to_string();
        assert!(
            e.starts_with("unknown field $nope; fields are $time_iso8601"),
            "{e}"
        );
        assert_eq!(
            Format::parse("a $ b").unwrap_err(),
            FormatError::Dangling { at: 2 }
        );
        assert_eq!(
            Format::parse("${status").unwrap_err(),
            FormatError::Unclosed { at: 0 }
        );
        assert_eq!(Format::parse("plain").unwrap_err(), FormatError::NoField);
        assert_eq!(
            Format::parse("$status\n").unwrap_err(),
            FormatError::Newline
        );
        assert_eq!(Format::parse("combined").unwrap(), Format::Combined);
        assert_eq!(Format::parse("$status").unwrap().written(), "$status");
    }
}

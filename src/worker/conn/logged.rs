//! The access log's side of a connection: what each request's line will
//! say, kept from its head until its response has left.
//!
//! HTTP/1.1 answers pipelined requests into a queue that is written later,
//! and a line says how many body bytes were written and how long it all
//! took, so a line can only be written after its response's write. Until
//! then [`Pending`] holds each request's fields (copied from its head, which
//! the connection's read buffer does not keep) and where its body lies in
//! the connection's output (`Output::pushed`); after each write,
//! [`Pending::settle`] writes the lines of the responses that have left.
//! HTTP/2 streams each keep their own [`Captured`] record until their
//! answer ends. Both protocols' records are one type, [`Record`], and its
//! `finish` writes every line.
//!
//! Bounds: [`MAX_RECORDS`] requests and [`MAX_TEXT_BYTES`] of their fields
//! (or one request's, whatever its size: it is within `--max-head-bytes`);
//! past either the connection takes no more pipelined requests until its
//! output is written, as past the output's own budget.

use std::ops::Range;
use std::time::Instant;

use crate::access_log::{Line, Log, Protocol};
use crate::app::Connection;
use crate::http::{Head, Version};

/// Most requests waiting for their line, as the output's `MAX_QUEUED`.
pub(super) const MAX_RECORDS: usize = super::output::MAX_QUEUED;
/// Most bytes of their fields held.
pub(super) const MAX_TEXT_BYTES: usize = 16 * 1024;

/// The status of a request whose client left before any answer (nginx's).
const CLIENT_CLOSED: u16 = 499;

/// A request's fields, as ranges of a text buffer.
#[derive(Debug, Clone)]
struct Fields {
    method: Range<usize>,
    target: Range<usize>,
    host: Option<Range<usize>>,
    referer: Option<Range<usize>>,
    user_agent: Option<Range<usize>>,
    site: Option<Range<usize>>,
    protocol: Protocol,
}

/// What a request's head says, for its line.
struct Said<'a> {
    method: &'a [u8],
    target: &'a [u8],
    host: Option<&'a [u8]>,
    referer: Option<&'a [u8]>,
    user_agent: Option<&'a [u8]>,
    site: Option<&'a str>,
    protocol: Protocol,
}

impl Fields {
    fn capture(text: &mut Vec<u8>, said: Said<'_>) -> Fields {
        let mut put = |b: &[u8]| {
            let at = text.len();
            text.extend_from_slice(b);
            at..text.len()
        };
        Fields {
            method: put(said.method),
            target: put(said.target),
            host: said.host.map(&mut put),
            referer: said.referer.map(&mut put),
            user_agent: said.user_agent.map(&mut put),
            site: said.site.map(|s| put(s.as_bytes())),
            protocol: said.protocol,
        }
    }

    fn line<'a>(
        &self,
        text: &'a [u8],
        facts: &Connection,
        status: u16,
        body_bytes: u64,
        duration_us: u64,
    ) -> Line<'a> {
        let get = |r: &Range<usize>| &text[r.clone()];
        Line {
            peer: facts.peer,
            method: get(&self.method),
            target: get(&self.target),
            protocol: self.protocol,
            status,
            body_bytes,
            duration_us,
            referer: self.referer.as_ref().map(get),
            user_agent: self.user_agent.as_ref().map(get),
            host: self.host.as_ref().map(get),
            site: self.site.as_ref().map(get),
            tls_version: facts.tls.and_then(|t| t.version),
            tls_resumed: facts.tls.map(|t| t.resumed),
            worker: facts.worker,
            connection: facts.id,
        }
    }
}

fn protocol(v: Version) -> Protocol {
    match v {
        Version::Http10 => Protocol::Http10,
        Version::Http11 => Protocol::Http11,
    }
}

/// One request's record, whatever its protocol: what its head said (as
/// ranges of its owner's text), when it came, and once answered its status.
/// [`Record::finish`] is the one place a request's line is written.
#[derive(Debug)]
struct Record {
    fields: Fields,
    start: Instant,
    /// `None` until answered (499 if never).
    status: Option<u16>,
    /// HTTP/1.1: its body in the output's byte count, from the head's end
    /// to the response's; `end` is `None` while a stream is still being
    /// queued. (An HTTP/2 stream counts its own bytes.)
    body: Range<u64>,
    end: Option<u64>,
}

impl Record {
    fn new(fields: Fields, start: Instant) -> Record {
        Record {
            fields,
            start,
            status: None,
            body: 0..0,
            end: None,
        }
    }

    /// Write the request's line: `body_bytes` of its body sent, its time
    /// from its head's first bytes to `now`.
    fn finish(&self, text: &[u8], log: &Log, facts: &Connection, body_bytes: u64, now: Instant) {
        let status = self.status.unwrap_or(CLIENT_CLOSED);
        let us = now.duration_since(self.start).as_micros() as u64;
        log.write(&self.fields.line(text, facts, status, body_bytes, us));
    }
}

/// An HTTP/1.1 connection's requests waiting for their lines.
#[derive(Debug, Default)]
pub(super) struct Pending {
    records: Vec<Record>,
    text: Vec<u8>,
}

impl Pending {
    /// Whether no more pipelined requests should be taken before a write.
    pub(super) fn full(&self) -> bool {
        self.records.len() >= MAX_RECORDS || self.text.len() >= MAX_TEXT_BYTES
    }

    /// A request whose head came at `start`, answered by site `site`.
    pub(super) fn open(&mut self, head: &Head<'_>, start: Instant, site: Option<&str>) {
        let said = Said {
            method: head.method_token.as_bytes(),
            target: head.target,
            host: head.host,
            referer: head.header("referer"),
            user_agent: head.header("user-agent"),
            site,
            protocol: protocol(head.version),
        };
        let fields = Fields::capture(&mut self.text, said);
        self.push(fields, start);
    }

    fn push(&mut self, fields: Fields, start: Instant) {
        self.records.push(Record::new(fields, start));
    }

    /// Whether the next answer needs a record of its own: the last one is
    /// answered already (or there is none).
    pub(super) fn needs_open(&self) -> bool {
        self.records.last().is_none_or(|r| r.status.is_some())
    }

    /// A request refused before its head could be read (400, 408, 413...):
    /// a line with `-` for what is unknown.
    pub(super) fn open_unread(&mut self, start: Instant) {
        let said = Said {
            method: b"-",
            target: b"-",
            host: None,
            referer: None,
            user_agent: None,
            site: None,
            protocol: Protocol::Http11,
        };
        let fields = Fields::capture(&mut self.text, said);
        self.push(fields, start);
    }

    /// The last opened request was answered `status`; its head ends at
    /// `body_start` of the output's count.
    pub(super) fn answered(&mut self, status: u16, body_start: u64) {
        if let Some(r) = self.records.last_mut() {
            if r.status.is_none() {
                r.status = Some(status);
                r.body = body_start..body_start;
            }
        }
    }

    /// The last request's response is all queued, ending at `end`.
    pub(super) fn queued(&mut self, end: u64) {
        if let Some(r) = self.records.last_mut() {
            if r.end.is_none() {
                r.body.end = end;
                r.end = Some(end);
            }
        }
    }

    /// Write the lines of the responses written (`written` bytes of the
    /// output have left), or of every request when the connection ends
    /// (`ending`: unwritten bytes never will be).
    pub(super) fn settle(&mut self, log: &Log, facts: &Connection, written: u64, ending: bool) {
        if self.records.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut done = 0;
        for r in &self.records {
            let left = match r.end {
                Some(end) => end <= written,
                None => false,
            };
            if !(left || ending) {
                break;
            }
            let sent = written.clamp(r.body.start, r.body.end) - r.body.start;
            r.finish(&self.text, log, facts, sent, now);
            done += 1;
        }
        if done == self.records.len() {
            self.records.clear();
            self.text.clear();
        } else if done > 0 {
            self.records.drain(..done);
        }
    }

    /// Drop the storage of an idle connection.
    pub(super) fn release(&mut self) {
        if self.records.is_empty() {
            self.records = Vec::new();
            self.text = Vec::new();
        }
    }
}

/// An HTTP/2 or HTTP/3 stream's record and the text of its fields, kept
/// until its answer ends.
#[derive(Debug)]
pub(super) struct Captured {
    record: Record,
    text: Vec<u8>,
}

impl Captured {
    /// The fields of an HTTP/2 or HTTP/3 request (`protocol`) on a
    /// connection whose SNI chose `sni`; `sites` names the site that
    /// answers it.
    pub(super) fn mapped(
        parts: &http::request::Parts,
        start: Instant,
        sites: &crate::sites::router::Router,
        sni: Option<usize>,
        protocol: Protocol,
    ) -> Captured {
        let target = parts
            .uri
            .path_and_query()
            .map_or(parts.uri.path(), |p| p.as_str());
        let header = |n: http::header::HeaderName| parts.headers.get(n).map(|v| v.as_bytes());
        let host = parts
            .uri
            .authority()
            .map(|a| a.as_str().as_bytes())
            .or_else(|| header(http::header::HOST));
        let said = Said {
            method: parts.method.as_str().as_bytes(),
            target: target.as_bytes(),
            host,
            referer: header(http::header::REFERER),
            user_agent: header(http::header::USER_AGENT),
            site: sites.request_name(host, sni),
            protocol,
        };
        Captured::of(said, start)
    }

    fn of(said: Said<'_>, start: Instant) -> Captured {
        let mut text = Vec::new();
        let fields = Fields::capture(&mut text, said);
        Captured {
            record: Record::new(fields, start),
            text,
        }
    }

    /// [`Captured::mapped`] of a request read as the parser's head.
    pub(super) fn of_head(
        head: &crate::http::Head<'_>,
        start: Instant,
        sites: &crate::sites::router::Router,
        sni: Option<usize>,
        protocol: Protocol,
    ) -> Captured {
        let said = Said {
            method: head.method_token.as_bytes(),
            target: head.target,
            host: head.host,
            referer: head.header("referer"),
            user_agent: head.header("user-agent"),
            site: sites.request_name(head.host, sni),
            protocol,
        };
        Captured::of(said, start)
    }

    /// The stream's answer ended: `status` (0: none was sent) and
    /// `body_bytes` of its body sent. Writes its line.
    pub(super) fn finish(&mut self, log: &Log, facts: &Connection, status: u16, body_bytes: u64) {
        self.record.status = (status != 0).then_some(status);
        self.record
            .finish(&self.text, log, facts, body_bytes, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::access_log::{Format, Setup, Sink, Target};
    use crate::http::Limits;
    use crate::telemetry::WorkerStats;

    fn log(path: &std::path::Path) -> Log {
        let setup = Setup {
            sink: Sink::open(&Target::File(path.to_owned()), 1 << 20).unwrap(),
            format: Arc::new(Format::parse("$status $body_bytes_sent $request_uri").unwrap()),
            buffer_bytes: 1 << 16,
            flush: Duration::from_secs(1),
        };
        Log::new(setup, Arc::new(WorkerStats::default()))
    }

    fn facts() -> Connection {
        Connection {
            peer: None,
            worker: 0,
            id: 0,
            tls: None,
            local_port: None,
        }
    }

    fn open(p: &mut Pending, target: &str) {
        let req = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
        let (head, _) = crate::http::parse(req.as_bytes(), &Limits::default())
            .unwrap()
            .unwrap();
        p.open(&head, Instant::now(), Some("default"));
    }

    #[test]
    fn lines_wait_for_their_bytes_and_say_what_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let log = log(&path);
        let mut p = Pending::default();
        // Two pipelined responses: bodies at 100..1100 and 1200..1300.
        open(&mut p, "/one");
        p.answered(200, 100);
        p.queued(1100);
        open(&mut p, "/two");
        p.answered(404, 1200);
        p.queued(1300);
        // Only the first has left.
        p.settle(&log, &facts(), 1150, false);
        assert_eq!(p.records.len(), 1);
        // The connection ends 50 bytes into the second body.
        p.settle(&log, &facts(), 1250, true);
        assert!(p.records.is_empty() && p.text.is_empty());
        // One never answered: the client left (499).
        open(&mut p, "/three");
        p.settle(&log, &facts(), 1250, true);
        log.flush();
        let sink = log.setup_sink();
        drop(log);
        assert!(sink.close(Duration::from_secs(5)));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "200 1000 /one\n404 50 /two\n499 0 /three\n"
        );
    }

    #[test]
    fn the_fields_held_are_bounded() {
        let mut p = Pending::default();
        let long = "/".to_string() + &"x".repeat(1000);
        let mut taken = 0;
        while !p.full() {
            open(&mut p, &long);
            taken += 1;
        }
        assert!(p.text.len() < MAX_TEXT_BYTES + 1100);
        assert_eq!(taken, MAX_TEXT_BYTES.div_ceil(1004));
        let mut p = Pending::default();
        while !p.full() {
            open(&mut p, "/");
        }
        assert_eq!(p.records.len(), MAX_RECORDS);
    }
}

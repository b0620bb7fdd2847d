//! What the connections of one worker share ([`Ctx`]): the service, the
//! settings, the counters, the date and head caches, the registry of open
//! connections, the access log and the output budget.
//!
//! Owns the type; the worker builds one when its runtime starts
//! (`worker::lifecycle`) and every connection task holds it by `Rc`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::super::registry::Registry;
use super::super::Driver;
use super::ConnSettings;
use crate::http::date::DateCache;
use crate::telemetry::WorkerStats;

/// What connections of one worker share.
pub(crate) struct Ctx<H> {
    pub service: H,
    /// This worker's index (0-based).
    pub index: usize,
    pub settings: ConnSettings,
    pub stats: Arc<WorkerStats>,
    pub date: RefCell<DateCache>,
    pub registry: Rc<Registry>,
    pub draining: Cell<bool>,
    /// The driver this worker runs on.
    pub driver: Driver,
    /// Read buffers for this worker's connections.
    pub pool: Rc<super::Pool>,
    /// The head arena: response heads of all this worker's connections are
    /// formatted here and split off (see `conn::output`).
    pub heads: RefCell<bytes::BytesMut>,
    /// Test-only: a request for this target makes the handler call panic
    /// (`SERVERY_TEST_FAULT=panic-on=PATH`).
    pub panic_on: Option<Box<str>>,
    /// This worker's side of the access log, when there is one.
    pub log: Option<crate::access_log::Log>,
    /// Connections accepted so far: the next one's number (`$connection`).
    pub connections: Cell<u64>,
    /// How names find sites (the SNI's site of a TLS connection).
    pub sites: Arc<crate::sites::router::Router>,
    /// The `[[headers]]` rules set on an app's responses.
    pub header_rules: Arc<[crate::http::rules::HeaderRule]>,
    /// Response bytes all connections hold prepared and unsent
    /// (`--worker-output-bytes`).
    pub output: Rc<super::WorkerBudget>,
    /// The kernel refused the `tls` ULP as one without TLS does: this
    /// worker seals every TLS record itself (`--ktls auto`).
    pub ktls_missing: Cell<bool>,
    /// What handshakes hold beyond their pooled buffers
    /// (`--tls-handshake-buffer-bytes`).
    pub handshakes: super::transport::HandshakeBudget,
    /// The `Alt-Svc` of each port this worker serves HTTP/3 on.
    pub alt_svc: Vec<AltSvc>,
}

/// How a TLS listener's responses advertise HTTP/3 on the same port (RFC
/// 7838): `h3=":PORT"; ma=SECONDS`, as an HTTP/1.1 field line and as an
/// HTTP/2 field value, made once per worker.
pub(crate) struct AltSvc {
    port: u16,
    line: Vec<u8>,
    value: http::HeaderValue,
}

impl AltSvc {
    pub(crate) fn new(port: u16, max_age: std::time::Duration) -> AltSvc {
        let value = format!("h3=\":{port}\"; ma={}", max_age.as_secs());
        AltSvc {
            port,
            line: format!("Alt-Svc: {value}\r\n").into_bytes(),
            value: http::HeaderValue::try_from(value).expect("digits and quotes are a field value"),
        }
    }
}

impl<H> Ctx<H> {
    /// The `Alt-Svc` a connection's responses carry: on a TLS connection
    /// to a port with HTTP/3, none otherwise (HTTP/3 itself included).
    fn alt_svc_of(&self, facts: &crate::app::Connection) -> Option<&AltSvc> {
        let tls = facts.tls?;
        if tls.alpn == Some(crate::app::Alpn::H3) {
            return None;
        }
        let port = facts.local_port?;
        self.alt_svc.iter().find(|a| a.port == port)
    }

    /// As an HTTP/1.1 field line (empty for none).
    pub(crate) fn alt_svc_line(&self, facts: &crate::app::Connection) -> &[u8] {
        self.alt_svc_of(facts).map_or(&[], |a| &a.line)
    }

    /// As an HTTP/2 field value.
    pub(crate) fn alt_svc_value(
        &self,
        facts: &crate::app::Connection,
    ) -> Option<&http::HeaderValue> {
        self.alt_svc_of(facts).map(|a| &a.value)
    }
}

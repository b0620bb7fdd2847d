//! A TLS session without I/O: rustls's unbuffered server connection and
//! the buffers it leaves to its caller, each with a bound.
//!
//! Owns: the received ciphertext not yet processed ([`Session::rx`]: a
//! partial record, or during the handshake partial handshake messages),
//! the plaintext decrypted and not yet taken (the rest of a record that
//! did not fit the reader's buffer), and the ciphertext to send (handshake
//! flights, tickets, alerts, close_notify, and what [`Session::encrypt`]
//! made). Does not own the socket: the completion-style stream
//! (`transport::tls`) and HTTP/2's poll-style adapter (`h2::tls`) move bytes
//! between these buffers and the socket, so both run the same TLS.
//!
//! Why unbuffered: rustls's buffered connection keeps a reassembly buffer
//! and copies every byte through its own queues, and an adapter over it
//! (monoio-rustls) added two 16 KiB buffers for a connection's lifetime:
//! 42.5 KB an idle connection (issue 26). Here every buffer is empty when
//! nothing is in flight, and [`Session::release`] hands them back, so an
//! idle connection holds rustls's own state and nothing else.
//!
//! Longer than most files (~780 lines): one type over two engines (rustls
//! through the handshake and for TLS 1.2, `records` after a TLS 1.3
//! handshake), and its three entry points (`read`, `encrypt`,
//! `close_notify`) each walk rustls's unbuffered states, which read best
//! side by side; the tests are in `session/tests.rs`.
//!
//! Bounds, whatever the peer sends or fails to read:
//! - received ciphertext: [`HANDSHAKE_RX_MAX`] while handshaking (rustls
//!   joins a handshake message, at most 64 KiB, across records in this
//!   buffer), [`RECORD_RX_MAX`] after (one record on the wire at most; every
//!   complete record is processed before more is read);
//! - pending plaintext: what the records of one read held, at most
//!   [`RECORD_RX_MAX`], and nothing is read while any is left;
//! - pending ciphertext: the caller encrypts at most [`ENCRYPT_MAX`] a call
//!   and sends it before encrypting more.

use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};

use super::records::{self, Due, Opened, Records, Refused};
use crate::sys::ktls::CryptoInfo;

/// The most one TLS record takes on the wire: a 5-byte header and a
/// payload of at most 2^14 + 2048 bytes (RFC 8446 §5.2; rustls refuses
/// more).
pub(crate) const RECORD_RX_MAX: usize = 5 + 16_384 + 2_048;
/// Received ciphertext while handshaking: the largest handshake message
/// (2^16 − 1 bytes, rustls's bound) with its record headers, and a record
/// after it.
pub(crate) const HANDSHAKE_RX_MAX: usize = 64 * 1024 + RECORD_RX_MAX;
/// The most plaintext encrypted in one call: four full records, written
/// in one system call.
pub(crate) const ENCRYPT_MAX: usize = 64 * 1024;
/// What one record adds to its plaintext, at most: header, explicit nonce
/// (TLS 1.2 GCM), content type (TLS 1.3) and tag, with room to spare.
const RECORD_OVERHEAD: usize = 64;
/// The first read of a connection with nothing buffered: one pooled-size
/// buffer, grown up to the bound only for a longer record.
const RX_FIRST: usize = super::super::pool::READ_BUF_BYTES;

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The first bytes were not a TLS record (plain HTTP on a TLS port).
    #[error("not TLS (plain HTTP?)")]
    NotTls,
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A record or handshake message past its bound (the peer's fault).
    #[error("TLS: more than {0} bytes buffered for one record")]
    TooLarge(usize),
    #[error("TLS: {0}")]
    Encode(String),
    #[error("I/O: {0}")]
    Io(std::io::Error),
    /// The worker's connections hold `--tls-handshake-buffer-bytes` of
    /// handshake messages beyond their pooled buffers already.
    #[error("TLS: the worker's handshake buffers are at their budget ({0} bytes)")]
    Budget(usize),
    /// The session failed earlier (and said so with an alert).
    #[error("TLS: the session failed")]
    Failed,
    /// Our record layer refused a record.
    #[error("{0}")]
    Record(Refused),
}

/// What [`Session::read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Got {
    /// This many plaintext bytes were put in the reader's buffer.
    Bytes(usize),
    /// Nothing yet: read more ciphertext into [`Session::rx`] (after
    /// sending [`Session::out`], which a handshake may be waiting on).
    NeedInput,
    /// The peer sent close_notify; every byte before it has been read.
    Closed,
}

/// Who protects the records: rustls, through the handshake and for TLS 1.2;
/// our own record layer (`records`) for TLS 1.3 once the handshake is done.
enum Engine {
    Rustls(Box<UnbufferedServerConnection>),
    Own(Box<Own>),
    /// Between the two, or after a hand-over rustls refused.
    Gone,
}

/// A TLS 1.3 session after its handshake, and what the handshake settled.
struct Own {
    records: Records,
    alpn: Option<Box<[u8]>>,
    resumed: bool,
    /// close_notify has been sealed.
    closed: bool,
}

/// One TLS server connection and its buffers.
pub(crate) struct Session {
    engine: Engine,
    /// Received ciphertext not yet processed (only a partial record after
    /// [`Session::read`] returns).
    rx: Vec<u8>,
    /// Decrypted bytes the reader has not taken: `plain[plain_at..]`.
    plain: Vec<u8>,
    plain_at: usize,
    /// Ciphertext to send: `out[out_at..out_end]`. Kept initialised up to
    /// its length, so encrypting needs no zeroing once it has grown.
    out: Vec<u8>,
    out_at: usize,
    out_end: usize,
    /// The peer sent close_notify.
    peer_closed: bool,
    /// A record was processed: what is not TLS is now a TLS error, not
    /// plain HTTP.
    seen_record: bool,
    /// The ClientHello's server name, once it has been read (`hello`).
    sni: Option<Box<str>>,
    hello_read: bool,
    /// rustls reported an error: the session is over, and rustls must not
    /// be asked again (it would queue, and assert on, a second fatal alert).
    failed: bool,
}

impl Session {
    pub(crate) fn new(config: std::sync::Arc<rustls::ServerConfig>) -> Result<Session, Error> {
        Ok(Session {
            engine: Engine::Rustls(Box::new(UnbufferedServerConnection::new(config)?)),
            rx: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
            out: Vec::new(),
            out_at: 0,
            out_end: 0,
            peer_closed: false,
            seen_record: false,
            sni: None,
            hello_read: false,
            failed: false,
        })
    }

    /// The protocol ALPN chose, once the handshake has.
    pub(crate) fn alpn(&self) -> Option<&[u8]> {
        match &self.engine {
            Engine::Rustls(c) => c.alpn_protocol(),
            Engine::Own(o) => o.alpn.as_deref(),
            Engine::Gone => None,
        }
    }

    /// The TLS version, once negotiated.
    pub(crate) fn version(&self) -> Option<rustls::ProtocolVersion> {
        match &self.engine {
            Engine::Rustls(c) => c.protocol_version(),
            Engine::Own(_) => Some(rustls::ProtocolVersion::TLSv1_3),
            Engine::Gone => None,
        }
    }

    /// The handshake resumed an earlier session.
    pub(crate) fn resumed(&self) -> bool {
        match &self.engine {
            Engine::Rustls(c) => c.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            Engine::Own(o) => o.resumed,
            Engine::Gone => false,
        }
    }

    /// Records are protected by our own record layer (TLS 1.3 after the
    /// handshake), not rustls's.
    pub(crate) fn own_records(&self) -> bool {
        matches!(self.engine, Engine::Own(_))
    }

    /// Our send keys in the kernel's form (kTLS), when they can be handed
    /// over now: a TLS 1.3 session on our own records, nothing queued to
    /// send, nothing failed or closed.
    pub(crate) fn kernel_tx(&self) -> Option<CryptoInfo> {
        match &self.engine {
            Engine::Own(own) if !self.failed && !own.closed && self.out().is_empty() => {
                own.records.kernel_tx()
            }
            _ => None,
        }
    }

    /// The kernel took our send keys: it seals from here, and what we send
    /// goes to the socket as it is.
    pub(crate) fn kernel_sends(&mut self) {
        if let Engine::Own(own) = &mut self.engine {
            own.records.kernel_sends();
        }
    }

    /// The kernel seals what we send (kTLS).
    pub(crate) fn kernel_seals(&self) -> bool {
        matches!(&self.engine, Engine::Own(own) if own.records.kernel_seals())
    }

    /// The kernel may have sealed `records` more records of ours.
    pub(crate) fn kernel_sent(&mut self, records: u64) {
        if let Engine::Own(own) = &mut self.engine {
            own.records.kernel_sent(records);
        }
    }

    /// The records the kernel must be given by control message (kTLS),
    /// taken: send them after [`Session::out`], in the order of the fields.
    pub(crate) fn take_due(&mut self) -> Due {
        match &mut self.engine {
            Engine::Own(own) => own.records.take_due(),
            _ => Due::default(),
        }
    }

    /// Our next send keys in the kernel's form, once our KeyUpdate is sent.
    pub(crate) fn next_kernel_tx(&mut self) -> Result<CryptoInfo, Error> {
        let Engine::Own(own) = &mut self.engine else {
            return Err(Error::Failed);
        };
        match own.records.next_kernel_tx() {
            Ok(info) => Ok(info),
            Err(refused) => {
                self.failed = true;
                Err(Error::Record(refused))
            }
        }
    }

    /// The session is over without another word: nothing more is sealed or
    /// sent (our keys and the peer's no longer agree).
    pub(crate) fn fail(&mut self) {
        self.failed = true;
    }

    /// The server name the client asked for (SNI), if any.
    pub(crate) fn sni(&self) -> Option<&str> {
        self.sni.as_deref()
    }

    /// The handshake is still running.
    pub(crate) fn is_handshaking(&self) -> bool {
        match &self.engine {
            Engine::Rustls(c) => c.is_handshaking(),
            Engine::Own(_) | Engine::Gone => false,
        }
    }

    /// The received-ciphertext buffer, to read more into; `Err` when it is
    /// full at its bound (a record or handshake message too large). Its
    /// spare capacity is at least what the record at its front still
    /// needs, when that is known.
    pub(crate) fn rx(&mut self) -> Result<&mut Vec<u8>, Error> {
        let bound = if self.is_handshaking() {
            HANDSHAKE_RX_MAX
        } else {
            RECORD_RX_MAX
        };
        let want = match self.rx.get(..5) {
            // The record at the front, whole.
            Some(h) => 5 + u16::from_be_bytes([h[3], h[4]]) as usize,
            None => RX_FIRST,
        };
        let need = want.max(self.rx.len() + 1);
        if need > bound {
            return Err(Error::TooLarge(bound));
        }
        if self.rx.capacity() < need {
            let grow = if self.rx.capacity() == 0 {
                need.max(RX_FIRST)
            } else {
                need.max(self.rx.capacity() * 2).min(bound)
            };
            self.rx.reserve_exact(grow - self.rx.len());
        }
        Ok(&mut self.rx)
    }

    /// [`Session::rx`], with a buffer from `lend` (the worker's pool) when
    /// the session holds none.
    pub(crate) fn rx_or(&mut self, lend: impl FnOnce() -> Vec<u8>) -> Result<&mut Vec<u8>, Error> {
        if !self.has_rx_buffer() {
            self.lend_rx(lend());
        }
        self.rx()
    }

    /// The received-ciphertext buffer's size (what it holds in memory).
    pub(crate) fn rx_capacity(&self) -> usize {
        self.rx.capacity()
    }

    /// Received ciphertext not yet processed, in bytes.
    pub(crate) fn rx_len(&self) -> usize {
        self.rx.len()
    }

    /// The session holds a buffer for received ciphertext.
    fn has_rx_buffer(&self) -> bool {
        self.rx.capacity() > 0
    }

    /// Put a buffer to read ciphertext into (a pooled one); only when it
    /// holds none ([`Session::has_rx_buffer`]).
    fn lend_rx(&mut self, mut buf: Vec<u8>) {
        debug_assert!(!self.has_rx_buffer());
        buf.clear();
        self.rx = buf;
    }

    /// Whether nothing received waits here: no partial record and no
    /// plaintext. Then socket readiness tells the whole truth, and the
    /// connection may park.
    pub(crate) fn drained(&self) -> bool {
        self.rx.is_empty() && self.plain_at == self.plain.len()
    }

    /// Give back every buffer that holds nothing (the received-ciphertext
    /// one to `give`, when it is pooled-size). An idle connection then
    /// holds rustls's state only.
    pub(crate) fn release(&mut self, give: impl FnOnce(Vec<u8>)) {
        if let Engine::Own(own) = &mut self.engine {
            own.records.release();
        }
        if self.rx.is_empty() && self.rx.capacity() > 0 {
            give(std::mem::take(&mut self.rx));
        }
        if self.plain_at == self.plain.len() {
            self.plain = Vec::new();
            self.plain_at = 0;
        }
        if self.out_at == self.out_end {
            self.out = Vec::new();
            self.out_at = 0;
            self.out_end = 0;
        }
    }

    /// Take the received-ciphertext buffer when it is empty (to return it to
    /// the pool between reads of a busy connection).
    pub(crate) fn take_empty_rx(&mut self) -> Option<Vec<u8>> {
        (self.rx.is_empty() && self.rx.capacity() > 0).then(|| std::mem::take(&mut self.rx))
    }

    /// Move the received-ciphertext buffer out for an owned-buffer read
    /// (after [`Session::rx`] made room in it); put it back with
    /// [`Session::put_rx`].
    pub(crate) fn take_rx(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.rx)
    }

    /// The buffer [`Session::take_rx`] lent, with what the read added.
    pub(crate) fn put_rx(&mut self, rx: Vec<u8>) {
        debug_assert!(self.rx.capacity() == 0, "rx taken twice");
        self.rx = rx;
    }

    /// Drop the ciphertext buffer once all of it is sent, unless it is at
    /// most `keep` bytes (a busy connection's next batch reuses it).
    pub(crate) fn release_out(&mut self, keep: usize) {
        if self.out_at == self.out_end && self.out.capacity() > keep {
            self.out = Vec::new();
            self.out_at = 0;
            self.out_end = 0;
        }
    }

    /// Ciphertext waiting to be sent.
    pub(crate) fn out(&self) -> &[u8] {
        &self.out[self.out_at..self.out_end]
    }

    /// `n` bytes of [`Session::out`] have been sent.
    pub(crate) fn sent(&mut self, n: usize) {
        self.out_at = (self.out_at + n).min(self.out_end);
        if self.out_at == self.out_end {
            self.out_at = 0;
            self.out_end = 0;
        }
    }

    /// Move the unsent ciphertext out, to write it with an owned-buffer
    /// write: the buffer and the range to send. Give it back with
    /// [`Session::put_out`].
    pub(crate) fn take_out(&mut self) -> (Vec<u8>, usize, usize) {
        let taken = (std::mem::take(&mut self.out), self.out_at, self.out_end);
        self.out_at = 0;
        self.out_end = 0;
        taken
    }

    /// The buffer [`Session::take_out`] lent, with its first `at` bytes
    /// sent and `end` made.
    pub(crate) fn put_out(&mut self, buf: Vec<u8>, at: usize, end: usize) {
        debug_assert_eq!(self.out_end, 0, "out taken twice");
        self.out = buf;
        self.out_at = at;
        self.out_end = end;
        self.sent(0);
    }

    /// Decrypt what [`Session::rx`] holds and hand the plaintext to `put`,
    /// which copies what fits into the reader's buffer and returns how
    /// much; the rest waits here. Handshake messages, tickets and alerts
    /// are queued in [`Session::out`]. On `Err` an alert for the peer may be
    /// queued too: send it, then close.
    pub(crate) fn read(&mut self, mut put: impl FnMut(&[u8]) -> usize) -> Result<Got, Error> {
        if self.failed {
            return Err(Error::Failed);
        }
        let mut given = 0;
        if self.plain_at < self.plain.len() {
            let n = put(&self.plain[self.plain_at..]);
            self.plain_at += n;
            given += n;
            if self.plain_at < self.plain.len() {
                return Ok(Got::Bytes(given));
            }
            self.plain.clear();
            self.plain_at = 0;
        }
        if self.own_records() {
            return self.read_own(put, given);
        }
        if !self.hello_read {
            // The name is read before rustls works on the bytes in place;
            // rustls can do nothing before the whole ClientHello anyway.
            match super::hello::server_name(&self.rx) {
                super::hello::Hello::Incomplete => return Ok(Got::NeedInput),
                super::hello::Hello::Done(name) => {
                    self.sni = name;
                    self.hello_read = true;
                }
            }
        }
        let mut traffic = false;
        loop {
            let Engine::Rustls(conn) = &mut self.engine else {
                return Err(Error::Failed);
            };
            let UnbufferedStatus { mut discard, state } = conn.process_tls_records(&mut self.rx);
            let next = match state {
                Err(e) => {
                    let plaintext = !self.seen_record
                        && matches!(
                            e,
                            rustls::Error::InvalidMessage(
                                rustls::InvalidMessage::InvalidContentType
                            )
                        );
                    self.rx.drain(..discard.min(self.rx.len()));
                    if plaintext {
                        self.failed = true;
                        return Err(Error::NotTls);
                    }
                    self.queue_alert();
                    return Err(e.into());
                }
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    while let Some(record) = traffic.next_record() {
                        let record = record?;
                        discard += record.discard;
                        let n = put(record.payload);
                        given += n;
                        self.plain.extend_from_slice(&record.payload[n..]);
                    }
                    None
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    encode_into(&mut encode, &mut self.out, &mut self.out_end)?;
                    None
                }
                // Sending is the caller's: `out` goes before anything else.
                Ok(ConnectionState::TransmitTlsData(transmit)) => {
                    transmit.done();
                    None
                }
                Ok(ConnectionState::BlockedHandshake) => Some(Got::NeedInput),
                Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => {
                    self.peer_closed = true;
                    Some(Got::Closed)
                }
                Ok(ConnectionState::WriteTraffic(_)) => {
                    traffic = true;
                    Some(if self.peer_closed {
                        Got::Closed
                    } else {
                        Got::NeedInput
                    })
                }
                // Early data is not accepted (the config offers none).
                Ok(ConnectionState::ReadEarlyData(_)) | Ok(_) => {
                    return Err(Error::Tls(rustls::Error::General(
                        "unexpected TLS state".into(),
                    )))
                }
            };
            if discard > 0 {
                self.seen_record = true;
                self.rx.drain(..discard);
            }
            if let Some(next) = next {
                if traffic && !self.peer_closed {
                    self.hand_over()?;
                }
                if given > 0 || self.plain_at < self.plain.len() {
                    return Ok(Got::Bytes(given));
                }
                return Ok(next);
            }
        }
    }

    /// At the end of a TLS 1.3 handshake (nothing left to send or read
    /// through rustls), move to our own record layer: rustls keeps only its
    /// key schedule (`rustls::kernel`), the traffic keys come here.
    fn hand_over(&mut self) -> Result<(), Error> {
        const OURS: [rustls::CipherSuite; 3] = [
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
            rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        ];
        let Engine::Rustls(conn) = &self.engine else {
            return Ok(());
        };
        let ours = conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3)
            && conn
                .negotiated_cipher_suite()
                .is_some_and(|s| OURS.contains(&s.suite()));
        if !ours {
            return Ok(());
        }
        let alpn = conn.alpn_protocol().map(Into::into);
        let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let Engine::Rustls(conn) = std::mem::replace(&mut self.engine, Engine::Gone) else {
            return Ok(());
        };
        match conn.dangerous_into_kernel_connection() {
            Ok((secrets, kernel))
                if records::supported(&secrets.tx.1) && records::supported(&secrets.rx.1) =>
            {
                self.engine = Engine::Own(Box::new(Own {
                    records: Records::new(secrets, kernel),
                    alpn,
                    resumed,
                    closed: false,
                }));
                Ok(())
            }
            Ok(_) => {
                self.failed = true;
                Err(Error::Failed)
            }
            Err(e) => {
                self.failed = true;
                Err(e.into())
            }
        }
    }

    /// [`Session::read`] on our own record layer: every whole record in
    /// [`Session::rx`] is opened in place, its content handed to `put` (the
    /// rest kept), and taken out of the buffer; `given` bytes were already
    /// put.
    fn read_own(
        &mut self,
        mut put: impl FnMut(&[u8]) -> usize,
        mut given: usize,
    ) -> Result<Got, Error> {
        let Engine::Own(own) = &mut self.engine else {
            return Err(Error::Failed);
        };
        while !self.peer_closed {
            let Some(h) = self.rx.get(..5) else {
                break;
            };
            let len = 5 + u16::from_be_bytes([h[3], h[4]]) as usize;
            if len > 5 + records::MAX_CIPHERTEXT {
                own.records.alert(
                    records::alert::RECORD_OVERFLOW,
                    &mut self.out,
                    &mut self.out_end,
                );
                self.failed = true;
                return Err(Error::TooLarge(RECORD_RX_MAX));
            }
            if self.rx.len() < len {
                break;
            }
            match own
                .records
                .open(&mut self.rx[..len], &mut self.out, &mut self.out_end)
            {
                Ok(Opened::Data(content)) => {
                    let n = put(&self.rx[content.clone()]);
                    given += n;
                    self.plain
                        .extend_from_slice(&self.rx[content.start + n..content.end]);
                }
                Ok(Opened::Closed) => self.peer_closed = true,
                Ok(Opened::Nothing) => {}
                Err(refused) => {
                    if let Refused::Alert(_, desc) = refused {
                        own.records.alert(desc, &mut self.out, &mut self.out_end);
                    }
                    self.failed = true;
                    return Err(Error::Record(refused));
                }
            }
            self.seen_record = true;
            self.rx.drain(..len);
        }
        if given > 0 || self.plain_at < self.plain.len() {
            Ok(Got::Bytes(given))
        } else if self.peer_closed {
            Ok(Got::Closed)
        } else {
            Ok(Got::NeedInput)
        }
    }

    /// Encrypt `data` (at most [`ENCRYPT_MAX`] bytes of it) into
    /// [`Session::out`], after what is queued there; returns how many bytes
    /// were taken. Plaintext that arrives meanwhile waits for the next
    /// [`Session::read`].
    pub(crate) fn encrypt(&mut self, data: &[u8]) -> Result<usize, Error> {
        if self.failed {
            return Err(Error::Failed);
        }
        let data = &data[..data.len().min(ENCRYPT_MAX)];
        if self.kernel_seals() {
            // The kernel seals it on its way out.
            grow_out(&mut self.out, self.out_end + data.len());
            self.out[self.out_end..self.out_end + data.len()].copy_from_slice(data);
            self.out_end += data.len();
            return Ok(data.len());
        }
        if let Engine::Own(own) = &mut self.engine {
            let records = data.len().div_ceil(records::MAX_CONTENT);
            grow_out(
                &mut self.out,
                self.out_end + data.len() + records * RECORD_OVERHEAD,
            );
            for chunk in data.chunks(records::MAX_CONTENT) {
                let sealed = own.records.seal(
                    records::APPLICATION_DATA,
                    chunk,
                    &mut self.out,
                    &mut self.out_end,
                );
                if let Err(refused) = sealed {
                    own.records.alert(
                        records::alert::INTERNAL_ERROR,
                        &mut self.out,
                        &mut self.out_end,
                    );
                    self.failed = true;
                    return Err(Error::Record(refused));
                }
            }
            return Ok(data.len());
        }
        let wrote = self.rustls_traffic(|traffic, out, end| {
            let mut room = data.len() + (data.len() / 16_384 + 1) * RECORD_OVERHEAD;
            loop {
                grow_out(out, *end + room);
                match traffic.encrypt(data, &mut out[*end..]) {
                    Ok(n) => {
                        *end += n;
                        return Ok(());
                    }
                    Err(EncryptError::InsufficientSize(s)) => room = s.required_size,
                    Err(e) => return Err(Error::Encode(e.to_string())),
                }
            }
        })?;
        if !wrote {
            return Err(Error::Tls(rustls::Error::General(
                "cannot send in this TLS state".into(),
            )));
        }
        Ok(data.len())
    }

    /// Queue close_notify (RFC 8446 §6.1) after what is queued.
    pub(crate) fn close_notify(&mut self) -> Result<(), Error> {
        if self.failed {
            // The alert said it already.
            return Ok(());
        }
        if let Engine::Own(own) = &mut self.engine {
            if !own.closed {
                own.closed = true;
                own.records.alert(
                    records::alert::CLOSE_NOTIFY,
                    &mut self.out,
                    &mut self.out_end,
                );
            }
            return Ok(());
        }
        let said = self.rustls_traffic(|traffic, out, end| {
            grow_out(out, *end + RECORD_OVERHEAD);
            let n = traffic
                .queue_close_notify(&mut out[*end..])
                .map_err(|e| Error::Encode(e.to_string()))?;
            *end += n;
            Ok(())
        });
        match said {
            // Closed both ways already, mid-handshake, or failed: there is
            // nothing to say in-protocol (the alert for a failure is queued).
            Ok(_) | Err(Error::Tls(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Walk rustls (a handshake, TLS 1.2) to the state where it takes
    /// traffic, queuing what it has for the peer and keeping plaintext that
    /// arrives meanwhile, then `write` into [`Session::out`]. `Ok(false)`
    /// when rustls is in no state to send (closed, or not rustls's
    /// session); on its error the alert it has is queued.
    fn rustls_traffic(
        &mut self,
        write: impl FnOnce(
            &mut rustls::unbuffered::WriteTraffic<'_, rustls::server::ServerConnectionData>,
            &mut Vec<u8>,
            &mut usize,
        ) -> Result<(), Error>,
    ) -> Result<bool, Error> {
        let mut write = Some(write);
        loop {
            let Engine::Rustls(conn) = &mut self.engine else {
                return Ok(false);
            };
            let UnbufferedStatus { discard, state } = conn.process_tls_records(&mut self.rx);
            let done = match state {
                Err(e) => {
                    self.queue_alert();
                    return Err(e.into());
                }
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    let Some(write) = write.take() else {
                        return Ok(true);
                    };
                    write(&mut traffic, &mut self.out, &mut self.out_end)?;
                    true
                }
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    let mut d = discard;
                    while let Some(record) = traffic.next_record() {
                        let record = record?;
                        d += record.discard;
                        self.plain.extend_from_slice(record.payload);
                    }
                    self.rx.drain(..d);
                    continue;
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    encode_into(&mut encode, &mut self.out, &mut self.out_end)?;
                    false
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => {
                    transmit.done();
                    false
                }
                Ok(ConnectionState::PeerClosed) => {
                    self.peer_closed = true;
                    false
                }
                Ok(_) => return Ok(false),
            };
            if discard > 0 {
                self.rx.drain(..discard);
            }
            if done {
                return Ok(true);
            }
        }
    }

    /// After an error: the alert rustls queued for the peer, if any, into
    /// [`Session::out`].
    fn queue_alert(&mut self) {
        self.failed = true;
        // A few rounds at most: the alert, then rustls has nothing more.
        for _ in 0..4 {
            let Engine::Rustls(conn) = &mut self.engine else {
                return;
            };
            let UnbufferedStatus { state, .. } = conn.process_tls_records(&mut []);
            match state {
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    // Best effort: the session has failed already.
                    let _ = encode_into(&mut encode, &mut self.out, &mut self.out_end);
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                _ => return,
            }
        }
    }
}

/// Encode what rustls has for the peer (a handshake flight, a ticket, an
/// alert) at `out[*end..]`, growing `out` to the size rustls asks for.
fn encode_into(
    encode: &mut rustls::unbuffered::EncodeTlsData<'_, rustls::server::ServerConnectionData>,
    out: &mut Vec<u8>,
    end: &mut usize,
) -> Result<(), Error> {
    let mut room = RECORD_RX_MAX;
    loop {
        grow_out(out, *end + room);
        match encode.encode(&mut out[*end..]) {
            Ok(n) => {
                *end += n;
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) => room = s.required_size,
            Err(e) => return Err(Error::Encode(e.to_string())),
        }
    }
}

/// Make `out` at least `len` bytes long (initialised, so rustls can write
/// into it); it keeps that length for the next use.
fn grow_out(out: &mut Vec<u8>, len: usize) {
    if out.len() < len {
        out.resize(len, 0);
    }
}

#[cfg(test)]
mod tests;

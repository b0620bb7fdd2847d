//! TLS 1.3 records of our own after the handshake: rustls's kernel
//! connection keeps the key schedule (key updates), and the traffic keys
//! protect records here, with `ring`'s AEADs, in place in the connection's
//! buffers.
//!
//! Why: rustls's connection after a TLS 1.3 handshake holds ~3 KB for as
//! long as the connection lives (its state, the record layer's expanded
//! keys, its queues), more than an idle plain connection costs in all. The
//! kernel connection (`rustls::kernel`, made for kTLS) keeps only what key
//! updates need; here the raw traffic keys (zeroised on drop by rustls's
//! `AeadKey`) are kept, and the expanded `ring` key is built when a record
//! is sealed or opened and dropped when the connection goes idle
//! ([`Records::release`]). A record is decrypted where it was read and
//! encrypted where it is sent from: no copy through rustls's queues.
//!
//! What this does, per RFC 8446 §5 (record protection: the nonce is the
//! IV xor the record's sequence number, the additional data the record
//! header, the inner plaintext the content, its type and zero padding):
//! application data both ways; alerts (close_notify ends the stream, any
//! other alert from the peer ends the connection); KeyUpdate from the peer
//! (new receive keys, and when asked, ours sent and our send keys updated);
//! a KeyUpdate of our own before the suite's confidentiality limit
//! (AES-GCM: 2^24.5 records). Anything else after the handshake (a
//! handshake message other than KeyUpdate, change_cipher_spec, a record
//! that does not open) is a fatal alert. TLS 1.2 connections stay on
//! rustls's own record layer.
//!
//! With kernel TLS (`--ktls auto` where the kernel has it) the kernel seals
//! what we send: [`Records::kernel_tx`] gives it our send keys, and from
//! then on what must go as a record of another type (our KeyUpdate, an
//! alert) is left [`Due`] for the stream to send by control message;
//! receiving stays here.

use std::ops::Range;

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use rustls::{ConnectionTrafficSecrets, SupportedCipherSuite};

use crate::sys::ktls::{Cipher, CryptoInfo};

/// A TLS 1.3 record's payload may be at most 2^14 + 256 bytes (RFC 8446
/// §5.2).
pub(crate) const MAX_CIPHERTEXT: usize = 16_384 + 256;
/// The most content one record carries.
pub(crate) const MAX_CONTENT: usize = 16_384;
/// The AEAD tag.
const TAG: usize = 16;

const CHANGE_CIPHER_SPEC: u8 = 20;
pub(crate) const ALERT: u8 = 21;
pub(crate) const HANDSHAKE: u8 = 22;
pub(crate) const APPLICATION_DATA: u8 = 23;
const KEY_UPDATE: u8 = 24;
/// Our KeyUpdate, not asking for the peer's (RFC 8446 §4.6.3).
pub(crate) const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [KEY_UPDATE, 0, 0, 1, 0];

/// Alert descriptions we send (RFC 8446 §6).
pub(crate) mod alert {
    pub(crate) const CLOSE_NOTIFY: u8 = 0;
    pub(crate) const UNEXPECTED_MESSAGE: u8 = 10;
    pub(crate) const BAD_RECORD_MAC: u8 = 20;
    pub(crate) const RECORD_OVERFLOW: u8 = 22;
    pub(crate) const DECODE_ERROR: u8 = 50;
    pub(crate) const INTERNAL_ERROR: u8 = 80;

    /// An alert's level: warning (1) for close_notify, fatal (2) for the
    /// rest (RFC 8446 §6).
    pub(crate) fn level(desc: u8) -> u8 {
        if desc == CLOSE_NOTIFY {
            1
        } else {
            2
        }
    }
}

/// Why a record was refused: the alert to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("TLS record: {0}")]
    Alert(&'static str, u8),
    /// The peer sent a fatal alert (nothing is sent back).
    #[error("TLS: the peer sent alert {0}")]
    PeerAlert(u8),
}

/// One direction's traffic keys.
struct Keys {
    secrets: ConnectionTrafficSecrets,
    seq: u64,
    /// The expanded key, while the connection is busy (boxed: 544 bytes
    /// that an idle connection should not keep room for).
    key: Option<Box<LessSafeKey>>,
}

impl Keys {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> Keys {
        Keys {
            secrets,
            seq,
            key: None,
        }
    }

    /// The expanded key, built on first use.
    fn key(&mut self) -> &LessSafeKey {
        let secrets = &self.secrets;
        self.key.get_or_insert_with(|| {
            let (alg, key) = algorithm(secrets);
            Box::new(LessSafeKey::new(
                UnboundKey::new(alg, key).expect("a key of the suite's length"),
            ))
        })
    }

    /// The next record's nonce (RFC 8446 §5.3), and the sequence number
    /// moved on.
    fn next_nonce(&mut self) -> Nonce {
        let iv = match &self.secrets {
            ConnectionTrafficSecrets::Aes128Gcm { iv, .. }
            | ConnectionTrafficSecrets::Aes256Gcm { iv, .. }
            | ConnectionTrafficSecrets::Chacha20Poly1305 { iv, .. } => iv.as_ref(),
            _ => &[0; 12][..],
        };
        let mut nonce = [0u8; 12];
        nonce.copy_from_slice(iv);
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        Nonce::assume_unique_for_key(nonce)
    }
}

/// The `ring` algorithm and key bytes of a TLS 1.3 suite's secrets.
fn algorithm(secrets: &ConnectionTrafficSecrets) -> (&'static aead::Algorithm, &[u8]) {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, .. } => (&aead::AES_128_GCM, key.as_ref()),
        ConnectionTrafficSecrets::Aes256Gcm { key, .. } => (&aead::AES_256_GCM, key.as_ref()),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, .. } => {
            (&aead::CHACHA20_POLY1305, key.as_ref())
        }
        // `supported` admits only the three above.
        _ => unreachable!("an unsupported suite's secrets"),
    }
}

/// The kernel's form of one direction's keys (kTLS), with the sequence
/// number of its next record; `None` for a suite the kernel is not given.
pub(crate) fn crypto_info(secrets: &ConnectionTrafficSecrets, seq: u64) -> Option<CryptoInfo> {
    let (cipher, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
            (Cipher::Aes128Gcm, key.as_ref(), iv.as_ref())
        }
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            (Cipher::Aes256Gcm, key.as_ref(), iv.as_ref())
        }
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (Cipher::Chacha20Poly1305, key.as_ref(), iv.as_ref())
        }
        _ => return None,
    };
    CryptoInfo::tls13(cipher, key, iv, seq).ok()
}

/// Whether records of these secrets are ours to protect (TLS 1.3's three
/// AEADs); anything else stays with rustls.
pub(crate) fn supported(secrets: &ConnectionTrafficSecrets) -> bool {
    matches!(
        secrets,
        ConnectionTrafficSecrets::Aes128Gcm { .. }
            | ConnectionTrafficSecrets::Aes256Gcm { .. }
            | ConnectionTrafficSecrets::Chacha20Poly1305 { .. }
    )
}

/// Who seals what we send.
enum Tx {
    /// We do, with these keys.
    Own(Keys),
    /// The kernel (kTLS) has our keys; at most `sealed` records went under
    /// them (an upper bound the stream keeps, from what it wrote).
    Kernel { sealed: u64 },
}

/// Records the kernel must be given by control message (kTLS): our
/// KeyUpdate (then our new send keys), an alert. At most one of each:
/// one KeyUpdate answers every request that came before it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) key_update: bool,
    pub(crate) alert: Option<u8>,
}

impl Due {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Due::default()
    }
}

/// A TLS 1.3 connection's record protection after its handshake.
pub(crate) struct Records {
    kernel: KernelConnection<ServerConnectionData>,
    tx: Tx,
    rx: Keys,
    /// Records sealed under one key before we update it (the suite's
    /// confidentiality limit, with margin).
    tx_limit: u64,
    /// What the kernel must send for us (kTLS only).
    due: Due,
}

/// What opening a record found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// Application data: where its content is in the record.
    Data(Range<usize>),
    /// The peer's close_notify.
    Closed,
    /// A record with nothing for the reader (a key update, handled).
    Nothing,
}

impl Records {
    pub(crate) fn new(
        secrets: rustls::ExtractedSecrets,
        kernel: KernelConnection<ServerConnectionData>,
    ) -> Records {
        let limit = match kernel.negotiated_cipher_suite() {
            SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
            _ => u64::MAX,
        };
        Records {
            kernel,
            tx: Tx::Own(Keys::new(secrets.tx)),
            rx: Keys::new(secrets.rx),
            tx_limit: limit - limit / 16,
            due: Due::default(),
        }
    }

    /// Update our send keys after `n` more records (tests).
    #[cfg(test)]
    pub(crate) fn limit_after(&mut self, n: u64) {
        let sealed = match &self.tx {
            Tx::Own(keys) => keys.seq,
            Tx::Kernel { sealed } => *sealed,
        };
        self.tx_limit = sealed + n;
    }

    /// Drop the expanded keys (rebuilt on the next record): what an idle
    /// connection does.
    pub(crate) fn release(&mut self) {
        if let Tx::Own(keys) = &mut self.tx {
            keys.key = None;
        }
        self.rx.key = None;
    }

    /// Our send keys in the kernel's form, with the next record's sequence
    /// number (while we seal; `None` once the kernel does).
    pub(crate) fn kernel_tx(&self) -> Option<CryptoInfo> {
        match &self.tx {
            Tx::Own(keys) => crypto_info(&keys.secrets, keys.seq),
            Tx::Kernel { .. } => None,
        }
    }

    /// The kernel took our send keys ([`Records::kernel_tx`]): ours are
    /// dropped, and it seals from here.
    pub(crate) fn kernel_sends(&mut self) {
        if let Tx::Own(keys) = &self.tx {
            self.tx = Tx::Kernel { sealed: keys.seq };
        }
    }

    /// The kernel seals what we send.
    pub(crate) fn kernel_seals(&self) -> bool {
        matches!(self.tx, Tx::Kernel { .. })
    }

    /// The kernel may have sealed `records` more records: at the
    /// confidentiality limit our KeyUpdate falls due.
    pub(crate) fn kernel_sent(&mut self, records: u64) {
        if let Tx::Kernel { sealed } = &mut self.tx {
            *sealed = sealed.saturating_add(records);
            if *sealed >= self.tx_limit {
                self.due.key_update = true;
            }
        }
    }

    /// What the kernel must send for us, taken.
    pub(crate) fn take_due(&mut self) -> Due {
        std::mem::take(&mut self.due)
    }

    /// Our next send keys in the kernel's form, for after our KeyUpdate has
    /// been sent under the current ones.
    pub(crate) fn next_kernel_tx(&mut self) -> Result<CryptoInfo, Refused> {
        let (seq, secrets) = self
            .kernel
            .update_tx_secret()
            .map_err(|_| Refused::Alert("cannot update our keys", alert::INTERNAL_ERROR))?;
        let info = crypto_info(&secrets, seq).ok_or(Refused::Alert(
            "cannot update our keys",
            alert::INTERNAL_ERROR,
        ))?;
        self.tx = Tx::Kernel { sealed: seq };
        Ok(info)
    }

    /// Seal one record of `typ` with `content` (at most [`MAX_CONTENT`]
    /// bytes) at the end of `out` (from `end`, which moves past it).
    /// `Err` when our keys are spent and rustls cannot derive the next
    /// ones: nothing more may be sent.
    pub(crate) fn seal(
        &mut self,
        typ: u8,
        content: &[u8],
        out: &mut Vec<u8>,
        end: &mut usize,
    ) -> Result<(), Refused> {
        debug_assert!(content.len() <= MAX_CONTENT);
        let Tx::Own(keys) = &self.tx else {
            return Err(Refused::Alert("the kernel seals", alert::INTERNAL_ERROR));
        };
        if keys.seq >= self.tx_limit {
            self.update_tx(out, end)?;
        }
        self.seal_record(typ, content, out, end);
        Ok(())
    }

    /// Seal one record under our keys (only while we seal).
    fn seal_record(&mut self, typ: u8, content: &[u8], out: &mut Vec<u8>, end: &mut usize) {
        let Tx::Own(keys) = &mut self.tx else {
            return;
        };
        let len = content.len() + 1 + TAG;
        let start = *end;
        if out.len() < start + 5 + len {
            out.resize(start + 5 + len, 0);
        }
        let header = [APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
        out[start..start + 5].copy_from_slice(&header);
        let body = start + 5;
        out[body..body + content.len()].copy_from_slice(content);
        out[body + content.len()] = typ;
        let nonce = keys.next_nonce();
        let tag = keys
            .key()
            .seal_in_place_separate_tag(
                nonce,
                Aad::from(header),
                &mut out[body..body + content.len() + 1],
            )
            .expect("a record within the AEAD's size");
        out[body + content.len() + 1..body + len].copy_from_slice(tag.as_ref());
        *end = body + len;
    }

    /// Tell the peer our send keys change (KeyUpdate, not asking for its
    /// own), then change them; with kTLS, leave it due for the stream.
    fn update_tx(&mut self, out: &mut Vec<u8>, end: &mut usize) -> Result<(), Refused> {
        if self.kernel_seals() {
            self.due.key_update = true;
            return Ok(());
        }
        // Derived first: a KeyUpdate must not be sent for keys we cannot
        // move to.
        let next = self
            .kernel
            .update_tx_secret()
            .map_err(|_| Refused::Alert("cannot update our keys", alert::INTERNAL_ERROR))?;
        // Sealed under the keys it retires (RFC 8446 §4.6.3).
        self.seal_record(HANDSHAKE, &KEY_UPDATE_NOT_REQUESTED, out, end);
        self.tx = Tx::Own(Keys::new(next));
        Ok(())
    }

    /// Open the record `record` (header and payload, whole) in place.
    /// Queues what the peer asked for (our KeyUpdate) in `out`.
    pub(crate) fn open(
        &mut self,
        record: &mut [u8],
        out: &mut Vec<u8>,
        end: &mut usize,
    ) -> Result<Opened, Refused> {
        let header: [u8; 5] = record[..5].try_into().expect("a record header");
        let body = &mut record[5..];
        if header[0] == CHANGE_CIPHER_SPEC {
            return Err(Refused::Alert(
                "change_cipher_spec after the handshake",
                alert::UNEXPECTED_MESSAGE,
            ));
        }
        if header[0] != APPLICATION_DATA {
            return Err(Refused::Alert(
                "a plaintext record after the handshake",
                alert::UNEXPECTED_MESSAGE,
            ));
        }
        if body.len() > MAX_CIPHERTEXT {
            return Err(Refused::Alert("record too long", alert::RECORD_OVERFLOW));
        }
        if body.len() < TAG + 1 {
            return Err(Refused::Alert("record too short", alert::DECODE_ERROR));
        }
        let nonce = self.rx.next_nonce();
        let plain = self
            .rx
            .key()
            .open_in_place(nonce, Aad::from(header), body)
            .map_err(|_| Refused::Alert("record does not decrypt", alert::BAD_RECORD_MAC))?;
        // The content type is the last byte that is not padding.
        let Some(at) = plain.iter().rposition(|&b| b != 0) else {
            return Err(Refused::Alert(
                "record without a type",
                alert::UNEXPECTED_MESSAGE,
            ));
        };
        let content = 5..5 + at;
        let typ = plain[at];
        match typ {
            APPLICATION_DATA => Ok(Opened::Data(content)),
            ALERT => match &record[content] {
                [_, alert::CLOSE_NOTIFY] => Ok(Opened::Closed),
                [_, desc] => Err(Refused::PeerAlert(*desc)),
                _ => Err(Refused::Alert("malformed alert", alert::DECODE_ERROR)),
            },
            HANDSHAKE => match record[content] {
                // KeyUpdate whole in one record (RFC 8446 §4.6.3).
                [KEY_UPDATE, 0, 0, 1, request @ (0 | 1)] => {
                    let next = self
                        .kernel
                        .update_rx_secret()
                        .map_err(|_| Refused::Alert("key update", alert::INTERNAL_ERROR))?;
                    self.rx = Keys::new(next);
                    if request == 1 {
                        self.update_tx(out, end)?;
                    }
                    Ok(Opened::Nothing)
                }
                _ => Err(Refused::Alert(
                    "a handshake message after the handshake",
                    alert::UNEXPECTED_MESSAGE,
                )),
            },
            _ => Err(Refused::Alert(
                "unknown record type",
                alert::UNEXPECTED_MESSAGE,
            )),
        }
    }

    /// Seal an alert (`desc`; fatal unless it is close_notify); with kTLS,
    /// leave it due for the stream (the first one: nothing follows it).
    pub(crate) fn alert(&mut self, desc: u8, out: &mut Vec<u8>, end: &mut usize) {
        if self.kernel_seals() {
            self.due.alert.get_or_insert(desc);
            return;
        }
        let level = alert::level(desc);
        // Keys past their limit that cannot be updated: the alert goes
        // under the old ones rather than not at all (the connection ends).
        if self.seal(ALERT, &[level, desc], out, end).is_err() {
            self.seal_record(ALERT, &[level, desc], out, end);
        }
    }
}

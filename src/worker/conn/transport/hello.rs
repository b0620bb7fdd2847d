//! The server name a ClientHello asks for, read from the first flight's
//! bytes before rustls takes them.
//!
//! rustls's unbuffered server connection does not say which name the
//! client sent (its buffered connection does), and the connection needs it
//! to route a request to the SNI's site, resumed handshakes included. The
//! ClientHello is the first handshake message and is sent in the clear, so
//! it is read here from the records as they arrived, joined across records
//! when the client split it. Anything malformed is left for rustls to
//! refuse: this only ever answers "no name".

/// What the received bytes say so far.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// The ClientHello is not whole yet.
    Incomplete,
    /// It is whole (or not a ClientHello at all): the name, if it had one.
    Done(Option<Box<str>>),
}

/// The longest record a ClientHello may come in (RFC 8446 §5.1: a
/// plaintext record's payload is at most 2^14 bytes).
const MAX_PLAINTEXT_RECORD: usize = 16_384;

/// Read the server name of the ClientHello at the front of `rx`.
pub(crate) fn server_name(rx: &[u8]) -> Hello {
    const HANDSHAKE: u8 = 22;
    const CLIENT_HELLO: u8 = 1;
    let mut message: Vec<u8> = Vec::new();
    let mut at = 0;
    loop {
        let Some(header) = rx.get(at..at + 5) else {
            return Hello::Incomplete;
        };
        if header[0] != HANDSHAKE {
            return Hello::Done(None);
        }
        let len = u16::from_be_bytes([header[3], header[4]]) as usize;
        if len > MAX_PLAINTEXT_RECORD {
            // rustls refuses it on sight, with an alert; no waiting for it.
            return Hello::Done(None);
        }
        let Some(payload) = rx.get(at + 5..at + 5 + len) else {
            return Hello::Incomplete;
        };
        message.extend_from_slice(payload);
        at += 5 + len;
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return Hello::Done(None);
            }
            let body = u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if message.len() >= 4 + body {
                return Hello::Done(parse(&message[4..4 + body]));
            }
        }
        if len == 0 {
            // Empty handshake records are refused by rustls; stop here.
            return Hello::Done(None);
        }
    }
}

/// The host name in a ClientHello body's server_name extension (RFC 8446
/// §4.1.2, RFC 6066 §3).
fn parse(body: &[u8]) -> Option<Box<str>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    let session = r.u8()? as usize;
    r.take(session)?;
    let suites = r.u16()? as usize;
    r.take(suites)?;
    let compression = r.u8()? as usize;
    r.take(compression)?;
    let extensions = r.u16()? as usize;
    let mut ext = Reader(r.take(extensions)?);
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let len = ext.u16()? as usize;
        let data = ext.take(len)?;
        if kind != 0 {
            continue;
        }
        let mut list = Reader(data);
        let list_len = list.u16()? as usize;
        let mut names = Reader(list.take(list_len)?);
        while !names.0.is_empty() {
            let name_type = names.u8()?;
            let len = names.u16()? as usize;
            let name = names.take(len)?;
            if name_type == 0 {
                return std::str::from_utf8(name).ok().map(Into::into);
            }
        }
        return None;
    }
    None
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A real ClientHello from rustls's client for `name`.
    fn client_hello(name: &str) -> Vec<u8> {
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let mut client =
            rustls::ClientConnection::new(Arc::new(config), name.to_owned().try_into().unwrap())
                .unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        out
    }

    #[test]
    fn the_name_of_a_whole_hello_is_read() {
        let hello = client_hello("www.example.test");
        assert_eq!(
            server_name(&hello),
            Hello::Done(Some("www.example.test".into()))
        );
    }

    #[test]
    fn a_partial_hello_waits_and_a_split_one_is_joined() {
        let hello = client_hello("a.example.test");
        for cut in [0, 3, 5, 40, hello.len() - 1] {
            assert_eq!(
                server_name(&hello[..cut]),
                Hello::Incomplete,
                "cut at {cut}"
            );
        }
        // The same message in two records.
        let payload = &hello[5..];
        let (first, second) = payload.split_at(100);
        let mut split = Vec::new();
        for part in [first, second] {
            split.extend_from_slice(&[22, 3, 1]);
            split.extend_from_slice(&(part.len() as u16).to_be_bytes());
            split.extend_from_slice(part);
        }
        assert_eq!(server_name(&split[..110]), Hello::Incomplete);
        assert_eq!(
            server_name(&split),
            Hello::Done(Some("a.example.test".into()))
        );
    }

    #[test]
    fn what_is_not_a_hello_has_no_name() {
        assert_eq!(server_name(b"GET / HTTP/1.1\r\n"), Hello::Done(None));
        assert_eq!(
            server_name(&[22, 3, 1, 0, 4, 2, 0, 0, 0]),
            Hello::Done(None)
        );
        // A ClientHello cut short inside: no name, rustls will refuse it.
        assert_eq!(
            server_name(&[22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3]),
            Hello::Done(None)
        );
    }
}

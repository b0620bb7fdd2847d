//! Request-body framing (RFC 9112 §6), I/O-free.
//!
//! A request head says how its body is delimited; the connection must skip
//! exactly those bytes before the next head, or a body would be parsed as a
//! request (smuggling). [`Framing::of`] reads the head's validated framing
//! fields (`parse` has refused every Content-Length and Transfer-Encoding it
//! cannot frame); [`Remaining`] counts a Content-Length body down as bytes
//! arrive. Chunked request bodies are refused (501) until they are decoded.

use std::ops::Range;

use super::error::ParseError;
use super::parse::{Head, TransferEncoding};

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length, no Transfer-Encoding).
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
}

impl Framing {
    /// The framing of `head`, refusing what this server cannot frame: a
    /// chunked body (501), and a declared length above `max_body`
    /// (413: larger bodies are not read through to find the next request).
    pub fn of(head: &Head<'_>, max_body: u64) -> Result<Framing, ParseError> {
        if head.transfer_encoding != TransferEncoding::Absent {
            return Err(ParseError::UnsupportedTransferEncoding);
        }
        match head.content_length {
            None | Some(0) => Ok(Framing::Empty),
            Some(n) if n > max_body => Err(ParseError::BodyTooLarge { length: n }),
            Some(n) => Ok(Framing::Length(n)),
        }
    }

    /// Body bytes still to come when the head has just been taken.
    pub fn remaining(self) -> Remaining {
        match self {
            Framing::Empty => Remaining(0),
            Framing::Length(n) => Remaining(n),
        }
    }
}

/// What one call to a body decoder found in the bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Bytes of the input used from its start, framing and data alike: the
    /// caller drops them. What follows is more body, or, once `done`, the
    /// next request.
    pub consumed: usize,
    /// Where this step's body bytes lie in the input (within `..consumed`);
    /// empty when it found none.
    pub data: Range<usize>,
    /// The body has ended: nothing after `consumed` belongs to it.
    pub done: bool,
}

/// Body bytes of the current request not yet seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remaining(u64);

impl Remaining {
    /// Take up to `available` buffered bytes as body; returns how many.
    pub fn consume(&mut self, available: usize) -> usize {
        let n = self.0.min(available as u64) as usize;
        self.0 -= n as u64;
        n
    }

    /// Whether the whole body has been seen.
    pub fn is_done(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{parse, Limits};

    fn framing(raw: &[u8], max: u64) -> Result<Framing, ParseError> {
        let (head, _) = parse(raw, &Limits::default()).unwrap().unwrap();
        Framing::of(&head, max)
    }

    #[test]
    fn no_length_is_an_empty_body() {
        assert_eq!(
            framing(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 10).unwrap(),
            Framing::Empty
        );
    }

    #[test]
    fn length_above_the_limit_is_413() {
        let e = framing(
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
            10,
        );
        assert!(matches!(e, Err(ParseError::BodyTooLarge { length: 11 })));
    }

    #[test]
    fn transfer_encoding_is_refused() {
        let e = framing(
            b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            10,
        );
        assert!(matches!(e, Err(ParseError::UnsupportedTransferEncoding)));
    }

    #[test]
    fn remaining_counts_down_across_reads() {
        let mut r = Framing::Length(10).remaining();
        assert_eq!(r.consume(4), 4);
        assert!(!r.is_done());
        assert_eq!(r.consume(100), 6);
        assert!(r.is_done());
        assert_eq!(r.consume(5), 0);
    }
}

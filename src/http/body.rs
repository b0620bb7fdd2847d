//! Request-body framing (RFC 9112 §6), I/O-free.
//!
//! A request head says how its body is delimited; the connection must take
//! exactly those bytes before the next head, or a body would be parsed as a
//! request (smuggling). [`Framing::of`] reads the head's validated framing
//! fields (`parse` has refused every Content-Length and Transfer-Encoding it
//! cannot frame); [`Decoder`] then takes the body from the buffered bytes as
//! they arrive: a Content-Length body counted down, a chunked one through
//! `chunked::Decoder`. Both answer in [`Step`]s that say where the body bytes
//! lie in the caller's buffer, so a reader can hand them out without a copy
//! and the connection can discard them ([`Decoder::skip`]).
//!
//! Flow for one request:
//! 1. `Framing::of(head, max_body)`: Empty, Length (413 past `max_body`) or
//!    Chunked.
//! 2. `framing.decoder(max_body)`, then `decode` (or `skip`) on the bytes
//!    after the head, again on each later read, until `is_done`.
//! 3. The bytes after the last step's `consumed` are the next request's.

use super::chunked::{self, Trailers};
// Defined beside the chunked decoder, the lower of the two, so neither
// module imports the other's types both ways.
pub use super::chunked::Step;
use super::error::ParseError;
use super::parse::{Head, TransferEncoding};

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length, or zero, and no Transfer-Encoding).
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows (RFC 9112 §7.1): its end is in its framing.
    Chunked,
}

impl Framing {
    /// The framing of `head`, refusing a declared length above `max_body`
    /// (413, before any of it is read). A chunked body's length is not
    /// known ahead; its decoder refuses it once it passes `max_body`.
    pub fn of(head: &Head<'_>, max_body: u64) -> Result<Framing, ParseError> {
        if head.transfer_encoding == TransferEncoding::Chunked {
            // `parse` refused Content-Length alongside (RFC 9112 §6.3).
            return Ok(Framing::Chunked);
        }
        match head.content_length {
            None | Some(0) => Ok(Framing::Empty),
            Some(n) if n > max_body => Err(ParseError::BodyTooLarge { length: n }),
            Some(n) => Ok(Framing::Length(n)),
        }
    }

    /// The decoder of a body so framed, the head just taken. `max_body`
    /// bounds a chunked body's data (a length was bounded by [`Framing::of`]).
    pub fn decoder(self, max_body: u64) -> Decoder {
        match self {
            Framing::Empty => Decoder::Length(0),
            Framing::Length(n) => Decoder::Length(n),
            Framing::Chunked => Decoder::Chunked(Box::new(chunked::Decoder::new(max_body))),
        }
    }
}

/// The body of the current request, from the bytes seen so far: what is
/// left of it and how it ends. Boxed when chunked, so a connection that
/// holds one between reads (most hold `Length(0)`) stays small.
#[derive(Debug, Clone)]
pub enum Decoder {
    /// This many bytes of a Content-Length body still to come (0: none).
    Length(u64),
    /// A chunked body, part way through.
    Chunked(Box<chunked::Decoder>),
}

impl Default for Decoder {
    /// No body: the state between requests.
    fn default() -> Self {
        Decoder::Length(0)
    }
}

impl Decoder {
    /// Decode from the start of `input` (the bytes buffered after what
    /// earlier calls consumed): one run of body bytes at most. See
    /// `chunked::Decoder::decode`; a length body never fails.
    pub fn decode(&mut self, input: &[u8]) -> Result<Step, chunked::Error> {
        match self {
            Decoder::Length(left) => {
                let n = usize::try_from(*left).map_or(input.len(), |l| l.min(input.len()));
                *left -= n as u64;
                Ok(Step {
                    consumed: n,
                    data: 0..n,
                    done: *left == 0,
                })
            }
            Decoder::Chunked(chunked) => chunked.decode(input),
        }
    }

    /// Take and discard as much of the body as `input` holds; returns how
    /// many bytes of `input` it was (the rest, if any, follows the body).
    pub fn skip(&mut self, input: &[u8]) -> Result<usize, chunked::Error> {
        let mut used = 0;
        while !self.is_done() && used < input.len() {
            let step = self.decode(&input[used..])?;
            if step.consumed == 0 {
                break;
            }
            used += step.consumed;
        }
        Ok(used)
    }

    /// Whether the whole body has been taken.
    pub fn is_done(&self) -> bool {
        match self {
            Decoder::Length(left) => *left == 0,
            Decoder::Chunked(chunked) => chunked.is_done(),
        }
    }

    /// A chunked body's trailer fields (empty until it has ended); `None`
    /// for a length body, which has none.
    pub fn trailers(&self) -> Option<&Trailers> {
        match self {
            Decoder::Length(_) => None,
            Decoder::Chunked(chunked) => Some(chunked.trailers()),
        }
    }
}

#[cfg(test)]
mod tests;

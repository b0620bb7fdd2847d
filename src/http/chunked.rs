//! The I/O-free decoder of chunked request bodies (RFC 9112 §7.1).
//!
//! A chunked body arrives in whatever pieces the socket hands over, its
//! framing interleaved with its data, so the decoder is a state machine fed
//! arbitrary slices. The caller owns the buffer: [`Decoder::decode`] takes
//! the bytes buffered so far, consumes framing, and says where in them the
//! next run of body bytes lies, so data is handed out (or discarded) where it
//! lies and never copied. Only the trailer section, rare and bounded, is
//! copied into the decoder, so that it outlives the caller's buffer and a
//! service can read it once the body has ended.
//!
//! The grammar is strict because chunk framing is where request smuggling
//! lives: two parsers that disagree on where a body ends disagree on where
//! the next request begins. After an error the decoder stays failed and the
//! connection closes; nothing after the error is ever read as a request.
//!
//! Flow for one body:
//! 1. A size line: `1*HEXDIG` (at most 16 significant digits, a `u64`), then
//!    chunk extensions `*( BWS ";" BWS name [ BWS "=" BWS ( token /
//!    quoted-string ) ] )`, checked and discarded, then CRLF. The line is
//!    bounded by [`MAX_SIZE_LINE_BYTES`]; extensions over the whole body by
//!    [`MAX_EXTENSION_BYTES`]; the data declared so far by the body limit.
//! 2. That many data bytes, then CRLF; back to 1.
//! 3. A size of zero ends the data: the trailer section follows, fields with
//!    the same syntax as a head's (httparse, configured as `parse` is),
//!    bounded by [`MAX_TRAILER_BYTES`] and [`MAX_TRAILERS`], then CRLF.
//!
//! Every line ends in CRLF. RFC 9112 §2.2 lets a recipient accept a bare LF
//! as a line end; hyper refuses it in chunk framing and so do we (a bare LF
//! is an error, not a line end), because an intermediary that reads it the
//! other way would frame the body differently.

use std::fmt;
use std::ops::Range;

use super::token::{is_tchar, trim_ows};

/// What one call to a body decoder (this one, or `body`'s counted one)
/// found in the bytes it was given.
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

/// Longest chunk-size line accepted (size, extensions and CRLF). A size
/// needs at most 16 digits; 4 KiB leaves room for extensions (hyper bounds
/// extensions to a few KiB as well) while bounding the work on one line.
pub const MAX_SIZE_LINE_BYTES: usize = 4 * 1024;

/// Most bytes of chunk extensions (and redundant leading zeros of sizes)
/// over one body. Extensions carry nothing this server reads; without a
/// total bound a client could wrap each body byte in a 4 KiB size line.
/// 16 KiB is hyper's bound on the extensions of one body.
pub const MAX_EXTENSION_BYTES: usize = 16 * 1024;

/// Largest trailer section accepted, its final CRLF included: bounded like
/// a head (`parse::DEFAULT_MAX_HEAD_BYTES`), since it is a field section too.
pub const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// Most trailer fields accepted. Trailers in use are one to three fields
/// (a checksum, a status); 32 bounds the parse work and its stack array.
pub const MAX_TRAILERS: usize = 32;

/// Why a chunked body was refused. Every variant is a 400 except
/// [`Error::TooLarge`], a 413 (the mapping lives in `http::error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A size line that does not start with a hex digit, or a byte after
    /// the digits that cannot start an extension or end the line.
    #[error("chunk size is not 1*HEXDIG (byte {byte:#04x})")]
    BadSize { byte: u8 },
    /// More significant hex digits than a `u64` holds.
    #[error("chunk size does not fit in 64 bits")]
    SizeOverflow,
    /// A byte the chunk-ext grammar does not allow where it came.
    #[error("malformed chunk extension (byte {byte:#04x})")]
    BadExtension { byte: u8 },
    /// A size line longer than [`MAX_SIZE_LINE_BYTES`].
    #[error("chunk size line longer than {limit} bytes")]
    LineTooLong { limit: usize },
    /// More extension bytes over the body than [`MAX_EXTENSION_BYTES`].
    #[error("more than {limit} bytes of chunk extensions in one body")]
    ExtensionsTooLarge { limit: usize },
    /// A CR not followed by LF, or chunk data not followed by CRLF.
    #[error("expected CRLF, got byte {byte:#04x}")]
    MissingCrlf { byte: u8 },
    /// A line ended by LF alone (see the module doc).
    #[error("bare LF in chunked framing")]
    BareLf,
    /// A trailer section larger than [`MAX_TRAILER_BYTES`].
    #[error("trailer section larger than {limit} bytes")]
    TrailersTooLarge { limit: usize },
    /// More trailer fields than [`MAX_TRAILERS`].
    #[error("more than {limit} trailer fields")]
    TooManyTrailers { limit: usize },
    /// A trailer field that is not `name: value` as in a head.
    #[error("malformed trailer field: {0}")]
    BadTrailer(httparse::Error),
    /// The data declared so far passes the body limit.
    #[error("chunked body larger than {limit} bytes")]
    TooLarge { limit: u64 },
}

/// Where the decoder is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The start of a size line: a hex digit must come.
    Size,
    /// Within the size's hex digits.
    Digits,
    /// Within the extensions after the size.
    Ext(Ext),
    /// A CR ended the size line: LF must follow.
    SizeLf,
    /// Chunk data, `left` bytes of it still to come.
    Data { left: u64 },
    /// The chunk's data ended: CR must follow.
    DataCr,
    /// The CR after the data came: LF must follow.
    DataLf,
    /// Within the trailer section; `line_start` at the start of a line,
    /// where an empty line ends the section.
    Trailer { line_start: bool },
    /// A CR in the trailer section: LF must follow. `empty`: it ended an
    /// empty line, so the LF ends the section and the body.
    TrailerLf { empty: bool },
    /// The body ended; nothing more is consumed.
    Done,
    /// Refused; every later call answers the same error.
    Failed(Error),
}

/// Where the decoder is in the extensions of a size line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ext {
    /// Between items: BWS, then `;`, `=` (when `eq`: right after a name),
    /// or the CR ending the line (only when no whitespace came, `!ws`: BWS
    /// must be followed by `;` or `=`).
    Gap { ws: bool, eq: bool },
    /// After `;`: BWS, then a name.
    Semi,
    /// Within a name (a token).
    Name,
    /// After `=`: BWS, then a token or a quoted string.
    Eq,
    /// Within a token value.
    Token,
    /// Within a quoted-string value.
    Quoted,
    /// After a backslash in a quoted string.
    Escape,
}

/// Decodes one chunked body from the slices it is fed (see the module doc).
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    /// The size of the chunk whose size line is being read.
    size: u64,
    /// Bytes of the current size line so far.
    line: usize,
    /// Extension bytes and redundant leading zeros in this body so far.
    slack: usize,
    /// Data bytes decoded so far.
    decoded: u64,
    /// Largest body accepted, in data bytes.
    max_body: u64,
    /// The trailer section as received, while it is read.
    raw_trailers: Vec<u8>,
    /// The trailer fields, once the body has ended.
    trailers: Trailers,
}

impl Decoder {
    /// A decoder for a body of at most `max_body` data bytes.
    pub fn new(max_body: u64) -> Decoder {
        Decoder {
            state: State::Size,
            size: 0,
            line: 0,
            slack: 0,
            decoded: 0,
            max_body,
            raw_trailers: Vec::new(),
            trailers: Trailers::default(),
        }
    }

    /// Decode from the start of `input`, the bytes buffered after what
    /// earlier calls consumed. Consumes framing up to and including one run
    /// of data (`input[step.data]`, possibly empty), or everything given
    /// when no data is in it, or up to the body's end. Call again with the
    /// unconsumed rest, and with more bytes when all was consumed.
    pub fn decode(&mut self, input: &[u8]) -> Result<Step, Error> {
        let mut at = 0;
        while at < input.len() {
            match self.state {
                State::Done => break,
                State::Failed(e) => return Err(e),
                State::Data { left } => {
                    let avail = input.len() - at;
                    let n = usize::try_from(left).map_or(avail, |left| left.min(avail));
                    let left = left - n as u64;
                    self.decoded += n as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { left }
                    };
                    return Ok(Step {
                        consumed: at + n,
                        data: at..at + n,
                        done: false,
                    });
                }
                _ => {
                    if let Err(e) = self.byte(input[at]) {
                        self.state = State::Failed(e);
                        return Err(e);
                    }
                    at += 1;
                }
            }
        }
        if let State::Failed(e) = self.state {
            return Err(e);
        }
        Ok(Step {
            consumed: at,
            data: at..at,
            done: self.state == State::Done,
        })
    }

    /// Whether the body has ended (last chunk and trailer section read).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Data bytes decoded so far.
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// The trailer fields; empty until the body has ended, and after it
    /// when it had none.
    pub fn trailers(&self) -> &Trailers {
        &self.trailers
    }

    /// Advance over one framing byte.
    fn byte(&mut self, b: u8) -> Result<(), Error> {
        if matches!(
            self.state,
            State::Size | State::Digits | State::Ext(_) | State::SizeLf
        ) {
            self.line += 1;
            if self.line > MAX_SIZE_LINE_BYTES {
                return Err(Error::LineTooLong {
                    limit: MAX_SIZE_LINE_BYTES,
                });
            }
            if b == b'\n' && self.state != State::SizeLf {
                return Err(Error::BareLf);
            }
        }
        self.state = match self.state {
            State::Size => {
                self.size = u64::from(hex(b).ok_or(Error::BadSize { byte: b })?);
                State::Digits
            }
            State::Digits => match hex(b) {
                Some(d) => {
                    if self.size == 0 {
                        // A leading zero: it states nothing, so it is slack.
                        self.add_slack()?;
                    }
                    self.size =
                        self.size.checked_mul(16).ok_or(Error::SizeOverflow)? | u64::from(d);
                    State::Digits
                }
                None if matches!(b, b';' | b' ' | b'\t' | b'\r') => self.ext(
                    Ext::Gap {
                        ws: false,
                        eq: false,
                    },
                    b,
                )?,
                None => return Err(Error::BadSize { byte: b }),
            },
            State::Ext(ext) => self.ext(ext, b)?,
            State::SizeLf => match b {
                b'\n' => self.end_size_line()?,
                _ => return Err(Error::MissingCrlf { byte: b }),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                b'\n' => return Err(Error::BareLf),
                _ => return Err(Error::MissingCrlf { byte: b }),
            },
            State::DataLf => match b {
                b'\n' => State::Size,
                _ => return Err(Error::MissingCrlf { byte: b }),
            },
            State::Trailer { line_start } => match b {
                b'\r' => State::TrailerLf { empty: line_start },
                b'\n' => return Err(Error::BareLf),
                _ => {
                    self.push_trailer(&[b])?;
                    State::Trailer { line_start: false }
                }
            },
            State::TrailerLf { empty } => match b {
                b'\n' => {
                    if !empty {
                        self.push_trailer(b"\r\n")?;
                        State::Trailer { line_start: true }
                    } else if self.raw_trailers.is_empty() {
                        State::Done
                    } else {
                        self.push_trailer(b"\r\n")?;
                        self.finish_trailers()?;
                        State::Done
                    }
                }
                _ => return Err(Error::MissingCrlf { byte: b }),
            },
            // `decode` handles these without feeding bytes.
            s @ (State::Data { .. } | State::Done | State::Failed(_)) => s,
        };
        Ok(())
    }

    /// One byte of the extensions, `ext` being where they stood before it.
    fn ext(&mut self, ext: Ext, b: u8) -> Result<State, Error> {
        if b != b'\r' {
            self.add_slack()?;
        }
        // A byte that cannot continue a name or token ends it.
        let ext = match ext {
            Ext::Name if !is_tchar(b) => Ext::Gap {
                ws: false,
                eq: true,
            },
            Ext::Token if !is_tchar(b) => Ext::Gap {
                ws: false,
                eq: false,
            },
            e => e,
        };
        let next = match (ext, b) {
            (Ext::Gap { eq, .. }, b' ' | b'\t') => Ext::Gap { ws: true, eq },
            (Ext::Gap { .. }, b';') => Ext::Semi,
            (Ext::Gap { eq: true, .. }, b'=') => Ext::Eq,
            (Ext::Gap { ws: false, .. }, b'\r') => return Ok(State::SizeLf),
            (Ext::Semi, b' ' | b'\t') => Ext::Semi,
            (Ext::Semi | Ext::Name, b) if is_tchar(b) => Ext::Name,
            (Ext::Eq, b' ' | b'\t') => Ext::Eq,
            (Ext::Eq, b'"') => Ext::Quoted,
            (Ext::Eq | Ext::Token, b) if is_tchar(b) => Ext::Token,
            (Ext::Quoted, b'"') => Ext::Gap {
                ws: false,
                eq: false,
            },
            (Ext::Quoted, b'\\') => Ext::Escape,
            (Ext::Quoted, b) if is_qdtext(b) => Ext::Quoted,
            // RFC 9110 §5.6.4: quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ).
            (Ext::Escape, b'\t' | b' ' | 0x21..=0x7E | 0x80..=0xFF) => Ext::Quoted,
            _ => return Err(Error::BadExtension { byte: b }),
        };
        Ok(State::Ext(next))
    }

    fn add_slack(&mut self) -> Result<(), Error> {
        self.slack += 1;
        if self.slack > MAX_EXTENSION_BYTES {
            return Err(Error::ExtensionsTooLarge {
                limit: MAX_EXTENSION_BYTES,
            });
        }
        Ok(())
    }

    /// The LF of a size line came: data follows, or the trailer section.
    fn end_size_line(&mut self) -> Result<State, Error> {
        self.line = 0;
        let size = std::mem::take(&mut self.size);
        if size == 0 {
            return Ok(State::Trailer { line_start: true });
        }
        // The declared size is checked before its data arrives, as a
        // declared Content-Length is.
        match self.decoded.checked_add(size) {
            Some(total) if total <= self.max_body => Ok(State::Data { left: size }),
            _ => Err(Error::TooLarge {
                limit: self.max_body,
            }),
        }
    }

    fn push_trailer(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if self.raw_trailers.len() + bytes.len() > MAX_TRAILER_BYTES {
            return Err(Error::TrailersTooLarge {
                limit: MAX_TRAILER_BYTES,
            });
        }
        self.raw_trailers.extend_from_slice(bytes);
        Ok(())
    }

    /// Parse the complete trailer section (its final CRLF included) into
    /// fields, with the head parser's field rules, and drop the raw bytes.
    fn finish_trailers(&mut self) -> Result<(), Error> {
        let raw = std::mem::take(&mut self.raw_trailers);
        let mut storage = [httparse::EMPTY_HEADER; MAX_TRAILERS];
        match httparse::parse_headers(&raw, &mut storage) {
            Ok(httparse::Status::Complete((_, fields))) => {
                self.trailers = Trailers {
                    fields: fields
                        .iter()
                        .map(|f| (f.name.into(), trim_ows(f.value).into()))
                        .collect(),
                };
                Ok(())
            }
            // The section ends in an empty line and holds no bare CR or LF
            // (the states above saw to it), so httparse finds its end; a
            // partial answer would mean it disagrees on where it ends.
            Ok(httparse::Status::Partial) => Err(Error::BadTrailer(httparse::Error::NewLine)),
            Err(httparse::Error::TooManyHeaders) => Err(Error::TooManyTrailers {
                limit: MAX_TRAILERS,
            }),
            Err(e) => Err(Error::BadTrailer(e)),
        }
    }
}

/// The trailer fields of a chunked body (RFC 9112 §7.1.2), in order, owned:
/// they outlive the buffer they came in. Values have their OWS trimmed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Trailers {
    fields: Vec<(Box<str>, Box<[u8]>)>,
}

impl Trailers {
    /// The first value of field `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields.iter().map(|(n, v)| (&**n, &**v))
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

impl fmt::Debug for Trailers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (n, String::from_utf8_lossy(v).into_owned())),
            )
            .finish()
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// RFC 9110 §5.6.4: qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text.
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5B | 0x5D..=0x7E | 0x80..=0xFF)
}

#[cfg(test)]
mod tests;

//! An incremental HTTP/1.1 response framer (RFC 9112 §6 message body length).
//!
//! [`Parser::advance`] does one step per call and reports how many input bytes it consumed, so
//! the caller can run it over a read buffer in place: body bytes are the consumed slice of a
//! [`Step::Body`] step and are never copied. `Ok(NeedMore)` means "everything usable was
//! consumed; keep the rest and call again with more bytes".

/// Most header fields a response may carry; httparse needs a fixed array on the stack.
const MAX_HEADERS: usize = 64;

/// Longest response head or chunk-size/trailer line we wait for before calling it garbage.
/// 16 KiB is well past any static server's head and small enough to be a per-connection carry.
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The parts of a final (non-1xx) response head the client acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    /// `Content-Length`, when the body is framed by it.
    pub(crate) content_length: Option<u64>,
    /// Body uses chunked transfer coding.
    pub(crate) chunked: bool,
    /// The server will keep the connection open after this response.
    pub(crate) keep_alive: bool,
}

/// What one call to [`Parser::advance`] did with the consumed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing more can be done with this input; the unconsumed tail must be kept.
    NeedMore,
    /// Consumed framing only (a 1xx head, a chunk-size line, a CRLF or a trailer line).
    Framing,
    /// Consumed a final response head.
    Head(Head),
    /// The consumed bytes are body data.
    Body,
    /// The response is complete (consumed nothing further); the parser is ready for the next.
    Done { keep_alive: bool },
}

/// The result of one [`Parser::advance`]: bytes consumed from the front of the input, and what
/// they were.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Progress {
    pub(crate) consumed: usize,
    pub(crate) step: Step,
}

/// Why a response could not be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed response head: {0}")]
    Head(httparse::Error),
    #[error("response head or framing line longer than {limit} bytes")]
    HeadTooLarge { limit: usize },
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("invalid chunked framing")]
    Chunk,
}

impl ParseError {
    /// Whether the error is in body framing (after a valid head) rather than in the head.
    pub fn in_body(self) -> bool {
        matches!(self, ParseError::Chunk)
    }
}

/// What an EOF from the server means at the parser's current position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Eof {
    /// EOF ended a close-delimited body: the response is complete.
    Complete,
    /// EOF between responses: an orderly close, not an error by itself.
    Idle,
    /// EOF cut a response short; `in_body` tells whether the head had been received.
    Truncated { in_body: bool },
}

/// Where the parser is within the current response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for (the rest of) a status line and headers.
    Head,
    /// In a `Content-Length` body with this many bytes left.
    Body { remaining: u64 },
    /// In a body that ends when the server closes the connection.
    UntilClose,
    /// Waiting for a chunk-size line.
    ChunkSize,
    /// In chunk data with this many bytes left.
    ChunkData { remaining: u64 },
    /// Waiting for the CRLF after chunk data.
    ChunkEnd,
    /// After the last chunk, skipping trailer lines until the empty one.
    Trailers,
    /// The body is complete; the next call reports `Done`.
    Complete,
}

/// Incremental response framer; one per connection, reused across responses.
#[derive(Clone, Debug)]
pub(crate) struct Parser {
    state: State,
    /// Keep-alive verdict of the current response's head.
    keep_alive: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

impl Parser {
    pub(crate) fn new() -> Self {
        Self {
            state: State::Head,
            keep_alive: true,
        }
    }

    /// Forgets any response in progress (used when a connection is replaced).
    pub(crate) fn reset(&mut self) {
        *self = Self::new();
    }

    /// Does one step over `input`. See the module docs for the calling loop.
    pub(crate) fn advance(&mut self, input: &[u8]) -> Result<Progress, ParseError> {
        let progress = |consumed, step| Ok(Progress { consumed, step });
        match self.state {
            State::Head => self.head(input),
            State::Body { remaining } | State::ChunkData { remaining } => {
                if input.is_empty() {
                    return progress(0, Step::NeedMore);
                }
                let take = remaining.min(input.len() as u64);
                let left = remaining - take;
                self.state = match (self.state, left) {
                    (State::Body { .. }, 0) => State::Complete,
                    (State::Body { .. }, _) => State::Body { remaining: left },
                    (_, 0) => State::ChunkEnd,
                    (_, _) => State::ChunkData { remaining: left },
                };
                // take <= input.len(), so the conversion cannot truncate.
                progress(take as usize, Step::Body)
            }
            State::UntilClose => {
                if input.is_empty() {
                    return progress(0, Step::NeedMore);
                }
                progress(input.len(), Step::Body)
            }
            State::ChunkSize => {
                let Some(line) = line(input)? else {
                    return progress(0, Step::NeedMore);
                };
                let size = chunk_size(&input[..line - 2])?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData { remaining: size }
                };
                progress(line, Step::Framing)
            }
            State::ChunkEnd => {
                if input.len() < 2 {
                    return progress(0, Step::NeedMore);
                }
                if &input[..2] != b"\r\n" {
                    return Err(ParseError::Chunk);
                }
                self.state = State::ChunkSize;
                progress(2, Step::Framing)
            }
            State::Trailers => {
                let Some(line) = line(input)? else {
                    return progress(0, Step::NeedMore);
                };
                if line == 2 {
                    self.state = State::Complete;
                }
                progress(line, Step::Framing)
            }
            State::Complete => {
                let keep_alive = self.keep_alive;
                self.reset();
                progress(0, Step::Done { keep_alive })
            }
        }
    }

    /// Interprets an EOF from the server. After `Complete` the parser is ready for reuse.
    pub(crate) fn on_eof(&mut self, buffered: usize) -> Eof {
        match self.state {
            State::UntilClose => {
                self.state = State::Complete;
                Eof::Complete
            }
            State::Head if buffered == 0 => Eof::Idle,
            State::Head => Eof::Truncated { in_body: false },
            _ => Eof::Truncated { in_body: true },
        }
    }

    fn head(&mut self, input: &[u8]) -> Result<Progress, ParseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let consumed = match response.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if input.len() >= MAX_HEAD_BYTES {
                    return Err(ParseError::HeadTooLarge {
                        limit: MAX_HEAD_BYTES,
                    });
                }
                return Ok(Progress {
                    consumed: 0,
                    step: Step::NeedMore,
                });
            }
            Err(e) => return Err(ParseError::Head(e)),
        };
        let status = response.code.unwrap_or(0);
        // RFC 9110 §15.2: 1xx responses are interim; the final response follows (101 would
        // switch protocols, which we never ask for).
        if (100..200).contains(&status) {
            return Ok(Progress {
                consumed,
                step: Step::Framing,
            });
        }
        let http10 = response.version == Some(0);
        let mut keep_alive = !http10;
        let mut content_length = None;
        let mut chunked = false;
        for h in response.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or(ParseError::ContentLength)?;
                if content_length.is_some_and(|c| c != value) {
                    return Err(ParseError::ContentLength);
                }
                content_length = Some(value);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // RFC 9112 §6.3: chunked must be the final coding to frame the body.
                chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        keep_alive = true;
                    }
                }
            }
        }
        // RFC 9112 §6.3: 204 and 304 never have a body; chunked overrides Content-Length.
        self.state = if status == 204 || status == 304 {
            State::Complete
        } else if chunked {
            State::ChunkSize
        } else {
            match content_length {
                Some(0) => State::Complete,
                Some(n) => State::Body { remaining: n },
                None => {
                    keep_alive = false;
                    State::UntilClose
                }
            }
        };
        self.keep_alive = keep_alive;
        Ok(Progress {
            consumed,
            step: Step::Head(Head {
                status,
                content_length: if chunked { None } else { content_length },
                chunked,
                keep_alive,
            }),
        })
    }
}

/// Length of the first CRLF-terminated line including the CRLF, if complete.
fn line(input: &[u8]) -> Result<Option<usize>, ParseError> {
    match input.windows(2).position(|w| w == b"\r\n") {
        Some(at) => Ok(Some(at + 2)),
        None if input.len() >= MAX_HEAD_BYTES => Err(ParseError::HeadTooLarge {
            limit: MAX_HEAD_BYTES,
        }),
        None => Ok(None),
    }
}

/// Parses `1a;ext=1` as 0x1a (RFC 9112 §7.1: extensions after `;` are ignored).
fn chunk_size(line: &[u8]) -> Result<u64, ParseError> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or(&[])
        .trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(ParseError::Chunk);
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        let d = (b as char).to_digit(16).ok_or(ParseError::Chunk)?;
        Ok(acc * 16 + u64::from(d))
    })
}

fn last_token(value: &[u8]) -> &[u8] {
    value
        .rsplit(|&b| b == b',')
        .next()
        .unwrap_or(&[])
        .trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (heads, body bytes, keep-alive of each completed response).
    type Parsed = (Vec<Head>, Vec<u8>, Vec<bool>);

    /// Runs the parser over `input` fed in `piece`-byte reads, carrying unconsumed bytes like
    /// the engine does.
    fn run(input: &[u8], piece: usize) -> Result<Parsed, ParseError> {
        let mut p = Parser::new();
        let mut heads = Vec::new();
        let mut body = Vec::new();
        let mut done = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        for part in input.chunks(piece) {
            buf.extend_from_slice(part);
            let mut pos = 0;
            loop {
                let prog = p.advance(&buf[pos..])?;
                let bytes = &buf[pos..pos + prog.consumed];
                pos += prog.consumed;
                match prog.step {
                    Step::NeedMore => break,
                    Step::Framing => {}
                    Step::Head(h) => heads.push(h),
                    Step::Body => body.extend_from_slice(bytes),
                    Step::Done { keep_alive } => done.push(keep_alive),
                }
            }
            buf.drain(..pos);
        }
        Ok((heads, body, done))
    }

    #[test]
    fn content_length_body_in_any_split() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for piece in 1..wire.len() {
            let (heads, body, done) = run(wire, piece).expect("parse");
            assert_eq!(heads.len(), 1);
            assert_eq!(heads[0].status, 200);
            assert_eq!(heads[0].content_length, Some(5));
            assert_eq!(body, b"hello");
            assert_eq!(done, vec![true]);
        }
    }

    #[test]
    fn pipelined_responses_complete_in_order() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\n\
                     Content-Length: 2\r\nConnection: close\r\n\r\nbc";
        let (heads, body, done) = run(wire, wire.len()).expect("parse");
        assert_eq!(
            heads.iter().map(|h| h.status).collect::<Vec<_>>(),
            [200, 404]
        );
        assert_eq!(body, b"abc");
        assert_eq!(done, vec![true, false]);
    }

    #[test]
    fn chunked_body_is_decoded_in_any_split() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                     5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for piece in 1..wire.len() {
            let (heads, body, done) = run(wire, piece).expect("parse");
            assert!(heads[0].chunked);
            assert_eq!(body, b"hello world");
            assert_eq!(done, vec![true]);
        }
    }

    #[test]
    fn bad_chunk_terminator_is_a_body_error() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX";
        let err = run(wire, wire.len()).expect_err("must fail");
        assert_eq!(err, ParseError::Chunk);
        assert!(err.in_body());
    }

    #[test]
    fn interim_100_is_skipped() {
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        let (heads, _, done) = run(wire, 3).expect("parse");
        assert_eq!(heads.len(), 1);
        assert_eq!(heads[0].status, 200);
        assert_eq!(done, vec![true]);
    }

    #[test]
    fn no_body_for_204_and_304() {
        let wire = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n";
        let (heads, body, done) = run(wire, wire.len()).expect("parse");
        assert_eq!(heads.len(), 2);
        assert!(body.is_empty());
        assert_eq!(done.len(), 2);
    }

    #[test]
    fn close_delimited_body_completes_on_eof() {
        let mut p = Parser::new();
        let wire = b"HTTP/1.0 200 OK\r\n\r\nabc";
        let head = p.advance(wire).expect("head");
        assert!(matches!(head.step, Step::Head(h) if !h.keep_alive));
        let body = p.advance(&wire[head.consumed..]).expect("body");
        assert_eq!((body.consumed, body.step), (3, Step::Body));
        assert_eq!(p.on_eof(0), Eof::Complete);
        assert_eq!(
            p.advance(&[]).expect("done").step,
            Step::Done { keep_alive: false }
        );
    }

    #[test]
    fn eof_positions_are_classified() {
        let mut p = Parser::new();
        assert_eq!(p.on_eof(0), Eof::Idle);
        assert_eq!(p.on_eof(4), Eof::Truncated { in_body: false });
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        let head = p.advance(wire).expect("head");
        p.advance(&wire[head.consumed..]).expect("body");
        assert_eq!(p.on_eof(0), Eof::Truncated { in_body: true });
    }

    #[test]
    fn http10_keep_alive_and_connection_close_tokens() {
        let (h, _, _) = run(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
            99,
        )
        .expect("parse");
        assert!(h[0].keep_alive);
        let (h, _, _) = run(
            b"HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n",
            99,
        )
        .expect("parse");
        assert!(!h[0].keep_alive);
    }

    #[test]
    fn rejects_conflicting_content_lengths_and_garbage() {
        assert_eq!(
            run(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                99
            )
            .expect_err("conflict"),
            ParseError::ContentLength
        );
        assert!(matches!(
            run(b"NOT HTTP\r\n\r\n", 99).expect_err("garbage"),
            ParseError::Head(_)
        ));
    }

    #[test]
    fn oversized_head_is_rejected() {
        let mut wire = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        wire.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(
            run(&wire, 4096).expect_err("too large"),
            ParseError::HeadTooLarge {
                limit: MAX_HEAD_BYTES
            }
        );
    }
}

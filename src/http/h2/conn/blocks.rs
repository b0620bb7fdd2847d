//! Field blocks on their way in: which stream a HEADERS frame opens or
//! ends, its CONTINUATION frames gathered within their bound, the block
//! decoded (always: the table must stay in step) and turned into a request,
//! its trailers, or a reset.

use super::super::hpack::FieldList;
use super::super::request;
use super::super::ErrorCode;
use super::{Block, Closed, Conn, Event, RequestHead, Stream, DEFAULT_WINDOW};
use crate::http::h2::frame::MAX_FRAME;

impl Conn {
    /// What a HEADERS frame on `stream` starts.
    pub(super) fn block_for(&mut self, stream: u32, end_stream: bool) -> Result<Block, ErrorCode> {
        if let Some(s) = self.streams.get(&stream) {
            if !s.recv_open {
                return Ok(Block::Refuse(ErrorCode::STREAM_CLOSED));
            }
            // §8.1: a second HEADERS is a trailer section, which ends the stream.
            return Ok(if end_stream {
                Block::Trailers
            } else {
                Block::Refuse(ErrorCode::PROTOCOL_ERROR)
            });
        }
        if stream > self.last_stream {
            if stream % 2 == 0 {
                // §5.1.1: clients open odd streams.
                return Err(ErrorCode::PROTOCOL_ERROR);
            }
            self.last_stream = stream;
            return Ok(match self.goaway {
                Some(last) if stream > last => Block::Ignore,
                _ => Block::Request,
            });
        }
        match self.closed_how(stream) {
            Some(Closed::ByUs) => Ok(Block::Ignore),
            Some(Closed::Done) => Err(ErrorCode::STREAM_CLOSED),
            // A lower id than one already opened (§5.1.1).
            None => Err(ErrorCode::PROTOCOL_ERROR),
        }
    }

    /// Add a fragment to the block being received; at its end, decode it.
    pub(super) fn block_part(&mut self, fragment: &[u8], end: bool) -> Result<(), ErrorCode> {
        self.block_cost += fragment.len();
        let bound = self.ours.max_header_list_bytes + MAX_FRAME;
        if self.block_cost > bound {
            // A CONTINUATION flood (CVE-2024-27316).
            return Err(ErrorCode::ENHANCE_YOUR_CALM);
        }
        self.block.extend_from_slice(fragment);
        if !end {
            return Ok(());
        }
        let Some((stream, end_stream, purpose)) = self.pending.take() else {
            return Err(ErrorCode::PROTOCOL_ERROR);
        };
        let mut list = self.spare.pop().unwrap_or_default();
        let limit = self.ours.max_header_list_bytes;
        if self.decoder.decode(&self.block, limit, &mut list).is_err() {
            // §4.3: a decoding error is a connection error.
            return Err(ErrorCode::COMPRESSION_ERROR);
        }
        if self.block.capacity() > 2 * MAX_FRAME {
            self.block = Vec::new();
        }
        match purpose {
            Block::Ignore => {
                self.recycle(list);
                Ok(())
            }
            Block::Refuse(code) => {
                self.recycle(list);
                self.stream_error(stream, code)
            }
            Block::Request => self.request(stream, end_stream, list),
            Block::Trailers => {
                let short = self
                    .streams
                    .get(&stream)
                    .is_some_and(|s| s.content_length.is_some_and(|n| s.received != n));
                if list.over || short || request::check(&list, true).is_err() {
                    self.recycle(list);
                    return self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
                }
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.recv_open = false;
                }
                self.events.push_back(Event::Trailers {
                    stream,
                    fields: list,
                });
                self.close_if_done(stream);
                Ok(())
            }
        }
    }

    /// A new stream's request head, decoded.
    fn request(&mut self, stream: u32, end_stream: bool, list: FieldList) -> Result<(), ErrorCode> {
        if self.streams.len() >= self.ours.max_concurrent_streams as usize {
            self.recycle(list);
            return self.stream_error(stream, ErrorCode::REFUSED_STREAM);
        }
        let pseudo = if list.over {
            None
        } else {
            match request::check(&list, false) {
                Ok(p) => Some(p),
                Err(_) => {
                    self.recycle(list);
                    return self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
                }
            }
        };
        let initial = if self.acked {
            self.ours.initial_window
        } else {
            self.ours.initial_window.max(DEFAULT_WINDOW)
        };
        self.last_taken = stream;
        self.streams.insert(
            stream,
            Stream {
                recv_open: !end_stream,
                send_open: true,
                send_window: i64::from(self.peer_window),
                recv_window: i64::from(initial),
                unreleased: 0,
                received: 0,
                content_length: pseudo.and_then(|p| p.content_length),
            },
        );
        let event = match pseudo {
            Some(pseudo) => Event::Request {
                stream,
                head: RequestHead {
                    fields: list,
                    pseudo,
                },
                end_stream,
            },
            None => {
                self.recycle(list);
                Event::TooLarge { stream, end_stream }
            }
        };
        self.events.push_back(event);
        Ok(())
    }
}

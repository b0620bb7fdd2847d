//! Compressing a file as it is sent: the answer for a compressible file
//! above `--compress-inline-max-bytes` while the background compressor has
//! not yet made its stored variant (step 6 of the flow in `compress`).
//!
//! Why: without it the first visitors get identity, and so does a CDN in
//! front, which keeps that first answer. With it every answer a client
//! that accepts a coding gets is encoded, from the first.
//!
//! What such an answer is: 200 with `Content-Encoding`, no length (HTTP/1.1
//! chunks it, HTTP/2 and HTTP/3 end the stream), at a fast level
//! ([`fast_level`]), with the stored variant's ETag made weak
//! (`W/"…+gzip.6"`). Its bytes are not the stored variant's, but they
//! decode to the same file, which is what a weak validator says (RFC 9110
//! §8.8.1): a later `If-None-Match` with it (weak comparison) gets 304
//! once the variant is stored, and `If-Range` (strong comparison) never
//! takes it, so no range of other bytes is spliced onto it. A request with
//! `Range` is never answered this way: its ranges are of identity until
//! the variant is stored, as before.
//!
//! Bounds: at most `--compress-streams` at once per worker ([`Permit`], a
//! count on the worker's thread shared by its sites); past it, identity.
//! Each holds one encoder sized for the file (zstd's window from the
//! pledged length, brotli's from the length, gzip's 32 KiB), a 64 KiB read
//! buffer and the encoder's output since the last frame. The CPU is the
//! fast level's, in 64 KiB steps; the connection asks for the next frame
//! only once the last is written, so a client that does not read stops
//! its compression, and other connections run between steps.
//!
//! The file is read with `pread` on the worker's thread, 64 KiB at a time
//! (as the inline compression reads a small file whole, and as a file range
//! polled as a stream is read: a served file is in the page cache as a
//! rule). A file that changes while it is sent (shorter, or another
//! identity at the end) ends the body with an error: the connection is
//! closed (HTTP/1.1) or the stream reset (HTTP/2, HTTP/3), never a short
//! body a client would take as whole.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use super::super::cache::Identity;
use super::super::encoding::Coding;

/// Bytes of the file read and encoded per step.
const READ_BYTES: u64 = 64 * 1024;
/// Brotli's window bounds for a stream (RFC 7932 §9.1): no more than the
/// file needs, and at most 1 MiB (a fast level gains little from more, and
/// the window is most of a stream's memory).
const BROTLI_WINDOW_BITS: std::ops::RangeInclusive<u32> = 16..=20;
/// Brotli's internal output buffer.
const BROTLI_BUFFER_BYTES: usize = 16 * 1024;

/// The level a stream is encoded at: each coding's fastest that still
/// compresses text 3× or more (gzip 1, zstd 1, brotli 1; the stored
/// variant is made at the configured level meanwhile).
pub(crate) fn fast_level(coding: Coding) -> u32 {
    match coding {
        Coding::Gzip | Coding::Zstd | Coding::Brotli => 1,
    }
}

thread_local! {
    /// Streams alive on this worker's thread.
    static LIVE: Cell<u32> = const { Cell::new(0) };
}

/// One of the worker's `--compress-streams`, given back when dropped. Not
/// `Send`: the count is the thread's.
pub(crate) struct Permit(PhantomData<*const ()>);

impl Permit {
    /// Whether one of `max` is free now.
    pub(crate) fn available(max: u32) -> bool {
        LIVE.with(|l| l.get() < max)
    }

    /// One of `max`, if one is free.
    pub(crate) fn take(max: u32) -> Option<Permit> {
        LIVE.with(|l| {
            let live = l.get();
            (live < max).then(|| {
                l.set(live + 1);
                Permit(PhantomData)
            })
        })
    }

    /// Streams alive on this thread (tests).
    #[cfg(test)]
    pub(crate) fn live() -> u32 {
        LIVE.with(Cell::get)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(l.get().saturating_sub(1)));
    }
}

/// One coding's encoder, writing into a buffer the stream empties.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    fn new(coding: Coding, len: u64) -> io::Result<Encoder> {
        let level = fast_level(coding);
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(level),
            )),
            Coding::Brotli => {
                let bits = u64::BITS - len.max(1).leading_zeros();
                let window = bits.clamp(*BROTLI_WINDOW_BITS.start(), *BROTLI_WINDOW_BITS.end());
                Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                    Vec::new(),
                    BROTLI_BUFFER_BYTES,
                    level,
                    window,
                )))
            }
            Coding::Zstd => {
                let mut z = zstd::stream::write::Encoder::new(Vec::new(), level as i32)?;
                // The length sizes zstd's window to the file and goes in
                // the frame header.
                z.set_pledged_src_size(Some(len))?;
                z.include_contentsize(true)?;
                Encoder::Zstd(z)
            }
        })
    }

    fn write(&mut self, input: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(input),
            Encoder::Brotli(e) => e.write_all(input),
            Encoder::Zstd(e) => e.write_all(input),
        }
    }

    /// What it has written since the last call.
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Brotli(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        })
    }

    /// The end of the encoding.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Brotli(e) => Ok(e.into_inner()),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

/// A file's body, encoded as it is sent.
pub(crate) struct Stream {
    file: Rc<File>,
    /// The identity the file had when looked up; checked at the end.
    identity: Identity,
    offset: u64,
    /// `None` once ended (whole, or after an error).
    encoder: Option<Encoder>,
    buf: Vec<u8>,
    _permit: Permit,
}

impl Stream {
    /// `file` (of `identity`) encoded with `coding`, holding `permit`.
    pub(super) fn new(
        file: Rc<File>,
        identity: Identity,
        coding: Coding,
        permit: Permit,
    ) -> io::Result<Stream> {
        Ok(Stream {
            encoder: Some(Encoder::new(coding, identity.len)?),
            file,
            identity,
            offset: 0,
            buf: Vec::new(),
            _permit: permit,
        })
    }

    /// The next piece of the encoding, `None` after the last.
    fn next_piece(&mut self) -> io::Result<Option<Bytes>> {
        loop {
            let Some(encoder) = self.encoder.as_mut() else {
                return Ok(None);
            };
            let len = self.identity.len;
            if self.offset == len {
                let now = Identity::of(&self.file.metadata()?);
                if now != self.identity {
                    return Err(changed());
                }
                let last = self.encoder.take().map(Encoder::finish).transpose()?;
                self.buf = Vec::new();
                return Ok(last.filter(|b| !b.is_empty()).map(Bytes::from));
            }
            let n = (len - self.offset).min(READ_BYTES) as usize;
            self.buf.resize(n, 0);
            match self.file.read_exact_at(&mut self.buf, self.offset) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(changed()),
                Err(e) => return Err(e),
            }
            self.offset += n as u64;
            encoder.write(&self.buf)?;
            let out = encoder.take();
            if !out.is_empty() {
                return Ok(Some(Bytes::from(out)));
            }
        }
    }
}

fn changed() -> io::Error {
    io::Error::other("the file changed while it was compressed and sent")
}

impl http_body::Body for Stream {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let piece = this.next_piece();
        if piece.is_err() {
            // Ended: a later poll says so rather than reading on.
            this.encoder = None;
            tracing::warn!(error = ?piece.as_ref().err(), "ended a compressed answer early");
        }
        Poll::Ready(piece.transpose().map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.encoder.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::tests::decode;
    use super::*;

    fn text(len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut i = 0u64;
        while out.len() < len {
            out.extend_from_slice(format!("let value{} = compute({});\n", i % 97, i).as_bytes());
            i += 1;
        }
        out.truncate(len);
        out
    }

    fn stream_of(path: &std::path::Path, coding: Coding) -> Stream {
        let file = File::open(path).unwrap();
        let identity = Identity::of(&file.metadata().unwrap());
        Stream::new(Rc::new(file), identity, coding, Permit::take(8).unwrap()).unwrap()
    }

    #[test]
    fn each_coding_streams_the_whole_file_in_pieces() {
        let input = text(300_000);
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), &input).unwrap();
        for coding in Coding::PREFERENCE {
            let mut s = stream_of(tmp.path(), coding);
            let mut out = Vec::new();
            let mut pieces = 0;
            while let Some(piece) = s.next_piece().unwrap() {
                assert!(!piece.is_empty());
                out.extend_from_slice(&piece);
                pieces += 1;
            }
            assert!(s.encoder.is_none());
            assert!(out.len() < input.len() / 3, "{coding:?}: {}", out.len());
            assert_eq!(decode(coding, &out), input, "{coding:?}");
            assert!(pieces >= 1, "{coding:?}");
        }
    }

    #[test]
    fn a_file_that_shrinks_ends_the_stream_with_an_error() {
        let input = text(200_000);
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), &input).unwrap();
        let mut s = stream_of(tmp.path(), Coding::Gzip);
        std::fs::write(tmp.path(), &input[..1000]).unwrap();
        let mut ended = false;
        for _ in 0..10 {
            match s.next_piece() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("a shrunk file ended as whole"),
                Err(_) => {
                    ended = true;
                    break;
                }
            }
        }
        assert!(ended);
    }

    #[test]
    fn permits_are_bounded_and_given_back() {
        let before = Permit::live();
        let a = Permit::take(before + 2).unwrap();
        let b = Permit::take(before + 2).unwrap();
        assert!(Permit::take(before + 2).is_none());
        assert!(!Permit::available(before + 2));
        drop(a);
        assert!(Permit::available(before + 2));
        drop(b);
        assert_eq!(Permit::live(), before);
    }
}

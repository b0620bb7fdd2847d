//! The body hand-over, polled by hand (no runtime): who waits for whom.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Body as _;

use super::*;

/// Poll `f` once with a waker that does nothing.
fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

fn bytes(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

#[test]
fn the_connection_reads_only_once_the_reader_asks() {
    let (feed, mut body) = RequestBody::channel();
    {
        let want = pin!(feed.want());
        assert!(poll_once(want).is_pending(), "wanted before anyone asked");
    }
    let mut chunk = pin!(body.chunk());
    assert!(poll_once(chunk.as_mut()).is_pending());
    assert_eq!(poll_once(pin!(feed.want())), Poll::Ready(Want::More));
    assert!(feed.push(bytes("hello")));
    // One chunk handed over: no more is wanted until it is taken.
    assert!(poll_once(pin!(feed.want())).is_pending());
    assert_eq!(
        poll_once(chunk.as_mut()),
        Poll::Ready(Some(Ok(bytes("hello"))))
    );
}

#[test]
fn a_finished_body_ends_after_its_last_chunk_and_keeps_its_trailers() {
    let (feed, mut body) = RequestBody::channel();
    assert!(poll_once(pin!(body.chunk())).is_pending());
    feed.push(bytes("ab"));
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", http::HeaderValue::from_static("3"));
    feed.finish(trailers);
    assert_eq!(
        poll_once(pin!(body.chunk())),
        Poll::Ready(Some(Ok(bytes("ab"))))
    );
    assert_eq!(poll_once(pin!(body.chunk())), Poll::Ready(None));
    assert_eq!(body.trailers().unwrap()["x-sum"], "3");
}

#[test]
fn http_body_frames_are_data_then_trailers() {
    let (feed, body) = RequestBody::channel();
    let mut body = pin!(body);
    assert!(body
        .as_mut()
        .poll_frame(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    feed.push(bytes("x"));
    let mut trailers = http::HeaderMap::new();
    trailers.insert("etag", http::HeaderValue::from_static("\"1\""));
    feed.finish(trailers);
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Some(Ok(data))) = body.as_mut().poll_frame(&mut cx) else {
        panic!("no data frame")
    };
    assert_eq!(data.into_data().unwrap(), bytes("x"));
    let Poll::Ready(Some(Ok(t))) = body.as_mut().poll_frame(&mut cx) else {
        panic!("no trailers frame")
    };
    assert_eq!(t.into_trailers().unwrap()["etag"], "\"1\"");
    assert!(matches!(
        body.as_mut().poll_frame(&mut cx),
        Poll::Ready(None)
    ));
    assert!(body.is_end_stream());
}

#[test]
fn a_dropped_body_tells_the_connection_to_discard_the_rest() {
    let (feed, body) = RequestBody::channel();
    drop(body);
    assert_eq!(poll_once(pin!(feed.want())), Poll::Ready(Want::Gone));
    assert!(!feed.push(bytes("late")), "pushed into a dropped body");
}

#[test]
fn a_connection_that_goes_away_ends_the_body_with_closed() {
    let (feed, mut body) = RequestBody::channel();
    assert!(poll_once(pin!(body.chunk())).is_pending());
    drop(feed);
    assert_eq!(
        poll_once(pin!(body.chunk())),
        Poll::Ready(Some(Err(BodyError::Closed)))
    );
}

#[test]
fn a_failure_reaches_the_reader_after_what_was_handed_over() {
    let (feed, mut body) = RequestBody::channel();
    assert!(poll_once(pin!(body.chunk())).is_pending());
    feed.push(bytes("part"));
    feed.fail(BodyError::TooLarge { limit: 4 });
    assert_eq!(
        poll_once(pin!(body.chunk())),
        Poll::Ready(Some(Ok(bytes("part"))))
    );
    assert_eq!(
        poll_once(pin!(body.chunk())),
        Poll::Ready(Some(Err(BodyError::TooLarge { limit: 4 })))
    );
}

/// Drive `collect` against a feed that hands over `chunks` as asked.
fn collect_fed(chunks: &[&'static str], limit: usize) -> Result<Bytes, BodyError> {
    let (feed, mut body) = RequestBody::channel();
    let mut collecting = pin!(body.collect(limit));
    let mut rest = chunks.iter();
    let mut feed = Some(feed);
    loop {
        if let Poll::Ready(out) = poll_once(collecting.as_mut()) {
            return out;
        }
        let f = feed.as_ref().expect("collect waits after the end");
        assert_eq!(poll_once(pin!(f.want())), Poll::Ready(Want::More));
        match rest.next() {
            Some(c) => {
                f.push(bytes(c));
            }
            None => {
                if let Some(f) = feed.take() {
                    f.finish(http::HeaderMap::new());
                }
            }
        }
    }
}

#[test]
fn collect_joins_chunks_and_keeps_a_single_one_uncopied() {
    assert_eq!(collect_fed(&["ab", "cd", "e"], 10), Ok(bytes("abcde")));
    let only = Bytes::from_static(b"solo");
    let (feed, mut body) = RequestBody::channel();
    let mut collecting = pin!(body.collect(10));
    assert!(poll_once(collecting.as_mut()).is_pending());
    feed.push(only.clone());
    assert!(poll_once(collecting.as_mut()).is_pending());
    feed.finish(http::HeaderMap::new());
    let Poll::Ready(Ok(got)) = poll_once(collecting.as_mut()) else {
        panic!("not collected")
    };
    assert_eq!(got.as_ptr(), only.as_ptr(), "copied");
}

#[test]
fn collect_refuses_a_body_past_its_limit() {
    assert_eq!(
        collect_fed(&["abc", "def"], 5),
        Err(BodyError::TooLarge { limit: 5 })
    );
    assert_eq!(collect_fed(&[], 0), Ok(Bytes::new()));
}

#[test]
fn an_empty_body_is_at_its_end() {
    let mut body = RequestBody::empty();
    assert_eq!(poll_once(pin!(body.chunk())), Poll::Ready(None));
    assert!(body.is_end_stream());
    assert!(body.trailers().is_none());
}

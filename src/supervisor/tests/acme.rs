//! ACME updates: every live worker process is sent each one, and the
//! waiter hears once all of them acknowledged it, or one ended, or the
//! timeout passed.

use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::time::Duration;

use super::*;
use crate::sites::published::Update;
use crate::supervisor::acks::ACK_TIMEOUT;

fn answer() -> Update {
    Update::Http01 {
        token: "t".into(),
        key_authorization: "t.k".into(),
    }
}

/// Publish an answer at `at` with a waiter.
fn publish(rig: &mut Rig, at: Duration) -> Receiver<()> {
    let (done, heard) = channel();
    let update = answer();
    rig.step(
        at,
        Some(Event::Acme {
            update,
            done: Some(done),
        }),
    );
    heard
}

fn applied(rig: &mut Rig, at: Duration, generation: u64, slot: usize, seq: u64) {
    rig.step(
        at,
        Some(Event::Applied {
            generation,
            slot,
            seq,
        }),
    );
}

#[test]
fn an_answer_waits_for_every_worker_process() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    rig.calls();
    let heard = publish(&mut rig, Duration::from_secs(1));
    assert_eq!(rig.orders(), strs(&["g1/w0 publish 1", "g1/w1 publish 1"]));
    applied(&mut rig, Duration::from_secs(1), 1, 0, 1);
    assert_eq!(heard.try_recv(), Err(TryRecvError::Empty));
    // An acknowledgement of another update does not count.
    applied(&mut rig, Duration::from_secs(1), 1, 1, 7);
    assert_eq!(heard.try_recv(), Err(TryRecvError::Empty));
    applied(&mut rig, Duration::from_secs(1), 1, 1, 1);
    assert_eq!(heard.try_recv(), Ok(()));
    assert_eq!(rig.m.acks.waiting(), 0);
}

#[test]
fn a_worker_that_dies_owes_nothing() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    let heard = publish(&mut rig, Duration::from_secs(1));
    applied(&mut rig, Duration::from_secs(1), 1, 0, 1);
    rig.reap(Duration::from_secs(1), 1, 1, Death::Signal(9));
    assert_eq!(heard.try_recv(), Ok(()));
}

#[test]
fn a_draining_generation_is_sent_it_too() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.signal(Duration::from_secs(1), Signal::Hangup);
    rig.ready(Duration::from_secs(1), 2, 1);
    rig.calls();
    let heard = publish(&mut rig, Duration::from_secs(2));
    let mut sent = rig.orders();
    sent.sort();
    assert_eq!(sent, strs(&["g1/w0 publish 1", "g2/w0 publish 1"]));
    applied(&mut rig, Duration::from_secs(2), 2, 0, 1);
    assert_eq!(heard.try_recv(), Err(TryRecvError::Empty));
    applied(&mut rig, Duration::from_secs(2), 1, 0, 1);
    assert_eq!(heard.try_recv(), Ok(()));
}

#[test]
fn worker_threads_need_no_acknowledgement() {
    let mut rig = Rig::new(Kind::Thread, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    let heard = publish(&mut rig, Duration::from_secs(1));
    assert_eq!(heard.try_recv(), Ok(()));
}

#[test]
fn an_unacknowledged_answer_is_given_up_after_the_timeout() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    let at = Duration::from_secs(1);
    let heard = publish(&mut rig, at);
    rig.step(at + ACK_TIMEOUT - MS, None);
    assert_eq!(heard.try_recv(), Err(TryRecvError::Empty));
    rig.step(at + ACK_TIMEOUT, None);
    assert_eq!(heard.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rig.m.acks.waiting(), 0);
}

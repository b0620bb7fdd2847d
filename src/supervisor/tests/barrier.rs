//! Startup: the barrier's quorum, its failures and the rollback.

use std::time::Duration;

use super::*;
use crate::control::{Driver, State};
use crate::supervisor::{Death, Error};

#[test]
fn the_barrier_commits_only_once_every_worker_is_prepared() {
    let mut rig = Rig::new(Kind::Thread, rules(2));
    rig.report(MS, 1, 0, State::Prepared);
    assert!(rig.calls().is_empty(), "COMMIT before the quorum");
    rig.report(2 * MS, 1, 1, State::Prepared);
    assert_eq!(rig.calls(), strs(&["g1/w0 Commit", "g1/w1 Commit"]));
    rig.report(3 * MS, 1, 0, State::Running);
    assert_eq!(rig.m.take_started(), None);
    rig.report(4 * MS, 1, 1, State::Running);
    assert_eq!(rig.m.take_started(), Some(Driver::IoUring));
    assert_eq!(
        rig.transitions(),
        strs(&[
            "g1 Barrier",
            "g1/w0 spawned",
            "g1/w1 spawned",
            "g1/w0 Starting -> Prepared",
            "g1/w1 Starting -> Prepared",
            "g1/w0 Prepared -> Committed",
            "g1/w1 Prepared -> Committed",
            "g1/w0 Committed -> Ready",
            "g1/w1 Committed -> Ready",
            "g1 Serving",
            "phase Starting -> Running",
        ])
    );
    assert_eq!(rig.m.host.notices, [Notice::Ready]);
}

#[test]
fn a_worker_failing_its_barrier_rolls_the_whole_generation_back() {
    let mut rig = Rig::new(Kind::Thread, rules(2));
    rig.report(MS, 1, 0, State::Prepared);
    rig.step(2 * MS, Some(failed(1, 1, "cannot pin")));
    // The failed thread has ended; the other is told to abort.
    assert_eq!(rig.calls(), strs(&["g1/w0 Abort"]));
    assert!(rig.m.take_outcome().is_none(), "done before w0 ended");
    rig.report(3 * MS, 1, 0, State::Exited);
    match rig.m.take_outcome() {
        Some(Err(Error::WorkerFailed { worker: 1, reason })) => assert_eq!(reason, "cannot pin"),
        other => panic!("expected worker 1's failure, got {other:?}"),
    }
    let t = rig.transitions();
    assert_eq!(
        t[3..],
        strs(&[
            "g1/w0 Starting -> Prepared",
            "g1/w1 Starting -> Exited",
            "g1/w0 Prepared -> Draining",
            "g1 RollingBack",
            "phase Starting -> RollingBack",
            "g1/w0 Draining -> Exited",
            "phase RollingBack -> Stopped",
        ])
    );
}

#[test]
fn a_spawn_failure_rolls_back_the_workers_already_spawned() {
    let mut rig = Rig::with(Kind::Process, rules(3), Some((1, 2)));
    assert_eq!(rig.calls(), strs(&["g1/w0 Abort", "g1/w1 Abort"]));
    rig.reap(MS, 1, 0, Death::Code(0));
    rig.reap(MS, 1, 1, Death::Code(0));
    assert!(matches!(
        rig.m.take_outcome(),
        Some(Err(Error::Spawn { worker: 2, .. }))
    ));
}

#[test]
fn the_startup_timeout_names_the_workers_behind_then_kills_them() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.report(MS, 1, 0, State::Prepared);
    rig.step(Duration::from_secs(10) - MS, None);
    assert!(rig.calls().is_empty());
    let timeout = Duration::from_secs(10);
    rig.step(timeout, None);
    assert_eq!(rig.calls(), strs(&["g1/w0 Abort", "g1/w1 Abort"]));
    // Nobody exits: killed after five seconds, given up on two later.
    rig.step(timeout + Duration::from_secs(5), None);
    assert_eq!(
        rig.calls(),
        strs(&[
            "g1/w0 terminate",
            "g1/w0 kill",
            "g1/w1 terminate",
            "g1/w1 kill"
        ])
    );
    assert!(rig.m.take_outcome().is_none());
    rig.step(timeout + Duration::from_secs(7), None);
    match rig.m.take_outcome() {
        Some(Err(Error::StartupTimeout { workers, phase, .. })) => {
            assert_eq!((workers, phase), (vec![1], "prepared"));
        }
        other => panic!("expected a startup timeout, got {other:?}"),
    }
}

#[test]
fn a_reaped_worker_s_late_reason_becomes_the_error() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.reap(MS, 1, 1, Death::Code(1));
    assert_eq!(rig.calls(), strs(&["g1/w0 Abort"]));
    rig.reap(2 * MS, 1, 0, Death::Code(0));
    // Every worker has ended, but the reason may still be on its way.
    assert!(rig.m.take_outcome().is_none());
    rig.step(3 * MS, Some(failed(1, 1, "no such file")));
    match rig.m.take_outcome() {
        Some(Err(Error::WorkerFailed { worker: 1, reason })) => assert_eq!(reason, "no such file"),
        other => panic!("expected the late reason, got {other:?}"),
    }
}

#[test]
fn a_reaped_worker_without_a_reason_is_reported_by_its_death() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.reap(MS, 1, 0, Death::Signal(11));
    rig.step(100 * MS, None);
    assert!(rig.m.take_outcome().is_none());
    rig.step(201 * MS, None);
    assert!(matches!(
        rig.m.take_outcome(),
        Some(Err(Error::WorkerExited {
            worker: 0,
            death: Death::Signal(11)
        }))
    ));
}

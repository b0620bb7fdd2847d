//! Serving: crashes and the restart budget, beats, reloads, shutdown.

use std::time::Duration;

use super::*;
use crate::control::{Driver, State};
use crate::supervisor::{Death, Error, Phase, Signal};

#[test]
fn a_crash_is_replaced_after_its_backoff_and_a_crash_loop_stops_the_server() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    rig.transitions();
    rig.calls();
    let kill = Death::Signal(9);
    rig.reap(Duration::from_secs(1), 1, 0, kill);
    rig.step(Duration::from_secs(1) + 49 * MS, None);
    assert_eq!(
        rig.transitions(),
        strs(&["g1/w0 Ready -> Exited", "g1/w0 Exited -> Crashed"])
    );
    // 50 ms later: a replacement on the same slot, committed on its own.
    rig.step(Duration::from_secs(1) + 50 * MS, None);
    rig.report(Duration::from_secs(2), 1, 0, State::Prepared);
    rig.report(Duration::from_secs(2), 1, 0, State::Running);
    assert_eq!(
        rig.transitions(),
        strs(&[
            "g1/w0 spawned",
            "g1/w0 Crashed -> Starting",
            "g1/w0 Starting -> Prepared",
            "g1/w0 Prepared -> Committed",
            "g1/w0 Committed -> Ready",
        ])
    );
    assert!(rig.calls().contains(&"g1/w0 Commit".to_string()));
    // Two more deaths within the window: past max_restarts (2).
    rig.reap(Duration::from_secs(3), 1, 0, kill);
    rig.step(Duration::from_secs(4), None);
    rig.reap(Duration::from_secs(5), 1, 0, kill);
    assert_eq!(rig.m.phase, Phase::Draining);
    assert!(rig.calls().contains(&"g1/w1 Drain".to_string()));
    rig.reap(Duration::from_secs(6), 1, 1, Death::Code(0));
    match rig.m.take_outcome() {
        Some(Err(Error::CrashLoop {
            worker: 0,
            deaths: 3,
            ..
        })) => {}
        other => panic!("expected a crash loop, got {other:?}"),
    }
}

#[test]
fn a_crash_loop_counts_its_deaths_in_words() {
    let crash_loop = |deaths| Error::CrashLoop {
        worker: 0,
        deaths,
        window_s: 60,
        last: Death::Signal(9),
    };
    // --max-restarts 0: the first death is the loop.
    assert_eq!(
        crash_loop(1).to_string(),
        "crash loop: worker 0 died 1 time in 60 s, last: signal 9"
    );
    assert!(crash_loop(6).to_string().contains("died 6 times in 60 s"));
}

#[test]
fn a_worker_process_that_misses_two_beats_is_killed_and_replaced() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.calls();
    let s = Duration::from_secs(1);
    rig.step(MS, None);
    assert_eq!(rig.calls(), strs(&["g1/w0 Beat(1)"]));
    // Unanswered: a miss and a fresh beat, then wedged.
    rig.step(s + MS, None);
    assert_eq!(rig.calls(), strs(&["g1/w0 Beat(2)"]));
    rig.step(2 * s + 2 * MS, None);
    assert_eq!(rig.calls(), strs(&["g1/w0 kill"]));
    // Its death is a crash like any other, but counted as a beat timeout.
    rig.reap(2 * s + 3 * MS, 1, 0, Death::Signal(9));
    assert!(rig
        .transitions()
        .ends_with(&strs(&["g1/w0 Ready -> Exited", "g1/w0 Exited -> Crashed"])));
    rig.step(2 * s + 53 * MS, None);
    assert_eq!(rig.m.host.restarts, strs(&["w0 beat_timeout"]));
}

#[test]
fn a_restart_is_counted_by_cause_when_its_replacement_starts() {
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    let s = Duration::from_secs(1);
    rig.reap(s, 1, 0, Death::Signal(9));
    // Not before the backoff is over and the replacement spawned.
    rig.step(s + 49 * MS, None);
    assert!(rig.m.host.restarts.is_empty());
    rig.step(s + 50 * MS, None);
    assert_eq!(rig.m.host.restarts, strs(&["w0 crash"]));
    // The replacement is ready; one that exits on its own is a crash too.
    rig.report(2 * s, 1, 0, State::Prepared);
    rig.report(2 * s, 1, 0, State::Running);
    rig.reap(3 * s, 1, 0, Death::Code(1));
    rig.step(4 * s, None);
    assert_eq!(rig.m.host.restarts, strs(&["w0 crash", "w0 crash"]));
    // A death while draining is no crash, and no restart.
    rig.signal(5 * s, Signal::Terminate);
    rig.reap(5 * s + MS, 1, 1, Death::Signal(9));
    rig.step(6 * s, None);
    assert_eq!(rig.m.host.restarts.len(), 2);
}

#[test]
fn a_crash_loop_stops_the_server_without_counting_a_restart() {
    let mut r = rules(1);
    r.max_restarts = 0;
    let mut rig = Rig::new(Kind::Process, r);
    rig.ready(Duration::ZERO, 1, 1);
    rig.reap(Duration::from_secs(1), 1, 0, Death::Signal(9));
    rig.step(Duration::from_secs(2), None);
    match rig.m.take_outcome() {
        Some(Err(Error::CrashLoop { deaths: 1, .. })) => {}
        other => panic!("expected a crash loop, got {other:?}"),
    }
    assert!(rig.m.host.restarts.is_empty());
}

#[test]
fn an_answered_beat_keeps_a_worker_alive_and_a_wedged_thread_is_only_reported() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.calls();
    let s = Duration::from_secs(1);
    for n in 1..=3u64 {
        rig.step(s * (n as u32 - 1) + MS, None);
        let mut reply = report(1, 0, State::Running);
        if let Event::Worker { report, .. } = &mut reply {
            report.beat = Some(n);
        }
        rig.step(s * (n as u32 - 1) + 2 * MS, Some(reply));
    }
    assert_eq!(
        rig.calls(),
        strs(&["g1/w0 Beat(1)", "g1/w0 Beat(2)", "g1/w0 Beat(3)"])
    );
    for n in 3..8u32 {
        rig.step(s * n + MS, None);
    }
    let calls = rig.calls();
    assert!(!calls.iter().any(|c| c.ends_with("kill")), "{calls:?}");
}

#[test]
fn a_reload_drains_the_old_generation_only_after_the_new_one_is_ready() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.transitions();
    rig.calls();
    let s = Duration::from_secs(1);
    rig.signal(s, Signal::Hangup);
    rig.report(s, 2, 0, State::Prepared);
    assert_eq!(rig.orders(), strs(&["g2/w0 Commit"]), "g1 drained too soon");
    rig.report(s, 2, 0, State::Running);
    // Told first that the new generation reads the shared UDP sockets.
    assert_eq!(rig.orders(), strs(&["g1/w0 Handover", "g1/w0 Drain"]));
    rig.reap(2 * s, 1, 0, Death::Code(0));
    assert_eq!(
        rig.transitions(),
        strs(&[
            "phase Running -> Reloading",
            "g2 Barrier",
            "g2/w0 spawned",
            "g2/w0 Starting -> Prepared",
            "g2/w0 Prepared -> Committed",
            "g2/w0 Committed -> Ready",
            "g2 Serving",
            "g1/w0 Ready -> Draining",
            "g1 Draining",
            "phase Reloading -> Running",
            "g1/w0 Draining -> Exited",
        ])
    );
    assert!(
        rig.m.old.is_empty(),
        "the drained generation was not reaped"
    );
    // Its exit was asked for: no crash, no replacement.
    rig.step(3 * s, None);
    assert!(rig.transitions().is_empty());
}

#[test]
fn a_failed_reload_is_rolled_back_and_the_old_generation_keeps_serving() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.m.host.reload = Some(rules(2));
    rig.transitions();
    rig.calls();
    let s = Duration::from_secs(1);
    rig.signal(s, Signal::Hangup);
    rig.report(s, 2, 0, State::Prepared);
    rig.step(s, Some(failed(2, 1, "injected prepare failure")));
    assert_eq!(rig.orders(), strs(&["g2/w0 Abort"]));
    rig.report(s + MS, 2, 0, State::Exited);
    assert_eq!(rig.m.phase, Phase::Running);
    assert!(rig.m.take_outcome().is_none());
    assert_eq!(rig.m.current.as_ref().map(|g| g.id), Some(1));
    assert!(rig.m.next.is_none());
    let t = rig.transitions();
    assert_eq!(
        t.first().map(String::as_str),
        Some("phase Running -> Reloading")
    );
    assert!(!t.iter().any(|x| x.starts_with("g1")), "g1 touched: {t:?}");
    assert_eq!(rig.m.host.notices, [Notice::Ready, Notice::Ready]);
}

#[test]
fn a_refused_reload_changes_nothing() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.m.host.reload = None;
    rig.transitions();
    rig.signal(Duration::from_secs(1), Signal::Hangup);
    assert!(rig.transitions().is_empty());
}

#[test]
fn sigterm_during_a_reload_rolls_it_back_then_drains_the_old_generation() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.calls();
    let s = Duration::from_secs(1);
    rig.signal(s, Signal::Hangup);
    rig.signal(s, Signal::Terminate);
    assert_eq!(rig.orders(), strs(&["g2/w0 Abort"]));
    rig.report(s + MS, 2, 0, State::Exited);
    // The rolled-back generation is let go, then the deferred SIGTERM runs.
    assert_eq!(rig.orders(), strs(&["g1/w0 Drain", "g2/w0 dropped"]));
    assert_eq!(rig.m.phase, Phase::Draining);
    rig.report(s + 2 * MS, 1, 0, State::Exited);
    assert!(matches!(rig.m.take_outcome(), Some(Ok(()))));
}

#[test]
fn drain_then_force_deadlines_cut_and_kill_a_stuck_process() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.calls();
    let s = Duration::from_secs(1);
    rig.signal(s, Signal::Terminate);
    assert_eq!(rig.calls(), strs(&["g1/w0 Drain"]));
    rig.step(s + Duration::from_secs(30) - MS, None);
    assert!(rig.calls().is_empty());
    rig.step(s + Duration::from_secs(30), None);
    assert_eq!(rig.calls(), strs(&["g1/w0 terminate"]));
    rig.step(s + Duration::from_secs(35), None);
    assert_eq!(rig.calls(), strs(&["g1/w0 kill"]));
    rig.reap(s + Duration::from_secs(35), 1, 0, Death::Signal(9));
    assert!(matches!(
        rig.m.take_outcome(),
        Some(Err(Error::ConnectionsCut { connections: 1 }))
    ));
    assert!(rig.transitions().ends_with(&strs(&[
        "phase Running -> Draining",
        "g1/w0 Ready -> Draining",
        "g1 Draining",
        "g1/w0 Draining -> Exited",
        "phase Draining -> Stopped",
    ])));
}

#[test]
fn a_clean_drain_is_ok_and_cut_connections_are_reported() {
    let mut rig = Rig::new(Kind::Thread, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    rig.signal(MS, Signal::Terminate);
    rig.report(2 * MS, 1, 0, State::Exited);
    assert!(rig.m.take_outcome().is_none());
    let mut last = report(1, 1, State::Exited);
    if let Event::Worker { report, .. } = &mut last {
        report.cut = 3;
    }
    rig.step(3 * MS, Some(last));
    assert!(matches!(
        rig.m.take_outcome(),
        Some(Err(Error::ConnectionsCut { connections: 3 }))
    ));
}

#[test]
fn survivors_are_reported_a_second_after_the_force_deadline() {
    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.signal(Duration::ZERO, Signal::Terminate);
    rig.step(Duration::from_secs(36) - MS, None);
    assert!(rig.m.take_outcome().is_none());
    rig.step(Duration::from_secs(36), None);
    match rig.m.take_outcome() {
        Some(Err(Error::Survivors { survivors })) => {
            assert_eq!(survivors, "worker 0 (generation 1, pid 101)");
        }
        other => panic!("expected survivors, got {other:?}"),
    }
}

#[test]
fn a_second_sigint_abandons_the_drain_and_a_sigint_rollback() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    rig.signal(MS, Signal::Interrupt);
    assert!(rig.m.take_outcome().is_none());
    rig.signal(2 * MS, Signal::Interrupt);
    assert!(matches!(rig.m.take_outcome(), Some(Err(Error::Abandoned))));

    let mut rig = Rig::new(Kind::Process, rules(1));
    rig.signal(MS, Signal::Interrupt);
    assert_eq!(rig.calls(), strs(&["g1/w0 Abort"]));
    rig.signal(2 * MS, Signal::Interrupt);
    assert_eq!(rig.calls(), strs(&["g1/w0 kill"]));
    assert!(matches!(rig.m.take_outcome(), Some(Err(Error::Abandoned))));
}

#[test]
fn sighup_during_startup_is_ignored() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.signal(MS, Signal::Hangup);
    rig.ready(2 * MS, 1, 1);
    assert_eq!(rig.m.take_started(), Some(Driver::IoUring));
    assert_eq!(rig.m.next_id, 2, "a second generation was started");
}

#[test]
fn losing_the_supervisor_drops_every_worker_handle() {
    // A worker watches its control channel: once the supervisor's handle
    // is gone (the supervisor exited or crashed), it exits on its own.
    let mut rig = Rig::new(Kind::Process, rules(2));
    rig.ready(Duration::ZERO, 1, 2);
    rig.signal(MS, Signal::Hangup);
    rig.calls();
    let Rig { m, log, .. } = rig;
    drop(m);
    let mut dropped = log.borrow().clone();
    dropped.sort();
    assert_eq!(
        dropped,
        strs(&[
            "g1/w0 dropped",
            "g1/w1 dropped",
            "g2/w0 dropped",
            "g2/w1 dropped"
        ])
    );
}

#[test]
fn signals_during_a_reload_rollback_are_kept_bounded_and_replayed() {
    let mut rig = Rig::new(Kind::Thread, rules(1));
    rig.ready(Duration::ZERO, 1, 1);
    let s = Duration::from_secs(1);
    rig.signal(s, Signal::Hangup);
    rig.signal(s, Signal::Interrupt);
    for _ in 0..1000 {
        rig.signal(s, Signal::Hangup);
        rig.signal(s, Signal::Interrupt);
    }
    assert!(rig.m.deferred.len() <= 4, "{} kept", rig.m.deferred.len());
    rig.calls();
    // The rollback ends: the first SIGINT drains, the second abandons.
    rig.report(s + MS, 2, 0, State::Exited);
    assert!(matches!(rig.m.take_outcome(), Some(Err(Error::Abandoned))));
}

//! Test-only fault hooks, read from `SERVERY_TEST_FAULT`, compiled in only
//! with the `failpoints` cargo feature.
//!
//! The barrier tests need a worker that is slow to prepare or fails to.
//! Only the test suites set the variable, and only builds with `failpoints`
//! read it: the test suite turns the feature on (Cargo.toml's
//! dev-dependency on servery itself), while `cargo build --release` leaves
//! it off, so a release binary has no hook and not even the variable's name
//! (every `for_worker` below is then a constant `None`, and the branches
//! that act on it are compiled out). An unset or unparsable value injects
//! nothing. Syntax: `;`-separated items,
//! `delay-prepare=WORKER:MILLIS`, `fail-prepare=WORKER`,
//! `ignore-drain=WORKER`, `hang-after-ready=WORKER`, `panic-on=TARGET`
//! (every worker's handler call panics for requests to exactly TARGET), or
//! `delay-acme=MILLIS` (every worker process sleeps before applying an
//! ACME update from its supervisor), or `unsteered-quic=1` (the QUIC
//! steering program is not attached, so datagrams land on any worker's
//! socket and are handed to their owners).

use std::time::Duration;

/// The fault specification the tests set, if this build reads one.
#[inline]
fn spec() -> Option<String> {
    #[cfg(feature = "failpoints")]
    {
        std::env::var("SERVERY_TEST_FAULT").ok()
    }
    #[cfg(not(feature = "failpoints"))]
    {
        None
    }
}

/// A fault injected into one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Sleep before reporting PREPARED.
    DelayPrepare(Duration),
    /// Fail instead of reporting PREPARED.
    FailPrepare,
    /// Ignore DRAIN (and, as a process, SIGTERM): only a kill ends it.
    IgnoreDrain,
    /// Wedge the event loop right after READY: beats go unanswered.
    HangAfterReady,
}

/// The fault (if any) configured for `worker`.
pub fn for_worker(worker: usize) -> Option<Fault> {
    parse(&spec()?, worker)
}

/// The request target whose handler call panics, if configured.
pub fn panic_target() -> Option<Box<str>> {
    panic_target_in(&spec()?)
}

/// How long a worker process waits before applying an ACME update, if
/// configured.
pub fn acme_delay() -> Option<Duration> {
    acme_delay_in(&spec()?)
}

/// Whether the QUIC steering program is left unattached.
pub fn quic_unsteered() -> bool {
    spec().is_some_and(|s| s.split(';').any(|item| item.trim() == "unsteered-quic=1"))
}

fn acme_delay_in(spec: &str) -> Option<Duration> {
    spec.split(';').find_map(|item| {
        let (kind, arg) = item.split_once('=')?;
        let ms = (kind.trim() == "delay-acme").then(|| arg.trim().parse().ok())??;
        Some(Duration::from_millis(ms))
    })
}

fn panic_target_in(spec: &str) -> Option<Box<str>> {
    spec.split(';').find_map(|item| {
        let (kind, arg) = item.split_once('=')?;
        (kind.trim() == "panic-on").then(|| arg.trim().into())
    })
}

fn parse(spec: &str, worker: usize) -> Option<Fault> {
    for item in spec.split(';') {
        let (kind, arg) = item.split_once('=')?;
        match kind.trim() {
            "delay-prepare" => {
                let (w, ms) = arg.split_once(':')?;
                if w.trim().parse::<usize>().ok()? == worker {
                    return Some(Fault::DelayPrepare(Duration::from_millis(
                        ms.trim().parse().ok()?,
                    )));
                }
            }
            "fail-prepare" if arg.trim().parse::<usize>().ok()? == worker => {
                return Some(Fault::FailPrepare)
            }
            "ignore-drain" if arg.trim().parse::<usize>().ok()? == worker => {
                return Some(Fault::IgnoreDrain)
            }
            "hang-after-ready" if arg.trim().parse::<usize>().ok()? == worker => {
                return Some(Fault::HangAfterReady)
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_items_for_the_named_worker() {
        let s = "delay-prepare=1:250;fail-prepare=0";
        assert_eq!(parse(s, 0), Some(Fault::FailPrepare));
        assert_eq!(
            parse(s, 1),
            Some(Fault::DelayPrepare(Duration::from_millis(250)))
        );
        assert_eq!(parse(s, 2), None);
        assert_eq!(parse("garbage", 0), None);
    }

    #[test]
    fn panic_on_names_a_target_for_every_worker() {
        let s = "fail-prepare=3;panic-on=/boom";
        assert_eq!(panic_target_in(s).as_deref(), Some("/boom"));
        assert_eq!(panic_target_in("fail-prepare=0"), None);
    }

    #[test]
    fn delay_acme_is_for_every_worker_process() {
        let s = "fail-prepare=3;delay-acme=1500";
        assert_eq!(acme_delay_in(s), Some(Duration::from_millis(1500)));
        assert_eq!(parse(s, 0), None);
        assert_eq!(acme_delay_in("delay-acme=soon"), None);
        assert_eq!(acme_delay_in("panic-on=/x"), None);
    }
}

//! Logs a client cannot inflate: what servery says about a peer's
//! protocol misbehaviour.
//!
//! Our HTTP/2 layer reports each connection it ends for the client's
//! protocol error (or its flood of resets) with one WARN event of target
//! [`TARGET`]. Printed as they come, a hostile client opening connections
//! would decide how many lines servery writes (the `h2` crate we used
//! before wrote one per offending connection: a probe of 1,055 such
//! connections wrote 1,055 lines). Here every such event is counted
//! (`servery_peer_misbehaviour_total` in /metrics) and at most
//! [`LINES_PER_WINDOW`] of them per [`WINDOW`] are printed by each process;
//! the rest are summed up in one line when their window ends.
//!
//! Owns: which events are a peer's ([`is_peer`]), the process's count
//! ([`count`], carried to the supervisor in a worker process's beats like
//! the compression counters), the printing budget ([`Budget`], a filter on
//! the log's output) and the thread that writes the summary lines. Does not
//! own the subscriber (`init_logging` puts these pieces in it), nor
//! servery's other warnings: they are the operator's, neither counted nor
//! held back.
//!
//! Flow of one WARN event of [`TARGET`]:
//! 1. [`Count`] sees it whatever `RUST_LOG` says: the count goes up.
//! 2. The output's filter passes it if `RUST_LOG` does, then asks the
//!    [`Budget`]: one of the first [`LINES_PER_WINDOW`] of its window is
//!    printed; any later one is suppressed and counted in the window.
//! 3. The first suppression starts the reporter thread; at the end of each
//!    window that suppressed lines it writes `suppressed N lines of peer
//!    misbehaviour in the last 10 s`. A window that suppressed nothing ends
//!    silently, at the next event after it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};

/// The target of servery's events about what a peer sent.
pub const TARGET: &str = "servery::peer";

/// Targets whose WARN and ERROR events are about what a peer sent: ours
/// only (rustls is built without its `logging` feature, see
/// `init_logging`; servery's other warnings are the operator's).
const PEER_CRATES: [&str; 1] = [TARGET];

/// Lines of peer misbehaviour a process prints per window: enough to show
/// an operator what kind of misbehaviour it is (a few different messages),
/// few enough that a flood of hostile connections adds at most this many
/// lines every [`WINDOW`] (30 a minute) per process.
pub const LINES_PER_WINDOW: u32 = 5;

/// The window the budget counts over: short enough that a new kind of
/// misbehaviour shows within seconds, long enough that the summary lines
/// of a sustained flood stay a handful a minute.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Peer-misbehaviour events this process has seen (printed or not).
static SEEN: AtomicU64 = AtomicU64::new(0);

/// The budget of this process's output.
static BUDGET: Mutex<Window> = Mutex::new(Window::new());

/// Peer-misbehaviour events this process has seen since it started.
pub fn count() -> u64 {
    SEEN.load(Ordering::Relaxed)
}

/// A WARN or ERROR event about a peer ([`TARGET`] or below it).
pub fn is_peer(meta: &Metadata<'_>) -> bool {
    *meta.level() <= Level::WARN && from_peer_crate(meta.target())
}

/// `target` is one of the [`PEER_CRATES`] or a module of one.
fn from_peer_crate(target: &str) -> bool {
    PEER_CRATES.iter().any(|c| {
        target
            .strip_prefix(c)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// The layer that counts peer misbehaviour: put it in the subscriber with
/// [`counting`] as its own filter, so it sees those events whatever the
/// output's filter says.
#[derive(Debug)]
pub struct Count;

impl<S: Subscriber> Layer<S> for Count {
    fn on_event(&self, _: &Event<'_>, _: Context<'_, S>) {
        SEEN.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`Count`]'s filter: peer events only. Decided by callsite, once, so
/// every other event costs it nothing; its hint keeps the process's
/// maximum level what the output's filter makes it.
pub fn counting<S>() -> impl Filter<S> {
    tracing_subscriber::filter::filter_fn(is_peer).with_max_level_hint(LevelFilter::WARN)
}

/// The output's budget for peer misbehaviour: combined (`and`) with the
/// `RUST_LOG` filter, it holds back peer events past the window's
/// allowance and passes everything else.
#[derive(Debug)]
pub struct Budget;

impl<S> Filter<S> for Budget {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    /// A peer callsite is decided per event (`event_enabled`), so it is
    /// `sometimes`: tracing-subscriber (a debug assertion in 0.3) expects
    /// an event held back per event to have been asked `enabled` first,
    /// which it skips for `always`. Any other callsite is left to the
    /// other filter (`always`), at no cost per event.
    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if is_peer(meta) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        !is_peer(event.metadata()) || admit(Instant::now())
    }

    /// No limit of its own (`None` would mean "unknown" and lift the
    /// process's maximum level to TRACE).
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }
}

/// Whether a peer line seen at `now` is printed; starts the reporter at
/// the first suppression.
fn admit(now: Instant) -> bool {
    let mut w = BUDGET.lock().unwrap_or_else(PoisonError::into_inner);
    let printed = w.admit(now);
    if !printed && w.reporter == Reporter::None {
        let started = std::thread::Builder::new()
            .name("servery-peerlog".into())
            .spawn(report);
        w.reporter = match started {
            Ok(_) => Reporter::Running,
            Err(_) => Reporter::Failed,
        };
    }
    printed
}

/// The reporter thread: at the end of each window that suppressed lines,
/// one line saying how many. Runs until the process exits.
fn report() {
    loop {
        let now = Instant::now();
        let (closed, ends_at) = {
            let mut w = BUDGET.lock().unwrap_or_else(PoisonError::into_inner);
            (w.close(now), w.ends_at())
        };
        if let Some((n, age)) = closed {
            tracing::warn!(
                suppressed = n,
                "suppressed {n} lines of peer misbehaviour in the last {} s \
                 (all counted in servery_peer_misbehaviour_total)",
                age.as_secs()
            );
        }
        let wait = ends_at.map_or(WINDOW, |t| t.saturating_duration_since(now));
        // At least a millisecond: no busy loop on a window just ending.
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// Whether the reporter thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reporter {
    /// Not needed yet: nothing was suppressed.
    None,
    Running,
    /// Could not be started: windows end at the next event, unreported.
    Failed,
}

/// One process's printing budget: the current window, what it printed and
/// what it held back.
#[derive(Debug)]
struct Window {
    /// When the current window opened; `None` between windows.
    opened: Option<Instant>,
    printed: u32,
    suppressed: u64,
    reporter: Reporter,
}

impl Window {
    const fn new() -> Window {
        Window {
            opened: None,
            printed: 0,
            suppressed: 0,
            reporter: Reporter::None,
        }
    }

    /// A peer line at `now`: printed (true) or suppressed. A window that
    /// suppressed lines stays open until the reporter has summed it up
    /// ([`Window::close`]), so no line goes uncounted in a summary.
    fn admit(&mut self, now: Instant) -> bool {
        let open = self.opened.is_some_and(|t| {
            now.saturating_duration_since(t) < WINDOW
                || (self.suppressed > 0 && self.reporter == Reporter::Running)
        });
        if !open {
            self.opened = Some(now);
            self.printed = 0;
            self.suppressed = 0;
        }
        if self.printed < LINES_PER_WINDOW {
            self.printed += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// At `now`: end the window if its time is up, returning how many lines
    /// it suppressed and how long it lasted (`None` if it suppressed none).
    fn close(&mut self, now: Instant) -> Option<(u64, Duration)> {
        let opened = self.opened?;
        let age = now.saturating_duration_since(opened);
        if age < WINDOW {
            return None;
        }
        let n = std::mem::take(&mut self.suppressed);
        self.opened = None;
        self.printed = 0;
        (n > 0).then_some((n, age))
    }

    /// When the open window's time is up.
    fn ends_at(&self) -> Option<Instant> {
        self.opened.map(|t| t + WINDOW)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> Window {
        Window {
            reporter: Reporter::Running,
            ..Window::new()
        }
    }

    /// What a subscriber wrote.
    #[derive(Clone, Default)]
    struct Capture(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// The one test that goes through the process's count and budget
    /// (the statics): any other would race it.
    #[test]
    fn peer_warnings_are_all_counted_but_printed_within_the_budget() {
        use tracing_subscriber::filter::Targets;
        let flood = || {
            for _ in 0..100 {
                tracing::warn!(target: TARGET, "HTTP/2 client broke the protocol");
            }
            tracing::info!(target: TARGET, "not misbehaviour");
            tracing::warn!(target: "servery::worker", "our own warning");
        };
        // RUST_LOG=off: nothing printed, everything counted, no budget spent.
        let quiet = Capture::default();
        let sink = quiet.clone();
        let before = count();
        let sub = crate::telemetry::subscriber(
            "off".parse::<Targets>().unwrap(),
            move || sink.clone(),
            false,
        );
        tracing::subscriber::with_default(sub, flood);
        assert_eq!(count() - before, 100);
        assert_eq!(quiet.text(), "");
        // The default level: the window's allowance, and our own line.
        let out = Capture::default();
        let sink = out.clone();
        let sub = crate::telemetry::subscriber(
            "warn".parse::<Targets>().unwrap(),
            move || sink.clone(),
            false,
        );
        tracing::subscriber::with_default(sub, flood);
        assert_eq!(count() - before, 200);
        let text = out.text();
        assert_eq!(
            text.matches("broke the protocol").count(),
            LINES_PER_WINDOW as usize,
            "{text}"
        );
        assert_eq!(text.matches("our own warning").count(), 1, "{text}");
        assert!(!text.contains("not misbehaviour"), "{text}");
        let w = BUDGET.lock().unwrap();
        assert_eq!(w.suppressed, 100 - u64::from(LINES_PER_WINDOW));
        assert_eq!(w.reporter, Reporter::Running);
    }

    #[test]
    fn only_the_peer_target_and_below_it_are_peers() {
        assert!(from_peer_crate("servery::peer"));
        assert!(from_peer_crate("servery::peer::h2"));
        assert!(!from_peer_crate("servery::peers"));
        assert!(!from_peer_crate("servery::worker::conn::h2"));
        assert!(!from_peer_crate("h2"));
    }

    #[test]
    fn a_window_prints_its_allowance_then_suppresses() {
        let t0 = Instant::now();
        let mut w = running();
        let printed = (0..1000).filter(|_| w.admit(t0)).count();
        assert_eq!(printed, LINES_PER_WINDOW as usize);
        assert_eq!(w.suppressed, 1000 - LINES_PER_WINDOW as u64);
    }

    #[test]
    fn a_window_closes_with_its_count_only_when_its_time_is_up() {
        let t0 = Instant::now();
        let mut w = running();
        for _ in 0..8 {
            w.admit(t0);
        }
        assert_eq!(w.close(t0 + WINDOW / 2), None);
        assert_eq!(w.ends_at(), Some(t0 + WINDOW));
        assert_eq!(w.close(t0 + WINDOW), Some((3, WINDOW)));
        assert_eq!(w.ends_at(), None);
        // The next window has a fresh allowance.
        assert!(w.admit(t0 + WINDOW));
    }

    #[test]
    fn a_window_with_suppressed_lines_waits_for_its_summary() {
        let t0 = Instant::now();
        let mut w = running();
        for _ in 0..6 {
            w.admit(t0);
        }
        // The reporter is late: still the old window, still suppressing.
        assert!(!w.admit(t0 + 2 * WINDOW));
        assert_eq!(w.close(t0 + 2 * WINDOW), Some((2, 2 * WINDOW)));
    }

    #[test]
    fn a_quiet_window_ends_silently_at_the_next_line() {
        let t0 = Instant::now();
        let mut w = Window::new();
        assert!(w.admit(t0));
        assert!(w.admit(t0 + WINDOW));
        assert_eq!(w.opened, Some(t0 + WINDOW));
        assert_eq!(w.printed, 1);
        assert_eq!(w.close(t0 + 2 * WINDOW), None);
    }

    #[test]
    fn without_a_reporter_windows_end_on_time_unreported() {
        let t0 = Instant::now();
        let mut w = Window {
            reporter: Reporter::Failed,
            ..Window::new()
        };
        for _ in 0..6 {
            w.admit(t0);
        }
        assert!(w.admit(t0 + WINDOW));
        assert_eq!(w.suppressed, 0);
    }
}

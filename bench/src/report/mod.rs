//! What a run measured, as one serializable record ([`Report`]), and its two renderings: the
//! human summary ([`Report::summary`]) and JSON ([`Report::to_json`]).
//!
//! Owns: the JSON schema (field names and units are part of the contract with `scripts/`, so
//! changing one means bumping [`SCHEMA`]) and how numbers are rounded for people.
//! Does not own: measuring (`load`) or where the output goes (`cli`).
//!
//! Flow:
//! 1. `load::run` merges worker tallies and calls `Report::new` with the measured window.
//! 2. The CLI prints [`Report::summary`] and writes [`Report::to_json`] where `--json` says.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::load::ErrorClass;
use crate::load::Tally;
use crate::plan::{Mode, Plan};

/// Identifies the JSON layout; bump on any incompatible change.
pub const SCHEMA: &str = "servery-load/1";

/// One run's results. Latencies are microseconds; rates are per second of the timed window.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub schema: &'static str,
    /// `"closed"` or `"open"`.
    pub mode: &'static str,
    pub urls: Vec<String>,
    /// The request method (`GET` unless `--method` or `--body-file` said otherwise).
    pub method: String,
    /// Bytes of the body sent with every request; `null` when none was sent.
    pub request_body_bytes: Option<u64>,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub churn: bool,
    /// Open loop: the target request rate (requests/s, all threads); `null` for closed loop.
    pub rate: Option<f64>,
    /// The `--requests` budget, if any.
    pub requests_limit: Option<u64>,
    pub warmup_s: f64,
    /// The timed window actually measured (shorter than `--duration` when `--requests` ran out).
    pub duration_s: f64,
    /// Timed requests answered completely with the expected status.
    pub requests: u64,
    /// Response bytes (heads, framing and bodies) of the counted requests.
    pub bytes: u64,
    pub rps: f64,
    pub bytes_per_sec: f64,
    pub latency_us: Latency,
    pub errors: Errors,
    /// Connections opened during the window.
    pub connects: u64,
    /// Open loop: requests scheduled in the window but never sent (the server fell behind).
    pub unsent: u64,
    /// Timed requests sent but unanswered when the window closed.
    pub unfinished: u64,
    /// CPU time (user + system) the client's worker threads used in the window.
    pub client_cpu_s: f64,
    /// Latency at each of [`CDF_QUANTILES`], for drawing a CDF (empty when nothing was
    /// counted). Library use only: not part of the `servery-load/1` JSON.
    #[serde(skip)]
    pub latency_cdf: Vec<Quantile>,
}

/// The quantiles [`Report::latency_cdf`] holds: deciles for the body, then the "nines" a
/// log-scale tail plot needs, then the maximum.
pub const CDF_QUANTILES: [f64; 18] = [
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999,
    0.99999, 1.0,
];

/// One point of a latency CDF: the fraction `q` of counted requests took at most `us`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Quantile {
    pub q: f64,
    pub us: u64,
}

/// Latency distribution of counted requests, microseconds. All zero when nothing was counted.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Latency {
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Failed timed requests by class; see [`ErrorClass`] for what each means.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub timeout: u64,
    pub status: u64,
    pub short_body: u64,
    pub total: u64,
}

impl Errors {
    /// The count for one class.
    pub fn get(&self, class: ErrorClass) -> u64 {
        match class {
            ErrorClass::Connect => self.connect,
            ErrorClass::Read => self.read,
            ErrorClass::Timeout => self.timeout,
            ErrorClass::Status => self.status,
            ErrorClass::ShortBody => self.short_body,
        }
    }
}

/// The summary and CDF of a latency histogram (microseconds); all zero and empty when nothing
/// was recorded.
pub(crate) fn latency(h: &Histogram<u64>) -> (Latency, Vec<Quantile>) {
    if h.is_empty() {
        let zero = Latency {
            min: 0,
            mean: 0.0,
            p50: 0,
            p90: 0,
            p99: 0,
            p999: 0,
            max: 0,
        };
        return (zero, Vec::new());
    }
    let latency = Latency {
        min: h.min(),
        mean: h.mean(),
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    };
    let cdf = CDF_QUANTILES
        .iter()
        .map(|&q| Quantile {
            q,
            us: h.value_at_quantile(q),
        })
        .collect();
    (latency, cdf)
}

impl Report {
    pub(crate) fn new(plan: &Plan, tally: &Tally, window: Duration) -> Report {
        let secs = window.as_secs_f64();
        let per_sec = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let (latency, latency_cdf) = latency(&tally.latency);
        let e = |class| tally.errors(class);
        let errors = Errors {
            connect: e(ErrorClass::Connect),
            read: e(ErrorClass::Read),
            timeout: e(ErrorClass::Timeout),
            status: e(ErrorClass::Status),
            short_body: e(ErrorClass::ShortBody),
            total: ErrorClass::ALL.iter().map(|&c| e(c)).sum(),
        };
        Report {
            schema: SCHEMA,
            mode: plan.mode.name(),
            urls: plan.target.urls.clone(),
            method: plan.method.clone(),
            request_body_bytes: plan.body.as_ref().map(|b| b.len() as u64),
            connections: plan.connections.get(),
            threads: plan.threads.get(),
            pipeline: plan.pipeline.get(),
            churn: plan.churn,
            rate: match plan.mode {
                Mode::Closed => None,
                Mode::Open { rate } => Some(rate),
            },
            requests_limit: plan.requests.map(|n| n.get()),
            warmup_s: plan.warmup.as_secs_f64(),
            duration_s: secs,
            requests: tally.requests,
            bytes: tally.bytes,
            rps: per_sec(tally.requests),
            bytes_per_sec: per_sec(tally.bytes),
            latency_us: latency,
            errors,
            connects: tally.connects,
            unsent: tally.unsent,
            unfinished: tally.unfinished,
            client_cpu_s: tally.cpu.as_secs_f64(),
            latency_cdf,
        }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain numbers, strings and options cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A few aligned lines for a terminal.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let pacing = match self.rate {
            Some(rate) => format!("open loop at {rate} req/s"),
            None => "closed loop".to_string(),
        };
        let body = match self.request_body_bytes {
            Some(n) => format!(", {} {n}-byte bodies", self.method),
            None if self.method != crate::plan::DEFAULT_METHOD => format!(", {}", self.method),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{pacing}, {} thread(s), {} connection(s), pipeline {}{}{body}, {:.2}s timed after {:.2}s warm-up",
            self.threads,
            self.connections,
            self.pipeline,
            if self.churn { ", churn" } else { "" },
            self.duration_s,
            self.warmup_s,
        );
        let _ = writeln!(
            out,
            "  requests    {:>12}  {:>14.1} req/s",
            self.requests, self.rps
        );
        let _ = writeln!(
            out,
            "  transfer    {:>12}  {:>12}/s",
            bytes(self.bytes as f64),
            bytes(self.bytes_per_sec)
        );
        let l = &self.latency_us;
        let _ = writeln!(
            out,
            "  latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {:.1})",
            l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        );
        let e = &self.errors;
        let _ = writeln!(
            out,
            "  errors      {} (connect {}, read {}, timeout {}, status {}, short_body {})",
            e.total, e.connect, e.read, e.timeout, e.status, e.short_body
        );
        if self.unsent > 0 || self.unfinished > 0 {
            let _ = writeln!(
                out,
                "  behind      {} scheduled but never sent, {} sent but unanswered at the end",
                self.unsent, self.unfinished
            );
        }
        let util = if self.duration_s > 0.0 {
            100.0 * self.client_cpu_s / self.duration_s
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  client cpu  {:.2}s ({util:.0}% of one core), {} connection(s) opened",
            self.client_cpu_s, self.connects
        );
        out
    }
}

fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_from_tally_computes_rates_and_percentiles() {
        let plan = Plan::new(&["http://127.0.0.1:1/"]).expect("plan");
        let mut tally = Tally::new();
        for us in 1..=1000 {
            tally.record(Duration::from_micros(us));
        }
        tally.bytes = 2048;
        tally.error(ErrorClass::Status);
        let report = Report::new(&plan, &tally, Duration::from_secs(2));
        assert_eq!(report.requests, 1000);
        assert!((report.rps - 500.0).abs() < 1e-9);
        assert!((report.bytes_per_sec - 1024.0).abs() < 1e-9);
        assert!((499..=501).contains(&report.latency_us.p50));
        assert_eq!(report.latency_us.max, 1000);
        assert_eq!(report.errors.status, 1);
        assert_eq!(report.errors.total, 1);
        assert_eq!(report.mode, "closed");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(json["schema"], SCHEMA);
        assert_eq!(
            (
                json["method"].as_str(),
                json["request_body_bytes"].is_null()
            ),
            (Some("GET"), true)
        );
        assert_eq!(json["latency_us"]["p999"], report.latency_us.p999);
        assert!(report.summary().contains("req/s"));
        assert_eq!(report.latency_cdf.len(), CDF_QUANTILES.len());
        assert_eq!(report.latency_cdf.last().map(|q| q.us), Some(1000));
        assert!(json.get("latency_cdf").is_none());
    }

    #[test]
    fn a_request_body_is_reported_with_its_method_and_size() {
        let mut plan = Plan::new(&["http://127.0.0.1:1/digest"]).expect("plan");
        plan.method = "POST".to_string();
        plan.body = Some(vec![0; 4096]);
        let report = Report::new(&plan, &Tally::new(), Duration::from_secs(1));
        assert_eq!(report.request_body_bytes, Some(4096));
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(json["method"], "POST");
        assert_eq!(json["request_body_bytes"], 4096);
        assert!(
            report.summary().contains(", POST 4096-byte bodies,"),
            "{}",
            report.summary()
        );
    }

    #[test]
    fn formats_byte_units() {
        assert_eq!(bytes(512.0), "512.0 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
    }
}

//! The arithmetic of a matrix point: medians, median absolute deviation, scaling against the
//! 1-worker point, and the client-bound test. No I/O; every function is total over its inputs
//! (an empty sample gives `None`, never a panic or a NaN).

/// A point whose client threads were this busy (CPU time over wall time, averaged over the
/// client's threads) measured the client as much as the server: wrk's and our own rule of
/// thumb is that a load generator above 90 % of its core can no longer push harder.
pub const CLIENT_BOUND_BUSY: f64 = 0.90;

/// Other tasks using this share of the benchmark's CPUs during a window make its numbers
/// more about the neighbours than about the server: 10 % is several times the run-to-run
/// noise of a quiet machine.
pub const CONTENDED_FOREIGN: f64 = 0.10;

/// The median of `values` (the mean of the middle two for an even count); `None` when empty
/// or when any value is NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Median absolute deviation: the median of each value's distance from the median. Robust to
/// one wild trial, unlike the standard deviation, which is why the seed's tables use it.
pub fn mad(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    median(&deviations)
}

/// [`mad`] as a percentage of the median; `None` when the median is zero.
pub fn mad_percent(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    if m == 0.0 {
        return None;
    }
    Some(100.0 * mad(values)? / m)
}

/// How a point compares with the same server's 1-worker point in the same scenario.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Scaling {
    /// Median RPS at N workers over median RPS at 1 worker.
    pub factor: f64,
    /// `factor / N`: 1.0 is perfectly linear.
    pub efficiency: f64,
}

/// Scaling of `rps` at `workers` against `rps_one_worker`; `None` without a positive baseline.
pub fn scaling(rps: f64, rps_one_worker: f64, workers: usize) -> Option<Scaling> {
    if rps_one_worker.is_nan() || rps_one_worker <= 0.0 || workers == 0 || !rps.is_finite() {
        return None;
    }
    let factor = rps / rps_one_worker;
    Some(Scaling {
        factor,
        efficiency: factor / workers as f64,
    })
}

/// What each worker beyond the first adds: `(at_n - at_one) / (workers - 1)`, e.g. PSS at N
/// workers against PSS at one. `None` at one worker (there is no extra worker) or without both
/// numbers finite. Negative when the N-worker tree measured smaller (noise, or pages the
/// kernel has not faulted in yet): reported as measured, not clamped.
pub fn per_extra_worker(at_n: f64, at_one: f64, workers: usize) -> Option<f64> {
    if workers < 2 || !at_n.is_finite() || !at_one.is_finite() {
        return None;
    }
    Some((at_n - at_one) / (workers - 1) as f64)
}

/// Fraction of the client's CPUs the load threads kept busy during the window (1.0 is every
/// thread on-CPU all the time); `None` for an empty window.
pub fn client_busy(client_cpu_s: f64, window_s: f64, threads: usize) -> Option<f64> {
    if window_s.is_nan() || window_s <= 0.0 || threads == 0 || !client_cpu_s.is_finite() {
        return None;
    }
    Some(client_cpu_s / (window_s * threads as f64))
}

/// Whether a client this busy was the bottleneck (see [`CLIENT_BOUND_BUSY`]).
pub fn client_bound(busy: f64) -> bool {
    busy >= CLIENT_BOUND_BUSY
}

/// Whether other tasks took enough of our CPUs to mark the point (see [`CONTENDED_FOREIGN`]).
pub fn contended(foreign: f64) -> bool {
    foreign >= CONTENDED_FOREIGN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn mad_ignores_one_wild_trial() {
        // Deviations from the median 100: 2, 1, 0, 1, 900 -> median 1.
        let rps = [98.0, 99.0, 100.0, 101.0, 1000.0];
        assert_eq!(mad(&rps), Some(1.0));
        assert_eq!(mad_percent(&rps), Some(1.0));
        assert_eq!(mad(&[5.0, 5.0, 5.0]), Some(0.0));
        assert_eq!(mad_percent(&[0.0, 0.0]), None);
        assert_eq!(mad(&[]), None);
    }

    #[test]
    fn efficiency_is_scaling_over_workers() {
        let s = scaling(300.0, 100.0, 4).expect("baseline");
        assert_eq!(s.factor, 3.0);
        assert_eq!(s.efficiency, 0.75);
        let one = scaling(100.0, 100.0, 1).expect("baseline");
        assert_eq!((one.factor, one.efficiency), (1.0, 1.0));
        assert_eq!(scaling(300.0, 0.0, 4), None);
        assert_eq!(scaling(300.0, 100.0, 0), None);
    }

    #[test]
    fn efficiency_at_eight_workers_is_rps_over_eight_times_one_worker() {
        // rps(N) / (N * rps(1)): 720k at 8 workers against 100k at 1 is 90 %.
        let s = scaling(720_000.0, 100_000.0, 8).expect("baseline");
        assert!((s.factor - 7.2).abs() < 1e-12);
        assert!((s.efficiency - 0.9).abs() < 1e-12);
        let two = scaling(190.0, 100.0, 2).expect("baseline");
        assert!((two.efficiency - 0.95).abs() < 1e-12);
    }

    #[test]
    fn pss_per_extra_worker_divides_the_growth_by_the_extra_workers() {
        // 4 MiB at 1 worker, 32 MiB at 8: 4 MiB for each of the 7 extra workers.
        assert_eq!(per_extra_worker(32_768.0, 4_096.0, 8), Some(4_096.0));
        assert_eq!(per_extra_worker(5_000.0, 4_000.0, 2), Some(1_000.0));
        assert_eq!(per_extra_worker(3_000.0, 4_000.0, 2), Some(-1_000.0));
        assert_eq!(per_extra_worker(4_096.0, 4_096.0, 1), None);
        assert_eq!(per_extra_worker(f64::NAN, 4_096.0, 4), None);
    }

    #[test]
    fn client_is_bound_at_ninety_percent_of_its_threads() {
        let busy = client_busy(2.7, 3.0, 1).expect("window");
        assert!((busy - 0.9).abs() < 1e-12);
        assert!(client_bound(busy));
        let busy = client_busy(2.7, 3.0, 2).expect("window");
        assert!(!client_bound(busy));
        assert_eq!(client_busy(1.0, 0.0, 1), None);
        assert_eq!(client_busy(1.0, 1.0, 0), None);
    }
}

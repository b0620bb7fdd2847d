//! Pinning the calling thread to one CPU (sched_setaffinity(2), through `core_affinity`).

/// Pins the calling thread to `cpu`. Returns `false` when the kernel refused (the CPU does not
/// exist or is outside this process's allowed set).
pub(crate) fn pin(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_cpu() {
        // Run on a throwaway thread so the test harness thread keeps its mask.
        let ok = std::thread::spawn(|| {
            let first = core_affinity::get_core_ids()
                .and_then(|ids| ids.first().map(|c| c.id))
                .unwrap_or(0);
            pin(first)
        })
        .join()
        .expect("pin thread panicked");
        assert!(ok);
    }
}

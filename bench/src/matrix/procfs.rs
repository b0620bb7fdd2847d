//! A server's process tree as `/proc` sees it (proc(5)): which processes it is, the CPU time
//! they used, and their memory (Rss and Pss from `/proc/PID/smaps_rollup`, Linux ≥ 4.14).
//!
//! Servers differ in shape: servery's thread mode, h2o and Caddy are one process with threads,
//! servery's process mode and nginx are a parent with worker children. Summing over the tree
//! (the root and every descendant, found through the `ppid` field) treats them alike.

use std::fs;

use serde::Serialize;

/// Memory of a set of processes, KiB. Pss charges each shared page to its sharers in equal
/// parts, so it is the fair number for a pre-forked tree; Rss counts shared pages in full
/// in every process that maps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

impl Memory {
    /// The larger of each field: a peak over samples.
    pub fn max(self, other: Memory) -> Memory {
        Memory {
            rss_kib: self.rss_kib.max(other.rss_kib),
            pss_kib: self.pss_kib.max(other.pss_kib),
        }
    }
}

/// The fields of `/proc/PID/stat` we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub ppid: u32,
    /// utime + stime (fields 14 and 15): CPU time of every thread, exited ones included, in
    /// clock ticks.
    pub cpu_ticks: u64,
}

/// Parses one `/proc/PID/stat` line. The command name (field 2) may hold spaces and `)`, so
/// the fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    // After ")": field 3 (state) is index 0, so field N is index N - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some(Stat {
        ppid: u32::try_from(field(4)?).ok()?,
        cpu_ticks: field(14)? + field(15)?,
    })
}

/// Sums the `Rss:` and `Pss:` lines of a `smaps_rollup` (values in kB, which proc(5) means as
/// KiB).
pub fn parse_smaps_rollup(text: &str) -> Option<Memory> {
    let mut rss = None;
    let mut pss = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("Rss:") => &mut rss,
            Some("Pss:") => &mut pss,
            _ => continue,
        };
        *slot = words.next().and_then(|v| v.parse::<u64>().ok());
    }
    Some(Memory {
        rss_kib: rss?,
        pss_kib: pss?,
    })
}

/// Clock ticks that CPUs spent busy (user + nice + system + irq + softirq of `/proc/stat`),
/// and the ticks the hypervisor stole from them. Interrupt and softirq ticks count as busy
/// because the kernel also charges them to the interrupted task's `stime`
/// (`account_system_index_time`), so "busy minus our processes' utime + stime" is other
/// tasks' time (kernel threads such as ksoftirqd included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub steal: u64,
}

/// The [`CpuTimes`] of the `cpuN` lines of a `/proc/stat` whose N is in `cpus`, summed.
pub fn parse_cpu_stat(text: &str, cpus: &[usize]) -> CpuTimes {
    let mut total = CpuTimes::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(id) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&id) {
            continue;
        }
        // user nice system idle iowait irq softirq steal (proc(5)).
        let v: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
        if v.len() == 8 {
            total.busy += v[0] + v[1] + v[2] + v[5] + v[6];
            total.steal += v[7];
        }
    }
    total
}

/// The [`CpuTimes`] of `cpus` now.
pub fn cpu_times(cpus: &[usize]) -> CpuTimes {
    parse_cpu_stat(&fs::read_to_string("/proc/stat").unwrap_or_default(), cpus)
}

/// `root` and its descendants among `(pid, ppid)` pairs, root first.
pub fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|&&(pid, ppid)| ppid == parent && pid != parent)
                .map(|&(pid, _)| pid),
        );
        i += 1;
    }
    tree
}

/// The live process tree under `root` (root included while it exists).
pub fn tree(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            // A process that exited since the listing just drops out.
            if let Some(stat) = read_stat(pid) {
                parents.push((pid, stat.ppid));
            }
        }
    }
    if !parents.iter().any(|&(pid, _)| pid == root) {
        return Vec::new();
    }
    descendants(root, &parents)
}

pub fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU clock ticks used so far by `pids` (a process that is gone counts 0).
pub fn cpu_ticks(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|&pid| read_stat(pid))
        .map(|s| s.cpu_ticks)
        .sum()
}

/// Memory of `pids` summed (a process that is gone, or whose file we may not read, counts 0).
pub fn memory(pids: &[u32]) -> Memory {
    pids.iter()
        .filter_map(|&pid| {
            parse_smaps_rollup(&fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?)
        })
        .fold(Memory::default(), |a, m| Memory {
            rss_kib: a.rss_kib + m.rss_kib,
            pss_kib: a.pss_kib + m.pss_kib,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_paren() {
        let line = "1234 (we ird) name) S 77 1234 1234 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 \
                    3 0 12345 1000000 200 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                ppid: 77,
                cpu_ticks: 281
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn smaps_rollup_gives_rss_and_pss() {
        let text = "55d0c0a00000-7ffd1e3f9000 ---p 00000000 00:00 0    [rollup]\n\
                    Rss:                5120 kB\n\
                    Pss:                2048 kB\n\
                    Pss_Anon:           1000 kB\n\
                    Shared_Clean:       3000 kB\n";
        assert_eq!(
            parse_smaps_rollup(text),
            Some(Memory {
                rss_kib: 5120,
                pss_kib: 2048
            })
        );
        assert_eq!(parse_smaps_rollup("Rss: 1 kB\n"), None);
    }

    #[test]
    fn cpu_stat_sums_the_chosen_cpus() {
        let text = "cpu  30 3 13 19 3 0 5 2 0 0\n\
                    cpu0 10 1 4 9 2 0 2 1 0 0\n\
                    cpu1 20 2 9 10 1 0 3 1 0 0\n\
                    intr 12345\n";
        assert_eq!(parse_cpu_stat(text, &[1]), CpuTimes { busy: 34, steal: 1 });
        assert_eq!(parse_cpu_stat(text, &[0, 1]).busy, 51);
        assert_eq!(parse_cpu_stat(text, &[7]), CpuTimes::default());
        assert!(cpu_times(&[0]).busy > 0);
    }

    #[test]
    fn tree_follows_parent_links() {
        // 10 -> 11 -> 13, 10 -> 12; 20 is unrelated.
        let parents = [(11, 10), (12, 10), (13, 11), (20, 1), (10, 1)];
        let mut tree = descendants(10, &parents);
        tree.sort_unstable();
        assert_eq!(tree, [10, 11, 12, 13]);
        assert_eq!(descendants(99, &parents), [99]);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert_eq!(tree(me).first(), Some(&me));
        assert!(memory(&[me]).rss_kib > 0);
        assert!(read_stat(me).is_some());
        assert!(tree(u32::MAX).is_empty());
    }
}

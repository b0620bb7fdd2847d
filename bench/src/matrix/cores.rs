//! Which CPUs the servers run on and which the client runs on: disjoint sets, never splitting
//! one physical core (its SMT siblings) between the two, and one worker per physical core.
//!
//! Owns: reading the topology (`/sys/devices/system/cpu/cpuN/topology`, see the kernel's
//! Documentation/admin-guide/cputopology.rst), the default split, checking the
//! `--server-cpus`/`--client-cpus` flags, and which worker counts fit.
//! Does not own: pinning anything (the servers' own flags, `taskset`, and the load engine).

use std::fs;

use serde::Serialize;

use crate::plan::CpuSet;

/// One logical CPU this process may run on, and the physical core it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub id: usize,
    /// `(physical_package_id, core_id)`: logical CPUs with the same key are SMT siblings.
    pub core: (usize, usize),
}

/// The logical CPUs this process may use, grouped by physical core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    cpus: Vec<Cpu>,
}

/// Where the servers and the client run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Assignment {
    /// Server CPUs, one per physical core, in the order workers take them.
    pub server: Vec<usize>,
    /// Client CPUs: every logical CPU of the client's physical cores; one load thread each.
    pub client: Vec<usize>,
    /// Physical cores on the server side: the most workers a point may have.
    pub server_cores: usize,
    pub client_cores: usize,
    /// Compromises the flags forced (shared physical cores), for the report.
    pub notes: Vec<String>,
}

/// A CPU choice that cannot give disjoint server and client sets.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CPU {cpu} is not one this process may run on (allowed: {allowed}); pick from those")]
    NotAllowed { cpu: usize, allowed: String },
    #[error("CPU {cpu} is in both --server-cpus and --client-cpus; the sets must be disjoint")]
    Overlap { cpu: usize },
    #[error(
        "only {cores} physical core(s) available: the matrix needs one for the servers and \
         one for the client (or pass --server-cpus and --client-cpus to share SMT siblings)"
    )]
    TooFewCores { cores: usize },
    #[error("no CPU left for the {side} after the other side's flag; pass --{side}-cpus")]
    NothingLeft { side: &'static str },
}

impl Topology {
    /// The topology of `allowed` (this process's affinity mask), read from sysfs. A CPU whose
    /// topology files are missing counts as its own physical core.
    pub fn read(allowed: &[usize]) -> Topology {
        let read = |cpu: usize, file: &str| -> Option<usize> {
            fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{file}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let cpus = allowed
            .iter()
            .map(|&id| Cpu {
                id,
                core: match (read(id, "physical_package_id"), read(id, "core_id")) {
                    (Some(package), Some(core)) => (package, core),
                    // usize::MAX as package: never equal to a real one.
                    _ => (usize::MAX, id),
                },
            })
            .collect();
        Topology { cpus }
    }

    pub fn new(cpus: Vec<Cpu>) -> Topology {
        Topology { cpus }
    }

    /// The logical CPU ids of each physical core, cores in order of their first CPU.
    pub fn physical_cores(&self) -> Vec<Vec<usize>> {
        let mut cores: Vec<((usize, usize), Vec<usize>)> = Vec::new();
        for cpu in &self.cpus {
            match cores.iter_mut().find(|(key, _)| *key == cpu.core) {
                Some((_, ids)) => ids.push(cpu.id),
                None => cores.push((cpu.core, vec![cpu.id])),
            }
        }
        cores.into_iter().map(|(_, ids)| ids).collect()
    }

    pub fn logical_cpus(&self) -> usize {
        self.cpus.len()
    }

    fn core_of(&self, cpu: usize) -> Option<(usize, usize)> {
        self.cpus.iter().find(|c| c.id == cpu).map(|c| c.core)
    }

    fn allowed(&self) -> String {
        let ids = self.cpus.iter().map(|c| c.id).collect();
        CpuSet::from_ids(ids).map_or_else(|| "none".to_string(), |s| s.to_string())
    }
}

/// Splits the CPUs. Without flags, the server gets the first half of the physical cores
/// (rounded up) and the client the rest. With one flag, the other side gets every core the
/// flag did not touch. With both, they are checked: allowed and disjoint; sharing a physical
/// core is allowed but noted.
pub fn assign(
    topology: &Topology,
    server: Option<&CpuSet>,
    client: Option<&CpuSet>,
) -> Result<Assignment, Error> {
    for set in [server, client].into_iter().flatten() {
        for &cpu in set.ids() {
            if topology.core_of(cpu).is_none() {
                return Err(Error::NotAllowed {
                    cpu,
                    allowed: topology.allowed(),
                });
            }
        }
    }
    let cores = topology.physical_cores();
    let (server_ids, client_ids) = match (server, client) {
        (Some(s), Some(c)) => {
            if let Some(&cpu) = s.ids().iter().find(|id| c.ids().contains(id)) {
                return Err(Error::Overlap { cpu });
            }
            (s.ids().to_vec(), c.ids().to_vec())
        }
        (Some(s), None) => {
            let rest = untouched(&cores, s.ids());
            if rest.is_empty() {
                return Err(Error::NothingLeft { side: "client" });
            }
            (s.ids().to_vec(), rest)
        }
        (None, Some(c)) => {
            let rest = untouched(&cores, c.ids());
            if rest.is_empty() {
                return Err(Error::NothingLeft { side: "server" });
            }
            (rest, c.ids().to_vec())
        }
        (None, None) => {
            if cores.len() < 2 {
                return Err(Error::TooFewCores { cores: cores.len() });
            }
            let split = cores.len().div_ceil(2);
            (cores[..split].concat(), cores[split..].concat())
        }
    };
    let server_by_core = group(topology, &server_ids);
    let client_by_core = group(topology, &client_ids);
    let mut notes = Vec::new();
    for (core, ids) in &server_by_core {
        if let Some((_, cids)) = client_by_core.iter().find(|(c, _)| c == core) {
            notes.push(format!(
                "server CPU(s) {ids:?} and client CPU(s) {cids:?} share one physical core"
            ));
        }
    }
    Ok(Assignment {
        // One worker per physical core: its first listed logical CPU.
        server: server_by_core.iter().map(|(_, ids)| ids[0]).collect(),
        client: client_ids,
        server_cores: server_by_core.len(),
        client_cores: client_by_core.len(),
        notes,
    })
}

/// Splits `wanted` worker counts into those the server side has physical cores for and those
/// it does not.
pub fn cap_workers(wanted: &[usize], server_cores: usize) -> (Vec<usize>, Vec<usize>) {
    wanted.iter().partition(|&&w| w >= 1 && w <= server_cores)
}

/// The logical CPUs of `cores` that share no physical core with `taken`.
fn untouched(cores: &[Vec<usize>], taken: &[usize]) -> Vec<usize> {
    cores
        .iter()
        .filter(|ids| !ids.iter().any(|id| taken.contains(id)))
        .flat_map(|ids| ids.iter().copied())
        .collect()
}

/// `ids` grouped by physical core, in the order the cores first appear in `ids`.
fn group(topology: &Topology, ids: &[usize]) -> Vec<((usize, usize), Vec<usize>)> {
    let mut out: Vec<((usize, usize), Vec<usize>)> = Vec::new();
    for &id in ids {
        let core = topology.core_of(id).unwrap_or((usize::MAX, id));
        match out.iter_mut().find(|(c, _)| *c == core) {
            Some((_, v)) => v.push(id),
            None => out.push((core, vec![id])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cores` physical cores with `smt` siblings each, numbered like Linux on x86: CPU
    /// `t * cores + c` is thread `t` of core `c`.
    fn machine(cores: usize, smt: usize) -> Topology {
        let mut cpus = Vec::new();
        for t in 0..smt {
            for c in 0..cores {
                cpus.push(Cpu {
                    id: t * cores + c,
                    core: (0, c),
                });
            }
        }
        Topology::new(cpus)
    }

    fn set(spec: &str) -> CpuSet {
        spec.parse().expect("cpu list")
    }

    #[test]
    fn two_cores_give_one_each() {
        let a = assign(&machine(2, 1), None, None).expect("assign");
        assert_eq!((a.server, a.client), (vec![0], vec![1]));
        assert_eq!((a.server_cores, a.client_cores), (1, 1));
        assert!(a.notes.is_empty());
    }

    #[test]
    fn smt_siblings_stay_on_one_side_and_workers_get_whole_cores() {
        // 8 cores x 2 threads: CPUs 0-7 and their siblings 8-15.
        let a = assign(&machine(8, 2), None, None).expect("assign");
        assert_eq!(a.server, [0, 1, 2, 3]);
        assert_eq!(a.server_cores, 4);
        assert_eq!(a.client, [4, 12, 5, 13, 6, 14, 7, 15]);
        assert_eq!(a.client_cores, 4);
    }

    #[test]
    fn odd_core_counts_favour_the_server() {
        let a = assign(&machine(3, 1), None, None).expect("assign");
        assert_eq!((a.server, a.client), (vec![0, 1], vec![2]));
    }

    #[test]
    fn one_flag_leaves_the_other_side_every_untouched_core() {
        let m = machine(4, 2);
        let a = assign(&m, Some(&set("0,4")), None).expect("assign");
        assert_eq!(a.server, [0]);
        assert_eq!(a.client, [1, 5, 2, 6, 3, 7]);
        let a = assign(&m, None, Some(&set("3"))).expect("assign");
        assert_eq!(a.server, [0, 1, 2]);
        assert_eq!(a.client, [3]);
    }

    #[test]
    fn flags_must_be_allowed_and_disjoint() {
        let m = machine(2, 1);
        assert!(matches!(
            assign(&m, Some(&set("0")), Some(&set("0"))),
            Err(Error::Overlap { cpu: 0 })
        ));
        assert!(matches!(
            assign(&m, Some(&set("5")), None),
            Err(Error::NotAllowed { cpu: 5, .. })
        ));
        assert!(matches!(
            assign(&m, Some(&set("0-1")), None),
            Err(Error::NothingLeft { side: "client" })
        ));
        assert!(matches!(
            assign(&machine(1, 2), None, None),
            Err(Error::TooFewCores { cores: 1 })
        ));
    }

    #[test]
    fn shared_physical_cores_are_allowed_but_noted() {
        let a = assign(&machine(1, 2), Some(&set("0")), Some(&set("1"))).expect("assign");
        assert_eq!((a.server, a.client), (vec![0], vec![1]));
        assert_eq!(a.notes.len(), 1);
    }

    #[test]
    fn worker_counts_are_capped_by_server_cores() {
        assert_eq!(cap_workers(&[1, 2, 4], 1), (vec![1], vec![2, 4]));
        assert_eq!(cap_workers(&[1, 2, 4], 4), (vec![1, 2, 4], vec![]));
        assert_eq!(cap_workers(&[1, 2, 4], 3), (vec![1, 2], vec![4]));
    }
}

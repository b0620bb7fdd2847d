//! Named matrices: `servery-load matrix --preset scaling` (issue 15), the scaling figures at
//! 1, 2, 4 and 8 workers that a lent 16-core machine runs in one command with nothing
//! installed (`scripts/scaling-kit.sh run`).
//!
//! Owns: each preset's scenarios, servers, worker counts, trials and durations, and the time
//! arithmetic ([`estimate`]) that keeps a whole run, start-up included, inside its budget.
//! Does not own: running it (the matrix does, with these options: CPUs are split by
//! [`super::cores`], worker counts the server side has no physical cores for are dropped
//! there) or the kit that carries the programs (`scripts/scaling-kit.sh`).
//!
//! # The scaling preset's arithmetic
//! On 16 physical cores the server side gets 8 and the client 8 (one load thread per client
//! CPU), so every worker count runs: 5 scenarios × 4 servers × 4 worker counts = 80 points ×
//! [`SCALING_TRIALS`] = 240 trials. Each trial costs its warm-up and window plus
//! [`TRIAL_OVERHEAD`] (start, readiness, validation, stop), and the run adds
//! [`STARTUP`] once. 240 × (0.5 s + 1 s + 0.25 s) + 30 s = 450 s = 7 min 30 s ≤
//! [`SCALING_BUDGET`] (8 min); a unit test checks the same sum from the real lineups and core
//! split. A machine whose 16 CPUs are 8 cores × 2 SMT threads has 4 server cores, runs
//! 1, 2 and 4 workers only (the matrix says which counts it skipped), and takes less time.

use std::time::Duration;

use super::scenario::Scenario;
use super::server::Server;

/// A named matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Issue 15: static-1k, app-1k, static-64k and their pipelined series on servery (thread
    /// and process), nginx and h2o at 1, 2, 4 and 8 workers, in 8 minutes.
    Scaling,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Scaling => "scaling",
        }
    }

    pub fn parse(name: &str) -> Option<Preset> {
        (name == "scaling").then_some(Preset::Scaling)
    }

    /// What this preset runs.
    pub fn plan(self) -> Plan {
        match self {
            Preset::Scaling => Plan {
                scenarios: SCALING_SCENARIOS.to_vec(),
                servers: SCALING_SERVERS.to_vec(),
                workers: SCALING_WORKERS.to_vec(),
                trials: SCALING_TRIALS,
                warmup: SCALING_WARMUP,
                duration: SCALING_DURATION,
                budget: SCALING_BUDGET,
            },
        }
    }
}

/// A preset's matrix: what it runs and how long the whole of it may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub scenarios: Vec<Scenario>,
    pub servers: Vec<Server>,
    pub workers: Vec<usize>,
    pub trials: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// The whole run, start-up included, must end within this; the matrix refuses a plan
    /// whose [`estimate`] is longer before it starts a server.
    pub budget: Duration,
}

/// The issue's three workloads, then the pipelined series of the two small ones. At depth 1
/// a client core costs about what a server core does per 1 KiB request (7 µs each on the
/// 2-core VM), so at 8 workers against 8 client cores those points may be client-bound (the
/// tables mark them); at [`super::scenario::PIPELINE_DEPTH`] a client core feeds about 1.5
/// server cores, so the `*-pipelined` points measure the servers' scaling. static-64k costs
/// the client the copy of each body, so it is measured at depth 1 only: bytes, not requests,
/// are its load.
pub const SCALING_SCENARIOS: [Scenario; 5] = [
    Scenario::Static1k,
    Scenario::App1k,
    Scenario::Static64k,
    Scenario::Static1kPipelined,
    Scenario::App1kPipelined,
];

/// The issue's servers; axum-tokio is one thread and would add 1-worker points only.
pub const SCALING_SERVERS: [Server; 4] = [
    Server::ServeryThread,
    Server::ServeryProcess,
    Server::Nginx,
    Server::H2o,
];

/// The issue's worker counts: up to 8 on distinct physical cores, the client on the other 8.
pub const SCALING_WORKERS: [usize; 4] = [1, 2, 4, 8];

/// Three trials: the fewest that still have a median and a MAD (as `--quick`).
pub const SCALING_TRIALS: usize = 3;

/// Warm-up before each window. The 256 connections are open within milliseconds on loopback
/// and servery's file cache is filled by the readiness probe, so half a second is enough for
/// the first timed request to see a steady server; it is half of `--quick`'s.
pub const SCALING_WARMUP: Duration = Duration::from_millis(500);

/// Each timed window: at 100 k req/s and more (every point here but static-64k at one worker,
/// about 50 k) a second holds ≥ 50,000 timed requests, enough for a stable median and p99.
/// Longer windows do not fit: see the module docs.
pub const SCALING_DURATION: Duration = Duration::from_secs(1);

/// Issue 15: the whole run, start-up included, within 8 minutes (the lent machine allows 10
/// per command and 15 in all, so this leaves room for the machine's own start).
pub const SCALING_BUDGET: Duration = Duration::from_secs(8 * 60);

/// What a trial costs beyond its warm-up and window: a fresh port, the peer's config written
/// by bash, spawn under taskset, polling for readiness, one validation request, reading
/// `/proc`, SIGTERM and the wait for exit, and the memory sampler's last 100 ms sleep.
/// Measured on the 2-core VM: its full quick matrix (84 trials of 1 s + 3 s) took 5 min 41 s,
/// 61 ms a trial over warm-up and window, and the kit's dry run of this preset (60 trials of
/// 0.5 s + 1 s, docs/benchmarks.md "Scaling kit") took 1 min 34 s, 67 ms a trial; 250 ms is
/// almost four times that, for 8 process workers or 8 nginx workers to start and stop.
pub const TRIAL_OVERHEAD: Duration = Duration::from_millis(250);

/// What a run costs once, outside its trials: the kit unpacking the peers and checking each
/// server's answer, the matrix hashing its binaries, asking the peers' versions, writing the
/// docroot, and rendering the tables and charts. Measured in the kit's dry run: 96 s in all
/// for 94 s of trials, so 2 s (the kit's unpacking and six server checks took 1 s of it);
/// 30 s allows for a cold page cache, a slower disk and more peers' processes to stop.
pub const STARTUP: Duration = Duration::from_secs(30);

/// How long `trials` trials of `warmup` + `duration` take, start-up included.
pub fn estimate(trials: usize, warmup: Duration, duration: Duration) -> Duration {
    STARTUP + (warmup + duration + TRIAL_OVERHEAD) * u32::try_from(trials).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::cores::{self, Cpu, Topology};
    use crate::matrix::lineup;

    /// `n` physical cores without SMT, as `cores`' own tests build them.
    fn machine(n: usize) -> Topology {
        Topology::new((0..n).map(|id| Cpu { id, core: (0, id) }).collect())
    }

    /// The trials the matrix would run for `plan` on `topology`, and the plan's worker counts
    /// that fit there.
    fn trials_on(plan: &Plan, topology: &Topology) -> (usize, Vec<usize>) {
        let a = cores::assign(topology, None, None).expect("assign");
        let (workers, _) = cores::cap_workers(&plan.workers, a.server_cores);
        let (lineups, _) = lineup::wanted(&plan.scenarios, &plan.servers);
        (lineup::trials(&lineups, &workers, plan.trials), workers)
    }

    #[test]
    fn scaling_runs_the_issues_workloads_servers_and_worker_counts() {
        let plan = Preset::Scaling.plan();
        assert_eq!(Preset::parse("scaling"), Some(Preset::Scaling));
        assert_eq!(Preset::parse("scale"), None);
        assert_eq!(
            &plan.scenarios[..3],
            [Scenario::Static1k, Scenario::App1k, Scenario::Static64k]
        );
        assert!(plan.scenarios[3..].iter().all(|s| s.is_pipelined()));
        assert_eq!(
            plan.servers,
            [
                Server::ServeryThread,
                Server::ServeryProcess,
                Server::Nginx,
                Server::H2o
            ]
        );
        assert_eq!(plan.workers, [1, 2, 4, 8]);
        // Every server takes part in every scenario: no lineup is cut.
        let (lineups, notes) = lineup::wanted(&plan.scenarios, &plan.servers);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(lineups.iter().all(|l| l.servers.len() == 4));
    }

    #[test]
    fn sixteen_cores_give_eight_workers_on_their_own_cores_and_eight_client_cpus() {
        let a = cores::assign(&machine(16), None, None).expect("assign");
        assert_eq!(a.server, (0..8).collect::<Vec<_>>());
        assert_eq!(a.client, (8..16).collect::<Vec<_>>());
        assert_eq!((a.server_cores, a.client_cores), (8, 8));
        let (trials, workers) = trials_on(&Preset::Scaling.plan(), &machine(16));
        assert_eq!(workers, [1, 2, 4, 8]);
        assert_eq!(trials, 5 * 4 * 4 * 3);
    }

    #[test]
    fn two_cores_give_one_worker_and_one_client_cpu() {
        let a = cores::assign(&machine(2), None, None).expect("assign");
        assert_eq!((a.server, a.client), (vec![0], vec![1]));
        let (trials, workers) = trials_on(&Preset::Scaling.plan(), &machine(2));
        assert_eq!(workers, [1]);
        assert_eq!(trials, 5 * 4 * 3);
    }

    /// The kit that runs this preset on the lent machine parses, and passes shellcheck where
    /// it is installed (a bad script there would cost the machine's only lease).
    #[test]
    fn the_kit_script_is_valid_bash() {
        let scripts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
        let kit = scripts.join("scaling-kit.sh");
        let run = |program: &str, args: &[&str]| {
            std::process::Command::new(program)
                .args(args)
                .arg(&kit)
                .current_dir(&scripts)
                .output()
        };
        let bash = run("bash", &["-n"]).expect("bash");
        assert!(
            bash.status.success(),
            "{}",
            String::from_utf8_lossy(&bash.stderr)
        );
        match run("shellcheck", &["-x"]) {
            Ok(out) => assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            ),
            Err(e) => eprintln!("shellcheck not run: {e}"),
        }
    }

    #[test]
    fn the_whole_scaling_run_fits_its_budget() {
        let plan = Preset::Scaling.plan();
        let (trials, _) = trials_on(&plan, &machine(16));
        let total = estimate(trials, plan.warmup, plan.duration);
        // The module docs' sum: 240 × 1.75 s + 30 s.
        assert_eq!(total, Duration::from_secs(450));
        assert!(total <= plan.budget, "{total:?} > {:?}", plan.budget);
        assert!(plan.budget <= Duration::from_secs(8 * 60));
        // A larger machine runs no more: the worker counts are the plan's.
        assert_eq!(trials_on(&plan, &machine(64)).0, trials);
        // The dry run on 2 cores is well under 5 minutes.
        let (dry, _) = trials_on(&plan, &machine(2));
        assert!(estimate(dry, plan.warmup, plan.duration) < Duration::from_secs(5 * 60));
    }
}

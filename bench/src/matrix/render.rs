//! The markdown the matrix prints and stores: the seed's two tables ("Throughput and tail
//! latency", "Startup, CPU and memory") and a peer table with ratios to each scenario's
//! baseline (nginx; axum-tokio for the axum Router's scenarios; Caddy for the h3 ones). Pure
//! text from [`Point`]s; numbers are rounded for people here and nowhere else.

use std::fmt::Write as _;

use super::point::Point;
use super::scenario::Scenario;
use super::server::Server;

/// All three tables, each under a `###` heading, rows in the order of `points`.
pub fn tables(points: &[Point]) -> String {
    let mut out = String::new();
    throughput(&mut out, points);
    out.push('\n');
    startup(&mut out, points);
    out.push('\n');
    peers(&mut out, points);
    failures(&mut out, points);
    out
}

/// Lists every failed trial with its reason, so an invalid point explains itself.
fn failures(out: &mut String, points: &[Point]) {
    let failed: Vec<String> = points
        .iter()
        .flat_map(|p| {
            p.trials.iter().filter_map(move |t| {
                let why = t.failure.as_ref()?;
                Some(format!(
                    "- {} / {} / {} worker(s), trial {}: {why}",
                    p.server.label(),
                    p.scenario.name(),
                    p.workers,
                    t.trial
                ))
            })
        })
        .collect();
    if !failed.is_empty() {
        out.push_str("\nFailed trials:\n\n");
        for line in failed {
            out.push_str(&line);
            out.push('\n');
        }
    }
}

fn throughput(out: &mut String, points: &[Point]) {
    out.push_str("### Throughput and tail latency\n\n");
    out.push_str(
        "Medians over trials. RPS MAD: median absolute deviation as a share of the median. \
         Scaling / efficiency: against the same server's 1-worker point. Errors: failed \
         requests over all trials; any error or failed trial makes the point **invalid**. \
         Client core: how busy the load generator's threads were (h2load's in the h2-* \
         scenarios); at 90 % or more the point is **client-bound** and its RPS a floor for the \
         server. Other load: share of the point's \
         server CPUs and of the client CPUs that other tasks used in the window (`/proc/stat` \
         minus our processes); at 10 % or more the point is **contended**: the machine was not \
         quiet and the numbers say as much about the neighbours as about the server.\n\n",
    );
    out.push_str(
        "| Runtime / workload | Workers / cores | Median RPS | Scaling / efficiency | RPS MAD \
         | Median p99 | p99 MAD | Errors | Client core | Other load (server / client) |\n",
    );
    out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for p in points {
        let s = &p.summary;
        let scaling = s.scaling.map_or_else(dash, |sc| {
            format!("{:.2}× / {:.0} %", sc.factor, sc.efficiency * 100.0)
        });
        let errors = if s.invalid {
            let mut text = format!("{} **invalid**", s.errors);
            if s.failed_trials > 0 {
                let _ = write!(text, " ({} trial(s) failed)", s.failed_trials);
            }
            if s.empty_trials > 0 {
                let _ = write!(text, " ({} trial(s) timed no request)", s.empty_trials);
            }
            text
        } else {
            s.errors.to_string()
        };
        let client = s.client_busy.map_or_else(dash, |b| {
            if s.client_bound {
                format!("{:.0} % **client-bound**", b * 100.0)
            } else {
                format!("{:.0} %", b * 100.0)
            }
        });
        let share = |v: Option<f64>| v.map_or_else(dash, |v| format!("{:.0} %", v * 100.0));
        let mut other = format!("{} / {}", share(s.foreign_server), share(s.foreign_client));
        if s.contended {
            other.push_str(" **contended**");
        }
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            runtime(p),
            p.workers,
            p.server_cpus.len(),
            s.rps_median.map_or_else(dash, rps),
            scaling,
            s.rps_mad_pct.map_or_else(dash, |m| format!("{m:.1} %")),
            s.p99_median_us.map_or_else(dash, micros),
            s.p99_mad_us.map_or_else(dash, micros),
            errors,
            client,
            other,
        );
    }
}

fn startup(out: &mut String, points: &[Point]) {
    out.push_str("### Startup, CPU and memory\n\n");
    out.push_str(
        "Start: spawn until the port accepts a connection. Ready: spawn until the first valid \
         response (in the h2-* scenarios, curl's over HTTP/2, curl's own start and TLS \
         handshake included; in the h3-* ones, one over HTTP/3 on a new QUIC connection, its \
         handshake included). RSS and PSS are summed over the server's process tree \
         (`/proc/PID/smaps_rollup`) at ready and at their peak during the trial. CPU: utime + \
         stime of the tree over the timed window, as cores used and as µs per request. \
         PSS / extra worker: (ready PSS at N workers − ready PSS at 1) / (N − 1), against the \
         same server's 1-worker point. Medians over trials.\n\n",
    );
    out.push_str(
        "| Runtime / workload | Workers | Start | Ready | Ready RSS | Ready PSS | CPU cores used \
         | CPU µs/req | Peak RSS | Peak PSS | PSS / extra worker |\n",
    );
    out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for p in points {
        let s = &p.summary;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            runtime(p),
            p.workers,
            s.start_ms.map_or_else(dash, millis),
            s.ready_ms.map_or_else(dash, millis),
            s.ready_rss_kib.map_or_else(dash, mib),
            s.ready_pss_kib.map_or_else(dash, mib),
            s.cpu_cores.map_or_else(dash, |c| format!("{c:.2}")),
            s.cpu_us_per_request
                .map_or_else(dash, |c| format!("{c:.1}")),
            s.peak_rss_kib.map_or_else(dash, mib),
            s.peak_pss_kib.map_or_else(dash, mib),
            s.pss_per_extra_worker_kib.map_or_else(dash, mib),
        );
    }
}

fn peers(out: &mut String, points: &[Point]) {
    out.push_str("### Peers: median RPS, p99 and CPU per request, ratio to the baseline\n\n");
    let mut servers: Vec<Server> = Vec::new();
    let mut cells: Vec<(Scenario, usize)> = Vec::new();
    let mut baselines: Vec<(Server, Vec<&str>)> = Vec::new();
    for p in points {
        if !servers.contains(&p.server) {
            servers.push(p.server);
        }
        if !cells.contains(&(p.scenario, p.workers)) {
            cells.push((p.scenario, p.workers));
        }
        let base = p.scenario.baseline();
        match baselines.iter_mut().find(|(s, _)| *s == base) {
            Some((_, names)) if names.contains(&p.scenario.name()) => {}
            Some((_, names)) => names.push(p.scenario.name()),
            None => baselines.push((base, vec![p.scenario.name()])),
        }
    }
    let against: Vec<String> = baselines
        .iter()
        .map(|(s, names)| format!("{} for {}", s.label(), names.join(", ")))
        .collect();
    let _ = writeln!(
        out,
        "Each ratio is against the same workload and worker count on its baseline: {}. CPU: \
         the server's µs of CPU per request.\n",
        against.join("; ")
    );
    out.push_str("| Workload | Workers |");
    for s in &servers {
        let _ = write!(out, " {} |", s.label());
    }
    out.push_str("\n|---|---|");
    out.push_str(&"--:|".repeat(servers.len()));
    out.push('\n');
    for (scenario, workers) in cells {
        let find = |server: Server| {
            points
                .iter()
                .find(|p| p.scenario == scenario && p.workers == workers && p.server == server)
        };
        let base = find(scenario.baseline()).map(|p| &p.summary);
        let _ = write!(out, "| {} | {} |", scenario.name(), workers);
        for &server in &servers {
            let Some(p) = find(server) else {
                out.push_str(" — |");
                continue;
            };
            let s = &p.summary;
            let ratio = |mine: Option<f64>, theirs: Option<f64>| match (mine, theirs) {
                (Some(a), Some(b)) if b > 0.0 => format!(" ({:.2}×)", a / b),
                _ => String::new(),
            };
            let mut cell = match (s.rps_median, s.p99_median_us) {
                (Some(r), Some(p99)) => format!(
                    "{}{} · p99 {}{}",
                    rps(r),
                    ratio(s.rps_median, base.and_then(|n| n.rps_median)),
                    micros(p99),
                    ratio(s.p99_median_us, base.and_then(|n| n.p99_median_us)),
                ),
                _ => "—".to_string(),
            };
            if let (Some(cpu), true) = (s.cpu_us_per_request, s.rps_median.is_some()) {
                let _ = write!(
                    cell,
                    " · CPU {cpu:.1} µs{}",
                    ratio(Some(cpu), base.and_then(|n| n.cpu_us_per_request))
                );
            }
            if s.invalid {
                cell.push_str(" **invalid**");
            }
            if s.client_bound {
                cell.push_str(" *client-bound*");
            }
            if s.contended {
                cell.push_str(" *contended*");
            }
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
}

/// "server / scenario", saying when a peer stands in a static file for the app.
fn runtime(p: &Point) -> String {
    if p.scenario.is_stand_in(p.server) {
        format!("{} / {} (static file)", p.server.label(), p.scenario.name())
    } else {
        format!("{} / {}", p.server.label(), p.scenario.name())
    }
}

fn dash() -> String {
    "—".to_string()
}

/// Requests per second with thousands separators: 52310.4 -> "52,310".
pub fn rps(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in µs, in the unit that keeps three significant digits readable.
pub fn micros(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn millis(ms: f64) -> String {
    format!("{ms:.1} ms")
}

fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::point::tests::trial;
    use crate::matrix::point::{fill_scaling, summarize, Trial};

    fn point(scenario: Scenario, server: Server, trials: Vec<Trial>) -> Point {
        Point {
            scenario,
            server,
            workers: 1,
            server_cpus: vec![0],
            summary: summarize(&trials),
            trials,
        }
    }

    #[test]
    fn numbers_are_rounded_for_people() {
        assert_eq!(rps(52310.4), "52,310");
        assert_eq!(rps(999.6), "1,000");
        assert_eq!(rps(1234567.0), "1,234,567");
        assert_eq!(micros(870.2), "870 µs");
        assert_eq!(micros(1234.0), "1.23 ms");
        assert_eq!(micros(2_500_000.0), "2.50 s");
        assert_eq!(mib(2048.0), "2.0 MiB");
    }

    #[test]
    fn startup_table_gives_pss_per_extra_worker() {
        let mut two = point(
            Scenario::Static1kPipelined,
            Server::ServeryThread,
            vec![trial(200.0, 500, 0)],
        );
        two.workers = 2;
        two.server_cpus = vec![0, 1];
        two.summary.ready_pss_kib = Some(2048.0 + 1536.0);
        let mut points = vec![
            point(
                Scenario::Static1kPipelined,
                Server::ServeryThread,
                vec![trial(100.0, 500, 0)],
            ),
            two,
        ];
        fill_scaling(&mut points);
        let md = tables(&points);
        assert!(md.contains("| Peak PSS | PSS / extra worker |"), "{md}");
        assert!(
            md.contains("| servery (thread) / static-1k-pipelined | 1 | 2.0 ms | 3.0 ms |"),
            "{md}"
        );
        assert!(md.contains("| 8.0 MiB | 4.0 MiB | — |"), "{md}");
        assert!(md.contains("| 8.0 MiB | 4.0 MiB | 1.5 MiB |"), "{md}");
        assert!(md.contains("| 2 / 2 | 200 | 2.00× / 100 % |"), "{md}");
    }

    #[test]
    fn router_scenarios_are_compared_with_axum_on_tokio() {
        let points = vec![
            point(
                Scenario::Static1k,
                Server::Nginx,
                vec![trial(100.0, 1000, 0)],
            ),
            point(
                Scenario::AppJson,
                Server::ServeryThread,
                vec![trial(150.0, 400, 0)],
            ),
            point(
                Scenario::AppJson,
                Server::AxumTokio,
                vec![trial(100.0, 800, 0)],
            ),
            point(
                Scenario::AppPost4k,
                Server::AxumTokio,
                vec![trial(50.0, 800, 0)],
            ),
        ];
        let md = tables(&points);
        assert!(md.contains("| Workload | Workers | nginx | servery (thread) | axum (tokio) |"));
        assert!(md.contains(
            "its baseline: nginx for static-1k; axum (tokio) for app-json, app-post-4k."
        ));
        assert!(md.contains(
            "| app-json | 1 | — | 150 (1.50×) · p99 400 µs (0.50×) · CPU 6666.7 µs (0.67×) \
             | 100 (1.00×) · p99 800 µs (1.00×) · CPU 10000.0 µs (1.00×) |"
        ));
        assert!(md.contains("| static-1k | 1 | 100 (1.00×) · p99 1.00 ms (1.00×) · CPU 10000.0 µs (1.00×) | — | — |"));
        assert!(md.contains("| axum (tokio) / app-post-4k | 1 / 1 |"));
        assert!(!md.contains("(static file)"));
    }

    #[test]
    fn tables_have_the_seed_columns_and_verdicts() {
        let mut points = vec![
            point(
                Scenario::Static1k,
                Server::ServeryThread,
                vec![trial(120.0, 500, 0)],
            ),
            point(
                Scenario::Static1k,
                Server::Nginx,
                vec![trial(100.0, 1000, 0)],
            ),
            point(Scenario::App1k, Server::Nginx, vec![trial(100.0, 1000, 2)]),
        ];
        fill_scaling(&mut points);
        let md = tables(&points);
        assert!(md.contains(
            "| Runtime / workload | Workers / cores | Median RPS | Scaling / efficiency | RPS MAD \
             | Median p99 | p99 MAD | Errors | Client core | Other load (server / client) |"
        ));
        assert!(md.contains("| Runtime / workload | Workers | Start | Ready | Ready RSS |"));
        assert!(md.contains(
            "| servery (thread) / static-1k | 1 / 1 | 120 | 1.00× / 100 % | 0.0 % | 500 µs | 0 µs \
             | 0 | 50 % | — / — |"
        ));
        assert!(md.contains("| nginx / app-1k (static file) |"));
        assert!(md.contains("| 2 **invalid** |"));
        assert!(md.contains(
            "| static-1k | 1 | 120 (1.20×) · p99 500 µs (0.50×) · CPU 8333.3 µs (0.83×) | 100 (1.00×)"
        ));
        assert!(md.contains(
            "| app-1k | 1 | — | 100 (1.00×) · p99 1.00 ms (1.00×) · CPU 10000.0 µs (1.00×) **invalid** |"
        ));
        assert!(md.contains("its baseline: nginx for static-1k, app-1k. CPU:"));
        assert!(!md.contains("Failed trials"));
        let failed = Trial {
            trial: 2,
            failure: Some("exited (exit status: 1) before answering".into()),
            ..Trial::default()
        };
        let md = tables(&[point(Scenario::Static8m, Server::H2o, vec![failed])]);
        assert!(md.contains("0 **invalid** (1 trial(s) failed)"));
        assert!(md.contains(
            "- h2o / static-8m / 1 worker(s), trial 2: exited (exit status: 1) before answering"
        ));
        // Every table row has as many cells as its header.
        for table in md.split("### ").skip(1) {
            let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
            let width = rows[0].matches('|').count();
            assert!(
                rows.iter().all(|r| r.matches('|').count() == width),
                "{table}"
            );
        }
    }
}

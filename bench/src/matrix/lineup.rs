//! Who takes part in each scenario of a run, and why the others do not.
//!
//! Owns: each scenario's lineup (the selected servers that can serve it and whose program is
//! there), the cut per worker count (a one-thread server takes 1-worker points only), and the
//! notes that say who sat out and why, so a missing column explains itself.
//! Does not own: which servers can serve a scenario (`Scenario::servers`) or finding programs
//! (`programs`).
//!
//! Flow:
//! 1. [`wanted`]: the selected servers that can serve each scenario, in the selected order.
//! 2. The matrix resolves the programs [`needed`] by those lineups.
//! 3. [`without`]: drop the servers whose program is unavailable, and lineups left empty;
//!    [`with_tools`]: drop the h2 scenarios h2load or curl cannot run, and the peers from
//!    the scenarios over TLS (h2 over TLS, every h3 one) when there is no openssl to make
//!    their certificate.
//! 4. [`Lineup::at`]: the servers of a lineup that run a given worker count.

use serde::Serialize;

use super::programs::Program;
use super::scenario::Scenario;
use super::server::Server;

/// The servers measured in one scenario, in table order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lineup {
    pub scenario: Scenario,
    pub servers: Vec<Server>,
}

impl Lineup {
    /// The servers that run `workers` workers (axum-tokio runs one thread).
    pub fn at(&self, workers: usize) -> Vec<Server> {
        self.servers
            .iter()
            .copied()
            .filter(|s| s.max_workers().map_or(true, |most| workers <= most))
            .collect()
    }
}

/// Step 1: `selected` ∩ each scenario's servers, and a note per server and reason that it
/// sits out scenarios of the run (nginx sits out the Router's scenarios for one reason and
/// the h3 ones for another).
pub fn wanted(scenarios: &[Scenario], selected: &[Server]) -> (Vec<Lineup>, Vec<String>) {
    let lineups = scenarios
        .iter()
        .map(|&scenario| Lineup {
            scenario,
            servers: selected
                .iter()
                .copied()
                .filter(|s| scenario.servers().contains(s))
                .collect(),
        })
        .collect();
    let mut notes = Vec::new();
    for &server in selected {
        // (reason, scenarios), in the order the reasons first come up.
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        for s in scenarios.iter().filter(|s| !s.servers().contains(&server)) {
            let why = sits_out(server, *s);
            match out.iter_mut().find(|(w, _)| *w == why) {
                Some((_, names)) => names.push(s.name()),
                None => out.push((why, vec![s.name()])),
            }
        }
        for (why, names) in out {
            notes.push(format!(
                "{} takes no part in {}: {why}.",
                server.name(),
                names.join(", ")
            ));
        }
    }
    (lineups, notes)
}

/// Why `server` cannot serve `scenario`.
fn sits_out(server: Server, scenario: Scenario) -> &'static str {
    match server {
        Server::AxumTokio => {
            "it serves the axum Router of examples/axum/routes.rs over HTTP/1.1, so app-json and \
             app-post-4k only"
        }
        Server::Nginx if scenario.is_h3() => {
            "it has no HTTP/3 (Debian's nginx is 1.22; ngx_http_v3_module came in 1.25)"
        }
        Server::H2o if scenario.is_h3() => "it has no HTTP/3 (Debian's h2o is 2.2.5)",
        Server::H2o | Server::Caddy if scenario == Scenario::Gzip64kJs => {
            "gzip-64k-js compares servery's on-the-fly gzip with nginx's, and its benchmark \
             config compresses nothing"
        }
        Server::Nginx | Server::H2o | Server::Caddy => {
            "there is no such app for it; app-json and app-post-4k compare servery with the same \
             axum Router on tokio (axum-tokio) instead"
        }
        Server::ServeryThread | Server::ServeryProcess => "it has no program for them",
    }
}

/// Whether `scenario` runs over TLS, so that a peer in it needs the run's certificate: an h2
/// scenario when the h2 transport is TLS (`h2_tls`), an h3 one always (QUIC is TLS 1.3).
pub fn over_tls(scenario: Scenario, h2_tls: bool) -> bool {
    scenario.is_h3() || (scenario.is_h2() && h2_tls)
}

/// How many trials `lineups` make at `workers` with `trials` each: a server runs only the
/// worker counts it can ([`Lineup::at`]).
pub fn trials(lineups: &[Lineup], workers: &[usize], trials: usize) -> usize {
    lineups
        .iter()
        .map(|l| workers.iter().map(|&n| l.at(n).len()).sum::<usize>())
        .sum::<usize>()
        * trials
}

/// Step 2: the programs of this checkout the lineups run, each once.
pub fn needed(lineups: &[Lineup]) -> Vec<Program> {
    let mut programs: Vec<Program> = lineups
        .iter()
        .flat_map(|l| l.servers.iter().filter_map(|s| s.program(l.scenario)))
        .collect();
    programs.sort();
    programs.dedup();
    programs
}

/// Step 3: the lineups without the servers whose program is `unavailable`, empty lineups
/// dropped, with a note for each cut.
pub fn without(lineups: Vec<Lineup>, unavailable: &[Program]) -> (Vec<Lineup>, Vec<String>) {
    let mut notes = Vec::new();
    let mut kept = Vec::new();
    for mut lineup in lineups {
        let scenario = lineup.scenario;
        let (out, servers): (Vec<Server>, Vec<Server>) = lineup.servers.iter().partition(|s| {
            s.program(scenario)
                .is_some_and(|p| unavailable.contains(&p))
        });
        if let Some(program) = out.first().and_then(|s| s.program(scenario)) {
            let names: Vec<&str> = out.iter().map(|s| s.name()).collect();
            notes.push(format!(
                "{} without {}: their program, `{}`, is not in this checkout (examples/{}.rs) \
                 and {} did not give one.",
                scenario.name(),
                names.join(", "),
                program.target(),
                program.target(),
                program.flag()
            ));
        }
        lineup.servers = servers;
        if lineup.servers.is_empty() {
            notes.push(format!(
                "{}: no server left to measure, so it is not run.",
                scenario.name()
            ));
        } else {
            kept.push(lineup);
        }
    }
    (kept, notes)
}

/// Which of the h2 and h3 scenarios' tools a run has, and whether the h2 ones run over TLS.
/// (The h3 scenarios' load generator is this crate's own, `load::h3`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tools {
    pub h2load: bool,
    pub curl: bool,
    pub openssl: bool,
    /// The h2 scenarios run over TLS (not h2c).
    pub tls: bool,
}

/// Step 3, for the h2 and h3 scenarios: without h2load or curl no h2 scenario runs; without
/// openssl the peers sit out the scenarios over TLS ([`over_tls`]; servery makes its own
/// certificate). A note for each cut.
pub fn with_tools(lineups: Vec<Lineup>, tools: Tools) -> (Vec<Lineup>, Vec<String>) {
    let mut notes = Vec::new();
    let h2: Vec<&str> = lineups
        .iter()
        .filter(|l| l.scenario.is_h2())
        .map(|l| l.scenario.name())
        .collect();
    let missing = match (tools.h2load, tools.curl) {
        _ if h2.is_empty() => None,
        (false, _) => Some(
            "h2load, their load generator, is not installed (scripts/install-peers.sh installs \
             it: Debian package nghttp2-client)",
        ),
        (true, false) => Some(
            "curl, which checks each server's first HTTP/2 answers, is not installed \
             (Debian package curl)",
        ),
        (true, true) => None,
    };
    let lineups: Vec<Lineup> = match missing {
        Some(why) => {
            notes.push(format!("{}: not run: {why}.", h2.join(", ")));
            lineups
                .into_iter()
                .filter(|l| !l.scenario.is_h2())
                .collect()
        }
        None => lineups,
    };
    if tools.openssl {
        return (lineups, notes);
    }
    let mut empty = Vec::new();
    let mut cut: Vec<&str> = Vec::new();
    let mut affected: Vec<&str> = Vec::new();
    let mut kept = Vec::new();
    for mut lineup in lineups {
        let scenario = lineup.scenario;
        if over_tls(scenario, tools.tls) && lineup.servers.iter().any(|s| s.is_peer()) {
            affected.push(scenario.name());
            for peer in lineup.servers.iter().filter(|s| s.is_peer()) {
                if !cut.contains(&peer.name()) {
                    cut.push(peer.name());
                }
            }
            lineup.servers.retain(|s| !s.is_peer());
            if lineup.servers.is_empty() {
                empty.push(format!(
                    "{}: no server left to measure, so it is not run.",
                    scenario.name()
                ));
                continue;
            }
        }
        kept.push(lineup);
    }
    if !cut.is_empty() {
        notes.push(format!(
            "{} take(s) no part in {}: openssl, which makes their TLS certificate, is not \
             installed (servery makes its own).",
            cut.join(", "),
            affected.join(", ")
        ));
    }
    notes.extend(empty);
    (kept, notes)
}

/// A note when a one-thread server is skipped at some of `workers`.
pub fn worker_notes(lineups: &[Lineup], workers: &[usize]) -> Vec<String> {
    let mut notes = Vec::new();
    for server in Server::ALL {
        let Some(most) = server.max_workers() else {
            continue;
        };
        let skipped: Vec<String> = workers
            .iter()
            .filter(|&&n| n > most)
            .map(|n| n.to_string())
            .collect();
        if !skipped.is_empty() && lineups.iter().any(|l| l.servers.contains(&server)) {
            notes.push(format!(
                "{} runs at most {most} worker(s) (one tokio current-thread runtime, pinned like \
                 the others), so it is not measured at {} worker(s).",
                server.name(),
                skipped.join(", ")
            ));
        }
    }
    notes
}

/// What the app scenarios of `lineups` run on each side, when the tables alone would not say.
pub fn app_notes(lineups: &[Lineup]) -> Vec<String> {
    let measured = |scenario: Scenario, server: fn(&Server) -> bool| {
        lineups
            .iter()
            .any(|l| l.scenario == scenario && l.servers.iter().any(server))
    };
    let mut notes = Vec::new();
    let hello: Vec<&str> = [Scenario::App1k, Scenario::H2App1k, Scenario::App1kPipelined]
        .into_iter()
        .filter(|&s| measured(s, |s| !s.is_servery()))
        .map(|s| s.name())
        .collect();
    if !hello.is_empty() {
        notes.push(format!(
            "{}: servery runs examples/hello (a Rust handler returning a fixed 1 KiB body); \
             the static peers (nginx, h2o, caddy) serve hello.txt, a static file with exactly \
             that body, marked \
             \"(static file)\".",
            hello.join(", ")
        ));
    }
    if [Scenario::AppJson, Scenario::AppPost4k]
        .iter()
        .any(|&s| measured(s, |s| s.is_servery()))
    {
        notes.push(
            "app-json and app-post-4k: servery runs examples/axum (the axum Router of \
             examples/axum/routes.rs on servery's workers) and examples/upload (a POSTed body \
             streamed through SHA-256); axum-tokio runs examples/axum_tokio, the same Router \
             on axum::serve and one tokio current-thread runtime. Their peer-table ratios are \
             against axum-tokio."
                .to_string(),
        );
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scenario_gets_the_selected_servers_that_serve_it() {
        let scenarios = [Scenario::Static1k, Scenario::AppJson, Scenario::AppPost4k];
        let (lineups, notes) = wanted(&scenarios, &Server::ALL);
        assert_eq!(
            lineups[0].servers,
            [
                Server::ServeryThread,
                Server::ServeryProcess,
                Server::Nginx,
                Server::H2o,
                Server::Caddy
            ]
        );
        for l in &lineups[1..] {
            assert_eq!(
                l.servers,
                [
                    Server::ServeryThread,
                    Server::ServeryProcess,
                    Server::AxumTokio
                ]
            );
        }
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(notes[0].starts_with("nginx takes no part in app-json, app-post-4k: "));
        assert!(notes[2].starts_with("caddy takes no part in app-json, app-post-4k: "));
        assert!(notes[3].starts_with("axum-tokio takes no part in static-1k: "));
        let (only, notes) = wanted(&[Scenario::AppJson], &[Server::AxumTokio]);
        assert_eq!(only[0].servers, [Server::AxumTokio]);
        assert!(notes.is_empty());
    }

    #[test]
    fn programs_are_needed_once_each() {
        let scenarios = [Scenario::Static1k, Scenario::App1k, Scenario::AppJson];
        let (lineups, _) = wanted(&scenarios, &Server::ALL);
        assert_eq!(
            needed(&lineups),
            [
                Program::Servery,
                Program::Hello,
                Program::Axum,
                Program::AxumTokio
            ]
        );
        let (lineups, _) = wanted(&[Scenario::AppPost4k], &[Server::AxumTokio]);
        assert_eq!(needed(&lineups), [Program::AxumTokio]);
    }

    #[test]
    fn an_unbuildable_example_drops_only_its_servers() {
        let scenarios = [Scenario::AppJson, Scenario::AppPost4k];
        let (lineups, _) = wanted(&scenarios, &Server::ALL);
        let (kept, notes) = without(lineups, &[Program::Upload]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].servers.len(), 3);
        assert_eq!(kept[1].servers, [Server::AxumTokio]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("app-post-4k without servery-thread, servery-process: ")
                && notes[0].contains("examples/upload.rs")
                && notes[0].contains("--upload-bin"),
            "{}",
            notes[0]
        );
        let (lineups, _) = wanted(&scenarios, &[Server::ServeryThread]);
        let (kept, notes) = without(lineups, &[Program::Axum, Program::Upload]);
        assert!(kept.is_empty());
        assert_eq!(notes.len(), 4);
    }

    #[test]
    fn app_notes_describe_only_what_is_measured() {
        let (all, _) = wanted(&[Scenario::App1k, Scenario::AppPost4k], &Server::ALL);
        let notes = app_notes(&all);
        assert_eq!(notes.len(), 2);
        assert!(
            notes[0].starts_with("app-1k:") && notes[1].starts_with("app-json and app-post-4k:")
        );
        let (tokio_only, _) = wanted(&[Scenario::AppJson], &[Server::AxumTokio]);
        assert!(app_notes(&tokio_only).is_empty());
        let (servery_only, _) = wanted(&[Scenario::App1k], &[Server::ServeryThread]);
        assert!(app_notes(&servery_only).is_empty());
        let (both, _) = wanted(&[Scenario::App1k, Scenario::H2App1k], &Server::ALL);
        assert!(app_notes(&both)[0].starts_with("app-1k, h2-app-1k: servery runs examples/hello"));
    }

    #[test]
    fn h2_scenarios_need_h2load_and_curl_and_peers_need_openssl() {
        let scenarios = [Scenario::Static1k, Scenario::H2Static1k, Scenario::H2App1k];
        let (lineups, _) = wanted(&scenarios, &Server::ALL);
        let all = Tools {
            h2load: true,
            curl: true,
            openssl: true,
            tls: true,
        };
        let (kept, notes) = with_tools(lineups.clone(), all);
        assert_eq!((kept.len(), notes.len()), (3, 0));
        assert_eq!(kept[1].servers.len(), 5);

        let (kept, notes) = with_tools(
            lineups.clone(),
            Tools {
                h2load: false,
                ..all
            },
        );
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].scenario, Scenario::Static1k);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("h2-static-1k, h2-app-1k: not run: h2load")
                && notes[0].contains("nghttp2-client"),
            "{notes:?}"
        );
        let (kept, notes) = with_tools(lineups.clone(), Tools { curl: false, ..all });
        assert_eq!(kept.len(), 1);
        assert!(notes[0].contains("curl"), "{notes:?}");

        let no_openssl = Tools {
            openssl: false,
            ..all
        };
        let (kept, notes) = with_tools(lineups.clone(), no_openssl);
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[0].servers.len(), 5, "HTTP/1.1 keeps its peers");
        assert_eq!(
            kept[1].servers,
            [Server::ServeryThread, Server::ServeryProcess]
        );
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with(
                "nginx, h2o, caddy take(s) no part in h2-static-1k, h2-app-1k: openssl"
            ),
            "{notes:?}"
        );
        // h2c needs no certificate.
        let (kept, notes) = with_tools(
            lineups.clone(),
            Tools {
                tls: false,
                ..no_openssl
            },
        );
        assert_eq!((kept[1].servers.len(), notes.len()), (5, 0));
        // Peers only: the scenario is left with nobody.
        let (peers, _) = wanted(&[Scenario::H2Static8m], &[Server::Nginx]);
        let (kept, notes) = with_tools(peers, no_openssl);
        assert!(kept.is_empty());
        assert_eq!(notes.len(), 2, "{notes:?}");
        // No h2 scenario: nothing to say, whatever is missing.
        let (h1, _) = wanted(&[Scenario::Static1k], &Server::ALL);
        let (kept, notes) = with_tools(
            h1,
            Tools {
                h2load: false,
                curl: false,
                openssl: false,
                tls: true,
            },
        );
        assert_eq!((kept.len(), notes.len()), (1, 0));
    }

    #[test]
    fn nginx_and_h2o_sit_out_the_h3_scenarios_saying_why() {
        let scenarios = [
            Scenario::Static1k,
            Scenario::AppJson,
            Scenario::H3Static1k,
            Scenario::H3Static8m,
            Scenario::Gzip64kJs,
        ];
        let (lineups, notes) = wanted(&scenarios, &Server::ALL);
        for l in &lineups[2..4] {
            assert_eq!(
                l.servers,
                [Server::ServeryThread, Server::ServeryProcess, Server::Caddy]
            );
        }
        let note = |start: &str| {
            notes
                .iter()
                .find(|n| n.starts_with(start))
                .unwrap_or_else(|| panic!("no note starting {start:?} in {notes:?}"))
                .clone()
        };
        // One note per server and reason.
        assert!(note("nginx takes no part in app-json: ").contains("axum-tokio"));
        let nginx = note("nginx takes no part in h3-static-1k, h3-static-8m: ");
        assert!(
            nginx.contains("no HTTP/3") && nginx.contains("1.22"),
            "{nginx}"
        );
        let h2o = note("h2o takes no part in h3-static-1k, h3-static-8m: ");
        assert!(h2o.contains("no HTTP/3") && h2o.contains("2.2.5"), "{h2o}");
        assert!(note("h2o takes no part in gzip-64k-js: ").contains("compresses nothing"));
        assert!(note("caddy takes no part in app-json: ").contains("axum-tokio"));
        assert!(note("caddy takes no part in gzip-64k-js: ").contains("compresses nothing"));
        assert!(!notes
            .iter()
            .any(|n| n.starts_with("caddy") && n.contains("h3-")));
        assert!(
            note("axum-tokio takes no part in static-1k, h3-static-1k, h3-static-8m, ")
                .contains("over HTTP/1.1")
        );
        assert_eq!(notes.len(), 8, "{notes:?}");
        // Only nginx and h2o asked for: nothing serves h3 but servery, and they say why.
        let (lineups, notes) = wanted(&[Scenario::H3Static64k], &[Server::Nginx, Server::H2o]);
        assert!(lineups[0].servers.is_empty());
        assert_eq!(notes.len(), 2, "{notes:?}");
    }

    #[test]
    fn h3_scenarios_need_openssl_for_caddy_only_whatever_the_h2_tools() {
        let scenarios = [Scenario::H2Static1k, Scenario::H3Static1k];
        let (lineups, _) = wanted(&scenarios, &Server::ALL);
        let none = Tools {
            h2load: false,
            curl: false,
            openssl: false,
            tls: false,
        };
        // No h2load: the h2 scenario goes; h3 needs neither it nor curl, but Caddy needs a
        // certificate over QUIC even when the h2 scenarios run as h2c.
        let (kept, notes) = with_tools(lineups.clone(), none);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].scenario, Scenario::H3Static1k);
        assert_eq!(
            kept[0].servers,
            [Server::ServeryThread, Server::ServeryProcess]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("h2-static-1k: not run: h2load"));
        assert!(
            notes[1].starts_with("caddy take(s) no part in h3-static-1k: openssl"),
            "{notes:?}"
        );
        let (kept, notes) = with_tools(
            lineups.clone(),
            Tools {
                openssl: true,
                ..none
            },
        );
        assert_eq!((kept.len(), notes.len()), (1, 1));
        assert_eq!(kept[0].servers.len(), 3);
        let (caddy, _) = wanted(&[Scenario::H3Static8m], &[Server::Caddy]);
        let (kept, notes) = with_tools(caddy, none);
        assert!(kept.is_empty());
        assert_eq!(
            notes[1],
            "h3-static-8m: no server left to measure, so it is not run."
        );
        assert!(over_tls(Scenario::H3Static1k, false) && over_tls(Scenario::H2App1k, true));
        assert!(!over_tls(Scenario::H2App1k, false) && !over_tls(Scenario::Static1k, true));
    }

    #[test]
    fn axum_tokio_runs_one_worker_only() {
        let (lineups, _) = wanted(&[Scenario::AppJson], &Server::ALL);
        assert_eq!(lineups[0].at(1).len(), 3);
        assert_eq!(
            lineups[0].at(2),
            [Server::ServeryThread, Server::ServeryProcess]
        );
        let notes = worker_notes(&lineups, &[1, 2, 4]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("not measured at 2, 4 worker(s)"),
            "{notes:?}"
        );
        assert!(worker_notes(&lineups, &[1]).is_empty());
        // 3 at one worker, 2 at each of two more, 3 trials each.
        assert_eq!(trials(&lineups, &[1, 2, 4], 3), (3 + 2 + 2) * 3);
        let (statics, _) = wanted(&[Scenario::Static1k], &Server::ALL);
        assert!(worker_notes(&statics, &[1, 2]).is_empty());
    }
}

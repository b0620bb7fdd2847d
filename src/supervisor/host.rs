//! The machine's real host: spawning workers, planning reloads, stats and
//! readiness.
//!
//! Owns: a generation's resources ([`Resources`]: its configuration, its
//! listening sockets while the server listens, its TLS identity), spawning
//! a worker as a thread or a process ([`Member`]), re-reading the
//! configuration on SIGHUP and planning the next generation from it, the
//! per-slot counters the admin endpoint serves (summed across generations,
//! plus reaped processes) and the restarts by cause, and telling `/readyz`
//! and systemd the phase.
//! Does not own any decision of the state machine.

use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use super::generation::Rules;
use super::machine::{Host, Notice, Plan, Worker};
use super::member::{Member, Spawn};
use super::reload::listeners_for;
use super::restart::Cause;
use super::{child::ChildWatcher, notify, Error, Event, Reloader, Remake};
use crate::app::ServiceFactory;
use crate::config::{Config, Isolation};
use crate::control::Control;
use crate::net::ListenerPlan;
use crate::sites::SiteTls;
use crate::sys::shm::SharedCounter;
use crate::telemetry::{
    Phase as Readiness, PhaseCell, RestartStats, Snapshot, StatsTable, WorkerStats,
};
use crate::tls::identity::{self, GenerationTls, Identity};

/// A generation's resources.
pub(crate) struct Resources<F> {
    pub config: Arc<Config>,
    /// What its worker threads make their services with: built from this
    /// generation's config, so a reload's file settings reach them
    /// (worker processes build their own from the config they are sent).
    pub factory: Arc<F>,
    /// `None` once shutdown began: new connections are refused.
    pub listeners: Option<Arc<ListenerPlan>>,
    pub tls: Option<GenerationTls>,
    /// The access log its worker threads share (`None` without a log, and
    /// in process isolation, where each worker process opens its own).
    pub access_log: Option<crate::access_log::Setup>,
    /// Its workers' inboxes for QUIC datagrams (with HTTP/3 on).
    pub mail: Option<Arc<super::mail::Mail>>,
}

impl<F> Plan for Resources<F> {
    fn rules(&self) -> Rules {
        Rules::from_config(&self.config)
    }

    fn close_listeners(&mut self) {
        self.listeners = None;
    }

    fn reopen_log(&self) {
        if let Some(setup) = &self.access_log {
            setup.sink.reopen();
        }
    }

    fn reads_udp(&self) -> bool {
        self.listeners.as_ref().is_some_and(|l| !l.udp.is_empty())
    }
}

impl Worker for Member {
    fn pid(&self) -> Option<u32> {
        Member::pid(self)
    }
    fn ends_by_report(&self) -> bool {
        Member::ends_by_report(self)
    }
    fn send(&self, c: Control) {
        Member::send(self, c)
    }
    fn terminate(&self) {
        Member::terminate(self)
    }
    fn kill(&self) {
        Member::kill(self)
    }
    fn finish(&mut self) {
        Member::finish(self)
    }
    fn publish(&self, seq: u64, update: &crate::sites::published::Update) -> bool {
        Member::publish(self, seq, update)
    }
}

/// The real world.
pub(crate) struct Live<F> {
    /// The first generation's factory, and every generation's when there is
    /// no `remake`.
    pub factory: Arc<F>,
    /// Builds a generation's factory from its config (`Server::remaking`).
    pub remake: Option<Remake<F>>,
    pub events: Sender<Event>,
    /// The binary workers re-execute (process isolation).
    pub exe: PathBuf,
    pub isolation: Isolation,
    pub watcher: Option<ChildWatcher>,
    /// The access log worker threads write through, and the settings it was
    /// opened with: a reload that keeps them keeps the writer.
    pub access_log: Option<(crate::config::AccessLogConfig, crate::access_log::Setup)>,
    pub budget: Option<Arc<SharedCounter>>,
    pub stats: StatsTable,
    /// Process mode: counters of workers already reaped, per slot.
    pub retired: Vec<Snapshot>,
    pub readiness: Arc<PhaseCell>,
    pub reloader: Option<Reloader>,
    pub identity: Identity,
    /// The server's one ACME manager.
    pub acme: super::acme::Ordering,
    /// Which generations' inboxes a new worker may send to.
    pub office: super::mail::Office,
}

impl<F> Drop for Live<F> {
    /// The server is done: the worker threads' last lines are written before
    /// the process exits. A worker thread may still hold the sink while it
    /// unwinds, so dropping ours would not close it.
    fn drop(&mut self) {
        if let Some((_, setup)) = &self.access_log {
            setup.sink.close(crate::access_log::CLOSE_WAIT);
        }
    }
}

impl<F> Live<F> {
    /// The resources of a generation from `config` on `listeners`.
    pub(crate) fn resources(
        &mut self,
        config: Arc<Config>,
        listeners: Arc<ListenerPlan>,
        factory: Arc<F>,
    ) -> Result<Resources<F>, Error> {
        self.acme.sync(&config, &self.events)?;
        let tls = match &config.tls {
            None => None,
            Some(t) => {
                let addrs: Vec<_> = (listeners.addrs.iter().zip(&listeners.tls))
                    .filter(|(_, tls)| **tls)
                    .map(|(a, _)| *a)
                    .collect();
                // An ACME site starts with what ACME has: its certificate
                // published in this server's life, else the stored one.
                let acme: Vec<Option<crate::tls::Material>> = (config.sites.list.iter())
                    .map(|s| match s.tls {
                        Some(SiteTls::Acme) => crate::sites::published::global()
                            .material(&s.name)
                            .or_else(|| stored(&config, &s.name)),
                        _ => None,
                    })
                    .collect();
                let sources: Vec<_> = (config.sites.list.iter().zip(&acme))
                    .map(|(s, given)| {
                        s.tls.as_ref().map(|tls| match tls {
                            SiteTls::Files { cert, key } => identity::Source::Files { cert, key },
                            SiteTls::SelfSigned => identity::Source::SelfSigned,
                            SiteTls::Acme => match given {
                                Some(m) => identity::Source::Given(m),
                                None => identity::Source::Placeholder { hosts: &s.hosts },
                            },
                        })
                    })
                    .collect();
                Some(self.identity.for_generation(
                    &sources,
                    &config.sites.for_tls(),
                    config.answers_tls_alpn01(),
                    &addrs,
                    t.ticket_rotate,
                    &config.http2.alpn_ids(),
                )?)
            }
        };
        let threads = !(self.watcher.is_some() && config.isolation == Isolation::Process);
        let access_log = match (&self.access_log, threads) {
            (_, false) => None,
            // The same log as the generation before: the same writer.
            (Some(prev), true) if prev.0 == config.access_log => Some(prev.1.clone()),
            (_, true) => {
                let setup =
                    crate::access_log::Setup::open(&config.access_log).map_err(|source| {
                        Error::AccessLog {
                            target: config.access_log.target_shown().to_string(),
                            source,
                        }
                    })?;
                if let Some(setup) = &setup {
                    self.access_log = Some((config.access_log.clone(), setup.clone()));
                }
                setup
            }
        };
        let mail = if listeners.udp.is_empty() {
            None
        } else {
            Some(
                super::mail::Mail::new(config.workers.get())
                    .map_err(|source| Error::Spawn { worker: 0, source })?,
            )
        };
        Ok(Resources {
            config,
            factory,
            listeners: Some(listeners),
            tls,
            access_log,
            mail,
        })
    }

    fn stats_for(&self, slot: usize) -> Arc<WorkerStats> {
        if let Ok(mut t) = self.stats.write() {
            while t.len() <= slot {
                t.push(Arc::new(WorkerStats::default()));
            }
            return t[slot].clone();
        }
        Arc::new(WorkerStats::default())
    }
}

impl<F: ServiceFactory> Host for Live<F> {
    type Member = Member;
    type Plan = Resources<F>;

    fn spawn(
        &mut self,
        generation: u64,
        plan: &Resources<F>,
        slot: usize,
    ) -> Result<Member, Error> {
        let stats = self.stats_for(slot);
        let (entries, bytes) = plan.config.file_cache_shares();
        {
            use std::sync::atomic::Ordering::Relaxed;
            stats
                .file_cache_entries_share
                .store(entries as u64, Relaxed);
            stats.memory_cache_bytes_share.store(bytes as u64, Relaxed);
        }
        let listeners = plan.listeners.as_ref().ok_or(Error::Spawn {
            worker: slot,
            source: std::io::Error::other("listeners already closed"),
        })?;
        let delivery =
            match &plan.mail {
                Some(mail) => Some(self.office.deliver(mail, generation, slot).map_err(
                    |source| Error::Spawn {
                        worker: slot,
                        source,
                    },
                )?),
                None => None,
            };
        let s = Spawn {
            generation,
            slot,
            delivery,
            config: &plan.config,
            sockets: &listeners.per_worker[slot],
            udp: listeners.udp_of_slot(slot, plan.config.workers.get()),
            factory: &plan.factory,
            stats: &stats,
            budget: self.budget.as_ref(),
            events: &self.events,
            tls_flags: &listeners.tls,
            tls: plan.tls.as_ref(),
            access_log: plan.access_log.as_ref(),
        };
        let member = match (&self.watcher, plan.config.isolation) {
            (Some(w), Isolation::Process) => Member::process(s, &self.exe, w),
            _ => Member::thread(s),
        };
        member.map_err(|source| Error::Spawn {
            worker: slot,
            source,
        })
    }

    fn reload(&mut self, current: &Resources<F>) -> Option<Resources<F>> {
        let Some(reloader) = self.reloader.as_mut() else {
            tracing::warn!("SIGHUP: no config source to reload from; still serving");
            return None;
        };
        // sd_notify(3): RELOADING=1 carries MONOTONIC_USEC so systemd
        // (Type=notify-reload) can match it to the reload it asked for.
        match sd_notify::NotifyState::monotonic_usec_now() {
            Ok(now) => notify(&[sd_notify::NotifyState::Reloading, now]),
            Err(_) => notify(&[sd_notify::NotifyState::Reloading]),
        }
        let refused = |why: &dyn std::fmt::Display| {
            tracing::error!("reload refused: {why}; still serving the old configuration");
            notify(&[sd_notify::NotifyState::Ready]);
        };
        let config = match reloader() {
            Ok(c) => c,
            Err(e) => {
                refused(&format_args!("bad configuration: {e}"));
                return None;
            }
        };
        let old = current.listeners.as_ref()?;
        let listeners = match listeners_for(&current.config, &config, old) {
            Err(refusal) => {
                refused(&refusal);
                return None;
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "reload failed: cannot set up the new listeners; still serving");
                notify(&[sd_notify::NotifyState::Ready]);
                return None;
            }
            Ok(Ok(l)) => l,
        };
        // The new configuration's services (the binary's file settings);
        // a factory that does not depend on the config is kept.
        let factory = match &self.remake {
            Some(make) => Arc::new(make(&config)),
            None => self.factory.clone(),
        };
        match self.resources(Arc::new(config), listeners, factory) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(error = %e, "reload failed: still serving the old one");
                notify(&[sd_notify::NotifyState::Ready]);
                None
            }
        }
    }

    fn notify(&mut self, notice: Notice) {
        match notice {
            Notice::Ready => {
                self.readiness.set(Readiness::Ready);
                notify(&[sd_notify::NotifyState::Ready]);
            }
            Notice::Stopping => {
                self.readiness.set(Readiness::Draining);
                notify(&[sd_notify::NotifyState::Stopping]);
            }
        }
    }

    fn publish(&mut self, slot: usize, live: &Snapshot) {
        let stats = self.stats_for(slot);
        match self.isolation {
            Isolation::Process => {
                let mut total = *live;
                if let Some(r) = self.retired.get(slot) {
                    total.add(r);
                }
                total.store(&stats);
            }
            Isolation::Thread => {
                // Threads count into the shared atomics directly; only the
                // beat-borne figures are stored.
                use std::sync::atomic::Ordering::Relaxed;
                stats.rss_bytes.store(live.rss_bytes, Relaxed);
                stats.cpu_micros.store(live.cpu_micros, Relaxed);
            }
        }
    }

    fn retire(&mut self, slot: usize, last: &Snapshot) -> bool {
        if self.isolation != Isolation::Process {
            return false;
        }
        while self.retired.len() <= slot {
            self.retired.push(Snapshot::default());
        }
        // A process's cache dies with it: its gauges leave, its counters stay.
        let mut compress = last.compress;
        compress.cache_bytes = 0;
        compress.cache_entries = 0;
        self.retired[slot].add(&Snapshot {
            connections_open: 0,
            output_bytes: 0,
            rss_bytes: 0,
            compress,
            ..*last
        });
        true
    }

    fn restarted(&mut self, _slot: usize, cause: Cause) {
        let stats = RestartStats::global();
        let counter = match cause {
            Cause::Crash => &stats.crash,
            Cause::BeatTimeout => &stats.beat_timeout,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Site `site`'s certificate in the ACME state directory, if one is there.
fn stored(config: &Config, site: &str) -> Option<crate::tls::Material> {
    match crate::acme::stored(&config.ordering()?.state_dir, site) {
        Ok(found) => found.map(|c| c.material),
        Err(e) => {
            tracing::warn!(site, error = %e, "cannot read the stored ACME certificate");
            None
        }
    }
}

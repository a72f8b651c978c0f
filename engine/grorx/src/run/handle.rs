//! A run in progress: the handle `start` returns. It serves live stats (what
//! telemetry serves too), the histograms since they were last taken, the stop
//! conditions, and at the end the report, with the ports torn down and every
//! mbuf counted. Dropping a handle that was not waited for stops the run.

use super::launch::{Factory, Lcores, Workers};
use super::link::{LinkStats, LinkWatch};
use super::options::RunOptions;
use super::ports::{self, Ports};
use super::{collect, watch};
use crate::capture::Capture;
use crate::counters::hist::QueueHist;
use crate::counters::stats::QueueCounts;
use crate::dpdk::eal::Eal;
use crate::forward::ForwardCounters;
use crate::gro::GroStats;
use crate::port::{self, PortStats};
use crate::report::telemetry;
use crate::report::Report;
use crate::stage::{Stage, StageCounts};
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// EAL up, ports configured and started: what a run has before its stages.
pub(super) struct Prepared {
    pub eal: &'static Eal,
    opts: RunOptions,
    hugepages: String,
    lcores: Lcores,
    ports: Ports,
    /// `RunOptions::stage.capture`'s file, created before EAL started.
    capture_file: Option<std::fs::File>,
}

impl Prepared {
    pub fn new(opts: &RunOptions) -> Result<Prepared> {
        opts.validate()?;
        // Files the ports name are read before EAL starts.
        let replays = ports::pcap_replays(opts)?;
        let capture_file = (opts.stage.capture.as_deref())
            .map(Capture::create_file)
            .transpose()?;
        let mut opts = opts.clone();
        opts.pools.cached_frames = replays.cached.iter().copied().max().unwrap_or(0);
        let (eal, hugepages) = super::eal_for(&opts)?;
        let lcores = Lcores::choose(eal, &opts)?;
        let ports = Ports::setup(&opts, lcores.count, lcores.polling(&opts), replays)?;
        Ok(Prepared {
            eal,
            opts,
            hugepages,
            lcores,
            ports,
            capture_file,
        })
    }

    /// The capture writer `RunOptions::stage.capture` asks for, started on the
    /// main lcore's CPU (never a worker's).
    pub fn capture(&mut self) -> Result<Option<Capture>> {
        let (Some(path), Some(file)) = (&self.opts.stage.capture, self.capture_file.take()) else {
            return Ok(None);
        };
        let cpu = usize::try_from(self.eal.lcore_cpu(self.eal.main_lcore())).ok();
        Capture::start(path, file, super::options::CAPTURE_SLOTS, cpu).map(Some)
    }

    /// Makes the stages, launches the workers, and returns the handle.
    pub fn launch<S: Stage>(
        self,
        make: &mut Factory<'_, S>,
        capture: Option<Capture>,
    ) -> Result<Running> {
        let Prepared {
            eal,
            opts,
            hugepages,
            lcores,
            ports,
            ..
        } = self;
        let workers = match Workers::start(eal, &opts, &lcores, &ports, make) {
            Ok(w) => w,
            Err(e) => return Err(ports.teardown().onto_error(e)),
        };
        let (links, mut notes) = LinkWatch::start(
            &ports,
            &opts.ports,
            opts.output_ports(),
            workers.shared.gate.clone(),
        );
        if let Err(e) = telemetry::register() {
            notes.push(format!("telemetry: {e:#}"));
        }
        let live = telemetry::live_scope(telemetry::Live::new(
            eal,
            &workers.plan,
            workers.shared.counters.clone(),
            ports
                .slots
                .iter()
                .map(|s| (s.port.id, s.port.name.clone()))
                .collect(),
            workers.started,
            opts.gro.is_some(),
        ));
        let mut lines = vec![hugepages.clone()];
        lines.extend(ports.lines.iter().cloned());
        lines.extend(workers.mapping(eal, &opts, lcores.generator));
        let n = workers.queue_list.len();
        Ok(Running {
            eal,
            hugepages,
            lines,
            notes,
            totals: Mutex::new(vec![QueueHist::default(); n]),
            progress: Mutex::new((0, workers.started)),
            stop: Arc::new(AtomicBool::new(false)),
            why: Mutex::new(None),
            capture,
            inner: Some(Inner {
                links,
                opts,
                ports,
                workers,
                _telemetry: live,
            }),
        })
    }
}

/// What a stopped handle no longer has.
struct Inner {
    /// First, so that it stops before the ports close on any path.
    links: LinkWatch,
    opts: RunOptions,
    ports: Ports,
    workers: Workers,
    _telemetry: telemetry::LiveGuard,
}

/// A run in progress.
pub struct Running {
    eal: &'static Eal,
    hugepages: String,
    lines: Vec<String>,
    notes: Vec<String>,
    /// Every histogram taken so far, per queue.
    totals: Mutex<Vec<QueueHist>>,
    /// Packets seen at the last look, and when they last changed.
    progress: Mutex<(u64, Instant)>,
    stop: Arc<AtomicBool>,
    /// Why `stop` was asked, when it was given a reason.
    why: Mutex<Option<String>>,
    capture: Option<Capture>,
    inner: Option<Inner>,
}

/// Stops a run from another thread (a signal handler's flag, a control
/// plane): cheap to clone, safe to call more than once.
#[derive(Clone)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// Asks the run to stop (its `wait` then returns).
    pub fn stop(&self) {
        self.0.store(true, Relaxed);
    }
}

/// A live snapshot of a run.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Since the workers started.
    pub elapsed: Duration,
    /// Per RX queue, in the order of `Running::queues`.
    pub queues: Vec<QueueStats>,
    /// Per RX port: the port's own counters (missed, no mbuf, errors).
    pub ports: Vec<(u16, PortStats)>,
    /// Per RX port: its link, how often it went down, how long it was down.
    pub links: Vec<LinkStats>,
}

/// One RX queue's counters.
#[derive(Debug, Clone)]
pub struct QueueStats {
    /// The RX port.
    pub port: u16,
    /// The RX queue of that port.
    pub queue: u16,
    /// The lcore that polls it.
    pub lcore: u32,
    /// Packets and bytes received and delivered, polls, skb counters.
    pub counts: QueueCounts,
    /// GRO's counters (published every few polls; zero with GRO off).
    pub gro: GroStats,
    /// What the queue's stage consumed and dropped.
    pub stage: StageCounts,
    /// The names of the stage's drop reasons ([`Stage::drop_reasons`]),
    /// in the order of `stage.dropped`.
    ///
    /// [`Stage::drop_reasons`]: crate::stage::Stage::drop_reasons
    pub drop_reasons: &'static [&'static str],
}

impl Stats {
    /// Packets and bytes received, all queues.
    pub fn rx(&self) -> (u64, u64) {
        self.queues.iter().fold((0, 0), |(p, b), q| {
            (p + q.counts.rx_packets, b + q.counts.rx_bytes)
        })
    }
}

impl Running {
    fn inner(&self) -> &Inner {
        self.inner.as_ref().expect("a running handle")
    }

    /// What was set up, in words: hugepages, ports, which lcore polls what.
    pub fn describe(&self) -> &[String] {
        &self.lines
    }

    /// Each RX queue as `(port, queue, lcore)`, in the order stats use.
    pub fn queues(&self) -> Vec<(u16, u16, u32)> {
        let w = &self.inner().workers;
        let mut v = vec![(0, 0, 0); w.queue_list.len()];
        for a in &w.plan {
            for q in &a.queues {
                v[q.slot] = (q.port, q.queue, a.lcore);
            }
        }
        v
    }

    /// The RX ports' ids.
    pub fn ports(&self) -> Vec<u16> {
        self.inner().ports.slots.iter().map(|s| s.port.id).collect()
    }

    /// A live snapshot (relaxed reads of what the workers publish).
    pub fn stats(&self) -> Stats {
        let w = &self.inner().workers;
        let queues = self
            .queues()
            .into_iter()
            .enumerate()
            .map(|(i, (port, queue, lcore))| QueueStats {
                port,
                queue,
                lcore,
                counts: w.shared.counters[i].read(),
                gro: w.shared.counters[i].read_gro(),
                stage: w.shared.stage[i].read(),
                drop_reasons: w.drop_reasons.get(i).copied().unwrap_or(&[]),
            })
            .collect();
        Stats {
            elapsed: w.started.elapsed(),
            queues,
            ports: self
                .ports()
                .into_iter()
                .map(|p| (p, port::stats(p)))
                .collect(),
            links: self.inner().links.stats(),
        }
    }

    /// The histograms recorded since the last call, per queue (they also
    /// go into the report's totals).
    pub fn take_histograms(&self) -> Vec<QueueHist> {
        let w = &self.inner().workers;
        let mut totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        w.shared
            .hists
            .iter()
            .zip(totals.iter_mut())
            .map(|(h, t)| {
                let mut g = h.lock().unwrap_or_else(|p| p.into_inner());
                let out = g.clone();
                t.add(&g);
                g.reset();
                out
            })
            .collect()
    }

    /// Asks the run to stop; `wait` then returns.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Asks the run to stop, with the reason the report gives.
    pub fn stop_because(&self, reason: &str) {
        let mut w = self.why.lock().unwrap_or_else(|p| p.into_inner());
        w.get_or_insert_with(|| reason.to_string());
        self.stop();
    }

    /// A handle that stops the run from elsewhere.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// Why the run should stop now, if it should: `stop` was called, the
    /// duration passed, a one-shot replay was consumed, the generator's
    /// count was received.
    pub fn stop_reason(&self) -> Option<String> {
        if self.stop.load(Relaxed) {
            let w = self.why.lock().unwrap_or_else(|p| p.into_inner());
            return Some(w.clone().unwrap_or_else(|| "stopped".into()));
        }
        if self.capture.as_ref().is_some_and(Capture::failed) {
            return Some("capture error".into());
        }
        let i = self.inner();
        let now = Instant::now();
        let rx = i.workers.rx_total();
        let idle = {
            let mut p = self.progress.lock().unwrap_or_else(|p| p.into_inner());
            if rx != p.0 {
                *p = (rx, now);
            }
            now - p.1
        };
        watch::stop_reason(&i.opts, &i.ports, &i.workers, now, idle, rx).map(str::to_string)
    }

    /// Blocks until a stop condition, stops the workers (they take what is
    /// queued, GRO lets out what it holds, the stages finish), tears the
    /// ports down and returns the report.
    pub fn wait(mut self) -> Result<Report> {
        let reason = loop {
            if let Some(r) = self.stop_reason() {
                break r;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.finish(reason)
    }

    fn finish(&mut self, stop_reason: String) -> Result<Report> {
        self.stop_in_order();
        let inner = self.inner.as_mut().expect("a running handle");
        let links = inner.links.stats();
        let duration_s = inner.workers.started.elapsed().as_secs_f64();
        let capture = self.capture.take().map(Capture::finish);
        // What the workers published last joins the totals.
        let _ = self.take_histograms();
        let inner = self.inner.take().expect("a running handle");
        let hists = std::mem::take(&mut *self.totals.lock().unwrap_or_else(|p| p.into_inner()));
        let finished = collect::Finished {
            stop_reason,
            duration_s,
            hists,
            capture,
            hugepages: self.hugepages.clone(),
        };
        let mut report = collect::report(
            self.eal,
            &inner.opts,
            &inner.ports,
            &inner.workers,
            finished,
        );
        report.notes.extend(self.notes.iter().cloned());
        for p in &mut report.ports {
            if let Some(l) = links.iter().find(|l| l.port == p.id) {
                p.link_history = l.history();
            }
        }
        inner.teardown().fill(&mut report);
        Ok(report)
    }

    /// Stops what runs, in the one order every ending takes: the capture
    /// told (its writer takes what the workers still hand it), the workers
    /// (they drain their queues while the links are still watched), then
    /// the link watch, so that held ports end closed.
    fn stop_in_order(&mut self) {
        if let Some(c) = &self.capture {
            c.stopping();
        }
        if let Some(i) = self.inner.as_mut() {
            i.workers.stop();
            i.links.stop();
        }
    }

    /// The stage merges on its own (rte_gro): the report shows GRO counters.
    #[cfg(feature = "measure")]
    pub(super) fn set_gro_elsewhere(&mut self) {
        if let Some(i) = self.inner.as_mut() {
            i.workers.gro_elsewhere = true;
        }
    }

    pub(super) fn set_forward_counters(&mut self, c: Vec<Arc<ForwardCounters>>) {
        if let Some(i) = self.inner.as_mut() {
            i.workers.forward = c;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.inner.is_none() {
            return;
        }
        self.stop_in_order();
        drop(self.capture.take());
        if let Some(i) = self.inner.take() {
            i.teardown();
        }
    }
}

impl Inner {
    /// After `Running::stop_in_order`: the workers let go of their queues' state,
    /// then the ports close and every pool is counted.
    fn teardown(self) -> ports::Teardown {
        drop(self.workers);
        self.ports.teardown()
    }
}

//! Putting the work on lcores: which lcore polls which queues (the mapping
//! is printed), the workers' jobs, the capture writer, the generator's job.

use super::options::{RunOptions, CAPTURE_SLOTS};
use super::ports::Ports;
use crate::capture::Capture;
use crate::eal::{Eal, Launched};
use crate::forward::{ForwardConf, ForwardCounters, Forwarder, TxOffloads};
use crate::gen::{self, GenStats};
use crate::hist::QueueHist;
use crate::ring_port::PoolPtr;
use crate::stats::QueueCounters;
use crate::worker::{self, Assignment, StageKind, WorkerConf};
use anyhow::{bail, Result};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which lcores do what.
pub(super) struct Lcores {
    pub workers: Vec<u32>,
    /// The embedded generator's own lcore.
    pub generator: Option<u32>,
    /// Every lcore that may touch a pool (for cache sizing): main, workers, generator.
    pub count: u32,
}

impl Lcores {
    pub fn choose(eal: &Eal, opts: &RunOptions) -> Result<Lcores> {
        let mut workers = eal.worker_lcores();
        let generator = if opts.uses_generator() {
            if workers.len() < 2 {
                bail!(
                    "the embedded generator needs its own lcore besides the workers: EAL has {} worker lcore(s); \
                     give e.g. -- --lcores 0@0,1@1,2@0 or name a port with --port",
                    workers.len()
                );
            }
            workers.pop()
        } else {
            None
        };
        if workers.is_empty() {
            bail!("no worker lcore: give EAL at least two lcores (e.g. -- -l 0,1)");
        }
        let count = (workers.len() + 1 + generator.is_some() as usize) as u32;
        Ok(Lcores {
            workers,
            generator,
            count,
        })
    }
}

/// A run in progress: what the main lcore watches and later stops.
pub(super) struct Running {
    /// `(port, queue)` per counter slot.
    pub queue_list: Vec<(u16, u16)>,
    pub plan: Vec<Assignment>,
    pub counters: Arc<[QueueCounters]>,
    pub hists: Arc<[Mutex<QueueHist>]>,
    pub capture: Option<Capture>,
    pub gen_stats: Arc<GenStats>,
    /// The forward stage's counters, one per worker.
    pub forward: Vec<Arc<ForwardCounters>>,
    pub started: Instant,
    worker_stop: Arc<AtomicBool>,
    gen_stop: Arc<AtomicBool>,
    workers: Vec<Launched>,
    generator: Option<Launched>,
}

impl Running {
    /// Launches the workers (and the generator) on their lcores.
    pub fn start(eal: &Eal, opts: &RunOptions, lc: &Lcores, ports: &Ports) -> Result<Running> {
        let queue_list = ports.queues();
        let plan = worker::assign(&queue_list, &lc.workers);
        let counters: Arc<[QueueCounters]> = (0..queue_list.len())
            .map(|_| QueueCounters::default())
            .collect();
        let hists: Arc<[Mutex<QueueHist>]> = (0..queue_list.len())
            .map(|_| Mutex::new(QueueHist::default()))
            .collect();
        if opts.live {
            print_mapping(eal, opts, &plan, lc.generator);
        }
        let capture = match &opts.capture {
            Some(p) => {
                let cpu = usize::try_from(eal.lcore_cpu(eal.main_lcore())).ok();
                Some(Capture::start(p, CAPTURE_SLOTS, cpu)?)
            }
            None => None,
        };
        let wc = WorkerConf {
            burst: opts.burst,
            drain_rounds: opts.rx_desc as u32 / opts.burst.max(1) as u32 + 4,
            gro: opts.gro,
            gro_hold_tsc: opts.gro_flush_us as u64 * eal.tsc_hz() / 1_000_000,
            stage: match (&capture, &ports.forward) {
                (Some(c), _) => StageKind::Capture(c.tx()),
                (None, Some(_)) => StageKind::Forward,
                (None, None) => StageKind::Sink,
            },
            tsc_hz: eal.tsc_hz(),
            rte_gro: opts.rte_gro,
            free_per_packet: opts.free_per_packet,
            cycles: opts.cycles,
        };
        let mut r = Running {
            queue_list,
            counters,
            hists,
            capture,
            gen_stats: Arc::new(GenStats::default()),
            forward: Vec::new(),
            started: Instant::now(),
            worker_stop: Arc::new(AtomicBool::new(false)),
            gen_stop: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
            generator: None,
            plan,
        };
        for (i, a) in r.plan.iter().enumerate() {
            let qs: Vec<_> = a
                .queues
                .iter()
                .map(|q| (*q, ports.skb_conf(opts, q.port, q.queue)))
                .collect();
            let (c, h, st) = (r.counters.clone(), r.hists.clone(), r.worker_stop.clone());
            // Each worker forwards on a TX queue of its own: no sharing.
            let fwd = match (&ports.forward, &opts.forward) {
                (Some((port, pool)), Some((_, encap))) => {
                    let conf = ForwardConf {
                        port: port.id,
                        queue: i as u16,
                        encap: *encap,
                        offloads: TxOffloads::Port,
                        tx_retries: 8,
                    };
                    let counters = Arc::new(ForwardCounters::default());
                    r.forward.push(counters.clone());
                    Some((Forwarder::new(conf, pool.clone())?, counters))
                }
                _ => None,
            };
            r.workers
                .push(eal.launch(a.lcore, move || worker::run(qs, c, h, st, wc, fwd))?);
        }
        if let (Some(l), Some(rp)) = (lc.generator, &ports.ring_port) {
            let (payload, payload_sum) = ports.payload.clone().unwrap_or_default();
            let job = gen::GenJob {
                cfg: opts.gen.clone(),
                rings: (0..rp.queues()).map(|q| rp.rx_ring(q)).collect(),
                pool: PoolPtr(ports.pool_of(rp.port_id, 0).as_ptr()),
                payload,
                payload_sum,
                stats: r.gen_stats.clone(),
                stop: r.gen_stop.clone(),
                tsc_hz: eal.tsc_hz(),
            };
            r.generator = Some(eal.launch(l, move || gen::run(job))?);
        }
        Ok(r)
    }

    pub fn has_generator(&self) -> bool {
        self.generator.is_some()
    }

    /// Stops the source first, then the workers (which take what is
    /// queued and flush GRO), and returns the capture writer, if any.
    pub fn stop(&mut self) -> Option<Capture> {
        self.gen_stop.store(true, Relaxed);
        if let Some(g) = self.generator.take() {
            g.wait();
        }
        self.worker_stop.store(true, Relaxed);
        for l in self.workers.drain(..) {
            l.wait();
        }
        self.capture.take()
    }

    /// Packets received so far, all queues.
    pub fn rx_total(&self) -> u64 {
        self.counters.iter().map(|q| q.read().rx_packets).sum()
    }

    /// Packets received so far on a port.
    pub fn rx_of_port(&self, id: u16) -> u64 {
        self.queue_list
            .iter()
            .zip(self.counters.iter())
            .filter(|((p, _), _)| *p == id)
            .map(|(_, c)| c.read().rx_packets)
            .sum()
    }
}

fn print_mapping(eal: &Eal, opts: &RunOptions, plan: &[Assignment], generator: Option<u32>) {
    for a in plan {
        let qs: Vec<String> = a
            .queues
            .iter()
            .map(|q| format!("port {} queue {}", q.port, q.queue))
            .collect();
        eprintln!(
            "lcore {} (cpu {}): {}",
            a.lcore,
            eal.lcore_cpu(a.lcore),
            qs.join(", ")
        );
    }
    if let Some(g) = generator {
        let rate = if opts.gen.rate_pps == 0 {
            "max rate".to_string()
        } else {
            format!("{} pps", opts.gen.rate_pps)
        };
        eprintln!(
            "lcore {g} (cpu {}): generator, {} TCP flow(s), MSS {}, {rate}",
            eal.lcore_cpu(g),
            opts.gen.flows,
            opts.gen.mss
        );
    }
}

//! Putting the work on lcores: which lcore polls which queues, each queue's
//! stage, the workers' jobs, the generator's job.

use super::options::RunOptions;
use super::ports::Ports;
use crate::counters::hist::QueueHist;
use crate::counters::stats::QueueCounters;
use crate::dpdk::eal::{Eal, Launched};
use crate::dpdk::ring_port::PoolPtr;
use crate::forward::ForwardCounters;
use crate::gen::{self, GenStats};
use crate::stage::{QueueSetup, Shared, Stage, StageCounters};
use crate::worker::{self, Assignment, QueueJob, WorkerConf};
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
    /// The workers that will poll: one per RX queue at most (`worker::assign`).
    pub fn polling(&self, opts: &RunOptions) -> u16 {
        let queues = opts.ports.len().max(1) * opts.rx.queues as usize;
        self.workers.len().min(queues).min(u16::MAX as usize) as u16
    }

    pub fn choose(eal: &Eal, opts: &RunOptions) -> Result<Lcores> {
        let mut workers = eal.worker_lcores();
        let generator = if opts.uses_generator() {
            if workers.len() < 2 {
                bail!(
                    "the embedded generator needs its own lcore besides the workers: EAL has {} worker lcore(s); \
                     give EAL one more (e.g. --lcores 0@0,1@1,2@0 in its arguments) or name a port ({})",
                    workers.len(),
                    crate::setting::Setting::Ports
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

/// The workers and the generator on their lcores, and what they share.
pub(super) struct Workers {
    /// `(port, queue)` per counter slot.
    pub queue_list: Vec<(u16, u16)>,
    pub plan: Vec<Assignment>,
    pub shared: Shared,
    pub gen_stats: Arc<GenStats>,
    /// The forward stages' counters, one per RX queue (built-in forward only).
    pub forward: Vec<Arc<ForwardCounters>>,
    /// Each queue's stage: its drop reasons' names, by slot.
    pub drop_reasons: Vec<&'static [&'static str]>,
    pub stage_name: &'static str,
    /// A measurement stage merges instead of grorx's GRO (rte_gro): report GRO.
    pub gro_elsewhere: bool,
    pub started: Instant,
    worker_stop: Arc<AtomicBool>,
    gen_stop: Arc<AtomicBool>,
    workers: Vec<Launched>,
    generator: Option<Launched>,
}

/// A stage per RX queue, made on the main thread before the workers start.
pub(super) type Factory<'a, S> = dyn FnMut(&QueueSetup, &Ports) -> Result<S> + 'a;

impl Workers {
    /// Makes every queue's stage, then launches the workers (and the
    /// generator) on their lcores. Nothing is launched if a stage fails.
    pub fn start<S: Stage>(
        eal: &Eal,
        opts: &RunOptions,
        lc: &Lcores,
        ports: &Ports,
        make: &mut Factory<'_, S>,
    ) -> Result<Workers> {
        let queue_list = ports.queues();
        let plan = worker::assign(&queue_list, &lc.workers);
        let n = queue_list.len();
        let max_port = (queue_list.iter().map(|&(p, _)| p))
            .chain(ports.outputs.iter().map(|(p, _)| p.id))
            .max()
            .unwrap_or(0);
        let shared = Shared {
            counters: (0..n).map(|_| QueueCounters::default()).collect(),
            hists: (0..n).map(|_| Mutex::new(QueueHist::default())).collect(),
            stage: (0..n).map(|_| StageCounters::default()).collect(),
            gate: super::link::gate(ports, max_port, plan.len()),
        };
        let mut drop_reasons: Vec<&'static [&'static str]> = vec![&[]; n];
        let jobs = queue_jobs(opts, ports, &plan, &shared, make, &mut drop_reasons)?;
        let mut r = Workers {
            queue_list,
            shared,
            gen_stats: Arc::new(GenStats::default()),
            forward: Vec::new(),
            drop_reasons,
            stage_name: short_type_name::<S>(),
            gro_elsewhere: false,
            started: Instant::now(),
            worker_stop: Arc::new(AtomicBool::new(false)),
            gen_stop: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
            generator: None,
            plan,
        };
        if let Err(e) = r.launch_workers(eal, opts, jobs) {
            r.stop();
            return Err(e);
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
            match eal.launch(l, move || gen::run(job)) {
                Ok(g) => r.generator = Some(g),
                Err(e) => {
                    r.stop();
                    return Err(e);
                }
            }
        }
        Ok(r)
    }

    /// Launches a worker per lcore of the plan with its queues. On a
    /// failure, the workers not launched leave the gate (they never
    /// acknowledge anything); the caller stops those that were.
    fn launch_workers<S: Stage>(
        &mut self,
        eal: &Eal,
        opts: &RunOptions,
        jobs: Vec<(u32, Vec<QueueJob<S>>)>,
    ) -> Result<()> {
        let wc = worker_conf(eal, opts);
        for (me, (lcore, qs)) in jobs.into_iter().enumerate() {
            let (sh, st) = (self.shared.clone(), self.worker_stop.clone());
            let job = if opts.cycles {
                eal.launch(lcore, move || worker::run::<S, true>(qs, sh, st, wc, me))
            } else {
                eal.launch(lcore, move || worker::run::<S, false>(qs, sh, st, wc, me))
            };
            match job {
                Ok(l) => self.workers.push(l),
                Err(e) => {
                    for w in me..self.plan.len() {
                        self.shared.gate.leave(w);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    pub fn has_generator(&self) -> bool {
        self.generator.is_some()
    }

    /// Stops the source first, then the workers (which take what is queued,
    /// flush GRO and finish their stages).
    pub fn stop(&mut self) {
        self.gen_stop.store(true, Relaxed);
        if let Some(g) = self.generator.take() {
            g.wait();
        }
        self.worker_stop.store(true, Relaxed);
        // Workers read their stop flag when the gate's epoch moves.
        self.shared.gate.wake();
        for l in self.workers.drain(..) {
            l.wait();
        }
    }

    /// Packets received so far, all queues.
    pub fn rx_total(&self) -> u64 {
        self.shared
            .counters
            .iter()
            .map(|q| q.read().rx_packets)
            .sum()
    }

    /// Packets received so far on a port.
    pub fn rx_of_port(&self, id: u16) -> u64 {
        self.queue_list
            .iter()
            .zip(self.shared.counters.iter())
            .filter(|((p, _), _)| *p == id)
            .map(|(_, c)| c.read().rx_packets)
            .sum()
    }

    /// Which lcore polls which queues, and the generator's lcore, in words.
    pub fn mapping(&self, eal: &Eal, opts: &RunOptions, generator: Option<u32>) -> Vec<String> {
        let mut lines = Vec::new();
        for a in &self.plan {
            let qs: Vec<String> = a
                .queues
                .iter()
                .map(|q| format!("port {} queue {}", q.port, q.queue))
                .collect();
            lines.push(format!(
                "lcore {} (cpu {}): {}",
                a.lcore,
                eal.lcore_cpu(a.lcore),
                qs.join(", ")
            ));
        }
        if let Some(g) = generator {
            let rate = if opts.gen.rate_pps == 0 {
                "max rate".to_string()
            } else {
                format!("{} pps", opts.gen.rate_pps)
            };
            let what = if opts.gen.udp {
                format!(
                    "{} UDP flow(s), datagrams of {}",
                    opts.gen.flows, opts.gen.mss
                )
            } else {
                format!("{} TCP flow(s), MSS {}", opts.gen.flows, opts.gen.mss)
            };
            let flagged = if opts.gen.nic_csum {
                ", checksums flagged good as by a NIC's RX offload"
            } else {
                ""
            };
            lines.push(format!(
                "lcore {g} (cpu {}): generator, {what}, {rate}{flagged}",
                eal.lcore_cpu(g)
            ));
        }
        lines
    }
}

/// The last path segment of a type's name (`Sink`, `CaptureStage`, ...).
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// How the workers poll: the options in TSC ticks.
fn worker_conf(eal: &Eal, opts: &RunOptions) -> WorkerConf {
    WorkerConf {
        burst: opts.rx.burst,
        drain_rounds: opts.rx.desc as u32 / opts.rx.burst.max(1) as u32 + 4,
        gro: opts.gro,
        gro_hold_tsc: opts
            .gro
            .map_or(0, |g| g.hold_us as u64 * eal.tsc_hz() / 1_000_000),
        reorder_tsc: match &opts.gro {
            Some(g) if g.reorder.segments > 0 => {
                g.reorder.wait_us as u64 * eal.tsc_hz() / 1_000_000
            }
            _ => 0,
        },
        tsc_hz: eal.tsc_hz(),
    }
}

/// Each worker's lcore and its queues, each with the stage `make` gives
/// it (whose drop reasons go to `drop_reasons`, by queue slot).
fn queue_jobs<S: Stage>(
    opts: &RunOptions,
    ports: &Ports,
    plan: &[Assignment],
    shared: &Shared,
    make: &mut Factory<'_, S>,
    drop_reasons: &mut [&'static [&'static str]],
) -> Result<Vec<(u32, Vec<QueueJob<S>>)>> {
    let mut jobs = Vec::new();
    for (w, a) in plan.iter().enumerate() {
        let mut qs = Vec::new();
        for q in &a.queues {
            let setup = QueueSetup {
                port: q.port,
                queue: q.queue,
                index: q.slot as u16,
                tx_queue: w as u16,
                lcore: a.lcore,
                pool: ports.pool_of(q.port, q.queue).clone(),
                outputs: ports.outputs_of(q.port, q.queue),
                gate: shared.gate.clone(),
            };
            let stage = make(&setup, ports)?;
            drop_reasons[q.slot] = stage.drop_reasons();
            qs.push(QueueJob {
                q: *q,
                skb: ports.skb_conf(opts, q.port, q.queue),
                stage,
            });
        }
        jobs.push((a.lcore, qs));
    }
    Ok(jobs)
}

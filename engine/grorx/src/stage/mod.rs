//! Stages: what happens to the packets GRO delivers. Every RX queue has a
//! stage of its own, on the worker lcore that polls the queue: it takes the
//! queue's packets one by one (`Stage::packet`), merged or passed through,
//! in the order GRO lets them out, and at the end of every poll
//! (`Stage::end_of_poll`) delivers what it batched. A packet is an owned
//! [`Skb`]: the stage transmits it ([`TxQueue`]), consumes or drops it
//! ([`Ctx`]: freed in bulk and counted), or keeps it. Nothing is shared
//! between queues, so a stage needs no lock.
//!
//! The built-in stages use this same trait: [`Sink`] (count and free),
//! [`CaptureStage`] (hand to the pcap writer), [`ForwardStage`]
//! (encapsulate, segment, transmit).

mod capture;
mod forward;
mod sink;
mod tx;

pub use capture::CaptureStage;
pub use forward::ForwardStage;
pub use sink::Sink;
pub use tx::{TxQueue, TxStats};

use crate::counters::hist::QueueHist;
use crate::counters::stats::QueueCounters;
use crate::dpdk::mbuf::BulkFree;
use crate::dpdk::mempool::Mempool;
use crate::forward::{Encap, ForwardConf, Forwarder, TxOffloads};
use crate::port::gate::PollGate;
use crate::skb::Skb;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The most drop reasons a stage may name.
pub const MAX_DROP_REASONS: usize = 8;

/// What happens to the packets of one RX queue after GRO.
///
/// A stage is created on the main thread (its factory gets the queue's
/// [`QueueSetup`]) and then moved to the worker lcore that polls the queue.
pub trait Stage: Send + 'static {
    /// True for a stage whose `packet` consumes every packet untouched (a
    /// sink): with GRO off the worker then frees each burst in one pass,
    /// without building skbs, and counts it consumed. A stage that reads,
    /// sends or keeps packets leaves it false.
    const CONSUMES_ALL: bool = false;

    /// One packet out of GRO. The stage owns it from here: transmit it,
    /// consume or drop it through `ctx`, or keep it (dropping an [`Skb`]
    /// frees it, uncounted).
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>);

    /// The end of a poll: deliver what was batched (a transmit burst).
    #[inline(always)]
    fn end_of_poll(&mut self, _ctx: &mut Ctx<'_>) {}

    /// The worker is stopping: GRO has let out everything it held. What the
    /// stage still keeps is freed when it is dropped.
    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.end_of_poll(ctx);
    }

    /// Names of the reasons this stage drops packets for, indexed by
    /// [`Ctx::drop`]'s `reason` (at most [`MAX_DROP_REASONS`]).
    fn drop_reasons(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Where a stage's queue is, and what it may use, when it is created.
#[derive(Clone)]
pub struct QueueSetup {
    /// The RX port.
    pub port: u16,
    /// The RX queue of that port.
    pub queue: u16,
    /// This queue's index among all the run's RX queues (0..n).
    pub index: u16,
    /// The TX queue this queue's worker owns on every port of the run (the
    /// worker's index): stages on one worker share it, never two lcores.
    pub tx_queue: u16,
    /// The lcore that will poll it.
    pub lcore: u32,
    /// The pool the queue receives into: header mbufs for a prepend that
    /// does not fit the headroom ([`Skb::prepend`]) may come from it.
    pub pool: Arc<Mempool>,
    /// The run's output ports (`RunOptions::stage.outputs`, or the forward
    /// stage's `to`), in order: their ids and the pools for their header
    /// mbufs and software segments (for an RX port, this queue's own pool).
    pub outputs: Vec<(u16, Arc<Mempool>)>,
    /// The run's port words: transmits wait while a port is closed.
    pub(crate) gate: Arc<crate::port::gate::PollGate>,
}

impl QueueSetup {
    /// A transmit queue on `port`: the port's TX queue `tx_queue`, which
    /// this queue's worker owns. The port must be one of the run's RX ports
    /// or outputs (each has a TX queue per worker).
    pub fn tx(&self, port: u16) -> anyhow::Result<TxQueue> {
        Ok(TxQueue::new(port, self.tx_queue)?.gated(self.tx_gate(port)))
    }

    fn tx_gate(&self, port: u16) -> crate::port::gate::TxGate {
        crate::port::gate::TxGate::new(self.gate.clone(), port)
    }

    /// The id of output port `i` (`RunOptions::stage.outputs[i]`; an RX port of
    /// the run may be one).
    pub fn output(&self, i: usize) -> Option<u16> {
        self.outputs.get(i).map(|o| o.0)
    }

    /// A forwarder to output `i` on this worker's own TX queue: `encap`
    /// prepended in the headroom, merged packets segmented by the port (TSO)
    /// or in software, transmitted in bulk (see [`crate::forward`]).
    pub fn forwarder(&self, i: usize, encap: Encap) -> anyhow::Result<Forwarder> {
        let Some((port, pool)) = self.outputs.get(i) else {
            anyhow::bail!(
                "output {i} does not exist: the run has {} output port(s) (RunOptions::stage.outputs)",
                self.outputs.len()
            );
        };
        Forwarder::new(
            ForwardConf {
                port: *port,
                queue: self.tx_queue,
                encap,
                offloads: TxOffloads::Port,
                tx_retries: 8,
            },
            pool.clone(),
        )
        .map(|f| f.gated(self.tx_gate(*port)))
    }
}

/// What a worker's queue shares with the rest of the run.
// Here, not in worker/, because a stage's Ctx holds it: the worker imports
// the stage layer, never the other way round.
#[doc(hidden)]
#[derive(Clone)]
pub struct Shared {
    pub counters: Arc<[QueueCounters]>,
    pub hists: Arc<[Mutex<QueueHist>]>,
    pub stage: Arc<[StageCounters]>,
    /// Which ports may be polled; each worker acknowledges changes.
    pub gate: Arc<PollGate>,
}

/// What a stage may do with packets besides keeping them: free them
/// (in bulk, once per poll) under a counted reason.
pub struct Ctx<'a> {
    pub(crate) freer: &'a mut BulkFree,
    pub(crate) counts: &'a mut StageCounts,
    /// The run's shared counters and this queue's slot in them (for the
    /// measurement stages that keep GRO counters of their own).
    pub(crate) shared: &'a Shared,
    pub(crate) slot: usize,
    pub(crate) port: u16,
    pub(crate) queue: u16,
}

impl Ctx<'_> {
    /// The RX port and queue whose packets these are.
    pub fn rx_queue(&self) -> (u16, u16) {
        (self.port, self.queue)
    }

    /// The packet reached its end here (a sink): freed, counted as consumed.
    #[inline(always)]
    pub fn consume(&mut self, skb: Skb) {
        self.counts.consumed += 1;
        // SAFETY: the skb owned the chain and gives it up to be freed once.
        unsafe { self.freer.chain(skb.into_mbuf()) };
    }

    /// The stage refuses the packet: freed, counted under `reason` (an index
    /// into [`Stage::drop_reasons`]; one past them counts as "other").
    #[inline(always)]
    pub fn drop(&mut self, skb: Skb, reason: usize) {
        self.counts.dropped[reason.min(MAX_DROP_REASONS)] += 1;
        // SAFETY: as in `consume`.
        unsafe { self.freer.chain(skb.into_mbuf()) };
    }
}

/// A stage's counters on its worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageCounts {
    /// Packets freed at their end ([`Ctx::consume`]).
    pub consumed: u64,
    /// Per reason; the last counts reasons beyond the stage's names.
    pub dropped: [u64; MAX_DROP_REASONS + 1],
}

/// `StageCounts` as single-writer atomics, read by the stats thread.
#[derive(Default)]
pub struct StageCounters {
    consumed: AtomicU64,
    dropped: [AtomicU64; MAX_DROP_REASONS + 1],
}

impl StageCounters {
    /// Stores the worker's counts (single writer: plain relaxed stores).
    pub fn publish(&self, c: &StageCounts) {
        self.consumed.store(c.consumed, Relaxed);
        for (a, v) in self.dropped.iter().zip(c.dropped) {
            a.store(v, Relaxed);
        }
    }

    /// The counts as last published.
    pub fn read(&self) -> StageCounts {
        StageCounts {
            consumed: self.consumed.load(Relaxed),
            dropped: std::array::from_fn(|i| self.dropped[i].load(Relaxed)),
        }
    }
}

impl StageCounts {
    /// Adds `o`'s counts (saturating), as for a total over queues.
    pub fn add(&mut self, o: &StageCounts) {
        self.consumed = self.consumed.saturating_add(o.consumed);
        for (a, b) in self.dropped.iter_mut().zip(o.dropped) {
            *a = a.saturating_add(b);
        }
    }

    /// Drops by name (`names` from the stage; "other" beyond them), the
    /// reasons that dropped nothing left out.
    pub fn named_drops(&self, names: &[&'static str]) -> Vec<(String, u64)> {
        self.dropped
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| {
                let name = names.get(i).filter(|_| i < MAX_DROP_REASONS);
                (name.copied().unwrap_or("other").to_string(), n)
            })
            .collect()
    }
}

//! A transmit queue a stage owns: packets batched, sent with one
//! `rte_eth_tx_burst` per batch, a full ring retried a bounded number of
//! times and what it still refuses freed and counted (never an unbounded
//! spin, never a silent loss).

use crate::dpdk::mbuf::BulkFree;
use crate::port::gate::TxGate;
use crate::skb::Skb;
use anyhow::{bail, Result};
use dpdk_sys::{self as sys, inline as mb};

/// Packets batched before a transmit.
const BATCH: usize = 64;
/// Transmit attempts without progress before the rest is dropped.
const RETRIES: u32 = 8;

/// What a [`TxQueue`] sent and dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxStats {
    /// Packets the port took.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Refused by a full TX ring after the retries: freed.
    pub dropped: u64,
    /// Freed unsent: the port was closed to transmits (its link down, or
    /// its peer's queues being torn down) and the batch was full.
    pub link_down: u64,
}

/// One TX queue of a port, used by one stage (no sharing, no lock).
pub struct TxQueue {
    port: u16,
    queue: u16,
    pending: [*mut sys::rte_mbuf; BATCH],
    n: usize,
    stats: TxStats,
    /// The run's word for the port, when it has one (see `crate::port::gate`).
    gate: Option<TxGate>,
}

// SAFETY: the queue owns the mbufs it batches; it is created on the main
// thread and then used by the one lcore that runs its stage.
unsafe impl Send for TxQueue {}

impl TxQueue {
    /// TX queue `queue` of `port`, which must be configured and started.
    pub fn new(port: u16, queue: u16) -> Result<TxQueue> {
        let info = crate::port::dev_info(port)?;
        if queue >= info.nb_tx_queues {
            bail!(
                "port {port} has {} TX queue(s); TX queue {queue} does not exist: configure one \
                 TX queue per worker of the run",
                info.nb_tx_queues
            );
        }
        Ok(TxQueue {
            port,
            queue,
            pending: [std::ptr::null_mut(); BATCH],
            n: 0,
            stats: TxStats::default(),
            gate: None,
        })
    }

    /// Transmits only while `gate` is open: while it is closed a batch
    /// waits, and a full one is freed (`TxStats::link_down`).
    pub(crate) fn gated(mut self, gate: TxGate) -> TxQueue {
        self.gate = Some(gate);
        self
    }

    /// The port and queue this transmits on.
    pub fn id(&self) -> (u16, u16) {
        (self.port, self.queue)
    }

    /// Queues a packet; a full batch is transmitted at once.
    #[inline]
    pub fn push(&mut self, skb: Skb) {
        if self.n == BATCH {
            self.send(true);
        }
        self.pending[self.n] = skb.into_mbuf();
        self.n += 1;
    }

    /// Transmits what is batched (call at the end of every poll). While the
    /// port is closed to transmits the batch waits.
    pub fn flush(&mut self) {
        self.send(false);
    }

    /// Transmits the batch; with the port closed, keeps it unless it must
    /// be emptied (`must_empty`), then frees it.
    fn send(&mut self, must_empty: bool) {
        if self.n == 0 {
            return;
        }
        if self.gate.as_ref().is_some_and(|g| !g.open()) {
            if must_empty {
                let mut freer = BulkFree::new();
                for &m in &self.pending[..self.n] {
                    // SAFETY: owned chains, never handed to the PMD.
                    unsafe { freer.chain(m) };
                }
                self.stats.link_down += self.n as u64;
                self.n = 0;
            }
            return;
        }
        let bytes: u64 = self.pending[..self.n]
            .iter()
            // SAFETY: owned chain heads; a field read.
            .map(|&m| unsafe { mb::pkt_len(m) } as u64)
            .sum();
        let (mut sent, mut idle) = (0usize, 0u32);
        while sent < self.n && idle < RETRIES {
            // SAFETY: pending[sent..n] are owned chains; the PMD takes the
            // first k of them.
            let k = unsafe {
                sys::rte_eth_tx_burst(
                    self.port,
                    self.queue,
                    self.pending[sent..self.n].as_mut_ptr(),
                    (self.n - sent) as u16,
                )
            } as usize;
            sent += k;
            idle = if k == 0 { idle + 1 } else { 0 };
        }
        let mut lost = 0u64;
        if sent < self.n {
            let mut freer = BulkFree::new();
            for &m in &self.pending[sent..self.n] {
                // SAFETY: the PMD did not take these; we still own them.
                lost += unsafe { freer.chain(m) } as u64;
            }
            self.stats.dropped += (self.n - sent) as u64;
        }
        self.stats.packets += sent as u64;
        self.stats.bytes += bytes - lost;
        self.n = 0;
    }

    /// What was sent and dropped so far.
    pub fn stats(&self) -> &TxStats {
        &self.stats
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        self.send(true);
    }
}

//! A transmit queue a stage owns: packets batched, sent with one
//! `rte_eth_tx_burst` per batch, a full ring retried a bounded number of
//! times and what it still refuses freed and counted (never an unbounded
//! spin, never a silent loss).

use crate::mbuf::BulkFree;
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
}

/// One TX queue of a port, used by one stage (no sharing, no lock).
pub struct TxQueue {
    port: u16,
    queue: u16,
    pending: [*mut sys::rte_mbuf; BATCH],
    n: usize,
    stats: TxStats,
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
                 TX queue per RX queue of the run",
                info.nb_tx_queues
            );
        }
        Ok(TxQueue {
            port,
            queue,
            pending: [std::ptr::null_mut(); BATCH],
            n: 0,
            stats: TxStats::default(),
        })
    }

    /// The port and queue this transmits on.
    pub fn id(&self) -> (u16, u16) {
        (self.port, self.queue)
    }

    /// Queues a packet; a full batch is transmitted at once.
    #[inline]
    pub fn push(&mut self, skb: Skb) {
        if self.n == BATCH {
            self.flush();
        }
        self.pending[self.n] = skb.into_mbuf();
        self.n += 1;
    }

    /// Transmits what is batched (call at the end of every poll).
    pub fn flush(&mut self) {
        if self.n == 0 {
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
        self.flush();
    }
}

//! A transmit queue a stage owns: packets batched and sent by the one
//! transmit loop (`crate::dpdk::tx`: a full ring retried a bounded number
//! of times, what it still refuses freed and counted), held while the port
//! is closed to transmits.

use crate::dpdk::tx::TxBatch;
use crate::port::gate::TxGate;
use crate::skb::Skb;
use anyhow::{bail, Result};

/// Packets batched before a transmit.
const BATCH: usize = 64;
/// Transmit calls that take nothing, after the first, before the rest is
/// dropped.
const RETRIES: u32 = 7;

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
    batch: TxBatch<BATCH>,
    stats: TxStats,
    /// The run's word for the port, when it has one (see `crate::port::gate`).
    gate: Option<TxGate>,
}

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
            batch: TxBatch::new(port, queue),
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
        self.batch.id()
    }

    /// Queues a packet; a full batch is transmitted at once.
    #[inline]
    pub fn push(&mut self, skb: Skb) {
        if self.batch.is_full() {
            self.send(true);
        }
        // SAFETY: the skb's mbuf is a chain we own; the batch takes it.
        unsafe { self.batch.push(skb.into_mbuf()) };
    }

    /// Transmits what is batched (call at the end of every poll). While the
    /// port is closed to transmits the batch waits.
    pub fn flush(&mut self) {
        self.send(false);
    }

    /// Transmits the batch; with the port closed, keeps it unless it must
    /// be emptied (`must_empty`), then frees it.
    fn send(&mut self, must_empty: bool) {
        if self.batch.is_empty() {
            return;
        }
        if self.gate.as_ref().is_some_and(|g| !g.open()) {
            if must_empty {
                self.stats.link_down += self.batch.free();
            }
            return;
        }
        let sent = self.batch.send(RETRIES);
        self.stats.packets += sent.packets;
        self.stats.bytes += sent.bytes;
        self.stats.dropped += sent.dropped;
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

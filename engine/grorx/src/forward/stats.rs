//! The forward stage's counters: per worker, published to the stats thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The forwarder's counters (single writer: its lcore).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ForwardStats {
    /// Packets handed to `push`.
    pub packets_in: u64,
    /// Packets (segments, TSO packets) the PMD took.
    pub tx_packets: u64,
    /// Bytes of those packets, encapsulation included.
    pub tx_bytes: u64,
    /// Packets the PMD did not take after the retries: freed.
    pub tx_dropped: u64,
    /// Prepends (and software segments) that did not fit the headroom: a
    /// header mbuf was chained in front.
    pub headroom_miss: u64,
    /// Merged packets segmented in software (a BIG TCP packet cut into TSO
    /// pieces too).
    pub gso_packets: u64,
    /// Segments software GSO made of them (TSO pieces count in
    /// `tso_packets`).
    pub gso_segments: u64,
    /// Software segments whose payload was copied (unaligned chains).
    pub copied_segments: u64,
    /// Packets handed to the port with RTE_MBUF_F_TX_TCP_SEG: merged
    /// packets, and the pieces of BIG TCP packets.
    pub tso_packets: u64,
    /// Merged packets handed whole to a virtio peer (gso_type set).
    pub virtio_gso_packets: u64,
    /// Packets (or segments) dropped: no mbuf for a header or a copy.
    pub no_mbuf: u64,
    /// Packets dropped: rte_eth_tx_prepare refused them.
    pub prepare_failed: u64,
    /// Merged packets dropped: their layout cannot be segmented.
    pub malformed: u64,
    /// Packets freed unsent: the port was closed to transmits (its link
    /// down, or its peer's queues being torn down) and the batch was full,
    /// or the run ended.
    pub link_down: u64,
}

impl ForwardStats {
    const N: usize = 14;

    fn to_array(self) -> [u64; Self::N] {
        [
            self.packets_in,
            self.tx_packets,
            self.tx_bytes,
            self.tx_dropped,
            self.headroom_miss,
            self.gso_packets,
            self.gso_segments,
            self.copied_segments,
            self.tso_packets,
            self.virtio_gso_packets,
            self.no_mbuf,
            self.prepare_failed,
            self.malformed,
            self.link_down,
        ]
    }

    fn from_array(a: [u64; Self::N]) -> ForwardStats {
        ForwardStats {
            packets_in: a[0],
            tx_packets: a[1],
            tx_bytes: a[2],
            tx_dropped: a[3],
            headroom_miss: a[4],
            gso_packets: a[5],
            gso_segments: a[6],
            copied_segments: a[7],
            tso_packets: a[8],
            virtio_gso_packets: a[9],
            no_mbuf: a[10],
            prepare_failed: a[11],
            malformed: a[12],
            link_down: a[13],
        }
    }

    /// Sums another forwarder's counters into these.
    pub fn add(&mut self, o: &ForwardStats) {
        let mut a = self.to_array();
        for (x, y) in a.iter_mut().zip(o.to_array()) {
            *x += y;
        }
        *self = ForwardStats::from_array(a);
    }
}

/// `ForwardStats` shared with the stats thread: single-writer atomics,
/// published with plain stores.
#[derive(Debug, Default)]
pub struct ForwardCounters([AtomicU64; ForwardStats::N]);

impl ForwardCounters {
    /// Publishes the forwarder's counters (its lcore only).
    pub fn publish(&self, s: &ForwardStats) {
        for (c, v) in self.0.iter().zip(s.to_array()) {
            c.store(v, Relaxed);
        }
    }

    /// The counters as last published.
    pub fn load(&self) -> ForwardStats {
        let mut a = [0u64; ForwardStats::N];
        for (v, c) in a.iter_mut().zip(&self.0) {
            *v = c.load(Relaxed);
        }
        ForwardStats::from_array(a)
    }
}

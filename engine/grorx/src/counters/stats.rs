//! Per-queue counters: written by exactly one worker lcore, read by the
//! stats thread. Each queue's block is cache-line aligned so no two queues
//! share a line; the writer publishes with relaxed stores (plain moves on
//! x86: no lock prefix), the reader loads relaxed. Single writer, so no
//! read-modify-write atomics are needed.

use crate::gro::{Flush, GroStats, Pass};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One RX queue's counters, as its worker publishes them for the stats thread.
#[derive(Default)]
#[repr(C, align(64))]
pub struct QueueCounters {
    /// Packets received (before GRO).
    pub rx_packets: AtomicU64,
    /// Bytes of those packets, as received.
    pub rx_bytes: AtomicU64,
    /// Polls that returned at least one packet.
    pub rx_bursts: AtomicU64,
    /// Every poll, empty or not.
    pub rx_polls: AtomicU64,
    /// Packets the stage delivered (after GRO).
    pub out_packets: AtomicU64,
    /// Bytes of those packets.
    pub out_bytes: AtomicU64,
    /// Buffer bytes the delivered packets pinned (skb truesize).
    pub truesize: AtomicU64,
    /// Times the capture ring was full and the worker waited (written by
    /// the capture stage, not by `publish`).
    pub capture_waits: AtomicU64,
    /// Prepends that did not fit the headroom (a header mbuf was chained).
    pub headroom_miss: AtomicU64,
    /// Copy-mode heads the head pool could not supply.
    pub head_alloc_fail: AtomicU64,
    /// Received chains whose lengths did not hold: freed before GRO.
    pub malformed: AtomicU64,
    /// TSC cycles in RX, over polls that received packets (`--cycles`).
    pub cycles_rx: AtomicU64,
    /// TSC cycles in skb build and GRO (merge, flush), over the same polls.
    pub cycles_gro: AtomicU64,
    /// TSC cycles in the stage, over the same polls.
    pub cycles_stage: AtomicU64,
    /// The queue's GRO counters, published every few polls.
    pub gro: GroCounters,
}

/// `GroStats` as single-writer atomics.
#[derive(Default)]
pub struct GroCounters {
    segments_in: AtomicU64,
    packets_out: AtomicU64,
    merged_segments: AtomicU64,
    heads_built: AtomicU64,
    heads_cached: AtomicU64,
    max_segments: AtomicU64,
    reorder_held: AtomicU64,
    reorder_filled: AtomicU64,
    flush: [AtomicU64; Flush::N],
    pass: [AtomicU64; Pass::N],
}

/// A worker's private running totals, published to the shared block.
#[derive(Default, Clone, Copy, Debug)]
pub struct QueueCounts {
    /// Packets received (before GRO).
    pub rx_packets: u64,
    /// Bytes of those packets, as received.
    pub rx_bytes: u64,
    /// Polls that returned at least one packet.
    pub rx_bursts: u64,
    /// Every poll, empty or not.
    pub rx_polls: u64,
    /// Packets the stage delivered (after GRO).
    pub out_packets: u64,
    /// Bytes of those packets.
    pub out_bytes: u64,
    /// Buffer bytes the delivered packets pinned (skb truesize).
    pub truesize: u64,
    /// Times the capture ring was full and the worker waited.
    pub capture_waits: u64,
    /// Prepends that did not fit the headroom (a header mbuf was chained).
    pub headroom_miss: u64,
    /// Copy-mode heads the head pool could not supply.
    pub head_alloc_fail: u64,
    /// Received chains whose lengths did not hold: freed before GRO.
    pub malformed: u64,
    /// TSC cycles in RX, over polls that received packets (`--cycles`).
    pub cycles_rx: u64,
    /// TSC cycles in skb build and GRO (merge, flush), over the same polls.
    pub cycles_gro: u64,
    /// TSC cycles in the stage, over the same polls.
    pub cycles_stage: u64,
}

impl QueueCounters {
    /// Publishes the worker's running totals (all but `capture_waits`, which the
    /// capture stage writes itself).
    #[inline(always)]
    pub fn publish(&self, l: &QueueCounts) {
        self.rx_packets.store(l.rx_packets, Relaxed);
        self.rx_bytes.store(l.rx_bytes, Relaxed);
        self.rx_bursts.store(l.rx_bursts, Relaxed);
        self.rx_polls.store(l.rx_polls, Relaxed);
        self.out_packets.store(l.out_packets, Relaxed);
        self.out_bytes.store(l.out_bytes, Relaxed);
        self.truesize.store(l.truesize, Relaxed);
        self.headroom_miss.store(l.headroom_miss, Relaxed);
        self.head_alloc_fail.store(l.head_alloc_fail, Relaxed);
        self.malformed.store(l.malformed, Relaxed);
        self.cycles_rx.store(l.cycles_rx, Relaxed);
        self.cycles_gro.store(l.cycles_gro, Relaxed);
        self.cycles_stage.store(l.cycles_stage, Relaxed);
    }

    /// Publishes the queue's GRO counters.
    pub fn publish_gro(&self, g: &GroStats) {
        let c = &self.gro;
        c.segments_in.store(g.segments_in, Relaxed);
        c.packets_out.store(g.packets_out, Relaxed);
        c.merged_segments.store(g.merged_segments, Relaxed);
        c.heads_built.store(g.heads_built, Relaxed);
        c.heads_cached.store(g.heads_cached, Relaxed);
        c.max_segments.store(g.max_segments, Relaxed);
        c.reorder_held.store(g.reorder_held, Relaxed);
        c.reorder_filled.store(g.reorder_filled, Relaxed);
        for (a, v) in c.flush.iter().zip(g.flush) {
            a.store(v, Relaxed);
        }
        for (a, v) in c.pass.iter().zip(g.pass) {
            a.store(v, Relaxed);
        }
    }

    /// The GRO counters as last published.
    pub fn read_gro(&self) -> GroStats {
        let c = &self.gro;
        let mut g = GroStats {
            segments_in: c.segments_in.load(Relaxed),
            packets_out: c.packets_out.load(Relaxed),
            merged_segments: c.merged_segments.load(Relaxed),
            heads_built: c.heads_built.load(Relaxed),
            heads_cached: c.heads_cached.load(Relaxed),
            max_segments: c.max_segments.load(Relaxed),
            reorder_held: c.reorder_held.load(Relaxed),
            reorder_filled: c.reorder_filled.load(Relaxed),
            ..GroStats::default()
        };
        for (v, a) in g.flush.iter_mut().zip(&c.flush) {
            *v = a.load(Relaxed);
        }
        for (v, a) in g.pass.iter_mut().zip(&c.pass) {
            *v = a.load(Relaxed);
        }
        g
    }

    /// The counters as last published.
    pub fn read(&self) -> QueueCounts {
        QueueCounts {
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            rx_bursts: self.rx_bursts.load(Relaxed),
            rx_polls: self.rx_polls.load(Relaxed),
            out_packets: self.out_packets.load(Relaxed),
            out_bytes: self.out_bytes.load(Relaxed),
            truesize: self.truesize.load(Relaxed),
            capture_waits: self.capture_waits.load(Relaxed),
            headroom_miss: self.headroom_miss.load(Relaxed),
            head_alloc_fail: self.head_alloc_fail.load(Relaxed),
            malformed: self.malformed.load(Relaxed),
            cycles_rx: self.cycles_rx.load(Relaxed),
            cycles_gro: self.cycles_gro.load(Relaxed),
            cycles_stage: self.cycles_stage.load(Relaxed),
        }
    }
}

/// Packets per second and Gbit/s for a count over `secs`.
pub fn rates(packets: u64, bytes: u64, secs: f64) -> (f64, f64) {
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    (packets as f64 / secs, bytes as f64 * 8.0 / secs / 1e9)
}

/// "12.34 Mpps" style.
pub fn fmt_pps(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_cache_line_sized_and_aligned() {
        assert_eq!(std::mem::align_of::<QueueCounters>(), 64);
        assert_eq!(std::mem::size_of::<QueueCounters>() % 64, 0);
        let v: Vec<QueueCounters> = (0..2).map(|_| QueueCounters::default()).collect();
        let a = &v[0] as *const _ as usize;
        let b = &v[1] as *const _ as usize;
        assert!(b - a >= 64, "neighbouring queues never share a line");
    }

    #[test]
    fn publish_then_read() {
        let c = QueueCounters::default();
        let l = QueueCounts {
            rx_packets: 5,
            rx_bytes: 700,
            rx_bursts: 2,
            rx_polls: 9,
            out_packets: 3,
            ..Default::default()
        };
        c.publish(&l);
        let r = c.read();
        assert_eq!(
            (
                r.rx_packets,
                r.rx_bytes,
                r.rx_bursts,
                r.rx_polls,
                r.out_packets
            ),
            (5, 700, 2, 9, 3)
        );
        let mut g = GroStats {
            segments_in: 9,
            max_segments: 4,
            ..Default::default()
        };
        g.flush[Flush::Psh as usize] = 2;
        g.pass[Pass::NoPayload.index()] = 1;
        c.publish_gro(&g);
        assert_eq!(c.read_gro(), g);
    }

    #[test]
    fn rate_units() {
        let (pps, gbps) = rates(2_000_000, 1_500_000_000, 2.0);
        assert_eq!(pps, 1e6);
        assert_eq!(gbps, 6.0);
        assert_eq!(fmt_pps(12_345_678.0), "12.35 Mpps");
        assert_eq!(fmt_pps(1500.0), "1.5 kpps");
    }
}

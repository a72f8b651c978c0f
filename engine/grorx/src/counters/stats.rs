//! Per-queue counters: written by exactly one worker lcore, read by the
//! stats thread. Each queue's block is cache-line aligned so no two queues
//! share a line; the writer publishes with relaxed stores (plain moves on
//! x86: no lock prefix), the reader loads relaxed. Single writer, so no
//! read-modify-write atomics are needed.

use super::table::counter_table;
pub use super::table::{CounterDef, Unit};
use crate::gro::{Flush, GroStats, Pass};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Stores one counter, unless the stage writes it itself.
macro_rules! publish_one {
    ($to:ident, $from:ident, $field:ident) => {
        $to.$field.store($from.$field, Relaxed)
    };
    ($to:ident, $from:ident, $field:ident, stage_writes) => {};
}

/// Declares the per-queue counters once: each line gives the field (its
/// name everywhere), the unit, `stage_writes` for a counter the stage
/// stores itself (the worker never publishes it), and the help text. From
/// it come the worker's plain counts and their table
/// ([`counter_table!`](super::table)), the shared atomics, publishing and
/// reading.
macro_rules! queue_counters {
    ($($field:ident $unit:ident $($writer:ident)? $help:literal;)*) => {
        counter_table! {
            /// A worker's running totals, published to its [`QueueCounters`].
            QueueCounts, QUEUE_COUNTERS {
                $($field $unit $help;)*
            }
        }

        /// One RX queue's counters, as its worker publishes them for the
        /// stats thread.
        #[derive(Default)]
        #[repr(C, align(64))]
        pub struct QueueCounters {
            $(#[doc = $help] pub $field: AtomicU64,)*
            /// The queue's GRO counters, published every few polls.
            pub gro: GroCounters,
        }

        impl QueueCounters {
            /// Publishes the worker's running totals (all but those the
            /// stage writes itself).
            #[inline(always)]
            pub fn publish(&self, l: &QueueCounts) {
                $(publish_one!(self, l, $field $(, $writer)?);)*
            }

            /// The counters as last published.
            pub fn read(&self) -> QueueCounts {
                QueueCounts { $($field: self.$field.load(Relaxed),)* }
            }
        }
    };
}

queue_counters! {
    rx_packets Packets "Packets received (before GRO).";
    rx_bytes Bytes "Bytes of the packets received, as received (frames without FCS).";
    rx_bursts Polls "Polls that returned at least one packet.";
    rx_polls Polls "Polls, empty or not.";
    out_packets Packets "Packets the stage was given (after GRO).";
    out_bytes Bytes "Bytes of the packets the stage was given, headers included.";
    truesize Bytes "Buffer bytes the packets the stage was given pinned (skb truesize).";
    capture_waits Events stage_writes "Times the capture ring was full and the worker waited for the writer.";
    headroom_miss Events "Prepends that did not fit the headroom: a header mbuf was chained in front.";
    head_alloc_fail Events "Copy mode: heads the head pool could not supply.";
    malformed Packets "Received chains whose lengths did not hold: freed before GRO.";
    cycles_rx Cycles "TSC cycles in RX, over polls that received packets.";
    cycles_gro Cycles "TSC cycles in skb build and GRO (merge, flush), over the same polls.";
    cycles_stage Cycles "TSC cycles in the stage, over the same polls.";
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

impl QueueCounters {
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

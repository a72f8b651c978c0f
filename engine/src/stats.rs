//! Per-queue counters: written by exactly one worker lcore, read by the
//! stats thread. Each queue's block is cache-line aligned so no two queues
//! share a line; the writer publishes with relaxed stores (plain moves on
//! x86: no lock prefix), the reader loads relaxed. Single writer, so no
//! read-modify-write atomics are needed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
#[repr(C, align(64))]
pub struct QueueCounters {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    /// Polls that returned at least one packet.
    pub rx_bursts: AtomicU64,
    /// Every poll, empty or not.
    pub rx_polls: AtomicU64,
    /// mbufs freed by the stage (delivered to the sink).
    pub freed: AtomicU64,
}

/// A worker's private running totals, published to the shared block.
#[derive(Default, Clone, Copy, Debug)]
pub struct Local {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_bursts: u64,
    pub rx_polls: u64,
    pub freed: u64,
}

impl QueueCounters {
    #[inline(always)]
    pub fn publish(&self, l: &Local) {
        self.rx_packets.store(l.rx_packets, Relaxed);
        self.rx_bytes.store(l.rx_bytes, Relaxed);
        self.rx_bursts.store(l.rx_bursts, Relaxed);
        self.rx_polls.store(l.rx_polls, Relaxed);
        self.freed.store(l.freed, Relaxed);
    }

    pub fn read(&self) -> Local {
        Local {
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            rx_bursts: self.rx_bursts.load(Relaxed),
            rx_polls: self.rx_polls.load(Relaxed),
            freed: self.freed.load(Relaxed),
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
        let l = Local {
            rx_packets: 5,
            rx_bytes: 700,
            rx_bursts: 2,
            rx_polls: 9,
            freed: 5,
        };
        c.publish(&l);
        let r = c.read();
        assert_eq!(
            (r.rx_packets, r.rx_bytes, r.rx_bursts, r.rx_polls, r.freed),
            (5, 700, 2, 9, 5)
        );
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

//! The per-lcore poll loop: each worker polls its RX queues run-to-completion
//! and hands every burst to its stage. Nothing is shared between workers but
//! the stop flag; counters are per queue and single-writer.

use crate::mbuf::{BulkFree, Burst};
use crate::stats::{Local, QueueCounters};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// The largest RX burst a worker asks for.
pub const MAX_BURST: usize = 256;

/// One RX queue a worker polls, and where its counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueRef {
    pub port: u16,
    pub queue: u16,
    /// Index into the engine's counter array.
    pub slot: usize,
}

/// A worker lcore's share of the queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub lcore: u32,
    pub queues: Vec<QueueRef>,
}

/// Spreads queues over worker lcores round-robin: a queue is polled by
/// exactly one lcore; an lcore may poll several queues.
pub fn assign(queues: &[(u16, u16)], lcores: &[u32]) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = lcores
        .iter()
        .map(|&l| Assignment {
            lcore: l,
            queues: Vec::new(),
        })
        .collect();
    if out.is_empty() {
        return out;
    }
    let n = out.len();
    for (slot, &(port, queue)) in queues.iter().enumerate() {
        out[slot % n].queues.push(QueueRef { port, queue, slot });
    }
    out.retain(|a| !a.queues.is_empty());
    out
}

/// How a worker polls.
#[derive(Debug, Clone, Copy)]
pub struct PollConf {
    pub burst: u16,
    /// After stop, poll at most this many more rounds to take what is
    /// already queued (a source like net_null never runs dry).
    pub drain_rounds: u32,
}

/// The sink stage: count and free, in bulk, once per burst.
pub fn sink_loop(
    queues: Vec<QueueRef>,
    counters: Arc<[QueueCounters]>,
    stop: Arc<AtomicBool>,
    pc: PollConf,
) -> i32 {
    let mut local: Vec<Local> = vec![Local::default(); queues.len()];
    let mut b: Burst<MAX_BURST> = Burst::new();
    let mut freer = BulkFree::new();
    let burst = pc.burst;
    let mut drained = 0u32;
    loop {
        let stopping = stop.load(Relaxed);
        if stopping {
            drained += 1;
        }
        let mut got = 0;
        for (q, l) in queues.iter().zip(local.iter_mut()) {
            let n = b.rx(q.port, q.queue, burst);
            l.rx_polls += 1;
            if n == 0 {
                continue;
            }
            got += n;
            let bytes = b.free_all_counted(&mut freer);
            freer.flush();
            l.rx_packets += n as u64;
            l.rx_bytes += bytes;
            l.rx_bursts += 1;
            l.freed += n as u64;
            counters[q.slot].publish(l);
        }
        // After stop, keep polling until the queues are empty, so what was
        // already in them is counted rather than left behind.
        if stopping && (got == 0 || drained > pc.drain_rounds) {
            break;
        }
    }
    for (q, l) in queues.iter().zip(&local) {
        counters[q.slot].publish(l);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_queue_has_one_lcore() {
        let qs: Vec<(u16, u16)> = (0..2).flat_map(|p| (0..3).map(move |q| (p, q))).collect();
        let a = assign(&qs, &[1, 2, 3, 4]);
        let mut seen: Vec<(u16, u16)> = a
            .iter()
            .flat_map(|x| x.queues.iter().map(|q| (q.port, q.queue)))
            .collect();
        seen.sort();
        assert_eq!(seen, qs, "each queue exactly once");
        assert_eq!(a.len(), 4);
        let slots: Vec<usize> = a
            .iter()
            .flat_map(|x| x.queues.iter().map(|q| q.slot))
            .collect();
        assert_eq!(slots.len(), 6);
    }

    #[test]
    fn more_lcores_than_queues() {
        let a = assign(&[(0, 0)], &[1, 2, 3]);
        assert_eq!(a.len(), 1, "idle lcores get nothing");
        assert!(assign(&[(0, 0)], &[]).is_empty());
    }
}

//! The per-lcore poll loop: each worker polls its RX queues run-to-completion.
//! A burst becomes skbs built in place, goes through the queue's own GRO
//! table (no locks, nothing shared), and what GRO lets out goes to the stage
//! (sink: count and free; capture: hand to the writer) in bulk. Counters are
//! per queue and single-writer.

use crate::eal::tsc;
use crate::forward::{ForwardCounters, Forwarder};
use crate::gro::{Gro, GroConfig};
use crate::hist::{move_into, Counts, QueueHist};
use crate::mbuf::{BulkFree, Burst};
use crate::ring_port::RingPtr;
use crate::skb::{Skb, SkbConf, SkbStats};
use crate::stats::{Local, QueueCounters};
use dpdk_sys::{self as sys, inline as mb};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The largest RX burst a worker asks for.
pub const MAX_BURST: usize = 256;
/// Packets a stage takes at once.
const OUTBOX: usize = 64;
/// Polls between two publications of the GRO counters.
const GRO_PUBLISH_EVERY: u32 = 64;
/// Polls between two looks at the clock for publishing histograms.
const HIST_CHECK_EVERY: u32 = 64;

/// One RX queue a worker polls, and where its counters live.
#[derive(Debug, Clone, Copy)]
pub struct QueueRef {
    pub port: u16,
    pub queue: u16,
    /// Index into the engine's counter array.
    pub slot: usize,
}

/// A worker lcore's share of the queues.
#[derive(Debug, Clone)]
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

/// Where packets go after GRO.
#[derive(Debug, Clone, Copy)]
pub enum StageKind {
    /// Count and free.
    Sink,
    /// Hand to the capture writer.
    Capture(RingPtr),
    /// Encapsulate and transmit (the worker's `Forwarder`).
    Forward,
}

/// How a worker polls and processes.
#[derive(Debug, Clone, Copy)]
pub struct WorkerConf {
    pub burst: u16,
    /// After stop, poll at most this many more rounds to take what is
    /// already queued (a source like net_null never runs dry).
    pub drain_rounds: u32,
    /// None: GRO off (packets go to the stage as received).
    pub gro: Option<GroConfig>,
    /// Hold packets across polls up to this many TSC ticks (0: flush at the
    /// end of every poll).
    pub gro_hold_tsc: u64,
    pub stage: StageKind,
    pub tsc_hz: u64,
    /// DPDK's rte_gro instead of grorx's (for comparison): classify each
    /// packet with rte_net_get_ptype, then rte_gro_reassemble_burst.
    pub rte_gro: bool,
    /// The sink frees each packet with its own rte_pktmbuf_free call instead
    /// of in bulk (only for the myri10ge experiment: what bulk saves).
    pub free_per_packet: bool,
    /// Count TSC cycles per phase (RX, GRO, stage): four clock reads per poll.
    pub cycles: bool,
}

/// A queue's skb settings (its pool's buffer size, the copy-mode head pool).
pub type QueueSkb = SkbConf;

/// The stage's end of the pipeline: output packets batched, then delivered.
struct Outbox {
    pkts: [*mut sys::rte_mbuf; OUTBOX],
    n: usize,
    stage: StageKind,
    free_per_packet: bool,
    freer: BulkFree,
    out_packets: u64,
    out_bytes: u64,
    truesize: u64,
    capture_waits: u64,
    /// The forward stage's transmitter (forward mode only).
    fwd: Option<Forwarder>,
}

impl Outbox {
    #[inline(always)]
    fn push_skb(&mut self, s: Skb) {
        self.truesize += s.meta().truesize as u64;
        if let Some(f) = self.fwd.as_mut() {
            self.out_packets += 1;
            // SAFETY: a field read of an owned chain.
            self.out_bytes += unsafe { mb::pkt_len(s.as_ptr()) } as u64;
            return f.push(s);
        }
        self.push(s.into_mbuf());
    }

    #[inline(always)]
    fn push(&mut self, m: *mut sys::rte_mbuf) {
        if self.n == OUTBOX {
            self.deliver();
        }
        self.pkts[self.n] = m;
        self.n += 1;
    }

    #[inline(always)]
    fn deliver(&mut self) {
        if let Some(f) = self.fwd.as_mut() {
            return f.flush();
        }
        if self.n == 0 {
            return;
        }
        let pk = &self.pkts[..self.n];
        match self.stage {
            StageKind::Sink if self.free_per_packet => {
                for &m in pk {
                    // SAFETY: the outbox owns these chains; each freed once.
                    unsafe {
                        self.out_bytes += mb::pkt_len(m) as u64;
                        sys::rte_pktmbuf_free(m);
                    }
                }
            }
            StageKind::Sink => {
                for &m in pk {
                    // SAFETY: the outbox owns these chains; freed once.
                    self.out_bytes += unsafe { self.freer.chain(m) } as u64;
                }
                self.freer.flush();
            }
            StageKind::Forward => unreachable!("forwarded packets go through push_skb"),
            StageKind::Capture(ring) => {
                for &m in pk {
                    // SAFETY: field read of an owned chain.
                    self.out_bytes += unsafe { mb::pkt_len(m) } as u64;
                }
                let mut done = 0;
                while done < self.n {
                    // SAFETY: the ring takes ownership of what it enqueues.
                    let k = unsafe {
                        sys::rte_ring_enqueue_burst(
                            ring.0,
                            self.pkts[done..self.n].as_ptr() as *const *mut std::ffi::c_void,
                            (self.n - done) as u32,
                            std::ptr::null_mut(),
                        )
                    };
                    if k == 0 {
                        self.capture_waits += 1;
                        std::hint::spin_loop();
                    }
                    done += k as usize;
                }
            }
        }
        self.out_packets += self.n as u64;
        self.n = 0;
    }
}

struct QueueState {
    q: QueueRef,
    skb: SkbConf,
    skb_stats: SkbStats,
    gro: Option<Gro<Skb>>,
    local: Local,
    polls_since_publish: u32,
    /// Segments per packet DPDK's rte_gro delivered (the baseline; grorx's
    /// GRO keeps its own).
    rte_segs: hdrhistogram::Histogram<u64>,
    /// Bursts by size since the last publish.
    bursts: Counts<{ MAX_BURST + 1 }>,
    /// Segments in and packets out when DPDK's rte_gro does the merging.
    rte_stats: crate::gro::GroStats,
}

/// One burst through DPDK's rte_gro (the baseline): classify every packet,
/// reassemble in chunks of what one call may take, hand the outputs to the
/// stage. Returns the bytes received.
fn rte_gro_burst<const N: usize>(
    b: &mut Burst<N>,
    rte: &crate::baseline::RteGro,
    outbox: &mut Outbox,
    st: &mut QueueState,
    stage: StageKind,
) -> u64 {
    let mut bytes = 0u64;
    for &m in b.as_slice() {
        // SAFETY: owned mbufs of the burst; a field read.
        bytes += unsafe { mb::pkt_len(m) } as u64;
    }
    let n = b.len();
    for chunk in b.as_mut_slice().chunks_mut(crate::baseline::MAX_ITEMS) {
        // SAFETY: the burst owns these mbufs; classify then reassemble is the
        // baseline's contract; afterwards exactly chunk[..k] are owned.
        let k = unsafe {
            crate::baseline::classify(chunk);
            rte.reassemble(chunk)
        };
        for &m in &chunk[..k] {
            // SAFETY: an owned chain head.
            let segs = unsafe { mb::nb_segs(m) } as u64;
            st.rte_segs.saturating_record(segs);
            st.rte_stats.max_segments = st.rte_stats.max_segments.max(segs);
            if let StageKind::Capture(_) = stage {
                // rte_gro leaves merged headers stale: fix them before writing.
                // SAFETY: an owned chain, headers in its first segment.
                let _ = unsafe { crate::baseline::fix_checksums(m) };
            }
            outbox.push(m);
        }
        st.rte_stats.packets_out += k as u64;
    }
    st.rte_stats.segments_in += n as u64;
    st.rte_stats.merged_segments = st.rte_stats.segments_in - st.rte_stats.packets_out;
    b.clear_moved();
    bytes
}

/// Merges a queue's recent distributions into its shared copy, if the stats
/// thread is not reading it right now (`force`: wait for it, at the end).
fn publish_hist(st: &mut QueueState, shared: &Mutex<QueueHist>, force: bool) {
    let guard = if force {
        Some(shared.lock().unwrap_or_else(|p| p.into_inner()))
    } else {
        shared.try_lock().ok()
    };
    if let Some(mut sh) = guard {
        let sh = &mut *sh;
        if let Some(g) = st.gro.as_mut().and_then(|g| g.histograms_mut()) {
            g.drain_into(&mut sh.gro_segs, &mut sh.gro_hold_ns);
        }
        st.bursts.drain_into(&mut sh.burst);
        move_into(&mut sh.gro_segs, &mut st.rte_segs);
    }
}

/// The worker's loop; returns when `stop` is set and the queues are drained.
pub fn run(
    queues: Vec<(QueueRef, SkbConf)>,
    counters: Arc<[QueueCounters]>,
    hists: Arc<[Mutex<QueueHist>]>,
    stop: Arc<AtomicBool>,
    wc: WorkerConf,
    fwd: Option<(Forwarder, Arc<ForwardCounters>)>,
) -> i32 {
    let (fwd, fwd_counters) = fwd.map_or((None, None), |(f, c)| (Some(f), Some(c)));
    let mut states: Vec<QueueState> = queues
        .into_iter()
        .map(|(q, skb)| QueueState {
            q,
            skb,
            skb_stats: SkbStats::default(),
            gro: wc.gro.map(|c| {
                let mut g = Gro::new(c);
                g.enable_histograms(wc.tsc_hz);
                g
            }),
            local: Local::default(),
            polls_since_publish: 0,
            rte_segs: crate::hist::new_hist(256),
            bursts: Counts::default(),
            rte_stats: crate::gro::GroStats::default(),
        })
        .collect();
    // Histograms go to the shared copies every ~20 ms (checked every
    // HIST_CHECK_EVERY polls: reading the clock on each poll would cost more).
    let hist_period = wc.tsc_hz / 50;
    let mut next_hist = tsc() + hist_period;
    let mut hist_polls = 0u32;
    let mut b: Burst<MAX_BURST> = Burst::new();
    let mut outbox = Outbox {
        pkts: [std::ptr::null_mut(); OUTBOX],
        n: 0,
        stage: wc.stage,
        free_per_packet: wc.free_per_packet,
        freer: BulkFree::new(),
        out_packets: 0,
        out_bytes: 0,
        truesize: 0,
        capture_waits: 0,
        fwd,
    };
    let rte = wc.rte_gro.then(|| crate::baseline::RteGro::new(64, 64));
    let mut drained = 0u32;
    loop {
        let stopping = stop.load(Relaxed);
        if stopping {
            drained += 1;
        }
        let mut got = 0;
        for st in states.iter_mut() {
            let t_rx = if wc.cycles { tsc() } else { 0 };
            let n = b.rx(st.q.port, st.q.queue, wc.burst);
            let t_gro = if wc.cycles { tsc() } else { 0 };
            st.local.rx_polls += 1;
            got += n;
            st.bursts.record(n);
            let (p0, b0, t0, w0) = (
                outbox.out_packets,
                outbox.out_bytes,
                outbox.truesize,
                outbox.capture_waits,
            );
            match &mut st.gro {
                None if wc.rte_gro => {
                    if n > 0 {
                        st.local.rx_bytes +=
                            rte_gro_burst(&mut b, rte.as_ref().unwrap(), &mut outbox, st, wc.stage);
                    }
                }
                None => {
                    if n > 0 {
                        if let (StageKind::Sink, false) = (wc.stage, wc.free_per_packet) {
                            // The plain sink: count and free in one pass.
                            let bytes = b.free_all_counted(&mut outbox.freer);
                            outbox.freer.flush();
                            st.local.rx_bytes += bytes;
                            outbox.out_packets += n as u64;
                            outbox.out_bytes += bytes;
                        } else {
                            for &m in b.as_slice() {
                                // SAFETY: owned mbufs from the burst, moved to the outbox
                                // (as skbs when forwarded: the forwarder prepends).
                                st.local.rx_bytes += unsafe { mb::pkt_len(m) } as u64;
                                if let StageKind::Forward = wc.stage {
                                    outbox.push_skb(unsafe {
                                        Skb::build(m, &st.skb, &mut st.skb_stats)
                                    });
                                } else {
                                    outbox.push(m);
                                }
                            }
                            b.clear_moved();
                        }
                    }
                }
                Some(gro) => {
                    let now = if n > 0 || gro.held() > 0 { tsc() } else { 0 };
                    gro.tick(now);
                    if n > 0 {
                        let mut bytes = 0u64;
                        for &m in b.as_slice() {
                            // SAFETY: each received mbuf is handed to its skb once.
                            let skb = unsafe {
                                bytes += mb::pkt_len(m) as u64;
                                Skb::build(m, &st.skb, &mut st.skb_stats)
                            };
                            gro.receive(skb, now, &mut |s| outbox.push_skb(s));
                        }
                        b.clear_moved();
                        st.local.rx_bytes += bytes;
                    }
                    if gro.held() > 0 {
                        if wc.gro_hold_tsc == 0 || stopping {
                            // The flush time, for hold times: once per poll.
                            gro.tick(tsc());
                            gro.flush_all(&mut |s| outbox.push_skb(s));
                        } else {
                            gro.flush_older(now.saturating_sub(wc.gro_hold_tsc), &mut |s| {
                                outbox.push_skb(s)
                            });
                        }
                    }
                }
            }
            let t_stage = if wc.cycles { tsc() } else { 0 };
            outbox.deliver();
            if wc.cycles && n > 0 {
                // Polls that received nothing are idle time, not cost.
                let t_end = tsc();
                st.local.cycles_rx += t_gro - t_rx;
                st.local.cycles_gro += t_stage - t_gro;
                st.local.cycles_stage += t_end - t_stage;
            }
            if n > 0 {
                st.local.rx_packets += n as u64;
                st.local.rx_bursts += 1;
            }
            st.local.out_packets += outbox.out_packets - p0;
            st.local.out_bytes += outbox.out_bytes - b0;
            st.local.truesize += outbox.truesize - t0;
            st.local.capture_waits += outbox.capture_waits - w0;
            st.local.headroom_miss = st.skb_stats.headroom_miss;
            st.local.head_alloc_fail = st.skb_stats.head_alloc_fail;
            if n > 0 {
                counters[st.q.slot].publish(&st.local);
                if let (Some(f), Some(c)) = (&outbox.fwd, &fwd_counters) {
                    c.publish(f.stats());
                }
            }
            st.polls_since_publish += 1;
            if st.polls_since_publish >= GRO_PUBLISH_EVERY {
                st.polls_since_publish = 0;
                if let Some(g) = &st.gro {
                    counters[st.q.slot].publish_gro(g.stats());
                } else if wc.rte_gro {
                    counters[st.q.slot].publish_gro(&st.rte_stats);
                }
            }
        }
        hist_polls += 1;
        if hist_polls >= HIST_CHECK_EVERY {
            hist_polls = 0;
            let now = tsc();
            if now >= next_hist {
                next_hist = now + hist_period;
                for st in states.iter_mut() {
                    publish_hist(st, &hists[st.q.slot], false);
                }
            }
        }
        // After stop, keep polling until the queues are empty, so what was
        // already in them is counted rather than left behind.
        if stopping && (got == 0 || drained > wc.drain_rounds) {
            break;
        }
    }
    // Whatever GRO still holds leaves now (the stage delivers it).
    for st in states.iter_mut() {
        if let Some(g) = &mut st.gro {
            g.tick(tsc());
            let (p0, b0, t0) = (outbox.out_packets, outbox.out_bytes, outbox.truesize);
            g.flush_all(&mut |s| outbox.push_skb(s));
            outbox.deliver();
            st.local.out_packets += outbox.out_packets - p0;
            st.local.out_bytes += outbox.out_bytes - b0;
            st.local.truesize += outbox.truesize - t0;
            counters[st.q.slot].publish_gro(g.stats());
        }
        if wc.rte_gro {
            counters[st.q.slot].publish_gro(&st.rte_stats);
        }
        counters[st.q.slot].publish(&st.local);
        publish_hist(st, &hists[st.q.slot], true);
    }
    if let Some(mut f) = outbox.fwd.take() {
        f.flush();
        if let Some(c) = &fwd_counters {
            c.publish(f.stats());
        }
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

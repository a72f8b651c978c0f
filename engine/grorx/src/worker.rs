//! The per-lcore poll loop: each worker polls its RX queues run-to-completion.
//! A burst becomes skbs built in place, goes through the queue's own GRO
//! table (no locks, nothing shared), and what GRO lets out goes, packet by
//! packet, to the queue's stage (`crate::stage`), which delivers at the end
//! of the poll; freed buffers go back in bulk. Counters are per queue and
//! single-writer. A port whose link is down (or whose PMD may be tearing
//! its queues down) is not polled: see `crate::port::gate`.

use crate::counters::hist::{Counts, QueueHist};
use crate::counters::stats::QueueCounts;
use crate::dpdk::eal::tsc;
use crate::dpdk::mbuf::{field, rte_mbuf, BulkFree, Burst};
use crate::gro::{Gro, GroConfig};
use crate::skb::{Skb, SkbConf, SkbStats};
use crate::stage::{Ctx, Shared, Stage, StageCounts};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The largest RX burst a worker asks for.
pub const MAX_BURST: usize = 256;
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
    /// With the reorder window on, the longest a segment waits ahead of a
    /// gap, in TSC ticks (0: the window is off).
    pub reorder_tsc: u64,
    pub tsc_hz: u64,
}

/// One queue a worker polls: where it is, how its skbs are built, its stage.
pub struct QueueJob<S> {
    pub q: QueueRef,
    pub skb: SkbConf,
    pub stage: S,
}

struct QueueState<S> {
    q: QueueRef,
    build: Build,
    gro: Option<Gro<Skb>>,
    stage: S,
    /// Whether the port may be polled, as of the last gate epoch seen.
    polls: bool,
    counts: StageCounts,
    local: QueueCounts,
    polls_since_publish: u32,
    /// Bursts by size since the last publish.
    bursts: Counts<{ MAX_BURST + 1 }>,
}

impl<S> QueueState<S> {
    fn new(j: QueueJob<S>, wc: &WorkerConf) -> QueueState<S> {
        QueueState {
            q: j.q,
            build: Build {
                conf: j.skb,
                stats: SkbStats::default(),
            },
            gro: wc.gro.map(|c| {
                let mut g = Gro::new(c);
                g.enable_histograms(wc.tsc_hz);
                g
            }),
            stage: j.stage,
            polls: false,
            counts: StageCounts::default(),
            local: QueueCounts::default(),
            polls_since_publish: 0,
            bursts: Counts::default(),
        }
    }

    /// Copies the skb builder's counters into the queue's.
    #[inline(always)]
    fn sync_skb_stats(&mut self) {
        self.local.headroom_miss = self.build.stats.headroom_miss;
        self.local.head_alloc_fail = self.build.stats.head_alloc_fail;
        self.local.malformed = self.build.stats.malformed;
    }
}

/// How a queue's received mbufs become skbs, and what that counted.
struct Build {
    conf: SkbConf,
    stats: SkbStats,
}

impl Build {
    /// The skb of a received mbuf; None when it was malformed (freed and
    /// counted).
    ///
    /// # Safety
    /// `m` is a received chain head handed over once; a driver's chain
    /// links valid mbufs.
    #[inline(always)]
    unsafe fn skb(&mut self, m: *mut rte_mbuf) -> Option<Skb> {
        // SAFETY: the caller's promise is build_checked's.
        unsafe { Skb::build_checked(m, &self.conf, &mut self.stats) }
    }
}

/// Where the packets of a poll go: counted, then to the queue's stage.
struct Out<'a, 'c, S> {
    local: &'a mut QueueCounts,
    stage: &'a mut S,
    ctx: Ctx<'c>,
}

impl<S: Stage> Out<'_, '_, S> {
    /// Counts a packet and hands it to the stage.
    #[inline(always)]
    fn deliver(&mut self, s: Skb) {
        self.local.out_packets += 1;
        self.local.out_bytes += s.len() as u64;
        self.local.truesize += s.meta().truesize as u64;
        self.stage.packet(s, &mut self.ctx);
    }
}

/// The stage's context for queue `q`.
#[inline(always)]
fn ctx<'a>(
    freer: &'a mut BulkFree,
    counts: &'a mut StageCounts,
    shared: &'a Shared,
    q: QueueRef,
) -> Ctx<'a> {
    Ctx {
        freer,
        counts,
        shared,
        slot: q.slot,
        port: q.port,
        queue: q.queue,
    }
}

/// Merges a queue's recent distributions into its shared copy, if the stats
/// thread is not reading it right now (`force`: wait for it, at the end).
fn publish_hist<S>(st: &mut QueueState<S>, shared: &Mutex<QueueHist>, force: bool) {
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
    }
}

/// When the histograms next go to their shared copies: every ~20 ms,
/// checked every HIST_CHECK_EVERY polls (reading the clock on each poll
/// would cost more).
struct HistClock {
    period: u64,
    next: u64,
    polls: u32,
}

impl HistClock {
    fn new(tsc_hz: u64) -> HistClock {
        let period = tsc_hz / 50;
        HistClock {
            period,
            next: tsc() + period,
            polls: 0,
        }
    }

    /// Whether this poll publishes them.
    #[inline(always)]
    fn due(&mut self) -> bool {
        self.polls += 1;
        if self.polls < HIST_CHECK_EVERY {
            return false;
        }
        self.polls = 0;
        let now = tsc();
        if now < self.next {
            return false;
        }
        self.next = now + self.period;
        true
    }
}

/// The worker's loop; returns when `stop` is set (and the gate's epoch
/// bumped: `PollGate::wake`) and the queues are drained.
/// `CYCLES`: count TSC cycles per phase (RX, GRO, stage), four clock reads a
/// poll; a run without it has no clock read for that in its loop. `me`: this
/// worker's place among the gate's acknowledgements.
pub fn run<S: Stage, const CYCLES: bool>(
    queues: Vec<QueueJob<S>>,
    shared: Shared,
    stop: Arc<AtomicBool>,
    wc: WorkerConf,
    me: usize,
) -> i32 {
    let mut states: Vec<QueueState<S>> = queues
        .into_iter()
        .map(|j| QueueState::new(j, &wc))
        .collect();
    let mut hist = HistClock::new(wc.tsc_hz);
    let mut b: Burst<MAX_BURST> = Burst::new();
    // A poll's skbs, for GRO to take whole (allocated once, here).
    let mut skbs: Vec<Skb> = Vec::with_capacity(MAX_BURST);
    let mut freer = BulkFree::new();
    let mut drained = 0u32;
    let (mut gate_seen, mut stopping) = (0u64, false);
    loop {
        // The loop's one load of shared state: the gate's epoch, which
        // also moves when `stop` is set. The ports' words and `stop` are
        // read only when it moved. The acknowledgement comes after this
        // loop's last RX call of the old epoch, so a closer that sees it
        // knows we are out.
        let epoch = shared.gate.epoch();
        if epoch != gate_seen {
            gate_seen = epoch;
            stopping = stop.load(Relaxed);
            for st in states.iter_mut() {
                st.polls = shared.gate.polls(st.q.port);
            }
            shared.gate.ack(me, epoch);
        }
        if stopping {
            drained += 1;
        }
        let mut got = 0;
        for st in states.iter_mut() {
            got += poll::<S, CYCLES>(st, &mut b, &mut skbs, &mut freer, &shared, &wc, stopping);
        }
        if hist.due() {
            for st in states.iter_mut() {
                publish_hist(st, &shared.hists[st.q.slot], false);
            }
        }
        // After stop, keep polling until the queues are empty, so what was
        // already in them is counted rather than left behind.
        if stopping && (got == 0 || drained > wc.drain_rounds) {
            break;
        }
    }
    for st in states.iter_mut() {
        finish(st, &mut freer, &shared);
    }
    // A stage's transmits on drop come before the gate is left too.
    drop(states);
    shared.gate.leave(me);
    0
}

/// One poll of one queue: the RX burst, GRO (or none), the stage's end of
/// poll, the counters. Returns how many packets were received.
#[inline(always)]
fn poll<S: Stage, const CYCLES: bool>(
    st: &mut QueueState<S>,
    b: &mut Burst<MAX_BURST>,
    skbs: &mut Vec<Skb>,
    freer: &mut BulkFree,
    shared: &Shared,
    wc: &WorkerConf,
    stopping: bool,
) -> usize {
    let t_rx = if CYCLES { tsc() } else { 0 };
    let n = if st.polls {
        b.rx(st.q.port, st.q.queue, wc.burst)
    } else {
        0
    };
    let t_gro = if CYCLES { tsc() } else { 0 };
    st.local.rx_polls += u64::from(st.polls);
    st.bursts.record(n);
    let mut out = Out {
        local: &mut st.local,
        stage: &mut st.stage,
        ctx: ctx(freer, &mut st.counts, shared, st.q),
    };
    match &mut st.gro {
        None if S::CONSUMES_ALL => consume_burst(b, &mut out),
        None => deliver_burst(b, &mut st.build, &mut out),
        Some(gro) => gro_poll(gro, b, skbs, &mut st.build, &mut out, wc, stopping),
    }
    let t_stage = if CYCLES { tsc() } else { 0 };
    out.stage.end_of_poll(&mut out.ctx);
    out.ctx.freer.flush();
    if CYCLES && n > 0 {
        // Polls that received nothing are idle time, not cost.
        let t_end = tsc();
        out.local.cycles_rx += t_gro - t_rx;
        out.local.cycles_gro += t_stage - t_gro;
        out.local.cycles_stage += t_end - t_stage;
    }
    publish_poll(st, shared, n);
    n
}

/// A sink without GRO: counts and frees the burst in one pass.
#[inline(always)]
fn consume_burst<S: Stage>(b: &mut Burst<MAX_BURST>, out: &mut Out<'_, '_, S>) {
    let n = b.len() as u64;
    let bytes = b.free_all_counted(out.ctx.freer);
    out.local.rx_bytes += bytes;
    out.local.out_packets += n;
    out.local.out_bytes += bytes;
    out.ctx.counts.consumed += n;
}

/// GRO off: each packet to the stage as received.
#[inline(always)]
fn deliver_burst<S: Stage>(b: &mut Burst<MAX_BURST>, build: &mut Build, out: &mut Out<'_, '_, S>) {
    for &m in b.as_slice() {
        // SAFETY: each received mbuf is handed to its skb once.
        if let Some(skb) = unsafe { build.skb(m) } {
            out.local.rx_bytes += skb.len() as u64;
            out.deliver(skb);
        }
    }
    b.clear_moved();
}

/// GRO on: the burst into the queue's table, then what the hold rules let
/// out.
#[inline(always)]
fn gro_poll<S: Stage>(
    gro: &mut Gro<Skb>,
    b: &mut Burst<MAX_BURST>,
    skbs: &mut Vec<Skb>,
    build: &mut Build,
    out: &mut Out<'_, '_, S>,
    wc: &WorkerConf,
    stopping: bool,
) {
    let n = b.len();
    let now = if n > 0 || gro.held() > 0 { tsc() } else { 0 };
    gro.tick(now);
    if n > 0 {
        let mut bytes = 0u64;
        for &m in b.as_slice() {
            // SAFETY: each received mbuf is a chain head we own, read
            // before it is handed to its skb, once.
            let skb = unsafe {
                bytes += field::pkt_len(m) as u64;
                build.skb(m)
            };
            if let Some(skb) = skb {
                skbs.push(skb);
            }
        }
        b.clear_moved();
        // The burst in one call. Flushing at each poll's end, GRO takes the
        // poll whole: a segment nothing later in it joins leaves at once.
        let deliver = &mut |s| out.deliver(s);
        if wc.gro_hold_tsc == 0 {
            gro.receive_poll(skbs, now, deliver);
        } else {
            gro.receive_burst(skbs, now, deliver);
        }
        out.local.rx_bytes += bytes;
    }
    if gro.held() > 0 {
        gro_release(gro, out, wc, now, stopping);
    }
}

/// What GRO holds and may let out at the end of a poll: past the reorder
/// window, everything when stopping, else by the hold rule.
#[inline(always)]
fn gro_release<S: Stage>(
    gro: &mut Gro<Skb>,
    out: &mut Out<'_, '_, S>,
    wc: &WorkerConf,
    now: u64,
    stopping: bool,
) {
    let deliver = &mut |s| out.deliver(s);
    if wc.reorder_tsc > 0 {
        gro.expire_reorder(now.saturating_sub(wc.reorder_tsc), deliver);
    }
    if stopping {
        gro.tick(tsc());
        gro.flush_all(deliver);
    } else if wc.gro_hold_tsc == 0 {
        // The flush time, for hold times: once per poll.
        gro.tick(tsc());
        gro.end_of_poll(deliver);
    } else {
        gro.flush_older(now.saturating_sub(wc.gro_hold_tsc), deliver);
    }
}

/// The queue's counters to their shared copies: after a poll that received
/// something, and GRO's every GRO_PUBLISH_EVERY polls.
#[inline(always)]
fn publish_poll<S>(st: &mut QueueState<S>, shared: &Shared, n: usize) {
    if n > 0 {
        st.local.rx_packets += n as u64;
        st.local.rx_bursts += 1;
        st.sync_skb_stats();
        shared.counters[st.q.slot].publish(&st.local);
        shared.stage[st.q.slot].publish(&st.counts);
    }
    st.polls_since_publish += 1;
    if st.polls_since_publish >= GRO_PUBLISH_EVERY {
        st.polls_since_publish = 0;
        if let Some(g) = &st.gro {
            shared.counters[st.q.slot].publish_gro(g.stats());
        }
    }
}

/// A queue's end: whatever GRO still holds leaves, then the stage finishes
/// (its last transmits still under the gate: it is left only after them),
/// and every counter is published.
fn finish<S: Stage>(st: &mut QueueState<S>, freer: &mut BulkFree, shared: &Shared) {
    let mut out = Out {
        local: &mut st.local,
        stage: &mut st.stage,
        ctx: ctx(freer, &mut st.counts, shared, st.q),
    };
    if let Some(g) = &mut st.gro {
        g.tick(tsc());
        g.flush_all(&mut |s| out.deliver(s));
        shared.counters[st.q.slot].publish_gro(g.stats());
    }
    out.stage.finish(&mut out.ctx);
    out.ctx.freer.flush();
    st.sync_skb_stats();
    shared.counters[st.q.slot].publish(&st.local);
    shared.stage[st.q.slot].publish(&st.counts);
    publish_hist(st, &shared.hists[st.q.slot], true);
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

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
use crate::dpdk::mbuf::{BulkFree, Burst};
use crate::gro::{Gro, GroConfig};
use crate::skb::{Skb, SkbConf, SkbStats};
use crate::stage::{Ctx, Shared, Stage, StageCounts};
use dpdk_sys::inline as mb;
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
    skb: SkbConf,
    skb_stats: SkbStats,
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

/// Counts a packet GRO delivers and hands it to the stage.
#[inline(always)]
fn deliver<S: Stage>(local: &mut QueueCounts, stage: &mut S, ctx: &mut Ctx<'_>, s: Skb) {
    local.out_packets += 1;
    local.out_bytes += s.len() as u64;
    local.truesize += s.meta().truesize as u64;
    stage.packet(s, ctx);
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
        .map(|j| QueueState {
            q: j.q,
            skb: j.skb,
            skb_stats: SkbStats::default(),
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
        })
        .collect();
    // Histograms go to the shared copies every ~20 ms (checked every
    // HIST_CHECK_EVERY polls: reading the clock on each poll would cost more).
    let hist_period = wc.tsc_hz / 50;
    let mut next_hist = tsc() + hist_period;
    let mut hist_polls = 0u32;
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
            let t_rx = if CYCLES { tsc() } else { 0 };
            let n = if st.polls {
                b.rx(st.q.port, st.q.queue, wc.burst)
            } else {
                0
            };
            let t_gro = if CYCLES { tsc() } else { 0 };
            st.local.rx_polls += u64::from(st.polls);
            got += n;
            st.bursts.record(n);
            let mut ctx = ctx(&mut freer, &mut st.counts, &shared, st.q);
            let (local, stage) = (&mut st.local, &mut st.stage);
            match &mut st.gro {
                None if S::CONSUMES_ALL => {
                    // A sink: count and free the burst in one pass.
                    let bytes = b.free_all_counted(ctx.freer);
                    local.rx_bytes += bytes;
                    local.out_packets += n as u64;
                    local.out_bytes += bytes;
                    ctx.counts.consumed += n as u64;
                }
                None => {
                    for &m in b.as_slice() {
                        // SAFETY: each received mbuf is handed to its skb
                        // once; a driver's chain links valid mbufs.
                        let skb = unsafe { Skb::build_checked(m, &st.skb, &mut st.skb_stats) };
                        if let Some(skb) = skb {
                            local.rx_bytes += skb.len() as u64;
                            deliver(local, stage, &mut ctx, skb);
                        }
                    }
                    b.clear_moved();
                }
                Some(gro) => {
                    let now = if n > 0 || gro.held() > 0 { tsc() } else { 0 };
                    gro.tick(now);
                    if n > 0 {
                        let mut bytes = 0u64;
                        for &m in b.as_slice() {
                            // SAFETY: each received mbuf is handed to its skb
                            // once; a driver's chain links valid mbufs.
                            let skb = unsafe {
                                bytes += mb::pkt_len(m) as u64;
                                Skb::build_checked(m, &st.skb, &mut st.skb_stats)
                            };
                            if let Some(skb) = skb {
                                skbs.push(skb);
                            }
                        }
                        b.clear_moved();
                        // The burst in one call. Flushing at each poll's end,
                        // GRO takes the poll whole: a segment nothing later
                        // in it joins leaves at once.
                        let out = &mut |s| deliver(local, stage, &mut ctx, s);
                        if wc.gro_hold_tsc == 0 {
                            gro.receive_poll(&mut skbs, now, out);
                        } else {
                            gro.receive_burst(&mut skbs, now, out);
                        }
                        local.rx_bytes += bytes;
                    }
                    if gro.held() > 0 {
                        if wc.reorder_tsc > 0 {
                            gro.expire_reorder(now.saturating_sub(wc.reorder_tsc), &mut |s| {
                                deliver(local, stage, &mut ctx, s)
                            });
                        }
                        if stopping {
                            gro.tick(tsc());
                            gro.flush_all(&mut |s| deliver(local, stage, &mut ctx, s));
                        } else if wc.gro_hold_tsc == 0 {
                            // The flush time, for hold times: once per poll.
                            gro.tick(tsc());
                            gro.end_of_poll(&mut |s| deliver(local, stage, &mut ctx, s));
                        } else {
                            gro.flush_older(now.saturating_sub(wc.gro_hold_tsc), &mut |s| {
                                deliver(local, stage, &mut ctx, s)
                            });
                        }
                    }
                }
            }
            let t_stage = if CYCLES { tsc() } else { 0 };
            stage.end_of_poll(&mut ctx);
            ctx.freer.flush();
            if CYCLES && n > 0 {
                // Polls that received nothing are idle time, not cost.
                let t_end = tsc();
                local.cycles_rx += t_gro - t_rx;
                local.cycles_gro += t_stage - t_gro;
                local.cycles_stage += t_end - t_stage;
            }
            if n > 0 {
                local.rx_packets += n as u64;
                local.rx_bursts += 1;
                local.headroom_miss = st.skb_stats.headroom_miss;
                local.head_alloc_fail = st.skb_stats.head_alloc_fail;
                local.malformed = st.skb_stats.malformed;
                shared.counters[st.q.slot].publish(local);
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
        hist_polls += 1;
        if hist_polls >= HIST_CHECK_EVERY {
            hist_polls = 0;
            let now = tsc();
            if now >= next_hist {
                next_hist = now + hist_period;
                for st in states.iter_mut() {
                    publish_hist(st, &shared.hists[st.q.slot], false);
                }
            }
        }
        // After stop, keep polling until the queues are empty, so what was
        // already in them is counted rather than left behind.
        if stopping && (got == 0 || drained > wc.drain_rounds) {
            break;
        }
    }
    // Whatever GRO still holds leaves now, then the stage finishes (its
    // last transmits still under the gate: it is left only after them).
    for st in states.iter_mut() {
        let mut ctx = ctx(&mut freer, &mut st.counts, &shared, st.q);
        let (local, stage) = (&mut st.local, &mut st.stage);
        if let Some(g) = &mut st.gro {
            g.tick(tsc());
            g.flush_all(&mut |s| deliver(local, stage, &mut ctx, s));
            shared.counters[st.q.slot].publish_gro(g.stats());
        }
        stage.finish(&mut ctx);
        ctx.freer.flush();
        local.headroom_miss = st.skb_stats.headroom_miss;
        local.head_alloc_fail = st.skb_stats.head_alloc_fail;
        local.malformed = st.skb_stats.malformed;
        shared.counters[st.q.slot].publish(local);
        shared.stage[st.q.slot].publish(&st.counts);
        publish_hist(st, &shared.hists[st.q.slot], true);
    }
    // A stage's transmits on drop come before the gate is left too.
    drop(states);
    shared.gate.leave(me);
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

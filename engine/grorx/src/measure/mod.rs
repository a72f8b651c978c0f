//! Measurement-only stages (feature `measure`), for the experiments and the
//! anchors, never in a production run: DPDK's rte_gro as the baseline GRO,
//! and a sink that frees each packet with its own call.
//!
//! Both run on the [`Stage`] trait like any stage, with GRO off in the
//! worker: what they cost is measured the same way as grorx's own path.

pub mod baseline;

use crate::counters::hist::{move_into, new_hist};
use crate::dpdk::mbuf::{self, field as mb, rte_mbuf};
use crate::skb::Skb;
use crate::stage::{CaptureStage, Ctx, Stage};
use crate::worker::MAX_BURST;
use baseline::{RteGro, MAX_ITEMS};

/// A measurement-only stage instead of the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// DPDK's rte_gro (lightweight mode, packets classified first) merges
    /// each poll's packets; grorx's GRO is off.
    RteGro,
    /// The sink frees each packet with its own `rte_pktmbuf_free` (what bulk
    /// freeing saves).
    FreePerPacket,
}

/// Frees every packet with its own call (dropping the skb).
#[derive(Debug, Default)]
pub struct FreePerPacket;

impl Stage for FreePerPacket {
    #[inline(always)]
    fn packet(&mut self, skb: Skb, _ctx: &mut Ctx<'_>) {
        drop(skb);
    }
}

/// Polls between two publications of the baseline's GRO counters.
const PUBLISH_EVERY: u32 = 64;

/// A poll's packets through DPDK's rte_gro, then freed or handed to the
/// capture writer (checksums fixed first: rte_gro leaves them stale).
pub struct RteGroStage {
    rte: RteGro,
    pending: [*mut rte_mbuf; MAX_BURST],
    n: usize,
    /// The capture writer's hand-off (rte_gro's packets, checksums fixed).
    capture: Option<CaptureStage>,
    stats: crate::gro::GroStats,
    segs: hdrhistogram::Histogram<u64>,
    polls: u32,
}

// SAFETY: the stage owns the mbufs it holds between `packet` and the end of
// the poll; it moves to its lcore once, before it is used.
unsafe impl Send for RteGroStage {}

impl RteGroStage {
    pub(crate) fn new(capture: Option<CaptureStage>) -> RteGroStage {
        RteGroStage {
            rte: RteGro::new(64, 64),
            pending: [std::ptr::null_mut(); MAX_BURST],
            n: 0,
            capture,
            stats: crate::gro::GroStats::default(),
            segs: new_hist(256),
            polls: 0,
        }
    }

    fn merge_and_deliver(&mut self, ctx: &mut Ctx<'_>) {
        let n = self.n;
        for chunk in self.pending[..n].chunks_mut(MAX_ITEMS) {
            // SAFETY: the stage owns these chains; classify then reassemble
            // is the baseline's contract; afterwards exactly chunk[..k] are owned.
            let k = unsafe {
                baseline::classify(chunk);
                self.rte.reassemble(chunk)
            };
            for &m in &chunk[..k] {
                // SAFETY: an owned chain head.
                let segs = unsafe { mb::nb_segs(m) } as u64;
                self.segs.saturating_record(segs);
                self.stats.max_segments = self.stats.max_segments.max(segs);
                match self.capture.as_mut() {
                    Some(cap) => {
                        // SAFETY: an owned chain, headers in its first
                        // segment; then handed to the writer, given up.
                        unsafe {
                            let _ = baseline::fix_checksums(m);
                            cap.push_mbuf(m);
                        }
                    }
                    None => {
                        ctx.counts.consumed += 1;
                        // SAFETY: an owned chain, freed once.
                        unsafe { ctx.freer.chain(m) };
                    }
                }
            }
            self.stats.packets_out += k as u64;
        }
        self.stats.segments_in += n as u64;
        self.stats.merged_segments = self.stats.segments_in - self.stats.packets_out;
        self.n = 0;
    }

    fn publish(&mut self, ctx: &mut Ctx<'_>, force: bool) {
        ctx.shared.counters[ctx.slot].publish_gro(&self.stats);
        let h = &ctx.shared.hists[ctx.slot];
        let guard = if force {
            Some(h.lock().unwrap_or_else(|p| p.into_inner()))
        } else {
            h.try_lock().ok()
        };
        if let Some(mut g) = guard {
            move_into(&mut g.gro_segs, &mut self.segs);
        }
    }
}

impl Stage for RteGroStage {
    #[inline]
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        if self.n == MAX_BURST {
            self.merge_and_deliver(ctx);
        }
        self.pending[self.n] = skb.into_mbuf();
        self.n += 1;
    }

    fn end_of_poll(&mut self, ctx: &mut Ctx<'_>) {
        if self.n > 0 {
            self.merge_and_deliver(ctx);
        }
        if let Some(cap) = self.capture.as_mut() {
            cap.end_of_poll(ctx);
        }
        self.polls += 1;
        if self.polls >= PUBLISH_EVERY {
            self.polls = 0;
            self.publish(ctx, false);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.merge_and_deliver(ctx);
        if let Some(cap) = self.capture.as_mut() {
            cap.finish(ctx);
        }
        self.publish(ctx, true);
    }
}

impl Drop for RteGroStage {
    fn drop(&mut self) {
        for &m in &self.pending[..self.n] {
            // SAFETY: chains the stage still owned (a run torn down mid-poll).
            unsafe { mbuf::free(m) };
        }
    }
}

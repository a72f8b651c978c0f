//! The capture stage: packets batched per poll and handed to the pcap
//! writer's ring (`crate::capture`); a full ring makes the worker wait, and
//! counts it: a capture loses nothing. Only when the run stops and the
//! writer has made no progress for `capture::STALL` does the worker free
//! what the ring cannot take (counted as the capture's drops), so that a
//! stuck writer cannot keep the run from ending.

use super::{Ctx, Stage};
use crate::capture::CaptureTx;
use crate::dpdk::mbuf::{self, rte_mbuf};
use crate::dpdk::ring_port::RingPtr;
use crate::skb::Skb;
use std::sync::atomic::Ordering::Relaxed;

/// Packets batched before they go to the ring.
const BATCH: usize = 64;

/// Hands every packet to a [`crate::capture::Capture`] writer.
pub struct CaptureStage {
    tx: CaptureTx,
    ring: RingPtr,
    pending: [*mut rte_mbuf; BATCH],
    n: usize,
    /// Times the ring was full and the worker waited.
    waits: u64,
    published: u64,
    /// The writer's progress when it was last seen to move, and when (TSC):
    /// kept across waits, so a stuck writer costs one `STALL`, not one per poll.
    stall: (u64, u64),
}

// SAFETY: the stage owns the mbufs it batches; the ring is multi-producer.
unsafe impl Send for CaptureStage {}

impl CaptureStage {
    pub(crate) fn new(tx: CaptureTx) -> CaptureStage {
        CaptureStage {
            ring: tx.ring(),
            tx,
            pending: [std::ptr::null_mut(); BATCH],
            n: 0,
            waits: 0,
            published: 0,
            stall: (0, 0),
        }
    }

    /// Queues a chain for the writer (a full batch goes to the ring first).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and gives up.
    #[inline]
    pub(crate) unsafe fn push_mbuf(&mut self, m: *mut rte_mbuf) {
        if self.n == BATCH {
            self.deliver();
        }
        self.pending[self.n] = m;
        self.n += 1;
    }

    fn deliver(&mut self) {
        let mut done = 0;
        while done < self.n {
            // SAFETY: a multi-producer ring of mbufs; it takes ownership of
            // the chains it enqueues.
            let k = unsafe { self.ring.enqueue_burst(&self.pending[done..self.n]) };
            if k == 0 {
                self.waits += 1;
                let (seen, since) = &mut self.stall;
                if self.tx.writer_stalled(seen, since) {
                    let left = self.n - done;
                    // SAFETY: the chains not enqueued are still ours; freed once.
                    unsafe { mbuf::free_bulk(&mut self.pending[done..self.n]) };
                    self.tx.gave_up(left as u64);
                    break;
                }
                std::hint::spin_loop();
            }
            done += k;
        }
        self.n = 0;
    }
}

impl Stage for CaptureStage {
    #[inline]
    fn packet(&mut self, skb: Skb, _ctx: &mut Ctx<'_>) {
        // SAFETY: the skb owned the chain and gives it up.
        unsafe { self.push_mbuf(skb.into_mbuf()) };
    }

    fn end_of_poll(&mut self, ctx: &mut Ctx<'_>) {
        if self.n > 0 {
            self.deliver();
        }
        if self.waits != self.published {
            self.published = self.waits;
            ctx.shared.counters[ctx.slot]
                .capture_waits
                .store(self.waits, Relaxed);
        }
    }
}

impl Drop for CaptureStage {
    fn drop(&mut self) {
        self.deliver();
    }
}

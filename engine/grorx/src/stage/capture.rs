//! The capture stage: packets batched per poll and handed to the pcap
//! writer's ring (`crate::capture`); a full ring makes the worker wait, and
//! counts it: a capture loses nothing.

use super::{Ctx, Stage};
use crate::ring_port::RingPtr;
use crate::skb::Skb;
use dpdk_sys::{self as sys};
use std::sync::atomic::Ordering::Relaxed;

/// Packets batched before they go to the ring.
const BATCH: usize = 64;

/// Hands every packet to a [`crate::capture::Capture`] writer.
pub struct CaptureStage {
    ring: RingPtr,
    pending: [*mut sys::rte_mbuf; BATCH],
    n: usize,
    /// Times the ring was full and the worker waited.
    waits: u64,
    published: u64,
}

// SAFETY: the stage owns the mbufs it batches; the ring is multi-producer.
unsafe impl Send for CaptureStage {}

impl CaptureStage {
    pub(crate) fn new(ring: RingPtr) -> CaptureStage {
        CaptureStage {
            ring,
            pending: [std::ptr::null_mut(); BATCH],
            n: 0,
            waits: 0,
            published: 0,
        }
    }

    /// Queues a chain for the writer (a full batch goes to the ring first).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and gives up.
    #[inline]
    pub(crate) unsafe fn push_mbuf(&mut self, m: *mut sys::rte_mbuf) {
        if self.n == BATCH {
            self.deliver();
        }
        self.pending[self.n] = m;
        self.n += 1;
    }

    fn deliver(&mut self) {
        let mut done = 0;
        while done < self.n {
            // SAFETY: the ring takes ownership of the chains it enqueues.
            let k = unsafe {
                sys::rte_ring_enqueue_burst(
                    self.ring.0,
                    self.pending[done..self.n].as_ptr() as *const *mut std::ffi::c_void,
                    (self.n - done) as u32,
                    std::ptr::null_mut(),
                )
            } as usize;
            if k == 0 {
                self.waits += 1;
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

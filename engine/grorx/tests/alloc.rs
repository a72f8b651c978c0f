//! No heap allocation per packet in steady state. A counting allocator
//! counts every allocation of the process; two runs of the engine that differ
//! only in length (millions of packets apart) must differ by a handful of
//! allocations (the once-a-second monitor), i.e. about zero per packet.

mod common;

use grorx::gen::GenConfig;
use grorx::run::{self, EalSetup, RunOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    /// # Safety
    /// `l` has a non-zero size (GlobalAlloc::alloc's contract).
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: the caller guarantees a non-zero size, as System requires.
        unsafe { System.alloc(l) }
    }
    /// # Safety
    /// `p` was allocated by this allocator with layout `l`.
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: every block of ours came from System with this layout (the
        // caller's contract), so System may free it.
        unsafe { System.dealloc(p, l) }
    }
    /// # Safety
    /// `p` was allocated by this allocator with layout `l`; `n` is non-zero
    /// and, rounded up to `l.align()`, does not overflow `isize`.
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: `p` came from System with layout `l`, and `n` is valid
        // (the caller's contract), as System's realloc requires.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn run_for(secs: f64, gro: bool) -> (u64, u64) {
    let before = ALLOCS.load(Relaxed);
    let r = run::run(&RunOptions {
        eal: EalSetup::Existing,
        duration: Some(secs),
        gro: gro.then(Default::default),
        gen: GenConfig {
            flows: 8,
            psh_every: 32,
            ..GenConfig::default()
        },
        ..RunOptions::default()
    })
    .unwrap();
    assert_eq!(r.mbufs_leaked, 0);
    (ALLOCS.load(Relaxed) - before, r.rx_packets)
}

#[test]
fn steady_state_allocates_nothing_per_packet() {
    let _e = common::eal();
    for gro in [false, true] {
        let (a_short, p_short) = run_for(0.5, gro);
        let (a_long, p_long) = run_for(2.5, gro);
        let dp = p_long.saturating_sub(p_short);
        let da = a_long.saturating_sub(a_short);
        let per_packet = da as f64 / dp.max(1) as f64;
        println!(
            "gro {gro}: {da} more allocations for {dp} more packets: {per_packet:.2e} per packet"
        );
        assert!(
            dp > 10_000,
            "the longer run received many more packets ({dp})"
        );
        assert!(
            per_packet < 1e-3,
            "allocations grow with packets: {per_packet}"
        );
    }
}

//! The checksum kernels side by side, measured paired.
//!
//! Every kernel this CPU runs sums the 1448-byte payloads of frames laid out
//! as a NIC's buffers (2 KiB apart, the payload 66 bytes into each, 2 past
//! a cache line), over three working sets: one frame (in L1), a burst of 32
//! (64 KiB: past L1, as a burst a copying PMD has just written), and 1024
//! frames (2 MiB: past L2 here). The cases run interleaved round after round
//! in a rotated order, so that a change in the machine's speed falls on
//! every case alike.
//!
//! Printed per case: the median time per payload, and the median over
//! rounds of its time over the portable kernel's on the same frames in the
//! same round. `GRORX_CSUM_ROUNDS` sets the rounds (default 31). Each sum
//! is `csum::sum_by`, which asks whether the CPU runs its kernel on every
//! call (a few cached loads) where `csum::sum` reads its choice once.
//!
//!     cargo bench -p grorx-gro --features traffic --bench csum

mod common;

use common::{median, rotated, rounds};
use grorx_gro::csum::{sum_by, Kernel};
use std::hint::black_box;
use std::time::Instant;

const FRAME: usize = 2048;
const PAYLOAD_AT: usize = 66;
const PAYLOAD: usize = 1448;
/// Payloads summed in one timed pass, whatever the working set.
const SUMS: usize = 32 * 1024;

struct Case {
    kernel: Kernel,
    frames: usize,
    /// `frames` frames, the first at a 64-byte boundary.
    buf: Vec<u8>,
    base: usize,
    /// Nanoseconds per payload, one a round.
    ns: Vec<f64>,
}

impl Case {
    fn new(kernel: Kernel, frames: usize) -> Case {
        let buf: Vec<u8> = (0..frames * FRAME + 64)
            .map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(7) as u8)
            .collect();
        let base = (buf.as_ptr() as usize).wrapping_neg() & 63;
        Case {
            kernel,
            frames,
            buf,
            base,
            ns: Vec::new(),
        }
    }

    /// One pass: `SUMS` payloads, frame after frame; the time per payload.
    fn pass(&self) -> f64 {
        let mut acc = 0u32;
        let t = Instant::now();
        for _ in 0..SUMS / self.frames {
            for f in 0..self.frames {
                let at = self.base + f * FRAME + PAYLOAD_AT;
                let s = sum_by(self.kernel, black_box(&self.buf[at..at + PAYLOAD]));
                acc = acc.wrapping_add(s.expect("an available kernel") as u32);
            }
        }
        black_box(acc);
        t.elapsed().as_nanos() as f64 / (SUMS / self.frames * self.frames) as f64
    }
}

fn main() {
    let rounds = rounds("GRORX_CSUM_ROUNDS");
    let sets = [1, 32, 1024];
    let kernels: Vec<Kernel> = Kernel::ALL.into_iter().filter(|k| k.available()).collect();
    let mut cases: Vec<Case> = kernels
        .iter()
        .flat_map(|&k| sets.map(|n| Case::new(k, n)))
        .collect();
    rotated(rounds, &mut cases, |c, counts| {
        c.pass();
        let ns = c.pass();
        if counts {
            c.ns.push(ns);
        }
    });
    println!(
        "checksum of {PAYLOAD} B payloads {PAYLOAD_AT} B into {FRAME} B frames; \
         the kernel in use here: {}; {rounds} rounds, cases interleaved",
        Kernel::best().name()
    );
    println!(
        "{:<13} {:>8} {:>12} {:>11} {:>14}",
        "kernel", "frames", "ns/payload", "B/ns", "x portable"
    );
    for c in &cases {
        let portable = &cases
            .iter()
            .find(|o| o.kernel == Kernel::Portable && o.frames == c.frames)
            .expect("the portable kernel runs everywhere")
            .ns;
        let mut ratio: Vec<f64> = c.ns.iter().zip(portable).map(|(a, b)| a / b).collect();
        let ns = median(&mut c.ns.clone());
        println!(
            "{:<13} {:>8} {:>12.2} {:>11.1} {:>14.3}",
            c.kernel.name(),
            c.frames,
            ns,
            PAYLOAD as f64 / ns,
            median(&mut ratio)
        );
    }
    println!(
        "x portable: median over rounds of (ns a payload / the portable kernel's on the \
         same frames in the same round)"
    );
}

//! Short flows: 8192 TCP flows of two segments each, the two in a row (an
//! RPC, a short response), the second with PSH, taken poll by poll in
//! bursts of 32 as the engine's worker does. Each flow builds a head, merges
//! once and leaves: what GRO costs where every flow is new and merges once.
//!
//!     cargo bench -p grorx-gro --features traffic --bench short
//!
//! `GRORX_SHORT_CASE=N` runs case N (0 trusting, 1 verifying) alone, one
//! warm-up pass and one counted, for callgrind (an instruction count is the
//! same from run to run, where times here move with the machine):
//!
//!     GRORX_SHORT_CASE=0 valgrind --tool=callgrind --toggle-collect='*short::counted*' BIN

mod common;

use common::{frames_in, median, replay_polls, rotated, rounds, traffic, Arena, Frame};
use grorx_gro::{CsumMode, Gro, GroConfig};
use std::time::Instant;

struct Case {
    csum: CsumMode,
    frames: Vec<Vec<u8>>,
    arena: Arena,
    ns: Vec<f64>,
}

/// A pass over the frames (what callgrind counts).
#[inline(never)]
fn counted(gro: &mut Gro<Frame>, frames: Vec<Frame>, out: &mut Vec<Frame>) {
    replay_polls(gro, frames, 32, out);
}

/// Flows, each new to GRO: its table (1024 by default) cannot remember them.
const FLOWS: u32 = 8192;

fn main() {
    let only: Option<usize> = std::env::var("GRORX_SHORT_CASE")
        .ok()
        .map(|v| v.parse().unwrap());
    let rounds = rounds("GRORX_SHORT_ROUNDS");
    let mut cases: Vec<Case> = [CsumMode::Trust, CsumMode::Verify]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| only.is_none_or(|o| o == *i))
        .map(|(_, csum)| {
            let frames = traffic(FLOWS, 2 * FLOWS as usize, 2, 2, false);
            Case {
                csum,
                arena: Arena::new(&frames),
                frames,
                ns: Vec::new(),
            }
        })
        .collect();
    let mut out: Vec<Frame> = Vec::new();
    let mut run = |c: &mut Case, keep: bool| {
        let cfg = GroConfig {
            csum: c.csum,
            ..GroConfig::default()
        };
        let mut gro: Gro<Frame> = Gro::new(cfg);
        for timed in [false, true] {
            let fr = frames_in(&mut c.arena, &c.frames);
            out.clear();
            out.reserve(fr.len());
            let t = Instant::now();
            counted(&mut gro, fr, &mut out);
            if timed && keep {
                c.ns.push(t.elapsed().as_nanos() as f64 / c.frames.len() as f64);
            }
        }
        assert_eq!(out.len(), FLOWS as usize, "every flow merged once");
    };
    if only.is_some() {
        run(&mut cases[0], true);
        println!("{:?}: {:.1} ns a segment", cases[0].csum, cases[0].ns[0]);
        return;
    }
    rotated(rounds, &mut cases, run);
    for c in &cases {
        println!(
            "{:?}: {:.1} ns a segment",
            c.csum,
            median(&mut c.ns.clone())
        );
    }
}

//! The cost of holding many flows at once against one, measured paired.
//!
//! `gro.rs`'s `held/*` cases (flows round-robin, 64 B segments held across
//! bursts of 32 in a table as large as the flow count, trusting checksums),
//! each of 16384 segments (16 a flow for 1024 flows), run interleaved round after round
//! in a rotated order, so that a change in the machine's speed falls on
//! every case alike. Each case is run by a fresh GRO (every flow new to it)
//! and by one that took the same traffic once before (every flow one its
//! table remembers: a queue's steady state). Each timed pass follows an
//! untimed one of the same case, which leaves its frames and table in
//! cache (and, for the known flows, is the pass that made them known).
//!
//! Printed per case: the median time per segment, and the median over
//! rounds of its time per segment over one flow's in the same round (the
//! goal: 1024 flows at most 1.5x one), and over two flows'. One flow's
//! segments come in runs, which merge in a loop of their own; two flows
//! round-robin already take the path 1024 do (each segment looked up in
//! the table, none after one of its own flow), so the second ratio is what
//! holding many flows costs over holding few on that path.
//! `GRORX_HELD_ROUNDS` sets the rounds (default 31).
//!
//!     cargo bench -p grorx-gro --features traffic --bench held
//!
//! `GRORX_HELD_CASE=N` runs case N (0-5, in the printed order) alone, one
//! round, for an instruction count: its timed pass is `counted`, which
//! `scripts/held-instructions.sh` has callgrind count, case by case.

mod common;

use common::{frames_in, median, replay, rotated, rounds, traffic_mss, Arena, Frame};
use grorx_gro::{CsumMode, Gro, GroConfig};
use std::time::Instant;

struct Case {
    flows: u32,
    known: bool,
    frames: Vec<Vec<u8>>,
    arena: Arena,
    /// Nanoseconds per segment, one a round.
    ns: Vec<f64>,
}

impl Case {
    fn name(&self) -> String {
        let what = if self.known { "known" } else { "new" };
        format!("{} flows, {what}", self.flows)
    }

    fn cfg(&self) -> GroConfig {
        GroConfig {
            csum: CsumMode::Trust,
            flows: self.flows as usize,
            ..GroConfig::default()
        }
    }

    /// One pass over the case by `gro`: its time per segment (timed), or
    /// none (the untimed pass before it).
    fn pass(&mut self, gro: &mut Gro<Frame>, out: &mut Vec<Frame>, timed: bool) -> f64 {
        let fr = frames_in(&mut self.arena, &self.frames);
        out.clear();
        out.reserve(fr.len());
        if !timed {
            replay(gro, fr, 32, false, out);
            return 0.0;
        }
        let t = Instant::now();
        counted(gro, fr, out);
        t.elapsed().as_nanos() as f64 / self.frames.len() as f64
    }
}

/// A case's timed pass (what `GRORX_HELD_CASE` runs for callgrind).
#[inline(never)]
fn counted(gro: &mut Gro<Frame>, frames: Vec<Frame>, out: &mut Vec<Frame>) {
    replay(gro, frames, 32, false, out);
}

/// The flow counts of the cases, each new to the table and known to it
/// (cases 0-5: 1 new, 1 known, 2 new, 2 known, 1024 new, 1024 known).
const FLOWS: [u32; 3] = [1, 2, 1024];

/// Segments a case: 16 a flow for 1024 flows, and as many for fewer,
/// so that all stream the same frames (2 MiB, past L2 here) and differ
/// only in how many flows GRO holds.
const SEGMENTS: usize = 16 * 1024;

fn main() {
    let only: Option<usize> = std::env::var("GRORX_HELD_CASE")
        .ok()
        .map(|v| v.parse().expect("GRORX_HELD_CASE: a case number, 0-5"));
    let rounds = rounds("GRORX_HELD_ROUNDS");
    let mut cases: Vec<Case> = FLOWS
        .iter()
        .flat_map(|&f| [(f, false), (f, true)])
        .enumerate()
        .filter(|(i, _)| only.is_none_or(|o| o == *i))
        .map(|(_, (flows, known))| {
            let frames = traffic_mss(flows, SEGMENTS, 1, 0, false, 64);
            Case {
                flows,
                known,
                arena: Arena::new(&frames),
                frames,
                ns: Vec::new(),
            }
        })
        .collect();
    let mut out: Vec<Frame> = Vec::new();
    let mut run = |c: &mut Case, counts: bool| {
        let mut gro: Gro<Frame> = Gro::new(c.cfg());
        c.pass(&mut gro, &mut out, false);
        if !c.known {
            gro = Gro::new(c.cfg());
        }
        let ns = c.pass(&mut gro, &mut out, true);
        if counts {
            c.ns.push(ns);
        }
    };
    if only.is_some() {
        let c = &mut cases[0];
        run(c, true);
        println!("{}: {:.1} ns a segment, one pass", c.name(), c.ns[0]);
        return;
    }
    rotated(rounds, &mut cases, run);
    println!(
        "flows held at once: round-robin, {SEGMENTS} segments of 64 B, trust; \
         {rounds} rounds, cases interleaved"
    );
    println!(
        "{:<18} {:>10} {:>14} {:>12} {:>12}",
        "case", "segments", "ns/segment", "x one flow", "x two flows"
    );
    // The median over rounds of a case's time over the case of `flows`
    // flows of the same kind (new or known) in the same round.
    let ratio = |c: &Case, flows: u32| {
        let of = cases
            .iter()
            .find(|o| o.flows == flows && o.known == c.known);
        let of = &of.expect("a case of each kind for every flow count").ns;
        median(&mut c.ns.iter().zip(of).map(|(a, b)| a / b).collect::<Vec<_>>())
    };
    for c in &cases {
        println!(
            "{:<18} {:>10} {:>14.1} {:>12.2} {:>12.2}",
            c.name(),
            c.frames.len(),
            median(&mut c.ns.clone()),
            ratio(c, 1),
            ratio(c, 2)
        );
    }
    println!(
        "x one flow, x two flows: median over rounds of (ns a segment / that case's in the \
         same round, new against new, known against known)"
    );
}

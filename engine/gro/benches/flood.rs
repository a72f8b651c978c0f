//! Bulk throughput kept under a flood of new flows, measured paired.
//!
//! The cases of `gro.rs`'s `flood/*` (4 bulk flows round-robin, 4096
//! segments, packets held across bursts of 32 in a table of 64 flows, the
//! flood one-segment flows never seen twice) are run interleaved, round
//! after round, each round in a rotated order, so that a change in the
//! machine's speed falls on every case alike. Each pass times one GRO over
//! the whole case (a fresh GRO, the frames just written into their arena:
//! in cache, as a PMD's freshly received frames are), after an untimed pass
//! of the same case (so a bigger case run before does not leave it a cold
//! cache).
//!
//! Printed per case: the median time per pass, the bulk throughput kept
//! (the median over rounds of time alone / time with the flood: bulk
//! segments per second with the flood over without), the bulk flows'
//! segments per packet (their merge quality, against the bulk alone) and
//! the evictions. `GRORX_FLOOD_ROUNDS` sets the rounds (default 31).
//!
//!     cargo bench -p grorx-gro --features traffic --bench flood

mod common;

use common::{flood, frames_in, median, replay, rotated, rounds, Arena, Frame, FLOODS, FLOOD_BULK};
use grorx_gro::{CsumMode, Flush, Gro, GroConfig};
use std::time::Instant;

struct Case {
    name: &'static str,
    frames: Vec<Vec<u8>>,
    arena: Arena,
    flood: usize,
    ns: Vec<f64>,
    bulk_packets: u64,
    evicted: u64,
}

fn main() {
    let rounds = rounds("GRORX_FLOOD_ROUNDS");
    let cfg = GroConfig {
        csum: CsumMode::Trust,
        flows: 64,
        ..GroConfig::default()
    };
    let mut cases: Vec<Case> = FLOODS
        .iter()
        .map(|&(name, every, per)| {
            let frames = flood(every, per);
            Case {
                name,
                arena: Arena::new(&frames),
                flood: frames.len() - FLOOD_BULK,
                frames,
                ns: Vec::new(),
                bulk_packets: 0,
                evicted: 0,
            }
        })
        .collect();
    let mut out: Vec<Frame> = Vec::new();
    rotated(rounds, &mut cases, |c, counts| {
        // Twice, the second timed: the first leaves the case's own frames
        // and table in cache whatever case ran before (a bigger one evicts
        // them), as a queue's steady state has them.
        let pass = |c: &mut Case, out: &mut Vec<Frame>| {
            let mut gro: Gro<Frame> = Gro::new(cfg);
            let fr = frames_in(&mut c.arena, &c.frames);
            out.clear();
            out.reserve(fr.len());
            let t = Instant::now();
            replay(&mut gro, fr, 32, false, out);
            (t.elapsed().as_nanos() as f64, gro)
        };
        pass(c, &mut out);
        let (ns, gro) = pass(c, &mut out);
        if counts {
            c.ns.push(ns);
        }
        // Every flood flow leaves alone: the rest are the bulk's.
        c.bulk_packets = out.len() as u64 - c.flood as u64;
        c.evicted = gro.stats().flush[Flush::TableFull as usize];
    });
    let alone = cases[0].ns.clone();
    let bulk_quality = FLOOD_BULK as f64 / cases[0].bulk_packets as f64;
    println!(
        "bulk throughput under a flood of new flows: {FLOOD_BULK} bulk segments, 4 flows, \
         64 flows held, trust; {rounds} rounds, cases interleaved"
    );
    println!(
        "{:<14} {:>10} {:>12} {:>14} {:>14} {:>10}",
        "case", "new flows", "median us", "bulk kept", "bulk seg/pkt", "evicted"
    );
    for c in &mut cases {
        let mut kept: Vec<f64> = alone.iter().zip(&c.ns).map(|(a, b)| a / b).collect();
        let seg_per_pkt = FLOOD_BULK as f64 / c.bulk_packets as f64;
        println!(
            "{:<14} {:>10} {:>12.1} {:>14} {:>14} {:>10}",
            c.name,
            c.flood,
            median(&mut c.ns.clone()) / 1000.0,
            format!("{:.2}", median(&mut kept)),
            format!("{:.2} ({:.2})", seg_per_pkt, seg_per_pkt / bulk_quality),
            c.evicted
        );
    }
    println!(
        "bulk kept: median over rounds of (time of the bulk alone / time with the flood); \
         in brackets: bulk segments per packet over the bulk alone's"
    );
}

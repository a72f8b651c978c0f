//! What the `udp` and `tunnel` targets share: frames of their own making
//! run through a `Gro<VecBuf>` with flushes in between, and the invariants
//! that hold whatever the frames are: every frame out once, untouched when
//! it left alone, the counters right, each flow in arrival order. What a
//! merged packet must be is each target's own (`check_outputs`' `merged`).

use arbitrary::{Arbitrary, Unstructured};
use grorx_gro::{CsumMode, Gro, GroConfig, OutCsum, VecBuf};

/// What follows a frame.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum After {
    Nothing,
    EndOfPoll,
    /// `flush_older(now - age)`.
    Older(u8),
}

/// What one execution did.
#[derive(Debug, Default)]
pub struct Summary {
    pub inputs: usize,
    pub outputs: usize,
    pub merged: usize,
}

/// The settings four input bytes choose: `max_frags` 1-64, 1 to `flows`
/// held flows, checksums verified or trusted, merged TCP checksums full or
/// the pseudo-header sum, a size limit from 1500 to 65535.
pub fn config(b: [u8; 4], flows: u8) -> GroConfig {
    GroConfig {
        max_frags: 1 + (b[0] % 64) as u16,
        flows: 1 + (b[1] % flows) as usize,
        csum: if b[2] & 1 == 1 {
            CsumMode::Trust
        } else {
            CsumMode::Verify
        },
        out_csum: if b[2] & 2 == 2 {
            OutCsum::Pseudo
        } else {
            OutCsum::Full
        },
        max_size: 1500 + (b[3] as u32 * 251) % (65535 - 1500 + 1),
        ..GroConfig::default()
    }
}

/// Operations decoded from what is left of `u`, at most `max`.
pub fn ops<T: for<'a> Arbitrary<'a>>(u: &mut Unstructured, max: usize) -> Vec<T> {
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < max {
        match T::arbitrary(u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    ops
}

/// Feeds `frames` to a `Gro` made with `cfg`, each `steps`' ticks after the
/// one before and followed by its flush, then flushes everything; GRO and
/// what came out. No more than `held` packets may be held at any time.
pub fn run(
    cfg: GroConfig,
    frames: &[Vec<u8>],
    steps: impl Iterator<Item = (u8, After)>,
    held: usize,
) -> Result<(Gro<VecBuf>, Vec<VecBuf>), String> {
    let mut g: Gro<VecBuf> = Gro::new(cfg);
    let mut outs: Vec<VecBuf> = Vec::new();
    let mut now = 0u64;
    for (i, (f, (dt, after))) in frames.iter().zip(steps).enumerate() {
        now += dt as u64;
        g.receive(VecBuf::new(i as u64, f.clone()), now, &mut |o| outs.push(o));
        if g.held() > held {
            return Err(format!("{} held, at most {held}", g.held()));
        }
        match after {
            After::Nothing => {}
            After::EndOfPoll => {
                g.tick(now);
                g.end_of_poll(&mut |o| outs.push(o));
            }
            After::Older(a) => g.flush_older(now.saturating_sub(a as u64), &mut |o| outs.push(o)),
        }
    }
    g.flush_all(&mut |o| outs.push(o));
    if g.held() != 0 {
        return Err("held after flush_all".into());
    }
    Ok((g, outs))
}

/// The invariants of a run's outputs: each frame out exactly once, alone
/// and untouched or in a packet of at most `max_frags` frames, in arrival
/// order, each of which `parse` reads, and which `merged(frames read,
/// bytes)` accepts; GRO's counters those of what came out; the
/// frames `parse` reads leaving in arrival order, flow (`flow_of`) by flow.
pub fn check_outputs<T>(
    frames: &[Vec<u8>],
    g: &Gro<VecBuf>,
    outs: &[VecBuf],
    max_frags: u16,
    parse: impl Fn(&[u8]) -> Option<T>,
    flow_of: impl Fn(&T) -> &[u8],
    mut merged: impl FnMut(&[T], &[u8]) -> Result<(), String>,
) -> Result<Summary, String> {
    let n = frames.len();
    let mut pos = vec![usize::MAX; n];
    let mut n_merged = 0;
    for (oi, o) in outs.iter().enumerate() {
        for &id in &o.ids {
            let i = id as usize;
            if i >= n || pos[i] != usize::MAX {
                return Err(format!("input {i} out twice (or unknown)"));
            }
            pos[i] = oi;
        }
        let bytes = o.bytes();
        let ids = &o.ids;
        if ids.len() == 1 {
            if bytes != frames[ids[0] as usize] {
                return Err(format!("output {oi} (input {}) alone but changed", ids[0]));
            }
            continue;
        }
        n_merged += 1;
        let err = |m: String| Err(format!("output {oi} (inputs {ids:?}): {m}"));
        if ids.len() > max_frags as usize {
            return err(format!("{} frames, max_frags {max_frags}", ids.len()));
        }
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return err("inputs not in arrival order".into());
        }
        let mut ins = Vec::with_capacity(ids.len());
        for &id in ids {
            match parse(&frames[id as usize]) {
                Some(x) => ins.push(x),
                None => return err(format!("input {id} merged but not one the oracle reads")),
            }
        }
        if let Err(m) = merged(&ins, &bytes) {
            return err(m);
        }
    }
    if let Some(i) = pos.iter().position(|&p| p == usize::MAX) {
        return Err(format!("input {i} never came out"));
    }
    if g.stats().packets_out != outs.len() as u64 || g.stats().segments_in != n as u64 {
        return Err(format!(
            "stats: {} in, {} out; {n} inputs, {} outputs",
            g.stats().segments_in,
            g.stats().packets_out,
            outs.len()
        ));
    }
    let mut last: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    for (i, f) in frames.iter().enumerate() {
        if let Some(x) = parse(f) {
            let e = last.entry(flow_of(&x).to_vec()).or_insert(pos[i]);
            if pos[i] < *e {
                return Err(format!(
                    "input {i} out (output {}) before an earlier frame of its flow (output {})",
                    pos[i], *e
                ));
            }
            *e = pos[i];
        }
    }
    Ok(Summary {
        inputs: n,
        outputs: outs.len(),
        merged: n_merged,
    })
}

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

/// Ticks a segment may wait ahead of a gap at an end of poll: about 16
/// frames' worth (each comes 0-255 ticks after the one before), so a gap
/// can fill polls later.
const POLL_WAIT: u64 = 2048;

/// How a flow's frames must leave.
pub enum Order<'a, T> {
    /// In arrival order.
    Arrival,
    /// (The reorder window.) Stepping back in sequence no more often than
    /// they arrived; each frame's (seq, payload length) read by the function.
    Sequence(&'a dyn Fn(&T) -> (u32, u32)),
}

/// How often a flow's data steps back in sequence (starts before the end of
/// the data before it, mod 2^32), given as (seq, length) in the order seen.
pub fn backsteps(segs: &[(u32, u32)]) -> usize {
    segs.windows(2)
        .filter(|w| w[1].0.wrapping_sub(w[0].0.wrapping_add(w[0].1)) >= 1 << 31)
        .count()
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
        // With the reorder window on, a poll gives up the waits older
        // than its deadline first, as the engine's does (a no-op without).
        match after {
            After::Nothing => {}
            After::EndOfPoll => {
                g.tick(now);
                g.expire_reorder(now.saturating_sub(POLL_WAIT), &mut |o| outs.push(o));
                g.end_of_poll(&mut |o| outs.push(o));
            }
            After::Older(a) => {
                let deadline = now.saturating_sub(a as u64);
                g.expire_reorder(deadline, &mut |o| outs.push(o));
                g.flush_older(deadline, &mut |o| outs.push(o));
            }
        }
    }
    g.flush_all(&mut |o| outs.push(o));
    if g.held() != 0 {
        return Err("held after flush_all".into());
    }
    Ok((g, outs))
}

/// The invariants of a run's outputs: each frame out exactly once, alone
/// and untouched or in a packet of at most `max_frags` frames (in arrival
/// order, unless `order` is by sequence), each of which `parse` reads, and
/// which `merged(frames read, bytes)` accepts; GRO's counters those of what
/// came out; the frames `parse` reads leaving as `order` says, flow
/// (`flow_of`) by flow.
#[allow(clippy::too_many_arguments)]
pub fn check_outputs<T>(
    frames: &[Vec<u8>],
    g: &Gro<VecBuf>,
    outs: &[VecBuf],
    max_frags: u16,
    parse: impl Fn(&[u8]) -> Option<T>,
    flow_of: impl Fn(&T) -> &[u8],
    mut merged: impl FnMut(&[&T], &[u8]) -> Result<(), String>,
    order: Order<'_, T>,
) -> Result<Summary, String> {
    let by_seq = matches!(order, Order::Sequence(_));
    let n = frames.len();
    // Each input read once, for every check below.
    let read: Vec<Option<T>> = frames.iter().map(|f| parse(f)).collect();
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
        if !by_seq && ids.windows(2).any(|w| w[0] >= w[1]) {
            return err("inputs not in arrival order".into());
        }
        let mut ins = Vec::with_capacity(ids.len());
        for &id in ids {
            match &read[id as usize] {
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
    if let Order::Sequence(seq_len) = order {
        type Seen = std::collections::HashMap<Vec<u8>, Vec<(u32, u32)>>;
        let (mut seen_in, mut seen_out) = (Seen::default(), Seen::default());
        for x in read.iter().flatten().filter(|x| seq_len(x).1 > 0) {
            seen_in
                .entry(flow_of(x).to_vec())
                .or_default()
                .push(seq_len(x));
        }
        for o in outs {
            let Some(x) = &read[o.ids[0] as usize] else {
                continue;
            };
            let len: u32 = (o.ids.iter())
                .filter_map(|&id| read[id as usize].as_ref())
                .map(|y| seq_len(y).1)
                .sum();
            if len > 0 {
                let at = (seq_len(x).0, len);
                seen_out.entry(flow_of(x).to_vec()).or_default().push(at);
            }
        }
        for (flow, i) in &seen_in {
            let o = seen_out.get(flow).map_or(&[][..], |v| &v[..]);
            if backsteps(o) > backsteps(i) {
                return Err(format!(
                    "flow {flow:?}: {} steps back in sequence out, {} in: in {i:?}, out {o:?}",
                    backsteps(o),
                    backsteps(i)
                ));
            }
        }
        return Ok(Summary {
            inputs: n,
            outputs: outs.len(),
            merged: n_merged,
        });
    }
    let mut last: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    for (i, x) in read.iter().enumerate() {
        if let Some(x) = x {
            let e = last.entry(flow_of(x).to_vec()).or_insert(pos[i]);
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

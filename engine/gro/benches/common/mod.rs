//! What the GRO benchmarks share: frames in one arena whose `append` only
//! counts, and the traffic they replay.

#![allow(dead_code)]

use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment, TCP_ACK, TCP_PSH};
use grorx_gro::{Gro, GroBuf, GsoInfo, RxHints};

/// A frame in the run's arena, laid out as an mbuf is: one pointer to a
/// line of metadata (lengths, buffers), the frame's bytes in the lines
/// after it. A handle of one pointer gives GRO's table entries the layout
/// they have in the engine (whose skb is one pointer too). Appending only
/// adds up lengths and buffers in the held frame's metadata, and dropping
/// one frees nothing (the arena goes after the timed part).
pub struct Frame(std::ptr::NonNull<Meta>);

/// A frame's metadata line in the arena; its bytes follow it.
#[repr(C, align(64))]
pub struct Meta {
    /// Bytes of the frame in the arena (its first buffer).
    cap: usize,
    /// Bytes of the packet, appended frames included.
    len: usize,
    segs: u16,
    /// What the NIC said of its checksums (`Arena::nic`).
    hints: RxHints,
}

impl Frame {
    fn meta(&self) -> &Meta {
        // SAFETY: the pointer is to a metadata line of the arena, this
        // frame's alone, and the arena outlives the frame (`frames_in`).
        unsafe { self.0.as_ref() }
    }
    fn meta_mut(&mut self) -> &mut Meta {
        // SAFETY: as in `meta`; the frame is the only handle to its line.
        unsafe { self.0.as_mut() }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `cap` bytes follow the metadata line in the arena, this
        // frame's alone (`frames_in`).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(1).cast(), self.meta().cap) }
    }
}

impl GroBuf for Frame {
    fn head(&self) -> &[u8] {
        self.bytes()
    }
    fn head_mut(&mut self) -> &mut [u8] {
        let cap = self.meta().cap;
        // SAFETY: as in `bytes`; the frame is the only view of its bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr().add(1).cast(), cap) }
    }
    fn len(&self) -> usize {
        self.meta().len
    }
    fn segs(&self) -> u16 {
        self.meta().segs
    }
    fn rx_hints(&self) -> RxHints {
        self.meta().hints
    }
    fn for_each_chunk<F: FnMut(&[u8])>(&self, off: usize, len: usize, mut f: F) {
        f(&self.bytes()[off..off + len])
    }
    fn segs_from(&self, _off: usize) -> u16 {
        self.meta().segs
    }
    fn append(&mut self, other: Frame, off: usize) {
        let (len, segs) = (other.len(), other.segs());
        let m = self.meta_mut();
        m.len += len - off;
        m.segs += segs;
    }
    fn set_gso(&mut self, _info: &GsoInfo) {}
}

/// `n` segments over `flows` flows, `run` consecutive segments per flow.
pub fn traffic(flows: u32, n: usize, run: usize, psh_every: u32, reorder: bool) -> Vec<Vec<u8>> {
    traffic_mss(flows, n, run, psh_every, reorder, 1448)
}

pub fn traffic_mss(
    flows: u32,
    n: usize,
    run: usize,
    psh_every: u32,
    reorder: bool,
    mss: u32,
) -> Vec<Vec<u8>> {
    let specs: Vec<FlowSpec> = (0..flows).map(|i| FlowSpec::numbered(i, false)).collect();
    traffic_of(&specs, n, run, psh_every, reorder, mss)
}

/// `n` segments of the flows `specs`, `run` consecutive segments per flow.
pub fn traffic_of(
    specs: &[FlowSpec],
    n: usize,
    run: usize,
    psh_every: u32,
    reorder: bool,
    mss: u32,
) -> Vec<Vec<u8>> {
    let flows = specs.len() as u32;
    let payload: Vec<u8> = (0..mss as u64).map(|i| pattern_byte(0, i)).collect();
    let mut seq = vec![0u32; flows as usize];
    let mut id = vec![0u16; flows as usize];
    let mut cnt = vec![0u32; flows as usize];
    let mut out = Vec::with_capacity(n);
    let mut f = 0usize;
    while out.len() < n {
        for _ in 0..run {
            let s = Segment {
                seq: seq[f],
                ack: 1,
                flags: TCP_ACK
                    | if psh_every > 0 && (cnt[f] + 1).is_multiple_of(psh_every) {
                        TCP_PSH
                    } else {
                        0
                    },
                ip_id: id[f],
                tsval: 7,
                tsecr: 9,
                payload_len: mss as u16,
            };
            out.push(specs[f].frame(&s, &payload));
            seq[f] = seq[f].wrapping_add(mss);
            id[f] = id[f].wrapping_add(1);
            cnt[f] += 1;
        }
        f = (f + 1) % flows as usize;
    }
    out.truncate(n);
    if reorder {
        // Swap every 16th pair: a little reordering, as across paths.
        for i in (0..n.saturating_sub(1)).step_by(16) {
            out.swap(i, i + 1);
        }
    }
    out
}

/// A flow's first segment: ACK only, `payload_len` bytes of payload.
pub fn one_segment(spec: &FlowSpec, payload_len: u16) -> Vec<u8> {
    let s = Segment {
        seq: 1,
        ack: 1,
        flags: TCP_ACK,
        ip_id: 0,
        tsval: 7,
        tsecr: 9,
        payload_len,
    };
    spec.frame(&s, &vec![0x55; payload_len as usize])
}

/// The frames of one run laid out in one arena (as mbufs are in their
/// pool), each in its own stride: its metadata line, then its bytes.
pub struct Arena {
    lines: Vec<Meta>,
    /// Lines a frame takes.
    stride: usize,
    /// The checksum flags every frame comes with: none by default, or a
    /// NIC's that checked them.
    pub nic: RxHints,
}

impl Arena {
    pub fn new(frames: &[Vec<u8>]) -> Arena {
        let most = frames.iter().map(|f| f.len()).max().unwrap_or(0);
        let stride = 1 + most.div_ceil(std::mem::size_of::<Meta>());
        Arena {
            lines: (0..frames.len() * stride)
                .map(|_| Meta {
                    cap: 0,
                    len: 0,
                    segs: 0,
                    hints: RxHints::default(),
                })
                .collect(),
            stride,
            nic: RxHints::default(),
        }
    }
}

/// Writes `frames` into `arena` and hands out one `Frame` per frame: the
/// frames are in cache afterwards, as a PMD's freshly received ones are.
/// The frames must not outlive the arena, nor be used after the next call.
pub fn frames_in(arena: &mut Arena, frames: &[Vec<u8>]) -> Vec<Frame> {
    let (stride, hints) = (arena.stride, arena.nic);
    assert!(
        arena.lines.len() >= frames.len() * stride,
        "an arena for these frames"
    );
    let base = arena.lines.as_mut_ptr();
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            // SAFETY: frame i's stride, lines [i * stride, (i + 1) * stride),
            // lies in the arena (asserted above) and is its alone; its bytes
            // (at most stride - 1 lines) follow its metadata line.
            unsafe {
                let meta = base.add(i * stride);
                meta.write(Meta {
                    cap: f.len(),
                    len: f.len(),
                    segs: 1,
                    hints,
                });
                let bytes = meta.add(1).cast::<u8>();
                std::ptr::copy_nonoverlapping(f.as_ptr(), bytes, f.len());
                Frame(std::ptr::NonNull::new_unchecked(meta))
            }
        })
        .collect()
}

/// Gives `frames` to `gro` in bursts of `burst` (`Gro::receive_burst`, as
/// the worker gives a poll when it holds packets across polls), flushing
/// after each burst (`flush_each_burst`) or only after the last (packets
/// held across bursts); what leaves goes to `out`.
#[inline(never)]
pub fn replay(
    gro: &mut Gro<Frame>,
    frames: Vec<Frame>,
    burst: usize,
    flush_each_burst: bool,
    out: &mut Vec<Frame>,
) {
    let mut it = frames.into_iter().peekable();
    let mut poll = Vec::with_capacity(burst);
    while it.peek().is_some() {
        poll.extend(it.by_ref().take(burst));
        gro.receive_burst(&mut poll, 0, &mut |f| out.push(f));
        if flush_each_burst {
            gro.flush_all(&mut |f| out.push(f));
        }
    }
    gro.flush_all(&mut |f| out.push(f));
}

/// As `replay` flushing after each burst, but each burst taken whole
/// (`Gro::receive_poll`), as the engine's worker does.
#[inline(never)]
pub fn replay_polls(gro: &mut Gro<Frame>, frames: Vec<Frame>, burst: usize, out: &mut Vec<Frame>) {
    let mut it = frames.into_iter().peekable();
    let mut poll = Vec::with_capacity(burst);
    while it.peek().is_some() {
        poll.extend(it.by_ref().take(burst));
        gro.receive_poll(&mut poll, 0, &mut |f| out.push(f));
        gro.end_of_poll(&mut |f| out.push(f));
    }
}

/// Bulk segments of the flood cases.
pub const FLOOD_BULK: usize = 4096;
/// Bulk flows of the flood cases.
pub const FLOOD_BULK_FLOWS: u32 = 4;

/// The flood cases: name, bulk segments between floods, new flows each time
/// (0: the bulk alone).
pub const FLOODS: [(&str, usize, usize); 4] = [
    ("none", 1, 0),
    ("1_per_8_bulk", 8, 1),
    ("1_per_bulk", 1, 1),
    ("4_per_bulk", 1, 4),
];

/// `FLOOD_BULK` segments of `FLOOD_BULK_FLOWS` bulk flows (round-robin),
/// with `per` one-segment flows after every `every` of them, never the same
/// flow twice.
pub fn flood(every: usize, per: usize) -> Vec<Vec<u8>> {
    let bulk = traffic(FLOOD_BULK_FLOWS, FLOOD_BULK, 1, 0, false);
    let mut next_flow = 200_000u32;
    let mut frames = Vec::with_capacity(bulk.len() * (1 + per));
    for (i, b) in bulk.iter().enumerate() {
        frames.push(b.clone());
        if i % every != every - 1 {
            continue;
        }
        for _ in 0..per {
            frames.push(one_segment(&FlowSpec::numbered(next_flow, false), 1448));
            next_flow += 1;
        }
    }
    frames
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Rounds a paired benchmark runs: the environment variable `var`, else 31.
pub fn rounds(var: &str) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(31)
}

/// Runs `f` on every case, round after round, each round starting one case
/// later, so that a change in the machine's speed falls on every case
/// alike; `f` is told whether the round counts (the first, for page faults,
/// caches and the CPU's clock, does not).
pub fn rotated<C>(rounds: usize, cases: &mut [C], mut f: impl FnMut(&mut C, bool)) {
    let n = cases.len();
    for round in 0..=rounds {
        for k in 0..n {
            f(&mut cases[(k + round) % n], round > 0);
        }
    }
}

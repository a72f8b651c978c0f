//! The GRO core's cost per segment, without DPDK: ns per segment for 1, 32,
//! 1024 and 100k flows, in order, with PSH every 8 segments, and with
//! reordering; trust and verify. The buffers are frames in one arena (as
//! mbufs are in their pool) whose `append` only counts and frees nothing, so
//! this measures GRO's decisions, header fix-up and checksums, not buffer
//! management or the allocator.
//!
//! Flushing every burst (the default), only the flows of one burst are ever
//! held: the `*_flows` cases send runs of 8 segments per flow in bursts of 32.
//! The `held/*` cases hold every flow across bursts (as `--gro-flush-us`
//! does) in a table as large as the flow count, flows round-robin (each
//! segment finds its flow in a table of N held packets), small segments so
//! the frames stay in cache: 1 vs 1024 flows.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use grorx_gro::key::{FlowKey, HashKey};
use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment, TCP_ACK, TCP_PSH};
use grorx_gro::wire::{Fields, Tcp};
use grorx_gro::{CsumMode, Gro, GroBuf, GroConfig, GsoInfo, RxHints};

/// A frame in the run's arena; appending only adds up lengths and buffers,
/// and dropping one frees nothing (the arena goes after the timed part).
struct Frame {
    /// `cap` bytes of the arena, this frame's alone; the arena outlives it.
    ptr: *mut u8,
    cap: usize,
    len: usize,
    segs: u16,
}

impl Frame {
    fn bytes(&self) -> &[u8] {
        // SAFETY: see `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.cap) }
    }
}

impl GroBuf for Frame {
    fn head(&self) -> &[u8] {
        self.bytes()
    }
    fn head_mut(&mut self) -> &mut [u8] {
        // SAFETY: see `ptr`; the frame is the only view of its bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.cap) }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn segs(&self) -> u16 {
        self.segs
    }
    fn rx_hints(&self) -> RxHints {
        RxHints::default()
    }
    fn for_each_chunk<F: FnMut(&[u8])>(&self, off: usize, len: usize, mut f: F) {
        f(&self.bytes()[off..off + len])
    }
    fn segs_from(&self, _off: usize) -> u16 {
        self.segs
    }
    fn append(&mut self, other: Frame, off: usize) {
        self.len += other.len - off;
        self.segs += other.segs;
    }
    fn set_gso(&mut self, _info: &GsoInfo) {}
}

/// `n` segments over `flows` flows, `run` consecutive segments per flow.
fn traffic(flows: u32, n: usize, run: usize, psh_every: u32, reorder: bool) -> Vec<Vec<u8>> {
    traffic_mss(flows, n, run, psh_every, reorder, 1448)
}

fn traffic_mss(
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
fn traffic_of(
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

fn bench_case(c: &mut Criterion, name: &str, frames: Vec<Vec<u8>>, cfg: GroConfig, burst: usize) {
    run_case(c, name, frames, cfg, burst, true, None)
}

/// The hash key an attacker is assumed to know (the collide cases).
const KNOWN: HashKey = HashKey::fixed([0x51, 0x52, 0x53, 0x54]);

/// A flow's first segment: ACK only, `payload_len` bytes of payload.
fn one_segment(spec: &FlowSpec, payload_len: u16) -> Vec<u8> {
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

/// `n` flows whose hashes under `KNOWN` all land in one position of a
/// table of `entries` (its index is four times that): what an attacker who
/// knew the key would send, found by brute force over ports and addresses.
fn colliding_flows(n: usize, entries: usize) -> Vec<FlowSpec> {
    let mask = (entries * 4).next_power_of_two() as u32 - 1;
    let key_of = |s: &FlowSpec| {
        let f = one_segment(s, 0);
        let t = Tcp::parse(&f, f.len(), false).unwrap();
        FlowKey::new(&Fields::new(&f, t)).hash(&KNOWN)
    };
    let mut spec = FlowSpec::numbered(0, false);
    let target = key_of(&spec) & mask;
    let mut out = Vec::with_capacity(n);
    let mut i = 0u32;
    while out.len() < n {
        i += 1;
        spec.sport = i as u16;
        spec.dport = 1 + (i >> 16) as u16;
        if key_of(&spec) & mask == target {
            out.push(spec.clone());
        }
    }
    out
}

/// `flush_each_burst`: flush at the end of every burst (the default), else
/// only once, after the last (packets held across bursts).
fn run_case(
    c: &mut Criterion,
    name: &str,
    frames: Vec<Vec<u8>>,
    cfg: GroConfig,
    burst: usize,
    flush_each_burst: bool,
    key: Option<HashKey>,
) {
    let n = frames.len();
    let mut g = c.benchmark_group("gro");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                let gro: Gro<Frame> = match key {
                    Some(k) => Gro::with_hash_key(cfg, k),
                    None => Gro::new(cfg),
                };
                let stride = frames.iter().map(|f| f.len()).max().unwrap_or(0);
                let mut arena = vec![0u8; frames.len() * stride];
                for (a, f) in arena.chunks_exact_mut(stride.max(1)).zip(&frames) {
                    a[..f.len()].copy_from_slice(f);
                }
                let base = arena.as_mut_ptr();
                let fr: Vec<Frame> = frames
                    .iter()
                    .enumerate()
                    .map(|(i, f)| Frame {
                        // Disjoint ranges of the arena, which the routine
                        // hands back with its output (moving the Vec does not
                        // move its buffer).
                        ptr: base.wrapping_add(i * stride),
                        cap: f.len(),
                        len: f.len(),
                        segs: 1,
                    })
                    .collect();
                (gro, fr, arena)
            },
            |(mut gro, fr, arena)| {
                // Outputs are returned, so freeing them is not timed.
                let mut out = Vec::with_capacity(fr.len());
                let mut it = fr.into_iter().peekable();
                while it.peek().is_some() {
                    for p in it.by_ref().take(burst) {
                        gro.receive(p, 0, &mut |f| out.push(f));
                    }
                    if flush_each_burst {
                        gro.flush_all(&mut |f| out.push(f));
                    }
                }
                gro.flush_all(&mut |f| out.push(f));
                (gro, out, arena)
            },
            // The setup writes the frames just before: they are in cache, as
            // a PMD's freshly received frames are.
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let trust = GroConfig {
        csum: CsumMode::Trust,
        ..GroConfig::default()
    };
    let verify = GroConfig::default();
    // 512 frames (about 760 KiB) per run: in cache, like a few RX bursts.
    let n = 512;
    for flows in [1u32, 32, 1024] {
        bench_case(
            c,
            &format!("trust/{flows}_flows"),
            traffic(flows, n, 8, 0, false),
            trust,
            32,
        );
    }
    let big = GroConfig {
        flows: 16384,
        ..trust
    };
    // 100k flows: every segment is a new flow for a 16k-entry table.
    bench_case(
        c,
        "trust/100k_flows",
        traffic(100_000, n, 1, 0, false),
        big,
        32,
    );
    bench_case(
        c,
        "trust/1_flow_psh8",
        traffic(1, n, 8, 8, false),
        trust,
        32,
    );
    bench_case(
        c,
        "trust/32_flows_reorder",
        traffic(32, n, 8, 0, true),
        trust,
        32,
    );
    // Held across bursts: 16 segments of 64 B per flow, round-robin.
    for flows in [1u32, 1024] {
        let cfg = GroConfig {
            flows: flows as usize,
            ..trust
        };
        run_case(
            c,
            &format!("held/{flows}_flows"),
            traffic_mss(flows, 16 * flows.max(64) as usize, 1, 0, false, 64),
            cfg,
            32,
            false,
            None,
        );
    }
    // 1024 flows held at once (16 segments of 64 B each, round-robin), all
    // in one position of the table's index under the key an attacker knew:
    // with that key lookups walk at most the probe bound and the flows
    // beyond it pass through unheld; with the queue's own random key they
    // spread as any flows do.
    let cfg = GroConfig {
        flows: 1024,
        ..trust
    };
    let hostile = traffic_of(
        &colliding_flows(1024, cfg.table_entries()),
        16 * 1024,
        1,
        0,
        false,
        64,
    );
    for (name, frames, key) in [
        ("collide/known_key", hostile.clone(), Some(KNOWN)),
        ("collide/random_key", hostile, None),
        (
            "collide/random_flows",
            traffic_mss(1024, 16 * 1024, 1, 0, false, 64),
            None,
        ),
    ] {
        run_case(c, name, frames, cfg, 32, false, key);
    }
    // Frames GRO turns away but that name a flow (padded pure ACKs, as
    // stacks without timestamps send): each must flush its flow's held
    // data first, so each looks its flow up. With 16 flows held and with
    // 1024 held, the cost per frame should not differ by more than a few
    // cache misses: the lookup is by hash, not a walk of what is held.
    for held in [16u32, 1024] {
        let cfg = GroConfig {
            flows: 1024,
            ..trust
        };
        let mut frames = traffic_mss(held, held as usize, 1, 0, false, 64);
        for i in 0..8192u32 {
            let mut f = one_segment(&FlowSpec::numbered(100_000 + i % 4096, false), 0);
            f.extend_from_slice(&[0; 6]);
            frames.push(f);
        }
        run_case(
            c,
            &format!("turned_away/{held}_held"),
            frames,
            cfg,
            32,
            false,
            None,
        );
    }
    // A flood of new flows over 4 bulk flows, packets held across bursts
    // (64 flows held, so the flood keeps the table full and evicting): the
    // same 4096 bulk segments alone, then with one or four one-segment
    // flows after each (never the same flow twice). Bulk throughput kept =
    // time alone / time with the flood.
    let held = GroConfig { flows: 64, ..trust };
    let bulk = traffic(4, 4096, 1, 0, false);
    let mut next_flow = 200_000u32;
    for (name, every, flood) in [
        ("none", 1, 0usize),
        ("1_per_8_bulk", 8, 1),
        ("1_per_bulk", 1, 1),
        ("4_per_bulk", 1, 4),
    ] {
        let mut frames = Vec::with_capacity(bulk.len() * (1 + flood));
        for (i, b) in bulk.iter().enumerate() {
            frames.push(b.clone());
            if i % every != every - 1 {
                continue;
            }
            for _ in 0..flood {
                frames.push(one_segment(&FlowSpec::numbered(next_flow, false), 1448));
                next_flow += 1;
            }
        }
        run_case(c, &format!("flood/{name}"), frames, held, 32, false, None);
    }
    bench_case(c, "verify/1_flow", traffic(1, n, 8, 0, false), verify, 32);
    bench_case(
        c,
        "verify/1024_flows",
        traffic(1024, n, 8, 0, false),
        verify,
        32,
    );
}

criterion_group! {
    name = gro;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(gro);

//! The GRO core's cost per segment, without DPDK: ns per segment for 1, 32,
//! 1024 and 100k flows, in order, with PSH every 8 segments, and with
//! reordering; trust and verify, and verify with every segment's checksums
//! vouched for by the NIC (`verify_nic_checked`). The buffers are frames in
//! one arena (as mbufs are in their pool) whose `append` only counts and
//! frees nothing, so this measures GRO's decisions, header fix-up and
//! checksums, not buffer management or the allocator.
//!
//! Flushing every burst (the default), only the flows of one burst are ever
//! held: the `*_flows` cases send runs of 8 segments per flow in bursts of 32.
//! `poll/100k_flows` takes each burst whole, as the engine's worker does
//! (every segment a new flow: each leaves alone). The `held/*` cases hold
//! every flow across bursts (as `--gro-flush-us`
//! does) in a table as large as the flow count, flows round-robin (each
//! segment finds its flow in a table of N held packets), small segments so
//! the frames stay in cache: 1 vs 1024 flows; `held/*_known_flows`, the
//! same by a GRO whose table already knows the flows (it took the traffic
//! once before, untimed), so no flow starts afresh.

mod common;

use common::{
    flood, frames_in, one_segment, replay, replay_polls, traffic, traffic_mss, traffic_of, Arena,
    Frame, FLOODS,
};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use grorx_gro::key::{FlowKey, HashKey};
use grorx_gro::traffic::FlowSpec;
use grorx_gro::wire::{Fields, Tcp};
use grorx_gro::{CsumHint, CsumMode, Gro, GroConfig, RxHints};

fn bench_case(c: &mut Criterion, name: &str, frames: Vec<Vec<u8>>, cfg: GroConfig, burst: usize) {
    run_case(c, name, frames, cfg, burst, Flush::EachBurst, PLAIN)
}

/// What a case's GRO and frames start with besides their config.
#[derive(Clone, Copy)]
struct Setup {
    /// The hash key (None: a random one, as each queue's).
    key: Option<HashKey>,
    /// The checksum flags every frame comes with.
    nic: RxHints,
}

/// A random key; frames a NIC said nothing of.
const PLAIN: Setup = Setup {
    key: None,
    nic: RxHints {
        ip: CsumHint::Unknown,
        l4: CsumHint::Unknown,
    },
};

/// When a case's GRO lets its packets go.
#[derive(Clone, Copy)]
enum Flush {
    /// At the end of every burst (the default).
    EachBurst,
    /// The same, each burst taken whole (`receive_poll`, as the worker).
    EachPoll,
    /// Once, after the last burst: packets held across bursts.
    AtTheEnd,
    /// The same, by a GRO that took the same traffic once before, in
    /// untimed setup: every flow is one its table remembers (a queue's
    /// steady state, long-lived flows).
    AtTheEndKnown,
}

/// The hash key an attacker is assumed to know (the collide cases).
const KNOWN: HashKey = HashKey::fixed([0x51, 0x52, 0x53, 0x54]);

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

fn run_case(
    c: &mut Criterion,
    name: &str,
    frames: Vec<Vec<u8>>,
    cfg: GroConfig,
    burst: usize,
    flush: Flush,
    setup: Setup,
) {
    let n = frames.len();
    let mut g = c.benchmark_group("gro");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                let gro: Gro<Frame> = match setup.key {
                    Some(k) => Gro::with_hash_key(cfg, k),
                    None => Gro::new(cfg),
                };
                let mut gro = gro;
                let mut arena = Arena::new(&frames);
                arena.nic = setup.nic;
                if let Flush::AtTheEndKnown = flush {
                    let mut out = Vec::with_capacity(frames.len());
                    replay(
                        &mut gro,
                        frames_in(&mut arena, &frames),
                        burst,
                        false,
                        &mut out,
                    );
                }
                let fr = frames_in(&mut arena, &frames);
                (gro, fr, arena)
            },
            |(mut gro, fr, arena)| {
                // Outputs are returned, so freeing them is not timed.
                let mut out = Vec::with_capacity(fr.len());
                match flush {
                    Flush::EachBurst => replay(&mut gro, fr, burst, true, &mut out),
                    Flush::EachPoll => replay_polls(&mut gro, fr, burst, &mut out),
                    Flush::AtTheEnd | Flush::AtTheEndKnown => {
                        replay(&mut gro, fr, burst, false, &mut out)
                    }
                }
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
    // 100k flows: every segment is a new flow for a 16k-entry table; the
    // same taken a poll at a time, as the worker does (each leaves alone).
    bench_case(
        c,
        "trust/100k_flows",
        traffic(100_000, n, 1, 0, false),
        big,
        32,
    );
    run_case(
        c,
        "poll/100k_flows",
        traffic(100_000, n, 1, 0, false),
        big,
        32,
        Flush::EachPoll,
        PLAIN,
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
    // Held across bursts: 16 segments of 64 B per flow, round-robin; then
    // the same with flows the table knows (no flow's first segments take
    // the full path).
    for (kind, flush) in [
        ("flows", Flush::AtTheEnd),
        ("known_flows", Flush::AtTheEndKnown),
    ] {
        for flows in [1u32, 1024] {
            let cfg = GroConfig {
                flows: flows as usize,
                ..trust
            };
            run_case(
                c,
                &format!("held/{flows}_{kind}"),
                traffic_mss(flows, 16 * flows.max(64) as usize, 1, 0, false, 64),
                cfg,
                32,
                flush,
                PLAIN,
            );
        }
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
        let setup = Setup { key, ..PLAIN };
        run_case(c, name, frames, cfg, 32, Flush::AtTheEnd, setup);
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
            Flush::AtTheEnd,
            PLAIN,
        );
    }
    // A flood of new flows over 4 bulk flows, packets held across bursts
    // (64 flows held, so the flood keeps the table full and evicting): the
    // same 4096 bulk segments alone, then with one or four one-segment
    // flows after each (never the same flow twice). Bulk throughput kept =
    // time alone / time with the flood; `benches/flood.rs` measures it
    // paired, the cases interleaved in one run.
    let held = GroConfig { flows: 64, ..trust };
    for (name, every, per) in FLOODS {
        let frames = flood(every, per);
        run_case(
            c,
            &format!("flood/{name}"),
            frames,
            held,
            32,
            Flush::AtTheEnd,
            PLAIN,
        );
    }
    bench_case(c, "verify/1_flow", traffic(1, n, 8, 0, false), verify, 32);
    bench_case(
        c,
        "verify/1024_flows",
        traffic(1024, n, 8, 0, false),
        verify,
        32,
    );
    // Verifying, each segment's checksums vouched for by the NIC (RX
    // checksum offload): GRO need not sum the payload.
    let checked = Setup {
        nic: RxHints {
            ip: CsumHint::Good,
            l4: CsumHint::Good,
        },
        ..PLAIN
    };
    for flows in [1u32, 1024] {
        run_case(
            c,
            &format!("verify_nic_checked/{flows}_flows"),
            traffic(flows, n, 8, 0, false),
            verify,
            32,
            Flush::EachBurst,
            checked,
        );
    }
}

criterion_group! {
    name = gro;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(gro);

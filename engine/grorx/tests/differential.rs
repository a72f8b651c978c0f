//! grorx's GRO against DPDK's rte_gro (22.11, lightweight mode, through
//! `grorx::baseline`), burst by burst, on copies of the same frames in real
//! mbufs from a real pool.
//!
//! Each output packet is identified by the input segments it covers (parsed
//! from its chain: flow, first sequence number, payload length). Checked:
//! 1. grorx merges every pair of consecutive segments rte_gro merges, unless
//!    Linux's rules forbid it (short or larger segment, size limit);
//! 2. with PSH segments grorx keeps each flow's bytes in order and merges the
//!    PSH segment (then flushes); rte_gro refuses them and reorders;
//! 3. on IPv6 rte_gro merges nothing and grorx does;
//! 5. inside VXLAN over IPv4 (what rte_gro merges through, given packets
//!    typed for it), 1 holds as it does outside a tunnel;
//! 4. every mbuf goes back to its pool, every output's checksums verify, and
//!    every output's payload is the bytes of the segments it claims.

mod common;

use dpdk_sys::{self as sys, rte_mbuf};
use grorx::baseline::{self, RteGro};
use grorx::csum;
use grorx::gro::{Gro, GroConfig};
use grorx::mbuf::Mbuf;
use grorx::mempool::{Mempool, PoolParams};
use grorx::skb::{self, Skb, SkbConf, SkbMode, SkbStats};
use grorx::traffic::{pattern_byte, FlowSpec, Segment, TunnelSpec, TCP_ACK, TCP_PSH};
use grorx::wire::{Tcp, Tunnels};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

/// Largest burst (rte_gro's lightweight mode holds at most 128 per call).
const MAX_BURST: u64 = 64;

/// splitmix64: deterministic, so every run sees the same traffic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy)]
struct Traffic {
    flows: u32,
    segments: usize,
    ipv6: bool,
    /// PSH on every n-th segment of each flow (0: never).
    psh_every: u32,
    /// One segment in five of a random size below the MSS.
    vary_sizes: bool,
    /// Occasional timestamp and ACK changes (neither GRO merges across them).
    changes: bool,
    /// Every frame inside VXLAN over IPv4 (outer DF, ID 0, UDP checksum 0).
    vxlan: bool,
    seed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Input {
    flow: u32,
    seq: u32,
    /// Offset of its payload in the flow's byte stream.
    off: usize,
    len: usize,
    psh: bool,
}

struct Stream {
    frames: Vec<Vec<u8>>,
    inputs: Vec<Input>,
    /// Each flow's bytes, in sending order.
    bytes: Vec<Vec<u8>>,
    bursts: Vec<Range<usize>>,
    /// (flow, seq) -> input index.
    index: HashMap<(u32, u32), usize>,
}

fn generate(t: &Traffic) -> Stream {
    let mut rng = Rng(t.seed);
    let mss = if t.ipv6 { 1428 } else { 1448 };
    let n = t.flows as usize;
    let specs: Vec<FlowSpec> = (0..t.flows)
        .map(|i| FlowSpec::numbered(i, t.ipv6))
        .collect();
    // Flow 0 wraps its sequence space early on.
    let mut seq: Vec<u32> = (0..n)
        .map(|f| {
            if f == 0 {
                u32::MAX - 20 * mss as u32
            } else {
                rng.next() as u32
            }
        })
        .collect();
    let mut id: Vec<u16> = (0..n).map(|_| rng.next() as u16).collect();
    let mut tsval = vec![1000u32; n];
    let mut ack = vec![1u32; n];
    let mut count = vec![0u32; n];
    let tunnel = t.vxlan.then(|| {
        let mut tun = TunnelSpec::vxlan(0, false);
        tun.outer.df = true;
        tun
    });
    let mut s = Stream {
        frames: Vec::with_capacity(t.segments),
        inputs: Vec::with_capacity(t.segments),
        bytes: vec![Vec::new(); n],
        bursts: Vec::new(),
        index: HashMap::new(),
    };
    while s.frames.len() < t.segments {
        let f = rng.below(n as u64) as usize;
        for _ in 0..1 + rng.below(6) {
            if s.frames.len() == t.segments {
                break;
            }
            let len = if t.vary_sizes && rng.below(5) == 0 {
                1 + rng.below(mss as u64) as usize
            } else {
                mss
            };
            if t.changes && rng.below(24) == 0 {
                tsval[f] += 1;
            }
            if t.changes && rng.below(48) == 0 {
                ack[f] += 1000;
            }
            count[f] += 1;
            let psh = t.psh_every > 0 && count[f].is_multiple_of(t.psh_every);
            let off = s.bytes[f].len();
            let payload: Vec<u8> = (off..off + len)
                .map(|o| pattern_byte(f as u32, o as u64))
                .collect();
            let seg = Segment {
                seq: seq[f],
                ack: ack[f],
                flags: TCP_ACK | if psh { TCP_PSH } else { 0 },
                ip_id: id[f],
                tsval: tsval[f],
                tsecr: 77,
                payload_len: 0,
            };
            s.index.insert((f as u32, seq[f]), s.inputs.len());
            let frame = specs[f].frame(&seg, &payload);
            s.frames.push(match &tunnel {
                Some(tun) => tun.encapsulate(&frame, 0),
                None => frame,
            });
            s.inputs.push(Input {
                flow: f as u32,
                seq: seq[f],
                off,
                len,
                psh,
            });
            s.bytes[f].extend_from_slice(&payload);
            seq[f] = seq[f].wrapping_add(len as u32);
            id[f] = id[f].wrapping_add(1);
        }
    }
    let mut at = 0;
    while at < s.frames.len() {
        let end = (at + 1 + rng.below(MAX_BURST) as usize).min(s.frames.len());
        s.bursts.push(at..end);
        at = end;
    }
    s
}

/// One output packet, as the input segments it covers.
#[derive(Debug, Clone)]
struct Out {
    flow: u32,
    segs: Vec<usize>,
    /// IP header + TCP header bytes.
    ip_hdr_len: usize,
    payload_len: usize,
}

/// A pool, the skb settings for it, and both GROs.
struct Bench {
    pool: Mempool,
    skb: SkbConf,
    rte: RteGro,
    cfg: GroConfig,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let pool = Mempool::create(&PoolParams {
            name: name.into(),
            elements: 511,
            cache: 0,
            priv_size: skb::PRIV_SIZE,
            data_room: (sys::RTE_MBUF_DEFAULT_DATAROOM + sys::RTE_PKTMBUF_HEADROOM) as u16,
            socket: -1,
        })
        .unwrap();
        let skb = SkbConf {
            mode: SkbMode::Build,
            headroom: sys::RTE_PKTMBUF_HEADROOM as u16,
            buf_truesize: skb::truesize_of(&pool),
            head_pool: std::ptr::null_mut(),
            head_truesize: 0,
            copy_len: 0,
        };
        let cfg = GroConfig {
            max_frags: 64,
            ..GroConfig::default()
        };
        cfg.validate().unwrap();
        Bench {
            pool,
            skb,
            rte: RteGro::new(16, 64),
            cfg,
        }
    }

    fn mbuf(&self, frame: &[u8]) -> Mbuf {
        let mut m = Mbuf::alloc(&self.pool).expect("the pool has room for two bursts");
        assert!(m.append(frame), "a frame fits one mbuf");
        m
    }

    /// grorx, flushed at the end of every burst: the outputs of each burst.
    fn grorx(&self, s: &Stream) -> Vec<Vec<Out>> {
        let base = self.pool.in_use();
        let mut gro: Gro<Skb> = Gro::new(self.cfg);
        let mut stats = SkbStats::default();
        let mut res = Vec::new();
        for b in &s.bursts {
            let mut outs: Vec<Mbuf> = Vec::new();
            let mut take = |sk: Skb| {
                // SAFETY: the skb gives up its chain; we are its only owner.
                outs.push(unsafe { Mbuf::from_raw(sk.into_mbuf()) }.unwrap())
            };
            for i in b.clone() {
                let m = self.mbuf(&s.frames[i]).into_raw();
                // SAFETY: a fresh mbuf we own and hand over, from a pool with
                // the skb's private area.
                let sk = unsafe { Skb::build(m, &self.skb, &mut stats) };
                gro.receive(sk, 0, &mut take);
            }
            gro.flush_all(&mut take);
            assert_eq!(gro.held(), 0);
            res.push(outs.iter().map(|m| parse(m, s, b)).collect());
            drop(outs);
            assert_eq!(self.pool.in_use(), base, "grorx returned every mbuf");
        }
        res
    }

    /// rte_gro in burst mode: the outputs of each burst, and how many merged
    /// packets came back with a stale IPv4 header checksum.
    fn rte_gro(&self, s: &Stream) -> (Vec<Vec<Out>>, usize) {
        let base = self.pool.in_use();
        let mut res = Vec::new();
        let mut stale = 0;
        for b in &s.bursts {
            let mut pkts: Vec<*mut rte_mbuf> = b
                .clone()
                .map(|i| self.mbuf(&s.frames[i]).into_raw())
                .collect();
            // SAFETY: fresh, owned mbufs, each once; after reassemble we own
            // exactly the first n (baseline's contract) and wrap them.
            let outs: Vec<Mbuf> = unsafe {
                baseline::classify(&mut pkts);
                let n = self.rte.reassemble(&mut pkts);
                pkts[..n]
                    .iter()
                    .map(|&m| Mbuf::from_raw(m).unwrap())
                    .collect()
            };
            for m in &outs {
                let (t, _) = layout(m.data(), m.pkt_len() as usize, false);
                let l3 = t.l3 as usize;
                if m.nb_segs() > 1 && !t.ipv6 && csum::sum(&m.data()[l3..l3 + 20]) != 0xffff {
                    stale += 1;
                }
                // SAFETY: an owned chain, headers in its first segment.
                unsafe { baseline::fix_checksums(m.as_ptr()) }.expect("a TCP frame");
            }
            res.push(outs.iter().map(|m| parse(m, s, b)).collect());
            drop(outs);
            assert_eq!(self.pool.in_use(), base, "rte_gro returned every mbuf");
        }
        (res, stale)
    }
}

/// Identifies an output packet and verifies it: headers in the first
/// segment, IPv4 header and TCP checksums, payload equal to the bytes of the
/// input segments it starts at and covers (all from this burst), one mbuf
/// per segment.
fn parse(m: &Mbuf, s: &Stream, burst: &Range<usize>) -> Out {
    let bytes = m.to_vec();
    assert_eq!(bytes.len(), m.pkt_len() as usize);
    // Both IPv4 header checksums verified in a tunnel (its UDP one is 0).
    let (t, ip_start) = layout(&bytes, bytes.len(), true);
    assert!(
        m.data().len() >= t.payload as usize,
        "headers in one segment"
    );
    let (l3, l4, pay) = (t.l3 as usize, t.l4 as usize, t.payload as usize);
    let tcp = &bytes[l4..];
    let pseudo = if t.ipv6 {
        let a = |o: usize| -> [u8; 16] { bytes[l3 + o..l3 + o + 16].try_into().unwrap() };
        csum::pseudo_v6(&a(8), &a(24), 6, tcp.len() as u32)
    } else {
        let a = |o: usize| -> [u8; 4] { bytes[l3 + o..l3 + o + 4].try_into().unwrap() };
        csum::pseudo_v4(a(12), a(16), 6, tcp.len() as u16)
    };
    assert_eq!(csum::add(pseudo, csum::sum(tcp)), 0xffff, "TCP checksum");
    let flow = (u16::from_be_bytes([bytes[l4], bytes[l4 + 1]]) - 10000) as u32;
    let seq = u32::from_be_bytes(bytes[l4 + 4..l4 + 8].try_into().unwrap());
    let payload = &bytes[pay..];
    let mut segs = Vec::new();
    let (mut pos, mut left) = (seq, payload.len());
    while left > 0 {
        let &i = s
            .index
            .get(&(flow, pos))
            .unwrap_or_else(|| panic!("flow {flow}: no input segment at seq {pos}"));
        assert!(burst.contains(&i), "input {i} is not from this burst");
        assert_eq!((s.inputs[i].flow, s.inputs[i].seq), (flow, pos));
        let n = s.inputs[i].len;
        assert!(n <= left, "an output ends inside input {i}");
        segs.push(i);
        pos = pos.wrapping_add(n as u32);
        left -= n;
    }
    assert!(!segs.is_empty(), "an output without payload");
    let first = s.inputs[segs[0]].off;
    assert_eq!(
        payload,
        &s.bytes[flow as usize][first..first + payload.len()],
        "payload of flow {flow} from offset {first}"
    );
    assert_eq!(m.nb_segs() as usize, segs.len(), "one mbuf per segment");
    Out {
        flow,
        segs,
        ip_hdr_len: pay - ip_start,
        payload_len: payload.len(),
    }
}

/// A TCP frame's layout, in a VXLAN tunnel or not (panics on anything
/// else), and where its (outer) IP header starts.
fn layout(b: &[u8], len: usize, check_ip: bool) -> (Tcp, usize) {
    match Tcp::parse(b, len, check_ip) {
        Ok(t) => (t, t.l3 as usize),
        Err(_) => {
            let (t, o) = Tcp::parse_tunnel(b, len, check_ip, &Tunnels::default())
                .unwrap_or_else(|e| panic!("an output does not parse: {e:?}"));
            (t, o.l3 as usize)
        }
    }
}

/// Consecutive input segments delivered in one packet.
fn pairs(outs: &[Out]) -> HashSet<(usize, usize)> {
    outs.iter()
        .flat_map(|o| o.segs.windows(2).map(|w| (w[0], w[1])))
        .collect()
}

/// Every input of the burst exactly once.
fn assert_conserved(outs: &[Out], burst: &Range<usize>, who: &str) {
    let mut all: Vec<usize> = outs.iter().flat_map(|o| o.segs.iter().copied()).collect();
    all.sort_unstable();
    assert_eq!(
        all,
        burst.clone().collect::<Vec<_>>(),
        "{who}: inputs lost or duplicated"
    );
}

/// Output packets delivered after data of their flow that follows them (0
/// when every flow's bytes leave in order). Counted over the whole run.
fn reorderings(s: &Stream, bursts: &[Vec<Out>]) -> usize {
    let mut high: HashMap<u32, usize> = HashMap::new();
    let mut late = 0;
    for o in bursts.iter().flatten() {
        let start = s.inputs[o.segs[0]].off;
        let h = high.entry(o.flow).or_insert(0);
        if start < *h {
            late += 1;
        }
        *h = (*h).max(start + o.payload_len);
    }
    late
}

/// Each flow's bytes as delivered, in output order, equal what was sent.
fn assert_in_order(s: &Stream, bursts: &[Vec<Out>], who: &str) {
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); s.bytes.len()];
    for o in bursts.iter().flatten() {
        let off = s.inputs[o.segs[0]].off;
        got[o.flow as usize].extend_from_slice(&s.bytes[o.flow as usize][off..off + o.payload_len]);
    }
    for (f, g) in got.iter().enumerate() {
        assert!(
            *g == s.bytes[f],
            "{who}: flow {f}'s bytes are not delivered in order"
        );
    }
}

fn count(bursts: &[Vec<Out>]) -> usize {
    bursts.iter().map(|b| b.len()).sum()
}

#[test]
fn grorx_merges_wherever_rte_gro_does() {
    merges_wherever_rte_gro_does("t-diff-merge", false);
}

#[test]
fn in_vxlan_grorx_merges_wherever_rte_gro_does() {
    merges_wherever_rte_gro_does("t-diff-vxlan", true);
}

fn merges_wherever_rte_gro_does(pool: &str, vxlan: bool) {
    let (_eal, _g) = common::eal();
    let bench = Bench::new(pool);
    let base = bench.pool.in_use();
    for (k, &flows) in [1u32, 2, 3, 5, 8].iter().enumerate() {
        for vary_sizes in [false, true] {
            let t = Traffic {
                flows,
                segments: 1200,
                ipv6: false,
                psh_every: 0,
                vary_sizes,
                changes: true,
                vxlan,
                seed: 0x5eed_0000 + k as u64 * 2 + vary_sizes as u64,
            };
            let s = generate(&t);
            let g = bench.grorx(&s);
            let (r, stale) = bench.rte_gro(&s);
            let mut excused: BTreeMap<&str, usize> = BTreeMap::new();
            let mut same_grouping = 0;
            for (bi, burst) in s.bursts.iter().enumerate() {
                assert_conserved(&g[bi], burst, "grorx");
                assert_conserved(&r[bi], burst, "rte_gro");
                let gp = pairs(&g[bi]);
                for &(a, b) in pairs(&r[bi]).difference(&gp) {
                    // grorx split where rte_gro merged: `a` must end a grorx
                    // packet for a reason Linux's rules give.
                    let p = g[bi].iter().find(|o| o.segs.contains(&a)).unwrap();
                    assert_eq!(p.segs.last(), Some(&a));
                    let mss = s.inputs[p.segs[0]].len;
                    let why = if s.inputs[b].len > mss {
                        "larger than the first segment"
                    } else if p.segs.len() > 1 && s.inputs[a].len < mss {
                        "short segment ends the packet"
                    } else if p.ip_hdr_len + p.payload_len + s.inputs[b].len > 65535 {
                        "64 KiB"
                    } else {
                        panic!(
                            "{t:?}: rte_gro merged inputs {a} and {b}, grorx did not \
                             ({:?} then {:?}; grorx packet {:?})",
                            s.inputs[a], s.inputs[b], p.segs
                        );
                    };
                    assert!(vary_sizes, "{why}: only segments of unequal sizes differ");
                    *excused.entry(why).or_default() += 1;
                }
                if gp == pairs(&r[bi]) {
                    same_grouping += 1;
                }
                if !vary_sizes {
                    assert!(g[bi].len() <= r[bi].len());
                }
            }
            assert_in_order(&s, &g, "grorx");
            // Without PSH (nothing it leaves unprocessed), rte_gro keeps order too.
            assert_in_order(&s, &r, "rte_gro");
            let merged_rte = r.iter().flatten().filter(|o| o.segs.len() > 1).count();
            assert!(
                merged_rte > 0,
                "rte_gro merged nothing: classification failed?"
            );
            assert_eq!(
                stale, merged_rte,
                "rte_gro leaves merged IP checksums stale"
            );
            println!(
                "IPv4{} {flows} flow(s){}: {} segments, {} bursts; grorx {} packets, rte_gro {} \
                 ({} bursts grouped alike); grorx split rte_gro merges: {excused:?}",
                if vxlan { " in VXLAN" } else { "" },
                if vary_sizes { ", mixed sizes" } else { "" },
                s.inputs.len(),
                s.bursts.len(),
                count(&g),
                count(&r),
                same_grouping,
            );
        }
    }
    assert_eq!(bench.pool.in_use(), base);
}

#[test]
fn psh_grorx_keeps_order_and_merges_rte_gro_does_neither() {
    let (_eal, _g) = common::eal();
    let bench = Bench::new("t-diff-psh");
    let base = bench.pool.in_use();

    // One flow, one burst of 10 segments, PSH on the 8th. rte_gro 22.11 holds
    // 0-6, cannot append 8 to them (7 is missing) so holds 8-9 apart, and hands
    // back what it did not process, the PSH segment, after all it held.
    let t = Traffic {
        flows: 1,
        segments: 10,
        ipv6: false,
        psh_every: 8,
        vary_sizes: false,
        changes: false,
        vxlan: false,
        seed: 1,
    };
    let mut s = generate(&t);
    s.bursts.clear();
    s.bursts.push(0..10);
    let g = bench.grorx(&s);
    let (r, _) = bench.rte_gro(&s);
    let segs = |b: &[Vec<Out>]| b[0].iter().map(|o| o.segs.clone()).collect::<Vec<_>>();
    assert_eq!(segs(&g), vec![(0..8).collect::<Vec<_>>(), vec![8, 9]]);
    assert_eq!(
        segs(&r),
        vec![(0..7).collect::<Vec<_>>(), vec![8, 9], vec![7]]
    );
    assert_eq!(reorderings(&s, &r), 1);
    assert_eq!(reorderings(&s, &g), 0);

    let mut rte_late = 0;
    for (k, &flows) in [1u32, 3, 8].iter().enumerate() {
        let t = Traffic {
            flows,
            segments: 1200,
            ipv6: false,
            psh_every: 8,
            vary_sizes: false,
            changes: false,
            vxlan: false,
            seed: 0x0b5e_0000 + k as u64,
        };
        let s = generate(&t);
        let g = bench.grorx(&s);
        let (r, _) = bench.rte_gro(&s);
        let mut psh_merged = 0;
        for (bi, burst) in s.bursts.iter().enumerate() {
            assert_conserved(&g[bi], burst, "grorx");
            assert_conserved(&r[bi], burst, "rte_gro");
            assert!(
                pairs(&r[bi]).is_subset(&pairs(&g[bi])),
                "grorx merges what rte_gro merges"
            );
            for o in &g[bi] {
                let last = *o.segs.last().unwrap();
                assert!(
                    o.segs.iter().all(|&i| !s.inputs[i].psh || i == last),
                    "grorx flushes after a PSH segment: {:?}",
                    o.segs
                );
                if o.segs.len() > 1 && s.inputs[last].psh {
                    psh_merged += 1;
                }
            }
            for o in &r[bi] {
                assert!(
                    o.segs.len() == 1 || o.segs.iter().all(|&i| !s.inputs[i].psh),
                    "rte_gro 22.11 does not merge PSH segments"
                );
            }
        }
        assert_in_order(&s, &g, "grorx");
        assert_eq!(reorderings(&s, &g), 0);
        assert!(psh_merged > 0, "grorx merged no PSH segment");
        let late = reorderings(&s, &r);
        rte_late += late;
        println!(
            "IPv4 {flows} flow(s), PSH every 8th: {} segments; grorx {} packets ({psh_merged} \
             ending in a merged PSH), in order; rte_gro {} packets, {late} delivered after later data of their flow",
            s.inputs.len(),
            count(&g),
            count(&r),
        );
    }
    // Deterministic: fixed traffic, and rte_gro's output order is a function of it.
    assert!(rte_late > 0, "rte_gro kept order with PSH segments");
    assert_eq!(bench.pool.in_use(), base);
}

#[test]
fn ipv6_rte_gro_merges_nothing_grorx_merges() {
    let (_eal, _g) = common::eal();
    let bench = Bench::new("t-diff-v6");
    let base = bench.pool.in_use();
    let t = Traffic {
        flows: 4,
        segments: 800,
        ipv6: true,
        psh_every: 0,
        vary_sizes: false,
        changes: true,
        vxlan: false,
        seed: 0x6666,
    };
    let s = generate(&t);
    let g = bench.grorx(&s);
    let (r, stale) = bench.rte_gro(&s);
    for (bi, burst) in s.bursts.iter().enumerate() {
        assert_conserved(&g[bi], burst, "grorx");
        let segs: Vec<Vec<usize>> = r[bi].iter().map(|o| o.segs.clone()).collect();
        let alone: Vec<Vec<usize>> = burst.clone().map(|i| vec![i]).collect();
        assert_eq!(segs, alone, "rte_gro returns an IPv6 burst as it came");
    }
    assert_eq!(stale, 0);
    assert_in_order(&s, &g, "grorx");
    assert_eq!(count(&r), s.inputs.len());
    assert!(count(&g) < s.inputs.len(), "grorx merges IPv6");
    println!(
        "IPv6 4 flows: {} segments; grorx {} packets, rte_gro {}",
        s.inputs.len(),
        count(&g),
        count(&r)
    );
    assert_eq!(bench.pool.in_use(), base);
}

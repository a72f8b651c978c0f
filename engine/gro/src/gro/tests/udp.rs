//! UDP GRO (`GroConfig::udp`): one test per rule, on `VecBuf`.

use super::*;
use crate::wire::field::udp;

pub(super) const DGRAM: usize = 1200;

pub(super) fn udp_cfg() -> GroConfig {
    GroConfig {
        udp: true,
        ..GroConfig::default()
    }
}

/// Datagrams of one flow: payloads from a pattern, IPv4 IDs counting up.
pub(super) struct Dgrams {
    pub(super) spec: FlowSpec,
    flow: u32,
    off: u64,
    ip_id: u16,
    tag: u64,
}

impl Dgrams {
    pub(super) fn new(i: u32, ipv6: bool) -> Dgrams {
        Dgrams {
            spec: FlowSpec::numbered(i, ipv6),
            flow: i,
            off: 0,
            ip_id: 7,
            // Flow i's datagrams are i * 1000 + 1, + 2...
            tag: i as u64 * 1000,
        }
    }
    fn payload(&self, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|k| pattern_byte(self.flow, self.off + k))
            .collect()
    }
    fn next_csum(&mut self, len: usize, with_csum: bool) -> VecBuf {
        let p = self.payload(len);
        let f = self.spec.udp_frame(self.ip_id, &p, with_csum);
        self.off += len as u64;
        self.ip_id = self.ip_id.wrapping_add(1);
        self.tag += 1;
        VecBuf::new(self.tag, f)
    }
    pub(super) fn next(&mut self, len: usize) -> VecBuf {
        self.next_csum(len, true)
    }
}

/// Checks a UDP packet's lengths and checksums the slow way; returns its
/// payload.
fn verify_udp(bytes: &[u8]) -> Vec<u8> {
    let t = Tcp::parse_udp(bytes, bytes.len(), true).expect("a valid UDP packet");
    let l4 = t.l4 as usize;
    let ulen = field::read16(bytes, l4, udp::LEN) as usize;
    assert_eq!(ulen, bytes.len() - l4, "UDP length");
    let l3 = t.l3 as usize;
    let addrs = if t.ipv6 {
        &bytes[l3 + 8..l3 + 40]
    } else {
        &bytes[l3 + 12..l3 + 20]
    };
    let p = csum::pseudo(addrs, 17, ulen as u32);
    assert_eq!(
        csum::add(p, csum::sum(&bytes[l4..])),
        0xffff,
        "UDP checksum"
    );
    bytes[t.payload as usize..].to_vec()
}

#[test]
fn datagrams_of_one_flow_merge_into_one_valid_packet() {
    for ipv6 in [false, true] {
        let mut d = Dgrams::new(1, ipv6);
        let mut g = gro(udp_cfg());
        let want = d.payload(5 * DGRAM);
        let pkts: Vec<VecBuf> = (0..5).map(|_| d.next(DGRAM)).collect();
        assert!(
            feed(&mut g, pkts).is_empty(),
            "held until the end of the poll"
        );
        let out = flush(&mut g);
        assert_eq!(out.len(), 1, "ipv6 {ipv6}");
        assert_eq!(verify_udp(&out[0].bytes()), want);
        let gso = out[0].gso.unwrap();
        assert_eq!(
            (gso.segs, gso.mss as usize, gso.l4_len, gso.udp, gso.ipv6),
            (5, DGRAM, 8, true, ipv6)
        );
        assert_eq!(g.stats().merged_segments, 4);
        assert_eq!(g.held(), 0);
    }
}

#[test]
fn udp_is_left_alone_unless_asked_for() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(&mut g, (0..3).map(|_| d.next(DGRAM)).collect());
    assert_eq!(out.len(), 3, "passed at once");
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::NotTcp).index()], 3);
}

#[test]
fn a_shorter_datagram_merges_and_ends_the_packet() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let mut pkts: Vec<VecBuf> = (0..3).map(|_| d.next(DGRAM)).collect();
    pkts.push(d.next(100));
    pkts.push(d.next(DGRAM));
    let out = feed(&mut g, pkts);
    assert_eq!(out.len(), 1, "the short one ended the first packet");
    assert_eq!(out[0].gso.unwrap().segs, 4);
    verify_udp(&out[0].bytes());
    assert_eq!(flush_count(&g, Flush::ShortSegment), 1);
    assert_eq!(
        flush(&mut g).len(),
        1,
        "the next starts a packet of its own"
    );
}

#[test]
fn a_larger_datagram_starts_a_new_packet() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let out = feed(&mut g, vec![d.next(500), d.next(500), d.next(DGRAM)]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].gso.unwrap().segs, 2);
    assert_eq!(flush_count(&g, Flush::LargerThanMss), 1);
    let rest = flush(&mut g);
    assert_eq!(rest[0].ids, vec![1003]);
}

#[test]
fn a_datagram_without_checksum_is_never_merged_and_keeps_its_place() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let out = feed(
        &mut g,
        vec![d.next(DGRAM), d.next(DGRAM), d.next_csum(DGRAM, false)],
    );
    assert_eq!(
        out.len(),
        2,
        "the held packet first, then the bare datagram"
    );
    assert_eq!(out[0].ids, vec![1001, 1002]);
    assert_eq!(out[1].ids, vec![1003]);
    assert_eq!(g.stats().pass[Pass::UdpNoChecksum.index()], 1);
    assert_eq!(flush_count(&g, Flush::Unmergeable), 1);
}

#[test]
fn a_bad_checksum_passes_after_its_flow_when_verifying() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let good = d.next(DGRAM);
    let mut bad = d.next(DGRAM);
    let last = bad.segs[0].len() - 1;
    bad.segs[0][last] ^= 0x5a;
    let out = feed(&mut g, vec![good, bad]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].ids, vec![1002]);
    assert_eq!(g.stats().pass[Pass::BadUdpChecksum.index()], 1);

    // Trusting checksums, it merges, as rte_gro would.
    let mut d = Dgrams::new(1, false);
    let mut g = gro(GroConfig {
        csum: CsumMode::Trust,
        ..udp_cfg()
    });
    let good = d.next(DGRAM);
    let mut bad = d.next(DGRAM);
    bad.segs[0][last] ^= 0x5a;
    assert!(feed(&mut g, vec![good, bad]).is_empty());
    assert_eq!(flush(&mut g)[0].gso.unwrap().segs, 2);
}

#[test]
fn a_datagram_whose_ip_checksum_alone_is_wrong_never_merges_in_either_mode() {
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        let mut d = Dgrams::new(1, false);
        let mut g = gro(GroConfig { csum, ..udp_cfg() });
        let (a, b) = (d.next(DGRAM), d.next(DGRAM));
        let mut bad = d.next(DGRAM);
        bad.segs[0][14 + 10] ^= 0x5a;
        let mut out = feed(&mut g, vec![a, b, bad, d.next(DGRAM)]);
        out.extend(flush(&mut g));
        let ids: Vec<Vec<u64>> = out.iter().map(|p| p.ids.clone()).collect();
        assert_eq!(
            ids,
            vec![vec![1001, 1002], vec![1003], vec![1004]],
            "{csum:?}"
        );
        assert_eq!(
            g.stats().pass[Pass::Frame(crate::wire::NotTcp::BadIpChecksum).index()],
            1,
            "{csum:?}"
        );
    }
}

#[test]
fn a_datagram_whose_ip_checksum_is_the_other_zero_still_merges() {
    // One's complement has two zeros: a header whose checksum comes out 0
    // is as valid with 0xffff (it sums to all ones either way), and merges
    // in either mode, whichever path takes it.
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        let mut d = Dgrams::new(1, false);
        let ip = &d.spec.udp_frame(0, &[0; DGRAM], true)[14..34];
        let c = field::read16(ip, 0, ipv4::CHECKSUM);
        let without = csum::ipv4_sum_without(csum::sum(ip), 0, c);
        // The second datagram's ID makes its header sum all ones.
        d.ip_id = (!without).wrapping_sub(1);
        let (a, mut b) = (d.next(DGRAM), d.next(DGRAM));
        assert_eq!(field::read16(&b.segs[0], 14, ipv4::CHECKSUM), 0);
        field::write16(&mut b.segs[0], 14, ipv4::CHECKSUM, 0xffff);
        let mut g = gro(GroConfig { csum, ..udp_cfg() });
        assert!(feed(&mut g, vec![a, b, d.next(DGRAM)]).is_empty());
        let out = flush(&mut g);
        assert_eq!(out[0].ids, vec![1001, 1002, 1003], "{csum:?}");
        verify_udp(&out[0].bytes());
    }
}

#[test]
fn ip_fields_that_differ_end_the_packet() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let a = d.next(DGRAM);
    d.spec.ttl = 9;
    let b = d.next(DGRAM);
    let out = feed(&mut g, vec![a, b]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::IpMismatch), 1);

    // An IPv4 ID that jumps.
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let a = d.next(DGRAM);
    d.ip_id += 5;
    let out = feed(&mut g, vec![a, d.next(DGRAM)]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::IpId), 1);

    // A fixed ID merges.
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let pkts: Vec<VecBuf> = (0..3)
        .map(|_| {
            d.ip_id = 42;
            d.next(DGRAM)
        })
        .collect();
    assert!(feed(&mut g, pkts).is_empty());
    assert_eq!(flush(&mut g)[0].gso.unwrap().segs, 3);
}

#[test]
fn limits_hold_for_udp_too() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(GroConfig {
        max_frags: 4,
        ..udp_cfg()
    });
    let out = feed(&mut g, (0..9).map(|_| d.next(DGRAM)).collect());
    assert_eq!(
        out.iter().map(|p| p.gso.unwrap().segs).collect::<Vec<_>>(),
        vec![4, 4]
    );
    assert_eq!(flush_count(&g, Flush::FragLimit), 2);

    let mut d = Dgrams::new(1, true);
    let mut g = gro(udp_cfg());
    let out = feed(&mut g, (0..60).map(|_| d.next(DGRAM)).collect());
    let out: Vec<VecBuf> = out.into_iter().chain(flush(&mut g)).collect();
    for p in &out {
        assert!(
            p.len() - 14 <= 65535,
            "the IPv6 packet, header included, under 64 KiB"
        );
        verify_udp(&p.bytes());
    }
}

#[test]
fn udp_and_tcp_on_the_same_ports_are_different_flows() {
    let mut d = Dgrams::new(1, false);
    let mut f = Flow::new(1, false);
    f.spec.sport = d.spec.sport;
    f.spec.dport = d.spec.dport;
    let mut g = gro(udp_cfg());
    let pkts = vec![d.next(DGRAM), f.next(MSS), d.next(DGRAM), f.next(MSS)];
    assert!(feed(&mut g, pkts).is_empty());
    let out = flush(&mut g);
    assert_eq!(out.len(), 2);
    let mut kinds: Vec<bool> = out.iter().map(|p| p.gso.unwrap().udp).collect();
    kinds.sort();
    assert_eq!(kinds, vec![false, true]);
    for p in &out {
        assert_eq!(p.gso.unwrap().segs, 2);
    }
}

#[test]
fn a_udp_fragment_lets_its_flow_out_first() {
    let mut d = Dgrams::new(1, false);
    let mut g = gro(udp_cfg());
    let held = vec![d.next(DGRAM), d.next(DGRAM)];
    let mut frag = d.next(DGRAM);
    // MF set: the first fragment of a larger datagram.
    frag.segs[0][14 + 6] |= 0x20;
    let c = csum::ipv4_header(&{
        let mut ip = frag.segs[0][14..34].to_vec();
        ip[10] = 0;
        ip[11] = 0;
        ip
    });
    frag.segs[0][24..26].copy_from_slice(&c.to_be_bytes());
    let out = feed(&mut g, held.into_iter().chain([frag]).collect());
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].ids, vec![1001, 1002]);
    assert_eq!(out[1].ids, vec![1003]);
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::Fragment).index()], 1);
}

#[test]
fn a_later_udp_fragment_lets_every_flow_between_its_hosts_out_first() {
    // More flows between the two hosts than a probe run holds: a fragment
    // past the first names none of them, so all leave before it.
    const FLOWS: u16 = 40;
    let mut g = gro(udp_cfg());
    let mut pkts = Vec::new();
    for k in 0..FLOWS {
        let mut d = Dgrams::new(1, false);
        d.spec.sport += k;
        pkts.push(d.next(DGRAM));
    }
    let mut frag = Dgrams::new(1, false).next(DGRAM);
    // Offset 1 (8 bytes): no UDP header, no ports.
    frag.segs[0][14 + 7] = 1;
    let c = csum::ipv4_header(&{
        let mut ip = frag.segs[0][14..34].to_vec();
        ip[10] = 0;
        ip[11] = 0;
        ip
    });
    frag.segs[0][24..26].copy_from_slice(&c.to_be_bytes());
    let frag_bytes = frag.segs[0].clone();
    pkts.push(frag);
    let out = feed(&mut g, pkts);
    assert_eq!(out.len(), FLOWS as usize + 1);
    assert_eq!(out.last().unwrap().segs[0], frag_bytes);
    assert_eq!(flush_count(&g, Flush::Unmergeable), FLOWS as u64);
    assert_eq!(g.held(), 0);
}

#[test]
fn a_full_udp_table_evicts_the_oldest() {
    let mut g = gro(GroConfig {
        flows: 2,
        ..udp_cfg()
    });
    let mut flows: Vec<Dgrams> = (0..3).map(|i| Dgrams::new(i, false)).collect();
    let pkts: Vec<VecBuf> = flows.iter_mut().map(|d| d.next(DGRAM)).collect();
    let out = feed(&mut g, pkts);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ids, vec![1]);
    assert_eq!(flush_count(&g, Flush::TableFull), 1);
    assert_eq!(g.held(), 2);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// Flows of UDP datagrams interleaved at random, with what ends a packet
    /// or keeps a datagram out mixed in: shorter datagrams, IP ID jumps,
    /// datagrams without checksum; random bursts, frag limits, table sizes.
    #[derive(Debug, Clone)]
    struct Case {
        sizes: Vec<usize>,
        ipv6_mask: u8,
        picks: Vec<u8>,
        /// Per datagram (cycled): 0-9 full size, 10 shorter, 11 an ID jump,
        /// 12 no checksum.
        kinds: Vec<u8>,
        bursts: Vec<usize>,
        max_frags: u16,
        flows_held: usize,
        trust: bool,
        /// What a NIC said of the checksums: 0 nothing, 1 all good, 2 each
        /// datagram good or nothing at random.
        nic: u8,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            proptest::collection::vec(100usize..1400, 1..8),
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 1..300),
            proptest::collection::vec(0u8..13, 1..50),
            proptest::collection::vec(1usize..40, 1..10),
            1u16..=64,
            1usize..8,
            any::<bool>(),
            0u8..3,
        )
            .prop_map(
                |(sizes, ipv6_mask, picks, kinds, bursts, max_frags, flows_held, trust, nic)| {
                    Case {
                        sizes,
                        ipv6_mask,
                        picks,
                        kinds,
                        bursts,
                        max_frags,
                        flows_held,
                        trust,
                        nic,
                    }
                },
            )
    }

    /// The input: (flow, datagram) in arrival order.
    fn input(c: &Case) -> (Vec<VecBuf>, Vec<usize>) {
        let mut flows: Vec<Dgrams> = (0..c.sizes.len())
            .map(|i| Dgrams::new(i as u32 + 1, c.ipv6_mask >> i & 1 == 1))
            .collect();
        let (mut pkts, mut flow_of) = (Vec::new(), Vec::new());
        for (k, &p) in c.picks.iter().enumerate() {
            let f = p as usize % flows.len();
            let d = &mut flows[f];
            let size = c.sizes[f];
            let pkt = match c.kinds[k % c.kinds.len()] {
                10 => d.next(size / 2 + 1),
                11 => {
                    d.ip_id = d.ip_id.wrapping_add(9);
                    d.next(size)
                }
                12 => d.next_csum(size, false),
                _ => d.next(size),
            };
            let mut pkt = pkt;
            if c.nic == 1 || (c.nic == 2 && p >> 7 == 1) {
                pkt.hints = RxHints {
                    ip: CsumHint::Good,
                    l4: CsumHint::Good,
                };
            }
            pkts.push(pkt);
            flow_of.push(f);
        }
        (pkts, flow_of)
    }

    fn run(c: &Case, input: Vec<VecBuf>, full: bool) -> Vec<VecBuf> {
        let mut g = gro(GroConfig {
            max_frags: c.max_frags,
            flows: c.flows_held,
            csum: if c.trust {
                CsumMode::Trust
            } else {
                CsumMode::Verify
            },
            ..udp_cfg()
        });
        g.full_path_only = full;
        let mut out = Vec::new();
        let mut it = input.into_iter().peekable();
        let mut b = 0;
        while it.peek().is_some() {
            for p in it.by_ref().take(c.bursts[b % c.bursts.len()]) {
                g.receive(p, 0, &mut |o| out.push(o));
            }
            b += 1;
            if b % 3 != 0 {
                g.end_of_poll(&mut |o| out.push(o));
            }
        }
        g.flush_all(&mut |o| out.push(o));
        assert_eq!(g.held(), 0);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn every_datagram_leaves_once_in_order_and_the_fast_path_decides_as_the_full_one(c in case()) {
            let (pkts, flow_of) = input(&c);
            let n = pkts.len();
            let tag_at: std::collections::HashMap<u64, usize> =
                pkts.iter().enumerate().map(|(i, p)| (p.ids[0], i)).collect();
            let fast = run(&c, pkts.clone(), false);
            let full = run(&c, pkts, true);
            let groups = |o: &[VecBuf]| o.iter().map(|p| p.ids.clone()).collect::<Vec<_>>();
            prop_assert_eq!(groups(&fast), groups(&full), "fast path against full path");
            let mut seen = vec![false; n];
            let mut last_of_flow = vec![None::<usize>; c.sizes.len()];
            for p in &fast {
                let at: Vec<usize> = p.ids.iter().map(|t| tag_at[t]).collect();
                let f = flow_of[at[0]];
                for &i in &at {
                    prop_assert!(!seen[i], "datagram {} twice", i);
                    seen[i] = true;
                    prop_assert_eq!(flow_of[i], f, "one flow per packet");
                    prop_assert!(last_of_flow[f] < Some(i), "flow {} out of order", f);
                    last_of_flow[f] = Some(i);
                }
                if p.ids.len() > 1 {
                    prop_assert!(p.ids.len() <= c.max_frags as usize);
                    let payload = verify_udp(&p.bytes());
                    let gso = p.gso.unwrap();
                    prop_assert!(gso.udp && gso.segs as usize == p.ids.len());
                    prop_assert!(payload.len() <= gso.mss as usize * p.ids.len());
                }
            }
            prop_assert!(seen.iter().all(|&s| s), "every datagram out");
        }
    }
}

mod mutated {
    use super::*;
    use proptest::prelude::*;

    /// Datagrams of a few flows, some of them damaged (cut short anywhere,
    /// header or length bytes overwritten), verifying checksums: nothing
    /// panics, every frame leaves once, what leaves alone is untouched,
    /// and every merged packet is valid UDP (lengths and checksums) made of
    /// datagrams of one flow in arrival order.
    #[derive(Debug, Clone)]
    struct Damage {
        at: usize,
        /// 0: cut the frame to `at` bytes; 1: overwrite byte `at` with `v`;
        /// 2: overwrite the UDP or IP length's bytes near `at` with `v`.
        kind: u8,
        v: u8,
    }

    fn damage() -> impl Strategy<Value = Option<Damage>> {
        proptest::option::weighted(
            0.3,
            (0usize..120, 0u8..3, any::<u8>()).prop_map(|(at, kind, v)| Damage { at, kind, v }),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn damaged_datagrams_never_merge_wrongly(
            picks in proptest::collection::vec((0u8..3, damage()), 1..120),
            ipv6_mask in any::<u8>(),
            bursts in proptest::collection::vec(1usize..20, 1..6),
        ) {
            let mut flows: Vec<Dgrams> =
                (0..3).map(|i| Dgrams::new(i + 1, ipv6_mask >> i & 1 == 1)).collect();
            let mut pkts = Vec::new();
            for (f, dmg) in &picks {
                let mut p = flows[*f as usize].next(300);
                let f0 = &mut p.segs[0];
                match dmg {
                    Some(Damage { at, kind: 0, .. }) => f0.truncate(*at % (f0.len() + 1)),
                    Some(Damage { at, kind: 1, v }) => {
                        let i = at % f0.len();
                        f0[i] = *v;
                    }
                    Some(Damage { at, v, .. }) => {
                        // An IP or UDP length field, roughly.
                        let i = [16, 17, 38, 39, 18, 19, 58, 59][at % 8] % f0.len();
                        f0[i] = *v;
                    }
                    None => {}
                }
                pkts.push(p);
            }
            let before: Vec<Vec<u8>> = pkts.iter().map(|p| p.bytes()).collect();
            let tag_at: std::collections::HashMap<u64, usize> =
                pkts.iter().enumerate().map(|(i, p)| (p.ids[0], i)).collect();
            let mut g = gro(udp_cfg());
            let mut out = Vec::new();
            let mut it = pkts.into_iter().peekable();
            let mut b = 0;
            while it.peek().is_some() {
                for p in it.by_ref().take(bursts[b % bursts.len()]) {
                    g.receive(p, 0, &mut |o| out.push(o));
                }
                b += 1;
                g.end_of_poll(&mut |o| out.push(o));
            }
            g.flush_all(&mut |o| out.push(o));
            let mut seen = vec![false; before.len()];
            for o in &out {
                let at: Vec<usize> = o.ids.iter().map(|t| tag_at[t]).collect();
                for &i in &at {
                    prop_assert!(!seen[i], "frame {} twice", i);
                    seen[i] = true;
                }
                if at.len() == 1 {
                    prop_assert_eq!(&o.bytes(), &before[at[0]], "alone, untouched");
                } else {
                    prop_assert!(at.windows(2).all(|w| w[0] < w[1]), "arrival order");
                    prop_assert!(at.iter().all(|&i| picks[i].0 == picks[at[0]].0), "one flow");
                    verify_udp(&o.bytes());
                }
            }
            prop_assert!(seen.iter().all(|&s| s), "every frame out");
        }
    }
}

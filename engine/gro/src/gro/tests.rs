//! GRO rules, one test per reason to merge or not, on `VecBuf` (no EAL).
//! One long file on purpose: the tests read top to bottom as the rules do,
//! sharing one segment builder.

use super::*;
use crate::traffic::{
    pattern_byte, Addrs, FlowSpec, Segment, TCP_ACK, TCP_CWR, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN,
    TCP_URG,
};
use crate::wire::NotTcp;

const MSS: usize = 1448;

/// Builds segment frames of one flow with full control of each field.
struct Flow {
    spec: FlowSpec,
    id: u32,
    seq: u32,
    ip_id: u16,
    next_tag: u64,
}

impl Flow {
    fn new(i: u32, ipv6: bool) -> Flow {
        Flow {
            spec: FlowSpec::numbered(i, ipv6),
            id: i,
            seq: 1000 * (i + 1),
            ip_id: 100,
            next_tag: i as u64 * 1_000_000,
        }
    }
    fn payload(&self, seq: u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|k| pattern_byte(self.id, seq.wrapping_add(k as u32) as u64))
            .collect()
    }
    /// The next in-order segment, `len` bytes, with `edit` applied to the fields.
    fn next_with(&mut self, len: usize, edit: impl FnOnce(&mut Segment)) -> VecBuf {
        let mut s = Segment {
            seq: self.seq,
            ack: 77,
            flags: TCP_ACK,
            ip_id: self.ip_id,
            tsval: 5000,
            tsecr: 4000,
            payload_len: len as u16,
        };
        edit(&mut s);
        let payload = self.payload(s.seq, len);
        let f = self.spec.frame(&s, &payload);
        self.seq = s.seq.wrapping_add(len as u32);
        self.ip_id = s.ip_id.wrapping_add(1);
        self.next_tag += 1;
        VecBuf::new(self.next_tag, f)
    }
    fn next(&mut self, len: usize) -> VecBuf {
        self.next_with(len, |_| {})
    }
    /// The same flow's numbers from another source MAC (another flow).
    fn clone_with_mac(&self) -> Flow {
        let mut spec = self.spec.clone();
        spec.src_mac[5] ^= 0x40;
        Flow {
            spec,
            id: self.id,
            seq: self.seq,
            ip_id: self.ip_id,
            next_tag: self.next_tag + 500_000,
        }
    }
}

fn gro(cfg: GroConfig) -> Gro<VecBuf> {
    Gro::new(cfg)
}

/// GRO with defaults but the checksum mode, on the full path alone or not.
fn on_path(csum: CsumMode, full: bool) -> Gro<VecBuf> {
    let mut g = gro(GroConfig {
        csum,
        ..Default::default()
    });
    g.full_path_only = full;
    g
}

fn feed(g: &mut Gro<VecBuf>, pkts: Vec<VecBuf>) -> Vec<VecBuf> {
    let mut out = Vec::new();
    for p in pkts {
        g.receive(p, 0, &mut |b| out.push(b));
    }
    out
}

fn flush(g: &mut Gro<VecBuf>) -> Vec<VecBuf> {
    let mut out = Vec::new();
    g.flush_all(&mut |b| out.push(b));
    out
}

/// Checks a packet's IPv4/IPv6 lengths and checksums the slow way, at
/// both levels for a tunnelled one (its outer UDP checksum summed over the
/// whole datagram); returns the (inner) segment's layout.
pub(crate) fn verify(bytes: &[u8]) -> Result<Tcp, String> {
    let (t, outer) = match Tcp::parse(bytes, bytes.len(), true) {
        Ok(t) => (t, None),
        Err(NotTcp::NotTcp) => {
            let tunnels = crate::wire::Tunnels::default();
            let (t, o) = Tcp::parse_tunnel(bytes, bytes.len(), true, &tunnels)
                .map_err(|e| format!("parse: {e:?}"))?;
            (t, Some(o))
        }
        Err(e) => return Err(format!("parse: {e:?}")),
    };
    let f = Fields::new(bytes, t);
    let tcp = &bytes[t.l4 as usize..];
    let s = csum::add(f.pseudo_sum(tcp.len() as u32), csum::sum(tcp));
    if s != 0xffff {
        return Err(format!("TCP checksum wrong (sum {s:#x})"));
    }
    if let Some(o) = outer {
        let (l3, l4) = (o.l3 as usize, o.l4 as usize);
        if bytes.len() - l3 > 65535 {
            return Err(format!("a {} B outer IP packet", bytes.len() - l3));
        }
        if field::read16(bytes, l4, crate::wire::field::udp::CHECKSUM) != 0 {
            let addrs = if o.ipv6 {
                &bytes[field::at(l3, ipv6::ADDRS)]
            } else {
                &bytes[field::at(l3, ipv4::ADDRS)]
            };
            let p = csum::pseudo(addrs, crate::wire::IPPROTO_UDP, (bytes.len() - l4) as u32);
            let s = csum::add(p, csum::sum(&bytes[l4..]));
            if s != 0xffff {
                return Err(format!("outer UDP checksum wrong (sum {s:#x})"));
            }
        }
    }
    Ok(t)
}

fn seq_of(b: &VecBuf) -> u32 {
    let bytes = b.bytes();
    let t = Tcp::parse(&bytes, bytes.len(), false).unwrap();
    Fields::new(&bytes, t).seq()
}

fn flush_count(g: &Gro<VecBuf>, f: Flush) -> u64 {
    g.stats().flush[f as usize]
}

#[test]
fn in_order_segments_merge_into_one_valid_packet() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(1, ipv6);
        let mut g = gro(GroConfig::default());
        let segs: Vec<VecBuf> = (0..5).map(|_| f.next(MSS)).collect();
        let expect_payload: Vec<u8> = f.payload(1000 * 2, 5 * MSS);
        assert!(
            feed(&mut g, segs).is_empty(),
            "held until the end of the poll"
        );
        let out = flush(&mut g);
        assert_eq!(out.len(), 1);
        let bytes = out[0].bytes();
        let t = verify(&bytes).unwrap();
        assert_eq!(&bytes[t.payload as usize..], &expect_payload[..]);
        assert_eq!(t.payload_len as usize, 5 * MSS);
        let gso = out[0].gso.unwrap();
        assert_eq!((gso.segs, gso.mss as usize, gso.ipv6), (5, MSS, ipv6));
        assert_eq!(
            out[0].segs.len(),
            5,
            "payload buffers chained, headers trimmed"
        );
        assert_eq!(flush_count(&g, Flush::EndOfPoll), 1);
        assert_eq!(g.stats().merged_segments, 4);
        assert_eq!(g.held(), 0);
    }
}

#[test]
fn psh_merges_then_flushes_and_is_kept() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let mut pkts: Vec<VecBuf> = (0..2).map(|_| f.next(MSS)).collect();
    pkts.push(f.next_with(MSS, |s| s.flags |= TCP_PSH));
    let out = feed(&mut g, pkts);
    assert_eq!(out.len(), 1, "flushed at once");
    let b = out[0].bytes();
    let t = verify(&b).unwrap();
    assert_eq!(
        b[t.l4 as usize + 13] & TCP_PSH,
        TCP_PSH,
        "PSH carried to the merged header"
    );
    assert_eq!(out[0].gso.unwrap().segs, 3);
    assert_eq!(flush_count(&g, Flush::Psh), 1);
}

#[test]
fn fin_merges_then_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(
        &mut g,
        vec![f.next(MSS), f.next_with(100, |s| s.flags |= TCP_FIN)],
    );
    assert_eq!(out.len(), 1);
    let b = out[0].bytes();
    let t = verify(&b).unwrap();
    assert_eq!(b[t.l4 as usize + 13] & TCP_FIN, TCP_FIN);
    assert_eq!(flush_count(&g, Flush::Fin), 1);
}

#[test]
fn short_segment_merges_then_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(
        &mut g,
        vec![f.next(MSS), f.next(MSS), f.next(500), f.next(MSS)],
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].gso.unwrap().segs, 3);
    verify(&out[0].bytes()).unwrap();
    assert_eq!(flush_count(&g, Flush::ShortSegment), 1);
    assert_eq!(g.held(), 1, "the next full segment starts a new packet");
}

#[test]
fn seq_gap_flushes_and_never_merges_across_it() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let _lost = f.next(MSS);
    let c = f.next(MSS);
    let out = feed(&mut g, vec![a, c]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].gso.unwrap().segs, 1);
    assert_eq!(flush_count(&g, Flush::SeqGap), 1);
    let rest = flush(&mut g);
    assert_eq!(seq_of(&rest[0]), seq_of(&out[0]) + 2 * MSS as u32);
}

#[test]
fn retransmission_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let again = a.clone();
    let out = feed(&mut g, vec![a, again]);
    assert_eq!(out.len(), 1);
    assert_eq!(
        flush_count(&g, Flush::SeqGap) + flush_count(&g, Flush::IpId),
        1
    );
}

#[test]
fn ack_change_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(&mut g, vec![f.next(MSS), f.next_with(MSS, |s| s.ack = 99)]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::AckChange), 1);
}

#[test]
fn option_change_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(
        &mut g,
        vec![f.next(MSS), f.next_with(MSS, |s| s.tsval += 1)],
    );
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::OptionMismatch), 1);
}

#[test]
fn window_or_flag_change_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    f.spec.window += 1;
    let b = f.next(MSS);
    assert_eq!(feed(&mut g, vec![a, b]).len(), 1);
    assert_eq!(flush_count(&g, Flush::Flags), 1);
    // CWR set on a later segment flushes too.
    let out = feed(&mut g, vec![f.next_with(MSS, |s| s.flags |= TCP_CWR)]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::Flags), 2);
}

#[test]
fn a_cwr_head_is_held_and_only_segments_without_cwr_join_it() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(1, ipv6);
        let mut g = gro(GroConfig::default());
        let mut pkts = vec![f.next_with(MSS, |s| s.flags |= TCP_CWR)];
        pkts.extend((0..3).map(|_| f.next(MSS)));
        // CWR again: not merged (Linux flushes on it); it starts the next packet.
        pkts.push(f.next_with(MSS, |s| s.flags |= TCP_CWR));
        pkts.push(f.next(MSS));
        let mut out = feed(&mut g, pkts);
        out.extend(flush(&mut g));
        assert_eq!(out.len(), 2);
        for (o, segs) in out.iter().zip([4, 2]) {
            assert_eq!(o.gso.unwrap().segs, segs);
            let b = o.bytes();
            let t = verify(&b).unwrap();
            assert_ne!(b[t.l4 as usize + 13] & TCP_CWR, 0, "the head's CWR stays");
        }
        assert_eq!(flush_count(&g, Flush::Flags), 1);
    }
}

#[test]
fn syn_rst_urg_never_merge_and_keep_order() {
    for bad in [TCP_SYN, TCP_RST, TCP_URG] {
        let mut f = Flow::new(1, false);
        let mut g = gro(GroConfig::default());
        let a = f.next(MSS);
        let b = f.next_with(MSS, |s| s.flags |= bad);
        let out = feed(&mut g, vec![a, b]);
        assert_eq!(out.len(), 2, "flag {bad:#x}");
        assert!(seq_of(&out[0]) < seq_of(&out[1]), "held data leaves first");
        assert_eq!(g.stats().pass[Pass::Flags.index()], 1);
        assert_eq!(g.held(), 0);
    }
}

#[test]
fn ip_field_changes_flush() {
    let edits: [fn(&mut FlowSpec); 3] = [|s| s.ttl -= 1, |s| s.tos = 0x10, |s| s.df = false];
    for edit in edits {
        let mut f = Flow::new(1, false);
        let mut g = gro(GroConfig::default());
        let a = f.next(MSS);
        edit(&mut f.spec);
        let out = feed(&mut g, vec![a, f.next(MSS)]);
        assert_eq!(out.len(), 1);
        assert_eq!(flush_count(&g, Flush::IpMismatch), 1);
    }
    let mut f = Flow::new(1, true);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    f.spec.ttl -= 1; // hop limit
    assert_eq!(feed(&mut g, vec![a, f.next(MSS)]).len(), 1);
    assert_eq!(flush_count(&g, Flush::IpMismatch), 1);
}

#[test]
fn ip_id_must_increment_or_stay_fixed() {
    // Fixed IDs with DF merge (as Linux allows).
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let pkts = (0..3).map(|_| f.next_with(MSS, |s| s.ip_id = 9)).collect();
    assert!(feed(&mut g, pkts).is_empty());
    assert_eq!(flush(&mut g)[0].gso.unwrap().segs, 3);
    // And without DF (as Linux allows since 2025).
    let mut f = Flow::new(1, false);
    f.spec.df = false;
    let mut g = gro(GroConfig::default());
    let pkts = (0..3).map(|_| f.next_with(MSS, |s| s.ip_id = 9)).collect();
    assert!(feed(&mut g, pkts).is_empty());
    assert_eq!(flush(&mut g)[0].gso.unwrap().segs, 3);
    // A jump flushes.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let out = feed(&mut g, vec![a, f.next_with(MSS, |s| s.ip_id += 5)]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::IpId), 1);
    // Incrementing, then fixed: flushes.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let b = f.next(MSS);
    let c = f.next_with(MSS, |s| s.ip_id -= 1);
    assert_eq!(feed(&mut g, vec![a, b, c]).len(), 1);
    assert_eq!(flush_count(&g, Flush::IpId), 1);
}

#[test]
fn larger_segment_than_the_first_flushes() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let out = feed(&mut g, vec![f.next(1000), f.next(1200)]);
    assert_eq!(out.len(), 1);
    assert_eq!(flush_count(&g, Flush::LargerThanMss), 1);
}

#[test]
fn pure_ack_of_a_held_flow_flushes_it_first() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let ack = f.next(0);
    let out = feed(&mut g, vec![a, ack]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].gso.unwrap().segs, 1, "data first");
    assert_eq!(out[1].len(), 66, "then the ACK, untouched");
    assert_eq!(flush_count(&g, Flush::PureAck), 1);
    assert_eq!(g.stats().pass[Pass::NoPayload.index()], 1);
}

#[test]
fn bad_tcp_checksum_passes_through_after_the_held_data() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let mut b = f.next(MSS);
    let last = b.segs[0].len() - 1;
    b.segs[0][last] ^= 0xff; // corrupt a payload byte
    let orig = b.clone();
    let c = f.next(MSS);
    let out = feed(&mut g, vec![a, b, c]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].segs, orig.segs, "passed through unharmed");
    assert_eq!(g.stats().pass[Pass::BadTcpChecksum.index()], 1);
    assert_eq!(flush_count(&g, Flush::BadChecksum), 1);
    // Trust mode validates nothing: the same three merge... but the merged
    // checksum then carries the corruption, as with any GRO that trusts.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        csum: CsumMode::Trust,
        ..Default::default()
    });
    let pkts = (0..3).map(|_| f.next(MSS)).collect();
    assert!(feed(&mut g, pkts).is_empty());
    let out = flush(&mut g);
    verify(&out[0].bytes()).unwrap();
    assert_eq!(out[0].gso.unwrap().segs, 3);
}

#[test]
fn nic_checksum_hints_are_honoured() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let mut a = f.next(MSS);
    a.hints = RxHints {
        ip: CsumHint::Good,
        l4: CsumHint::Good,
    };
    let mut b = f.next(MSS);
    b.hints = RxHints {
        ip: CsumHint::Good,
        l4: CsumHint::Bad,
    };
    let out = feed(&mut g, vec![a, b]);
    assert_eq!(out.len(), 2);
    assert_eq!(g.stats().pass[Pass::BadTcpChecksum.index()], 1);
    let mut c = f.next(MSS);
    c.hints.ip = CsumHint::Bad;
    let out = feed(&mut g, vec![c]);
    assert_eq!(out.len(), 1);
    assert_eq!(
        g.stats().pass[Pass::Frame(NotTcp::BadIpChecksum).index()],
        1
    );
}

#[test]
fn a_bad_ipv4_header_checksum_leaves_after_its_flows_held_data() {
    // Found in software (verify) and vouched bad by the NIC: either way the
    // flow's held segments arrived first and leave first.
    for by_nic in [false, true] {
        let mut f = Flow::new(1, false);
        let mut g = gro(GroConfig::default());
        let held = vec![f.next(MSS), f.next(MSS)];
        let mut bad = f.next(MSS);
        if by_nic {
            bad.hints.ip = CsumHint::Bad;
        } else {
            // The TTL changed in flight, the checksum not: only the sum tells.
            bad.segs[0][14 + 8] ^= 0x01;
        }
        let after = f.next(MSS);
        let out = feed(&mut g, held.into_iter().chain([bad, after]).collect());
        let out: Vec<VecBuf> = out.into_iter().chain(flush(&mut g)).collect();
        let ids: Vec<Vec<u64>> = out.iter().map(|p| p.ids.clone()).collect();
        assert_eq!(
            ids,
            vec![vec![1_000_001, 1_000_002], vec![1_000_003], vec![1_000_004]],
            "by_nic {by_nic}"
        );
        assert_eq!(
            g.stats().pass[Pass::Frame(NotTcp::BadIpChecksum).index()],
            1
        );
        assert_eq!(flush_count(&g, Flush::Unmergeable), 1);
    }
}

#[test]
fn frag_limit_counts_every_buffer() {
    // Single-buffer frames: max_frags 3 -> 3 segments per packet.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        max_frags: 3,
        ..Default::default()
    });
    let out = feed(&mut g, (0..7).map(|_| f.next(MSS)).collect());
    assert_eq!(
        out.iter().map(|o| o.gso.unwrap().segs).collect::<Vec<_>>(),
        vec![3, 3]
    );
    assert_eq!(flush_count(&g, Flush::FragLimit), 2);
    // Frames split over two buffers (the mlx4 lesson): max_frags 16 -> 8 frames.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        max_frags: 16,
        ..Default::default()
    });
    let pkts = (0..17)
        .map(|_| {
            let b = f.next(MSS);
            VecBuf::split(b.ids[0], &b.bytes(), 1024)
        })
        .collect();
    let out = feed(&mut g, pkts);
    assert_eq!(out[0].gso.unwrap().segs, 8);
    assert!(out.iter().all(|o| o.segs.len() <= 16));
    verify(&out[0].bytes()).unwrap();
}

#[test]
fn header_only_first_buffers_count_against_the_budget() {
    // Header-split frames: 66 B of headers, then the payload buffer (found by fuzzing).
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        max_frags: 4,
        ..Default::default()
    });
    let pkts = (0..6)
        .map(|_| {
            let b = f.next(MSS);
            let bytes = b.bytes();
            VecBuf {
                segs: vec![bytes[..66].to_vec(), bytes[66..].to_vec()],
                ids: b.ids,
                ..Default::default()
            }
        })
        .collect();
    let mut out = feed(&mut g, pkts);
    out.extend(flush(&mut g));
    assert!(
        out.iter().all(|o| o.segs.len() <= 4),
        "{:?}",
        out.iter().map(|o| o.segs.len()).collect::<Vec<_>>()
    );
    assert_eq!(out[0].segs.len(), 4, "head (2 buffers) + 2 payload buffers");
}

#[test]
fn size_limit_holds() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        max_size: 4000,
        ..Default::default()
    });
    let out = feed(&mut g, (0..5).map(|_| f.next(MSS)).collect());
    // 2 x 1448 + 52 = 2948 fits; a third would make 4396.
    assert_eq!(
        out.iter().map(|o| o.gso.unwrap().segs).collect::<Vec<_>>(),
        vec![2, 2]
    );
    assert_eq!(flush_count(&g, Flush::SizeLimit), 2);
    // The default limit: a 64 KiB packet is 45 segments of 1448.
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig {
        max_frags: 64,
        ..Default::default()
    });
    let out = feed(&mut g, (0..50).map(|_| f.next(MSS)).collect());
    assert_eq!(out[0].gso.unwrap().segs, 45);
    let b = out[0].bytes();
    assert!(b.len() - 14 <= 65535);
    verify(&b).unwrap();
}

#[test]
fn full_table_evicts_the_oldest() {
    let mut g = gro(GroConfig {
        flows: 2,
        ..Default::default()
    });
    let mut flows: Vec<Flow> = (0..3).map(|i| Flow::new(i, false)).collect();
    let mut pkts = Vec::new();
    for fl in flows.iter_mut() {
        pkts.push(fl.next(MSS));
    }
    let out = feed(&mut g, pkts);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ids, vec![1], "flow 0 (its first tag) was the oldest");
    assert_eq!(flush_count(&g, Flush::TableFull), 1);
    assert_eq!(g.held(), 2);
}

#[test]
fn flushed_flows_restart_from_the_cache_until_it_forgets_them() {
    // Two held at once, four remembered.
    let cfg = GroConfig {
        flows: 2,
        flow_cache: 4,
        ..Default::default()
    };
    let mut g = gro(cfg);
    let mut flows: Vec<Flow> = (0..6).map(|i| Flow::new(i, false)).collect();
    let mut out = Vec::new();
    let mut poll = |g: &mut Gro<VecBuf>, which: &[usize]| {
        for &i in which {
            for _ in 0..3 {
                g.receive(flows[i].next(MSS), 0, &mut |p| out.push(p));
            }
            assert!(g.held() <= 2, "never more held than --gro-flows");
        }
        g.flush_all(&mut |p| out.push(p));
    };
    let heads = |g: &Gro<VecBuf>| (g.stats().heads_built, g.stats().heads_cached);
    poll(&mut g, &[0, 1]);
    assert_eq!(heads(&g), (2, 0));
    poll(&mut g, &[1, 0]);
    assert_eq!(heads(&g), (2, 2), "both come back to their entries");
    // A third flow while two are held: the oldest leaves (table full).
    poll(&mut g, &[2, 0, 1]);
    assert_eq!(heads(&g), (3, 4));
    assert_eq!(flush_count(&g, Flush::TableFull), 1);
    // Four flows are remembered: flows 3, 4 and 5 take the entries of the
    // least recently flushed (the never used one, then 2, then 0).
    poll(&mut g, &[3, 4, 5]);
    assert_eq!(heads(&g), (6, 4));
    poll(&mut g, &[1, 0]);
    assert_eq!(heads(&g), (7, 5), "flow 1 is still remembered, flow 0 not");
    // Every packet is whole and valid: 3 segments each.
    assert!(out
        .iter()
        .all(|p| p.ids.len() == 3 && verify(&p.bytes()).is_ok()));
}

#[test]
fn a_flow_whose_timestamps_moved_on_restarts_from_the_cache_as_on_the_full_path() {
    // Between two packets of a flow (another flow's turn, a poll's end) its
    // timestamps move on: its next head differs from the last one in its
    // options alone, and starts the flow's next packet in its entry; one
    // with PSH passes.
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        let run = |full: bool| {
            let mut f = Flow::new(2, false);
            let mut g = on_path(csum, full);
            let mut out = Vec::new();
            for (k, psh) in [(0, false), (1, false), (2, true), (3, false)] {
                let ts = |s: &mut Segment| s.tsval = 5000 + k;
                let mut segs = vec![f.next_with(MSS, |s| {
                    ts(s);
                    if psh {
                        s.flags |= TCP_PSH;
                    }
                })];
                segs.extend((0..3).map(|_| f.next_with(MSS, ts)));
                out.extend(feed(&mut g, segs));
                out.extend(flush(&mut g));
            }
            let st = g.stats();
            let counts = (
                st.heads_built,
                st.heads_cached,
                st.pass[Pass::Flags.index()],
            );
            (out, counts)
        };
        let (fast, counts) = run(false);
        assert_eq!(counts, (1, 3, 1), "{csum:?}");
        assert_eq!(fast.len(), 5, "{csum:?}");
        assert!(fast.iter().all(|p| verify(&p.bytes()).is_ok()));
        assert_eq!((fast, counts), run(true), "{csum:?}");
    }
}

#[test]
fn a_held_flow_after_a_gap_a_retransmission_or_new_timestamps_goes_on_as_on_the_full_path() {
    // In one poll, a flow's timestamps move on mid-packet, a segment is
    // lost, an earlier one comes again, and a gap, new timestamps and PSH
    // come at once. Each ends the held packet (for the options before the
    // gap, as the rules are ordered) and the same segment starts the next
    // one in the flow's slot; the one with PSH passes.
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        let run = |full: bool| {
            let mut f = Flow::new(3, false);
            let mut g = on_path(csum, full);
            let ts = |k: u32| move |s: &mut Segment| s.tsval = 5000 + k;
            let mut segs: Vec<VecBuf> = (0..3).map(|_| f.next_with(MSS, ts(0))).collect();
            segs.extend((0..3).map(|_| f.next_with(MSS, ts(1))));
            let _lost = f.next(MSS);
            segs.extend((0..3).map(|_| f.next_with(MSS, ts(1))));
            let (again, at) = (f.seq.wrapping_sub(2 * MSS as u32), f.seq);
            segs.push(f.next_with(MSS, |s| {
                s.seq = again;
                s.tsval = 5001;
            }));
            f.seq = at;
            segs.extend((0..3).map(|_| f.next_with(MSS, ts(1))));
            let _lost = f.next(MSS);
            segs.push(f.next_with(MSS, |s| {
                s.tsval = 5002;
                s.flags |= TCP_PSH;
            }));
            segs.extend((0..2).map(|_| f.next_with(MSS, ts(2))));
            let mut out = feed(&mut g, segs);
            out.extend(flush(&mut g));
            let st = g.stats();
            let counts = (
                st.heads_built,
                st.heads_cached,
                st.pass[Pass::Flags.index()],
                flush_count(&g, Flush::SeqGap),
                flush_count(&g, Flush::OptionMismatch),
            );
            (out, counts)
        };
        let (fast, counts) = run(false);
        assert_eq!(counts, (1, 5, 1, 3, 2), "{csum:?}");
        let segs: Vec<usize> = fast.iter().map(|p| p.ids.len()).collect();
        assert_eq!(segs, vec![3, 3, 3, 1, 3, 1, 2], "{csum:?}");
        assert!(fast.iter().all(|p| verify(&p.bytes()).is_ok()), "{csum:?}");
        assert_eq!((fast, counts), run(true), "{csum:?}");
    }
}

#[test]
fn age_flush_takes_only_the_old() {
    let mut g = gro(GroConfig::default());
    let mut a = Flow::new(0, false);
    let mut b = Flow::new(1, false);
    let mut sink = Vec::new();
    g.receive(a.next(MSS), 100, &mut |p| sink.push(p));
    g.receive(b.next(MSS), 200, &mut |p| sink.push(p));
    g.flush_older(150, &mut |p| sink.push(p));
    assert_eq!(sink.len(), 1);
    assert_eq!(g.held(), 1);
    assert_eq!(flush_count(&g, Flush::Age), 1);
    assert_eq!(g.oldest_since(), Some(200));
}

#[test]
fn flows_are_told_apart_by_vlan_and_flow_label() {
    let mut g = gro(GroConfig::default());
    let mut a = Flow::new(0, false);
    a.spec.vlans = vec![10];
    let mut b = Flow::new(0, false);
    b.spec.vlans = vec![11];
    let out = feed(
        &mut g,
        vec![a.next(MSS), b.next(MSS), a.next(MSS), b.next(MSS)],
    );
    assert!(out.is_empty());
    assert_eq!(g.held(), 2);
    let out = flush(&mut g);
    assert!(out.iter().all(|o| o.gso.unwrap().segs == 2));
    for o in &out {
        verify(&o.bytes()).unwrap();
    }
    // QinQ merges like untagged.
    let mut q = Flow::new(3, true);
    q.spec.vlans = vec![100, 200];
    let mut g = gro(GroConfig::default());
    feed(&mut g, (0..4).map(|_| q.next(MSS)).collect());
    let out = flush(&mut g);
    assert_eq!(out[0].gso.unwrap().segs, 4);
    assert_eq!(out[0].gso.unwrap().l2_len, 22);
    verify(&out[0].bytes()).unwrap();
    // IPv6 flow labels make distinct flows.
    let mut g = gro(GroConfig::default());
    let mut x = Flow::new(5, true);
    let a1 = x.next(MSS);
    x.spec.flow_label = 9;
    let a2 = x.next(MSS);
    assert!(feed(&mut g, vec![a1, a2]).is_empty());
    assert_eq!(g.held(), 2);
}

#[test]
fn non_tcp_passes_through_untouched() {
    let mut g = gro(GroConfig::default());
    let mut f = Flow::new(0, false);
    let mut udp = f.next(100);
    udp.segs[0][23] = 17;
    let arp = VecBuf::new(9, {
        let mut v = vec![0u8; 60];
        v[12] = 0x08;
        v[13] = 0x06;
        v
    });
    let runt = VecBuf::new(10, vec![1, 2, 3]);
    let inputs = vec![udp.clone(), arp.clone(), runt.clone()];
    let out = feed(&mut g, inputs.clone());
    assert_eq!(out, inputs);
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::NotTcp).index()], 1);
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::NotIp).index()], 1);
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::Malformed).index()], 1);
}

#[test]
fn a_single_held_segment_leaves_unchanged() {
    let mut f = Flow::new(0, false);
    let a = f.next(MSS);
    let mut g = gro(GroConfig::default());
    feed(&mut g, vec![a.clone()]);
    let out = flush(&mut g);
    assert_eq!(out[0].segs, a.segs);
    assert_eq!(out[0].gso.unwrap().segs, 1);
}

#[test]
fn tso_output_writes_the_pseudo_header_sum() {
    let mut f = Flow::new(0, false);
    let mut g = gro(GroConfig {
        out_csum: OutCsum::Pseudo,
        ..Default::default()
    });
    feed(&mut g, (0..3).map(|_| f.next(MSS)).collect());
    let out = flush(&mut g);
    let gso = out[0].gso.unwrap();
    assert!(gso.tso);
    let b = out[0].bytes();
    let t = Tcp::parse(&b, b.len(), true).unwrap();
    let fl = Fields::new(&b, t);
    assert_eq!(fl.tcp_csum(), fl.pseudo_sum(0));
    let Addrs::V4 { .. } = f.spec.addrs else {
        panic!()
    };
}

#[test]
fn odd_mss_keeps_checksums_right() {
    // Payload sums of segments at odd offsets must be byte-swapped into place.
    for ipv6 in [false, true] {
        let mut f = Flow::new(0, ipv6);
        let mut g = gro(GroConfig::default());
        feed(&mut g, (0..6).map(|_| f.next(1001)).collect());
        let out = flush(&mut g);
        assert_eq!(out[0].gso.unwrap().segs, 6);
        verify(&out[0].bytes()).unwrap();
        // In trust mode the sums come from the checksum fields: same result.
        let mut f = Flow::new(0, ipv6);
        let mut g = gro(GroConfig {
            csum: CsumMode::Trust,
            ..Default::default()
        });
        feed(&mut g, (0..6).map(|_| f.next(1001)).collect());
        verify(&flush(&mut g)[0].bytes()).unwrap();
    }
}

#[test]
fn frames_shorter_than_the_fast_compare_merge_as_on_the_full_path() {
    // An 8-byte payload makes a frame of 74 (IPv4) or 94 (IPv6) bytes,
    // shorter than the fast path's compare of such headers (80 and 96
    // bytes): such segments take the full path, and merge there by the
    // same rules.
    for ipv6 in [false, true] {
        let run = |full: bool| {
            let mut f = Flow::new(3, ipv6);
            let segs: Vec<VecBuf> = (0..10).map(|_| f.next(8)).collect();
            assert!(segs.iter().all(|s| s.len() < FIXED_CMP));
            let mut g = gro(GroConfig::default());
            g.full_path_only = full;
            let mut out = feed(&mut g, segs);
            out.extend(flush(&mut g));
            (out, g.stats().merged_segments)
        };
        let (fast, merged) = run(false);
        assert_eq!(merged, 9, "ipv6 {ipv6}");
        assert_eq!(fast.len(), 1, "ipv6 {ipv6}");
        verify(&fast[0].bytes()).unwrap();
        assert_eq!(fast, run(true).0, "ipv6 {ipv6}");
    }
}

#[test]
fn first_segment_with_psh_is_not_held() {
    let mut f = Flow::new(0, false);
    let mut g = gro(GroConfig::default());
    let out = feed(&mut g, vec![f.next_with(100, |s| s.flags |= TCP_PSH)]);
    assert_eq!(out.len(), 1);
    assert_eq!(g.held(), 0);
}

#[test]
fn unmergeable_frames_of_a_held_flow_leave_after_its_data() {
    // Each kind of frame GRO turns away, made from the flow's next segment.
    type Spoil = fn(&mut Vec<u8>);
    let kinds: [(&str, Spoil); 6] = [
        ("ip options", |f| {
            f[14] = 0x46;
            f.splice(34..34, [1, 1, 1, 1]);
            let tot = u16::from_be_bytes([f[16], f[17]]) + 4;
            f[16..18].copy_from_slice(&tot.to_be_bytes());
        }),
        ("first fragment", |f| f[20] |= 0x20),
        ("later fragment", |f| f[21] = 0x10),
        ("bad ip checksum", |f| f[24] ^= 0xff),
        ("bad data offset", |f| f[46] = 0x40),
        ("padded", |f| f.extend_from_slice(&[0; 6])),
    ];
    for (name, spoil) in kinds {
        let mut f = Flow::new(1, false);
        let mut other = Flow::new(2, false);
        let mut g = gro(GroConfig::default());
        let a = f.next(MSS);
        let b = other.next(MSS);
        let mut bad = f.next(MSS);
        spoil(&mut bad.segs[0]);
        let bad_copy = bad.clone();
        let out = feed(&mut g, vec![a, b, bad]);
        assert_eq!(out.len(), 2, "{name}: the flow's held data, then the frame");
        assert_eq!(out[0].ids, vec![1_000_001], "{name}: flow 1's data first");
        assert_eq!(
            out[1].segs, bad_copy.segs,
            "{name}: the frame passes untouched"
        );
        assert_eq!(flush_count(&g, Flush::Unmergeable), 1, "{name}");
        assert_eq!(g.held(), 1, "{name}: the other flow stays held");
    }
}

#[test]
fn a_turned_away_frame_flushes_its_flow_and_no_other() {
    for ipv6 in [false, true] {
        // Two flows between the same hosts, told apart by a port.
        let mut a = Flow::new(1, ipv6);
        let mut b = Flow::new(1, ipv6);
        b.spec.sport += 1;
        b.id = 9;
        b.next_tag = 9_000_000;
        let mut g = gro(GroConfig::default());
        let (sa, sb) = (a.next(MSS), b.next(MSS));
        // A's next segment, padded: GRO turns it away, after A's data.
        let mut pad = a.next(MSS);
        pad.segs[0].extend_from_slice(&[0; 6]);
        let out = feed(&mut g, vec![sa, sb, pad]);
        assert_eq!(out.len(), 2, "ipv6 {ipv6}");
        assert_eq!(out[0].ids, vec![1_000_001], "A's held data first");
        assert_eq!(g.held(), 1, "B stays held");
    }
}

#[test]
fn a_turned_away_frame_flushes_its_five_tuple_whatever_the_macs() {
    // B and its copy from another MAC are two flows to the merge (Linux
    // compares the MAC header), but one 5-tuple to a capture checker: a
    // frame of either turned away lets both out first, oldest first.
    let mut b = Flow::new(1, false);
    let mut c = b.clone_with_mac();
    let mut g = gro(GroConfig::default());
    let (sb, sc) = (b.next(MSS), c.next(MSS));
    let mut pad = c.next(MSS);
    pad.segs[0].extend_from_slice(&[0; 6]);
    let out = feed(&mut g, vec![sb, sc, pad]);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].ids, vec![1_000_001]);
    assert_eq!(out[1].ids, vec![1_500_001]);
    assert_eq!(g.held(), 0);
}

#[test]
fn a_later_fragment_flushes_every_flow_between_its_addresses() {
    // A fragment past the first has no ports: it may belong to any flow
    // between its hosts, so all of them leave before it, oldest first.
    let mut a = Flow::new(1, false);
    let mut b = Flow::new(1, false);
    b.spec.sport += 1;
    b.id = 9;
    b.next_tag = 9_000_000;
    let mut other = Flow::new(2, false);
    let mut g = gro(GroConfig::default());
    let (sa, sb, so) = (a.next(MSS), b.next(MSS), other.next(MSS));
    let mut frag = a.next(MSS);
    frag.segs[0][21] = 0x10;
    let out = feed(&mut g, vec![sa, sb, so, frag]);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].ids, vec![1_000_001]);
    assert_eq!(out[1].ids, vec![9_000_001]);
    assert_eq!(flush_count(&g, Flush::Unmergeable), 2);
    assert_eq!(g.held(), 1, "the flow between other hosts stays");
}

#[test]
fn flows_made_to_collide_pass_through_beyond_the_probe_bound() {
    // Flows whose hashes, under a key an attacker learnt, share one home
    // in the table's index: the first table::MAX_PROBE are held, the rest pass
    // through unheld and counted, in order, and lookups stay bounded.
    let cfg = GroConfig {
        flows: 64,
        flow_cache: 64,
        ..GroConfig::default()
    };
    let known = HashKey::fixed([3, 5, 7, 11]);
    let home_mask = (cfg.table_entries() * 4).next_power_of_two() as u32 - 1;
    let key_of = |f: &Flow| {
        let mut probe = Flow::new(f.id, false);
        probe.spec = f.spec.clone();
        let b = probe.next(MSS).bytes();
        let t = Tcp::parse(&b, b.len(), false).unwrap();
        FlowKey::new(&Fields::new(&b, t)).hash(&known) & home_mask
    };
    let mut flows = Vec::new();
    let target = key_of(&Flow::new(0, false));
    let mut i = 0u32;
    while flows.len() < table::MAX_PROBE + 8 {
        i += 1;
        let mut f = Flow::new(0, false);
        f.spec.sport = i as u16;
        f.id = i;
        f.next_tag = i as u64 * 1_000_000;
        if key_of(&f) == target {
            flows.push(f);
        }
    }
    let mut g: Gro<VecBuf> = Gro::with_hash_key(cfg, known);
    let segs: Vec<VecBuf> = flows.iter_mut().map(|f| f.next(MSS)).collect();
    let out = feed(&mut g, segs);
    assert_eq!(g.held(), table::MAX_PROBE);
    assert_eq!(out.len(), 8, "the flows beyond the bound, at once");
    assert_eq!(g.stats().pass[Pass::ProbeLimit.index()], 8);
    // Their next segments: the held flows merge; the others pass again.
    let segs: Vec<VecBuf> = flows.iter_mut().map(|f| f.next(MSS)).collect();
    let out = feed(&mut g, segs);
    assert_eq!(out.len(), 8);
    let held = flush(&mut g);
    assert_eq!(held.len(), table::MAX_PROBE);
    assert!(
        held.iter().all(|p| p.ids.len() == 2),
        "each held flow merged two"
    );
}

#[test]
fn non_tcp_frames_do_not_flush() {
    let mut f = Flow::new(1, false);
    let mut g = gro(GroConfig::default());
    let a = f.next(MSS);
    let mut udp = f.next(100);
    udp.segs[0][23] = 17;
    let out = feed(&mut g, vec![a, udp]);
    assert_eq!(out.len(), 1);
    assert_eq!(g.held(), 1);
}

#[test]
fn config_ranges_name_the_setting_refused() {
    use crate::Setting;
    assert!(GroConfig::default().validate().is_ok());
    let refused = |c: GroConfig| c.validate().unwrap_err().setting;
    let d = GroConfig::default();
    assert_eq!(refused(GroConfig { max_frags: 0, ..d }), Setting::MaxFrags);
    assert_eq!(
        refused(GroConfig {
            max_frags: MAX_FRAGS + 1,
            ..d
        }),
        Setting::MaxFrags
    );
    assert_eq!(
        refused(GroConfig {
            max_size: 1499,
            ..d
        }),
        Setting::MaxSize
    );
    assert_eq!(refused(GroConfig { flows: 0, ..d }), Setting::Flows);
    assert_eq!(
        refused(GroConfig {
            flow_cache: 16385,
            ..d
        }),
        Setting::FlowCache
    );
    let e = GroConfig {
        max_frags: 600,
        ..d
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "GroConfig::max_frags 600: out of range: give 1..=512 (Linux uses 17)"
    );
}

/// An untagged IPv4 layout whose headers end at `payload`.
fn plain_ipv4(payload: u16) -> Tcp {
    Tcp {
        l3: 14,
        l4: 34,
        payload,
        ..Default::default()
    }
}

#[test]
fn masks_are_shared_per_layout_and_bounded() {
    let mut m = Masks::default();
    let t = plain_ipv4;
    let (a, _) = m.of(&t(66), None).unwrap();
    assert_eq!(m.of(&t(66), None), Some((a, false)), "one mask per layout");
    // IPv4 ID and checksum, TCP seq and checksum vary; PSH may; past the
    // header nothing counts.
    let varies = |i: usize| {
        [18..20, 24..26, 38..42, 50..52]
            .iter()
            .any(|r| r.contains(&i))
    };
    for (i, &b) in m.get(a).iter().enumerate() {
        let want = match i {
            47 => !PSH,
            _ if i >= 66 || varies(i) => 0,
            _ => 0xff,
        };
        assert_eq!(b, want, "mask byte {i}");
    }
    let others: Vec<u8> = (1..MASKS as u16)
        .map(|i| m.of(&t(66 + 4 * i), None).unwrap().0)
        .collect();
    assert!(others.iter().all(|&i| i != a), "a mask of its own each");
    assert_eq!(
        m.of(&t(66), None),
        Some((a, false)),
        "known layouts are still found"
    );
    assert_eq!(
        m.of(&t(54), None),
        None,
        "full, every mask used lately: no template"
    );
    // Long after, a new layout takes the least recently used mask (the
    // second layout's: the first is used again).
    for _ in 0..MASK_AGE {
        m.of(&t(66), None).unwrap();
    }
    assert_eq!(
        m.of(&t(54), None),
        Some((others[0], true)),
        "taken from the LRU layout"
    );
    assert_eq!(m.of(&t(54), None), Some((others[0], false)));
    assert_eq!(
        m.of(&t(66), None),
        Some((a, false)),
        "a layout in use keeps its mask"
    );
}

#[test]
fn a_plain_layout_is_found_as_of_finds_it_and_never_a_tunnels() {
    let mut m = Masks::default();
    let t = plain_ipv4;
    let o = crate::wire::Outer {
        l3: 14,
        l4: 34,
        inner: 50,
        ipv6: false,
        kind: crate::wire::TunnelKind::Vxlan,
    };
    assert_eq!(m.known_plain(&t(66)), None, "nothing known yet");
    let (tunnel, _) = m.of(&t(66), Some(o)).unwrap();
    assert_eq!(m.known_plain(&t(66)), None, "only in a tunnel");
    let (a, _) = m.of(&t(66), None).unwrap();
    assert_ne!(a, tunnel);
    assert_eq!(m.known_plain(&t(66)), Some(a));
    assert_eq!(m.known_plain(&t(70)), None);
    // Found, it counts as used, as with `of`: the layout keeps its mask.
    let others: Vec<u8> = (2..MASKS as u16)
        .map(|i| m.of(&t(66 + 4 * i), None).unwrap().0)
        .collect();
    for _ in 0..MASK_AGE {
        assert_eq!(m.known_plain(&t(66)), Some(a));
    }
    assert_eq!(m.of(&t(54), None), Some((tunnel, true)), "the LRU's");
    assert_eq!(m.known_plain(&t(54)), Some(tunnel), "now a plain one's");
    assert_eq!(m.known_plain(&t(66)), Some(a));
    assert_eq!(m.known_plain(&t(74)), Some(others[0]));
}

/// Pads an untagged or tagged IPv4 segment's TCP options with `k` NOP
/// words (another header layout), lengths and checksums kept right.
fn with_nops(b: &mut VecBuf, k: usize) {
    let f = &mut b.segs[0];
    let t = Tcp::parse(f, f.len(), false).unwrap();
    let (l3, l4, pay) = (t.l3 as usize, t.l4 as usize, t.payload as usize);
    f.splice(pay..pay, std::iter::repeat_n(1u8, 4 * k));
    f[l4 + 12] = (((pay - l4 + 4 * k) / 4) as u8) << 4;
    let tot = u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) + 4 * k as u16;
    f[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
    f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = csum::ipv4_header(&f[l3..l4]);
    f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    f[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
    let t = Tcp::parse(f, f.len(), true).unwrap();
    let tcp_len = (f.len() - l4) as u32;
    let sum = csum::add(Fields::new(f, t).pseudo_sum(tcp_len), csum::sum(&f[l4..]));
    f[l4 + 16..l4 + 18].copy_from_slice(&csum::finish(sum).to_be_bytes());
}

#[test]
fn flows_whose_keys_share_a_hash_stay_apart() {
    // Two flows found by search whose keys hash alike under a known key:
    // the lookup by layout takes the first entry under the hash, and only a
    // merge (whose template covers the key) or the key itself makes it the
    // segment's flow.
    let hk = HashKey::fixed([0x51, 0x52, 0x53, 0x54]);
    let hash = |i: u32| {
        let b = Flow::new(i, false).next(8).bytes();
        let t = Tcp::parse(&b, b.len(), false).unwrap();
        FlowKey::new(&Fields::new(&b, t)).hash(&hk)
    };
    let mut seen = std::collections::HashMap::new();
    let (i, j) = (1..400_000u32)
        .find_map(|j| seen.insert(hash(j), j).map(|i| (i, j)))
        .expect("a pair of flows with one hash");
    let mut g = Gro::with_hash_key(GroConfig::default(), hk);
    let (mut a, mut b) = (Flow::new(i, false), Flow::new(j, false));
    let mut segs = vec![a.next(MSS), a.next(MSS)];
    segs.extend((0..3).map(|_| b.next(MSS)));
    segs.push(a.next(MSS));
    assert!(feed(&mut g, segs).is_empty(), "both held");
    let out = flush(&mut g);
    assert_eq!(out.len(), 2, "one packet a flow");
    for p in &out {
        assert_eq!(p.ids.len(), 3);
        verify(&p.bytes()).unwrap();
    }
}

#[test]
fn flows_taking_turns_are_looked_up_at_once_until_one_sends_a_run() {
    let mut g = gro(GroConfig::default());
    let mut flows: Vec<Flow> = (1..=3).map(|i| Flow::new(i, false)).collect();
    // Two segments each first: their templates are made.
    for f in flows.iter_mut() {
        let run = vec![f.next(MSS), f.next(MSS)];
        assert!(feed(&mut g, run).is_empty());
    }
    assert!(g.first.is_some(), "runs of one flow: tried first");
    for _ in 0..3 {
        for f in flows.iter_mut() {
            assert!(feed(&mut g, vec![f.next(MSS)]).is_empty());
        }
    }
    assert_eq!(g.first, None, "flows take turns: no flow tried first");
    let run = vec![flows[0].next(MSS), flows[0].next(MSS)];
    assert!(feed(&mut g, run).is_empty());
    assert!(
        g.first.is_some() && g.first == g.last,
        "a run of one flow: its flow tried first again"
    );
    let out = flush(&mut g);
    assert_eq!(out.len(), 3);
    let mut segs: Vec<usize> = out.iter().map(|p| p.ids.len()).collect();
    segs.sort();
    assert_eq!(segs, [5, 5, 7], "every segment merged");
    for p in &out {
        verify(&p.bytes()).unwrap();
    }
}

#[test]
fn early_layouts_do_not_keep_the_fast_path_from_later_ones() {
    // 20 flows of 20 other header layouts (0-2 VLAN tags, 0-6 NOP words),
    // each held once, then a while later a bulk flow of a layout of its
    // own: its template gets a mask (the least recently used one) and is in
    // force, and no template is left with a mask it lost.
    let mut g = gro(GroConfig::default());
    let mut early = Vec::new();
    for i in 0..20u32 {
        let mut f = Flow::new(100 + i, false);
        f.spec.vlans = (0..i % 3).map(|v| v as u16 + 1).collect();
        let mut p = f.next(MSS);
        with_nops(&mut p, (i / 3) as usize);
        verify(&p.bytes()).unwrap();
        early.push(p);
    }
    let _ = feed(&mut g, early);
    let _ = flush(&mut g);
    // Then long enough (heads of the first layout only) for the other
    // early layouts' masks to age.
    for i in 0..MASK_AGE as u32 {
        let mut f = Flow::new(1000 + i, false);
        let _ = feed(&mut g, vec![f.next(MSS)]);
    }
    let _ = flush(&mut g);
    let mut bulk = Flow::new(1, false);
    bulk.spec.vlans = vec![1, 2];
    let segs: Vec<VecBuf> = (0..20)
        .map(|_| {
            let mut p = bulk.next(MSS);
            with_nops(&mut p, 7);
            p
        })
        .collect();
    let _ = feed(&mut g, segs);
    let s = g.last.expect("the bulk flow's slot");
    assert!(
        g.table.entry(s).tmpl.on,
        "the bulk flow's template is in force"
    );
    // The early flows' templates whose mask went to the bulk flow's layout
    // are off: none compares under another layout's mask.
    let m = g.table.entry(s).tmpl.mask;
    for e in 0..g.table.capacity() as u16 {
        let t = &g.table.entry(e).tmpl;
        assert!(
            !t.on || t.mask != m || e == s,
            "entry {e} kept a stale mask"
        );
    }
    let out = flush(&mut g);
    assert_eq!(out.len(), 1);
    verify(&out[0].bytes()).unwrap();
    assert_eq!(
        g.stats().merged_segments,
        16 + 2,
        "17 in one packet, then 3 in the next"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    struct Case {
        flows: u32,
        mss: Vec<usize>,
        bytes: Vec<usize>,
        psh_one_in: u32,
        ts_change_one_in: u32,
        ipv6_mask: u64,
        bursts: Vec<usize>,
        max_frags: u16,
        split: Option<usize>,
        /// Headers in a buffer of their own, the payload after them (a
        /// NIC's header split), `split` or not: each segment with even
        /// odds, so that split heads meet segments in one buffer.
        header_split: bool,
        trust: bool,
        /// Flows keep one IP ID (with DF, as Linux allows) instead of counting.
        fixed_ids: bool,
        /// One segment in this many carries CWR (0: none).
        cwr_one_in: u32,
        seed: u64,
        /// Flows the table holds (small: evictions) and remembers (small:
        /// ghosts taken over).
        table: usize,
        cache: usize,
        /// Flow i is carried by a tunnel (VXLAN or Geneve) when bit i is set.
        tunnel_mask: u64,
        /// What a NIC said of the checksums: 0 nothing, 1 both good, 2 TCP
        /// good (IPv4 header unknown), 3 each segment one of those or the
        /// IPv4 header good alone.
        nic: u8,
    }

    fn case() -> impl Strategy<Value = Case> {
        (1u32..=64).prop_flat_map(|flows| {
            (
                Just(flows),
                proptest::collection::vec(200usize..=1460, flows as usize),
                proptest::collection::vec(0usize..40_000, flows as usize),
                0u32..12,
                0u32..30,
                any::<u64>(),
                proptest::collection::vec(1usize..64, 1..20),
                // Small budgets half the time: a head of several buffers meets them.
                prop_oneof![1u16..=4, 1u16..=64],
                proptest::option::of(600usize..1400),
                any::<bool>(),
                (
                    any::<bool>(),
                    0u32..40,
                    any::<u64>(),
                    prop_oneof![Just(64usize), 1usize..12],
                    prop_oneof![Just(0usize), 1usize..16, Just(1024)],
                    prop_oneof![Just(0u64), any::<u64>()],
                    0u8..4,
                    proptest::bool::weighted(0.25),
                ),
            )
                .prop_map(
                    |(
                        flows,
                        mss,
                        bytes,
                        psh,
                        ts,
                        ipv6_mask,
                        bursts,
                        max_frags,
                        split,
                        trust,
                        (fixed_ids, cwr_one_in, seed, table, cache, tunnel_mask, nic, header_split),
                    )| Case {
                        flows,
                        mss,
                        bytes,
                        psh_one_in: psh,
                        ts_change_one_in: ts,
                        ipv6_mask,
                        bursts,
                        max_frags,
                        split,
                        header_split,
                        trust,
                        fixed_ids,
                        cwr_one_in,
                        seed,
                        table,
                        cache,
                        tunnel_mask,
                        nic,
                    },
                )
        })
    }

    /// xorshift: deterministic per case.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// The NIC's flags for one segment of a case with `nic` (see `Case`).
    fn nic_hints(nic: u8, seed: &mut u64) -> RxHints {
        use CsumHint::{Good, Unknown};
        let pick = if nic == 3 { rng(seed) % 4 } else { nic as u64 };
        let (ip, l4) = match pick {
            0 => (Unknown, Unknown),
            1 => (Good, Good),
            2 => (Unknown, Good),
            _ => (Good, Unknown),
        };
        RxHints { ip, l4 }
    }

    /// What the generator knows, independently of GRO's own flow logic:
    /// the flow each input (by id) belongs to, and each flow's bytes.
    struct Oracle {
        flow_of: HashMap<u64, u32>,
        bytes: HashMap<u32, Vec<u8>>,
    }

    /// Whether the fast path gives what the full path gives for `input`
    /// (whose packets' flows `flow_of` names): segment by segment, the same
    /// packets in the same order, byte for byte, with the same layout and
    /// counters. Taking each poll whole, the same per flow: the fast path's
    /// pair leaves at once where the full path holds its head until the
    /// second segment (another flow's packet may leave in between), and
    /// leaves no ghost, so the flow's next head is built where the full
    /// path takes it from the ghost (heads are counted together), and
    /// evicts no other flow's packet from a full table (such runs are not
    /// compared).
    fn as_on_the_full_path(
        c: &Case,
        input: Vec<VecBuf>,
        flow_of: &HashMap<u64, u32>,
    ) -> Result<(), TestCaseError> {
        let (fast, a) = run(c, input.clone(), Take::Segments);
        let (full, b) = run(c, input.clone(), Take::FullPathOnly);
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            prop_assert_eq!(&x.ids, &y.ids);
            prop_assert_eq!(x.bytes(), y.bytes());
            prop_assert_eq!(x.gso, y.gso);
        }
        prop_assert_eq!(fast.stats(), full.stats());
        let (fast, a) = run(c, input.clone(), Take::Polls);
        let (full, b) = run(c, input, Take::FullPathPolls);
        let evicted = |g: &Gro<VecBuf>| g.stats().flush[Flush::TableFull as usize] != 0;
        if evicted(&fast) || evicted(&full) {
            // Without a table entry, a pair evicts no other flow's packet.
            return Ok(());
        }
        let packet = |o: &VecBuf| (o.ids.clone(), o.bytes(), o.gso);
        prop_assert!(
            per_flow(&a, flow_of, packet) == per_flow(&b, flow_of, packet),
            "a flow's packets differ"
        );
        prop_assert_eq!(heads_as_one(fast.stats()), heads_as_one(full.stats()));
        Ok(())
    }

    /// What `packet` says of each packet of `out`, per flow (`flow_of`
    /// names each input's), in the order they left.
    fn per_flow<T>(
        out: &[VecBuf],
        flow_of: &HashMap<u64, u32>,
        packet: impl Fn(&VecBuf) -> T,
    ) -> HashMap<u32, Vec<T>> {
        let mut m: HashMap<u32, Vec<T>> = HashMap::new();
        for o in out {
            m.entry(flow_of[&o.ids[0]]).or_default().push(packet(o));
        }
        m
    }

    fn heads_as_one(s: &GroStats) -> GroStats {
        GroStats {
            heads_built: s.heads_built + s.heads_cached,
            heads_cached: 0,
            ..*s
        }
    }

    /// Per flow, a random byte stream cut into segments; the flows
    /// interleaved in random runs. Also the oracle of what they are.
    fn inputs(c: &Case) -> (Vec<VecBuf>, Oracle) {
        let mut seed = c.seed | 1;
        let mut queues: Vec<std::collections::VecDeque<VecBuf>> = Vec::new();
        let mut oracle = Oracle {
            flow_of: HashMap::new(),
            bytes: HashMap::new(),
        };
        let mut tag = 0u64;
        for i in 0..c.flows {
            let mut f = Flow::new(i, c.ipv6_mask >> i & 1 == 1);
            // Two tunnels, several flows in each; outer IDs counting per flow.
            let tunnel = (c.tunnel_mask >> i & 1 == 1).then(|| tunnel::spec_of(i));
            let mut outer_id = 1u16;
            let mut q = std::collections::VecDeque::new();
            let mut left = c.bytes[i as usize];
            let mut all = Vec::new();
            let mut tsval = 1000u32;
            while left > 0 {
                let psh = c.psh_one_in > 0 && rng(&mut seed).is_multiple_of(c.psh_one_in as u64);
                let mut n = left.min(c.mss[i as usize]);
                // Half the PSH segments end a short write: shorter.
                if psh && rng(&mut seed) & 1 == 1 {
                    n = 1 + rng(&mut seed) as usize % n;
                }
                left -= n;
                if c.ts_change_one_in > 0
                    && rng(&mut seed).is_multiple_of(c.ts_change_one_in as u64)
                {
                    tsval += 1;
                }
                let cwr = c.cwr_one_in > 0 && rng(&mut seed).is_multiple_of(c.cwr_one_in as u64);
                let seq = f.seq;
                let mut b = f.next_with(n, |s| {
                    s.tsval = tsval;
                    if psh {
                        s.flags |= TCP_PSH;
                    }
                    if cwr {
                        s.flags |= TCP_CWR;
                    }
                    if c.fixed_ids {
                        s.ip_id = 7;
                    }
                });
                all.extend(f.payload(seq, n));
                if let Some(t) = &tunnel {
                    b = VecBuf::new(0, t.encapsulate(&b.bytes(), outer_id));
                    outer_id = outer_id.wrapping_add(1);
                }
                tag += 1;
                b.ids = vec![tag];
                oracle.flow_of.insert(tag, i);
                if c.header_split && rng(&mut seed) & 1 == 1 {
                    let bytes = b.bytes();
                    let (hdr, payload) = bytes.split_at(bytes.len() - n);
                    let mut segs = vec![hdr.to_vec()];
                    segs.extend(payload.chunks(c.split.unwrap_or(n)).map(|p| p.to_vec()));
                    b = VecBuf {
                        segs,
                        ids: b.ids.clone(),
                        ..Default::default()
                    };
                } else if let Some(room) = c.split {
                    b = VecBuf {
                        ids: b.ids.clone(),
                        ..VecBuf::split(tag, &b.bytes(), room)
                    };
                }
                b.hints = nic_hints(c.nic, &mut seed);
                q.push_back(b);
            }
            if !q.is_empty() {
                oracle.bytes.insert(i, all);
            }
            queues.push(q);
        }
        // Interleave: take from random flows, in random run lengths.
        let mut input = Vec::new();
        loop {
            let live: Vec<usize> = (0..queues.len())
                .filter(|&i| !queues[i].is_empty())
                .collect();
            if live.is_empty() {
                break;
            }
            let i = live[rng(&mut seed) as usize % live.len()];
            let run = 1 + rng(&mut seed) as usize % 8;
            for _ in 0..run {
                if let Some(p) = queues[i].pop_front() {
                    input.push(p);
                }
            }
        }
        (input, oracle)
    }

    /// How `run` gives GRO its input.
    #[derive(Clone, Copy, PartialEq)]
    enum Take {
        /// Segment by segment (`receive`).
        Segments,
        /// The same, with the fast path off.
        FullPathOnly,
        /// Each burst whole (`receive_poll`).
        Polls,
        /// The same, with the fast path off.
        FullPathPolls,
        /// Each burst packet by packet (`receive_burst`).
        Bursts,
    }

    /// Feeds `input` in the case's bursts, flushing after each.
    fn run(c: &Case, input: Vec<VecBuf>, take: Take) -> (Gro<VecBuf>, Vec<VecBuf>) {
        let cfg = GroConfig {
            max_frags: c.max_frags,
            flows: c.table,
            flow_cache: c.cache,
            csum: if c.trust {
                CsumMode::Trust
            } else {
                CsumMode::Verify
            },
            ..Default::default()
        };
        let mut g = gro(cfg);
        g.full_path_only = matches!(take, Take::FullPathOnly | Take::FullPathPolls);
        let mut out = Vec::new();
        let mut it = input.into_iter().peekable();
        let mut bi = 0;
        let mut burst = Vec::new();
        while it.peek().is_some() {
            let n = c.bursts[bi % c.bursts.len()];
            bi += 1;
            if matches!(take, Take::Polls | Take::FullPathPolls | Take::Bursts) {
                burst.extend(it.by_ref().take(n));
                if take == Take::Bursts {
                    g.receive_burst(&mut burst, bi as u64, &mut |b| out.push(b));
                } else {
                    g.receive_poll(&mut burst, bi as u64, &mut |b| out.push(b));
                }
                assert!(burst.is_empty());
                assert!(g.held() <= c.table, "more held than --gro-flows");
            } else {
                for p in it.by_ref().take(n) {
                    g.receive(p, bi as u64, &mut |b| out.push(b));
                    assert!(g.held() <= c.table, "more held than --gro-flows");
                }
            }
            g.flush_all(&mut |b| out.push(b));
        }
        (g, out)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

        /// Random byte streams per flow, segmented, interleaved, fed in random
        /// bursts: each flow's payload comes out byte-identical and in order,
        /// every output verifies, limits hold, every input buffer comes out once.
        #[test]
        fn streams_survive_gro(c in case()) {
            let (input, oracle) = inputs(&c);
            let n_in = input.len() as u64;
            let (g, out) = run(&c, input, Take::Segments);
            // Conservation: every input buffer exactly once.
            let mut ids: Vec<u64> = out.iter().flat_map(|o| o.ids.iter().copied()).collect();
            prop_assert_eq!(ids.len() as u64, n_in);
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len() as u64, n_in);
            prop_assert_eq!(g.stats().segments_in, n_in);
            prop_assert_eq!(g.stats().packets_out, out.len() as u64);
            // Per flow (as the generator made them, not as GRO keys them),
            // bytes in order; every packet of one flow, valid, within limits.
            let mut got: HashMap<u32, Vec<u8>> = HashMap::new();
            for o in &out {
                let bytes = o.bytes();
                let t = verify(&bytes).map_err(TestCaseError::fail)?;
                // A single frame larger than the budget passes as it is.
                prop_assert!(o.segs.len() <= c.max_frags as usize || o.ids.len() == 1);
                prop_assert!(bytes.len() - t.l3 as usize <= 65535, "an IP packet past 64 KiB");
                let flow = oracle.flow_of[&o.ids[0]];
                prop_assert!(
                    o.ids.iter().all(|id| oracle.flow_of[id] == flow),
                    "a packet made of several flows' segments"
                );
                got.entry(flow).or_default().extend_from_slice(&bytes[t.payload as usize..]);
            }
            for (k, v) in &oracle.bytes {
                prop_assert!(got.get(k) == Some(v), "flow {}'s bytes differ", k);
            }
            prop_assert_eq!(got.len(), oracle.bytes.len());
        }

        /// The fast path (template match, restart in a freed slot) decides
        /// exactly as the full path does: the same packets out, byte for
        /// byte, with the same layout and the same counters.
        #[test]
        fn the_fast_path_changes_nothing(c in case()) {
            let (input, oracle) = inputs(&c);
            as_on_the_full_path(&c, input, &oracle.flow_of)?;
        }

        /// And so through loss and retransmission: one segment in `every`
        /// lost, and another sent again two places later.
        #[test]
        fn the_fast_path_changes_nothing_through_loss(c in case(), every in 3usize..40) {
            let (input, oracle) = inputs(&c);
            let mut lossy = Vec::new();
            for (i, p) in input.iter().enumerate() {
                if i % every != every - 1 {
                    lossy.push(p.clone());
                }
                if i % every == every / 2 && i >= 2 {
                    lossy.push(input[i - 2].clone());
                }
            }
            as_on_the_full_path(&c, lossy, &oracle.flow_of)?;
        }

        /// Taking each poll whole changes no flow's packets: the same
        /// packets per flow, byte for byte, in the same order, but that
        /// those alone in their poll leave at once; each packet leaving
        /// alone is one the segment-by-segment run flushed as one segment
        /// (unless that run evicted flows from a full table: fewer flows
        /// held, fewer evictions, other merges).
        #[test]
        fn taking_a_poll_whole_changes_no_flows_packets(c in case()) {
            let (input, oracle) = inputs(&c);
            let (one, a) = run(&c, input.clone(), Take::Segments);
            let (whole, b) = run(&c, input, Take::Polls);
            prop_assert_eq!(whole.stats().segments_in, one.stats().segments_in);
            prop_assert_eq!(whole.stats().packets_out, b.len() as u64);
            if one.stats().flush[Flush::TableFull as usize] != 0 {
                return Ok(());
            }
            // Each packet's inputs and bytes.
            let packet = |o: &VecBuf| (o.ids.clone(), o.bytes());
            prop_assert!(
                per_flow(&a, &oracle.flow_of, packet) == per_flow(&b, &oracle.flow_of, packet),
                "a flow's packets differ"
            );
            let alone = whole.stats().pass[Pass::Alone.index()];
            prop_assert!(alone <= one.stats().flush[Flush::EndOfPoll as usize]);
            prop_assert_eq!(a.len(), b.len());
        }

        /// A burst taken packet by packet (`receive_burst`) gives the same
        /// packets in the same order, and the same counters, as `receive`
        /// on each.
        #[test]
        fn a_burst_gives_the_packets_its_segments_give(c in case()) {
            let (input, _) = inputs(&c);
            let packets = |out: Vec<VecBuf>| -> Vec<(Vec<u64>, Vec<u8>)> {
                out.into_iter().map(|o| (o.ids.clone(), o.bytes())).collect()
            };
            let (g1, one) = run(&c, input.clone(), Take::Segments);
            let (gb, bursts) = run(&c, input, Take::Bursts);
            prop_assert!(packets(one) == packets(bursts), "receive_burst differs from receive");
            prop_assert_eq!(g1.stats(), gb.stats(), "and its counters");
        }

        /// Arbitrary bytes in arbitrary buffers never panic, and come back.
        #[test]
        fn arbitrary_frames_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..40), room in 1usize..128) {
            let mut g = gro(GroConfig { flows: 4, ..Default::default() });
            let mut out = Vec::new();
            let n = frames.len();
            for (i, f) in frames.into_iter().enumerate() {
                g.receive(VecBuf::split(i as u64, &f, room), 0, &mut |b| out.push(b));
            }
            g.flush_all(&mut |b| out.push(b));
            prop_assert_eq!(out.iter().map(|o| o.ids.len()).sum::<usize>(), n);
        }
    }
}

/// Rewrites the IPv4 header checksum of an untagged frame.
fn fix_ip_csum(frame: &mut [u8]) {
    frame[24..26].copy_from_slice(&[0, 0]);
    let c = csum::ipv4_header(&frame[14..34]);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

/// Changes each bit of `b`'s header in turn but those `VARIES` names and
/// checks that no such segment merges after `a` (its flow's head), on
/// either path: the bits the rules leave free are the table's, and the fast
/// path's masks, made from it, hold every other bit to the head's. Trusting
/// checksums, so that a changed bit is judged by the rules alone.
pub(super) fn only_varying_bits_merge(a: &VecBuf, b: &VecBuf, what: &str) {
    let bytes = b.bytes();
    let tunnels = crate::wire::Tunnels::default();
    let (t, outer) = match Tcp::parse(&bytes, bytes.len(), false) {
        Ok(t) => (t, None),
        Err(_) => {
            let (t, o) = Tcp::parse_tunnel(&bytes, bytes.len(), false, &tunnels).unwrap();
            (t, Some(o))
        }
    };
    let varies = |i: usize, m: u8| {
        VARIES.iter().any(|v| {
            v.bits & m != 0
                && (v.hdr.base(&t, outer))
                    .is_some_and(|at| (at + v.at.start..at + v.at.end).contains(&i))
        })
    };
    let trust = GroConfig {
        csum: CsumMode::Trust,
        ..GroConfig::default()
    };
    let merged = |c: VecBuf, full: bool| {
        let mut g = gro(trust);
        g.full_path_only = full;
        feed(&mut g, vec![a.clone(), c]);
        g.stats().merged_segments
    };
    for full in [false, true] {
        assert_eq!(merged(b.clone(), full), 1, "{what}: unchanged, it merges");
    }
    let mut free = 0;
    for i in 0..t.payload as usize {
        for m in (0..8).map(|k| 1u8 << k) {
            if varies(i, m) {
                free += 1;
                continue;
            }
            for full in [false, true] {
                let mut c = b.clone();
                c.segs[0][i] ^= m;
                assert_eq!(
                    merged(c, full),
                    0,
                    "{what}: bit {m:#04x} of byte {i} changed, it merged (full path only {full})"
                );
            }
        }
    }
    // Seq, checksums, urgent pointer, IP length and ID, three flags (and
    // in a tunnel the outer lengths, ID and checksums): nothing else.
    let outer_bits = match outer {
        None => 0,
        Some(o) if o.ipv6 => 16 + 32,
        Some(_) => 16 * 3 + 32,
    };
    let inner_bits = if t.ipv6 { 16 } else { 48 };
    assert_eq!(free, 32 + 16 + 16 + 3 + inner_bits + outer_bits, "{what}");
}

#[test]
fn no_header_bit_but_those_the_rules_let_vary_merges() {
    for (ipv6, vlans) in [
        (false, vec![]),
        (true, vec![]),
        (false, vec![7]),
        (true, vec![7, 9]),
    ] {
        let mut f = Flow::new(1, ipv6);
        f.spec.vlans = vlans.clone();
        let (a, b) = (f.next(MSS), f.next(MSS));
        only_varying_bits_merge(&a, &b, &format!("IPv6 {ipv6}, tags {vlans:?}"));
    }
}

#[test]
fn the_vlan_tag_type_is_part_of_the_flow() {
    // 802.1Q and 802.1ad tags with the same TCI are different MAC headers:
    // Linux never merges across them, nor does either flush the other.
    for full in [false, true] {
        let mut f = Flow::new(1, false);
        f.spec.vlans = vec![7];
        let mut g = gro(GroConfig::default());
        g.full_path_only = full;
        let a = f.next(MSS);
        let mut b = f.next(MSS);
        b.segs[0][12..14].copy_from_slice(&crate::wire::ETH_P_8021AD.to_be_bytes());
        let c = f.next(MSS);
        let mut out = feed(&mut g, vec![a, b, c]);
        out.extend(flush(&mut g));
        let merged: Vec<&Vec<u64>> = out.iter().map(|o| &o.ids).collect();
        assert!(
            out.iter().all(|o| o.ids.len() == 1),
            "full path only: {full}: merged across tag types: {merged:?}"
        );
    }
}

#[test]
fn the_ipv4_reserved_flag_flushes_and_passes() {
    for full in [false, true] {
        let mut f = Flow::new(1, false);
        let mut g = gro(GroConfig::default());
        g.full_path_only = full;
        let a = f.next(MSS);
        let mut b = f.next(MSS);
        b.segs[0][20] |= 0x80;
        fix_ip_csum(&mut b.segs[0]);
        let b_copy = b.clone();
        let out = feed(&mut g, vec![a, b]);
        assert_eq!(
            out.len(),
            2,
            "full path only: {full}: held data, then the segment"
        );
        assert_eq!(out[0].ids, vec![1_000_001]);
        assert_eq!(out[1].segs, b_copy.segs, "passes untouched");
        assert_eq!(g.held(), 0);
        assert_eq!(g.stats().pass[Pass::Frame(NotTcp::ReservedFlag).index()], 1);
    }
}

#[test]
fn ipv6_segments_with_extension_headers_leave_after_their_flow() {
    // (next header, the extension header with TCP next, merged with its
    // like): hop-by-hop, destination options and routing headers are
    // stepped over (another header than the held one's: a flow of its own
    // layout, after the held data); a fragment header and AH pass through.
    let kinds: [(u8, Vec<u8>, bool); 5] = [
        (0, vec![6, 0, 1, 4, 0, 0, 0, 0], true),
        (60, vec![6, 0, 1, 4, 0, 0, 0, 0], true),
        (43, vec![6, 0, 4, 0, 0, 0, 0, 0], true),
        (44, vec![6, 0, 0, 0, 0, 0, 0, 9], false),
        (51, vec![6, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1], false),
    ];
    let with_ext = |b: &mut VecBuf, nh: u8, ext: &[u8]| {
        let fr = &mut b.segs[0];
        fr.splice(54..54, ext.iter().copied());
        fr[20] = nh;
        let plen = u16::from_be_bytes([fr[18], fr[19]]) + ext.len() as u16;
        fr[18..20].copy_from_slice(&plen.to_be_bytes());
    };
    for (nh, ext, steps) in kinds {
        for full in [false, true] {
            let mut f = Flow::new(1, true);
            let mut other = Flow::new(2, true);
            let mut g = gro(GroConfig::default());
            g.full_path_only = full;
            let a = f.next(MSS);
            let o = other.next(MSS);
            let mut b = f.next(MSS);
            with_ext(&mut b, nh, &ext);
            let mut c = f.next(MSS);
            with_ext(&mut c, nh, &ext);
            let b_copy = b.clone();
            let mut out = feed(&mut g, vec![a, o, b, c]);
            out.extend(flush(&mut g));
            let what = format!("next header {nh}, full path only {full}");
            let mine: Vec<&VecBuf> = out.iter().filter(|p| p.ids[0] < 2_000_000).collect();
            assert_eq!(mine[0].ids, vec![1_000_001], "{what}: the held data first");
            if steps {
                assert_eq!(mine.len(), 2, "{what}: the two with the header merge");
                assert_eq!(mine[1].ids, vec![1_000_002, 1_000_003], "{what}");
                verify(&mine[1].bytes()).unwrap();
            } else {
                assert_eq!(mine.len(), 3, "{what}: each passes alone, in order");
                assert_eq!(mine[1].segs, b_copy.segs, "{what}: passes untouched");
            }
        }
    }
}

#[test]
fn an_ipv6_packet_counts_its_header_against_the_size_limit() {
    // 45 segments of 1455 B would make a 65547 B IPv6 packet (40 B header,
    // 32 B TCP header): past 64 KiB, which Linux and a TSO port refuse.
    for full in [false, true] {
        let mut f = Flow::new(1, true);
        let mut g = gro(GroConfig {
            max_frags: 64,
            ..GroConfig::default()
        });
        g.full_path_only = full;
        let segs: Vec<VecBuf> = (0..50).map(|_| f.next(1455)).collect();
        let mut out = feed(&mut g, segs);
        out.extend(flush(&mut g));
        for o in &out {
            let b = o.bytes();
            let total = 40 + u16::from_be_bytes([b[18], b[19]]) as usize;
            assert!(
                total <= 65535,
                "full path only {full}: a {total} B IPv6 packet"
            );
        }
        assert_eq!(out[0].ids.len(), 44, "as many segments as fit");
    }
}

mod big;
mod checksums;
mod conformance;
mod poll;
mod reorder;
mod tunnel;
mod udp;

/// Segments per packet out for 4 bulk flows, held across polls of 32
/// frames for 256 bulk segments' time, with `flood` new one-segment flows
/// after each bulk segment (on top: the clock follows the bulk flows); and
/// the table's most held, and its evictions.
fn bulk_under_flood(flood: usize) -> (f64, usize, u64) {
    let cfg = GroConfig {
        flows: 64,
        ..GroConfig::default()
    };
    let mut g = gro(cfg);
    let mut bulk: Vec<Flow> = (0..4).map(|i| Flow::new(i, false)).collect();
    let mut flood_id = 10_000u32;
    let (mut bulk_in, mut bulk_out, mut most) = (0u64, 0u64, 0usize);
    let count = |p: &VecBuf, bulk_out: &mut u64| {
        if p.ids[0] < 4_000_000 {
            *bulk_out += 1;
        }
    };
    let mut frames = Vec::new();
    for n in 0..40_000usize {
        frames.push(bulk[n % 4].next(MSS));
        bulk_in += 1;
        for _ in 0..flood {
            let mut f = Flow::new(flood_id, false);
            f.next_tag = 1u64 << 40 | flood_id as u64;
            flood_id += 1;
            frames.push(f.next(MSS));
        }
    }
    let mut now = 0u64;
    for chunk in frames.chunks(32) {
        for p in chunk.iter().cloned() {
            now += (p.ids[0] < 4_000_000) as u64;
            g.receive(p, now, &mut |p| count(&p, &mut bulk_out));
        }
        most = most.max(g.held());
        g.flush_older(now.saturating_sub(256), &mut |p| count(&p, &mut bulk_out));
    }
    g.flush_all(&mut |p| count(&p, &mut bulk_out));
    (
        bulk_in as f64 / bulk_out as f64,
        most,
        flush_count(&g, Flush::TableFull),
    )
}

#[test]
fn a_flood_of_new_flows_leaves_bulk_flows_merging() {
    let (calm, _, _) = bulk_under_flood(0);
    for every in [1, 2, 4, 8] {
        let (flooded, most, evicted) = bulk_under_flood(every);
        eprintln!("flood {every} per bulk segment: {flooded:.2} vs {calm:.2} segments/packet, {most} held, {evicted} evicted");
        assert!(most <= 64, "memory bounded by --gro-flows");
        assert!(evicted > 0, "the report shows the evictions");
        assert!(
            flooded >= 0.9 * calm,
            "flood {every} per bulk segment: {flooded:.2} segments/packet vs {calm:.2} without"
        );
    }
}

/// The segment's IPv4 header checksum, and nothing else, made wrong.
fn break_ip_checksum(b: &mut VecBuf) {
    b.segs[0][14 + 10] ^= 0x5a;
}

#[test]
fn a_segment_whose_ip_checksum_alone_is_wrong_never_merges_nor_overtakes() {
    // Every field as the flow's next segment would have it (TTL, the next
    // IP ID, a good TCP checksum): only the IPv4 header checksum is off,
    // at every place in a run of six. Verifying or trusting (the NIC said
    // nothing of IP), one segment at a time, a poll whole or a burst held
    // across polls, alone or after a packet of the flow that PSH let out in
    // the same burst: what came before it leaves first, the bad one alone
    // after it, and nothing merges it.
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        for how in ["one by one", "poll", "burst"] {
            for psh_first in [false, true] {
                for at in 0..6 {
                    let mut f = Flow::new(1, false);
                    let mut g = gro(GroConfig {
                        csum,
                        ..GroConfig::default()
                    });
                    let mut pkts = Vec::new();
                    if psh_first {
                        pkts.push(f.next(MSS));
                        pkts.push(f.next_with(MSS, |s| s.flags |= TCP_PSH));
                    }
                    let mut bad_id = 0;
                    for k in 0..6 {
                        let mut p = f.next(MSS);
                        if k == at {
                            break_ip_checksum(&mut p);
                            bad_id = p.ids[0];
                        }
                        pkts.push(p);
                    }
                    let mut out = Vec::new();
                    match how {
                        "one by one" => out = feed(&mut g, pkts),
                        "poll" => g.receive_poll(&mut pkts, 0, &mut |b| out.push(b)),
                        _ => g.receive_burst(&mut pkts, 0, &mut |b| out.push(b)),
                    }
                    out.extend(flush(&mut g));
                    let ids: Vec<Vec<u64>> = out.iter().map(|p| p.ids.clone()).collect();
                    let what = format!("{csum:?}, {how}, PSH first {psh_first}, at {at}: {ids:?}");
                    let all: Vec<u64> = ids.iter().flatten().copied().collect();
                    assert!(all.windows(2).all(|w| w[0] < w[1]), "in order: {what}");
                    let i = ids.iter().position(|p| p.contains(&bad_id)).expect(&what);
                    assert_eq!(ids[i], vec![bad_id], "alone: {what}");
                    assert!(ids.len() <= 5, "the rest merged: {what}");
                    assert_eq!(
                        g.stats().pass[Pass::Frame(NotTcp::BadIpChecksum).index()],
                        1,
                        "counted: {what}"
                    );
                }
            }
        }
    }
}

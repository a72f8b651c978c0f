//! Checksum-only damage: one checksum field of one segment of a flow's run
//! made wrong, nothing else, at every place in the run, verifying and
//! trusting, on either path, however the segments are taken. What each
//! mode may merge is in docs/gro.md (*Checksums*): verifying merges no bad
//! checksum; trusting takes the L4 checksums' word (TCP, UDP, and a
//! tunnel's outer UDP one) but never an IPv4 header's, outer or inner.

use super::tunnel::Tunnelled;
use super::udp::{udp_cfg, Dgrams, DGRAM};
use super::*;
use crate::traffic::TunnelSpec;

/// Segments in the run one of which is damaged.
const RUN: usize = 6;

/// The checksum field that is made wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sum {
    Ip,
    Tcp,
    Udp,
    OuterIp,
    OuterUdp,
    InnerIp,
    InnerTcp,
}

impl Sum {
    /// Whether trusting takes this checksum's word (an L4 one): the
    /// segment then merges as if it were right.
    fn trusted(self) -> bool {
        matches!(self, Sum::Tcp | Sum::Udp | Sum::OuterUdp | Sum::InnerTcp)
    }

    /// The reason a segment with this checksum wrong passes through.
    fn pass(self) -> Pass {
        match self {
            Sum::Ip | Sum::OuterIp | Sum::InnerIp => Pass::Frame(NotTcp::BadIpChecksum),
            Sum::Tcp | Sum::InnerTcp => Pass::BadTcpChecksum,
            Sum::Udp | Sum::OuterUdp => Pass::BadUdpChecksum,
        }
    }
}

/// Every reason a bad checksum is counted under.
const BAD: [Pass; 3] = [
    Pass::Frame(NotTcp::BadIpChecksum),
    Pass::BadTcpChecksum,
    Pass::BadUdpChecksum,
];

/// One flow's frames: the next full-size one, one that ends its packet
/// (PSH; for UDP a short datagram), and the bytes before the payload.
trait Run {
    fn seg(&mut self) -> VecBuf;
    fn ender(&mut self) -> VecBuf;
    fn header_len(&self) -> usize;
}

impl Run for Flow {
    fn seg(&mut self) -> VecBuf {
        self.next(MSS)
    }
    fn ender(&mut self) -> VecBuf {
        self.next_with(MSS, |s| s.flags |= TCP_PSH)
    }
    fn header_len(&self) -> usize {
        self.spec.header_len()
    }
}

impl Run for Tunnelled {
    fn seg(&mut self) -> VecBuf {
        self.next(MSS)
    }
    fn ender(&mut self) -> VecBuf {
        self.next_with(MSS, |s| s.flags |= TCP_PSH)
    }
    fn header_len(&self) -> usize {
        self.tun.header_len() + self.inner.spec.header_len()
    }
}

impl Run for Dgrams {
    fn seg(&mut self) -> VecBuf {
        self.next(DGRAM)
    }
    fn ender(&mut self) -> VecBuf {
        self.next(DGRAM / 2)
    }
    fn header_len(&self) -> usize {
        self.spec.udp_header_len()
    }
}

/// Makes the 16-bit checksum at `at` wrong, and nothing else: never 0 (a
/// UDP checksum of 0 is none) nor its one's-complement twin.
fn damage(b: &mut VecBuf, at: usize) {
    let f = &mut b.segs[0];
    let old = u16::from_be_bytes([f[at], f[at + 1]]);
    let new = if old == 0x5a0f {
        old ^ 0x0f5a
    } else {
        old ^ 0x5a0f
    };
    f[at..at + 2].copy_from_slice(&new.to_be_bytes());
}

/// The ways a run is taken: segment by segment; a poll whole (look-ahead
/// on); a burst held (no end-of-poll flush); and each of the last two
/// split in two, the packets held across the split or not.
const WAYS: [&str; 5] = ["one by one", "poll", "burst", "two polls", "two bursts"];

fn take(g: &mut Gro<VecBuf>, way: &str, mut pkts: Vec<VecBuf>) -> Vec<VecBuf> {
    let mut out = Vec::new();
    match way {
        "one by one" => out = feed(g, pkts),
        "poll" => g.receive_poll(&mut pkts, 0, &mut |b| out.push(b)),
        "burst" => g.receive_burst(&mut pkts, 0, &mut |b| out.push(b)),
        "two polls" => {
            let mut second = pkts.split_off(pkts.len() / 2);
            g.receive_poll(&mut pkts, 0, &mut |b| out.push(b));
            g.flush_all(&mut |b| out.push(b));
            g.receive_poll(&mut second, 0, &mut |b| out.push(b));
        }
        _ => {
            let mut second = pkts.split_off(pkts.len() / 2);
            g.receive_burst(&mut pkts, 0, &mut |b| out.push(b));
            g.receive_burst(&mut second, 0, &mut |b| out.push(b));
        }
    }
    out.extend(flush(g));
    out
}

fn ids(out: &[VecBuf]) -> Vec<Vec<u64>> {
    out.iter().map(|p| p.ids.clone()).collect()
}

/// `packets` with the one holding `id` cut around it: what came before it,
/// it alone, what came after it.
fn cut_out(packets: &[Vec<u64>], id: u64) -> Vec<Vec<u64>> {
    let mut v = Vec::new();
    for p in packets {
        match p.iter().position(|&i| i == id) {
            Some(k) => {
                for part in [&p[..k], &p[k..=k], &p[k + 1..]] {
                    if !part.is_empty() {
                        v.push(part.to_vec());
                    }
                }
            }
            None => v.push(p.clone()),
        }
    }
    v
}

/// Whether a TCP packet (in a tunnel or not) has every checksum right.
fn tcp_ok(b: &[u8]) -> bool {
    verify(b).is_ok()
}

/// Whether a UDP packet has its IPv4 header and UDP checksums right.
fn udp_ok(b: &[u8]) -> bool {
    let Ok(t) = Tcp::parse_udp(b, b.len(), true) else {
        return false;
    };
    let (l3, l4) = (t.l3 as usize, t.l4 as usize);
    let addrs = if t.ipv6 {
        &b[field::at(l3, ipv6::ADDRS)]
    } else {
        &b[field::at(l3, ipv4::ADDRS)]
    };
    let p = csum::pseudo(addrs, crate::wire::IPPROTO_UDP, (b.len() - l4) as u32);
    csum::add(p, csum::sum(&b[l4..])) == 0xffff
}

/// Damages checksum `sum` (at byte `at` of the frame) of one segment of a
/// run of `RUN` from `new_run`, at every place in turn, after a packet of
/// the flow that its ender let out in the same burst or not, each `WAYS`,
/// on either path, verifying and trusting; and holds the output to the
/// same run undamaged, taken the same way:
/// - every segment's bytes leave once, in arrival order;
/// - where the mode does not take the checksum's word, the damaged segment
///   leaves alone (what came before it in its packet first, what came after
///   it next) byte for byte as it came, counted under `sum.pass()`;
/// - where it does (trusting, an L4 checksum), the packets are those of the
///   undamaged run, nothing counted bad, and the damage is carried into
///   the merged checksum (`carried`), not made right;
/// - every other packet is valid (`ok`), every one left alone untouched.
fn damage_everywhere(
    what: &str,
    cfg: GroConfig,
    sum: Sum,
    at: usize,
    new_run: &dyn Fn() -> Box<dyn Run>,
    ok: fn(&[u8]) -> bool,
    carried: bool,
) {
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        for full in [false, true] {
            for way in WAYS {
                for ender_first in [false, true] {
                    for k in 0..RUN {
                        let what = format!(
                            "{what}, {sum:?} wrong, {csum:?}, full path only {full}, {way}, \
                             ender first {ender_first}, at {k}"
                        );
                        let mut r = new_run();
                        let hl = r.header_len();
                        let mut clean = Vec::new();
                        if ender_first {
                            clean.push(r.seg());
                            clean.push(r.ender());
                        }
                        let bad_at = clean.len() + k;
                        clean.extend((0..RUN).map(|_| r.seg()));
                        let mut pkts = clean.clone();
                        damage(&mut pkts[bad_at], at);
                        assert!(!ok(&pkts[bad_at].bytes()), "{what}: damaged");
                        let bad = pkts[bad_at].clone();
                        let run = |pkts| {
                            let mut g = gro(GroConfig { csum, ..cfg });
                            g.full_path_only = full;
                            let out = take(&mut g, way, pkts);
                            (g, out)
                        };
                        let (_, want) = run(clean.clone());
                        let (g, out) = run(pkts.clone());
                        let got = ids(&out);
                        let what = format!("{what}: {got:?}");

                        // Conservation and order, by ids and by bytes.
                        let flat: Vec<u64> = got.iter().flatten().copied().collect();
                        let sent: Vec<u64> = pkts.iter().map(|p| p.ids[0]).collect();
                        assert_eq!(flat, sent, "every segment once, in order: {what}");
                        let bytes = |v: &[VecBuf]| -> Vec<u8> {
                            v.iter().flat_map(|p| p.bytes()[hl..].to_vec()).collect()
                        };
                        assert_eq!(bytes(&out), bytes(&pkts), "the payload: {what}");

                        let trusted = csum == CsumMode::Trust && sum.trusted();
                        let expect = if trusted {
                            ids(&want)
                        } else {
                            cut_out(&ids(&want), bad.ids[0])
                        };
                        assert_eq!(got, expect, "merged only as the rules allow: {what}");
                        for p in &out {
                            if p.ids.len() == 1 {
                                let i = sent.iter().position(|&s| s == p.ids[0]).unwrap();
                                assert_eq!(p.segs, pkts[i].segs, "alone, untouched: {what}");
                            } else if p.ids.contains(&bad.ids[0]) {
                                assert_eq!(
                                    ok(&p.bytes()),
                                    !carried,
                                    "damage carried into the merged packet: {what}"
                                );
                            } else {
                                assert!(ok(&p.bytes()), "a valid merged packet: {what}");
                            }
                        }
                        for why in BAD {
                            let n = g.stats().pass[why.index()];
                            let want = u64::from(!trusted && why == sum.pass());
                            assert_eq!(n, want, "{why:?} counted: {what}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_bad_ip_or_tcp_checksum_anywhere_in_a_run_leaves_alone_untouched_unless_trusted() {
    for ipv6 in [false, true] {
        let spec = FlowSpec::numbered(1, ipv6);
        let l3 = spec.l2_len();
        let l4 = l3 + spec.l3_len();
        let mut sums = vec![(Sum::Tcp, l4 + 16)];
        if !ipv6 {
            sums.push((Sum::Ip, l3 + 10));
        }
        for (sum, at) in sums {
            damage_everywhere(
                &format!("TCP, ipv6 {ipv6}"),
                GroConfig::default(),
                sum,
                at,
                &|| Box::new(Flow::new(1, ipv6)),
                tcp_ok,
                true,
            );
        }
    }
}

#[test]
fn a_bad_ip_or_udp_checksum_anywhere_in_a_run_of_datagrams_leaves_alone_unless_trusted() {
    for ipv6 in [false, true] {
        let spec = FlowSpec::numbered(1, ipv6);
        let l3 = spec.l2_len();
        let l4 = l3 + spec.l3_len();
        let mut sums = vec![(Sum::Udp, l4 + 6)];
        if !ipv6 {
            sums.push((Sum::Ip, l3 + 10));
        }
        for (sum, at) in sums {
            damage_everywhere(
                &format!("UDP, ipv6 {ipv6}"),
                udp_cfg(),
                sum,
                at,
                &|| Box::new(Dgrams::new(1, ipv6)),
                udp_ok,
                true,
            );
        }
    }
}

#[test]
fn a_bad_checksum_at_either_level_of_a_tunnel_leaves_alone_unless_trusted_outer_udp_too() {
    // Trusting, the outer UDP checksum is an L4 checksum like the inner
    // TCP one: its word is taken, the segment merges, and the merged
    // packet's outer checksum is made from its inner one (`fix_outer`),
    // which the damage, in the field alone, did not touch: that packet is
    // valid. A damaged inner TCP checksum is carried into the merged one,
    // and so into the outer one when it is set.
    let geneve = |csum| TunnelSpec {
        udp_csum: csum,
        ..TunnelSpec::geneve(1, false, vec![0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4])
    };
    let with_csum = |t: TunnelSpec| TunnelSpec {
        udp_csum: true,
        ..t
    };
    let tunnels = [
        TunnelSpec::vxlan(1, false),
        with_csum(TunnelSpec::vxlan(1, false)),
        geneve(false),
        geneve(true),
        with_csum(TunnelSpec::vxlan(1, true)),
    ];
    for tun in tunnels {
        for inner_v6 in [false, true] {
            let outer_v6 = matches!(tun.outer.addrs, Addrs::V6 { .. });
            let ol3 = tun.outer.l2_len();
            let ol4 = tun.outer.udp_header_len() - 8;
            let il3 = tun.header_len() + 14;
            let il4 = il3 + if inner_v6 { 40 } else { 20 };
            let mut sums = vec![(Sum::InnerTcp, il4 + 16, true)];
            if !inner_v6 {
                sums.push((Sum::InnerIp, il3 + 10, true));
            }
            if !outer_v6 {
                sums.push((Sum::OuterIp, ol3 + 10, true));
            }
            if tun.udp_csum {
                sums.push((Sum::OuterUdp, ol4 + 6, false));
            }
            for (sum, at, carried) in sums {
                let t = tun.clone();
                damage_everywhere(
                    &format!(
                        "{:?} outer v6 {outer_v6} csum {}, inner v6 {inner_v6}",
                        tun.kind, tun.udp_csum
                    ),
                    GroConfig::default(),
                    sum,
                    at,
                    &move || Box::new(Tunnelled::new(1, inner_v6, t.clone())),
                    tcp_ok,
                    carried,
                );
            }
        }
    }
}

#[test]
fn a_run_whose_ipv4_checksums_the_nic_vouched_for_leaves_with_its_bytes_checksum() {
    // The NIC flagged every IPv4 header good, and every one's checksum
    // field is off by the same amount (a header changed after the NIC
    // checked it): the run still follows itself, and merges. A merged
    // packet's header checksum is then made from its bytes as they are,
    // as for a header nothing vouched for: its checksum verifies.
    let l3 = FlowSpec::numbered(1, false).l2_len();
    let vouched = |mut b: VecBuf| {
        b.hints.ip = CsumHint::Good;
        let f = &mut b.segs[0];
        let old = u16::from_be_bytes([f[l3 + 10], f[l3 + 11]]);
        f[l3 + 10..l3 + 12].copy_from_slice(&csum::add(old, 0x1234).to_be_bytes());
        b
    };
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        for way in WAYS {
            for n in [1, RUN] {
                let mut f = Flow::new(1, false);
                let mut run: Vec<VecBuf> = (0..n).map(|_| vouched(f.seg())).collect();
                run.push(vouched(f.ender()));
                let mut g = gro(GroConfig {
                    csum,
                    ..Default::default()
                });
                let out = take(&mut g, way, run);
                let merged: Vec<&VecBuf> = out.iter().filter(|p| p.ids.len() > 1).collect();
                // (A pair split over two polls cannot merge.)
                let splits = way.starts_with("two") && n == 1;
                assert!(
                    splits || !merged.is_empty(),
                    "{csum:?}, {way}, {n}: nothing merged"
                );
                for p in merged {
                    let b = p.bytes();
                    assert_eq!(
                        csum::sum(&b[l3..l3 + 20]),
                        csum::VALID,
                        "{csum:?}, {way}, {n}: packet {:?}",
                        p.ids
                    );
                }
            }
        }
    }
}

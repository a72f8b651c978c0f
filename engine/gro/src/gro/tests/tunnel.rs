//! GRO through VXLAN and Geneve: the outer rules, one test each, on
//! `VecBuf`. (The property tests above carry tunnelled flows too.)

use super::*;
use crate::traffic::TunnelSpec;
use crate::wire::{field::udp, Tunnels};

/// The tunnel of flow `i` in the property tests: three kinds, two
/// tunnels of each (several flows share one).
pub(super) fn spec_of(i: u32) -> TunnelSpec {
    let geneve_opts = vec![0x01, 0x02, 0x03, 0x01, 9, 9, 9, 9];
    match i % 3 {
        0 => TunnelSpec::vxlan(i % 2, false),
        1 => TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::vxlan(i % 2, true)
        },
        _ => TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::geneve(i % 2, false, geneve_opts)
        },
    }
}

/// A flow's segments inside a tunnel, outer IPv4 IDs counting up.
pub(super) struct Tunnelled {
    pub(super) inner: Flow,
    pub(super) tun: TunnelSpec,
    outer_id: u16,
}

impl Tunnelled {
    pub(super) fn new(i: u32, ipv6: bool, tun: TunnelSpec) -> Tunnelled {
        Tunnelled {
            inner: Flow::new(i, ipv6),
            tun,
            outer_id: 500,
        }
    }
    pub(super) fn next_with(&mut self, len: usize, edit: impl FnOnce(&mut Segment)) -> VecBuf {
        let b = self.inner.next_with(len, edit);
        let f = self.tun.encapsulate(&b.bytes(), self.outer_id);
        self.outer_id = self.outer_id.wrapping_add(1);
        VecBuf::new(b.ids[0], f)
    }
    pub(super) fn next(&mut self, len: usize) -> VecBuf {
        self.next_with(len, |_| {})
    }
}

/// Every kind of tunnel this file tests: VXLAN and Geneve (with options),
/// IPv4 and IPv6 outside, the outer UDP checksum zero and set.
fn kinds() -> Vec<TunnelSpec> {
    let mut v = Vec::new();
    for ipv6 in [false, true] {
        for udp_csum in [false, true] {
            v.push(TunnelSpec {
                udp_csum,
                ..TunnelSpec::vxlan(1, ipv6)
            });
            v.push(TunnelSpec {
                udp_csum,
                ..TunnelSpec::geneve(
                    1,
                    ipv6,
                    vec![0x01, 0x02, 0x80, 0x02, 1, 2, 3, 4, 5, 6, 7, 8],
                )
            });
        }
    }
    v
}

fn both_paths(mut test: impl FnMut(Gro<VecBuf>, &str)) {
    for full in [false, true] {
        let mut g = gro(GroConfig::default());
        g.full_path_only = full;
        test(g, &format!("full path only {full}"));
    }
}

#[test]
fn segments_in_a_tunnel_merge_into_one_packet_right_at_both_levels() {
    for tun in kinds() {
        for inner_v6 in [false, true] {
            let what = format!("{tun:?} inner v6 {inner_v6}");
            let mut f = Tunnelled::new(1, inner_v6, tun.clone());
            let want = f.inner.payload(f.inner.seq, 5 * MSS);
            let mut g = gro(GroConfig::default());
            assert!(feed(&mut g, (0..5).map(|_| f.next(MSS)).collect()).is_empty());
            let out = flush(&mut g);
            assert_eq!(out.len(), 1, "{what}");
            let b = out[0].bytes();
            let t = verify(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(&b[t.payload as usize..], &want[..], "{what}");
            let udp_csum = field::read16(&b, tun.outer.udp_header_len() - 8, udp::CHECKSUM);
            assert_eq!(
                udp_csum != 0,
                tun.udp_csum,
                "{what}: a checksum stays set or zero"
            );
            let gso = out[0].gso.unwrap();
            let outer_l2 = tun.outer.l2_len() as u16;
            assert_eq!(
                (gso.segs, gso.mss as usize, gso.outer_l2_len, gso.outer_ipv6),
                (
                    5,
                    MSS,
                    outer_l2,
                    matches!(tun.outer.addrs, Addrs::V6 { .. })
                ),
                "{what}"
            );
            assert_eq!(
                (gso.outer_l2_len + gso.outer_l3_len + gso.l2_len) as usize,
                t.l3 as usize,
                "{what}: DPDK's tunnel layout"
            );
            assert_eq!(g.stats().merged_segments, 4, "{what}");
        }
    }
}

#[test]
fn the_same_inner_flow_in_two_tunnels_is_two_flows() {
    // Tenants may use the same addresses: the VNI (and the outer headers)
    // tell their flows apart, each merging on its own.
    for geneve in [false, true] {
        let spec = |vni| {
            let mut t = if geneve {
                TunnelSpec::geneve(1, false, Vec::new())
            } else {
                TunnelSpec::vxlan(1, false)
            };
            t.vni = vni;
            t
        };
        let mut a = Tunnelled::new(1, false, spec(10));
        let mut b = Tunnelled::new(1, false, spec(20));
        b.inner.next_tag += 500_000;
        let mut g = gro(GroConfig::default());
        let mut pkts = Vec::new();
        for _ in 0..4 {
            pkts.push(a.next(MSS));
            pkts.push(b.next(MSS));
        }
        assert!(feed(&mut g, pkts).is_empty(), "geneve {geneve}: no flush");
        let out = flush(&mut g);
        assert_eq!(out.len(), 2, "geneve {geneve}");
        for o in &out {
            assert_eq!(o.ids.len(), 4);
            verify(&o.bytes()).unwrap();
        }
        assert_ne!(out[0].ids[0] / 500_000, out[1].ids[0] / 500_000);
    }
}

#[test]
fn a_tunnelled_flow_is_not_its_inner_flow_outside_the_tunnel() {
    let mut t = Tunnelled::new(1, false, TunnelSpec::vxlan(1, false));
    let mut plain = Flow::new(1, false);
    plain.next_tag += 500_000;
    let mut g = gro(GroConfig::default());
    let pkts = vec![t.next(MSS), plain.next(MSS), t.next(MSS), plain.next(MSS)];
    assert!(feed(&mut g, pkts).is_empty());
    let out = flush(&mut g);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|o| o.ids.len() == 2));
}

#[test]
fn an_outer_field_change_flushes_and_order_is_kept() {
    // TTL, TOS, DF: flush; an outer UDP checksum set on one and not the
    // other: flush (Linux: another flow).
    type Edit = fn(&mut TunnelSpec);
    let edits: [(&str, Edit); 4] = [
        ("ttl", |t| t.outer.ttl -= 1),
        ("tos", |t| t.outer.tos = 0x20),
        ("df", |t| t.outer.df = true),
        ("udp checksum", |t| t.udp_csum = true),
    ];
    for (name, edit) in edits {
        both_paths(|mut g, path| {
            let mut f = Tunnelled::new(1, false, TunnelSpec::vxlan(1, false));
            let (a, b) = (f.next(MSS), f.next(MSS));
            edit(&mut f.tun);
            let (c, d) = (f.next(MSS), f.next(MSS));
            let mut out = feed(&mut g, vec![a, b, c, d]);
            out.extend(flush(&mut g));
            let ids: Vec<Vec<u64>> = out.iter().map(|o| o.ids.clone()).collect();
            assert_eq!(
                ids,
                vec![vec![1_000_001, 1_000_002], vec![1_000_003, 1_000_004]],
                "{name}, {path}"
            );
            assert_eq!(flush_count(&g, Flush::OuterMismatch), 1, "{name}, {path}");
            for o in &out {
                verify(&o.bytes()).unwrap();
            }
        });
    }
}

#[test]
fn the_outer_ipv4_id_counts_up_or_stays_fixed_with_df_or_without() {
    // As the inner ID: the second segment decides, and a jump flushes.
    for df in [false, true] {
        let mut tun = TunnelSpec::vxlan(1, false);
        tun.outer.df = df;
        let mut f = Tunnelled::new(1, false, tun);
        let mut g = gro(GroConfig::default());
        let (a, b) = (f.next(MSS), f.next(MSS));
        f.outer_id = f.outer_id.wrapping_add(40);
        let (c, d) = (f.next(MSS), f.next(MSS));
        let mut out = feed(&mut g, vec![a, b, c, d]);
        out.extend(flush(&mut g));
        let sizes: Vec<usize> = out.iter().map(|o| o.ids.len()).collect();
        assert_eq!(sizes, vec![2, 2], "DF {df}: a jump flushes");
        assert_eq!(flush_count(&g, Flush::OuterIpId), 1, "DF {df}");
        for o in &out {
            verify(&o.bytes()).unwrap();
        }
    }
    // A fixed outer ID merges too, DF or not; the packet says so to GSO.
    for df in [false, true] {
        let mut tun = TunnelSpec::vxlan(1, false);
        tun.outer.df = df;
        let mut f = Tunnelled::new(1, false, tun);
        let mut g = gro(GroConfig::default());
        let pkts: Vec<VecBuf> = (0..3)
            .map(|_| {
                f.outer_id = 9;
                f.next(MSS)
            })
            .collect();
        let mut out = feed(&mut g, pkts);
        out.extend(flush(&mut g));
        assert_eq!(out.len(), 1, "DF {df}: a fixed outer ID merges");
        assert!(out[0].gso.unwrap().outer_id_fixed, "DF {df}");
        verify(&out[0].bytes()).unwrap();
    }
}

#[test]
fn a_wrong_outer_udp_checksum_passes_after_its_flows_held_data() {
    for ipv6 in [false, true] {
        let tun = TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::vxlan(1, ipv6)
        };
        let mut f = Tunnelled::new(1, false, tun.clone());
        let mut g = gro(GroConfig::default());
        let (a, b) = (f.next(MSS), f.next(MSS));
        let mut c = f.next(MSS);
        let at = tun.outer.udp_header_len() - 8 + 6;
        c.segs[0][at] ^= 0x10;
        let c_copy = c.segs.clone();
        let d = f.next(MSS);
        let mut out = feed(&mut g, vec![a, b, c, d]);
        out.extend(flush(&mut g));
        let ids: Vec<Vec<u64>> = out.iter().map(|o| o.ids.clone()).collect();
        assert_eq!(
            ids,
            vec![vec![1_000_001, 1_000_002], vec![1_000_003], vec![1_000_004]],
            "ipv6 {ipv6}"
        );
        assert_eq!(out[1].segs, c_copy, "untouched");
        assert_eq!(g.stats().pass[Pass::BadUdpChecksum.index()], 1);
    }
}

#[test]
fn a_nics_good_checksum_flag_is_not_taken_for_the_inner_tcp_checksum() {
    // Which checksum a NIC's L4 flag speaks of in a tunnel depends on the
    // NIC (the outer UDP one, the inner TCP one, or neither): a corrupt
    // inner payload under "good" flags is still found, on either path.
    both_paths(|mut g, what| {
        let mut f = Tunnelled::new(1, false, TunnelSpec::vxlan(1, false));
        let nic = RxHints {
            ip: CsumHint::Good,
            l4: CsumHint::Good,
        };
        let mut segs: Vec<VecBuf> = (0..4).map(|_| f.next(MSS)).collect();
        let last = segs[2].segs[0].len() - 1;
        segs[2].segs[0][last] ^= 0xff;
        for s in &mut segs {
            s.hints = nic;
        }
        let mut out = feed(&mut g, segs);
        out.extend(flush(&mut g));
        let ids: Vec<usize> = out.iter().map(|o| o.ids.len()).collect();
        assert_eq!(ids, [2, 1, 1], "{what}");
        assert_eq!(g.stats().pass[Pass::BadTcpChecksum.index()], 1, "{what}");
    });
}

#[test]
fn a_wrong_outer_ipv4_header_checksum_passes_after_its_flows_held_data() {
    let mut f = Tunnelled::new(1, false, TunnelSpec::vxlan(1, false));
    let mut g = gro(GroConfig::default());
    let (a, b) = (f.next(MSS), f.next(MSS));
    let mut c = f.next(MSS);
    c.segs[0][14 + 8] -= 1; // outer TTL, checksum left as it was
    let mut out = feed(&mut g, vec![a, b, c]);
    out.extend(flush(&mut g));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].ids.len(), 2, "the held data first");
    assert_eq!(
        g.stats().pass[Pass::Frame(NotTcp::BadIpChecksum).index()],
        1
    );
}

#[test]
fn an_inner_frame_gro_turns_away_leaves_after_its_flows_held_data() {
    // An inner IPv4 fragment (MF set) of a held tunnelled flow.
    let mut f = Tunnelled::new(1, false, TunnelSpec::vxlan(1, false));
    let mut other = Tunnelled::new(2, false, TunnelSpec::vxlan(1, false));
    let mut g = gro(GroConfig::default());
    let (a, o) = (f.next(MSS), other.next(MSS));
    let mut b = f.next(MSS);
    let il3 = f.tun.header_len() + 14;
    b.segs[0][il3 + 6] |= 0x20;
    b.segs[0][il3 + 10..il3 + 12].copy_from_slice(&[0, 0]);
    let c = csum::ipv4_header(&b.segs[0][il3..il3 + 20]);
    b.segs[0][il3 + 10..il3 + 12].copy_from_slice(&c.to_be_bytes());
    let out = feed(&mut g, vec![a, o, b]);
    let ids: Vec<Vec<u64>> = out.iter().map(|o| o.ids.clone()).collect();
    assert_eq!(
        ids,
        vec![vec![1_000_001], vec![1_000_002]],
        "its flow only, then it"
    );
    assert_eq!(g.held(), 1, "the other flow stays held");
    assert_eq!(g.stats().pass[Pass::Frame(NotTcp::Fragment).index()], 1);
}

#[test]
fn tunnel_headers_gro_does_not_merge_through_pass_untouched() {
    type Edit = fn(&mut Vec<u8>, usize);
    let cases: [(&str, TunnelSpec, Edit); 3] = [
        (
            "vxlan without the I flag",
            TunnelSpec::vxlan(1, false),
            |f, th| f[th] = 0,
        ),
        (
            "geneve version 1",
            TunnelSpec::geneve(1, false, Vec::new()),
            |f, th| f[th] |= 0x40,
        ),
        (
            "geneve carrying IPv4",
            TunnelSpec::geneve(1, false, Vec::new()),
            |f, th| f[th + 2..th + 4].copy_from_slice(&[0x08, 0x00]),
        ),
    ];
    for (name, tun, edit) in cases {
        let th = tun.outer.udp_header_len();
        let mut f = Tunnelled::new(1, false, tun);
        let mut g = gro(GroConfig::default());
        let mut pkts: Vec<VecBuf> = (0..3).map(|_| f.next(MSS)).collect();
        for p in &mut pkts {
            // The UDP checksum is 0: the edit leaves the frame valid.
            edit(&mut p.segs[0], th);
        }
        let want: Vec<Vec<Vec<u8>>> = pkts.iter().map(|p| p.segs.clone()).collect();
        let out = feed(&mut g, pkts);
        assert_eq!(out.len(), 3, "{name}: each at once");
        for (o, w) in out.iter().zip(&want) {
            assert_eq!(&o.segs, w, "{name}");
        }
        assert_eq!(
            g.stats().pass[Pass::Frame(NotTcp::BadTunnel).index()],
            3,
            "{name}"
        );
    }
}

#[test]
fn geneve_options_beyond_the_frame_are_a_bad_tunnel_header() {
    let tun = TunnelSpec::geneve(1, false, Vec::new());
    let th = tun.outer.udp_header_len();
    let mut f = Tunnelled::new(1, false, tun);
    let mut p = f.next(100);
    p.segs[0][th] = 0x3f; // 252 bytes of options
    let n = p.segs[0].len();
    assert_eq!(
        Tcp::parse_tunnel(&p.segs[0], n, true, &Tunnels::default()),
        Err(crate::wire::TunnelErr::Bad(NotTcp::BadTunnel))
    );
}

#[test]
fn with_tunnels_off_or_on_another_port_a_tunnel_is_plain_udp() {
    let mut tun = TunnelSpec::vxlan(1, false);
    for (what, cfg_tunnels, port) in [
        (
            "off",
            Tunnels {
                on: false,
                ..Tunnels::default()
            },
            4789,
        ),
        ("another port", Tunnels::default(), 8472),
    ] {
        tun.outer.dport = port;
        let mut f = Tunnelled::new(1, false, tun.clone());
        let mut g = gro(GroConfig {
            tunnels: cfg_tunnels,
            ..GroConfig::default()
        });
        let out = feed(&mut g, (0..3).map(|_| f.next(MSS)).collect());
        assert_eq!(out.len(), 3, "{what}");
        assert_eq!(g.stats().pass[Pass::Frame(NotTcp::NotTcp).index()], 3);
    }
    // Linux's own VXLAN port, added.
    let mut tunnels = Tunnels::default();
    tunnels.add_vxlan(8472).unwrap();
    let mut f = Tunnelled::new(1, false, tun);
    let mut g = gro(GroConfig {
        tunnels,
        ..GroConfig::default()
    });
    assert!(feed(&mut g, (0..3).map(|_| f.next(MSS)).collect()).is_empty());
    assert_eq!(flush(&mut g)[0].ids.len(), 3);
}

#[test]
fn more_vxlan_ports_than_fit_are_refused_with_what_to_do() {
    let mut t = Tunnels::default();
    for p in [1, 2, 3] {
        t.add_vxlan(p).unwrap();
    }
    assert!(t.add_vxlan(3).is_ok(), "one already there");
    let e = t.add_vxlan(4).unwrap_err();
    assert_eq!(e.setting, crate::Setting::VxlanPorts, "{e}");
    assert!(e.problem.contains("at most 4"), "{e}");
    assert!(t.add_vxlan(0).is_err());
    assert!(t.add_vxlan(6081).unwrap_err().problem.contains("Geneve"));
}

#[test]
fn the_outer_packet_stays_within_64_kib() {
    for ipv6 in [false, true] {
        let tun = TunnelSpec::geneve(1, ipv6, vec![0; 32]);
        let mut f = Tunnelled::new(1, true, tun);
        let mut g = gro(GroConfig {
            max_frags: 64,
            ..GroConfig::default()
        });
        let mut out = feed(&mut g, (0..60).map(|_| f.next(1400)).collect());
        out.extend(flush(&mut g));
        for o in &out {
            verify(&o.bytes()).unwrap();
        }
        let fits = (65535 - (f.tun.header_len() + 14 - f.tun.outer.l2_len()) - 40 - 32) / 1400;
        assert_eq!(out[0].ids.len(), fits, "outer v6 {ipv6}");
    }
}

#[test]
fn cut_tunnel_frames_never_panic_and_pass_through() {
    let mut f = Tunnelled::new(
        1,
        true,
        TunnelSpec::geneve(1, true, vec![1, 2, 3, 1, 0, 0, 0, 0]),
    );
    let whole = f.next(200).segs.remove(0);
    for cut in 0..whole.len() {
        let mut g = gro(GroConfig::default());
        let out = feed(&mut g, vec![VecBuf::new(1, whole[..cut].to_vec())]);
        assert_eq!(out.len(), 1, "cut {cut}");
        assert_eq!(out[0].segs[0], whole[..cut], "cut {cut}: untouched");
    }
}

#[test]
fn tunnels_that_fit_a_template_take_the_fast_path() {
    // VXLAN or Geneve over IPv4 around IPv4 fits a template (116-124 header
    // bytes); IPv6 outside does not (136 and more): the full path.
    let cases = [
        (TunnelSpec::vxlan(1, false), false, true),
        (
            TunnelSpec::geneve(1, false, vec![0x01, 0x02, 0x80, 0x01, 0, 0, 0, 0]),
            false,
            true,
        ),
        (TunnelSpec::vxlan(1, true), false, false),
        (TunnelSpec::vxlan(1, false), true, false),
    ];
    for (tun, inner_v6, fast) in cases {
        let what = format!("{tun:?}, inner v6 {inner_v6}");
        let mut f = Tunnelled::new(1, inner_v6, tun);
        let mut g = gro(GroConfig::default());
        // A new flow's template is made with its second segment.
        assert!(feed(&mut g, vec![f.next(MSS), f.next(MSS)]).is_empty());
        let s = g.last.expect("held");
        assert_eq!(g.table.get(s).tmpl.on, fast, "{what}");
        // Either way the same packets: 17 segments, then the rest.
        let mut out = feed(&mut g, (0..18).map(|_| f.next(MSS)).collect());
        out.extend(flush(&mut g));
        let sizes: Vec<usize> = out.iter().map(|o| o.ids.len()).collect();
        assert_eq!(sizes, vec![17, 3], "{what}");
        for o in &out {
            verify(&o.bytes()).unwrap();
        }
    }
}

#[test]
fn no_header_bit_but_those_the_rules_let_vary_merges_in_a_tunnel() {
    for tun in kinds() {
        for ipv6 in [false, true] {
            let what = format!("{tun:?} around IPv6 {ipv6}");
            let mut f = Tunnelled::new(1, ipv6, tun.clone());
            let (a, b) = (f.next(MSS), f.next(MSS));
            super::only_varying_bits_merge(&a, &b, &what);
        }
    }
}

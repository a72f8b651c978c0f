//! The parser on generated frames: the layouts it accepts, the reasons it
//! refuses a frame, and truncation anywhere.

use super::*;
use crate::traffic::{segment_stream, FlowSpec};

fn frame(ipv6: bool, vlans: Vec<u16>) -> (Vec<u8>, FlowSpec) {
    let mut spec = FlowSpec::numbered(2, ipv6);
    spec.vlans = vlans;
    (segment_stream(&spec, 2, 100, 1000, 1448).remove(0), spec)
}

/// The pre-filter agrees with the parser: what it turns away, parsing
/// calls NotIp; every frame it lets through still gets parsed.
#[test]
fn may_be_ip_agrees_with_parse() {
    let (f, _) = frame(false, vec![5]);
    assert!(may_be_ip(&f));
    for et in [0x0806u16, 0x88cc, 0x0000, 0xffff, 0x8847] {
        let mut g = f.clone();
        g[12..14].copy_from_slice(&et.to_be_bytes());
        assert!(!may_be_ip(&g), "{et:#x}");
        assert_eq!(Tcp::parse(&g, g.len(), true), Err(NotTcp::NotIp));
    }
    for short in 0..14 {
        assert!(may_be_ip(&f[..short]), "too short to tell: parse decides");
    }
}

#[test]
fn parses_v4_v6_vlan_qinq() {
    for ipv6 in [false, true] {
        for vlans in [vec![], vec![5], vec![7, 9]] {
            let (f, spec) = frame(ipv6, vlans.clone());
            let t = Tcp::parse(&f, f.len(), true).unwrap();
            assert_eq!(t.l3 as usize, spec.l2_len());
            assert_eq!(t.payload as usize, spec.header_len());
            assert_eq!(t.payload_len, 1000);
            assert_eq!(t.vlans as usize, vlans.len());
            assert_eq!(&t.tci[..vlans.len()], &vlans[..]);
            let fl = Fields::new(&f, t);
            assert_eq!(fl.seq(), 100);
            assert_eq!(fl.options().len(), 12);
        }
    }
}

#[test]
fn reasons_not_to_merge() {
    let (f, _) = frame(false, vec![]);
    let n = f.len();
    let mut g = f.clone();
    g[14] = 0x46; // IHL 6
    assert_eq!(Tcp::parse(&g, n, true), Err(NotTcp::IpOptions));
    let mut g = f.clone();
    g[20] = 0x20; // MF
    assert_eq!(Tcp::parse(&g, n, true), Err(NotTcp::Fragment));
    let mut g = f.clone();
    g[23] = 17; // UDP
    assert_eq!(Tcp::parse(&g, n, false), Err(NotTcp::NotTcp));
    let mut g = f.clone();
    g[22] ^= 1; // TTL changed without fixing the checksum
    assert_eq!(Tcp::parse(&g, n, true), Err(NotTcp::BadIpChecksum));
    assert!(
        Tcp::parse(&g, n, false).is_ok(),
        "trust mode skips the IP checksum"
    );
    let mut g = f.clone();
    g[12] = 0x08;
    g[13] = 0x06; // ARP
    assert_eq!(Tcp::parse(&g, n, true), Err(NotTcp::NotIp));
    let mut g = f.clone();
    g.extend_from_slice(&[0; 4]); // padding after the IP packet
    assert_eq!(Tcp::parse(&g, g.len(), true), Err(NotTcp::Padded));
    let mut g = f.clone();
    g[14 + 20 + 12] = 0x40; // data offset 16 B
    assert_eq!(Tcp::parse(&g, n, true), Err(NotTcp::Malformed));
    let (f6, _) = frame(true, vec![]);
    let mut g = f6.clone();
    g[14 + 6] = 44; // a fragment header next: never merged
    g.splice(54..54, [6, 0, 0, 0, 0, 0, 0, 1]);
    g[19] += 8;
    assert_eq!(Tcp::parse(&g, g.len(), true), Err(NotTcp::Ipv6Ext));
    g[14 + 6] = 0; // a hop-by-hop header: stepped over
    let t = Tcp::parse(&g, g.len(), true).unwrap();
    assert_eq!((t.l4, Fields::new(&g, t).ipv6_ext().len()), (62, 8));
    g[54] = 60; // then a destination options header that is not there
    assert!(Tcp::parse(&g, g.len(), true).is_err());
}

#[test]
fn truncation_anywhere_is_malformed_not_a_panic() {
    for ipv6 in [false, true] {
        let (f, _) = frame(ipv6, vec![3, 4]);
        for cut in 0..f.len() {
            let r = Tcp::parse(&f[..cut], f.len(), true);
            // Headers cut short, or the frame claims more than it has.
            assert!(r.is_err() || cut >= Tcp::parse(&f, f.len(), true).unwrap().payload as usize);
            let r = Tcp::parse(&f[..cut], cut, true);
            assert!(r.is_err(), "cut {cut}");
        }
    }
}

#[test]
fn three_tags_are_not_ip() {
    let (mut f, _) = frame(false, vec![1, 2]);
    f.splice(12..12, [0x81, 0x00, 0x00, 0x03]);
    assert_eq!(Tcp::parse(&f, f.len(), true), Err(NotTcp::NotIp));
}

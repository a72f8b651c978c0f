//! BIG TCP: merges past 64 KiB where `max_size` allows them, laid out as
//! Linux lays them out (IPv4 total length 0; IPv6 jumbo hop-by-hop header),
//! and the cases that stay within 64 KiB.

use super::*;
use crate::wire::field::{eth, ipv6_jumbo as jumbo};

/// Settings for packets of up to 256 KiB: room for 181 segments of 1448 B.
fn big_cfg(csum: CsumMode) -> GroConfig {
    GroConfig {
        max_size: 256 * 1024,
        max_frags: 256,
        csum,
        ..GroConfig::default()
    }
}

/// `n` full-size segments of flow `f`, each with `headroom` bytes in front.
fn run(f: &mut Flow, n: usize, headroom: usize) -> Vec<VecBuf> {
    (0..n)
        .map(|_| {
            let mut b = f.next(MSS);
            b.headroom = headroom;
            b
        })
        .collect()
}

/// What a BIG TCP packet says of itself, checked the slow way: its TCP
/// header's offset and payload, after the IP lengths (0 past 64 KiB, the
/// jumbo option's for IPv6) and every checksum were found right.
fn check_big(bytes: &[u8]) -> Result<(usize, Vec<u8>), String> {
    let l3 = eth::HEADER_LEN;
    let ipv6 = bytes[l3] >> 4 == 6;
    let (l4, ip_len) = if ipv6 {
        let plen = field::read16(bytes, l3, ipv6::PAYLOAD_LEN) as usize;
        let hbh = l3 + ipv6::HEADER_LEN;
        if bytes[l3 + ipv6::NEXT_HEADER] == jumbo::HOP_BY_HOP {
            if plen != 0 || bytes[hbh + jumbo::OPT_TYPE] != jumbo::JUMBO {
                return Err("a jumbo header with a payload length or without its option".into());
            }
            if bytes[hbh + jumbo::NEXT_HEADER] != 6 || bytes[hbh + jumbo::OPT_LEN] != 4 {
                return Err("a jumbo header that does not lead to TCP".into());
            }
            let jlen = field::read32(bytes, hbh, jumbo::PAYLOAD_LEN) as usize;
            if jlen <= 65535 || hbh + jlen != bytes.len() {
                return Err(format!("jumbo length {jlen} for a {} B frame", bytes.len()));
            }
            (hbh + jumbo::HEADER_LEN, bytes.len() - l3)
        } else {
            (hbh, ipv6::HEADER_LEN + plen)
        }
    } else {
        let total = field::read16(bytes, l3, ipv4::TOTAL_LEN) as usize;
        if csum::sum(&bytes[l3..l3 + 20]) != 0xffff {
            return Err("IPv4 header checksum wrong".into());
        }
        let len = if total == 0 { bytes.len() - l3 } else { total };
        if total == 0 && len <= 65535 {
            return Err("total length 0 on a packet within 64 KiB".into());
        }
        (l3 + 20, len)
    };
    if l3 + ip_len != bytes.len() {
        return Err(format!("IP length {ip_len} for a {} B frame", bytes.len()));
    }
    let tcp = &bytes[l4..];
    let addrs = if ipv6 {
        &bytes[field::at(l3, ipv6::ADDRS)]
    } else {
        &bytes[field::at(l3, ipv4::ADDRS)]
    };
    let pseudo = csum::pseudo(addrs, 6, tcp.len() as u32);
    if csum::add(pseudo, csum::sum(tcp)) != 0xffff {
        return Err("TCP checksum wrong".into());
    }
    let data = 4 * (tcp[tcp::DATA_OFF] >> 4) as usize;
    Ok((l4, tcp[data..].to_vec()))
}

/// The payload the segments carried, in order.
fn payload_of(segs: &[VecBuf]) -> Vec<u8> {
    segs.iter()
        .flat_map(|b| {
            let bytes = b.bytes();
            let t = Tcp::parse(&bytes, bytes.len(), true).expect("a TCP segment");
            bytes[t.payload as usize..].to_vec()
        })
        .collect()
}

fn big_packets(ipv6: bool, csum: CsumMode, headroom: usize) -> (Vec<VecBuf>, Vec<VecBuf>) {
    let mut f = Flow::new(1, ipv6);
    let segs = run(&mut f, 200, headroom);
    let mut g = gro(big_cfg(csum));
    let mut out = feed(&mut g, segs.clone());
    out.extend(flush(&mut g));
    (segs, out)
}

#[test]
fn ipv4_merges_past_64k_with_a_total_length_of_0() {
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        let (segs, out) = big_packets(false, csum, 0);
        let n: Vec<usize> = out.iter().map(|b| b.ids.len()).collect();
        // 20 + 32 + 181 x 1448 = 262140 bytes, within 256 KiB; one more is not.
        assert_eq!(n, vec![181, 19], "{csum:?}");
        let mut payload = Vec::new();
        for b in &out {
            let bytes = b.bytes();
            let (_, p) = check_big(&bytes).unwrap_or_else(|e| panic!("{csum:?}: {e}"));
            payload.extend(p);
        }
        assert_eq!(field::read16(&out[0].bytes(), 14, ipv4::TOTAL_LEN), 0);
        assert_eq!(payload, payload_of(&segs), "{csum:?}: every byte, in order");
    }
}

#[test]
fn ipv6_merges_past_64k_with_a_jumbo_header_in_the_headroom() {
    for csum in [CsumMode::Verify, CsumMode::Trust] {
        let (segs, out) = big_packets(true, csum, 128);
        let n: Vec<usize> = out.iter().map(|b| b.ids.len()).collect();
        // 40 + 32 + 181 x 1448 = 262160 bytes: one segment fewer than IPv4.
        assert_eq!(n, vec![180, 20], "{csum:?}");
        let first = out[0].bytes();
        assert_eq!(first[14 + ipv6::NEXT_HEADER], jumbo::HOP_BY_HOP);
        assert_eq!(
            out[0].headroom, 120,
            "the jumbo header took 8 bytes of headroom"
        );
        assert_eq!(
            out[0].gso.expect("a layout").l3_len,
            48,
            "IPv6 and jumbo headers"
        );
        assert_eq!(out[1].gso.expect("a layout").l3_len, 40);
        assert_eq!(out[1].headroom, 128, "a packet within 64 KiB is as it was");
        let mut payload = Vec::new();
        for b in &out {
            let (_, p) = check_big(&b.bytes()).unwrap_or_else(|e| panic!("{csum:?}: {e}"));
            payload.extend(p);
        }
        assert_eq!(payload, payload_of(&segs), "{csum:?}: every byte, in order");
    }
}

#[test]
fn ipv6_without_headroom_for_the_jumbo_header_stays_within_64k() {
    let (_, out) = big_packets(true, CsumMode::Verify, 4);
    for b in &out {
        let bytes = b.bytes();
        assert!(
            bytes.len() - 14 <= 65535,
            "a {} B IPv6 packet",
            bytes.len() - 14
        );
        verify(&bytes).expect("a valid packet within 64 KiB");
    }
    // 65535 - 40 - 32 = 65463 bytes of payload: 45 segments.
    assert_eq!(out[0].ids.len(), 45);
}

#[test]
fn by_default_nothing_passes_64k() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(1, ipv6);
        let segs = run(&mut f, 100, 128);
        let mut g = gro(GroConfig {
            max_frags: 256,
            ..GroConfig::default()
        });
        let mut out = feed(&mut g, segs);
        out.extend(flush(&mut g));
        for b in &out {
            let bytes = b.bytes();
            assert!(bytes.len() - 14 <= 65535);
            verify(&bytes).expect("a valid packet within 64 KiB");
        }
    }
}

#[test]
fn a_tunnelled_flow_stays_within_64k() {
    let mut t = tunnel::Tunnelled::new(1, false, tunnel::spec_of(0));
    let segs: Vec<VecBuf> = (0..100).map(|_| t.next(MSS)).collect();
    let mut g = gro(big_cfg(CsumMode::Verify));
    let mut out = feed(&mut g, segs);
    out.extend(flush(&mut g));
    assert!(out.len() > 1);
    for b in &out {
        let bytes = b.bytes();
        assert!(
            bytes.len() - 14 <= 65535,
            "a {} B outer IP packet",
            bytes.len() - 14
        );
        verify(&bytes).expect("a valid tunnelled packet");
    }
}

#[test]
fn the_settings_allow_512k_and_512_buffers_and_no_more() {
    let ok = GroConfig {
        max_size: 512 * 1024,
        max_frags: MAX_FRAGS,
        ..GroConfig::default()
    };
    assert!(ok.validate().is_ok());
    let e = GroConfig {
        max_size: 512 * 1024 + 1,
        ..ok
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.setting, crate::Setting::MaxSize, "{e}");
    assert!(e.problem.contains("1500..=524288"), "{e}");
    assert!(GroConfig {
        max_frags: MAX_FRAGS + 1,
        ..ok
    }
    .validate()
    .is_err());
}

//! VXLAN outer headers: the template, its per-packet fields, the UDP source
//! port from the inner flow's hash.

use super::*;
use crate::wire::field::{self, eth, ipv4, ipv6, tcp, udp, vxlan};
use crate::wire::{ETH_P_8021AD, ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6, IPPROTO_TCP, IPPROTO_UDP};

/// Where the outer headers start: Ethernet, IPv4 without options, UDP,
/// VXLAN.
const O_L3: usize = eth::HEADER_LEN;
const O_L4: usize = O_L3 + ipv4::MIN_LEN;
const O_VXLAN: usize = O_L4 + udp::HEADER_LEN;
const ENCAP: usize = VXLAN_ENCAP_LEN as usize;
const _: () = assert!(O_VXLAN + vxlan::HEADER_LEN == ENCAP);

/// The outer headers with every constant field filled.
pub(super) fn outer_template(v: &VxlanConf) -> [u8; ENCAP] {
    let mut o = [0u8; ENCAP];
    let (dst_mac, src_mac) = o[eth::MACS].split_at_mut(6);
    dst_mac.copy_from_slice(&v.dst_mac);
    src_mac.copy_from_slice(&v.src_mac);
    field::write16(&mut o, 0, eth::ETHERTYPE, ETH_P_IPV4);
    o[O_L3 + ipv4::VER_IHL] = 0x45;
    o[O_L3 + ipv4::TTL] = v.ttl;
    o[O_L3 + ipv4::PROTOCOL] = IPPROTO_UDP;
    let (src_ip, dst_ip) = o[field::at(O_L3, ipv4::ADDRS)].split_at_mut(4);
    src_ip.copy_from_slice(&v.src_ip);
    dst_ip.copy_from_slice(&v.dst_ip);
    field::write16(&mut o, O_L4, udp::SRC_PORT, v.src_port);
    field::write16(&mut o, O_L4, udp::DST_PORT, v.dst_port);
    o[O_VXLAN + vxlan::FLAGS] = vxlan::FLAG_VNI;
    // The VNI is the field's first 24 bits; the last byte is reserved.
    field::write32(&mut o, O_VXLAN, vxlan::VNI, v.vni << 8);
    o
}

/// Writes the outer headers for a frame of `total` bytes (outer included).
/// The outer UDP checksum is 0 (allowed over IPv4); the IPv4 header checksum
/// is computed unless the NIC does it (`ip_csum` false: left 0).
#[inline]
pub(super) fn write_outer(
    dst: &mut [u8],
    tmpl: &[u8; ENCAP],
    total: usize,
    id: u16,
    sport: u16,
    ip_csum: bool,
) {
    let dst = &mut dst[..ENCAP];
    dst.copy_from_slice(tmpl);
    let ip_len = (total - O_L3).min(0xffff) as u16;
    let udp_len = (total - O_L4).min(0xffff) as u16;
    field::write16(dst, O_L3, ipv4::TOTAL_LEN, ip_len);
    field::write16(dst, O_L3, ipv4::ID, id);
    if ip_csum {
        let c = csum::ipv4_header(&dst[O_L3..O_L4]);
        field::write16(dst, O_L3, ipv4::CHECKSUM, c);
    }
    if sport != 0 {
        field::write16(dst, O_L4, udp::SRC_PORT, sport);
    }
    field::write16(dst, O_L4, udp::LEN, udp_len);
}

/// `outer_l3_len` and `outer_l2_len` in the tx_offload word (bits 40 and 49).
#[inline(always)]
pub(super) const fn outer_lens_word(outer_l3: u64, outer_l2: u64) -> u64 {
    (outer_l3 & 0x1ff) << 40 | (outer_l2 & 0x7f) << 49
}

/// The outer UDP source port: configured, or from the inner flow (the RX
/// RSS hash when the NIC gave one, else the addresses and ports).
pub(super) fn vxlan_sport(v: &VxlanConf, m: *mut rte_mbuf, head: &[u8], meta: &SkbMeta) -> u16 {
    if v.src_port != 0 {
        return v.src_port;
    }
    // SAFETY: field reads of a live mbuf we own.
    let h = unsafe {
        if mb::ol_flags(m) & RTE_MBUF_F_RX_RSS_HASH as u64 != 0 {
            mb::rss_hash(m)
        } else {
            flow_hash(head, meta)
        }
    };
    49152 | (h ^ (h >> 16)) as u16 & 0x3fff
}

/// FNV-1a over the inner flow's addresses and ports (or its MAC addresses
/// when it is not IP).
pub(super) fn flow_hash(head: &[u8], meta: &SkbMeta) -> u32 {
    let fnv = |h: u32, b: &[u8]| {
        b.iter()
            .fold(h, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
    };
    let mut h = 0x811c_9dc5u32;
    let mut l3 = meta.outer_l2_len as usize + meta.outer_l3_len as usize + meta.l2_len as usize;
    if meta.l3_len == 0 {
        // Not parsed by GRO: find L3 past the VLAN tags.
        l3 = eth::ETHERTYPE.start;
        while let Some(t) = head.get(field::at(l3, 0..2)) {
            let tpid = u16::from_be_bytes([t[0], t[1]]);
            if tpid == ETH_P_8021Q || tpid == ETH_P_8021AD {
                l3 += eth::TAG_LEN;
            } else {
                break;
            }
        }
        l3 += eth::ETHERTYPE.len();
    }
    let et = head
        .get(l3 - eth::ETHERTYPE.len()..l3)
        .map(|t| u16::from_be_bytes([t[0], t[1]]));
    let (addrs, proto, l4) = match et {
        Some(ETH_P_IPV4) if head.len() >= l3 + ipv4::MIN_LEN => {
            let ip = &head[l3..l3 + ipv4::MIN_LEN];
            let frag = field::read16(ip, 0, ipv4::FLAGS_FRAG) & 0x3fff;
            let l4 = if frag == 0 {
                l3 + (ip[ipv4::VER_IHL] & 0x0f) as usize * 4
            } else {
                0
            };
            (&ip[ipv4::ADDRS], ip[ipv4::PROTOCOL], l4)
        }
        Some(ETH_P_IPV6) if head.len() >= l3 + ipv6::HEADER_LEN => (
            &head[field::at(l3, ipv6::ADDRS)],
            head[l3 + ipv6::NEXT_HEADER],
            l3 + ipv6::HEADER_LEN,
        ),
        _ => return fnv(h, head.get(eth::MACS).unwrap_or(head)),
    };
    h = fnv(h, addrs);
    if l4 != 0 && (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
        if let Some(p) = head.get(field::at(l4, tcp::PORTS)) {
            h = fnv(h, p);
        }
    }
    h
}

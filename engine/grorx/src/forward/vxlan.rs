//! VXLAN outer headers: the template, its per-packet fields, the UDP source
//! port from the inner flow's hash.

use super::*;
use crate::wire::field::{self, eth, ipv4, ipv6, tcp};

/// The outer headers with every constant field filled.
pub(super) fn outer_template(v: &VxlanConf) -> [u8; VXLAN_ENCAP_LEN as usize] {
    let mut o = [0u8; VXLAN_ENCAP_LEN as usize];
    o[0..6].copy_from_slice(&v.dst_mac);
    o[6..12].copy_from_slice(&v.src_mac);
    o[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut o[14..34];
    ip[0] = 0x45;
    ip[8] = v.ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&v.src_ip);
    ip[16..20].copy_from_slice(&v.dst_ip);
    let udp = &mut o[34..42];
    udp[0..2].copy_from_slice(&v.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&v.dst_port.to_be_bytes());
    let vx = &mut o[42..50];
    vx[0] = 0x08; // I flag: the VNI is valid
    vx[4..7].copy_from_slice(&v.vni.to_be_bytes()[1..4]);
    o
}

/// Writes the outer headers for a frame of `total` bytes (outer included).
/// The outer UDP checksum is 0 (allowed over IPv4); the IPv4 header checksum
/// is computed unless the NIC does it (`ip_csum` false: left 0).
#[inline]
pub(super) fn write_outer(
    dst: &mut [u8],
    tmpl: &[u8; 50],
    total: usize,
    id: u16,
    sport: u16,
    ip_csum: bool,
) {
    let dst = &mut dst[..50];
    dst.copy_from_slice(tmpl);
    let ip_len = (total - 14).min(0xffff) as u16;
    let udp_len = (total - 34).min(0xffff) as u16;
    dst[16..18].copy_from_slice(&ip_len.to_be_bytes());
    dst[18..20].copy_from_slice(&id.to_be_bytes());
    if ip_csum {
        let c = csum::ipv4_header(&dst[14..34]);
        dst[24..26].copy_from_slice(&c.to_be_bytes());
    }
    if sport != 0 {
        dst[34..36].copy_from_slice(&sport.to_be_bytes());
    }
    dst[38..40].copy_from_slice(&udp_len.to_be_bytes());
}

/// `outer_l3_len` and `outer_l2_len` in the tx_offload word (bits 40 and 49).
#[inline(always)]
pub(super) const fn outer_lens_word(outer_l3: u64, outer_l2: u64) -> u64 {
    (outer_l3 & 0x1ff) << 40 | (outer_l2 & 0x7f) << 49
}

/// The outer UDP source port: configured, or from the inner flow (the RX
/// RSS hash when the NIC gave one, else the addresses and ports).
pub(super) fn vxlan_sport(
    v: &VxlanConf,
    m: *mut sys::rte_mbuf,
    head: &[u8],
    meta: &SkbMeta,
) -> u16 {
    if v.src_port != 0 {
        return v.src_port;
    }
    // SAFETY: field reads of a live mbuf we own.
    let h = unsafe {
        if mb::ol_flags(m) & sys::RTE_MBUF_F_RX_RSS_HASH as u64 != 0 {
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
            if t == [0x81, 0x00] || t == [0x88, 0xa8] {
                l3 += eth::TAG_LEN;
            } else {
                break;
            }
        }
        l3 += eth::ETHERTYPE.len();
    }
    let et = head
        .get(l3 - 2..l3)
        .map(|t| u16::from_be_bytes([t[0], t[1]]));
    let (addrs, proto, l4) = match et {
        Some(0x0800) if head.len() >= l3 + ipv4::MIN_LEN => {
            let ip = &head[l3..l3 + ipv4::MIN_LEN];
            let frag = field::read16(ip, 0, ipv4::FLAGS_FRAG) & 0x3fff;
            let l4 = if frag == 0 {
                l3 + (ip[ipv4::VER_IHL] & 0x0f) as usize * 4
            } else {
                0
            };
            (&ip[ipv4::ADDRS], ip[ipv4::PROTOCOL], l4)
        }
        Some(0x86dd) if head.len() >= l3 + ipv6::HEADER_LEN => (
            &head[field::at(l3, ipv6::ADDRS)],
            head[l3 + ipv6::NEXT_HEADER],
            l3 + ipv6::HEADER_LEN,
        ),
        _ => return fnv(h, head.get(..12).unwrap_or(head)),
    };
    h = fnv(h, addrs);
    if l4 != 0 && (proto == 6 || proto == 17) {
        if let Some(p) = head.get(field::at(l4, tcp::PORTS)) {
            h = fnv(h, p);
        }
    }
    h
}

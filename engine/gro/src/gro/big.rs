//! BIG TCP: merged packets past 64 KiB, where the settings allow them
//! (`GroConfig::max_size` above 65535), laid out as Linux lays them out: an
//! IPv4 packet states a total length of 0 (its length is the frame's), an
//! IPv6 one carries a hop-by-hop header with a jumbo payload option (RFC
//! 2675) and a payload length of 0. Plain TCP only: a tunnel's outer
//! lengths, an IPv6 header followed by extension headers and UDP's length
//! field stay within 64 KiB, as in Linux; so does an IPv6 packet whose
//! buffer has no room in front for the jumbo header.

use super::*;
use crate::wire::field::ipv6_jumbo as jumbo;

/// The largest IP packet a 16-bit length field states.
pub const IP_MAX: u32 = 65535;

/// The largest merged IP packet `GroConfig::max_size` may allow (Linux's
/// `gro_max_size` limit).
pub const BIG_MAX: u32 = 512 * 1024;

/// The largest IP packet (in a tunnel, the outer one less the bytes before
/// the inner IP header) a merge into a head of layout `t` may build, for a
/// head buffer with `headroom` bytes free in front.
#[inline(always)]
pub(super) fn max_ip(
    max_size: u32,
    t: &Tcp,
    outer: Option<crate::wire::Outer>,
    headroom: usize,
) -> u32 {
    let big = outer.is_none()
        && (!t.ipv6 || (t.l3_len() == ipv6::HEADER_LEN && headroom >= jumbo::HEADER_LEN));
    let limit = if big { max_size } else { max_size.min(IP_MAX) };
    limit - outer.map_or(0, |o| (t.l3 - o.l3) as u32)
}

/// The largest IP packet a merge of UDP datagrams may build: within what
/// its UDP length field states, as in Linux.
#[inline(always)]
pub(super) fn max_ip_udp(max_size: u32) -> u32 {
    max_size.min(IP_MAX)
}

/// Whether an IP packet of `ip_len` bytes (its header included) is past
/// what its length field states: IPv4's total length, IPv6's payload
/// length (which leaves the 40-byte header out).
#[inline(always)]
fn past_length_field(ipv6: bool, ip_len: u32) -> bool {
    let stated = if ipv6 {
        ip_len - ipv6::HEADER_LEN as u32
    } else {
        ip_len
    };
    stated > IP_MAX
}

/// An IPv4 total length field for a packet of `ip_len` bytes.
#[inline(always)]
pub(super) fn ipv4_total_len(ip_len: u32) -> u16 {
    if past_length_field(false, ip_len) {
        0
    } else {
        ip_len as u16
    }
}

/// Bytes of jumbo header `write_ipv6_len` puts after the IP header of a
/// packet of layout `t` and `ip_len` bytes: 8 for IPv6 past 64 KiB.
#[inline(always)]
pub(super) fn jumbo_header(t: &Tcp, ip_len: u32) -> u16 {
    if t.ipv6 && past_length_field(true, ip_len) {
        jumbo::HEADER_LEN as u16
    } else {
        0
    }
}

/// Writes the IPv6 payload length of the packet in `pkt` (its IPv6 header at
/// `l3`, TCP right after it), `ip_len` bytes with that header: past 64 KiB,
/// the jumbo header goes in between, the Ethernet and IPv6 headers moving
/// into the headroom `max_ip` saw (the TCP header and payload stay put).
#[inline]
pub(super) fn write_ipv6_len<B: GroBuf>(pkt: &mut B, l3: usize, ip_len: u32) {
    let plen = ip_len - ipv6::HEADER_LEN as u32;
    if !past_length_field(true, ip_len) {
        field::write16(pkt.head_mut(), l3, ipv6::PAYLOAD_LEN, plen as u16);
        return;
    }
    let hdrs = l3 + ipv6::HEADER_LEN;
    let moved = pkt.push_head(jumbo::HEADER_LEN);
    debug_assert!(moved, "max_ip allowed past 64 KiB only with headroom");
    if !moved {
        return;
    }
    let b = pkt.head_mut();
    b.copy_within(jumbo::HEADER_LEN..jumbo::HEADER_LEN + hdrs, 0);
    let next = b[l3 + ipv6::NEXT_HEADER];
    b[l3 + ipv6::NEXT_HEADER] = jumbo::HOP_BY_HOP;
    field::write16(b, l3, ipv6::PAYLOAD_LEN, 0);
    b[hdrs + jumbo::NEXT_HEADER] = next;
    b[hdrs + jumbo::LEN] = 0;
    b[hdrs + jumbo::OPT_TYPE] = jumbo::JUMBO;
    b[hdrs + jumbo::OPT_LEN] = 4;
    field::write32(b, hdrs, jumbo::PAYLOAD_LEN, plen + jumbo::HEADER_LEN as u32);
}

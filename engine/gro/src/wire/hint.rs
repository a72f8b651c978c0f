//! The flow a frame GRO turns away belongs to, read leniently, so that
//! what the flow holds leaves before it.

use super::field::{self, ipv4, ipv6, tcp, udp};
use super::parse::ip_layer;
use super::tunnel::tunnel_header;
use super::*;

/// What a frame GRO cannot merge still says about its flow (for keeping a
/// flow's order: what the flow holds must leave before such a frame). Read
/// leniently: IP options, fragments, bad checksums, bad data offsets and
/// padding are all tolerated; only the bytes needed must be present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHint {
    /// Destination then source MAC address.
    pub macs: [u8; 12],
    /// VLAN TCIs, outermost first; `vlans` says how many are valid.
    pub tci: [u16; 2],
    /// VLAN tags in front of IP (0, 1 or 2).
    pub vlans: u8,
    /// Which tags are 802.1ad (bit 0 the outer one): the tag type is part of
    /// the MAC header, so of the flow.
    pub ad: u8,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// IPv6 flow label (0 for IPv4).
    pub flow_label: u32,
    /// Source then destination address (IPv4 uses the first 8 bytes).
    pub addrs: [u8; 32],
    /// Source and destination ports, when the TCP header is there (not in a
    /// non-first fragment).
    pub ports: Option<u32>,
    /// The frame is a tunnel's inner frame (its flow is a tunnelled one).
    pub tunnel: bool,
}

impl FlowHint {
    /// The hint of a TCP-over-IP frame, if it is one (by its protocol fields).
    pub fn of(head: &[u8]) -> Option<FlowHint> {
        Self::of_proto::<IPPROTO_TCP>(head)
    }

    /// The hint of a TCP-over-IP frame, or of the TCP frame inside a tunnel
    /// (`tunnel` set): read leniently too (a bad outer checksum, padding).
    pub fn of_frame(head: &[u8], tunnels: &Tunnels) -> Option<FlowHint> {
        Self::of(head).or_else(|| {
            if !tunnels.on {
                return None;
            }
            let mut ot = Tcp::default();
            let (l4, ip_end) = ip_layer::<IPPROTO_UDP>(head, 0, usize::MAX, false, &mut ot).ok()?;
            let kind = tunnels.kind(be16(head, l4 + udp::PORTS.start + 2)?)?;
            let inner = tunnel_header(head, l4, ip_end, kind).ok()?;
            let mut h = Self::of(&head[inner..])?;
            h.tunnel = true;
            Some(h)
        })
    }

    /// The hint of a UDP-over-IP frame, if it is one.
    pub fn of_udp(head: &[u8]) -> Option<FlowHint> {
        Self::of_proto::<IPPROTO_UDP>(head)
    }

    fn of_proto<const PROTO: u8>(head: &[u8]) -> Option<FlowHint> {
        let mut h = FlowHint {
            macs: [0; 12],
            tci: [0; 2],
            vlans: 0,
            ad: 0,
            ipv6: false,
            flow_label: 0,
            addrs: [0; 32],
            ports: None,
            tunnel: false,
        };
        let mut off = field::eth::ETHERTYPE.start;
        let mut et = be16(head, off)?;
        h.macs.copy_from_slice(&head[field::eth::MACS]);
        while et == ETH_P_8021Q || et == ETH_P_8021AD {
            if h.vlans == 2 {
                return None;
            }
            h.tci[h.vlans as usize] = be16(head, off + field::eth::TAG_TCI.start)?;
            h.ad |= ((et == ETH_P_8021AD) as u8) << h.vlans;
            h.vlans += 1;
            off += field::eth::TAG_LEN;
            et = be16(head, off)?;
        }
        let l3 = off + field::eth::ETHERTYPE.len();
        let l4 = match et {
            ETH_P_IPV4 => {
                let ip = head.get(l3..l3 + ipv4::MIN_LEN)?;
                if ip[ipv4::VER_IHL] >> 4 != 4 || ip[ipv4::PROTOCOL] != PROTO {
                    return None;
                }
                h.addrs[..8].copy_from_slice(&ip[ipv4::ADDRS]);
                let frag_off = field::read16(ip, 0, ipv4::FLAGS_FRAG) & 0x1fff;
                (frag_off == 0).then_some(l3 + (ip[ipv4::VER_IHL] & 0x0f) as usize * 4)
            }
            ETH_P_IPV6 => {
                let ip = head.get(l3..l3 + ipv6::HEADER_LEN)?;
                if ip[0] >> 4 != 6 {
                    return None;
                }
                h.ipv6 = true;
                h.flow_label = field::read32(ip, 0, ipv6::VER_TC_FLOW) & ipv6::FLOW_LABEL;
                h.addrs.copy_from_slice(&ip[ipv6::ADDRS]);
                ipv6_l4_offset::<PROTO>(head, ip[ipv6::NEXT_HEADER], l3 + ipv6::HEADER_LEN)?
            }
            _ => return None,
        };
        h.ports = l4
            .and_then(|l4| head.get(field::at(l4, tcp::PORTS)))
            .map(|p| field::read32(p, 0, tcp::PORTS));
        Some(h)
    }
}

/// Where L4 (protocol `PROTO`) starts after the IPv6 extension headers
/// that begin at `off` with `next` (hop-by-hop, routing, fragment,
/// destination options, AH): `None` if the chain does not end in `PROTO`
/// within `head`, `Some(None)` for a fragment past the first (its L4 header
/// is elsewhere).
fn ipv6_l4_offset<const PROTO: u8>(
    head: &[u8],
    mut next: u8,
    mut off: usize,
) -> Option<Option<usize>> {
    // A bound on the chain: each header is 8 bytes or more.
    for _ in 0..8 {
        let len = match next {
            n if n == PROTO => return Some(Some(off)),
            44 => {
                if be16(head, off + field::ipv6_ext::FRAG_OFFSET.start)? & 0xfff8 != 0 {
                    return Some(None);
                }
                8
            }
            51 => (*head.get(off + field::ipv6_ext::LEN)? as usize + 2) * 4,
            0 | 43 | 60 => (*head.get(off + field::ipv6_ext::LEN)? as usize + 1) * 8,
            _ => return None,
        };
        next = *head.get(off + field::ipv6_ext::NEXT_HEADER)?;
        off += len;
    }
    None
}

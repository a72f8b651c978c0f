//! Header parsing for GRO: Ethernet, 802.1Q / QinQ, IPv4, IPv6, TCP, UDP,
//! and the VXLAN and Geneve tunnels that carry Ethernet over UDP.
//!
//! One pass over the first segment's bytes finds every header and decides
//! whether the frame is a TCP segment GRO may consider, or why not. It reads
//! only inside the slice it is given (every access is checked), so any byte
//! string is safe input; nothing is allocated.
//!
//! `field` names every header field once; `parse` lays a frame out (`Tcp`),
//! `tunnel` does the same through VXLAN and Geneve, `fields` reads a laid
//! out frame's fields, and `hint` reads the flow of a frame GRO turns away.

use crate::csum;

pub mod field;
mod fields;
mod hint;
mod parse;
mod tunnel;

pub(crate) use fields::ip_word;
pub use fields::Fields;
pub use hint::FlowHint;
pub use tunnel::{
    fix_outer_headers, Outer, TunnelErr, TunnelKind, Tunnels, GENEVE_PORT, VXLAN_PORT,
};

/// Why a frame is not a GRO candidate (it passes through untouched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NotTcp {
    /// Shorter than its headers, or lengths that contradict each other.
    Malformed = 0,
    /// Neither IPv4 nor IPv6 (ARP, LLDP, more than two VLAN tags...).
    NotIp,
    /// IP, but not TCP.
    NotTcp,
    /// IPv4 with options (IHL > 5): Linux does not merge these.
    IpOptions,
    /// An IPv4 fragment (MF or an offset).
    Fragment,
    /// IPv6 with a fragment header, AH or a mobility header before TCP (or
    /// more hop-by-hop, routing and destination options than GRO steps over).
    Ipv6Ext,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// Bytes after the IP packet (Ethernet padding): Linux does not merge these.
    Padded,
    /// IPv4 with the reserved flag bit set: Linux does not merge these.
    ReservedFlag,
    /// UDP to a tunnel port whose tunnel header GRO does not merge through:
    /// VXLAN without its VNI flag, a Geneve version other than 0, a Geneve
    /// protocol other than Ethernet, options beyond the frame.
    BadTunnel,
}

impl NotTcp {
    /// Every reason, in index order.
    pub const ALL: [NotTcp; 10] = [
        NotTcp::Malformed,
        NotTcp::NotIp,
        NotTcp::NotTcp,
        NotTcp::IpOptions,
        NotTcp::Fragment,
        NotTcp::Ipv6Ext,
        NotTcp::BadIpChecksum,
        NotTcp::Padded,
        NotTcp::ReservedFlag,
        NotTcp::BadTunnel,
    ];
    /// The reason's name in the report's `passthrough`.
    pub fn name(self) -> &'static str {
        match self {
            NotTcp::Malformed => "malformed",
            NotTcp::NotIp => "not_ip",
            NotTcp::NotTcp => "not_tcp",
            NotTcp::IpOptions => "ip_options",
            NotTcp::Fragment => "ip_fragment",
            NotTcp::Ipv6Ext => "ipv6_ext_header",
            NotTcp::BadIpChecksum => "bad_ip_checksum",
            NotTcp::Padded => "padded",
            NotTcp::ReservedFlag => "ip_reserved_flag",
            NotTcp::BadTunnel => "bad_tunnel_header",
        }
    }
}

/// Bytes of IPv6 hop-by-hop, routing and destination options headers a
/// segment may carry and still merge (those of Linux's own tests are 8).
pub const EXT_MAX: usize = 32;

/// Ethertype of IPv4.
pub const ETH_P_IPV4: u16 = 0x0800;
/// Ethertype of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// Ethertype of an 802.1Q VLAN tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// Ethertype of an 802.1ad tag (QinQ's outer one).
pub const ETH_P_8021AD: u16 = 0x88a8;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// TCP flag FIN (flags are byte 13 of the header): the sender's last byte.
pub const TCP_FIN: u8 = 0x01;
/// TCP flag SYN: opens a connection.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag RST: resets the connection.
pub const TCP_RST: u8 = 0x04;
/// TCP flag PSH: deliver to the application now.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag ACK: the acknowledgment number is valid.
pub const TCP_ACK: u8 = 0x10;
/// TCP flag URG: the urgent pointer is valid.
pub const TCP_URG: u8 = 0x20;
/// TCP flag ECE: ECN echo.
pub const TCP_ECE: u8 = 0x40;
/// TCP flag CWR: congestion window reduced.
pub const TCP_CWR: u8 = 0x80;

/// Where the headers of a TCP segment are, and the fields GRO needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tcp {
    /// Offset of the IP header (Ethernet + tags).
    pub l3: u16,
    /// Offset of the TCP header.
    pub l4: u16,
    /// Offset of the payload (= total header length).
    pub payload: u16,
    /// TCP over IPv6 (else IPv4).
    pub ipv6: bool,
    /// VLAN TCIs, outermost first; `vlans` says how many are valid.
    pub tci: [u16; 2],
    /// VLAN tags in front of IP (0, 1 or 2).
    pub vlans: u8,
    /// TCP payload bytes (from the IP length).
    pub payload_len: u32,
}

impl Tcp {
    /// The same header layout (offsets, IP version, VLAN tags), whatever
    /// the payload length.
    #[inline(always)]
    pub fn same_layout(&self, o: &Tcp) -> bool {
        (
            self.l3,
            self.l4,
            self.payload,
            self.ipv6,
            self.tci,
            self.vlans,
        ) == (o.l3, o.l4, o.payload, o.ipv6, o.tci, o.vlans)
    }
}

/// Could this frame carry IP (an IPv4, IPv6 or VLAN ethertype)? Frames
/// without one (or too short to tell) are what `Tcp::parse` calls `NotIp`
/// or `Malformed`; this answers for the common non-IP frames in two loads.
#[inline(always)]
pub fn may_be_ip(head: &[u8]) -> bool {
    match be16(head, 12) {
        Some(ETH_P_IPV4 | ETH_P_IPV6 | ETH_P_8021Q | ETH_P_8021AD) | None => true,
        Some(_) => false,
    }
}

#[inline(always)]
pub(super) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

#[cfg(test)]
mod tests;

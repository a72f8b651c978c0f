//! Header parsing for GRO: Ethernet, 802.1Q / QinQ, IPv4, IPv6, TCP, UDP,
//! and the VXLAN and Geneve tunnels that carry Ethernet over UDP.
//!
//! One pass over the first segment's bytes finds every header and decides
//! whether the frame is a TCP segment GRO may consider, or why not. It reads
//! only inside the slice it is given (every access is checked), so any byte
//! string is safe input; nothing is allocated.

use crate::csum;

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

/// Header fields, each named once: byte ranges (or single bytes) from the
/// start of their own header, as smoltcp's `field` modules name them. Code
/// that reads or writes a header field goes through these, moved to where
/// the header starts with [`field::at`] or read and written with
/// [`field::read16`] and its kin.
pub mod field {
    use core::ops::Range;

    /// A field's bytes, from the start of its header.
    pub type Field = Range<usize>;

    /// `f` moved to a header that starts at `base`.
    #[inline(always)]
    pub const fn at(base: usize, f: Field) -> Field {
        base + f.start..base + f.end
    }

    /// A 16-bit field of the header at `base` (network order).
    #[inline(always)]
    pub fn read16(b: &[u8], base: usize, f: Field) -> u16 {
        debug_assert_eq!(f.len(), 2);
        u16::from_be_bytes([b[base + f.start], b[base + f.start + 1]])
    }

    /// A 32-bit field of the header at `base` (network order).
    #[inline(always)]
    pub fn read32(b: &[u8], base: usize, f: Field) -> u32 {
        debug_assert_eq!(f.len(), 4);
        u32::from_be_bytes(b[at(base, f)].try_into().unwrap())
    }

    /// Writes a 16-bit field of the header at `base` (network order).
    #[inline(always)]
    pub fn write16(b: &mut [u8], base: usize, f: Field, v: u16) {
        debug_assert_eq!(f.len(), 2);
        b[at(base, f)].copy_from_slice(&v.to_be_bytes());
    }

    /// Writes a 32-bit field of the header at `base` (network order).
    #[inline(always)]
    pub fn write32(b: &mut [u8], base: usize, f: Field, v: u32) {
        debug_assert_eq!(f.len(), 4);
        b[at(base, f)].copy_from_slice(&v.to_be_bytes());
    }

    /// Ethernet (and 802.1Q/802.1ad tags, 4 bytes each after the MACs).
    pub mod eth {
        use super::Field;
        /// Destination then source MAC.
        pub const MACS: Field = 0..12;
        /// The EtherType (or a tag's TPID) right after the MACs.
        pub const ETHERTYPE: Field = 12..14;
        /// A VLAN tag's TCI, from the start of the tag.
        pub const TAG_TCI: Field = 2..4;
        /// Bytes of a VLAN tag.
        pub const TAG_LEN: usize = 4;
        /// Bytes of an untagged Ethernet header.
        pub const HEADER_LEN: usize = 14;
    }

    /// IPv4 (RFC 791).
    pub mod ipv4 {
        use super::Field;
        /// Version and IHL.
        pub const VER_IHL: usize = 0;
        /// DSCP and ECN (TOS).
        pub const TOS: usize = 1;
        /// Total length.
        pub const TOTAL_LEN: Field = 2..4;
        /// Identification.
        pub const ID: Field = 4..6;
        /// Flags (reserved, DF, MF) and fragment offset.
        pub const FLAGS_FRAG: Field = 6..8;
        /// Time to live.
        pub const TTL: usize = 8;
        /// Protocol.
        pub const PROTOCOL: usize = 9;
        /// Header checksum.
        pub const CHECKSUM: Field = 10..12;
        /// Source then destination address.
        pub const ADDRS: Field = 12..20;
        /// Bytes of a header without options.
        pub const MIN_LEN: usize = 20;
    }

    /// IPv6 (RFC 8200).
    pub mod ipv6 {
        use super::Field;
        /// Version, traffic class, flow label.
        pub const VER_TC_FLOW: Field = 0..4;
        /// Payload length (extension headers included).
        pub const PAYLOAD_LEN: Field = 4..6;
        /// Next header.
        pub const NEXT_HEADER: usize = 6;
        /// Hop limit.
        pub const HOP_LIMIT: usize = 7;
        /// Source then destination address.
        pub const ADDRS: Field = 8..40;
        /// Bytes of the fixed header.
        pub const HEADER_LEN: usize = 40;
    }

    /// An IPv6 extension header (hop-by-hop, routing, fragment, destination
    /// options, AH).
    pub mod ipv6_ext {
        use super::Field;
        /// The header after this one.
        pub const NEXT_HEADER: usize = 0;
        /// Length: in 8-byte units past the first 8 (AH: 4-byte units past
        /// the first 8).
        pub const LEN: usize = 1;
        /// A fragment header's offset and flags (offset in its top 13 bits).
        pub const FRAG_OFFSET: Field = 2..4;
    }

    /// TCP (RFC 9293).
    pub mod tcp {
        use super::Field;
        /// Source then destination port.
        pub const PORTS: Field = 0..4;
        /// Sequence number.
        pub const SEQ: Field = 4..8;
        /// Acknowledgment number.
        pub const ACK: Field = 8..12;
        /// Data offset, flags and window: the word Linux compares whole.
        pub const OFF_FLAGS_WINDOW: Field = 12..16;
        /// Data offset (high nibble).
        pub const DATA_OFF: usize = 12;
        /// Flags.
        pub const FLAGS: usize = 13;
        /// Checksum.
        pub const CHECKSUM: Field = 16..18;
        /// Urgent pointer.
        pub const URGENT: Field = 18..20;
        /// Bytes of a header without options (where options start).
        pub const MIN_LEN: usize = 20;
    }

    /// UDP (RFC 768).
    pub mod udp {
        use super::Field;
        /// Source then destination port.
        pub const PORTS: Field = 0..4;
        /// Length: header and payload.
        pub const LEN: Field = 4..6;
        /// Checksum (0: none, IPv4 only).
        pub const CHECKSUM: Field = 6..8;
        /// Bytes of the header.
        pub const HEADER_LEN: usize = 8;
    }

    /// VXLAN (RFC 7348), after its UDP header.
    pub mod vxlan {
        use super::Field;
        /// Flags (the I flag, 0x08: the VNI is valid) and reserved bits.
        pub const FLAGS: usize = 0;
        /// The VXLAN network identifier (24 bits) and a reserved byte.
        pub const VNI: Field = 4..8;
        /// Bytes of the header; the inner Ethernet frame follows.
        pub const HEADER_LEN: usize = 8;
        /// The I flag.
        pub const FLAG_VNI: u8 = 0x08;
    }

    /// Geneve (RFC 8926), after its UDP header.
    pub mod geneve {
        use super::Field;
        /// Version (top 2 bits) and options length in 4-byte words.
        pub const VER_OPT_LEN: usize = 0;
        /// OAM and critical-options flags.
        pub const FLAGS: usize = 1;
        /// The protocol of the payload (0x6558: Ethernet).
        pub const PROTOCOL: Field = 2..4;
        /// The virtual network identifier (24 bits) and a reserved byte.
        pub const VNI: Field = 4..8;
        /// Bytes of the fixed header; options and then the payload follow.
        pub const HEADER_LEN: usize = 8;
        /// The protocol type of an Ethernet payload (transparent bridging).
        pub const PROTO_ETHERNET: u16 = 0x6558;
    }
}

use field::{geneve, ipv4, ipv6, tcp, udp, vxlan};

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

/// The UDP ports whose datagrams GRO looks inside (VXLAN, Geneve).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnels {
    /// Off: datagrams to these ports are plain UDP.
    pub on: bool,
    /// VXLAN's ports (0: unused).
    pub vxlan: [u16; 4],
    /// Geneve's ports (0: unused).
    pub geneve: [u16; 2],
}

/// VXLAN's IANA port.
pub const VXLAN_PORT: u16 = 4789;
/// Geneve's IANA port.
pub const GENEVE_PORT: u16 = 6081;

impl Default for Tunnels {
    fn default() -> Self {
        Tunnels {
            on: true,
            vxlan: [VXLAN_PORT, 0, 0, 0],
            geneve: [GENEVE_PORT, 0],
        }
    }
}

impl Tunnels {
    /// The tunnel a datagram to `dport` carries, if any.
    #[inline(always)]
    pub fn kind(&self, dport: u16) -> Option<TunnelKind> {
        if !self.on || dport == 0 {
            None
        } else if self.vxlan.contains(&dport) {
            Some(TunnelKind::Vxlan)
        } else if self.geneve.contains(&dport) {
            Some(TunnelKind::Geneve)
        } else {
            None
        }
    }

    /// Adds a VXLAN port (`--vxlan-port`); the error says what to do.
    pub fn add_vxlan(&mut self, port: u16) -> Result<(), String> {
        if port == 0 || self.geneve.contains(&port) {
            return Err(format!(
                "--vxlan-port {port}: give a UDP port from 1 to 65535 that is not Geneve's"
            ));
        }
        if self.vxlan.contains(&port) {
            return Ok(());
        }
        let most = self.vxlan.len();
        let free = self.vxlan.iter_mut().find(|p| **p == 0).ok_or_else(|| {
            format!("--vxlan-port {port}: at most {most} VXLAN ports (4789 counts)")
        })?;
        *free = port;
        Ok(())
    }
}

/// A tunnel GRO merges through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348): 8 bytes of header.
    Vxlan = 1,
    /// Geneve (RFC 8926): 8 bytes and options.
    Geneve = 2,
}

/// Where a tunnelled segment's outer headers are (its inner ones are in
/// its `Tcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    /// Offset of the outer IP header.
    pub l3: u16,
    /// Offset of the outer UDP header.
    pub l4: u16,
    /// Offset of the inner Ethernet header (after the tunnel header).
    pub inner: u16,
    /// An IPv6 outer header (else IPv4).
    pub ipv6: bool,
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
}

/// Why `Tcp::parse_tunnel` did not find a segment to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelErr {
    /// Not UDP to a tunnel port: the frame is what `parse` said.
    NotTunnel,
    /// A tunnel frame GRO does not merge, and why.
    Bad(NotTcp),
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
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

impl Tcp {
    /// Parses a frame whose first `head.len()` bytes are contiguous and whose
    /// total length (all segments) is `frame_len`. `check_ip`: verify the
    /// IPv4 header checksum in software.
    #[inline(always)]
    pub fn parse(head: &[u8], frame_len: usize, check_ip: bool) -> Result<Tcp, NotTcp> {
        Self::parse_at(head, 0, frame_len, check_ip)
    }

    /// `parse` for the Ethernet frame that starts at `base` (a tunnel's
    /// inner frame, which ends where the outer one does).
    #[inline(always)]
    fn parse_at(head: &[u8], base: usize, frame_len: usize, check_ip: bool) -> Result<Tcp, NotTcp> {
        let mut t = Tcp::default();
        let (l4, ip_end) = ip_layer::<IPPROTO_TCP>(head, base, frame_len, check_ip, &mut t)?;
        let doff = (*head.get(l4 + tcp::DATA_OFF).ok_or(NotTcp::Malformed)? >> 4) as usize * 4;
        if doff < tcp::MIN_LEN || l4 + doff > ip_end || l4 + doff > head.len() {
            return Err(NotTcp::Malformed);
        }
        if ip_end != frame_len {
            return Err(NotTcp::Padded);
        }
        t.l4 = l4 as u16;
        t.payload = (l4 + doff) as u16;
        t.payload_len = (ip_end - l4 - doff) as u32;
        Ok(t)
    }

    /// Parses a TCP segment carried by a VXLAN or Geneve tunnel: outer
    /// Ethernet (and tags), IPv4 or IPv6, UDP to one of `tunnels`' ports,
    /// the tunnel header, then an inner frame `parse` accepts. The `Tcp`
    /// lays out the inner segment (offsets from the start of the frame),
    /// `Outer` the outer headers. `check_ip`: verify both IPv4 header
    /// checksums in software.
    pub fn parse_tunnel(
        head: &[u8],
        frame_len: usize,
        check_ip: bool,
        tunnels: &Tunnels,
    ) -> Result<(Tcp, Outer), TunnelErr> {
        let mut ot = Tcp::default();
        let Ok((l4, ip_end)) = ip_layer::<IPPROTO_UDP>(head, 0, frame_len, false, &mut ot) else {
            return Err(TunnelErr::NotTunnel);
        };
        let dport = be16(head, l4 + udp::PORTS.start + 2).ok_or(TunnelErr::NotTunnel)?;
        let Some(kind) = tunnels.kind(dport) else {
            return Err(TunnelErr::NotTunnel);
        };
        let bad = TunnelErr::Bad;
        let ulen = be16(head, l4 + udp::LEN.start).ok_or(bad(NotTcp::Malformed))? as usize;
        if ulen != ip_end - l4 {
            return Err(bad(NotTcp::Malformed));
        }
        if ip_end != frame_len {
            return Err(bad(NotTcp::Padded));
        }
        let inner = tunnel_header(head, l4, ip_end, kind).map_err(bad)?;
        let t = match Self::parse_at(head, inner, frame_len, check_ip) {
            Ok(t) => t,
            // Not TCP inside: unrelated to any TCP flow.
            Err(NotTcp::NotTcp | NotTcp::NotIp) => return Err(bad(NotTcp::NotTcp)),
            Err(why) => return Err(bad(why)),
        };
        let ol3 = ot.l3 as usize;
        if check_ip && !ot.ipv6 && csum::sum(&head[ol3..ol3 + ipv4::MIN_LEN]) != 0xffff {
            return Err(bad(NotTcp::BadIpChecksum));
        }
        Ok((
            t,
            Outer {
                l3: ot.l3,
                l4: l4 as u16,
                inner: inner as u16,
                ipv6: ot.ipv6,
                kind,
            },
        ))
    }

    /// Parses a UDP datagram as `parse` does a TCP segment: the layout's
    /// L4 header is the 8-byte UDP header (`payload = l4 + 8`). A UDP length
    /// other than what the IP header says is `Malformed`; a frame that is
    /// not UDP is `NotTcp`.
    #[inline(always)]
    pub fn parse_udp(head: &[u8], frame_len: usize, check_ip: bool) -> Result<Tcp, NotTcp> {
        let mut t = Tcp::default();
        let (l4, ip_end) = ip_layer::<IPPROTO_UDP>(head, 0, frame_len, check_ip, &mut t)?;
        let ulen = be16(head, l4 + udp::LEN.start).ok_or(NotTcp::Malformed)? as usize;
        let payload = l4 + udp::HEADER_LEN;
        if ulen != ip_end - l4 || payload > ip_end || payload > head.len() {
            return Err(NotTcp::Malformed);
        }
        if ip_end != frame_len {
            return Err(NotTcp::Padded);
        }
        t.l4 = l4 as u16;
        t.payload = payload as u16;
        t.payload_len = (ip_end - payload) as u32;
        Ok(t)
    }
    /// A tunnel's inner segment: outside a tunnel at most two tags come
    /// before IP, so IP starts by byte 22.
    #[inline(always)]
    pub fn in_tunnel(&self) -> bool {
        self.l3 as usize > field::eth::HEADER_LEN + 2 * field::eth::TAG_LEN
    }

    /// Offset of the (inner, for a tunnel) Ethernet header.
    #[inline(always)]
    pub fn l2(&self) -> usize {
        self.l3 as usize - field::eth::HEADER_LEN - field::eth::TAG_LEN * self.vlans as usize
    }

    /// TCP header length (with options).
    #[inline(always)]
    pub fn l4_len(&self) -> usize {
        (self.payload - self.l4) as usize
    }

    /// IP header length.
    #[inline(always)]
    pub fn l3_len(&self) -> usize {
        (self.l4 - self.l3) as usize
    }
}

/// The layers below L4 of the Ethernet frame at `base` whose IP protocol
/// must be `PROTO`: tags and the IP header, into `t` (tags, `l3`, `ipv6`);
/// returns where L4 starts and where the IP packet ends. The checks are
/// those `Tcp::parse` documents, in one order for every protocol.
#[inline(always)]
fn ip_layer<const PROTO: u8>(
    head: &[u8],
    base: usize,
    frame_len: usize,
    check_ip: bool,
    t: &mut Tcp,
) -> Result<(usize, usize), NotTcp> {
    let mut off = base + field::eth::ETHERTYPE.start;
    let mut ethertype = be16(head, off).ok_or(NotTcp::Malformed)?;
    while ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        if t.vlans == 2 {
            return Err(NotTcp::NotIp);
        }
        t.tci[t.vlans as usize] =
            be16(head, off + field::eth::TAG_TCI.start).ok_or(NotTcp::Malformed)?;
        t.vlans += 1;
        off += field::eth::TAG_LEN;
        ethertype = be16(head, off).ok_or(NotTcp::Malformed)?;
    }
    let l3 = off + field::eth::ETHERTYPE.len();
    let (l4, ip_end) = match ethertype {
        ETH_P_IPV4 => {
            let ip: &[u8; ipv4::MIN_LEN] = head
                .get(l3..l3 + ipv4::MIN_LEN)
                .ok_or(NotTcp::Malformed)?
                .try_into()
                .unwrap();
            let vi = ip[ipv4::VER_IHL];
            if vi != 0x45 {
                return Err(if vi >> 4 != 4 || vi & 0x0f < 5 {
                    NotTcp::Malformed
                } else {
                    NotTcp::IpOptions
                });
            }
            let tot = field::read16(ip, 0, ipv4::TOTAL_LEN) as usize;
            let frag = field::read16(ip, 0, ipv4::FLAGS_FRAG);
            if tot < ipv4::MIN_LEN || l3 + tot > frame_len {
                return Err(NotTcp::Malformed);
            }
            if frag & 0x3fff != 0 {
                return Err(NotTcp::Fragment);
            }
            if frag & 0x8000 != 0 {
                return Err(NotTcp::ReservedFlag);
            }
            if ip[ipv4::PROTOCOL] != PROTO {
                return Err(NotTcp::NotTcp);
            }
            if check_ip && csum::sum(ip) != 0xffff {
                return Err(NotTcp::BadIpChecksum);
            }
            (l3 + ipv4::MIN_LEN, l3 + tot)
        }
        ETH_P_IPV6 => {
            let ip: &[u8; ipv6::HEADER_LEN] = head
                .get(l3..l3 + ipv6::HEADER_LEN)
                .ok_or(NotTcp::Malformed)?
                .try_into()
                .unwrap();
            if ip[0] >> 4 != 6 {
                return Err(NotTcp::Malformed);
            }
            let plen = field::read16(ip, 0, ipv6::PAYLOAD_LEN) as usize;
            let end = l3 + ipv6::HEADER_LEN + plen;
            if end > frame_len {
                return Err(NotTcp::Malformed);
            }
            // Hop-by-hop, routing and destination options headers are
            // stepped over (segments with byte-equal ones merge, as in
            // Linux); a fragment header, AH or mobility never merges.
            let mut next = ip[ipv6::NEXT_HEADER];
            let mut l4 = l3 + ipv6::HEADER_LEN;
            let ext_end = l4 + EXT_MAX;
            while matches!(next, 0 | 43 | 60) && l4 < ext_end {
                let e = head.get(l4..l4 + 2).ok_or(NotTcp::Malformed)?;
                // e: the extension header's next-header and length bytes.
                next = e[0];
                l4 += (e[1] as usize + 1) * 8;
            }
            match next {
                n if n == PROTO && l4 <= ext_end => {}
                n if n == PROTO => return Err(NotTcp::Ipv6Ext),
                0 | 43 | 44 | 60 | 51 | 135 => return Err(NotTcp::Ipv6Ext),
                _ => return Err(NotTcp::NotTcp),
            }
            if l4 > end {
                return Err(NotTcp::Malformed);
            }
            t.ipv6 = true;
            (l4, end)
        }
        _ => return Err(NotTcp::NotIp),
    };
    t.l3 = l3 as u16;
    Ok((l4, ip_end))
}

/// Where the inner Ethernet frame of a tunnel of `kind` whose UDP header
/// is at `l4` starts (the IP packet ends at `ip_end`), or why GRO does not
/// look inside.
#[inline(always)]
fn tunnel_header(head: &[u8], l4: usize, ip_end: usize, kind: TunnelKind) -> Result<usize, NotTcp> {
    let th = l4 + udp::HEADER_LEN;
    let tun: &[u8; 8] = head
        .get(th..th + 8)
        .ok_or(NotTcp::Malformed)?
        .try_into()
        .unwrap();
    match kind {
        TunnelKind::Vxlan => {
            if tun[vxlan::FLAGS] & vxlan::FLAG_VNI == 0 {
                return Err(NotTcp::BadTunnel);
            }
            Ok(th + vxlan::HEADER_LEN)
        }
        TunnelKind::Geneve => {
            let vo = tun[geneve::VER_OPT_LEN];
            if vo >> 6 != 0 || field::read16(tun, 0, geneve::PROTOCOL) != geneve::PROTO_ETHERNET {
                return Err(NotTcp::BadTunnel);
            }
            let end = th + geneve::HEADER_LEN + (vo & 0x3f) as usize * 4;
            if end > ip_end || end > head.len() {
                return Err(NotTcp::BadTunnel);
            }
            Ok(end)
        }
    }
}

/// Rewrites a tunnel's outer headers in `b`, a frame of `end` bytes whose
/// outer IP header is at `l3` (IPv6 if `ipv6`, else IPv4 without options)
/// and UDP header at `l4`, and whose inner TCP header at `tcp` carries its
/// final checksum (`inner_pseudo`: the inner pseudo-header sum): the IP
/// length (IPv4: and header checksum), the UDP length, and the UDP checksum
/// when one is set, from the header bytes alone (`csum::tunnel_udp`).
pub fn fix_outer_headers(
    b: &mut [u8],
    l3: usize,
    l4: usize,
    ipv6: bool,
    end: usize,
    tcp: usize,
    inner_pseudo: u16,
) {
    let ulen = end - l4;
    if ipv6 {
        field::write16(
            b,
            l3,
            ipv6::PAYLOAD_LEN,
            (end - l3 - ipv6::HEADER_LEN) as u16,
        );
    } else {
        field::write16(b, l3, ipv4::TOTAL_LEN, (end - l3) as u16);
        field::write16(b, l3, ipv4::CHECKSUM, 0);
        let c = csum::ipv4_header(&b[l3..l3 + ipv4::MIN_LEN]);
        field::write16(b, l3, ipv4::CHECKSUM, c);
    }
    field::write16(b, l4, udp::LEN, ulen as u16);
    if field::read16(b, l4, udp::CHECKSUM) != 0 {
        field::write16(b, l4, udp::CHECKSUM, 0);
        let addrs = if ipv6 {
            field::at(l3, ipv6::ADDRS)
        } else {
            field::at(l3, ipv4::ADDRS)
        };
        let p = csum::pseudo(&b[addrs], IPPROTO_UDP, ulen as u32);
        let c = csum::tunnel_udp(p, csum::sum(&b[l4..tcp]), inner_pseudo);
        field::write16(b, l4, udp::CHECKSUM, c);
    }
}

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
                h.flow_label = field::read32(ip, 0, ipv6::VER_TC_FLOW) & 0x000f_ffff;
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

/// Typed reads of a parsed segment's fields (big-endian on the wire).
///
/// `new` checks once that the header layout lies inside the bytes; every
/// read below is then within `[0, payload)` and needs no bounds check.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    b: &'a [u8],
    t: Tcp,
}

impl<'a> Fields<'a> {
    /// The fields of `b` laid out as `t` says. Panics if `t` does not fit `b`
    /// (it always does when `t` comes from `Tcp::parse(b, ..)`).
    #[inline(always)]
    pub fn new(b: &'a [u8], t: Tcp) -> Fields<'a> {
        let l3_min = if t.ipv6 { 40 } else { 20 };
        assert!(
            t.l3 >= 14
                && t.l3 as usize + l3_min <= t.l4 as usize
                && t.l4 as usize + 20 <= t.payload as usize
                && t.payload as usize <= b.len(),
            "header layout outside the frame"
        );
        Fields { b, t }
    }

    /// The header layout the reads follow.
    #[inline(always)]
    pub fn layout(&self) -> Tcp {
        self.t
    }

    #[inline(always)]
    fn u8_at(&self, at: usize) -> u8 {
        debug_assert!(at < self.t.payload as usize);
        // SAFETY: at < payload <= b.len() (checked in new).
        unsafe { *self.b.get_unchecked(at) }
    }
    #[inline(always)]
    fn u16_at(&self, at: usize) -> u16 {
        debug_assert!(at + 2 <= self.t.payload as usize);
        // SAFETY: at + 2 <= payload <= b.len().
        u16::from_be_bytes(unsafe { self.b.as_ptr().add(at).cast::<[u8; 2]>().read() })
    }
    #[inline(always)]
    fn u32_at(&self, at: usize) -> u32 {
        debug_assert!(at + 4 <= self.t.payload as usize);
        // SAFETY: at + 4 <= payload <= b.len().
        u32::from_be_bytes(unsafe { self.b.as_ptr().add(at).cast::<[u8; 4]>().read() })
    }
    #[inline(always)]
    fn slice(&self, from: usize, to: usize) -> &'a [u8] {
        debug_assert!(from <= to && to <= self.t.payload as usize);
        // SAFETY: from <= to <= payload <= b.len().
        unsafe { self.b.get_unchecked(from..to) }
    }
    /// The whole first buffer, headers and what follows.
    #[inline(always)]
    pub fn frame(&self) -> &'a [u8] {
        self.b
    }
    /// Every header byte, Ethernet to the end of TCP's options.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8] {
        self.slice(0, self.t.payload as usize)
    }
    /// The 12 bytes of MAC addresses at the start of the frame (a tunnel's
    /// outer ones).
    #[inline(always)]
    pub fn macs(&self) -> &'a [u8] {
        self.slice(0, field::eth::MACS.end)
    }
    /// TCP sequence number.
    #[inline(always)]
    pub fn seq(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::SEQ.start)
    }
    /// TCP acknowledgment number.
    #[inline(always)]
    pub fn ack(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::ACK.start)
    }
    /// Data offset, flags and window: the word Linux compares whole.
    #[inline(always)]
    pub fn flag_word(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::OFF_FLAGS_WINDOW.start)
    }
    /// TCP flags byte.
    #[inline(always)]
    pub fn flags(&self) -> u8 {
        self.u8_at(self.t.l4 as usize + tcp::FLAGS)
    }
    /// Source and destination ports, as one big-endian word.
    #[inline(always)]
    pub fn ports(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::PORTS.start)
    }
    /// TCP options: the header bytes after the first 20.
    #[inline(always)]
    pub fn options(&self) -> &'a [u8] {
        self.slice(self.t.l4 as usize + tcp::MIN_LEN, self.t.payload as usize)
    }
    /// The TCP header, options included.
    #[inline(always)]
    pub fn tcp_header(&self) -> &'a [u8] {
        self.slice(self.t.l4 as usize, self.t.payload as usize)
    }
    /// The TCP checksum field.
    #[inline(always)]
    pub fn tcp_csum(&self) -> u16 {
        self.u16_at(self.t.l4 as usize + tcp::CHECKSUM.start)
    }
    /// IPv4 ID (0 for IPv6).
    #[inline(always)]
    pub fn ip_id(&self) -> u16 {
        if self.t.ipv6 {
            0
        } else {
            self.u16_at(self.t.l3 as usize + ipv4::ID.start)
        }
    }
    /// IPv4 DF bit.
    #[inline(always)]
    pub fn df(&self) -> bool {
        !self.t.ipv6 && self.u8_at(self.t.l3 as usize + ipv4::FLAGS_FRAG.start) & 0x40 != 0
    }
    /// What must not change within a merged packet: IPv4 TOS, TTL, DF;
    /// IPv6 traffic class and hop limit.
    #[inline(always)]
    pub fn ip_word(&self) -> u32 {
        let l3 = self.t.l3 as usize;
        if self.t.ipv6 {
            // Traffic class: the low nibble of byte 0, the high one of byte 1.
            let tc = ((self.u8_at(l3) as u32 & 0x0f) << 4) | (self.u8_at(l3 + 1) as u32 >> 4);
            (tc << 8) | self.u8_at(l3 + ipv6::HOP_LIMIT) as u32
        } else {
            ((self.u8_at(l3 + ipv4::TOS) as u32) << 16)
                | ((self.u8_at(l3 + ipv4::TTL) as u32) << 8)
                | (self.u8_at(l3 + ipv4::FLAGS_FRAG.start) as u32 & 0x40)
        }
    }
    /// The IPv6 flow label (part of a flow's identity, as in Linux).
    #[inline(always)]
    pub fn flow_label(&self) -> u32 {
        if self.t.ipv6 {
            self.u32_at(self.t.l3 as usize + ipv6::VER_TC_FLOW.start) & 0x000f_ffff
        } else {
            0
        }
    }
    /// The IPv6 extension headers in front of TCP (empty for IPv4, and for
    /// IPv6 without them).
    #[inline(always)]
    pub fn ipv6_ext(&self) -> &'a [u8] {
        let at = self.t.l3 as usize + ipv6::HEADER_LEN;
        if self.t.ipv6 && (self.t.l4 as usize) > at {
            self.slice(at, self.t.l4 as usize)
        } else {
            &[]
        }
    }
    /// Source and destination addresses (8 or 32 bytes).
    #[inline(always)]
    pub fn addrs(&self) -> &'a [u8] {
        let l3 = self.t.l3 as usize;
        if self.t.ipv6 {
            self.slice(l3 + ipv6::ADDRS.start, l3 + ipv6::ADDRS.end)
        } else {
            self.slice(l3 + ipv4::ADDRS.start, l3 + ipv4::ADDRS.end)
        }
    }
    /// One's-complement sum of the addresses and the protocol: the part of
    /// the pseudo-header that is the same for every segment of a flow.
    #[inline(always)]
    pub fn pseudo_base(&self) -> u16 {
        csum::pseudo_base(self.addrs(), IPPROTO_TCP)
    }
    /// Sum of the pseudo-header for a TCP length of `tcp_len`.
    #[inline(always)]
    pub fn pseudo_sum(&self, tcp_len: u32) -> u16 {
        csum::fold(csum::pseudo_with_len(self.pseudo_base(), tcp_len))
    }
}

#[cfg(test)]
mod tests {
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
                assert!(
                    r.is_err() || cut >= Tcp::parse(&f, f.len(), true).unwrap().payload as usize
                );
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
}

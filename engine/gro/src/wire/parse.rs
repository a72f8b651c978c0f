//! One pass over the first segment's headers: tags, IP (IPv4 without
//! options or fragments, IPv6 stepping over hop-by-hop, routing and
//! destination options), then TCP or UDP, each check one early return
//! that names why a frame is not a candidate.

use super::field::{self, ipv4, ipv6, tcp, udp};
use super::*;

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
    pub(super) fn parse_at(
        head: &[u8],
        base: usize,
        frame_len: usize,
        check_ip: bool,
    ) -> Result<Tcp, NotTcp> {
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
pub(super) fn ip_layer<const PROTO: u8>(
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
        ETH_P_IPV4 => ipv4_layer::<PROTO>(head, l3, frame_len, check_ip)?,
        ETH_P_IPV6 => {
            let layer = ipv6_layer::<PROTO>(head, l3, frame_len)?;
            t.ipv6 = true;
            layer
        }
        _ => return Err(NotTcp::NotIp),
    };
    t.l3 = l3 as u16;
    Ok((l4, ip_end))
}

/// The IPv4 header at `l3` (its protocol `PROTO`): where L4 starts and
/// where the IP packet ends, as `ip_layer` says.
#[inline(always)]
fn ipv4_layer<const PROTO: u8>(
    head: &[u8],
    l3: usize,
    frame_len: usize,
    check_ip: bool,
) -> Result<(usize, usize), NotTcp> {
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
    if check_ip && csum::sum(ip) != csum::VALID {
        return Err(NotTcp::BadIpChecksum);
    }
    Ok((l3 + ipv4::MIN_LEN, l3 + tot))
}

/// The IPv6 header at `l3` and the extension headers it steps over (up
/// to `PROTO`): where L4 starts and where the IP packet ends.
#[inline(always)]
fn ipv6_layer<const PROTO: u8>(
    head: &[u8],
    l3: usize,
    frame_len: usize,
) -> Result<(usize, usize), NotTcp> {
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
    Ok((l4, end))
}

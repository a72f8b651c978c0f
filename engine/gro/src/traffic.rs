//! TCP flows as frames: Ethernet (optionally 802.1Q / QinQ), IPv4 or IPv6,
//! TCP with the timestamps option, valid checksums. Pure code: the embedded
//! generator writes these headers into mbufs; tests build whole frames.

use crate::csum;

/// Ethernet header bytes, untagged.
pub const ETH_LEN: usize = 14;
/// Bytes one 802.1Q or 802.1ad tag adds.
pub const VLAN_LEN: usize = 4;
/// IPv4 header bytes, without options.
pub const IPV4_LEN: usize = 20;
/// IPv6 header bytes.
pub const IPV6_LEN: usize = 40;
/// TCP header bytes, without options.
pub const TCP_LEN: usize = 20;
/// NOP, NOP, timestamps (kind 8, length 10): what Linux sends on every segment.
pub const TCP_TS_OPT_LEN: usize = 12;
/// UDP header bytes.
pub const UDP_LEN: usize = 8;

pub use crate::wire::{
    ETH_P_8021AD, ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6, TCP_ACK, TCP_CWR, TCP_ECE, TCP_FIN, TCP_PSH,
    TCP_RST, TCP_SYN, TCP_URG,
};

/// A flow's IP version and addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addrs {
    /// IPv4.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// What stays the same for every segment of one direction of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// VLAN tags, outermost first (0, 1 or 2: QinQ uses 0x88a8 outside).
    pub vlans: Vec<u16>,
    /// IP version and addresses.
    pub addrs: Addrs,
    /// TCP source port.
    pub sport: u16,
    /// TCP destination port.
    pub dport: u16,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 don't-fragment bit.
    pub df: bool,
    /// IPv6 flow label (20 bits; unused with IPv4).
    pub flow_label: u32,
    /// Whether every segment carries the timestamps option.
    pub timestamps: bool,
    /// TCP window field, as sent.
    pub window: u16,
}

/// What changes per segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags (`TCP_ACK`, `TCP_PSH`...).
    pub flags: u8,
    /// IPv4 ID (unused with IPv6).
    pub ip_id: u16,
    /// Timestamps option: TSval.
    pub tsval: u32,
    /// Timestamps option: TSecr.
    pub tsecr: u32,
    /// TCP payload bytes.
    pub payload_len: u16,
}

impl FlowSpec {
    /// Flow `i` of a generated set: distinct ports and addresses.
    pub fn numbered(i: u32, ipv6: bool) -> FlowSpec {
        let b = i.to_be_bytes();
        let addrs = if ipv6 {
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src[..2].copy_from_slice(&[0xfd, 0x00]);
            dst[..2].copy_from_slice(&[0xfd, 0x00]);
            src[12..].copy_from_slice(&b);
            src[11] = 1;
            dst[15] = 1;
            Addrs::V6 { src, dst }
        } else {
            Addrs::V4 {
                src: [10, b[1].wrapping_add(1), b[2], b[3]],
                dst: [10, 255, 0, 1],
            }
        };
        FlowSpec {
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            vlans: Vec::new(),
            addrs,
            sport: 10000u16.wrapping_add(i as u16),
            dport: 5201,
            tos: 0,
            ttl: 64,
            df: true,
            flow_label: 0,
            timestamps: true,
            window: 502,
        }
    }

    /// Ethernet header bytes, tags included.
    pub fn l2_len(&self) -> usize {
        ETH_LEN + VLAN_LEN * self.vlans.len()
    }

    /// IP header bytes.
    pub fn l3_len(&self) -> usize {
        match self.addrs {
            Addrs::V4 { .. } => IPV4_LEN,
            Addrs::V6 { .. } => IPV6_LEN,
        }
    }

    /// TCP header bytes, the timestamps option included when sent.
    pub fn l4_len(&self) -> usize {
        TCP_LEN + if self.timestamps { TCP_TS_OPT_LEN } else { 0 }
    }

    /// Bytes of headers before the payload.
    pub fn header_len(&self) -> usize {
        self.l2_len() + self.l3_len() + self.l4_len()
    }

    /// Writes every header into `buf[..header_len()]`, with checksums, for a
    /// payload whose one's-complement sum is `payload_sum` (`csum::sum`).
    pub fn write_headers(&self, buf: &mut [u8], s: &Segment, payload_sum: u16) {
        let hl = self.header_len();
        let buf = &mut buf[..hl];
        let l4 = self.l4_len();
        let tcp_len = l4 + s.payload_len as usize;
        let (o, pseudo) = self.write_l2_l3(buf, 6, s.ip_id, tcp_len);
        let t = &mut buf[o..o + l4];
        t[0..2].copy_from_slice(&self.sport.to_be_bytes());
        t[2..4].copy_from_slice(&self.dport.to_be_bytes());
        t[4..8].copy_from_slice(&s.seq.to_be_bytes());
        t[8..12].copy_from_slice(&s.ack.to_be_bytes());
        t[12] = ((l4 / 4) as u8) << 4;
        t[13] = s.flags;
        t[14..16].copy_from_slice(&self.window.to_be_bytes());
        t[16..20].copy_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        if self.timestamps {
            t[20..24].copy_from_slice(&[1, 1, 8, 10]);
            t[24..28].copy_from_slice(&s.tsval.to_be_bytes());
            t[28..32].copy_from_slice(&s.tsecr.to_be_bytes());
        }
        let c = csum::finish(csum::add(csum::add(pseudo, csum::sum(t)), payload_sum));
        t[16..18].copy_from_slice(&c.to_be_bytes());
    }

    /// A whole frame with this payload (`s.payload_len` is taken from it).
    pub fn frame(&self, s: &Segment, payload: &[u8]) -> Vec<u8> {
        let hl = self.header_len();
        let mut f = vec![0u8; hl + payload.len()];
        let s = Segment {
            payload_len: payload.len() as u16,
            ..*s
        };
        self.write_headers(&mut f, &s, csum::sum(payload));
        f[hl..].copy_from_slice(payload);
        f
    }

    /// A UDP datagram of this flow's addresses and ports (the TCP fields
    /// unused) with `payload`, IPv4 ID `ip_id`, and its checksum (or 0,
    /// none, when `with_csum` is false).
    pub fn udp_frame(&self, ip_id: u16, payload: &[u8], with_csum: bool) -> Vec<u8> {
        let hl = self.udp_header_len();
        let mut f = vec![0u8; hl + payload.len()];
        let sum = with_csum.then(|| csum::sum(payload));
        self.write_udp_headers(&mut f, ip_id, payload.len(), sum);
        f[hl..].copy_from_slice(payload);
        f
    }

    /// Bytes of headers before a UDP datagram's payload.
    pub fn udp_header_len(&self) -> usize {
        self.l2_len() + self.l3_len() + UDP_LEN
    }

    /// Writes a UDP datagram's headers into `buf[..udp_header_len()]` for
    /// `payload_len` bytes of payload whose sum is `payload_sum` (None: no
    /// checksum, 0).
    pub fn write_udp_headers(
        &self,
        buf: &mut [u8],
        ip_id: u16,
        payload_len: usize,
        payload_sum: Option<u16>,
    ) {
        let ulen = UDP_LEN + payload_len;
        let (o, pseudo) = self.write_l2_l3(buf, 17, ip_id, ulen);
        let u = &mut buf[o..o + UDP_LEN];
        u[0..2].copy_from_slice(&self.sport.to_be_bytes());
        u[2..4].copy_from_slice(&self.dport.to_be_bytes());
        u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
        u[6..8].copy_from_slice(&[0, 0]);
        if let Some(ps) = payload_sum {
            let c = csum::finish(csum::add(csum::add(pseudo, csum::sum(u)), ps));
            let c = if c == 0 { 0xffff } else { c };
            u[6..8].copy_from_slice(&c.to_be_bytes());
        }
    }

    /// Writes the Ethernet header, tags and the IP header for `l4_len`
    /// bytes of protocol `proto` into `buf`; returns where L4 starts and
    /// the pseudo-header sum.
    fn write_l2_l3(&self, buf: &mut [u8], proto: u8, ip_id: u16, l4_len: usize) -> (usize, u16) {
        buf[0..6].copy_from_slice(&self.dst_mac);
        buf[6..12].copy_from_slice(&self.src_mac);
        let mut o = 12;
        for (i, v) in self.vlans.iter().enumerate() {
            let tpid = if i == 0 && self.vlans.len() == 2 {
                ETH_P_8021AD
            } else {
                ETH_P_8021Q
            };
            buf[o..o + 2].copy_from_slice(&tpid.to_be_bytes());
            buf[o + 2..o + 4].copy_from_slice(&(v & 0x0fff).to_be_bytes());
            o += 4;
        }
        let pseudo;
        match self.addrs {
            Addrs::V4 { src, dst } => {
                buf[o..o + 2].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
                o += 2;
                let ip = &mut buf[o..o + IPV4_LEN];
                ip[0] = 0x45;
                ip[1] = self.tos;
                ip[2..4].copy_from_slice(&((IPV4_LEN + l4_len) as u16).to_be_bytes());
                ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
                ip[6..8].copy_from_slice(&(if self.df { 0x4000u16 } else { 0 }).to_be_bytes());
                ip[8] = self.ttl;
                ip[9] = proto;
                ip[10..12].copy_from_slice(&[0, 0]);
                ip[12..16].copy_from_slice(&src);
                ip[16..20].copy_from_slice(&dst);
                let c = csum::ipv4_header(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                pseudo = csum::pseudo_v4(src, dst, proto, l4_len as u16);
                o += IPV4_LEN;
            }
            Addrs::V6 { src, dst } => {
                buf[o..o + 2].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
                o += 2;
                let ip = &mut buf[o..o + IPV6_LEN];
                let vtcfl = (6u32 << 28) | ((self.tos as u32) << 20) | (self.flow_label & 0xfffff);
                ip[0..4].copy_from_slice(&vtcfl.to_be_bytes());
                ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                ip[6] = proto;
                ip[7] = self.ttl;
                ip[8..24].copy_from_slice(&src);
                ip[24..40].copy_from_slice(&dst);
                pseudo = csum::pseudo_v6(&src, &dst, proto, l4_len as u32);
                o += IPV6_LEN;
            }
        }
        (o, pseudo)
    }
}

/// A tunnel around frames: VXLAN or Geneve over UDP over IPv4 or IPv6.
/// `outer` gives the outer MACs, tags, addresses, TOS/TTL/DF and flow
/// label, and the UDP ports (`sport`, `dport`); its TCP fields are unused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelSpec {
    /// The outer headers.
    pub outer: FlowSpec,
    /// VXLAN or Geneve.
    pub kind: crate::wire::TunnelKind,
    /// The network identifier (24 bits).
    pub vni: u32,
    /// Geneve options (a multiple of 4 bytes, at most 252; VXLAN: none).
    pub options: Vec<u8>,
    /// Whether the outer UDP checksum is set (else 0).
    pub udp_csum: bool,
}

impl TunnelSpec {
    /// Tunnel `i` of a generated set (its own outer source address and UDP
    /// source port), VXLAN to 4789, checksum 0 (what Linux sends by
    /// default over IPv4).
    pub fn vxlan(i: u32, ipv6: bool) -> TunnelSpec {
        let mut outer = FlowSpec::numbered(i + 0x100, ipv6);
        outer.src_mac = [0x02, 0, 0, 0, 0x10, 0x01];
        outer.dst_mac = [0x02, 0, 0, 0, 0x10, 0x02];
        outer.sport = 49152u16.wrapping_add(i as u16 * 7);
        outer.dport = crate::wire::VXLAN_PORT;
        outer.df = false;
        TunnelSpec {
            outer,
            kind: crate::wire::TunnelKind::Vxlan,
            vni: 100 + i,
            options: Vec::new(),
            udp_csum: false,
        }
    }

    /// As `vxlan`, Geneve to 6081 with `options`.
    pub fn geneve(i: u32, ipv6: bool, options: Vec<u8>) -> TunnelSpec {
        let mut t = Self::vxlan(i, ipv6);
        t.outer.dport = crate::wire::GENEVE_PORT;
        t.kind = crate::wire::TunnelKind::Geneve;
        t.options = options;
        t
    }

    /// Bytes of the tunnel header (after UDP).
    pub fn tunnel_len(&self) -> usize {
        8 + self.options.len()
    }

    /// Bytes in front of the inner frame: outer Ethernet, IP, UDP, tunnel.
    pub fn header_len(&self) -> usize {
        self.outer.udp_header_len() + self.tunnel_len()
    }

    /// `inner` (a whole Ethernet frame) inside this tunnel, outer IPv4 ID
    /// `id`.
    pub fn encapsulate(&self, inner: &[u8], id: u16) -> Vec<u8> {
        let (uh, tl) = (self.outer.udp_header_len(), self.tunnel_len());
        let mut f = vec![0u8; uh + tl + inner.len()];
        let v = (self.vni & 0xff_ffff).to_be_bytes();
        let t = &mut f[uh..uh + tl];
        match self.kind {
            crate::wire::TunnelKind::Vxlan => t[0] = 0x08,
            crate::wire::TunnelKind::Geneve => {
                t[0] = (self.options.len() / 4) as u8;
                t[2..4].copy_from_slice(&0x6558u16.to_be_bytes());
                t[8..].copy_from_slice(&self.options);
            }
        }
        t[4..7].copy_from_slice(&v[1..]);
        f[uh + tl..].copy_from_slice(inner);
        let sum = self.udp_csum.then(|| csum::sum(&f[uh..]));
        self.outer
            .write_udp_headers(&mut f, id, tl + inner.len(), sum);
        f
    }
}

/// Payload byte at stream offset `off` of flow `flow`: a pattern that makes
/// reordered or duplicated bytes visible in tests.
#[inline(always)]
pub fn pattern_byte(flow: u32, off: u64) -> u8 {
    let x =
        off.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (flow as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (x >> 56) as u8
}

/// Segments a byte stream of `total` bytes into frames of at most `mss`,
/// PSH on the last one, sequence numbers from `isn`, IP ID from 1.
pub fn segment_stream(
    spec: &FlowSpec,
    flow: u32,
    isn: u32,
    total: usize,
    mss: usize,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    let mut id = 1u16;
    while off < total {
        let n = mss.min(total - off);
        let payload: Vec<u8> = (off..off + n)
            .map(|o| pattern_byte(flow, o as u64))
            .collect();
        let last = off + n == total;
        let s = Segment {
            seq: isn.wrapping_add(off as u32),
            ack: 1,
            flags: TCP_ACK | if last { TCP_PSH } else { 0 },
            ip_id: id,
            tsval: 1000,
            tsecr: 500,
            payload_len: n as u16,
        };
        out.push(spec.frame(&s, &payload));
        off += n;
        id = id.wrapping_add(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks a frame's checksums the slow way.
    fn verify(spec: &FlowSpec, f: &[u8]) {
        let l2 = spec.l2_len();
        match spec.addrs {
            Addrs::V4 { src, dst } => {
                assert_eq!(csum::sum(&f[l2..l2 + 20]), 0xffff, "IPv4 header checksum");
                let tcp = &f[l2 + 20..];
                let p = csum::pseudo_v4(src, dst, 6, tcp.len() as u16);
                assert_eq!(csum::add(p, csum::sum(tcp)), 0xffff, "TCP checksum");
            }
            Addrs::V6 { src, dst } => {
                let tcp = &f[l2 + 40..];
                let p = csum::pseudo_v6(&src, &dst, 6, tcp.len() as u32);
                assert_eq!(csum::add(p, csum::sum(tcp)), 0xffff, "TCP checksum");
                assert_eq!(
                    u16::from_be_bytes([f[l2 + 4], f[l2 + 5]]) as usize,
                    tcp.len()
                );
            }
        }
    }

    #[test]
    fn v4_v6_vlan_frames_have_valid_checksums() {
        for ipv6 in [false, true] {
            for vlans in [vec![], vec![100], vec![10, 20]] {
                let mut spec = FlowSpec::numbered(7, ipv6);
                spec.vlans = vlans.clone();
                for frame in segment_stream(&spec, 7, 0xfffff000, 10_000, 1448) {
                    assert!(frame.len() <= spec.header_len() + 1448);
                    verify(&spec, &frame);
                }
                let f = &segment_stream(&spec, 7, 1, 100, 1448)[0];
                let et = u16::from_be_bytes([f[12], f[13]]);
                match vlans.len() {
                    0 => assert_eq!(et, if ipv6 { ETH_P_IPV6 } else { ETH_P_IPV4 }),
                    1 => assert_eq!(et, ETH_P_8021Q),
                    _ => assert_eq!(et, ETH_P_8021AD),
                }
            }
        }
    }

    #[test]
    fn standard_frame_is_1514_bytes() {
        let spec = FlowSpec::numbered(0, false);
        assert_eq!(spec.header_len(), 66);
        let frames = segment_stream(&spec, 0, 0, 1448 * 3, 1448);
        assert!(frames.iter().all(|f| f.len() == 1514));
        assert_eq!(frames[2][spec.l2_len() + 20 + 13], TCP_ACK | TCP_PSH);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let spec = FlowSpec::numbered(1, false);
        let frames = segment_stream(&spec, 1, u32::MAX - 100, 3000, 1448);
        let seq = |f: &Vec<u8>| u32::from_be_bytes(f[38..42].try_into().unwrap());
        assert_eq!(seq(&frames[1]), (u32::MAX - 100).wrapping_add(1448));
    }
}

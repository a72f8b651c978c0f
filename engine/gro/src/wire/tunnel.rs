//! VXLAN and Geneve: which UDP ports carry them, where a tunnelled
//! segment's outer headers are, the tunnel header's checks, and the outer
//! headers rewritten after a merge.

use super::field::{self, geneve, ipv4, ipv6, udp, vxlan};
use super::parse::ip_layer;
use super::*;
use crate::setting::{Setting, SettingError};

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

    /// Adds a VXLAN port; the error says what to do.
    pub fn add_vxlan(&mut self, port: u16) -> Result<(), SettingError> {
        let refuse = |problem| SettingError::new(Setting::VxlanPorts, port, problem);
        if port == 0 || self.geneve.contains(&port) {
            return Err(refuse(
                "give a UDP port from 1 to 65535 that is not Geneve's".into(),
            ));
        }
        if self.vxlan.contains(&port) {
            return Ok(());
        }
        let most = self.vxlan.len();
        let free = (self.vxlan.iter_mut().find(|p| **p == 0))
            .ok_or_else(|| refuse(format!("at most {most} VXLAN ports (4789 counts)")))?;
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

impl Outer {
    /// The outer IPv4 ID of `frame`, laid out as this says (None with an
    /// IPv6 outer header, which has none).
    #[inline(always)]
    pub fn ipv4_id(&self, frame: &[u8]) -> Option<u16> {
        (!self.ipv6).then(|| field::read16(frame, self.l3 as usize, ipv4::ID))
    }
}

/// Why `Tcp::parse_tunnel` did not find a segment to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelErr {
    /// Not UDP to a tunnel port: the frame is what `parse` said.
    NotTunnel,
    /// A tunnel frame GRO does not merge, and why.
    Bad(NotTcp),
}

impl Tcp {
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
        if check_ip && !ot.ipv6 && csum::sum(&head[ol3..ol3 + ipv4::MIN_LEN]) != csum::VALID {
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
}

/// is at `l4` starts (the IP packet ends at `ip_end`), or why GRO does not
/// look inside.
#[inline(always)]
pub(super) fn tunnel_header(
    head: &[u8],
    l4: usize,
    ip_end: usize,
    kind: TunnelKind,
) -> Result<usize, NotTcp> {
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

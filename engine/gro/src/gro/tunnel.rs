//! GRO through VXLAN and Geneve: TCP segments inside a tunnel merge under
//! the inner rules (the rest of GRO) and the outer ones Linux applies
//! (`udp_gro_receive`, `vxlan_gro_receive`, `geneve_gro_receive`, and the
//! outer IP header's `inet_gro_flush`): the same outer MAC header,
//! addresses, UDP ports and tunnel header (VNI, Geneve options), which are
//! the flow (`FlowKey::tunneled`); the same outer TOS/TTL/DF or traffic
//! class, hop limit and flow label, and a UDP checksum set on all or none,
//! else the flow flushes; an outer IPv4 ID that counts up by one a segment
//! or stays fixed, DF or not, as the inner one (`IdMode`: Linux has held
//! every IPv4 header of a segment to that rule since 2025). The outer UDP
//! checksum, when set, is checked from the header bytes alone: the inner
//! TCP checksum, checked too, makes the inner segment's sum known (the
//! trick Linux calls local checksum offload).

use super::*;
use crate::wire::{field::udp, Outer};

/// Do the outer headers of `a` and `b` (laid out as `o`, inner IP at
/// `inner_l3`) agree in every field but those a merge rewrites (IP length,
/// ID and checksum, UDP length and checksum)? UDP checksums must be both
/// set or both zero. The inner Ethernet header and tags are compared too.
#[inline(always)]
fn same_outer(a: &[u8], b: &[u8], o: &Outer, inner_l3: usize) -> bool {
    let (l3, l4) = (o.l3 as usize, o.l4 as usize);
    let same = |r: core::ops::Range<usize>| a[r.clone()] == b[r];
    let ip = if o.ipv6 {
        // Version, class, flow label; next header, hop limit, addresses,
        // extension headers.
        same(l3..l3 + ipv6::PAYLOAD_LEN.start) && same(l3 + ipv6::NEXT_HEADER..l4)
    } else {
        same(l3..l3 + ipv4::TOTAL_LEN.start)
            && same(field::at(l3, ipv4::FLAGS_FRAG.start..ipv4::CHECKSUM.start))
            && same(field::at(l3, ipv4::ADDRS))
    };
    let csum_set = |x: &[u8]| field::read16(x, l4, udp::CHECKSUM) != 0;
    same(0..l3)
        && ip
        && same(field::at(l4, udp::PORTS))
        && csum_set(a) == csum_set(b)
        && same(l4 + udp::HEADER_LEN..inner_l3)
}

impl<B> Held<B> {
    /// The fast path's outer rules for `b`, a segment of this tunnelled
    /// flow that matches its template: the outer IPv4 ID (with `next`, one
    /// the packet's ID mode accepts after the last, as the full path's
    /// `outer_refusals` asks; else any) and, verifying, the outer header
    /// checksum. Out of line, as the rest of the fast path's tunnel work:
    /// plain TCP's stays small.
    #[inline(never)]
    pub(super) fn outer_follows(&self, b: &[u8], next: bool) -> bool {
        let Some(id) = self.tmpl.outer_id(b) else {
            return false;
        };
        (!next || self.o_id_mode.accepts(self.o_last_id, id)) && self.tmpl.outer_csum_ok(b, id)
    }

    /// The fast path merged a segment of this tunnelled flow whose first
    /// buffer is `b`: its outer IPv4 ID is the last one now.
    #[inline(never)]
    pub(super) fn outer_merged(&mut self, b: &[u8]) {
        if let Some(oid) = self.tmpl.outer_id(b) {
            self.o_id_mode = self.o_id_mode.after(self.o_last_id, oid);
            self.o_last_id = oid;
        }
    }

    /// The fast path started this tunnelled flow's next packet with `b`.
    #[inline(never)]
    pub(super) fn outer_restarted(&mut self, b: &[u8]) {
        if let Some(oid) = self.tmpl.outer_id(b) {
            self.o_last_id = oid;
            self.o_id_mode = IdMode::Open;
        }
    }
}

impl<B: GroBuf> Held<B> {
    /// The outer rules for a segment laid out as `t` inside `o`, frame `b`,
    /// against this held packet, one line each: the same tunnel and outer
    /// headers (but for what a merge rewrites), and an outer IPv4 ID that
    /// follows. The refusal bits (`rules::bit`) of those that say no; 0
    /// for two segments outside any tunnel.
    #[inline(always)]
    pub(super) fn outer_refusals(&self, o: Option<Outer>, b: &[u8], t: &Tcp) -> u32 {
        let same = match (self.outer, o, self.core.pkt.as_ref()) {
            (None, None, _) => return 0,
            (Some(ho), Some(o), Some(head)) => {
                ho == o && self.core.t.l3 == t.l3 && same_outer(head.head(), b, &o, t.l3 as usize)
            }
            _ => false,
        };
        let id_follows = |id: u16| self.o_id_mode.accepts(self.o_last_id, id);
        let id = o.and_then(|o| o.ipv4_id(b));
        on(!same, Flush::OuterMismatch) | on(!id.is_none_or(id_follows), Flush::OuterIpId)
    }
}

/// Checks a tunnelled segment's outer UDP checksum (a zero one is none,
/// allowed over IPv6 too for tunnels, RFC 6935) assuming its inner TCP
/// checksum is right, which GRO checks on its own: then the inner segment
/// sums to the negated inner pseudo-header, and the outer checksum follows
/// from the header bytes between the UDP header and the TCP header.
#[inline]
pub(super) fn outer_udp_ok(f: &Fields, o: &Outer, tcp_len: u32) -> bool {
    let b = f.header();
    let (l4, t) = (o.l4 as usize, f.layout());
    if field::read16(b, l4, udp::CHECKSUM) == 0 {
        return true;
    }
    let ulen = field::read16(b, l4, udp::LEN) as u32;
    let s = csum::add(
        csum::add(outer_pseudo(b, o, ulen), csum::sum(&b[l4..t.l4 as usize])),
        !f.pseudo_sum(tcp_len),
    );
    s == csum::VALID
}

/// The outer UDP pseudo-header sum for a UDP length of `ulen`.
#[inline(always)]
fn outer_pseudo(b: &[u8], o: &Outer, ulen: u32) -> u16 {
    let l3 = o.l3 as usize;
    let addrs = if o.ipv6 {
        &b[field::at(l3, ipv6::ADDRS)]
    } else {
        &b[field::at(l3, ipv4::ADDRS)]
    };
    csum::pseudo(addrs, crate::wire::IPPROTO_UDP, ulen)
}

/// A merged tunnelled packet's outer headers, once its inner ones are
/// final (`fix_headers`, full TCP checksum): outer IP length (and IPv4
/// checksum), UDP length, and the UDP checksum when the head had one, from
/// the header bytes and the inner pseudo-header alone.
pub(super) fn fix_outer<B: GroBuf>(h: &mut Held<B>) {
    let Some(o) = h.outer else { return };
    let t = h.core.t;
    let tcp_len = h.core.ip_len - t.l3_len() as u32;
    let inner_pseudo = csum::fold(pseudo_sum(h.base.pbase, tcp_len));
    let end = t.l3 as usize + h.core.ip_len as usize;
    let Some(pkt) = h.core.pkt.as_mut() else {
        return;
    };
    crate::wire::fix_outer_headers(
        pkt.head_mut(),
        o.l3 as usize,
        o.l4 as usize,
        o.ipv6,
        end,
        t.l4 as usize,
        inner_pseudo,
    );
}

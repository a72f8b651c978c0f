//! A held UDP packet leaves: its flush, and the headers of a merged one.

use super::*;
use crate::gro::flush::{Entry, Flows};
use crate::wire::field::udp;

impl<B> Entry for UdpHeld<B> {
    fn key(&self) -> &FlowKey {
        &self.core.key
    }
    fn since(&self) -> u64 {
        self.base.since
    }
}

/// The UDP flows' table, when UDP GRO is on.
pub(super) struct UdpFlows;

impl<B: GroBuf> Flows<B> for UdpFlows {
    type E = UdpHeld<B>;
    fn table(g: &Gro<B>) -> Option<&Table<UdpHeld<B>>> {
        g.udp.as_deref()
    }
    fn flush(g: &mut Gro<B>, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        g.udp_flush(s, why, out);
    }
}

impl<B: GroBuf> Gro<B> {
    /// Flushes what the UDP flow of `pkt` holds, if `pkt` is UDP and names
    /// its flow (a fragment past the first: every flow between its
    /// addresses), oldest first (`flush_flows_of`).
    #[cold]
    pub(in crate::gro) fn udp_flush_flow_of(&mut self, pkt: &B, out: &mut impl FnMut(B)) {
        if self.udp.as_deref().is_some_and(|u| !u.is_empty()) {
            if let Some(h) = crate::wire::FlowHint::of_udp(pkt.head()) {
                self.flush_flows_of::<UdpFlows>(&h, out);
            }
        }
    }

    /// Sends a held UDP packet out, its headers fixed if it was merged.
    pub(in crate::gro) fn udp_flush(&mut self, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        let tso = self.cfg.out_csum == OutCsum::Pseudo;
        let udp = self.udp.as_deref_mut().expect("UDP GRO is on");
        let h = udp.remove(s);
        let held = self.now.saturating_sub(h.base.since);
        self.stats
            .left(self.hist.as_deref_mut(), why, h.core.segs, held);
        let tso = tso && h.core.segs > 1;
        if h.core.segs > 1 {
            fix_udp_headers(h, tso);
        }
        let info = GsoInfo {
            l2_len: h.core.t.l3,
            l3_len: h.core.t.l3_len() as u16,
            l4_len: udp::HEADER_LEN as u16,
            mss: h.core.mss as u16,
            segs: h.core.segs,
            ipv6: h.core.t.ipv6,
            tso,
            udp: true,
            ..GsoInfo::default()
        };
        if let Some(mut pkt) = h.core.pkt.take() {
            pkt.set_gso(&info);
            out(pkt);
        }
    }

    /// Flushes every held UDP packet, oldest first, or (`deadline`) those
    /// held since before it.
    pub(in crate::gro) fn udp_flush_until(
        &mut self,
        deadline: Option<u64>,
        why: Flush,
        out: &mut impl FnMut(B),
    ) {
        while let Some(s) = self.udp.as_deref().and_then(|u| u.oldest()) {
            let since = self.udp.as_deref().map_or(0, |u| u.get(s).base.since);
            if deadline.is_some_and(|d| since > d) {
                break;
            }
            self.udp_flush(s, why, out);
        }
    }
}

/// A merged UDP packet's headers: IP length and checksum, UDP length and
/// checksum (or, for a port that segments, the pseudo-header sum without
/// the length, as for TCP).
fn fix_udp_headers<B: GroBuf>(h: &mut UdpHeld<B>, tso: bool) {
    let t = h.core.t;
    let (l3, l4) = (t.l3 as usize, t.l4 as usize);
    let ulen = h.core.ip_len - t.l3_len() as u32;
    let Some(pkt) = h.core.pkt.as_mut() else {
        return;
    };
    let b = pkt.head_mut();
    if t.ipv6 {
        field::write16(b, l3, ipv6::PAYLOAD_LEN, ulen as u16);
    } else {
        field::write16(b, l3, ipv4::TOTAL_LEN, h.core.ip_len as u16);
        let c = csum::ipv4_checksum_with(h.base.ip_base, h.core.ip_len as u16);
        field::write16(b, l3, ipv4::CHECKSUM, c);
    }
    field::write16(b, l4, udp::LEN, ulen as u16);
    let c = if tso {
        h.base.pbase
    } else {
        let hdr = h.ports_sum as u64 + ulen as u64;
        match merged_checksum(csum::pseudo_with_len(h.base.pbase, ulen) + hdr, h.core.psum) {
            // 0 means "no checksum" in UDP: a computed 0 is sent as 0xffff.
            0 => 0xffff,
            c => c,
        }
    };
    field::write16(b, l4, udp::CHECKSUM, c);
}

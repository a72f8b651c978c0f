//! UDP GRO (`GroConfig::udp`, off by default): datagrams of one flow merge
//! into one packet that carries its datagram size, as Linux's
//! `udp_gro_receive_segment` builds them for forwarding (GRO_UDP_FWD) and
//! for sockets with UDP_GRO.
//!
//! The rules: the same flow (MACs, tags, addresses, ports), then those
//! every held packet applies, TCP's too (`Core::refusals`, one line each):
//! TOS/TTL/DF or traffic class and hop limit equal, a payload no larger
//! than the first datagram's, the limits (`max_frags`, `max_size`), the
//! IPv4 ID incrementing or fixed; one shorter merges and ends the packet
//! (`ends_after`). A datagram with a
//! zero checksum (none: IPv4 allows it) or no payload is never merged or
//! held (Linux needs a checksum "for symmetry with GSO"), nor is one with
//! IPv6 extension headers; IP fragments and options never reach here. A
//! datagram that is not merged or held leaves after what its flow holds, so
//! a flow's datagrams leave in arrival order.
//!
//! UDP flows have their own table (bounded by `flows`, as TCP's is), so a
//! TCP and a UDP flow on the same ports never meet. After a merge the IP
//! length and checksum, the UDP length and the UDP checksum are rewritten
//! from sums kept since the first datagram; `GsoInfo::udp` tells the stage
//! to segment it back into datagrams of `mss` bytes.
//!
//! The flow's held packet and what a datagram's rules read are in `held`,
//! its flush and the merged headers in `flush`.

use super::*;
use crate::wire::field::udp;

mod flush;
mod held;

pub(super) use held::UdpTable;
use held::{head_words, same_header, Dgram, UdpHeld, WORDS};

/// What the full path knows of a datagram once parsed and looked up.
struct UdpSeen {
    t: Tcp,
    d: Dgram,
    key: FlowKey,
    hash: u32,
    /// The flow's slot, live or a ghost.
    found: Option<u16>,
    /// The pseudo-header sum without the length, and the payload's
    /// checksum contribution.
    pbase: u16,
    psum: Contrib,
}

impl<B: GroBuf> Gro<B> {
    /// A frame that is IP but not TCP, with UDP GRO on: parsed, its flow
    /// looked up, then merged into the packet its flow holds, or held as a
    /// new one (the held one leaving first when the rules refuse), or
    /// passed through (after its flow's held packet).
    #[inline(never)]
    pub(super) fn receive_udp(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        out: &mut impl FnMut(B),
    ) {
        let seen = match self.udp_lookup(&pkt, verify, hints) {
            Ok(seen) => seen,
            // Not UDP: nothing of it is held.
            Err(why @ Pass::Frame(NotTcp::NotTcp)) => return self.pass(why, pkt, out),
            Err(why) => return self.udp_pass(why, pkt, out),
        };
        let udp = self.udp.as_deref().expect("UDP GRO is on");
        if let Some(s) = seen.found.filter(|&s| udp.is_live(s)) {
            let refused = Self::udp_refusals(self.cfg.max_frags, udp.get(s), &seen.d);
            if refused == 0 {
                return self.udp_merge(s, pkt, &seen.d, seen.psum, out);
            }
            self.udp_flush(s, why(refused), out);
        }
        self.udp_hold_new(pkt, seen, now, out);
    }

    /// Parses a datagram and finds its flow, its checksum judged; or why it
    /// passes.
    #[inline(always)]
    fn udp_lookup(&self, pkt: &B, verify: bool, hints: RxHints) -> Result<UdpSeen, Pass> {
        let t = Tcp::parse_udp(pkt.head(), pkt.len(), hints.ip == CsumHint::Unknown)
            .map_err(Pass::Frame)?;
        let d = Dgram::read(pkt.head(), &t, pkt.segs_from(t.payload as usize));
        if let Some(why) = d.never_held(&t) {
            return Err(why);
        }
        let key = FlowKey::of_layout(pkt.head(), &t);
        let hash = key.hash(&self.hash_key);
        let pbase = csum::pseudo_base(Self::addrs(pkt.head(), &t), crate::wire::IPPROTO_UDP);
        let check = CsumCheck {
            verify,
            hint: hints.l4,
            tcp_len: d.ulen as u32,
            payload: t.payload as usize,
            len: t.payload_len as usize,
        };
        let udp = self.udp.as_deref().ok_or(Pass::Frame(NotTcp::NotTcp))?;
        let found = udp.find(hash, |h| h.core.key == key);
        let psum = check
            .payload_sum(pkt, pbase, d.ports_sum as u64 + d.ulen as u64, d.csum)
            .ok_or(Pass::BadUdpChecksum)?;
        Ok(UdpSeen {
            t,
            d,
            key,
            hash,
            found,
            pbase,
            psum,
        })
    }

    /// Holds a datagram no held packet took as a new packet of its flow, in
    /// the flow's ghost slot or a new entry.
    #[inline(always)]
    fn udp_hold_new(&mut self, pkt: B, seen: UdpSeen, now: u64, out: &mut impl FnMut(B)) {
        let UdpSeen { t, d, .. } = seen;
        let l3 = t.l3 as usize;
        // The header's sum without its length (for the merged packet's
        // checksum) and without its ID (for a later datagram's).
        let (ip_base, ip_sum) = if t.ipv6 {
            (0, 0)
        } else {
            let b = pkt.head();
            let (hdr, base) = ipv4_sums(b, l3, l3 + ipv4::MIN_LEN, false);
            let c = field::read16(b, l3, ipv4::CHECKSUM);
            (base, csum::ipv4_sum_without(hdr, d.id, c))
        };
        let udp = self.udp.as_deref_mut().expect("UDP GRO is on");
        if udp.len() >= self.cfg.flows {
            let oldest = udp.oldest().expect("a full table has an oldest");
            self.udp_flush(oldest, Flush::TableFull, out);
        }
        let udp = self.udp.as_deref_mut().expect("UDP GRO is on");
        let reclaimed = seen.found.filter(|&s| udp.reclaim(s).is_some());
        let (slot, h) = match reclaimed {
            Some(s) => {
                self.stats.heads_cached += 1;
                (s, udp.get_mut(s))
            }
            None => {
                let Some((s, h)) = udp.insert(seen.hash) else {
                    return self.pass(Pass::ProbeLimit, pkt, out);
                };
                self.stats.heads_built += 1;
                h.core.key = seen.key;
                (s, h)
            }
        };
        h.core.t = t;
        h.core.mss = d.payload;
        h.core.max_ip = big::max_ip_udp(self.cfg.max_size);
        let ip_len = t.l3_len() as u32 + d.ulen as u32;
        h.core.begin(&pkt, ip_len, seen.psum, d.id);
        h.base = Base {
            ip_word: d.ip_word,
            pbase: seen.pbase,
            ip_base,
            since: now,
        };
        h.ports_sum = d.ports_sum;
        h.frame_len = pkt.len() as u32;
        h.ip_sum = ip_sum;
        let fast = head_words(pkt.head(), &t);
        (h.hdr, h.mask, h.words) = fast.unwrap_or(([0; WORDS], [0; WORDS], 0));
        h.core.pkt = Some(pkt);
        self.udp_last = fast.and(Some(slot));
    }

    /// The fast path: a full-size datagram in one buffer, of the flow the
    /// last one went to or, read with that flow's header layout, of another
    /// held flow of the same layout (found by hash, unparsed), whose headers
    /// equal its packet's head's but for the IPv4 ID and the checksums,
    /// merges without a parse; the rules it still needs (`never_held`, ID,
    /// limits, checksums) are checked here by the full path's predicates.
    /// Anything else goes back (`Some`) to the full path, which decides.
    /// Out of line: TCP's fast path, which tests `udp_last` before it,
    /// then compiles as if UDP GRO were not there.
    #[inline(never)]
    pub(super) fn udp_fast(
        &mut self,
        last: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let Some(s) = self.udp_fast_slot(last, pkt.head()) else {
            return Some(pkt);
        };
        let udp = self.udp.as_deref().expect("UDP GRO is on");
        let Some((d, psum)) = Self::udp_fast_check(udp.get(s), &pkt, csum, self.cfg.max_frags)
        else {
            return Some(pkt);
        };
        self.udp_merge(s, pkt, &d, psum, out);
        None
    }

    /// The held flow whose head's headers the frame `b` repeats, but for
    /// what may differ: the flow in slot `last` (the previous datagram's),
    /// or another of its layout, found by the key read where that layout
    /// puts it.
    #[inline(always)]
    fn udp_fast_slot(&self, last: u16, b: &[u8]) -> Option<u16> {
        let udp = self.udp.as_deref()?;
        let lh = udp.try_get(last)?;
        if same_header(b, lh) {
            return Some(last);
        }
        let t = lh.core.t;
        let proto_at = t.l3 as usize
            + if t.ipv6 {
                ipv6::NEXT_HEADER
            } else {
                ipv4::PROTOCOL
            };
        // Not UDP (a TCP segment among UDP flows): no lookup here.
        if b.len() < t.payload as usize || b[proto_at] != crate::wire::IPPROTO_UDP {
            return None;
        }
        let key = FlowKey::of_layout(b, &t);
        let found = udp.find(key.hash(&self.hash_key), |e| e.core.key == key);
        found.filter(|&s| {
            udp.is_live(s) && udp.get(s).core.t.same_layout(&t) && same_header(b, udp.get(s))
        })
    }

    /// The rules and checksums for `pkt`, a datagram whose headers repeat
    /// those of the head `h` holds: the datagram as the rules read it and
    /// its payload's checksum contribution, if it merges.
    #[inline(always)]
    fn udp_fast_check(
        h: &UdpHeld<B>,
        pkt: &B,
        csum: FastCsum,
        max_frags: u16,
    ) -> Option<(Dgram, Contrib)> {
        if pkt.len() != h.frame_len as usize || pkt.segs() != 1 {
            return None;
        }
        let b = pkt.head();
        let t = h.core.t;
        let (l3, l4) = (t.l3 as usize, t.l4 as usize);
        let id = if t.ipv6 {
            0
        } else {
            field::read16(b, l3, ipv4::ID)
        };
        // Its header is the head's but for the ID and the checksums.
        let d = Dgram {
            ip_word: h.base.ip_word,
            id,
            payload: h.core.mss,
            frags: 1,
            ports_sum: h.ports_sum,
            ulen: (h.core.mss + udp::HEADER_LEN as u32) as u16,
            csum: field::read16(b, l4, udp::CHECKSUM),
        };
        if d.never_held(&t).is_some() || Self::udp_refusals(max_frags, h, &d) != 0 {
            return None;
        }
        // The IPv4 header checksum its ID gives, trusting too.
        if !t.ipv6 {
            let c = field::read16(b, l3, ipv4::CHECKSUM);
            if c != csum::ipv4_checksum_with(h.ip_sum, id) {
                return None;
            }
        }
        // As `CsumCheck::payload_sum`, on the one buffer's slice.
        let base = csum::pseudo_with_len(h.base.pbase, d.ulen as u32)
            + d.ports_sum as u64
            + d.ulen as u64
            + d.csum as u64;
        // (No tunnel carries a UDP flow GRO merges: a NIC's flag is its own.)
        if !csum.sums(false) {
            return Some((d, Contrib::trusted(base)));
        }
        let at = t.payload as usize;
        let p = csum::sum(b.get(at..at + h.core.mss as usize)?);
        Contrib::checked(base, p).map(|c| (d, c))
    }

    fn addrs<'b>(b: &'b [u8], t: &Tcp) -> &'b [u8] {
        let l3 = t.l3 as usize;
        if t.ipv6 {
            &b[field::at(l3, ipv6::ADDRS)]
        } else {
            &b[field::at(l3, ipv4::ADDRS)]
        }
    }

    /// Linux's rules for datagram `d` against the packet `h` holds: those
    /// every held packet applies (`Core::refusals`), and no more. 0 merges,
    /// else the lowest bit set names the flush.
    #[inline(always)]
    fn udp_refusals(max_frags: u16, h: &UdpHeld<B>, d: &Dgram) -> u32 {
        h.core
            .refusals(&h.base, d.ip_word, d.id, d.payload, d.frags, max_frags)
    }

    /// Appends a datagram to its flow's packet; a short one ends it.
    fn udp_merge(&mut self, s: u16, pkt: B, d: &Dgram, psum: Contrib, out: &mut impl FnMut(B)) {
        self.udp_last = Some(s);
        let udp = self.udp.as_deref_mut().expect("UDP GRO is on");
        let h = udp.get_mut(s);
        h.core.append(pkt, d.payload, d.frags, d.id, psum);
        self.stats.merged_segments += 1;
        if let Some(why) = ends_after(false, false, d.payload, h.core.mss) {
            self.udp_flush(s, why, out);
        }
    }

    /// A datagram that is neither merged nor held: out after what its flow
    /// holds (a fragment past the first, which has no ports, after every
    /// flow between its addresses).
    #[cold]
    fn udp_pass(&mut self, why: Pass, pkt: B, out: &mut impl FnMut(B)) {
        self.udp_flush_flow_of(&pkt, out);
        self.pass(why, pkt, out)
    }
}

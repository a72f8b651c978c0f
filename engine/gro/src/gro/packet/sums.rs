//! Checksum state: a segment's payload sum, how held packets add them up,
//! and the headers of a merged packet fixed from them at flush.

use crate::gro::*;

/// A TCP header's sum (checksum field excluded), unfolded, from the constant
/// part of its flow's headers and the fields that vary.
#[inline(always)]
pub(in crate::gro) fn tcp_header_sum(hconst: u16, seq: u32, urg: u16, flags: u8) -> u64 {
    hconst as u64
        + (seq >> 16) as u64
        + (seq & 0xffff) as u64
        + urg as u64
        + (flags & VAR_FLAGS) as u64
}

/// The pseudo-header's sum, unfolded: addresses and protocol (`pbase`) and
/// the TCP length.
#[inline(always)]
pub(in crate::gro) fn pseudo_sum(pbase: u16, tcp_len: u32) -> u64 {
    csum::pseudo_with_len(pbase, tcp_len)
}

/// The constant part of a segment's TCP header sum (see `Held::hconst`).
#[inline(always)]
pub(in crate::gro) fn header_const(f: &Fields, seg: &Seg) -> u16 {
    let full = csum::sum_header(f.tcp_header());
    let var = seg.var_sum(0) + seg.csum as u64;
    csum::sub(full, csum::fold(var))
}

/// A head's checksum sums: its pseudo-header's (addresses and protocol),
/// its TCP header's constant part (`Held::hconst`) and its payload's
/// contribution. Made as its checksum is judged (`CsumCheck::judged_now`),
/// else once a segment comes to merge (zero until then).
#[derive(Default, Clone, Copy)]
pub(in crate::gro) struct HeadSums {
    pub(in crate::gro) pbase: u16,
    pub(in crate::gro) hconst: u16,
    pub(in crate::gro) psum: Contrib,
}

impl HeadSums {
    /// The sums of segment `seg` (read from `f`, in `pkt`), its checksum
    /// judged as `csum` says; None when it is bad.
    #[inline(always)]
    pub(in crate::gro) fn of<B: GroBuf>(
        f: &Fields,
        seg: &Seg,
        csum: &CsumCheck,
        pkt: &B,
    ) -> Option<HeadSums> {
        let pbase = f.pseudo_base();
        let hconst = header_const(f, seg);
        let psum = csum.payload_sum(pkt, pbase, seg.var_sum(hconst), seg.csum)?;
        Some(HeadSums {
            pbase,
            hconst,
            psum,
        })
    }
}

/// An IPv4 head's header sum, and that sum without its total length and
/// checksum (`Base::ip_base`, from which a merged header's checksum is
/// made); 0 and 0 for IPv6. Its header checksum was judged good before it
/// got here: summed at parse when the NIC said nothing (`summed`), so the
/// header sums to 0xffff and is not summed again, the rest following from
/// the two fields; else the NIC vouched for it, and it is summed as it
/// stands.
#[inline(always)]
pub(in crate::gro) fn ip_sums(b: &[u8], t: &Tcp, summed: bool) -> (u16, u16) {
    if t.ipv6 {
        return (0, 0);
    }
    ipv4_sums(b, t.l3 as usize, t.l4 as usize, summed)
}

/// `ip_sums` of the IPv4 header at `l3..l4` in `b`, for TCP and UDP heads
/// alike.
#[inline(always)]
pub(in crate::gro) fn ipv4_sums(b: &[u8], l3: usize, l4: usize, summed: bool) -> (u16, u16) {
    let hdr = if summed {
        csum::VALID
    } else {
        csum::sum_header(&b[l3..l4])
    };
    let total = field::read16(b, l3, ipv4::TOTAL_LEN);
    let field = field::read16(b, l3, ipv4::CHECKSUM);
    (hdr, csum::ipv4_sum_without(hdr, total, field))
}

/// How a segment's payload sum is found, and its checksum judged.
pub(in crate::gro) struct CsumCheck {
    pub(in crate::gro) verify: bool,
    pub(in crate::gro) hint: CsumHint,
    pub(in crate::gro) tcp_len: u32,
    pub(in crate::gro) payload: usize,
    pub(in crate::gro) len: usize,
}

/// What GRO takes a NIC's L4 checksum flag `l4` to say of a TCP segment
/// inside a tunnel or not: in a tunnel, what the flag is about depends on
/// the NIC (the outer UDP checksum or the inner one), so nothing.
#[inline(always)]
fn nic_says(l4: CsumHint, tunnelled: bool) -> CsumHint {
    if tunnelled {
        CsumHint::Unknown
    } else {
        l4
    }
}

/// Whether a segment's checksum is judged by summing its payload:
/// verifying, unless the NIC's word (`nic_says`) is that it is good.
#[inline(always)]
fn summed(verify: bool, hint: CsumHint) -> bool {
    verify && hint != CsumHint::Good
}

impl CsumCheck {
    /// How the TCP checksum of segment `t` is judged: verifying or not, and
    /// what the NIC said (`l4`, taken as `nic_says`).
    #[inline(always)]
    pub(in crate::gro) fn of(t: &Tcp, tunnelled: bool, l4: CsumHint, verify: bool) -> CsumCheck {
        CsumCheck {
            verify,
            hint: nic_says(l4, tunnelled),
            tcp_len: t.l4_len() as u32 + t.payload_len,
            payload: t.payload as usize,
            len: t.payload_len as usize,
        }
    }

    /// Whether a new head's checksum is judged as it arrives (its sums
    /// made then): verifying, unless the NIC vouched for it. Otherwise the
    /// sums wait for a second segment to merge (`finish_head`).
    #[inline(always)]
    pub(in crate::gro) fn judged_now(&self) -> bool {
        summed(self.verify, self.hint)
    }
}

/// How the fast path judges a segment's TCP checksum: by the rules of the
/// full path (`nic_says`, `summed`), once the template says whether its flow
/// is in a tunnel.
#[derive(Clone, Copy)]
pub(in crate::gro) struct FastCsum {
    pub(in crate::gro) verify: bool,
    l4: CsumHint,
}

impl FastCsum {
    /// What the fast path may take a segment with these NIC flags as: those
    /// that said nothing, or "good". A bad checksum, or one whose field is
    /// not final (`DataGood`), is the full path's.
    #[inline(always)]
    pub(in crate::gro) fn of(hints: RxHints, verify: bool) -> Option<FastCsum> {
        use CsumHint::{Good, Unknown};
        match (hints.ip, hints.l4) {
            (Unknown | Good, l4 @ (Unknown | Good)) => Some(FastCsum { verify, l4 }),
            _ => None,
        }
    }

    /// The same, its TCP checksum left to be judged later (a segment that
    /// waits ahead of a gap is judged whole when it is taken again).
    #[inline(always)]
    pub(in crate::gro) fn unsummed(self) -> FastCsum {
        FastCsum {
            verify: false,
            l4: self.l4,
        }
    }

    /// Whether a segment of a flow inside a tunnel or not (`tunnel`) has its
    /// payload summed and its checksum checked.
    #[inline(always)]
    pub(in crate::gro) fn sums(self, tunnel: bool) -> bool {
        summed(self.verify, nic_says(self.l4, tunnel))
    }
}

/// A segment's payload sum, unfolded: either the bytes' sum (`pos`) or, when
/// the checksum is trusted, the negated sum of what the checksum covers
/// besides the payload (`neg`: a valid segment's pseudo-header, header,
/// checksum field and payload sum to 0 modulo 0xffff). Sums add modulo 0xffff
/// and a byte swap is a multiplication by 256, so segments add up with plain
/// integer arithmetic and the merged checksum folds once, at flush.
#[derive(Clone, Copy, Default)]
pub(in crate::gro) struct Contrib {
    pub(in crate::gro) pos: u64,
    pub(in crate::gro) neg: u64,
}

impl Contrib {
    /// A payload whose bytes sum to `p`.
    #[inline(always)]
    pub(in crate::gro) fn of_bytes(p: u16) -> Contrib {
        Contrib {
            pos: p as u64,
            neg: 0,
        }
    }

    /// A payload whose checksum is trusted: what else the checksum covers
    /// (`rest`, unfolded: pseudo-header, header, checksum field), negated.
    #[inline(always)]
    pub(in crate::gro) fn trusted(rest: u64) -> Contrib {
        Contrib { pos: 0, neg: rest }
    }

    /// A payload whose bytes sum to `p`, if with `rest` (as for `trusted`)
    /// they make a valid checksum; None when it is bad.
    #[inline(always)]
    pub(in crate::gro) fn checked(rest: u64, p: u16) -> Option<Contrib> {
        (csum::add(csum::fold(rest), p) == csum::VALID).then_some(Contrib::of_bytes(p))
    }

    /// Two payloads' contributions, one after the other (each already
    /// shifted for its offset).
    #[inline(always)]
    pub(in crate::gro) fn add(self, other: Contrib) -> Contrib {
        Contrib {
            pos: self.pos + other.pos,
            neg: self.neg + other.neg,
        }
    }

    /// The same bytes one position later (an odd offset): swapped.
    #[inline(always)]
    pub(in crate::gro) fn shifted(self, odd: bool) -> Contrib {
        let k = if odd { 8 } else { 0 };
        Contrib {
            pos: self.pos << k,
            neg: self.neg << k,
        }
    }
}

impl CsumCheck {
    /// The payload's contribution to the merged checksum, or None if the
    /// checksum is bad. Verify sums the bytes and checks; trust (or a NIC
    /// that vouches) derives it from the checksum field without reading the
    /// payload.
    #[inline(always)]
    pub(in crate::gro) fn payload_sum<B: GroBuf>(
        &self,
        pkt: &B,
        pbase: u16,
        hdr: u64,
        field: u16,
    ) -> Option<Contrib> {
        let base = pseudo_sum(pbase, self.tcp_len) + hdr + field as u64;
        match self.hint {
            CsumHint::Bad if self.verify => None,
            // The field is not final: the bytes' sum is all there is.
            CsumHint::DataGood => Some(Contrib::of_bytes(sum_range(pkt, self.payload, self.len))),
            // Judged by its bytes (`summed`): the NIC said nothing.
            CsumHint::Unknown if summed(self.verify, CsumHint::Unknown) => {
                Contrib::checked(base, sum_range(pkt, self.payload, self.len))
            }
            _ => Some(Contrib::trusted(base)),
        }
    }
}

/// One's-complement sum of `len` bytes from `off`, across buffers.
#[inline]
pub(in crate::gro) fn sum_range<B: GroBuf>(pkt: &B, off: usize, len: usize) -> u16 {
    let mut s = csum::Chained::default();
    pkt.for_each_chunk(off, len, |c| s.add(c));
    s.value()
}

/// The L4 checksum of a merged packet whose pseudo-header and header sum
/// to `hdr` (unfolded) and whose payloads add `psum`, TCP's or UDP's: what
/// the bytes add and what trusted checksums say they add (`Contrib::neg`),
/// each folded once.
#[inline(always)]
pub(in crate::gro) fn merged_checksum(hdr: u64, psum: Contrib) -> u16 {
    csum::finish(csum::sub(csum::fold(hdr + psum.pos), csum::fold(psum.neg)))
}

/// What a merged packet's headers are made from (`fix_headers`): its
/// layout, IP length and flags, and the sums kept since its head arrived.
pub(in crate::gro) struct Merged {
    pub(in crate::gro) t: Tcp,
    pub(in crate::gro) ip_len: u32,
    /// The head's flags with PSH and FIN of the segments merged.
    pub(in crate::gro) flags: u8,
    pub(in crate::gro) ip_base: u16,
    pub(in crate::gro) pbase: u16,
    pub(in crate::gro) hconst: u16,
    pub(in crate::gro) head_seq: u32,
    pub(in crate::gro) head_urg: u16,
    pub(in crate::gro) psum: Contrib,
}

impl<B> Held<B> {
    /// What this held packet's headers are fixed from.
    #[inline(always)]
    pub(in crate::gro) fn merged(&self) -> Merged {
        Merged {
            t: self.core.t,
            ip_len: self.core.ip_len,
            flags: self.head_flags | self.flags_or,
            ip_base: self.base.ip_base,
            pbase: self.base.pbase,
            hconst: self.hconst,
            head_seq: self.head_seq,
            head_urg: self.head_urg,
            psum: self.core.psum,
        }
    }
}

/// A merged packet's headers: IP length and checksum, TCP flags and checksum,
/// from sums kept since the head arrived (nothing is summed again).
/// Inline in its two callers (a flush, a pair), so that `m` is read where
/// they made it rather than passed through memory.
#[inline(always)]
pub(in crate::gro) fn fix_headers<B: GroBuf>(pkt: &mut B, m: &Merged, tso: bool) {
    let t = m.t;
    let (l3, l4) = (t.l3 as usize, t.l4 as usize);
    let tcp_len = m.ip_len - t.l3_len() as u32;
    let b = pkt.head_mut();
    if !t.ipv6 {
        let total = big::ipv4_total_len(m.ip_len);
        field::write16(b, l3, ipv4::TOTAL_LEN, total);
        let c = csum::ipv4_checksum_with(m.ip_base, total);
        field::write16(b, l3, ipv4::CHECKSUM, c);
    }
    b[l4 + tcp::FLAGS] = m.flags;
    let c = if tso {
        // DPDK's TSO contract: the pseudo-header sum without the length.
        m.pbase
    } else {
        let hdr = tcp_header_sum(m.hconst, m.head_seq, m.head_urg, m.flags);
        merged_checksum(pseudo_sum(m.pbase, tcp_len) + hdr, m.psum)
    };
    field::write16(b, l4, tcp::CHECKSUM, c);
    if t.ipv6 {
        // The payload length counts extension headers too; written last,
        // as past 64 KiB the headers in front of TCP move.
        big::write_ipv6_len(pkt, l3, m.ip_len);
    }
}

//! Linux's merge rules on the full path: the fields of a segment they
//! compare (`Seg`), and the decision (`refusals`): one flush word whose
//! lowest bit names the rule that said no (`why`).

use super::*;
use crate::wire::field::udp;
use crate::wire::Outer;
use std::ops::Range;

/// The flag bits allowed to differ in the offset/flags/window word.
pub(super) const WORD_FREE: u32 = (VAR_FLAGS as u32) << 16;

/// The fields of an incoming segment the rules compare.
pub(super) struct Seg {
    pub(super) seq: u32,
    pub(super) ack: u32,
    pub(super) word: u32,
    pub(super) ip_word: u32,
    pub(super) id: u16,
    pub(super) flags: u8,
    pub(super) payload: u32,
    pub(super) frags: u16,
    pub(super) csum: u16,
    pub(super) urg: u16,
    /// The outer IPv4 ID, in a tunnel (else 0).
    pub(super) outer_id: u16,
}

/// The flag bits that may differ within a merged packet (PSH, FIN, CWR).
pub(super) const VAR_FLAGS: u8 = varying_bits(Hdr::Tcp, tcp::FLAGS);

/// The flags no segment of a merged packet carries (Linux flushes on
/// them): a head with them passes unheld (`not_held`), and a later segment
/// with them differs from its head where `VARIES` lets nothing differ.
pub(super) const NEVER_MERGED: u8 = SYN | RST | URG;

/// The flags a segment merges with and then ends its packet
/// (`ends_after`): a head with them passes unheld, as nothing can follow.
pub(super) const ENDING: u8 = PSH | FIN;

/// The flags only a packet's first segment may carry, as Linux holds CWR:
/// a segment that merges after it must not. `VARIES` lets them differ, the
/// full path refuses a later segment with them (`Flush::Flags`), and a
/// template, which later segments match, is its head's header without them.
pub(super) const HEAD_ONLY: u8 = CWR;

/// The header a field of `VARIES` lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hdr {
    Tcp,
    Ipv4,
    Ipv6,
    OuterIpv4,
    OuterIpv6,
    OuterUdp,
}

impl Hdr {
    /// Where this header starts in a segment of layout `t` (in tunnel
    /// `outer`), if the segment has it.
    pub(super) fn base(self, t: &Tcp, outer: Option<Outer>) -> Option<usize> {
        let o = |v6: bool, at: fn(&Outer) -> u16| {
            outer.filter(|o| o.ipv6 == v6).map(|o| at(&o) as usize)
        };
        match self {
            Hdr::Tcp => Some(t.l4 as usize),
            Hdr::Ipv4 => (!t.ipv6).then_some(t.l3 as usize),
            Hdr::Ipv6 => t.ipv6.then_some(t.l3 as usize),
            Hdr::OuterIpv4 => o(false, |o| o.l3),
            Hdr::OuterIpv6 => o(true, |o| o.l3),
            Hdr::OuterUdp => outer.map(|o| o.l4 as usize),
        }
    }
}

/// How the fast path holds a field the rules let vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fast {
    /// Checked on its own (seq and IPv4 IDs by `Template::next_ok` and
    /// `outer_follows`, checksums summed, PSH read): out of the template's mask.
    OnItsOwn,
    /// In the mask: a segment where it is not the head's takes the full path.
    AsHead,
}

/// A field (or some bits of a one-byte field) of `VARIES`.
pub(super) struct Varies {
    pub(super) hdr: Hdr,
    pub(super) at: Range<usize>,
    pub(super) bits: u8,
    pub(super) fast: Fast,
}

const fn field(hdr: Hdr, at: Range<usize>, fast: Fast) -> Varies {
    Varies {
        hdr,
        at,
        bits: 0xff,
        fast,
    }
}

const fn flags(bits: u8, fast: Fast) -> Varies {
    Varies {
        hdr: Hdr::Tcp,
        at: tcp::FLAGS..tcp::FLAGS + 1,
        bits,
        fast,
    }
}

/// Every header field Linux's rules let differ between the segments of one
/// merged packet, each with the rule that bounds it. Every other header
/// bit must be the head's: a change makes another flow or a refusal in
/// `refusals`. The fast path's masks (`Masks::of`) and the full path's
/// free flag bits (`VAR_FLAGS`) derive from it; a test changes each other
/// header bit and sees no merge on either path.
pub(super) const VARIES: [Varies; 16] = [
    // The next byte in sequence (`SeqGap`).
    field(Hdr::Tcp, tcp::SEQ, Fast::OnItsOwn),
    // Verified, or trusted; summed for the merged packet.
    field(Hdr::Tcp, tcp::CHECKSUM, Fast::OnItsOwn),
    // Meaningful only with URG, which never merges.
    field(Hdr::Tcp, tcp::URGENT, Fast::AsHead),
    // PSH and FIN merge, then flush.
    flags(PSH, Fast::OnItsOwn),
    flags(FIN, Fast::AsHead),
    // Only on the head (`HEAD_ONLY`).
    flags(HEAD_ONLY, Fast::AsHead),
    // A shorter segment merges, then flushes (`ShortSegment`); a longer
    // one does not (`LargerThanMss`). The fast path takes full-size ones.
    field(Hdr::Ipv4, ipv4::TOTAL_LEN, Fast::AsHead),
    field(Hdr::Ipv6, ipv6::PAYLOAD_LEN, Fast::AsHead),
    // Counts up, or stays (`IpId`); the header checksum verified.
    field(Hdr::Ipv4, ipv4::ID, Fast::OnItsOwn),
    field(Hdr::Ipv4, ipv4::CHECKSUM, Fast::OnItsOwn),
    // A tunnel's outer lengths follow the inner ones; its IPv4 ID as the
    // inner one (`OuterIpId`); its UDP checksum set on all or none
    // (`OuterMismatch`), verified when set. A full-size segment's UDP
    // checksum is the head's: the fast path compares it.
    field(Hdr::OuterIpv4, ipv4::TOTAL_LEN, Fast::AsHead),
    field(Hdr::OuterIpv6, ipv6::PAYLOAD_LEN, Fast::AsHead),
    field(Hdr::OuterIpv4, ipv4::ID, Fast::OnItsOwn),
    field(Hdr::OuterIpv4, ipv4::CHECKSUM, Fast::OnItsOwn),
    field(Hdr::OuterUdp, udp::LEN, Fast::AsHead),
    field(Hdr::OuterUdp, udp::CHECKSUM, Fast::AsHead),
];

/// The bits of each of header `hdr`'s first `N` bytes that `VARIES` lets
/// differ and the fast path checks on its own (out of a compare's mask).
pub(super) const fn own_bits<const N: usize>(hdr: Hdr) -> [u8; N] {
    let mut bits = [0u8; N];
    let mut i = 0;
    while i < VARIES.len() {
        let v = &VARIES[i];
        if v.hdr as u8 == hdr as u8 && v.fast as u8 == Fast::OnItsOwn as u8 {
            let mut at = v.at.start;
            while at < v.at.end && at < N {
                bits[at] |= v.bits;
                at += 1;
            }
        }
        i += 1;
    }
    bits
}

/// The bits of byte `at` of header `hdr` that `VARIES` lets differ.
pub(super) const fn varying_bits(hdr: Hdr, at: usize) -> u8 {
    let mut bits = 0;
    let mut i = 0;
    while i < VARIES.len() {
        let v = &VARIES[i];
        if v.hdr as u8 == hdr as u8 && v.at.start <= at && at < v.at.end {
            bits |= v.bits;
        }
        i += 1;
    }
    bits
}

impl Seg {
    /// Every field the rules compare.
    #[inline(always)]
    pub(super) fn read(f: &Fields, frags: u16) -> Seg {
        Seg::own(f, frags).with_shared(f)
    }

    /// The fields a segment is judged by on its own: sequence, size, flags,
    /// IPv4 ID and its sums. A pair needs no more (`try_pair` judges its
    /// second segment by the head's own header); those a segment must share
    /// with its flow's held packet (ACK, the flags word, IP fields, DF) are
    /// 0 until `with_shared` reads them.
    #[inline(always)]
    pub(super) fn own(f: &Fields, frags: u16) -> Seg {
        Seg {
            seq: f.seq(),
            ack: 0,
            word: 0,
            ip_word: 0,
            id: f.ip_id(),
            flags: f.flags(),
            payload: f.layout().payload_len,
            frags,
            csum: f.tcp_csum(),
            urg: f.urgent(),
            outer_id: 0,
        }
    }

    /// This segment with the fields it must share with its flow's held
    /// packet read too.
    #[inline(always)]
    pub(super) fn with_shared(self, f: &Fields) -> Seg {
        Seg {
            ack: f.ack(),
            word: f.flag_word(),
            ip_word: f.ip_word(),
            ..self
        }
    }

    /// The sequence number after this segment's payload: where its flow's
    /// next segment starts.
    #[inline(always)]
    pub(super) fn end(&self) -> u32 {
        self.seq.wrapping_add(self.payload)
    }

    /// This segment's TCP header sum (checksum field excluded), unfolded,
    /// from the constant part it shares with its flow.
    #[inline(always)]
    pub(super) fn var_sum(&self, hconst: u16) -> u64 {
        tcp_header_sum(hconst, self.seq, self.urg, self.flags)
    }
}

/// Why a segment with a payload that would start a packet passes unheld,
/// in the rules' order: flags that end a packet at once (`ends`), then
/// nothing later in its poll can join it (`alone`, asked only then: it
/// moves the look-ahead on). The full path's `not_held` and the fast
/// path's `head_at` both ask it.
#[inline(always)]
pub(super) fn passes_unheld(ends: bool, alone: impl FnOnce() -> bool) -> Option<Pass> {
    if ends {
        Some(Pass::Flags)
    } else if alone() {
        Some(Pass::Alone)
    } else {
        None
    }
}

/// Options compared as 32-bit words (their length is a multiple of 4).
#[inline(always)]
pub(super) fn opts_equal(held: &[u32], opts: &[u8]) -> bool {
    if held.len() * 4 != opts.len() {
        return false;
    }
    // Timestamps alone (NOP, NOP, TS): what nearly every segment carries.
    if let (Ok(o), [a, b, c]) = (<&[u8; 12]>::try_from(opts), held) {
        let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
        return ((a ^ w(0)) | (b ^ w(4)) | (c ^ w(8))) == 0;
    }
    let mut d = 0;
    for (h, w) in held.iter().zip(opts.chunks_exact(4)) {
        d |= h ^ u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
    }
    d == 0
}

/// A head's TCP options as the words `opts_equal` compares, and how many.
#[inline(always)]
pub(super) fn option_words(o: &[u8]) -> ([u32; 10], u8) {
    let mut opts = [0u32; 10];
    for (i, w) in o.chunks_exact(4).enumerate() {
        opts[i] = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
    }
    (opts, (o.len() / 4) as u8)
}

/// The reasons a merge can be refused, in the order Linux checks them: a
/// refusal sets its reason's bit (its place here) in a flush word, and the
/// lowest bit set names the reason the flow flushes for.
const REFUSALS: [Flush; 12] = [
    Flush::OuterMismatch,
    Flush::AckChange,
    Flush::Flags,
    Flush::OptionMismatch,
    Flush::IpMismatch,
    Flush::PureAck,
    Flush::SeqGap,
    Flush::LargerThanMss,
    Flush::FragLimit,
    Flush::SizeLimit,
    Flush::IpId,
    Flush::OuterIpId,
];

/// The bit of `why` in a flush word.
pub(super) const fn bit(why: Flush) -> u32 {
    let mut i = 0;
    while i < REFUSALS.len() {
        if REFUSALS[i] as u8 == why as u8 {
            return 1 << i;
        }
        i += 1;
    }
    panic!("not a reason a merge is refused for")
}

/// A rule's bit in a flush word: its reason's when `broken`, else 0.
#[inline(always)]
pub(super) const fn on(broken: bool, why: Flush) -> u32 {
    if broken {
        bit(why)
    } else {
        0
    }
}

impl<B> Core<B> {
    /// The rules every held packet applies, TCP's or UDP's, to a segment
    /// with IP fields `ip_word` (the head's are `base.ip_word`) and IPv4
    /// ID `id`, of `payload` bytes in `frags` buffers: the same IP fields,
    /// a payload no larger than the first segment's, the limits, an ID
    /// that follows. One line each; 0: none refuses.
    #[inline(always)]
    pub(super) fn refusals(
        &self,
        base: &Base,
        ip_word: u32,
        id: u16,
        payload: u32,
        frags: u16,
        max_frags: u16,
    ) -> u32 {
        let id_ok = self.t.ipv6 || self.id_mode.accepts(self.last_id, id);
        on(ip_word != base.ip_word, Flush::IpMismatch)
            | on(payload > self.mss, Flush::LargerThanMss)
            | self.over_limits(payload, frags, max_frags)
            | on(!id_ok, Flush::IpId)
    }

    /// The frag limit: would `frags` buffers more pass `max_frags`?
    #[inline(always)]
    pub(super) fn past_frags(&self, frags: u16, max_frags: u16) -> bool {
        self.frags as u32 + frags as u32 > max_frags as u32
    }

    /// The size limit: would `payload` bytes more pass `max_ip` bytes of
    /// IP packet (`big::max_ip`)?
    #[inline(always)]
    pub(super) fn past_size(&self, payload: u32) -> bool {
        self.ip_len + payload > self.max_ip
    }

    /// The limits' refusal bits for `payload` bytes more in `frags`
    /// buffers more.
    #[inline(always)]
    pub(super) fn over_limits(&self, payload: u32, frags: u16, max_frags: u16) -> u32 {
        on(self.past_frags(frags, max_frags), Flush::FragLimit)
            | on(self.past_size(payload), Flush::SizeLimit)
    }

    /// Whether one more full-size segment in one buffer (what the fast
    /// path takes) would pass a limit (`over_limits` then says which).
    #[inline(always)]
    pub(super) fn full(&self, max_frags: u16) -> bool {
        self.past_frags(1, max_frags) || self.past_size(self.mss)
    }

    /// How many more full-size segments of one buffer each fit the limits:
    /// `over_limits` as a count, for a run merged in one go.
    #[inline(always)]
    pub(super) fn room(&self, max_frags: u16) -> usize {
        let frags_left = max_frags.saturating_sub(self.frags) as usize;
        let size_left = self.max_ip.saturating_sub(self.ip_len);
        // (A payload-less head has no run.)
        frags_left.min(size_left.checked_div(self.mss).unwrap_or(0) as usize)
    }
}

/// Why a held packet leaves at once after a segment with PSH (`psh`) or
/// FIN (`fin`) and `payload` bytes merged into it (first segment's size
/// `mss`): PSH, FIN, or a short segment, the last of a burst.
#[inline(always)]
pub(super) fn ends_after(psh: bool, fin: bool, payload: u32, mss: u32) -> Option<Flush> {
    if psh {
        Some(Flush::Psh)
    } else if fin {
        Some(Flush::Fin)
    } else if payload < mss {
        Some(Flush::ShortSegment)
    } else {
        None
    }
}

impl<B: GroBuf> Gro<B> {
    /// Linux's merge rules for `seg` (with its options and IPv6 extension
    /// headers) against the packet `h` holds, read top to bottom as
    /// `tcp_gro_receive` does: each rule is one line that sets its reason's
    /// bit when it refuses, those every held packet applies in
    /// `Core::refusals`. 0: the segment merges. Otherwise the flow flushes
    /// for the lowest bit set (`why`).
    #[inline(always)]
    pub(super) fn refusals(&self, h: &Held<B>, seg: &Seg, opts: &[u8], ext: &[u8]) -> u32 {
        on(seg.ack != h.ack, Flush::AckChange)
            | on(
                (seg.word ^ h.word) & !WORD_FREE != 0 || seg.flags & HEAD_ONLY != 0,
                Flush::Flags,
            )
            | on(!h.options_equal(opts), Flush::OptionMismatch)
            | on(!h.same_ext(ext), Flush::IpMismatch)
            | on(seg.payload == 0, Flush::PureAck)
            | on(seg.seq != h.next_seq, Flush::SeqGap)
            | h.core.refusals(
                &h.base,
                seg.ip_word,
                seg.id,
                seg.payload,
                seg.frags,
                self.cfg.max_frags,
            )
    }
}

/// The reason a non-zero flush word names: its lowest bit's.
#[inline]
pub(super) fn why(refusals: u32) -> Flush {
    REFUSALS[refusals.trailing_zeros() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_refusal_names_the_flush() {
        for (i, &r) in REFUSALS.iter().enumerate() {
            assert_eq!(bit(r), 1 << i);
            assert_eq!(why(bit(r)), r);
            // Any later refusal alongside does not change the reason.
            let later = !0u32 << (i + 1) & ((1 << REFUSALS.len()) - 1);
            assert_eq!(why(bit(r) | later), r);
        }
    }

    #[test]
    fn the_room_for_a_run_is_the_limits_counted() {
        for (frags, ip_len, mss, max_ip, max_frags) in [
            (1, 1500, 1448, 65535, 17),
            (16, 1500, 1448, 65535, 17),
            (17, 1500, 1448, 65535, 17),
            (3, 60000, 1448, 65535, 45),
            (2, 64000, 1448, 65535, 45),
            (1, 100, 0, 65535, 17),
            (1, 9000, 8948, 512 * 1024, 64),
        ] {
            let c = Core::<VecBuf> {
                frags,
                ip_len,
                mss,
                max_ip,
                ..Core::default()
            };
            // Segment after segment, as long as the limits let one more in.
            let mut n = 0;
            let fits = |n: u32| c.over_limits(n * mss, n as u16, max_frags) == 0;
            while mss > 0 && fits(n + 1) {
                n += 1;
            }
            assert_eq!(c.room(max_frags), n as usize, "{frags} {ip_len} {mss}");
            assert_eq!(!c.full(max_frags), fits(1));
        }
    }
}

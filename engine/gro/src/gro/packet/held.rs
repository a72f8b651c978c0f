//! One flow's held packet: what a merge reads and writes, laid out by use.

use crate::gro::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::gro) enum IdMode {
    /// One segment so far.
    Open,
    Incrementing,
    /// Fixed ID (allowed with or without DF, as Linux does since 2025).
    Fixed,
}

impl IdMode {
    /// Whether IPv4 ID `id` may follow `last` in a packet of this mode: the
    /// next one, or (while open or fixed) the same.
    #[inline(always)]
    pub(in crate::gro) fn accepts(self, last: u16, id: u16) -> bool {
        let next = last.wrapping_add(1);
        match self {
            IdMode::Open => id == next || id == last,
            IdMode::Incrementing => id == next,
            IdMode::Fixed => id == last,
        }
    }

    /// What the ID moves by from one segment to the next in a packet of
    /// this mode, as the fast path expects it: one, unless fixed.
    #[inline(always)]
    pub(in crate::gro) fn step(self) -> u16 {
        match self {
            IdMode::Fixed => 0,
            _ => 1,
        }
    }

    /// The ID a segment after `last` carries in a packet of this mode, as
    /// the fast path expects it (`step`).
    #[inline(always)]
    pub(in crate::gro) fn next(self, last: u16) -> u16 {
        last.wrapping_add(self.step())
    }

    /// The mode once `id` merged after `last`: the second segment fixes it.
    #[inline(always)]
    pub(in crate::gro) fn after(self, last: u16, id: u16) -> IdMode {
        match self {
            IdMode::Open if id == last => IdMode::Fixed,
            IdMode::Open => IdMode::Incrementing,
            m => m,
        }
    }

    /// The mode once segments merged whose IDs were the ones `next`
    /// expected, as the fast path takes them: `after` for each.
    #[inline(always)]
    pub(in crate::gro) fn after_expected(self) -> IdMode {
        let m = match self {
            IdMode::Open => IdMode::Incrementing,
            m => m,
        };
        debug_assert_eq!(m, self.after(0xffff, self.next(0xffff)));
        m
    }
}

/// What every held packet keeps, a TCP flow's (`Held`) or a UDP flow's
/// (`UdpHeld`): who the flow is and its sizes, then the packet and its
/// running state, which every merge reads and writes. `repr(C)`: in `Held`
/// it is the first two cache lines (bar the 8 bytes `Held` puts after it).
#[repr(C)]
pub(in crate::gro) struct Core<B> {
    pub(in crate::gro) key: FlowKey,
    /// Payload bytes of the first segment: the size every merged one has
    /// (the last may be shorter).
    pub(in crate::gro) mss: u32,
    /// Largest IP packet this one may grow to (`big::max_ip`).
    pub(in crate::gro) max_ip: u32,
    /// The packet; None only while the slot is free.
    pub(in crate::gro) pkt: Option<B>,
    /// The payload's one's-complement sum so far (`Contrib`).
    pub(in crate::gro) psum: Contrib,
    /// IP packet length so far.
    pub(in crate::gro) ip_len: u32,
    pub(in crate::gro) payload_len: u32,
    pub(in crate::gro) segs: u16,
    /// Buffers of the packet's chain.
    pub(in crate::gro) frags: u16,
    pub(in crate::gro) last_id: u16,
    pub(in crate::gro) id_mode: IdMode,
    pub(in crate::gro) t: Tcp,
}

/// What a held packet's first segment fixed that the rest are held to or
/// summed from, and when it came.
#[repr(C)]
#[derive(Default)]
pub(in crate::gro) struct Base {
    /// The IP fields every segment must repeat (TOS/TTL/DF; IPv6 class and
    /// hop limit: `Fields::ip_word`).
    pub(in crate::gro) ip_word: u32,
    /// Pseudo-header sum without the length (addresses, protocol).
    pub(in crate::gro) pbase: u16,
    /// IPv4 header sum without total length and checksum (0 for IPv6).
    pub(in crate::gro) ip_base: u16,
    pub(in crate::gro) since: u64,
}

impl<B> Default for Core<B> {
    fn default() -> Self {
        Core {
            key: FlowKey::default(),
            mss: 0,
            max_ip: 0,
            pkt: None,
            psum: Contrib::default(),
            ip_len: 0,
            payload_len: 0,
            segs: 0,
            frags: 0,
            last_id: 0,
            id_mode: IdMode::Open,
            t: Tcp::default(),
        }
    }
}

/// One flow's held packet and what the next segment must match. The
/// compared fields live here, not in the packet, so a lookup touches one
/// table entry. Entries live in the table and are filled in place.
///
/// Laid out by use (`repr(C)`, a cache line each): the key and sizes, then
/// what every merge reads and writes (`Core`, then the seq and ID the next
/// segment must carry), then the template (its first 96 bytes are what a
/// compare reads, with the mask its layout shares with other flows), then
/// what a restart writes, then what only the full path and a flush read.
/// A merge touches four lines of the six, a restart five: for many flows
/// held or remembered at once, fewer misses.
#[repr(C, align(64))]
pub(in crate::gro) struct Held<B> {
    // Lines 0-1: the flow, its sizes, the packet and its running state.
    pub(in crate::gro) core: Core<B>,
    pub(in crate::gro) next_seq: u32,
    /// The IPv4 ID the next fast merge expects (a u32 of its own: the fast
    /// path reads it after storing the fields around it, and a narrower one
    /// may be read through a widened load that waits on those stores).
    pub(in crate::gro) next_id: u32,
    // Lines 2-4: what the next full-size segment must look like.
    pub(in crate::gro) tmpl: Template,
    // Line 4: what a restart writes (`Gro::start_at`).
    pub(in crate::gro) base: Base,
    /// The head's seq, urgent pointer and flags: with `hconst`, the merged
    /// header's sum without reading it again.
    pub(in crate::gro) head_seq: u32,
    /// The furthest any packet of the flow this entry held, or any segment
    /// it passed unheld at its ghost, ended (mod 2^32, as far as the ghost
    /// remembers): with the held packet behind it, no gap ahead of it is
    /// worth waiting for.
    pub(in crate::gro) high: u32,
    /// Every packet of the flow this entry held started where the one
    /// before it ended: what the flow sent before the held data was all
    /// delivered, as far as GRO saw (the reorder window's test for a
    /// retransmission of delivered data).
    pub(in crate::gro) gapless: bool,
    pub(in crate::gro) head_flags: u8,
    /// PSH and FIN, if a merged segment carried them.
    pub(in crate::gro) flags_or: u8,
    /// The head's sums and template are made (`Gro::finish_head`): a
    /// flow new to the table makes them only once a second segment
    /// comes, so a one-segment flow never pays for them.
    pub(in crate::gro) finished: bool,
    // The rest: read by the full path's rules and by a flush.
    pub(in crate::gro) ack: u32,
    pub(in crate::gro) word: u32,
    pub(in crate::gro) head_urg: u16,
    /// TCP header sum without seq, checksum, urgent pointer, PSH/FIN/CWR:
    /// what every mergeable segment's header shares with the head's.
    pub(in crate::gro) hconst: u16,
    /// The outer IPv4 ID last merged (a tunnelled flow's), and whether
    /// those IDs counted up or stayed.
    pub(in crate::gro) o_last_id: u16,
    pub(in crate::gro) o_id_mode: IdMode,
    pub(in crate::gro) opt_words: u8,
    pub(in crate::gro) opts: [u32; 10],
    /// The tunnel the flow is inside (`tunnel`), if any.
    pub(in crate::gro) outer: Option<crate::wire::Outer>,
}

// The layout described on `Held`, for a packet handle of one pointer (as
// the engine's `Skb` is; the GRO core does not name it): the key and
// sizes, the running state, the template from the third line, what a
// restart writes in the line after it.
const _: () = {
    type H = Held<std::ptr::NonNull<u8>>;
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(H, core) + offset_of!(Core<std::ptr::NonNull<u8>>, pkt) == 64);
    assert!(offset_of!(H, next_id) + 4 == 128);
    assert!(offset_of!(H, tmpl) == 128);
    assert!(offset_of!(H, base) == 128 + size_of::<Template>());
    assert!(offset_of!(H, finished) < 320);
    assert!(size_of::<H>() == 384);
};

/// How far behind where its last packet ended a flow's new packet may start
/// and still be the same stream (a head that came late); farther, the flow
/// started again (a new connection on the same addresses and ports, a
/// capture replayed in a loop), and what GRO knew of its past is dropped.
const SAME_STREAM: u32 = 1 << 24;

impl<B> Held<B> {
    /// A new packet of the flow this entry held starts at `seq`: keeps
    /// `gapless` and `high` (read before `next_seq` is overwritten).
    #[inline(always)]
    pub(in crate::gro) fn follow(&mut self, seq: u32) {
        let back = self.next_seq.wrapping_sub(seq);
        if back < 1 << 31 && back > SAME_STREAM {
            self.gapless = true;
            self.high = seq;
        } else {
            self.gapless &= self.next_seq == seq;
            self.high = later(self.high, self.next_seq);
        }
    }
}

/// The later of two sequence numbers (modulo 2^32, within 2^31).
#[inline(always)]
pub(in crate::gro) fn later(a: u32, b: u32) -> u32 {
    if b.wrapping_sub(a) < 1 << 31 {
        b
    } else {
        a
    }
}

impl<B> Default for Held<B> {
    fn default() -> Self {
        Held {
            core: Core::default(),
            next_seq: 0,
            next_id: 0,
            tmpl: Template::empty(),
            base: Base::default(),
            head_seq: 0,
            high: 0,
            gapless: false,
            head_flags: 0,
            flags_or: 0,
            finished: false,
            ack: 0,
            word: 0,
            head_urg: 0,
            hconst: 0,
            o_last_id: 0,
            o_id_mode: IdMode::Open,
            opt_words: 0,
            opts: [0; 10],
            outer: None,
        }
    }
}

impl<B> Core<B> {
    /// The bookkeeping of `segs` segments appended, in `frags` buffers, of
    /// `bytes` of payload with checksum contribution `c` (shifted as their
    /// offset in the payload wants).
    #[inline(always)]
    pub(in crate::gro) fn grow(&mut self, segs: u16, frags: u16, bytes: u32, c: Contrib) {
        self.psum = self.psum.add(c);
        self.payload_len += bytes;
        self.ip_len += bytes;
        self.segs += segs;
        self.frags += frags;
    }
}

impl<B: GroBuf> Core<B> {
    /// A new packet's first segment, `head`: `ip_len` bytes of IP packet
    /// carrying `mss` of payload (set before), IPv4 ID `id`, its payload's
    /// checksum contribution `c`. Every buffer of its chain counts against
    /// the frag limit, a header-only first one included (what a TX NIC's
    /// segment limit counts); a segment merged later counts only the
    /// buffers its payload is in (`Seg::frags`), its header being cut off.
    #[inline(always)]
    pub(in crate::gro) fn begin(&mut self, head: &B, ip_len: u32, c: Contrib, id: u16) {
        self.segs = 1;
        self.frags = head.segs();
        self.ip_len = ip_len;
        self.payload_len = self.mss;
        self.psum = c;
        self.last_id = id;
        self.id_mode = IdMode::Open;
    }

    /// Appends `pkt`, a segment the rules let merge, of `payload` bytes in
    /// `frags` buffers, IPv4 ID `id`, its payload's checksum contribution
    /// `psum`.
    #[inline(always)]
    pub(in crate::gro) fn append(
        &mut self,
        pkt: B,
        payload: u32,
        frags: u16,
        id: u16,
        psum: Contrib,
    ) {
        if let Some(held) = self.pkt.as_mut() {
            held.append(pkt, self.t.payload as usize);
        }
        let c = psum.shifted(self.payload_len & 1 == 1);
        self.grow(1, frags, payload, c);
        if !self.t.ipv6 {
            self.id_mode = self.id_mode.after(self.last_id, id);
        }
        self.last_id = id;
    }
}

impl<B: GroBuf> Held<B> {
    /// Appends `pkt`, this packet's next full-size segment (sequence number
    /// `seq`, IPv4 ID `id`, checksum contribution `c`, a tunnel's outer
    /// header taken care of), and moves on what the next one must carry.
    #[inline(always)]
    pub(in crate::gro) fn take_next(&mut self, pkt: B, seq: u32, c: Contrib, id: u16) {
        if let Some(held) = self.core.pkt.as_mut() {
            held.append_one(pkt, self.core.t.payload as usize);
        }
        let c = c.shifted(self.core.payload_len & 1 == 1);
        self.count_run(1, c, seq.wrapping_add(self.core.mss), id);
    }

    /// The bookkeeping of `n` full-size segments the caller appends: their
    /// checksum contributions `c` (each shifted as its offset in the
    /// payload wants), the sequence number the next one must carry, and
    /// the IPv4 ID of the last of them, which was the one expected (the
    /// next, or the same once fixed).
    #[inline(always)]
    pub(in crate::gro) fn count_run(&mut self, n: u16, c: Contrib, next_seq: u32, last_id: u16) {
        self.core.grow(n, n, self.core.mss * n as u32, c);
        self.next_seq = next_seq;
        // (`last_id` is not read here: a load of it may be widened over the
        // counters just stored, and wait for them: a store-forwarding stall.)
        if !self.core.t.ipv6 {
            self.core.last_id = last_id;
            // A fixed ID stays as it is: so does what comes next.
            if self.core.id_mode != IdMode::Fixed {
                self.core.id_mode = self.core.id_mode.after_expected();
                self.next_id = self.core.id_mode.next(last_id) as u32;
            }
        }
    }

    /// Are `ext` (a segment's IPv6 extension headers) the head's, byte for
    /// byte? (Read from the held packet, whose first buffer holds every
    /// header: `Tcp::parse` checked it.)
    #[inline(always)]
    pub(in crate::gro) fn same_ext(&self, ext: &[u8]) -> bool {
        let (at, end) = (
            self.core.t.l3 as usize + ipv6::HEADER_LEN,
            self.core.t.l4 as usize,
        );
        if !self.core.t.ipv6 || end == at {
            return ext.is_empty();
        }
        self.core.pkt.as_ref().and_then(|p| p.head().get(at..end)) == Some(ext)
    }

    /// Is `pkt` a one-buffer, full-size segment of this flow matching its
    /// template, with sequence number `seq` and IPv4 ID `id` (None: any)?
    /// (In a tunnel, `outer_follows` checks the outer IPv4 header.)
    /// If so, its sequence number, its payload's checksum contribution and
    /// whether it carries PSH, unless it is verified and bad (None then too).
    /// A frame shorter than the bytes a compare reads (a payload of a few
    /// bytes) is the full path's.
    #[inline(always)]
    pub(in crate::gro) fn template_match(
        &self,
        pkt: &B,
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
        masks: &Masks,
    ) -> Option<(u32, Contrib, bool)> {
        self.judge_under(pkt, seq, id, csum, masks.get(self.tmpl.mask))
    }

    /// `template_match` under `mask`, one of its layout's masks.
    #[inline(always)]
    fn judge_under(
        &self,
        pkt: &B,
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
        mask: &[u8; TMPL_LEN],
    ) -> Option<(u32, Contrib, bool)> {
        if !self.tmpl.on {
            return None;
        }
        self.judge_built(pkt, seq, id, csum, mask)
    }

    /// `judge_under` by a template built for this flow's packet, on or
    /// paused (`Expect::built`), which the caller checked.
    #[inline(always)]
    fn judge_built(
        &self,
        pkt: &B,
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
        mask: &[u8; TMPL_LEN],
    ) -> Option<(u32, Contrib, bool)> {
        let of = self.judged(seq, id, csum);
        self.tmpl.x.judge(pkt, &self.tmpl.bytes, mask, &of)
    }

    /// `template_match` for a new head (any seq, any ID) but for its TCP
    /// options (`Masks::bare`), which `same_options` judges: the sum it
    /// gives holds only if they are the last head's.
    #[inline(always)]
    pub(in crate::gro) fn bare_match(
        &self,
        pkt: &B,
        csum: FastCsum,
        masks: &Masks,
    ) -> Option<(u32, Contrib, bool)> {
        self.judge_under(pkt, None, None, csum, masks.bare(self.tmpl.mask))
    }

    /// The sequence number of `pkt` if it is a segment of this flow that
    /// may wait ahead of a gap (the reorder window's): `bare_match`, with
    /// the template on or paused (other segments of the flow wait), and
    /// its TCP checksum not judged (that is done when it is taken again).
    #[inline(always)]
    pub(in crate::gro) fn ahead_match(
        &self,
        pkt: &B,
        csum: FastCsum,
        masks: &Masks,
    ) -> Option<u32> {
        if !self.tmpl.built() {
            return None;
        }
        let bare = masks.bare(self.tmpl.mask);
        let (seq, _, _) = self.judge_built(pkt, None, None, csum.unsummed(), bare)?;
        Some(seq)
    }

    /// Whether `pkt`, which `bare_match` took, carries the TCP options its
    /// flow's head has (`options_equal`).
    #[inline(always)]
    pub(in crate::gro) fn same_options(&self, pkt: &B) -> bool {
        let t = &self.core.t;
        self.options_equal(&pkt.head()[t.l4 as usize + tcp::MIN_LEN..t.payload as usize])
    }

    /// Whether TCP options `opts` are the head's (Linux's rule, as the
    /// rules' words hold them: `opts_equal`).
    #[inline(always)]
    pub(in crate::gro) fn options_equal(&self, opts: &[u8]) -> bool {
        opts_equal(&self.opts[..self.opt_words as usize], opts)
    }

    /// Whether `head` carries this flow's TCP ports where its layout has
    /// them: a cheap sign that a segment its template turned away is of
    /// this flow all the same (`refused` then judges it whole).
    #[inline(always)]
    pub(in crate::gro) fn same_ports(&self, head: &[u8]) -> bool {
        let at = field::at(self.core.t.l4 as usize, tcp::PORTS);
        head.get(at.clone()) == self.tmpl.bytes.get(at)
    }

    /// Takes the TCP options of `head`, a new head of this flow that its
    /// template took but for them (`bare_match`, `same_options`): into the
    /// rules' option words, the template's bytes, and the header sums they
    /// enter (`hconst`, the template's `k`), each moved by what the new
    /// options add to a sum against the last head's. Returns that
    /// difference (one's complement), which a head judged before adds.
    #[inline(always)]
    pub(in crate::gro) fn take_options(&mut self, head: &[u8]) -> u16 {
        let t = &self.core.t;
        let at = t.l4 as usize + tcp::MIN_LEN..t.payload as usize;
        // The same length as the last head's: the template took the data
        // offset. Timestamps alone (NOP, NOP, TS) with no loop.
        let (new, old) = (&head[at.clone()], &mut self.tmpl.bytes[at]);
        let d = match (
            <&[u8; 12]>::try_from(new),
            <&mut [u8; 12]>::try_from(&mut *old),
        ) {
            (Ok(new), Ok(old)) => moved_options(old, new, &mut self.opts),
            _ => moved_options(old, new, &mut self.opts),
        };
        self.hconst = csum::add(self.hconst, d);
        // Folded, so that renewals never grow it.
        self.tmpl.x.k = csum::fold(self.tmpl.x.k + d as u64) as u64;
        d
    }

    /// `template_match` for a template that is on and whose compare reads
    /// `N` bytes (`Template::width`), with its layout's `mask`: what a run
    /// of segments checks each by, the template's fields read once.
    #[inline(always)]
    pub(in crate::gro) fn match_in<const N: usize>(
        &self,
        pkt: &B,
        mask: &[u8; TMPL_LEN],
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
    ) -> Option<(u32, Contrib, bool)> {
        let of = self.judged(seq, id, csum);
        self.tmpl
            .x
            .judge_in::<B, N>(pkt, &self.tmpl.bytes, mask, &of)
    }

    /// What a segment of this flow is judged by: seq `seq` and IPv4 ID `id`
    /// (None: any), its checksum taken as `csum` says, the payload where
    /// the head's starts, full-size.
    #[inline(always)]
    fn judged(&self, seq: Option<u32>, id: Option<u16>, csum: FastCsum) -> Judged {
        Judged {
            seq,
            id,
            csum,
            payload: self.core.t.payload as usize,
            mss: self.core.mss as usize,
        }
    }
}

/// Options `new` in place of `old` (the template's bytes; `opts`, the rules'
/// words): what the change adds to a sum (one's complement).
#[inline(always)]
fn moved_options(old: &mut [u8], new: &[u8], opts: &mut [u32; 10]) -> u16 {
    let d = csum::sub(csum::sum_header(new), csum::sum_header(old));
    old.copy_from_slice(new);
    (*opts, _) = option_words(new);
    d
}

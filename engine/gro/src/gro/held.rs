//! One flow's held packet: what a merge reads and writes, laid out by use.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdMode {
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
    pub(super) fn accepts(self, last: u16, id: u16) -> bool {
        let next = last.wrapping_add(1);
        match self {
            IdMode::Open => id == next || id == last,
            IdMode::Incrementing => id == next,
            IdMode::Fixed => id == last,
        }
    }

    /// The mode once `id` merged after `last`: the second segment fixes it.
    #[inline(always)]
    pub(super) fn after(self, last: u16, id: u16) -> IdMode {
        match self {
            IdMode::Open if id == last => IdMode::Fixed,
            IdMode::Open => IdMode::Incrementing,
            m => m,
        }
    }
}

/// One flow's held packet and what the next segment must match. The
/// compared fields live here, not in the packet, so a lookup touches one
/// table entry. Entries live in the table and are filled in place.
///
/// Laid out by use (`repr(C)`, a cache line each): the key, then what every
/// merge reads and writes, then the template (its first 96 bytes are what a
/// compare reads, with the mask its layout shares with other flows), then
/// what only the full path and a flush read. A merge or a restart touches
/// four lines of the six: for many flows held or remembered at once, fewer
/// misses.
#[repr(C, align(64))]
pub(super) struct Held<B> {
    // Line 0: who the flow is (lookups compare it) and its sizes.
    pub(super) key: FlowKey,
    pub(super) mss: u32,
    /// Largest IP packet this one may grow to (`max_size`, IPv6 payload rule).
    pub(super) max_ip: u32,
    // Line 1: the packet and its running state.
    /// The packet; None only while the slot is free.
    pub(super) pkt: Option<B>,
    /// The payload's one's-complement sum so far, as two unfolded
    /// accumulators: the sum is `pos - neg` modulo 0xffff (see `Contrib`).
    pub(super) psum_pos: u64,
    pub(super) psum_neg: u64,
    pub(super) next_seq: u32,
    /// IP packet length so far.
    pub(super) ip_len: u32,
    pub(super) payload_len: u32,
    /// The IPv4 ID the next fast merge expects (a u32 of its own: the fast
    /// path reads it after storing the fields around it, and a narrower one
    /// may be read through a widened load that waits on those stores).
    pub(super) next_id: u32,
    pub(super) segs: u16,
    pub(super) frags: u16,
    pub(super) last_id: u16,
    pub(super) id_mode: IdMode,
    pub(super) flags_or: u8,
    pub(super) t: Tcp,
    // Lines 2-4: what the next full-size segment must look like.
    pub(super) tmpl: Template,
    // The rest: read by the full path's rules and by a flush.
    pub(super) ack: u32,
    pub(super) word: u32,
    pub(super) ip_word: u32,
    /// The head's seq, urgent pointer and flags: with `hconst`, the merged
    /// header's sum without reading it again.
    pub(super) head_seq: u32,
    /// The furthest any packet of the flow this entry held ended (mod
    /// 2^32, as far as the ghost remembers): with the held packet behind
    /// it, no gap ahead of it is worth waiting for.
    pub(super) high: u32,
    pub(super) head_urg: u16,
    /// Pseudo-header sum without the length (addresses, protocol).
    pub(super) pbase: u16,
    /// TCP header sum without seq, checksum, urgent pointer, PSH/FIN/CWR:
    /// what every mergeable segment's header shares with the head's.
    pub(super) hconst: u16,
    /// IPv4 header sum without total length and checksum (0 for IPv6).
    pub(super) ip_base: u16,
    /// The outer IPv4 ID last merged (a tunnelled flow's), and whether
    /// those IDs counted up or stayed.
    pub(super) o_last_id: u16,
    /// Every packet of the flow this entry held started where the one
    /// before it ended: what the flow sent before the held data was all
    /// delivered, as far as GRO saw (the reorder window's test for a
    /// retransmission of delivered data).
    pub(super) gapless: bool,
    /// The head's sums and template are made (`Gro::finish_head`): a
    /// flow new to the table makes them only once a second segment
    /// comes, so a one-segment flow never pays for them.
    pub(super) finished: bool,
    pub(super) head_flags: u8,
    pub(super) df: bool,
    pub(super) opt_words: u8,
    pub(super) o_id_mode: IdMode,
    pub(super) opts: [u32; 10],
    pub(super) since: u64,
    /// The tunnel the flow is inside (`tunnel`), if any.
    pub(super) outer: Option<crate::wire::Outer>,
}

// The layout described on `Held`, for a packet handle of one pointer (as
// the engine's `Skb` is; the GRO core does not name it): the key and
// sizes, the running state, then the template from the third line.
const _: () = {
    type H = Held<std::ptr::NonNull<u8>>;
    assert!(std::mem::offset_of!(H, pkt) == 64);
    assert!(std::mem::offset_of!(H, tmpl) == 128);
    assert!(std::mem::offset_of!(H, ack) == 128 + std::mem::size_of::<Template>());
    assert!(std::mem::size_of::<H>() == 384);
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
    pub(super) fn follow(&mut self, seq: u32) {
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
pub(super) fn later(a: u32, b: u32) -> u32 {
    if b.wrapping_sub(a) < 1 << 31 {
        b
    } else {
        a
    }
}

impl<B> Default for Held<B> {
    fn default() -> Self {
        Held {
            key: FlowKey::default(),
            next_seq: 0,
            ack: 0,
            word: 0,
            ip_word: 0,
            last_id: 0,
            next_id: 0,
            id_mode: IdMode::Open,
            df: false,
            opt_words: 0,
            opts: [0; 10],
            mss: 0,
            segs: 0,
            frags: 0,
            ip_len: 0,
            payload_len: 0,
            psum_pos: 0,
            psum_neg: 0,
            pbase: 0,
            hconst: 0,
            head_seq: 0,
            gapless: false,
            finished: false,
            high: 0,
            head_urg: 0,
            head_flags: 0,
            ip_base: 0,
            max_ip: 0,
            flags_or: 0,
            t: Tcp::default(),
            since: 0,
            tmpl: Template::off(),
            pkt: None,
            outer: None,
            o_last_id: 0,
            o_id_mode: IdMode::Open,
        }
    }
}

impl<B: GroBuf> Held<B> {
    /// Whether the packet has no room for one more full-size segment: it
    /// spans `max_frags` buffers, or one more would pass its size limit.
    #[inline(always)]
    pub(super) fn full(&self, max_frags: u16) -> bool {
        self.frags >= max_frags || self.ip_len + self.mss > self.max_ip
    }

    /// Appends `pkt`, this packet's next full-size segment (sequence number
    /// `seq`, IPv4 ID `id`, checksum contribution `c`, a tunnel's outer
    /// header taken care of), and moves on what the next one must carry.
    #[inline(always)]
    pub(super) fn take_next(&mut self, pkt: B, seq: u32, c: Contrib, id: u16) {
        if let Some(held) = self.pkt.as_mut() {
            held.append_one(pkt, self.t.payload as usize);
        }
        let c = c.shifted(self.payload_len & 1 == 1);
        self.count_run(1, c, seq.wrapping_add(self.mss), id);
    }

    /// The bookkeeping of `n` full-size segments the caller appends: their
    /// checksum contributions `c` (each shifted as its offset in the
    /// payload wants), the sequence number the next one must carry, and
    /// the IPv4 ID of the last of them, which was the one expected (the
    /// next, or the same once fixed).
    #[inline(always)]
    pub(super) fn count_run(&mut self, n: u16, c: Contrib, next_seq: u32, last_id: u16) {
        let bytes = self.mss * n as u32;
        self.psum_pos += c.pos;
        self.psum_neg += c.neg;
        self.payload_len += bytes;
        self.ip_len += bytes;
        self.next_seq = next_seq;
        self.segs += n;
        self.frags += n;
        // (`last_id` is not read here: a load of it may be widened over the
        // counters just stored, and wait for them: a store-forwarding stall.)
        if !self.t.ipv6 {
            self.last_id = last_id;
            if self.id_mode != IdMode::Fixed {
                self.id_mode = IdMode::Incrementing;
                self.next_id = last_id.wrapping_add(1) as u32;
            }
        }
    }

    /// Are `ext` (a segment's IPv6 extension headers) the head's, byte for
    /// byte? (Read from the held packet, whose first buffer holds every
    /// header: `Tcp::parse` checked it.)
    #[inline(always)]
    pub(super) fn same_ext(&self, ext: &[u8]) -> bool {
        let (at, end) = (self.t.l3 as usize + ipv6::HEADER_LEN, self.t.l4 as usize);
        if !self.t.ipv6 || end == at {
            return ext.is_empty();
        }
        self.pkt.as_ref().and_then(|p| p.head().get(at..end)) == Some(ext)
    }

    /// Is `pkt` a one-buffer, full-size segment of this flow matching its
    /// template, with sequence number `seq` and IPv4 ID `id` (None: any)?
    /// (In a tunnel, `outer_follows` checks the outer IPv4 header.)
    /// If so, its sequence number, its payload's checksum contribution and
    /// whether it carries PSH, unless it is verified and bad (None then too).
    /// A frame shorter than the bytes a compare reads (a payload of a few
    /// bytes) is the full path's.
    #[inline(always)]
    pub(super) fn template_match(
        &self,
        pkt: &B,
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
        masks: &Masks,
    ) -> Option<(u32, Contrib, bool)> {
        let tm = &self.tmpl;
        if !tm.on {
            return None;
        }
        let mask = masks.get(tm.mask);
        match tm.width() {
            Width::Short => self.match_in::<SHORT_CMP>(pkt, mask, seq, id, csum),
            Width::Fixed => self.match_in::<FIXED_CMP>(pkt, mask, seq, id, csum),
            Width::Whole => self.match_in::<TMPL_LEN>(pkt, mask, seq, id, csum),
        }
    }

    /// `template_match` for a template that is on and whose compare reads
    /// `N` bytes (`Template::width`), with its layout's `mask`: what a run
    /// of segments checks each by, the template's fields read once.
    #[inline(always)]
    pub(super) fn match_in<const N: usize>(
        &self,
        pkt: &B,
        mask: &[u8; TMPL_LEN],
        seq: Option<u32>,
        id: Option<u16>,
        csum: FastCsum,
    ) -> Option<(u32, Contrib, bool)> {
        if pkt.len() != self.tmpl.frame_len as usize || pkt.segs() != 1 {
            return None;
        }
        let b = pkt.head();
        let h: &[u8; N] = b.first_chunk()?;
        let tm = &self.tmpl;
        let seen = tm.accepts(h, mask, seq, id)?;
        let seq = seq.unwrap_or(seen.seq);
        let psh = seen.psh;
        // The seq added whole: a 32-bit word sums as its two 16-bit halves
        // do, since 2^16 is 1 modulo 0xffff.
        let x = tm.k + seq as u64 + seen.csum as u64 + psh as u64 * PSH as u64;
        if !csum.sums(tm.tunnel) {
            return Some((seq, Contrib { pos: 0, neg: x }, psh));
        }
        // One buffer (checked above): its payload is one slice.
        let payload = self.t.payload as usize;
        let p = csum::sum(&b[payload..payload + self.mss as usize]);
        (csum::add(csum::fold(x), p) == 0xffff).then_some((
            seq,
            Contrib {
                pos: p as u64,
                neg: 0,
            },
            psh,
        ))
    }
}

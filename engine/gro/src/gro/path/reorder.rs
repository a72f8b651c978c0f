//! The reorder window (`GroConfig::reorder`): a segment that arrives ahead
//! of a gap in its held flow waits, instead of flushing the flow, for the
//! gap to fill; the filler merges, then the waiting segments merge after it
//! in sequence order, each under every rule of the full path. Linux and
//! VPP flush at every gap; DPDK's rte_gro merges out of order segments but
//! breaks the segment and IP ID limits. Here nothing merges across a gap
//! that does not fill: when the wait is over (`expire_reorder`), the
//! window is full, or the flow leaves for any other reason, the held packet
//! leaves and the waiting segments go through GRO again, in sequence order
//! (they merge among themselves where they are contiguous).
//!
//! A data segment of the flow waits when it starts at most `reorder`
//! segments of the flow's size past the gap, whether or not it could merge
//! with the held packet (one with other timestamps starts the next packet
//! once the gap fills, in sequence order). A segment wholly before the held data (a retransmission of
//! what was delivered) passes at once and leaves the held data be.
//!
//! Waiting segments live beside the table, `reorder` places per entry, in
//! sequence order; segments let go are queued (`pending`) and go through
//! GRO again before the flow's next segment, on the full path: a flow with
//! segments waiting or let go has its template paused or off, so the fast
//! path's merges and runs never meet the window and pay nothing for it.
//! What the fast path does hand the window, it takes as the full path
//! would: a segment its template judged ahead of a gap waits, the gap's
//! filler merges, and once the gap fills each waiting segment, its held
//! packet's next one in sequence order, merges there too where the flow
//! had a template (`window_fast`, `filled_fast`); the template is on again
//! once none waits. Everything is allocated when GRO is built; with the
//! window off, none of it is.

use crate::gro::*;

/// A segment waiting ahead of a gap.
pub(in crate::gro) struct Ahead<B> {
    pub(in crate::gro) seq: u32,
    /// Where its payload ends (seq + length).
    pub(in crate::gro) end: u32,
    /// When it arrived (TSC): its wait is bounded from then.
    pub(in crate::gro) arrived: u64,
    pub(in crate::gro) pkt: B,
}

/// A segment let go, to go through GRO again.
pub(in crate::gro) struct Again<B> {
    pub(in crate::gro) pkt: B,
    pub(in crate::gro) arrived: u64,
    /// Whether it may wait ahead of a gap again (not once its wait was
    /// given up).
    pub(in crate::gro) may_wait: bool,
}

/// The waiting segments of every entry, and those let go.
pub(in crate::gro) struct Reorder<B> {
    /// Places per entry (`GroConfig::reorder`).
    per: usize,
    /// Entry `s`'s waiting segments: `ahead[s * per..][..count[s]]`, in
    /// sequence order.
    ahead: Vec<Option<Ahead<B>>>,
    count: Vec<u8>,
    /// Segments let go; at most every place at once, so never grown.
    pending: std::collections::VecDeque<Again<B>>,
}

impl<B> Reorder<B> {
    pub(in crate::gro) fn new(entries: usize, per: usize, flows: usize) -> Reorder<B> {
        Reorder {
            per,
            ahead: (0..entries * per).map(|_| None).collect(),
            count: vec![0; entries],
            pending: std::collections::VecDeque::with_capacity(flows * per + per),
        }
    }

    /// How many segments wait in entry `s`.
    #[inline(always)]
    pub(in crate::gro) fn waiting(&self, s: u16) -> usize {
        self.count[s as usize] as usize
    }

    fn places(&mut self, s: u16) -> &mut [Option<Ahead<B>>] {
        let at = s as usize * self.per;
        &mut self.ahead[at..at + self.per]
    }
}

/// What the window does with a segment its held flow cannot merge.
pub(in crate::gro) enum Window {
    /// It waits ahead of the gap.
    Wait,
    /// Wholly before the held data: it passes at once, after the held
    /// packet, and is not held.
    Retransmission,
    /// Exactly the gap before the held packet (its flow started it ahead of
    /// where the data it delivered ends): it comes before the held packet in
    /// sequence, so it passes at once, and the held packet stays.
    BeforeHeld,
    /// Ahead of the gap, but the window is full: give the wait up.
    Full,
    /// The held packet came late (behind delivered data) and this one
    /// starts where that data ends: the held packet leaves, this one starts
    /// the next, and what waited follows it.
    Continues,
    /// Not the window's: the flow flushes as without it.
    No,
}

impl<B: GroBuf> Gro<B> {
    /// Whether the window has work: segments waiting or let go.
    #[inline(always)]
    pub(in crate::gro) fn reorder_busy(&self) -> bool {
        (self.ahead_flows | self.pending) != 0
    }

    /// What the window makes of `seg`, which the flow held in `s` could not
    /// merge (`ext`: its IPv6 extension headers).
    #[cold]
    pub(in crate::gro) fn window(&self, s: u16, seg: &Seg, ext: &[u8]) -> Window {
        let same_ext = self.table.get(s).same_ext(ext);
        self.window_for(s, (seg.seq, seg.payload), seg.flags, same_ext)
    }

    /// `window` for a segment at `seq` of `len` bytes, with TCP flags
    /// `flags`, whose IPv6 extension headers are (`same_ext`) or are not
    /// those of the flow's held packet.
    #[inline(always)]
    fn window_for(&self, s: u16, (seq, len): (u32, u32), flags: u8, same_ext: bool) -> Window {
        let Some(r) = self.reorder.as_deref() else {
            return Window::No;
        };
        if self.no_wait || len == 0 {
            return Window::No;
        }
        let h = self.table.get(s);
        let end = seq.wrapping_add(len);
        // At or before the held packet's first byte (modulo 2^31), in a flow
        // that has had no gap and has nothing waiting: delivered already.
        // (Where a gap was, it may be the gap's data; past what waits, it
        // would overtake it: as without the window, what is held and waits
        // leaves first.)
        if h.gapless && r.waiting(s) == 0 && h.head_seq.wrapping_sub(end) < 1 << 31 {
            return Window::Retransmission;
        }
        // The whole gap between where the data the flow delivered ends
        // (`high`) and the held packet's head, which started ahead of it (a
        // flow whose packet left early, on PSH or at a limit, restarted with
        // a segment that had waited): in sequence right after the one and
        // right before the other. Only the whole gap: a part of it passed
        // early could be followed by the rest after the held packet leaves.
        if seq == h.high && end == h.head_seq && flags & (NEVER_MERGED | FIN) == 0 && same_ext {
            return Window::BeforeHeld;
        }
        // The gap starts where the held packet ends; or, for a packet that
        // came late, behind data of its flow already delivered, where that
        // data ends: a segment there continues the flow, and what waits
        // beyond waits for it.
        let behind = h.next_seq.wrapping_sub(h.high) >= 1 << 31;
        let gap = if behind { h.high } else { h.next_seq };
        let past = seq.wrapping_sub(gap);
        let n = r.waiting(s);
        let places = &r.ahead[s as usize * r.per..][..n];
        // Bytes of a waiting segment again (a copy, or a retransmission cut
        // at other boundaries): put in sequence order, one of the two would
        // step back over the other.
        let off = |x: u32| x.wrapping_sub(gap);
        let overlaps = |a: &Ahead<B>| off(seq) < off(a.end) && off(a.seq) < off(end);
        if behind && past == 0 {
            // Running into what waits (which arrived first): the wait is
            // given up, what waited leaves before this one.
            return if places.iter().flatten().any(overlaps) {
                Window::Full
            } else {
                Window::Continues
            };
        }
        // Only segments of this flow wait (the same IPv6 extension headers:
        // those with others pass in order). One that will not merge with
        // the held packet (other options, ACK, flags) still waits: once the
        // gap fills, it starts the next packet in sequence order. SYN, RST
        // and URG do not: they leave at once, after the flow's data.
        if past == 0 || past >= 1 << 31 || flags & NEVER_MERGED != 0 || !same_ext {
            return Window::No;
        }
        // Past what the window could bridge (`reorder` places, one of them
        // at least the gap), a place short, or overlapping a waiting
        // segment: the wait is given up, what waited leaves before this one.
        if past > r.per as u32 * h.core.mss || n == r.per || places.iter().flatten().any(overlaps) {
            return if n == 0 { Window::No } else { Window::Full };
        }
        Window::Wait
    }

    /// `pkt`, a segment its flow's packet in slot `s` turned away on the
    /// fast path (`Gro::refused`; not a new head), taken as the full path
    /// would take it (`with_held`) when it is one of two kinds, from the
    /// header its template judged (the held packet's but for seq, ID,
    /// options and PSH; full-size; no SYN, RST, URG nor FIN), without its
    /// parse and lookup: ahead of a gap, it waits if the window says so;
    /// the flow's next byte while segments of the flow wait (its template
    /// paused), it is the gap's filler: merged on the fast path, and what
    /// waited follows (`settle`). Gives it back otherwise. Not inside a
    /// tunnel (verifying, the full path checks the outer UDP checksum
    /// first).
    #[inline(never)]
    pub(in crate::gro) fn window_fast(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let Some(h) = self.table.try_get(s).filter(|h| !h.tmpl.tunnel) else {
            return Some(pkt);
        };
        let Some(seq) = h.ahead_match(&pkt, csum, &self.masks) else {
            return Some(pkt);
        };
        let len = h.core.mss;
        if seq == h.next_seq {
            // One that runs into what waits gives the wait up: the full
            // path's.
            if !h.tmpl.paused || self.overlaps_waiting(s, seq, len) {
                return Some(pkt);
            }
            let left = self.merge_paused(s, pkt, csum, out);
            if left.is_none() && self.reorder_busy() {
                self.settle(out);
            }
            return left;
        }
        if !matches!(self.window_for(s, (seq, len), 0, true), Window::Wait) {
            return Some(pkt);
        }
        self.wait_ahead(s, pkt, seq, len, self.now);
        None
    }

    /// Puts `pkt` (sequence number `seq`) in the window of the flow in
    /// `s`, in sequence order (the caller checked there is a place).
    #[cold]
    pub(in crate::gro) fn wait_ahead(&mut self, s: u16, pkt: B, seq: u32, len: u32, arrived: u64) {
        let next = self.table.get(s).next_seq;
        let r = self.reorder.as_deref_mut().expect("the window is on");
        let n = r.waiting(s);
        let places = r.places(s);
        let key = |a: &Option<Ahead<B>>| a.as_ref().map_or(0, |a| a.seq.wrapping_sub(next));
        let at = places[..n].partition_point(|a| key(a) < seq.wrapping_sub(next));
        places[at..=n].rotate_right(1);
        places[at] = Some(Ahead {
            seq,
            end: seq.wrapping_add(len),
            arrived,
            pkt,
        });
        r.count[s as usize] += 1;
        if n == 0 {
            self.ahead_flows += 1;
            // The fast path's merges and runs never touch a flow the window
            // works on (its segments go through `window_fast` or the full
            // path, which settle the window) until none waits.
            self.table.get_mut(s).tmpl.pause();
        }
        self.stats.reorder_held += 1;
    }

    /// The first waiting segment of the flow in `s`, if it now starts at or
    /// before the flow's next byte (its gap filled).
    #[inline]
    fn take_filled(&mut self, s: u16) -> Option<Ahead<B>> {
        let next = self.table.try_get(s)?.next_seq;
        let r = self.reorder.as_deref_mut()?;
        let n = r.waiting(s);
        if n == 0 {
            return None;
        }
        let places = r.places(s);
        let first = places[0].as_ref().expect("counted places are filled");
        if next.wrapping_sub(first.seq) >= 1 << 31 {
            return None;
        }
        let a = places[0].take();
        places[..n].rotate_left(1);
        r.count[s as usize] -= 1;
        if n == 1 {
            self.ahead_flows -= 1;
            // Nothing of the flow waits: its template (if it had one) is
            // good for its held packet still.
            self.table.get_mut(s).tmpl.resume();
        }
        a
    }

    /// Lets every segment waiting in `s` go, in sequence order, to go
    /// through GRO again (from `settle`). Called as its flow leaves; out of
    /// line, so that a flush (inlined where packets leave) stays small.
    #[cold]
    #[inline(never)]
    pub(in crate::gro) fn let_go(&mut self, s: u16) {
        let may_wait = !self.giving_up;
        let Some(r) = self.reorder.as_deref_mut() else {
            return;
        };
        let n = r.waiting(s);
        if n == 0 {
            return;
        }
        r.count[s as usize] = 0;
        self.ahead_flows -= 1;
        // Its next segment takes the full path, which takes these first.
        self.table.get_mut(s).tmpl.off();
        // To the queue's front, in sequence order: what is queued already
        // of this flow was let go before and taken again after these (it
        // is later in sequence); other flows' order does not matter.
        let at = s as usize * r.per;
        for i in (0..n).rev() {
            let a = r.ahead[at + i].take().expect("counted places are filled");
            r.pending.push_front(Again {
                pkt: a.pkt,
                arrived: a.arrived,
                may_wait,
            });
        }
        self.pending = r.pending.len() as u32;
    }

    /// Gives up the wait of the flow in `s`: its held packet leaves (`why`),
    /// then its waiting segments go through GRO again at once, never to
    /// wait again.
    #[cold]
    pub(in crate::gro) fn give_up(&mut self, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        let was = std::mem::replace(&mut self.giving_up, true);
        self.flush_slot(s, why, out);
        self.giving_up = was;
        self.settle(out);
    }

    /// Gives up the wait of the flow in `s` for `pkt`, which arrived after
    /// what waited and cannot join it (or would overtake it): what waited
    /// leaves first, in sequence order, then `pkt` is taken afresh. One
    /// taken from the queue of segments let go goes back to its front,
    /// behind what waited and ahead of the rest (its flow's later
    /// segments, let go with it).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gro) fn give_up_for(
        &mut self,
        s: u16,
        why: Flush,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        out: &mut impl FnMut(B),
    ) {
        if self.from_window {
            self.take_again_first(pkt, now);
            return self.give_up(s, why, out);
        }
        self.give_up(s, why, out);
        self.receive_slow(pkt, now, verify, hints, None, None, out)
    }

    /// Whether a segment at `seq`, `len` bytes, that continues the held
    /// packet of the flow in `s` reaches into a segment waiting there.
    #[inline]
    pub(in crate::gro) fn overlaps_waiting(&self, s: u16, seq: u32, len: u32) -> bool {
        let Some(r) = self.reorder.as_deref() else {
            return false;
        };
        let at = s as usize * r.per;
        match r.ahead[at..at + r.per].first() {
            Some(Some(a)) => a.seq.wrapping_sub(seq) < len,
            _ => false,
        }
    }

    /// Puts `pkt` (taken from the queue of segments let go, arrived at
    /// `arrived`) back at the queue's front, to be taken again first.
    #[cold]
    fn take_again_first(&mut self, pkt: B, arrived: u64) {
        let may_wait = !self.no_wait;
        let r = self.reorder.as_deref_mut().expect("the window is on");
        r.pending.push_front(Again {
            pkt,
            arrived,
            may_wait,
        });
        self.pending = r.pending.len() as u32;
    }

    /// Finishes what the window started in this call: the flow a segment
    /// just went to merges whatever waited for the gap it filled, and what
    /// was let go goes through GRO again, oldest first, until neither is
    /// left. Each round takes one segment out of the window or the queue
    /// and puts none back in the queue without a flush (which lets at
    /// least one held packet out for good), so it ends.
    #[cold]
    #[inline(never)]
    pub(in crate::gro) fn settle(&mut self, out: &mut impl FnMut(B)) {
        let verify = self.cfg.csum == CsumMode::Verify;
        loop {
            if let Some(s) = self.last {
                if let Some(a) = self.take_filled(s) {
                    self.stats.reorder_filled += 1;
                    let Some(pkt) = self.filled_fast(s, a.pkt, a.arrived, verify, out) else {
                        continue;
                    };
                    let hints = pkt.rx_hints();
                    let was = std::mem::replace(&mut self.from_window, true);
                    self.receive_slow(pkt, a.arrived, verify, hints, None, None, out);
                    self.from_window = was;
                    continue;
                }
            }
            let Some(r) = self.reorder.as_deref_mut() else {
                return;
            };
            let Some(a) = r.pending.pop_front() else {
                return;
            };
            self.pending = r.pending.len() as u32;
            let hints = a.pkt.rx_hints();
            // Nested calls (a give-up inside) restore what they change.
            let was = (
                std::mem::replace(&mut self.no_wait, !a.may_wait),
                std::mem::replace(&mut self.from_window, true),
            );
            self.receive_slow(a.pkt, a.arrived, verify, hints, None, None, out);
            (self.no_wait, self.from_window) = was;
        }
    }

    /// A segment that waited in the flow in `s` (live), taken now that the
    /// gap before it filled (`take_filled`), on the fast path when the
    /// flow's template was on as it began to wait: it is taken in sequence
    /// order, so it is the held packet's next segment as any other (the
    /// window has nothing to judge), and what the full path would make of
    /// it the fast path makes too, or gives it back. The template stays
    /// paused while more of the flow waits. It is taken at the time it
    /// arrived, as the full path takes it.
    #[inline(always)]
    fn filled_fast(
        &mut self,
        s: u16,
        pkt: B,
        arrived: u64,
        verify: bool,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        #[cfg(test)]
        if self.full_path_only {
            return Some(pkt);
        }
        let Some(csum) = FastCsum::of(pkt.rx_hints(), verify) else {
            return Some(pkt);
        };
        if !self.table.get(s).tmpl.built() {
            return Some(pkt);
        }
        let now = std::mem::replace(&mut self.now, arrived);
        let left = self.merge_paused(s, pkt, csum, out);
        self.now = now;
        left
    }

    /// `pkt` taken on the fast path into the flow in `s`, live, whose
    /// template is on or paused (segments of the flow wait ahead of a
    /// gap): on for this segment, paused again while any waits. Gives the
    /// packet back where the fast path does.
    #[inline(always)]
    fn merge_paused(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        self.table.get_mut(s).tmpl.resume();
        let left = self.fast_merge(s, pkt, csum, out);
        if self.has_waiting(s) {
            self.table.get_mut(s).tmpl.pause();
        }
        if left.is_none() {
            // Where the full path's merge or new head leaves it.
            self.went_to(s);
        }
        left
    }

    /// Gives up the wait of every flow whose oldest waiting segment arrived
    /// at or before `deadline` (TSC): its held packet leaves
    /// (`Flush::ReorderTimeout`), then the segments, in sequence order.
    /// The engine calls it once per poll with the window on, before the
    /// end-of-poll flush, with `now` less `GroConfig::reorder.wait_us`.
    pub fn expire_reorder(&mut self, deadline: u64, out: &mut impl FnMut(B)) {
        if self.reorder_busy() {
            self.settle(out);
        }
        if self.ahead_flows == 0 {
            return;
        }
        let mut at = self.table.next_live(None);
        while let Some(s) = at {
            at = self.table.next_live(Some(s));
            let Some(r) = self.reorder.as_deref() else {
                return;
            };
            let n = r.waiting(s);
            let oldest = r.ahead[s as usize * r.per..][..n]
                .iter()
                .flatten()
                .map(|a| a.arrived)
                .min();
            if oldest.is_some_and(|t| t <= deadline) {
                self.give_up(s, Flush::ReorderTimeout, out);
                // The walk may have lost its place: start it again (each
                // give-up empties one flow's window, so this ends).
                at = self.table.next_live(None);
            }
        }
    }

    /// Whether the flow in `s` has segments waiting ahead of a gap (the
    /// end-of-poll and age flushes leave it held; `expire_reorder` bounds
    /// its wait).
    #[inline(always)]
    pub(in crate::gro) fn has_waiting(&self, s: u16) -> bool {
        self.ahead_flows != 0 && self.reorder.as_deref().is_some_and(|r| r.waiting(s) > 0)
    }

    /// Whether the segments waiting in `s` leave before a segment at `seq`
    /// that cannot join the flow's held packet: they arrived first. Not when
    /// it is the held packet's next byte, which a limit or a change of
    /// options, ACK or flags keeps out of it (a sender's timestamp ticks at
    /// a gap as anywhere else): it comes before them in sequence, so it
    /// leaves, or starts the next packet, first, and they follow. Nor when
    /// it was taken from the window itself.
    #[inline(always)]
    pub(in crate::gro) fn waiting_go_first(&self, s: u16, seq: u32) -> bool {
        self.has_waiting(s) && !self.from_window && seq != self.table.get(s).next_seq
    }
}

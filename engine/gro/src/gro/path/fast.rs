//! The fast path: the next full-size segment of the flow the previous one
//! went to, checked against its template and merged, or started again in
//! the slot its flow left; another flow's found with the previous layout.

use crate::gro::*;

/// A segment judged as its flow's next head by the flow's template
/// (`Gro::judge_head`).
#[derive(Clone, Copy)]
struct Head {
    seq: u32,
    /// Its checksum contribution, as judged with the last head's options.
    c: Contrib,
    psh: bool,
    /// Its TCP options moved on from the last head's (timestamps).
    new_options: bool,
}

/// A flow lookup made before parsing, with a guessed header layout: that
/// of the flow in slot `from` (its entry's layout and tunnel). Small, so
/// that it stays in registers while the fast path tries the slot found.
#[derive(Clone, Copy)]
pub(in crate::gro) struct Lookup {
    pub(in crate::gro) from: u16,
    pub(in crate::gro) hash: u32,
    /// The first slot, live or a ghost, indexed under `hash`: the flow's
    /// own when a merge into it succeeds (its template covers every byte
    /// of the key); else `Lookup::slot` checks its key.
    pub(in crate::gro) found: Option<u16>,
}

impl Lookup {
    /// The slot holding `key` (the segment's, under this lookup's layout),
    /// live or a ghost, if any (keys are unique in the table): `found`,
    /// unless another key shares its hash.
    #[inline(always)]
    pub(in crate::gro) fn slot<B>(&self, table: &Table<Held<B>>, key: &FlowKey) -> Option<u16> {
        match self.found {
            Some(s) if table.entry(s).core.key == *key => Some(s),
            Some(_) => table.find(self.hash, |h| h.core.key == *key),
            None => None,
        }
    }
}

impl<B: GroBuf> Gro<B> {
    /// Looks `pkt`'s flow up by the hash of its key read as if it had the
    /// header layout of the flow in slot `s` (the previous segment's, held
    /// or just freed), without parsing: interleaved flows nearly always
    /// share one. A wrong guess finds nothing, or an entry whose template
    /// then refuses the segment (the template covers every header byte:
    /// addresses, tags, ethertype, IHL, data offset, a tunnel's outer
    /// headers); either way the full path decides, reusing the lookup when
    /// its parse agrees with the guess.
    #[inline(always)]
    pub(in crate::gro) fn lookup_by_layout(&self, pkt: &B, s: u16) -> Option<Lookup> {
        // Read from the entry, not from a copy stored at each new head:
        // reading back a recent store of a different width would stall.
        let t = self.table.entry(s).core.t;
        if t.l3 == 0 {
            return None;
        }
        let hash = FlowKey::hash_in(pkt.head(), &t, &self.hash_key)?;
        Some(Lookup {
            from: s,
            hash,
            found: self.table.find(hash, |_| true),
        })
    }

    /// The common case: the next full-size segment of the flow the previous
    /// segment went to, matching its template. Gives the packet back when it
    /// does not (or its checksum must be judged by the full path). A match
    /// says everything `merge` would otherwise check: same flags as the head
    /// but PSH (so no FIN or CWR), a full-size payload, the expected seq and
    /// ID. What the full path would then do, this does too: merge, and flush
    /// on PSH; or, when the held packet is full, flush it and start the next
    /// one with this segment.
    #[inline(always)]
    pub(in crate::gro) fn fast_merge(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let max_frags = self.cfg.max_frags;
        let Some(h) = self.table.try_get_mut(s) else {
            return self.restart(s, pkt, csum, out);
        };
        let id = h.next_id as u16;
        // A bad checksum: the full path counts and passes it.
        let Some((seq, c, psh)) =
            h.template_match(&pkt, Some(h.next_seq), Some(id), csum, &self.masks)
        else {
            if h.finished {
                return Some(pkt);
            }
            return self.finish_then_merge(s, pkt, csum, out);
        };
        // In a tunnel, the outer ID (following as the inner one does) and
        // header checksum.
        if h.tmpl.outer_id_at != 0 && !h.outer_follows(pkt.head(), true) {
            return Some(pkt);
        }
        if h.core.full(max_frags) {
            if psh {
                // Flush, then a PSH segment passes: the full path's job.
                return Some(pkt);
            }
            let over = h.core.over_limits(h.core.mss, 1, max_frags);
            let head = Head {
                seq,
                c,
                psh: false,
                new_options: false,
            };
            return self.next_in_slot(s, why(over), pkt, head, out);
        }
        if h.tmpl.outer_id_at != 0 {
            h.outer_merged(pkt.head());
        }
        h.take_next(pkt, seq, c, id);
        self.stats.merged_segments += 1;
        // A full-size segment without FIN (the template's): PSH ends it.
        if let Some(why) = ends_after(psh, false, h.core.mss, h.core.mss) {
            h.flags_or |= PSH;
            self.flush_slot(s, why, out);
        }
        None
    }

    /// A segment the packet held in slot `s` (its flow's, by the lookup)
    /// turned away (`fast_merge`). One that is the
    /// flow's next packet's head all the same, differing from the segment
    /// expected only in its sequence number (a gap, a retransmission) or in
    /// its TCP options (timestamps that moved on), has the full path flush
    /// the packet for that (the first of the two in the rules' order) and
    /// start the flow's next packet with it in the same slot: here, what
    /// the flush and then `restart` at its ghost would do, in the slot kept
    /// live (`next_in_slot`), from the verdict already made (the template
    /// is the same). Anything else
    /// (the ID alone, a short or PSH segment's size, a bad checksum) is the
    /// full path's. With the reorder window on, a gap is the window's to
    /// judge (`window_fast`, which also takes the filler of a gap), and a
    /// head with PSH the full path's (passed unheld, it moves its flow's
    /// ghost on: `Held::high`). Out of line: once per packet ended so.
    #[inline(never)]
    pub(in crate::gro) fn refused(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        match self.refused_verdict(s, &pkt, csum) {
            Some(v) => self.ended_by(s, pkt, v, out),
            None if self.reorder.is_some() => self.window_fast(s, pkt, csum, out),
            None => Some(pkt),
        }
    }

    /// `refused`'s verdict on `pkt` at the live slot `s`: why the packet
    /// held there ends, and `pkt` as the next one's head (the head as
    /// judged, whether its options moved on). None: not such a head.
    #[inline(always)]
    fn refused_verdict(&self, s: u16, pkt: &B, csum: FastCsum) -> Option<(Flush, Head)> {
        let h = self.table.try_get(s).filter(|h| h.finished)?;
        if h.tmpl.tunnel {
            return None;
        }
        let head = self.judge_head(h, pkt, csum)?;
        if self.reorder.is_some() && (head.seq != h.next_seq || head.psh) {
            // With the window on, the options alone (its flow has nothing
            // waiting: its template is on).
            return None;
        }
        // The rules' other refusals such a head may meet (its ID, the
        // limits) come later in their order: these two name the flush.
        const _: () = {
            let named = bit(Flush::OptionMismatch) | bit(Flush::SeqGap);
            let later = bit(Flush::IpId) | bit(Flush::FragLimit) | bit(Flush::SizeLimit);
            // Every named bit below the lowest later one.
            assert!(named < later & later.wrapping_neg());
        };
        let refused =
            on(head.new_options, Flush::OptionMismatch) | on(head.seq != h.next_seq, Flush::SeqGap);
        (refused != 0).then(|| (why(refused), head))
    }

    /// `pkt` judged as the next head of the flow `h` holds or held, by its
    /// template: all but the TCP options (`Held::bare_match`), then they on
    /// their own. New ones are taken outside tunnels only (verifying, the
    /// full path checks the outer UDP checksum first), and with a checksum
    /// not summed (the sum judged holds for the old ones). None: not such a
    /// head (the full path's to judge).
    #[inline(always)]
    fn judge_head(&self, h: &Held<B>, pkt: &B, csum: FastCsum) -> Option<Head> {
        let (seq, c, psh) = h.bare_match(pkt, csum, &self.masks)?;
        let new_options = !h.same_options(pkt);
        if new_options && (h.tmpl.tunnel || csum.sums(false)) {
            return None;
        }
        Some(Head {
            seq,
            c,
            psh,
            new_options,
        })
    }

    /// The packet in slot `s` ends for `why`, and `pkt` (judged so by
    /// `refused_verdict`) starts the next one there.
    #[inline(always)]
    fn ended_by(
        &mut self,
        s: u16,
        pkt: B,
        (why, head): (Flush, Head),
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        // The next segment is tried there first, as after the full path.
        self.went_to(s);
        self.next_in_slot(s, why, pkt, head, out)
    }

    /// The packet held in slot `s` leaves for `why`, and `pkt`, its flow's
    /// next head as the template judged it (options moved on or not),
    /// takes the slot at once: what `flush_slot` and then `restart` at the
    /// ghost it leaves would do (the template is the one the flush leaves
    /// there), without the slot's way through the free list. While any
    /// flow has segments waiting ahead of a gap (`ahead_flows`), the flush
    /// and the ghost's way, so that `let_go` lets this flow's go first.
    #[inline(always)]
    fn next_in_slot(
        &mut self,
        s: u16,
        why: Flush,
        pkt: B,
        head: Head,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        if self.ahead_flows != 0 {
            self.flush_slot(s, why, out);
            return self.head_at(s, pkt, head, false, out);
        }
        self.send_out(s, why, out);
        self.head_at(s, pkt, head, true, out)
    }

    /// A head new to the table (no template yet) and a segment its lookup
    /// found it for: what a merge needs is made now, as the full path would
    /// before merging, and the new template judges the segment. Out of
    /// line: once per new flow that merges.
    #[inline(never)]
    fn finish_then_merge(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let verify = self.cfg.csum == CsumMode::Verify;
        self.finish_head(s, verify);
        // Finished now: a refusal goes to the full path.
        self.fast_merge(s, pkt, csum, out)
    }

    /// After a segment went to the held packet in slot `s`: the segments
    /// that follow it in `rest` (the rest of the burst) while each is that
    /// packet's next full-size one within its limits, merged in a loop of
    /// their own, with none of `receive`'s dispatch (bulk traffic's bursts
    /// are runs of one flow); one with PSH is the run's last, and the
    /// packet leaves with it. Each is taken exactly as `receive` would take
    /// it: through `fast_merge` into `s`, which `first` names. A segment of
    /// the flow that the run stopped at, the packet neither ended nor full,
    /// may be the flow's next packet's head (a gap, timestamps that moved
    /// on): `ended_in_run` takes it as `refused` would, and a run into
    /// that packet follows. Anything else stays in `rest` for `receive`.
    /// Not for a flow inside a tunnel over IPv4 (its outer ID is followed
    /// on its own). With the reorder window on, not for a flow it works on
    /// (its template is off), and a run stops at a segment ahead of a gap,
    /// which the window judges (`refused` hands it to `window_fast`).
    #[inline(always)]
    pub(in crate::gro) fn merge_run(
        &mut self,
        s: u16,
        rest: &mut std::vec::Drain<'_, B>,
        out: &mut impl FnMut(B),
    ) {
        while self.run_once(s, rest, out) && self.ended_in_run(s, rest, out) {}
    }

    /// One run into the packet held in slot `s` (`merge_run`). Returns
    /// whether it stopped at a segment with the flow's ports, the packet
    /// still held and not full: one the packet's template turned away.
    #[inline(always)]
    fn run_once(
        &mut self,
        s: u16,
        rest: &mut std::vec::Drain<'_, B>,
        out: &mut impl FnMut(B),
    ) -> bool {
        let verify = self.cfg.csum == CsumMode::Verify;
        let max_frags = self.cfg.max_frags;
        #[cfg(test)]
        if self.full_path_only {
            return false;
        }
        let Some(h) = self.table.try_get_mut(s) else {
            return false;
        };
        if !h.tmpl.on || h.tmpl.outer_id_at != 0 || h.core.pkt.is_none() {
            return false;
        }
        // A loop for each checksum mode: trusting, it has no sums to make.
        let (n, psh) = if verify {
            merge_loop::<B, true>(h, rest, &self.masks, max_frags)
        } else {
            merge_loop::<B, false>(h, rest, &self.masks, max_frags)
        };
        let mss = h.core.mss;
        self.stats.segments_in += n;
        self.stats.merged_segments += n;
        self.look.take_run(n as usize);
        // Full-size segments without FIN (the template's): PSH ends it.
        if let Some(why) = ends_after(psh, false, mss, mss) {
            self.flush_slot(s, why, out);
            return false;
        }
        // Another flow's segment (flows taking turns): its ports say so.
        rest.as_slice()
            .first()
            .is_some_and(|p| h.same_ports(p.head()) && !h.core.full(max_frags))
    }

    /// The segment a run into slot `s` stopped at (`rest`'s next; the
    /// packet held there turned it away), taken when `receive` would have
    /// `at_first` take it: as its flow's next packet's head, the packet
    /// ended for what sets it apart (`refused`). Judged where it lies, it
    /// is taken only then, as `receive` takes it (counted, the look-ahead
    /// moved on), without its dispatch nor the whole compare the run just
    /// failed. Returns whether it was taken. Out of line: once per packet
    /// ended so.
    #[inline(never)]
    fn ended_in_run(
        &mut self,
        s: u16,
        rest: &mut std::vec::Drain<'_, B>,
        out: &mut impl FnMut(B),
    ) -> bool {
        let Some(next) = rest.as_slice().first() else {
            return false;
        };
        let verify = self.cfg.csum == CsumMode::Verify;
        let Some(csum) = FastCsum::of(next.rx_hints(), verify) else {
            return false;
        };
        let Some(verdict) = self.refused_verdict(s, next, csum) else {
            return false;
        };
        let pkt = rest.next().expect("the segment judged");
        self.stats.segments_in += 1;
        self.look.take_with_current();
        let left = self.ended_by(s, pkt, verdict, out);
        debug_assert!(left.is_none(), "a head judged is taken");
        // A head passed alone leaves `first` unset: no run follows.
        self.first == Some(s)
    }

    /// The flow in slot `s` was flushed (frag limit, end of poll, PSH...),
    /// and the slot is still its ghost: its entry still holds the flow's
    /// state and template. A segment matching that template starts the
    /// flow's next packet there, without parsing, hashing or building a
    /// template: what the full path would do (it goes back to the same
    /// slot), since every field it would read equals the old head's but
    /// seq, ID and the checksums, which are set here; with PSH it passes,
    /// as the full path's `not_held` passes it. One that matches it but
    /// for its TCP options is taken as the full path's `hold_new` would
    /// take it (`head_at`).
    #[inline]
    pub(in crate::gro) fn restart(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let Some(h) = self.table.ghost(s) else {
            return Some(pkt);
        };
        // A new head: any sequence number, any ID; its timestamps may have
        // moved on. Inside a tunnel (never with new options: `judge_head`)
        // its outer ID follows.
        let Some(head) = self.judge_head(h, &pkt, csum) else {
            return Some(pkt);
        };
        if h.tmpl.outer_id_at != 0 && !h.outer_follows(pkt.head(), false) {
            return Some(pkt);
        }
        if head.psh && !self.passes_psh_heads(h.tmpl.tunnel) {
            return Some(pkt);
        }
        self.head_at(s, pkt, head, false, out)
    }

    /// A head the flow's template in slot `s` took (`judge_head`), as the
    /// full path's `hold_new` takes it: with PSH, or when nothing later in
    /// its poll can join it, it passes unheld (`not_held` decides so before
    /// anything else); else it starts the flow's next packet, the slot
    /// taking its TCP options first if they moved on (`renew_options`).
    /// The slot is the flow's ghost, or, `kept`, still live, its packet
    /// just sent out (`next_in_slot`): a head that passes leaves it a
    /// ghost.
    #[inline(always)]
    fn head_at(
        &mut self,
        s: u16,
        pkt: B,
        head: Head,
        kept: bool,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let Some(reason) = passes_unheld(head.psh, || self.leaves_alone_at(s)) else {
            let c = if head.new_options {
                self.renew_options(s, pkt.head(), head.c)
            } else {
                head.c
            };
            return self.start_at(s, pkt, head.seq, c, kept, out);
        };
        if kept {
            self.table.remove(s);
        }
        self.pass(reason, pkt, out);
        None
    }

    /// The slot `s` takes the TCP options of `head`, a new head its
    /// template took but for them (`Held::take_options`), and `c`, the
    /// head's checksum contribution as judged with the last head's options,
    /// moves as the template's sum does. Out of line: once per packet of a
    /// flow whose options moved on.
    #[inline(never)]
    fn renew_options(&mut self, s: u16, head: &[u8], c: Contrib) -> Contrib {
        let h = self.table.entry_mut(s);
        debug_assert_eq!(c.pos, 0, "a head whose checksum is not summed");
        let d = h.take_options(head);
        Contrib {
            pos: 0,
            neg: c.neg + d as u64,
        }
    }

    /// Whether `restart` passes, as the full path's `hold_new` would, a PSH
    /// segment at its flow's ghost, for a flow inside a tunnel or not
    /// (`tunnel`). Not inside a tunnel (verifying, the full path checks the
    /// outer UDP checksum first), nor with the reorder window on (a segment
    /// passed unheld moves its flow's ghost on: `Held::high`).
    #[inline(always)]
    fn passes_psh_heads(&self, tunnel: bool) -> bool {
        !tunnel && self.reorder.is_none()
    }

    /// Starts a flow's next packet with `pkt` (which matched the flow's
    /// template: sequence number `seq`, checksum contribution `c`) in the
    /// flow's slot `s`: its ghost, once there is room for one more held
    /// packet; or, `kept`, the slot its last packet just left from, live
    /// still (the room that packet had).
    #[inline(always)]
    fn start_at(
        &mut self,
        s: u16,
        pkt: B,
        seq: u32,
        c: Contrib,
        kept: bool,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        if !kept {
            self.make_room(out);
        }
        self.stats.heads_cached += 1;
        let now = self.now;
        let max_size = self.cfg.max_size;
        let h = if kept {
            self.table.renew(s)
        } else {
            self.table.reclaim(s).expect("the flow's ghost")
        };
        if max_size > big::IP_MAX {
            // Past 64 KiB, what an IPv6 head may become depends on its own
            // buffer's headroom.
            h.core.max_ip = big::max_ip(max_size, &h.core.t, h.outer, pkt.headroom());
        }
        let (l3, l4) = (h.core.t.l3 as usize, h.core.t.l4 as usize);
        let id = if h.core.t.ipv6 {
            0
        } else {
            let b = pkt.head();
            field::read16(b, l3, ipv4::ID)
        };
        let ip_len = h.tmpl.frame_len as u32 - l3 as u32;
        h.core.begin(&pkt, ip_len, c, id);
        h.head_seq = seq;
        h.follow(seq);
        h.next_seq = seq.wrapping_add(h.core.mss);
        if !h.core.t.ipv6 {
            h.base.ip_base = h.tmpl.ip_base(id, ip_len as u16);
        }
        h.next_id = IdMode::Open.next(id) as u32;
        h.head_flags = h.tmpl.bytes[l4 + tcp::FLAGS];
        h.flags_or = 0;
        h.base.since = now;
        if h.tmpl.outer_id_at != 0 {
            h.outer_restarted(pkt.head());
        }
        h.core.pkt = Some(pkt);
        if self.pending != 0 {
            // The room was made by evicting a flow whose segments waited
            // ahead of a gap: they go through again now, as after a new
            // head on the full path.
            self.settle(out);
        }
        None
    }
}

/// `merge_run`'s loop, a function of its own: `h` then cannot alias the
/// buffers in `rest`, so what it reads of the held packet stays in
/// registers. Only what changes from one segment to the next (the seq and
/// ID expected, the checksum sum, the payload's parity) is carried through
/// the loop, whose length the packet's room bounds up front; the held
/// packet's bookkeeping is done once for the run, and the run is appended
/// in one call, so the chain's totals are written once. Returns the
/// segments it took, and whether the last of them had PSH (then in the
/// packet's flags).
#[inline(never)]
fn merge_loop<B: GroBuf, const VERIFY: bool>(
    h: &mut Held<B>,
    rest: &mut std::vec::Drain<'_, B>,
    masks: &Masks,
    max_frags: u16,
) -> (u64, bool) {
    // One instance per compare width, so that each segment's check is
    // `match_in`'s with the template's fields read once.
    match h.tmpl.width() {
        Width::Short => merge_loop_in::<B, VERIFY, SHORT_CMP>(h, rest, masks, max_frags),
        Width::Fixed => merge_loop_in::<B, VERIFY, FIXED_CMP>(h, rest, masks, max_frags),
        Width::Whole => merge_loop_in::<B, VERIFY, TMPL_LEN>(h, rest, masks, max_frags),
    }
}

/// `merge_loop` for a template whose compare reads `N` bytes.
#[inline(always)]
fn merge_loop_in<B: GroBuf, const VERIFY: bool, const N: usize>(
    h: &mut Held<B>,
    rest: &mut std::vec::Drain<'_, B>,
    masks: &Masks,
    max_frags: u16,
) -> (u64, bool) {
    let room = h.core.room(max_frags);
    // The ID counts up by one a segment unless fixed (IPv6 has none).
    let id_step = if h.core.t.ipv6 {
        0
    } else {
        h.core.id_mode.step()
    };
    let odd_mss = h.core.mss & 1 == 1;
    let (mut seq, mut id) = (h.next_seq, h.next_id as u16);
    let mut odd = h.core.payload_len & 1 == 1;
    let mut sum = Contrib::default();
    let mask = masks.get(h.tmpl.mask);
    let (mut n, mut psh) = (0, false);
    let run = rest.as_slice();
    for pkt in &run[..room.min(run.len())] {
        let Some(csum) = FastCsum::of(pkt.rx_hints(), VERIFY) else {
            break;
        };
        let Some((_, c, p)) = h.match_in::<N>(pkt, mask, Some(seq), Some(id), csum) else {
            break;
        };
        sum = sum.add(c.shifted(odd));
        odd ^= odd_mss;
        seq = seq.wrapping_add(h.core.mss);
        id = id.wrapping_add(id_step);
        n += 1;
        if p {
            psh = true;
            break;
        }
    }
    if psh {
        h.flags_or |= PSH;
    }
    if n > 0 {
        h.count_run(n as u16, sum, seq, id.wrapping_sub(id_step));
        let off = h.core.t.payload as usize;
        let held = h.core.pkt.as_mut().expect("merge_run checked the packet");
        held.append_run(rest.by_ref().take(n), off);
    }
    (n as u64, psh)
}

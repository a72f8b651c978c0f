//! The full path: every segment the fast path did not take, from the
//! wire: parse (tunnels and UDP too), find the flow, Linux's rules one by
//! one, then merge, hold as a new packet, or pass; and the reorder window's
//! work before and after it.

use crate::gro::*;
use crate::wire::Outer;

impl<B: GroBuf> Gro<B> {
    /// The full path from the wire. A flow with segments waiting, or let
    /// go, has its template paused or off, so the fast path's merges and
    /// runs never touch it; the window's own ways onto the fast path
    /// (`window_fast`, and `settle`'s for what it takes again) settle as
    /// this does. What the window let go or can now merge is taken before
    /// this segment (it arrived first) and after it (this one may have
    /// filled a gap). Two tests on the full path; the window's work itself
    /// is out of line.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(in crate::gro) fn slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<Lookup>,
        next: Option<&mut Burst<'_, B>>,
        out: &mut impl FnMut(B),
    ) {
        let lookup = if self.reorder_busy() {
            self.settle(out);
            // The table may have changed under the lookup.
            None
        } else {
            lookup
        };
        self.receive_slow(pkt, now, verify, hints, lookup, next, out);
        if self.reorder_busy() {
            self.settle(out);
        }
    }

    /// Everything that is not the fast path: parse, find the flow, Linux's
    /// rules one by one, hold or pass. Out of line, so the fast path does
    /// not carry its stack frame.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(in crate::gro) fn receive_slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<Lookup>,
        mut next: Option<&mut Burst<'_, B>>,
        out: &mut impl FnMut(B),
    ) {
        let Some((mut pkt, t, outer)) = self.parse_slow(pkt, now, verify, hints, out) else {
            return;
        };
        let f = Fields::new(pkt.head(), t);
        let mut seg = Seg::own(&f, pkt.segs_from(t.payload as usize));
        let tcp_len = t.l4_len() as u32 + t.payload_len;
        if let Some(o) = &outer {
            seg.outer_id = o.ipv4_id(f.header()).unwrap_or(0);
            if verify && !outer_udp_ok(&f, o, tcp_len) {
                return self.pass_in_order(Pass::BadUdpChecksum, pkt, out);
            }
        }
        let csum = CsumCheck::of(&t, outer.is_some(), hints.l4, verify);
        // Nothing held, and no window: there is nothing to merge with, so a
        // segment that would not be held needs no lookup, nor does a head
        // that merges at once with the next packet of its poll.
        if self.table.is_empty() && self.reorder.is_none() {
            if let Some(why) = self.not_held(&seg, &t) {
                return self.pass(why, pkt, out);
            }
            if let Some(rest) = next.take().filter(|_| outer.is_none()) {
                if let Some((m, why)) = self.try_pair(&pkt, &f, rest, &seg, &csum, None) {
                    return self.close_pair(pkt, rest, &m, seg.payload, why, out);
                }
            }
        }
        let seg = seg.with_shared(&f);
        let key = match &outer {
            Some(o) => FlowKey::tunneled(&f, o, &self.hash_key),
            None => FlowKey::new(&f),
        };
        let (hash, found) = self.find_flow(&key, &t, outer, lookup);
        let flow = Slow {
            t,
            outer,
            seg,
            csum,
        };
        if let Some(s) = found.filter(|&s| self.table.is_live(s)) {
            match self.with_held(s, pkt, &flow, now, verify, hints, out) {
                Some(p) => pkt = p,
                None => return,
            }
        }
        let held = Found { key, hash, found };
        self.hold_new(pkt, &flow, held, now, verify, next, out);
    }

    /// The layout of a segment on the full path (plain TCP, or TCP in a
    /// tunnel), with the packet back; or None when it was passed (not TCP,
    /// malformed, a bad IPv4 header) or went to UDP GRO.
    #[inline(always)]
    fn parse_slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        out: &mut impl FnMut(B),
    ) -> Option<(B, Tcp, Option<Outer>)> {
        // An IPv4 header that fails its checksum is never merged, verifying
        // or trusting: trust covers the L4 checksum only.
        if hints.ip == CsumHint::Bad {
            self.pass_in_order(Pass::Frame(NotTcp::BadIpChecksum), pkt, out);
            return None;
        }
        let parsed = match Tcp::parse(pkt.head(), pkt.len(), hints.ip == CsumHint::Unknown) {
            Ok(t) => Ok((t, None)),
            // Both IPv4 headers are checked in software: what a NIC's
            // flags say of a tunnelled frame depends on whether it parsed
            // the tunnel.
            Err(NotTcp::NotTcp) if self.cfg.tunnels.on => {
                match Tcp::parse_tunnel(pkt.head(), pkt.len(), true, &self.cfg.tunnels) {
                    Ok((t, o)) => Ok((t, Some(o))),
                    Err(TunnelErr::Bad(why)) => Err(Some(why)),
                    Err(TunnelErr::NotTunnel) if self.udp.is_some() => Err(None),
                    Err(TunnelErr::NotTunnel) => Err(Some(NotTcp::NotTcp)),
                }
            }
            Err(NotTcp::NotTcp) if self.udp.is_some() => Err(None),
            Err(why) => Err(Some(why)),
        };
        match parsed {
            Ok((t, outer)) => Some((pkt, t, outer)),
            Err(Some(why)) => {
                self.pass_in_order(Pass::Frame(why), pkt, out);
                None
            }
            Err(None) => {
                self.receive_udp(pkt, now, verify, hints, out);
                None
            }
        }
    }

    /// The flow's slot, live or a ghost (keys are unique in the table, so
    /// a new head of a flow it knows goes back to that slot), and the hash
    /// a new entry takes: through the fast path's lookup when it guessed
    /// this layout, else the previous segment's slot, else the index.
    #[inline(always)]
    fn find_flow(
        &self,
        key: &FlowKey,
        t: &Tcp,
        outer: Option<Outer>,
        lookup: Option<Lookup>,
    ) -> (u32, Option<u16>) {
        // A lookup with the layout this parse found is this one's.
        let lookup = lookup.filter(|l| {
            let e = self.table.entry(l.from);
            e.outer == outer && e.core.t.same_layout(t)
        });
        if let Some(l) = lookup {
            return (l.hash, l.slot(&self.table, key));
        }
        let hit = self
            .last
            .filter(|&s| self.table.try_get(s).is_some_and(|h| h.core.key == *key));
        let hash = if hit.is_some() {
            0
        } else {
            key.hash(&self.hash_key)
        };
        (
            hash,
            hit.or_else(|| self.table.find(hash, |h| h.core.key == *key)),
        )
    }

    /// A segment of the flow held in slot `s`: Linux's rules, then merged,
    /// or (the reorder window's) made to wait, or passed after what came
    /// first; None when so taken. Refused, the held packet leaves and the
    /// segment comes back, to start the flow's next packet.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn with_held(
        &mut self,
        s: u16,
        pkt: B,
        flow: &Slow,
        now: u64,
        verify: bool,
        hints: RxHints,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        let (seg, t) = (&flow.seg, &flow.t);
        let f = Fields::new(pkt.head(), *t);
        let h = self.table.get(s);
        let refused = self.refusals(h, seg, f.options(), f.ipv6_ext())
            | h.outer_refusals(flow.outer, f.header(), t);
        // A segment that continues the held data into bytes of one that
        // waited (and arrived first), merged or starting the next packet,
        // would overtake it: what waited leaves first, then this one.
        if self.ahead_flows != 0
            && seg.seq == h.next_seq
            && self.overlaps_waiting(s, seg.seq, seg.payload)
        {
            self.give_up_for(s, Flush::ReorderFull, pkt, now, verify, hints, out);
            return None;
        }
        if refused == 0 {
            self.merge_checked(s, pkt, seg, &flow.csum, now, verify, hints, out);
            return None;
        }
        let mut go_first = true;
        if self.reorder.is_some() {
            match self.window(s, seg, f.ipv6_ext()) {
                Window::Wait => {
                    self.wait_ahead(s, pkt, seg.seq, seg.payload, now);
                    return None;
                }
                Window::Retransmission => {
                    // The held data arrived first: it leaves first (the
                    // copy must not overtake it), then the copy passes,
                    // not held: the flow goes on from the held data's
                    // end, where its ghost restarts it.
                    self.flush_slot(s, why(refused), out);
                    self.pass(Pass::Retransmission, pkt, out);
                    return None;
                }
                Window::BeforeHeld => {
                    // The delivered data now ends where the held packet
                    // starts.
                    let h = self.table.get_mut(s);
                    h.high = h.head_seq;
                    self.pass(Pass::BeforeHeld, pkt, out);
                    return None;
                }
                Window::Full => {
                    // The held packet and what waited leave first, in
                    // sequence order; then this one is taken afresh.
                    self.give_up_for(s, Flush::ReorderFull, pkt, now, verify, hints, out);
                    return None;
                }
                Window::Continues => go_first = false,
                Window::No => {}
            }
        }
        let why = why(refused);
        // What waited arrived before this one: it leaves first, in
        // sequence order, then this one is taken afresh.
        if go_first && self.waiting_go_first(s, seg.seq) {
            self.give_up_for(s, why, pkt, now, verify, hints, out);
            return None;
        }
        self.flush_slot(s, why, out);
        Some(pkt)
    }

    /// A segment the rules let merge into slot `s`: merged once its
    /// checksum holds (the head's sums made first if it has none yet);
    /// a bad one leaves the held packet first, then passes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn merge_checked(
        &mut self,
        s: u16,
        pkt: B,
        seg: &Seg,
        csum: &CsumCheck,
        now: u64,
        verify: bool,
        hints: RxHints,
        out: &mut impl FnMut(B),
    ) {
        if !self.table.get(s).finished {
            self.finish_head(s, verify);
        }
        let h = self.table.get(s);
        // The header equals the head's but for seq, checksum, urgent
        // pointer and PSH/FIN: its sum follows from the head's.
        let Some(psum) = csum.payload_sum(&pkt, h.base.pbase, seg.var_sum(h.hconst), seg.csum)
        else {
            if self.waiting_go_first(s, seg.seq) {
                // What waited arrived first: it leaves first.
                return self.give_up_for(s, Flush::BadChecksum, pkt, now, verify, hints, out);
            }
            self.flush_slot(s, Flush::BadChecksum, out);
            return self.pass_unheld(Pass::BadTcpChecksum, pkt, seg, Some(s), out);
        };
        self.merge(s, pkt, seg, psum, out)
    }

    /// A segment no held packet took: held as the start of a new packet,
    /// in its flow's ghost slot (`found`) or a new entry under `hash`,
    /// unless it cannot start one or would only wait for nothing, or, new
    /// to the table, it merges at once with `next`, the packet after it in
    /// its poll (`try_pair`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn hold_new(
        &mut self,
        pkt: B,
        flow: &Slow,
        at: Found,
        now: u64,
        verify: bool,
        next: Option<&mut Burst<'_, B>>,
        out: &mut impl FnMut(B),
    ) {
        let (t, outer, seg, csum) = (flow.t, flow.outer, &flow.seg, &flow.csum);
        let Found { key, hash, found } = at;
        if let Some(why) = self.not_held(seg, &t) {
            return self.pass_unheld(why, pkt, seg, found, out);
        }
        // Verifying, the checksum is checked now, from the sums a merge
        // needs; trusting (or taking the NIC's word), a flow new to the
        // table makes them (and its template) only once a second segment
        // comes (`finish_head`).
        let mut sums = HeadSums::default();
        let f = Fields::new(pkt.head(), t);
        if csum.judged_now() {
            let Some(s) = HeadSums::of(&f, seg, csum, &pkt) else {
                return self.pass_unheld(Pass::BadTcpChecksum, pkt, seg, found, out);
            };
            sums = s;
        }
        // A flow the table does not know, whose next segment is next in
        // the poll and may end its packet: merged with it at once.
        if let Some(rest) = next.filter(|_| found.is_none() && outer.is_none()) {
            let judged = csum.judged_now().then_some(sums);
            if let Some((m, why)) = self.try_pair(&pkt, &f, rest, seg, csum, judged) {
                return self.close_pair(pkt, rest, &m, seg.payload, why, out);
            }
        }
        let (opts, opt_words) = option_words(f.options());
        self.make_room(out);
        let (slot, h) = match found {
            // Its key and hash are this flow's already.
            Some(s) => {
                self.stats.heads_cached += 1;
                (s, self.table.reclaim(s).expect("the flow's ghost"))
            }
            None => {
                let Some((s, h)) = self.table.insert(hash) else {
                    // The index has no place near the hash's home: a flood
                    // of flows colliding under a key someone learnt. This
                    // one goes through unheld rather than lengthen every
                    // lookup.
                    return self.pass(Pass::ProbeLimit, pkt, out);
                };
                self.stats.heads_built += 1;
                h.core.key = key;
                (s, h)
            }
        };
        // A flow's own ghost still holds where its last packet ended.
        if found.is_some() {
            h.follow(seg.seq);
        } else {
            h.gapless = true;
            h.high = seg.seq;
        }
        h.opt_words = opt_words;
        h.opts = opts;
        // The whole IP packet, an IPv6 header included (as Linux counts,
        // and as a TSO port's 64 KiB limit does); in a tunnel, the outer one.
        h.core.max_ip = big::max_ip(self.cfg.max_size, &t, outer, pkt.headroom());
        start_head(h, pkt, t, outer, seg, &sums, now);
        self.went_to(slot);
        // A flow the table remembered will likely merge again: its template
        // at once, so that its next segment takes the fast path.
        if found.is_some() {
            self.finish_head(slot, verify);
        }
    }

    /// Passes `pkt` (read as `seg`), a segment of the flow whose ghost is
    /// in `ghost` (if the table knows it), that no packet of the flow holds.
    /// Its data is delivered all the same: with the window on, the ghost
    /// notes where it ends (`Held::high`), so that a copy of it is not taken
    /// for the filler of a gap before the flow's next packet and passed
    /// ahead of it.
    #[inline(always)]
    fn pass_unheld(
        &mut self,
        why: Pass,
        pkt: B,
        seg: &Seg,
        ghost: Option<u16>,
        out: &mut impl FnMut(B),
    ) {
        if self.reorder.is_some() && seg.payload != 0 {
            if let Some(h) = ghost.and_then(|s| self.table.ghost_mut(s)) {
                h.high = later(h.high, seg.end());
            }
        }
        self.pass(why, pkt, out)
    }

    /// A segment went to slot `s` on the full path: the next is tried
    /// there first.
    #[inline(always)]
    pub(in crate::gro) fn went_to(&mut self, s: u16) {
        self.last = Some(s);
        self.first = Some(s);
    }

    /// Why a segment its flow's held packet (if any) did not take cannot
    /// start a packet of its own: no payload, flags that end a packet at
    /// once, or nothing later in its poll can join it (`receive_poll`;
    /// holding it would only delay it). Untouched, its checksum is not
    /// GRO's to judge.
    #[inline(always)]
    pub(in crate::gro) fn not_held(&mut self, seg: &Seg, t: &Tcp) -> Option<Pass> {
        if seg.payload == 0 {
            return Some(Pass::NoPayload);
        }
        passes_unheld(seg.flags & (NEVER_MERGED | ENDING) != 0, || {
            self.leaves_alone(t)
        })
    }
}

/// Where a segment's flow is in the table (`find_flow`): its key, the
/// hash a new entry takes, and its slot, live or a ghost, if any.
struct Found {
    key: FlowKey,
    hash: u32,
    found: Option<u16>,
}

/// What the full path keeps of a segment for the rules of its held flow.
struct Slow {
    t: Tcp,
    outer: Option<Outer>,
    seg: Seg,
    csum: CsumCheck,
}

/// Everything a held packet starts from: its first segment `pkt` (layout
/// `t`, in a tunnel `outer`; read as `seg`), its sums, the time.
fn start_head<B: GroBuf>(
    h: &mut Held<B>,
    pkt: B,
    t: Tcp,
    outer: Option<Outer>,
    seg: &Seg,
    sums: &HeadSums,
    now: u64,
) {
    h.next_seq = seg.end();
    h.ack = seg.ack;
    h.word = seg.word;
    h.base.ip_word = seg.ip_word;
    h.next_id = IdMode::Open.next(seg.id) as u32;
    h.core.mss = seg.payload;
    let ip_len = t.l3_len() as u32 + t.l4_len() as u32 + t.payload_len;
    h.core.begin(&pkt, ip_len, sums.psum, seg.id);
    h.base.pbase = sums.pbase;
    h.hconst = sums.hconst;
    h.head_seq = seg.seq;
    h.head_urg = seg.urg;
    h.head_flags = seg.flags;
    h.outer = outer;
    h.o_last_id = seg.outer_id;
    h.o_id_mode = IdMode::Open;
    h.flags_or = 0;
    h.core.t = t;
    h.base.since = now;
    h.tmpl.off();
    h.finished = false;
    h.core.pkt = Some(pkt);
}

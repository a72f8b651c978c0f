//! The full path: every segment the fast path did not take, from the
//! wire: parse (tunnels and UDP too), find the flow, Linux's rules one by
//! one, then merge, hold as a new packet, or pass; and the reorder window's
//! work before and after it.

use super::*;

impl<B: GroBuf> Gro<B> {
    /// The full path from the wire. The reorder window works on it alone
    /// (a flow with segments waiting, or let go, has its template off, so
    /// the fast path never touches it): what the window let go or can now
    /// merge is taken before this segment (it arrived first) and after it
    /// (this one may have filled a gap). Two tests on the full path; the
    /// window's work itself is out of line.
    #[inline(always)]
    pub(super) fn slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<Lookup>,
        out: &mut impl FnMut(B),
    ) {
        let lookup = if self.reorder_busy() {
            self.settle(out);
            // The table may have changed under the lookup.
            None
        } else {
            lookup
        };
        self.receive_slow(pkt, now, verify, hints, lookup, out);
        if self.reorder_busy() {
            self.settle(out);
        }
    }

    /// Everything that is not the fast path: parse, find the flow, Linux's
    /// rules one by one, hold or pass. Out of line, so the fast path does
    /// not carry its stack frame.
    #[inline(never)]
    pub(super) fn receive_slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<Lookup>,
        out: &mut impl FnMut(B),
    ) {
        // An IPv4 header that fails its checksum is never merged, verifying
        // or trusting: trust covers the L4 checksum only.
        if hints.ip == CsumHint::Bad {
            return self.pass_in_order(Pass::Frame(NotTcp::BadIpChecksum), pkt, out);
        }
        let (t, outer) = match Tcp::parse(pkt.head(), pkt.len(), hints.ip == CsumHint::Unknown) {
            Ok(t) => (t, None),
            // Both IPv4 headers are checked in software: what a NIC's
            // flags say of a tunnelled frame depends on whether it parsed
            // the tunnel.
            Err(NotTcp::NotTcp) if self.cfg.tunnels.on => {
                match Tcp::parse_tunnel(pkt.head(), pkt.len(), true, &self.cfg.tunnels) {
                    Ok((t, o)) => (t, Some(o)),
                    Err(TunnelErr::Bad(why)) => {
                        return self.pass_in_order(Pass::Frame(why), pkt, out)
                    }
                    Err(TunnelErr::NotTunnel) if self.udp.is_some() => {
                        return self.receive_udp(pkt, now, verify, hints, out)
                    }
                    Err(TunnelErr::NotTunnel) => {
                        return self.pass_in_order(Pass::Frame(NotTcp::NotTcp), pkt, out)
                    }
                }
            }
            Err(NotTcp::NotTcp) if self.udp.is_some() => {
                return self.receive_udp(pkt, now, verify, hints, out)
            }
            Err(why) => return self.pass_in_order(Pass::Frame(why), pkt, out),
        };
        let f = Fields::new(pkt.head(), t);
        let mut seg = Seg::read(&f, pkt.segs_from(t.payload as usize));
        let tcp_len = t.l4_len() as u32 + t.payload_len;
        if let Some(o) = &outer {
            seg.outer_id = outer_id(f.header(), o);
            if verify && !outer_udp_ok(&f, o, tcp_len) {
                return self.pass_in_order(Pass::BadUdpChecksum, pkt, out);
            }
        }
        // Nothing held, and no window: there is nothing to merge with, so a
        // segment that would not be held needs no lookup.
        if self.table.is_empty() && self.reorder.is_none() {
            if let Some(why) = self.not_held(&seg, &t) {
                return self.pass(why, pkt, out);
            }
        }
        // A lookup with the layout this parse found is this one's.
        let lookup = lookup.filter(|l| {
            let e = self.table.entry(l.from);
            e.outer == outer && e.t.same_layout(&t)
        });
        let key = match &outer {
            Some(o) => FlowKey::tunneled(&f, o, &self.hash_key),
            None => FlowKey::new(&f),
        };
        let csum = CsumCheck::of(&t, outer.is_some(), hints.l4, verify);

        // The flow's slot, live or a ghost: keys are unique in the table,
        // so a new head of a flow it knows goes back to that slot.
        let (hash, found) = match lookup {
            Some(l) => (l.hash, l.slot(&self.table, &key)),
            None => {
                let hit = self
                    .last
                    .filter(|&s| self.table.try_get(s).is_some_and(|h| h.key == key));
                let hash = if hit.is_some() {
                    0
                } else {
                    key.hash(&self.hash_key)
                };
                (
                    hash,
                    hit.or_else(|| self.table.find(hash, |h| h.key == key)),
                )
            }
        };
        if let Some(s) = found.filter(|&s| self.table.is_live(s)) {
            let h = self.table.get(s);
            let refused = self.refusals(h, &seg, f.options(), f.ipv6_ext())
                | h.outer_refusals(outer, f.header(), &t);
            // A segment that continues the held data into bytes of one that
            // waited (and arrived first), merged or starting the next packet,
            // would overtake it: what waited leaves first, then this one.
            if self.ahead_flows != 0
                && seg.seq == h.next_seq
                && self.overlaps_waiting(s, seg.seq, seg.payload)
            {
                return self.give_up_for(s, Flush::ReorderFull, pkt, now, verify, hints, out);
            }
            if refused == 0 {
                if !h.finished {
                    self.finish_head(s, verify);
                }
                let h = self.table.get(s);
                // The header equals the head's but for seq, checksum, urgent
                // pointer and PSH/FIN: its sum follows from the head's.
                let Some(psum) = csum.payload_sum(&pkt, h.pbase, seg.var_sum(h.hconst), seg.csum)
                else {
                    if self.waiting_go_first(s, seg.seq) {
                        // What waited arrived first: it leaves first.
                        return self.give_up_for(
                            s,
                            Flush::BadChecksum,
                            pkt,
                            now,
                            verify,
                            hints,
                            out,
                        );
                    }
                    self.flush_slot(s, Flush::BadChecksum, out);
                    return self.pass(Pass::BadTcpChecksum, pkt, out);
                };
                return self.merge(s, pkt, &seg, psum, out);
            }
            let mut go_first = true;
            if self.reorder.is_some() {
                match self.window(s, &seg, f.ipv6_ext()) {
                    Window::Wait => return self.wait_ahead(s, pkt, seg.seq, seg.payload, now),
                    Window::Retransmission => {
                        // The held data arrived first: it leaves first (the
                        // copy must not overtake it), then the copy passes,
                        // not held: the flow goes on from the held data's
                        // end, where its ghost restarts it.
                        self.flush_slot(s, why(refused), out);
                        return self.pass(Pass::Retransmission, pkt, out);
                    }
                    Window::BeforeHeld => {
                        // The delivered data now ends where the held packet
                        // starts.
                        let h = self.table.get_mut(s);
                        h.high = h.head_seq;
                        return self.pass(Pass::BeforeHeld, pkt, out);
                    }
                    Window::Full => {
                        // The held packet and what waited leave first, in
                        // sequence order; then this one is taken afresh.
                        return self.give_up_for(
                            s,
                            Flush::ReorderFull,
                            pkt,
                            now,
                            verify,
                            hints,
                            out,
                        );
                    }
                    Window::Continues => go_first = false,
                    Window::No => {}
                }
            }
            let why = why(refused);
            // What waited arrived before this one: it leaves first, in
            // sequence order, then this one is taken afresh.
            if go_first && self.waiting_go_first(s, seg.seq) {
                return self.give_up_for(s, why, pkt, now, verify, hints, out);
            }
            self.flush_slot(s, why, out);
        }
        // Not merged: hold it as the start of a new packet, unless it cannot
        // start one or would only wait for nothing.
        if let Some(why) = self.not_held(&seg, &t) {
            return self.pass(why, pkt, out);
        }
        // Verifying, the checksum is checked now, from the sums a merge
        // needs; trusting (or taking the NIC's word), a flow new to the
        // table makes them (and its template) only once a second segment
        // comes (`finish_head`).
        let (mut pbase, mut hconst, mut psum) = (0, 0, Contrib { pos: 0, neg: 0 });
        if csum.judged_now() {
            pbase = f.pseudo_base();
            hconst = header_const(&f, &seg);
            let Some(p) = csum.payload_sum(&pkt, pbase, seg.var_sum(hconst), seg.csum) else {
                return self.pass(Pass::BadTcpChecksum, pkt, out);
            };
            psum = p;
        }
        let mut opts = [0u32; 10];
        let o = f.options();
        for (i, w) in o.chunks_exact(4).enumerate() {
            opts[i] = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
        }
        let held_frags = pkt.segs();
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
                h.key = key;
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
        h.next_seq = seg.seq.wrapping_add(seg.payload);
        h.ack = seg.ack;
        h.word = seg.word;
        h.ip_word = seg.ip_word;
        h.last_id = seg.id;
        h.next_id = seg.id.wrapping_add(1) as u32;
        h.id_mode = IdMode::Open;
        h.df = seg.df;
        h.opt_words = (o.len() / 4) as u8;
        h.opts = opts;
        h.mss = seg.payload;
        h.segs = 1;
        // Every buffer of the held chain counts, its header-only first
        // buffer included (what a TX NIC's segment limit counts).
        h.frags = held_frags;
        h.ip_len = t.l3_len() as u32 + tcp_len;
        h.payload_len = seg.payload;
        h.psum_pos = psum.pos;
        h.psum_neg = psum.neg;
        h.pbase = pbase;
        h.hconst = hconst;
        h.head_seq = seg.seq;
        h.head_urg = seg.urg;
        h.head_flags = seg.flags;
        // The whole IP packet, an IPv6 header included (as Linux counts,
        // and as a TSO port's 64 KiB limit does); in a tunnel, the outer one.
        h.max_ip = big::max_ip(self.cfg.max_size, &t, outer, pkt.headroom());
        h.outer = outer;
        h.o_last_id = seg.outer_id;
        h.o_id_mode = IdMode::Open;
        h.flags_or = 0;
        h.t = t;
        h.since = now;
        h.tmpl.on = false;
        h.finished = false;
        h.pkt = Some(pkt);
        self.went_to(slot);
        // A flow the table remembered will likely merge again: its template
        // at once, so that its next segment takes the fast path.
        if found.is_some() {
            self.finish_head(slot, verify);
        }
    }

    /// A segment went to slot `s` on the full path: the next is tried
    /// there first.
    #[inline(always)]
    pub(super) fn went_to(&mut self, s: u16) {
        self.last = Some(s);
        self.first = Some(s);
    }

    /// Why a segment its flow's held packet (if any) did not take cannot
    /// start a packet of its own: no payload, flags that end a packet at
    /// once, or nothing later in its poll can join it (`receive_poll`;
    /// holding it would only delay it). Untouched, its checksum is not
    /// GRO's to judge.
    #[inline(always)]
    pub(super) fn not_held(&mut self, seg: &Seg, t: &Tcp) -> Option<Pass> {
        if seg.payload == 0 {
            return Some(Pass::NoPayload);
        }
        if seg.flags & (URG | PSH | RST | SYN | FIN) != 0 {
            return Some(Pass::Flags);
        }
        if self.look.alone(t) {
            self.look.left_alone(t);
            // No slot to look in first for the next segment.
            self.last = None;
            self.first = None;
            return Some(Pass::Alone);
        }
        None
    }
}

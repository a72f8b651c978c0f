//! What leaves GRO and when: frames passed through (after their flow's
//! held data), evictions from a full table, flushes by reason.

use super::*;

/// Held packets an eviction looks at for a one-segment one (see
/// `Gro::eviction_victim`): enough to step past the bulk flows' packets,
/// few enough to stay cheap when every held flow merges.
pub(super) const EVICT_SCAN: usize = 8;

/// A held packet of either table: what a flush by flow reads of it.
pub(super) trait Entry {
    /// Its flow.
    fn key(&self) -> &FlowKey;
    /// When it began (`Base::since`): the oldest leaves first.
    fn since(&self) -> u64;
}

impl<B> Entry for Held<B> {
    fn key(&self) -> &FlowKey {
        &self.core.key
    }
    fn since(&self) -> u64 {
        self.base.since
    }
}

/// Which of GRO's tables a flush by flow walks (`Gro::flush_flows_of`),
/// and how a packet held there leaves.
pub(super) trait Flows<B: GroBuf> {
    type E: Entry + Default;
    /// The table, if GRO keeps one.
    fn table(g: &Gro<B>) -> Option<&Table<Self::E>>;
    fn flush(g: &mut Gro<B>, s: u16, why: Flush, out: &mut impl FnMut(B));
}

/// The TCP flows' table.
pub(super) struct TcpFlows;

impl<B: GroBuf> Flows<B> for TcpFlows {
    type E = Held<B>;
    fn table(g: &Gro<B>) -> Option<&Table<Held<B>>> {
        Some(&g.table)
    }
    fn flush(g: &mut Gro<B>, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        g.flush_slot(s, why, out);
    }
}

impl<B: GroBuf> Gro<B> {
    /// Passes a frame GRO turned away, after whatever its flow holds (if the
    /// frame still tells its flow: a TCP segment with IP options, a fragment,
    /// a bad checksum...). Frames that are not TCP pass at once: they are
    /// common (UDP, ARP...), so that way is kept short.
    #[inline(always)]
    pub(super) fn pass_in_order(&mut self, why: Pass, pkt: B, out: &mut impl FnMut(B)) {
        let related = !matches!(why, Pass::Frame(NotTcp::NotIp | NotTcp::NotTcp));
        if related && !self.table.is_empty() {
            self.flush_flow_of(&pkt, out);
            if self.pending != 0 {
                self.before_it(&pkt, out);
            }
        }
        if related && self.udp.is_some() {
            // A UDP frame turned away before its protocol was read (a
            // fragment, IP options, a bad IP checksum).
            self.udp_flush_flow_of(&pkt, out);
        }
        self.pass(why, pkt, out)
    }

    /// Flushes whatever the flow of `pkt` holds (`flush_flows_of`).
    #[cold]
    pub(super) fn flush_flow_of(&mut self, pkt: &B, out: &mut impl FnMut(B)) {
        if let Some(h) = crate::wire::FlowHint::of_frame(pkt.head(), &self.cfg.tunnels) {
            self.flush_flows_of::<TcpFlows>(&h, out);
        }
    }

    /// Flushes, in table `T`, what the flows that a frame hinted `h` may
    /// belong to hold. A frame that names its flow (tags, addresses,
    /// ports) costs one probe run of the table, as a segment does: a
    /// stream of such frames (padded ACKs, IP options, bad checksums) is no
    /// slower for being turned away. Flows that differ from it only by
    /// their MACs leave too (order is kept per 5-tuple and tags, as
    /// checkers of captures see flows). A fragment past the first cannot
    /// name its flow: every held flow between its addresses leaves, in one
    /// walk of the held packets (at most `flows` of them). Oldest first,
    /// either way, as a flush of everything would let them out.
    #[cold]
    pub(super) fn flush_flows_of<T: Flows<B>>(
        &mut self,
        h: &crate::wire::FlowHint,
        out: &mut impl FnMut(B),
    ) {
        let Some(key) = FlowKey::of_hint(h) else {
            let mut at = T::table(self).and_then(|t| t.next_live(None));
            while let Some(s) = at {
                let t = T::table(self).expect("a table with live entries");
                // Read on before `s` leaves the list.
                at = t.next_live(Some(s));
                if t.get(s).key().matches(h) {
                    T::flush(self, s, Flush::Unmergeable, out);
                }
            }
            return;
        };
        // The held flows it may belong to (its tags, addresses and ports;
        // any MACs) share its hash: at most a probe run.
        let hash = key.hash(&self.hash_key);
        let mut hits = [0u16; table::MAX_PROBE];
        let mut n = 0;
        if let Some(t) = T::table(self) {
            t.each_with_hash(hash, |s, e| {
                if t.is_live(s) && e.key().matches(h) {
                    hits[n] = s;
                    n += 1;
                }
            });
            hits[..n].sort_unstable_by_key(|&s| t.get(s).since());
        }
        for &s in &hits[..n] {
            T::flush(self, s, Flush::Unmergeable, out);
        }
    }

    /// The flows `pkt` let out had segments waiting ahead of a gap: they
    /// arrived before it, so they leave before it too (taken again, never to
    /// wait, and flushed), in sequence order.
    #[cold]
    fn before_it(&mut self, pkt: &B, out: &mut impl FnMut(B)) {
        let was = std::mem::replace(&mut self.giving_up, true);
        while self.pending != 0 {
            self.settle(out);
            self.flush_flow_of(pkt, out);
        }
        self.giving_up = was;
    }

    #[inline(always)]
    pub(super) fn pass(&mut self, why: Pass, pkt: B, out: &mut impl FnMut(B)) {
        self.stats.pass[why.index()] += 1;
        self.stats.packets_out += 1;
        self.stats.max_segments = self.stats.max_segments.max(1);
        if let Some(g) = self.hist.as_deref_mut() {
            g.segs.record(1);
        }
        out(pkt);
    }

    /// Flushes the oldest held packet if `flows` are held (the table has
    /// room for more entries: the remembered flows).
    #[inline(always)]
    pub(super) fn make_room(&mut self, out: &mut impl FnMut(B)) {
        if self.table.len() >= self.cfg.flows {
            let victim = self.eviction_victim();
            self.flush_slot(victim, Flush::TableFull, out);
        }
    }

    /// Which held packet leaves to make room: among the `EVICT_SCAN` held
    /// longest, the oldest that is still one segment (a flow that has not
    /// merged: under a flood of new flows, one of them), else the oldest.
    /// So a flood of one-segment flows evicts its own kind, not the bulk
    /// flows' packets, which are older for having merged longer.
    #[cold]
    pub(super) fn eviction_victim(&self) -> u16 {
        let oldest = self.table.oldest().expect("a full table has an oldest");
        let mut at = Some(oldest);
        for _ in 0..EVICT_SCAN {
            let Some(s) = at else { break };
            if self.table.get(s).core.segs == 1 {
                return s;
            }
            at = self.table.next_live(Some(s));
        }
        oldest
    }

    /// Sends a held packet out, headers fixed if it was merged; its slot
    /// is left a ghost.
    #[inline]
    pub(super) fn flush_slot(&mut self, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        if self.ahead_flows != 0 {
            // What waited for a gap in this flow goes through GRO again
            // (`settle`), before the flow's next segment.
            self.let_go(s);
        }
        self.table.remove(s);
        self.send_out(s, why, out);
    }

    /// Sends out the packet slot `s` held for `why`, headers fixed if it
    /// was merged: `flush_slot`'s, once the slot is a ghost; or the fast
    /// path's, where the flow's next head takes the slot at once (no
    /// segment of the flow waits ahead of a gap there).
    #[inline]
    pub(super) fn send_out(&mut self, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        let h = self.table.entry_mut(s);
        // One segment that nothing of its flow joined: the next poll looks
        // ahead. One a later segment of its flow turned away does not
        // count: the look-ahead would have held it all the same.
        if h.core.segs == 1 && why.met_none_of_its_flow() {
            self.look.left_alone(&h.core.t);
        }
        let held = self.now.saturating_sub(h.base.since);
        self.stats
            .left(self.hist.as_deref_mut(), why, h.core.segs, held);
        // A tunnelled packet's outer UDP checksum is computed from its
        // inner one, which must then be final.
        let tso = self.cfg.out_csum == OutCsum::Pseudo && h.core.segs > 1 && h.outer.is_none();
        if h.core.segs > 1 {
            let m = h.merged();
            if let Some(pkt) = h.core.pkt.as_mut() {
                fix_headers(pkt, &m, tso);
            }
            fix_outer(h);
        }
        let mut info = gso_info(&h.core.t, h.core.ip_len, h.core.mss, h.core.segs, tso);
        if let Some(o) = h.outer {
            // DPDK's tunnel layout: l2_len from the outer UDP header to
            // the inner IP header.
            info.l2_len = h.core.t.l3 - o.l4;
            info.outer_l2_len = o.l3;
            info.outer_l3_len = o.l4 - o.l3;
            info.outer_ipv6 = o.ipv6;
            info.outer_id_fixed = h.o_id_mode == IdMode::Fixed;
        }
        if let Some(mut pkt) = h.core.pkt.take() {
            pkt.set_gso(&info);
            out(pkt);
        }
    }

    /// Flushes everything held, oldest first, segments waiting ahead of a
    /// gap included (the end of a run; with the reorder window off, the end
    /// of a poll too).
    pub fn flush_all(&mut self, out: &mut impl FnMut(B)) {
        if self.udp.is_some() {
            self.udp_flush_until(None, Flush::EndOfPoll, out);
        }
        let was = std::mem::replace(&mut self.giving_up, true);
        loop {
            while let Some(s) = self.table.oldest() {
                self.flush_slot(s, Flush::EndOfPoll, out);
            }
            if self.pending == 0 {
                break;
            }
            // What waited goes through again, in sequence order: it may
            // hold packets of its own, which the next round lets out.
            self.settle(out);
        }
        self.giving_up = was;
    }

    /// The end of a poll: flushes everything held, oldest first, but the
    /// flows whose segments wait ahead of a gap (the reorder window; their
    /// wait is bounded by `expire_reorder`). Without the window, `flush_all`.
    pub fn end_of_poll(&mut self, out: &mut impl FnMut(B)) {
        if self.reorder_busy() {
            self.settle(out);
        }
        if self.ahead_flows == 0 {
            return self.flush_all(out);
        }
        if self.udp.is_some() {
            self.udp_flush_until(None, Flush::EndOfPoll, out);
        }
        let mut at = self.table.next_live(None);
        while let Some(s) = at {
            at = self.table.next_live(Some(s));
            if !self.has_waiting(s) {
                self.flush_slot(s, Flush::EndOfPoll, out);
            }
        }
    }

    /// Flushes what has been held since before `deadline` (TSC), oldest
    /// first, but the flows waiting for a gap (as `end_of_poll`).
    pub fn flush_older(&mut self, deadline: u64, out: &mut impl FnMut(B)) {
        if self.reorder_busy() {
            self.settle(out);
        }
        if self.udp.is_some() {
            self.udp_flush_until(Some(deadline), Flush::Age, out);
        }
        let mut at = self.table.next_live(None);
        while let Some(s) = at {
            if self.table.get(s).base.since > deadline {
                break;
            }
            at = self.table.next_live(Some(s));
            if !self.has_waiting(s) {
                self.flush_slot(s, Flush::Age, out);
            }
        }
    }
}

impl GroStats {
    /// A held packet of `segs` segments leaves for `why` after `held` TSC
    /// cycles: counted (and its size and hold time recorded in `hist`,
    /// when asked).
    #[inline(always)]
    pub(super) fn left(&mut self, hist: Option<&mut GroHist>, why: Flush, segs: u16, held: u64) {
        self.flush[why as usize] += 1;
        self.packets_out += 1;
        self.max_segments = self.max_segments.max(segs as u64);
        if let Some(g) = hist {
            g.segs.record(segs as usize);
            g.hold.record(held);
        }
    }
}

/// How a TCP packet of layout `t` leaves (outside a tunnel): `segs`
/// segments of `mss` bytes in `ip_len` bytes of IP packet.
#[inline(always)]
pub(super) fn gso_info(t: &Tcp, ip_len: u32, mss: u32, segs: u16, tso: bool) -> GsoInfo {
    GsoInfo {
        l2_len: t.l3,
        l3_len: t.l3_len() as u16 + big::jumbo_header(t, ip_len),
        l4_len: t.l4_len() as u16,
        mss: mss as u16,
        segs,
        ipv6: t.ipv6,
        tso,
        ..GsoInfo::default()
    }
}

//! Software GRO for TCP over IPv4 and IPv6 (VLAN, QinQ, and inside VXLAN
//! and Geneve tunnels), one instance per RX queue.
//!
//! Linux's rules (net/ipv4/tcp_offload.c, net/core/gro.c): a segment merges
//! into the held packet of its flow only when it is the next byte in
//! sequence, with the same ACK, flags/offset/window word (bar PSH, FIN, CWR),
//! options, IP fields (TOS/TTL/DF, ID incrementing or fixed; IPv6
//! class and hop limit), a valid checksum, and a payload no larger than the
//! first segment's. A merged PSH/FIN or short segment flushes at once. A
//! segment that cannot merge flushes what its flow holds first, so a flow's
//! bytes always leave in order. Limits: `max_frags` buffers and `max_size`
//! bytes of IP packet. Everything else passes through untouched.
//!
//! The rules are decided in one place (`refusals`: a flush word whose
//! lowest bit names the rule that said no), and the header fields they let
//! differ between a packet's segments are one table (`VARIES`), from which
//! the fast path's masks are made. The common case skips them: the next full-size
//! segment of the flow the previous segment went to is compared, masked, with
//! a header template of what that segment must be (`Template`), and merged
//! (`fast_merge`) or, after its flow's packet left, starts the next one in
//! the slot it left, whose state the table keeps as a ghost until the slot
//! is needed (`restart`); a segment of another flow is looked up first with
//! the previous one's header layout, unparsed (while flows take turns,
//! segment by segment, that lookup comes first). The table (`table`) is bounded
//! and O(1); no allocation happens per packet.
//!
//! Here: `Gro`, `receive` and the full path (`receive_slow`), read top to
//! bottom in one file. The rest, by concern: `config` (settings), `held` (a
//! flow's held packet), `head` (its sums and template, made once a second
//! segment comes, and merges),
//! `poll` (a poll's burst taken whole: a segment nothing later in it can
//! join leaves at once), `reorder` (the window that lets segments ahead of
//! a gap wait for it),
//! `rules` (the full path's decision), `template` (the fast path's compare
//! and its masks), `fast` (the fast path), `sums` (checksum state and the
//! merged headers), `flush` (what leaves and when), `key` and `table` (flow
//! identity and the bounded table), `stats` (counters and reasons),
//! `tunnel` (the outer rules and headers of VXLAN and Geneve), `udp` (UDP
//! GRO).

pub mod buf;
pub mod key;
pub mod stats;
pub mod table;

mod config;
mod fast;
mod flush;
mod head;
mod held;
mod poll;
mod reorder;
mod rules;
mod sums;
mod template;
mod tunnel;
mod udp;

pub use buf::{CsumHint, GroBuf, GsoInfo, RxHints, VecBuf};
pub use config::{CsumMode, GroConfig, OutCsum, MAX_REORDER};
pub use stats::{Flush, GroReport, GroStats, Pass, ReorderReport};

use fast::*;
use held::*;
use poll::Look;
use reorder::*;
use rules::*;
use sums::*;
use template::*;
use tunnel::*;
use udp::UdpTable;

use crate::csum;
use crate::wire::field::{self, ipv4, ipv6, tcp};
use crate::wire::{Fields, NotTcp, Tcp, TunnelErr};
use key::{FlowKey, HashKey};
use table::Table;

use crate::wire::{
    TCP_CWR as CWR, TCP_FIN as FIN, TCP_PSH as PSH, TCP_RST as RST, TCP_SYN as SYN, TCP_URG as URG,
};

/// One queue's GRO.
pub struct Gro<B> {
    cfg: GroConfig,
    table: Table<Held<B>>,
    masks: Masks,
    stats: GroStats,
    /// The slot the previous segment went to: bursts carry runs of one
    /// flow, so the next segment is checked there before hashing.
    last: Option<u16>,
    /// The slot whose template the next segment is tried on first: `last`,
    /// but None while flows take turns (a segment then goes to another
    /// flow than the one before it, and trying that one first is waste).
    first: Option<u16>,
    /// `segments_in` when a segment last went to another flow than the
    /// one before it.
    missed_at: u64,
    /// The time (TSC) of the latest receive or tick, for hold times.
    now: u64,
    hist: Option<Box<GroHist>>,
    /// The secret the flow hashes are keyed with.
    hash_key: HashKey,
    /// The reorder window's segments (None with it off).
    reorder: Option<Box<Reorder<B>>>,
    /// UDP flows (None with UDP GRO off).
    udp: Option<Box<UdpTable<B>>>,
    /// The UDP slot the previous datagram went to (the UDP fast path's).
    udp_last: Option<u16>,
    /// Flows with segments waiting ahead of a gap, and segments let go and
    /// not yet taken again: with both 0, a receive has nothing more to do.
    ahead_flows: u32,
    pending: u32,
    /// The segment being taken may not wait ahead of a gap (its wait was
    /// given up).
    no_wait: bool,
    /// Flushes let their flows' waiting segments go for good.
    giving_up: bool,
    /// The segment being taken comes from the reorder window, not the wire.
    from_window: bool,
    /// What the rest of the poll's burst may hold (`receive_poll`); out
    /// of line, so that its buckets do not push the fields above apart.
    look: Box<Look>,
    /// Tests turn the fast path off to hold it to the full path's decisions.
    #[cfg(test)]
    full_path_only: bool,
}

/// Distributions GRO records when asked (one record per output packet).
pub struct GroHist {
    /// Packets out by segment count (a packet spans at most 64 buffers, so
    /// at most 64 segments), folded into a histogram by `drain_into`.
    segs: crate::hist::Counts<65>,
    /// TSC ticks a held packet waited, first segment to flush (folded
    /// into nanoseconds by `drain_into`).
    hold: crate::hist::LogCounts,
    /// Nanoseconds per TSC tick, 32.32 fixed point.
    ns_per_tick: u64,
}

impl GroHist {
    /// Adds what was recorded since the last call into `segs` (segments per
    /// packet) and `hold_ns`, and starts afresh.
    pub fn drain_into(
        &mut self,
        segs: &mut hdrhistogram::Histogram<u64>,
        hold_ns: &mut hdrhistogram::Histogram<u64>,
    ) {
        self.segs.drain_into(segs);
        self.hold.drain_into(hold_ns, self.ns_per_tick);
    }
}

impl<B: GroBuf> Gro<B> {
    /// An instance with an empty table of `cfg.table_entries()` entries
    /// (allocated here, never per packet).
    pub fn new(cfg: GroConfig) -> Gro<B> {
        Self::with_hash_key(cfg, HashKey::random())
    }

    /// A GRO whose flow hashes use `key` (tests and benchmarks; `new` draws
    /// a random one, as a queue facing the wire must).
    pub fn with_hash_key(cfg: GroConfig, key: HashKey) -> Gro<B> {
        Gro {
            hash_key: key,
            cfg,
            table: Table::new(cfg.table_entries()),
            masks: Masks::default(),
            stats: GroStats::default(),
            last: None,
            first: None,
            missed_at: 0,
            now: 0,
            hist: None,
            reorder: (cfg.reorder > 0).then(|| {
                Box::new(Reorder::new(
                    cfg.table_entries(),
                    cfg.reorder as usize,
                    cfg.flows,
                ))
            }),
            udp: cfg.udp.then(|| Box::new(Table::new(cfg.table_entries()))),
            udp_last: None,
            ahead_flows: 0,
            pending: 0,
            no_wait: false,
            giving_up: false,
            from_window: false,
            look: Box::default(),
            #[cfg(test)]
            full_path_only: false,
        }
    }

    /// The settings it was made with.
    pub fn config(&self) -> &GroConfig {
        &self.cfg
    }

    /// Records segments per packet and hold times from now on (`tsc_hz`
    /// converts the TSC times given to `receive` and `tick` into ns).
    pub fn enable_histograms(&mut self, tsc_hz: u64) {
        self.hist = Some(Box::new(GroHist {
            segs: Default::default(),
            hold: Default::default(),
            ns_per_tick: ((1_000_000_000u128 << 32) / tsc_hz.max(1) as u128) as u64,
        }));
    }

    /// The histograms, once `enable_histograms` was called (drain them with
    /// `GroHist::drain_into`).
    pub fn histograms_mut(&mut self) -> Option<&mut GroHist> {
        self.hist.as_deref_mut()
    }

    /// The current time (TSC), for flushes without a receive.
    #[inline(always)]
    pub fn tick(&mut self, now: u64) {
        self.now = now;
    }

    /// The counters so far.
    pub fn stats(&self) -> &GroStats {
        &self.stats
    }

    /// Packets held right now.
    #[inline(always)]
    pub fn held(&self) -> usize {
        self.table.len() + self.udp.as_deref().map_or(0, |u| u.len())
    }

    /// The oldest held packet's arrival time, if any.
    pub fn oldest_since(&self) -> Option<u64> {
        let tcp = self.table.oldest().map(|s| self.table.get(s).since);
        let udp = (self.udp.as_deref()).and_then(|u| u.oldest().map(|s| u.get(s).since));
        match (tcp, udp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes one received packet at time `now` (TSC); whatever leaves GRO
    /// because of it (a flushed packet, this one passing through) goes to `out`
    /// in order.
    #[inline(always)]
    pub fn receive(&mut self, mut pkt: B, now: u64, out: &mut impl FnMut(B)) {
        self.stats.segments_in += 1;
        self.now = now;
        if !crate::wire::may_be_ip(pkt.head()) {
            // ARP, LLDP, ...: out at once (what parsing would decide).
            return self.pass(Pass::Frame(NotTcp::NotIp), pkt, out);
        }
        let verify = self.cfg.csum == CsumMode::Verify;
        let hints = pkt.rx_hints();
        #[cfg(test)]
        let fast = !self.full_path_only;
        #[cfg(not(test))]
        let fast = true;
        if fast && hints == RxHints::default() {
            if let Some(s) = self.udp_last {
                match self.udp_fast(s, pkt, verify, out) {
                    Some(p) => pkt = p,
                    None => return,
                }
            }
            // Without a template (a flow new to the table, one the reorder
            // window works on) the flow's segments cannot take the fast
            // path: straight to the lookup.
            let tried = self.first.filter(|&s| self.table.entry(s).tmpl.on);
            if let Some(s) = tried {
                match self.fast_merge(s, pkt, verify, out) {
                    Some(p) => pkt = p,
                    None => return,
                }
            }
            if let Some(s) = self.last {
                // Not the previous segment's flow: another held one?
                let Some(l) = self.lookup_by_layout(&pkt, s) else {
                    return self.slow(pkt, now, verify, hints, None, out);
                };
                let p = match l
                    .found
                    .filter(|&s2| Some(s2) != tried && self.table.entry(s2).tmpl.on)
                {
                    Some(s2) => {
                        // Two segments in a row, each of another flow than
                        // the one before it: flows take turns, and the next
                        // segment is looked up at once rather than tried
                        // on this one's flow first.
                        let n = self.stats.segments_in;
                        let other = Some(s2) != self.last;
                        let turns = other && n.wrapping_sub(self.missed_at) == 1;
                        if other {
                            self.missed_at = n;
                        }
                        let Some(p) = self.fast_merge(s2, pkt, verify, out) else {
                            self.last = Some(s2);
                            self.first = (!turns).then_some(s2);
                            return;
                        };
                        p
                    }
                    None => pkt,
                };
                return self.slow(p, now, verify, hints, Some(&l), out);
            }
        }
        self.slow(pkt, now, verify, hints, None, out)
    }

    /// The full path from the wire. The reorder window works on it alone
    /// (a flow with segments waiting, or let go, has its template off, so
    /// the fast path never touches it): what the window let go or can now
    /// merge is taken before this segment (it arrived first) and after it
    /// (this one may have filled a gap). Two tests on the full path; the
    /// window's work itself is out of line.
    #[inline(always)]
    fn slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<&Lookup>,
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
    fn receive_slow(
        &mut self,
        pkt: B,
        now: u64,
        verify: bool,
        hints: RxHints,
        lookup: Option<&Lookup>,
        out: &mut impl FnMut(B),
    ) {
        if verify && hints.ip == CsumHint::Bad {
            return self.pass_in_order(Pass::Frame(NotTcp::BadIpChecksum), pkt, out);
        }
        let (t, outer) = match Tcp::parse(
            pkt.head(),
            pkt.len(),
            verify && hints.ip == CsumHint::Unknown,
        ) {
            Ok(t) => (t, None),
            // Both IPv4 headers are checked in software: what a NIC's
            // flags say of a tunnelled frame depends on whether it parsed
            // the tunnel.
            Err(NotTcp::NotTcp) if self.cfg.tunnels.on => {
                match Tcp::parse_tunnel(pkt.head(), pkt.len(), verify, &self.cfg.tunnels) {
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
        let lookup =
            lookup.filter(|l| l.tunnel.map(|(o, _)| o) == outer && l.layout.same_layout(&t));
        // A plain lookup's key is made here (it carries only a tunnel's).
        let key = match (lookup.and_then(|l| l.tunnel), &outer) {
            (Some((_, k)), _) => k,
            (None, Some(o)) => FlowKey::tunneled(&f, o, &self.hash_key),
            (None, None) => FlowKey::new(&f),
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
                    if self.waiting_go_first(s, Flush::BadChecksum) {
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
            if go_first && self.waiting_go_first(s, why) {
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
        // needs; trusting, a flow new to the table makes them (and its
        // template) only once a second segment comes (`finish_head`).
        let (mut pbase, mut hconst, mut psum) = (0, 0, Contrib { pos: 0, neg: 0 });
        if verify {
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
        h.max_ip = self.cfg.max_size.min(65535) - outer.map_or(0, |o| (t.l3 - o.l3) as u32);
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
    fn went_to(&mut self, s: u16) {
        self.last = Some(s);
        self.first = Some(s);
    }

    /// Why a segment its flow's held packet (if any) did not take cannot
    /// start a packet of its own: no payload, flags that end a packet at
    /// once, or nothing later in its poll can join it (`receive_poll`;
    /// holding it would only delay it). Untouched, its checksum is not
    /// GRO's to judge.
    #[inline(always)]
    fn not_held(&mut self, seg: &Seg, t: &Tcp) -> Option<Pass> {
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

#[cfg(test)]
mod tests;

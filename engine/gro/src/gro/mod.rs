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
//! The rules are decided in one place (`rules`: a flush word whose lowest
//! bit names the rule that said no; those UDP shares, limits included, on
//! the held packet's `Core`; a tunnel's in `tunnel`), and the header fields they let
//! differ between a packet's segments are one table (`VARIES`), from which
//! the fast path's masks are made. The common case skips them: the next full-size
//! segment of the flow the previous segment went to is compared, masked, with
//! a header template of what that segment must be (`Template`), and merged
//! (`fast_merge`) or, after its flow's packet left, starts the next one in
//! the slot it left, whose state the table keeps as a ghost until the slot
//! is needed (`restart`; a head whose TCP options alone moved on, as
//! timestamps do while other flows take their turn, renews them there); a
//! segment of another flow is looked up first with
//! the previous one's header layout, unparsed (while flows take turns,
//! segment by segment, that lookup comes first). The table (`table`) is bounded
//! and O(1); no allocation happens per packet.
//!
//! Here: `Gro` and `receive` (the fast path's dispatch). The rest, by
//! concern: `rules` (the full path's decision) and `tunnel` (the outer
//! rules and headers of VXLAN and Geneve); `path`, the ways a segment
//! takes (`fast`: the fast path, and a burst's runs of one flow merged in
//! a loop of their own; `full`: the full path, `receive_slow`, read top to
//! bottom; `pair`: two segments in a row of a flow new to the table, or of
//! any flow while nothing is held, the second ending the packet, merged at
//! once without a table entry; `poll`: a poll's burst taken whole, a
//! segment nothing later in it can join leaving at once; `reorder`: the
//! window that lets segments ahead of a gap wait for it); `packet`, a
//! flow's held packet (`held`; `head`: its sums and template, made once a
//! second segment comes, and merges; `sums`: checksum state and the merged
//! headers; `template`: the fast path's compare, and the masks of each
//! header layout that a queue's templates share); `flow` (`key` and
//! `table`: flow identity and the bounded table); `flush` (what leaves and
//! when); `config` (settings), `buf` (what GRO needs of a buffer), `stats`
//! (counters and reasons), `big` (BIG TCP's sizes), `udp` (UDP GRO).

pub mod big;
pub mod buf;
pub mod stats;

mod config;
mod flow;
mod flush;
mod packet;
mod path;
mod rules;
mod tunnel;
mod udp;

pub use buf::{CsumHint, GroBuf, GsoInfo, RxHints, VecBuf};
pub use config::{CsumMode, GroConfig, OutCsum, ReorderWindow, MAX_FRAGS, MAX_REORDER};
pub use flow::{key, table};
pub use stats::{Flush, GroReport, GroStats, Pass, ReorderReport};

use packet::{held::*, sums::*, template::*};
use path::{fast::*, poll::Look, reorder::*};
use rules::*;
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

/// The rest of a poll's burst, as it is taken.
type Burst<'a, B> = std::vec::Drain<'a, B>;

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
            reorder: (cfg.reorder.segments > 0).then(|| {
                Box::new(Reorder::new(
                    cfg.table_entries(),
                    cfg.reorder.segments as usize,
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
        let tcp = self.table.oldest().map(|s| self.table.get(s).base.since);
        let udp = (self.udp.as_deref()).and_then(|u| u.oldest().map(|s| u.get(s).base.since));
        match (tcp, udp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes one received packet at time `now` (TSC); whatever leaves GRO
    /// because of it (a flushed packet, this one passing through) goes to `out`
    /// in order.
    #[inline(always)]
    pub fn receive(&mut self, pkt: B, now: u64, out: &mut impl FnMut(B)) {
        self.receive_before(pkt, None, now, out)
    }

    /// `receive`, with the rest of the poll's burst (`next`; None: not
    /// known), whose first packet may merge with this one at once and be
    /// taken with it (`try_pair`).
    #[inline(always)]
    fn receive_before(
        &mut self,
        mut pkt: B,
        next: Option<&mut Burst<'_, B>>,
        now: u64,
        out: &mut impl FnMut(B),
    ) {
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
        // The fast path takes segments the NIC said nothing of, or vouched
        // for (the IPv4 header's checksum is still checked there when
        // verifying: a template's `ip_csum_at`).
        let csum = FastCsum::of(hints, verify).filter(|_| fast);
        if let Some(csum) = csum {
            if let Some(s) = self.udp_last {
                match self.udp_fast(s, pkt, csum, out) {
                    Some(p) => pkt = p,
                    None => return,
                }
            }
            // Without a template (a flow new to the table, one the reorder
            // window works on) the flow's segments cannot merge at the
            // first try: straight to the lookup (where `refused` hands
            // the window what it can take from there).
            let tried = self.first.filter(|&s| self.table.entry(s).tmpl.on);
            // Whether `refused` judged the segment at `tried` already.
            let mut judged = false;
            if let Some(s) = tried {
                match self.at_first(s, pkt, csum, out) {
                    Some((p, j)) => (pkt, judged) = (p, j),
                    None => return,
                }
            }
            if let Some(s) = self.last {
                // Not the previous segment's flow: another held one?
                let Some(l) = self.lookup_by_layout(&pkt, s) else {
                    return self.slow(pkt, now, verify, hints, None, next, out);
                };
                // (A flow without a template is turned away by the fast
                // path's first test.)
                let pkt = match l.found.filter(|&s2| Some(s2) != tried) {
                    Some(s2) => match self.at_found(s2, pkt, csum, out) {
                        Some(p) => p,
                        None => return,
                    },
                    None => pkt,
                };
                // The flow's own packet turned it away (a gap, new
                // options?), or no packet of it is held.
                let pkt = match l.found.filter(|&s2| !(judged && Some(s2) == tried)) {
                    Some(s2) => self.refused(s2, pkt, csum, out),
                    None => Some(pkt),
                };
                let Some(pkt) = pkt else { return };
                return self.slow(pkt, now, verify, hints, Some(l), next, out);
            }
        }
        self.slow(pkt, now, verify, hints, None, next, out)
    }

    /// The fast path's first try, at the slot the previous segment went
    /// to (`first`, its template on): merged there; or, turned away by its
    /// own flow's packet there (a gap, new options: the ports say so
    /// before the template does, with no lookup), that packet ended and
    /// the next one started with it (`refused`). Gives the packet back
    /// otherwise, with whether `refused` judged it.
    #[inline(always)]
    fn at_first(
        &mut self,
        s: u16,
        pkt: B,
        csum: FastCsum,
        out: &mut impl FnMut(B),
    ) -> Option<(B, bool)> {
        let pkt = self.fast_merge(s, pkt, csum, out)?;
        if !(self.table.is_live(s) && self.table.entry(s).same_ports(pkt.head())) {
            return Some((pkt, false));
        }
        self.refused(s, pkt, csum, out).map(|p| (p, true))
    }

    /// The fast path's try at `s`, the slot the lookup found, another than
    /// the first try's; a segment it takes makes `s` the next one's first
    /// try, unless two segments in a row were each of another flow than the
    /// one before it: flows take turns, and the next segment is looked up
    /// at once rather than tried on this one's flow first.
    #[inline(always)]
    fn at_found(&mut self, s: u16, pkt: B, csum: FastCsum, out: &mut impl FnMut(B)) -> Option<B> {
        let n = self.stats.segments_in;
        let other = Some(s) != self.last;
        let turns = other && n.wrapping_sub(self.missed_at) == 1;
        if other {
            self.missed_at = n;
        }
        let Some(p) = self.fast_merge(s, pkt, csum, out) else {
            self.last = Some(s);
            self.first = (!turns).then_some(s);
            return None;
        };
        Some(p)
    }
}

#[cfg(test)]
mod tests;

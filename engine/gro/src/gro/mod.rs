//! Software GRO for TCP over IPv4 and IPv6, one instance per RX queue.
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
//! The rules are decided in one place (`mergeable`, with `why_not` naming
//! the rule that said no). The common case skips them: the next full-size
//! segment of the flow the previous segment went to is compared, masked, with
//! a header template of what that segment must be (`Template`), and merged
//! (`fast_merge`) or, after its flow's packet left, starts the next one in
//! the slot it left, whose state the table keeps as a ghost until the slot
//! is needed (`restart`); a segment of another flow is looked up first with
//! the previous one's header layout, unparsed. The table (`table`) is bounded
//! and O(1); no allocation happens per packet.

pub mod buf;
pub mod key;
pub mod stats;
pub mod table;

pub use buf::{CsumHint, GroBuf, GsoInfo, RxHints, VecBuf};
pub use stats::{Flush, GroReport, GroStats, Pass};

use crate::csum;
use crate::wire::{Fields, NotTcp, Tcp};
use key::{FlowKey, HashKey};
use table::Table;

/// Held packets an eviction looks at for a one-segment one (see
/// `Gro::eviction_victim`): enough to step past the bulk flows' packets,
/// few enough to stay cheap when every held flow merges.
const EVICT_SCAN: usize = 8;

use crate::wire::{
    TCP_CWR as CWR, TCP_FIN as FIN, TCP_PSH as PSH, TCP_RST as RST, TCP_SYN as SYN, TCP_URG as URG,
};
/// PSH, FIN and CWR in the offset/flags/window word: allowed to differ.
const WORD_FREE: u32 = ((PSH | FIN | CWR) as u32) << 16;

/// Software checksum validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CsumMode {
    /// Validate IPv4 header and TCP checksums, unless the NIC vouches.
    #[default]
    Verify,
    /// Trust the traffic (what rte_gro does): validate nothing.
    Trust,
}

/// What a merged packet's TCP checksum field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutCsum {
    /// The full checksum over the merged payload.
    #[default]
    Full,
    /// The pseudo-header sum without length, for a TX port doing TSO.
    Pseudo,
}

/// GRO's settings for one queue (the `--gro-*` options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroConfig {
    /// Buffers one merged packet may span (1..=64; Linux's MAX_SKB_FRAGS is 17).
    pub max_frags: u16,
    /// Largest IP packet (IP + TCP headers + payload) a merge may build.
    pub max_size: u32,
    /// Flows held at once per queue.
    pub flows: usize,
    /// Flows whose state (key, template, sums) the table keeps after their
    /// packet left, so their next packet restarts without being rebuilt
    /// (ghosts; the least recently flushed is forgotten first). At least
    /// `flows` are: the table has `max(flows, flow_cache)` entries.
    pub flow_cache: usize,
    /// Software checksum validation of the segments received.
    pub csum: CsumMode,
    /// What a merged packet's TCP checksum field holds.
    pub out_csum: OutCsum,
}

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig {
            max_frags: 17,
            max_size: 65535,
            flows: 64,
            flow_cache: 1024,
            csum: CsumMode::Verify,
            out_csum: OutCsum::Full,
        }
    }
}

impl GroConfig {
    /// Checks every setting's range; the error names the option to change.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=64).contains(&self.max_frags) {
            return Err(format!(
                "--max-frags {} is out of range: give 1..=64 (Linux uses 17)",
                self.max_frags
            ));
        }
        if !(1500..=65535).contains(&self.max_size) {
            return Err(format!(
                "--gro-max-size {} is out of range: give 1500..=65535",
                self.max_size
            ));
        }
        if !(1..=16384).contains(&self.flows) {
            return Err(format!(
                "--gro-flows {} is out of range: give 1..=16384",
                self.flows
            ));
        }
        if self.flow_cache > 16384 {
            return Err(format!(
                "--gro-flow-cache {} is out of range: give 0..=16384",
                self.flow_cache
            ));
        }
        Ok(())
    }

    /// Entries in a queue's table: held flows and remembered ones.
    pub fn table_entries(&self) -> usize {
        self.flows.max(self.flow_cache)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdMode {
    /// One segment so far.
    Open,
    Incrementing,
    /// Fixed ID (allowed with or without DF, as Linux does since 2025).
    Fixed,
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
struct Held<B> {
    // Line 0: who the flow is (lookups compare it) and its sizes.
    key: FlowKey,
    mss: u32,
    /// Largest IP packet this one may grow to (`max_size`, IPv6 payload rule).
    max_ip: u32,
    // Line 1: the packet and its running state.
    /// The packet; None only while the slot is free.
    pkt: Option<B>,
    /// The payload's one's-complement sum so far, as two unfolded
    /// accumulators: the sum is `pos - neg` modulo 0xffff (see `Contrib`).
    psum_pos: u64,
    psum_neg: u64,
    next_seq: u32,
    /// IP packet length so far.
    ip_len: u32,
    payload_len: u32,
    /// The IPv4 ID the next fast merge expects (a u32 of its own: the fast
    /// path reads it after storing the fields around it, and a narrower one
    /// may be read through a widened load that waits on those stores).
    next_id: u32,
    segs: u16,
    frags: u16,
    last_id: u16,
    id_mode: IdMode,
    flags_or: u8,
    t: Tcp,
    // Lines 2-4: what the next full-size segment must look like.
    tmpl: Template,
    // The rest: read by the full path's rules and by a flush.
    ack: u32,
    word: u32,
    ip_word: u32,
    /// The head's seq, urgent pointer and flags: with `hconst`, the merged
    /// header's sum without reading it again.
    head_seq: u32,
    head_urg: u16,
    head_flags: u8,
    df: bool,
    /// Pseudo-header sum without the length (addresses, protocol).
    pbase: u16,
    /// TCP header sum without seq, checksum, urgent pointer, PSH/FIN/CWR:
    /// what every mergeable segment's header shares with the head's.
    hconst: u16,
    /// IPv4 header sum without total length and checksum (0 for IPv6).
    ip_base: u16,
    opt_words: u8,
    opts: [u32; 10],
    since: u64,
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
            head_urg: 0,
            head_flags: 0,
            ip_base: 0,
            max_ip: 0,
            flags_or: 0,
            t: Tcp::default(),
            since: 0,
            tmpl: Template::off(),
            pkt: None,
        }
    }
}

impl<B: GroBuf> Held<B> {
    /// Are `ext` (a segment's IPv6 extension headers) the head's, byte for
    /// byte? The head's are in its template, which a head with extension
    /// headers but no template does not have: then nothing merges with it.
    #[inline(always)]
    fn same_ext(&self, ext: &[u8]) -> bool {
        let (at, end) = (self.t.l3 as usize + 40, self.t.l4 as usize);
        if !self.t.ipv6 || end == at {
            return ext.is_empty();
        }
        self.tmpl.on && self.tmpl.bytes.get(at..end) == Some(ext)
    }

    /// Is `pkt` a one-buffer, full-size segment of this flow matching its
    /// template, with sequence number `seq` and IPv4 ID `id` (None: any)?
    /// If so, its sequence number, its payload's checksum contribution and
    /// whether it carries PSH, unless it is verified and bad (None then too).
    #[inline(always)]
    fn template_match(
        &self,
        pkt: &B,
        seq: Option<u32>,
        id: Option<u16>,
        verify: bool,
        masks: &Masks,
    ) -> Option<(u32, Contrib, bool)> {
        let tm = &self.tmpl;
        let b = pkt.head();
        if !tm.on
            || pkt.len() != tm.frame_len as usize
            || pkt.segs() != 1
            || !tm.matches(b, masks.get(tm.mask))
            || !tm.next_ok(b, seq, id)
        {
            return None;
        }
        let l4 = self.t.l4 as usize;
        let seq = seq.unwrap_or_else(|| u32::from_be_bytes(b[l4 + 4..l4 + 8].try_into().unwrap()));
        let field = u16::from_be_bytes([b[l4 + 16], b[l4 + 17]]);
        // PSH is the one flag the template lets differ (the head has none).
        let psh = b[l4 + 13] & PSH;
        let x = tm.k + (seq >> 16) as u64 + (seq & 0xffff) as u64 + field as u64 + psh as u64;
        if !verify {
            return Some((seq, Contrib { pos: 0, neg: x }, psh != 0));
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
            psh != 0,
        ))
    }
}

/// The header the next in-order, full-size segment of a held flow must
/// carry, byte for byte but for its sequence number, IPv4 ID and checksums,
/// which vary and are checked on their own (`next_ok`), and PSH (merged,
/// then flushed): same flow, ACK, other flags, window, options, TOS/TTL/DF.
/// It never changes once built, so a compare never waits on a store into it.
/// A segment that matches it under its layout's mask (`Masks`), with the
/// head's frame length, is mergeable by Linux's rules by construction: one
/// masked compare replaces the rules for the common case; everything else
/// takes the full path (`receive`'s slow path), which decides the same way.
#[repr(C, align(8))]
struct Template {
    /// Off when the layout does not fit, has no mask, or lost its mask.
    on: bool,
    /// 8-byte words the header spans.
    words: u8,
    seq_at: u16,
    /// IPv4 ID and header checksum offsets (0: IPv6).
    id_at: u16,
    ip_csum_at: u16,
    /// The head's frame length: only full-size segments take the fast path.
    frame_len: u32,
    /// Checksum contribution of a full-size segment's header and
    /// pseudo-header, without its seq and checksum field (see `Contrib`).
    k: u64,
    /// IPv4 header sum without ID and checksum (to update the expected checksum).
    ip_sum: u16,
    /// The mask of this header layout, in `Masks`.
    mask: u8,
    bytes: [u8; TMPL_LEN],
}

/// Bytes of header a template covers (QinQ + IPv6 + TCP with options fit).
const TMPL_LEN: usize = 128;
/// Bytes the common-case compare covers: Ethernet + IPv6 + TCP with
/// timestamps is 86, with two VLAN tags 94.
const FIXED_CMP: usize = 96;

/// What a template is built from besides the head's header.
struct TmplArgs {
    /// The IPv4 header's sum (0 for IPv6).
    ip_hdr: u16,
    pbase: u16,
    hconst: u16,
    tcp_len: u32,
    verify: bool,
    frame_len: usize,
}

/// A header in a first buffer shorter than a template (rare): copied as is.
#[cold]
#[inline(never)]
fn short_copy(bytes: &mut [u8; TMPL_LEN], hdr: &[u8]) {
    bytes[..hdr.len()].copy_from_slice(hdr);
}

impl Template {
    fn off() -> Template {
        Template {
            bytes: [0; TMPL_LEN],
            mask: 0,
            words: 0,
            frame_len: 0,
            seq_at: 0,
            id_at: 0,
            ip_csum_at: 0,
            ip_sum: 0,
            k: 0,
            on: false,
        }
    }

    /// Makes this the template of a flow whose head is `f`'s segment, in
    /// place, under mask `mask` (`Masks::of`); off without one.
    fn build(&mut self, f: &Fields, seg: &Seg, a: TmplArgs, mask: Option<u8>) {
        let tm = self;
        let t = f.layout();
        tm.on = false;
        let Some(m) = mask else { return };
        tm.mask = m;
        let (l3, l4) = (t.l3 as usize, t.l4 as usize);
        let b = f.header();
        // A copy of a fixed size (a few vector moves), not a memcpy call of
        // the header's length; the mask ignores what lies past the header.
        match f.frame().first_chunk::<TMPL_LEN>() {
            Some(all) => tm.bytes = *all,
            None => short_copy(&mut tm.bytes, b),
        }
        // A head may carry CWR (held, as Linux does); what follows must not
        // (the mask keeps CWR; PSH it lets differ).
        tm.bytes[l4 + 13] &= !CWR;
        tm.words = (t.payload as usize).div_ceil(8) as u8;
        tm.frame_len = a.frame_len as u32;
        tm.seq_at = (l4 + 4) as u16;
        if !t.ipv6 {
            tm.id_at = (l3 + 4) as u16;
            // Trusting, the IPv4 checksum is not checked.
            tm.ip_csum_at = if a.verify { (l3 + 10) as u16 } else { 0 };
            let field = u16::from_be_bytes([b[l3 + 10], b[l3 + 11]]);
            tm.ip_sum = csum::sub(csum::sub(a.ip_hdr, seg.id), field);
        } else {
            tm.id_at = 0;
            tm.ip_csum_at = 0;
        }
        // A full-size segment's sum but for its seq (and checksum field).
        tm.k =
            pseudo_sum(a.pbase, a.tcp_len) + tcp_header_sum(a.hconst, 0, seg.urg, seg.flags & !CWR);
        tm.on = true;
    }

    /// Does `b` match under `mask` (this template's, from `Masks`), word by
    /// word?
    #[inline(always)]
    fn matches(&self, b: &[u8], mask: &[u8; TMPL_LEN]) -> bool {
        let n = self.words as usize;
        // Nearly every header fits FIXED_CMP bytes: one compare of a fixed
        // size, which the compiler turns into a few vector instructions
        // (the mask is zero past the header).
        if n * 8 <= FIXED_CMP && b.len() >= FIXED_CMP {
            let w =
                |a: &[u8], i: usize| u64::from_ne_bytes(a[i * 8..i * 8 + 8].try_into().unwrap());
            let (b, t, m) = (
                &b[..FIXED_CMP],
                &self.bytes[..FIXED_CMP],
                &mask[..FIXED_CMP],
            );
            let mut d = 0u64;
            for i in 0..FIXED_CMP / 8 {
                d |= (w(b, i) ^ w(t, i)) & w(m, i);
            }
            return d == 0;
        }
        if b.len() < n * 8 {
            return false;
        }
        let mut d = 0u64;
        for i in 0..n {
            let w = |a: &[u8]| u64::from_ne_bytes(a[i * 8..i * 8 + 8].try_into().unwrap());
            d |= (w(b) ^ w(&self.bytes)) & w(mask);
        }
        d == 0
    }

    /// Does `b` (which `matches`) carry sequence number `seq` (None: any)
    /// and IPv4 ID `id` (None: any), and, when verifying, the IPv4 checksum
    /// that goes with its ID?
    #[inline(always)]
    fn next_ok(&self, b: &[u8], seq: Option<u32>, id: Option<u16>) -> bool {
        let at = |i: u16| u16::from_be_bytes(b[i as usize..i as usize + 2].try_into().unwrap());
        let s = self.seq_at as usize;
        let got = u32::from_be_bytes(b[s..s + 4].try_into().unwrap());
        let mut ok = seq.is_none_or(|q| got == q);
        if self.id_at != 0 {
            let got = at(self.id_at);
            ok &= id.is_none_or(|i| got == i);
            if self.ip_csum_at != 0 {
                ok &= at(self.ip_csum_at) == csum::finish(csum::add(self.ip_sum, got));
            }
        }
        ok
    }
}

/// Header layouts a queue's templates may have at once; a new one takes
/// the mask of the layout least recently given to a new head, if that was
/// at least `MASK_AGE` heads ago.
const MASKS: usize = 16;
/// New heads a mask must have gone unused before another layout takes it:
/// taking one walks the table (its templates go off), so under a flood of
/// layouts that walk stays a small share of the heads.
const MASK_AGE: u64 = 4096;

/// The compare masks of templates, one per header layout (offsets, IP
/// version): all ones over the header but the bytes that vary between a
/// flow's segments (seq, TCP checksum, IPv4 ID and checksum, PSH), zero past
/// it. Shared by every flow of the layout, so a compare reads the flow's own
/// bytes and a mask that stays in cache, and a new template writes none.
struct Masks {
    store: Box<MaskStore>,
    layouts: [(u16, u16, u16, bool); MASKS],
    n: usize,
}

/// What `Masks` keeps out of line: the masks, and what only a new head
/// reads (so the fields the fast path reads beside them stay where they are).
struct MaskStore {
    masks: [[u8; TMPL_LEN]; MASKS],
    /// When each mask was last given to a new head (a count of heads).
    used: [u64; MASKS],
    heads: u64,
}

impl Default for Masks {
    fn default() -> Masks {
        Masks {
            store: Box::new(MaskStore {
                masks: [[0; TMPL_LEN]; MASKS],
                used: [0; MASKS],
                heads: 0,
            }),
            layouts: [(0, 0, 0, false); MASKS],
            n: 0,
        }
    }
}

impl Masks {
    #[inline(always)]
    fn get(&self, i: u8) -> &[u8; TMPL_LEN] {
        &self.store.masks[i as usize]
    }

    /// The mask of `t`'s layout for a new head, made on first use, and
    /// whether it was taken from another layout (whose templates must then
    /// go off: `Gro::mask_for`). Once `MASKS` layouts are known, a new one
    /// takes the mask least recently given to a new head, so layouts seen
    /// early and never again do not keep the fast path from the rest; None
    /// (no template) for a header longer than a template, and while every
    /// mask was used in the last `MASK_AGE` heads.
    #[inline]
    fn of(&mut self, t: &Tcp) -> Option<(u8, bool)> {
        if t.payload as usize > TMPL_LEN {
            return None;
        }
        let st = &mut *self.store;
        st.heads += 1;
        let key = (t.l3, t.l4, t.payload, t.ipv6);
        if let Some(i) = self.layouts[..self.n].iter().position(|&k| k == key) {
            st.used[i] = st.heads;
            return Some((i as u8, false));
        }
        let (i, taken) = if self.n < MASKS {
            self.n += 1;
            (self.n - 1, false)
        } else {
            let lru = (0..MASKS).min_by_key(|&i| st.used[i]).expect("MASKS > 0");
            if st.used[lru] + MASK_AGE > st.heads {
                return None;
            }
            (lru, true)
        };
        st.used[i] = st.heads;
        let (l3, l4, hl) = (t.l3 as usize, t.l4 as usize, t.payload as usize);
        let m = &mut st.masks[i];
        m.fill(0);
        m[..hl].fill(0xff);
        // Checked on their own: seq, and the TCP checksum varies.
        m[l4 + 4..l4 + 8].fill(0);
        m[l4 + 16..l4 + 18].fill(0);
        // PSH may differ: a segment with it merges, then flushes.
        m[l4 + 13] = !PSH;
        if !t.ipv6 {
            // ID and header checksum: checked on their own (`next_ok`).
            m[l3 + 4..l3 + 6].fill(0);
            m[l3 + 10..l3 + 12].fill(0);
        }
        self.layouts[i] = key;
        Some((i as u8, taken))
    }
}

/// One queue's GRO.
pub struct Gro<B> {
    cfg: GroConfig,
    table: Table<Held<B>>,
    masks: Masks,
    stats: GroStats,
    /// The slot the previous segment went to: bursts carry runs of one
    /// flow, so the next segment is checked there before hashing.
    last: Option<u16>,
    /// The time (TSC) of the latest receive or tick, for hold times.
    now: u64,
    hist: Option<Box<GroHist>>,
    /// The secret the flow hashes are keyed with.
    hash_key: HashKey,
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
            now: 0,
            hist: None,
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
    pub fn held(&self) -> usize {
        self.table.len()
    }

    /// The oldest held packet's arrival time, if any.
    pub fn oldest_since(&self) -> Option<u64> {
        self.table.oldest().map(|s| self.table.get(s).since)
    }

    /// Passes a frame GRO turned away, after whatever its flow holds (if the
    /// frame still tells its flow: a TCP segment with IP options, a fragment,
    /// a bad checksum...). Frames that are not TCP pass at once: they are
    /// common (UDP, ARP...), so that way is kept short.
    #[inline(always)]
    fn pass_in_order(&mut self, why: Pass, pkt: B, out: &mut impl FnMut(B)) {
        let related = !matches!(why, Pass::Frame(NotTcp::NotIp | NotTcp::NotTcp));
        if related && !self.table.is_empty() {
            self.flush_flow_of(&pkt, out);
        }
        self.pass(why, pkt, out)
    }

    /// Flushes whatever the flow of `pkt` holds. A frame that names its flow
    /// (ports and all) costs one probe of the table, as a segment does: a
    /// stream of such frames (padded ACKs, IP options, bad checksums) is no
    /// slower for being turned away. A fragment past the first cannot name
    /// its flow: every held flow between its addresses leaves, in one walk
    /// of the held packets (at most `flows` of them).
    #[cold]
    fn flush_flow_of(&mut self, pkt: &B, out: &mut impl FnMut(B)) {
        let Some(h) = crate::wire::FlowHint::of(pkt.head()) else {
            return;
        };
        match FlowKey::of_hint(&h) {
            Some(key) => {
                let hash = key.hash(&self.hash_key);
                if let Some(s) = self.table.find(hash, |e| e.key == key) {
                    if self.table.is_live(s) {
                        self.flush_slot(s, Flush::Unmergeable, out);
                    }
                }
            }
            None => {
                let mut at = self.table.next_live(None);
                while let Some(s) = at {
                    // Read on before `s` leaves the list.
                    at = self.table.next_live(Some(s));
                    if self.table.get(s).key.matches(&h) {
                        self.flush_slot(s, Flush::Unmergeable, out);
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn pass(&mut self, why: Pass, pkt: B, out: &mut impl FnMut(B)) {
        self.stats.pass[why.index()] += 1;
        self.stats.packets_out += 1;
        self.stats.max_segments = self.stats.max_segments.max(1);
        if let Some(g) = self.hist.as_deref_mut() {
            g.segs.record(1);
        }
        out(pkt);
    }

    /// Takes one received packet at time `now` (TSC); whatever leaves GRO
    /// because of it (a flushed packet, this one passing through) goes to `out`
    /// in order.
    #[inline]
    pub fn receive(&mut self, pkt: B, now: u64, out: &mut impl FnMut(B)) {
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
            if let Some(s) = self.last {
                let Some(p) = self.fast_merge(s, pkt, verify, out) else {
                    return;
                };
                // Not the previous segment's flow: another held one?
                let Some(l) = self.lookup_by_layout(&p, s) else {
                    return self.receive_slow(p, now, verify, hints, None, out);
                };
                let p = match l.found.filter(|&s2| s2 != s) {
                    Some(s2) => {
                        let Some(p) = self.fast_merge(s2, p, verify, out) else {
                            self.last = Some(s2);
                            return;
                        };
                        p
                    }
                    None => p,
                };
                return self.receive_slow(p, now, verify, hints, Some(l), out);
            }
        }
        self.receive_slow(pkt, now, verify, hints, None, out)
    }

    /// Looks `pkt`'s flow up by a key read as if it had the header layout
    /// of the flow in slot `s` (the previous segment's, held or just freed),
    /// without parsing: interleaved flows nearly always share one. A wrong
    /// guess finds nothing, or an entry whose template then refuses the
    /// segment (the template covers every header byte: addresses, tags,
    /// ethertype, IHL, data offset); either way the full path decides,
    /// reusing the lookup when its parse agrees with the guess.
    #[inline(always)]
    fn lookup_by_layout(&self, pkt: &B, s: u16) -> Option<Lookup> {
        // Read from the entry, not from a copy stored at each new head:
        // reading back a recent store of a different width would stall.
        let t = self.table.entry(s).t;
        let b = pkt.head();
        if t.l3 == 0 || b.len() < t.payload as usize {
            return None;
        }
        let key = FlowKey::new(&Fields::new(b, t));
        let hash = key.hash(&self.hash_key);
        Some(Lookup {
            layout: t,
            key,
            hash,
            found: self.table.find(hash, |h| h.key == key),
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
    fn fast_merge(&mut self, s: u16, pkt: B, verify: bool, out: &mut impl FnMut(B)) -> Option<B> {
        let max_frags = self.cfg.max_frags;
        let Some(h) = self.table.try_get_mut(s) else {
            return self.restart(s, pkt, verify, out);
        };
        let id = h.next_id as u16;
        // A bad checksum: the full path counts and passes it.
        let Some((seq, c, psh)) =
            h.template_match(&pkt, Some(h.next_seq), Some(id), verify, &self.masks)
        else {
            return Some(pkt);
        };
        if h.frags >= max_frags || h.ip_len + h.mss > h.max_ip {
            if psh {
                // Flush, then a PSH segment passes: the full path's job.
                return Some(pkt);
            }
            let why = if h.frags >= max_frags {
                Flush::FragLimit
            } else {
                Flush::SizeLimit
            };
            self.flush_slot(s, why, out);
            return self.start_in_freed(s, pkt, seq, c, out);
        }
        let c = c.shifted(h.payload_len & 1 == 1);
        if let Some(held) = h.pkt.as_mut() {
            held.append_one(pkt, h.t.payload as usize);
        }
        h.psum_pos += c.pos;
        h.psum_neg += c.neg;
        h.payload_len += h.mss;
        h.ip_len += h.mss;
        h.next_seq = seq.wrapping_add(h.mss);
        h.segs += 1;
        h.frags += 1;
        // The ID was the one expected: the next, or the same once fixed.
        // (`last_id` is not read here: a load of it may be widened over the
        // counters just stored, and wait for them, a store-forwarding stall
        // that cost ~20% of GRO.)
        if !h.t.ipv6 {
            h.last_id = id;
            if h.id_mode != IdMode::Fixed {
                h.id_mode = IdMode::Incrementing;
                h.next_id = id.wrapping_add(1) as u32;
            }
        }
        self.stats.merged_segments += 1;
        if psh {
            h.flags_or |= PSH;
            self.flush_slot(s, Flush::Psh, out);
        }
        None
    }

    /// The flow in slot `s` was flushed (frag limit, end of poll, PSH...),
    /// and the slot is still its ghost: its entry still holds the flow's
    /// state and template. A segment matching that template starts the
    /// flow's next packet there, without parsing, hashing or building a
    /// template: what the full path would do (it goes back to the same
    /// slot), since every field it would read equals the old head's but
    /// seq, ID and the checksums, which are set here.
    #[inline]
    fn restart(&mut self, s: u16, pkt: B, verify: bool, out: &mut impl FnMut(B)) -> Option<B> {
        let Some(h) = self.table.ghost(s) else {
            return Some(pkt);
        };
        // A new head: any sequence number, any ID; PSH would pass it.
        let Some((seq, c, psh)) = h.template_match(&pkt, None, None, verify, &self.masks) else {
            return Some(pkt);
        };
        if psh {
            return Some(pkt);
        }
        self.start_in_freed(s, pkt, seq, c, out)
    }

    /// Starts a flow's next packet with `pkt` (which matched the flow's
    /// template: sequence number `seq`, checksum contribution `c`) in the
    /// flow's ghost slot `s`, once there is room for one more held packet.
    #[inline(always)]
    fn start_in_freed(
        &mut self,
        s: u16,
        pkt: B,
        seq: u32,
        c: Contrib,
        out: &mut impl FnMut(B),
    ) -> Option<B> {
        self.make_room(out);
        self.stats.heads_cached += 1;
        let now = self.now;
        let h = self.table.reclaim(s).expect("the flow's ghost");
        let (l3, l4) = (h.t.l3 as usize, h.t.l4 as usize);
        let id = if h.t.ipv6 {
            0
        } else {
            let b = pkt.head();
            u16::from_be_bytes([b[l3 + 4], b[l3 + 5]])
        };
        let ip_len = h.tmpl.frame_len - l3 as u32;
        h.segs = 1;
        h.frags = 1;
        h.ip_len = ip_len;
        h.payload_len = h.mss;
        h.psum_pos = c.pos;
        h.psum_neg = c.neg;
        h.head_seq = seq;
        h.next_seq = seq.wrapping_add(h.mss);
        h.last_id = id;
        h.id_mode = IdMode::Open;
        if !h.t.ipv6 {
            h.ip_base = csum::sub(csum::add(h.tmpl.ip_sum, id), ip_len as u16);
        }
        h.next_id = id.wrapping_add(1) as u32;
        h.head_flags = h.tmpl.bytes[l4 + 13];
        h.flags_or = 0;
        h.since = now;
        h.pkt = Some(pkt);
        None
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
        lookup: Option<Lookup>,
        out: &mut impl FnMut(B),
    ) {
        if verify && hints.ip == CsumHint::Bad {
            return self.pass_in_order(Pass::Frame(NotTcp::BadIpChecksum), pkt, out);
        }
        let t = match Tcp::parse(
            pkt.head(),
            pkt.len(),
            verify && hints.ip == CsumHint::Unknown,
        ) {
            Ok(t) => t,
            Err(why) => return self.pass_in_order(Pass::Frame(why), pkt, out),
        };
        let f = Fields::new(pkt.head(), t);
        // A lookup with the layout this parse found is this one's.
        let lookup = lookup.filter(|l| l.layout.same_layout(&t));
        let key = lookup.map_or_else(|| FlowKey::new(&f), |l| l.key);
        let seg = Seg::read(&f, pkt.segs_from(t.payload as usize));
        let tcp_len = t.l4_len() as u32 + t.payload_len;
        let csum = CsumCheck {
            verify,
            hint: hints.l4,
            tcp_len,
            payload: t.payload as usize,
            len: t.payload_len as usize,
        };

        // The flow's slot, live or a ghost: keys are unique in the table,
        // so a new head of a flow it knows goes back to that slot.
        let (hash, found) = match lookup {
            Some(l) => (l.hash, l.found),
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
            if self.mergeable(h, &seg, f.options(), f.ipv6_ext()) {
                // The header equals the head's but for seq, checksum, urgent
                // pointer and PSH/FIN: its sum follows from the head's.
                let Some(psum) = csum.payload_sum(&pkt, h.pbase, seg.var_sum(h.hconst), seg.csum)
                else {
                    self.flush_slot(s, Flush::BadChecksum, out);
                    return self.pass(Pass::BadTcpChecksum, pkt, out);
                };
                return self.merge(s, pkt, &seg, psum, out);
            }
            let why = self.why_not(self.table.get(s), &seg, f.options(), f.ipv6_ext());
            self.flush_slot(s, why, out);
        }
        // Not merged: hold it as the start of a new packet, unless it cannot
        // start one (no payload, or flags that end it at once).
        if seg.payload == 0 {
            return self.pass(Pass::NoPayload, pkt, out);
        }
        if seg.flags & (URG | PSH | RST | SYN | FIN) != 0 {
            return self.pass(Pass::Flags, pkt, out);
        }
        let pbase = f.pseudo_base();
        let hconst = header_const(&f, &seg);
        let Some(psum) = csum.payload_sum(&pkt, pbase, seg.var_sum(hconst), seg.csum) else {
            return self.pass(Pass::BadTcpChecksum, pkt, out);
        };
        let mut opts = [0u32; 10];
        let o = f.options();
        for (i, w) in o.chunks_exact(4).enumerate() {
            opts[i] = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
        }
        let held_frags = pkt.segs();
        let ip_hdr = if t.ipv6 {
            0
        } else {
            csum::sum(&f.header()[t.l3 as usize..t.l4 as usize])
        };
        let mask = self.mask_for(&t);
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
        h.ip_base = if t.ipv6 {
            0
        } else {
            let l3 = t.l3 as usize;
            let b = f.header();
            let total = u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]);
            let field = u16::from_be_bytes([b[l3 + 10], b[l3 + 11]]);
            csum::sub(csum::sub(ip_hdr, total), field)
        };
        // The whole IP packet, an IPv6 header included (as Linux counts,
        // and as a TSO port's 64 KiB limit does).
        h.max_ip = self.cfg.max_size.min(65535);
        h.flags_or = 0;
        h.t = t;
        h.since = now;
        h.tmpl.build(
            &f,
            &seg,
            TmplArgs {
                ip_hdr,
                pbase,
                hconst,
                tcp_len,
                verify,
                frame_len: pkt.len(),
            },
            mask,
        );
        h.pkt = Some(pkt);
        self.last = Some(slot);
    }

    /// The mask for a new head of layout `t`; when it was taken from
    /// another layout, every template of that one (held or remembered
    /// flows) goes off first: it would compare under the wrong mask.
    #[inline(always)]
    fn mask_for(&mut self, t: &Tcp) -> Option<u8> {
        let (m, taken) = self.masks.of(t)?;
        if taken {
            self.table.for_each_entry(|e| {
                if e.tmpl.mask == m {
                    e.tmpl.on = false;
                }
            });
        }
        Some(m)
    }

    /// Flushes the oldest held packet if `flows` are held (the table has
    /// room for more entries: the remembered flows).
    #[inline(always)]
    fn make_room(&mut self, out: &mut impl FnMut(B)) {
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
    fn eviction_victim(&self) -> u16 {
        let oldest = self.table.oldest().expect("a full table has an oldest");
        let mut at = Some(oldest);
        for _ in 0..EVICT_SCAN {
            let Some(s) = at else { break };
            if self.table.get(s).segs == 1 {
                return s;
            }
            at = self.table.next_live(Some(s));
        }
        oldest
    }

    /// Appends a checked segment to its held packet; flushes on PSH, FIN or
    /// a short segment.
    #[inline(always)]
    fn merge(&mut self, s: u16, pkt: B, seg: &Seg, psum: Contrib, out: &mut impl FnMut(B)) {
        self.last = Some(s);
        let h = self.table.get_mut(s);
        if let Some(held) = h.pkt.as_mut() {
            held.append(pkt, h.t.payload as usize);
        }
        let c = psum.shifted(h.payload_len & 1 == 1);
        h.psum_pos += c.pos;
        h.psum_neg += c.neg;
        h.payload_len += seg.payload;
        h.ip_len += seg.payload;
        h.next_seq = h.next_seq.wrapping_add(seg.payload);
        h.segs += 1;
        h.frags += seg.frags;
        if h.id_mode == IdMode::Open && !h.t.ipv6 {
            h.id_mode = if seg.id == h.last_id {
                IdMode::Fixed
            } else {
                IdMode::Incrementing
            };
        }
        h.last_id = seg.id;
        h.flags_or |= seg.flags & (PSH | FIN);
        h.next_id = match h.id_mode {
            IdMode::Fixed => h.last_id,
            _ => h.last_id.wrapping_add(1),
        } as u32;
        let short = seg.payload < h.mss;
        self.stats.merged_segments += 1;
        if seg.flags & PSH != 0 {
            self.flush_slot(s, Flush::Psh, out);
        } else if seg.flags & FIN != 0 {
            self.flush_slot(s, Flush::Fin, out);
        } else if short {
            self.flush_slot(s, Flush::ShortSegment, out);
        }
    }

    /// Linux's merge rules, all at once: the common answer (merge) costs a
    /// few compares; `why_not` names the rule when it is no.
    #[inline(always)]
    fn mergeable(&self, h: &Held<B>, seg: &Seg, opts: &[u8], ext: &[u8]) -> bool {
        let same = (seg.ack ^ h.ack)
            | ((seg.word ^ h.word) & !WORD_FREE)
            | (seg.ip_word ^ h.ip_word)
            | (seg.seq ^ h.next_seq)
            | (seg.flags & CWR) as u32;
        if same != 0 || seg.payload == 0 || seg.payload > h.mss {
            return false;
        }
        let next = h.last_id.wrapping_add(1);
        let id_ok = h.t.ipv6
            || match h.id_mode {
                IdMode::Open => seg.id == next || seg.id == h.last_id,
                IdMode::Incrementing => seg.id == next,
                IdMode::Fixed => seg.id == h.last_id,
            };
        id_ok
            && h.frags as u32 + seg.frags as u32 <= self.cfg.max_frags as u32
            && h.ip_len + seg.payload <= h.max_ip
            && opts_equal(&h.opts[..h.opt_words as usize], opts)
            && h.same_ext(ext)
    }

    /// Which rule refused a merge, in Linux's order of checks.
    #[cold]
    fn why_not(&self, h: &Held<B>, seg: &Seg, opts: &[u8], ext: &[u8]) -> Flush {
        if seg.ack != h.ack {
            return Flush::AckChange;
        }
        if (seg.word ^ h.word) & !WORD_FREE != 0 || seg.flags & CWR != 0 {
            return Flush::Flags;
        }
        if !opts_equal(&h.opts[..h.opt_words as usize], opts) {
            return Flush::OptionMismatch;
        }
        if seg.ip_word != h.ip_word || !h.same_ext(ext) {
            return Flush::IpMismatch;
        }
        if seg.payload == 0 {
            return Flush::PureAck;
        }
        if seg.seq != h.next_seq {
            return Flush::SeqGap;
        }
        if seg.payload > h.mss {
            return Flush::LargerThanMss;
        }
        if h.frags as u32 + seg.frags as u32 > self.cfg.max_frags as u32 {
            return Flush::FragLimit;
        }
        if h.ip_len + seg.payload > h.max_ip {
            return Flush::SizeLimit;
        }
        Flush::IpId
    }

    /// Sends a held packet out, headers fixed if it was merged.
    #[inline]
    fn flush_slot(&mut self, s: u16, why: Flush, out: &mut impl FnMut(B)) {
        self.stats.flush[why as usize] += 1;
        self.stats.packets_out += 1;
        let h = self.table.remove(s);
        self.stats.max_segments = self.stats.max_segments.max(h.segs as u64);
        if let Some(g) = self.hist.as_deref_mut() {
            g.segs.record(h.segs as usize);
            g.hold.record(self.now.saturating_sub(h.since));
        }
        let tso = self.cfg.out_csum == OutCsum::Pseudo && h.segs > 1;
        if h.segs > 1 {
            fix_headers(h, tso);
        }
        let info = GsoInfo {
            l2_len: h.t.l3,
            l3_len: h.t.l3_len() as u16,
            l4_len: h.t.l4_len() as u16,
            mss: h.mss as u16,
            segs: h.segs,
            ipv6: h.t.ipv6,
            tso,
        };
        if let Some(mut pkt) = h.pkt.take() {
            pkt.set_gso(&info);
            out(pkt);
        }
    }

    /// Flushes everything held (end of a poll), oldest first.
    pub fn flush_all(&mut self, out: &mut impl FnMut(B)) {
        while let Some(s) = self.table.oldest() {
            self.flush_slot(s, Flush::EndOfPoll, out);
        }
    }

    /// Flushes what has been held since before `deadline` (TSC), oldest first.
    pub fn flush_older(&mut self, deadline: u64, out: &mut impl FnMut(B)) {
        while let Some(s) = self.table.oldest() {
            if self.table.get(s).since > deadline {
                break;
            }
            self.flush_slot(s, Flush::Age, out);
        }
    }
}

/// A flow lookup made before parsing, with a guessed header layout.
#[derive(Clone, Copy)]
struct Lookup {
    layout: Tcp,
    key: FlowKey,
    hash: u32,
    /// The slot holding `key`, live or a ghost, if any.
    found: Option<u16>,
}

/// The fields of an incoming segment the rules compare.
struct Seg {
    seq: u32,
    ack: u32,
    word: u32,
    ip_word: u32,
    id: u16,
    df: bool,
    flags: u8,
    payload: u32,
    frags: u16,
    csum: u16,
    urg: u16,
}

/// PSH, FIN and CWR in the flags byte: the part of the header that may differ
/// within a merged packet (besides seq, checksum and urgent pointer).
const VAR_FLAGS: u8 = PSH | FIN | CWR;

impl Seg {
    #[inline(always)]
    fn read(f: &Fields, frags: u16) -> Seg {
        let h = f.tcp_header();
        Seg {
            seq: f.seq(),
            ack: f.ack(),
            word: f.flag_word(),
            ip_word: f.ip_word(),
            id: f.ip_id(),
            df: f.df(),
            flags: f.flags(),
            payload: f.layout().payload_len,
            frags,
            csum: f.tcp_csum(),
            urg: u16::from_be_bytes([h[18], h[19]]),
        }
    }

    /// This segment's TCP header sum (checksum field excluded), unfolded,
    /// from the constant part it shares with its flow.
    #[inline(always)]
    fn var_sum(&self, hconst: u16) -> u64 {
        tcp_header_sum(hconst, self.seq, self.urg, self.flags)
    }
}

/// A TCP header's sum (checksum field excluded), unfolded, from the constant
/// part of its flow's headers and the fields that vary.
#[inline(always)]
fn tcp_header_sum(hconst: u16, seq: u32, urg: u16, flags: u8) -> u64 {
    hconst as u64
        + (seq >> 16) as u64
        + (seq & 0xffff) as u64
        + urg as u64
        + (flags & VAR_FLAGS) as u64
}

/// The pseudo-header's sum, unfolded: addresses and protocol (`pbase`) and
/// the TCP length.
#[inline(always)]
fn pseudo_sum(pbase: u16, tcp_len: u32) -> u64 {
    pbase as u64 + (tcp_len >> 16) as u64 + (tcp_len & 0xffff) as u64
}

/// The constant part of a segment's TCP header sum (see `Held::hconst`).
#[inline]
fn header_const(f: &Fields, seg: &Seg) -> u16 {
    let full = csum::sum(f.tcp_header());
    let var = seg.var_sum(0) + seg.csum as u64;
    csum::sub(full, csum::fold(var))
}

/// Options compared as 32-bit words (their length is a multiple of 4).
#[inline(always)]
fn opts_equal(held: &[u32], opts: &[u8]) -> bool {
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

/// How a segment's payload sum is found, and its checksum judged.
struct CsumCheck {
    verify: bool,
    hint: CsumHint,
    tcp_len: u32,
    payload: usize,
    len: usize,
}

/// A segment's payload sum, unfolded: either the bytes' sum (`pos`) or, when
/// the checksum is trusted, the negated sum of what the checksum covers
/// besides the payload (`neg`: a valid segment's pseudo-header, header,
/// checksum field and payload sum to 0 modulo 0xffff). Sums add modulo 0xffff
/// and a byte swap is a multiplication by 256, so segments add up with plain
/// integer arithmetic and the merged checksum folds once, at flush.
#[derive(Clone, Copy, Default)]
struct Contrib {
    pos: u64,
    neg: u64,
}

impl Contrib {
    /// The same bytes one position later (an odd offset): swapped.
    #[inline(always)]
    fn shifted(self, odd: bool) -> Contrib {
        let k = if odd { 8 } else { 0 };
        Contrib {
            pos: self.pos << k,
            neg: self.neg << k,
        }
    }
}

impl CsumCheck {
    /// The payload's contribution to the merged checksum, or None if the
    /// checksum is bad. Verify sums the bytes and checks; trust (or a NIC
    /// that vouches) derives it from the checksum field without reading the
    /// payload.
    #[inline(always)]
    fn payload_sum<B: GroBuf>(&self, pkt: &B, pbase: u16, hdr: u64, field: u16) -> Option<Contrib> {
        let base = pseudo_sum(pbase, self.tcp_len) + hdr + field as u64;
        match self.hint {
            CsumHint::Bad if self.verify => None,
            CsumHint::DataGood => Some(Contrib {
                pos: sum_range(pkt, self.payload, self.len) as u64,
                neg: 0,
            }),
            CsumHint::Unknown if self.verify => {
                let p = sum_range(pkt, self.payload, self.len);
                (csum::add(csum::fold(base), p) == 0xffff).then_some(Contrib {
                    pos: p as u64,
                    neg: 0,
                })
            }
            _ => Some(Contrib { pos: 0, neg: base }),
        }
    }
}

/// One's-complement sum of `len` bytes from `off`, across buffers (a chunk
/// starting at an odd offset of the range is byte-swapped into place).
#[inline]
fn sum_range<B: GroBuf>(pkt: &B, off: usize, len: usize) -> u16 {
    let mut s = 0u16;
    let mut odd = false;
    pkt.for_each_chunk(off, len, |c| {
        let cs = csum::sum(c);
        s = csum::add(s, if odd { cs.swap_bytes() } else { cs });
        odd ^= c.len() & 1 == 1;
    });
    s
}

/// A merged packet's headers: IP length and checksum, TCP flags and checksum,
/// from sums kept since the head arrived (nothing is summed again).
fn fix_headers<B: GroBuf>(h: &mut Held<B>, tso: bool) {
    let t = h.t;
    let (l3, l4) = (t.l3 as usize, t.l4 as usize);
    let tcp_len = h.ip_len - t.l3_len() as u32;
    let flags = h.head_flags | h.flags_or;
    let Some(pkt) = h.pkt.as_mut() else { return };
    let b = pkt.head_mut();
    if t.ipv6 {
        // The payload length counts extension headers too.
        let plen = h.ip_len - 40;
        b[l3 + 4..l3 + 6].copy_from_slice(&(plen as u16).to_be_bytes());
    } else {
        b[l3 + 2..l3 + 4].copy_from_slice(&(h.ip_len as u16).to_be_bytes());
        let c = csum::finish(csum::add(h.ip_base, h.ip_len as u16));
        b[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    b[l4 + 13] = flags;
    let c = if tso {
        // DPDK's TSO contract: the pseudo-header sum without the length.
        h.pbase
    } else {
        let hdr = tcp_header_sum(h.hconst, h.head_seq, h.head_urg, flags);
        let payload = csum::add(csum::fold(h.psum_pos), !csum::fold(h.psum_neg));
        csum::finish(csum::add(
            csum::fold(pseudo_sum(h.pbase, tcp_len) + hdr),
            payload,
        ))
    };
    b[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests;

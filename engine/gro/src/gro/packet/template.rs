//! The header templates the fast path compares a segment with, and the
//! per-layout masks they share.

use crate::gro::*;
use crate::wire::Outer;

/// The header the next in-order, full-size segment of a held flow must
/// carry, byte for byte but for its sequence number, IPv4 ID and checksums,
/// which vary and are checked on their own (`accepts`), and PSH (merged,
/// then flushed): same flow, ACK, other flags, window, options, TOS/TTL/DF.
/// It never changes once built, so a compare never waits on a store into it.
/// A segment that matches it under its layout's mask (`Masks`), with the
/// head's frame length, is mergeable by Linux's rules by construction: one
/// masked compare replaces the rules for the common case; everything else
/// takes the full path (`receive`'s slow path), which decides the same way.
///
/// In a tunnel the template covers the outer headers too: every outer byte
/// but the outer IPv4 ID and header checksum must be the head's (the UDP
/// checksum too: with both inner checksums right, which the fast path
/// checks, a full-size segment's outer UDP checksum is the same as the
/// head's); the outer ID is checked on its own, as the inner one is.
#[repr(C, align(8))]
pub(in crate::gro) struct Template {
    /// What it expects besides the bytes.
    pub(in crate::gro) x: Expect,
    /// The head's header, its `HEAD_ONLY` flags cleared.
    pub(in crate::gro) bytes: [u8; TMPL_LEN],
}

/// What a template expects of a segment besides its header bytes: where
/// the fields it checks on its own lie, what they must sum to, and the
/// frame's length. Made without the bytes, it judges a segment against
/// another header (a head's own, `pair`).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(in crate::gro) struct Expect {
    /// Off when the layout does not fit, has no mask, or lost its mask.
    pub(in crate::gro) on: bool,
    /// 8-byte words the header spans.
    pub(in crate::gro) words: u8,
    /// Offsets (the header lies within `TMPL_LEN` bytes): seq, IPv4 ID and
    /// header checksum (0: IPv6; the checksum 0 also when trusting). While
    /// `on`, each of them and the TCP header's fields up to its checksum
    /// lie inside the first `words * 8` bytes (`build` checks it): the fast
    /// path reads them without bounds checks.
    pub(in crate::gro) seq_at: u8,
    pub(in crate::gro) id_at: u8,
    pub(in crate::gro) ip_csum_at: u8,
    /// The mask of this header layout, in `Masks`.
    pub(in crate::gro) mask: u8,
    /// A tunnel's outer IPv4 ID and header checksum offsets, as the inner
    /// ones (0: no tunnel, or IPv6 outside).
    pub(in crate::gro) outer_id_at: u8,
    pub(in crate::gro) outer_csum_at: u8,
    /// The head's frame length: only full-size segments take the fast path
    /// (one buffer each: 64 KiB at most).
    pub(in crate::gro) frame_len: u16,
    /// The flow is inside a tunnel: what a NIC's L4 checksum flag is about
    /// then depends on the NIC, so it is not taken for the inner checksum.
    pub(in crate::gro) tunnel: bool,
    /// Off only while segments of its flow wait ahead of a gap (the
    /// reorder window's): on again once none waits (`resume`).
    pub(in crate::gro) paused: bool,
    /// IPv4 header sum without ID and checksum (`csum::ipv4_sum_without`).
    pub(in crate::gro) ip_sum: u16,
    /// The same for the outer IPv4 header.
    pub(in crate::gro) outer_ip_sum: u16,
    /// Checksum contribution of a full-size segment's header and
    /// pseudo-header, without its seq and checksum field (see `Contrib`).
    pub(in crate::gro) k: u64,
}

impl std::ops::Deref for Template {
    type Target = Expect;
    #[inline(always)]
    fn deref(&self) -> &Expect {
        &self.x
    }
}

impl std::ops::DerefMut for Template {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Expect {
        &mut self.x
    }
}

/// Bytes of header a template covers (QinQ + IPv6 + TCP with options fit).
pub(in crate::gro) const TMPL_LEN: usize = 128;
/// Bytes the compares of the common headers cover: Ethernet + IPv4 + TCP
/// with timestamps is 66 bytes (74 with two VLAN tags), Ethernet + IPv6 +
/// TCP with timestamps 86 (94 with two tags).
pub(in crate::gro) const SHORT_CMP: usize = 80;
pub(in crate::gro) const FIXED_CMP: usize = 96;

/// How many of a segment's first bytes a template's compare reads: its
/// header, rounded up to one of three sizes, so that every compare is of a
/// size known when it is compiled (a few vector instructions).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::gro) enum Width {
    /// `SHORT_CMP`: IPv4 headers with timestamps.
    Short,
    /// `FIXED_CMP`: IPv6 headers with timestamps.
    Fixed,
    /// `TMPL_LEN`: longer headers (QinQ and IPv6 with long options, tunnels).
    Whole,
}

/// What a template is built from besides the head's header.
pub(in crate::gro) struct TmplArgs {
    /// The IPv4 header's sum (0 for IPv6).
    pub(in crate::gro) ip_hdr: u16,
    /// The tunnel the flow is inside.
    pub(in crate::gro) outer: Option<crate::wire::Outer>,
    pub(in crate::gro) pbase: u16,
    pub(in crate::gro) hconst: u16,
    pub(in crate::gro) tcp_len: u32,
    pub(in crate::gro) frame_len: usize,
}

/// A header in a first buffer shorter than a template (rare): copied as is.
#[cold]
#[inline(never)]
pub(in crate::gro) fn short_copy(bytes: &mut [u8; TMPL_LEN], hdr: &[u8]) {
    bytes[..hdr.len()].copy_from_slice(hdr);
}

impl Template {
    pub(in crate::gro) fn empty() -> Template {
        Template {
            x: Expect::empty(),
            bytes: [0; TMPL_LEN],
        }
    }

    /// Makes this the template of a flow whose head is `f`'s segment, in
    /// place, under mask `mask` (`Masks::of`); off without one.
    pub(in crate::gro) fn build(&mut self, f: &Fields, seg: &Seg, a: TmplArgs, mask: Option<u8>) {
        self.x.build(f, seg, a, mask);
        if !self.on {
            return;
        }
        // A copy of a fixed size (a few vector moves), not a memcpy call of
        // the header's length; the mask ignores what lies past the header.
        match f.frame().first_chunk::<TMPL_LEN>() {
            Some(all) => self.bytes = *all,
            None => short_copy(&mut self.bytes, f.header()),
        }
        // What follows the head must not carry `HEAD_ONLY` flags (the mask
        // keeps them; PSH it lets differ).
        self.bytes[f.layout().l4 as usize + tcp::FLAGS] &= !HEAD_ONLY;
    }
}

/// A full-size segment's sum but for its seq (and checksum field), for a
/// head `seg` whose pseudo-header's sum is `pbase` and TCP header's
/// constant sum `hconst`.
#[inline(always)]
fn full_size_sum(pbase: u16, tcp_len: u32, hconst: u16, seg: &Seg) -> u64 {
    pseudo_sum(pbase, tcp_len) + tcp_header_sum(hconst, 0, seg.urg, seg.flags & !HEAD_ONLY)
}

impl Expect {
    /// The IPv4 base sum (`Base::ip_base`) of a head this took, with ID
    /// `id` and total length `total`: its header is the head's this was
    /// made from but for those two fields and the checksum.
    #[inline(always)]
    pub(in crate::gro) fn ip_base(&self, id: u16, total: u16) -> u16 {
        csum::sub(csum::add(self.ip_sum, id), total)
    }

    /// Off while segments of its flow wait ahead of a gap, so that the
    /// fast path's merges and runs never meet the window; `resume` turns it
    /// on again if it was on.
    #[inline(always)]
    pub(in crate::gro) fn pause(&mut self) {
        self.paused = self.on;
        self.on = false;
    }

    /// On again, if it was on when its flow's segments began to wait.
    #[inline(always)]
    pub(in crate::gro) fn resume(&mut self) {
        self.on |= self.paused;
        self.paused = false;
    }

    /// Built for its flow's packet: on, or paused while segments of the
    /// flow wait ahead of a gap (what it judges still holds).
    #[inline(always)]
    pub(in crate::gro) fn built(&self) -> bool {
        self.on || self.paused
    }

    /// Off until it is built again.
    #[inline(always)]
    pub(in crate::gro) fn off(&mut self) {
        self.on = false;
        self.paused = false;
    }

    pub(in crate::gro) fn empty() -> Expect {
        Expect {
            mask: 0,
            words: 0,
            frame_len: 0,
            tunnel: false,
            paused: false,
            seq_at: 0,
            id_at: 0,
            ip_csum_at: 0,
            outer_id_at: 0,
            outer_csum_at: 0,
            ip_sum: 0,
            outer_ip_sum: 0,
            k: 0,
            on: false,
        }
    }

    /// What a template of a flow whose head is `f`'s segment expects,
    /// under mask `mask` (`Masks::of`); off without one. Inline in its two
    /// callers: a pair's (no tunnel, a mask in hand) then skips the
    /// tunnel's fields and passes nothing through memory.
    #[inline(always)]
    pub(in crate::gro) fn build(&mut self, f: &Fields, seg: &Seg, a: TmplArgs, mask: Option<u8>) {
        let tm = self;
        let t = f.layout();
        tm.off();
        let Some(m) = mask else { return };
        let Ok(frame_len) = u16::try_from(a.frame_len) else {
            return;
        };
        tm.mask = m;
        let (l3, l4) = (t.l3 as usize, t.l4 as usize);
        let b = f.header();
        tm.words = (t.payload as usize).div_ceil(8) as u8;
        tm.frame_len = frame_len;
        tm.tunnel = a.outer.is_some();
        tm.seq_at = (l4 + tcp::SEQ.start) as u8;
        if !t.ipv6 {
            tm.id_at = (l3 + ipv4::ID.start) as u8;
            // Checked trusting too: trust covers the L4 checksum; a header
            // that fails its own checksum is never merged into one whose
            // checksum is then made valid.
            tm.ip_csum_at = (l3 + ipv4::CHECKSUM.start) as u8;
            let field = field::read16(b, l3, ipv4::CHECKSUM);
            tm.ip_sum = csum::ipv4_sum_without(a.ip_hdr, seg.id, field);
        } else {
            tm.id_at = 0;
            tm.ip_csum_at = 0;
        }
        let outer_v4 = a.outer.and_then(|o| Some((o.l3 as usize, o.ipv4_id(b)?)));
        (tm.outer_id_at, tm.outer_csum_at, tm.outer_ip_sum) = match outer_v4 {
            Some((ol3, id)) => {
                let hdr = csum::sum(&b[ol3..ol3 + ipv4::MIN_LEN]);
                let field = field::read16(b, ol3, ipv4::CHECKSUM);
                let csum_at = (ol3 + ipv4::CHECKSUM.start) as u8;
                let sum = csum::ipv4_sum_without(hdr, id, field);
                ((ol3 + ipv4::ID.start) as u8, csum_at, sum)
            }
            None => (0, 0, 0),
        };
        // The fast path reads these fields without bounds checks: each lies
        // inside the compared header (always so for a parsed layout).
        let end = tm.words as usize * 8;
        if tm.seq_at as usize - tcp::SEQ.start + tcp::CHECKSUM.end > end
            || tm.id_at as usize + 2 > end
            || tm.ip_csum_at as usize + 2 > end
        {
            return;
        }
        tm.k = full_size_sum(a.pbase, a.tcp_len, a.hconst, seg);
        tm.on = true;
    }

    /// The header bytes a compare of this template reads.
    #[inline(always)]
    pub(in crate::gro) fn width(&self) -> Width {
        let len = self.words as usize * 8;
        if len <= SHORT_CMP {
            Width::Short
        } else if len <= FIXED_CMP {
            Width::Fixed
        } else {
            Width::Whole
        }
    }

    /// Whether `h`, the first `N` bytes of a segment (`N` of at least the
    /// header: `width` says which), matches this template under `mask` (its
    /// layout's, from `Masks`) and carries sequence number `seq` and IPv4
    /// ID `id` (None: any), and the IPv4 header checksum that goes with its
    /// ID; if so, what it carries besides what
    /// the template fixes. One compare of a fixed size, which the compiler
    /// turns into a few vector instructions (the mask is zero past the
    /// header), and field reads that need no bounds check.
    #[inline(always)]
    pub(in crate::gro) fn accepts<const N: usize>(
        &self,
        h: &[u8; N],
        r: &[u8; N],
        mask: &[u8; TMPL_LEN],
        seq: Option<u32>,
        id: Option<u16>,
    ) -> Option<Seen> {
        let end = self.words as usize * 8;
        if end > N {
            return None;
        }
        let w = |a: &[u8], i: usize| u64::from_ne_bytes(a[i * 8..i * 8 + 8].try_into().unwrap());
        let mut d = 0u64;
        for i in 0..N / 8 {
            d |= (w(h, i) ^ w(r, i)) & w(mask, i);
        }
        // Reads of the fields below: `build` turned this template on only
        // with each of them inside the header's `words * 8` bytes, which
        // are within h's N (checked above).
        // SAFETY: seq_at + 4 <= words * 8 <= N, as just said.
        let got_seq = u32::from_be_bytes(unsafe { read(h, self.seq_at as usize) });
        // IPv6 has no ID (`id_at` 0): what is read there is not compared.
        // SAFETY: id_at + 2 <= words * 8 <= N, as just said.
        let got_id = u16::from_be_bytes(unsafe { read(h, self.id_at as usize) });
        let id_bits = if self.id_at != 0 { 0xffff } else { 0 };
        // The differences from what is expected, in one word.
        d |=
            seq.map_or(0, |q| got_seq ^ q) as u64 | id.map_or(0, |i| (got_id ^ i) & id_bits) as u64;
        // The IPv4 header checksum, in either mode (`build`).
        if self.ip_csum_at != 0 {
            // SAFETY: ip_csum_at + 2 <= words * 8 <= N, as just said.
            let field = u16::from_be_bytes(unsafe { read(h, self.ip_csum_at as usize) });
            d |= (field ^ csum::ipv4_checksum_with(self.ip_sum, got_id)) as u64;
        }
        if d != 0 {
            return None;
        }
        // The TCP header's fields, from where its seq is.
        let l4 = self.seq_at as usize - tcp::SEQ.start;
        // SAFETY: the flags lie before the checksum, which ends inside
        // words * 8 <= N, as just said.
        let [flags] = unsafe { read(h, l4 + tcp::FLAGS) };
        // SAFETY: l4 + the checksum's end <= words * 8 <= N, as just said.
        let csum = u16::from_be_bytes(unsafe { read(h, l4 + tcp::CHECKSUM.start) });
        Some(Seen {
            seq: got_seq,
            csum,
            psh: flags & PSH != 0,
        })
    }

    /// The outer IPv4 ID of `b`, a segment of this template's tunnel (None
    /// outside one, or with IPv6 outside).
    #[inline(always)]
    pub(in crate::gro) fn outer_id(&self, b: &[u8]) -> Option<u16> {
        let at = self.outer_id_at as usize;
        (at != 0).then(|| u16::from_be_bytes([b[at], b[at + 1]]))
    }

    /// Does `b`, a segment matching this template whose outer IPv4 ID is
    /// `id`, carry (verifying) the outer header checksum that goes with it?
    #[inline(always)]
    pub(in crate::gro) fn outer_csum_ok(&self, b: &[u8], id: u16) -> bool {
        let at = self.outer_csum_at as usize;
        at == 0
            || u16::from_be_bytes([b[at], b[at + 1]])
                == csum::ipv4_checksum_with(self.outer_ip_sum, id)
    }
}

/// What a segment that matched a template carries besides what the
/// template fixes.
pub(in crate::gro) struct Seen {
    pub(in crate::gro) seq: u32,
    /// Its TCP checksum field.
    pub(in crate::gro) csum: u16,
    pub(in crate::gro) psh: bool,
}

/// The `W` bytes at `at` of `h`.
///
/// # Safety
///
/// `at + W <= N`.
#[inline(always)]
unsafe fn read<const N: usize, const W: usize>(h: &[u8; N], at: usize) -> [u8; W] {
    debug_assert!(at + W <= N);
    // SAFETY: at + W <= N (our contract): the W bytes lie inside h.
    unsafe { h.as_ptr().add(at).cast::<[u8; W]>().read() }
}

/// A header layout: the segment's offsets and IP version, and its tunnel's.
pub(in crate::gro) type LayoutKey = (u16, u16, u16, bool, Option<Outer>);

/// Header layouts a queue's templates may have at once; a new one takes
/// the mask of the layout least recently given to a new head, if that was
/// at least `MASK_AGE` heads ago.
pub(in crate::gro) const MASKS: usize = 16;
/// New heads a mask must have gone unused before another layout takes it:
/// taking one walks the table (its templates go off), so under a flood of
/// layouts that walk stays a small share of the heads.
pub(in crate::gro) const MASK_AGE: u64 = 4096;

/// The compare masks of templates, one per header layout (offsets, IP
/// version, tunnel): all ones over the header but the bits the rules let
/// vary that the fast path checks on its own (`VARIES`: seq, TCP checksum,
/// IPv4 IDs and checksums, PSH), zero past it. Shared by every flow of the layout, so a compare reads the flow's own
/// bytes and a mask that stays in cache, and a new template writes none.
pub(in crate::gro) struct Masks {
    pub(in crate::gro) store: Box<MaskStore>,
    pub(in crate::gro) layouts: [LayoutKey; MASKS],
    pub(in crate::gro) n: usize,
}

/// What `Masks` keeps out of line: the masks, and what only a new head
/// reads (so the fields the fast path reads beside them stay where they are).
pub(in crate::gro) struct MaskStore {
    pub(in crate::gro) masks: [[u8; TMPL_LEN]; MASKS],
    /// Each mask with the TCP options cleared too: what a flow's new head
    /// must share with its last one (`Held::bare_match`).
    pub(in crate::gro) bare: [[u8; TMPL_LEN]; MASKS],
    /// When each mask was last given to a new head (a count of heads).
    pub(in crate::gro) used: [u64; MASKS],
    pub(in crate::gro) heads: u64,
    /// Each known layout as `plain_key` packs it, `NOT_PLAIN` for one in a
    /// tunnel: a plain head's layout found by a compare of words
    /// (`Masks::known_plain`).
    pub(in crate::gro) plain: [u64; MASKS],
}

/// A `plain` entry no plain layout packs to (`plain_key` leaves the top
/// bits clear).
const NOT_PLAIN: u64 = u64::MAX;

/// A plain layout (offsets and IP version) packed into one word, each field
/// in bits of its own, so that two are equal exactly when their words are.
#[inline(always)]
fn plain_key(t: &Tcp) -> u64 {
    t.l3 as u64 | (t.l4 as u64) << 16 | (t.payload as u64) << 32 | (t.ipv6 as u64) << 48
}

impl Default for Masks {
    fn default() -> Masks {
        Masks {
            store: Box::new(MaskStore {
                masks: [[0; TMPL_LEN]; MASKS],
                bare: [[0; TMPL_LEN]; MASKS],
                used: [0; MASKS],
                heads: 0,
                plain: [NOT_PLAIN; MASKS],
            }),
            layouts: [(0, 0, 0, false, None); MASKS],
            n: 0,
        }
    }
}

impl Masks {
    #[inline(always)]
    pub(in crate::gro) fn get(&self, i: u8) -> &[u8; TMPL_LEN] {
        &self.store.masks[i as usize]
    }

    /// Mask `i` without the TCP options.
    #[inline(always)]
    pub(in crate::gro) fn bare(&self, i: u8) -> &[u8; TMPL_LEN] {
        &self.store.bare[i as usize]
    }

    /// The mask of `t`'s layout for a new head, made on first use, and
    /// whether it was taken from another layout (whose templates must then
    /// go off: `Gro::mask_for`). Once `MASKS` layouts are known, a new one
    /// takes the mask least recently given to a new head, so layouts seen
    /// early and never again do not keep the fast path from the rest; None
    /// (no template) for a header longer than a template, and while every
    /// mask was used in the last `MASK_AGE` heads.
    #[inline]
    pub(in crate::gro) fn of(&mut self, t: &Tcp, outer: Option<Outer>) -> Option<(u8, bool)> {
        if t.payload as usize > TMPL_LEN {
            return None;
        }
        let st = &mut *self.store;
        st.heads += 1;
        let key = (t.l3, t.l4, t.payload, t.ipv6, outer);
        if let Some(i) = self.layouts[..self.n].iter().position(|&k| k == key) {
            st.used[i] = st.heads;
            return Some((i as u8, false));
        }
        self.add(t, outer, key)
    }

    /// `of` for a layout not known yet: a mask made for it. Out of line,
    /// as it comes once per layout.
    #[cold]
    #[inline(never)]
    fn add(&mut self, t: &Tcp, outer: Option<Outer>, key: LayoutKey) -> Option<(u8, bool)> {
        let st = &mut *self.store;
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
        let m = &mut st.masks[i];
        m.fill(0);
        m[..t.payload as usize].fill(0xff);
        // What the rules let vary and the fast path checks on its own.
        for v in VARIES.iter().filter(|v| v.fast == Fast::OnItsOwn) {
            if let Some(base) = v.hdr.base(t, outer) {
                m[base + v.at.start..base + v.at.end]
                    .iter_mut()
                    .for_each(|b| *b &= !v.bits);
            }
        }
        st.bare[i] = *m;
        st.bare[i][t.l4 as usize + tcp::MIN_LEN..t.payload as usize].fill(0);
        self.layouts[i] = key;
        st.plain[i] = if outer.is_none() {
            plain_key(t)
        } else {
            NOT_PLAIN
        };
        Some((i as u8, taken))
    }

    /// `of` for a plain layout (no tunnel) already known: its mask, found
    /// by a compare of words and noted as `of` notes it; None if it is
    /// not known (`of` then makes or refuses one).
    #[inline(always)]
    pub(in crate::gro) fn known_plain(&mut self, t: &Tcp) -> Option<u8> {
        let st = &mut *self.store;
        let key = plain_key(t);
        let i = st.plain[..self.n].iter().position(|&k| k == key)?;
        st.heads += 1;
        st.used[i] = st.heads;
        Some(i as u8)
    }
}

/// What a segment is judged by against a template (`Expect::judge`):
/// the sequence number and IPv4 ID it must carry (None: any), how its
/// checksum is taken, and where its payload starts and how long a
/// full-size one is.
pub(in crate::gro) struct Judged {
    pub(in crate::gro) seq: Option<u32>,
    pub(in crate::gro) id: Option<u16>,
    pub(in crate::gro) csum: FastCsum,
    pub(in crate::gro) payload: usize,
    pub(in crate::gro) mss: usize,
}

impl Expect {
    /// Whether `pkt` is a one-buffer, full-size segment matching this
    /// template (which is on), whose header bytes are `r`, under `mask`, as `of` says; if so, its
    /// sequence number, its payload's checksum contribution and whether it
    /// carries PSH, unless it is verified and bad (None then too).
    #[inline(always)]
    pub(in crate::gro) fn judge<B: GroBuf>(
        &self,
        pkt: &B,
        r: &[u8],
        mask: &[u8; TMPL_LEN],
        of: &Judged,
    ) -> Option<(u32, Contrib, bool)> {
        match self.width() {
            Width::Short => self.judge_in::<B, SHORT_CMP>(pkt, r, mask, of),
            Width::Fixed => self.judge_in::<B, FIXED_CMP>(pkt, r, mask, of),
            Width::Whole => self.judge_in::<B, TMPL_LEN>(pkt, r, mask, of),
        }
    }

    /// What a segment this template accepts adds to its packet's checksum
    /// sum but its payload's: the template's own part (`k`), its sequence
    /// number `seq`, its TCP checksum field `csum` and its PSH flag `psh`.
    #[inline(always)]
    pub(in crate::gro) fn header_part(&self, seq: u32, csum: u16, psh: bool) -> u64 {
        // The seq added whole: a 32-bit word sums as its two 16-bit halves
        // do, since 2^16 is 1 modulo 0xffff.
        self.k + seq as u64 + csum as u64 + psh as u64 * PSH as u64
    }

    /// `judge` with a compare of `N` bytes (`width`).
    #[inline(always)]
    pub(in crate::gro) fn judge_in<B: GroBuf, const N: usize>(
        &self,
        pkt: &B,
        r: &[u8],
        mask: &[u8; TMPL_LEN],
        of: &Judged,
    ) -> Option<(u32, Contrib, bool)> {
        if pkt.len() != self.frame_len as usize || pkt.segs() != 1 {
            return None;
        }
        let b = pkt.head();
        let h: &[u8; N] = b.first_chunk()?;
        let seen = self.accepts(h, r.first_chunk()?, mask, of.seq, of.id)?;
        let seq = of.seq.unwrap_or(seen.seq);
        let psh = seen.psh;
        let x = self.header_part(seq, seen.csum, psh);
        if !of.csum.sums(self.tunnel) {
            return Some((seq, Contrib::trusted(x), psh));
        }
        // One buffer (checked above): its payload is one slice.
        let p = csum::sum(&b[of.payload..of.payload + of.mss]);
        Contrib::checked(x, p).map(|c| (seq, c, psh))
    }
}

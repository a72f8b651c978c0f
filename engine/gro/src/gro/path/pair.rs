//! A flow whose first two segments come in a row in one poll, the second
//! ending the packet (PSH, or shorter than the first): an RPC, a short
//! response. The flow is new to the table, or nothing is held at all (then
//! the flow has nothing to merge with and the table is not looked in; what
//! it may remember of the flow stays as it was).
//! Held in the table, the head would take an entry, a template and a
//! flush for one merge. Instead the pair is judged as the table's way
//! would judge it, by what the head's template would expect (the fast
//! path's rules, under the layout's mask) against the head's own header,
//! and merged as the second is taken: the same packet leaves at the same
//! point, with no table entry made or left behind.

use crate::gro::flush::gso_info;
use crate::gro::*;

/// The size of a pair's second segment, from its IP length field read at
/// its head's layout.
struct SecondSize {
    ip_len: u32,
    payload: u32,
}

impl SecondSize {
    /// The size `b`, a frame of `len` bytes, states at layout `t`: None
    /// unless the frame ends where its IP packet does (no trailer) and it
    /// carries a payload.
    #[inline(always)]
    fn of(b: &[u8], len: usize, t: &Tcp) -> Option<SecondSize> {
        let l3 = t.l3 as usize;
        let ip_len = if t.ipv6 {
            field::read16(b.get(..l3 + ipv6::HEADER_LEN)?, l3, ipv6::PAYLOAD_LEN) as u32
                + ipv6::HEADER_LEN as u32
        } else {
            field::read16(b.get(..l3 + ipv4::MIN_LEN)?, l3, ipv4::TOTAL_LEN) as u32
        };
        let headers = (t.payload - t.l3) as u32;
        let payload = ip_len.checked_sub(headers).filter(|&p| p > 0)?;
        (len == l3 + ip_len as usize).then_some(SecondSize { ip_len, payload })
    }

    /// The head's header bytes `h` (layout `t`) as a segment of this size
    /// carries them: its IP length field this size's.
    #[inline(always)]
    fn header_of(&self, h: &[u8], t: &Tcp) -> Option<[u8; TMPL_LEN]> {
        let mut r = [0u8; TMPL_LEN];
        match h.first_chunk::<TMPL_LEN>() {
            Some(all) => r = *all,
            None => short_copy(&mut r, h.get(..t.payload as usize)?),
        }
        let l3 = t.l3 as usize;
        if t.ipv6 {
            let stated = (self.ip_len as usize - ipv6::HEADER_LEN) as u16;
            field::write16(&mut r, l3, ipv6::PAYLOAD_LEN, stated);
        } else {
            field::write16(&mut r, l3, ipv4::TOTAL_LEN, self.ip_len as u16);
        }
        Some(r)
    }
}

impl<B: GroBuf> Gro<B> {
    /// What `a` (read as `f`, and as `seg`: its own fields, `Seg::own`)
    /// merged with the first packet
    /// of `rest`, the poll's packets after it, makes, and why it leaves, if
    /// that packet is the second segment of `a`'s flow and ends the
    /// packet; `a` would start a new table entry, outside a tunnel, its
    /// sums made if its checksum was judged (`sums`). The caller then hands
    /// both to `close_pair`.
    #[inline(always)]
    pub(in crate::gro) fn try_pair(
        &mut self,
        a: &B,
        f: &Fields,
        rest: &Burst<'_, B>,
        seg: &Seg,
        csum: &CsumCheck,
        sums: Option<HeadSums>,
    ) -> Option<(Merged, Flush)> {
        #[cfg(test)]
        if self.full_path_only {
            return None;
        }
        let q = rest.as_slice().first()?;
        self.pair_merged(a, f, q, seg, csum, sums)
    }

    /// What `a` and `q` merged make, and why the merged packet leaves, if
    /// `q` is the next segment of `a`'s flow in one buffer, no larger than
    /// `a`, ends the packet (PSH, or shorter: a full-size one without PSH
    /// is a bulk flow's, whose head goes to the table, where its template
    /// is kept), and passes what `a`'s template would expect of a segment
    /// of its size, within the limits.
    #[inline(always)]
    fn pair_merged(
        &mut self,
        a: &B,
        f: &Fields,
        q: &B,
        seg: &Seg,
        csum: &CsumCheck,
        sums: Option<HeadSums>,
    ) -> Option<(Merged, Flush)> {
        let t = &f.layout();
        let qb = q.head();
        let l4 = t.l4 as usize;
        let flags = *qb.get(l4 + tcp::FLAGS)?;
        let psh = flags & PSH != 0;
        // As long as the head and without PSH: a bulk flow's next segment,
        // or another flow's, neither ending a packet here.
        if !psh && q.len() == a.len() {
            return None;
        }
        // The next byte in sequence: a packet that follows a new head is
        // most often another flow's.
        if field::read32(qb.get(..l4 + tcp::MIN_LEN)?, l4, tcp::SEQ) != seg.end() {
            return None;
        }
        let size = SecondSize::of(qb, q.len(), t)?;
        if size.payload > seg.payload || seg.flags & HEAD_ONLY != 0 {
            return None;
        }
        let why = ends_after(psh, false, size.payload, seg.payload)?;
        let ip_len = t.l3_len() as u32 + t.l4_len() as u32 + t.payload_len;
        let mut head = Core::<B> {
            mss: seg.payload,
            max_ip: big::max_ip(self.cfg.max_size, t, None, a.headroom()),
            ..Core::default()
        };
        head.begin(a, ip_len, Contrib::default(), seg.id);
        if head.over_limits(size.payload, 1, self.cfg.max_frags) != 0 {
            return None;
        }
        let sums = match sums {
            Some(s) => s,
            None => HeadSums::of(f, seg, csum, a)?,
        };
        let (ip_hdr, ip_base) = ip_sums(f.header(), t, a.rx_hints().ip == CsumHint::Unknown);
        let fast = FastCsum::of(q.rx_hints(), self.cfg.csum == CsumMode::Verify)?;
        let c = self.judge_second(f, seg, q, &size, &sums, ip_hdr, fast)?;
        let c = c.shifted(seg.payload & 1 == 1);
        let m = Merged {
            t: *t,
            ip_len: ip_len + size.payload,
            flags: seg.flags | if psh { PSH } else { 0 },
            ip_base,
            pbase: sums.pbase,
            hconst: sums.hconst,
            head_seq: seg.seq,
            head_urg: seg.urg,
            psum: sums.psum.add(c),
        };
        Some((m, why))
    }

    /// Whether `q` (of `size`) passes what the template of the head read
    /// as `f` and `seg` (its sums, its IPv4 header's `ip_hdr`) would expect
    /// of a segment of its size, its checksum taken as `fast` says; if so,
    /// its payload's checksum contribution. It is judged against the head's
    /// own header as such a segment carries it: the same bytes but for the
    /// IP length and `HEAD_ONLY` flags, which the template clears (a head
    /// with them is left to the table's way).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn judge_second(
        &mut self,
        f: &Fields,
        seg: &Seg,
        q: &B,
        size: &SecondSize,
        sums: &HeadSums,
        ip_hdr: u16,
        fast: FastCsum,
    ) -> Option<Contrib> {
        let t = f.layout();
        let mask = self.plain_mask_for(&t)?;
        let mut x = Expect::empty();
        let args = TmplArgs {
            ip_hdr: if t.ipv6 {
                0
            } else {
                let total = field::read16(f.header(), t.l3 as usize, ipv4::TOTAL_LEN);
                csum::replace(ip_hdr, total, size.ip_len as u16)
            },
            outer: None,
            pbase: sums.pbase,
            hconst: sums.hconst,
            tcp_len: t.l4_len() as u32 + size.payload,
            frame_len: q.len(),
        };
        x.build(f, seg, args, Some(mask));
        if !x.on {
            return None;
        }
        let of = Judged {
            seq: Some(seg.end()),
            id: Some(IdMode::Open.next(seg.id)),
            csum: fast,
            payload: t.payload as usize,
            mss: size.payload as usize,
        };
        let mask = self.masks.get(mask);
        let (_, c, _) = if size.payload == seg.payload {
            x.judge(q, f.frame(), mask, &of)?
        } else {
            x.judge(q, &size.header_of(f.frame(), &t)?, mask, &of)?
        };
        Some(c)
    }

    /// `a` and the first packet of `rest`, judged to merge into `m` and
    /// leave (`why`, `try_pair`), merged, their headers fixed, out,
    /// counted as the table's way counts a head of `mss` payload bytes
    /// that merged once and flushed.
    #[inline(always)]
    pub(in crate::gro) fn close_pair(
        &mut self,
        a: B,
        rest: &mut Burst<'_, B>,
        m: &Merged,
        mss: u32,
        why: Flush,
        out: &mut impl FnMut(B),
    ) {
        let q = rest.next().expect("the packet judged to pair");
        self.look.take_with_current();
        // No slot to try the next segment on first.
        self.first = None;
        let mut pkt = a;
        self.stats.segments_in += 1;
        self.stats.heads_built += 1;
        self.stats.merged_segments += 1;
        pkt.append_one(q, m.t.payload as usize);
        let tso = self.cfg.out_csum == OutCsum::Pseudo;
        fix_headers(&mut pkt, m, tso);
        // Held from its first segment to its second, in one poll.
        self.stats.left(self.hist.as_deref_mut(), why, 2, 0);
        pkt.set_gso(&gso_info(&m.t, m.ip_len, mss, 2, tso));
        out(pkt);
    }
}

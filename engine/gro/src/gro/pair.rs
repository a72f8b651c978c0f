//! A flow new to the table whose first two segments come in a row in one
//! poll, the second ending the packet (PSH): an RPC, a short response.
//! Held in the table, the head would take an entry, a template and a
//! flush for one merge. Instead the pair is judged as the table's way
//! would judge it, by the template the head would build (made on the
//! stack, from the layout's mask: the fast path's rules), and merged as
//! the second is taken: the same packet leaves at the same point, with no
//! table entry made or left behind.

use super::flush::{counted_out, gso_info};
use super::*;

/// A head and what its merge with the next segment of its poll makes:
/// kept between `hold_new`, which judged the pair, and `take`, which
/// hands over that segment (`close_pair`).
pub(super) struct Pair<B> {
    pkt: B,
    m: Merged,
    /// Payload bytes of each of the two segments.
    mss: u32,
}

impl<B: GroBuf> Gro<B> {
    /// Whether `q`, the packet after `a` in its poll, is the second segment
    /// of `a`'s flow and ends the packet; `a` is a segment (layout `t`, read
    /// as `seg`) that would start a new table entry, outside a tunnel, its
    /// sums made if its checksum was judged (`sums`). If so, `a` is kept in
    /// `pair` for `close_pair`, else given back.
    #[inline(never)]
    pub(super) fn try_pair(
        &mut self,
        a: B,
        q: &B,
        t: &Tcp,
        seg: &Seg,
        csum: &CsumCheck,
        sums: Option<HeadSums>,
    ) -> Option<B> {
        #[cfg(test)]
        if self.full_path_only {
            return Some(a);
        }
        match self.pair_merged(&a, q, t, seg, csum, sums) {
            Some(m) => {
                self.pair = Some(Pair {
                    pkt: a,
                    m,
                    mss: seg.payload,
                });
                None
            }
            None => Some(a),
        }
    }

    /// What `a` and `q` merged make, if `q` is the next full-size segment
    /// of `a`'s flow, carries PSH (a second segment without it is a bulk
    /// flow's: its head goes to the table, where its template is kept), and
    /// passes the template `a` would build, within the limits.
    #[inline(always)]
    fn pair_merged(
        &mut self,
        a: &B,
        q: &B,
        t: &Tcp,
        seg: &Seg,
        csum: &CsumCheck,
        sums: Option<HeadSums>,
    ) -> Option<Merged> {
        if q.head().get(t.l4 as usize + tcp::FLAGS)? & PSH == 0 {
            return None;
        }
        let fast = FastCsum::of(q.rx_hints(), self.cfg.csum == CsumMode::Verify)?;
        let ip_len = t.l3_len() as u32 + t.l4_len() as u32 + t.payload_len;
        let head = Core::<B> {
            mss: seg.payload,
            frags: seg.frags,
            ip_len,
            max_ip: big::max_ip(self.cfg.max_size, t, None, a.headroom()),
            ..Core::default()
        };
        if head.full(self.cfg.max_frags) {
            return None;
        }
        let f = Fields::new(a.head(), *t);
        let sums = match sums {
            Some(s) => s,
            None => HeadSums::of(&f, seg, csum, a)?,
        };
        let mask = self.mask_for(t, None)?;
        let (ip_hdr, ip_base) = ip_sums(f.header(), t);
        let mut tm = Template::off();
        let args = TmplArgs {
            ip_hdr,
            outer: None,
            pbase: sums.pbase,
            hconst: sums.hconst,
            tcp_len: t.l4_len() as u32 + t.payload_len,
            frame_len: a.len(),
        };
        tm.build(&f, seg, args, Some(mask));
        if !tm.on {
            return None;
        }
        let of = Judged {
            seq: Some(seg.seq.wrapping_add(seg.payload)),
            id: Some(IdMode::Open.next(seg.id)),
            csum: fast,
            payload: t.payload as usize,
            mss: seg.payload as usize,
        };
        let (_, c, _) = tm.judge(q, self.masks.get(mask), &of)?;
        let c = c.shifted(seg.payload & 1 == 1);
        Some(Merged {
            t: *t,
            ip_len: ip_len + seg.payload,
            flags: seg.flags | PSH,
            ip_base,
            pbase: sums.pbase,
            hconst: sums.hconst,
            head_seq: seg.seq,
            head_urg: seg.urg,
            psum: Contrib {
                pos: sums.psum.pos + c.pos,
                neg: sums.psum.neg + c.neg,
            },
        })
    }

    /// The pair `try_pair` judged, given its second segment `q`: merged, its
    /// headers fixed, out (PSH ends it), counted as the table's way counts
    /// a head that merged once and flushed.
    pub(super) fn close_pair(&mut self, p: Pair<B>, q: B, out: &mut impl FnMut(B)) {
        let Pair { mut pkt, m, mss } = p;
        self.stats.segments_in += 1;
        self.stats.heads_built += 1;
        self.stats.merged_segments += 1;
        pkt.append_one(q, m.t.payload as usize);
        let tso = self.cfg.out_csum == OutCsum::Pseudo;
        fix_headers(&mut pkt, &m, tso);
        counted_out(&mut self.stats, self.hist.as_deref_mut(), Flush::Psh, 2);
        if let Some(g) = self.hist.as_deref_mut() {
            // Held from its first segment to its second, in one poll.
            g.hold.record(0);
        }
        pkt.set_gso(&gso_info(&m.t, m.ip_len, mss, 2, tso));
        out(pkt);
    }
}

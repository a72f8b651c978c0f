//! What a held packet is made of past its first segment: the checksum
//! sums and template a new head makes once a segment comes to merge
//! (`finish_head`), the compare mask it takes, and the merge itself.

use crate::gro::*;

impl<B: GroBuf> Gro<B> {
    /// Makes what a merge into the head held in `s` needs, and what the
    /// fast path compares with: the head's checksum sums, unless they were
    /// made as its checksum was checked (`CsumCheck::judged_now`); its
    /// IPv4 header sum; its template. Out of line: once per held flow.
    #[inline(never)]
    pub(in crate::gro) fn finish_head(&mut self, s: u16, verify: bool) {
        let (t, outer) = {
            let h = self.table.get(s);
            (h.core.t, h.outer)
        };
        let mask = self.mask_for(&t, outer);
        let waiting = self.has_waiting(s);
        let h = self.table.get_mut(s);
        let pkt = h.core.pkt.take().expect("a live entry holds its packet");
        let f = Fields::new(pkt.head(), t);
        let mut seg = Seg::read(&f, h.core.frags);
        seg.outer_id = h.o_last_id;
        let tcp_len = t.l4_len() as u32 + t.payload_len;
        let csum = CsumCheck::of(&t, outer.is_some(), pkt.rx_hints().l4, verify);
        if !csum.judged_now() {
            let sums =
                HeadSums::of(&f, &seg, &csum, &pkt).expect("trusted checksums are taken as right");
            h.base.pbase = sums.pbase;
            h.hconst = sums.hconst;
            h.core.psum = sums.psum;
        }
        let ip_hdr;
        let summed = pkt.rx_hints().ip == CsumHint::Unknown;
        (ip_hdr, h.base.ip_base) = ip_sums(f.header(), &t, summed);
        h.tmpl.build(
            &f,
            &seg,
            TmplArgs {
                ip_hdr,
                pbase: h.base.pbase,
                hconst: h.hconst,
                tcp_len,
                frame_len: pkt.len(),
                outer,
            },
            mask,
        );
        // The fast path never merges into a flow whose segments wait
        // ahead of a gap but through the reorder window's own ways.
        if waiting {
            h.tmpl.pause();
        }
        h.finished = true;
        h.core.pkt = Some(pkt);
    }

    /// The mask for a new head of layout `t`; when it was taken from
    /// another layout, every template of that one (held or remembered
    /// flows) goes off first: it would compare under the wrong mask.
    #[inline(always)]
    pub(in crate::gro) fn mask_for(
        &mut self,
        t: &Tcp,
        outer: Option<crate::wire::Outer>,
    ) -> Option<u8> {
        let (m, taken) = self.masks.of(t, outer)?;
        if taken {
            self.table.for_each_entry(|e| {
                if e.tmpl.mask == m {
                    e.tmpl.off();
                }
            });
        }
        Some(m)
    }

    /// `mask_for` a plain layout (no tunnel): a known one found first by
    /// `Masks::known_plain`, which gives no mask away.
    #[inline(always)]
    pub(in crate::gro) fn plain_mask_for(&mut self, t: &Tcp) -> Option<u8> {
        match self.masks.known_plain(t) {
            Some(m) => Some(m),
            None => self.new_plain_mask(t),
        }
    }

    /// `mask_for` a plain layout not known yet: out of line, as it comes
    /// once per layout.
    #[cold]
    #[inline(never)]
    fn new_plain_mask(&mut self, t: &Tcp) -> Option<u8> {
        self.mask_for(t, None)
    }

    /// Appends a checked segment to its held packet; flushes on PSH, FIN or
    /// a short segment.
    #[inline(always)]
    pub(in crate::gro) fn merge(
        &mut self,
        s: u16,
        pkt: B,
        seg: &Seg,
        psum: Contrib,
        out: &mut impl FnMut(B),
    ) {
        self.went_to(s);
        let h = self.table.get_mut(s);
        h.core.append(pkt, seg.payload, seg.frags, seg.id, psum);
        h.next_seq = h.next_seq.wrapping_add(seg.payload);
        h.next_id = h.core.id_mode.next(h.core.last_id) as u32;
        h.flags_or |= seg.flags & ENDING;
        if h.outer.is_some() {
            h.o_id_mode = h.o_id_mode.after(h.o_last_id, seg.outer_id);
            h.o_last_id = seg.outer_id;
        }
        self.stats.merged_segments += 1;
        let (psh, fin) = (seg.flags & PSH != 0, seg.flags & FIN != 0);
        if let Some(why) = ends_after(psh, fin, seg.payload, h.core.mss) {
            self.flush_slot(s, why, out);
        }
    }
}

//! What a held packet is made of past its first segment: the checksum
//! sums and template a new head makes once a segment comes to merge
//! (`finish_head`), the compare mask it takes, and the merge itself.

use super::*;

impl<B: GroBuf> Gro<B> {
    /// Makes what a merge into the head held in `s` needs, and what the
    /// fast path compares with: the head's checksum sums, unless they were
    /// made as its checksum was checked (`CsumCheck::judged_now`); its
    /// IPv4 header sum; its template. Out of line: once per held flow.
    #[inline(never)]
    pub(super) fn finish_head(&mut self, s: u16, verify: bool) {
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
            h.base.pbase = f.pseudo_base();
            h.hconst = header_const(&f, &seg);
            let psum = csum
                .payload_sum(&pkt, h.base.pbase, seg.var_sum(h.hconst), seg.csum)
                .expect("trusted checksums are taken as right");
            h.core.psum_pos = psum.pos;
            h.core.psum_neg = psum.neg;
        }
        let b = f.header();
        let ip_hdr = if t.ipv6 {
            0
        } else {
            let l3 = t.l3 as usize;
            let ip_hdr = csum::sum(&b[l3..t.l4 as usize]);
            let total = field::read16(b, l3, ipv4::TOTAL_LEN);
            let field = field::read16(b, l3, ipv4::CHECKSUM);
            h.base.ip_base = csum::sub(csum::sub(ip_hdr, total), field);
            ip_hdr
        };
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
        // The fast path never touches a flow whose segments wait ahead
        // of a gap (the reorder window's).
        if waiting {
            h.tmpl.on = false;
        }
        h.finished = true;
        h.core.pkt = Some(pkt);
    }

    /// The mask for a new head of layout `t`; when it was taken from
    /// another layout, every template of that one (held or remembered
    /// flows) goes off first: it would compare under the wrong mask.
    #[inline(always)]
    fn mask_for(&mut self, t: &Tcp, outer: Option<crate::wire::Outer>) -> Option<u8> {
        let (m, taken) = self.masks.of(t, outer)?;
        if taken {
            self.table.for_each_entry(|e| {
                if e.tmpl.mask == m {
                    e.tmpl.on = false;
                }
            });
        }
        Some(m)
    }

    /// Appends a checked segment to its held packet; flushes on PSH, FIN or
    /// a short segment.
    #[inline(always)]
    pub(super) fn merge(
        &mut self,
        s: u16,
        pkt: B,
        seg: &Seg,
        psum: Contrib,
        out: &mut impl FnMut(B),
    ) {
        self.went_to(s);
        let h = self.table.get_mut(s);
        if let Some(held) = h.core.pkt.as_mut() {
            held.append(pkt, h.core.t.payload as usize);
        }
        let c = psum.shifted(h.core.payload_len & 1 == 1);
        h.core.psum_pos += c.pos;
        h.core.psum_neg += c.neg;
        h.core.payload_len += seg.payload;
        h.core.ip_len += seg.payload;
        h.next_seq = h.next_seq.wrapping_add(seg.payload);
        h.core.segs += 1;
        h.core.frags += seg.frags;
        if !h.core.t.ipv6 {
            h.core.id_mode = h.core.id_mode.after(h.core.last_id, seg.id);
        }
        h.core.last_id = seg.id;
        h.flags_or |= seg.flags & (PSH | FIN);
        if h.outer.is_some() {
            h.o_id_mode = h.o_id_mode.after(h.o_last_id, seg.outer_id);
            h.o_last_id = seg.outer_id;
        }
        h.next_id = match h.core.id_mode {
            IdMode::Fixed => h.core.last_id,
            _ => h.core.last_id.wrapping_add(1),
        } as u32;
        let short = seg.payload < h.core.mss;
        self.stats.merged_segments += 1;
        if seg.flags & PSH != 0 {
            self.flush_slot(s, Flush::Psh, out);
        } else if seg.flags & FIN != 0 {
            self.flush_slot(s, Flush::Fin, out);
        } else if short {
            self.flush_slot(s, Flush::ShortSegment, out);
        }
    }
}

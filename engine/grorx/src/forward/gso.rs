//! Segmentation of a merged packet for the TX port: whole to a virtio peer,
//! TSO, or software GSO (zero-copy where the chain allows, copied otherwise).

use super::*;
use crate::wire::field::{self, ipv4, ipv6, tcp, udp};

impl Forwarder {
    /// Hands a merged packet whole to a virtio peer: the header says how to
    /// segment it, the TCP checksum is partial (pseudo-header with length).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and hands over: it is
    /// queued for transmit.
    pub(super) unsafe fn virtio_gso(
        &mut self,
        m: *mut rte_mbuf,
        h: &mut [u8; MAX_HDR],
        lay: &Layout,
    ) {
        let hl = lay.hdr_len();
        let tcp = lay.tcp();
        // SAFETY: the caller guarantees `m` is a valid chain head.
        let tcp_len = unsafe { mb::pkt_len(m) } as usize - tcp;
        let inner_hdr = (lay.l2 + lay.l3 + lay.l4) as u16;
        let mut gso_type = if lay.ipv6 {
            VIRTIO_NET_HDR_GSO_TCPV6
        } else {
            VIRTIO_NET_HDR_GSO_TCPV4
        };
        if h[tcp + tcp::FLAGS] & TCP_CWR != 0 {
            gso_type |= VIRTIO_NET_HDR_GSO_ECN;
        }
        let v = &mut h[..VIRTIO_NET_HDR_LEN as usize];
        let le16 = |v: &mut [u8], f: field::Field, x: usize| {
            v[f].copy_from_slice(&(x as u16).to_le_bytes());
        };
        v[virtio_net::FLAGS] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        v[virtio_net::GSO_TYPE] = gso_type;
        le16(v, virtio_net::HDR_LEN, inner_hdr as usize);
        le16(v, virtio_net::GSO_SIZE, lay.mss);
        le16(v, virtio_net::CSUM_START, lay.l2 + lay.l3);
        le16(v, virtio_net::CSUM_OFFSET, tcp::CHECKSUM.start);
        le16(v, virtio_net::NUM_BUFFERS, 0);
        let p = pseudo(h, lay, tcp_len);
        field::write16(h, tcp, tcp::CHECKSUM, p);
        // SAFETY: the caller hands us `m`, a valid chain we now own and may
        // write; scatter stays within its data.
        unsafe {
            scatter(m, 0, &h[..hl]);
            clear_tx_flags(m);
        }
        self.stats.virtio_gso_packets += 1;
        self.queue(m);
    }

    /// Hands a merged packet to the port's TSO (DPDK's contract: TCP
    /// checksum = pseudo-header sum without the length, IPv4 checksum 0).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and hands over: it is
    /// queued for transmit.
    pub(super) unsafe fn tso(
        &mut self,
        m: *mut rte_mbuf,
        h: &mut [u8; MAX_HDR],
        lay: &Layout,
        sport: u16,
    ) {
        let hl = lay.hdr_len();
        let (ip, tcp) = (lay.ip(), lay.tcp());
        let (mut flags, mut word) = tso_request(lay);
        if !lay.ipv6 {
            field::write16(h, ip, ipv4::CHECKSUM, 0);
        }
        let p = pseudo(h, lay, 0);
        field::write16(h, tcp, tcp::CHECKSUM, p);
        if lay.elen > 0 {
            let id = self.next_outer_id();
            // SAFETY: the caller guarantees `m` is a valid chain head.
            let total = unsafe { mb::pkt_len(m) } as usize;
            write_outer(&mut h[..lay.elen], &self.outer, total, id, sport, false);
            flags |= RTE_MBUF_F_TX_OUTER_IPV4
                | RTE_MBUF_F_TX_OUTER_IP_CKSUM
                | RTE_MBUF_F_TX_TUNNEL_VXLAN;
            // Tunnel layout: l2_len = outer UDP + VXLAN + inner L2.
            word = mb::tx_offload_word(
                16 + lay.l2 as u64,
                lay.l3 as u64,
                lay.l4 as u64,
                lay.mss as u64,
            ) | outer_lens_word(20, 14);
        }
        // SAFETY: the caller hands us `m`, a valid chain we now own and may
        // write; scatter stays within its data.
        unsafe {
            scatter(m, 0, &h[..hl]);
            set_tx_request(m, flags, word);
        }
        self.stats.tso_packets += 1;
        self.needs_prepare = true;
        self.queue(m);
    }

    /// Software GSO: the merged chain `m` (headers `tmpl`) back into
    /// MSS-sized segments, in place where the chain allows; or, with
    /// `lay.per` above 1, into TSO pieces of that many segments (a BIG TCP
    /// packet for a port whose TSO takes 64 KiB).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and hands over: its
    /// segments are queued for transmit or freed.
    pub(super) unsafe fn gso(
        &mut self,
        m: *mut rte_mbuf,
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        sport: u16,
        reserve: usize,
    ) {
        // SAFETY: the caller hands us the chain `m`. Each segment's chain is
        // cut off (its last `next` nulled) before it is queued, the cursor owns
        // what follows, and the helpers stay within each buffer's data.
        unsafe {
            let hl = lay.hdr_len();
            let payload = mb::pkt_len(m) as usize - hl;
            let step = lay.mss * lay.per;
            let nseg = payload.div_ceil(step);
            self.stats.gso_packets += 1;
            let mut hdr = [0u8; MAX_HDR];
            // Segment 0 keeps the head (and whatever prepend chained in front).
            let len0 = step.min(payload);
            let (x, cnt, acc) = walk(m, hl + len0);
            let mut cur;
            if acc == hl + len0 && !x.is_null() {
                cur = Cursor {
                    m: (*x).next,
                    off: 0,
                };
                (*x).next = std::ptr::null_mut();
                (*m).nb_segs = cnt;
                (*m).pkt_len = (hl + len0) as u32;
                let ps = if len0 > lay.mss {
                    0
                } else {
                    chain_sum(m, hl, len0)
                };
                self.seg_header(&mut hdr, tmpl, lay, 0, len0, nseg == 1, ps, sport);
                scatter(m, 0, &hdr[..hl]);
                self.mark_out(m, lay, len0);
                self.queue(m);
            } else {
                cur = Cursor { m, off: hl };
                if !self.copy_segment(&mut cur, tmpl, lay, 0, len0, nseg == 1, sport) {
                    return free_cursor(&mut cur);
                }
            }
            for k in 1..nseg {
                let seglen = step.min(payload - k * step);
                let last = k + 1 == nseg;
                normalize(&mut cur);
                if cur.m.is_null() {
                    self.stats.malformed += 1;
                    return;
                }
                if cur.off == 0 {
                    let (x, cnt, acc) = walk(cur.m, seglen);
                    if acc == seglen && !x.is_null() {
                        let first = cur.m;
                        cur.m = (*x).next;
                        (*x).next = std::ptr::null_mut();
                        let ps = if seglen > lay.mss {
                            0
                        } else {
                            chain_sum(first, 0, seglen)
                        };
                        self.seg_header(&mut hdr, tmpl, lay, k, seglen, last, ps, sport);
                        self.emit_aligned(first, cnt, &hdr[..hl], lay, seglen, reserve);
                        continue;
                    }
                }
                if !self.copy_segment(&mut cur, tmpl, lay, k, seglen, last, sport) {
                    return free_cursor(&mut cur);
                }
            }
            free_cursor(&mut cur);
        }
    }

    /// A segment whose payload is exactly the chain `first` (`cnt` buffers):
    /// headers written in front of it (a pointer move) or, when the room is
    /// short, in a header mbuf chained in front (a headroom miss).
    ///
    /// # Safety
    /// `first` is a valid chain of `cnt` mbufs the caller owns, that nothing
    /// links to, and hands over: it is queued for transmit or freed.
    /// `hdr.len() <= MAX_HDR`.
    pub(super) unsafe fn emit_aligned(
        &mut self,
        first: *mut rte_mbuf,
        cnt: u16,
        hdr: &[u8],
        lay: &Layout,
        seglen: usize,
        reserve: usize,
    ) {
        let hl = hdr.len();
        const NOT_DIRECT: u64 = RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL;
        // SAFETY: the caller hands us the detached chain `first`. Its headroom
        // is written only when we are its sole user (refcnt 1, direct buffer)
        // and it has `hl` bytes; else a fresh header mbuf, checked non-null,
        // takes the `hl` <= MAX_HDR bytes (the caller's contract), which its
        // data room holds (checked in `new`).
        unsafe {
            let writable = mb::refcnt(first) == 1 && mb::ol_flags(first) & NOT_DIRECT == 0;
            let room = if writable {
                (mb::headroom(first) as usize).saturating_sub(reserve)
            } else {
                0
            };
            let seg = if room >= hl {
                (*first).data_off -= hl as u16;
                (*first).data_len += hl as u16;
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(first), hl);
                (*first).nb_segs = cnt;
                (*first).pkt_len = (hl + seglen) as u32;
                first
            } else {
                self.stats.headroom_miss += 1;
                let h = mbuf::alloc(self.pool.as_ptr());
                if h.is_null() {
                    self.stats.no_mbuf += 1;
                    return mbuf::free(first);
                }
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(h), hl);
                (*h).data_len = hl as u16;
                (*h).pkt_len = (hl + seglen) as u32;
                (*h).nb_segs = cnt + 1;
                (*h).next = first;
                (*h).port = (*first).port;
                h
            };
            self.mark_out(seg, lay, seglen);
            self.queue(seg);
        }
    }

    /// A segment copied from the cursor into fresh mbufs (a chain whose
    /// payload does not fall on buffer boundaries). False if the chain ran
    /// short (the rest is dropped, counted malformed).
    ///
    /// # Safety
    /// `cur.m` is null or a valid chain the caller owns from there on (no one
    /// else uses those segments), as `take` requires.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn copy_segment(
        &mut self,
        cur: &mut Cursor,
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        k: usize,
        seglen: usize,
        last: bool,
        sport: u16,
    ) -> bool {
        let hl = lay.hdr_len();
        let cap = (self.pool.data_room() as usize) - RTE_PKTMBUF_HEADROOM as usize;
        let need = (hl + seglen).div_ceil(cap);
        let mut d = [std::ptr::null_mut::<rte_mbuf>(); MAX_COPY_SEGS];
        // SAFETY: the caller's contract on `cur` is take's. The `need` fresh
        // mbufs are ours; each copy fits the target's tailroom, and `need`
        // buffers of `cap` bytes hold the `hl + seglen` bytes.
        unsafe {
            let ok = need <= MAX_COPY_SEGS && mbuf::alloc_bulk(self.pool.as_ptr(), &mut d[..need]);
            if !ok {
                self.stats.no_mbuf += 1;
                // Skip the segment's payload.
                return take(cur, seglen, |_| {}) == seglen;
            }
            let d = &mut d[..need];
            (*d[0]).data_len = hl as u16;
            let (mut i, mut sum) = (0usize, csum::Chained::default());
            let got = take(cur, seglen, |mut piece: &[u8]| {
                sum.add(piece);
                while !piece.is_empty() {
                    let dm = d[i];
                    let room = mb::tailroom(dm) as usize;
                    if room == 0 {
                        i += 1;
                        continue;
                    }
                    let n = room.min(piece.len());
                    std::ptr::copy_nonoverlapping(
                        piece.as_ptr(),
                        mb::mtod(dm).add(mb::data_len(dm) as usize),
                        n,
                    );
                    (*dm).data_len += n as u16;
                    piece = &piece[n..];
                }
            });
            if got < seglen {
                mbuf::free_bulk(d);
                self.stats.malformed += 1;
                return false;
            }
            for j in 1..need {
                (*d[j - 1]).next = d[j];
            }
            let h = d[0];
            (*h).nb_segs = need as u16;
            (*h).pkt_len = (hl + seglen) as u32;
            let mut hdr = [0u8; MAX_HDR];
            self.seg_header(&mut hdr, tmpl, lay, k, seglen, last, sum.value(), sport);
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(h), hl);
            self.stats.copied_segments += 1;
            self.mark_out(h, lay, seglen);
            self.queue(h);
            true
        }
    }

    /// The TX offload request of a packet out of software segmentation,
    /// and its count: a TSO piece (more than one segment's payload) asks
    /// the port to segment it; a segment asks for nothing.
    ///
    /// # Safety
    /// `m` points to a live mbuf the caller may write.
    unsafe fn mark_out(&mut self, m: *mut rte_mbuf, lay: &Layout, seglen: usize) {
        if seglen > lay.mss {
            let (flags, word) = tso_request(lay);
            // SAFETY: the caller's contract.
            unsafe { set_tx_request(m, flags, word) };
            self.stats.tso_packets += 1;
            self.needs_prepare = true;
        } else {
            // SAFETY: the caller's contract.
            unsafe { clear_tx_flags(m) };
            self.stats.gso_segments += 1;
        }
    }

    /// Segment `k`'s headers from the merged packet's (`tmpl`), for a payload
    /// of `seglen` bytes whose one's-complement sum is `psum`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn seg_header(
        &mut self,
        out: &mut [u8; MAX_HDR],
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        k: usize,
        seglen: usize,
        last: bool,
        psum: u16,
        sport: u16,
    ) {
        let hl = lay.hdr_len();
        out[..hl].copy_from_slice(&tmpl[..hl]);
        if lay.elen == VXLAN_ENCAP_LEN as usize {
            let id = self.next_outer_id();
            write_outer(
                &mut out[..lay.elen],
                &self.outer,
                hl + seglen,
                id,
                sport,
                true,
            );
        }
        let (ip, tcp, l3) = (lay.ip(), lay.tcp(), lay.l3);
        let tcp_len = lay.l4 + seglen;
        // A TSO piece: the port fills in each segment's checksums (DPDK's
        // contract: the IPv4 one 0, TCP's the pseudo-header sum without
        // the length).
        let tso_piece = seglen > lay.mss;
        // The packet's first segment: `k` counts packets out, each of
        // `lay.per` segments.
        let first = k * lay.per;
        // The L4 header: TCP's sequence number and flags, or UDP's length;
        // then either's checksum.
        if lay.ipv6 {
            let plen = (l3 - ipv6::HEADER_LEN + tcp_len) as u16;
            field::write16(out, ip, ipv6::PAYLOAD_LEN, plen);
        } else {
            let id0 = field::read16(tmpl, ip, ipv4::ID);
            field::write16(out, ip, ipv4::TOTAL_LEN, (l3 + tcp_len) as u16);
            field::write16(out, ip, ipv4::ID, id0.wrapping_add(first as u16));
            field::write16(out, ip, ipv4::CHECKSUM, 0);
            if !tso_piece {
                let c = csum::ipv4_header(&out[ip..ip + l3]);
                field::write16(out, ip, ipv4::CHECKSUM, c);
            }
        }
        let csum_at = if lay.udp {
            field::write16(out, tcp, udp::LEN, tcp_len as u16);
            udp::CHECKSUM
        } else {
            let seq0 = field::read32(tmpl, tcp, tcp::SEQ);
            let seq = seq0.wrapping_add((first * lay.mss) as u32);
            field::write32(out, tcp, tcp::SEQ, seq);
            let mut f = tmpl[tcp + tcp::FLAGS];
            if k > 0 {
                f &= !TCP_CWR;
            }
            if !last {
                f &= !(TCP_PSH | TCP_FIN);
            }
            out[tcp + tcp::FLAGS] = f;
            tcp::CHECKSUM
        };
        if tso_piece {
            let p = pseudo(out, lay, 0);
            field::write16(out, tcp, tcp::CHECKSUM, p);
            return;
        }
        field::write16(out, tcp, csum_at.clone(), 0);
        let s = csum::add(
            csum::add(
                pseudo(out, lay, tcp_len),
                csum::sum(&out[tcp..tcp + lay.l4]),
            ),
            psum,
        );
        let c = match csum::finish(s) {
            // 0 means "no checksum" in UDP: a computed 0 is sent as 0xffff.
            0 if lay.udp => 0xffff,
            c => c,
        };
        field::write16(out, tcp, csum_at, c);
        if let Some(o) = lay.outer {
            let inner_pseudo = pseudo(out, lay, tcp_len);
            seg_outer(out, lay.elen, &o, k, hl + seglen, tcp, inner_pseudo);
        }
    }
}

/// What a TSO packet without encapsulation asks of the port: its
/// `ol_flags` and its `tx_offload` word (header lengths and the MSS).
fn tso_request(lay: &Layout) -> (u64, u64) {
    let ip = if lay.ipv6 {
        RTE_MBUF_F_TX_IPV6
    } else {
        RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM
    };
    let word = mb::tx_offload_word(lay.l2 as u64, lay.l3 as u64, lay.l4 as u64, lay.mss as u64);
    (RTE_MBUF_F_TX_TCP_SEG | ip, word)
}

/// Replaces `m`'s TX offload request with `flags` and `word`.
///
/// # Safety
/// `m` points to a live mbuf the caller may write.
unsafe fn set_tx_request(m: *mut rte_mbuf, flags: u64, word: u64) {
    // SAFETY: the caller guarantees `m` is a live mbuf it may write.
    unsafe {
        (*m).ol_flags = ((*m).ol_flags & !RTE_MBUF_F_TX_OFFLOAD_MASK) | flags;
        (*m).__bindgen_anon_3.tx_offload = word;
    }
}

/// Segment `k`'s outer headers of a tunnel (`o`, after `elen` bytes of the
/// forwarder's own encapsulation), for a segment of `total` bytes whose
/// TCP header at `tcp` has its final checksum: the outer IPv4 ID counting
/// up from the merged packet's unless it stayed fixed, then the lengths and
/// checksums (`wire::fix_outer_headers`; `inner_pseudo` is the inner
/// segment's pseudo-header sum).
fn seg_outer(
    out: &mut [u8; MAX_HDR],
    elen: usize,
    o: &OuterLayout,
    k: usize,
    total: usize,
    tcp: usize,
    inner_pseudo: u16,
) {
    let (l3, l4) = (elen + o.l3, elen + o.l4);
    if !o.ipv6 && !o.id_fixed {
        let id0 = field::read16(out, l3, ipv4::ID);
        field::write16(out, l3, ipv4::ID, id0.wrapping_add(k as u16));
    }
    crate::wire::fix_outer_headers(out, l3, l4, o.ipv6, total, tcp, inner_pseudo);
}

/// The L4 (TCP or UDP, as `lay` says) pseudo-header sum for an L4 length
/// (addresses from `h`).
#[inline]
pub(super) fn pseudo(h: &[u8], lay: &Layout, tcp_len: usize) -> u16 {
    let ip = lay.ip();
    let addrs = if lay.ipv6 {
        &h[field::at(ip, ipv6::ADDRS)]
    } else {
        &h[field::at(ip, ipv4::ADDRS)]
    };
    let proto = if lay.udp {
        crate::wire::IPPROTO_UDP
    } else {
        crate::wire::IPPROTO_TCP
    };
    csum::pseudo(addrs, proto, tcp_len as u32)
}

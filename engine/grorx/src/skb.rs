//! The skb: grorx's packet, built in place in the head mbuf's private area
//! (the build_skb lesson, seed 003): no separate allocation, no header copy.
//!
//! An `Skb` owns an mbuf chain. Its metadata (`SkbMeta`) sits in the private
//! area of the head mbuf: the tail segment (O(1) append), buffers in the chain,
//! truesize (buffer bytes pinned, not payload bytes), usable headroom, and the
//! layout GRO leaves it with (header lengths, segment size and count). Frags
//! are the following mbufs, each a view of payload only (headers trimmed by
//! moving `data_off`). `copy` mode exists only for the build_skb experiment:
//! the head is a separate allocation from its own pool and the headers are
//! copied into it, as drivers did before build_skb.

use crate::dpdk::mbuf::{self, field as mb, flags::*, rte_mbuf, rte_mempool};
use crate::dpdk::mempool::Mempool;
use crate::gro::{CsumHint, GroBuf, GsoInfo, RxHints};
use std::ptr::NonNull;

/// The skb's metadata, in the head mbuf's private area.
#[doc(hidden)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SkbMeta {
    /// Last segment of the chain.
    pub tail: *mut rte_mbuf,
    /// Bytes of buffer this packet pins (mbuf + private area + data room, per buffer).
    pub truesize: u32,
    /// Headroom a prepend may use (`RunOptions::skb.headroom`, at most what the head has).
    pub headroom: u16,
    /// Payload bytes per original segment (0: GRO never held the packet).
    pub gso_size: u16,
    /// Segments merged into the packet (1: not merged).
    pub gso_segs: u16,
    /// Ethernet header bytes, VLAN tags included (0: GRO never held the
    /// packet); in a tunnel, from the outer UDP header to the inner IP
    /// header (DPDK's tunnel layout).
    pub l2_len: u16,
    /// IP header bytes.
    pub l3_len: u16,
    /// TCP header bytes, options included.
    pub l4_len: u16,
    /// `SKB_COPIED_HEAD`, `SKB_GSO_UDP`, `SKB_GSO_OUTER_FIXEDID`.
    pub flags: u16,
    /// Inside a tunnel: the outer Ethernet (with tags) and IP header bytes
    /// (0 outside one).
    pub outer_l2_len: u8,
    pub outer_l3_len: u8,
}

/// `SkbMeta::flags`: the head was copied from the frame (copy mode).
#[doc(hidden)]
pub const SKB_COPIED_HEAD: u16 = 1;

/// `SkbMeta::flags`: the merged packet is UDP datagrams (`gso_size` bytes
/// of payload each; `l4_len` is the UDP header's 8), else TCP segments.
#[doc(hidden)]
pub const SKB_GSO_UDP: u16 = 2;

/// `SkbMeta::flags`: a tunnelled packet whose outer IPv4 ID stayed the same
/// from segment to segment (segmentation repeats it).
#[doc(hidden)]
pub const SKB_GSO_OUTER_FIXEDID: u16 = 4;

/// The private area every pool must reserve for the skb.
pub const PRIV_SIZE: u16 = {
    let n = std::mem::size_of::<SkbMeta>();
    (n.div_ceil(8) * 8) as u16
};

const _: () = assert!(
    std::mem::size_of::<SkbMeta>() <= 64,
    "the skb fits one cache line"
);

/// How skbs are built (`RunOptions::skb.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SkbMode {
    /// Built in place in the received buffer (the default).
    #[default]
    Build,
    /// A separate head from its own pool, headers copied (for the experiment).
    Copy,
}

/// What building an skb needs to know.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct SkbConf {
    /// Built in place or with a copied head.
    pub mode: SkbMode,
    /// Usable headroom (at most what the PMD left: RTE_PKTMBUF_HEADROOM).
    pub headroom: u16,
    /// Bytes one buffer of the RX pool pins.
    pub buf_truesize: u32,
    /// The head pool (copy mode).
    pub head_pool: *mut rte_mempool,
    /// Bytes one buffer of the head pool pins.
    pub head_truesize: u32,
    /// Bytes copy mode copies from a frame that is not TCP (a driver's
    /// copy-break); TCP frames get exactly their headers.
    pub copy_len: u16,
}

// SAFETY: the pool pointer is used only by the lcore that owns this config.
unsafe impl Send for SkbConf {}

/// Counters of the skb layer, per queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SkbStats {
    /// Prepends that did not fit the headroom (a header mbuf was chained).
    pub headroom_miss: u64,
    /// Copy-mode heads that could not be allocated (the frame went on as built).
    pub head_alloc_fail: u64,
    /// Received chains whose lengths did not hold (`Skb::build_checked`):
    /// freed before GRO saw them.
    pub malformed: u64,
}

/// An owned packet: an mbuf chain with its skb in the head's private area.
#[repr(transparent)]
pub struct Skb(NonNull<rte_mbuf>);

// GRO's table entry is laid out for a packet handle of one pointer.
const _: () = assert!(std::mem::size_of::<Option<Skb>>() == std::mem::size_of::<usize>());

// SAFETY: unique ownership of the chain; it may move between lcores.
unsafe impl Send for Skb {}

/// Bytes a pool's buffer pins: mbuf header, private area and data room.
pub fn truesize_of(pool: &Mempool) -> u32 {
    // SAFETY: reading a live pool's element size.
    unsafe { (*pool.as_ptr()).elt_size }
}

impl Skb {
    /// Builds the skb in place around a received mbuf chain.
    ///
    /// # Safety
    /// `m` is a valid chain head the caller owns and gives up, whose lengths
    /// hold (`nb_segs` segments linked, `pkt_len` the sum of their
    /// `data_len`s, each segment's data inside its buffer: what
    /// `build_checked` checks of a chain a driver handed over); its pool has
    /// a private area of at least `PRIV_SIZE` bytes. In copy mode,
    /// `conf.head_pool` is a valid mbuf pool with such a private area too.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn build(m: *mut rte_mbuf, conf: &SkbConf, stats: &mut SkbStats) -> Skb {
        // SAFETY: the caller's contract is build_with_tail's; the last
        // segment is found by walking the chain it owns.
        unsafe {
            let tail = if (*m).nb_segs == 1 { m } else { last_seg(m) };
            Self::build_with_tail(m, tail, conf, stats)
        }
    }

    /// `build` for a chain a driver handed over: its lengths are checked
    /// first (`nb_segs` segments linked, their `data_len`s adding up to
    /// `pkt_len`, each segment's data inside its buffer), since GRO, the
    /// skb and the forward stage size every read and write by them. A chain
    /// that breaks one is freed and counted (`SkbStats::malformed`): None.
    /// A one-segment frame costs three compares on fields of the mbuf's
    /// first cache line, which GRO reads next, and a load of `next`, which
    /// the free reads later.
    ///
    /// # Safety
    /// As `build`, but for the lengths: `m` is a chain head the caller owns
    /// and gives up, whose `next` pointers link valid mbufs (what a driver
    /// gets wrong is a length, not a pointer).
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn build_checked(
        m: *mut rte_mbuf,
        conf: &SkbConf,
        stats: &mut SkbStats,
    ) -> Option<Skb> {
        // SAFETY: the caller gives us the chain `m`, whose pointers are
        // valid: reading its lengths is sound whatever they say, and a chain
        // whose lengths hold meets build_with_tail's contract with the tail
        // found; one that does not is ours to free (rte_pktmbuf_free follows
        // `next`, not the lengths).
        unsafe {
            match checked_tail(m) {
                Some(tail) => Some(Self::build_with_tail(m, tail, conf, stats)),
                None => {
                    stats.malformed += 1;
                    mbuf::free(m);
                    None
                }
            }
        }
    }

    /// `build` with the chain's last segment known.
    ///
    /// # Safety
    /// As `build`; `tail` is the last segment of `m`.
    #[inline(always)]
    unsafe fn build_with_tail(
        m: *mut rte_mbuf,
        tail: *mut rte_mbuf,
        conf: &SkbConf,
        stats: &mut SkbStats,
    ) -> Skb {
        // SAFETY: the caller gives us `m`, a valid chain head whose pool
        // reserves PRIV_SIZE bytes of private area, so the SkbMeta write fits;
        // in copy mode the head comes from conf.head_pool, valid with such an
        // area by the same contract, and is chained in front of `m`, so
        // `tail` stays the last segment. `head` is `m` or a fresh mbuf:
        // non-null.
        unsafe {
            debug_assert!((*m).priv_size >= PRIV_SIZE);
            let mut head = m;
            let mut flags = 0;
            let mut truesize = conf.buf_truesize * (*m).nb_segs as u32;
            if conf.mode == SkbMode::Copy {
                match Self::copy_head(m, conf) {
                    Some(h) => {
                        head = h;
                        flags = SKB_COPIED_HEAD;
                        truesize += conf.head_truesize;
                    }
                    None => stats.head_alloc_fail += 1,
                }
            }
            let headroom = conf.headroom.min(mb::headroom(head));
            let meta = mb::priv_area(head) as *mut SkbMeta;
            meta.write(SkbMeta {
                tail,
                truesize,
                headroom,
                gso_size: 0,
                gso_segs: 1,
                l2_len: 0,
                l3_len: 0,
                l4_len: 0,
                flags,
                outer_l2_len: 0,
                outer_l3_len: 0,
            });
            Skb(NonNull::new_unchecked(head))
        }
    }

    /// Copy mode: a head from the head pool with the frame's first bytes copied
    /// into it, chained in front of the (trimmed) received buffer.
    ///
    /// # Safety
    /// `m` is a valid chain head the caller owns and may write;
    /// `conf.head_pool` is a valid mbuf pool.
    unsafe fn copy_head(m: *mut rte_mbuf, conf: &SkbConf) -> Option<*mut rte_mbuf> {
        // SAFETY: the caller guarantees `m` is a writable chain head it owns and
        // that head_pool is valid; `h` is checked non-null and fresh, and the copy
        // is at most both the source's data_len and the new head's tailroom.
        unsafe {
            let h = mbuf::alloc(conf.head_pool);
            if h.is_null() {
                return None;
            }
            // Pull exactly the headers, as drivers did with eth_get_headlen(); a
            // frame that is not TCP gets the copy-break length.
            let data = std::slice::from_raw_parts(mb::mtod(m), mb::data_len(m) as usize);
            let hdrs = match crate::wire::Tcp::parse(data, mb::pkt_len(m) as usize, false) {
                Ok(t) => t.payload as usize,
                Err(_) => conf.copy_len as usize,
            };
            let n = hdrs
                .min(mb::data_len(m) as usize)
                .min(mb::tailroom(h) as usize);
            std::ptr::copy_nonoverlapping(mb::mtod(m), mb::mtod(h), n);
            (*h).data_len = n as u16;
            (*m).data_off += n as u16;
            (*m).data_len -= n as u16;
            (*h).pkt_len = (*m).pkt_len;
            (*m).pkt_len -= n as u32;
            (*h).nb_segs = (*m).nb_segs + 1;
            (*h).next = m;
            (*h).ol_flags = (*m).ol_flags;
            (*h).port = (*m).port;
            (*h).__bindgen_anon_1.packet_type = (*m).__bindgen_anon_1.packet_type;
            (*h).__bindgen_anon_2 = (*m).__bindgen_anon_2;
            Some(h)
        }
    }

    /// The head mbuf (the skb keeps ownership).
    #[doc(hidden)]
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut rte_mbuf {
        self.0.as_ptr()
    }

    /// Gives the chain back as a raw mbuf (the skb metadata stays in place).
    #[doc(hidden)]
    #[inline(always)]
    pub fn into_mbuf(self) -> *mut rte_mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The skb metadata in the head's private area.
    #[doc(hidden)]
    #[inline(always)]
    pub fn meta(&self) -> &SkbMeta {
        // SAFETY: built in place by `build`; the head owns its private area.
        unsafe { &*(mb::priv_area(self.as_ptr()) as *const SkbMeta) }
    }

    #[inline(always)]
    fn meta_mut(&mut self) -> &mut SkbMeta {
        // SAFETY: built in place by `build`; the head owns its private area,
        // and &mut self means we own the skb exclusively.
        unsafe { &mut *(mb::priv_area(self.as_ptr()) as *mut SkbMeta) }
    }

    /// Trims the first `off` bytes of `o` and links the chain `o..=tail`
    /// (`nb` buffers, `len` bytes once trimmed, pinning `truesize`) after
    /// our tail.
    ///
    /// # Safety
    /// We own the chain, which no one else links to; `o` holds at least
    /// `off` bytes and `tail` is its last buffer.
    #[inline(always)]
    unsafe fn link(
        &mut self,
        o: *mut rte_mbuf,
        off: usize,
        tail: *mut rte_mbuf,
        nb: u16,
        len: u32,
        truesize: u32,
    ) {
        // SAFETY: the caller guarantees we own the chain and `o..=tail`, that no
        // one else links to them, and that `o` holds at least `off` bytes.
        unsafe {
            (*o).data_off += off as u16;
            (*o).data_len -= off as u16;
            (*self.meta().tail).next = o;
            self.grew(tail, nb, len, truesize);
        }
    }

    /// The chain now ends at `tail`, linked after our old tail, and is `nb`
    /// buffers, `len` bytes and `truesize` longer: the totals every append
    /// ends by writing, once.
    ///
    /// # Safety
    /// `tail` is the last buffer of a chain we own that our old tail links to.
    #[inline(always)]
    unsafe fn grew(&mut self, tail: *mut rte_mbuf, nb: u16, len: u32, truesize: u32) {
        let h = self.as_ptr();
        let meta = self.meta_mut();
        meta.tail = tail;
        meta.truesize += truesize;
        // SAFETY: field writes on our head, which we own.
        unsafe {
            (*h).pkt_len += len;
            (*h).nb_segs += nb;
        }
    }

    /// Headroom a prepend may use.
    pub fn headroom(&self) -> u16 {
        self.meta().headroom
    }

    /// Room after the last segment's data.
    pub fn tailroom(&self) -> u16 {
        // SAFETY: the tail is a live segment of our chain.
        unsafe { mb::tailroom(self.meta().tail) }
    }

    /// Makes room for `n` bytes in front of the packet and returns them:
    /// a pointer move when the headroom allows, else a fresh header mbuf from
    /// `pool` chained in front (counted as a headroom miss). None if `pool`
    /// has no mbuf left or `n` exceeds a fresh mbuf's room.
    pub fn prepend(&mut self, n: u16, pool: &Mempool, stats: &mut SkbStats) -> Option<&mut [u8]> {
        let m = self.as_ptr();
        if n <= self.headroom() {
            // SAFETY: n bytes of headroom exist in front of the data.
            unsafe {
                (*m).data_off -= n;
                (*m).data_len += n;
                (*m).pkt_len += n as u32;
                self.meta_mut().headroom -= n;
                return Some(std::slice::from_raw_parts_mut(mb::mtod(m), n as usize));
            }
        }
        stats.headroom_miss += 1;
        // SAFETY: a fresh mbuf becomes the new head; the skb moves to its
        // private area (the pool must have one too, as every grorx pool does).
        unsafe {
            let h = mbuf::alloc(pool.as_ptr());
            if h.is_null() {
                return None;
            }
            if (*h).priv_size < PRIV_SIZE || n > (*h).buf_len {
                mbuf::free(h);
                return None;
            }
            // Put the new bytes at the end of the header mbuf's room, leaving
            // the rest as headroom for a further prepend.
            let room = (*h).buf_len;
            (*h).data_off = room - n;
            (*h).data_len = n;
            (*h).pkt_len = (*m).pkt_len + n as u32;
            (*h).nb_segs = (*m).nb_segs + 1;
            (*h).next = m;
            (*h).ol_flags = (*m).ol_flags;
            (*h).port = (*m).port;
            (*h).__bindgen_anon_3 = (*m).__bindgen_anon_3;
            let mut meta = *self.meta();
            meta.truesize += truesize_of(pool);
            meta.headroom = (*h).data_off;
            (mb::priv_area(h) as *mut SkbMeta).write(meta);
            self.0 = NonNull::new_unchecked(h);
            Some(std::slice::from_raw_parts_mut(mb::mtod(h), n as usize))
        }
    }
}

/// The last segment of a received chain whose lengths hold (see
/// `Skb::build_checked`), else None. The walk stops after `nb_segs`
/// segments, so a chain whose `next` loops back ends it too.
///
/// # Safety
/// `m` points to a chain head the caller may read, whose `next` pointers
/// link valid mbufs.
#[inline(always)]
unsafe fn checked_tail(m: *mut rte_mbuf) -> Option<*mut rte_mbuf> {
    // SAFETY: the caller guarantees `m` and every mbuf `next` links are
    // valid; we follow `next` only while it is non-null and at most nb_segs
    // times, reading fields only.
    unsafe {
        let in_buf =
            |s: *mut rte_mbuf| (*s).data_off as u32 + (*s).data_len as u32 <= (*s).buf_len as u32;
        let (nb, pkt_len) = ((*m).nb_segs, (*m).pkt_len);
        if nb == 1 {
            let ok = (*m).next.is_null() && pkt_len == (*m).data_len as u32 && in_buf(m);
            return ok.then_some(m);
        }
        let (mut s, mut tail, mut len) = (m, m, 0u32);
        for _ in 0..nb {
            if s.is_null() || !in_buf(s) {
                return None;
            }
            len += (*s).data_len as u32;
            tail = s;
            s = (*s).next;
        }
        (nb > 0 && s.is_null() && len == pkt_len).then_some(tail)
    }
}

/// The last segment of a chain.
///
/// # Safety
/// `m` points to a valid chain head the caller may read.
#[inline(always)]
unsafe fn last_seg(mut m: *mut rte_mbuf) -> *mut rte_mbuf {
    // SAFETY: the caller guarantees a readable chain; we follow `next` only
    // while it is non-null.
    unsafe {
        while !(*m).next.is_null() {
            m = (*m).next;
        }
    }
    m
}

/// What an mbuf's RX flags `f` say of its checksums.
#[inline(always)]
pub(crate) fn hints_of(f: u64) -> RxHints {
    const ANY: u64 = (RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK) as u64;
    if f & ANY == 0 {
        return RxHints::default(); // most vdevs say nothing
    }
    RxHints {
        ip: hint(
            f,
            RTE_MBUF_F_RX_IP_CKSUM_MASK as u64,
            RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64,
            RTE_MBUF_F_RX_IP_CKSUM_BAD as u64,
        ),
        l4: hint(
            f,
            RTE_MBUF_F_RX_L4_CKSUM_MASK as u64,
            RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64,
            RTE_MBUF_F_RX_L4_CKSUM_BAD as u64,
        ),
    }
}

#[inline(always)]
fn hint(flags: u64, mask: u64, good: u64, bad: u64) -> CsumHint {
    match flags & mask {
        0 => CsumHint::Unknown,
        x if x == good => CsumHint::Good,
        x if x == bad => CsumHint::Bad,
        _ => CsumHint::DataGood,
    }
}

impl GroBuf for Skb {
    #[inline(always)]
    fn head(&self) -> &[u8] {
        // SAFETY: the head segment's data_len bytes from mtod are ours to read.
        unsafe {
            std::slice::from_raw_parts(
                mb::mtod(self.as_ptr()),
                mb::data_len(self.as_ptr()) as usize,
            )
        }
    }

    #[inline(always)]
    fn head_mut(&mut self) -> &mut [u8] {
        // SAFETY: the head segment's data_len bytes from mtod are ours, and
        // &mut self means we own the chain exclusively.
        unsafe {
            std::slice::from_raw_parts_mut(
                mb::mtod(self.as_ptr()),
                mb::data_len(self.as_ptr()) as usize,
            )
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        // SAFETY: field read of our head.
        unsafe { mb::pkt_len(self.as_ptr()) as usize }
    }

    #[inline(always)]
    fn segs(&self) -> u16 {
        // SAFETY: field read of our head.
        unsafe { mb::nb_segs(self.as_ptr()) }
    }

    #[inline(always)]
    fn rx_hints(&self) -> RxHints {
        // SAFETY: field read of our head.
        hints_of(unsafe { mb::ol_flags(self.as_ptr()) })
    }

    #[inline(always)]
    fn for_each_chunk<F: FnMut(&[u8])>(&self, off: usize, len: usize, mut f: F) {
        // SAFETY: walking our own chain; each slice stays within data_len.
        unsafe {
            crate::dpdk::mbuf::for_chunks(self.as_ptr(), off, len, |p, n| {
                f(std::slice::from_raw_parts(p, n))
            });
        }
    }

    /// The buffers `append` keeps: from the one holding byte `off` on,
    /// empty ones after it included (they stay linked, and a TX NIC spends
    /// a descriptor on each, which is what `max_frags` counts).
    #[inline(always)]
    fn segs_from(&self, mut off: usize) -> u16 {
        let mut m = self.as_ptr();
        let mut n = 0;
        // SAFETY: walking our own chain.
        unsafe {
            // One buffer, as most frames are: no walk.
            if mb::next(m).is_null() {
                return (off < mb::data_len(m) as usize) as u16;
            }
            while !m.is_null() {
                let dl = mb::data_len(m) as usize;
                if n == 0 && off >= dl {
                    off -= dl;
                } else {
                    n += 1;
                }
                m = mb::next(m);
            }
        }
        n
    }

    #[inline(always)]
    fn append(&mut self, other: Skb, mut off: usize) {
        let mut o = other.into_mbuf();
        // SAFETY: we own both chains; `o` is trimmed of its first `off` bytes
        // (its headers; segments left empty are freed) and linked after our tail.
        unsafe {
            let mut o_truesize = (*(mb::priv_area(o) as *const SkbMeta)).truesize;
            let o_tail = (*(mb::priv_area(o) as *const SkbMeta)).tail;
            let pkt_len = mb::pkt_len(o) - off as u32;
            let mut nb = mb::nb_segs(o);
            while off >= mb::data_len(o) as usize && !mb::next(o).is_null() {
                off -= mb::data_len(o) as usize;
                let next = mb::next(o);
                (*o).next = std::ptr::null_mut();
                (*o).nb_segs = 1;
                // It no longer pins its buffer for us.
                o_truesize -= (*mb::pool(o)).elt_size.min(o_truesize);
                mbuf::free_seg(o);
                o = next;
                nb -= 1;
            }
            self.link(o, off, o_tail, nb, pkt_len, o_truesize);
        }
    }

    #[inline(always)]
    fn append_one(&mut self, other: Skb, off: usize) {
        self.append_run(std::iter::once(other), off);
    }

    #[inline(always)]
    fn append_run<I: Iterator<Item = Skb>>(&mut self, run: I, off: usize) {
        let mut tail = self.meta().tail;
        let (mut len, mut nb, mut truesize) = (0u32, 0u16, 0u32);
        for other in run {
            let o = other.into_mbuf();
            // SAFETY: we own the chain and each `o`, a one-buffer skb
            // holding more than `off` bytes (the caller checked), which no
            // one else links to: trimmed of them and linked after `tail`,
            // our last buffer so far.
            unsafe {
                debug_assert!(mb::nb_segs(o) == 1 && (mb::data_len(o) as usize) > off);
                (*o).data_off += off as u16;
                (*o).data_len -= off as u16;
                len += (*o).data_len as u32;
                truesize += (*(mb::priv_area(o) as *const SkbMeta)).truesize;
                (*tail).next = o;
            }
            tail = o;
            nb += 1;
        }
        // SAFETY: `tail` ends the buffers just linked after our old tail.
        unsafe { self.grew(tail, nb, len, truesize) };
    }

    /// The headroom a prepend may use (`RunOptions::skb.headroom`): a BIG TCP IPv6
    /// packet's jumbo header goes there.
    #[inline(always)]
    fn headroom(&self) -> usize {
        self.meta().headroom as usize
    }

    #[inline(always)]
    fn push_head(&mut self, n: usize) -> bool {
        if n > self.meta().headroom as usize {
            return false;
        }
        let m = self.as_ptr();
        // SAFETY: n bytes of the headroom this skb may use lie in front of
        // the head's data; &mut self owns the chain.
        unsafe {
            (*m).data_off -= n as u16;
            (*m).data_len += n as u16;
            (*m).pkt_len += n as u32;
        }
        self.meta_mut().headroom -= n as u16;
        true
    }

    #[inline(always)]
    fn set_gso(&mut self, info: &GsoInfo) {
        let m = self.as_ptr();
        let meta = self.meta_mut();
        meta.gso_size = info.mss;
        meta.gso_segs = info.segs;
        meta.l2_len = info.l2_len;
        meta.l3_len = info.l3_len;
        meta.l4_len = info.l4_len;
        meta.flags = (meta.flags & !(SKB_GSO_UDP | SKB_GSO_OUTER_FIXEDID))
            | if info.udp { SKB_GSO_UDP } else { 0 }
            | if info.outer_id_fixed {
                SKB_GSO_OUTER_FIXEDID
            } else {
                0
            };
        meta.outer_l2_len = info.outer_l2_len as u8;
        meta.outer_l3_len = info.outer_l3_len as u8;
        if info.l2_len > 127 {
            // Past the mbuf's 7-bit field (Geneve options): the skb's own
            // layout is what the forwarder reads.
            return;
        }
        // SAFETY: field writes on our head.
        unsafe {
            let segsz = if info.segs > 1 { info.mss as u64 } else { 0 };
            mb::set_tx_offload(
                m,
                info.l2_len as u64,
                info.l3_len as u64,
                info.l4_len as u64,
                segsz,
            );
            if info.tso {
                (*m).ol_flags |= if info.udp {
                    RTE_MBUF_F_TX_UDP_SEG
                } else {
                    RTE_MBUF_F_TX_TCP_SEG
                } | if info.ipv6 {
                    RTE_MBUF_F_TX_IPV6
                } else {
                    RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM
                };
            }
        }
    }
}

/// What an embedder reads and changes on a packet: its bytes, the TCP
/// header view, GRO's merge layout, headers pushed and popped.
impl Skb {
    /// Bytes of the whole packet (every segment).
    #[inline(always)]
    pub fn len(&self) -> usize {
        GroBuf::len(self)
    }

    /// Whether the packet has no bytes.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first segment's bytes: the headers, then the start of the payload.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        self.head()
    }

    /// The first segment's bytes, to rewrite headers in place.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.head_mut()
    }

    /// Buffers the packet spans (a merged packet: one per segment merged,
    /// bar the headers' own).
    #[inline(always)]
    pub fn buffers(&self) -> u16 {
        self.segs()
    }

    /// Calls `f` with each buffer's bytes, in order: the whole packet.
    pub fn for_each_chunk<F: FnMut(&[u8])>(&self, f: F) {
        GroBuf::for_each_chunk(self, 0, self.len(), f)
    }

    /// The Ethernet (VLAN, QinQ) / IPv4 or IPv6 / TCP header layout, if this
    /// is a TCP segment whose headers lie in the first buffer.
    pub fn tcp(&self) -> Option<crate::wire::Tcp> {
        crate::wire::Tcp::parse(self.data(), self.len(), false).ok()
    }

    /// Segments GRO merged into this packet (1 for one passed through).
    #[inline(always)]
    pub fn gso_segs(&self) -> u16 {
        self.meta().gso_segs
    }

    /// The payload size of each merged segment (the last may be shorter);
    /// 0 when GRO passed the packet through without holding it.
    #[inline(always)]
    pub fn gso_size(&self) -> u16 {
        self.meta().gso_size
    }

    /// Removes `n` bytes from the front (a header taken off: a pointer
    /// move). False, and nothing changed, if the first buffer holds fewer.
    pub fn pull(&mut self, n: u16) -> bool {
        let m = self.as_ptr();
        // SAFETY: we own the chain; a head field read.
        if n > unsafe { mb::data_len(m) } {
            return false;
        }
        // SAFETY: `n` bytes of the head segment are ours and move to the
        // headroom; lengths shrink by as much.
        unsafe {
            (*m).data_off += n;
            (*m).data_len -= n;
            (*m).pkt_len -= n as u32;
        }
        let meta = self.meta_mut();
        meta.headroom = meta.headroom.saturating_add(n);
        true
    }

    /// Takes off the outermost 802.1Q or 802.1ad tag and returns its TCI;
    /// None (and nothing changed) if the frame has none. A merged packet's
    /// layout follows, so the forwarder or the port segments it right.
    pub fn pop_vlan(&mut self) -> Option<u16> {
        use crate::wire::field::{self, eth};
        let d = self.data_mut();
        if d.len() < eth::HEADER_LEN + eth::TAG_LEN {
            return None;
        }
        // The tag's type is where the ethertype would be.
        let tpid = field::read16(d, 0, eth::ETHERTYPE);
        if tpid != crate::wire::ETH_P_8021Q && tpid != crate::wire::ETH_P_8021AD {
            return None;
        }
        let tci = field::read16(d, eth::ETHERTYPE.start, eth::TAG_TCI);
        // The MAC addresses move on, over the tag.
        d.copy_within(eth::MACS, eth::TAG_LEN);
        self.pull(eth::TAG_LEN as u16);
        let m = self.as_ptr();
        let meta = self.meta_mut();
        if meta.outer_l3_len > 0 {
            // The tag was the outer frame's.
            meta.outer_l2_len -= 4;
        } else if meta.l2_len >= 18 {
            meta.l2_len -= 4;
            let (l2, l3, l4) = (meta.l2_len, meta.l3_len, meta.l4_len);
            let seg = if meta.gso_segs > 1 { meta.gso_size } else { 0 };
            // SAFETY: a field write on our own head.
            unsafe { mb::set_tx_offload(m, l2 as u64, l3 as u64, l4 as u64, seg as u64) };
        }
        Some(tci)
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: we own the chain.
        unsafe { mbuf::free(self.as_ptr()) }
    }
}

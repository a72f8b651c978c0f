//! Per-packet mbuf accessors as plain field reads and writes.
//!
//! DPDK defines these as macros or static inlines; bindgen's wrappers would
//! make each one a function call, which is too dear per packet. Every function
//! takes a raw pointer and is `unsafe`: the caller guarantees `m` points to a
//! live mbuf it may read (and, for the setters, write).

use crate::{rte_mbuf, rte_mempool};
use core::sync::atomic::{AtomicU16, Ordering};

/// `rte_pktmbuf_mtod(m, uint8_t *)`: the first data byte of this segment.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read, whose `data_off` lies
/// within its buffer (as DPDK keeps it).
#[inline(always)]
pub unsafe fn mtod(m: *const rte_mbuf) -> *mut u8 {
    // SAFETY: the caller guarantees `m` is a live, readable mbuf whose
    // `data_off` is within the buffer at `buf_addr`, so the offset stays in bounds.
    unsafe { ((*m).buf_addr as *mut u8).add((*m).data_off as usize) }
}

/// `rte_pktmbuf_data_len`: the data length of this segment.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn data_len(m: *const rte_mbuf) -> u16 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).data_len }
}

/// `rte_pktmbuf_pkt_len`: the length of the whole packet, all segments.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn pkt_len(m: *const rte_mbuf) -> u32 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).pkt_len }
}

/// The number of segments in the chain starting at `m`.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn nb_segs(m: *const rte_mbuf) -> u16 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).nb_segs }
}

/// The next segment, or null for the last one.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn next(m: *const rte_mbuf) -> *mut rte_mbuf {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).next }
}

/// The offload flags (`RTE_MBUF_F_*`).
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn ol_flags(m: *const rte_mbuf) -> u64 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).ol_flags }
}

/// The mempool this mbuf came from.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn pool(m: *const rte_mbuf) -> *mut rte_mempool {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).pool }
}

/// `rte_pktmbuf_headroom`.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn headroom(m: *const rte_mbuf) -> u16 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).data_off }
}

/// `rte_pktmbuf_tailroom`: room after this segment's data.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read, with
/// `data_off + data_len <= buf_len` (as DPDK keeps it).
#[inline(always)]
pub unsafe fn tailroom(m: *const rte_mbuf) -> u16 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).buf_len - (*m).data_off - (*m).data_len }
}

/// The packet type (`RTE_PTYPE_*`) the driver or software set.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn packet_type(m: *const rte_mbuf) -> u32 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).__bindgen_anon_1.packet_type }
}

/// Sets the packet type (`RTE_PTYPE_*`).
///
/// # Safety
///
/// `m` points to a live mbuf the caller may write.
#[inline(always)]
pub unsafe fn set_packet_type(m: *mut rte_mbuf, ptype: u32) {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may write.
    unsafe {
        (*m).__bindgen_anon_1.packet_type = ptype;
    }
}

/// The RSS hash; meaningful only with `RTE_MBUF_F_RX_RSS_HASH` set.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn rss_hash(m: *const rte_mbuf) -> u32 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).__bindgen_anon_2.hash.rss }
}

/// `rte_mbuf_to_priv`: the private area right after the mbuf header.
///
/// # Safety
///
/// `m` points to a live mbuf allocated from a DPDK mempool, whose element
/// holds the private area (possibly empty) right after the header.
#[inline(always)]
pub unsafe fn priv_area(m: *mut rte_mbuf) -> *mut u8 {
    // SAFETY: the caller guarantees `m` is a mempool mbuf, so the element extends
    // at least to the end of the header and the offset stays in bounds.
    unsafe { (m as *mut u8).add(core::mem::size_of::<rte_mbuf>()) }
}

/// The reference count, read atomically: C updates it with atomics.
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn refcnt(m: *const rte_mbuf) -> u16 {
    // SAFETY: the caller guarantees `m` points to a live, readable mbuf; refcnt is
    // a naturally aligned u16 that C only touches atomically.
    unsafe { (*(core::ptr::addr_of!((*m).refcnt) as *const AtomicU16)).load(Ordering::Relaxed) }
}

/// The `tx_offload` word (l2/l3/l4 lengths, TSO segment size, outer lengths).
///
/// # Safety
///
/// `m` points to a live mbuf the caller may read.
#[inline(always)]
pub unsafe fn tx_offload(m: *const rte_mbuf) -> u64 {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may read.
    unsafe { (*m).__bindgen_anon_3.tx_offload }
}

/// The `tx_offload` word as the C bit-fields lay it out (x86-64, LSB first):
/// l2_len:7 l3_len:9 l4_len:8 tso_segsz:16 outer_l3_len:9 outer_l2_len:7.
#[inline(always)]
pub const fn tx_offload_word(l2: u64, l3: u64, l4: u64, tso_segsz: u64) -> u64 {
    (l2 & 0x7f) | (l3 & 0x1ff) << 7 | (l4 & 0xff) << 16 | (tso_segsz & 0xffff) << 24
}

/// Sets l2_len, l3_len, l4_len and tso_segsz in one store (outer lengths zeroed).
///
/// # Safety
///
/// `m` points to a live mbuf the caller may write.
#[inline(always)]
pub unsafe fn set_tx_offload(m: *mut rte_mbuf, l2: u64, l3: u64, l4: u64, tso_segsz: u64) {
    // SAFETY: the caller guarantees `m` points to a live mbuf it may write.
    unsafe {
        (*m).__bindgen_anon_3.tx_offload = tx_offload_word(l2, l3, l4, tso_segsz);
    }
}

//! Per-packet mbuf accessors as plain field reads and writes.
//!
//! DPDK defines these as macros or static inlines; bindgen's wrappers would
//! make each one a function call, which is too dear per packet. Every function
//! takes a raw pointer and is `unsafe`: the caller guarantees `m` points to a
//! live mbuf it may read (and, for the setters, write).

use crate::{rte_mbuf, rte_mempool};
use core::sync::atomic::{AtomicU16, Ordering};

/// `rte_pktmbuf_mtod(m, uint8_t *)`: the first data byte of this segment.
#[inline(always)]
pub unsafe fn mtod(m: *const rte_mbuf) -> *mut u8 {
    ((*m).buf_addr as *mut u8).add((*m).data_off as usize)
}

#[inline(always)]
pub unsafe fn data_len(m: *const rte_mbuf) -> u16 {
    (*m).data_len
}

#[inline(always)]
pub unsafe fn pkt_len(m: *const rte_mbuf) -> u32 {
    (*m).pkt_len
}

#[inline(always)]
pub unsafe fn nb_segs(m: *const rte_mbuf) -> u16 {
    (*m).nb_segs
}

#[inline(always)]
pub unsafe fn next(m: *const rte_mbuf) -> *mut rte_mbuf {
    (*m).next
}

#[inline(always)]
pub unsafe fn ol_flags(m: *const rte_mbuf) -> u64 {
    (*m).ol_flags
}

#[inline(always)]
pub unsafe fn pool(m: *const rte_mbuf) -> *mut rte_mempool {
    (*m).pool
}

/// `rte_pktmbuf_headroom`.
#[inline(always)]
pub unsafe fn headroom(m: *const rte_mbuf) -> u16 {
    (*m).data_off
}

/// `rte_pktmbuf_tailroom`: room after this segment's data.
#[inline(always)]
pub unsafe fn tailroom(m: *const rte_mbuf) -> u16 {
    (*m).buf_len - (*m).data_off - (*m).data_len
}

#[inline(always)]
pub unsafe fn packet_type(m: *const rte_mbuf) -> u32 {
    (*m).__bindgen_anon_1.packet_type
}

#[inline(always)]
pub unsafe fn set_packet_type(m: *mut rte_mbuf, ptype: u32) {
    (*m).__bindgen_anon_1.packet_type = ptype;
}

#[inline(always)]
pub unsafe fn rss_hash(m: *const rte_mbuf) -> u32 {
    (*m).__bindgen_anon_2.hash.rss
}

/// `rte_mbuf_to_priv`: the private area right after the mbuf header.
#[inline(always)]
pub unsafe fn priv_area(m: *mut rte_mbuf) -> *mut u8 {
    (m as *mut u8).add(core::mem::size_of::<rte_mbuf>())
}

/// The reference count, read atomically: C updates it with atomics.
#[inline(always)]
pub unsafe fn refcnt(m: *const rte_mbuf) -> u16 {
    // SAFETY: refcnt is a naturally aligned u16 that C only touches atomically.
    (*(core::ptr::addr_of!((*m).refcnt) as *const AtomicU16)).load(Ordering::Relaxed)
}

#[inline(always)]
pub unsafe fn tx_offload(m: *const rte_mbuf) -> u64 {
    (*m).__bindgen_anon_3.tx_offload
}

/// The `tx_offload` word as the C bit-fields lay it out (x86-64, LSB first):
/// l2_len:7 l3_len:9 l4_len:8 tso_segsz:16 outer_l3_len:9 outer_l2_len:7.
#[inline(always)]
pub const fn tx_offload_word(l2: u64, l3: u64, l4: u64, tso_segsz: u64) -> u64 {
    (l2 & 0x7f) | (l3 & 0x1ff) << 7 | (l4 & 0xff) << 16 | (tso_segsz & 0xffff) << 24
}

/// Sets l2_len, l3_len, l4_len and tso_segsz in one store (outer lengths zeroed).
#[inline(always)]
pub unsafe fn set_tx_offload(m: *mut rte_mbuf, l2: u64, l3: u64, l4: u64, tso_segsz: u64) {
    (*m).__bindgen_anon_3.tx_offload = tx_offload_word(l2, l3, l4, tso_segsz);
}

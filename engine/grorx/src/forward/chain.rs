//! Walking, reading and writing mbuf chains the forwarder owns.

use super::*;
use crate::dpdk::mbuf::for_chunks;

/// A read position in an mbuf chain the forwarder owns from `m` on.
pub(super) struct Cursor {
    pub(super) m: *mut rte_mbuf,
    pub(super) off: usize,
}

/// Clears every TX offload request flag of `m`.
///
/// # Safety
/// `m` points to a live mbuf the caller may write.
#[inline(always)]
pub(super) unsafe fn clear_tx_flags(m: *mut rte_mbuf) {
    // SAFETY: the caller guarantees `m` is a live mbuf it may write.
    unsafe {
        (*m).ol_flags &= !RTE_MBUF_F_TX_OFFLOAD_MASK;
    }
}

/// Walks from `m` until `len` bytes are covered: the mbuf reached, the
/// mbufs walked, the bytes they hold (null and less than `len` if short).
///
/// # Safety
/// `m` is null or a valid chain the caller may read.
#[inline(always)]
pub(super) unsafe fn walk(m: *mut rte_mbuf, len: usize) -> (*mut rte_mbuf, u16, usize) {
    let (mut x, mut cnt, mut acc) = (m, 0u16, 0usize);
    while !x.is_null() {
        // SAFETY: `x` is non-null and, by the caller's contract, a segment of
        // a chain it may read.
        unsafe {
            acc += mb::data_len(x) as usize;
            cnt += 1;
            if acc >= len {
                return (x, cnt, acc);
            }
            x = mb::next(x);
        }
    }
    (x, cnt, acc)
}

/// Copies `out.len()` bytes from chain offset `off`.
///
/// # Safety
/// `m` is null or a valid chain the caller may read.
pub(super) unsafe fn gather(m: *mut rte_mbuf, off: usize, out: &mut [u8]) -> bool {
    let mut at = 0;
    // SAFETY: the caller guarantees the chain is readable; for_chunks gives
    // pieces inside it totalling at most out.len(), so `at + n` stays in `out`.
    unsafe {
        for_chunks(m, off, out.len(), |p, n| {
            std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().add(at), n);
            at += n;
        })
    }
}

/// Writes `src` at chain offset `off`.
///
/// # Safety
/// `m` is null or a valid chain the caller may write.
pub(super) unsafe fn scatter(m: *mut rte_mbuf, off: usize, src: &[u8]) -> bool {
    let mut at = 0;
    // SAFETY: the caller guarantees the chain is writable; for_chunks gives
    // pieces inside it totalling at most src.len(), so `at + n` stays in `src`.
    unsafe {
        for_chunks(m, off, src.len(), |p, n| {
            std::ptr::copy_nonoverlapping(src.as_ptr().add(at), p, n);
            at += n;
        })
    }
}

/// One's-complement sum of `[off, off + len)` of a chain.
///
/// # Safety
/// `m` is null or a valid chain the caller may read.
pub(super) unsafe fn chain_sum(m: *mut rte_mbuf, off: usize, len: usize) -> u16 {
    let mut s = csum::Chained::default();
    // SAFETY: the caller guarantees the chain is readable; each piece for_chunks
    // gives lies inside one segment's data.
    unsafe { for_chunks(m, off, len, |p, n| s.add(std::slice::from_raw_parts(p, n))) };
    s.value()
}

/// Moves the cursor past exhausted mbufs (freeing them).
///
/// # Safety
/// `cur.m` is null or a valid chain the caller owns from there on (no one
/// else uses those segments).
#[inline(always)]
pub(super) unsafe fn normalize(cur: &mut Cursor) {
    // SAFETY: the caller guarantees we own the chain from cur.m on, so each
    // non-null segment may be read, unlinked and freed; cur.m moves past it.
    unsafe {
        while !cur.m.is_null() && cur.off >= mb::data_len(cur.m) as usize {
            cur.off -= mb::data_len(cur.m) as usize;
            let next = mb::next(cur.m);
            (*cur.m).next = std::ptr::null_mut();
            mbuf::free_seg(cur.m);
            cur.m = next;
        }
    }
}

/// Reads `len` bytes at the cursor, freeing the mbufs it finishes; returns
/// the bytes read (less if the chain ends).
///
/// # Safety
/// `cur.m` is null or a valid chain the caller owns from there on (no one
/// else uses those segments).
pub(super) unsafe fn take(cur: &mut Cursor, len: usize, mut f: impl FnMut(&[u8])) -> usize {
    let mut got = 0;
    // SAFETY: the caller guarantees we own the chain from cur.m on, as
    // normalize needs; after it, cur.m is non-null here with cur.off <
    // data_len, so the slice lies inside that segment's data.
    unsafe {
        while got < len {
            normalize(cur);
            if cur.m.is_null() {
                break;
            }
            let dl = mb::data_len(cur.m) as usize;
            let n = (dl - cur.off).min(len - got);
            f(std::slice::from_raw_parts(mb::mtod(cur.m).add(cur.off), n));
            cur.off += n;
            got += n;
        }
        normalize(cur);
    }
    got
}

/// Frees what is left of the chain.
///
/// # Safety
/// `cur.m` is null or a valid chain the caller owns from there on and no
/// longer uses.
pub(super) unsafe fn free_cursor(cur: &mut Cursor) {
    if !cur.m.is_null() {
        // SAFETY: the caller guarantees we own the rest of the chain; cur.m is
        // nulled right after so it cannot be freed twice.
        unsafe { mbuf::free(cur.m) };
        cur.m = std::ptr::null_mut();
    }
}

//! Owned mbufs and stack bursts of them.
//!
//! `Mbuf` owns one packet (a chain): Send, never Clone, freed on drop.
//! `Burst<N>` is a stack array of owned mbuf pointers, filled by one RX call
//! and freed in bulk; whatever it still holds when dropped is freed, so an
//! early return cannot leak.

use dpdk_sys::{self as sys, inline as mb};
use std::ptr::NonNull;

/// The headroom DPDK leaves in front of a received frame (the most a
/// prepend may take without another mbuf).
pub(crate) use dpdk_sys::RTE_PKTMBUF_HEADROOM;

/// DPDK's mbuf header and pool, for the signatures that carry raw pointers
/// to them (the hot path passes mbufs as raw pointers, ownership by
/// contract).
pub use dpdk_sys::{rte_mbuf, rte_mempool};

/// Field reads and writes of a raw mbuf: plain field accesses (no FFI
/// call), each an `unsafe fn` whose caller vouches for the pointer.
pub mod field {
    pub use dpdk_sys::inline::{
        data_len, headroom, mtod, nb_segs, next, ol_flags, packet_type, pkt_len, pool, priv_area,
        refcnt, rss_hash, set_packet_type, set_tx_offload, tailroom, tx_offload, tx_offload_word,
    };
}

/// The `ol_flags` bits the engine reads (what the NIC checked) and sets
/// (what it asks of the TX port).
pub mod flags {
    pub use dpdk_sys::{
        RTE_MBUF_F_EXTERNAL, RTE_MBUF_F_INDIRECT, RTE_MBUF_F_RX_IP_CKSUM_BAD,
        RTE_MBUF_F_RX_IP_CKSUM_GOOD, RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_BAD,
        RTE_MBUF_F_RX_L4_CKSUM_GOOD, RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_RSS_HASH,
        RTE_MBUF_F_TX_IPV4, RTE_MBUF_F_TX_IPV6, RTE_MBUF_F_TX_IP_CKSUM, RTE_MBUF_F_TX_OFFLOAD_MASK,
        RTE_MBUF_F_TX_OUTER_IPV4, RTE_MBUF_F_TX_OUTER_IP_CKSUM, RTE_MBUF_F_TX_TCP_SEG,
        RTE_MBUF_F_TX_TUNNEL_VXLAN, RTE_MBUF_F_TX_UDP_SEG,
    };
}

/// Frees an mbuf chain (`rte_pktmbuf_free`: refcounts, indirect and
/// external buffers handled). Null is a no-op.
///
/// # Safety
/// `m` is null or a valid chain head the caller owns and no longer uses.
#[inline(always)]
pub unsafe fn free(m: *mut rte_mbuf) {
    // SAFETY: the caller gives up a chain it owns.
    unsafe { sys::rte_pktmbuf_free(m) }
}

/// Frees one segment, not its successors (`rte_pktmbuf_free_seg`).
///
/// # Safety
/// `m` is a valid segment the caller owns, no longer uses and has unlinked
/// from (or will not free through) any chain.
#[inline(always)]
pub unsafe fn free_seg(m: *mut rte_mbuf) {
    // SAFETY: the caller gives up a segment it owns.
    unsafe { sys::rte_pktmbuf_free_seg(m) }
}

/// Frees chains in one call (`rte_pktmbuf_free_bulk`).
///
/// # Safety
/// Every pointer in `ms` is a valid chain head the caller owns and no
/// longer uses (and none appears twice).
#[inline(always)]
pub unsafe fn free_bulk(ms: &mut [*mut rte_mbuf]) {
    // SAFETY: the caller gives up every chain in `ms`.
    unsafe { sys::rte_pktmbuf_free_bulk(ms.as_mut_ptr(), ms.len() as u32) }
}

/// One mbuf from `pool`, reset (`rte_pktmbuf_alloc`); null when it is empty.
///
/// # Safety
/// `pool` is a valid mbuf pool.
#[inline(always)]
pub unsafe fn alloc(pool: *mut rte_mempool) -> *mut rte_mbuf {
    // SAFETY: a valid pool (the caller's promise).
    unsafe { sys::rte_pktmbuf_alloc(pool) }
}

/// Fills `ms` with fresh mbufs from `pool` in one call, or allocates none
/// and returns false.
///
/// # Safety
/// `pool` is a valid mbuf pool.
#[inline(always)]
pub unsafe fn alloc_bulk(pool: *mut rte_mempool, ms: &mut [*mut rte_mbuf]) -> bool {
    // SAFETY: a valid pool; room for ms.len() pointers.
    unsafe { sys::rte_pktmbuf_alloc_bulk(pool, ms.as_mut_ptr(), ms.len() as u32) == 0 }
}

/// Whether `m` is as `rte_pktmbuf_alloc` leaves it and nothing filled it
/// since: one segment, no data, no flags, refcnt 1, no port. What a driver
/// allocated for its RX ring and never handed up looks like this; a packet
/// never does.
///
/// # Safety
/// `m` points to an mbuf header the caller may read.
pub unsafe fn untouched(m: *const sys::rte_mbuf) -> bool {
    // SAFETY: field reads of a readable header (the caller's promise).
    unsafe {
        mb::pkt_len(m) == 0
            && mb::data_len(m) == 0
            && mb::nb_segs(m) == 1
            && mb::next(m).is_null()
            && mb::ol_flags(m) == 0
            && mb::refcnt(m) == 1
            // RTE_MBUF_PORT_INVALID (UINT16_MAX), which the reset writes.
            && (*m).port == u16::MAX
    }
}

/// One owned packet (head of an mbuf chain).
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an mbuf may move between lcores; ownership is unique (no Clone).
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head nobody else owns.
    #[inline(always)]
    pub unsafe fn from_raw(m: *mut sys::rte_mbuf) -> Option<Mbuf> {
        NonNull::new(m).map(Mbuf)
    }

    /// Gives up ownership without freeing.
    #[inline(always)]
    pub fn into_raw(self) -> *mut sys::rte_mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    #[inline(always)]
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }

    /// Allocates one mbuf (a control-path helper; the data path allocates in bulk).
    pub fn alloc(pool: &super::mempool::Mempool) -> Option<Mbuf> {
        // SAFETY: valid pool.
        unsafe { Mbuf::from_raw(sys::rte_pktmbuf_alloc(pool.as_ptr())) }
    }

    #[inline(always)]
    pub fn pkt_len(&self) -> u32 {
        // SAFETY: we own a valid mbuf.
        unsafe { mb::pkt_len(self.as_ptr()) }
    }

    #[inline(always)]
    pub fn nb_segs(&self) -> u16 {
        // SAFETY: we own a valid mbuf.
        unsafe { mb::nb_segs(self.as_ptr()) }
    }

    /// The first segment's data.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: data_len bytes from mtod are inside the buffer we own.
        unsafe {
            std::slice::from_raw_parts(
                mb::mtod(self.as_ptr()),
                mb::data_len(self.as_ptr()) as usize,
            )
        }
    }

    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: data_len bytes from mtod are inside the buffer, which we own
        // exclusively (&mut self).
        unsafe {
            std::slice::from_raw_parts_mut(
                mb::mtod(self.as_ptr()),
                mb::data_len(self.as_ptr()) as usize,
            )
        }
    }

    /// Appends `bytes` to the first segment (a control-path builder for tests
    /// and generators). Returns false when the tailroom is too small.
    pub fn append(&mut self, bytes: &[u8]) -> bool {
        let m = self.as_ptr();
        // SAFETY: we own m; the write stays inside its tailroom.
        unsafe {
            if (mb::tailroom(m) as usize) < bytes.len() {
                return false;
            }
            let dst = mb::mtod(m).add(mb::data_len(m) as usize);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            (*m).data_len += bytes.len() as u16;
            (*m).pkt_len += bytes.len() as u32;
        }
        true
    }

    /// The bytes of every segment, copied (a control-path helper).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.pkt_len() as usize);
        let mut m = self.as_ptr();
        while !m.is_null() {
            // SAFETY: walking our own chain.
            unsafe {
                out.extend_from_slice(std::slice::from_raw_parts(
                    mb::mtod(m),
                    mb::data_len(m) as usize,
                ));
                m = mb::next(m);
            }
        }
        out
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the chain.
        unsafe { sys::rte_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// Up to `N` owned mbufs on the stack.
pub struct Burst<const N: usize> {
    pkts: [*mut sys::rte_mbuf; N],
    len: usize,
}

impl<const N: usize> Default for Burst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Burst<N> {
    pub const CAPACITY: usize = N;

    #[inline(always)]
    pub const fn new() -> Self {
        Burst {
            pkts: [std::ptr::null_mut(); N],
            len: 0,
        }
    }

    /// Receives up to `max` (at most N) packets from a port queue (one FFI call).
    #[inline(always)]
    pub fn rx(&mut self, port: u16, queue: u16, max: u16) -> usize {
        debug_assert_eq!(self.len, 0, "receiving into a burst that still owns mbufs");
        let max = (max as usize).min(N) as u16;
        // SAFETY: the array has room for N >= max pointers; the PMD fills n of
        // them with mbufs it hands over to us.
        let n = unsafe { sys::rte_eth_rx_burst(port, queue, self.pkts.as_mut_ptr(), max) };
        self.len = n as usize;
        self.len
    }

    /// Allocates `n` (<= N) fresh mbufs in one call; false if the pool is short.
    ///
    /// # Safety
    /// `pool` is a valid mbuf pool.
    #[inline(always)]
    pub unsafe fn alloc(&mut self, pool: *mut sys::rte_mempool, n: usize) -> bool {
        debug_assert_eq!(self.len, 0);
        let n = n.min(N);
        // SAFETY: room for n pointers; on failure nothing is allocated.
        let ok =
            unsafe { sys::rte_pktmbuf_alloc_bulk(pool, self.pkts.as_mut_ptr(), n as u32) } == 0;
        if ok {
            self.len = n;
        }
        ok
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw pointers (still owned by the burst).
    #[inline(always)]
    pub fn as_slice(&self) -> &[*mut sys::rte_mbuf] {
        &self.pkts[..self.len]
    }

    /// The raw pointers, for calls that rewrite the array in place (rte_gro).
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [*mut sys::rte_mbuf] {
        &mut self.pkts[..self.len]
    }

    /// Adds an owned mbuf; gives it back if the burst is full.
    #[inline(always)]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.pkts[self.len] = m.into_raw();
        self.len += 1;
        Ok(())
    }

    /// Pushes a raw pointer the caller owns.
    ///
    /// # Safety
    /// `m` is a valid mbuf the caller owns and gives to the burst; the burst is not full.
    #[inline(always)]
    pub unsafe fn push_raw(&mut self, m: *mut sys::rte_mbuf) {
        debug_assert!(self.len < N);
        self.pkts[self.len] = m;
        self.len += 1;
    }

    /// Frees every packet and returns the bytes they held: one pass over the
    /// mbufs instead of a counting pass and a freeing pass.
    #[inline(always)]
    pub fn free_all_counted(&mut self, f: &mut BulkFree) -> u64 {
        let mut bytes = 0u64;
        for &m in &self.pkts[..self.len] {
            // SAFETY: the burst owns each chain and hands it to the freer.
            bytes += unsafe { f.chain(m) } as u64;
        }
        self.len = 0;
        bytes
    }

    /// Frees every mbuf in one call.
    #[inline(always)]
    pub fn free_all(&mut self) {
        if self.len > 0 {
            // SAFETY: we own these len mbufs.
            unsafe { sys::rte_pktmbuf_free_bulk(self.pkts.as_mut_ptr(), self.len as u32) };
            self.len = 0;
        }
    }

    /// Transmits on a port queue; what the PMD did not take stays in the
    /// burst (moved to the front). Returns how many were sent.
    #[inline(always)]
    pub fn tx(&mut self, port: u16, queue: u16) -> usize {
        if self.len == 0 {
            return 0;
        }
        // SAFETY: the PMD takes ownership of the first `sent` mbufs.
        let sent =
            unsafe { sys::rte_eth_tx_burst(port, queue, self.pkts.as_mut_ptr(), self.len as u16) }
                as usize;
        self.pkts.copy_within(sent..self.len, 0);
        self.len -= sent;
        sent
    }

    /// Enqueues the whole burst into a ring, or nothing while the ring has
    /// no room for all of it (the burst then stays as it is). Whole bursts
    /// keep what a poll on the other side takes as the burst was made: a
    /// ring that took part of one would split it, and the runs of a flow in
    /// it, between two polls. Returns how many were enqueued.
    ///
    /// # Safety
    /// `ring` is a valid ring that carries mbufs.
    #[inline(always)]
    pub unsafe fn enqueue(&mut self, ring: *mut sys::rte_ring) -> usize {
        if self.len == 0 {
            return 0;
        }
        // SAFETY: the ring takes ownership of all the mbufs, or of none.
        let n = unsafe {
            sys::rte_ring_enqueue_bulk(
                ring,
                self.pkts.as_ptr() as *const *mut std::ffi::c_void,
                self.len as u32,
                std::ptr::null_mut(),
            )
        } as usize;
        debug_assert!(n == 0 || n == self.len);
        self.len -= n;
        n
    }

    /// Dequeues up to N mbufs from a ring.
    ///
    /// # Safety
    /// `ring` is a valid ring whose entries are mbufs nobody else owns.
    #[inline(always)]
    pub unsafe fn dequeue(&mut self, ring: *mut sys::rte_ring) -> usize {
        debug_assert_eq!(self.len, 0);
        // SAFETY: room for N pointers; the ring hands them over.
        let n = unsafe {
            sys::rte_ring_dequeue_burst(
                ring,
                self.pkts.as_mut_ptr() as *mut *mut std::ffi::c_void,
                N as u32,
                std::ptr::null_mut(),
            )
        };
        self.len = n as usize;
        self.len
    }

    /// Forgets the mbufs without freeing (ownership passed elsewhere).
    #[inline(always)]
    pub fn clear_moved(&mut self) {
        self.len = 0;
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        self.free_all();
    }
}

/// Calls `f` on the bytes `[off, off + len)` of the chain from `m`, buffer by
/// buffer; true when the chain held them all.
///
/// # Safety
/// `m` is null or a valid chain the caller may read (and, through the
/// pointers `f` gets, write within each buffer's `data_len`).
#[inline(always)]
pub unsafe fn for_chunks(
    mut m: *mut sys::rte_mbuf,
    mut off: usize,
    mut len: usize,
    mut f: impl FnMut(*mut u8, usize),
) -> bool {
    // SAFETY: the caller guarantees `m` is null or a readable chain; each
    // segment is read only when non-null, and off < data_len keeps the
    // pointer given to `f` inside that segment's data.
    unsafe {
        while !m.is_null() && len > 0 {
            let dl = mb::data_len(m) as usize;
            if off >= dl {
                off -= dl;
            } else {
                let n = (dl - off).min(len);
                f(mb::mtod(m).add(off), n);
                len -= n;
                off = 0;
            }
            m = mb::next(m);
        }
    }
    len == 0
}

/// Frees mbuf chains in bulk, written out in Rust so a stage can read a
/// packet's length in the same pass (rte_pktmbuf_free_bulk makes a second
/// pass over the mbufs; on a sink that pass is a measurable share).
///
/// It follows DPDK's rte_pktmbuf_prefree_seg: a segment that we own alone
/// (refcnt 1) with a direct buffer is reset (next, nb_segs) and batched for
/// `rte_mempool_put_bulk`, per pool, up to 64 at a time; any other segment
/// (shared, indirect or external buffer) goes through DPDK's own
/// `rte_pktmbuf_free_seg`, which handles refcounts and detaching.
pub struct BulkFree {
    pending: [*mut sys::rte_mbuf; 64],
    n: usize,
    pool: *mut sys::rte_mempool,
}

impl Default for BulkFree {
    fn default() -> Self {
        Self::new()
    }
}

impl BulkFree {
    pub const fn new() -> Self {
        BulkFree {
            pending: [std::ptr::null_mut(); 64],
            n: 0,
            pool: std::ptr::null_mut(),
        }
    }

    /// Frees a whole chain; returns its pkt_len. The batch's count and pool
    /// stay in registers through the walk (written back once), so that a
    /// segment's free does not wait on the last one's store of them.
    ///
    /// # Safety
    /// `m` is a valid chain head the caller owns and no longer uses.
    #[inline(always)]
    pub unsafe fn chain(&mut self, mut m: *mut sys::rte_mbuf) -> u32 {
        const NOT_DIRECT: u64 = sys::RTE_MBUF_F_INDIRECT | sys::RTE_MBUF_F_EXTERNAL;
        // SAFETY: the caller guarantees `m` is a valid chain head it owns and
        // no longer uses, so every segment is ours to read, reset and free
        // once: to its pool when we own it alone with a direct buffer, else
        // through DPDK's free, which handles refcounts and detaching.
        unsafe {
            let len = mb::pkt_len(m);
            let (mut n, mut pool) = (self.n, self.pool);
            loop {
                // Read before the segment is reset.
                let next = mb::next(m);
                if mb::refcnt(m) == 1 && mb::ol_flags(m) & NOT_DIRECT == 0 {
                    if !next.is_null() {
                        (*m).next = std::ptr::null_mut();
                    }
                    if (*m).nb_segs != 1 {
                        (*m).nb_segs = 1;
                    }
                    let p = mb::pool(m);
                    if n == self.pending.len() || (n > 0 && p != pool) {
                        (self.n, self.pool) = (n, pool);
                        self.flush();
                        n = 0;
                    }
                    pool = p;
                    self.pending[n] = m;
                    n += 1;
                } else {
                    sys::rte_pktmbuf_free_seg(m);
                }
                if next.is_null() {
                    (self.n, self.pool) = (n, pool);
                    return len;
                }
                m = next;
            }
        }
    }

    /// Returns the batched segments to their pool.
    #[inline(always)]
    pub fn flush(&mut self) {
        if self.n > 0 {
            // SAFETY: every pending pointer is a reset, unowned segment of `pool`.
            unsafe {
                sys::rte_mempool_put_bulk(
                    self.pool,
                    self.pending.as_ptr() as *const *mut std::ffi::c_void,
                    self.n as u32,
                )
            };
            self.n = 0;
        }
    }
}

impl Drop for BulkFree {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_room_for_mtu_1500_is_dpdks_default() {
        let room = crate::pool_sizing::auto_data_room(1500, super::RTE_PKTMBUF_HEADROOM).unwrap();
        assert_eq!(room as u32, dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE);
    }
}

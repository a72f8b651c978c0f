//! Packet mbuf pools: hugepage-backed, per-lcore caches, sized for one frame
//! per mbuf (see `pool_sizing`), with a private area that holds the skb.

use crate::eal::{cstring, rte_errno, strerror};
use anyhow::{bail, Result};
use dpdk_sys as sys;
use std::ptr::NonNull;

/// An `rte_mempool` of packet mbufs. Dropping it frees the pool: drop it only
/// after every port using it is closed and every mbuf is back (`in_use() == 0`).
pub struct Mempool {
    mp: NonNull<sys::rte_mempool>,
    name: String,
    size: u32,
    cache: u32,
    priv_size: u16,
    data_room: u16,
}

// SAFETY: an rte_mempool is built for concurrent use from many lcores.
unsafe impl Send for Mempool {}
// SAFETY: rte_mempool operations are safe from many lcores at once, and the
// rest of Mempool is never mutated after creation.
unsafe impl Sync for Mempool {}

/// The pool `Mempool::create` makes.
#[derive(Debug, Clone)]
pub struct PoolParams {
    /// The pool's name (unique in the EAL).
    pub name: String,
    /// mbufs in the pool.
    pub elements: u32,
    /// mbufs each lcore caches (0: none).
    pub cache: u32,
    /// Private-area bytes per mbuf, a multiple of 8 (`skb::PRIV_SIZE` or
    /// more for pools that carry skbs).
    pub priv_size: u16,
    /// Buffer bytes per mbuf, headroom included.
    pub data_room: u16,
    /// NUMA socket to allocate on (`SOCKET_ID_ANY` is -1).
    pub socket: i32,
}

impl Mempool {
    /// Creates the pool in EAL memory; fails with what to do when memory is short.
    pub fn create(p: &PoolParams) -> Result<Mempool> {
        let cname = cstring("pool name", &p.name)?;
        if !(p.priv_size as usize).is_multiple_of(sys::RTE_MBUF_PRIV_ALIGN as usize) {
            bail!(
                "mbuf private area {} is not a multiple of {}",
                p.priv_size,
                sys::RTE_MBUF_PRIV_ALIGN
            );
        }
        // SAFETY: valid C string; DPDK validates the numbers.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                p.elements,
                p.cache,
                p.priv_size,
                p.data_room,
                p.socket,
            )
        };
        let Some(mp) = NonNull::new(mp) else {
            let e = rte_errno();
            let bytes =
                crate::pool_sizing::pool_bytes(p.elements, p.priv_size as u32, p.data_room as u32);
            bail!(
                "cannot create mbuf pool '{}' ({} mbufs x {} B data room, about {} MiB on socket {}): {} \
                 (not enough hugepage memory? see `grorx hugepages`, or give EAL more with -- -m N)",
                p.name,
                p.elements,
                p.data_room,
                bytes >> 20,
                p.socket,
                strerror(e)
            );
        };
        Ok(Mempool {
            mp,
            name: p.name.clone(),
            size: p.elements,
            cache: p.cache,
            priv_size: p.priv_size,
            data_room: p.data_room,
        })
    }

    /// The raw `rte_mempool`.
    #[doc(hidden)]
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.mp.as_ptr()
    }
    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// mbufs in the pool.
    pub fn size(&self) -> u32 {
        self.size
    }
    /// mbufs each lcore caches.
    pub fn cache(&self) -> u32 {
        self.cache
    }
    /// Private-area bytes per mbuf.
    pub fn priv_size(&self) -> u16 {
        self.priv_size
    }
    /// Buffer bytes per mbuf, headroom included.
    pub fn data_room(&self) -> u16 {
        self.data_room
    }

    /// mbufs available (ring plus every lcore cache).
    pub fn available(&self) -> u32 {
        // SAFETY: valid pool.
        unsafe { sys::rte_mempool_avail_count(self.mp.as_ptr()) }
    }

    /// mbufs out of the pool right now.
    pub fn in_use(&self) -> u32 {
        // SAFETY: valid pool.
        unsafe { sys::rte_mempool_in_use_count(self.mp.as_ptr()) }
    }

    /// Calls `f` once per mbuf of the pool (taken or not): for one-time
    /// initialisation of buffer contents before traffic starts.
    #[doc(hidden)]
    pub fn for_each_mbuf<F: FnMut(*mut sys::rte_mbuf)>(&self, mut f: F) {
        unsafe extern "C" fn cb<F: FnMut(*mut sys::rte_mbuf)>(
            _mp: *mut sys::rte_mempool,
            arg: *mut std::ffi::c_void,
            obj: *mut std::ffi::c_void,
            _idx: u32,
        ) {
            // SAFETY: arg is the &mut F passed below; objects of a pktmbuf pool are mbufs.
            let f = unsafe { &mut *(arg as *mut F) };
            f(obj as *mut sys::rte_mbuf);
        }
        // SAFETY: callback and argument outlive the call.
        unsafe {
            sys::rte_mempool_obj_iter(self.mp.as_ptr(), Some(cb::<F>), &mut f as *mut F as *mut _);
        }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: the owner guarantees nothing uses the pool any more.
        unsafe { sys::rte_mempool_free(self.mp.as_ptr()) }
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mempool({}: {} x {} B, cache {}, priv {})",
            self.name, self.size, self.data_room, self.cache, self.priv_size
        )
    }
}

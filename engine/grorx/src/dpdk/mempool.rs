//! Packet mbuf pools: hugepage-backed, per-lcore caches, sized for one frame
//! per mbuf (see `pool_sizing`), with a private area that holds the skb.

use super::eal::{cstring, rte_errno, strerror};
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

    /// The pool driver's own count of its ring (what
    /// rte_mempool_ops_get_count does; the shared library does not export it).
    fn ring_count(&self) -> Option<u64> {
        let mp = self.mp.as_ptr();
        // SAFETY: valid pool; its ops_index names the driver registered for
        // it, whose table lives as long as the process.
        let count = unsafe { (*sys::rte_mempool_get_ops((*mp).ops_index)).get_count }?;
        // SAFETY: the count function of the pool's own driver, given the pool.
        Some(unsafe { count(mp) } as u64)
    }

    /// Calls `f` with each mbuf sitting in an lcore cache of the pool.
    fn for_each_cached(&self, mut f: impl FnMut(*mut std::ffi::c_void)) {
        let mp = self.mp.as_ptr();
        // SAFETY: valid pool; these fields are set at creation and never change.
        let (cache_size, caches) = unsafe { ((*mp).cache_size, (*mp).local_cache) };
        if cache_size == 0 || caches.is_null() {
            return;
        }
        for i in 0..sys::RTE_MAX_LCORE as usize {
            // SAFETY: a pool with a cache has RTE_MAX_LCORE of them at
            // `local_cache` (rte_mempool_create_empty); read volatile, as
            // another lcore may have written them; `len` is bounded by the
            // array it counts.
            unsafe {
                let c = caches.add(i);
                let len = std::ptr::addr_of!((*c).len).read_volatile() as usize;
                let objs = std::ptr::addr_of!((*c).objs) as *const *mut std::ffi::c_void;
                for j in 0..len.min((*c).objs.len()) {
                    f(objs.add(j).read_volatile());
                }
            }
        }
    }

    /// mbufs in the pool's ring and every lcore cache, not capped at the
    /// pool's size as `available` is (DPDK caps it). Above `size` means an
    /// mbuf came back twice, but a leak and a double free cancel out here:
    /// `audit` tells them apart.
    pub fn available_uncapped(&self) -> u64 {
        let Some(mut n) = self.ring_count() else {
            return self.available() as u64;
        };
        self.for_each_cached(|_| n += 1);
        n
    }

    /// The pool's count from `available_uncapped`: safe at any time, but a
    /// leak and a double free in the same pool cancel out.
    pub fn usage(&self, role: &str) -> PoolUsage {
        let available = self.available_uncapped();
        let size = self.size as u64;
        PoolUsage {
            name: self.name.clone(),
            role: role.to_string(),
            size: self.size,
            available,
            in_use: size.saturating_sub(available),
            freed_twice: available.saturating_sub(size),
            taken_back: 0,
        }
    }

    /// The pool's count mbuf by mbuf: each of its mbufs looked for in its
    /// ring (taken out and put back) and its lcore caches. One missing is
    /// out (leaked); one found twice was freed twice; neither hides the
    /// other. A double free into a full ring is lost by DPDK, not stored:
    /// that one leaves the pool whole and is not seen.
    ///
    /// `kept_by_driver` is how many mbufs a closed driver may have kept
    /// without giving them back (net_af_xdp's fill rings: see
    /// [`crate::port::kept_at_close`]): up to that many missing mbufs that
    /// are as allocation left them (never filled) are put back and counted
    /// as `taken_back`, not as out.
    ///
    /// # Safety
    /// Nothing allocates from or frees into the pool during the call (a
    /// run's teardown: ports closed, workers stopped), and no closed driver
    /// uses the mbufs it kept.
    pub unsafe fn audit(&self, role: &str, kept_by_driver: u64) -> PoolUsage {
        let mp = self.mp.as_ptr();
        let mut seen: std::collections::HashMap<usize, u32> =
            std::collections::HashMap::with_capacity(self.size as usize);
        let n = self.ring_count().unwrap_or(0) as usize;
        let mut objs: Vec<*mut std::ffi::c_void> = vec![std::ptr::null_mut(); n];
        if n > 0 {
            // SAFETY: room for n pointers; n is what the ring holds, and
            // nobody else takes from it (the caller's promise).
            let r = unsafe { sys::rte_mempool_ops_dequeue_bulk(mp, objs.as_mut_ptr(), n as u32) };
            if r != 0 {
                return self.usage(role);
            }
            for &o in &objs {
                *seen.entry(o as usize).or_default() += 1;
            }
            // SAFETY: the same n pointers back into the ring they came from,
            // which has room for them (it held them a moment ago).
            unsafe { sys::rte_mempool_ops_enqueue_bulk(mp, objs.as_ptr(), n as u32) };
        }
        self.for_each_cached(|o| *seen.entry(o as usize).or_default() += 1);
        let mut missing = 0u64;
        let mut back: Vec<*mut sys::rte_mbuf> = Vec::new();
        self.for_each_mbuf(|m| {
            if !seen.contains_key(&(m as usize)) {
                // SAFETY: an mbuf of this pool that nobody uses any more
                // (the caller's promise): its header is plain memory.
                if (back.len() as u64) < kept_by_driver && unsafe { super::mbuf::untouched(m) } {
                    back.push(m);
                } else {
                    missing += 1;
                }
            }
        });
        if !back.is_empty() {
            // SAFETY: each is an mbuf of this pool, allocated and never
            // filled (one segment, refcnt 1), that no one holds: freeing
            // it once returns it.
            unsafe { sys::rte_pktmbuf_free_bulk(back.as_mut_ptr(), back.len() as u32) };
        }
        PoolUsage {
            name: self.name.clone(),
            role: role.to_string(),
            size: self.size,
            available: seen.values().map(|&c| c as u64).sum::<u64>() + back.len() as u64,
            in_use: missing,
            freed_twice: seen.values().map(|&c| c as u64 - 1).sum(),
            taken_back: back.len() as u64,
        }
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

/// One pool's count: what a run's teardown reports for every pool it made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolUsage {
    /// The mempool's name.
    pub name: String,
    /// What the pool is for: `rx` (RX queues, the generator), `head` (copy
    /// mode's heads) or `output` (an output port's header mbufs and
    /// software segments).
    pub role: String,
    /// mbufs the pool was created with.
    pub size: u32,
    /// mbufs back in the pool (ring and lcore caches), not capped at `size`.
    pub available: u64,
    /// mbufs not back: `size - available` (0 when more came back).
    pub in_use: u64,
    /// mbufs that came back once too often (a double free): `available -
    /// size` (0 when fewer came back). Never netted against `in_use`.
    pub freed_twice: u64,
    /// mbufs a driver kept at close, never filled, that teardown put back
    /// (counted in `available`, not in `in_use`).
    pub taken_back: u64,
}

/// The names of every mempool EAL holds now (a pool a run kept because
/// mbufs were out stays among them).
#[doc(hidden)]
pub fn names_in_eal() -> Vec<String> {
    unsafe extern "C" fn cb(mp: *mut sys::rte_mempool, arg: *mut std::ffi::c_void) {
        // SAFETY: arg is the Vec passed below; mp is a live pool whose name
        // is NUL-terminated (rte_mempool_create_empty).
        unsafe {
            let v = &mut *(arg as *mut Vec<String>);
            let name = std::ffi::CStr::from_ptr((*mp).name.as_ptr());
            v.push(name.to_string_lossy().into_owned());
        }
    }
    let mut v: Vec<String> = Vec::new();
    // SAFETY: the callback and its argument outlive the call.
    unsafe { sys::rte_mempool_walk(Some(cb), &mut v as *mut Vec<String> as *mut _) };
    v
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

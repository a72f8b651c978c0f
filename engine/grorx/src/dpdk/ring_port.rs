//! A ring-backed ethdev port (`rte_eth_from_rings`): what the embedded traffic
//! source feeds. RX queue q dequeues from ring q, so the engine's workers go
//! through the real `rte_eth_rx_burst` path. TX queues get rings of their own
//! (nothing reads them; whatever a stage sends there is freed at teardown).

use super::eal::{cstring, rte_errno, strerror};
use super::mbuf::{rte_mbuf, Burst};
use anyhow::{bail, Result};
use dpdk_sys as sys;
use std::sync::atomic::{AtomicU32, Ordering};

/// A ring pointer that may cross to the lcore that uses it.
#[derive(Clone, Copy, Debug)]
pub struct RingPtr(pub *mut sys::rte_ring);
// SAFETY: rte_rings are made for use from other lcores; each one here has a
// single producer and a single consumer, as its flags say.
unsafe impl Send for RingPtr {}
// SAFETY: sharing the pointer only copies it; each ring still has a single
// producer and a single consumer, as its flags say.
unsafe impl Sync for RingPtr {}

/// A ring with one consumer (`RING_F_SC_DEQ`); without it, any number.
pub const SINGLE_CONSUMER: u32 = sys::RING_F_SC_DEQ;
/// A ring with one producer (`RING_F_SP_ENQ`); without it, any number.
pub const SINGLE_PRODUCER: u32 = sys::RING_F_SP_ENQ;

impl RingPtr {
    /// `rte_ring_create`: a ring of `size` slots (a power of two) on
    /// `socket` (-1: any); None when DPDK cannot make it (`rte_errno` says
    /// why).
    pub fn create(name: &std::ffi::CStr, size: u32, socket: i32, flags: u32) -> Option<RingPtr> {
        // SAFETY: a valid NUL-terminated name; DPDK checks the rest.
        let r = unsafe { sys::rte_ring_create(name.as_ptr(), size, socket, flags) };
        (!r.is_null()).then_some(RingPtr(r))
    }

    /// Frees the ring (what it still holds is not freed).
    ///
    /// # Safety
    /// Nothing uses the ring any more, nor will.
    pub unsafe fn free(self) {
        // SAFETY: the ring is ours and unused (the caller's promise).
        unsafe { sys::rte_ring_free(self.0) }
    }

    /// Enqueues the first of `pkts` the ring has room for; returns how many
    /// it took (it owns them from then on).
    ///
    /// # Safety
    /// The ring carries mbufs, and takes several producers or the caller is
    /// its only one; `pkts` are chains the caller owns.
    #[inline(always)]
    pub unsafe fn enqueue_burst(self, pkts: &[*mut rte_mbuf]) -> usize {
        // SAFETY: the caller's promise; the ring copies the pointers it takes.
        unsafe {
            sys::rte_ring_enqueue_burst(
                self.0,
                pkts.as_ptr() as *const *mut std::ffi::c_void,
                pkts.len() as u32,
                std::ptr::null_mut(),
            ) as usize
        }
    }
}

pub struct RingPort {
    pub port_id: u16,
    pub name: String,
    rx: Vec<RingPtr>,
    tx: Vec<RingPtr>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

fn ring(name: &str, size: u32, socket: i32, flags: u32) -> Result<RingPtr> {
    let c = cstring("ring name", name)?;
    let Some(r) = RingPtr::create(&c, size, socket, flags) else {
        bail!(
            "cannot create ring {name} ({size} slots): {}",
            strerror(rte_errno())
        );
    };
    Ok(r)
}

impl RingPort {
    /// A port with `queues` RX and TX queues, each ring `ring_size` slots
    /// (rounded up to a power of two).
    pub fn create(queues: u16, ring_size: u32, socket: i32) -> Result<RingPort> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("grorx_gen{n}");
        let size = ring_size.max(64).next_power_of_two();
        let mut port = RingPort {
            port_id: u16::MAX,
            name: name.clone(),
            rx: Vec::new(),
            tx: Vec::new(),
        };
        // SP/SC: one generator lcore produces, one worker lcore consumes.
        let flags = SINGLE_PRODUCER | SINGLE_CONSUMER;
        for q in 0..queues {
            port.rx
                .push(ring(&format!("grx{n}r{q}"), size, socket, flags)?);
            port.tx
                .push(ring(&format!("grx{n}t{q}"), size, socket, flags)?);
        }
        let cname = cstring("port name", &name)?;
        let rx: Vec<*mut sys::rte_ring> = port.rx.iter().map(|r| r.0).collect();
        let tx: Vec<*mut sys::rte_ring> = port.tx.iter().map(|r| r.0).collect();
        // SAFETY: the arrays hold `queues` valid rings, which outlive the port
        // (RingPort frees them after the port is closed).
        let id = unsafe {
            sys::rte_eth_from_rings(
                cname.as_ptr(),
                rx.as_ptr(),
                queues as u32,
                tx.as_ptr(),
                queues as u32,
                socket.max(0) as u32,
            )
        };
        if id < 0 {
            bail!(
                "cannot create the embedded ring port: {}",
                strerror(rte_errno())
            );
        }
        port.port_id = id as u16;
        Ok(port)
    }

    /// The ring RX queue `q` reads from (the generator writes into it).
    pub fn rx_ring(&self, q: usize) -> RingPtr {
        self.rx[q]
    }

    pub fn queues(&self) -> usize {
        self.rx.len()
    }

    /// Frees every mbuf still sitting in a ring; returns how many. Call after
    /// the port is stopped and the generator has returned.
    pub fn drain_and_free(&self) -> u64 {
        let mut n = 0;
        let mut b: Burst<64> = Burst::new();
        for r in self.rx.iter().chain(&self.tx) {
            loop {
                // SAFETY: our own ring of mbufs; its port is stopped.
                let k = unsafe { b.dequeue(r.0) };
                if k == 0 {
                    break;
                }
                n += k as u64;
                b.free_all();
            }
        }
        n
    }
}

impl Drop for RingPort {
    fn drop(&mut self) {
        self.drain_and_free();
        for r in self.rx.iter().chain(&self.tx) {
            // SAFETY: the port using the ring is closed (the owner drops the
            // Port first); nothing else holds the ring.
            unsafe { r.free() };
        }
    }
}

/// A mempool pointer that may cross to the generator's lcore.
#[derive(Clone, Copy, Debug)]
pub struct PoolPtr(pub *mut sys::rte_mempool);
// SAFETY: mempools are made for use from any lcore.
unsafe impl Send for PoolPtr {}

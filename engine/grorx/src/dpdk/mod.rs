//! DPDK, wrapped: EAL and its arguments, log and lcores, mbufs, mempools and
//! the ring port. Every file outside this folder that names `dpdk-sys` is
//! listed, with why, in `scripts/check-modules.py`.

#[doc(hidden)]
pub mod eal;
#[doc(hidden)]
pub mod eal_args;
mod eal_log;
#[cfg(feature = "measure")]
pub mod gro;
#[doc(hidden)]
pub mod lcores;
#[doc(hidden)]
pub mod mbuf;
pub mod mempool;
#[doc(hidden)]
pub mod ring_port;
#[doc(hidden)]
pub mod tx;

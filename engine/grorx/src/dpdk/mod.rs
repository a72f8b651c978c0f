//! DPDK, wrapped: EAL and its arguments, log and lcores, ethdev calls, mbufs
//! and the transmit loop, mempools, the ring port and (for the measurement
//! stages) rte_gro. Every file outside this folder that names `dpdk-sys` is
//! listed, with why, in `scripts/check-modules.py`.

#[doc(hidden)]
pub mod eal;
#[doc(hidden)]
pub mod eal_args;
mod eal_log;
#[doc(hidden)]
pub mod ethdev;
#[cfg(feature = "measure")]
#[doc(hidden)]
pub mod gro;
#[doc(hidden)]
pub mod lcores;
#[doc(hidden)]
pub mod mbuf;
pub mod mempool;
#[doc(hidden)]
pub mod ring_port;
#[doc(hidden)]
pub mod telemetry;
#[doc(hidden)]
pub mod tx;

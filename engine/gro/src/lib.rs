//! grorx's GRO core: software generic receive offload for TCP over IPv4 and
//! IPv6 (VLAN and QinQ included), one instance per RX queue, under Linux's
//! merge rules. No DPDK: a packet is anything that implements [`GroBuf`], so
//! the core is tested, fuzzed and benchmarked without EAL.
//!
//! - [`wire`]: typed views of Ethernet, IPv4/IPv6 and TCP headers.
//! - [`csum`]: one's-complement sums and checksum helpers.
//! - [`Gro`]: the merge decision, the bounded per-queue table, flushes and
//!   their reasons ([`GroStats`]).
//! - [`hist`]: distributions counted on the hot path.
//! - [`setting`]: the settings a caller may get wrong, and the error that
//!   names one ([`SettingError`]).
//! - `traffic` (feature `traffic`): valid TCP flows as frames, for tests,
//!   benchmarks and the engine's generator.
//! - `selftest` (feature `traffic`): Linux's GRO selftest cases as frames,
//!   with the payload sizes Linux delivers.

#![warn(missing_docs)]

pub mod csum;
pub mod hist;
#[cfg(any(test, feature = "traffic"))]
pub mod selftest;
pub mod setting;
#[cfg(any(test, feature = "traffic"))]
pub mod traffic;
pub mod wire;

mod gro;
pub use gro::*;
pub use setting::{Setting, SettingError};

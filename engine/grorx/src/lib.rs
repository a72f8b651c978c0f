//! grorx: a DPDK poll-mode receive engine with per-queue software GRO.
//!
//! The data path, one way: port RX queue -> worker lcore -> stage (sink,
//! capture, forward) -> buffers back to their pool in bulk.
//!
//! - DPDK side: [`eal`], [`mempool`], [`mbuf`], [`port`], [`ring_port`].
//! - Pure logic (no EAL): [`csum`], [`traffic`], [`pool_sizing`],
//!   [`lcores`], [`eal_args`], [`port_spec`].
//! - The engine: [`worker`] (per-queue poll loop), [`gen`] (the embedded
//!   source), [`run`] (one run, start to report), [`stats`], [`report`].

#[cfg(feature = "measure")]
pub mod baseline;
pub mod capture;
pub mod eal;
pub mod eal_args;
pub mod forward;
pub mod gen;
pub mod hist;
pub mod lcores;
pub mod mbuf;
#[cfg(feature = "measure")]
pub mod measure;
pub mod mempool;
pub mod pcap;
pub mod pool_sizing;
pub mod port;
pub mod port_spec;
pub mod report;
pub mod ring_port;
pub mod run;
pub mod skb;
pub mod stage;
pub mod stats;
pub mod telemetry;
pub mod worker;

// The GRO core, header views, checksums and test traffic live in grorx-gro
// (no DPDK); the engine uses them under these names.
pub use grorx_gro as gro;
pub use grorx_gro::{csum, traffic, wire};

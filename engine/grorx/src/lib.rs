//! grorx: a DPDK poll-mode receive engine with per-queue software GRO, as a
//! library for NFV datapaths and packet sinks.
//!
//! The data path runs one way: port RX queue -> worker lcore -> skb built in
//! the mbuf's private area -> the queue's GRO table -> the queue's [`Stage`]
//! -> transmit or free, buffers back to their pool in bulk. Every RX queue
//! has its own GRO table and stage on the lcore that polls it: nothing is
//! shared, nothing is locked.
//!
//! An embedder describes a run with [`RunOptions`] (ports, queues, cores,
//! pools, GRO settings, headroom: the knobs of the `grorx` command, grouped
//! by what they configure; a setting refused names itself, [`Setting`]),
//! writes a
//! [`Stage`] that decides per packet (transmit on a [`TxQueue`], consume or
//! drop through [`Ctx`], or keep the [`Skb`]), and starts it with
//! [`start_with`]. The [`Running`] handle serves live [`Stats`], stops the
//! run, and `wait` gives the final [`Report`], in which every mbuf is
//! accounted. A minimal stage, on the embedded TCP generator (no NIC needed):
//!
//! ```
//! use grorx::{start_with, Ctx, EalSetup, RunOptions, Skb, Stage};
//!
//! /// Counts the TCP payload bytes GRO delivers, then frees each packet.
//! struct PayloadBytes(u64);
//!
//! impl Stage for PayloadBytes {
//!     fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
//!         if let Some(tcp) = skb.tcp() {
//!             self.0 += (skb.len() - tcp.payload as usize) as u64;
//!         }
//!         ctx.consume(skb);
//!     }
//! }
//!
//! let opts = RunOptions {
//!     duration: Some(0.5),
//!     eal: EalSetup::Start { user_args: vec![], no_huge: true },
//!     ..RunOptions::default()
//! };
//! let running = start_with(&opts, |_queue| Ok(PayloadBytes(0)))?;
//! let report = running.wait()?;
//! assert!(report.rx_packets > 0);
//! assert_eq!(report.mbufs_leaked, 0);
//! grorx::shutdown();
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! The built-in stages use the same trait: [`Sink`], the capture writer and
//! the forwarder (`RunOptions::stage`'s `capture` and `forward`, started with
//! [`start`]). The GRO core itself, without DPDK, is the `grorx-gro` crate,
//! re-exported here as [`gro`] (with [`wire`] header views and [`csum`]).
//!
//! Modules marked hidden in these docs (mbuf, ring, worker, port set-up,
//! EAL arguments, telemetry, measurement stages) are the engine's own, for
//! its tests and the `grorx` command: they hand out raw DPDK pointers and
//! are not part of the API.

#![warn(missing_docs)]

// The engine's folders, one layer to a group, the bottom first: a module
// imports from its own layer or below (scripts/check-modules.py holds the
// order; docs/design.md draws it).

// No DPDK: buffer sizing, what the workers count, the settings' names.
mod counters;
#[doc(hidden)]
pub mod pool_sizing;
pub mod setting;

// DPDK, wrapped.
mod dpdk;

// A port, its spec and gate; the skb built in an mbuf.
pub mod port;
pub mod skb;

// What stages and the source use: the capture writer, the forwarder, the
// generator.
#[doc(hidden)]
pub mod capture;
pub mod forward;
pub mod gen;

// The Stage trait and the built-in stages; the poll loop that runs them.
pub mod stage;
#[doc(hidden)]
pub mod worker;

// Measurement-only stages.
#[cfg(feature = "measure")]
#[doc(hidden)]
pub mod measure;

// What a run reports; a run, start to finish.
pub mod report;
pub mod run;

// Modules of the folders under the flat paths the command, the examples
// and the tests use.
#[doc(hidden)]
pub use capture::pcap;
pub use counters::{hist, stats};
pub use dpdk::mempool;
#[doc(hidden)]
pub use dpdk::{eal, eal_args, lcores, mbuf, ring_port};
#[cfg(feature = "measure")]
#[doc(hidden)]
pub use measure::baseline;
#[doc(hidden)]
pub use port::gate;
pub use port::spec as port_spec;
#[doc(hidden)]
pub use report::telemetry;

// The GRO core, header views, checksums and test traffic live in grorx-gro
// (no DPDK); the engine uses them under these names.
pub use grorx_gro as gro;
pub use grorx_gro::{csum, traffic, wire};

pub use gen::GenConfig;
pub use gro::{CsumMode, GroConfig};
pub use port_spec::PortSpec;
pub use report::Report;
pub use run::{
    run, shutdown, start, start_with, EalSetup, ForwardOptions, PoolOptions, PoolScope, RunOptions,
    Running, RxOptions, SkbOptions, StageOptions, Stats, Stopper,
};
pub use setting::{Setting, SettingError};
pub use skb::Skb;
pub use stage::{Ctx, QueueSetup, Sink, Stage, TxQueue};

//! One run of the engine, start to finish, in the order it happens:
//! options checked (`options`), hugepages and EAL (`startup`), ports and
//! pools (`ports`), a stage per RX queue and the workers on their lcores
//! (`launch`), then a [`Running`] handle: live stats, the RX ports' links
//! (`link`: a port whose link is down is not polled), stop conditions
//! (`watch`), a clean stop, the report (`collect`), and teardown with every
//! mbuf accounted.
//!
//! ```no_run
//! use grorx::run::{self, RunOptions};
//! use grorx::stage::{Ctx, Stage};
//! use grorx::skb::Skb;
//!
//! /// Counts packets and frees them.
//! struct Count(u64);
//!
//! impl Stage for Count {
//!     fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
//!         self.0 += 1;
//!         ctx.consume(skb);
//!     }
//! }
//!
//! let opts = RunOptions { duration: Some(1.0), ..RunOptions::default() };
//! let running = run::start_with(&opts, |_queue| Ok(Count(0)))?;
//! let report = running.wait()?;
//! assert_eq!(report.mbufs_leaked, 0);
//! # Ok::<(), anyhow::Error>(())
//! ```

mod collect;
mod handle;
mod instance;
mod launch;
mod link;
mod options;
mod ports;
mod startup;
mod watch;

pub use handle::{QueueStats, Running, Stats, Stopper};
pub use link::LinkStats;
pub use options::{
    EalSetup, ForwardOptions, PoolOptions, PoolScope, RunOptions, RxOptions, SkbOptions,
    StageOptions, Topology, PRIV_SIZE,
};

use crate::dpdk::eal::{self, Eal};
use crate::forward::ForwardCounters;
use crate::report::Report;
use crate::stage::{CaptureStage, ForwardStage, QueueSetup, Sink, Stage};
use anyhow::{Context, Result};
use std::sync::Arc;

/// Starts a run with a stage of the caller's per RX queue: `make` is called
/// once per queue, on this thread, before any worker starts; each stage then
/// moves to the lcore that polls its queue. Returns the handle at once.
pub fn start_with<S, F>(opts: &RunOptions, mut make: F) -> Result<Running>
where
    S: Stage,
    F: FnMut(&QueueSetup) -> Result<S>,
{
    if opts.stage.capture.is_some() || opts.stage.forward.is_some() {
        anyhow::bail!(
            "capture and forward are the built-in stages of `start`: a run with a stage of its \
             own takes neither (its output ports are `stage.outputs`)"
        );
    }
    let p = handle::Prepared::new(opts)?;
    p.launch(&mut |q, _| make(q), None)
}

/// Starts a run with the built-in stage the options name: forward
/// (`stage.forward`), capture (`stage.capture`), or the sink.
pub fn start(opts: &RunOptions) -> Result<Running> {
    let mut p = handle::Prepared::new(opts)?;
    #[cfg(feature = "measure")]
    if let Some(m) = opts.stage.measure {
        return start_measure(p, m);
    }
    if let Some(cap) = p.capture()? {
        let tx = cap.tx();
        return p.launch(&mut |_, _| Ok(CaptureStage::new(tx.clone())), Some(cap));
    }
    if let Some(f) = &opts.stage.forward {
        let mut counters: Vec<Arc<ForwardCounters>> = Vec::new();
        let mut make = |q: &QueueSetup, ports: &ports::Ports| {
            let out = f.output_of(ports.rx_index(q.port));
            let c = Arc::new(ForwardCounters::default());
            counters.push(c.clone());
            Ok(ForwardStage::new(q.forwarder(out, f.encap)?, c))
        };
        let mut running = p.launch(&mut make, None)?;
        running.set_forward_counters(counters);
        return Ok(running);
    }
    p.launch(&mut |_, _| Ok(Sink), None)
}

/// A measurement-only stage (feature `measure`) in place of the sink.
#[cfg(feature = "measure")]
fn start_measure(mut p: handle::Prepared, m: crate::measure::Measure) -> Result<Running> {
    use crate::measure::{FreePerPacket, Measure, RteGroStage};
    match m {
        Measure::FreePerPacket => p.launch(&mut |_, _| Ok(FreePerPacket), None),
        Measure::RteGro => {
            let cap = p.capture()?;
            let tx = cap.as_ref().map(crate::capture::Capture::tx);
            let mut make = |_: &QueueSetup, _: &ports::Ports| {
                Ok(RteGroStage::new(tx.clone().map(CaptureStage::new)))
            };
            let mut running = p.launch(&mut make, cap)?;
            running.set_gro_elsewhere();
            Ok(running)
        }
    }
}

/// Runs until a stop condition (duration, a one-shot replay consumed, the
/// generator's count) with the built-in stage; returns the report.
pub fn run(opts: &RunOptions) -> Result<Report> {
    start(opts)?.wait()
}

/// Stops EAL, removes the runtime directory of the instance name this
/// process claimed (left alone when the user's own `--file-prefix` put EAL
/// elsewhere) and lets the name go. Call once, at exit.
pub fn shutdown() {
    if Eal::get().is_none() {
        instance::release(true);
        return;
    }
    let dir = eal::runtime_dir();
    // SAFETY: no lcore is running a job any more; EAL is not used after this.
    unsafe { eal::cleanup() };
    if let (Some(d), Some(ours)) = (dir, instance::claimed_dir()) {
        if d == ours {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    instance::release(false);
}

/// EAL as the options want it: started here, or the one already running.
fn eal_for(opts: &RunOptions) -> Result<(&'static Eal, String)> {
    match &opts.eal {
        options::EalSetup::Start { user_args, no_huge } => {
            startup::start_eal(opts, user_args, *no_huge)
        }
        options::EalSetup::Existing => Ok((
            Eal::get().context("EAL is not running in this process")?,
            "hugepages: as the running EAL has them".to_string(),
        )),
    }
}

//! One run of the engine, start to finish, in the order it happens:
//! options checked (`options`), hugepages and EAL (`startup`), ports and
//! pools (`ports`), workers on their lcores (`launch`), the main lcore
//! watching until a stop condition (`watch`), a clean stop, the report
//! (`collect`), and teardown with every mbuf accounted.

mod collect;
mod launch;
mod options;
mod ports;
mod startup;
mod watch;

pub use options::{EalSetup, PoolScope, RunOptions, PRIV_SIZE};

use crate::eal::{self, Eal};
use crate::report::Report;
use anyhow::{Context, Result};
use dpdk_sys as sys;

/// Runs the engine until a stop condition; returns the report.
pub fn run(opts: &RunOptions) -> Result<Report> {
    opts.validate()?;
    // Files named by --port are read before EAL starts.
    let replays = ports::pcap_replays(opts)?;
    let opts = &RunOptions {
        cached_frames: replays.cached.iter().copied().max().unwrap_or(0),
        ..opts.clone()
    };
    let (eal, hugepages) = match &opts.eal {
        EalSetup::Start { user_args, no_huge } => startup::start_eal(opts, user_args, *no_huge)?,
        EalSetup::Existing => (
            Eal::get().context("EAL is not running in this process")?,
            "hugepages: as the running EAL has them".to_string(),
        ),
    };
    if opts.live {
        eprintln!("{hugepages}");
    }
    let lcores = launch::Lcores::choose(eal, opts)?;
    let ports = ports::Ports::setup(opts, lcores.count, replays)?;
    let mut running = launch::Running::start(eal, opts, &lcores, &ports)?;
    let watched = watch::until_stop(eal, opts, &ports, &running);
    let capture = running.stop();
    let duration_s = running.started.elapsed().as_secs_f64();
    let (stop_reason, hists) = watched?;
    let capture = capture.map(|c| c.finish()).transpose()?;
    let finished = collect::Finished {
        stop_reason,
        duration_s,
        hists,
        capture,
        hugepages,
    };
    let mut report = collect::report(eal, opts, &ports, &running, finished);
    let (freed, leaked) = ports.teardown();
    report.freed_at_teardown = freed;
    report.mbufs_leaked = leaked;
    if leaked > 0 {
        report.notes.push(format!(
            "{leaked} mbuf(s) not back in their pool: the pool is kept (not freed)"
        ));
    }
    Ok(report)
}

/// Stops EAL and removes its runtime directory (a unique prefix per run
/// would otherwise leave one behind each time). Call once, at exit.
pub fn shutdown() {
    if Eal::get().is_none() {
        return;
    }
    let dir = eal::runtime_dir();
    // SAFETY: no lcore is running a job any more; EAL is not used after this.
    unsafe { sys::rte_eal_cleanup() };
    if let Some(d) = dir {
        if d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("grorx-"))
        {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

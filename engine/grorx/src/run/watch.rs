//! The main lcore while workers run: the monitor (live line, JSON stream,
//! HDR log), DPDK telemetry, and the stop conditions.

use super::launch::Running;
use super::options::RunOptions;
use super::ports::Ports;
use crate::eal::Eal;
use crate::hist::{HdrLog, QueueHist};
use crate::monitor::{Monitor, MonitorConf, SlotInfo};
use crate::signal;
use crate::telemetry;
use anyhow::Result;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Watches until a stop condition; returns why, and each queue's histograms.
pub(super) fn until_stop(
    eal: &Eal,
    opts: &RunOptions,
    ports: &Ports,
    r: &Running,
) -> Result<(String, Vec<QueueHist>)> {
    let mut slots = vec![
        SlotInfo {
            port: 0,
            queue: 0,
            lcore: 0
        };
        r.queue_list.len()
    ];
    for a in &r.plan {
        for q in &a.queues {
            slots[q.slot] = SlotInfo {
                port: q.port,
                queue: q.queue,
                lcore: a.lcore,
            };
        }
    }
    // Live state over DPDK telemetry (/grorx/stats, /grorx/queues, /grorx/gro)
    // until this guard drops, early returns included.
    if let Err(e) = telemetry::register() {
        eprintln!("note: {e:#}");
    }
    let _telemetry = telemetry::live_scope(telemetry::Live::new(
        eal,
        &r.plan,
        r.counters.clone(),
        ports
            .slots
            .iter()
            .map(|s| (s.port.id, s.port.name.clone()))
            .collect(),
        r.started,
        opts.gro.is_some(),
    ));
    let mut monitor = Monitor::new(
        &r.counters,
        &r.hists,
        slots,
        ports.slots.iter().map(|s| s.port.id).collect(),
        MonitorConf {
            live: opts.live,
            verbose: opts.verbose,
            gro: opts.gro.is_some() || opts.rte_gro,
            json_every: opts.json_interval.map(Duration::from_secs_f64),
            hdr: match &opts.hdr_log {
                Some(p) => Some(HdrLog::create(p)?),
                None => None,
            },
        },
        r.started,
    );
    let mut last_progress = r.started;
    let mut last_seen = 0u64;
    let reason = loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        let pk = r.rx_total();
        if pk != last_seen {
            (last_seen, last_progress) = (pk, now);
        }
        if let Some(why) = stop_reason(opts, ports, r, now, now - last_progress, pk) {
            break why;
        }
        monitor.tick(now)?;
    };
    Ok((reason.to_string(), monitor.finish()?))
}

/// Why the run should stop now, if it should.
fn stop_reason(
    opts: &RunOptions,
    ports: &Ports,
    r: &Running,
    now: Instant,
    idle: Duration,
    received: u64,
) -> Option<&'static str> {
    if signal::requested() {
        return Some("signal");
    }
    if opts
        .duration
        .is_some_and(|d| (now - r.started).as_secs_f64() >= d)
    {
        return Some("duration");
    }
    // One-shot pcap replays end when every frame arrived (or nothing more
    // came for a while: a PMD may drop what it cannot take).
    let replays: Vec<_> = ports
        .slots
        .iter()
        .filter_map(|s| s.pcap_frames.map(|f| (s.port.id, f)))
        .collect();
    if !replays.is_empty() && replays.len() == ports.slots.len() {
        if replays
            .iter()
            .all(|&(id, frames)| r.rx_of_port(id) >= frames)
        {
            return Some("pcap replay complete");
        }
        if idle > Duration::from_secs(3) {
            return Some("pcap replay idle for 3 s (frames missing)");
        }
    }
    if opts.gen.count != 0 && r.has_generator() && r.gen_stats.done.load(Relaxed) {
        if received >= r.gen_stats.sent.load(Relaxed) {
            return Some("generator count reached");
        }
        if idle > Duration::from_secs(2) {
            return Some("generator count reached (queues idle)");
        }
    }
    None
}

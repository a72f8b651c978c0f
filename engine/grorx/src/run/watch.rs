//! The stop conditions a run watches for besides an explicit stop.

use super::launch::Workers;
use super::options::RunOptions;
use super::ports::Ports;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Why the run should stop now, if it should.
pub(super) fn stop_reason(
    opts: &RunOptions,
    ports: &Ports,
    r: &Workers,
    now: Instant,
    idle: Duration,
    received: u64,
) -> Option<&'static str> {
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

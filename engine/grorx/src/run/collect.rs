//! The report of a finished run, from what the workers published.

use super::launch::Workers;
use super::options::RunOptions;
use super::ports::{PortSlot, Ports};
use crate::capture::CaptureReport;
use crate::counters::hist::{HistReport, QueueHist};
use crate::counters::stats::{rates, QueueCounts};
use crate::dpdk::eal::Eal;
use crate::gro::GroStats;
use crate::port;
use crate::report::{
    Cycles, Delivered, ForwardReport, LinkHistory, PoolReport, PortReport, QueueReport, Report,
    SkbReport, SourceReport, StageReport,
};
use crate::skb::SkbMode;
use crate::stage::StageCounts;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

/// What the run loop knows when the workers have stopped.
pub(super) struct Finished {
    pub stop_reason: String,
    pub duration_s: f64,
    pub hists: Vec<QueueHist>,
    pub capture: Option<CaptureReport>,
    pub hugepages: String,
}

/// Every queue's counters, summed over the run's queues as they are read.
struct Totals {
    counts: QueueCounts,
    gro: GroStats,
    hist: QueueHist,
    stage: StageCounts,
    drops: BTreeMap<String, u64>,
}

/// The report, before teardown fills in the pools' counts.
pub(super) fn report(
    eal: &Eal,
    opts: &RunOptions,
    ports: &Ports,
    r: &Workers,
    f: Finished,
) -> Report {
    let gro_on = opts.gro.is_some() || r.gro_elsewhere;
    let (queues, t) = queue_reports(eal, opts, r, &f, gro_on);
    let mut notes = Vec::new();
    let port_reports = ports
        .slots
        .iter()
        .map(|s| port_report(eal, ports, s, &queues, &mut notes))
        .collect();
    if t.counts.capture_waits > 0 {
        notes.push(capture_note(t.counts.capture_waits, f.capture.as_ref()));
    }
    let histograms = HistReport::of(&t.hist);
    notes.extend(hold_overrun(opts, &histograms.gro_hold_ns));
    let gro_holds_over_limit = hold_limit_us(opts).map(|us| {
        let (h, limit_ns) = (&t.hist.gro_hold_ns, us * 1000);
        h.count_between(limit_ns + 1, h.max().max(limit_ns + 1))
    });
    let (rx_pps, rx_gbps) = rates(t.counts.rx_packets, t.counts.rx_bytes, f.duration_s);
    let total = &t.counts;
    Report {
        command: "sink".into(),
        duration_s: f.duration_s,
        rx_packets: total.rx_packets,
        rx_bytes: total.rx_bytes,
        rx_pps,
        rx_gbps,
        mbufs_leaked: 0,
        freed_at_teardown: 0,
        mbufs_freed_twice: 0,
        pools: Vec::new(),
        stop_reason: f.stop_reason,
        hugepages: f.hugepages,
        eal_args: eal.args().to_vec(),
        tsc_hz: eal.tsc_hz(),
        ports: port_reports,
        queues,
        source: source_report(opts, ports, r),
        notes,
        gro: gro_on.then(|| t.gro.report()),
        histograms,
        gro_holds_over_limit,
        cycles: opts.cycles.then(|| per_packet(total)),
        delivered: Delivered {
            packets: total.out_packets,
            bytes: total.out_bytes,
            truesize_per_byte: if total.out_bytes > 0 && opts.gro.is_some() {
                total.truesize as f64 / total.out_bytes as f64
            } else {
                0.0
            },
        },
        skb: skb_report(opts, total, r),
        capture: f.capture,
        forward: forward_report(opts, r),
        stage: StageReport {
            name: r.stage_name.to_string(),
            consumed: t.stage.consumed,
            dropped: t.drops,
        },
    }
}

/// The skb settings and what the skb layer could not do; in forward mode
/// the forwarder does the prepends, so its misses count too.
fn skb_report(opts: &RunOptions, total: &QueueCounts, r: &Workers) -> SkbReport {
    SkbReport {
        mode: match opts.skb.mode {
            SkbMode::Build => "build".into(),
            SkbMode::Copy => "copy".into(),
        },
        headroom: opts.skb.headroom,
        // The forwarder does the prepends in forward mode.
        headroom_miss: total.headroom_miss
            + r.forward
                .iter()
                .map(|c| c.load().headroom_miss)
                .sum::<u64>(),
        head_alloc_fail: total.head_alloc_fail,
        malformed: total.malformed,
    }
}

/// What the forward stage sent, summed over its workers.
fn forward_report(opts: &RunOptions, r: &Workers) -> Option<ForwardReport> {
    opts.stage.forward.as_ref().map(|f| {
        let mut s = crate::forward::ForwardStats::default();
        for c in &r.forward {
            s.add(&c.load());
        }
        ForwardReport {
            port: f
                .to
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            encap: f.encap.name().to_string(),
            stats: s,
        }
    })
}

/// A report per queue, by port then queue, and the sums over them.
fn queue_reports(
    eal: &Eal,
    opts: &RunOptions,
    r: &Workers,
    f: &Finished,
    gro_on: bool,
) -> (Vec<QueueReport>, Totals) {
    let mut t = Totals {
        counts: QueueCounts::default(),
        gro: GroStats::default(),
        hist: QueueHist::default(),
        stage: StageCounts::default(),
        drops: BTreeMap::new(),
    };
    let mut queues = Vec::new();
    for a in &r.plan {
        for q in &a.queues {
            let l = r.shared.counters[q.slot].read();
            let g = r.shared.counters[q.slot].read_gro();
            let sc = r.shared.stage[q.slot].read();
            t.stage.add(&sc);
            for (name, n) in sc.named_drops(r.drop_reasons[q.slot]) {
                *t.drops.entry(name).or_insert(0) += n;
            }
            t.gro.add(&g);
            t.hist.add(&f.hists[q.slot]);
            t.counts.add(&l);
            let (pps, gbps) = rates(l.rx_packets, l.rx_bytes, f.duration_s);
            queues.push(QueueReport {
                port: q.port,
                queue: q.queue,
                lcore: a.lcore,
                cpu: eal.lcore_cpu(a.lcore),
                counts: l,
                rx_pps: pps,
                rx_gbps: gbps,
                avg_burst: if l.rx_bursts > 0 {
                    l.rx_packets as f64 / l.rx_bursts as f64
                } else {
                    0.0
                },
                gro: gro_on.then(|| g.report()),
                histograms: HistReport::of(&f.hists[q.slot]),
                cycles: opts.cycles.then(|| per_packet(&l)),
            });
        }
    }
    queues.sort_by_key(|q| (q.port, q.queue));
    (queues, t)
}

/// One port's report (its link counts are filled in when the link watch
/// has stopped); a note when its pcap replay came short.
fn port_report(
    eal: &Eal,
    ports: &Ports,
    s: &PortSlot,
    queues: &[QueueReport],
    notes: &mut Vec<String>,
) -> PortReport {
    let id = s.port.id;
    let mine = || queues.iter().filter(move |q| q.port == id);
    let (rxp, rxb) = (
        mine().map(|q| q.counts.rx_packets).sum::<u64>(),
        mine().map(|q| q.counts.rx_bytes).sum::<u64>(),
    );
    if let Some(frames) = s.pcap_frames.filter(|&f| rxp < f) {
        notes.push(format!(
            "port {id}: pcap replay delivered {rxp} of {frames} frames"
        ));
    }
    let hugepages_on = !crate::dpdk::eal_args::has_flag(eal.args(), "--no-huge");
    let pool = &ports.pools[s.pools[0]];
    PortReport {
        id,
        name: s.port.name.clone(),
        driver: s.port.driver.clone(),
        link: s.port.link(),
        // Filled in from the link watch when it has stopped.
        link_history: LinkHistory::default(),
        mtu: s.port.mtu,
        rx_queues: s.port.rx_queues,
        rx_desc: s.port.rx_desc,
        rx_offloads: port::rx_offload_names(s.port.rx_offloads),
        pool: PoolReport {
            name: pool.name().to_string(),
            mbufs: pool.size(),
            cache: pool.cache(),
            data_room: pool.data_room(),
            priv_size: pool.priv_size(),
            segments_per_frame: s.segments_per_frame,
            hugepages: hugepages_on,
        },
        rx_packets: rxp,
        rx_bytes: rxb,
        stats: s.port.stats(),
        xstats: s
            .port
            .xstats()
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .collect(),
    }
}

/// The embedded generator's counts, when it fed the ring port.
fn source_report(opts: &RunOptions, ports: &Ports, r: &Workers) -> Option<SourceReport> {
    ports.ring_port.as_ref().map(|_| {
        let g = &r.gen_stats;
        let sent = g.sent.load(Relaxed);
        SourceReport {
            kind: "generator".into(),
            flows: opts.gen.flows,
            mss: opts.gen.mss,
            frame_len: opts.gen.frame_len(),
            sent,
            sent_bytes: g.bytes.load(Relaxed),
            ring_full_waits: g.ring_full.load(Relaxed),
            alloc_fail: g.alloc_fail.load(Relaxed),
            cycles_per_packet: g.busy_cycles.load(Relaxed) as f64 / sent.max(1) as f64,
        }
    })
}

fn capture_note(waits: u64, capture: Option<&CaptureReport>) -> String {
    if capture.map_or(0, |c| c.dropped) == 0 {
        format!("capture: workers waited {waits} times for the writer (nothing was lost)")
    } else {
        format!("capture: workers waited {waits} times for the writer")
    }
}

fn per_packet(c: &QueueCounts) -> Cycles {
    let n = c.rx_packets.max(1) as f64;
    Cycles {
        rx: c.cycles_rx as f64 / n,
        process: c.cycles_gro as f64 / n,
        stage: c.cycles_stage as f64 / n,
    }
}

/// The hold limit, microseconds: GRO on and holding across polls.
fn hold_limit_us(opts: &RunOptions) -> Option<u64> {
    (opts.gro.map(|g| g.hold_us as u64)).filter(|&us| us > 0)
}

/// A note when GRO held packets well past the hold limit, with the reason:
/// the age is checked once a poll, so a hold runs over by as long as a poll
/// of its worker lasts (its transmits, or the worker losing its CPU).
fn hold_overrun(opts: &RunOptions, hold_ns: &crate::counters::hist::Summary) -> Option<String> {
    let limit_us = hold_limit_us(opts)?;
    // 1.5x the limit, in ns.
    if hold_ns.max <= limit_us * 1500 {
        return None;
    }
    Some(format!(
        "GRO held packets up to {} us (p99 {} us) against the hold limit of {limit_us} us: \
         the age is checked once a poll, so a hold runs over by as long as its worker's poll \
         takes (its transmits, the worker losing its CPU); cycles per phase show the stage's share",
        hold_ns.max / 1000,
        hold_ns.p99 / 1000,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::hist::Summary;

    fn hold(max_us: u64) -> Summary {
        Summary {
            count: 10,
            mean: 0.0,
            p50: 0,
            p90: 0,
            p99: max_us * 500,
            p999: 0,
            max: max_us * 1000,
        }
    }

    #[test]
    fn a_hold_well_past_its_limit_is_noted_with_the_reason() {
        let held = RunOptions {
            gro: Some(crate::gro::GroConfig {
                hold_us: 50,
                ..Default::default()
            }),
            ..RunOptions::default()
        };
        let n = hold_overrun(&held, &hold(900)).expect("noted");
        assert!(
            n.contains("up to 900 us (p99 450 us) against the hold limit of 50 us"),
            "{n}"
        );
        assert!(n.contains("checked once a poll"), "{n}");
        assert_eq!(hold_overrun(&held, &hold(70)), None, "within 1.5x");
        let per_poll = RunOptions::default();
        assert_eq!(
            hold_overrun(&per_poll, &hold(900)),
            None,
            "no limit but the poll"
        );
        let off = RunOptions { gro: None, ..held };
        assert_eq!(hold_overrun(&off, &hold(900)), None);
    }
}

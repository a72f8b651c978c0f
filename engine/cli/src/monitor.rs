//! What `grorx sink` prints while a run goes on: once a second it takes the
//! run's histograms, prints the live line (and a per-queue table with
//! `--verbose`), streams one JSON object per `--json-interval`, and writes an
//! interval to the `--hdr-log`. It only reads the run's live stats.

use crate::metrics::Histograms;
use anyhow::Context;
use grorx::hist::{HdrLog, HistReport, QueueHist};
use grorx::port::PortStats;
use grorx::run::{QueueStats, Running, Stats};
use grorx::stats::{fmt_pps, rates, QueueCounts};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a counter slot's queue lives.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SlotInfo {
    pub port: u16,
    pub queue: u16,
    pub lcore: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    counts: QueueCounts,
    gro_in: u64,
    gro_out: u64,
}

/// GRO over one interval, under the report's names for the same counters.
#[derive(Debug, Serialize)]
struct IntervalGro {
    segments_in: u64,
    packets_out: u64,
    avg_segments_per_packet: f64,
}

impl IntervalGro {
    fn of(segments_in: u64, packets_out: u64) -> IntervalGro {
        IntervalGro {
            segments_in,
            packets_out,
            avg_segments_per_packet: if packets_out > 0 {
                segments_in as f64 / packets_out as f64
            } else {
                0.0
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct QueueLine {
    port: u16,
    queue: u16,
    lcore: u32,
    /// The queue's counters over the interval, by their table names.
    #[serde(flatten)]
    counts: QueueCounts,
    rx_pps: f64,
    rx_gbps: f64,
    gro: Option<IntervalGro>,
}

/// One `--json-interval` object (after the envelope): counts for the
/// interval, named as the report names them for the run.
#[derive(Debug, Serialize)]
struct IntervalLine {
    elapsed_s: f64,
    interval_s: f64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_pps: f64,
    rx_gbps: f64,
    imissed: u64,
    rx_nombuf: u64,
    gro: Option<IntervalGro>,
    queues: Vec<QueueLine>,
    histograms: HistReport,
}

pub struct Monitor<'a> {
    run: &'a Running,
    slots: Vec<SlotInfo>,
    ports: Vec<u16>,
    gro: bool,
    start: Instant,
    live: bool,
    verbose: bool,
    // The live line, once a second.
    next_live: Instant,
    live_last: (Vec<Snap>, Instant),
    // The JSON stream.
    json_every: Option<Duration>,
    next_json: Instant,
    json_last: (Vec<Snap>, Instant, PortStats),
    json_hist: QueueHist,
    // The HdrHistogram log, one interval a second.
    hdr: Option<HdrLog>,
    hdr_hist: QueueHist,
    hdr_from: Instant,
    // `--metrics`: what is drained, summed since the start.
    metrics: Option<Arc<Histograms>>,
}

fn snap(q: &QueueStats) -> Snap {
    Snap {
        counts: q.counts,
        gro_in: q.gro.segments_in,
        gro_out: q.gro.packets_out,
    }
}

fn snaps(s: &Stats) -> Vec<Snap> {
    s.queues.iter().map(snap).collect()
}

fn port_totals(s: &Stats) -> PortStats {
    s.ports.iter().fold(PortStats::default(), |mut a, (_, p)| {
        a.imissed += p.imissed;
        a.rx_nombuf += p.rx_nombuf;
        a
    })
}

pub struct MonitorConf {
    pub live: bool,
    pub verbose: bool,
    pub gro: bool,
    pub json_every: Option<Duration>,
    pub hdr: Option<HdrLog>,
    /// Where drained histograms also go, for `--metrics`.
    pub metrics: Option<Arc<Histograms>>,
}

impl<'a> Monitor<'a> {
    pub fn new(run: &'a Running, conf: MonitorConf) -> Monitor<'a> {
        let slots: Vec<SlotInfo> = run
            .queues()
            .into_iter()
            .map(|(port, queue, lcore)| SlotInfo { port, queue, lcore })
            .collect();
        let ports = run.ports();
        let stats = run.stats();
        let start = Instant::now() - stats.elapsed;
        let zero = vec![Snap::default(); slots.len()];
        Monitor {
            run,
            slots,
            gro: conf.gro,
            start,
            live: conf.live,
            verbose: conf.verbose,
            next_live: start + Duration::from_secs(1),
            live_last: (zero.clone(), start),
            json_every: conf.json_every,
            next_json: start + conf.json_every.unwrap_or(Duration::MAX / 4),
            json_last: (zero, start, port_totals(&stats)),
            json_hist: QueueHist::default(),
            hdr: conf.hdr,
            hdr_hist: QueueHist::default(),
            hdr_from: start,
            metrics: conf.metrics,
            ports,
        }
    }

    /// Takes what workers published into the open intervals.
    fn drain(&mut self) {
        let drained = self.run.take_histograms();
        if let Some(m) = &self.metrics {
            m.add(&drained);
        }
        for g in drained {
            if !g.is_empty() {
                self.json_hist.add(&g);
                self.hdr_hist.add(&g);
            }
        }
    }

    /// Does what is due at `now`. Errors only from writing the HDR log.
    pub fn tick(&mut self, now: Instant) -> anyhow::Result<()> {
        let live_due = now >= self.next_live;
        let json_due = now >= self.next_json;
        if !live_due && !json_due {
            return Ok(());
        }
        self.drain();
        let stats = self.run.stats();
        if live_due {
            self.next_live += Duration::from_secs(1);
            if self.live {
                self.print_live(now, &stats);
            }
            if let Some(log) = &mut self.hdr {
                log.interval(
                    &self.hdr_hist,
                    self.hdr_from - self.start,
                    now - self.hdr_from,
                )?;
            }
            self.hdr_hist.reset();
            self.hdr_from = now;
            self.live_last = (snaps(&stats), now);
        }
        if json_due {
            self.print_json(now, &stats)?;
            self.next_json += self.json_every.unwrap_or(Duration::MAX / 4);
        }
        Ok(())
    }

    fn print_live(&self, now: Instant, stats: &Stats) {
        let (last, t0) = &self.live_last;
        let dt = (now - *t0).as_secs_f64();
        let cur = snaps(stats);
        let sum = |v: &[Snap]| {
            v.iter().fold(Snap::default(), |mut a, s| {
                a.counts.add(&s.counts);
                a.gro_in += s.gro_in;
                a.gro_out += s.gro_out;
                a
            })
        };
        let (c, l) = (sum(&cur), sum(last));
        let d = c.counts.since(&l.counts);
        let (pps, gbps) = rates(d.rx_packets, d.rx_bytes, dt);
        let mut line = format!(
            "[{:6.1}s] rx {} {:.2} Gbit/s",
            (now - self.start).as_secs_f64(),
            fmt_pps(pps),
            gbps
        );
        if self.ports.len() > 1 {
            for &p in &self.ports {
                let (a, b) = self
                    .slots
                    .iter()
                    .zip(cur.iter().zip(last))
                    .filter(|(s, _)| s.port == p)
                    .fold((0, 0), |acc, (_, (c, l))| {
                        let d = c.counts.since(&l.counts);
                        (acc.0 + d.rx_packets, acc.1 + d.rx_bytes)
                    });
                line.push_str(&format!(" | p{p} {}", fmt_pps(rates(a, b, dt).0)));
            }
        }
        if self.gro && c.gro_out > l.gro_out {
            line.push_str(&format!(
                " | gro {:.1} seg/pkt",
                (c.gro_in - l.gro_in) as f64 / (c.gro_out - l.gro_out) as f64
            ));
        }
        let ps = port_totals(stats);
        line.push_str(&format!(
            " | missed {} no-mbuf {}",
            ps.imissed, ps.rx_nombuf
        ));
        crate::out::sayln(&line);
        if self.verbose {
            for (s, (c, l)) in self.slots.iter().zip(cur.iter().zip(last)) {
                let d = c.counts.since(&l.counts);
                let (pps, gbps) = rates(d.rx_packets, d.rx_bytes, dt);
                let segs = if c.gro_out > l.gro_out {
                    format!(
                        " gro {:5.1} seg/pkt",
                        (c.gro_in - l.gro_in) as f64 / (c.gro_out - l.gro_out) as f64
                    )
                } else {
                    String::new()
                };
                crate::out::sayln(&format!(
                    "           port {} queue {:2} lcore {:2}: {:>12} {:7.2} Gbit/s{segs}",
                    s.port,
                    s.queue,
                    s.lcore,
                    fmt_pps(pps),
                    gbps
                ));
            }
        }
    }

    /// One interval object on stdout; an error when stdout is closed.
    fn print_json(&mut self, now: Instant, stats: &Stats) -> anyhow::Result<()> {
        let (last, t0, last_ps) = &self.json_last;
        let dt = (now - *t0).as_secs_f64();
        let cur = snaps(stats);
        let ps = port_totals(stats);
        let mut queues = Vec::new();
        let (mut p, mut b, mut gi, mut go) = (0u64, 0u64, 0u64, 0u64);
        for (s, (c, l)) in self.slots.iter().zip(cur.iter().zip(last)) {
            let d = c.counts.since(&l.counts);
            let (dgi, dgo) = (c.gro_in - l.gro_in, c.gro_out - l.gro_out);
            let (pps, gbps) = rates(d.rx_packets, d.rx_bytes, dt);
            queues.push(QueueLine {
                port: s.port,
                queue: s.queue,
                lcore: s.lcore,
                counts: d,
                rx_pps: pps,
                rx_gbps: gbps,
                gro: self.gro.then(|| IntervalGro::of(dgi, dgo)),
            });
            (p, b) = (p + d.rx_packets, b + d.rx_bytes);
            (gi, go) = (gi + dgi, go + dgo);
        }
        let (pps, gbps) = rates(p, b, dt);
        let line = IntervalLine {
            elapsed_s: (now - self.start).as_secs_f64(),
            interval_s: dt,
            rx_packets: p,
            rx_bytes: b,
            rx_pps: pps,
            rx_gbps: gbps,
            imissed: ps.imissed.saturating_sub(last_ps.imissed),
            rx_nombuf: ps.rx_nombuf.saturating_sub(last_ps.rx_nombuf),
            gro: self.gro.then(|| IntervalGro::of(gi, go)),
            queues,
            histograms: HistReport::of(&self.json_hist),
        };
        let s = crate::json::line(crate::json::Kind::Interval, &line)?;
        crate::out::line(&s).context("stdout closed (the JSON stream's reader is gone)")?;
        self.json_hist.reset();
        self.json_last = (cur, now, ps);
        Ok(())
    }

    /// At the end of the run: the last interval of the HDR log.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.drain();
        if let Some(mut log) = self.hdr.take() {
            let now = Instant::now();
            log.interval(
                &self.hdr_hist,
                self.hdr_from - self.start,
                now - self.hdr_from,
            )?;
            log.finish()?;
        }
        Ok(())
    }
}

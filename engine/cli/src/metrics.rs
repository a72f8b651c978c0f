//! `--metrics ADDR:PORT`: the run's counters and histograms in the Prometheus
//! text exposition format, served over HTTP at `/metrics` while the run goes
//! on (docs/metrics.md lists them).
//!
//! Nothing here touches a worker: a scrape reads `Running::stats()` (relaxed
//! loads of what the workers publish) and the histograms the monitor already
//! drains once a second, summed here since the start. The listener is bound
//! before EAL starts, so a taken port fails at once; the server's one thread
//! is started after, from the main lcore's thread, whose CPU it inherits
//! (never a worker's). Whatever clients do, the server's threads, sockets,
//! memory and time stay bounded (`crate::http`): the datapath never
//! depends on a scraper's goodwill.

use crate::http::{self, Cidr, Counts, Limits};
use anyhow::{Context, Result};
use grorx::gro::{Flush, Pass};
use grorx::hist::QueueHist;
use grorx::port::PORT_COUNTERS;
use grorx::run::{Running, Stats};
use grorx::stats::QUEUE_COUNTERS;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Upper bounds of the burst-size buckets (packets per non-empty poll).
const BURST_BUCKETS: &[f64] = &[
    1., 2., 4., 8., 16., 24., 32., 48., 64., 128., 256., 512., 1024.,
];
/// Upper bounds of the segments-per-packet buckets: 17 is Linux's
/// MAX_SKB_FRAGS (the default --max-frags), 45 about 64 KiB of 1448 B segments.
const SEGMENT_BUCKETS: &[f64] = &[1., 2., 3., 4., 6., 8., 12., 16., 17., 24., 32., 45., 64.];
/// Upper bounds of the hold-time buckets, seconds: 100 ns (a flush at the
/// end of the poll) to 1 s (far past any --gro-flush-us).
const HOLD_BUCKETS: &[f64] = &[
    1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
    5e-3, 1e-2, 0.1, 1.0,
];

/// A bound listener and what the series are labelled with.
pub struct Endpoint {
    listener: TcpListener,
    /// The `name` label on every series.
    name: String,
    /// GRO figures are served (GRO on, or rte_gro).
    gro: bool,
    /// Peers that may connect (empty: any).
    allow: Vec<Cidr>,
}

/// Binds `addr` for the metrics server (call before EAL starts); only
/// peers in `allow` are served when it is not empty.
pub fn bind(addr: SocketAddr, name: &str, gro: bool, allow: Vec<Cidr>) -> Result<Endpoint> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("--metrics {addr}: cannot listen"))?;
    Ok(Endpoint {
        listener,
        name: name.to_string(),
        gro,
        allow,
    })
}

impl Endpoint {
    /// The address bound (the port the kernel chose for port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }
}

/// The histograms the monitor drained, per queue, summed since the start:
/// Prometheus histograms are cumulative.
pub struct Histograms(Mutex<Vec<QueueHist>>);

impl Histograms {
    fn new(queues: usize) -> Histograms {
        Histograms(Mutex::new(vec![QueueHist::default(); queues]))
    }

    /// Adds what `Running::take_histograms` returned (queues in stats order).
    pub fn add(&self, drained: &[QueueHist]) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (a, d) in all.iter_mut().zip(drained) {
            if !d.is_empty() {
                a.add(d);
            }
        }
    }

    /// Per queue, the bucket counts (taken under the lock, which the
    /// monitor holds for an add once a second).
    fn buckets(&self) -> Vec<QueueBuckets> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.iter()
            .map(|h| QueueBuckets {
                burst: Buckets::of(&h.burst, BURST_BUCKETS, 1.0),
                segments: Buckets::of(&h.gro_segs, SEGMENT_BUCKETS, 1.0),
                hold: Buckets::of(&h.gro_hold_ns, HOLD_BUCKETS, 1e-9),
            })
            .collect()
    }
}

/// One distribution as a Prometheus histogram.
#[derive(Debug)]
struct Buckets {
    sum: f64,
    count: u64,
    /// `(upper bound, values in this bucket alone)`; the rest are above the last.
    counts: Vec<(f64, u64)>,
}

impl Buckets {
    /// `h`'s values times `scale`, placed by the middle of their
    /// HdrHistogram bucket (exact for small integers, within 1% otherwise).
    fn of(h: &hdrhistogram::Histogram<u64>, bounds: &[f64], scale: f64) -> Buckets {
        let mut counts: Vec<(f64, u64)> = bounds.iter().map(|&b| (b, 0)).collect();
        let mut sum = 0.0;
        for v in h.iter_recorded() {
            let x = h.median_equivalent(v.value_iterated_to()) as f64 * scale;
            let n = v.count_at_value();
            sum += x * n as f64;
            if let Some(b) = counts.iter_mut().find(|(le, _)| x <= *le) {
                b.1 += n;
            }
        }
        Buckets {
            sum,
            count: h.len(),
            counts,
        }
    }
}

#[derive(Debug)]
struct QueueBuckets {
    burst: Buckets,
    segments: Buckets,
    hold: Buckets,
}

/// Serves `/metrics` while `body` runs, then stops the server. `body` gets
/// the histograms the monitor must add what it drains to (None without
/// `--metrics`). When the server cannot start, the run is stopped and the
/// error returned.
pub fn serving<R>(
    endpoint: Option<Endpoint>,
    run: &Running,
    body: impl FnOnce(Option<Arc<Histograms>>) -> Result<R>,
) -> Result<R> {
    let Some(ep) = endpoint else {
        return body(None);
    };
    let hists = Arc::new(Histograms::new(run.queues().len()));
    let counts = Counts::default();
    std::thread::scope(|s| {
        let stop = Arc::new(AtomicBool::new(false));
        // Set on every way out of this scope (a panic included), so the
        // scope's join never waits on the server.
        let _stop_on_exit = StopOnDrop(stop.clone());
        let mut server = match http::Server::new(ep.listener, Limits::default(), ep.allow, &counts)
        {
            Ok(srv) => srv,
            Err(e) => {
                run.stop_because("metrics error");
                anyhow::bail!("--metrics: {e}");
            }
        };
        let conf = Conf {
            name: ep.name,
            gro: ep.gro,
        };
        let (h, c) = (hists.clone(), &counts);
        let started = std::thread::Builder::new()
            .name("grorx-metrics".into())
            .spawn_scoped(s, move || {
                let mut last = Rendered::default();
                server.run(&stop, &mut |req| answer(req, run, &h, &conf, c, &mut last));
            });
        if let Err(e) = started {
            run.stop_because("metrics error");
            return Err(e).context("--metrics: starting the server thread");
        }
        body(Some(hists))
    })
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// What the series are labelled with.
struct Conf {
    name: String,
    gro: bool,
}

/// GET or HEAD `/metrics`: the exposition; another method there: 405;
/// any other path: 404.
fn answer(
    req: &http::Request,
    run: &Running,
    hists: &Histograms,
    conf: &Conf,
    counts: &Counts,
    last: &mut Rendered,
) -> http::Response {
    match (req.path, req.method) {
        ("/metrics", "GET" | "HEAD") => match last.get(|| exposition(run, hists, conf, counts)) {
            Ok(body) => http::Response {
                status: 200,
                content_type: prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                body,
                allow: None,
            },
            Err(_) => http::Response::text(500, "encoding failed\n"),
        },
        ("/metrics", _) => http::Response {
            allow: Some("GET, HEAD"),
            ..http::Response::text(405, "use GET\n")
        },
        _ => http::Response::text(404, "not found: metrics are at /metrics\n"),
    }
}

/// How often the exposition is made afresh at most: scrapes closer together
/// get the last one. Making it reads the counters the workers write (their
/// cache lines) and the ports' stats: a client scraping in a loop makes it
/// ten times a second, not thousands.
const RENDER_EVERY: Duration = Duration::from_millis(100);

/// The last exposition made, and when.
#[derive(Default)]
struct Rendered {
    at: Option<Instant>,
    body: Vec<u8>,
}

impl Rendered {
    /// The exposition, made now if the last one is older than RENDER_EVERY.
    fn get(
        &mut self,
        make: impl FnOnce() -> Result<String, fmt::Error>,
    ) -> Result<Vec<u8>, fmt::Error> {
        if self.at.is_none_or(|t| t.elapsed() >= RENDER_EVERY) {
            self.body = make()?.into_bytes();
            self.at = Some(Instant::now());
        }
        Ok(self.body.clone())
    }
}

/// The text exposition of the run as it is now.
fn exposition(
    run: &Running,
    hists: &Histograms,
    conf: &Conf,
    counts: &Counts,
) -> Result<String, fmt::Error> {
    let snap = Snapshot {
        stats: run.stats(),
        hists: hists.buckets(),
        gro: conf.gro,
        http: counts.by_event(),
    };
    text(snap, &conf.name)
}

/// `snap` in the text format, every series labelled `name`.
fn text(snap: Snapshot, name: &str) -> Result<String, fmt::Error> {
    let mut reg = Registry::with_prefix_and_labels(
        "grorx",
        [(Cow::Borrowed("name"), Cow::Owned(name.to_string()))].into_iter(),
    );
    reg.register_collector(Box::new(snap));
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &reg)?;
    Ok(out)
}

/// One scrape's figures; encoded once, then dropped.
#[derive(Debug)]
struct Snapshot {
    stats: Stats,
    hists: Vec<QueueBuckets>,
    gro: bool,
    /// The metrics server's own counts, by event.
    http: [(&'static str, u64); 8],
}

type Labels = Vec<(&'static str, String)>;

/// One family of series: a descriptor (`# HELP`, `# TYPE`), then each
/// labelled value.
fn family<V>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (Labels, V)>,
) -> fmt::Result
where
    V: prometheus_client::encoding::EncodeGaugeValue
        + prometheus_client::encoding::EncodeCounterValue,
{
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in series {
        let mut f = m.encode_family(&labels)?;
        if kind == MetricType::Counter {
            f.encode_counter::<NoLabelSet, V, u64>(&v, None)?;
        } else {
            f.encode_gauge(&v)?;
        }
    }
    Ok(())
}

impl Snapshot {
    fn queue_labels(&self) -> impl Iterator<Item = Labels> + '_ {
        self.stats.queues.iter().map(|q| {
            vec![
                ("port", q.port.to_string()),
                ("queue", q.queue.to_string()),
                ("lcore", q.lcore.to_string()),
            ]
        })
    }

    /// A counter per queue.
    fn per_queue(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        v: impl Fn(&grorx::run::QueueStats) -> u64,
    ) -> fmt::Result {
        let series = self.queue_labels().zip(self.stats.queues.iter().map(v));
        family(enc, name, help, MetricType::Counter, series)
    }

    /// A counter per queue and reason.
    fn per_queue_reason(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        reasons: impl Fn(&grorx::run::QueueStats) -> Vec<(String, u64)>,
    ) -> fmt::Result {
        let series = self
            .queue_labels()
            .zip(&self.stats.queues)
            .flat_map(|(l, q)| {
                reasons(q).into_iter().map(move |(r, v)| {
                    let mut l = l.clone();
                    l.push(("reason", r));
                    (l, v)
                })
            });
        family(enc, name, help, MetricType::Counter, series)
    }

    /// A counter per port.
    fn per_port(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        v: impl Fn(&grorx::port::PortStats) -> u64,
    ) -> fmt::Result {
        let series = self
            .stats
            .ports
            .iter()
            .map(|(id, p)| (vec![("port", id.to_string())], v(p)));
        family(enc, name, help, MetricType::Counter, series)
    }

    /// A histogram per queue.
    fn histogram(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        pick: impl Fn(&QueueBuckets) -> &Buckets,
    ) -> fmt::Result {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (labels, h) in self.queue_labels().zip(&self.hists) {
            let b = pick(h);
            m.encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(b.sum, b.count, &b.counts, None)?;
        }
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let e = &mut enc;
        let up = [(Labels::new(), 1u64)];
        family(e, "up", "1 while the run goes on", MetricType::Gauge, up)?;
        family(
            e,
            "uptime_seconds",
            "Seconds since the workers started",
            MetricType::Gauge,
            [(Labels::new(), self.stats.elapsed.as_secs_f64())],
        )?;
        family(
            e,
            "info",
            "The grorx version (value 1)",
            MetricType::Gauge,
            [(
                vec![("version", env!("CARGO_PKG_VERSION").to_string())],
                1u64,
            )],
        )?;
        // The engine's per-queue counters, as its table declares them.
        for (i, d) in QUEUE_COUNTERS.iter().enumerate() {
            if d.exported() {
                self.per_queue(e, d.name, d.help, |q| q.counts.values()[i])?;
            }
        }
        if self.gro {
            self.per_queue(e, "gro_segments_in", "Packets given to GRO", |q| {
                q.gro.segments_in
            })?;
            self.per_queue(e, "gro_packets_out", "Packets GRO gave back", |q| {
                q.gro.packets_out
            })?;
            self.per_queue(
                e,
                "gro_reorder_held",
                "Segments that waited ahead of a sequence gap (--gro-reorder)",
                |q| q.gro.reorder_held,
            )?;
            self.per_queue(
                e,
                "gro_reorder_filled",
                "Segments that waited and merged once their gap filled",
                |q| q.gro.reorder_filled,
            )?;
            self.per_queue_reason(e, "gro_flushes", "Held packets let out, by reason", |q| {
                Flush::ALL
                    .iter()
                    .map(|f| (f.name().to_string(), q.gro.flush[*f as usize]))
                    .collect()
            })?;
            self.per_queue_reason(
                e,
                "gro_passthrough",
                "Packets passed through without being held, by reason",
                |q| {
                    Pass::all()
                        .map(|p| (p.name().to_string(), q.gro.pass[p.index()]))
                        .collect()
                },
            )?;
        }
        self.per_queue(e, "stage_consumed", "Packets the stage consumed", |q| {
            q.stage.consumed
        })?;
        self.per_queue_reason(
            e,
            "stage_dropped",
            "Packets the stage dropped, by reason",
            |q| {
                // Every reason the stage names, zeros included, then the
                // drops under reasons beyond its names.
                let named = q.drop_reasons.len().min(q.stage.dropped.len());
                let mut v: Vec<(String, u64)> = q
                    .drop_reasons
                    .iter()
                    .zip(&q.stage.dropped)
                    .map(|(n, c)| (n.to_string(), *c))
                    .collect();
                v.push(("other".to_string(), q.stage.dropped[named..].iter().sum()));
                v
            },
        )?;
        // The PMD's counters, as the engine's port table declares them.
        for (i, d) in PORT_COUNTERS.iter().enumerate() {
            let name = format!("port_{}", d.name);
            self.per_port(e, &name, d.help, |p| p.values()[i])?;
        }
        let links = &self.stats.links;
        let port = |l: &grorx::run::LinkStats| vec![("port", l.port.to_string())];
        family(
            e,
            "port_link_up",
            "1 while the port's link is up (a port whose link is down is not polled)",
            MetricType::Gauge,
            links.iter().map(|l| (port(l), u64::from(l.up))),
        )?;
        family(
            e,
            "port_link_downs",
            "Times the port's link went down",
            MetricType::Counter,
            links.iter().map(|l| (port(l), l.downs)),
        )?;
        family(
            e,
            "port_link_down_seconds",
            "Seconds the port's link was down",
            MetricType::Counter,
            links.iter().map(|l| (port(l), l.down_s)),
        )?;
        family(
            e,
            "metrics_http_events",
            "What the metrics server did, by event (connections accepted, refused, evicted, \
             timed out; accept errors; requests too large or bad; responses)",
            MetricType::Counter,
            (self.http.iter()).map(|&(ev, n)| (vec![("event", ev.to_string())], n)),
        )?;
        self.histogram(e, "burst", "Packets per non-empty poll", |h| &h.burst)?;
        if self.gro {
            self.histogram(
                e,
                "gro_segments",
                "Segments per packet GRO delivered",
                |h| &h.segments,
            )?;
            self.histogram(
                e,
                "gro_hold_seconds",
                "Seconds a held packet waited, first segment to flush",
                |h| &h.hold,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grorx::port::PortStats;
    use grorx::run::QueueStats;

    #[test]
    fn buckets_count_each_value_once_and_sum_them() {
        let mut h = QueueHist::default();
        for v in [1u64, 2, 3, 32, 32, 5000] {
            h.burst.record(v).unwrap();
        }
        let b = Buckets::of(&h.burst, &[1., 2., 32.], 1.0);
        assert_eq!(b.counts, vec![(1., 1), (2., 1), (32., 3)]);
        assert_eq!(b.count, 6, "5000 is above the last bound: only in +Inf");
        assert!((b.sum - 5070.0).abs() < 50.0, "{}", b.sum);
        h.gro_hold_ns.record(2_000).unwrap();
        let b = Buckets::of(&h.gro_hold_ns, HOLD_BUCKETS, 1e-9);
        let at = |le: f64| b.counts.iter().find(|(b, _)| *b == le).unwrap().1;
        assert_eq!((at(1e-6), at(2.5e-6)), (0, 1), "2 us in (1 us, 2.5 us]");
    }

    /// The metric names docs/metrics.md's tables list.
    fn documented() -> std::collections::BTreeSet<String> {
        let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
        let doc = std::fs::read_to_string(p).unwrap();
        doc.lines()
            .filter_map(|l| l.strip_prefix("| `grorx_"))
            .filter_map(|l| l.split_once('`'))
            .map(|(name, _)| format!("grorx_{name}"))
            .collect()
    }

    #[test]
    fn the_metrics_document_lists_every_family_served_and_no_other() {
        let q = QueueStats {
            port: 0,
            queue: 0,
            lcore: 1,
            counts: Default::default(),
            gro: Default::default(),
            stage: Default::default(),
            drop_reasons: &[],
        };
        let stats = Stats {
            elapsed: Duration::from_secs(1),
            queues: vec![q],
            ports: vec![(0, Default::default())],
            links: vec![grorx::run::LinkStats {
                port: 0,
                up: true,
                downs: 0,
                down_s: 0.0,
            }],
        };
        let snap = Snapshot {
            stats,
            hists: Histograms::new(1).buckets(),
            gro: true,
            http: Counts::default().by_event(),
        };
        let t = text(snap, "x").unwrap();
        let served: std::collections::BTreeSet<String> = t
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .map(String::from)
            .collect();
        let doc = documented();
        let undocumented: Vec<_> = served.difference(&doc).collect();
        let unserved: Vec<_> = doc.difference(&served).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "served but not in docs/metrics.md: {undocumented:?}; documented but not served: {unserved:?}"
        );
        for d in QUEUE_COUNTERS.iter().filter(|d| d.exported()) {
            let name = format!("grorx_{}_total", d.name);
            assert!(doc.contains(&name), "{name} is not documented");
        }
        for d in PORT_COUNTERS {
            let name = format!("grorx_port_{}_total", d.name);
            assert!(doc.contains(&name), "{name} is not documented");
        }
    }

    #[test]
    fn exposition_names_every_series_and_ends_histograms_at_inf() {
        let mut q = QueueStats {
            port: 0,
            queue: 1,
            lcore: 3,
            counts: Default::default(),
            gro: Default::default(),
            stage: Default::default(),
            drop_reasons: &["no_route"],
        };
        q.counts.rx_packets = 42;
        q.stage.dropped[0] = 3;
        q.stage.dropped[2] = 1;
        q.gro.flush[Flush::Psh as usize] = 7;
        let ports = vec![(
            0,
            PortStats {
                imissed: 5,
                ..Default::default()
            },
        )];
        let stats = Stats {
            elapsed: Duration::from_millis(1500),
            queues: vec![q],
            ports,
            links: vec![grorx::run::LinkStats {
                port: 0,
                up: false,
                downs: 2,
                down_s: 0.5,
            }],
        };
        let hists = Histograms::new(1);
        let mut h = QueueHist::default();
        h.burst.record(32).unwrap();
        h.gro_segs.record(8).unwrap();
        hists.add(&[h]);
        let counts = Counts::default();
        counts.evicted.store(9, Relaxed);
        let snap = Snapshot {
            stats,
            hists: hists.buckets(),
            gro: true,
            http: counts.by_event(),
        };
        let t = text(snap, "rx-a").unwrap();
        for line in [
            "# TYPE grorx_rx_packets_total counter",
            "grorx_rx_packets_total{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\"} 42",
            "grorx_gro_flushes_total{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",reason=\"psh\"} 7",
            "grorx_port_imissed_total{name=\"rx-a\",port=\"0\"} 5",
            "grorx_port_link_up{name=\"rx-a\",port=\"0\"} 0",
            "grorx_port_link_downs_total{name=\"rx-a\",port=\"0\"} 2",
            "grorx_port_link_down_seconds_total{name=\"rx-a\",port=\"0\"} 0.5",
            "grorx_stage_dropped_total{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",reason=\"no_route\"} 3",
            "grorx_stage_dropped_total{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",reason=\"other\"} 1",
            "grorx_uptime_seconds{name=\"rx-a\"} 1.5",
            "grorx_metrics_http_events_total{name=\"rx-a\",event=\"evicted\"} 9",
            "# TYPE grorx_burst histogram",
            "grorx_burst_bucket{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",le=\"16\"} 0",
            "grorx_burst_bucket{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",le=\"32\"} 1",
            "grorx_burst_bucket{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\",le=\"+Inf\"} 1",
            "grorx_gro_segments_sum{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\"} 8.0",
            "grorx_gro_hold_seconds_count{name=\"rx-a\",port=\"0\",queue=\"1\",lcore=\"3\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "no line {line} in\n{t}");
        }
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains("name=\"rx-a\""), "{l}");
        }
    }
}

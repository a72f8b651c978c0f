//! The final report of a run: printed for people, or as one JSON object.
//! While the run goes on, `telemetry` answers DPDK telemetry commands.

#[doc(hidden)]
pub mod telemetry;

use crate::capture::CaptureReport;
use crate::counters::hist::HistReport;
use crate::counters::stats::{fmt_pps, QueueCounts, Unit};
use crate::dpdk::mempool::PoolUsage;
use crate::gro::GroReport;
use crate::port::{Link, PortStats};
use serde::Serialize;

/// One RX queue's share of the run.
#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    /// Port id the queue belongs to.
    pub port: u16,
    /// RX queue index on that port.
    pub queue: u16,
    /// EAL lcore that polled the queue.
    pub lcore: u32,
    /// CPU that lcore ran on.
    pub cpu: i32,
    /// The queue's counters by their table names (`rx_packets`,
    /// `rx_bytes`...; cycle counts are in `cycles`), inline in the JSON
    /// object.
    #[serde(flatten)]
    pub counts: QueueCounts,
    /// Receive rate over the run, packets per second.
    pub rx_pps: f64,
    /// Receive rate over the run, Gbit/s of frame bytes.
    pub rx_gbps: f64,
    /// Packets per non-empty poll.
    pub avg_burst: f64,
    /// The queue's GRO counters; absent with GRO off.
    pub gro: Option<GroReport>,
    /// The queue's percentiles: packets per burst, segments per packet, hold times (ns).
    pub histograms: HistReport,
    /// TSC cycles per received packet by phase (`--cycles`).
    pub cycles: Option<Cycles>,
}

/// Where a packet's time goes, in TSC cycles per received packet.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct Cycles {
    /// rte_eth_rx_burst: the PMD's work (for net_pcap, its copy of the frame).
    pub rx: f64,
    /// skb build, GRO (or rte_gro) and its flushes; with `--gro off` the
    /// plain sink's count-and-free pass, which runs right after RX.
    pub process: f64,
    /// The stage: sink (count, free), capture hand-off, forward.
    pub stage: f64,
}

/// What the stage delivered (after GRO).
#[derive(Debug, Clone, Serialize)]
pub struct Delivered {
    /// Packets the stages received from GRO, all queues.
    pub packets: u64,
    /// Bytes of those packets, headers included.
    pub bytes: u64,
    /// Buffer bytes pinned per delivered byte (skb truesize; 0 with GRO off).
    pub truesize_per_byte: f64,
}

/// How packets were built, and what the skb layer could not do.
#[derive(Debug, Clone, Serialize)]
pub struct SkbReport {
    /// `build` (skb in the received buffer) or `copy` (separate head, headers copied).
    pub mode: String,
    /// Headroom a prepend may use, bytes (the `--headroom` setting).
    pub headroom: u16,
    /// Prepends (the forwarder's included) that did not fit the headroom: a
    /// header mbuf was chained in front.
    pub headroom_miss: u64,
    /// Copy mode: heads the head pool could not supply (the frame went on as built).
    pub head_alloc_fail: u64,
    /// Received chains whose lengths did not hold (segment count, lengths
    /// that do not add up, data past a buffer): freed before GRO, counted
    /// here and in `rx_packets`, not in `gro.segments_in`.
    pub malformed: u64,
}

/// One port as the run used it.
#[derive(Debug, Clone, Serialize)]
pub struct PortReport {
    /// DPDK port id.
    pub id: u16,
    /// The ethdev name (PCI address or vdev name).
    pub name: String,
    /// The PMD (`net_ice`, `net_null`, `net_pcap`...).
    pub driver: String,
    /// Link state when the run ended.
    pub link: Link,
    /// What the link watch saw (filled in when it has stopped; inline in
    /// the JSON object).
    #[serde(flatten)]
    pub link_history: LinkHistory,
    /// MTU the port was configured with, bytes.
    pub mtu: u16,
    /// RX queues configured.
    pub rx_queues: u16,
    /// Descriptors per RX ring (after the device's limits).
    pub rx_desc: u16,
    /// RX offloads enabled, space-separated (`ipv4-cksum tcp-cksum rss-hash`...), or `none`.
    pub rx_offloads: String,
    /// The mbuf pool of the port's first RX queue.
    pub pool: PoolReport,
    /// Packets its queues received (the engine's count, before GRO).
    pub rx_packets: u64,
    /// Bytes of those packets.
    pub rx_bytes: u64,
    /// The PMD's own counters (`rte_eth_stats`) when the run ended.
    pub stats: PortStats,
    /// Non-zero extended statistics, in the driver's order (serialized as
    /// one object: name -> value).
    #[serde(serialize_with = "pairs_as_object")]
    pub xstats: Vec<(String, u64)>,
}

/// What the link watch saw of a port over the run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LinkHistory {
    /// Times the link went down while the run went on (the port was not
    /// polled until it came back).
    pub link_downs: u64,
    /// Seconds the link was down, in all (from the start if it started
    /// down).
    pub link_down_s: f64,
}

/// An mbuf pool's geometry.
#[derive(Debug, Clone, Serialize)]
pub struct PoolReport {
    /// The mempool's name.
    pub name: String,
    /// mbufs in the pool.
    pub mbufs: u32,
    /// mbufs each lcore caches.
    pub cache: u32,
    /// Buffer bytes per mbuf, headroom included.
    pub data_room: u16,
    /// Private-area bytes per mbuf (where the skb lives).
    pub priv_size: u16,
    /// Segments a full frame at the port's MTU takes (1 with auto sizing).
    pub segments_per_frame: u32,
    /// Whether the pool is in hugepages (EAL ran without `--no-huge`).
    pub hugepages: bool,
}

/// The embedded generator, when it fed the port.
#[derive(Debug, Clone, Serialize)]
pub struct SourceReport {
    /// What produced the traffic (`generator`).
    pub kind: String,
    /// TCP flows generated.
    pub flows: u32,
    /// TCP payload bytes per segment.
    pub mss: u16,
    /// Bytes per frame, without FCS.
    pub frame_len: usize,
    /// Frames enqueued to the port's RX rings.
    pub sent: u64,
    /// Bytes of those frames.
    pub sent_bytes: u64,
    /// Times an RX ring had no room and the generator waited (nothing was dropped).
    pub ring_full_waits: u64,
    /// Bursts the pool could not supply (the generator tried again on its next pass).
    pub alloc_fail: u64,
    /// What the generator itself spends per packet (TSC cycles).
    pub cycles_per_packet: f64,
}

/// The final report of a run, every mbuf accounted: [`Report::text`] for
/// people; serialized, one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The command that ran: `sink` unless the caller names it (the CLI: `forward`...).
    pub command: String,
    /// Seconds from the workers' start to the stop.
    pub duration_s: f64,
    /// Packets received, all queues (before GRO).
    pub rx_packets: u64,
    /// Bytes of those packets, as received (frames without FCS).
    pub rx_bytes: u64,
    /// Receive rate over the run, packets per second.
    pub rx_pps: f64,
    /// Receive rate over the run, Gbit/s of frame bytes.
    pub rx_gbps: f64,
    /// mbufs not back in their pools after teardown: must be 0.
    pub mbufs_leaked: u64,
    /// mbufs found in queues at teardown and freed (not delivered).
    pub freed_at_teardown: u64,
    /// mbufs that came back to their pools once too often (a double
    /// free), all pools: must be 0. Never netted against `mbufs_leaked`.
    pub mbufs_freed_twice: u64,
    /// Every pool the run made, counted at teardown.
    pub pools: Vec<PoolUsage>,
    /// Why the run ended (`duration`, `stopped`, `pcap replay complete`...).
    pub stop_reason: String,
    /// Where EAL's memory came from, in one line (hugepages found, set up, or `--no-huge`).
    pub hugepages: String,
    /// The arguments EAL was started with.
    pub eal_args: Vec<String>,
    /// TSC frequency, Hz: turns the cycle counts into time.
    pub tsc_hz: u64,
    /// Each port the run received on.
    pub ports: Vec<PortReport>,
    /// Each RX queue, by port then queue.
    pub queues: Vec<QueueReport>,
    /// The embedded generator; absent when a port was the source.
    pub source: Option<SourceReport>,
    /// What is worth knowing about the run (a short pcap replay, capture waits...).
    pub notes: Vec<String>,
    /// GRO counters summed over queues; absent with GRO off.
    pub gro: Option<GroReport>,
    /// Percentiles merged over queues (hold times in ns).
    pub histograms: HistReport,
    /// Held packets that waited longer than the hold limit (`GroConfig::hold_us`):
    /// their queue was polled late. None when GRO flushes every poll (or is off).
    pub gro_holds_over_limit: Option<u64>,
    /// TSC cycles per received packet by phase, all queues (`--cycles`).
    pub cycles: Option<Cycles>,
    /// What the stages received from GRO.
    pub delivered: Delivered,
    /// The skb settings and failures.
    pub skb: SkbReport,
    /// What the capture stage wrote; absent without capture.
    pub capture: Option<CaptureReport>,
    /// What the forward stage sent; absent without forwarding.
    pub forward: Option<ForwardReport>,
    /// What the stages did with the packets.
    pub stage: StageReport,
}

/// What the queues' stages did with the packets GRO delivered.
#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    /// The stage's type (`Sink`, `CaptureStage`, `ForwardStage`, or the user's).
    pub name: String,
    /// Packets consumed (freed at their end, a sink's work).
    pub consumed: u64,
    /// Packets dropped, by the stage's reason.
    pub dropped: std::collections::BTreeMap<String, u64>,
}

/// `[(name, value)]` as `{"name": value}`, keeping the order.
fn pairs_as_object<S: serde::Serializer>(v: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, x) in v {
        m.serialize_entry(k, x)?;
    }
    m.end()
}

/// What the forward stage sent.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardReport {
    /// The TX port(s), as given, space-separated.
    pub port: String,
    /// The encapsulation: `none`, `virtio` or `vxlan`.
    pub encap: String,
    /// The forwarders' counters summed over workers (inline in the JSON object).
    #[serde(flatten)]
    pub stats: crate::forward::ForwardStats,
}

impl Report {
    /// What makes the run a failure although it ran to its end: mbufs not
    /// back in their pools or back twice, a capture that could not be
    /// written. None for a clean run.
    pub fn failure(&self) -> Option<String> {
        let mut v = Vec::new();
        if let Some(e) = self.capture.as_ref().and_then(|c| c.error.as_ref()) {
            v.push(e.clone());
        }
        if self.mbufs_leaked > 0 {
            v.push(format!("{} mbuf(s) leaked", self.mbufs_leaked));
        }
        if self.mbufs_freed_twice > 0 {
            v.push(format!("{} mbuf(s) freed twice", self.mbufs_freed_twice));
        }
        (!v.is_empty()).then(|| v.join("; "))
    }

    /// The human-readable report: a headline, then a line per port, per
    /// queue and per part of the run that has something to say.
    pub fn text(&self) -> String {
        let mut v = vec![self.headline()];
        v.extend(self.ports.iter().flat_map(PortReport::lines));
        v.extend(self.queues.iter().map(QueueReport::line));
        v.extend(self.gro.as_ref().map(gro_line));
        v.push(self.delivered_line());
        v.push(self.stage.line());
        v.push(format!("  histograms: {}", self.histograms.text()));
        if let Some(n) = self.gro_holds_over_limit {
            v.push(format!("  gro: {n} hold(s) past the hold limit"));
        }
        if let Some(c) = &self.cycles {
            v.push(format!(
                "  cycles per packet: rx {:.1}, process {:.1}, stage {:.1} (TSC)",
                c.rx, c.process, c.stage
            ));
        }
        v.extend(self.forward.as_ref().map(ForwardReport::line));
        v.extend(self.capture.as_ref().map(capture_line));
        v.extend(self.source.as_ref().map(SourceReport::line));
        v.push(self.mbufs_line());
        v.extend(self.notes.iter().map(|n| format!("  note: {n}")));
        v.iter().fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        })
    }

    fn headline(&self) -> String {
        format!(
            "grorx {}: {:.2} s, {} packets, {} bytes: {}, {:.2} Gbit/s (stopped: {})",
            self.command,
            self.duration_s,
            self.rx_packets,
            self.rx_bytes,
            fmt_pps(self.rx_pps),
            self.rx_gbps,
            self.stop_reason
        )
    }

    fn delivered_line(&self) -> String {
        let (d, k) = (&self.delivered, &self.skb);
        let truesize = if d.truesize_per_byte > 0.0 {
            format!(", truesize {:.2} B per byte", d.truesize_per_byte)
        } else {
            String::new()
        };
        let malformed = if k.malformed > 0 {
            format!("; {} malformed chains freed", k.malformed)
        } else {
            String::new()
        };
        format!(
            "  delivered: {} packets, {} bytes{truesize}; skb {} (headroom {}, misses {}){malformed}",
            d.packets, d.bytes, k.mode, k.headroom, k.headroom_miss
        )
    }

    fn mbufs_line(&self) -> String {
        let twice = if self.mbufs_freed_twice > 0 {
            format!(", freed twice: {}", self.mbufs_freed_twice)
        } else {
            String::new()
        };
        let teardown = if self.freed_at_teardown > 0 {
            format!(
                " ({} freed from queues at teardown)",
                self.freed_at_teardown
            )
        } else {
            String::new()
        };
        format!("  mbufs leaked: {}{twice}{teardown}", self.mbufs_leaked)
    }
}

impl PortReport {
    fn lines(&self) -> Vec<String> {
        let p = self;
        let mut v = vec![format!(
            "  port {} {} ({}): rx {} pkts {} B; missed {} errors {} no-mbuf {}; pool {} x {} B (1 frame = {} seg)",
            p.id,
            p.name,
            p.driver,
            p.rx_packets,
            p.rx_bytes,
            p.stats.imissed,
            p.stats.ierrors,
            p.stats.rx_nombuf,
            p.pool.mbufs,
            p.pool.data_room,
            p.pool.segments_per_frame
        )];
        let h = &p.link_history;
        if h.link_downs > 0 || !p.link.up {
            v.push(format!(
                "    link went down {} time(s), {:.1} s down in all (not polled meanwhile); {} at the end",
                h.link_downs,
                h.link_down_s,
                if p.link.up { "up" } else { "down" }
            ));
        }
        v
    }
}

impl QueueReport {
    /// The queue's rates, then every event counter that is not zero (a
    /// counter added to the table shows here without more code).
    fn line(&self) -> String {
        let q = self;
        let events: String = q
            .counts
            .exported()
            .filter(|(d, v)| d.unit == Unit::Events && *v > 0)
            .map(|(d, v)| format!(", {} {v}", d.name))
            .collect();
        format!(
            "  port {} queue {} on lcore {} (cpu {}): {} pkts, {}, {:.2} Gbit/s, {:.1} pkts/burst{events}",
            q.port,
            q.queue,
            q.lcore,
            q.cpu,
            q.counts.rx_packets,
            fmt_pps(q.rx_pps),
            q.rx_gbps,
            q.avg_burst
        )
    }
}

/// `name n, name n` of the non-zero entries.
fn nonzero(m: &std::collections::BTreeMap<String, u64>) -> Vec<String> {
    m.iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

fn gro_line(g: &GroReport) -> String {
    let reasons = nonzero(&g.flush_reasons);
    let pass = nonzero(&g.passthrough);
    format!(
        "  gro: {} segments in, {} packets out, {:.2} segments/packet (max {}); packets started {} new, {} from the flow cache; flushes: {}{}",
        g.segments_in,
        g.packets_out,
        g.avg_segments_per_packet,
        g.max_segments_per_packet,
        g.heads_built,
        g.heads_cached,
        if reasons.is_empty() { "none".into() } else { reasons.join(", ") },
        if pass.is_empty() { String::new() } else { format!("; passed through: {}", pass.join(", ")) }
    )
}

impl StageReport {
    fn line(&self) -> String {
        let dropped: Vec<String> = self
            .dropped
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!(
            "  stage {}: consumed {}, dropped {}",
            self.name,
            self.consumed,
            if dropped.is_empty() {
                "0".to_string()
            } else {
                dropped.join(", ")
            }
        )
    }
}

impl ForwardReport {
    fn line(&self) -> String {
        let st = &self.stats;
        format!(
            "  forward to {} ({}): {} packets, {} bytes sent; {} dropped, {} unsent (link down); {} TSO, {} GSO packets into {} segments; headroom misses {}",
            self.port,
            self.encap,
            st.tx_packets,
            st.tx_bytes,
            st.tx_dropped,
            st.link_down,
            st.tso_packets,
            st.gso_packets,
            st.gso_segments,
            st.headroom_miss
        )
    }
}

fn capture_line(c: &CaptureReport) -> String {
    format!(
        "  capture: {} packets, {} bytes to {}{}",
        c.packets,
        c.bytes,
        c.path.display(),
        if c.dropped > 0 {
            format!("; {} not written", c.dropped)
        } else {
            String::new()
        }
    )
}

impl SourceReport {
    fn line(&self) -> String {
        let g = self;
        format!(
            "  source {}: {} flows, MSS {}, {} B frames; sent {} ({} ring-full waits); {:.0} cycles/pkt",
            g.kind, g.flows, g.mss, g.frame_len, g.sent, g.ring_full_waits, g.cycles_per_packet
        )
    }
}

//! The final report of a run: printed for people, or as one JSON object.

use crate::capture::CaptureReport;
use crate::gro::GroReport;
use crate::hist::HistReport;
use crate::port::{Link, PortStats};
use crate::stats::fmt_pps;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    pub port: u16,
    pub queue: u16,
    pub lcore: u32,
    pub cpu: i32,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_pps: f64,
    pub rx_gbps: f64,
    pub rx_bursts: u64,
    pub rx_polls: u64,
    /// Packets per non-empty poll.
    pub avg_burst: f64,
    /// Packets the stage delivered (after GRO).
    pub out_packets: u64,
    pub gro: Option<GroReport>,
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
    pub packets: u64,
    pub bytes: u64,
    /// Buffer bytes pinned per delivered byte (skb truesize; 0 with GRO off).
    pub truesize_per_byte: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkbReport {
    pub mode: String,
    pub headroom: u16,
    pub headroom_miss: u64,
    pub head_alloc_fail: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortReport {
    pub id: u16,
    pub name: String,
    pub driver: String,
    pub link: Link,
    pub mtu: u16,
    pub rx_queues: u16,
    pub rx_desc: u16,
    pub rx_offloads: String,
    pub pool: PoolReport,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub stats: PortStats,
    /// Non-zero extended statistics.
    pub xstats: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolReport {
    pub name: String,
    pub mbufs: u32,
    pub cache: u32,
    pub data_room: u16,
    pub priv_size: u16,
    /// Segments a full frame at the port's MTU takes (1 with auto sizing).
    pub segments_per_frame: u32,
    pub hugepages: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceReport {
    pub kind: String,
    pub flows: u32,
    pub mss: u16,
    pub frame_len: usize,
    pub sent: u64,
    pub sent_bytes: u64,
    pub ring_full_waits: u64,
    pub alloc_fail: u64,
    /// What the generator itself spends per packet (TSC cycles).
    pub cycles_per_packet: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub command: String,
    pub duration_s: f64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_pps: f64,
    pub rx_gbps: f64,
    /// mbufs not back in their pools after teardown: must be 0.
    pub mbufs_leaked: u64,
    /// mbufs found in queues at teardown and freed (not delivered).
    pub freed_at_teardown: u64,
    pub stop_reason: String,
    pub hugepages: String,
    pub eal_args: Vec<String>,
    pub tsc_hz: u64,
    pub ports: Vec<PortReport>,
    pub queues: Vec<QueueReport>,
    pub source: Option<SourceReport>,
    pub notes: Vec<String>,
    pub gro: Option<GroReport>,
    /// Percentiles merged over queues (hold times in ns).
    pub histograms: HistReport,
    /// TSC cycles per received packet by phase, all queues (`--cycles`).
    pub cycles: Option<Cycles>,
    pub delivered: Delivered,
    pub skb: SkbReport,
    pub capture: Option<CaptureReport>,
    pub forward: Option<ForwardReport>,
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

/// What the forward stage sent.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardReport {
    pub port: String,
    pub encap: String,
    #[serde(flatten)]
    pub stats: crate::forward::ForwardStats,
}

impl Report {
    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let push = |s: &mut String, l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        push(
            &mut s,
            format!(
                "grorx {}: {:.2} s, {} packets, {} bytes: {}, {:.2} Gbit/s (stopped: {})",
                self.command,
                self.duration_s,
                self.rx_packets,
                self.rx_bytes,
                fmt_pps(self.rx_pps),
                self.rx_gbps,
                self.stop_reason
            ),
        );
        for p in &self.ports {
            push(
                &mut s,
                format!(
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
                ),
            );
        }
        for q in &self.queues {
            push(
                &mut s,
                format!(
                    "  port {} queue {} on lcore {} (cpu {}): {} pkts, {}, {:.2} Gbit/s, {:.1} pkts/burst",
                    q.port,
                    q.queue,
                    q.lcore,
                    q.cpu,
                    q.rx_packets,
                    fmt_pps(q.rx_pps),
                    q.rx_gbps,
                    q.avg_burst
                ),
            );
        }
        if let Some(g) = &self.gro {
            let reasons: Vec<String> = g
                .flush_reasons
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let pass: Vec<String> = g
                .passthrough
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            push(
                &mut s,
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
                ),
            );
        }
        push(
            &mut s,
            format!(
                "  delivered: {} packets, {} bytes{}; skb {} (headroom {}, misses {})",
                self.delivered.packets,
                self.delivered.bytes,
                if self.delivered.truesize_per_byte > 0.0 {
                    format!(
                        ", truesize {:.2} B per byte",
                        self.delivered.truesize_per_byte
                    )
                } else {
                    String::new()
                },
                self.skb.mode,
                self.skb.headroom,
                self.skb.headroom_miss
            ),
        );
        push(&mut s, format!("  histograms: {}", self.histograms.text()));
        if let Some(c) = &self.cycles {
            push(
                &mut s,
                format!(
                    "  cycles per packet: rx {:.1}, process {:.1}, stage {:.1} (TSC)",
                    c.rx, c.process, c.stage
                ),
            );
        }
        if let Some(f) = &self.forward {
            let st = &f.stats;
            push(
                &mut s,
                format!(
                    "  forward to {} ({}): {} packets, {} bytes sent; {} dropped; {} TSO, {} GSO packets into {} segments; headroom misses {}",
                    f.port,
                    f.encap,
                    st.tx_packets,
                    st.tx_bytes,
                    st.tx_dropped,
                    st.tso_packets,
                    st.gso_packets,
                    st.gso_segments,
                    st.headroom_miss
                ),
            );
        }
        if let Some(c) = &self.capture {
            push(
                &mut s,
                format!(
                    "  capture: {} packets, {} bytes to {}",
                    c.packets,
                    c.bytes,
                    c.path.display()
                ),
            );
        }
        if let Some(g) = &self.source {
            push(
                &mut s,
                format!(
                    "  source {}: {} flows, MSS {}, {} B frames; sent {} ({} ring-full waits); {:.0} cycles/pkt",
                    g.kind, g.flows, g.mss, g.frame_len, g.sent, g.ring_full_waits, g.cycles_per_packet
                ),
            );
        }
        push(
            &mut s,
            format!(
                "  mbufs leaked: {}{}",
                self.mbufs_leaked,
                if self.freed_at_teardown > 0 {
                    format!(
                        " ({} freed from queues at teardown)",
                        self.freed_at_teardown
                    )
                } else {
                    String::new()
                }
            ),
        );
        for n in &self.notes {
            push(&mut s, format!("  note: {n}"));
        }
        s
    }
}

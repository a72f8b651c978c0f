//! Latency and size distributions (HdrHistogram): per queue, recorded by the
//! queue's lcore into its own histograms, merged into a shared copy every few
//! milliseconds with a `try_lock` (never per packet, never blocking), and
//! merged across queues for the report and the HdrHistogram interval log.

pub use grorx_gro::hist::{move_into, new_hist, Counts, LogCounts};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, SystemTime};

/// What one queue records.
#[derive(Clone)]
pub struct QueueHist {
    /// Packets per non-empty poll.
    pub burst: Histogram<u64>,
    /// Segments per packet GRO delivers.
    pub gro_segs: Histogram<u64>,
    /// Nanoseconds from a held packet's first segment to its flush.
    pub gro_hold_ns: Histogram<u64>,
}

impl Default for QueueHist {
    fn default() -> Self {
        QueueHist {
            burst: new_hist(4096),
            gro_segs: new_hist(256),
            gro_hold_ns: new_hist(10_000_000_000),
        }
    }
}

impl QueueHist {
    /// Adds another queue's (or interval's) distributions into these.
    pub fn add(&mut self, o: &QueueHist) {
        // Same bounds on both sides: add cannot fail. Empty ones are skipped
        // (adding walks the whole counts array).
        for (a, b) in [
            (&mut self.burst, &o.burst),
            (&mut self.gro_segs, &o.gro_segs),
            (&mut self.gro_hold_ns, &o.gro_hold_ns),
        ] {
            if !b.is_empty() {
                let _ = a.add(b);
            }
        }
    }

    /// Empties every distribution.
    pub fn reset(&mut self) {
        self.burst.reset();
        self.gro_segs.reset();
        self.gro_hold_ns.reset();
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.burst.is_empty() && self.gro_segs.is_empty() && self.gro_hold_ns.is_empty()
    }
}

/// Percentiles of one distribution.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Summary {
    /// Values recorded.
    pub count: u64,
    /// Mean of the values.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value recorded.
    pub max: u64,
}

/// The percentiles of `h` (all zero when it is empty).
pub fn summary(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    Summary {
        count: h.len(),
        mean: h.mean(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// The report's `histograms`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct HistReport {
    /// Packets per non-empty poll.
    pub burst: Summary,
    /// Segments per packet GRO delivered.
    pub gro_segments: Summary,
    /// Nanoseconds a held packet waited, first segment to flush.
    pub gro_hold_ns: Summary,
}

impl HistReport {
    /// The percentiles of one queue's (or the merged) distributions.
    pub fn of(h: &QueueHist) -> HistReport {
        HistReport {
            burst: summary(&h.burst),
            gro_segments: summary(&h.gro_segs),
            gro_hold_ns: summary(&h.gro_hold_ns),
        }
    }

    /// One line for people.
    pub fn text(&self) -> String {
        let f = |n: &str, s: &Summary, unit: &str| {
            format!(
                "{n}: p50 {}{unit} p90 {}{unit} p99 {}{unit} p99.9 {}{unit} max {}{unit}",
                s.p50, s.p90, s.p99, s.p999, s.max
            )
        };
        let mut v = vec![f("burst", &self.burst, "")];
        if self.gro_segments.count > 0 {
            v.push(f("segments/packet", &self.gro_segments, ""));
            v.push(f("hold", &self.gro_hold_ns, " ns"));
        }
        v.join("; ")
    }
}

/// Writes intervals in the HdrHistogram log format (what HistogramLogAnalyzer
/// and the other HdrHistogram tools read): one tagged histogram per
/// distribution per interval.
pub struct HdrLog {
    file: std::io::BufWriter<std::fs::File>,
    ser: V2DeflateSerializer,
    start: SystemTime,
}

impl HdrLog {
    /// Creates (or truncates) the log at `path` and writes its header.
    pub fn create(path: &std::path::Path) -> anyhow::Result<HdrLog> {
        let f = std::fs::File::create(path)
            .map_err(|e| anyhow::anyhow!("HDR histogram log {}: {e}", path.display()))?;
        let mut log = HdrLog {
            file: std::io::BufWriter::new(f),
            ser: V2DeflateSerializer::new(),
            start: SystemTime::now(),
        };
        IntervalLogWriterBuilder::new()
            .add_comment("grorx: tags burst (packets per poll), gro_segments (segments per packet), gro_hold_ns (ns)")
            .with_start_time(log.start)
            .with_base_time(log.start)
            .begin_log_with(&mut log.file, &mut log.ser)?;
        log.file.write_all(b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n")?;
        Ok(log)
    }

    /// One interval that began `since` (relative to the log's start) and lasted `len`.
    pub fn interval(
        &mut self,
        h: &QueueHist,
        since: Duration,
        len: Duration,
    ) -> anyhow::Result<()> {
        let mut w =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.file, &mut self.ser)?;
        for (tag, hist) in [
            ("burst", &h.burst),
            ("gro_segments", &h.gro_segs),
            ("gro_hold_ns", &h.gro_hold_ns),
        ] {
            if !hist.is_empty() {
                w.write_histogram(hist, since, len, Tag::new(tag))
                    .map_err(|e| anyhow::anyhow!("HDR histogram log: {e}"))?;
            }
        }
        Ok(())
    }

    /// Flushes the log to its file.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.file.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn percentiles_and_merge() {
        let mut a = QueueHist::default();
        let mut b = QueueHist::default();
        for i in 1..=100u64 {
            a.burst.record(i).unwrap();
            b.gro_hold_ns.record(i * 1000).unwrap();
        }
        a.add(&b);
        let r = HistReport::of(&a);
        assert_eq!(r.burst.count, 100);
        assert_eq!(r.burst.p50, 50);
        assert!(r.gro_hold_ns.p99 >= 98_000 && r.gro_hold_ns.p99 <= 100_000);
        assert_eq!(r.burst.max, 100);
        a.reset();
        assert!(a.is_empty());
    }

    #[test]
    fn log_reads_back_with_tags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hlog");
        let mut log = HdrLog::create(&p).unwrap();
        let mut h = QueueHist::default();
        h.burst.record(32).unwrap();
        h.gro_segs.record(17).unwrap();
        log.interval(&h, Duration::from_secs(0), Duration::from_secs(1))
            .unwrap();
        log.interval(&h, Duration::from_secs(1), Duration::from_secs(1))
            .unwrap();
        log.finish().unwrap();
        let data = std::fs::read(&p).unwrap();
        let text = String::from_utf8_lossy(&data);
        assert!(text.contains("#[StartTime:") && text.contains("\"StartTimestamp\""));
        let mut tags = Vec::new();
        for e in IntervalLogIterator::new(&data) {
            if let Ok(LogEntry::Interval(i)) = e {
                tags.push(i.tag().map(|t| t.as_str().to_string()).unwrap_or_default());
                let bytes = base64_decode(i.encoded_histogram());
                let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                assert_eq!(h.len(), 1);
            }
        }
        assert_eq!(tags, vec!["burst", "gro_segments", "burst", "gro_segments"]);
    }

    /// Standard base64 (the log's encoding), decoded for the test.
    fn base64_decode(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        };
        let b: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
        let mut out = Vec::new();
        for ch in b.chunks(4) {
            let v: Vec<u32> = ch.iter().map(|&c| val(c) as u32).collect();
            let n = (v
                .iter()
                .enumerate()
                .map(|(i, x)| x << (18 - 6 * i))
                .sum::<u32>())
            .to_be_bytes();
            out.extend_from_slice(&n[1..ch.len()]);
        }
        out
    }
}

//! Metrics: dotted paths into a run's JSON report (`rx_pps`,
//! `gro.avg_segments_per_packet`, `ports.0.stats.imissed`), with the unit
//! and scale they are shown in.

use serde_json::Value;

/// The value at a dotted path (array elements by index); `None` when the
/// report has no such number (e.g. GRO fields of a `--gro off` run).
pub fn lookup(v: &Value, path: &str) -> Option<f64> {
    let mut cur = v;
    for part in path.split('.') {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    match cur {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// How a metric is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Display {
    /// Axis / column label, unit included.
    pub label: String,
    pub unit: &'static str,
    /// Shown value = raw value * scale.
    pub scale: f64,
    /// Decimals in the table (`usize::MAX`: integers bare, else 3).
    pub decimals: usize,
}

pub fn display(path: &str) -> Display {
    let (unit, scale, decimals, what): (&'static str, f64, usize, &str) = match path {
        "rx_pps" => ("Mpps", 1e-6, 3, "RX rate"),
        "rx_gbps" => ("Gbit/s", 1.0, 2, "RX throughput"),
        "rx_packets" => ("M packets", 1e-6, 2, "RX packets"),
        "gro.avg_segments_per_packet" => ("segments/packet", 1.0, 2, "GRO segments per packet"),
        "gro.max_segments_per_packet" => ("segments", 1.0, 0, "GRO max segments per packet"),
        "delivered.truesize_per_byte" => ("B pinned/B delivered", 1.0, 3, "truesize per byte"),
        "skb.headroom_miss" => ("count", 1.0, 0, "headroom misses"),
        "source.cycles_per_packet" => ("cycles/packet", 1.0, 0, "source cost"),
        "ports.0.pool.segments_per_frame" => ("mbufs/frame", 1.0, 0, "segments per frame"),
        "mbufs_leaked" => ("mbufs", 1.0, 0, "mbufs leaked"),
        p if p.ends_with("_ns") || p.contains("hold_ns") => ("ns", 1.0, 0, p),
        p if p.ends_with("_s") => ("s", 1.0, 2, p),
        p => ("", 1.0, usize::MAX, p),
    };
    Display {
        label: if unit.is_empty() {
            what.to_string()
        } else {
            format!("{what} [{unit}]")
        },
        unit,
        scale,
        decimals,
    }
}

/// A shown value (a metric of unknown kind: integers as integers, else 3
/// decimals).
pub fn fmt(path: &str, raw: f64) -> String {
    let d = display(path);
    let v = raw * d.scale;
    let decimals = match d.decimals {
        usize::MAX if v.fract() == 0.0 => 0,
        usize::MAX => 3,
        n => n,
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_reach_nested_fields() {
        let v: Value = serde_json::json!({
            "rx_pps": 1.5e6,
            "gro": {"avg_segments_per_packet": 12.5},
            "ports": [{"stats": {"imissed": 7}}],
            "source": null
        });
        assert_eq!(lookup(&v, "rx_pps"), Some(1.5e6));
        assert_eq!(lookup(&v, "gro.avg_segments_per_packet"), Some(12.5));
        assert_eq!(lookup(&v, "ports.0.stats.imissed"), Some(7.0));
        assert_eq!(lookup(&v, "source.cycles_per_packet"), None);
        assert_eq!(lookup(&v, "ports.1.stats.imissed"), None);
        assert_eq!(fmt("rx_pps", 1_234_567.0), "1.235");
        assert_eq!(display("rx_pps").label, "RX rate [Mpps]");
    }
}

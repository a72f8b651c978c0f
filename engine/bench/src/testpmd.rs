//! dpdk-testpmd as a cell (`--forward-mode=rxonly`: the DPDK floor) and as
//! a memif peer (`--forward-mode=txonly`), with its per-second statistics
//! turned into a report the metrics can read.

use serde_json::{json, Value};

pub const PROGRAM: &str = "dpdk-testpmd";

/// EAL arguments testpmd gets besides the experiment's cores.
fn eal(
    cores: &[String],
    vdev: &str,
    file_prefix: &str,
    no_huge: bool,
    extra: &[&str],
) -> Vec<String> {
    let mut a: Vec<String> = vec![PROGRAM.into()];
    a.extend(cores.iter().cloned());
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(
        [
            "--no-pci",
            "--vdev",
            vdev,
            "--file-prefix",
            file_prefix,
            "--log-level=lib.eal:warning",
        ]
        .map(String::from),
    );
    if no_huge {
        if !cores.iter().any(|c| c == "--no-huge") {
            a.extend(["--no-huge", "-m", "1024"].map(String::from));
        }
    } else {
        a.push("--huge-unlink".into());
    }
    a
}

/// `dpdk-testpmd ... -- --forward-mode=rxonly`, with a pool that holds a
/// replayed capture (net_pcap infinite_rx keeps every frame in an mbuf).
pub fn rxonly_argv(
    cores: &[String],
    vdev: &str,
    file_prefix: &str,
    no_huge: bool,
    cached_frames: u64,
    extra: &[String],
) -> Vec<String> {
    let mut a = eal(cores, vdev, file_prefix, no_huge, &[]);
    let mbufs = (cached_frames + 16_384).max(8191);
    a.extend(
        [
            "--".to_string(),
            "--forward-mode=rxonly".into(),
            "--auto-start".into(),
            "--stats-period=1".into(),
            format!("--total-num-mbufs={mbufs}"),
        ]
        .into_iter()
        .chain(extra.iter().cloned()),
    );
    a
}

/// The memif server that sends `frame_len` B frames as fast as it can, its
/// main lcore on the sink's worker CPU (1) so its TX lcore gets CPU 0.
pub fn txonly_peer_argv(
    cores: &[String],
    socket: &str,
    file_prefix: &str,
    no_huge: bool,
    frame_len: u16,
) -> Vec<String> {
    let vdev = format!("net_memif0,role=server,socket={socket}");
    let main = if cores.iter().any(|c| c == "--main-lcore") {
        &[][..]
    } else {
        &["--main-lcore", "1"][..]
    };
    let mut a = eal(cores, &vdev, file_prefix, no_huge, main);
    a.extend([
        "--".to_string(),
        "--forward-mode=txonly".into(),
        "--auto-start".into(),
        "--stats-period=1".into(),
        format!("--txpkts={frame_len}"),
    ]);
    a
}

/// The memif server that io-forwards a capture replayed from memory
/// (net_pcap infinite_rx, port 0) into the memif (port 1).
pub fn pcap_peer_argv(
    cores: &[String],
    socket: &str,
    pcap: &str,
    file_prefix: &str,
    no_huge: bool,
    cached_frames: u64,
) -> Vec<String> {
    let vdev = format!("net_pcap0,rx_pcap={pcap},infinite_rx=1");
    let memif = format!("net_memif0,role=server,socket={socket}");
    let mut extra: Vec<&str> = vec!["--vdev", &memif];
    if !cores.iter().any(|c| c == "--main-lcore") {
        extra.extend(["--main-lcore", "1"]);
    }
    let mut a = eal(cores, &vdev, file_prefix, no_huge, &extra);
    let mbufs = (cached_frames + 16_384).max(8191);
    a.extend([
        "--".to_string(),
        "--forward-mode=io".into(),
        "--auto-start".into(),
        "--stats-period=1".into(),
        format!("--total-num-mbufs={mbufs}"),
    ]);
    a
}

fn numbers_after(text: &str, key: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| {
            let i = l.find(key)?;
            l[i + key.len()..]
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .collect()
}

/// Per-second rate lines in testpmd's output so far.
pub fn samples(stdout: &str) -> usize {
    stdout.matches("Rx-pps:").count()
}

/// The rate lines `report` needs for a run of `duration` seconds after
/// `warmup`: those it drops, then one a measured second.
pub fn samples_needed(warmup: f64, duration: f64) -> usize {
    (warmup.ceil() as usize).max(1) + (duration.ceil() as usize).max(1)
}

/// A report from testpmd's output: `rx_pps` and `rx_gbps` are the means of
/// its per-second rates after `warmup` seconds (the first second, partial,
/// is always dropped when later ones exist).
pub fn report(stdout: &str, warmup: f64) -> Option<Value> {
    let clean: String = stdout.chars().filter(|&c| c != '\u{1b}').collect();
    let pps = numbers_after(&clean, "Rx-pps:");
    let bps = numbers_after(&clean, "Rx-bps:");
    if pps.is_empty() {
        return None;
    }
    let drop = (warmup.ceil() as usize).max(1);
    let from = if pps.len() > drop { drop } else { 0 };
    let steady = &pps[from..];
    let mean = steady.iter().sum::<f64>() / steady.len() as f64;
    let gbps = if bps.len() == pps.len() {
        let b = &bps[from..];
        b.iter().sum::<f64>() / b.len() as f64 / 1e9
    } else {
        0.0
    };
    let rx_packets = numbers_after(&clean, "RX-packets:").last().copied();
    Some(json!({
        "command": "testpmd-rxonly",
        "rx_pps": mean,
        "rx_gbps": gbps,
        "rx_packets": rx_packets,
        "samples_used": steady.len(),
        "rx_pps_samples": pps,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_needs_the_dropped_seconds_and_one_line_a_measured_second() {
        assert_eq!(samples_needed(0.0, 1.0), 2);
        assert_eq!(samples_needed(1.0, 4.0), 5);
        assert_eq!(samples_needed(1.5, 0.5), 3);
        let out = "  Rx-pps:  10  Rx-bps: 1\n\u{1b}[2J  Rx-pps:  12  Rx-bps: 1\n";
        assert_eq!(samples(out), 2);
        assert_eq!(samples(""), 0);
    }

    #[test]
    fn parses_periodic_stats() {
        let out = "\u{1b}[2J\u{1b}[1;1H
  ######################## NIC statistics for port 0  ########################
  RX-packets: 100        RX-missed: 0          RX-bytes:  6400
  Throughput (since last show)
  Rx-pps:          100          Rx-bps:        51200
  Tx-pps:            0          Tx-bps:            0
  Rx-pps:         2000          Rx-bps:      1024000
  Rx-pps:         4000          Rx-bps:      2048000
  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 6100           RX-dropped: 0             RX-total: 6100
";
        let r = report(out, 1.0).unwrap();
        assert_eq!(r["rx_pps"], 3000.0);
        assert_eq!(r["rx_packets"], 6100.0);
        assert!((r["rx_gbps"].as_f64().unwrap() - 0.001536).abs() < 1e-9);
        assert!(report("nothing here", 1.0).is_none());
        let a = rxonly_argv(
            &["-l".into(), "0,1".into()],
            "net_null0",
            "p",
            false,
            100,
            &[],
        );
        assert!(a.contains(&"--total-num-mbufs=16484".to_string()));
        assert!(a.contains(&"--huge-unlink".to_string()));
        let p = txonly_peer_argv(&["-l".into(), "0,1".into()], "/tmp/s", "q", true, 1514);
        assert!(p.contains(&"--main-lcore".to_string()) && p.contains(&"--no-huge".to_string()));
    }
}

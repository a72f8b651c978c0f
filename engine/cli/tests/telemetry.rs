//! `grorx sink` answers grorx's telemetry commands while it runs.

#[path = "../../grorx/tests/telemetry_client/mod.rs"]
mod telemetry_client;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use telemetry_client::{body, query, RuntimeDir};

/// Waits for a file to appear.
fn wait_for(p: &Path, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if p.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// CLI-level check: a real `grorx sink` (embedded generator) answers
/// `/grorx/stats` on its telemetry socket while it runs.
#[test]
fn sink_answers_grorx_stats_while_running() {
    let prefix = format!("grorx-tele-cli-{}", std::process::id());
    let dir = PathBuf::from("/var/run/dpdk").join(&prefix);
    let _cleanup = RuntimeDir(dir.clone());
    let mut child = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(["sink", "--duration", "6", "--json", "--name"])
        .arg(&prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grorx runs");
    let sock = dir.join("dpdk_telemetry.v2");
    if !wait_for(&sock, Duration::from_secs(5)) {
        child.kill().ok();
        let o = child.wait_with_output().unwrap();
        panic!(
            "no telemetry socket {} after 5 s:\n{}",
            sock.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The name is this process's while it runs: a second one is refused,
    // before EAL starts, and says who holds it and what to do.
    let second = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(["sink", "--duration", "1", "-q", "--name"])
        .arg(&prefix)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "another grorx named '{prefix}' is running (pid {})",
            child.id()
        )) && err.contains("--name"),
        "{err}"
    );
    // Let the workers start, then ask twice: the counters are live.
    std::thread::sleep(Duration::from_millis(1500));
    let a = query(&prefix, &["/grorx/stats", "/grorx/queues", "/grorx/gro"]);
    std::thread::sleep(Duration::from_millis(1000));
    let b = query(&prefix, &["/grorx/stats"]);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let s1 = body(&a[0], "/grorx/stats");
    let s2 = body(&b[0], "/grorx/stats");
    assert_eq!(s1["running"], 1, "{s1}");
    assert!(s1["queues"].as_u64().unwrap() >= 1);
    assert!(s1["rx_packets"].as_u64().unwrap() > 0, "{s1}");
    assert!(
        s2["rx_packets"].as_u64().unwrap() > s1["rx_packets"].as_u64().unwrap(),
        "{s1} then {s2}"
    );
    let q = body(&a[1], "/grorx/queues");
    assert!(q["0"]["rx_packets"].as_u64().unwrap() > 0, "{q}");
    let g = body(&a[2], "/grorx/gro");
    assert!(g["segments_in"].as_u64().unwrap() > 0, "{g}");
    // Numbers stay numbers (22.11's telemetry has no floats: thousandths).
    assert!(
        g["avg_segments_per_packet_milli"].as_u64().unwrap() >= 1000,
        "{g}"
    );
    assert!(q["0"]["avg_burst_milli"].as_u64().unwrap() >= 1000, "{q}");
    // The run's own report: more packets than any live snapshot.
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    assert!(v["rx_packets"].as_u64().unwrap() >= s2["rx_packets"].as_u64().unwrap());
    // grorx removes its runtime directory (its name's) at exit.
    assert!(!dir.exists(), "{} left behind", dir.display());
}

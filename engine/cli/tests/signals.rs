//! Ctrl-C and SIGTERM at any moment of a run, in every mode: the run stops
//! cleanly with a consistent report (every packet received is delivered or
//! dropped by reason, no mbuf leaked) and exits 0; a second signal exits
//! at once with 130 (docs/json.md).

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// Each run pins lcores to the same CPUs: one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(args)
        .env("GRORX_NAME", format!("signals-{}", std::process::id()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grorx runs")
}

fn kill(c: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on a child of ours that has not been waited for.
    unsafe { libc::kill(c.id() as libc::pid_t, sig) };
}

/// A fixed sequence of delays (ms) spread over start-up and the steady run.
fn delays(n: usize) -> Vec<u64> {
    let mut x = 0x2545_f491u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            20 + x % 1500
        })
        .collect()
}

/// The report's own accounts: received = given to GRO + refused as
/// malformed; what GRO gave =
/// what the stage was handed = what it consumed, dropped, wrote or sent.
fn consistent(mode: &str, r: &Value) -> Result<(), String> {
    let n = |v: &Value| v.as_u64().unwrap_or(u64::MAX);
    let g = &r["gro"];
    if n(&r["rx_packets"]) != n(&g["segments_in"]) + n(&r["skb"]["malformed"]) {
        return Err(format!(
            "rx_packets {} vs gro.segments_in {} + skb.malformed {}",
            r["rx_packets"], g["segments_in"], r["skb"]["malformed"]
        ));
    }
    let delivered = n(&r["delivered"]["packets"]);
    if delivered != n(&g["packets_out"]) {
        return Err(format!(
            "delivered {delivered} vs gro.packets_out {}",
            g["packets_out"]
        ));
    }
    let handled = match mode {
        "capture" => n(&r["capture"]["packets"]) + n(&r["capture"]["dropped"]),
        "forward" => n(&r["forward"]["packets_in"]),
        _ => {
            let dropped: u64 = r["stage"]["dropped"]
                .as_object()
                .map(|m| m.values().map(n).sum())
                .unwrap_or(0);
            n(&r["stage"]["consumed"]) + dropped
        }
    };
    if handled != delivered {
        return Err(format!(
            "{mode}: stage handled {handled} of {delivered} delivered"
        ));
    }
    if n(&r["mbufs_leaked"]) != 0 {
        return Err(format!("{} mbufs leaked", r["mbufs_leaked"]));
    }
    Ok(())
}

#[test]
fn a_signal_at_any_moment_stops_every_mode_cleanly() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.pcap");
    let cap = cap.to_str().unwrap();
    let modes: [(&str, Vec<&str>); 3] = [
        ("sink", vec!["sink"]),
        ("capture", vec!["sink", "--capture", cap]),
        (
            "forward",
            vec![
                "forward",
                "--port",
                "net_null0",
                "--to",
                "net_null1",
                "--no-huge",
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (i, delay) in delays(12).into_iter().enumerate() {
        let (mode, args) = &modes[i % modes.len()];
        let sig = if i % 2 == 0 {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let mut a = args.clone();
        a.extend(["--duration", "60", "--json", "-q"]);
        let child = spawn(&a);
        std::thread::sleep(Duration::from_millis(delay));
        kill(&child, sig);
        let t = Instant::now();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!("{mode}, signal {sig} after {delay} ms");
        if o.status.code() != Some(0) {
            failures.push(format!("{what}: exit {:?}: {err}", o.status));
            continue;
        }
        let r: Value = match serde_json::from_slice(&o.stdout) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{what}: no report ({e}): {err}"));
                continue;
            }
        };
        if r["stop_reason"] != "signal" {
            failures.push(format!("{what}: stopped by {}", r["stop_reason"]));
        }
        if let Err(e) = consistent(mode, &r) {
            failures.push(format!("{what}: {e}"));
        }
        if t.elapsed() > Duration::from_secs(10) {
            failures.push(format!("{what}: took {:?} to stop", t.elapsed()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_second_signal_exits_at_once() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let child = spawn(&["sink", "--duration", "60", "--json", "-q"]);
    std::thread::sleep(Duration::from_millis(1500));
    kill(&child, libc::SIGINT);
    // Apart, so the kernel does not merge them into one pending signal,
    // and well before the first one's clean stop is over.
    std::thread::sleep(Duration::from_millis(5));
    kill(&child, libc::SIGINT);
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // An exit at once leaves EAL's runtime directory behind.
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/signals-{}", std::process::id()));
}

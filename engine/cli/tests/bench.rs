//! `grorx bench --quick` on every experiment in bench-configs/: a smoke
//! check (not a timed assertion) that each one runs, every run passes its
//! checks (exit status, mbufs_leaked == 0), and the CSV, JSON and PNG are
//! written with the expected cells. Cells that wait on a flag an owner has
//! not added yet must be listed as pending with their reason.

use grorx_bench::config::Config;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

// Every run pins lcores to the same CPUs: one experiment at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench-configs")
}

fn has_testpmd() -> bool {
    grorx_bench::process::on_path(grorx_bench::testpmd::PROGRAM)
}

/// Runs `grorx bench NAME.toml --quick` and checks its outputs; `must_run`
/// are cells that must have run (the others may be pending, with a reason).
fn quick(name: &str, must_run: &[&str]) {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let cfg_path = configs().join(format!("{name}.toml"));
    let cfg = Config::load(&cfg_path).expect("the config parses");
    assert_eq!(cfg.name, name, "outputs are named after `name`");
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        // An instance name of this test binary's own: other runs on the
        // machine keep theirs.
        .env("GRORX_NAME", format!("test-{}", std::process::id()))
        .args(["bench", cfg_path.to_str().unwrap(), "--quick", "--out"])
        .arg(dir.path())
        .output()
        .expect("grorx bench runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "grorx bench {name} --quick failed\n{stdout}\n{stderr}"
    );
    let csv = dir.path().join(format!("{name}.csv"));
    let json = dir.path().join(format!("{name}.json"));
    let png = dir.path().join(format!("{name}.png"));
    let png_bytes = std::fs::read(&png).expect("the PNG is written");
    assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG file");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON is written")).unwrap();
    assert_eq!(doc["name"], name);
    assert_eq!(doc["failed_runs"], 0);
    assert!(doc["source_cost"].as_str().is_some_and(|s| !s.is_empty()));
    if let Some(base) = &cfg.cost_base {
        // Every other cell that ran has its added cost over the base.
        let added = doc["added_cost"]["cells"].as_array().expect("added_cost");
        assert!(!added.is_empty(), "{name}: no added cost over {base}");
        assert!(
            stdout.contains(&format!("added cost per packet over {base}")),
            "{stdout}"
        );
    }
    let text = std::fs::read_to_string(&csv).expect("the CSV is written");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("a header").split(',').collect();
    assert_eq!(&head[..3], ["cell", "sweep_value", "repetition"]);
    for m in &cfg.metrics {
        assert!(head.contains(&m.as_str()), "CSV column {m}: {head:?}");
    }
    let ran: Vec<String> = lines
        .map(|l| l.split(',').next().unwrap_or_default().to_string())
        .collect();
    let pending: Vec<(String, String)> = doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["cell"].as_str().unwrap().to_string(),
                p["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for cell in cfg.cells() {
        let runs = ran.iter().filter(|c| **c == cell.name).count();
        let why = pending.iter().find(|(c, _)| *c == cell.name);
        match why {
            Some((_, reason)) => {
                assert_eq!(runs, 0, "{}: pending but ran", cell.name);
                assert!(
                    !reason.is_empty(),
                    "{}: pending without a reason",
                    cell.name
                );
                assert!(
                    !must_run.contains(&cell.name.as_str()),
                    "{} must run, but: {reason}",
                    cell.name
                );
                eprintln!("{name}: {} pending: {reason}", cell.name);
            }
            None => assert_eq!(runs, 1, "{}: one run in --quick\n{text}", cell.name),
        }
    }
    // The table names every cell.
    for cell in cfg.cells() {
        assert!(
            stdout.contains(&cell.name),
            "{} not in the table",
            cell.name
        );
    }
}

/// BIG TCP: 64 KiB against 256 KiB merged packets, each run to its end.
#[test]
fn big_tcp() {
    quick("big-tcp", &["gro-off", "64k", "256k"]);
}

#[test]
fn max_frags() {
    quick(
        "max-frags",
        &[
            "max-frags=3",
            "max-frags=8",
            "max-frags=16",
            "max-frags=17",
            "max-frags=32",
            "max-frags=45",
        ],
    );
}

#[test]
fn single_segment() {
    let all = ["auto", "2-mbufs", "3-mbufs"];
    quick("single-segment", if has_testpmd() { &all } else { &[] });
}

#[test]
fn hugepages() {
    quick(
        "hugepages",
        &["huge-cache256", "huge-cache0", "4k-cache256", "4k-cache0"],
    );
}

#[test]
fn build_skb() {
    quick("build-skb", &["build", "copy"]);
}

#[test]
fn headroom() {
    quick(
        "headroom",
        &["virtio-h0", "virtio-h128", "vxlan-h0", "vxlan-h128"],
    );
}

#[test]
fn anchors() {
    for name in ["anchors", "anchors-4flows"] {
        let mut must = vec!["gro-off", "gro-rte", "gro-on-trust", "gro-on"];
        if has_testpmd() {
            must.push("testpmd-rxonly");
        }
        quick(name, &must);
    }
}

/// The anchors on synthetic captures: more flows, IPv6, nothing to merge,
/// short flows.
#[test]
fn anchors_flows_and_ipv6() {
    for name in [
        "anchors-32flows",
        "anchors-1024flows",
        "anchors-ipv6",
        "anchors-newflows",
        "anchors-shortflows",
    ] {
        quick(name, &["gro-off", "gro-rte", "gro-on-trust", "gro-on"]);
    }
}

/// The anchors on the generator's flows, frames flagged checked by the NIC
/// in one cell.
#[test]
fn anchors_nic_csum() {
    quick(
        "anchors-nic-csum",
        &[
            "gro-off",
            "gro-rte",
            "gro-on-trust",
            "gro-on",
            "gro-on-nic-csum",
        ],
    );
}

/// Bulk TCP on captures made fresh (one run of make-captures.sh makes all
/// three when missing).
#[test]
fn fresh_captures() {
    for name in ["fresh-tcp4", "fresh-tcp4-loss", "fresh-tcp4-vlan"] {
        quick(name, &["gro-off", "gro-rte", "gro-on-trust", "gro-on"]);
    }
}

/// TCP through tunnels: the anchor capture in VXLAN (rte_gro too) and in
/// Geneve over IPv6, made from it when missing.
#[test]
fn tunnels() {
    quick(
        "tunnels",
        &[
            "gro-off",
            "tunnels-off",
            "gro-rte",
            "gro-on-trust",
            "gro-on",
            "forward",
        ],
    );
    quick(
        "tunnels-geneve6",
        &["gro-off", "gro-on-trust", "gro-on", "forward"],
    );
}

/// `grorx bench` on a config of the test's own: exit status and stderr.
fn bench_of(toml: &str) -> (Option<i32>, String) {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    std::fs::write(&cfg, toml).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .env("GRORX_NAME", format!("test-{}", std::process::id()))
        .args(["bench", cfg.to_str().unwrap(), "--quick", "--out"])
        .arg(dir.path())
        .output()
        .expect("grorx bench runs");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const SMALL: &str =
    "name = \"t\"\ntitle = \"t\"\nsource = { kind = \"generator\", flows = 1, mss = 1448 }\n\
                     quick_duration = 0.5\nargs = [\"--no-huge\"]\n";

#[test]
fn an_experiment_with_nothing_valid_to_measure_fails_and_says_why() {
    // A sweep whose only value the sink refuses.
    let (code, e) = bench_of(&format!(
        "{SMALL}metrics = [\"rx_pps\"]\n[sweep]\nflag = \"--max-frags\"\nvalues = [\"abc\"]\n"
    ));
    assert_eq!(code, Some(1), "{e}");
    assert!(
        e.contains("cell \"max-frags=abc\"") && e.contains("invalid value"),
        "{e}"
    );
    // A metric path that names nothing in any report.
    let (code, e) = bench_of(&format!(
        "{SMALL}metrics = [\"no.such.path\"]\n[[cells]]\nname = \"a\"\nargs = []\n"
    ));
    assert_eq!(code, Some(1), "{e}");
    assert!(
        e.contains("metric \"no.such.path\" is in no run's report"),
        "{e}"
    );
    // Durations that are not a number of seconds.
    for d in ["inf", "nan", "1e300", "-1"] {
        let (code, e) = bench_of(&format!(
            "{SMALL}duration = {d}\nmetrics = [\"rx_pps\"]\n[[cells]]\nname = \"a\"\nargs = []\n"
        ));
        assert_eq!(code, Some(1), "duration = {d}: {e}");
        assert!(
            e.contains("duration = ") && e.contains("out of range"),
            "{d}: {e}"
        );
    }
}

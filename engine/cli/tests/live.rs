//! grorx in the live path: two kernels talk TCP (or UDP) through
//! `grorx forward --port-topology paired`, both ways at once, each in a
//! network namespace on a veth pair whose root end grorx opens. Each test is
//! one case of `tests/live/live.py` (which says what it builds and checks):
//! every byte arrives both ways (a SHA-256 per direction), GRO merges,
//! grorx exits 0 with no mbuf leaked, nothing is dropped inside it.
//!
//! Cases: net_af_packet with GRO per poll, held across polls, and off;
//! net_af_xdp (whose fill rings the teardown takes back); UDP GRO; and
//! `--encap vxlan` into namespaces that decapsulate in the kernel; and the
//! stateful_firewall example in the same place (the client's side inside).
//! Every run with GRO keeps the reorder window on.
//!
//! Needs root, iproute2, ethtool and python3 (scripts/setup.sh installs
//! them); skipped, with a message, without them. One case at a time: they
//! share the machine's two CPUs.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

static LOCK: Mutex<()> = Mutex::new(());

/// Why these tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, veths)".into());
    }
    for tool in ["ip", "ethtool", "python3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("needs {tool} (scripts/setup.sh installs it)"));
        }
    }
    None
}

/// Runs one case; panics with its problems and grorx's last words.
fn case(name: &str) -> Value {
    case_with(name, &[])
}

fn case_with(name: &str, extra: &[&str]) -> Value {
    let _one = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/live/live.py");
    let out = Command::new("python3")
        .arg(&tool)
        .arg(name)
        .args(["--grorx", env!("CARGO_BIN_EXE_grorx"), "--json"])
        .args(["--bytes", &(32u64 << 20).to_string()])
        .args(extra)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
        panic!(
            "{name}: live.py wrote no result (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let r: Value = serde_json::from_str(line).expect("a JSON result");
    assert!(
        r["ok"].as_bool() == Some(true),
        "{name}: {:#}\n{}",
        r["problems"],
        r["grorx_stderr"].as_str().unwrap_or("")
    );
    r
}

/// The stateful_firewall example's binary, built by cargo as the tests run.
fn firewall_example() -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "-q",
            "-p",
            "grorx-examples",
            "--example",
            "stateful_firewall",
        ])
        .args(["--message-format", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["target"]["name"] == "stateful_firewall")
        .find_map(|m| m["executable"].as_str().map(String::from))
        .expect("cargo names the example's executable")
}

/// Says why the live tests cannot run here, if they cannot.
fn skipped() -> bool {
    let why = missing();
    if let Some(w) = &why {
        eprintln!("skipped: {w}");
    }
    why.is_some()
}

/// A test of one case: nothing leaked, then `check` on its result.
macro_rules! live {
    ($name:ident, $case:literal) => {
        live!($name, $case, |_| {});
    };
    ($name:ident, $case:literal, $check:expr) => {
        #[test]
        fn $name() {
            if skipped() {
                return;
            }
            let r = case($case);
            assert_eq!(r["mbufs_leaked"], 0, "{r}");
            let check: fn(&Value) = $check;
            check(&r);
            eprintln!("{r}");
        }
    };
}

live!(af_packet_both_ways_with_gro_per_poll, "af_packet");
live!(
    af_packet_both_ways_with_gro_held_across_polls,
    "af_packet-held"
);
live!(af_packet_both_ways_with_gro_off, "af_packet-gro-off");
live!(udp_datagrams_both_ways_merged_and_cut_back, "udp");
live!(
    vxlan_encapsulated_both_ways_into_kernels_that_decapsulate,
    "vxlan",
    |r| {
        let fwd = &r["forward"];
        assert_eq!(fwd["encap"], "vxlan", "{r}");
        assert!(
            fwd["gso_segments"].as_u64().unwrap_or(0) > 0,
            "merged packets were cut back into encapsulated segments: {r}"
        );
    }
);
live!(
    af_xdp_both_ways_with_its_fill_rings_taken_back_not_leaked,
    "af_xdp",
    // Two ports, one RX queue each, 2048 buffers in each fill ring.
    |r| assert_eq!(r["taken_back"], 4096, "{r}")
);

#[test]
fn a_stateful_firewall_lets_out_the_inside_and_in_only_its_replies() {
    if skipped() {
        return;
    }
    let bin = firewall_example();
    let r = case_with("firewall", &["--firewall", &bin]);
    assert_eq!(r["outside_connect"], false, "{r}");
    assert_eq!(r["counts"]["mbufs_leaked"], 0, "{r}");
    assert!(r["counts"]["connections_opened"].as_u64() >= Some(1), "{r}");
}

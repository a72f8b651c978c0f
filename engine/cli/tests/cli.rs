//! The `grorx` binary as users run it: the embedded default, JSON output,
//! and one-line errors with a non-zero exit for bad input.

use std::process::{Command, Output};
use std::sync::Mutex;

// Each run pins lcores to the same CPUs: one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn grorx(args: &[&str]) -> Output {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    Command::new(env!("CARGO_BIN_EXE_grorx"))
        // An instance name of this test binary's own: other runs on the
        // machine keep theirs.
        .env("GRORX_NAME", format!("test-{}", std::process::id()))
        .args(args)
        .output()
        .expect("runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last line on stderr, which must be the error, alone on its line.
fn error_line(o: &Output) -> String {
    stderr(o).lines().last().unwrap_or_default().to_string()
}

#[test]
fn embedded_default_runs_and_reports_json() {
    let o = grorx(&["sink", "--duration", "2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("one JSON object on stdout");
    for k in [
        "rx_packets",
        "rx_bytes",
        "duration_s",
        "rx_pps",
        "rx_gbps",
        "mbufs_leaked",
        "queues",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert!(v["rx_packets"].as_u64().unwrap() > 0);
    assert_eq!(v["mbufs_leaked"].as_u64(), Some(0));
    assert!(v["duration_s"].as_f64().unwrap() >= 2.0);
    let q = &v["queues"][0];
    assert_eq!(q["rx_packets"], v["rx_packets"]);
    // The live stats line appeared once a second on stderr.
    assert!(stderr(&o).contains("] rx "), "{}", stderr(&o));
}

#[test]
fn user_eal_arguments_win() {
    let o = grorx(&[
        "sink",
        "--port",
        "net_null0",
        "--duration",
        "1",
        "--json",
        "-q",
        "--",
        "-l",
        "0,1",
        "--no-huge",
        "-m",
        "512",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let args: Vec<String> = v["eal_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert!(args.ends_with(&[
        "-l".into(),
        "0,1".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into()
    ]));
    assert!(
        !args.contains(&"--lcores".to_string()),
        "grorx's --lcores dropped for the user's -l"
    );
    assert!(!args.contains(&"--huge-dir".to_string()));
    assert_eq!(v["ports"][0]["pool"]["hugepages"], false);
}

#[test]
fn dpdks_cap_on_vector_width_reaches_the_checksum_kernels() {
    let run = |extra: &[&str]| {
        let mut args = vec!["sink", "--port", "net_null0", "--duration", "0.2", "--"];
        args.extend(["-l", "0,1", "--no-huge", "-m", "512"]);
        args.extend(extra);
        let o = grorx(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let e = stderr(&o);
        e.lines()
            .find(|l| l.contains("validates checksums in software"))
            .unwrap_or_else(|| panic!("no checksum note: {e}"))
            .to_string()
    };
    assert!(
        run(&["--force-max-simd-bitwidth=128"]).contains("(portable kernel)"),
        "128-bit cap"
    );
    // Without the cap (DPDK's default is 256 bits on x86), an AVX2 kernel
    // where the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let note = run(&[]);
        assert!(!note.contains("(portable kernel)"), "{note}");
    }
}

#[test]
fn cores_and_queues_spread_over_workers() {
    let o = grorx(&[
        "sink",
        "--queues",
        "2",
        "--cores",
        "0,1",
        "--gen-count",
        "100000",
        "--json",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let qs = v["queues"].as_array().unwrap();
    assert_eq!(qs.len(), 2);
    assert_ne!(
        qs[0]["lcore"], qs[1]["lcore"],
        "one lcore per queue when there are two"
    );
    assert_eq!(v["rx_packets"].as_u64(), Some(100_000));
    let o = grorx(&["sink", "--cores", "7-x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("CPU list"), "{}", stderr(&o));
}

#[test]
fn json_interval_streams_and_histograms_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let o = grorx(&[
        "sink",
        "--duration",
        "2.2",
        "--json-interval",
        "0.5",
        "--json",
        "-q",
        "--hdr-log",
        log.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is one JSON object"))
        .collect();
    assert!(
        lines.len() >= 4,
        "intervals then the report: {}",
        lines.len()
    );
    let (intervals, report) = lines.split_at(lines.len() - 1);
    for i in intervals {
        assert!(i["interval_s"].as_f64().unwrap() > 0.3);
        assert!(i["rx_pps"].as_f64().unwrap() > 0.0);
        assert!(i["queues"].as_array().unwrap().len() == 1);
        assert!(i["histograms"]["burst"]["count"].as_u64().unwrap() > 0);
    }
    let h = &report[0]["histograms"];
    for k in ["burst", "gro_segments", "gro_hold_ns"] {
        for p in ["p50", "p90", "p99", "p999", "max"] {
            assert!(h[k][p].is_u64(), "{k}.{p}");
        }
    }
    assert!(h["gro_segments"]["max"].as_u64().unwrap() <= 17);
    assert!(h["burst"]["max"].as_u64().unwrap() <= 32);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("Tag=burst,")
            && text.contains("Tag=gro_segments,")
            && text.contains("Tag=gro_hold_ns,")
    );
}

#[test]
fn forward_with_vxlan_counts_headroom_misses() {
    let mut misses = Vec::new();
    for headroom in ["128", "0"] {
        let o = grorx(&[
            "forward",
            "--gen-count",
            "20000",
            "--to",
            "net_null1",
            "--encap",
            "vxlan",
            "--headroom",
            headroom,
            "--json",
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let f = &v["forward"];
        assert_eq!(f["encap"], "vxlan");
        // GRO merged, the forwarder segmented again: every segment went out.
        assert_eq!(f["tx_packets"].as_u64(), Some(20_000), "{f}");
        assert_eq!(f["tx_dropped"].as_u64(), Some(0));
        assert!(f["gso_packets"].as_u64().unwrap() > 0);
        assert_eq!(v["mbufs_leaked"].as_u64(), Some(0));
        misses.push(f["headroom_miss"].as_u64().unwrap());
    }
    assert_eq!(misses[0], 0, "enough headroom: no miss");
    assert_eq!(
        misses[1], 20_000,
        "no headroom: every segment chains a header mbuf"
    );
    let o = grorx(&["forward", "--to", "net_null1", "--gro", "rte"]);
    assert!(
        !o.status.success() && error_line(&o).contains("forward is a stage of its own"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn udp_datagrams_merge_with_gro_udp_and_forward_back_whole() {
    let run = |args: &[&str]| {
        let o = grorx(args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let base = ["--gen-udp", "--gen-count", "20000", "--json", "-q"];
    let off = run(&[&["sink"][..], &base].concat());
    assert_eq!(off["gro"]["merged_segments"].as_u64(), Some(0), "{off}");
    assert_eq!(off["gro"]["passthrough"]["not_tcp"].as_u64(), Some(20_000));
    let on = run(&[&["sink", "--gro-udp"][..], &base].concat());
    let g = &on["gro"];
    // 8 datagrams of a flow in a row (--gen-interleave), 4 flows.
    assert_eq!(g["packets_out"].as_u64(), Some(20_000 / 8), "{g}");
    assert_eq!(g["merged_segments"].as_u64(), Some(20_000 - 20_000 / 8));
    // Forwarded: segmented back into every datagram.
    let fwd = run(&[&["forward", "--gro-udp", "--to", "net_null1"][..], &base].concat());
    let f = &fwd["forward"];
    assert_eq!(f["tx_packets"].as_u64(), Some(20_000), "{f}");
    assert_eq!(f["gso_segments"].as_u64(), Some(20_000), "{f}");
    assert_eq!(fwd["mbufs_leaked"].as_u64(), Some(0));
    let o = grorx(&["sink", "--gro-udp", "--gro", "off"]);
    assert!(
        !o.status.success() && error_line(&o).contains("--gro-udp is part of grorx's GRO"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cycles_are_counted_per_phase() {
    let o = grorx(&["sink", "--gen-count", "50000", "--cycles", "--json", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["rx", "process", "stage"] {
        assert!(
            v["cycles"][k].as_f64().unwrap() > 0.0,
            "{k}: {}",
            v["cycles"]
        );
        assert!(v["queues"][0]["cycles"][k].as_f64().unwrap() > 0.0);
    }
    let o = grorx(&["sink", "--gen-count", "1000", "--json", "-q"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["cycles"].is_null(), "off unless asked");
}

#[test]
fn bad_port_spec_is_one_line() {
    let o = grorx(&["sink", "--port", "eth0"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    let e = stderr(&o);
    assert!(
        e.lines().next().unwrap().contains("expected a PCI address"),
        "{e}"
    );
}

#[test]
fn missing_pcap_file_is_one_line() {
    let o = grorx(&["sink", "--port", "net_pcap0,rx_pcap=/nonexistent/in.pcap"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&o)
            .lines()
            .next()
            .unwrap()
            .contains("does not exist"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn zero_queues_is_refused() {
    let o = grorx(&["sink", "--queues", "0", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    let l = error_line(&o);
    assert!(
        l.starts_with("grorx: error:") && l.contains("give 1..=1024"),
        "{l}"
    );
}

#[test]
fn unknown_driver_is_refused_after_eal() {
    let o = grorx(&[
        "sink",
        "--port",
        "net_nosuch0",
        "--duration",
        "1",
        "--no-huge",
    ]);
    assert_eq!(o.status.code(), Some(1), "a failure at run time");
    let l = error_line(&o);
    assert!(
        l.contains("could not create") && l.contains("net_null0"),
        "{l}"
    );
}

#[test]
fn hugepages_status_prints() {
    let o = grorx(&["hugepages"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_lowercase();
    assert!(out.contains("mib") || out.contains("hugepage"), "{out}");
}

#[test]
fn a_closed_stdout_stops_the_run_cleanly() {
    // `grorx sink --json-interval 0.2 | head -1`: the reader goes away after
    // one line. The run stops at the next write, cleanly (GRO flushed, EAL
    // cleaned up), and the command fails with a message: no panic, no abort.
    use std::io::BufRead;
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_grorx"))
        // An instance name of this test binary's own: other runs on the
        // machine keep theirs.
        .env("GRORX_NAME", format!("test-{}", std::process::id()))
        .args(["sink", "--duration", "20", "--json-interval", "0.2", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&first).expect("a JSON interval line");
    assert!(v["rx_packets"].as_u64().is_some(), "{first}");
    // The reader is gone (dropped above): the next line cannot be written.
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "exits 1, not by a signal: {err}");
    assert!(error_line(&o).contains("stdout closed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        t0.elapsed().as_secs() < 15,
        "stopped at once, not at --duration"
    );
}

#[test]
fn eal_arguments_before_the_separator_get_a_hint() {
    let o = grorx(&["sink", "--duration", "1", "-l", "0,1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = error_line(&o);
    assert!(
        e.contains("-l is an argument of DPDK's EAL") && e.contains("after `--`"),
        "{e}"
    );
    // Not an EAL flag: clap's own message.
    let o = grorx(&["sink", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !stderr(&o).contains("argument of DPDK's EAL"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_options() {
    let o = grorx(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("_grorx") && s.contains("--gro-flush-us"),
        "bash completion"
    );
    let o = grorx(&["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains(".TH grorx") && s.contains("forward"),
        "a roff page: {}",
        &s[..s.len().min(200)]
    );
}

/// A tmpfs of `size` mounted on a fresh temporary directory, unmounted when
/// dropped (a failing test included).
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// None when this process may not mount (not root).
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs { dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_stops_a_capture_with_what_was_written_counted() {
    let Some(fs) = SmallFs::mount("2m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let cap = fs.dir.path().join("x.pcap");
    let t0 = std::time::Instant::now();
    let o = grorx(&[
        "sink",
        "--capture",
        cap.to_str().unwrap(),
        "--duration",
        "5",
        "--json",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let l = error_line(&o);
    assert!(
        l.contains(cap.to_str().unwrap()) && l.contains("No space left on device"),
        "{l}"
    );
    assert!(
        t0.elapsed().as_secs() < 5,
        "stopped at the error, not at --duration"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the report");
    assert_eq!(v["stop_reason"], "capture error");
    let c = &v["capture"];
    assert!(
        c["error"].as_str().unwrap().contains("No space left"),
        "{c}"
    );
    let written = grorx::pcap::read_all(&cap).expect("a valid pcap, cut after a whole record");
    assert!(!written.is_empty());
    assert_eq!(c["packets"].as_u64(), Some(written.len() as u64), "{c}");
    let bytes: usize = written.iter().map(Vec::len).sum();
    assert_eq!(c["bytes"].as_u64(), Some(bytes as u64));
    assert_eq!(
        c["packets"].as_u64().unwrap() + c["dropped"].as_u64().unwrap(),
        v["delivered"]["packets"].as_u64().unwrap(),
        "every packet given to the capture is written or counted as dropped"
    );
    assert_eq!(v["mbufs_leaked"], 0);
    assert_eq!(v["mbufs_freed_twice"], 0);
}

#[test]
fn a_capture_path_that_is_a_directory_is_refused_before_eal() {
    let dir = tempfile::tempdir().unwrap();
    let o = grorx(&["sink", "--capture", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(error_line(&o).contains("is a directory"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("EAL"),
        "EAL never started: {}",
        stderr(&o)
    );
}

/// A 1 s run on 4 KiB pages that must succeed: its JSON report.
fn report_of(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--duration", "1", "--no-huge", "--json", "-q"]);
    let o = grorx(&a);
    assert!(o.status.success(), "{a:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("a JSON report")
}

#[test]
fn an_rx_port_may_be_an_output_both_ways_or_back_out_of_itself() {
    // Back out of itself, named by its port id (a hairpin).
    let v = report_of(&["forward", "--port", "net_null0", "--to", "0"]);
    assert!(v["forward"]["tx_packets"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["mbufs_leaked"], 0);
    // Two ports paired both ways, as testpmd's --port-topology paired.
    let v = report_of(&[
        "forward",
        "--port",
        "net_null0",
        "--port",
        "net_null1",
        "--port-topology",
        "paired",
    ]);
    for p in v["ports"].as_array().unwrap() {
        assert!(p["rx_packets"].as_u64().unwrap() > 0, "{p}");
        assert!(p["stats"]["opackets"].as_u64().unwrap() > 0, "{p}");
    }
    let f = &v["forward"];
    assert_eq!(f["port"], "net_null1 net_null0", "{f}");
    assert_eq!(f["tx_packets"], v["rx_packets"], "{f}");
    assert_eq!(v["mbufs_leaked"], 0);
}

#[test]
fn a_topology_that_cannot_pair_the_ports_is_refused() {
    let o = grorx(&[
        "forward",
        "--port",
        "net_null0",
        "--port-topology",
        "paired",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        error_line(&o).contains("1 port(s) given, give an even number"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("EAL"), "{}", stderr(&o));
    let o = grorx(&[
        "forward",
        "--port",
        "net_null0",
        "--to",
        "net_null1",
        "--port-topology",
        "loop",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn frames_that_cannot_fit_an_mbuf_are_refused_before_eal() {
    for args in [
        &["sink", "--gen-mss", "9000"][..],
        &["sink", "--data-room", "1000"],
        &["sink", "--port", "net_null0", "--mtu", "65000"],
    ] {
        let o = grorx(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("EAL"), "{args:?}: {}", stderr(&o));
        let l = error_line(&o);
        assert!(l.contains("data room"), "{args:?}: {l}");
    }
}

#[test]
fn the_report_names_the_cpu_each_worker_is_pinned_to() {
    // --cores 0 puts the main lcore on the other CPU: lcore 1 is on CPU 0.
    let v = report_of(&["sink", "--port", "net_null0", "--cores", "0"]);
    let args: Vec<&str> = v["eal_args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let lcores = args[args.iter().position(|a| *a == "--lcores").unwrap() + 1];
    let q = &v["queues"][0];
    let want = format!("{}@{}", q["lcore"], q["cpu"]);
    assert!(
        lcores.split(',').any(|m| m == want),
        "{want} not in {lcores}"
    );
    assert_eq!(q["cpu"], 0, "{q}");
}

#[test]
fn a_file_prefix_another_run_holds_is_refused_with_what_eal_said() {
    let first = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args([
            "sink",
            "--port",
            "net_null0",
            "--no-huge",
            "--duration",
            "4",
            "-q",
        ])
        .args(["--name", &format!("held-{}", std::process::id())])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runs");
    let mut first = Guard(first);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let o = grorx(&[
        "sink",
        "--port",
        "net_null0",
        "--no-huge",
        "--duration",
        "1",
        "-q",
        "--",
        "--file-prefix",
        &format!("held-{}", std::process::id()),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let l = error_line(&o);
    assert!(l.contains("Is another primary process running?"), "{l}");
    assert!(!l.contains("errno 0"), "{l}");
    let _ = first.0.wait();
}

/// Kills the child if the test ends early.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn scripts_answer_help_and_refuse_bad_seconds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for s in [
        "soak.sh",
        "fuzz.sh",
        "ab-cycles.sh",
        "measure.sh",
        "setup.sh",
        "test.sh",
    ] {
        let o = Command::new("bash")
            .arg(root.join("scripts").join(s))
            .arg("--help")
            .output()
            .unwrap();
        assert!(o.status.success(), "{s} --help: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{s} --help printed nothing");
    }
    let o = Command::new("bash")
        .arg(root.join("scripts/soak.sh"))
        .arg("abc")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("whole number of seconds"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn holds_past_the_hold_limit_are_counted_where_there_is_a_limit() {
    let held = report_of(&["sink", "--gro-flush-us", "50"]);
    let n = held["gro_holds_over_limit"].as_u64().expect("a count");
    let holds = held["histograms"]["gro_hold_ns"]["count"].as_u64().unwrap();
    assert!(n <= holds, "{n} of {holds}");
    let per_poll = report_of(&["sink"]);
    assert!(per_poll["gro_holds_over_limit"].is_null(), "{per_poll}");
}

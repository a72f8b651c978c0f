//! Real TCP traffic through the `grorx` binary, held to Linux's GRO rules.
//!
//! `scripts/captures/make-captures.sh --quick` records iperf3 over a veth
//! pair between two network namespaces (once per test binary; needs root,
//! installs iperf3/tcpdump/tshark if missing). Each capture is replayed
//! through `grorx sink --port net_pcap0,rx_pcap=IN --capture OUT`, once
//! flushing at the end of every poll (the default) and once holding packets
//! across polls (`--gro-flush-us 200`). Every run must succeed without a
//! leaked mbuf; `tests/tools/grocheck.py --strict-order IN OUT` must find no
//! problem (conservation, arrival order, every merge legal, checksums); and
//! tshark must find no checksum, length or malformed complaint in what grorx
//! wrote (`tests/tools/tshark_check.py`). mixed_junk.pcap adds frames that
//! must pass through byte-identical and counted (`tests/tools/junkcheck.py`).
//! The anchor captures the benchmarks replay (`captures/tcp_1flow.pcap` and
//! `captures/tcp_4flows.pcap` in the repository, made by `make-captures.sh
//! --anchors` when missing, a few seconds) are checked the same way; or,
//! instead, every capture in `$GRORX_SHARED_CAPTURES`.
//!
//! Run: `cargo test -p grorx-cli --test real_traffic -- --nocapture` (as
//! root) prints the merge qualities. A failing test keeps its work directory
//! (inputs are in the captures directory it names) and says where.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// One grorx (and its checks) at a time: the runs pin lcores to the same
/// CPUs, and merge figures per poll depend on nobody else using them.
static LOCK: Mutex<()> = Mutex::new(());
/// The generated captures, made once per test binary (or why they are not).
static CAPTURES: OnceLock<Result<PathBuf, String>> = OnceLock::new();
/// A test failed: keep the captures at exit.
static FAILED: AtomicBool = AtomicBool::new(false);

const GRORX_TIMEOUT: Duration = Duration::from_secs(120);
const TOOL_TIMEOUT: Duration = Duration::from_secs(300);
const MAKE_CAPTURES_TIMEOUT: Duration = Duration::from_secs(900);
/// The captures without faults, on which merging across polls must reach
/// nearly every possible merge.
const MIN_HELD_QUALITY: f64 = 0.99;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("engine/cli is inside the repository")
        .to_path_buf()
}

fn tool(name: &str) -> PathBuf {
    repo().join("tests/tools").join(name)
}

// ---------------------------------------------------------------- processes

struct Out {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs a command to its end (killed after `timeout`), collecting its output.
fn run(cmd: &mut Command, timeout: Duration) -> Out {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill(); // our own child, by its pid
            let _ = child.wait();
            panic!("{what} still running after {timeout:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Out {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn python(script: &Path) -> Command {
    let mut c = Command::new("python3");
    c.env("PYTHONDONTWRITEBYTECODE", "1").arg(script);
    c
}

fn tail(s: &str, n: usize) -> String {
    let l: Vec<&str> = s.lines().collect();
    l[l.len().saturating_sub(n)..].join("\n")
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

// ---------------------------------------------------------------- captures

extern "C" fn remove_captures() {
    if let Some(Ok(dir)) = CAPTURES.get() {
        if FAILED.load(Ordering::Relaxed) || std::env::var_os("GRORX_KEEP_CAPTURES").is_some() {
            eprintln!("real_traffic: captures kept in {}", dir.display());
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn make_captures() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "these tests need root: scripts/captures/make-captures.sh creates network \
                    namespaces and runs tcpdump (and installs iperf3/tcpdump/tshark with \
                    apt-get if missing). Run them as root, e.g. \
                    `sudo -E cargo test -p grorx-cli --test real_traffic`"
                .into(),
        );
    }
    for t in ["bash", "python3"] {
        if !have(t) {
            return Err(format!(
                "`{t}` not found on PATH; the captures and checks need it"
            ));
        }
    }
    // One directory per test process; ones left by processes that are gone
    // (a run killed before its exit handler) are removed.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    if let Ok(rd) = std::fs::read_dir(base) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("real_traffic.") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
    let dir = base.join(format!("real_traffic.{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: remove_captures is an argument-less extern "C" fn that only reads
    // statics and removes files, fine to run at exit.
    unsafe { libc::atexit(remove_captures) };
    let script = repo().join("scripts/captures/make-captures.sh");
    let t0 = Instant::now();
    let o = run(
        Command::new("bash").arg(&script).arg(&dir).arg("--quick"),
        MAKE_CAPTURES_TIMEOUT,
    );
    if !o.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "{} {} --quick failed ({}): a tool missing or not installable, or the \
             namespaces could not be made. Its output ends:\n{}\n{}",
            script.display(),
            dir.display(),
            o.status,
            tail(&o.stdout, 10),
            tail(&o.stderr, 30)
        ));
    }
    eprintln!(
        "real_traffic: captures made in {:.1} s in {}:\n{}",
        t0.elapsed().as_secs_f64(),
        dir.display(),
        o.stdout.trim_end()
    );
    if !have("tshark") {
        return Err("tshark not found after make-captures.sh (apt-get install tshark)".into());
    }
    Ok(dir)
}

/// The test lock and the generated captures (made by the first test).
fn setup() -> (MutexGuard<'static, ()>, &'static Path) {
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    match CAPTURES.get_or_init(make_captures) {
        Ok(d) => (g, d.as_path()),
        Err(e) => {
            FAILED.store(true, Ordering::Relaxed);
            panic!("real_traffic: cannot make the test captures: {e}")
        }
    }
}

/// A test's own temporary directory; kept (and named) when the test fails.
struct Work(Option<tempfile::TempDir>);

impl Work {
    fn new(name: &str) -> Work {
        let d = tempfile::Builder::new()
            .prefix(&format!("grorx-real-{name}-"))
            .tempdir()
            .expect("temp dir");
        Work(Some(d))
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.as_ref().unwrap().path().join(f)
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if std::thread::panicking() {
            FAILED.store(true, Ordering::Relaxed);
            let p = self.0.take().unwrap().keep();
            eprintln!("real_traffic: work files kept in {}", p.display());
        }
    }
}

/// Classic pcap frames (either byte order, micro- or nanosecond magic).
fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    grorx::pcap::read_all(path).unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------- checks

/// Failures of one test, gathered so that one run reports all of them.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            self.0.push(msg());
        }
    }
    fn assert_none(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}: {} failure(s):\n- {}",
            self.0.len(),
            self.0.join("\n- ")
        );
    }
}

/// grocheck's last line, `key=value ...`, and the lines before it.
struct Grocheck {
    ok: bool,
    figures: BTreeMap<String, String>,
    output: String,
}

impl Grocheck {
    fn f(&self, k: &str) -> f64 {
        self.figures
            .get(k)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("grocheck printed no {k}=: {}", self.output))
    }
    fn quality(&self) -> f64 {
        self.f("merge_quality")
    }
    fn line(&self) -> &str {
        self.output.lines().last().unwrap_or("")
    }
    fn problems(&self) -> String {
        let p: Vec<&str> = self
            .output
            .lines()
            .filter(|l| l.starts_with("PROBLEM"))
            .collect();
        p.join("\n")
    }
}

fn grocheck(input: &Path, output: &Path, extra: &[&str]) -> Grocheck {
    let o = run(
        python(&tool("grocheck.py"))
            .args(extra)
            .arg(input)
            .arg(output),
        TOOL_TIMEOUT,
    );
    let last = o.stdout.lines().last().unwrap_or("").to_string();
    // The last line, and the UDP one before it when the input has UDP.
    let udp = o.stdout.lines().find(|l| l.starts_with("udp_flows="));
    let figures: BTreeMap<String, String> = udp
        .into_iter()
        .chain([last.as_str()])
        .flat_map(|l| l.split_whitespace())
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(
        figures.contains_key("problems"),
        "grocheck.py did not run to its figures ({}):\n{}\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
    Grocheck {
        ok: o.status.success() && figures["problems"] == "0",
        figures,
        output: o.stdout,
    }
}

/// What tshark says about OUT that it does not say about IN's frames.
fn tshark_check(input: &Path, output: &Path) -> Result<String, String> {
    let o = run(
        python(&tool("tshark_check.py")).arg(input).arg(output),
        TOOL_TIMEOUT,
    );
    match o.status.code() {
        Some(0) => Ok(o.stdout.trim().to_string()),
        Some(2) => panic!("{}", o.stderr.trim()),
        _ => Err(format!("{}{}", o.stdout, o.stderr)),
    }
}

struct Run {
    out: PathBuf,
    report: Value,
    /// How it was run, for messages.
    label: String,
}

/// `grorx COMMAND` replaying `input` once, with the stage's own arguments
/// and `extra`; fails unless it exits 0 with one JSON report on stdout.
fn replay(
    label: &str,
    command: &str,
    input: &Path,
    stage: &[String],
    extra: &[&str],
) -> (Out, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grorx"));
    // An instance name of this test binary's own.
    cmd.env("GRORX_NAME", format!("test-{}", std::process::id()));
    cmd.arg(command)
        .arg("--port")
        .arg(format!("net_pcap0,rx_pcap={}", input.display()))
        .args(stage)
        .args(["--json", "-q"])
        .args(extra)
        .args(["--", "--no-huge", "-m", "512"]);
    let o = run(&mut cmd, GRORX_TIMEOUT);
    assert!(
        o.status.success(),
        "{label}: grorx {command} failed ({}):\n{}",
        o.status,
        tail(&o.stderr, 30)
    );
    let report: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{label}: not one JSON report on stdout ({e}):\n{}",
            o.stdout
        )
    });
    (o, report)
}

/// grorx on one capture, writing every packet it delivers to `out`; checks
/// the run itself (exit status, leaks, every frame received and delivered).
fn grorx(input: &Path, out: &Path, extra: &[&str], f: &mut Failures) -> Run {
    for p in [input, out] {
        assert!(
            !p.to_string_lossy().contains(','),
            "a comma in {} would end the devargs",
            p.display()
        );
    }
    let label = format!(
        "{} [{}]",
        input.file_name().unwrap().to_string_lossy(),
        if extra.is_empty() {
            "flush per poll".to_string()
        } else {
            extra.join(" ")
        }
    );
    let stage = ["--capture".to_string(), out.display().to_string()];
    let (_, report) = replay(&label, "sink", input, &stage, extra);
    let n_in = pcap_frames(input).len() as u64;
    let n_out = pcap_frames(out).len() as u64;
    let u = |p: &str| report.pointer(p).and_then(Value::as_u64);
    f.check(u("/mbufs_leaked") == Some(0), || {
        format!("{label}: mbufs_leaked = {:?}", report["mbufs_leaked"])
    });
    f.check(u("/rx_packets") == Some(n_in), || {
        format!(
            "{label}: rx_packets = {:?}, the capture has {n_in} frames",
            report["rx_packets"]
        )
    });
    f.check(u("/gro/segments_in") == Some(n_in), || {
        format!(
            "{label}: gro.segments_in = {:?}, {n_in} frames in",
            report["gro"]["segments_in"]
        )
    });
    f.check(
        u("/capture/packets") == Some(n_out) && u("/gro/packets_out") == Some(n_out),
        || {
            format!(
                "{label}: capture.packets = {:?}, gro.packets_out = {:?}, {n_out} frames in {}",
                report["capture"]["packets"],
                report["gro"]["packets_out"],
                out.display()
            )
        },
    );
    Run {
        out: out.to_path_buf(),
        report,
        label,
    }
}

/// grocheck --strict-order and tshark on one run; returns grocheck's figures.
fn check_output(input: &Path, r: &Run, f: &mut Failures) -> Grocheck {
    let g = grocheck(input, &r.out, &["--strict-order"]);
    f.check(g.ok, || {
        format!(
            "{}: grocheck --strict-order {} {}:\n{}\n{}",
            r.label,
            input.display(),
            r.out.display(),
            g.problems(),
            g.line()
        )
    });
    if let Err(e) = tshark_check(input, &r.out) {
        f.0.push(format!(
            "{}: tshark complains about grorx's output:\n{e}",
            r.label
        ));
    }
    g
}

fn summary(name: &str, per_poll: &Grocheck, held: &Grocheck) -> String {
    let fig = |g: &Grocheck| {
        format!(
            "merge_quality={:.3} (tcp {} in, {} out, ideal {}, max_segs {})",
            g.quality(),
            g.figures["tcp_in"],
            g.figures["tcp_out"],
            g.figures["ideal_out"],
            g.figures["max_segs"]
        )
    };
    format!(
        "{name}: flush per poll {}; --gro-flush-us 200 {}",
        fig(per_poll),
        fig(held)
    )
}

/// One clean or lossy capture: both flush modes, every check.
fn merges_by_linux_rules(input: &Path, name: &str, work: &Work, min_held: Option<f64>) {
    let mut f = Failures::default();
    let r0 = grorx(input, &work.path("per_poll.pcap"), &[], &mut f);
    let g0 = check_output(input, &r0, &mut f);
    let r1 = grorx(
        input,
        &work.path("held.pcap"),
        &["--gro-flush-us", "200"],
        &mut f,
    );
    let g1 = check_output(input, &r1, &mut f);
    eprintln!("real_traffic: {}", summary(name, &g0, &g1));
    if let Some(min) = min_held {
        f.check(g1.quality() >= min, || {
            format!(
                "{name}: merge_quality {:.3} with --gro-flush-us 200, want >= {min}: {}",
                g1.quality(),
                g1.line()
            )
        });
    }
    f.check(g1.quality() >= g0.quality(), || {
        format!(
            "{name}: merging across polls merged less ({:.3}) than flushing per poll ({:.3})",
            g1.quality(),
            g0.quality()
        )
    });
    f.assert_none(name);
}

fn generated(name: &str, clean: bool) {
    let (_g, caps) = setup();
    let work = Work::new(name);
    let input = caps.join(format!("{name}.pcap"));
    merges_by_linux_rules(&input, name, &work, clean.then_some(MIN_HELD_QUALITY));
}

#[test]
fn tcp4_merges_by_linux_rules() {
    generated("tcp4", true);
}

#[test]
fn tcp4_loss_merges_by_linux_rules() {
    generated("tcp4_loss", false);
}

#[test]
fn tcp6_merges_by_linux_rules() {
    generated("tcp6", true);
}

/// A capture with real reordering (`tcp4_reorder.pcap`: segments sprayed
/// over two paths of different delay, about 5% 1-3 places late): with
/// `--gro-reorder 4` the output passes grocheck `--seq-order`, steps back in
/// sequence less than half as often as the input, and has at most 1.15
/// times the packets of an in-order copy of the same traffic (the
/// capture's frames with each flow's segments sorted into its places);
/// without the window, Linux's rules keep every step back.
#[test]
fn tcp4_reorder_merges_through_reordering() {
    let (_g, caps) = setup();
    let work = Work::new("tcp4_reorder");
    let input = caps.join("tcp4_reorder.pcap");
    let in_order = work.path("in_order.pcap");
    let o = run(
        python(&repo().join("scripts/captures/in_order.py"))
            .arg(&input)
            .arg(&in_order),
        TOOL_TIMEOUT,
    );
    assert!(o.status.success(), "in_order.py: {}", o.stderr);
    let mut f = Failures::default();
    let sorted = grorx(&in_order, &work.path("sorted.pcap"), &[], &mut f);
    let g_sorted = check_output(&in_order, &sorted, &mut f);
    let off = grorx(&input, &work.path("off.pcap"), &[], &mut f);
    let g_off = check_output(&input, &off, &mut f);
    let on = grorx(
        &input,
        &work.path("on.pcap"),
        &["--gro-reorder", "4"],
        &mut f,
    );
    let g_on = grocheck(&input, &on.out, &["--seq-order"]);
    f.check(g_on.ok, || {
        format!(
            "{}: grocheck --seq-order:\n{}\n{}",
            on.label,
            g_on.problems(),
            g_on.line()
        )
    });
    if let Err(e) = tshark_check(&input, &on.out) {
        f.0.push(format!("{}: tshark complains:\n{e}", on.label));
    }
    let g_off_seq = grocheck(&input, &off.out, &["--seq-order"]);
    let (back_in, back_off, back_on) = (
        g_on.f("seq_backsteps_in"),
        g_off_seq.f("seq_backsteps_out"),
        g_on.f("seq_backsteps_out"),
    );
    let (n_sorted, n_off, n_on) = (g_sorted.f("tcp_out"), g_off.f("tcp_out"), g_on.f("tcp_out"));
    eprintln!(
        "real_traffic: tcp4_reorder: {back_in} steps back in; out: {back_off} without the \
         window, {back_on} with --gro-reorder 4; packets: in-order copy {n_sorted}, \
         reordered {n_off} without the window ({:.3}x), {n_on} with it ({:.3}x); reorder {}",
        n_off / n_sorted,
        n_on / n_sorted,
        on.report["gro"]["reorder"]
    );
    f.check(back_in >= 20.0, || {
        format!("the capture steps back only {back_in} times")
    });
    f.check(back_off == back_in, || {
        format!("without the window: {back_off} steps back out, {back_in} in")
    });
    f.check(back_on * 2.0 < back_in, || {
        format!("with the window: {back_on} steps back out, {back_in} in")
    });
    f.check(n_on <= 1.15 * n_sorted && n_on < n_off, || {
        format!("with the window: {n_on} packets, in-order copy {n_sorted}, without {n_off}")
    });
    f.assert_none("tcp4_reorder");
}

#[test]
fn tcp4_vlan_merges_by_linux_rules() {
    generated("tcp4_vlan", true);
}

#[test]
fn tcp4_qinq_merges_by_linux_rules() {
    generated("tcp4_qinq", true);
}

// ---------------------------------------------------------------- mixed_junk

/// Inserted frames per kind, from mixed_junk.txt ("  kind   count" lines).
fn junk_counts(list: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(list).expect("mixed_junk.txt");
    let mut m = BTreeMap::new();
    for l in text.lines() {
        if l.starts_with("inserted frames") {
            break;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        if let [kind, n] = w[..] {
            if let Ok(n) = n.parse::<u64>() {
                m.insert(kind.to_string(), n);
            }
        }
    }
    assert!(
        m.len() >= 11,
        "{}: expected a count per junk kind, got {m:?}",
        list.display()
    );
    m
}

/// junkcheck.py's REORDERED/MISSING lines and its figures.
fn junkcheck(input: &Path, r: &Run, list: &Path, stripped: Option<&Path>) -> (bool, String) {
    let mut cmd = python(&tool("junkcheck.py"));
    cmd.arg(input).arg(&r.out).arg(list);
    if let Some(d) = stripped {
        cmd.arg("--stripped").arg(d);
    }
    let o = run(&mut cmd, TOOL_TIMEOUT);
    (o.status.success(), format!("{}{}", o.stdout, o.stderr))
}

#[test]
fn mixed_junk_passes_through_untouched_and_counted() {
    let (_g, caps) = setup();
    let work = Work::new("mixed_junk");
    let input = caps.join("mixed_junk.pcap");
    let list = caps.join("mixed_junk.txt");
    let junk = junk_counts(&list);
    let k = |kind: &str| junk.get(kind).copied().unwrap_or(0);
    let mut f = Failures::default();
    for (tag, extra) in [
        ("per_poll", &[][..]),
        ("held", &["--gro-flush-us", "200"][..]),
    ] {
        let r = grorx(&input, &work.path(&format!("{tag}.pcap")), extra, &mut f);
        // Every junk frame is in the output, byte-identical.
        let (ok, text) = junkcheck(&input, &r, &list, Some(&work.path(tag)));
        f.check(ok, || {
            format!(
                "{}: junk frames not passed through untouched:\n{text}",
                r.label
            )
        });
        // Counted under its reason. Kinds only the junk brings are exact;
        // ARP and UDP/ICMP also occur in real traffic. IPv6 segments with a
        // hop-by-hop header are TCP to GRO (the header stepped over, merged
        // only with byte-equal ones of their flow): junkcheck finds each.
        let gro = &r.report["gro"];
        let pass = |n: &str| gro["passthrough"][n].as_u64().unwrap_or(u64::MAX);
        let exact = [
            ("malformed", k("truncated") + k("bad_doff") + k("runt")),
            ("ip_fragment", k("ipv4_frag")),
            ("ip_options", k("ipv4_options")),
            ("bad_ip_checksum", k("bad_ip_csum")),
            ("bad_tcp_checksum", k("bad_tcp_csum")),
        ];
        for (n, want) in exact {
            f.check(pass(n) == want, || {
                format!("{}: passthrough.{n} = {}, want {want}", r.label, pass(n))
            });
        }
        f.check(
            pass("not_ip") >= k("arp") && pass("not_ip") != u64::MAX,
            || {
                format!(
                    "{}: passthrough.not_ip = {}, want >= {}",
                    r.label,
                    pass("not_ip"),
                    k("arp")
                )
            },
        );
        // The UDP junk goes to random ports, the VXLAN port among them: a
        // datagram there whose random payload is no VXLAN header is counted
        // as a bad tunnel header, the rest as not TCP.
        let not_tcp = pass("not_tcp").saturating_add(pass("bad_tunnel_header"));
        let want = k("udp") + k("icmp_echo");
        f.check(not_tcp >= want && not_tcp < u64::MAX, || {
            format!(
                "{}: passthrough.not_tcp + bad_tunnel_header = {} + {}, want >= {want}",
                r.label,
                pass("not_tcp"),
                pass("bad_tunnel_header")
            )
        });
        f.check(gro["malformed"].as_u64() == Some(pass("malformed")), || {
            format!("{}: gro.malformed = {}", r.label, gro["malformed"])
        });
        let bad = pass("bad_ip_checksum") + pass("bad_tcp_checksum");
        f.check(gro["bad_checksum"].as_u64() == Some(bad), || {
            format!(
                "{}: gro.bad_checksum = {}, want {bad}",
                r.label, gro["bad_checksum"]
            )
        });
        // Conservation and merge rules; arrival order is the next test's.
        let g = grocheck(&input, &r.out, &[]);
        f.check(g.ok, || {
            format!("{}: grocheck:\n{}\n{}", r.label, g.problems(), g.line())
        });
        // grocheck cannot map the merges of a flow whose junk copies moved:
        // without the junk, every merge must be legal and in arrival order.
        let (si, so) = (
            work.path(tag).join("in.pcap"),
            work.path(tag).join("out.pcap"),
        );
        if si.exists() && so.exists() {
            let g = grocheck(&si, &so, &["--strict-order"]);
            f.check(g.ok, || {
                format!(
                    "{}: grocheck --strict-order without the junk frames:\n{}\n{}",
                    r.label,
                    g.problems(),
                    g.line()
                )
            });
            eprintln!(
                "real_traffic: mixed_junk [{tag}] without the junk: {}",
                g.line()
            );
        }
        if let Err(e) = tshark_check(&input, &r.out) {
            f.0.push(format!(
                "{}: tshark complains about grorx's output:\n{e}",
                r.label
            ));
        }
    }
    f.assert_none("mixed_junk");
}

#[test]
fn mixed_junk_keeps_arrival_order_within_flows() {
    let (_g, caps) = setup();
    let work = Work::new("mixed_junk_order");
    let input = caps.join("mixed_junk.pcap");
    let list = caps.join("mixed_junk.txt");
    let mut f = Failures::default();
    let mut figures = String::new();
    for (tag, extra) in [
        ("per_poll", &[][..]),
        ("held", &["--gro-flush-us", "200"][..]),
    ] {
        let r = grorx(&input, &work.path(&format!("{tag}.pcap")), extra, &mut f);
        let g = grocheck(&input, &r.out, &["--strict-order"]);
        let _ = writeln!(figures, "mixed_junk [{tag}]: {}", g.line());
        if !g.ok {
            let (_, text) = junkcheck(&input, &r, &list, None);
            let moved: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("REORDERED") || l.starts_with("junk="))
                .collect();
            f.0.push(format!(
                "{}: grocheck --strict-order:\n{}\n{}\njunk frames out of place:\n{}",
                r.label,
                g.problems(),
                g.line(),
                moved.join("\n")
            ));
        }
    }
    eprint!("real_traffic: {figures}");
    f.assert_none("mixed_junk, arrival order");
}

// ---------------------------------------------------------------- forward

/// `grorx forward` from a replay to a net_pcap output (no TSO there: the
/// forwarder segments in software): what comes out is the very segments
/// that went in, per flow in order, every mbuf back.
fn forward_round_trip(input: &Path, name: &str, work: &Work, extra: &[&str]) {
    let out = work.path("forwarded.pcap");
    let stage = [
        "--to".to_string(),
        format!("net_pcap1,tx_pcap={}", out.display()),
    ];
    let (o, report) = replay(name, "forward", input, &stage, extra);
    let n_in = pcap_frames(input).len() as u64;
    assert_eq!(report["mbufs_leaked"], 0, "{name}: {}", o.stdout);
    assert_eq!(report["rx_packets"].as_u64(), Some(n_in), "{name}");
    let fwd = &report["forward"];
    assert!(
        fwd["gso_packets"].as_u64().unwrap_or(0) > 0,
        "{name}: nothing was merged then segmented: {fwd}"
    );
    assert_eq!(fwd["tx_dropped"], 0, "{name}: {fwd}");
    assert_eq!(fwd["tx_packets"].as_u64(), Some(n_in), "{name}: {fwd}");
    let g = grocheck(input, &out, &["--same-segments", "--strict-order"]);
    assert!(g.ok, "{name}: forwarded segments differ:\n{}", g.output);
    eprintln!("real_traffic: {name} forwarded: {}", g.line());
}

#[test]
fn forward_gives_back_the_very_segments() {
    let (_g, caps) = setup();
    for name in ["tcp4", "tcp6", "tcp4_vlan"] {
        let work = Work::new(&format!("fwd-{name}"));
        let input = caps.join(format!("{name}.pcap"));
        forward_round_trip(&input, name, &work, &[]);
        forward_round_trip(&input, name, &work, &["--gro-flush-us", "200"]);
    }
}

/// Real iperf3 UDP traffic (4 flows of 1400-byte datagrams, IPv4 and
/// IPv6): without `--gro-udp` every datagram passes through; with it they
/// merge by Linux's UDP rules (grocheck: each flow's datagrams in arrival
/// order, every boundary kept, sizes, IP IDs and checksums), flushing per
/// poll and held across polls; and the forward stage sends out the very
/// datagrams received, byte for byte.
#[test]
fn udp_datagrams_merge_by_linux_rules_and_forward_back() {
    let (_g, caps) = setup();
    for name in ["udp4", "udp6"] {
        let work = Work::new(name);
        let input = caps.join(format!("{name}.pcap"));
        let mut f = Failures::default();
        let off = grorx(&input, &work.path("off.pcap"), &[], &mut f);
        let g_off = check_output(&input, &off, &mut f);
        let on = grorx(&input, &work.path("on.pcap"), &["--gro-udp"], &mut f);
        let g_on = check_output(&input, &on, &mut f);
        let held = grorx(
            &input,
            &work.path("held.pcap"),
            &["--gro-udp", "--gro-flush-us", "200"],
            &mut f,
        );
        let g_held = check_output(&input, &held, &mut f);
        let (n_in, n_off) = (g_off.f("udp_in"), g_off.f("udp_out"));
        let (q_on, q_held) = (g_on.f("udp_merge_quality"), g_held.f("udp_merge_quality"));
        eprintln!(
            "real_traffic: {name}: {n_in} datagrams; without --gro-udp {n_off} out; with it {} \
             (quality {q_on:.3}), held across polls {} (quality {q_held:.3})",
            g_on.f("udp_out"),
            g_held.f("udp_out")
        );
        f.check(n_in > 1000.0 && n_off == n_in, || {
            format!("{name}: without --gro-udp {n_off} of {n_in} datagrams out")
        });
        f.check(q_on >= 0.8 && q_held >= q_on, || {
            format!("{name}: merge quality {q_on:.3} per poll, {q_held:.3} held")
        });
        let out = work.path("forwarded.pcap");
        let stage = [
            "--to".to_string(),
            format!("net_pcap1,tx_pcap={}", out.display()),
        ];
        let (o, report) = replay(name, "forward", &input, &stage, &["--gro-udp"]);
        f.check(report["mbufs_leaked"] == 0, || {
            format!("{name}: {}", o.stdout)
        });
        f.check(report["forward"]["gso_packets"].as_u64() > Some(0), || {
            format!(
                "{name}: nothing merged then segmented: {}",
                report["forward"]
            )
        });
        let mut a = pcap_frames(&input);
        let mut b = pcap_frames(&out);
        let g = grocheck(&input, &out, &["--strict-order"]);
        f.check(g.ok && g.f("udp_out") == g.f("udp_in"), || {
            format!("{name}: forwarded datagrams:\n{}", g.output)
        });
        a.sort();
        b.sort();
        f.check(a == b, || {
            format!(
                "{name}: the forwarded datagrams are not the very ones received ({} in, {} out)",
                a.len(),
                b.len()
            )
        });
        f.assert_none(name);
    }
}

/// Real TCP captures wrapped in VXLAN and Geneve (IPv4 and IPv6 outside,
/// outer UDP checksums zero and set, outer DF or counting IDs): the inner
/// segments merge as they do without the tunnel (the same packets where the
/// outer ID is fixed, as in a tunnel's DF datagrams; within 1% where it
/// counts up per outer flow), the outer headers of every output verify
/// (grocheck, tshark); `--gro-tunnels off` merges none of them; forwarded,
/// the very frames received go out again.
#[test]
fn tunnelled_tcp_merges_as_plain_tcp_does_and_forwards_back() {
    let (_g, caps) = setup();
    for (name, inner, ids_rule) in [
        ("vxlan4", "tcp4", false),
        ("vxlan6", "tcp6", false),
        ("geneve4", "tcp6", true),
        ("geneve6", "tcp4", false),
    ] {
        let work = Work::new(name);
        let input = caps.join(format!("{name}.pcap"));
        let plain_in = caps.join(format!("{inner}.pcap"));
        let mut f = Failures::default();
        let mut checked = |input: &Path, out: &str, extra: &[&str]| {
            let r = grorx(input, &work.path(out), extra, &mut f);
            check_output(input, &r, &mut f)
        };
        let g_plain = checked(&plain_in, "plain.pcap", &[]);
        let g_on = checked(&input, "on.pcap", &[]);
        let g_off = checked(&input, "off.pcap", &["--gro-tunnels", "off"]);
        let (n_in, plain_out, on_out) = (g_on.f("tcp_in"), g_plain.f("tcp_out"), g_on.f("tcp_out"));
        eprintln!(
            "real_traffic: {name}: {n_in} segments in a tunnel; {on_out} out (quality {:.3}), \
             {plain_out} for {inner} without the tunnel; --gro-tunnels off {} out",
            g_on.quality(),
            g_off.f("tcp_out")
        );
        f.check(g_on.f("tunnelled") == n_in && n_in > 1000.0, || {
            format!(
                "{name}: {} of {n_in} segments seen inside a tunnel",
                g_on.f("tunnelled")
            )
        });
        // Outer IDs counting per outer flow may differ from the inner ones
        // only where two inner flows share an outer source port.
        let close = if ids_rule {
            on_out <= plain_out * 1.01
        } else {
            on_out == plain_out
        };
        f.check(close && g_on.quality() >= 0.9, || {
            format!("{name}: {on_out} packets out, {plain_out} for {inner}")
        });
        f.check(g_off.f("tcp_out") == n_in, || {
            format!(
                "{name}: --gro-tunnels off gave {} of {n_in}",
                g_off.f("tcp_out")
            )
        });
        let out = work.path("forwarded.pcap");
        let stage = [
            "--to".to_string(),
            format!("net_pcap1,tx_pcap={}", out.display()),
        ];
        let (o, report) = replay(name, "forward", &input, &stage, &[]);
        f.check(report["mbufs_leaked"] == 0, || {
            format!("{name}: {}", o.stdout)
        });
        f.check(report["forward"]["gso_packets"].as_u64() > Some(0), || {
            format!(
                "{name}: nothing merged then segmented: {}",
                report["forward"]
            )
        });
        let g = grocheck(&input, &out, &["--strict-order", "--same-segments"]);
        f.check(g.ok, || {
            format!("{name}: forwarded segments:\n{}", g.output)
        });
        let (mut a, mut b) = (pcap_frames(&input), pcap_frames(&out));
        a.sort();
        b.sort();
        f.check(a == b, || {
            format!(
                "{name}: the forwarded frames are not the very ones received ({} in, {} out)",
                a.len(),
                b.len()
            )
        });
        f.assert_none(name);
    }
}

// ---------------------------------------------------------------- anchors

/// The anchor captures in the repository's `captures/`, where the
/// benchmarks replay them from; made there (make-captures.sh --anchors)
/// when missing.
fn anchor_captures() -> Vec<PathBuf> {
    let dir = repo().join("captures");
    let files: Vec<PathBuf> = ["tcp_1flow.pcap", "tcp_4flows.pcap"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    if files.iter().all(|f| f.exists()) {
        return files;
    }
    let script = repo().join("scripts/captures/make-captures.sh");
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        FAILED.store(true, Ordering::Relaxed);
        panic!(
            "real_traffic: the anchor captures are missing in {} and making them needs root: \
             run these tests as root, or first `sudo {} --anchors`",
            dir.display(),
            script.display()
        );
    }
    let t0 = Instant::now();
    let o = run(
        Command::new("bash").arg(&script).arg("--anchors").arg(&dir),
        MAKE_CAPTURES_TIMEOUT,
    );
    assert!(
        o.status.success(),
        "{} --anchors {} failed ({}):\n{}\n{}",
        script.display(),
        dir.display(),
        o.status,
        tail(&o.stdout, 10),
        tail(&o.stderr, 30)
    );
    eprintln!(
        "real_traffic: anchor captures made in {:.1} s in {}:\n{}",
        t0.elapsed().as_secs_f64(),
        dir.display(),
        o.stdout.trim_end()
    );
    for f in &files {
        assert!(
            f.exists(),
            "make-captures.sh --anchors made no {}",
            f.display()
        );
    }
    files
}

/// The anchors the benchmarks replay, or every capture in
/// `$GRORX_SHARED_CAPTURES`, held to the rules the generated ones are. It
/// checks something or fails: no capture to check is a failure, not a skip.
#[test]
fn anchor_captures_merge_by_linux_rules() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let pcaps = match std::env::var_os("GRORX_SHARED_CAPTURES").map(PathBuf::from) {
        Some(dir) => {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("GRORX_SHARED_CAPTURES={}: {e}", dir.display()))
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
                .collect();
            assert!(
                !v.is_empty(),
                "GRORX_SHARED_CAPTURES={}: no .pcap file there, nothing to check",
                dir.display()
            );
            v.sort();
            v
        }
        None => anchor_captures(),
    };
    for p in &pcaps {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        let work = Work::new(&name);
        eprintln!("real_traffic: checking {}", p.display());
        merges_by_linux_rules(p, &name, &work, Some(MIN_HELD_QUALITY));
    }
}

// ---------------------------------------------------------------- checksum damage

/// The anchor `tcp_4flows.pcap` with checksum fields alone damaged in about
/// 3% of its frames (`tests/tools/csum_damage.py`, seeded: the same capture
/// gives the same damage), through grorx verifying and trusting, flushing
/// per poll and holding across polls. Verifying, IPv4 header and TCP
/// checksums are damaged; trusting, IPv4 header checksums only: trusting
/// takes a TCP checksum's word and merges the segment by design (grocheck,
/// which holds every merge to verified checksums, would call that a
/// violation), but must never merge a bad IPv4 header. Each run: grocheck
/// --strict-order finds no problem (arrival order, conservation, every
/// merge legal, no bad checksum merged) and tshark nothing new; every
/// damaged frame leaves byte for byte as it came (neither merged nor its
/// checksum made right); `bad_ip_checksum` counts exactly the damaged
/// headers; `bad_tcp_checksum` some and at most the damaged TCP checksums
/// verifying (a pure ACK, or a PSH segment that starts no packet, is not
/// GRO's to judge), none trusting; and the rest still merges.
#[test]
fn checksum_only_damage_never_merges_and_keeps_order_verifying_or_trusting() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let anchors = anchor_captures();
    let clean = anchors
        .iter()
        .find(|p| p.ends_with("tcp_4flows.pcap"))
        .expect("tcp_4flows.pcap among the anchors");
    let work = Work::new("csum_damage");
    let mut f = Failures::default();
    for (mode, fields) in [("verify", "ip,tcp"), ("trust", "ip")] {
        let input = work.path(&format!("{mode}_in.pcap"));
        let list = work.path(&format!("{mode}_damaged.txt"));
        let o = run(
            python(&tool("csum_damage.py"))
                .arg(clean)
                .arg(&input)
                .args([
                    "--seed", "1", "--rate", "0.03", "--fields", fields, "--list",
                ])
                .arg(&list),
            TOOL_TIMEOUT,
        );
        assert!(o.status.success(), "csum_damage.py: {}", o.stderr);
        let damaged: Vec<(usize, String)> = std::fs::read_to_string(&list)
            .expect("the damaged frames' list")
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(i, what)| (i.parse().expect("a frame index"), what.to_string()))
            .collect();
        let n = |what: &str| damaged.iter().filter(|(_, w)| w == what).count() as u64;
        assert!(
            n("ip") > 50 && (mode == "trust" || n("tcp") > 50),
            "{mode}: too little damage: {}",
            o.stdout.trim()
        );
        let frames_in = pcap_frames(&input);
        for extra in [&[][..], &["--gro-flush-us", "200"][..]] {
            let mut args = vec!["--gro-csum", mode];
            args.extend_from_slice(extra);
            let tag = if extra.is_empty() { "per_poll" } else { "held" };
            let r = grorx(
                &input,
                &work.path(&format!("{mode}_{tag}.pcap")),
                &args,
                &mut f,
            );
            let g = check_output(&input, &r, &mut f);
            let out: std::collections::HashSet<Vec<u8>> = pcap_frames(&r.out).into_iter().collect();
            let changed: Vec<usize> = (damaged.iter())
                .map(|(i, _)| *i)
                .filter(|&i| !out.contains(&frames_in[i]))
                .collect();
            f.check(changed.is_empty(), || {
                format!(
                    "{}: {} damaged frames not delivered as they came, frames {:?}...",
                    r.label,
                    changed.len(),
                    &changed[..changed.len().min(8)]
                )
            });
            let pass = |n: &str| {
                r.report["gro"]["passthrough"][n]
                    .as_u64()
                    .unwrap_or(u64::MAX)
            };
            f.check(pass("bad_ip_checksum") == n("ip"), || {
                format!(
                    "{}: passthrough.bad_ip_checksum = {}, {} headers damaged",
                    r.label,
                    pass("bad_ip_checksum"),
                    n("ip")
                )
            });
            let tcp = pass("bad_tcp_checksum");
            let tcp_ok = match mode {
                "verify" => tcp > 0 && tcp <= n("tcp"),
                _ => tcp == 0,
            };
            f.check(tcp_ok, || {
                format!(
                    "{}: passthrough.bad_tcp_checksum = {tcp}, {} TCP checksums damaged",
                    r.label,
                    n("tcp")
                )
            });
            f.check(g.f("tcp_out") * 4.0 < g.f("tcp_in"), || {
                format!("{}: little merged: {}", r.label, g.line())
            });
            eprintln!("real_traffic: tcp_4flows, {}: {}", r.label, g.line());
        }
    }
    f.assert_none("checksum-only damage");
}

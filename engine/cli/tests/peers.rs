//! A sink outlives its peers. dpdk-testpmd sends 1514 B frames (txonly)
//! over memif and over virtio-user/vhost into `grorx sink`, and goes away
//! mid-run: killed (SIGKILL, SIGINT), or, for memif, its control channel cut
//! while it still transmits (what a traffic generator quitting without
//! stopping its TX first looks like from the sink's side). Every run must
//! end with status 0 and a whole JSON report: the link-down counted, no
//! mbuf leaked. A peer that comes back (a new testpmd on the same socket)
//! is polled again.
//!
//! The cut is done from outside testpmd: its control socket is duplicated
//! (pidfd_getfd) and its write side shut down, so the sink's memif sees its
//! peer leave while the shared rings are still full and still filling.
//! That is when memif used to unmap them under a worker's burst.
//!
//! Needs root and dpdk-testpmd (scripts/setup.sh installs the `dpdk`
//! package); skipped, with a message, without them. Both sides run on
//! 4 KiB pages. Every process is ended and every file removed, also when
//! a test fails.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The runs pin lcores to the same CPUs: one test at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// Runs of the sink in the test whose peer leaves while sending: each ended
/// in a worker's SIGSEGV about one time in five before the sink kept memif's
/// teardown off its bursts, so 20 runs all but never pass without that.
const CUT_RUNS: usize = 20;

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why these tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (DPDK's virtual devices, pidfd_getfd)".into());
    }
    let found = Command::new("sh")
        .args(["-c", "command -v dpdk-testpmd"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return Some("needs dpdk-testpmd (scripts/setup.sh installs it)".into());
    }
    None
}

macro_rules! require {
    () => {
        if let Some(why) = missing() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// A unique name for this process's n-th thing.
fn unique(what: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "peers-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// EAL's runtime directory of a file prefix.
fn runtime_dir(prefix: &str) -> PathBuf {
    Path::new("/var/run/dpdk").join(prefix)
}

// ------------------------------------------------------------------ processes

/// A child process with its output as lines; killed (by its own pid) and
/// reaped when dropped, and its EAL runtime directory removed.
struct Proc {
    what: String,
    child: Child,
    lines: Receiver<String>,
    /// Every line read so far (for failure messages).
    seen: Vec<String>,
    prefix: String,
}

impl Proc {
    fn spawn(what: &str, cmd: &mut Command, prefix: &str, dir: &Path) -> Proc {
        let mut child = cmd
            .current_dir(dir) // a core dump, if any, lands in the test's directory
            .stdin(Stdio::piped()) // testpmd waits on stdin for ever: never closed
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let (tx, rx) = mpsc::channel();
        for r in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
        }
        Proc {
            what: what.into(),
            child,
            lines: rx,
            seen: Vec::new(),
            prefix: prefix.into(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line within `t`.
    fn line(&mut self, t: Duration) -> Option<String> {
        let l = self.lines.recv_timeout(t).ok()?;
        self.seen.push(l.clone());
        Some(l)
    }

    /// Waits for a line containing `text`; says why not if none comes.
    fn try_wait_for(&mut self, text: &str, t: Duration) -> Result<(), String> {
        let end = Instant::now() + t;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.line(left) {
                Some(l) if l.contains(text) => return Ok(()),
                Some(_) => {}
                None => break,
            }
        }
        Err(format!(
            "{}: no line with {text:?} within {t:?}:\n{}",
            self.what,
            self.tail()
        ))
    }

    fn tail(&self) -> String {
        let n = self.seen.len();
        self.seen[n.saturating_sub(30)..].join("\n")
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill on our own child's pid (not yet reaped: Child still
        // owns it), with a valid signal number.
        unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
    }

    /// Waits for the exit (killed after `t`); returns the status and the
    /// rest of the output.
    fn finish(&mut self, t: Duration) -> (std::process::ExitStatus, Vec<String>) {
        let end = Instant::now() + t;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} still running after {t:?}: killed\n{}",
                    self.what,
                    self.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The readers end at EOF, once the pipes close.
        while let Some(l) = self.line(Duration::from_secs(2)) {
            let _ = l;
        }
        (status, self.seen.clone())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(runtime_dir(&self.prefix));
    }
}

/// dpdk-testpmd sending 1514 B frames as fast as it can on `vdev`, its
/// forwarding lcore on CPU 0 (the sink's worker takes the last CPU);
/// returns once it forwards. A memif server that starts while the sink's
/// client retries its connection can die before it forwards, in a race of
/// DPDK 22.11's memif PMD (its interrupt thread panics: "Error adding fd
/// ... epoll_ctl, Bad file descriptor", seen once in a few dozen starts
/// here): the peer's own fault, so such a peer is started again (three
/// tries).
fn testpmd(vdev: &str, dir: &Path) -> Proc {
    testpmd_in(vdev, "txonly", dir)
}

/// `testpmd` in forwarding mode `mode` (txonly, rxonly).
fn testpmd_in(vdev: &str, mode: &str, dir: &Path) -> Proc {
    let mut why = String::new();
    for _ in 0..3 {
        let mut p = testpmd_once(vdev, mode, dir);
        match p.try_wait_for("start packet forwarding", Duration::from_secs(20)) {
            Ok(()) => return p,
            Err(e) if p.child.try_wait().ok().flatten().is_some() => {
                eprintln!("the peer died before it forwarded; starting it again:\n{e}");
                why = e;
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the peer died before it forwarded, three times; the last:\n{why}");
}

fn testpmd_once(vdev: &str, mode: &str, dir: &Path) -> Proc {
    let prefix = unique("testpmd");
    let mut cmd = Command::new("dpdk-testpmd");
    cmd.args([
        "-l",
        "0,1",
        "--main-lcore",
        "1",
        "--no-pci",
        "--no-huge",
        "-m",
        "1024",
    ])
    .args([
        "--single-file-segments",
        "--file-prefix",
        &prefix,
        "--vdev",
        vdev,
    ])
    .args(["--log-level=lib.eal:warning", "--"])
    .args([
        &format!("--forward-mode={mode}"),
        "--auto-start",
        "--txpkts=1514",
    ])
    .args(["--total-num-mbufs=16384", "--stats-period=1"]);
    Proc::spawn("testpmd", &mut cmd, &prefix, dir)
}

fn memif_server(socket: &str, dir: &Path) -> Proc {
    testpmd(&format!("net_memif0,role=server,socket={socket}"), dir)
}

/// `grorx sink --port PORT --duration SECS --json --json-interval 0.1`
/// on 4 KiB pages.
fn sink(port: &str, secs: f64, extra: &[&str], dir: &Path) -> Proc {
    let name = unique("sink");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grorx"));
    cmd.args(["sink", "--port", port, "--duration", &secs.to_string()])
        .args(["--json", "--json-interval", "0.1", "--no-huge", "--quiet"])
        .args(["--name", &name])
        .args(extra);
    Proc::spawn("grorx sink", &mut cmd, &name, dir)
}

/// `grorx forward --port PORT --to TO --gro off --duration SECS --json
/// --json-interval 0.1` on 4 KiB pages: every packet in is one out.
fn forward(port: &str, to: &str, secs: f64, dir: &Path) -> Proc {
    let name = unique("forward");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grorx"));
    cmd.args(["forward", "--port", port, "--to", to, "--gro", "off"])
        .args(["--duration", &secs.to_string()])
        .args(["--json", "--json-interval", "0.1", "--no-huge", "--quiet"])
        .args(["--name", &name]);
    Proc::spawn("grorx forward", &mut cmd, &name, dir)
}

/// Waits until an interval object shows packets received.
fn until_receiving(s: &mut Proc) {
    until_interval(s, "the sink received nothing", |rx| rx > 0);
}

/// Waits until, after an interval that received nothing (the peer away),
/// one receives again (the peer came back): how long a peer takes to start
/// and connect varies with the machine's load, so the sink runs until then.
fn until_resumed(s: &mut Proc) {
    let mut paused = false;
    until_interval(s, "traffic did not resume after the peer came back", |rx| {
        paused |= rx == 0;
        paused && rx > 0
    });
}

/// Reads interval objects (30 s at most) until `done` says so of one's
/// `rx_packets`.
fn until_interval(s: &mut Proc, failure: &str, done: impl FnMut(u64) -> bool) {
    if !interval_came(s, done) {
        panic!("{failure}:\n{}", s.tail());
    }
}

/// Whether an interval object for which `done` says so came (30 s at most,
/// or until the sink's output ends).
fn interval_came(s: &mut Proc, done: impl FnMut(u64) -> bool) -> bool {
    interval_came_within(s, Duration::from_secs(30), done)
}

/// `interval_came`, waiting `wait` at most.
fn interval_came_within(s: &mut Proc, wait: Duration, mut done: impl FnMut(u64) -> bool) -> bool {
    let end = Instant::now() + wait;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Some(l) = s.line(left) else { break };
        if let Ok(v) = serde_json::from_str::<Value>(&l) {
            if v["type"] == "interval" && done(v["rx_packets"].as_u64().unwrap_or(0)) {
                return true;
            }
        }
    }
    false
}

/// The sink's end: status 0 and a whole report, which it returns, with the
/// interval objects before it; stopped by its `--duration`.
fn report(s: &mut Proc, what: &str) -> (Value, Vec<Value>) {
    report_stopped_by(s, what, "duration")
}

/// `report` of a sink stopped by `why` (`duration`, or `signal` when the
/// test stopped it).
fn report_stopped_by(s: &mut Proc, what: &str, why: &str) -> (Value, Vec<Value>) {
    let (status, lines) = s.finish(Duration::from_secs(30));
    let objects: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
    assert!(
        status.success(),
        "{what}: grorx ended with {status} (a crash is signal 11):\n{tail}"
    );
    let report = objects
        .iter()
        .rev()
        .find(|v| v["type"] == "report")
        .unwrap_or_else(|| panic!("{what}: no report:\n{tail}"))
        .clone();
    assert_eq!(report["mbufs_leaked"], 0, "{what}: {report}");
    assert_eq!(report["stop_reason"], why, "{what}: {report}");
    assert_eq!(report["ports"].as_array().map(Vec::len), Some(1), "{what}");
    let intervals = objects
        .into_iter()
        .filter(|v| v["type"] == "interval")
        .collect();
    (report, intervals)
}

fn link_downs(report: &Value) -> u64 {
    report["ports"][0]["link_downs"]
        .as_u64()
        .expect("ports[0].link_downs")
}

/// Shuts down the write side of every connected SOCK_SEQPACKET Unix socket
/// of process `pid` (testpmd's memif control channel): its peer reads the
/// end of the channel while testpmd, which has not seen it, goes on
/// transmitting into the shared rings. Returns how many were cut.
fn cut_control_channel(pid: u32) -> Result<usize, String> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if pidfd < 0 {
        return Err(format!("pidfd_open: {}", std::io::Error::last_os_error()));
    }
    let mut cut = 0;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|e| e.to_string())?;
    for e in fds.flatten() {
        let is_socket =
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        let Some(target) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if !is_socket {
            continue;
        }
        // SAFETY: duplicates fd `target` of the process behind pidfd into
        // ours (root may); returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, target, 0) } as libc::c_int;
        if fd < 0 {
            continue;
        }
        let mut ty: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: fd is ours; ty and len are valid out-pointers of the
        // sizes given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&mut ty as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        // SAFETY: a zeroed sockaddr_storage is a valid out-buffer.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut alen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: fd is ours; addr and alen describe a buffer that large.
        let connected = unsafe {
            libc::getpeername(
                fd,
                (&mut addr as *mut libc::sockaddr_storage).cast(),
                &mut alen,
            )
        } == 0;
        if r == 0
            && ty == libc::SOCK_SEQPACKET
            && connected
            && addr.ss_family == libc::AF_UNIX as u16
        {
            // SAFETY: fd is a socket of ours (a duplicate of testpmd's).
            if unsafe { libc::shutdown(fd, libc::SHUT_WR) } == 0 {
                cut += 1;
            }
        }
        // SAFETY: fd is ours and closed once.
        unsafe { libc::close(fd) };
    }
    // SAFETY: pidfd is ours and closed once.
    unsafe { libc::close(pidfd) };
    Ok(cut)
}

// ---------------------------------------------------------------------- tests

#[test]
fn a_sink_outlives_a_memif_peer_that_leaves_while_sending() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let socket = unique("memif");
    let port = format!("net_memif0,role=client,socket={socket}");
    // One peer for all the runs while it lives (memif's own race may end
    // it when a sink leaves: then another).
    let mut peer: Option<Proc> = None;
    let mut cuts = 0;
    for run in 0..CUT_RUNS {
        if peer
            .as_mut()
            .is_none_or(|p| p.child.try_wait().ok().flatten().is_some())
        {
            peer = Some(memif_server(&socket, dir.path()));
        }
        let mut s = sink(&port, 0.6, &["--gro", "off"], dir.path());
        if !interval_came(&mut s, |rx| rx > 0) {
            // The peer can be on its way out from the last run (memif's
            // own race), still a process but no longer accepting: then a
            // sink cannot connect at its start. Once, a new peer.
            eprintln!(
                "run {run}: the sink could not reach the peer; a new one:\n{}",
                s.tail()
            );
            drop(s);
            drop(peer.take());
            peer = Some(memif_server(&socket, dir.path()));
            s = sink(&port, 0.6, &["--gro", "off"], dir.path());
            until_receiving(&mut s);
        }
        let p = peer.as_ref().unwrap();
        match cut_control_channel(p.pid()) {
            Ok(n) if n > 0 => cuts += 1,
            Ok(_) => eprintln!("run {run}: no control channel to cut"),
            Err(e) => {
                eprintln!("run {run}: cannot cut the control channel ({e}): SIGKILL instead");
                p.signal(libc::SIGKILL);
            }
        }
        let (r, _) = report(&mut s, &format!("run {run} of {CUT_RUNS}"));
        assert!(
            link_downs(&r) >= 1,
            "run {run}: the peer's departure is counted: {r}"
        );
        assert!(r["rx_packets"].as_u64() > Some(0), "run {run}: {r}");
    }
    assert!(
        cuts > CUT_RUNS / 2,
        "only {cuts} of {CUT_RUNS} runs were cut"
    );
    if let Some(p) = peer.as_mut() {
        p.signal(libc::SIGINT);
    }
}

#[test]
fn a_sink_outlives_a_memif_peer_killed_mid_run() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let socket = unique("memif");
    let port = format!("net_memif0,role=client,socket={socket}");
    for (run, sig) in [libc::SIGKILL, libc::SIGINT, libc::SIGKILL, libc::SIGINT]
        .into_iter()
        .enumerate()
    {
        let peer = memif_server(&socket, dir.path());
        let mut s = sink(&port, 1.0, &[], dir.path());
        until_receiving(&mut s);
        peer.signal(sig);
        let (r, _) = report(&mut s, &format!("run {run} (signal {sig})"));
        assert!(link_downs(&r) >= 1, "run {run}: {r}");
        drop(peer);
    }
}

/// Packets received in each interval (for failure messages).
fn rx_series(intervals: &[Value]) -> Vec<u64> {
    intervals
        .iter()
        .map(|v| v["rx_packets"].as_u64().unwrap_or(0))
        .collect()
}

/// Packets received in the intervals after the first interval that
/// received none (the peer was away).
fn received_after_a_pause(intervals: &[Value]) -> u64 {
    let rx = |v: &Value| v["rx_packets"].as_u64().unwrap_or(0);
    let first = intervals.iter().position(|v| rx(v) > 0);
    let pause = first.and_then(|f| {
        intervals[f..]
            .iter()
            .position(|v| rx(v) == 0)
            .map(|p| f + p)
    });
    pause.map_or(0, |p| intervals[p..].iter().map(rx).sum())
}

#[test]
fn a_memif_peer_that_comes_back_is_polled_again() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let socket = unique("memif");
    let peer = memif_server(&socket, dir.path());
    let mut s = sink(
        &format!("net_memif0,role=client,socket={socket}"),
        60.0,
        &[],
        dir.path(),
    );
    until_receiving(&mut s);
    peer.signal(libc::SIGKILL);
    drop(peer);
    std::thread::sleep(Duration::from_millis(500));
    let back = memif_server(&socket, dir.path());
    until_resumed(&mut s);
    s.signal(libc::SIGINT);
    let (r, intervals) = report_stopped_by(&mut s, "memif peer back", "signal");
    drop(back);
    assert!(link_downs(&r) >= 1, "{r}");
    assert_eq!(r["ports"][0]["link"]["up"], true, "reconnected: {r}");
    assert!(
        received_after_a_pause(&intervals) > 1000,
        "traffic resumed after the peer came back; packets per interval: {:?}; report: {r}",
        rx_series(&intervals)
    );
}

#[test]
fn a_memif_client_started_before_its_peer_connects_once_the_peer_is_there() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let socket = unique("memif");
    let mut s = sink(
        &format!("net_memif0,role=client,socket={socket}"),
        60.0,
        &[],
        dir.path(),
    );
    // Nothing listens yet: the sink runs, its port down and not polled.
    until_interval(&mut s, "the sink did not run without its peer", |rx| {
        rx == 0
    });
    let peer = memif_server(&socket, dir.path());
    until_receiving(&mut s);
    s.signal(libc::SIGINT);
    let (r, _) = report_stopped_by(&mut s, "memif peer later", "signal");
    drop(peer);
    assert_eq!(r["ports"][0]["link"]["up"], true, "connected: {r}");
    assert_eq!(
        link_downs(&r),
        0,
        "it started down, it did not go down: {r}"
    );
    assert!(
        r["ports"][0]["link_down_s"].as_f64() > Some(0.0),
        "the time before the peer came counts as down: {r}"
    );
    // Stopped at the first interval that received (it may be a short one).
    assert!(r["rx_packets"].as_u64() > Some(0), "{r}");
}

/// Runs of the forwarder whose output's peer is killed under it.
const TX_KILL_RUNS: usize = 6;

#[test]
fn a_forwarder_outlives_the_memif_peer_it_sends_to() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let (s_in, s_out) = (unique("memif-in"), unique("memif-out"));
    let mut source = memif_server(&s_in, dir.path());
    let port = format!("net_memif0,role=client,socket={s_in}");
    let to = format!("net_memif1,role=client,socket={s_out}");
    let rxonly = || {
        testpmd_in(
            &format!("net_memif0,role=server,socket={s_out}"),
            "rxonly",
            dir.path(),
        )
    };
    let check = |r: &Value, what: &str| {
        let f = &r["forward"];
        let n = |k: &str| {
            f[k].as_u64()
                .unwrap_or_else(|| panic!("{what}: forward.{k}: {r}"))
        };
        assert_eq!(
            n("packets_in"),
            n("tx_packets") + n("tx_dropped") + n("link_down"),
            "{what}: every packet in is sent, dropped or counted unsent: {f}"
        );
        assert_eq!(r["mbufs_leaked"], 0, "{what}: {r}");
    };
    // A forwarder receiving from the source. A source starts in about a
    // second; a healthy one is reached at once (a client whose peer is up
    // connects when started). One on its way out from the run before
    // (memif's own race, as above) is replaced, once.
    let receiving = |source: &mut Proc, what: &str| {
        if source.child.try_wait().ok().flatten().is_some() {
            *source = memif_server(&s_in, dir.path());
        }
        let mut f = forward(&port, &to, 60.0, dir.path());
        if !interval_came_within(&mut f, Duration::from_secs(5), |rx| rx > 0) {
            eprintln!("{what}: nothing from the source; a new one:\n{}", f.tail());
            drop(std::mem::replace(source, memif_server(&s_in, dir.path())));
            until_receiving(&mut f);
        }
        f
    };
    for run in 0..TX_KILL_RUNS {
        let peer = rxonly();
        let mut f = receiving(&mut source, &format!("run {run}"));
        // The output's peer goes while packets still stream in. Seeing it
        // gone takes the PMD's handler and the link watch a few hundred
        // milliseconds, longer on a loaded machine: packets stream in for
        // long enough after it that some come once the link reads down.
        peer.signal(libc::SIGKILL);
        std::thread::sleep(Duration::from_secs(2));
        f.signal(libc::SIGINT);
        let (r, _) = report_stopped_by(&mut f, &format!("run {run} of {TX_KILL_RUNS}"), "signal");
        drop(peer);
        check(&r, &format!("run {run}"));
        assert!(
            r["forward"]["link_down"].as_u64() > Some(0),
            "run {run}: what came in once the output's peer was gone is counted: {}",
            r["forward"]
        );
    }
    // An output whose peer is not there at the start: the run goes on, its
    // packets counted unsent, and it sends once the peer comes.
    let mut f = receiving(&mut source, "output peer later");
    let mut peer = rxonly();
    // testpmd's statistics every second: "RX-packets: N ...".
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let l = peer.line(Duration::from_secs(5)).unwrap_or_default();
        let got = l
            .split_whitespace()
            .skip_while(|w| *w != "RX-packets:")
            .nth(1);
        if got.and_then(|n| n.parse::<u64>().ok()) > Some(0) {
            break;
        }
        assert!(
            Instant::now() < end,
            "the output's peer received nothing:\n{}\nforwarder:\n{}",
            peer.tail(),
            f.tail()
        );
    }
    f.signal(libc::SIGINT);
    let (r, _) = report_stopped_by(&mut f, "output peer later", "signal");
    drop(peer);
    check(&r, "output peer later");
    assert!(
        r["forward"]["link_down"].as_u64() > Some(0),
        "{}",
        r["forward"]
    );
    assert!(
        r["forward"]["tx_packets"].as_u64() > Some(0),
        "{}",
        r["forward"]
    );
    source.signal(libc::SIGINT);
}

#[test]
fn a_vhost_sink_outlives_its_virtio_user_peer_and_polls_it_again() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vhost.sock");
    let sock = sock.to_str().unwrap();
    let mut s = sink(
        &format!("net_vhost0,iface={sock},client=0"),
        60.0,
        &[],
        dir.path(),
    );
    // The vhost side listens once it runs: testpmd connects to it.
    let end = Instant::now() + Duration::from_secs(15);
    while !Path::new(sock).exists() {
        assert!(Instant::now() < end, "no vhost socket:\n{}", s.tail());
        std::thread::sleep(Duration::from_millis(20));
    }
    let virtio = format!("net_virtio_user0,path={sock}");
    let peer = testpmd(&virtio, dir.path());
    until_receiving(&mut s);
    peer.signal(libc::SIGKILL);
    drop(peer);
    std::thread::sleep(Duration::from_millis(500));
    let back = testpmd(&virtio, dir.path());
    until_resumed(&mut s);
    s.signal(libc::SIGINT);
    let (r, intervals) = report_stopped_by(&mut s, "vhost", "signal");
    drop(back);
    assert!(link_downs(&r) >= 1, "{r}");
    assert!(
        received_after_a_pause(&intervals) > 1000,
        "traffic resumed after the peer came back; packets per interval: {:?}; report: {r}",
        rx_series(&intervals)
    );
}

#[test]
fn a_virtio_user_sink_outlives_its_vhost_peer() {
    require!();
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vhost.sock");
    let sock = sock.to_str().unwrap();
    let peer = testpmd(&format!("net_vhost0,iface={sock},client=0"), dir.path());
    let mut s = sink(
        &format!("net_virtio_user0,path={sock}"),
        2.0,
        &[],
        dir.path(),
    );
    until_receiving(&mut s);
    peer.signal(libc::SIGKILL);
    let (r, _) = report(&mut s, "virtio-user");
    drop(peer);
    assert!(link_downs(&r) >= 1, "{r}");
}

//! `grorx sink --metrics ADDR:PORT`: the Prometheus exposition while the run
//! goes on, read by hand and by a real Prometheus server.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// Each run pins lcores to the same CPUs: one at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// A port free a moment ago.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("an ephemeral port");
    l.local_addr().unwrap().port()
}

/// A child process that is killed (and reaped) however the test ends.
struct Reaped(Option<Child>);

impl Reaped {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }

    /// Waits for the child to end on its own.
    fn wait(mut self) -> std::process::Output {
        let c = self.0.take().expect("a child");
        c.wait_with_output().expect("wait")
    }

    /// Stops the child with SIGINT (grorx stops cleanly on it) and waits.
    fn interrupt(mut self) -> std::process::Output {
        let c = self.0.take().expect("a child");
        // SAFETY: plain kill(2) on the pid of a child not yet reaped.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        c.wait_with_output().expect("wait")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `grorx sink` on the embedded generator, serving metrics on `port`.
fn sink(name: &str, port: u16, secs: &str) -> Reaped {
    sink_limited(name, port, secs, None)
}

/// `sink`, with at most `nofile` file descriptors when given.
fn sink_limited(name: &str, port: u16, secs: &str, nofile: Option<u64>) -> Reaped {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grorx"));
    if let Some(n) = nofile {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit(2) is async-signal-safe; the closure touches
        // nothing else between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd
        .args([
            "sink",
            "--duration",
            secs,
            "-q",
            "--name",
            name,
            "--metrics",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("grorx runs");
    Reaped(Some(child))
}

/// One HTTP/1.0 GET: the status code and the body, or why not.
fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {text:?}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

/// Retries `get` until it answers or `within` passes (the listener is bound
/// before EAL starts, but answered once the run is up).
fn get_when_up(port: u16, path: &str, within: Duration) -> (u16, String) {
    let end = Instant::now() + within;
    loop {
        match get(port, path) {
            Ok(r) => return r,
            Err(e) if Instant::now() > end => panic!("GET {path} on port {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One sample of the text exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

/// The samples of an exposition (label values here have no quotes or commas).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l}"));
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{l}"));
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            let value = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("value in {l}")),
            };
            Sample {
                name: name.to_string(),
                labels,
                value,
            }
        })
        .collect()
}

/// The sum of a metric's samples (over queues, ports, reasons).
fn total(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

#[test]
fn sink_serves_prometheus_metrics_while_running() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("grorx-metrics-{}", std::process::id());
    let port = free_port();
    let run = sink(&name, port, "6");
    let (code, _) = get_when_up(port, "/metrics", Duration::from_secs(10));
    assert_eq!(code, 200);
    // The monitor drains the histograms once a second: let it, twice.
    std::thread::sleep(Duration::from_millis(1500));
    let (_, a) = get(port, "/metrics").expect("first scrape");
    std::thread::sleep(Duration::from_millis(1000));
    let (_, b) = get(port, "/metrics").expect("second scrape");
    let (code, _) = get(port, "/nothing-here").expect("another path");
    assert_eq!(code, 404);
    let o = run.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (sa, sb) = (parse(&a), parse(&b));
    let rx_a = total(&sa, "grorx_rx_packets_total");
    let rx_b = total(&sb, "grorx_rx_packets_total");
    assert!(rx_a > 0.0, "{a}");
    assert!(rx_b > rx_a, "rx_packets went from {rx_a} to {rx_b}");
    for s in &sb {
        assert_eq!(
            s.labels.get("name"),
            Some(&name),
            "every series is named: {s:?}"
        );
    }
    for metric in [
        "grorx_up",
        "grorx_uptime_seconds",
        "grorx_info",
        "grorx_rx_bytes_total",
        "grorx_rx_bursts_total",
        "grorx_rx_polls_total",
        "grorx_out_packets_total",
        "grorx_gro_segments_in_total",
        "grorx_gro_packets_out_total",
        "grorx_gro_flushes_total",
        "grorx_gro_passthrough_total",
        "grorx_stage_consumed_total",
        "grorx_stage_dropped_total",
        "grorx_port_ipackets_total",
        "grorx_port_ibytes_total",
        "grorx_port_imissed_total",
        "grorx_port_ierrors_total",
        "grorx_port_rx_nombuf_total",
        "grorx_port_link_up",
        "grorx_port_link_downs_total",
        "grorx_port_link_down_seconds_total",
    ] {
        assert!(sb.iter().any(|s| s.name == metric), "no {metric} in\n{b}");
    }
    assert_eq!(total(&sb, "grorx_up"), 1.0);
    assert!(total(&sb, "grorx_gro_segments_in_total") > 0.0);
    let q = sb
        .iter()
        .find(|s| s.name == "grorx_rx_packets_total")
        .unwrap();
    for l in ["port", "queue", "lcore"] {
        assert!(q.labels.contains_key(l), "{q:?}");
    }
    // Histograms: buckets up to +Inf, a sum and a count that agree.
    for h in [
        "grorx_burst",
        "grorx_gro_segments",
        "grorx_gro_hold_seconds",
    ] {
        let buckets: Vec<&Sample> = sb
            .iter()
            .filter(|s| s.name == format!("{h}_bucket"))
            .collect();
        assert!(buckets.len() > 2, "no {h}_bucket in\n{b}");
        let inf = buckets
            .iter()
            .find(|s| s.labels.get("le").map(String::as_str) == Some("+Inf"))
            .unwrap_or_else(|| panic!("no +Inf bucket for {h}"));
        let count = total(&sb, &format!("{h}_count"));
        assert!(count > 0.0, "{h}_count is 0 after two drains:\n{b}");
        assert_eq!(inf.value, count, "{h}: +Inf bucket = count");
        assert!(
            sb.iter().any(|s| s.name == format!("{h}_sum")),
            "no {h}_sum"
        );
        let mut last = 0.0;
        for s in &buckets {
            assert!(s.value >= last, "{h} buckets are cumulative");
            last = s.value;
        }
    }
}

#[test]
fn metrics_address_errors_come_before_eal() {
    // A port in use: refused at once, before EAL starts.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let t0 = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(["sink", "--duration", "5", "--metrics"])
        .arg(format!("127.0.0.1:{port}"))
        .args([
            "--name",
            &format!("grorx-metrics-taken-{}", std::process::id()),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("--metrics 127.0.0.1:{port}")) && err.contains("in use"),
        "{err}"
    );
    assert!(!err.contains("EAL"), "failed before EAL: {err}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // Not an address: clap's usage error, with an example.
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(["sink", "--metrics", "9100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is not ADDR:PORT") && err.contains("127.0.0.1:9464"),
        "{err}"
    );
}

/// Where `prog` is on PATH.
fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(prog))
            .find(|f| f.is_file())
    })
}

/// Prometheus' answer to an instant query, parsed.
fn query(port: u16, q: &str) -> Result<serde_json::Value, String> {
    let (code, body) = get(port, &format!("/api/v1/query?query={q}"))?;
    if code != 200 {
        return Err(format!("HTTP {code}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
}

fn log_of(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn prometheus_scrapes_grorx() {
    let Some(prom) = which("prometheus") else {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            panic!(
                "prometheus is not installed: `scripts/setup.sh prometheus` installs it \
                 (scripts/test.sh does)"
            );
        }
        eprintln!("SKIPPED prometheus_scrapes_grorx: no prometheus on PATH (as root, scripts/setup.sh prometheus)");
        return;
    };
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("grorx-prom-{}", std::process::id());
    let (gport, pport) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: grorx\n    static_configs:\n      \
             - targets: ['127.0.0.1:{gport}']\n"
        ),
    )
    .unwrap();
    let run = sink(&name, gport, "30");
    get_when_up(gport, "/metrics", Duration::from_secs(10));
    let log = dir.path().join("prometheus.log");
    let mut server = Reaped(Some(
        Command::new(&prom)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{pport}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus runs"),
    ));
    // Until it has scraped: a positive rx_packets for this instance.
    let end = Instant::now() + Duration::from_secs(25);
    let (value, labels) = loop {
        if let Ok(Some(st)) = server.child().try_wait() {
            panic!("prometheus exited ({st}):\n{}", log_of(&log));
        }
        let r = query(pport, "grorx_rx_packets_total");
        let hit = r.as_ref().ok().and_then(|v| {
            let s = v["data"]["result"].get(0)?;
            let x: f64 = s["value"][1].as_str()?.parse().ok()?;
            (x > 0.0).then(|| (x, s["metric"].clone()))
        });
        if let Some(h) = hit {
            break h;
        }
        if Instant::now() > end {
            panic!("no scraped grorx_rx_packets_total: {r:?}\n{}", log_of(&log));
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(value > 0.0);
    assert_eq!(labels["name"], name.as_str(), "{labels}");
    assert_eq!(labels["job"], "grorx", "{labels}");
    // The scrape itself was healthy.
    let up = query(pport, "up").expect("up");
    assert_eq!(up["data"]["result"][0]["value"][1], "1", "{up}");
    drop(server);
    let o = run.interrupt();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(dir);
}

/// Threads and resident kilobytes of process `pid` now.
fn threads_and_rss(pid: u32) -> (usize, u64) {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (threads, rss)
}

/// The value of `grorx_metrics_http_events_total{event="EVENT"}`.
fn http_event(samples: &[Sample], event: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == "grorx_metrics_http_events_total")
        .filter(|s| s.labels.get("event").map(String::as_str) == Some(event))
        .map(|s| s.value)
        .sum()
}

/// Asserts the run is as it was before the abuse: its threads, its memory
/// within 50 MiB, its metrics served.
fn still_whole(pid: u32, port: u16, base: (usize, u64), what: &str) -> Vec<Sample> {
    let (threads, rss) = threads_and_rss(pid);
    assert_eq!(threads, base.0, "{what}: threads {} -> {threads}", base.0);
    assert!(
        rss < base.1 + (50 << 10),
        "{what}: RSS {} -> {rss} kB",
        base.1
    );
    let (code, body) = get_when_up(port, "/metrics", Duration::from_secs(10));
    assert_eq!(code, 200, "{what}: metrics served after");
    parse(&body)
}

#[test]
fn no_client_can_knock_the_endpoint_over() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("grorx-abuse-{}", std::process::id());
    let port = free_port();
    let mut run = sink(&name, port, "60");
    get_when_up(port, "/metrics", Duration::from_secs(10));
    let pid = run.child().id();
    std::thread::sleep(Duration::from_millis(500));
    let base = threads_and_rss(pid);

    // One connection pipelines 20000 scrapes and never reads.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000);
    let _ = s.write_all(&req); // stops when the server stops taking more
    std::thread::sleep(Duration::from_millis(500));
    still_whole(pid, port, base, "20000 pipelined scrapes");
    drop(s);

    // 3000 idle connections (the test's own descriptors raised first).
    let lim = libc::rlimit {
        rlim_cur: 8192,
        rlim_max: 8192,
    };
    // SAFETY: setrlimit(2) on this process, with a valid struct.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    let idle: Vec<TcpStream> = (0..3000)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(idle.len() > 2000, "only {} connections opened", idle.len());
    std::thread::sleep(Duration::from_millis(500));
    let m = still_whole(pid, port, base, "3000 idle connections");
    assert!(
        http_event(&m, "evicted") > 2000.0,
        "the idlest closed past the cap"
    );
    drop(idle);

    // One header line of 64 MiB.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ");
    let mib = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        if s.write_all(&mib).is_err() {
            break; // answered and closed after 8 KiB
        }
    }
    drop(s);
    let m = still_whole(pid, port, base, "a 64 MiB header");
    assert_eq!(http_event(&m, "too_large"), 1.0);

    let o = run.interrupt();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stderr);
    assert!(report.contains("mbufs leaked: 0"), "{report}");
}

#[test]
fn out_of_file_descriptors_the_endpoint_keeps_serving() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("grorx-nofile-{}", std::process::id());
    let port = free_port();
    // It uses about 40 descriptors itself: 80 runs out before 64 connections.
    let mut run = sink_limited(&name, port, "60", Some(80));
    get_when_up(port, "/metrics", Duration::from_secs(15));
    let pid = run.child().id();
    let base = threads_and_rss(pid);
    // More connections than the process may have descriptors.
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let conns: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        run.child().try_wait().unwrap().is_none(),
        "grorx still runs"
    );
    drop(conns);
    let m = still_whole(pid, port, base, "400 connections at 80 descriptors");
    assert!(
        http_event(&m, "accept_error") > 0.0,
        "it ran out of descriptors"
    );
    assert!(
        http_event(&m, "accepted") > 100.0,
        "{}",
        http_event(&m, "accepted")
    );
    let o = run.interrupt();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("mbufs leaked: 0"));
}

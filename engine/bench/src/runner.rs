//! Running the cells: one process per run (EAL starts once per process),
//! interleaved repetitions with a rotating first cell, progress on stderr,
//! every run checked (exit status, report, `mbufs_leaked == 0`).

use crate::args;
use crate::config::{Cell, Command, Peer};
use crate::metrics;
use crate::process::{self, Finished};
use crate::source::{Prepared, SOCKET};
use crate::testpmd;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What every run of one experiment shares.
pub struct Plan<'a> {
    pub exe: PathBuf,
    pub source: &'a Prepared,
    /// Experiment-wide sink arguments.
    pub args: &'a [String],
    pub eal: Vec<String>,
    pub duration: f64,
    pub warmup: f64,
    pub repetitions: u32,
    pub metrics: &'a [String],
    /// Recorded, not shown: the config's `record` list.
    pub record: &'a [String],
    pub out: &'a Path,
}

/// One process run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub cell: String,
    /// 1-based.
    pub repetition: u32,
    /// Place in its repetition's order, 1-based.
    pub position: usize,
    pub ok: bool,
    pub error: Option<String>,
    pub exit_code: Option<i32>,
    /// The shown metrics, then the source's own (`source.cycles_per_packet`).
    pub metrics: Vec<(String, Option<f64>)>,
    pub mbufs_leaked: Option<u64>,
    pub wall_s: f64,
    pub argv: Vec<String>,
    /// The process's report (grorx JSON; testpmd's rates).
    pub report: Option<Value>,
}

impl RunRecord {
    /// A successful run of `cell` in repetition `rep` that measured `pps`
    /// (for tests of what is made of runs).
    #[cfg(test)]
    pub(crate) fn measured(cell: &str, rep: u32, pps: f64) -> RunRecord {
        RunRecord {
            cell: cell.into(),
            repetition: rep,
            position: 1,
            ok: true,
            error: None,
            exit_code: Some(0),
            metrics: vec![("rx_pps".into(), Some(pps))],
            mbufs_leaked: Some(0),
            wall_s: 1.0,
            argv: vec![],
            report: None,
        }
    }
}

/// Run order: repetition r starts at cell r mod n (A B C, B C A, C A B ...).
pub fn schedule(n: usize, repetitions: u32) -> Vec<(u32, usize, usize)> {
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    for r in 0..repetitions {
        for k in 0..n {
            out.push((r + 1, k + 1, (r as usize + k) % n));
        }
    }
    out
}

/// The full `grorx sink` (or `forward`) command line of a cell (memif
/// socket unfilled).
pub fn sink_argv(plan: &Plan, cell: &Cell) -> Vec<String> {
    let sub = cell.command.grorx().unwrap_or("sink");
    let mut a = vec![plan.exe.display().to_string(), sub.into()];
    a.extend(args::layer(&[
        &plan.source.sink_args,
        plan.args,
        &cell.args,
    ]));
    a.extend([
        "--duration".into(),
        format!("{}", plan.warmup + plan.duration),
        "--json".into(),
        "-q".into(),
        // The bench's own instance name: a sink already running under the
        // default one does not stop the cells.
        "--name".into(),
        format!("bench-{}", std::process::id()),
    ]);
    if plan.warmup > 0.0 {
        a.extend(["--json-interval".into(), "0.5".into()]);
    }
    a.push("--".into());
    a.extend(plan.eal.iter().cloned());
    a
}

/// Does this grorx take these arguments? `grorx sink ARGS --help` exits 0
/// only if clap accepts every flag and value before `--help`. `Err` holds
/// clap's complaint (a flag or value an owner has not added yet).
pub fn probe(exe: &Path, command: Command, sink_args: &[String]) -> Result<(), String> {
    let sub = command.grorx().unwrap_or("sink");
    let mut a = vec![exe.display().to_string(), sub.into()];
    a.extend(sink_args.iter().cloned());
    a.push("--help".into());
    let f = match process::spawn(&a) {
        Ok(r) => r.wait_until(
            Instant::now() + Duration::from_secs(30),
            Duration::from_secs(1),
        ),
        Err(e) => return Err(format!("{e:#}")),
    };
    if f.status.map(|s| s.success()).unwrap_or(false) {
        Ok(())
    } else {
        let first = f
            .stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("grorx sink --help failed")
            .trim_start_matches("error: ")
            .to_string();
        Err(format!("this grorx sink does not take it yet: {first}"))
    }
}

fn no_huge(plan: &Plan, cell: &Cell) -> bool {
    args::has_flag(&args::layer(&[plan.args, &cell.args]), "--no-huge")
        || plan.eal.iter().any(|a| a == "--no-huge")
        || !hugepages_usable()
}

/// Hugepages testpmd can use: a hugetlbfs mount and 256 MiB free.
fn hugepages_usable() -> bool {
    hugepages::Status::read()
        .map(|s| {
            !s.mounts.is_empty()
                && s.pools
                    .iter()
                    .any(|p| p.available() * p.page_size >= 256 << 20)
        })
        .unwrap_or(false)
}

/// Rates after the warm-up from the `--json-interval` stream, put in place
/// of the whole-run `rx_pps` / `rx_gbps` (kept as `bench.*_whole_run`).
fn apply_warmup(report: &mut Value, intervals: &[Value], warmup: f64) {
    let steady: Vec<&Value> = intervals
        .iter()
        .filter(|v| {
            let t = v["elapsed_s"].as_f64().unwrap_or(0.0);
            let d = v["interval_s"].as_f64().unwrap_or(0.0);
            t - d >= warmup - 0.05
        })
        .collect();
    let secs: f64 = steady
        .iter()
        .map(|v| v["interval_s"].as_f64().unwrap_or(0.0))
        .sum();
    let mut bench = serde_json::json!({
        "warmup_s": warmup,
        "steady_intervals": steady.len(),
        "steady_s": secs,
        "rx_pps_whole_run": report["rx_pps"].clone(),
        "rx_gbps_whole_run": report["rx_gbps"].clone(),
    });
    if secs > 0.0 {
        let pkts: f64 = steady
            .iter()
            .map(|v| v["rx_packets"].as_f64().unwrap_or(0.0))
            .sum();
        let gbit: f64 = steady
            .iter()
            .map(|v| v["rx_gbps"].as_f64().unwrap_or(0.0) * v["interval_s"].as_f64().unwrap_or(0.0))
            .sum();
        report["rx_pps"] = (pkts / secs).into();
        report["rx_gbps"] = (gbit / secs).into();
    } else {
        bench["note"] = "no interval after the warm-up: whole-run rates".into();
    }
    report["bench"] = bench;
}

/// Parses `grorx sink --json [--json-interval]` output: interval objects,
/// then the final report.
fn sink_report(stdout: &str, warmup: f64) -> Option<Value> {
    let objs: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .collect();
    let (last, intervals) = objs.split_last()?;
    // The final report has "command"; interval objects do not.
    last.get("command")?;
    let mut r = last.clone();
    if warmup > 0.0 {
        apply_warmup(&mut r, intervals, warmup);
    }
    Some(r)
}

fn status_text(f: &Finished) -> Option<String> {
    if f.timed_out {
        return Some("timed out (killed)".into());
    }
    match f.status {
        Some(s) if s.success() => None,
        Some(s) => Some(s.to_string()),
        None => Some("no exit status".into()),
    }
}

/// Runs one cell once.
pub fn run_one(plan: &Plan, cell: &Cell, run_id: usize) -> RunRecord {
    let start = Instant::now();
    let tag = format!("grorx-bench-{}-{run_id}", std::process::id());
    // Unix socket paths are short (108 B): not under the output directory.
    let socket = std::env::temp_dir()
        .join(format!("{tag}.sock"))
        .display()
        .to_string();
    let fill = |v: Vec<String>| -> Vec<String> {
        v.into_iter().map(|a| a.replace(SOCKET, &socket)).collect()
    };
    let huge_off = no_huge(plan, cell);
    // A memif peer for this run.
    let peer = match (plan.source.peer, cell.command) {
        (Some(Peer::TestpmdTxonly), _) => {
            let frame_len = plan.source.peer_frame_len;
            let argv = testpmd::txonly_peer_argv(
                &plan.eal,
                &socket,
                &format!("{tag}-peer"),
                huge_off,
                frame_len,
            );
            match process::spawn(&argv) {
                Ok(p) => Some(p),
                Err(e) => return failed(cell, start, format!("memif peer: {e:#}"), argv),
            }
        }
        (Some(Peer::TestpmdPcap), _) => {
            let argv = testpmd::pcap_peer_argv(
                &plan.eal,
                &socket,
                &plan
                    .source
                    .pcap
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                &format!("{tag}-peer"),
                huge_off,
                plan.source.frames.unwrap_or(0),
            );
            match process::spawn(&argv) {
                Ok(p) => Some(p),
                Err(e) => return failed(cell, start, format!("memif peer: {e:#}"), argv),
            }
        }
        (Some(Peer::Grorx), _) | (None, _) => None,
    };
    if peer.is_some() {
        std::thread::sleep(Duration::from_millis(500));
    }
    let total = plan.warmup + plan.duration;
    let (argv, deadline) = match cell.command {
        Command::Sink | Command::Forward => (
            fill(sink_argv(plan, cell)),
            start + Duration::from_secs_f64(total + 60.0),
        ),
        Command::TestpmdRxonly => (
            fill(testpmd::rxonly_argv(
                &plan.eal,
                plan.source.port_spec.as_deref().unwrap_or("net_null0"),
                &tag,
                huge_off,
                plan.source.frames.unwrap_or(0),
                &cell.args,
            )),
            // testpmd runs until stopped: the measured time plus its start.
            start + Duration::from_secs_f64(total + 1.5),
        ),
    };
    // A testpmd that started late (a loaded machine) is stopped only once it
    // printed a second's rates for every second measured, within a minute.
    let (latest, samples) = match cell.command {
        Command::TestpmdRxonly => (
            deadline + Duration::from_secs(60),
            testpmd::samples_needed(plan.warmup, plan.duration),
        ),
        Command::Sink | Command::Forward => (deadline, 0),
    };
    // When the peer dies, if it does: testpmd 22.11's memif server can
    // crash (SIGSEGV) as the client disconnects at the end of a run, which
    // costs the run nothing; dying while the sink measures does.
    let sink_start = Instant::now();
    let mut peer_died_at: Option<f64> = None;
    let mut peer = peer;
    let finished = match process::spawn(&argv) {
        Ok(p) => p.wait_until_done(
            deadline,
            latest,
            |out| testpmd::samples(out) >= samples,
            Duration::from_secs(10),
            || {
                if let Some(pp) = peer.as_mut() {
                    if peer_died_at.is_none() && !pp.alive() {
                        peer_died_at = Some(sink_start.elapsed().as_secs_f64());
                    }
                }
            },
        ),
        Err(e) => {
            if let Some(p) = peer {
                p.interrupt(Duration::from_secs(5));
            }
            return failed(cell, start, format!("{e:#}"), argv);
        }
    };
    let peer_out = peer.map(|mut p| {
        let alive = p.alive();
        (alive, p.interrupt(Duration::from_secs(5)))
    });
    let _ = std::fs::remove_file(&socket);

    let mut error = None;
    let (report, exit_code) = match cell.command {
        Command::Sink | Command::Forward => {
            error = status_text(&finished);
            (
                sink_report(&finished.stdout, plan.warmup),
                finished.status.and_then(|s| s.code()),
            )
        }
        Command::TestpmdRxonly => {
            // Stopped by us at the deadline: that is how testpmd ends.
            if !finished.timed_out {
                error = Some(format!(
                    "testpmd exited before it was stopped ({})",
                    status_text(&finished).unwrap_or_else(|| "status 0".into())
                ));
            }
            (testpmd::report(&finished.stdout, plan.warmup), None)
        }
    };
    if report.is_none() && error.is_none() {
        error = Some("no report on stdout".into());
    }
    if let Some((alive, p)) = &peer_out {
        // The sink stops receiving `total` seconds after it started at the
        // earliest (plus its EAL start): a death after that is the peer's
        // end-of-run crash, noted but not held against the run.
        if !alive && error.is_none() {
            let status = status_text(p).unwrap_or_else(|| "status 0".into());
            if peer_died_at.is_none_or(|t| t >= total) {
                eprint!("(note: the memif peer died after the run, {status}; the run stands) ");
            } else {
                error = Some(format!(
                    "memif peer died early ({status}): {} | stdout: {}",
                    process::tail(&p.stderr, 8),
                    process::tail(&p.stdout, 4)
                ));
            }
        }
    }
    let leaked = report
        .as_ref()
        .and_then(|r| r.get("mbufs_leaked"))
        .and_then(|v| v.as_u64());
    if let Some(n) = leaked.filter(|&n| n > 0) {
        error = Some(format!(
            "{n} mbuf(s) leaked{}",
            error.map(|e| format!("; {e}")).unwrap_or_default()
        ));
    }
    if let Some(e) = &mut error {
        let t = process::tail(&finished.stderr, 3);
        if !t.is_empty() {
            e.push_str(": ");
            e.push_str(&t);
        }
    }
    let mut names: Vec<String> = plan.metrics.to_vec();
    if cell.command.grorx().is_some() {
        names.extend(plan.source.extra_metrics.iter().cloned());
        names.extend(plan.record.iter().cloned());
    }
    let values = names
        .into_iter()
        .map(|m| {
            let v = report.as_ref().and_then(|r| metrics::lookup(r, &m));
            (m, v)
        })
        .collect();
    RunRecord {
        cell: cell.name.clone(),
        repetition: 0,
        position: 0,
        ok: error.is_none(),
        error,
        exit_code,
        metrics: values,
        mbufs_leaked: leaked,
        wall_s: start.elapsed().as_secs_f64(),
        argv,
        report,
    }
}

fn failed(cell: &Cell, start: Instant, error: String, argv: Vec<String>) -> RunRecord {
    RunRecord {
        cell: cell.name.clone(),
        repetition: 0,
        position: 0,
        ok: false,
        error: Some(error),
        exit_code: None,
        metrics: Vec::new(),
        mbufs_leaked: None,
        wall_s: start.elapsed().as_secs_f64(),
        argv,
        report: None,
    }
}

fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

/// Runs every runnable cell `repetitions` times, interleaved.
pub fn run_all(plan: &Plan, cells: &[&Cell]) -> Vec<RunRecord> {
    let order = schedule(cells.len(), plan.repetitions);
    let total = order.len();
    let width = cells.iter().map(|c| c.name.len()).max().unwrap_or(4);
    let t0 = Instant::now();
    let mut runs: Vec<RunRecord> = Vec::with_capacity(total);
    for (i, &(rep, pos, ci)) in order.iter().enumerate() {
        let cell = cells[ci];
        let elapsed = t0.elapsed().as_secs_f64();
        let per_run = if i > 0 {
            elapsed / i as f64
        } else {
            plan.warmup + plan.duration + 1.0
        };
        eprint!(
            "[{:>w$}/{total}] rep {rep}/{} {:<width$}  elapsed {} / est. {} ...",
            i + 1,
            plan.repetitions,
            cell.name,
            clock(elapsed),
            clock(elapsed + per_run * (total - i) as f64),
            w = total.to_string().len(),
        );
        let mut r = run_one(plan, cell, i);
        r.repetition = rep;
        r.position = pos;
        let shown: Vec<String> = r
            .metrics
            .iter()
            .take(plan.metrics.len())
            .map(|(m, v)| match v {
                Some(v) => format!("{} {}", metrics::fmt(m, *v), metrics::display(m).unit),
                None => format!("{m} -"),
            })
            .collect();
        match &r.error {
            None => eprintln!(" {} ({:.1} s)", shown.join(", "), r.wall_s),
            Some(e) => eprintln!(" FAILED: {e}"),
        }
        runs.push(r);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_rotates_the_first_cell() {
        let s: Vec<usize> = schedule(3, 3).into_iter().map(|x| x.2).collect();
        assert_eq!(s, [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert_eq!(schedule(2, 1), [(1, 1, 0), (1, 2, 1)]);
    }

    #[test]
    fn warmup_rates_come_from_the_interval_stream() {
        let out = [
            r#"{"elapsed_s":0.5,"interval_s":0.5,"rx_packets":100,"rx_gbps":1.0}"#,
            r#"{"elapsed_s":1.0,"interval_s":0.5,"rx_packets":400,"rx_gbps":4.0}"#,
            r#"{"elapsed_s":1.5,"interval_s":0.5,"rx_packets":600,"rx_gbps":6.0}"#,
            r#"{"command":"sink","rx_pps":700.0,"rx_gbps":3.0,"mbufs_leaked":0}"#,
        ]
        .join("\n");
        let r = sink_report(&out, 0.5).unwrap();
        assert_eq!(r["rx_pps"], 1000.0);
        assert_eq!(r["rx_gbps"], 5.0);
        assert_eq!(r["bench"]["rx_pps_whole_run"], 700.0);
        let r = sink_report(&out, 0.0).unwrap();
        assert_eq!(r["rx_pps"], 700.0);
        assert!(sink_report("garbage", 0.0).is_none());
    }
}

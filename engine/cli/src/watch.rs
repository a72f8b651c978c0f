//! One `grorx sink` or `grorx forward` run as the command shows it: start
//! the engine, print what was set up, watch it (live line, JSON stream, HDR
//! log) until a stop condition or a signal, then print the report.

use crate::metrics::Histograms;
use crate::monitor::{Monitor, MonitorConf};
use crate::signal;
use anyhow::{Context, Result};
use grorx::hist::HdrLog;
use grorx::run::{self, RunOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the command reports on a run.
pub struct Output {
    /// The final report as one JSON object on stdout.
    pub json: bool,
    /// No live line.
    pub quiet: bool,
    /// A per-queue table under the live line.
    pub verbose: bool,
    /// One JSON object per interval of this many seconds on stdout.
    pub json_interval: Option<f64>,
    /// The histograms in the HdrHistogram interval log format.
    pub hdr_log: Option<std::path::PathBuf>,
    /// Show GRO figures (grorx's or rte_gro's).
    pub gro: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics while the run goes on.
    pub metrics: Option<std::net::SocketAddr>,
    /// Address blocks the metrics server answers (empty: any).
    pub metrics_allow: Vec<crate::http::Cidr>,
}

/// Runs `opts` with its built-in stage; the report goes to stdout (JSON) or
/// stderr (text). Fails when the run fails, or ran but left mbufs out of (or
/// twice in) their pools, or could not write its capture.
pub fn run(command: &str, opts: &RunOptions, out: &Output) -> Result<()> {
    // Settings that cannot work are the command line's fault (exit 2).
    opts.validate()
        .map_err(|e| crate::usage(format!("{e:#}")))?;
    // Found before EAL starts: a log file that cannot be created.
    let hdr = match &out.hdr_log {
        Some(p) => Some(HdrLog::create(p)?),
        None => None,
    };
    // So is a metrics port already taken.
    let metrics = match out.metrics {
        Some(a) => Some(crate::metrics::bind(
            a,
            &opts.name,
            out.gro,
            out.metrics_allow.clone(),
        )?),
        None => None,
    };
    signal::install();
    let running = match run::start(opts) {
        Ok(r) => r,
        Err(e) => {
            run::shutdown();
            return Err(e);
        }
    };
    if !out.quiet {
        for l in running.describe() {
            crate::out::sayln(l);
        }
        if let Some(a) = metrics.as_ref().and_then(|m| m.local_addr()) {
            crate::out::sayln(&format!("metrics: http://{a}/metrics"));
        }
    }
    // Said even with -q: an endpoint other hosts can reach is a decision.
    if let Some(a) = out.metrics.filter(|a| !a.ip().is_loopback()) {
        let who = if out.metrics_allow.is_empty() {
            "any host that reaches it".to_string()
        } else {
            format!(
                "the {} address block(s) of --metrics-allow",
                out.metrics_allow.len()
            )
        };
        crate::out::sayln(&format!(
            "metrics: {a} is not a loopback address: served to {who}; keep it behind the host's firewall"
        ));
    }
    // The metrics server, if any, serves while the run is watched.
    let watched = crate::metrics::serving(metrics, &running, |h| watch(&running, out, hdr, h));
    let report = running.wait();
    run::shutdown();
    let mut report = report?;
    watched?;
    report.command = command.into();
    if out.json {
        crate::out::line(&crate::json::line(crate::json::Kind::Report, &report)?)
            .context("stdout closed before the report was written")?;
    } else {
        crate::out::say(&report.text());
    }
    if let Some(e) = report.failure() {
        anyhow::bail!("{e}");
    }
    Ok(())
}

/// Prints while the run goes on; returns when it should stop (a signal
/// stops it, with "signal" as the reason).
fn watch(
    running: &run::Running,
    out: &Output,
    hdr: Option<HdrLog>,
    metrics: Option<Arc<Histograms>>,
) -> Result<()> {
    let mut monitor = Monitor::new(
        running,
        MonitorConf {
            live: !out.quiet,
            verbose: out.verbose,
            gro: out.gro,
            json_every: out.json_interval.map(Duration::from_secs_f64),
            hdr,
            metrics,
        },
    );
    loop {
        if signal::requested() {
            running.stop_because("signal");
        }
        if running.stop_reason().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Err(e) = monitor.tick(Instant::now()) {
            // The run still stops cleanly (GRO flushed, capture written,
            // EAL cleaned up); the command then fails with this error.
            running.stop_because("output error");
            return Err(e);
        }
    }
    monitor.finish()
}

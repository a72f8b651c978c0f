//! The experiment harness behind `grorx bench CONFIG.toml [--quick] [--out
//! DIR]`: runs an experiment (a TOML file in `bench-configs/`) cell by
//! cell, each run its own `grorx sink --json -q` process (or `dpdk-testpmd`
//! for the DPDK floor) on the same cores, repetitions interleaved with a
//! rotating first cell; prints a table (median, min, max, ratio to the
//! baseline per metric) and writes `DIR/<name>.csv`, `DIR/<name>.json` and
//! `DIR/<name>.png`.
//!
//! The `grorx` command parses the flags and calls [`run`]; any program can,
//! given the grorx binary the cells run ([`Options::grorx`]).
//!
//! - [`config`]: the experiment file; [`args`]: layering sink arguments;
//! - [`source`]: traffic sources, synthetic captures, what a source costs;
//! - [`runner`]: processes, order, progress, checks; [`testpmd`]; [`process`];
//! - [`summary`], [`output`] (table, CSV), [`chart`] (PNG), [`metrics`].

pub mod args;
pub mod chart;
pub mod config;
pub mod cost;
pub mod metrics;
pub mod output;
pub mod process;
pub mod runner;
pub mod source;
pub mod summary;
pub mod testpmd;

use anyhow::{bail, Context, Result};
use config::{Command, Config};
use serde_json::json;
use std::path::{Path, PathBuf};

/// What `grorx bench` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: PathBuf,
    /// Short runs, one repetition, no warm-up (a smoke run).
    pub quick: bool,
    pub out: PathBuf,
    /// The grorx binary every `sink` and `forward` cell runs (the `grorx`
    /// command gives its own executable).
    pub grorx: PathBuf,
}

/// How an experiment went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub runs: usize,
    pub failed_runs: usize,
    pub pending_cells: Vec<(String, String)>,
    pub csv: PathBuf,
    pub json: PathBuf,
    pub png: PathBuf,
}

fn host() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": cpu,
        "kernel": kernel,
        "load_avg": std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_string()).unwrap_or_default(),
    })
}

/// Runs one experiment; `Err` only when it cannot start (bad config,
/// missing capture, unwritable output). Failed runs are in the outcome.
pub fn run(opts: &Options) -> Result<Outcome> {
    let cfg = Config::load(&opts.config)?;
    let config_dir = opts
        .config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let out = std::fs::canonicalize(&opts.out).unwrap_or_else(|_| opts.out.clone());
    let exe = opts.grorx.clone();
    let (duration, repetitions, warmup) = if opts.quick {
        (cfg.quick_duration, 1, 0.0)
    } else {
        (cfg.duration, cfg.repetitions, cfg.warmup)
    };
    let src = source::prepare(&cfg.source, &config_dir, &out)?;
    let eal = cfg.eal.clone().unwrap_or_else(|| src.default_eal.clone());
    let cells = cfg.cells();

    // What cannot run yet, and why.
    let mut pending: Vec<(String, String)> = Vec::new();
    let have_testpmd = process::on_path(testpmd::PROGRAM);
    let plan = runner::Plan {
        exe: exe.clone(),
        source: &src,
        args: &cfg.args,
        eal: eal.clone(),
        duration,
        warmup,
        repetitions,
        metrics: &cfg.metrics,
        record: &cfg.record,
        out: &out,
    };
    for c in &cells {
        let why = if let Some(p) = &cfg.pending {
            Some(p.clone())
        } else if let Some(p) = &src.pending {
            Some(p.clone())
        } else if src.peer.is_some_and(|p| p != config::Peer::Grorx) && !have_testpmd {
            Some(format!(
                "the memif peer needs {} (apt-get install dpdk)",
                testpmd::PROGRAM
            ))
        } else if let Some(p) = &c.pending {
            Some(p.clone())
        } else {
            match c.command {
                Command::TestpmdRxonly if !have_testpmd => Some(format!(
                    "{} is not installed (apt-get install dpdk)",
                    testpmd::PROGRAM
                )),
                Command::TestpmdRxonly => None,
                Command::Sink | Command::Forward => {
                    let a = args::layer(&[&src.sink_args, &cfg.args, &c.args]);
                    match runner::probe(&exe, c.command, &a) {
                        // A flag this grorx has, with a value it refuses:
                        // the experiment's mistake, not a cell to wait for.
                        Err(e) if e.contains("invalid value") => {
                            bail!(
                                "cell {:?}: {e}: fix the value in {}",
                                c.name,
                                opts.config.display()
                            )
                        }
                        r => r.err(),
                    }
                }
            }
        };
        if let Some(w) = why {
            pending.push((c.name.clone(), w));
        }
    }
    let runnable: Vec<&config::Cell> = cells
        .iter()
        .filter(|c| !pending.iter().any(|(n, _)| n == &c.name))
        .collect();

    let header = {
        let mut h = vec![format!("== {}: {}", cfg.name, cfg.title)];
        if !cfg.seed.is_empty() || !cfg.lesson.is_empty() {
            h.push(format!("seed {}: {}", cfg.seed, cfg.lesson));
        }
        if !cfg.expect.is_empty() {
            h.push(format!("expect: {}", cfg.expect));
        }
        h.push(format!("source: {}", src.description));
        h.push(format!("source cost: {}", src.cost));
        h.push(format!(
            "runs: {duration} s measured{} x {repetitions} repetition(s), cells interleaved (first cell rotates); EAL {}{}",
            if warmup > 0.0 { format!(" after {warmup} s warm-up") } else { String::new() },
            eal.join(" "),
            if opts.quick { "; --quick" } else { "" }
        ));
        if !cfg.args.is_empty() {
            h.push(format!("sink args for every cell: {}", cfg.args.join(" ")));
        }
        if let Some(b) = &cfg.baseline {
            h.push(format!("baseline: {b}"));
        }
        for n in &cfg.notes {
            h.push(format!("note: {n}"));
        }
        h
    };
    eprintln!("{}", header[0]);
    // Up front, not only under the table: a synthetic or freshly made
    // capture is seen before the figures are.
    eprintln!("source: {}", src.description);
    for (c, why) in &pending {
        eprintln!("pending: {c}: {why}");
    }
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if runnable.is_empty() {
        bail!(
            "nothing to measure: every cell is pending ({})",
            pending
                .iter()
                .map(|(c, w)| format!("{c}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let runs = runner::run_all(&plan, &runnable);
    // A metric no report has is a wrong path, not a missing figure.
    if runs.iter().any(|r| r.ok) {
        for m in cfg.metrics.iter() {
            let found = (runs.iter().filter(|r| r.ok))
                .any(|r| r.metrics.iter().any(|(k, v)| k == m && v.is_some()));
            if !found {
                bail!(
                    "metric {m:?} is in no run's report: check its path against docs/json.md \
                     (e.g. \"rx_pps\", \"gro.avg_segments_per_packet\")"
                );
            }
        }
    }
    let summary = summary::summarize(
        &cells,
        &pending,
        &runs,
        &cfg.metrics,
        cfg.baseline.as_deref(),
    );
    print!("{}", output::table(&header, &cfg.metrics, &summary, &runs));
    let added = cfg.cost_base.as_deref().map(|base| {
        // grorx's own cells: testpmd's rate says nothing about added work.
        let names: Vec<String> = cells
            .iter()
            .filter(|c| c.command.grorx().is_some())
            .map(|c| c.name.clone())
            .collect();
        let reference = cfg.cost_reference.as_deref();
        let mut all = Vec::new();
        for how in [cost::Measure::WallNs, cost::Measure::WorkerCycles] {
            let a = cost::added(&runs, &names, base, reference, how);
            if !a.is_empty() {
                print!("{}", cost::table(&a, base, reference, how));
            }
            all.extend(a);
        }
        all
    });

    let csv = out.join(format!("{}.csv", cfg.name));
    let jsonf = out.join(format!("{}.json", cfg.name));
    let png = out.join(format!("{}.png", cfg.name));
    output::write_csv(&csv, &summary, &runs)?;
    let failed = runs.iter().filter(|r| !r.ok).count();
    let cell_argv: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            let argv = match c.command {
                Command::Sink | Command::Forward => runner::sink_argv(&plan, c),
                Command::TestpmdRxonly => testpmd::rxonly_argv(
                    &eal,
                    src.port_spec.as_deref().unwrap_or("net_null0"),
                    "<per run>",
                    false,
                    src.frames.unwrap_or(0),
                    &c.args,
                ),
            };
            json!({"cell": c, "argv": argv})
        })
        .collect();
    let doc = json!({
        "name": cfg.name,
        "title": cfg.title,
        "seed": cfg.seed,
        "lesson": cfg.lesson,
        "expect": cfg.expect,
        "config_file": opts.config.display().to_string(),
        "config": cfg,
        "quick": opts.quick,
        "effective": {
            "duration_s": duration,
            "warmup_s": warmup,
            "repetitions": repetitions,
            "eal": eal,
            "rates": if warmup > 0.0 {
                "rx_pps/rx_gbps: sink rates after the warm-up, from its --json-interval stream (whole-run rates in report.bench); testpmd: mean of its per-second Rx-pps after the warm-up"
            } else {
                "rx_pps/rx_gbps: whole-run rates from the sink's report; testpmd: mean of its per-second Rx-pps (first second dropped when there are more)"
            },
        },
        "source": src,
        "source_cost": src.cost,
        "grorx": exe.display().to_string(),
        "host": host(),
        "started_unix": started,
        "cells": cell_argv,
        "pending": pending.iter().map(|(c, w)| json!({"cell": c, "reason": w})).collect::<Vec<_>>(),
        "runs": runs,
        "failed_runs": failed,
        "summary": summary,
        "added_cost": added.map(|a| json!({
            "base": cfg.cost_base,
            "reference": cfg.cost_reference,
            "how": "per repetition: wall_ns = 1e9/rx_pps(cell) - 1e9/rx_pps(base); worker_cycles = (cycles.process + cycles.stage)(cell) - (base) with --cycles; to_reference: median of per-repetition ratios; the *_ns fields are in the measure's unit",
            "cells": a,
        })),
    });
    std::fs::write(&jsonf, serde_json::to_string_pretty(&doc)?)?;

    let mut subtitle = vec![format!(
        "{}{}",
        if cfg.seed.is_empty() {
            String::new()
        } else {
            format!("seed {} | ", cfg.seed)
        },
        src.description
    )];
    subtitle.push(format!(
        "{duration} s x {repetitions} run(s) per cell{}, median with min-max; xN.NN = median / baseline ({}){}",
        if warmup > 0.0 { format!(" after {warmup} s warm-up") } else { String::new() },
        cfg.baseline.as_deref().unwrap_or("none"),
        if opts.quick { " | --quick smoke run" } else { "" }
    ));
    let sweep_label = cfg.sweep.as_ref().map(|s| {
        s.label
            .clone()
            .unwrap_or_else(|| format!("{} (grorx sink)", s.flag))
    });
    chart::draw(
        &png,
        &chart::ChartInput {
            title: &cfg.title,
            subtitle,
            metrics: &cfg.metrics,
            cells: &summary,
            sweep_label,
            baseline: cfg.baseline.as_deref(),
        },
    )?;
    println!(
        "wrote {}, {}, {}",
        csv.display(),
        jsonf.display(),
        png.display()
    );
    Ok(Outcome {
        runs: runs.len(),
        failed_runs: failed,
        pending_cells: pending,
        csv,
        json: jsonf,
        png,
    })
}

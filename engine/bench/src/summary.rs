//! Per cell and metric: median, min, max over the successful runs, and the
//! median's ratio to the baseline cell's.

use crate::config::{Cell, Command};
use crate::runner::RunRecord;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    pub metric: String,
    /// Runs that had the value.
    pub n: usize,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// median / the baseline cell's median.
    pub ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CellSummary {
    pub cell: String,
    pub command: Command,
    pub sweep_value: Option<String>,
    pub args: Vec<String>,
    pub runs: usize,
    pub ok_runs: usize,
    pub failed_runs: usize,
    /// Not run, and why.
    pub pending: Option<String>,
    pub note: Option<String>,
    pub stats: Vec<Stat>,
}

pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn stat(runs: &[&RunRecord], metric: &str) -> Stat {
    let mut vals: Vec<f64> = runs
        .iter()
        .filter(|r| r.ok)
        .filter_map(|r| {
            r.metrics
                .iter()
                .find(|(m, _)| m == metric)
                .and_then(|(_, v)| *v)
        })
        .collect();
    let min = vals.iter().copied().reduce(f64::min);
    let max = vals.iter().copied().reduce(f64::max);
    Stat {
        metric: metric.to_string(),
        n: vals.len(),
        median: median(&mut vals),
        min,
        max,
        ratio: None,
    }
}

/// Summaries in cell order; `pending` holds the cells that did not run.
pub fn summarize(
    cells: &[Cell],
    pending: &[(String, String)],
    runs: &[RunRecord],
    metrics: &[String],
    baseline: Option<&str>,
) -> Vec<CellSummary> {
    let mut out: Vec<CellSummary> = cells
        .iter()
        .map(|c| {
            let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.cell == c.name).collect();
            // Every metric any run of this cell recorded, the shown ones first.
            let mut names: Vec<String> = metrics.to_vec();
            for r in &mine {
                for (m, _) in &r.metrics {
                    if !names.contains(m) {
                        names.push(m.clone());
                    }
                }
            }
            CellSummary {
                cell: c.name.clone(),
                command: c.command,
                sweep_value: c.sweep_value.clone(),
                args: c.args.clone(),
                runs: mine.len(),
                ok_runs: mine.iter().filter(|r| r.ok).count(),
                failed_runs: mine.iter().filter(|r| !r.ok).count(),
                pending: pending
                    .iter()
                    .find(|(n, _)| n == &c.name)
                    .map(|(_, why)| why.clone()),
                note: c.note.clone(),
                stats: names.iter().map(|m| stat(&mine, m)).collect(),
            }
        })
        .collect();
    if let Some(b) = baseline {
        let base: Vec<(String, Option<f64>)> = out
            .iter()
            .find(|s| s.cell == b)
            .map(|s| {
                s.stats
                    .iter()
                    .map(|t| (t.metric.clone(), t.median))
                    .collect()
            })
            .unwrap_or_default();
        for s in &mut out {
            for t in &mut s.stats {
                let bm = base.iter().find(|(m, _)| m == &t.metric).and_then(|x| x.1);
                t.ratio = match (t.median, bm) {
                    (Some(m), Some(b)) if b != 0.0 => Some(m / b),
                    _ => None,
                };
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cell: &str, ok: bool, pps: f64) -> RunRecord {
        RunRecord {
            ok,
            ..RunRecord::measured(cell, 1, pps)
        }
    }

    fn cell(name: &str) -> Cell {
        Cell {
            name: name.into(),
            command: Command::Sink,
            args: vec![],
            sweep_value: None,
            pending: None,
            note: None,
        }
    }

    #[test]
    fn medians_ratios_and_failed_runs() {
        let runs = vec![
            run("a", true, 10.0),
            run("a", true, 30.0),
            run("a", true, 20.0),
            run("b", true, 40.0),
            run("b", false, 1000.0),
        ];
        let s = summarize(
            &[cell("a"), cell("b"), cell("c")],
            &[("c".into(), "waits".into())],
            &runs,
            &["rx_pps".into()],
            Some("a"),
        );
        assert_eq!(s[0].stats[0].median, Some(20.0));
        assert_eq!(
            (s[0].stats[0].min, s[0].stats[0].max),
            (Some(10.0), Some(30.0))
        );
        assert_eq!(
            s[1].stats[0].median,
            Some(40.0),
            "the failed run is left out"
        );
        assert_eq!(s[1].failed_runs, 1);
        assert_eq!(s[1].stats[0].ratio, Some(2.0));
        assert_eq!(s[2].pending.as_deref(), Some("waits"));
        assert_eq!(s[2].stats[0].median, None);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}

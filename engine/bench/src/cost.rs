//! Added cost per packet: what a cell costs on top of a base cell, from runs
//! of the same repetition (adjacent in time, so drift cancels), and its
//! ratio to a reference cell's added cost in the same repetition. Two
//! measures: wall clock, `1e9 / rate(cell) - 1e9 / rate(base)` ns per
//! packet (everything, the PMD included: noisy on a shared machine), and,
//! for runs with `--cycles`, the TSC cycles per packet the worker spent
//! after RX (GRO and the stage) minus the base's: the PMD's own cost and
//! whatever slows it are left out.

use crate::runner::RunRecord;
use crate::summary::median;
use serde::Serialize;
use std::fmt::Write as _;

/// How a run's cost per packet is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// ns per packet from `rx_pps`.
    WallNs,
    /// `cycles.process + cycles.stage` (runs with `--cycles`).
    WorkerCycles,
}

impl Measure {
    pub fn unit(self) -> &'static str {
        match self {
            Measure::WallNs => "ns",
            Measure::WorkerCycles => "cycles",
        }
    }

    /// Report fields the measure needs recorded per run.
    pub const CYCLES: [&'static str; 2] = ["cycles.process", "cycles.stage"];

    fn of(self, r: &RunRecord) -> Option<f64> {
        let m = |name: &str| {
            r.metrics
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| *v)
        };
        match self {
            Measure::WallNs => m("rx_pps").filter(|v| *v > 0.0).map(|v| 1e9 / v),
            Measure::WorkerCycles => Some(m(Self::CYCLES[0])? + m(Self::CYCLES[1])?),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Added {
    pub cell: String,
    pub measure: Measure,
    /// Repetitions in which both this cell and the base ran.
    pub n: usize,
    pub median_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// Median over repetitions of added(cell) / added(reference).
    pub to_reference: Option<f64>,
}

/// The cost per packet of `cell` in repetition `rep`, if that run succeeded.
fn cost(runs: &[RunRecord], cell: &str, rep: u32, how: Measure) -> Option<f64> {
    runs.iter()
        .find(|r| r.ok && r.cell == cell && r.repetition == rep)
        .and_then(|r| how.of(r))
}

/// Added cost over `base` of every other cell in `cells`.
pub fn added(
    runs: &[RunRecord],
    cells: &[String],
    base: &str,
    reference: Option<&str>,
    how: Measure,
) -> Vec<Added> {
    let reps: Vec<u32> = {
        let mut v: Vec<u32> = runs.iter().map(|r| r.repetition).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let ns = |cell: &str, rep: u32| -> Option<f64> {
        Some(cost(runs, cell, rep, how)? - cost(runs, base, rep, how)?)
    };
    cells
        .iter()
        .filter(|c| c.as_str() != base)
        .filter_map(|c| {
            let mut v: Vec<f64> = reps.iter().filter_map(|&r| ns(c, r)).collect();
            if v.is_empty() {
                return None;
            }
            let mut ratios: Vec<f64> = match reference {
                Some(rf) if rf != c => reps
                    .iter()
                    .filter_map(|&r| Some(ns(c, r)? / ns(rf, r).filter(|x| *x > 0.0)?))
                    .collect(),
                _ => Vec::new(),
            };
            Some(Added {
                cell: c.clone(),
                measure: how,
                n: v.len(),
                min_ns: v.iter().copied().fold(f64::INFINITY, f64::min),
                max_ns: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                median_ns: median(&mut v)?,
                to_reference: median(&mut ratios),
            })
        })
        .collect()
}

/// The table under the main one.
pub fn table(a: &[Added], base: &str, reference: Option<&str>, how: Measure) -> String {
    let mut s = String::new();
    let what = match how {
        Measure::WallNs => format!("1/rate - 1/rate({base}), wall clock"),
        Measure::WorkerCycles => format!("worker TSC cycles after RX minus {base}'s, --cycles"),
    };
    let _ = writeln!(
        s,
        "\nadded cost per packet over {base} ({what}; per repetition){}",
        reference
            .map(|r| format!("; / {r}: median of per-repetition ratios"))
            .unwrap_or_default()
    );
    let w = a.iter().map(|x| x.cell.len()).max().unwrap_or(4).max(4);
    let u = how.unit();
    let _ = writeln!(
        s,
        "{:w$}  reps  {:>9} {:>9} {:>9}  {}",
        "cell",
        format!("median {u}"),
        "min",
        "max",
        reference.map(|r| format!("/ {r}")).unwrap_or_default()
    );
    for x in a {
        let _ = writeln!(
            s,
            "{:w$}  {:>4}  {:>9.1} {:>9.1} {:>9.1}  {}",
            x.cell,
            x.n,
            x.median_ns,
            x.min_ns,
            x.max_ns,
            x.to_reference
                .map(|r| format!("x{r:.2}"))
                .unwrap_or_else(|| "-".into())
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cell: &str, rep: u32, pps: f64) -> RunRecord {
        RunRecord::measured(cell, rep, pps)
    }

    #[test]
    fn added_cost_per_repetition() {
        // base 10 ns/pkt; a adds 10 ns; b adds 40 then 30 ns; the machine
        // halves its speed in repetition 2 for everyone (drift).
        let runs = vec![
            run("base", 1, 1e8),
            run("a", 1, 5e7),
            run("b", 1, 2e7),
            run("base", 2, 5e7),
            run("a", 2, 2.5e7),
            run("b", 2, 1e9 / 50.0),
        ];
        let cells = ["base", "a", "b"].map(String::from).to_vec();
        let v = added(&runs, &cells, "base", Some("a"), Measure::WallNs);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].cell, "a");
        assert!((v[0].min_ns - 10.0).abs() < 1e-9 && (v[0].max_ns - 20.0).abs() < 1e-9);
        assert_eq!(v[0].to_reference, None, "the reference against itself");
        assert_eq!(v[1].cell, "b");
        assert!((v[1].median_ns - 35.0).abs() < 1e-9);
        // Per repetition: 40/10 = 4 and 30/20 = 1.5.
        assert!((v[1].to_reference.unwrap() - 2.75).abs() < 1e-9);
        assert!(table(&v, "base", Some("a"), Measure::WallNs).contains("x2.75"));
    }

    #[test]
    fn worker_cycles_are_differences() {
        let mut a = run("a", 1, 1e6);
        a.metrics.extend([
            ("cycles.process".into(), Some(50.0)),
            ("cycles.stage".into(), Some(10.0)),
        ]);
        let mut b = run("base", 1, 2e6);
        b.metrics.extend([
            ("cycles.process".into(), Some(15.0)),
            ("cycles.stage".into(), Some(5.0)),
        ]);
        let v = added(
            &[a, b],
            &["base".into(), "a".into()],
            "base",
            None,
            Measure::WorkerCycles,
        );
        assert_eq!(v[0].median_ns, 40.0);
    }

    #[test]
    fn failed_or_missing_runs_are_left_out() {
        let mut bad = run("a", 2, 1.0);
        bad.ok = false;
        let runs = vec![run("base", 1, 1e8), run("a", 1, 5e7), bad];
        let cells = ["base", "a", "c"].map(String::from).to_vec();
        let v = added(&runs, &cells, "base", None, Measure::WallNs);
        assert_eq!(v.len(), 1, "c never ran");
        assert_eq!(v[0].n, 1);
    }
}

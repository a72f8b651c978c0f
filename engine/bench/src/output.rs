//! The results: a table on stdout, `DIR/<name>.csv` (one row per run) and
//! `DIR/<name>.json` (config, runs, summary).

use crate::metrics;
use crate::runner::RunRecord;
use crate::summary::CellSummary;
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// The table: per cell and metric, median [min-max] and the ratio of the
/// median to the baseline's; then pending cells and failed runs.
pub fn table(
    header: &[String],
    metrics_shown: &[String],
    cells: &[CellSummary],
    runs: &[RunRecord],
) -> String {
    let mut s = String::new();
    for h in header {
        let _ = writeln!(s, "{h}");
    }
    s.push('\n');
    // Columns: cell, runs, then per metric: median, min, max, ratio.
    let mut rows: Vec<Vec<String>> = Vec::new();
    for c in cells {
        let mut r = vec![
            c.cell.clone(),
            if c.pending.is_some() {
                "pending".into()
            } else {
                format!("{}/{}", c.ok_runs, c.runs)
            },
        ];
        for m in metrics_shown {
            let st = c.stats.iter().find(|t| &t.metric == m);
            let f = |v: Option<f64>| v.map(|v| metrics::fmt(m, v)).unwrap_or_else(|| "-".into());
            match st {
                Some(t) if t.median.is_some() => {
                    r.push(f(t.median));
                    r.push(f(t.min));
                    r.push(f(t.max));
                    r.push(
                        t.ratio
                            .map(|x| format!("x{x:.3}"))
                            .unwrap_or_else(|| "-".into()),
                    );
                }
                _ => r.extend(["-", "", "", ""].map(String::from)),
            }
        }
        rows.push(r);
    }
    let mut head1 = vec![String::new(), String::new()];
    let mut head2 = vec!["cell".to_string(), "runs".into()];
    for m in metrics_shown {
        head1.extend([
            metrics::display(m).label,
            String::new(),
            String::new(),
            String::new(),
        ]);
        head2.extend(["median", "min", "max", "/base"].map(String::from));
    }
    let ncol = head2.len();
    let mut w: Vec<usize> = (0..ncol)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([head2[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // A metric's label spans its four columns: widen the last if needed.
    for k in 0..metrics_shown.len() {
        let i = 2 + 4 * k;
        let span: usize = w[i..i + 4].iter().sum::<usize>() + 3 * 2;
        let need = head1[i].len();
        if need > span {
            let extra = need - span;
            for j in 0..4 {
                w[i + j] += extra / 4 + usize::from(j < extra % 4);
            }
        }
    }
    let line = |cols: &[String], s: &mut String, group_head: bool| {
        let mut out = String::new();
        let mut i = 0;
        while i < ncol {
            let sep = if i == 2 || (i > 2 && (i - 2) % 4 == 0) {
                " | "
            } else {
                "  "
            };
            if i > 0 {
                out.push_str(sep);
            }
            if group_head && i >= 2 {
                let span: usize = w[i..i + 4].iter().sum::<usize>() + 3 * 2;
                let _ = write!(out, "{:<span$}", cols[i]);
                i += 4;
                continue;
            }
            if i < 2 {
                let _ = write!(out, "{:<width$}", cols[i], width = w[i]);
            } else {
                let _ = write!(out, "{:>width$}", cols[i], width = w[i]);
            }
            i += 1;
        }
        let _ = writeln!(s, "{}", out.trim_end());
    };
    line(&head1, &mut s, true);
    line(&head2, &mut s, false);
    for r in &rows {
        line(r, &mut s, false);
    }
    // Source costs and other recorded metrics, as medians over all cells.
    let extra: Vec<String> = cells
        .iter()
        .flat_map(|c| c.stats.iter())
        .filter(|t| !metrics_shown.contains(&t.metric))
        .map(|t| t.metric.clone())
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    for m in extra {
        let per: Vec<String> = cells
            .iter()
            .filter_map(|c| {
                let t = c.stats.iter().find(|t| t.metric == m)?;
                Some(format!("{} {}", c.cell, metrics::fmt(&m, t.median?)))
            })
            .collect();
        if !per.is_empty() {
            let _ = writeln!(s, "{m} (median): {}", per.join(", "));
        }
    }
    for c in cells {
        if let Some(p) = &c.pending {
            let _ = writeln!(s, "pending: {}: {p}", c.cell);
        }
        if let Some(n) = &c.note {
            let _ = writeln!(s, "note: {}: {n}", c.cell);
        }
    }
    for r in runs.iter().filter(|r| !r.ok) {
        let _ = writeln!(
            s,
            "FAILED: {} rep {}: {}",
            r.cell,
            r.repetition,
            r.error.as_deref().unwrap_or("?")
        );
    }
    s
}

fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// One row per run: cell, swept value, repetition, position in its
/// repetition, ok, error, mbufs_leaked, wall seconds, then every metric
/// (raw units: packets/s, not Mpps).
pub fn write_csv(path: &Path, cells: &[CellSummary], runs: &[RunRecord]) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for (m, _) in &r.metrics {
            if !names.contains(m) {
                names.push(m.clone());
            }
        }
    }
    let mut s = String::new();
    let mut head: Vec<String> = [
        "cell",
        "sweep_value",
        "repetition",
        "position",
        "ok",
        "error",
        "mbufs_leaked",
        "wall_s",
    ]
    .map(String::from)
    .to_vec();
    head.extend(names.iter().cloned());
    let _ = writeln!(
        s,
        "{}",
        head.iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for r in runs {
        let sv = cells
            .iter()
            .find(|c| c.cell == r.cell)
            .and_then(|c| c.sweep_value.clone())
            .unwrap_or_default();
        let mut row = vec![
            r.cell.clone(),
            sv,
            r.repetition.to_string(),
            r.position.to_string(),
            r.ok.to_string(),
            r.error.clone().unwrap_or_default(),
            r.mbufs_leaked.map(|v| v.to_string()).unwrap_or_default(),
            format!("{:.3}", r.wall_s),
        ];
        for m in &names {
            let v = r.metrics.iter().find(|(n, _)| n == m).and_then(|(_, v)| *v);
            row.push(v.map(|v| format!("{v}")).unwrap_or_default());
        }
        let _ = writeln!(
            s,
            "{}",
            row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    std::fs::write(path, s)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}

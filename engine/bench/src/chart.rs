//! The PNG chart: one panel per metric. A sweep: the metric against the
//! swept value (median, min-max error bars, other cells as reference
//! lines); otherwise bars per cell. The ratio to the baseline is written at
//! every point. Text uses DejaVu Sans embedded in the binary (no system
//! fonts needed).

use crate::metrics;
use crate::summary::{CellSummary, Stat};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

const FONT: &str = "sans-serif";
const W: u32 = 1100;
const PANEL_H: u32 = 380;
const SUB_CHARS: usize = 150;
const TITLE_CHARS: usize = 76;

const MAIN: RGBColor = RGBColor(31, 119, 180);
const REFS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];
const GREY: RGBColor = RGBColor(110, 110, 110);

fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("chart: {e}")
}

/// What the chart needs to know about the experiment.
pub struct ChartInput<'a> {
    pub title: &'a str,
    /// Lines under the title (source, runs).
    pub subtitle: Vec<String>,
    pub metrics: &'a [String],
    pub cells: &'a [CellSummary],
    /// The sweep's axis label, when the cells come from a sweep.
    pub sweep_label: Option<String>,
    pub baseline: Option<&'a str>,
}

fn stat<'a>(c: &'a CellSummary, m: &str) -> Option<&'a Stat> {
    c.stats.iter().find(|s| s.metric == m && s.median.is_some())
}

fn ratio_text(s: &Stat) -> String {
    s.ratio.map(|r| format!("x{r:.2}")).unwrap_or_default()
}

pub fn draw(path: &Path, input: &ChartInput) -> Result<()> {
    fonts();
    let panels = input.metrics.len().max(1) as u32;
    let sub: Vec<String> = input
        .subtitle
        .iter()
        .flat_map(|l| wrap(l, SUB_CHARS))
        .collect();
    let title = wrap(input.title, TITLE_CHARS);
    let header_h = 20 + 30 * title.len() as u32 + 20 * sub.len() as u32;
    let root = BitMapBackend::new(path, (W, header_h + PANEL_H * panels)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (header, body) = root.split_vertically(header_h);
    for (i, line) in title.iter().enumerate() {
        header
            .draw(&Text::new(
                line.clone(),
                (20, 10 + 30 * i as i32),
                (FONT, 24, FontStyle::Bold).into_font(),
            ))
            .map_err(err)?;
    }
    let sub_y = 14 + 30 * title.len() as i32;
    for (i, line) in sub.iter().enumerate() {
        header
            .draw(&Text::new(
                line.clone(),
                (20, sub_y + 20 * i as i32),
                (FONT, 14).into_font().color(&GREY),
            ))
            .map_err(err)?;
    }
    let ran = input
        .cells
        .iter()
        .any(|c| input.metrics.iter().any(|m| stat(c, m).is_some()));
    if !ran {
        let why: Vec<String> = input
            .cells
            .iter()
            .map(|c| match &c.pending {
                Some(p) => format!("{}: pending: {p}", c.cell),
                None => format!("{}: no successful run", c.cell),
            })
            .collect();
        for (i, l) in why.iter().enumerate() {
            body.draw(&Text::new(
                l.clone(),
                (30, 30 + 24 * i as i32),
                (FONT, 16).into_font(),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
        return Ok(());
    }
    let areas = body.split_evenly((panels as usize, 1));
    let numeric_sweep = input.sweep_label.is_some()
        && input
            .cells
            .iter()
            .filter_map(|c| c.sweep_value.as_ref())
            .all(|v| v.parse::<f64>().is_ok());
    for (area, m) in areas.iter().zip(input.metrics) {
        if numeric_sweep {
            sweep_panel(area, m, input)?;
        } else {
            bar_panel(area, m, input)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Splits a line at spaces into pieces of at most `max` characters.
fn wrap(line: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in line.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > max {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn y_top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0f64, f64::max);
    if m > 0.0 {
        m * 1.18
    } else {
        1.0
    }
}

fn sweep_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    m: &str,
    input: &ChartInput,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let d = metrics::display(m);
    let sc = d.scale;
    let pts: Vec<(f64, &Stat)> = input
        .cells
        .iter()
        .filter_map(|c| Some((c.sweep_value.as_ref()?.parse::<f64>().ok()?, stat(c, m)?)))
        .collect();
    let refs: Vec<(&str, &Stat)> = input
        .cells
        .iter()
        .filter(|c| c.sweep_value.is_none())
        .filter_map(|c| Some((c.cell.as_str(), stat(c, m)?)))
        .collect();
    let xs = pts.iter().map(|p| p.0);
    let (lo, hi) = xs
        .clone()
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
    let pad = ((hi - lo) * 0.06).max(0.5);
    let top = y_top(
        pts.iter()
            .map(|p| p.1.max.unwrap_or(0.0) * sc)
            .chain(refs.iter().map(|r| r.1.median.unwrap_or(0.0) * sc)),
    );
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_right(30)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..top)
        .map_err(err)?;
    let xl = input.sweep_label.clone().unwrap_or_default();
    chart
        .configure_mesh()
        .x_desc(xl)
        .y_desc(d.label.clone())
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&|v| {
            if (v - v.round()).abs() < 1e-9 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        })
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()
        .map_err(err)?;
    for (i, (name, s)) in refs.iter().enumerate() {
        let y = s.median.unwrap_or(0.0) * sc;
        let col = REFS[i % REFS.len()];
        chart
            .draw_series(DashedLineSeries::new(
                vec![(lo - pad, y), (hi + pad, y)],
                8,
                5,
                col.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!(
                "{name} {} {}",
                metrics::fmt(m, s.median.unwrap_or(0.0)),
                d.unit
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
    }
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|(x, s)| (*x, s.median.unwrap_or(0.0) * sc)),
            MAIN.stroke_width(2),
        ))
        .map_err(err)?
        .label("median (bars: min-max)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], MAIN.stroke_width(2)));
    chart
        .draw_series(pts.iter().map(|(x, s)| {
            ErrorBar::new_vertical(
                *x,
                s.min.unwrap_or(0.0) * sc,
                s.median.unwrap_or(0.0) * sc,
                s.max.unwrap_or(0.0) * sc,
                MAIN.stroke_width(1),
                10,
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .map(|(x, s)| Circle::new((*x, s.median.unwrap_or(0.0) * sc), 4, MAIN.filled())),
        )
        .map_err(err)?;
    // Value and ratio at each point, alternately above and below.
    for (i, (x, s)) in pts.iter().enumerate() {
        let y = s.median.unwrap_or(0.0) * sc;
        let above = i % 2 == 0;
        let style = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(
            HPos::Center,
            if above { VPos::Bottom } else { VPos::Top },
        ));
        let txt = format!(
            "{} {}",
            metrics::fmt(m, s.median.unwrap_or(0.0)),
            ratio_text(s)
        );
        let dy = if above { -8 } else { 8 };
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((*x, y)) + Text::new(txt.trim().to_string(), (0, dy), style),
            ))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .label_font((FONT, 13))
        .draw()
        .map_err(err)?;
    Ok(())
}

fn bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    m: &str,
    input: &ChartInput,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let d = metrics::display(m);
    let sc = d.scale;
    let cells = input.cells;
    let n = cells.len() as i32;
    let top = y_top(
        cells
            .iter()
            .filter_map(|c| stat(c, m))
            .map(|s| s.max.unwrap_or(0.0) * sc),
    );
    let names: Vec<String> = cells.iter().map(|c| c.cell.clone()).collect();
    let fmt_x = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            names.get(*i as usize).cloned().unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_right(30)
        .x_label_area_size(40)
        .y_label_area_size(80)
        // (0..k).into_segmented() has k + 1 slots; one cell still needs a range.
        .build_cartesian_2d((0..(n - 1).max(1)).into_segmented(), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(cells.len() + 1)
        .x_label_formatter(&fmt_x)
        .y_desc(d.label.clone())
        .y_labels(8)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()
        .map_err(err)?;
    let bar_margin = ((W as f64 - 140.0) / n.max(1) as f64 * 0.22) as u32;
    for (i, c) in cells.iter().enumerate() {
        let i = i as i32;
        let is_base = input.baseline == Some(c.cell.as_str());
        let Some(s) = stat(c, m) else {
            let why = match &c.pending {
                Some(_) => "pending",
                None if c.runs > 0 && c.ok_runs == 0 => "failed",
                None => "n/a",
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    why.to_string(),
                    (SegmentValue::CenterOf(i), top * 0.05),
                    TextStyle::from((FONT, 14).into_font())
                        .color(&GREY)
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )))
                .map_err(err)?;
            continue;
        };
        let med = s.median.unwrap_or(0.0) * sc;
        let fill = if is_base { GREY } else { MAIN };
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), med),
            ],
            fill.mix(0.8).filled(),
        );
        bar.set_margin(0, 0, bar_margin, bar_margin);
        chart.draw_series(std::iter::once(bar)).map_err(err)?;
        chart
            .draw_series(std::iter::once(ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                s.min.unwrap_or(0.0) * sc,
                med,
                s.max.unwrap_or(0.0) * sc,
                BLACK.stroke_width(1),
                12,
            )))
            .map_err(err)?;
        let label = format!(
            "{} {}",
            metrics::fmt(m, s.median.unwrap_or(0.0)),
            if is_base {
                "(baseline)".into()
            } else {
                ratio_text(s)
            }
        );
        let y = s.max.unwrap_or(0.0).max(s.median.unwrap_or(0.0)) * sc;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((SegmentValue::CenterOf(i), y))
                    + Text::new(
                        label.trim().to_string(),
                        (0, -5),
                        TextStyle::from((FONT, 13).into_font())
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    ),
            ))
            .map_err(err)?;
    }
    Ok(())
}

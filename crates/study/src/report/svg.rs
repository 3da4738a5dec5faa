//! The study chart: per arm, write adoption, read adoption and success rate as points with
//! their 95% Wilson intervals as whiskers, drawn with plotters as `filesystem report`'s chart is.
//!
//! A rate without a total (an arm that made no writes) has no point: nothing is drawn rather
//! than a made-up zero.

use std::path::Path;

use plotters::prelude::*;

use super::stats::Rate;
use super::{StudyReport, StudyReportError};

/// The three series: legend label, colour, and which rate of an arm each shows.
type Pick = fn(&super::metrics::ArmNumbers) -> &Rate;
const SERIES: [(&str, RGBColor, Pick); 3] = [
    (
        "write adoption (this project's share of file writes)",
        RGBColor(0x1f, 0x77, 0xb4),
        |a| &a.write_adoption,
    ),
    (
        "read adoption (this project's share of file reads)",
        RGBColor(0xff, 0x7f, 0x0e),
        |a| &a.read_adoption,
    ),
    ("task success rate", RGBColor(0x2c, 0xa0, 0x2c), |a| {
        &a.success
    }),
];

/// The top of the y axis: above 100% is room for the legend, so it never hides a point.
const LEGEND_TOP: f64 = 130.0;

/// How far apart the three series are drawn within an arm's slot (slots are 1 wide).
const OFFSET: f64 = 0.22;

/// Draws the chart of `report` into the SVG file at `path`.
pub fn draw(report: &StudyReport, path: &Path) -> Result<(), StudyReportError> {
    let fail = |detail: String| StudyReportError::Chart {
        path: path.to_path_buf(),
        detail,
    };
    // A study with harnesses is drawn per arm and harness (`arm@harness`), else per arm.
    let rows = if report.cells.is_empty() {
        &report.arms
    } else {
        &report.cells
    };
    let arms: Vec<String> = rows
        .iter()
        .map(|a| match &a.harness {
            Some(h) => format!("{}@{h}", a.arm),
            None => a.arm.clone(),
        })
        .collect();
    let width = (160 + 120 * arms.len() as u32).clamp(640, 4000);
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let slots = arms.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            if report.cells.is_empty() {
                "Adoption and success per arm (95% Wilson intervals)"
            } else {
                "Adoption and success per arm and harness (95% Wilson intervals)"
            },
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5..(slots - 0.5), 0.0..LEGEND_TOP)
        .map_err(|e| fail(e.to_string()))?;
    let names = arms.clone();
    let label = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names
                .get(i as usize)
                .map_or(String::new(), |s| s.to_string())
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc("arm")
        .y_desc("% (of writes, reads or trials)")
        .x_labels(arms.len().max(1))
        .x_label_formatter(&label)
        .y_labels(14)
        .y_label_formatter(&|y| {
            if *y <= 100.0 {
                format!("{y:.0}%")
            } else {
                String::new()
            }
        })
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| fail(e.to_string()))?;

    for (k, (legend, color, pick)) in SERIES.iter().enumerate() {
        let dx = (k as f64 - 1.0) * OFFSET;
        let style = color.stroke_width(2);
        let points: Vec<(f64, f64, f64, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let r = pick(a);
                Some((
                    i as f64 + dx,
                    r.value? * 100.0,
                    r.low? * 100.0,
                    r.high? * 100.0,
                ))
            })
            .collect();
        // The whiskers: a vertical line from low to high with short caps.
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, _, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], style)),
            )
            .map_err(|e| fail(e.to_string()))?;
        let cap = OFFSET / 4.0;
        chart
            .draw_series(points.iter().flat_map(|&(x, _, lo, hi)| {
                [
                    PathElement::new(vec![(x - cap, lo), (x + cap, lo)], style),
                    PathElement::new(vec![(x - cap, hi), (x + cap, hi)], style),
                ]
            }))
            .map_err(|e| fail(e.to_string()))?;
        let color = *color;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, v, _, _)| Circle::new((x, v), 4, color.filled())),
            )
            .map_err(|e| fail(e.to_string()))?
            .label(*legend)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))?;
    Ok(())
}

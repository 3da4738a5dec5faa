//! The adoption-by-position chart: one line per interface and input kind, showing the share of
//! file writes each interface made in each decile of session position.
//!
//! A decile without writes has no share; the line is broken there rather than drawn through a
//! made-up zero.

use std::path::Path;

use plotters::prelude::*;

use super::classify::Interface;
use super::stats::{interface_share, Report, Section, BUCKETS};
use super::ReportError;

/// The interfaces that can make file writes, and so have an adoption curve.
const CURVES: [(Interface, RGBColor); 3] = [
    (Interface::Builtin, RGBColor(0x88, 0x88, 0x88)),
    (Interface::Pipe, RGBColor(0xd6, 0x27, 0x28)),
    (Interface::Filesystem, RGBColor(0x1f, 0x77, 0xb4)),
];

/// One drawn line: its legend label, colour, dash style and runs of connected points.
struct Curve {
    label: String,
    color: RGBColor,
    dashed: bool,
    runs: Vec<Vec<(f64, f64)>>,
}

/// Draws the chart of `report` into the SVG file at `path`.
pub fn draw_adoption(report: &Report, path: &Path) -> Result<(), ReportError> {
    let fail = |detail: String| ReportError::Chart {
        path: path.to_path_buf(),
        detail,
    };
    let mut curves = Vec::new();
    if let Some(s) = &report.transcripts {
        curves.extend(curves_of("transcripts", s, false));
    }
    if let Some(s) = &report.call_logs {
        curves.extend(curves_of("call logs", s, true));
    }

    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Share of file writes by interface, by position in the session",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..(BUCKETS as f64 - 1.0), 0.0..100.0)
        .map_err(|e| fail(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("decile of the session's tool calls (0 = first tenth)")
        .y_desc("% of file writes")
        .x_labels(BUCKETS)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}%"))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| fail(e.to_string()))?;

    for curve in &curves {
        let style = curve.color.stroke_width(2);
        let mut first = true;
        for run in &curve.runs {
            let points = run.iter().copied();
            let anno = if curve.dashed {
                chart.draw_series(DashedLineSeries::new(points, 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(points, style).point_size(3))
            }
            .map_err(|e| fail(e.to_string()))?;
            // One legend entry per curve, however many runs it was drawn in.
            if first {
                let (color, dashed) = (curve.color, curve.dashed);
                anno.label(curve.label.clone()).legend(move |(x, y)| {
                    // The key shows the dash pattern too, so the two sources stay apart: two
                    // segments that touch for a solid curve and leave a gap for a dashed one.
                    let (first_end, second_start) = if dashed { (7, 13) } else { (10, 10) };
                    let style = color.stroke_width(2);
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (first_end, 0)], style)
                        + PathElement::new(vec![(second_start, 0), (20, 0)], style)
                });
                first = false;
            }
        }
    }
    if !curves.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| fail(e.to_string()))?;
    }
    root.present().map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// The curves of one section: one per interface that made any writes.
fn curves_of(source: &str, section: &Section, dashed: bool) -> Vec<Curve> {
    CURVES
        .iter()
        .filter(|(iface, _)| {
            section
                .total
                .adoption
                .writes_by_interface
                .contains_key(iface.as_str())
        })
        .map(|&(iface, color)| {
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for bucket in &section.by_position {
                match interface_share(bucket, iface) {
                    Some(share) => {
                        if let Some(run) = runs.last_mut() {
                            run.push((bucket.decile as f64, share * 100.0));
                        }
                    }
                    None => runs.push(Vec::new()),
                }
            }
            runs.retain(|r| !r.is_empty());
            Curve {
                label: format!("{source}: {}", iface.as_str()),
                color,
                dashed,
                runs,
            }
        })
        .filter(|c| !c.runs.is_empty())
        .collect()
}

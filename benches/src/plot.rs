//! Line charts as SVG text, written by hand: axes with round ticks, one polyline (with a
//! marker at each point) a series, and a legend; one chart, or several side by side
//! sharing a legend ([`Figure`]). No dependencies.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// The name in the legend.
    pub name: String,
    /// Stroke colour, as SVG takes it (`#1f77b4`).
    pub color: &'static str,
    /// Drawn dashed rather than solid.
    pub dashed: bool,
    /// (x, y) points, drawn in this order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
pub struct Chart {
    /// The line above the plot.
    pub title: String,
    /// The x axis label.
    pub x_label: String,
    /// The y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// Size of the picture and of the margins around the plot area, in SVG units.
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// Round tick positions that cover `low..=high` with about `count` steps of 1, 2 or 5
/// times a power of ten; the first tick is at or below `low`, the last at or above `high`,
/// give or take a thousandth of a step (so 0.19999 starts at 0.2).
pub fn nice_ticks(low: f64, high: f64, count: usize) -> Vec<f64> {
    let (low, high) = if high > low {
        (low, high)
    } else {
        // One value: a unit range around it.
        (low - 0.5, low + 0.5)
    };
    let raw = (high - low) / count.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    // The round step nearest the raw one (Heckbert's thresholds).
    let step = magnitude
        * match raw / magnitude {
            r if r < 1.5 => 1.0,
            r if r < 3.0 => 2.0,
            r if r < 7.0 => 5.0,
            _ => 10.0,
        };
    // Integer multiples of the step, with a little slack so 0.3 / 0.1 counts as 3.
    let first = (low / step + 1e-3).floor() as i64;
    let last = (high / step - 1e-3).ceil() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Decimals that tell the ticks apart.
fn decimals(ticks: &[f64]) -> usize {
    match ticks {
        [a, b, ..] => (-(b - a).abs().log10().floor()).max(0.0) as usize,
        _ => 0,
    }
}

/// `text` with the characters XML reserves escaped.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Chart {
    /// The x ticks (about `x_steps` of them) and y ticks: x covers the points, y runs
    /// from 0 up past the highest.
    fn ticks(&self, x_steps: usize) -> (Vec<f64>, Vec<f64>) {
        let points = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let x_low = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_high = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let y_high = points().map(|p| p.1).fold(0.0, f64::max);
        let (x_low, x_high) = if x_low.is_finite() {
            (x_low, x_high)
        } else {
            (0.0, 1.0)
        };
        let y_high = if y_high > 0.0 { y_high } else { 1.0 };
        (
            nice_ticks(x_low, x_high, x_steps),
            nice_ticks(0.0, y_high, 6),
        )
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let frame = Frame {
            left: LEFT,
            top: TOP,
            width: WIDTH - LEFT - RIGHT,
            height: HEIGHT - TOP - BOTTOM,
            x_steps: 8,
        };
        let mut s = open_svg(WIDTH, HEIGHT);
        self.draw(&mut s, &frame);
        legend(&mut s, &self.series, WIDTH - RIGHT + 15.0, TOP);
        s.push_str("</svg>\n");
        s
    }

    /// Draws the title above `frame`, the grid, ticks and axes, the axis labels and the
    /// lines into `s`.
    fn draw(&self, s: &mut String, frame: &Frame) {
        let (x_ticks, y_ticks) = self.ticks(frame.x_steps);
        let (x0, x1) = (x_ticks[0], x_ticks[x_ticks.len() - 1]);
        let (y0, y1) = (y_ticks[0], y_ticks[y_ticks.len() - 1]);
        let Frame {
            left,
            top,
            width,
            height,
            ..
        } = *frame;
        let px = |x: f64| left + (x - x0) / (x1 - x0) * width;
        let py = |y: f64| top + height - (y - y0) / (y1 - y0) * height;
        let bottom = top + height;
        let right = left + width;
        let middle = top + height / 2.0;

        // Writing into a String cannot fail.
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="15">{}</text>"#,
            left + width / 2.0,
            top - 26.0,
            escape(&self.title)
        );
        // Grid lines and tick labels.
        let x_decimals = decimals(&x_ticks);
        for &x in &x_ticks {
            let at = px(x);
            let _ = writeln!(
                s,
                r##"<line x1="{at:.1}" y1="{top:.1}" x2="{at:.1}" y2="{bottom:.1}" stroke="#e0e0e0"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{at:.1}" y="{:.1}" text-anchor="middle">{x:.x_decimals$}</text>"#,
                bottom + 18.0
            );
        }
        let y_decimals = decimals(&y_ticks);
        for &y in &y_ticks {
            let at = py(y);
            let _ = writeln!(
                s,
                r##"<line x1="{left:.1}" y1="{at:.1}" x2="{right:.1}" y2="{at:.1}" stroke="#e0e0e0"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{y:.y_decimals$}</text>"#,
                left - 8.0,
                at + 4.0
            );
        }
        // Axes and their labels.
        let _ = writeln!(
            s,
            r#"<polyline points="{left:.1},{top:.1} {left:.1},{bottom:.1} {right:.1},{bottom:.1}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + width / 2.0,
            bottom + 45.0,
            escape(&self.x_label)
        );
        let label_x = left - 60.0;
        let _ = writeln!(
            s,
            r#"<text x="{label_x:.1}" y="{middle:.1}" text-anchor="middle" transform="rotate(-90 {label_x:.1} {middle:.1})">{}</text>"#,
            escape(&self.y_label)
        );
        // The lines.
        for series in &self.series {
            let finite: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            let coordinates: Vec<String> = finite
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{}"{} stroke-width="2"/>"#,
                coordinates.join(" "),
                series.color,
                dash(series)
            );
            for &(x, y) in &finite {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                    px(x),
                    py(y),
                    series.color
                );
            }
        }
    }
}

/// Charts side by side under one title, sharing one legend on the right: the union of
/// their series by name, in order of first appearance (a series keeps its colour across
/// charts by having the same name and colour in each).
pub struct Figure {
    /// The line above the charts.
    pub title: String,
    /// The charts, left to right.
    pub charts: Vec<Chart>,
}

/// A chart's share of a [`Figure`]'s width, its plot area inside that, and the plot
/// height, in SVG units.
const PANEL_WIDTH: f64 = 340.0;
const PANEL_PLOT_WIDTH: f64 = 250.0;
const PANEL_PLOT_HEIGHT: f64 = 320.0;
/// Room for the figure's legend.
const LEGEND_WIDTH: f64 = 290.0;
/// Height of one legend entry.
const LEGEND_STEP: f64 = 22.0;

impl Figure {
    /// The figure as a standalone SVG document.
    pub fn svg(&self) -> String {
        let top = TOP + 30.0;
        let mut entries: Vec<&Series> = Vec::new();
        for series in self.charts.iter().flat_map(|c| c.series.iter()) {
            if !entries.iter().any(|e| e.name == series.name) {
                entries.push(series);
            }
        }
        let legend_x = PANEL_WIDTH * self.charts.len() as f64 + 15.0;
        let width = legend_x + LEGEND_WIDTH;
        let height =
            (top + PANEL_PLOT_HEIGHT + BOTTOM).max(top + LEGEND_STEP * entries.len() as f64 + 10.0);
        let mut s = open_svg(width, height);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="24" text-anchor="middle" font-size="16">{}</text>"#,
            width / 2.0,
            escape(&self.title)
        );
        for (i, chart) in self.charts.iter().enumerate() {
            let frame = Frame {
                left: PANEL_WIDTH * i as f64 + LEFT,
                top,
                width: PANEL_PLOT_WIDTH,
                height: PANEL_PLOT_HEIGHT,
                x_steps: 4,
            };
            chart.draw(&mut s, &frame);
        }
        legend(&mut s, entries, legend_x, top);
        s.push_str("</svg>\n");
        s
    }
}

/// Where a chart's plot area lies, in SVG units, and about how many steps its x ticks
/// make.
#[derive(Clone, Copy)]
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x_steps: usize,
}

/// The opening of an SVG document of this size, on a white background.
fn open_svg(width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"white\"/>\n"
    )
}

/// The stroke-dasharray attribute of a dashed series, or nothing.
fn dash(series: &Series) -> &'static str {
    if series.dashed {
        r#" stroke-dasharray="6 3""#
    } else {
        ""
    }
}

/// A legend entry per series, a short line in its stroke and its name, from (`x`, `y`)
/// down.
fn legend<'a>(s: &mut String, series: impl IntoIterator<Item = &'a Series>, x: f64, y: f64) {
    for (i, series) in series.into_iter().enumerate() {
        let at = y + 10.0 + LEGEND_STEP * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="{}"{} stroke-width="2"/>"#,
            x + 25.0,
            series.color,
            dash(series)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 31.0,
            at + 4.0,
            escape(&series.name)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let ticks = nice_ticks(0.2, 0.93, 8);
        assert!(close(ticks[0], 0.2), "{ticks:?}");
        assert!(close(*ticks.last().unwrap(), 1.0), "{ticks:?}");
        assert_eq!(ticks.len(), 9, "{ticks:?}");
        let ticks = nice_ticks(0.0, 13912.0, 6);
        assert!(close(ticks[1] - ticks[0], 2000.0), "{ticks:?}");
        assert!(close(*ticks.last().unwrap(), 14000.0), "{ticks:?}");
        // Measured values a hair off a round number keep it as the end tick.
        let ticks = nice_ticks(0.19998, 0.93, 8);
        assert!(close(ticks[0], 0.2), "{ticks:?}");
        let ticks = nice_ticks(0.19, 0.93, 8);
        assert!(close(ticks[0], 0.1), "{ticks:?}");
        // A range that ends on a tick gets no extra one.
        let ticks = nice_ticks(0.0, 10.0, 5);
        assert_eq!(ticks, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // A single value still gets a range.
        let ticks = nice_ticks(3.0, 3.0, 4);
        assert!(ticks[0] <= 3.0 && *ticks.last().unwrap() >= 3.0 && ticks.len() >= 2);
    }

    #[test]
    fn labels_get_the_decimals_their_step_needs() {
        assert_eq!(decimals(&[0.2, 0.3]), 1);
        assert_eq!(decimals(&[0.0, 0.05]), 2);
        assert_eq!(decimals(&[0.0, 2000.0]), 0);
    }

    #[test]
    fn the_svg_has_a_line_per_series_through_its_points() {
        let chart = Chart {
            title: "rate <&> utilization".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![
                Series {
                    name: "a".into(),
                    color: "#111111",
                    dashed: false,
                    points: vec![(0.2, 0.0), (0.5, 5.0), (1.0, 10.0)],
                },
                Series {
                    name: "b".into(),
                    color: "#222222",
                    dashed: true,
                    points: vec![(0.2, 10.0), (1.0, f64::NAN)],
                },
            ],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("rate &lt;&amp;&gt; utilization"));
        let lines: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains("stroke-width=\"2\"/>") && l.starts_with("<polyline"))
            .collect();
        assert_eq!(lines.len(), 2);
        // x runs 0.2..1.0 over LEFT..WIDTH-RIGHT, y 0..10 over the plot height, upwards.
        let bottom = HEIGHT - BOTTOM;
        let right = WIDTH - RIGHT;
        let expected = format!(
            "points=\"{LEFT:.1},{bottom:.1} {:.1},{:.1} {right:.1},{TOP:.1}\"",
            LEFT + (right - LEFT) * 0.375,
            TOP + (bottom - TOP) / 2.0
        );
        assert!(lines[0].contains(&expected), "{} vs {expected}", lines[0]);
        // The point that is not a number is left out.
        assert!(lines[1].contains(&format!("points=\"{LEFT:.1},{TOP:.1}\"")));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains(">a</text>") && svg.contains(">b</text>"));
    }
}

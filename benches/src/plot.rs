//! Line charts as SVG text, written by hand: axes with round ticks, one polyline (with a
//! marker at each point) a series, and a legend. No dependencies.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// The name in the legend.
    pub name: String,
    /// Stroke colour, as SVG takes it (`#1f77b4`).
    pub color: &'static str,
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
    /// The x ticks and y ticks: x covers the points, y runs from 0 up past the highest.
    fn ticks(&self) -> (Vec<f64>, Vec<f64>) {
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
        (nice_ticks(x_low, x_high, 8), nice_ticks(0.0, y_high, 6))
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let (x_ticks, y_ticks) = self.ticks();
        let (x0, x1) = (x_ticks[0], x_ticks[x_ticks.len() - 1]);
        let (y0, y1) = (y_ticks[0], y_ticks[y_ticks.len() - 1]);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * plot_w;
        let py = |y: f64| TOP + plot_h - (y - y0) / (y1 - y0) * plot_h;
        let bottom = TOP + plot_h;
        let right = LEFT + plot_w;

        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            s,
            r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + plot_w / 2.0,
            escape(&self.title)
        );
        // Grid lines and tick labels.
        let x_decimals = decimals(&x_ticks);
        for &x in &x_ticks {
            let at = px(x);
            let _ = writeln!(
                s,
                r##"<line x1="{at:.1}" y1="{TOP:.1}" x2="{at:.1}" y2="{bottom:.1}" stroke="#e0e0e0"/>"##
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
                r##"<line x1="{LEFT:.1}" y1="{at:.1}" x2="{right:.1}" y2="{at:.1}" stroke="#e0e0e0"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{y:.y_decimals$}</text>"#,
                LEFT - 8.0,
                at + 4.0
            );
        }
        // Axes and their labels.
        let _ = writeln!(
            s,
            r#"<polyline points="{LEFT:.1},{TOP:.1} {LEFT:.1},{bottom:.1} {right:.1},{bottom:.1}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 15.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        // The lines, then the legend.
        for (i, series) in self.series.iter().enumerate() {
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
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                coordinates.join(" "),
                series.color
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
            let legend_y = TOP + 10.0 + 22.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{legend_y:.1}" x2="{:.1}" y2="{legend_y:.1}" stroke="{}" stroke-width="2"/>"#,
                right + 15.0,
                right + 40.0,
                series.color
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                right + 46.0,
                legend_y + 4.0,
                escape(&series.name)
            );
        }
        s.push_str("</svg>\n");
        s
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
                    points: vec![(0.2, 0.0), (0.5, 5.0), (1.0, 10.0)],
                },
                Series {
                    name: "b".into(),
                    color: "#222222",
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

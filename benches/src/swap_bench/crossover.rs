//! Probing children on the host in place against paging them in, on the paged W5 table:
//! lookups of hits in batches of 2^10 to 2^20 keys (device form, [`CROSSOVER_BATCHES`]
//! calls a run) under a cost model forced to probe (an endless zero-copy rate), one forced
//! to page (a zero-copy rate of nearly nothing), the default model, and the model of the
//! rates measured in this run when the `rates` piece ran. The batch size where the
//! probing line falls below the paging line is the measured crossover; the models'
//! crossovers are printed beside it, and all of it is drawn as an SVG chart.

use std::path::Path;

use gpuhash_swap::{CostModel, SwapMap};

use super::Result;
use super::arithmetic::{crossover, model_crossover_log2};
use super::rates::{Measured, PROBE_BYTES};
use super::rows::{Bench, Registered, Row, Verb};
use crate::contract_bench::Bus;
use crate::plot::{Chart, Series};

/// Calls a run: paging small batches moves whole children each call.
pub const CROSSOVER_BATCHES: usize = 8;
/// log2 of the batch sizes compared.
const LOG2_BATCHES: [u32; 6] = [10, 12, 14, 16, 18, 20];

/// The rates of one way to reach children on the host, at each batch size.
pub struct Line {
    /// The legend's name.
    pub name: &'static str,
    /// M keys/s at each batch size.
    pub rates: Vec<f64>,
}

/// What the comparison measured.
pub struct Comparison {
    /// log2 of the batch sizes.
    pub log2_batches: Vec<f64>,
    /// Forced to probe, forced to page, the default model, and the measured one if any.
    pub lines: Vec<Line>,
    /// The measured crossover (log2 keys), if probing fell below paging.
    pub at: Option<f64>,
    /// Mean bytes of an image paged in.
    pub image_bytes: u64,
}

impl Comparison {
    /// The rates of the line named `name`.
    pub fn rates(&self, name: &str) -> Option<&[f64]> {
        self.lines
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.rates.as_slice())
    }
}

/// The line names.
pub const PROBE: &str = "probe in place (forced)";
pub const PAGE: &str = "page (forced)";
const DEFAULT: &str = "cost model, defaults";
const MEASURED: &str = "cost model, rates measured here";

/// Runs the comparison on `table` (which holds the n pairs), printing each row, then the
/// summary; the table's cost model is put back after.
pub fn compare(
    bench: &Bench<'_>,
    table: &SwapMap<u32, u32>,
    arrays: &mut Registered<'_>,
    measured: Option<&Measured>,
) -> Result<Comparison> {
    let sizes: Vec<usize> = LOG2_BATCHES
        .iter()
        .map(|&log2| 1usize << log2)
        .filter(|&batch| batch <= bench.n)
        .collect();
    let kept = table.cost_model();
    let default = CostModel::default();
    let mut models = vec![
        (
            PROBE,
            CostModel {
                zero_copy_bytes_per_s: f64::INFINITY,
                ..default
            },
        ),
        (
            PAGE,
            CostModel {
                zero_copy_bytes_per_s: f64::MIN_POSITIVE,
                ..default
            },
        ),
        (DEFAULT, default),
    ];
    if let Some(measured) = measured {
        models.push((MEASURED, measured.cost_model(bench.bus)));
    }
    println!("{}", Row::HEADER);
    let mut lines = Vec::new();
    let mut paged = (0, 0);
    for (name, model) in models {
        table.set_cost_model(model);
        let mut rates = Vec::new();
        for &batch in &sizes {
            let label = format!("paged, {name}");
            let row =
                bench.device_lookups(&label, table, arrays, Verb::Hits, batch, CROSSOVER_BATCHES);
            let row = row.inspect_err(|_| table.set_cost_model(kept))?;
            println!("{}", row.line(bench.bus));
            if name == PAGE {
                paged.0 += row.paging.bytes_paged_in;
                paged.1 += row.paging.page_ins;
            }
            rates.push(row.keys_per_s() / 1e6);
        }
        lines.push(Line { name, rates });
    }
    table.set_cost_model(kept);
    let log2_batches: Vec<f64> = sizes.iter().map(|&b| (b as f64).log2()).collect();
    let mut comparison = Comparison {
        log2_batches,
        lines,
        at: None,
        image_bytes: paged.0 / paged.1.max(1),
    };
    if let (Some(probe), Some(page)) = (comparison.rates(PROBE), comparison.rates(PAGE)) {
        comparison.at = crossover(&comparison.log2_batches, probe, page);
    }
    Ok(comparison)
}

/// Prints the comparison as one table (M keys/s) and the crossovers, measured and as the
/// models put them for `children` children.
pub fn print(comparison: &Comparison, measured: Option<&Measured>, bus: Bus, children: usize) {
    let names: Vec<&str> = comparison.lines.iter().map(|l| l.name).collect();
    println!("| batch | {} | probe / page |", names.join(" | "));
    println!("|{}", " --- |".repeat(names.len() + 2));
    for (i, log2) in comparison.log2_batches.iter().enumerate() {
        let rates: Vec<String> = comparison
            .lines
            .iter()
            .map(|l| format!("{:.1}", l.rates[i]))
            .collect();
        let ratio = match (comparison.rates(PROBE), comparison.rates(PAGE)) {
            (Some(probe), Some(page)) => format!("{:.1}x", probe[i] / page[i]),
            _ => "-".into(),
        };
        println!("| 2^{log2:.0} | {} | {ratio} |", rates.join(" | "));
    }
    let log2 =
        |at: Option<f64>, never: &str| at.map_or(never.to_string(), |x| format!("2^{x:.1} keys"));
    println!();
    println!(
        "crossover, measured: {} (mean image paged in: {:.1} MB)",
        log2(comparison.at, "probing stays ahead up to the largest batch"),
        comparison.image_bytes as f64 / 1e6
    );
    let model_at = |model: &CostModel| {
        log2(
            model_crossover_log2(model, PROBE_BYTES, comparison.image_bytes, children),
            "never (the model always probes)",
        )
    };
    println!(
        "crossover, default cost model: {}",
        model_at(&CostModel::default())
    );
    if let Some(measured) = measured {
        println!(
            "crossover, cost model of the rates measured here: {}",
            model_at(&measured.cost_model(bus))
        );
    }
}

/// The comparison as a chart: a line a model over log2 batch sizes, and a vertical dashed
/// line at the measured crossover.
pub fn chart(comparison: &Comparison, title: String) -> Chart {
    const COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    let mut series: Vec<Series> = comparison
        .lines
        .iter()
        .zip(COLORS)
        .map(|(line, color)| Series {
            name: line.name.into(),
            color,
            dashed: line.name == DEFAULT || line.name == MEASURED,
            points: comparison
                .log2_batches
                .iter()
                .copied()
                .zip(line.rates.iter().copied())
                .collect(),
        })
        .collect();
    if let Some(at) = comparison.at {
        let top = comparison
            .lines
            .iter()
            .flat_map(|l| l.rates.iter().copied())
            .fold(0.0, f64::max);
        series.push(Series {
            name: format!("crossover, measured: 2^{at:.1}"),
            color: "#7f7f7f",
            dashed: true,
            points: vec![(at, 0.0), (at, top)],
        });
    }
    Chart {
        title,
        x_label: "keys a batch (log2)".into(),
        y_label: "M keys / s".into(),
        series,
    }
}

/// Writes the chart's SVG to `path`.
pub fn write_svg(chart: &Chart, path: &Path) -> Result<()> {
    std::fs::write(path, chart.svg())
        .map_err(|e| super::fail(&format!("cannot write {}: {e}", path.display())))?;
    println!("plot written to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison() -> Comparison {
        Comparison {
            log2_batches: vec![10.0, 12.0, 14.0],
            lines: vec![
                Line {
                    name: PROBE,
                    rates: vec![10.0, 8.0, 6.0],
                },
                Line {
                    name: PAGE,
                    rates: vec![1.0, 4.0, 7.0],
                },
                Line {
                    name: DEFAULT,
                    rates: vec![9.0, 8.0, 7.0],
                },
            ],
            at: Some(13.6),
            image_bytes: 64 << 20,
        }
    }

    #[test]
    fn the_chart_has_a_line_a_model_and_the_crossover() {
        let chart = chart(&comparison(), "W5".into());
        assert_eq!(chart.series.len(), 4);
        assert_eq!(
            chart.series[0].points,
            vec![(10.0, 10.0), (12.0, 8.0), (14.0, 6.0)]
        );
        assert!(!chart.series[1].dashed && chart.series[2].dashed);
        let crossover = &chart.series[3];
        assert_eq!(crossover.points, vec![(13.6, 0.0), (13.6, 10.0)]);
        assert!(crossover.name.contains("2^13.6"));
        let svg = chart.svg();
        assert_eq!(
            svg.matches("<polyline points=").count(),
            5,
            "axes and 4 lines"
        );
    }

    #[test]
    fn no_crossover_no_vertical_line() {
        let mut comparison = comparison();
        comparison.at = None;
        assert_eq!(chart(&comparison, "W5".into()).series.len(), 3);
        assert_eq!(comparison.rates(PAGE), Some(&[1.0, 4.0, 7.0][..]));
        assert_eq!(comparison.rates(MEASURED), None);
    }
}

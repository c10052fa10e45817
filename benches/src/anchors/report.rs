//! `anchors.md` and `anchors.svg` from the rows of a run.

use std::fmt::Write;

use super::{LOAD_TOLERANCE, LOADS, OPERATIONS, Row, Run, Side};
use crate::plot::{Chart, Figure, Series};

/// Line colours of our tables (solid) and of the anchors (dashed), taken in order.
const OUR_COLORS: [&str; 4] = ["#d62728", "#000000", "#9467bd", "#8c564b"];
const ANCHOR_COLORS: [&str; 18] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#393b79",
    "#637939", "#8c6d31", "#843c39", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#9edae5", "#dbdb8d",
];

/// Rows ours first, then by table and load asked.
fn sorted(run: &Run) -> Vec<&Row> {
    let mut rows: Vec<&Row> = run.rows.iter().collect();
    rows.sort_by(|a, b| {
        (a.side != Side::Ours, &a.system)
            .cmp(&(b.side != Side::Ours, &b.system))
            .then(a.asked.total_cmp(&b.asked))
    });
    rows
}

/// The fastest row of `side` asked for `load` whose `op` rate counts; with `as_asked`,
/// only among those that built the load asked.
fn best(run: &Run, side: Side, load: f64, op: usize, as_asked: bool) -> Option<(&Row, f64)> {
    run.rows
        .iter()
        .filter(|r| r.side == side && r.asked_for(load) && (!as_asked || r.built_as_asked()))
        .filter_map(|r| Some((r, r.rate(op)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// n = 2^N as the logs say it, if they do.
fn log2_n(run: &Run) -> Option<u32> {
    run.provenance.iter().find_map(|line| {
        let after = line.split_once("n = 2^")?.1;
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// A rate cell: struck through where its check failed, `*` where BGHT retried builds.
fn rate_cell(row: &Row, op: usize) -> String {
    let Some(rate) = row.rates[op] else {
        return "-".into();
    };
    let mut cell = format!("{rate:.0}");
    if row.rate(op).is_none() {
        cell = format!("~~{cell}~~");
    }
    if op == 0 && row.retries_builds() && row.failures[0].is_some_and(|f| f > 0) {
        cell.push('*');
    }
    cell
}

fn optional(value: Option<impl std::fmt::Display>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The table bytes a pair, 2 decimals, or `-`.
fn bytes_cell(row: &Row) -> String {
    optional(row.bytes_per_pair.map(|b| format!("{b:.2}")))
}

/// The whole report as markdown.
pub fn markdown(run: &Run) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(s, "# Anchors and gpuhash on W1, one run (M ops/s)\n");
    for line in &run.provenance {
        let _ = writeln!(s, "- {line}");
    }
    if !run.problems.is_empty() {
        let _ = writeln!(s, "\nNot read:\n");
        for problem in &run.problems {
            let _ = writeln!(s, "- {problem}");
        }
    }
    let _ = writeln!(
        s,
        "\nRates are medians of the timed runs. Struck through: the check of that operation \
         (or, for an insert, of the hits that followed it) failed; such rates are not \
         compared. `*`: BGHT builds that failed and were retried with new hash functions. \
         Failures count insert/hit/miss (`-`: not checked that way). A load is pairs over \
         slots, or for slab hashes memory utilization (pair bytes over slab bytes in use); \
         \"head\" slab hash rows are sized by head-slab load instead and join no comparison. \
         A ratio counts only where both tables built the load asked within {:.0}%. Table \
         bytes a pair: anchors 8 over the load built (8-byte slots), DyHash and the slab \
         hash as measured.",
        LOAD_TOLERANCE * 100.0
    );
    every_row(&mut s, run);
    best_anchors(&mut s, run);
    ratios(&mut s, run);
    s
}

fn every_row(s: &mut String, run: &Run) {
    let _ = writeln!(s, "\n## Every row\n");
    let _ = writeln!(
        s,
        "| table | load asked | load built | capacity | table bytes/pair | insert | find hit | find miss | failures ins/hit/miss |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in sorted(run) {
        let built = if row.is_load && !row.built_as_asked() {
            format!("{:.4} (off)", row.built)
        } else {
            format!("{:.4}", row.built)
        };
        let failures: Vec<String> = row.failures.iter().map(|f| optional(*f)).collect();
        let _ = writeln!(
            s,
            "| {} | {:.2} | {built} | {} | {} | {} | {} | {} | {} |",
            row.system,
            row.asked,
            row.capacity,
            bytes_cell(row),
            rate_cell(row, 0),
            rate_cell(row, 1),
            rate_cell(row, 2),
            failures.join("/")
        );
    }
}

fn best_anchors(s: &mut String, run: &Run) {
    let _ = writeln!(
        s,
        "\n## Best anchor per load and operation\n\n(off): built more than {:.0}% away from the load asked.\n",
        LOAD_TOLERANCE * 100.0
    );
    let _ = writeln!(s, "| load | insert | find hit | find miss |");
    let _ = writeln!(s, "| --- | --- | --- | --- |");
    for load in LOADS {
        let cells: Vec<String> = (0..OPERATIONS.len())
            .map(|op| match best(run, Side::Anchor, load, op, false) {
                Some((row, rate)) => format!(
                    "{} {rate:.0} (built {:.4}{})",
                    row.system,
                    row.built,
                    if row.built_as_asked() { "" } else { ", off" }
                ),
                None => "-".into(),
            })
            .collect();
        let _ = writeln!(s, "| {load:.2} | {} |", cells.join(" | "));
    }
}

/// A ratio cell of `ours` over the best anchor at its load for `op`.
fn ratio_cell(run: &Run, ours: &Row, op: usize) -> String {
    let Some(rate) = ours.rate(op) else {
        return "-".into();
    };
    let Some((anchor, best_rate)) = best(run, Side::Anchor, ours.asked, op, false) else {
        return "-".into();
    };
    let ratio = rate / best_rate;
    if ours.built_as_asked() && anchor.built_as_asked() {
        return format!("**{ratio:.2}** ({})", anchor.system);
    }
    let off = if ours.built_as_asked() { anchor } else { ours };
    let mut cell = format!(
        "~~{ratio:.2}~~ ({}; does not count: {} built {:.4}",
        anchor.system, off.system, off.built
    );
    let fair = best(run, Side::Anchor, ours.asked, op, true);
    if let Some((fair, fair_rate)) = fair.filter(|_| ours.built_as_asked()) {
        let _ = write!(
            cell,
            "; over {}, best that built it: **{:.2}**",
            fair.system,
            rate / fair_rate
        );
    }
    cell.push(')');
    cell
}

fn ratios(s: &mut String, run: &Run) {
    let _ = writeln!(
        s,
        "\n## Ours over the best anchor at the same load\n\nRatio of rates (above 1: ours is faster), the best anchor in parentheses.\n"
    );
    let _ = writeln!(
        s,
        "| our table | load asked | load built | insert | find hit | find miss |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    let ours = sorted(run)
        .into_iter()
        .filter(|r| r.side == Side::Ours && LOADS.iter().any(|&l| r.asked_for(l)));
    for row in ours {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {:.4} | {} | {} | {} |",
            row.system,
            row.asked,
            row.built,
            ratio_cell(run, row, 0),
            ratio_cell(run, row, 1),
            ratio_cell(run, row, 2)
        );
    }
}

/// Three charts (insert, find hit, find miss) of rate against load built, a line per
/// table asked for W1's loads: ours solid, anchors dashed; rates whose check failed are
/// left out.
pub fn figure(run: &Run) -> Figure {
    let on_w1 = |r: &&Row| LOADS.iter().any(|&l| r.asked_for(l));
    let mut names: Vec<(&str, Side)> = Vec::new();
    for row in sorted(run).into_iter().filter(on_w1) {
        if !names.iter().any(|(n, _)| *n == row.system) {
            names.push((&row.system, row.side));
        }
    }
    let (mut ours, mut anchors) = (0, 0);
    let colors: Vec<(&str, Side, &'static str)> = names
        .into_iter()
        .map(|(name, side)| {
            let color = match side {
                Side::Ours => {
                    ours += 1;
                    OUR_COLORS[(ours - 1) % OUR_COLORS.len()]
                }
                Side::Anchor => {
                    anchors += 1;
                    ANCHOR_COLORS[(anchors - 1) % ANCHOR_COLORS.len()]
                }
            };
            (name, side, color)
        })
        .collect();
    let charts = OPERATIONS
        .iter()
        .enumerate()
        .map(|(op, operation)| Chart {
            title: operation.to_string(),
            x_label: "load built".into(),
            y_label: "M ops/s".into(),
            series: colors
                .iter()
                .filter_map(|&(name, side, color)| {
                    let mut points: Vec<(f64, f64)> = run
                        .rows
                        .iter()
                        .filter(|r| r.system == name && on_w1(r))
                        .filter_map(|r| Some((r.built, r.rate(op)?)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (!points.is_empty()).then(|| Series {
                        name: name.to_string(),
                        color,
                        dashed: side == Side::Anchor,
                        points,
                    })
                })
                .collect(),
        })
        .collect();
    let size = log2_n(run).map_or_else(String::new, |n| format!(", n = 2^{n}"));
    Figure {
        title: format!(
            "W1{size}, u32 keys and values: gpuhash (solid) and anchors (dashed), one run"
        ),
        charts,
    }
}

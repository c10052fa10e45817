//! The W5 targets held against the rows of a run: large-batch lookups and inserts at 80%
//! or more of the PCIe bound, misses at least 5x hits on the paged table, batches of 2^10
//! to 2^14 at least 10x faster probing in place than paging whole children; and the
//! lookup rates of every table and form by batch size in one table.

use super::crossover::{Comparison, PAGE, PROBE};
use super::parts::Form;
use super::rows::{Row, Verb};
use crate::contract_bench::Bus;

/// The paged table's name in the rows.
pub const PAGED: &str = "paged";
/// The fully resident table's name in the rows.
pub const RESIDENT: &str = "fully resident";

/// Share of the bound large batches must reach.
const BOUND_TARGET: f64 = 0.8;
/// How many times hits misses must run.
const MISS_TARGET: f64 = 5.0;
/// How many times paging probing in place must run for small batches.
const PROBE_TARGET: f64 = 10.0;
/// log2 of the small batches of the probing target.
const SMALL_BATCHES: [f64; 3] = [10.0, 12.0, 14.0];

/// The row of `table`'s `verb` in `form` at `batch`.
fn find<'a>(rows: &'a [Row], table: &str, verb: Verb, form: Form, batch: usize) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.table == table && r.verb == verb && r.form == form && r.batch == batch)
}

/// The lookup batch sizes of the rows, ascending.
fn lookup_batches(rows: &[Row]) -> Vec<usize> {
    let mut batches: Vec<usize> = rows
        .iter()
        .filter(|r| r.verb != Verb::Insert)
        .map(|r| r.batch)
        .collect();
    batches.sort_unstable();
    batches.dedup();
    batches
}

/// Misses over hits, in keys a second, on `table` in `form` at each batch size measured.
pub fn misses_over_hits(rows: &[Row], table: &str, form: Form) -> Vec<(usize, f64)> {
    lookup_batches(rows)
        .into_iter()
        .filter_map(|batch| {
            let hits = find(rows, table, Verb::Hits, form, batch)?;
            let misses = find(rows, table, Verb::Misses, form, batch)?;
            Some((batch, misses.keys_per_s() / hits.keys_per_s()))
        })
        .collect()
}

/// One line of the targets table.
struct Target {
    what: String,
    measured: String,
    met: Option<bool>,
}

impl Target {
    fn share(what: String, row: Option<&Row>, bus: Bus) -> Self {
        let share = row.and_then(|r| r.of_bound(bus));
        let floor = row.and_then(|r| r.of_floor(bus));
        let measured = match (share, floor) {
            (Some(share), Some(floor)) => format!(
                "{:.0}% of the bound ({:.0}% of that of keys and answers alone)",
                100.0 * share,
                100.0 * floor
            ),
            _ => "-".into(),
        };
        Target {
            what,
            measured,
            met: share.map(|s| s >= BOUND_TARGET),
        }
    }
}

/// The targets, each with what this run measured and whether it is met (`None`: not
/// measured in this run).
fn targets(rows: &[Row], comparison: Option<&Comparison>, bus: Bus) -> Vec<Target> {
    let mut targets = vec![Target::share(
        "paged: insert of n pairs, host form, at 80% of the PCIe bound".into(),
        rows.iter()
            .find(|r| r.table == PAGED && r.verb == Verb::Insert && r.form == Form::Host),
        bus,
    )];
    let largest = lookup_batches(rows).last().copied().unwrap_or(0);
    for verb in [Verb::Hits, Verb::Misses] {
        targets.push(Target::share(
            format!(
                "paged: {} in batches of 2^{:.0}, host form, at 80% of the PCIe bound",
                if verb == Verb::Hits { "hits" } else { "misses" },
                (largest.max(1) as f64).log2()
            ),
            find(rows, PAGED, verb, Form::Host, largest),
            bus,
        ));
    }
    for form in [Form::Host, Form::Device] {
        let ratios = misses_over_hits(rows, PAGED, form);
        let low = ratios.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
        targets.push(Target {
            what: format!(
                "paged: misses at least 5x hits, {} form, every batch size (a quarter of the misses go to resident children)",
                form.name()
            ),
            measured: low.map_or("-".into(), |(batch, ratio)| {
                format!("lowest {ratio:.1}x, at 2^{:.0}", (batch as f64).log2())
            }),
            met: low.map(|(_, ratio)| ratio >= MISS_TARGET),
        });
    }
    let small: Option<Vec<(f64, f64)>> = comparison.and_then(|c| {
        let (probe, page) = (c.rates(PROBE)?, c.rates(PAGE)?);
        let ratios: Vec<(f64, f64)> = c
            .log2_batches
            .iter()
            .zip(probe.iter().zip(page))
            .filter(|(log2, _)| SMALL_BATCHES.contains(log2))
            .map(|(&log2, (probe, page))| (log2, probe / page))
            .collect();
        (!ratios.is_empty()).then_some(ratios)
    });
    targets.push(Target {
        what:
            "paged: batches of 2^10 to 2^14 at least 10x faster probing than paging whole children"
                .into(),
        measured: small.as_ref().map_or("-".into(), |ratios| {
            let each: Vec<String> = ratios
                .iter()
                .map(|(log2, r)| format!("2^{log2:.0}: {r:.1}x"))
                .collect();
            each.join(", ")
        }),
        met: small.map(|ratios| ratios.iter().all(|&(_, r)| r >= PROBE_TARGET)),
    });
    targets
}

/// Prints the lookup rates of every table and form by batch size, then the targets.
pub fn print(rows: &[Row], comparison: Option<&Comparison>, bus: Bus) {
    let mut columns: Vec<(&str, Verb, Form)> = Vec::new();
    for row in rows.iter().filter(|r| r.verb != Verb::Insert) {
        let column = (row.table.as_str(), row.verb, row.form);
        if !columns.contains(&column) {
            columns.push(column);
        }
    }
    if !columns.is_empty() {
        println!("Lookups, M keys/s:");
        let names: Vec<String> = columns
            .iter()
            .map(|(table, verb, form)| {
                let verb = if *verb == Verb::Hits {
                    "hits"
                } else {
                    "misses"
                };
                format!("{table}, {verb}, {}", form.name())
            })
            .collect();
        println!("| batch | {} |", names.join(" | "));
        println!("|{}", " --- |".repeat(names.len() + 1));
        for batch in lookup_batches(rows) {
            let cells: Vec<String> = columns
                .iter()
                .map(|&(table, verb, form)| {
                    find(rows, table, verb, form, batch)
                        .map_or("-".into(), |r| format!("{:.1}", r.keys_per_s() / 1e6))
                })
                .collect();
            println!("| 2^{:.0} | {} |", (batch as f64).log2(), cells.join(" | "));
        }
        println!();
    }
    println!("W5 targets:");
    println!("| target | measured | met |\n| --- | --- | --- |");
    for target in targets(rows, comparison, bus) {
        let met = match target.met {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        println!("| {} | {} | {met} |", target.what, target.measured);
    }
}

#[cfg(test)]
mod tests {
    use gpuhash_swap::SwapStats;

    use super::*;
    use crate::swap_bench::arithmetic::Crossing;

    fn row(table: &str, verb: Verb, form: Form, batch: usize, seconds: f64) -> Row {
        let own = match form {
            Form::Host => Crossing::host_lookups(batch),
            Form::Device => Crossing::default(),
        };
        Row {
            table: table.into(),
            verb,
            form,
            batch,
            batches: 1,
            seconds,
            own,
            paged: Crossing::default(),
            paging: SwapStats::default(),
            runs: 3,
        }
    }

    fn bus() -> Bus {
        Bus {
            h2d: 50e9,
            d2h: 50e9,
        }
    }

    #[test]
    fn misses_over_hits_pairs_rows_of_one_table_and_form() {
        let rows = vec![
            row(PAGED, Verb::Hits, Form::Host, 1 << 10, 1.0),
            row(PAGED, Verb::Misses, Form::Host, 1 << 10, 0.25),
            row(PAGED, Verb::Hits, Form::Host, 1 << 20, 1.0),
            row(PAGED, Verb::Misses, Form::Host, 1 << 20, 0.1),
            row(RESIDENT, Verb::Misses, Form::Host, 1 << 14, 0.1),
            row(PAGED, Verb::Hits, Form::Device, 1 << 10, 1.0),
        ];
        assert_eq!(
            misses_over_hits(&rows, PAGED, Form::Host),
            vec![(1 << 10, 4.0), (1 << 20, 10.0)]
        );
        assert!(misses_over_hits(&rows, PAGED, Form::Device).is_empty());
        let targets = targets(&rows, None, bus());
        let misses = targets
            .iter()
            .find(|t| t.what.contains("5x hits, host"))
            .unwrap();
        assert_eq!(misses.met, Some(false));
        assert!(
            misses.measured.contains("4.0x, at 2^10"),
            "{}",
            misses.measured
        );
        // Nothing measured: no verdict.
        assert!(
            targets
                .iter()
                .filter(|t| t.what.contains("insert"))
                .all(|t| t.met.is_none())
        );
        assert!(
            targets
                .iter()
                .find(|t| t.what.contains("device form"))
                .unwrap()
                .met
                .is_none()
        );
    }

    #[test]
    fn paging_raises_the_bound_not_that_of_keys_and_answers() {
        let mut paged = row(PAGED, Verb::Hits, Form::Host, 1 << 20, 1e-3);
        let floor = paged.of_floor(bus()).unwrap();
        assert_eq!(paged.of_bound(bus()), Some(floor));
        // 50 MB of images at 50 GB/s: a millisecond more of bound, the whole run.
        paged.paged = Crossing {
            up: 50e6,
            down: 0.0,
        };
        let share = paged.of_bound(bus()).unwrap();
        assert!((share - floor - 1.0).abs() < 1e-9, "{share} {floor}");
        assert_eq!(paged.of_floor(bus()), Some(floor));
        assert!(paged.line(bus()).contains("| 50.0 / 0.0 |"));
        // Device buffers: no keys or answers cross.
        let device = row(PAGED, Verb::Hits, Form::Device, 1 << 20, 1e-3);
        assert_eq!(
            (device.of_floor(bus()), device.of_bound(bus())),
            (None, None)
        );
    }

    #[test]
    fn bound_targets_take_the_largest_batch() {
        // 2^20 keys: 9 MB over 50 GB/s is 189 us; in 200 us that is 94% of the bound.
        let rows = vec![
            row(PAGED, Verb::Hits, Form::Host, 1 << 10, 1.0),
            row(PAGED, Verb::Hits, Form::Host, 1 << 20, 200e-6),
            row(PAGED, Verb::Misses, Form::Host, 1 << 20, 400e-6),
        ];
        let targets = targets(&rows, None, bus());
        let hits = targets
            .iter()
            .find(|t| t.what.contains("hits in batches of 2^20"))
            .unwrap();
        assert_eq!(hits.met, Some(true), "{}", hits.measured);
        let misses = targets
            .iter()
            .find(|t| t.what.contains("misses in batches of 2^20"))
            .unwrap();
        assert_eq!(misses.met, Some(false), "{}", misses.measured);
    }

    #[test]
    fn the_probing_target_reads_the_small_batches_of_the_comparison() {
        use super::super::crossover::Line;
        let comparison = Comparison {
            log2_batches: vec![10.0, 12.0, 14.0, 16.0],
            lines: vec![
                Line {
                    name: PROBE,
                    rates: vec![12.0, 30.0, 50.0, 60.0],
                },
                Line {
                    name: PAGE,
                    rates: vec![1.0, 2.0, 6.0, 20.0],
                },
            ],
            at: None,
            image_bytes: 1,
        };
        let targets = targets(&[], Some(&comparison), bus());
        let probing = targets.last().unwrap();
        assert_eq!(probing.measured, "2^10: 12.0x, 2^12: 15.0x, 2^14: 8.3x");
        assert_eq!(probing.met, Some(false));
    }
}

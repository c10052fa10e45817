//! Which pieces of W6 a run covers, from the command line, so that W6 can run as several
//! shorter commands whose tables together make the whole.
//!
//! - `--w6-tables main,standalone,strategies,regroup`: the tables printed (all by default).
//! - `--w6-p 2,4,8` (repeatable): attribute counts, 2 to 8 (2, 4 and 8 by default).
//! - `--w6-card 100,10000,100000,zipf` (repeatable): the cases of the main and stand-alone
//!   tables, cardinalities of uniform attribute values, and `zipf` for the Zipf-skewed
//!   case (p = 4, cardinality 10^4, run when 4 is among the attribute counts); all four
//!   by default.
//! - `--w6-no-cpu`: no CPU index (its cells print `-`).
//! - `--w6-cpu-runs R`: timed runs of each CPU index operation (3 by default), after one
//!   untimed.
//! - `--w6-cpu-batch B`: the CPU index runs at most the first B items of each search,
//!   modify and delete batch, on the same full index, its rates those of the items it ran
//!   (every batch whole by default). Its matches are checked against the GPU index's for
//!   the same queries.
//! - `--w6-standalone-budget S` (300 by default): the stand-alone secondary indexes of a
//!   case whose builds [`stand_alone_estimate_s`] expects to take longer than S seconds
//!   are not built; their row says so and gives the estimate. The estimate counts the list
//!   walks of inserts that walked from the head, an upper bound since multimap inserts
//!   group a batch's copies by bucket: a large S builds every case.

use std::fmt;

use crate::args::{count, list};
use crate::hyperspace::workload::{Skew, Spec};

/// One table of W6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// GPU index, CPU index and column scan, for each case.
    Main,
    /// One `SlabHashMultiMap` per attribute, for each case.
    StandAlone,
    /// Grouped against one-at-a-time searches.
    Strategies,
    /// Adaptive regrouping under a shifting mix.
    Regroup,
}

impl Table {
    const ALL: [Table; 4] = [
        Table::Main,
        Table::StandAlone,
        Table::Strategies,
        Table::Regroup,
    ];

    fn name(self) -> &'static str {
        match self {
            Table::Main => "main",
            Table::StandAlone => "standalone",
            Table::Strategies => "strategies",
            Table::Regroup => "regroup",
        }
    }
}

/// One case of the main and stand-alone tables' data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Uniform attribute values of this cardinality, for each attribute count.
    Uniform(u32),
    /// Zipf-skewed values, p = 4, cardinality 10^4.
    Zipf,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Case::Uniform(cardinality) => write!(f, "{cardinality}"),
            Case::Zipf => write!(f, "zipf"),
        }
    }
}

/// How the CPU index takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuPart {
    /// Whether it is built at all.
    pub enabled: bool,
    /// Timed runs of each of its operations.
    pub runs: usize,
    /// Most items of a batch it runs (`None`: all).
    pub batch: Option<usize>,
}

impl CpuPart {
    /// The items of a batch of `items` the CPU index runs.
    pub fn items(&self, items: usize) -> usize {
        self.batch.map_or(items, |b| b.min(items))
    }
}

/// The pieces of W6 a run covers.
#[derive(Clone, Debug, PartialEq)]
pub struct Parts {
    tables: Vec<Table>,
    attributes: Vec<usize>,
    cases: Vec<Case>,
    /// The CPU index's part.
    pub cpu: CpuPart,
    /// Seconds the stand-alone builds of one case may be expected to take.
    pub standalone_budget_s: f64,
}

/// Attribute counts by default.
const ATTRIBUTES: [usize; 3] = [2, 4, 8];
/// Cases by default.
const CASES: [Case; 4] = [
    Case::Uniform(100),
    Case::Uniform(10_000),
    Case::Uniform(100_000),
    Case::Zipf,
];

impl Default for Parts {
    fn default() -> Self {
        Parts {
            tables: Vec::new(),
            attributes: Vec::new(),
            cases: Vec::new(),
            cpu: CpuPart {
                enabled: true,
                runs: 3,
                batch: None,
            },
            standalone_budget_s: 300.0,
        }
    }
}

impl Parts {
    /// Whether `flag` is one of W6's flags that take no value.
    pub fn is_switch(flag: &str) -> bool {
        flag == "--w6-no-cpu"
    }

    /// Whether `flag` is one of W6's flags that take a value.
    pub fn takes_value(flag: &str) -> bool {
        [
            "--w6-tables",
            "--w6-p",
            "--w6-card",
            "--w6-cpu-runs",
            "--w6-cpu-batch",
            "--w6-standalone-budget",
        ]
        .contains(&flag)
    }

    /// Applies a switch ([`Parts::is_switch`]).
    pub fn switch(&mut self, flag: &str) -> Result<(), String> {
        match flag {
            "--w6-no-cpu" => self.cpu.enabled = false,
            _ => return Err(format!("{flag} is not a W6 switch")),
        }
        Ok(())
    }

    /// Applies a flag that takes a value ([`Parts::takes_value`]).
    pub fn flag(&mut self, flag: &str, value: &str) -> Result<(), String> {
        match flag {
            "--w6-tables" => list(
                flag,
                value,
                |w| Table::ALL.into_iter().find(|t| t.name() == w),
                &mut self.tables,
            ),
            "--w6-p" => list(
                flag,
                value,
                |w| w.parse().ok().filter(|p| (2..=8).contains(p)),
                &mut self.attributes,
            ),
            "--w6-card" => list(
                flag,
                value,
                |w| match w {
                    "zipf" => Some(Case::Zipf),
                    _ => w.parse().ok().filter(|&c| c >= 1).map(Case::Uniform),
                },
                &mut self.cases,
            ),
            "--w6-cpu-runs" => {
                self.cpu.runs = count(flag, value)?;
                Ok(())
            }
            "--w6-cpu-batch" => {
                self.cpu.batch = Some(count(flag, value)?);
                Ok(())
            }
            "--w6-standalone-budget" => {
                self.standalone_budget_s = count(flag, value)? as f64;
                Ok(())
            }
            _ => Err(format!("{flag} is not a W6 flag")),
        }
    }

    /// Whether `table` is printed.
    pub fn has(&self, table: Table) -> bool {
        self.tables.is_empty() || self.tables.contains(&table)
    }

    /// The attribute counts, in the order given (2, 4, 8 by default).
    pub fn attributes(&self) -> Vec<usize> {
        if self.attributes.is_empty() {
            ATTRIBUTES.to_vec()
        } else {
            self.attributes.clone()
        }
    }

    /// The `(p, case)` pieces of the main and stand-alone tables, in order: each attribute
    /// count with each uniform case, then the Zipf case at p = 4.
    pub fn cases(&self) -> Vec<(usize, Case)> {
        let cases = if self.cases.is_empty() {
            CASES.to_vec()
        } else {
            self.cases.clone()
        };
        let attributes = self.attributes();
        let mut pieces: Vec<(usize, Case)> = attributes
            .iter()
            .flat_map(|&p| {
                cases
                    .iter()
                    .filter(|c| matches!(c, Case::Uniform(_)))
                    .map(move |&c| (p, c))
            })
            .collect();
        if cases.contains(&Case::Zipf) && attributes.contains(&4) {
            pieces.push((4, Case::Zipf));
        }
        pieces
    }

    /// One line saying what this run covers, for the output's header.
    pub fn describe(&self) -> String {
        let tables: Vec<&str> = Table::ALL
            .into_iter()
            .filter(|&t| self.has(t))
            .map(Table::name)
            .collect();
        let cases: Vec<String> = self
            .cases()
            .iter()
            .map(|(p, c)| format!("p {p} card {c}"))
            .collect();
        let cpu = if !self.cpu.enabled {
            "no CPU index".to_string()
        } else {
            let batch = self.cpu.batch.map_or("whole batches".to_string(), |b| {
                format!("at most the first {b} items of each batch (rates over the items it ran)")
            });
            format!("CPU index: median of {} timed runs, {batch}", self.cpu.runs)
        };
        format!(
            "W6 pieces: tables {}; cases {}; {cpu}; stand-alone builds up to an expected {:.0} s a case",
            tables.join(","),
            cases.join(", "),
            self.standalone_budget_s
        )
    }
}

/// Slab reads a second of `SlabHashMultiMap` inserts walking long lists on an H100, while
/// each insert walked its key's list from the head: W6 at n = 2^24, p = 8, cardinality
/// 100 spent about 190 s in its stand-alone builds then, about 3 * 10^12 slab reads by
/// [`stand_alone_estimate_s`]'s count.
const LIST_SLAB_READS_PER_S: f64 = 1.6e10;
/// Pairs of u32 keys and values a slab of the multimap holds.
const PAIRS_PER_SLAB: f64 = 15.0;

/// Seconds that `builds` builds of the stand-alone secondary indexes of `spec` (one
/// multimap an attribute) spent walking lists while each multimap insert walked its key's
/// list to the first empty spot: a value that `c` tuples hold cost about `c^2 / 2 / 15`
/// slab reads, quadratic in the tuples a value, which at low cardinality or under skew
/// outweighed the rest of the build. Multimap inserts now group a batch's copies by
/// bucket and walk each list once a batch, so this is an upper bound of what they spend.
pub fn stand_alone_estimate_s(spec: &Spec, builds: usize) -> f64 {
    let n = spec.tuples as f64;
    let cardinality = f64::from(spec.cardinality.max(1));
    // The sum over values of the square of each one's share of the tuples.
    let squares = match spec.skew {
        Skew::Uniform => 1.0 / cardinality,
        Skew::Zipf => {
            let ranks = 1..=spec.cardinality.max(1);
            let harmonic: f64 = ranks.clone().map(|r| 1.0 / f64::from(r)).sum();
            let squared: f64 = ranks.map(|r| 1.0 / f64::from(r).powi(2)).sum();
            squared / (harmonic * harmonic)
        }
    };
    let reads = n * n * squares / 2.0 / PAIRS_PER_SLAB;
    reads * (spec.attributes * builds) as f64 / LIST_SLAB_READS_PER_S
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parts, String> {
        let mut parts = Parts::default();
        let mut args = args.iter();
        while let Some(&flag) = args.next() {
            if Parts::is_switch(flag) {
                parts.switch(flag)?;
            } else {
                assert!(Parts::takes_value(flag), "{flag}");
                parts.flag(flag, args.next().expect("a value"))?;
            }
        }
        Ok(parts)
    }

    #[test]
    fn by_default_everything_runs() {
        let parts = parse(&[]).unwrap();
        assert!(Table::ALL.iter().all(|&t| parts.has(t)));
        assert_eq!(parts.cases().len(), 10);
        assert_eq!(parts.cases()[0], (2, Case::Uniform(100)));
        assert_eq!(parts.cases()[9], (4, Case::Zipf));
        assert!(parts.cpu.enabled);
        assert_eq!(parts.cpu.items(1 << 16), 1 << 16);
    }

    #[test]
    fn lists_pick_pieces_in_order_without_repeats() {
        let parts = parse(&[
            "--w6-tables",
            "standalone,main",
            "--w6-p",
            "8",
            "--w6-p",
            "2,8",
            "--w6-card",
            "100000, 100",
        ])
        .unwrap();
        assert!(parts.has(Table::Main) && parts.has(Table::StandAlone));
        assert!(!parts.has(Table::Strategies) && !parts.has(Table::Regroup));
        assert_eq!(
            parts.cases(),
            vec![
                (8, Case::Uniform(100_000)),
                (8, Case::Uniform(100)),
                (2, Case::Uniform(100_000)),
                (2, Case::Uniform(100)),
            ]
        );
    }

    #[test]
    fn zipf_runs_only_with_four_attributes() {
        let only_zipf = parse(&["--w6-card", "zipf", "--w6-p", "4"]).unwrap();
        assert_eq!(only_zipf.cases(), vec![(4, Case::Zipf)]);
        let without_four = parse(&["--w6-card", "zipf,100", "--w6-p", "8"]).unwrap();
        assert_eq!(without_four.cases(), vec![(8, Case::Uniform(100))]);
    }

    #[test]
    fn cpu_flags() {
        let parts = parse(&[
            "--w6-no-cpu",
            "--w6-cpu-runs",
            "1",
            "--w6-cpu-batch",
            "4096",
        ])
        .unwrap();
        assert!(!parts.cpu.enabled);
        assert_eq!(parts.cpu.runs, 1);
        assert_eq!(parts.cpu.items(1 << 16), 4096);
        assert_eq!(parts.cpu.items(1000), 1000);
        assert!(parts.describe().contains("no CPU index"));
        let capped = parse(&["--w6-cpu-batch", "8"]).unwrap();
        assert!(capped.describe().contains("first 8 items"));
    }

    fn spec(log2_n: u32, p: usize, cardinality: u32, skew: Skew) -> Spec {
        Spec {
            tuples: 1 << log2_n,
            attributes: p,
            cardinality,
            skew,
            seed: 0,
        }
    }

    #[test]
    fn stand_alone_estimates_grow_with_tuples_a_value() {
        // The run the rate comes from.
        let measured = stand_alone_estimate_s(&spec(24, 8, 100, Skew::Uniform), 4);
        assert!((150.0..250.0).contains(&measured), "{measured}");
        let wide = stand_alone_estimate_s(&spec(24, 8, 10_000, Skew::Uniform), 4);
        assert!(wide < 3.0, "{wide}");
        // Quadratic in n, linear in p and in the builds.
        let big = stand_alone_estimate_s(&spec(26, 8, 100, Skew::Uniform), 4);
        assert!((big / measured - 16.0).abs() < 1e-6);
        let fewer = stand_alone_estimate_s(&spec(24, 2, 100, Skew::Uniform), 2);
        assert!((measured / fewer - 8.0).abs() < 1e-6);
        // Zipf values pile up on the first ranks.
        let zipf = stand_alone_estimate_s(&spec(24, 4, 10_000, Skew::Zipf), 4);
        let uniform = stand_alone_estimate_s(&spec(24, 4, 10_000, Skew::Uniform), 4);
        assert!(zipf > 100.0 * uniform, "{zipf} against {uniform}");
    }

    #[test]
    fn the_stand_alone_budget_is_a_flag() {
        assert_eq!(parse(&[]).unwrap().standalone_budget_s, 300.0);
        let parts = parse(&["--w6-standalone-budget", "900"]).unwrap();
        assert_eq!(parts.standalone_budget_s, 900.0);
        assert!(parse(&["--w6-standalone-budget", "0"]).is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        for args in [
            &["--w6-tables", "main,everything"][..],
            &["--w6-p", "1"],
            &["--w6-p", "9"],
            &["--w6-p", "two"],
            &["--w6-card", "0"],
            &["--w6-card", "100,"],
            &["--w6-cpu-runs", "0"],
            &["--w6-cpu-batch", "-3"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
        assert!(!Parts::takes_value("--w6-no-cpu"));
        assert!(Parts::default().switch("--w6-cpu-runs").is_err());
    }
}

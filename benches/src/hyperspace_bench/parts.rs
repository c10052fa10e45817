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

use std::fmt;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    tables: Vec<Table>,
    attributes: Vec<usize>,
    cases: Vec<Case>,
    /// The CPU index's part.
    pub cpu: CpuPart,
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
        }
    }
}

/// Splits a comma-separated list, each item parsed by `item`.
fn list<T: PartialEq>(
    flag: &str,
    value: &str,
    mut item: impl FnMut(&str) -> Option<T>,
    into: &mut Vec<T>,
) -> Result<(), String> {
    for word in value.split(',').map(str::trim) {
        let parsed =
            item(word).ok_or_else(|| format!("{flag}: cannot read {word:?} in {value:?}"))?;
        if !into.contains(&parsed) {
            into.push(parsed);
        }
    }
    Ok(())
}

fn count(flag: &str, value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(format!(
            "{flag} takes a number of at least 1, not {value:?}"
        )),
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
            "W6 pieces: tables {}; cases {}; {cpu}",
            tables.join(","),
            cases.join(", ")
        )
    }
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

//! Which pieces of W5 a run covers, from the command line, so that W5 at large n can run
//! as several commands of at most a few minutes each.
//!
//! - `--w5-parts rates,paged,crossover,resident`: the pieces run (all by default).
//!   `rates`: the zero-copy random-read rate, a page-in and device lookups of one child,
//!   and the cost model they give; `paged`: the table 4x its device budget, inserts and
//!   lookups; `crossover`: probing in place against paging on that table, with the plot;
//!   `resident`: the same table fully resident. The bus is measured in every run.
//! - `--w5-forms host,device`: the forms timed in `paged` and `resident` (both by
//!   default): host slices registered with the driver, or device buffers.
//! - `--w5-batches 10,12,20-26` (repeatable): log2 of the lookup batch sizes, 10 to 30, a
//!   range `A-B` standing for every size from 2^A to 2^B (10, 12, ..., 26 by default);
//!   sizes past n are capped at n.
//! - `--w5-svg PATH`: where the plot of the crossover goes (`swap-w5.svg` by default,
//!   relative to the current directory).
//! - `--w5-filter-bits B`: bits a key of the children's miss filters, 1 to 64 (the
//!   table's default, 12, unless given); the budget holds the filters as they grow.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::args::list;

/// One piece of W5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The rates a cost model is made of, measured on one child.
    Rates,
    /// The paged table: inserts, then lookups of hits and misses.
    Paged,
    /// Probing in place against paging, and the plot.
    Crossover,
    /// The same table with every child resident.
    Resident,
}

impl Piece {
    /// Every piece, in the order a run takes them.
    pub const ALL: [Piece; 4] = [
        Piece::Rates,
        Piece::Paged,
        Piece::Crossover,
        Piece::Resident,
    ];

    /// The piece's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Piece::Rates => "rates",
            Piece::Paged => "paged",
            Piece::Crossover => "crossover",
            Piece::Resident => "resident",
        }
    }
}

/// How a batch reaches the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Host slices registered with the driver, answers into registered buffers.
    Host,
    /// Device buffers: the table's own cost, no keys or answers over the bus.
    Device,
}

impl Form {
    const ALL: [Form; 2] = [Form::Host, Form::Device];

    /// The form's name on the command line and in the rows.
    pub fn name(self) -> &'static str {
        match self {
            Form::Host => "host",
            Form::Device => "device",
        }
    }
}

/// Lookup batch sizes by default: 2^10, 2^12, ..., 2^26.
const BATCHES: RangeInclusive<u32> = 10..=26;
/// Batch sizes a flag may name: 2^10 to 2^30.
const BATCH_LIMITS: RangeInclusive<u32> = 10..=30;
/// Filter bits a key a flag may name.
const FILTER_BITS: RangeInclusive<u32> = 1..=64;

/// The pieces of W5 a run covers.
#[derive(Clone, Debug, PartialEq)]
pub struct Parts {
    pieces: Vec<Piece>,
    forms: Vec<Form>,
    batches: Vec<RangeInclusive<u32>>,
    /// Where the plot goes.
    pub svg: PathBuf,
    /// Bits a key of the miss filters.
    pub filter_bits: u32,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            pieces: Vec::new(),
            forms: Vec::new(),
            batches: Vec::new(),
            svg: PathBuf::from("swap-w5.svg"),
            filter_bits: gpuhash_swap::DEFAULT_FILTER_BITS_PER_KEY,
        }
    }
}

/// A log2 batch size or a range of them, `A` or `A-B`, within [`BATCH_LIMITS`].
fn batch_range(word: &str) -> Option<RangeInclusive<u32>> {
    let (low, high) = word.split_once('-').unwrap_or((word, word));
    let (low, high) = (low.trim().parse().ok()?, high.trim().parse().ok()?);
    let fits = |v: u32| BATCH_LIMITS.contains(&v);
    (fits(low) && fits(high) && low <= high).then_some(low..=high)
}

impl Parts {
    /// Whether `flag` is one of W5's flags (all take a value).
    pub fn takes_value(flag: &str) -> bool {
        [
            "--w5-parts",
            "--w5-forms",
            "--w5-batches",
            "--w5-svg",
            "--w5-filter-bits",
        ]
        .contains(&flag)
    }

    /// Applies a flag ([`Parts::takes_value`]).
    pub fn flag(&mut self, flag: &str, value: &str) -> Result<(), String> {
        match flag {
            "--w5-parts" => list(
                flag,
                value,
                |w| Piece::ALL.into_iter().find(|p| p.name() == w),
                &mut self.pieces,
            ),
            "--w5-forms" => list(
                flag,
                value,
                |w| Form::ALL.into_iter().find(|f| f.name() == w),
                &mut self.forms,
            ),
            "--w5-batches" => list(flag, value, batch_range, &mut self.batches),
            "--w5-svg" => {
                self.svg = PathBuf::from(value);
                Ok(())
            }
            "--w5-filter-bits" => {
                let bits = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|b| FILTER_BITS.contains(b));
                self.filter_bits = bits.ok_or_else(|| {
                    format!("{flag}: {value} is not a count of bits from 1 to 64")
                })?;
                Ok(())
            }
            _ => Err(format!("{flag} is not a W5 flag")),
        }
    }

    /// Whether `piece` runs.
    pub fn has(&self, piece: Piece) -> bool {
        self.pieces.is_empty() || self.pieces.contains(&piece)
    }

    /// The forms timed, host first.
    pub fn forms(&self) -> Vec<Form> {
        Form::ALL
            .into_iter()
            .filter(|f| self.forms.is_empty() || self.forms.contains(f))
            .collect()
    }

    /// log2 of the lookup batch sizes, ascending, each once.
    pub fn log2_batches(&self) -> Vec<u32> {
        let mut sizes: Vec<u32> = if self.batches.is_empty() {
            BATCHES.step_by(2).collect()
        } else {
            self.batches.iter().flat_map(Clone::clone).collect()
        };
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// One line saying what this run covers, for the output's header.
    pub fn describe(&self) -> String {
        let names = |names: Vec<&str>| names.join(",");
        let pieces = Piece::ALL.into_iter().filter(|&p| self.has(p));
        let batches: Vec<String> = self.log2_batches().iter().map(u32::to_string).collect();
        format!(
            "W5 pieces: {}; forms {}; lookup batches 2^{{{}}}; miss filters of {} bits a key",
            names(pieces.map(Piece::name).collect()),
            names(self.forms().into_iter().map(Form::name).collect()),
            batches.join(","),
            self.filter_bits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parts, String> {
        let mut parts = Parts::default();
        for pair in args.chunks(2) {
            assert!(Parts::takes_value(pair[0]), "{}", pair[0]);
            parts.flag(pair[0], pair[1])?;
        }
        Ok(parts)
    }

    #[test]
    fn by_default_everything_runs_at_even_powers_from_2_10_to_2_26() {
        let parts = parse(&[]).unwrap();
        assert!(Piece::ALL.iter().all(|&p| parts.has(p)));
        assert_eq!(parts.forms(), vec![Form::Host, Form::Device]);
        assert_eq!(
            parts.log2_batches(),
            vec![10, 12, 14, 16, 18, 20, 22, 24, 26]
        );
        assert_eq!(parts.svg, PathBuf::from("swap-w5.svg"));
        assert_eq!(parts.filter_bits, gpuhash_swap::DEFAULT_FILTER_BITS_PER_KEY);
    }

    #[test]
    fn flags_pick_pieces_forms_and_batches() {
        let parts = parse(&[
            "--w5-parts",
            "paged,crossover",
            "--w5-forms",
            "device",
            "--w5-batches",
            "20-22, 10",
            "--w5-batches",
            "21,26",
            "--w5-svg",
            "out/w5.svg",
            "--w5-filter-bits",
            "12",
        ])
        .unwrap();
        assert!(parts.has(Piece::Paged) && parts.has(Piece::Crossover));
        assert!(!parts.has(Piece::Rates) && !parts.has(Piece::Resident));
        assert_eq!(parts.forms(), vec![Form::Device]);
        assert_eq!(parts.log2_batches(), vec![10, 20, 21, 22, 26]);
        assert_eq!(parts.svg, PathBuf::from("out/w5.svg"));
        assert_eq!(parts.filter_bits, 12);
        let line = parts.describe();
        assert!(line.contains("paged,crossover") && line.contains("forms device"));
        assert!(line.contains("2^{10,20,21,22,26}"), "{line}");
        assert!(line.contains("12 bits a key"), "{line}");
    }

    #[test]
    fn bad_values_are_errors() {
        for args in [
            &["--w5-parts", "paged,everything"][..],
            &["--w5-forms", "pageable"],
            &["--w5-batches", "9"],
            &["--w5-batches", "31"],
            &["--w5-batches", "20-12"],
            &["--w5-batches", "12-"],
            &["--w5-batches", "ten"],
            &["--w5-filter-bits", "0"],
            &["--w5-filter-bits", "65"],
            &["--w5-filter-bits", "eight"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
        assert!(!Parts::takes_value("--w6-p"));
        assert!(Parts::default().flag("--w6-p", "2").is_err());
    }
}

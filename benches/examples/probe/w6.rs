//! What the W6 probes (`search_phases`, `build_phases`) share: their arguments, the tuples
//! they build from (uniform attributes, as W6's main table), and their medians.

use std::time::Instant;

use gpuhash_core::hash::fmix64;
use gpuhash_hyperspace::TupleBatch;

pub type Outcome<T> = Result<T, Box<dyn std::error::Error>>;

/// Attributes a tuple of the probes has.
pub const ATTRIBUTES: usize = 4;

/// The probes' first two arguments, `[LOG2_N] [CARDINALITY,..]` (default `24
/// 100,10000,100000`), and the arguments after them.
pub fn sizes() -> Outcome<(u32, Vec<u32>, std::iter::Skip<std::env::Args>)> {
    let mut args = std::env::args().skip(1);
    let log2_n: u32 = args.next().map_or(Ok(24), |a| a.parse())?;
    let cards = args
        .next()
        .unwrap_or_else(|| "100,10000,100000".into())
        .split(',')
        .map(|c| c.parse())
        .collect::<Result<Vec<u32>, _>>()?;
    Ok((log2_n, cards, args))
}

/// `n` tuples, keys 1 to n, [`ATTRIBUTES`] attributes of `cardinality` values spread
/// evenly by a hash, values 0 to n - 1, as columns.
pub struct Columns {
    pub keys: Vec<u32>,
    pub attributes: Vec<u32>,
    pub values: Vec<u32>,
}

impl Columns {
    pub fn uniform(n: usize, cardinality: u32) -> Self {
        Self {
            keys: (0..n as u32).map(|i| i + 1).collect(),
            attributes: (0..ATTRIBUTES * n)
                .map(|i| (fmix64(i as u64 ^ 0x5eed) % u64::from(cardinality)) as u32 + 1)
                .collect(),
            values: (0..n as u32).collect(),
        }
    }

    pub fn batch(&self) -> TupleBatch<'_> {
        TupleBatch {
            keys: &self.keys,
            attributes: &self.attributes,
            values: &self.values,
        }
    }
}

/// The median of `timed` runs of `f` (an odd count), after `untimed` ones, in milliseconds.
pub fn median_ms(untimed: usize, timed: usize, mut f: impl FnMut() -> Outcome<()>) -> Outcome<f64> {
    for _ in 0..untimed {
        f()?;
    }
    let mut times = Vec::with_capacity(timed);
    for _ in 0..timed {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[timed / 2])
}

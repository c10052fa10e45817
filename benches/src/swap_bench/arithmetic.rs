//! W5's arithmetic, apart from the device: the table's shape and budget, the batches of a
//! timed run, the bytes a run must move over the bus and the bound they set, and where
//! probing in place and paging cross.

use gpuhash_swap::policy::{filter_blocks, scratch_bytes};
use gpuhash_swap::{CostModel, DEFAULT_SCRATCH_BYTES, SwapStats};

use crate::contract_bench::Bus;

/// Bytes of a key and of a value: W5 has u32 keys and values.
pub const KEY_BYTES: u64 = 4;
/// Bytes of a value.
pub const VALUE_BYTES: u64 = 4;
/// Bytes of a miss filter block: 256 bits (`GH_SWAP_FILTER_BLOCK_WORDS` words of 4 bytes).
const FILTER_BLOCK_BYTES: u64 = 32;

/// Keys a timed run of lookups aims at: small batches run several times a run, so that a
/// run lasts long enough to time.
pub const RUN_KEYS: usize = 1 << 22;
/// The most batches a run of the main lookup rows holds.
pub const MOST_BATCHES: usize = 64;

/// Pairs a child is made for: n over 16 children, at least 2^16.
pub fn child_capacity(n: usize) -> usize {
    (n / 16).max(1 << 16)
}

/// How the W5 table is cut and what its device budget holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Pairs a child is made for.
    pub child_capacity: usize,
    /// Children.
    pub children: usize,
    /// Device bytes of a child made at the child capacity.
    pub child_bytes: u64,
    /// Device bytes of every child's miss filter (at the shape's bits a key).
    pub filter_bytes: u64,
    /// Bits a key of the miss filters.
    pub filter_bits: u32,
    /// The paged table's device budget: the filters, a quarter of the children (at least
    /// one), and the scratch the table keeps unless told ([`Shape::scratch_bytes`]).
    pub budget: u64,
    /// The scratch the table keeps under [`Shape::budget`] by its own rule
    /// (`gpuhash_swap::policy::scratch_bytes`: a quarter of the budget, at least
    /// [`DEFAULT_SCRATCH_BYTES`]).
    pub scratch_bytes: u64,
}

impl Shape {
    /// The shape for n pairs, a child taking `child_bytes` on the device, with miss filters
    /// of `filter_bits` bits a key.
    pub fn new(n: usize, child_bytes: u64, filter_bits: u32) -> Self {
        let child_capacity = child_capacity(n);
        let children = n.div_ceil(child_capacity);
        let blocks = filter_blocks(child_capacity, filter_bits);
        let filter_bytes = u64::from(blocks) * FILTER_BLOCK_BYTES * children as u64;
        let room = filter_bytes + child_bytes * quarter(children);
        // The table keeps a quarter of its budget for scratch (at least the default), so
        // the budget is the room over three quarters, or the room and the default.
        let budget = room + room.div_ceil(3).max(DEFAULT_SCRATCH_BYTES);
        Self {
            child_capacity,
            children,
            child_bytes,
            filter_bytes,
            filter_bits,
            budget,
            scratch_bytes: scratch_bytes(budget, None),
        }
    }

    /// Children resident at once under [`Shape::budget`]: a quarter.
    pub fn resident(&self) -> usize {
        quarter(self.children) as usize
    }

    /// Device bytes of every child: what the table would take fully resident, 4 times the
    /// part of the budget that holds children.
    pub fn table_bytes(&self) -> u64 {
        self.child_bytes * self.children as u64
    }
}

/// A quarter of `children`, at least one.
fn quarter(children: usize) -> u64 {
    (children as u64 / 4).max(1)
}

/// The batch sizes 2^`log2` for each of `log2_sizes` capped at n, ascending, each once.
pub fn batch_sizes(log2_sizes: &[u32], n: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = log2_sizes
        .iter()
        .map(|&log2| (1usize << log2).min(n))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Batches of `batch` keys in one timed run: enough for [`RUN_KEYS`] keys, at most
/// `most`, no more than n keys hold, at least one.
pub fn batches_per_run(batch: usize, n: usize, most: usize) -> usize {
    let batch = batch.max(1);
    (RUN_KEYS / batch).min(most).min(n / batch).max(1)
}

/// Keys the answer buffers must hold: the most keys a run of any of `batches` (or of a
/// comparison's batches, at most 2^20 keys) takes, whatever its cap on calls.
pub fn answer_keys(batches: &[usize], n: usize) -> usize {
    let largest = batches.iter().copied().max().unwrap_or(0);
    RUN_KEYS.max(largest).min(n)
}

/// The first key (an index into the n keys) of run `run` when each run takes `keys` of
/// them: consecutive slices, starting over once n is used up, so that runs read other
/// keys where n allows and caches hold no earlier run's buckets.
pub fn run_start(run: usize, keys: usize, n: usize) -> usize {
    let slots = (n / keys.max(1)).max(1);
    (run % slots) * keys
}

/// Bytes that cross the bus in one run, each way.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Crossing {
    /// Host to device.
    pub up: f64,
    /// Device to host.
    pub down: f64,
}

impl Crossing {
    /// Lookups of `keys` from host memory: the keys up, a found flag and a value a key
    /// down.
    pub fn host_lookups(keys: usize) -> Self {
        Self {
            up: (KEY_BYTES * keys as u64) as f64,
            down: ((1 + VALUE_BYTES) * keys as u64) as f64,
        }
    }

    /// Inserts of `pairs` from host memory: keys and values up.
    pub fn host_inserts(pairs: usize) -> Self {
        Self {
            up: ((KEY_BYTES + VALUE_BYTES) * pairs as u64) as f64,
            down: 0.0,
        }
    }

    /// What paging moved in one of `runs` runs, from the table's counts over them: the
    /// images paged in up, those written back down.
    pub fn paging(stats: SwapStats, runs: usize) -> Self {
        let runs = runs.max(1) as f64;
        Self {
            up: stats.bytes_paged_in as f64 / runs,
            down: stats.bytes_written_back as f64 / runs,
        }
    }

    /// Both crossings together.
    pub fn plus(self, other: Crossing) -> Self {
        Self {
            up: self.up + other.up,
            down: other.down + self.down,
        }
    }

    /// The least seconds `bus` needs to carry these bytes, one way after the other
    /// ([`Bus::bound_s`]); `None` when nothing must cross.
    pub fn bound_s(self, bus: Bus) -> Option<f64> {
        (self.up > 0.0 || self.down > 0.0)
            .then(|| bus.bound_s(self.up as usize, self.down as usize))
    }
}

/// Where rate `a` first falls below rate `b`, both measured at the ascending points `xs`:
/// the x where their difference, interpolated linearly between the last point with
/// `a >= b` and the next, is zero; the first x when `a < b` there already; `None` when `a`
/// never falls below `b`.
pub fn crossover(xs: &[f64], a: &[f64], b: &[f64]) -> Option<f64> {
    let difference: Vec<f64> = a.iter().zip(b).map(|(a, b)| a - b).collect();
    let below = difference.iter().position(|&d| d < 0.0)?;
    if below == 0 {
        return Some(xs[0]);
    }
    let (d0, d1) = (difference[below - 1], difference[below]);
    let (x0, x1) = (xs[below - 1], xs[below]);
    Some(x0 + (x1 - x0) * d0 / (d0 - d1))
}

/// log2 of the batch size at which `model` starts paging children on the host rather than
/// probing them in place: its per-child crossover (probes of `probe_bytes` against an
/// image of `image_bytes`) times the children, a batch's keys spreading evenly over them;
/// `None` when the model always probes.
pub fn model_crossover_log2(
    model: &CostModel,
    probe_bytes: u64,
    image_bytes: u64,
    children: usize,
) -> Option<f64> {
    let per_child = model.crossover(probe_bytes, image_bytes);
    (per_child != u64::MAX).then(|| (per_child as f64 * children as f64).log2())
}

#[cfg(test)]
mod tests {
    use gpuhash_swap::policy::{Fixed, plan, scratch_per_element};

    use gpuhash_swap::DEFAULT_FILTER_BITS_PER_KEY;

    use super::*;

    /// Whether `shape`'s budget leaves room for exactly [`Shape::resident`] children by the
    /// swap table's own plan, for u32 pairs.
    fn plan_matches(shape: &Shape) -> bool {
        let fixed = Fixed {
            scratch_bytes: scratch_bytes(shape.budget, None),
            filter_bytes: shape.filter_bytes,
        };
        let element = scratch_per_element(KEY_BYTES as usize, VALUE_BYTES as usize);
        plan(
            shape.budget,
            fixed,
            shape.child_bytes,
            element,
            shape.children,
        )
        .is_ok_and(|p| p.resident == shape.resident())
    }

    #[test]
    fn the_budget_holds_a_quarter_of_the_children_by_the_tables_plan() {
        for (log2_n, child_bytes) in [
            (16, 1 << 20),
            (24, 13_000_000),
            (26, 52_000_000),
            (30, 830_000_000),
        ] {
            let n = 1usize << log2_n;
            let shape = Shape::new(n, child_bytes, DEFAULT_FILTER_BITS_PER_KEY);
            assert_eq!(shape.child_capacity, (n / 16).max(1 << 16));
            assert!(plan_matches(&shape), "{shape:?}");
            assert_eq!(shape.table_bytes(), child_bytes * shape.children as u64);
        }
        let big = Shape::new(1 << 30, 830_000_000, 8);
        assert_eq!((big.children, big.resident()), (16, 4));
        // 8 bits a pair of filters: a byte a pair.
        assert_eq!(big.filter_bytes, 1 << 30);
        // A quarter of the budget is scratch; the rest holds filters and 4 children.
        assert_eq!(big.scratch_bytes, big.budget / 4);
        assert!(big.budget - big.scratch_bytes - big.filter_bytes >= 4 * 830_000_000);
        // Small budgets keep the default scratch.
        let mid = Shape::new(1 << 22, 1 << 20, DEFAULT_FILTER_BITS_PER_KEY);
        assert_eq!(mid.scratch_bytes, DEFAULT_SCRATCH_BYTES);
        // A small n: one child, resident.
        let small = Shape::new(1 << 12, 1 << 20, DEFAULT_FILTER_BITS_PER_KEY);
        assert_eq!((small.children, small.resident()), (1, 1));
        assert!(plan_matches(&small));
        // Twice the bits a key: twice the filters, still a quarter of the children held.
        let wide = Shape::new(1 << 30, 830_000_000, 16);
        assert_eq!(wide.filter_bytes, 2 * big.filter_bytes);
        assert!(plan_matches(&wide) && wide.budget > big.budget);
    }

    #[test]
    fn batch_sizes_are_capped_at_n_and_unique() {
        assert_eq!(
            batch_sizes(&[10, 12, 14], 1 << 20),
            vec![1 << 10, 1 << 12, 1 << 14]
        );
        assert_eq!(
            batch_sizes(&[26, 10, 24, 22], 1 << 23),
            vec![1 << 10, 1 << 22, 1 << 23]
        );
        assert_eq!(batch_sizes(&[10], 100), vec![100]);
    }

    #[test]
    fn runs_hold_enough_batches_within_n() {
        let n = 1 << 26;
        assert_eq!(batches_per_run(1 << 10, n, MOST_BATCHES), MOST_BATCHES);
        assert_eq!(batches_per_run(1 << 18, n, MOST_BATCHES), 16);
        assert_eq!(batches_per_run(1 << 22, n, MOST_BATCHES), 1);
        assert_eq!(batches_per_run(1 << 26, n, MOST_BATCHES), 1);
        assert_eq!(batches_per_run(1 << 10, n, 8), 8);
        // n holds only so many.
        assert_eq!(batches_per_run(1 << 10, 1 << 14, MOST_BATCHES), 16);
        assert_eq!(batches_per_run(1 << 14, 1 << 14, MOST_BATCHES), 1);
    }

    #[test]
    fn answer_buffers_hold_the_longest_run() {
        let n = 1 << 26;
        let batches = batch_sizes(&[10, 14, 20, 24, 26], n);
        let answers = answer_keys(&batches, n);
        for &batch in &batches {
            for most in [1, 8, MOST_BATCHES] {
                assert!(batch * batches_per_run(batch, n, most) <= answers);
            }
        }
        assert_eq!(answers, n);
        assert_eq!(answer_keys(&batch_sizes(&[10, 12], n), n), RUN_KEYS);
        assert_eq!(answer_keys(&[1 << 10], 1 << 16), 1 << 16);
    }

    #[test]
    fn runs_take_consecutive_slices_and_start_over() {
        let n = 1 << 20;
        let keys = 1 << 18;
        let starts: Vec<usize> = (0..6).map(|run| run_start(run, keys, n)).collect();
        assert_eq!(starts, vec![0, keys, 2 * keys, 3 * keys, 0, keys]);
        assert!(starts.iter().all(|s| s + keys <= n));
        assert_eq!(run_start(3, n, n), 0);
        // Keys that do not divide n still fit.
        let odd = 300_000;
        assert!((0..10).all(|run| run_start(run, odd, n) + odd <= n));
    }

    #[test]
    fn the_bound_counts_keys_answers_and_paging() {
        let bus = Bus {
            h2d: 50e9,
            d2h: 25e9,
        };
        let lookups = Crossing::host_lookups(1 << 20);
        assert_eq!(
            lookups,
            Crossing {
                up: 4.0 * (1 << 20) as f64,
                down: 5.0 * (1 << 20) as f64
            }
        );
        let expected = 4.0 * (1 << 20) as f64 / 50e9 + 5.0 * (1 << 20) as f64 / 25e9;
        assert!((lookups.bound_s(bus).unwrap() - expected).abs() < 1e-12);
        let stats = SwapStats {
            page_ins: 12,
            bytes_paged_in: 12 << 26,
            bytes_written_back: 3 << 26,
            ..SwapStats::default()
        };
        let paging = Crossing::paging(stats, 3);
        assert_eq!(
            paging,
            Crossing {
                up: (4u64 << 26) as f64,
                down: (1u64 << 26) as f64
            }
        );
        let both = Crossing::host_inserts(1 << 20).plus(paging);
        assert_eq!(both.up, 8.0 * (1 << 20) as f64 + (4u64 << 26) as f64);
        assert_eq!(both.down, (1u64 << 26) as f64);
        // Device buffers with nothing paged: no bound.
        assert_eq!(Crossing::default().bound_s(bus), None);
        assert!(Crossing::paging(stats, 0).up > 0.0);
    }

    #[test]
    fn the_crossover_interpolates_where_probing_falls_below_paging() {
        let xs = [10.0, 12.0, 14.0, 16.0];
        let probe = [10.0, 8.0, 6.0, 4.0];
        let page = [1.0, 4.0, 7.0, 10.0];
        let at = crossover(&xs, &probe, &page).unwrap();
        // 8 - 4 = 4 at 12, 6 - 7 = -1 at 14: zero at 12 + 2 * 4 / 5.
        assert!((at - 13.6).abs() < 1e-12, "{at}");
        assert_eq!(crossover(&xs, &page, &probe), Some(10.0));
        assert_eq!(crossover(&xs, &probe, &[0.0; 4]), None);
        assert_eq!(crossover(&[], &[], &[]), None);
    }

    #[test]
    fn the_models_crossover_in_batch_keys() {
        let model = CostModel::default();
        let image = 64 << 20;
        let per_child = model.crossover(64, image) as f64;
        let at = model_crossover_log2(&model, 64, image, 16).unwrap();
        assert!((at - (per_child * 16.0).log2()).abs() < 1e-12);
        let free_bus = CostModel {
            zero_copy_bytes_per_s: f64::INFINITY,
            ..model
        };
        assert_eq!(model_crossover_log2(&free_bus, 64, image, 16), None);
    }
}

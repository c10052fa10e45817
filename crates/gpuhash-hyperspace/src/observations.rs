//! What an index has seen, for its cost model and its regrouping: the query history of its
//! searches, and the population of its tuples (how many, and the distinct values of each
//! attribute). Pure host state, held by the index behind one lock and tested on the CPU.
//!
//! The population is an estimate, good enough to tell spaces apart, not a count:
//! - the tuple count adds the tuples each insert or build put in and takes away those each
//!   delete took out (its keys found, each once); a regroup, which reads the key index
//!   whole, sets it exactly, and a clear to 0;
//! - the distinct values of an attribute are a [`DistinctSketch`] of every value of the
//!   batches a build, an insert or a modify carried since the index was made or cleared
//!   (tuples an insert left alone as present and modifies of missing keys included: a
//!   batch is sketched beside its device work, before its answers are known). Sketches
//!   cannot forget: values since deleted or replaced still count, so the estimate is an
//!   upper bound of the values held (within the sketch's error: exact below
//!   [`SKETCH_HASHES`] distinct values, about 3% above). A skewed attribute counts its
//!   rare values like its frequent ones, so the cost model, which takes the tuples to
//!   spread evenly over the values, underestimates the chains of its frequent values;
//! - a failed batch adds nothing; a regroup's count is exact only while no write runs,
//!   which the regroup ensures.

use std::collections::HashSet;

use gpuhash_core::hash::fmix32;

use crate::cost::{DistinctSketch, PolicyError, Population};
use crate::history::QueryHistory;
use crate::regroup::RegroupPolicy;
use crate::shape::FieldSet;

/// Hashes each attribute's sketch keeps: exact below this many distinct values, about
/// `1 / sqrt(1024)` = 3% relative error above.
pub(crate) const SKETCH_HASHES: usize = 1024;

/// The query history and the population of an index.
#[derive(Clone, Debug)]
pub(crate) struct Observations {
    history: QueryHistory,
    sketches: Vec<DistinctSketch>,
    /// The tuple count and the sketches' estimates, kept up to date with them so that each
    /// search reads them at once.
    population: Population,
}

/// What a look at the history needs, taken when one is due.
#[derive(Clone, Debug)]
pub(crate) struct Advice {
    /// The history as it was when the look fell due, before the mark.
    pub(crate) history: QueryHistory,
    pub(crate) population: Population,
}

impl Observations {
    /// Nothing seen yet, of tuples of `attributes` attributes, the history's weights
    /// halving every `half_life` searches.
    pub(crate) fn new(attributes: usize, half_life: f64) -> Result<Self, PolicyError> {
        Ok(Self {
            history: QueryHistory::new(attributes, half_life)?,
            sketches: vec![DistinctSketch::new(SKETCH_HASHES); attributes],
            population: Population::uniform(0),
        })
    }

    pub(crate) fn history(&self) -> &QueryHistory {
        &self.history
    }

    pub(crate) fn population(&self) -> &Population {
        &self.population
    }

    /// Records one search for the fields each query of a batch names.
    pub(crate) fn record_searches(
        &mut self,
        named: impl IntoIterator<Item = FieldSet>,
    ) -> Result<(), PolicyError> {
        self.history.record_each(named)
    }

    /// When `policy` is due for a look at the history: the history and population to
    /// advise from, the history marked so that the next look falls due
    /// `check_every` searches later.
    pub(crate) fn advice_due(&mut self, policy: &RegroupPolicy) -> Option<Advice> {
        if !policy.due(&self.history) {
            return None;
        }
        let advice = Advice {
            history: self.history.clone(),
            population: self.population.clone(),
        };
        self.history.mark();
        Some(advice)
    }

    /// Counts `tuples` tuples put in and merges the sketches of the attribute values a
    /// write carried (one per attribute, or none).
    pub(crate) fn added(&mut self, tuples: u64, sketches: &[DistinctSketch]) {
        for (held, new) in self.sketches.iter_mut().zip(sketches) {
            held.merge(new);
        }
        self.population.tuples = self.population.tuples.saturating_add(tuples);
        self.refresh_distinct();
    }

    /// Counts `tuples` tuples taken out.
    pub(crate) fn removed(&mut self, tuples: u64) {
        self.population.tuples = self.population.tuples.saturating_sub(tuples);
    }

    /// Sets the tuple count to one known exactly.
    pub(crate) fn set_tuples(&mut self, tuples: u64) {
        self.population.tuples = tuples;
    }

    /// Forgets the tuples (not the searches).
    pub(crate) fn cleared(&mut self) {
        self.sketches
            .iter_mut()
            .for_each(|s| *s = DistinctSketch::new(SKETCH_HASHES));
        self.population = Population::uniform(0);
    }

    fn refresh_distinct(&mut self) {
        self.population = population_of(self.population.tuples, &self.sketches);
    }
}

/// `tuples` tuples whose attribute `i` takes the distinct values `sketches[i]` estimates
/// (unknown where the sketch is empty or missing).
pub(crate) fn population_of(tuples: u64, sketches: &[DistinctSketch]) -> Population {
    let mut population = Population::uniform(tuples);
    for (distinct, sketch) in population.distinct.iter_mut().zip(sketches) {
        *distinct = (!sketch.is_empty()).then(|| sketch.estimate());
    }
    population
}

/// A sketch of each attribute column of `n` tuples (`attributes` column-major, as
/// [`crate::TupleBatch`] holds them).
pub(crate) fn sketch_columns(attributes: &[u32], n: usize) -> Vec<DistinctSketch> {
    if n == 0 {
        return Vec::new();
    }
    attributes.chunks(n).map(sketch_column).collect()
}

/// A sketch of one column's values. A value the sketch took already changes nothing, so a
/// direct-mapped cache of the values added skips repeats before the sketch's ordered set
/// sees them: a column of few distinct values, whose every value the set would search (its
/// ceiling never set), then costs a hash and a compare a value. Where most values miss the
/// cache (many distinct values, most of which the sketch's ceiling turns away at once), the
/// cache only costs, so a chunk that misses more than a quarter of the time sends the next
/// ones straight to the sketch, the cache tried again every [`SEEN_RETRY`] chunks. On 2^24
/// values, 100 distinct took 0.5 s through the set alone and 15 ms so; 10^4, 130 and 45
/// ms; 10^5, about the same either way.
pub(crate) fn sketch_column(column: &[u32]) -> DistinctSketch {
    let mut sketch = DistinctSketch::new(SKETCH_HASHES);
    // u64 so that the empty mark lies outside the values.
    let mut added = vec![SEEN_EMPTY; 1 << SEEN_BITS];
    let mut cached = true;
    for (c, chunk) in column.chunks(SEEN_CHUNK).enumerate() {
        if !cached && c % SEEN_RETRY != 0 {
            sketch.extend(chunk.iter().copied());
            continue;
        }
        let mut missed = 0;
        for &value in chunk {
            let slot = (fmix32(value) >> (32 - SEEN_BITS)) as usize;
            if added[slot] != u64::from(value) {
                added[slot] = u64::from(value);
                sketch.insert(value);
                missed += 1;
            }
        }
        cached = missed <= chunk.len() / 4;
    }
    sketch
}

/// Pieces each of `columns` columns of `n` values is sketched in, on `threads` threads
/// together: the threads shared out, but no piece under [`SKETCH_PIECE_MIN`] values, whose
/// thread would cost more to start than it saves.
pub(crate) fn sketch_pieces(n: usize, columns: usize, threads: usize) -> usize {
    let by_threads = threads / columns.max(1);
    let by_size = n / SKETCH_PIECE_MIN;
    by_threads.min(by_size).max(1)
}

/// The fewest values [`sketch_pieces`] gives a piece.
const SKETCH_PIECE_MIN: usize = 1 << 20;

/// Slots of [`sketch_column`]'s cache of values added: 2^16 (512 KiB).
const SEEN_BITS: u32 = 16;
const SEEN_EMPTY: u64 = u64::MAX;
/// Values of a chunk, after which [`sketch_column`] decides whether the cache pays.
const SEEN_CHUNK: usize = 1 << 16;
/// Chunks between tries of the cache once it stopped paying.
const SEEN_RETRY: usize = 16;

/// Distinct keys of a batch that were found (`found[i]` for `keys[i]`): what a delete
/// took out when a key may repeat in its batch.
pub(crate) fn distinct_found(keys: &[u32], found: &[bool]) -> u64 {
    let found: HashSet<u32> = keys
        .iter()
        .zip(found)
        .filter(|&(_, &f)| f)
        .map(|(&k, _)| k)
        .collect();
    found.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regroup::RegroupOptions;
    use crate::shape::Field;

    fn attrs(list: &[u8]) -> FieldSet {
        FieldSet::of(list.iter().map(|&i| Field::Attribute(i)))
    }

    #[test]
    fn columns_are_cut_into_pieces_by_threads_and_size() {
        assert_eq!(sketch_pieces(1 << 24, 4, 16), 4);
        assert_eq!(sketch_pieces(1 << 24, 8, 16), 2);
        assert_eq!(sketch_pieces(1 << 24, 1, 16), 16);
        assert_eq!(
            sketch_pieces(1 << 21, 1, 16),
            2,
            "no piece under 2^20 values"
        );
        assert_eq!(sketch_pieces(1000, 4, 16), 1);
        assert_eq!(
            sketch_pieces(1 << 24, 16, 4),
            1,
            "fewer threads than columns"
        );
        assert_eq!(sketch_pieces(0, 0, 1), 1);
    }

    #[test]
    fn sketches_of_pieces_merge_into_the_sketch_of_the_whole() {
        for distinct in [100u32, 10_000, 1 << 22] {
            let column: Vec<u32> = (0..3u32 << 20).map(|i| fmix32(i) % distinct).collect();
            let whole = sketch_column(&column);
            let mut merged = DistinctSketch::new(SKETCH_HASHES);
            for piece in column.chunks(column.len().div_ceil(5)) {
                merged.merge(&sketch_column(piece));
            }
            assert_eq!(merged.estimate(), whole.estimate(), "{distinct} distinct");
        }
    }

    #[test]
    fn tuples_count_up_and_down_and_distinct_values_follow_the_sketches() {
        let mut seen = Observations::new(2, f64::INFINITY).unwrap();
        assert_eq!(seen.population(), &Population::uniform(0));
        // 3000 tuples: attribute 0 takes 40 values, attribute 1 one value.
        let n = 3000;
        let mut attributes: Vec<u32> = (0..n as u32).map(|i| i % 40).collect();
        attributes.extend(std::iter::repeat_n(7, n));
        seen.added(n as u64, &sketch_columns(&attributes, n));
        assert_eq!(seen.population().tuples, 3000);
        assert_eq!(seen.population().distinct[..3], [Some(40), Some(1), None]);
        seen.removed(1000);
        // A modify's values: no tuple more, values seen before count once.
        seen.added(0, &sketch_columns(&[39, 40, 7, 8], 2));
        assert_eq!(seen.population().tuples, 2000);
        assert_eq!(seen.population().distinct[..2], [Some(41), Some(2)]);
        seen.removed(5000);
        assert_eq!(seen.population().tuples, 0);
        seen.set_tuples(12);
        assert_eq!(seen.population().tuples, 12);
        seen.cleared();
        assert_eq!(seen.population(), &Population::uniform(0));
        assert_eq!(sketch_columns(&[], 0), Vec::new());
    }

    #[test]
    fn many_distinct_values_are_estimated_within_a_few_percent() {
        let mut seen = Observations::new(1, 1.0).unwrap();
        let column: Vec<u32> = (0..400_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        for half in column.chunks(200_000) {
            seen.added(half.len() as u64, &[sketch_column(half)]);
        }
        let estimate = seen.population().distinct[0].unwrap() as f64;
        assert!((estimate / 400_000.0 - 1.0).abs() < 0.1, "{estimate}");
    }

    #[test]
    fn the_cache_of_values_added_changes_no_sketch() {
        let plain = |column: &[u32]| {
            let mut sketch = DistinctSketch::new(SKETCH_HASHES);
            sketch.extend(column.iter().copied());
            sketch
        };
        // Few values, many values, values colliding in the cache, and the empty mark's
        // low word (u32::MAX is a value like any other).
        let few: Vec<u32> = (0..50_000u32).map(|i| fmix32(i) % 100).collect();
        let many: Vec<u32> = (0..50_000u32).map(|i| fmix32(i) % 20_000).collect();
        let mut colliding = Vec::new();
        for round in 0..20u32 {
            colliding.extend((0..5000u32).map(|i| i.wrapping_mul(7919) ^ (round % 3)));
        }
        let edges = vec![u32::MAX, 0, u32::MAX, 1, 0, u32::MAX];
        // Chunks that miss the cache, then chunks of few values: the cache stops, then
        // comes back.
        let mut shifting: Vec<u32> = (0..SEEN_CHUNK as u32 * 3).map(fmix32).collect();
        shifting.extend((0..SEEN_CHUNK as u32 * 40).map(|i| i % 50));
        for column in [few, many, colliding, edges, shifting] {
            assert_eq!(sketch_column(&column), plain(&column));
        }
    }

    #[test]
    fn searches_are_recorded_and_a_look_falls_due_every_check() {
        let mut seen = Observations::new(3, f64::INFINITY).unwrap();
        let policy = RegroupPolicy::new(
            3,
            RegroupOptions {
                check_every: 10,
                ..RegroupOptions::default()
            },
        )
        .unwrap();
        seen.record_searches([attrs(&[0, 2]); 6]).unwrap();
        assert!(seen.advice_due(&policy).is_none());
        seen.record_searches([attrs(&[1]), attrs(&[0, 2]), attrs(&[0, 2]), attrs(&[1])])
            .unwrap();
        let advice = seen.advice_due(&policy).expect("10 searches recorded");
        assert_eq!(advice.history.frequency(attrs(&[0, 2])), 8.0);
        assert_eq!(advice.history.recorded_since_mark(), 10);
        assert!(policy.due(&advice.history));
        // Marked: the next look is 10 searches away.
        assert!(seen.advice_due(&policy).is_none());
        assert_eq!(seen.history().recorded(), 10);
        // A set the tuples do not have records nothing.
        assert!(seen.record_searches([attrs(&[0]), attrs(&[3])]).is_err());
        assert_eq!(seen.history().recorded(), 10);
    }

    #[test]
    fn a_delete_takes_out_each_found_key_once() {
        let keys = [5, 9, 5, 7, 9, 9];
        let found = [true, true, true, false, true, true];
        assert_eq!(distinct_found(&keys, &found), 2);
        assert_eq!(distinct_found(&[], &[]), 0);
    }
}

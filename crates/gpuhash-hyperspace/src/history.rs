//! The query history: how often searches named each set of fields, recent searches
//! counting more.
//!
//! The GHSH paper (section 5) regroups the attribute subspaces from "historical query
//! records". This history keeps one weight per [`FieldSet`] a search can name (the key and
//! up to [`MAX_ATTRIBUTES`] attributes: 511 sets), so its memory is fixed whatever the
//! number of searches. Weights decay exponentially with the searches recorded since: a
//! search recorded `h` searches ago (`h` the half-life) counts half as much as one
//! recorded now. Decay by searches rather than by time keeps the history deterministic
//! and the same for the same stream of searches, however fast they come; unlike a
//! sliding window it needs no log of past searches.
//!
//! Recording is O(1): weights are kept scaled by a growing factor instead of all being
//! multiplied down at each search, and brought back to scale before the factor overflows.
//!
//! The history also counts searches since a mark, so that a caller can look at it every
//! so many searches ([`crate::regroup::RegroupPolicy::advise`] does).

use crate::cost::{PolicyError, check_attributes};
use crate::shape::{Field, FieldSet, MAX_ATTRIBUTES};

/// Field sets a history tracks: every mask of the key bit and [`MAX_ATTRIBUTES`] attribute bits.
const SETS: usize = 1 << (MAX_ATTRIBUTES + 1);

/// The scale factor is brought back to 1 past this.
const RESCALE_ABOVE: f64 = 1e100;

/// Decayed counts of the field sets searches named.
#[derive(Clone, Debug)]
pub struct QueryHistory {
    attributes: usize,
    half_life: f64,
    /// Weight of each set (indexed by its mask), times `scale`.
    scaled: Box<[f64; SETS]>,
    /// `2^(searches recorded / half_life)` since the last rescale.
    scale: f64,
    /// Searches recorded in all.
    recorded: u64,
    /// `recorded` at the last [`QueryHistory::mark`].
    marked: u64,
}

impl QueryHistory {
    /// An empty history of searches over tuples of `attributes` attributes, weights halving
    /// every `half_life` searches (positive; `f64::INFINITY` for plain counts).
    pub fn new(attributes: usize, half_life: f64) -> Result<QueryHistory, PolicyError> {
        check_attributes(attributes)?;
        if half_life.is_nan() || half_life <= 0.0 {
            return Err(PolicyError::Option {
                name: "half_life",
                value: half_life,
                range: "(0, inf]",
            });
        }
        Ok(QueryHistory {
            attributes,
            half_life,
            scaled: Box::new([0.0; SETS]),
            scale: 1.0,
            recorded: 0,
            marked: 0,
        })
    }

    /// Attributes of the tuples searched.
    pub fn attributes(&self) -> usize {
        self.attributes
    }

    /// Searches it takes for a weight to halve.
    pub fn half_life(&self) -> f64 {
        self.half_life
    }

    /// Whether `named` is a set a search can name: not empty, and only the key and
    /// attributes below [`QueryHistory::attributes`].
    pub fn check(&self, named: FieldSet) -> Result<(), PolicyError> {
        let valid = FieldSet::of(
            std::iter::once(Field::Key).chain((0..self.attributes as u8).map(Field::Attribute)),
        );
        if named.is_empty() || named.union(valid) != valid {
            return Err(PolicyError::FieldsOutOfRange {
                named,
                attributes: self.attributes,
            });
        }
        Ok(())
    }

    /// Records `count` searches naming `named` (at once: they decay the older weights, not
    /// each other). Fails, recording nothing, on a set [`QueryHistory::check`] refuses.
    pub fn record(&mut self, named: FieldSet, count: u64) -> Result<(), PolicyError> {
        self.check(named)?;
        self.add(&[(named, count)]);
        Ok(())
    }

    /// Records one search for each set of `named`, as one batch (they decay the older
    /// weights, not each other). Fails, recording nothing, if [`QueryHistory::check`]
    /// refuses any set.
    pub fn record_each(
        &mut self,
        named: impl IntoIterator<Item = FieldSet>,
    ) -> Result<(), PolicyError> {
        let mut counts = vec![0u64; SETS];
        for set in named {
            self.check(set)?;
            counts[usize::from(set.mask())] += 1;
        }
        let batch: Vec<(FieldSet, u64)> = counts
            .iter()
            .enumerate()
            .filter(|&(_, &count)| count > 0)
            .map(|(mask, &count)| (FieldSet::from_mask(mask as u16), count))
            .collect();
        self.add(&batch);
        Ok(())
    }

    /// Decays the weights by the batch's searches, then adds them at full weight.
    fn add(&mut self, batch: &[(FieldSet, u64)]) {
        let total: u64 = batch.iter().map(|&(_, count)| count).sum();
        if total == 0 {
            return;
        }
        let decay = (total as f64 / self.half_life).exp2();
        if self.scale * decay <= RESCALE_ABOVE {
            self.scale *= decay;
        } else {
            // Bring the weights to scale 1 and decay them (to 0 when far enough) in one go.
            let factor = 1.0 / (self.scale * decay);
            self.scaled.iter_mut().for_each(|w| *w *= factor);
            self.scale = 1.0;
        }
        for &(named, count) in batch {
            self.scaled[usize::from(named.mask())] += count as f64 * self.scale;
        }
        self.recorded = self.recorded.saturating_add(total);
    }

    /// The decayed weight of searches naming exactly `named` (0 for a set never recorded
    /// or not valid).
    pub fn frequency(&self, named: FieldSet) -> f64 {
        self.scaled
            .get(usize::from(named.mask()))
            .map_or(0.0, |w| w / self.scale)
    }

    /// The decayed weight of all searches.
    pub fn total(&self) -> f64 {
        self.scaled.iter().sum::<f64>() / self.scale
    }

    /// Each set with a positive weight and its weight, in the order of the sets' masks.
    pub fn frequencies(&self) -> Vec<(FieldSet, f64)> {
        self.scaled
            .iter()
            .enumerate()
            .filter(|&(_, &w)| w > 0.0)
            .map(|(mask, &w)| (FieldSet::from_mask(mask as u16), w / self.scale))
            .collect()
    }

    /// Searches recorded in all, undecayed.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Searches recorded since the last [`QueryHistory::mark`] (or since the start).
    pub fn recorded_since_mark(&self) -> u64 {
        self.recorded - self.marked
    }

    /// Starts counting [`QueryHistory::recorded_since_mark`] from now.
    pub fn mark(&mut self) {
        self.marked = self.recorded;
    }

    /// Forgets every search.
    pub fn clear(&mut self) {
        self.scaled.fill(0.0);
        self.scale = 1.0;
        self.recorded = 0;
        self.marked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn attrs(list: &[u8]) -> FieldSet {
        FieldSet::of(list.iter().map(|&i| Field::Attribute(i)))
    }

    #[test]
    fn counts_without_decay_are_plain_counts() {
        let mut history = QueryHistory::new(3, f64::INFINITY).unwrap();
        history.record(attrs(&[0]), 5).unwrap();
        history.record(attrs(&[0, 2]), 3).unwrap();
        history
            .record_each([attrs(&[0]), attrs(&[1]), attrs(&[0])])
            .unwrap();
        assert_eq!(history.frequency(attrs(&[0])), 7.0);
        assert_eq!(history.frequency(attrs(&[1])), 1.0);
        assert_eq!(history.frequency(attrs(&[0, 2])), 3.0);
        assert_eq!(history.frequency(attrs(&[2])), 0.0);
        assert_eq!(history.total(), 11.0);
        assert_eq!(history.recorded(), 11);
        assert_eq!(
            history.frequencies(),
            vec![
                (attrs(&[0]), 7.0),
                (attrs(&[1]), 1.0),
                (attrs(&[0, 2]), 3.0)
            ]
        );
    }

    #[test]
    fn weights_halve_every_half_life() {
        let mut history = QueryHistory::new(2, 100.0).unwrap();
        history.record(attrs(&[0]), 1).unwrap();
        history.record(attrs(&[1]), 100).unwrap();
        assert!((history.frequency(attrs(&[0])) - 0.5).abs() < 1e-12);
        history.record(attrs(&[1]), 200).unwrap();
        assert!((history.frequency(attrs(&[0])) - 0.125).abs() < 1e-12);
        assert!((history.frequency(attrs(&[1])) - (25.0 + 200.0)).abs() < 1e-9);
    }

    #[test]
    fn bad_sets_and_options_are_refused_and_change_nothing() {
        assert!(QueryHistory::new(0, 1.0).is_err());
        assert!(QueryHistory::new(MAX_ATTRIBUTES + 1, 1.0).is_err());
        assert!(QueryHistory::new(2, 0.0).is_err());
        assert!(QueryHistory::new(2, f64::NAN).is_err());
        let mut history = QueryHistory::new(2, 10.0).unwrap();
        history.record(attrs(&[1]), 4).unwrap();
        assert!(history.record(FieldSet::EMPTY, 1).is_err());
        assert!(history.record(attrs(&[2]), 1).is_err());
        assert!(history.record(FieldSet::from_mask(1 << 12), 1).is_err());
        assert!(history.record_each([attrs(&[0]), attrs(&[5])]).is_err());
        assert_eq!(history.recorded(), 4);
        assert_eq!(history.frequencies(), vec![(attrs(&[1]), 4.0)]);
        history.record(FieldSet::of([Field::Key]), 1).unwrap();
        history
            .record(FieldSet::of([Field::Key, Field::Attribute(1)]), 1)
            .unwrap();
    }

    #[test]
    fn marks_count_searches_since_and_clear_forgets() {
        let mut history = QueryHistory::new(1, 10.0).unwrap();
        history.record(attrs(&[0]), 7).unwrap();
        assert_eq!(history.recorded_since_mark(), 7);
        history.mark();
        history.record(attrs(&[0]), 2).unwrap();
        assert_eq!(history.recorded_since_mark(), 2);
        history.clear();
        assert_eq!((history.recorded(), history.total()), (0, 0.0));
    }

    #[test]
    fn long_streams_stay_finite() {
        let mut history = QueryHistory::new(2, 1.0).unwrap();
        for i in 0..10_000u64 {
            history.record(attrs(&[(i % 2) as u8]), 1 + i % 3).unwrap();
        }
        history.record(attrs(&[0]), u64::MAX / 2).unwrap();
        assert!(history.total().is_finite());
        assert!((history.frequency(attrs(&[0])) - (u64::MAX / 2) as f64).abs() < 1e6);
        assert_eq!(history.frequency(attrs(&[1])), 0.0);
    }

    quickcheck! {
        fn decayed_weights_match_the_direct_sum(stream: Vec<(u8, u8)>, half_life: u8) -> bool {
            let half_life = f64::from(half_life % 50 + 1);
            let mut history = QueryHistory::new(4, half_life).unwrap();
            for &(set, count) in &stream {
                history.record(attrs(&[set % 4]), u64::from(count)).unwrap();
            }
            // Weight of a batch: its count times 2^-(searches recorded after it / half-life).
            let mut expected = [0.0f64; 4];
            let mut after = 0u64;
            for &(set, count) in stream.iter().rev() {
                expected[usize::from(set % 4)] +=
                    f64::from(count) * (-(after as f64) / half_life).exp2();
                after += u64::from(count);
            }
            (0..4u8).all(|i| {
                let got = history.frequency(attrs(&[i]));
                (got - expected[usize::from(i)]).abs() <= 1e-9 * expected[usize::from(i)].max(1.0)
            })
        }
    }
}

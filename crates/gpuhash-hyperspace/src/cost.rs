//! The cost model: expected node reads of a search, pure arithmetic tested on the CPU.
//!
//! A search naming the fields `named` in a space visits
//! [`SpaceShape::buckets_touched`] buckets and reads the chain of one named field in each.
//! A chain holds [`SLOTS_PER_NODE`] tuples a node, so with `n` tuples spread evenly over the
//! `B` buckets of the space a search reads
//!
//! ```text
//! buckets_touched * max(1, ceil(n / (B * 31)))
//! ```
//!
//! nodes: at least one per bucket touched (its head), more when its chain is longer. This
//! is the model of the GHSH paper (section 3.1, `beta = ceil(n / (M B^(p+1)))` super nodes
//! a bucket) and what [`search_cost`] returns when nothing is known of the attributes'
//! values ([`Population::uniform`]).
//!
//! Tuples spread evenly only over coordinates their values reach: an attribute of 100
//! distinct values hashed to 10 coordinate bits fills about 100 of the 1024 coordinates,
//! and the bucket of one of them holds 1/100 of the tuples, not 1/1024. When the
//! [`Population`] knows an attribute's distinct values `d`, a dimension of `c`
//! coordinates is taken to fill `c (1 - e^(-d/c))` of them (balls into bins), and the
//! model becomes: the buckets touched hold `m = n / (product over named dimensions of their
//! filled coordinates)` tuples, spread over `o = min(touched, product over the free
//! dimensions of their filled coordinates, max(m, 1))` occupied buckets; a search reads one
//! node in each empty bucket touched and `max(1, ceil(m / (o * 31)))` in each occupied one.
//! With no distinct counts known it is exactly the formula above.
//!
//! Left out: the reads of matching lanes (key, value and other attribute nodes of the
//! super nodes holding matches). Every space stores every tuple, so every space returns
//! the same matches; those reads do not tell spaces apart.
//!
//! A space's coordinate bits come from the tuple count and a target chain length
//! ([`space_for`]): the fewest total bits whose buckets hold at most `target_chain_nodes`
//! nodes of tuples on average, dealt one at a time to the dimensions in order, skipping a
//! dimension once its bits cover its distinct values, so the bits spread evenly (the first
//! dimensions get one more when they do not divide) and none is wasted on coordinates no
//! value reaches. With the key spread ([`spread_key`]), the bits no attribute can use go
//! to the key, a last dimension: a search not naming the key touches all of its
//! coordinates ([`SpaceShape::buckets_touched`] counts them like any free dimension), and
//! the key itself has as many distinct values as tuples, so they all fill.

use std::collections::BTreeSet;

use gpuhash_core::hash::fmix64;

use crate::shape::{Field, FieldSet, MAX_ATTRIBUTES, MAX_SPACE_BITS, SpaceShape};

/// Tuple slots of one 128-byte node: 31 words, the 32nd lane holding the next pointer.
pub const SLOTS_PER_NODE: u64 = 31;

/// Bad input to the host policy (cost model, query history, regrouping). The index reports
/// it as [`gpuhash_core::table::ErrorKind::InvalidInput`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The attribute count is not in `1..=MAX_ATTRIBUTES`.
    #[error("a tuple has 1 to {MAX_ATTRIBUTES} attributes, not {0}")]
    AttributeCount(usize),
    /// A search named no field, or a field the tuples do not have.
    #[error(
        "a search names fields {named:?}, which are empty or not all among the key and {attributes} attributes"
    )]
    FieldsOutOfRange {
        /// The fields named.
        named: FieldSet,
        /// The tuples' attribute count.
        attributes: usize,
    },
    /// A number option is out of its range.
    #[error("option {name} is {value}, outside {range}")]
    Option {
        /// The option.
        name: &'static str,
        /// Its value.
        value: f64,
        /// The values it may take.
        range: &'static str,
    },
    /// No grouping meets the limits: `max_dimensions * max_subspaces < attributes`.
    #[error(
        "{attributes} attributes do not fit {max_subspaces} subspaces of at most {max_dimensions} dimensions"
    )]
    NoGrouping {
        /// The tuples' attribute count.
        attributes: usize,
        /// Most dimensions a subspace may have.
        max_dimensions: usize,
        /// Most attribute subspaces there may be.
        max_subspaces: usize,
    },
}

/// Checks that `attributes` is a valid attribute count.
pub(crate) fn check_attributes(attributes: usize) -> Result<(), PolicyError> {
    if (1..=MAX_ATTRIBUTES).contains(&attributes) {
        Ok(())
    } else {
        Err(PolicyError::AttributeCount(attributes))
    }
}

/// Checks that a number option lies in `range` (given in words for the error).
pub(crate) fn check_option(
    name: &'static str,
    value: f64,
    ok: bool,
    range: &'static str,
) -> Result<(), PolicyError> {
    if ok && value.is_finite() {
        Ok(())
    } else {
        Err(PolicyError::Option { name, value, range })
    }
}

/// What the cost model knows of the data: how many tuples, and where known, how many
/// distinct values each attribute takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Population {
    /// Tuples in the index.
    pub tuples: u64,
    /// Distinct values of attribute `i`, or `None` when unknown (taken to spread over every
    /// coordinate, the plain model); [`DistinctSketch`] estimates them.
    pub distinct: [Option<u64>; MAX_ATTRIBUTES],
}

impl Population {
    /// `tuples` tuples whose attributes spread over every coordinate.
    pub fn uniform(tuples: u64) -> Population {
        Population {
            tuples,
            distinct: [None; MAX_ATTRIBUTES],
        }
    }

    /// `tuples` tuples whose attribute `i` takes `distinct[i]` distinct values (attributes
    /// past `distinct.len()` unknown).
    pub fn with_distinct(tuples: u64, distinct: &[u64]) -> Population {
        let mut population = Population::uniform(tuples);
        for (slot, &d) in population.distinct.iter_mut().zip(distinct) {
            *slot = Some(d);
        }
        population
    }

    /// Distinct values of `field`: the tuple count for the key (keys are unique).
    pub fn distinct_of(&self, field: Field) -> Option<u64> {
        match field {
            Field::Key => Some(self.tuples),
            Field::Attribute(i) => self.distinct.get(usize::from(i)).copied().flatten(),
        }
    }

    /// Coordinates of a dimension on `field` with `bits` bits that the values are expected
    /// to fill: all `2^bits` when the distinct count is unknown, else `c (1 - e^(-d/c))`
    /// (at least 1).
    pub fn filled_coordinates(&self, field: Field, bits: u8) -> f64 {
        let coordinates = (1u64 << bits) as f64;
        match self.distinct_of(field) {
            None => coordinates,
            Some(d) => (coordinates * -(-(d as f64) / coordinates).exp_m1()).max(1.0),
        }
    }
}

/// An estimate of the distinct values of a column, for [`Population::distinct`]: the `k`
/// smallest 64-bit hashes of its values (a K-minimum-values sketch). Exact below `k`
/// distinct values, about `1 / sqrt(k)` relative error above; sketches of parts of a column
/// merge into the sketch of the whole, so a column can be sketched in parallel or from a
/// sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistinctSketch {
    k: usize,
    smallest: BTreeSet<u64>,
    /// The largest hash kept once `k` are kept (a hash at or above it changes nothing), so
    /// that most values cost a hash and a comparison.
    ceiling: Option<u64>,
}

impl DistinctSketch {
    /// An empty sketch keeping `k` hashes (at least 2).
    pub fn new(k: usize) -> DistinctSketch {
        DistinctSketch {
            k: k.max(2),
            smallest: BTreeSet::new(),
            ceiling: None,
        }
    }

    /// Adds a value.
    pub fn insert(&mut self, value: u32) {
        self.insert_hash(fmix64(u64::from(value) ^ 0x9e37_79b9_7f4a_7c15));
    }

    fn insert_hash(&mut self, hash: u64) {
        if self.ceiling.is_some_and(|ceiling| hash >= ceiling) {
            return;
        }
        if self.smallest.insert(hash) {
            self.keep_k();
        }
    }

    /// Drops the hashes past the `k` smallest and sets the ceiling.
    fn keep_k(&mut self) {
        while self.smallest.len() > self.k {
            self.smallest.pop_last();
        }
        self.ceiling = self
            .smallest
            .last()
            .copied()
            .filter(|_| self.smallest.len() == self.k);
    }

    /// Adds the values of another sketch (of the same `k`: the smaller one counts).
    pub fn merge(&mut self, other: &DistinctSketch) {
        self.k = self.k.min(other.k);
        self.keep_k();
        other.smallest.iter().for_each(|&h| self.insert_hash(h));
    }

    /// Whether no value was added.
    pub fn is_empty(&self) -> bool {
        self.smallest.is_empty()
    }

    /// Distinct values seen, estimated: exact below `k`, else `(k - 1) / (k-th smallest
    /// hash / 2^64)`.
    pub fn estimate(&self) -> u64 {
        match self.ceiling {
            None => self.smallest.len() as u64,
            Some(kth) => ((self.k - 1) as f64 * 2f64.powi(64) / (kth as f64 + 1.0)) as u64,
        }
    }
}

impl Extend<u32> for DistinctSketch {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, values: I) {
        values.into_iter().for_each(|v| self.insert(v));
    }
}

/// Chain nodes a bucket holds when `tuples` tuples spread evenly over `buckets` buckets:
/// `max(1, ceil(tuples / (buckets * 31)))`.
pub fn chain_nodes(tuples: f64, buckets: f64) -> f64 {
    (tuples / (buckets * SLOTS_PER_NODE as f64)).ceil().max(1.0)
}

/// Expected node reads of one search naming `named` in a space of shape `shape`, the
/// chain scan of the buckets it touches (see the module docs).
pub fn search_cost(shape: &SpaceShape, named: FieldSet, population: &Population) -> f64 {
    let touched = shape.buckets_touched(named) as f64;
    let mut named_share = 1.0;
    let mut free_filled = 1.0;
    for &(field, bits) in shape.dimensions() {
        let filled = population.filled_coordinates(field, bits);
        if named.contains(field) {
            named_share *= filled;
        } else {
            free_filled *= filled;
        }
    }
    let in_reach = population.tuples as f64 / named_share;
    let occupied = touched.min(free_filled).min(in_reach.max(1.0));
    (touched - occupied) + occupied * chain_nodes(in_reach, occupied)
}

/// The space a search naming `named` runs in, and its cost: a search naming the key runs
/// in the first space with the key as a dimension (the key index; keys are unique, so one
/// bucket answers it), any other in the space of least [`search_cost`], the first of
/// equals. `None` when there is no space (or none with the key, for a key search).
pub fn best_space(
    spaces: &[SpaceShape],
    named: FieldSet,
    population: &Population,
) -> Option<(usize, f64)> {
    let cost = |i: usize| (i, search_cost(&spaces[i], named, population));
    if named.contains(Field::Key) {
        return spaces
            .iter()
            .position(|space| space.fields().contains(Field::Key))
            .map(cost);
    }
    (0..spaces.len())
        .map(cost)
        .fold(None, |best: Option<(usize, f64)>, (i, c)| match best {
            Some((_, best_cost)) if best_cost <= c => best,
            _ => Some((i, c)),
        })
}

/// Frequency-weighted cost of answering `frequencies` (pairs of the fields a search names
/// and how often) with `spaces`, each search in its [`best_space`]. A search no space
/// answers costs infinity.
pub fn grouping_cost(
    frequencies: impl IntoIterator<Item = (FieldSet, f64)>,
    spaces: &[SpaceShape],
    population: &Population,
) -> f64 {
    frequencies
        .into_iter()
        .map(|(named, weight)| {
            let cost = best_space(spaces, named, population).map_or(f64::INFINITY, |(_, c)| c);
            weight * cost
        })
        .sum()
}

/// Total coordinate bits of a space for `population`: the fewest (at most
/// [`MAX_SPACE_BITS`]) whose buckets hold at most `target_chain_nodes` nodes of tuples on
/// average. `target_chain_nodes` must be positive and finite.
pub fn total_bits(population: &Population, target_chain_nodes: f64) -> Result<u32, PolicyError> {
    check_option(
        "target_chain_nodes",
        target_chain_nodes,
        target_chain_nodes > 0.0,
        "(0, inf)",
    )?;
    let per_bucket = SLOTS_PER_NODE as f64 * target_chain_nodes;
    let tuples = population.tuples as f64;
    Ok((0..MAX_SPACE_BITS)
        .find(|&bits| tuples <= per_bucket * (1u64 << bits) as f64)
        .unwrap_or(MAX_SPACE_BITS))
}

/// Bits a dimension on `field` needs to give each distinct value its own coordinate:
/// `ceil(log2(distinct))`, all of [`MAX_SPACE_BITS`] when unknown.
fn bits_cap(population: &Population, field: Field) -> u32 {
    population
        .distinct_of(field)
        .map_or(MAX_SPACE_BITS, |d| {
            u64::BITS - d.saturating_sub(1).leading_zeros()
        })
        .min(MAX_SPACE_BITS)
}

/// The space over `fields` (in this order) for `population` and a target chain length:
/// [`total_bits`] dealt by [`deal_bits`]. Fails on an empty or repeated field list or a
/// bad target.
pub fn space_for(
    fields: &[Field],
    population: &Population,
    target_chain_nodes: f64,
) -> Result<SpaceShape, PolicyError> {
    deal_bits(
        fields,
        total_bits(population, target_chain_nodes)?,
        population,
    )
}

/// The space over `fields` (in this order) with at most `total` coordinate bits (capped at
/// [`MAX_SPACE_BITS`]), dealt one at a time to the dimensions in order, a dimension skipped
/// once its bits cover its distinct values (see the module docs); bits no dimension can
/// use are left out. With no distinct count known this is an even split, the first
/// dimensions taking one more when the bits do not divide. Fails on an empty or repeated
/// field list.
pub fn deal_bits(
    fields: &[Field],
    total: u32,
    population: &Population,
) -> Result<SpaceShape, PolicyError> {
    let named = FieldSet::of(fields.iter().copied());
    if fields.is_empty() || named.len() as usize != fields.len() {
        return Err(PolicyError::FieldsOutOfRange {
            named,
            attributes: MAX_ATTRIBUTES,
        });
    }
    let caps: Vec<u32> = fields.iter().map(|&f| bits_cap(population, f)).collect();
    let mut bits = vec![0u32; fields.len()];
    let mut left = total.min(MAX_SPACE_BITS);
    while left > 0 {
        let before = left;
        for (b, &cap) in bits.iter_mut().zip(&caps) {
            if left > 0 && *b < cap {
                *b += 1;
                left -= 1;
            }
        }
        if left == before {
            break;
        }
    }
    let dimensions = fields
        .iter()
        .zip(bits)
        .map(|(&field, b)| (field, b as u8))
        .collect();
    Ok(SpaceShape::new(dimensions).expect("distinct fields and at most MAX_SPACE_BITS bits"))
}

/// `shape` with the key as one more, last, dimension taking the bits of `total` (capped
/// at [`MAX_SPACE_BITS`]) that `shape`'s dimensions leave (the key spread of
/// [`crate::HyperspaceOptions::key_spread`]); `shape` itself when none are left or it has
/// the key already. Keys are unique, so they fill every coordinate: tuples that a
/// low-cardinality attribute piles into few buckets spread over `2^k` times as many.
pub fn spread_key(shape: SpaceShape, total: u32) -> SpaceShape {
    let left = total.min(MAX_SPACE_BITS).saturating_sub(shape.total_bits());
    if left == 0 || shape.fields().contains(Field::Key) {
        return shape;
    }
    let mut dimensions = shape.dimensions().to_vec();
    dimensions.push((Field::Key, left as u8));
    SpaceShape::new(dimensions).expect("a new field and at most MAX_SPACE_BITS bits")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::attribute_dimensions;
    use quickcheck::{TestResult, quickcheck};

    fn attr(i: u8) -> Field {
        Field::Attribute(i)
    }

    fn shape(dims: &[(Field, u8)]) -> SpaceShape {
        SpaceShape::new(dims.to_vec()).expect("valid shape")
    }

    #[test]
    fn plain_model_is_buckets_touched_times_chain_nodes() {
        let space = shape(&[(attr(0), 5), (attr(1), 5)]);
        let population = Population::uniform(31 * 1024 * 3);
        // 1024 buckets of 3 nodes each.
        assert_eq!(
            search_cost(&space, FieldSet::of([attr(0)]), &population),
            32.0 * 3.0
        );
        assert_eq!(
            search_cost(&space, FieldSet::of([attr(0), attr(1)]), &population),
            3.0
        );
        assert_eq!(
            search_cost(&space, FieldSet::of([attr(2)]), &population),
            1024.0 * 3.0
        );
        // Fewer tuples than slots: one node a bucket touched.
        let sparse = Population::uniform(10);
        assert_eq!(search_cost(&space, FieldSet::of([attr(1)]), &sparse), 32.0);
        assert_eq!(
            search_cost(&space, FieldSet::EMPTY, &Population::uniform(0)),
            1024.0
        );
    }

    #[test]
    fn few_distinct_values_make_long_chains() {
        let single = shape(&[(attr(0), 10)]);
        let pair = shape(&[(attr(0), 5), (attr(2), 5)]);
        let n = 1 << 20;
        let population = Population::with_distinct(n, &[100, 100, 100]);
        let a0 = FieldSet::of([attr(0)]);
        let a0a2 = FieldSet::of([attr(0), attr(2)]);
        // 100 values fill ~100 of 1024 coordinates: a bucket holds about n / 100 tuples.
        let single_cost = search_cost(&single, a0a2, &population);
        let expected = (n as f64 / 95.5 / 31.0).ceil();
        assert!((single_cost - expected).abs() <= 2.0, "{single_cost}");
        // Two dimensions of 32 coordinates, each ~31 filled: the pair's bucket is ~1000x smaller.
        assert!(search_cost(&pair, a0a2, &population) * 8.0 < single_cost);
        // The uniform model sees no difference for the conjunction.
        let uniform = Population::uniform(n);
        assert_eq!(
            search_cost(&single, a0a2, &uniform),
            search_cost(&pair, a0a2, &uniform)
        );
        assert!(search_cost(&single, a0, &uniform) < search_cost(&pair, a0, &uniform));
    }

    #[test]
    fn key_searches_go_to_the_key_index_and_ties_to_the_first() {
        let key = shape(&[(Field::Key, 12)]);
        let a0 = shape(&[(attr(0), 12)]);
        let a0_again = shape(&[(attr(0), 12)]);
        let spaces = [a0, key, a0_again];
        let population = Population::uniform(1 << 16);
        let named = FieldSet::of([Field::Key, attr(0)]);
        assert_eq!(
            best_space(&spaces, named, &population).map(|b| b.0),
            Some(1)
        );
        let (space, _) = best_space(&spaces, FieldSet::of([attr(0)]), &population).unwrap();
        assert_eq!(space, 0);
        assert_eq!(
            best_space(&spaces[..1], FieldSet::of([Field::Key]), &population),
            None
        );
        assert_eq!(best_space(&[], FieldSet::of([attr(0)]), &population), None);
        let weighted = grouping_cost(
            [
                (FieldSet::of([attr(0)]), 2.0),
                (FieldSet::of([attr(1)]), 1.0),
            ],
            &spaces,
            &population,
        );
        // 2 searches of one bucket and 1 of all 4096, chains of ceil(16 / 31) = 1 node.
        assert_eq!(weighted, 2.0 + 4096.0);
    }

    #[test]
    fn bits_follow_the_target_and_spread_evenly() {
        let population = Population::uniform(31 * 1000);
        assert_eq!(total_bits(&population, 1.0), Ok(10));
        assert_eq!(total_bits(&population, 0.5), Ok(11));
        assert_eq!(total_bits(&Population::uniform(0), 1.0), Ok(0));
        assert_eq!(
            total_bits(&Population::uniform(u64::MAX), 1.0),
            Ok(MAX_SPACE_BITS)
        );
        assert!(total_bits(&population, 0.0).is_err());
        assert!(total_bits(&population, f64::NAN).is_err());
        let space = space_for(&[attr(2), attr(0), attr(1)], &population, 1.0).unwrap();
        assert_eq!(
            space.dimensions(),
            &[(attr(2), 4), (attr(0), 3), (attr(1), 3)]
        );
        // A dimension of 5 distinct values stops at 3 bits; the others take the rest.
        let skewed = Population::with_distinct(31 * 1000, &[5]);
        let space = space_for(&[attr(0), attr(1)], &skewed, 1.0).unwrap();
        assert_eq!(space.dimensions(), &[(attr(0), 3), (attr(1), 7)]);
        // Every dimension capped: fewer bits in all.
        let tiny = Population::with_distinct(31 * 1000, &[2, 1]);
        let space = space_for(&[attr(0), attr(1)], &tiny, 1.0).unwrap();
        assert_eq!(space.dimensions(), &[(attr(0), 1), (attr(1), 0)]);
        assert!(space_for(&[], &population, 1.0).is_err());
        assert!(space_for(&[attr(0), attr(0)], &population, 1.0).is_err());
    }

    #[test]
    fn sketches_count_distinct_values() {
        let mut small = DistinctSketch::new(256);
        small.extend((0..10_000u32).map(|i| i % 200));
        assert_eq!(small.estimate(), 200);
        let mut large = DistinctSketch::new(1024);
        large.extend((0..1_000_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 100_000));
        let estimate = large.estimate() as f64;
        assert!((estimate / 100_000.0 - 1.0).abs() < 0.1, "{estimate}");
        // Halves sketched apart merge into the sketch of the whole.
        let (mut left, mut right, mut whole) = (
            DistinctSketch::new(64),
            DistinctSketch::new(64),
            DistinctSketch::new(64),
        );
        left.extend(0..5000);
        right.extend(3000..9000);
        whole.extend(0..9000);
        left.merge(&right);
        assert_eq!(left, whole);
        assert_eq!(DistinctSketch::new(0).estimate(), 0);
    }

    #[test]
    fn the_key_takes_the_bits_low_cardinality_attributes_leave() {
        // 2^24 tuples, chains of one node: 20 bits. 100 values use 7, the key the other 13.
        let population = Population::with_distinct(1 << 24, &[100, 1_000_000]);
        let total = total_bits(&population, 1.0).unwrap();
        assert_eq!(total, 20);
        let a0 = deal_bits(&[attr(0)], total, &population).unwrap();
        assert_eq!(a0.dimensions(), &[(attr(0), 7)]);
        let spread = spread_key(a0, total);
        assert_eq!(spread.dimensions(), &[(attr(0), 7), (Field::Key, 13)]);
        // An attribute that can use every bit leaves the key none: no key dimension.
        let a1 = deal_bits(&[attr(1)], total, &population).unwrap();
        assert_eq!(spread_key(a1.clone(), total), a1);
        // Two attributes share the bits up to their caps before the key gets any.
        let both = deal_bits(&[attr(0), attr(1)], total, &population).unwrap();
        assert_eq!(both.dimensions(), &[(attr(0), 7), (attr(1), 13)]);
        assert_eq!(spread_key(both.clone(), total), both);
        // Unknown distinct values: an even split, nothing left to the key.
        let unknown = Population::uniform(1 << 24);
        let even = deal_bits(&[attr(0), attr(1), attr(2)], 20, &unknown).unwrap();
        assert_eq!(
            even.dimensions(),
            &[(attr(0), 7), (attr(1), 7), (attr(2), 6)]
        );
        assert_eq!(spread_key(even.clone(), 20), even);
        // A constant attribute gets no bit at all; the key every one.
        let constant = Population::with_distinct(1000, &[1]);
        let shape = spread_key(deal_bits(&[attr(0)], 9, &constant).unwrap(), 9);
        assert_eq!(shape.dimensions(), &[(attr(0), 0), (Field::Key, 9)]);
        assert!(deal_bits(&[], 9, &constant).is_err());
        assert!(deal_bits(&[attr(0), attr(0)], 9, &constant).is_err());
    }

    #[test]
    fn searches_not_naming_the_key_touch_every_key_coordinate() {
        let key_index = shape(&[(Field::Key, 20)]);
        let plain = shape(&[(attr(0), 20)]);
        let spread = shape(&[(attr(0), 7), (Field::Key, 13)]);
        let population = Population::with_distinct(1 << 24, &[100]);
        let a0 = FieldSet::of([attr(0)]);
        assert_eq!(spread.buckets_touched(a0), 1 << 13);
        // 100 values over 2^20 coordinates: one bucket of 2^24 / 100 tuples, ~5400 nodes.
        let plain_cost = search_cost(&plain, a0, &population);
        assert!(plain_cost > 5000.0, "{plain_cost}");
        // Over 2^7 coordinates ~ 70 fill, each a slice of 2^13 buckets of ~29 tuples: 1
        // node each, 8192 in all.
        let spread_cost = search_cost(&spread, a0, &population);
        assert!(
            (8192.0..8192.0 * 2.0).contains(&spread_cost),
            "{spread_cost}"
        );
        // Key searches still go to the key index, attribute ones to the subspace.
        let spaces = [key_index, spread];
        let key = FieldSet::of([Field::Key]);
        assert_eq!(best_space(&spaces, key, &population).map(|b| b.0), Some(0));
        let key_a0 = FieldSet::of([Field::Key, attr(0)]);
        assert_eq!(
            best_space(&spaces, key_a0, &population).map(|b| b.0),
            Some(0)
        );
        assert_eq!(best_space(&spaces, a0, &population).map(|b| b.0), Some(1));
    }

    quickcheck! {
        fn cost_is_monotone_in_touched_buckets(bits: Vec<u8>, a: u16, b: u16, n: u32) -> TestResult {
            let dims = attribute_dimensions(&bits, 4, 7);
            let space = SpaceShape::new(dims).expect("at most 24 bits");
            let (a, b) = (FieldSet::from_mask(a & 0x1e), FieldSet::from_mask(b & 0x1e));
            let population = Population::uniform(u64::from(n));
            let (touched_a, touched_b) = (space.buckets_touched(a), space.buckets_touched(b));
            if touched_a > touched_b {
                return TestResult::discard();
            }
            let (cost_a, cost_b) =
                (search_cost(&space, a, &population), search_cost(&space, b, &population));
            TestResult::from_bool(cost_a <= cost_b && cost_a >= touched_a as f64)
        }

        fn naming_more_fields_never_costs_more(bits: Vec<u8>, a: u16, extra: u16, n: u32, distinct: Vec<u32>) -> bool {
            let dims = attribute_dimensions(&bits, 4, 7);
            let space = SpaceShape::new(dims).expect("at most 24 bits");
            let distinct: Vec<u64> = distinct.iter().map(|&d| u64::from(d) + 1).collect();
            let population = Population::with_distinct(u64::from(n), &distinct);
            let a = FieldSet::from_mask(a & 0x1e);
            let more = a.union(FieldSet::from_mask(extra & 0x1e));
            search_cost(&space, more, &population) <= search_cost(&space, a, &population) * (1.0 + 1e-9)
        }

        fn more_tuples_never_cost_less(bits: Vec<u8>, named: u16, n: u32, more: u32) -> bool {
            let dims = attribute_dimensions(&bits, 4, 7);
            let space = SpaceShape::new(dims).expect("at most 24 bits");
            let named = FieldSet::from_mask(named & 0x1e);
            let small = Population::uniform(u64::from(n));
            let large = Population::uniform(u64::from(n) + u64::from(more));
            search_cost(&space, named, &small) <= search_cost(&space, named, &large)
        }

        fn spread_spaces_use_every_bit_and_cap_attributes(
            total: u8,
            dims: u8,
            distinct: Vec<u32>,
            tuples: u32
        ) -> bool {
            let total = u32::from(total % 34);
            let fields: Vec<Field> = (0..dims % 8 + 1).map(attr).collect();
            let distinct: Vec<u64> = distinct.iter().map(|&d| u64::from(d % 5000)).collect();
            let population = Population::with_distinct(u64::from(tuples), &distinct);
            let dealt = deal_bits(&fields, total, &population).unwrap();
            let spread = spread_key(dealt.clone(), total);
            let capped = dealt.dimensions().iter().all(|&(f, b)| {
                population
                    .distinct_of(f)
                    .is_none_or(|d| (1u64 << b) < d.max(1) * 2)
            });
            let key_bits = u32::from(spread.total_bits() > dealt.total_bits()) ;
            spread.total_bits() == total.min(MAX_SPACE_BITS)
                && spread.dimensions()[..fields.len()] == dealt.dimensions()[..]
                && spread.dimensions().len() == fields.len() + key_bits as usize
                && spread.dimensions().last().is_some_and(|&(f, _)| (f == Field::Key) == (key_bits == 1))
                && capped
        }

        fn spaces_meet_their_target(n: u32, dims: u8, target: u8) -> bool {
            let fields: Vec<Field> = (0..dims % 8 + 1).map(attr).collect();
            let target = f64::from(target % 8 + 1) / 4.0;
            let population = Population::uniform(u64::from(n));
            let space = space_for(&fields, &population, target).unwrap();
            let bits: Vec<u8> = space.dimensions().iter().map(|d| d.1).collect();
            let spread = bits.iter().max().unwrap() - bits.iter().min().unwrap();
            let mean_nodes = f64::from(n) / (space.bucket_count() as f64 * 31.0);
            spread <= 1
                && bits.windows(2).all(|w| w[0] >= w[1])
                && (mean_nodes <= target || space.total_bits() == MAX_SPACE_BITS)
                && (space.total_bits() == 0 || mean_nodes * 2.0 > target)
        }
    }
}

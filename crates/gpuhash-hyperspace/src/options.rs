//! [`HyperspaceOptions`], and the shapes of the spaces they give: pure host functions,
//! tested on the CPU.

use gpuhash_slab_alloc::Variant;

use crate::cost::{Population, deal_bits, spread_key};
use crate::regroup::RegroupOptions;
use crate::shape::{Field, MAX_ATTRIBUTES, MAX_SPACE_BITS, SpaceShape};
use crate::{HyperspaceError, Result};

/// How attributes are grouped into subspaces, beside the key index (whose only dimension
/// is the key, and which never changes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Subspaces {
    /// One one-dimensional subspace per attribute: a search naming any attribute touches
    /// one bucket of that attribute's subspace.
    #[default]
    EachAttribute,
    /// Attributes two by two, (A1, A2), (A3, A4), ... (the last alone when p is odd): half
    /// the memory of [`Subspaces::EachAttribute`]; a search naming both attributes of a
    /// pair touches one bucket, one naming a single attribute the buckets of the other's
    /// coordinates.
    Pairs,
    /// Subspaces of the given attributes (0-based), each a group of distinct attributes.
    Groups(Vec<Vec<u8>>),
    /// Subspaces of exactly these shapes, coordinate bits included (attribute dimensions,
    /// at least one, and the key only as the last dimension): what
    /// [`crate::regroup::RegroupPolicy`] chooses, which sizes each space from the tuples
    /// held and the distinct values of its attributes. The other variants take their bits
    /// from [`HyperspaceOptions::bits_for`] (see [`HyperspaceOptions`]).
    Shapes(Vec<SpaceShape>),
}

/// How a search batch's subtasks (a query and one bucket it touches) are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchStrategy {
    /// Warp pre-combination data sharing (the GHSH paper, section 4.1.1): subtasks sorted
    /// by bucket, a warp serves every subtask of one bucket together, reading each node
    /// once for all of them.
    #[default]
    Grouped,
    /// Warp-cooperative work sharing (the SlabHash paper): a warp serves its subtasks one at
    /// a time, each walking its bucket. The baseline of the paper's ablation.
    OneAtATime,
}

/// Options of a [`crate::HyperspaceIndex`], by setters on the default.
///
/// # Coordinate bits
///
/// Every space has [`HyperspaceOptions::bits_for`] coordinate bits in all, from the
/// capacity (or the tuples held, at a regroup). The key index gives them all to the key.
/// An attribute subspace deals them one at a time to its attributes in order
/// ([`crate::cost::deal_bits`]); with [`HyperspaceOptions::key_spread`] on (the default),
/// an attribute whose distinct values `d` are known takes at most `ceil(log2(d))` (one
/// coordinate per value: more would only leave coordinates empty), and the key, one more
/// dimension after the attributes, takes the rest ([`crate::cost::spread_key`]). Keys
/// are unique, so the key dimension spreads a bucket that a low-cardinality attribute
/// fills (100 values: 100 buckets of `n / 100` tuples) over `2^k` buckets of short
/// chains; a search naming attributes only touches all `2^k` key coordinates (`2^k`
/// subtasks, in parallel warps), and an insert, modify or delete, which knows every field
/// of the tuple, still finds its bucket, and a tuple's old copy, in one short chain.
///
/// Where the distinct values come from: an index made by [`crate::HyperspaceIndex::new`]
/// knows none, so its attributes split the bits evenly as in the GHSH paper and no key
/// dimension is added (its subspaces are the paper's until a regroup);
/// [`crate::HyperspaceIndex::build`] sketches the batch's columns before it sizes the
/// spaces, and a regroup uses the index's estimates ([`crate::cost::Population`]), so
/// those give the key the bits past what the attributes can use. Subspaces given whole
/// ([`Subspaces::Shapes`]) keep their dimensions, a key dimension included.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperspaceOptions {
    /// The attribute subspaces.
    pub subspaces: Subspaces,
    /// Tuples a bucket is sized for at the capacity the index is made with (32 by default,
    /// about one super node): each space gets `ceil(log2(capacity / bucket_tuples))`
    /// coordinate bits, dealt over its dimensions as [`HyperspaceOptions`] says.
    pub bucket_tuples: u32,
    /// Coordinate bits of every space, overriding `bucket_tuples`.
    pub space_bits: Option<u32>,
    /// How searches are served.
    pub search: SearchStrategy,
    /// Whether attribute subspaces take the key as a last dimension, with the coordinate
    /// bits their attributes cannot use (see [`HyperspaceOptions`]); on by default, off for the
    /// GHSH paper's subspaces.
    pub key_spread: bool,
    /// The slab allocators' addressing.
    pub variant: Variant,
    /// Seeds the coordinate hashes.
    pub seed: u32,
    /// The limits of the subspaces [`crate::HyperspaceIndex::regroup_from_history`] and
    /// adaptive regrouping choose, and how often the latter looks at the query history.
    pub regrouping: RegroupOptions,
    /// Whether searches regroup the subspaces by themselves
    /// ([`HyperspaceOptions::adaptive`]).
    pub adaptive: bool,
    /// Searches after which a search's weight in the index's query history halves; `None`
    /// (the default): `regrouping.check_every` searches, so that each look of adaptive
    /// regrouping weighs the searches since the last look about as much as all before.
    pub history_half_life: Option<f64>,
    /// Tuples deleted or modified (through the host forms and the device forms of
    /// delete and modify, which count what they found) after which the index reclaims
    /// its removed slots by itself ([`crate::HyperspaceIndex::reclaim`]); `None` (the
    /// default): a quarter of the capacity the index was made for, at least 4096;
    /// `Some(0)`: never by itself.
    pub reclaim_after: Option<u64>,
}

impl Default for HyperspaceOptions {
    fn default() -> Self {
        Self {
            subspaces: Subspaces::EachAttribute,
            bucket_tuples: 32,
            space_bits: None,
            search: SearchStrategy::Grouped,
            key_spread: true,
            variant: Variant::Regular,
            seed: 0x5eed_0001,
            regrouping: RegroupOptions::default(),
            adaptive: false,
            history_half_life: None,
            reclaim_after: None,
        }
    }
}

impl HyperspaceOptions {
    /// These options with `subspaces`.
    pub fn subspaces(mut self, subspaces: Subspaces) -> Self {
        self.subspaces = subspaces;
        self
    }

    /// These options with buckets sized for `tuples` tuples each.
    pub fn bucket_tuples(mut self, tuples: u32) -> Self {
        self.bucket_tuples = tuples;
        self
    }

    /// These options with `bits` coordinate bits in every space.
    pub fn space_bits(mut self, bits: u32) -> Self {
        self.space_bits = Some(bits);
        self
    }

    /// These options with searches served by `strategy`.
    pub fn search(mut self, strategy: SearchStrategy) -> Self {
        self.search = strategy;
        self
    }

    /// These options with the key spread on or off (see [`HyperspaceOptions`]): `false` gives
    /// the GHSH paper's subspaces, attributes alone.
    pub fn key_spread(mut self, key_spread: bool) -> Self {
        self.key_spread = key_spread;
        self
    }

    /// These options with the allocators' `variant`.
    pub fn variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// These options with `seed`.
    pub fn seed(mut self, seed: u32) -> Self {
        self.seed = seed;
        self
    }

    /// These options with `regrouping` as the limits of the subspaces chosen from the query
    /// history (whether searches regroup by themselves stays as it was).
    pub fn regrouping(mut self, regrouping: RegroupOptions) -> Self {
        self.regrouping = regrouping;
        self
    }

    /// These options with adaptive regrouping: every `regrouping.check_every` searches (of
    /// all threads together), the search that reaches the count asks
    /// [`crate::regroup::RegroupPolicy::advise`] whether the subspaces should change and,
    /// when it proposes new ones, regroups to them after its own batch, on its thread
    /// (other searches go on meanwhile; writes wait).
    pub fn adaptive(mut self, regrouping: RegroupOptions) -> Self {
        self.regrouping = regrouping;
        self.adaptive = true;
        self
    }

    /// These options with the query history's weights halving every `searches` searches
    /// (`f64::INFINITY` for plain counts).
    pub fn history_half_life(mut self, searches: f64) -> Self {
        self.history_half_life = Some(searches);
        self
    }

    /// These options with removed slots reclaimed by the index itself after `tuples`
    /// deletes and modifies (0: only when [`crate::HyperspaceIndex::reclaim`] is called).
    pub fn reclaim_after(mut self, tuples: u64) -> Self {
        self.reclaim_after = Some(tuples);
        self
    }

    /// The query history's half-life, in searches.
    pub fn half_life(&self) -> f64 {
        self.history_half_life
            .unwrap_or(self.regrouping.check_every.max(1) as f64)
    }

    /// Coordinate bits of every space for an index made for `capacity` tuples.
    pub fn bits_for(&self, capacity: u64) -> Result<u32> {
        if let Some(bits) = self.space_bits {
            return if bits <= MAX_SPACE_BITS {
                Ok(bits)
            } else {
                Err(HyperspaceError::Options(format!(
                    "{bits} coordinate bits, past {MAX_SPACE_BITS}"
                )))
            };
        }
        if self.bucket_tuples == 0 {
            return Err(HyperspaceError::Options(
                "buckets sized for no tuple".into(),
            ));
        }
        let buckets = capacity.div_ceil(u64::from(self.bucket_tuples)).max(1);
        Ok(buckets
            .next_power_of_two()
            .trailing_zeros()
            .min(MAX_SPACE_BITS))
    }

    /// The shapes of the spaces of an index of `p` attributes made for `capacity` tuples
    /// whose attributes' distinct values are unknown: the key index first, then the
    /// attribute subspaces.
    pub fn shapes(&self, p: usize, capacity: u64) -> Result<Vec<SpaceShape>> {
        self.shapes_for(p, capacity, &Population::uniform(capacity))
    }

    /// The shapes of the spaces of an index of `p` attributes made for `capacity` tuples
    /// whose attributes take the distinct values `population` knows (see [`HyperspaceOptions`]
    /// for the bits rule): the key index first, then the attribute subspaces.
    pub fn shapes_for(
        &self,
        p: usize,
        capacity: u64,
        population: &Population,
    ) -> Result<Vec<SpaceShape>> {
        if !(1..=MAX_ATTRIBUTES).contains(&p) {
            return Err(HyperspaceError::Options(format!(
                "{p} attributes: an index has 1 to {MAX_ATTRIBUTES}"
            )));
        }
        let bits = self.bits_for(capacity)?;
        let key_index = SpaceShape::new(vec![(Field::Key, bits as u8)]).expect("bits checked");
        let mut shapes = vec![key_index];
        let groups: Vec<Vec<u8>> = match &self.subspaces {
            Subspaces::EachAttribute => (0..p as u8).map(|a| vec![a]).collect(),
            Subspaces::Pairs => (0..p as u8)
                .step_by(2)
                .map(|a| (a..(a + 2).min(p as u8)).collect())
                .collect(),
            Subspaces::Groups(groups) => groups.clone(),
            Subspaces::Shapes(given) => {
                for shape in given {
                    check_subspace(shape, p)?;
                }
                shapes.extend(given.iter().cloned());
                return Ok(shapes);
            }
        };
        for group in groups {
            if let Some(&a) = group.iter().find(|&&a| usize::from(a) >= p) {
                return Err(HyperspaceError::Options(format!(
                    "a subspace names attribute {a} of an index of {p}"
                )));
            }
            let fields: Vec<Field> = group.iter().map(|&a| Field::Attribute(a)).collect();
            shapes.push(self.subspace(&fields, bits, population)?);
        }
        Ok(shapes)
    }

    /// The subspace over the attributes `fields` with `bits` coordinate bits: dealt evenly,
    /// or, with the key spread, as [`HyperspaceOptions`] says.
    fn subspace(&self, fields: &[Field], bits: u32, population: &Population) -> Result<SpaceShape> {
        let unknown = Population::uniform(population.tuples);
        let known = if self.key_spread {
            population
        } else {
            &unknown
        };
        let shape = deal_bits(fields, bits, known).map_err(|_| {
            HyperspaceError::Options(format!("an empty subspace or a repeated field: {fields:?}"))
        })?;
        Ok(if self.key_spread {
            spread_key(shape, bits)
        } else {
            shape
        })
    }
}

/// Checks a subspace given whole: attributes of an index of `p` (at least one), the key
/// only as the last dimension.
fn check_subspace(shape: &SpaceShape, p: usize) -> Result<()> {
    let dimensions = shape.dimensions();
    let last = dimensions.len().saturating_sub(1);
    let fault = dimensions
        .iter()
        .enumerate()
        .find(|&(d, &(field, _))| match field {
            Field::Key => d != last,
            Field::Attribute(a) => usize::from(a) >= p,
        });
    if let Some((_, &(field, _))) = fault {
        return Err(HyperspaceError::Options(format!(
            "a subspace of an index of {p} attributes has {field:?} as a dimension there"
        )));
    }
    if !dimensions.iter().any(|&(field, _)| field != Field::Key) {
        return Err(HyperspaceError::Options(
            "a subspace without an attribute".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_the_capacity_over_the_bucket_size() {
        let options = HyperspaceOptions::default();
        assert_eq!(options.bits_for(0).unwrap(), 0);
        assert_eq!(options.bits_for(32).unwrap(), 0);
        assert_eq!(options.bits_for(33).unwrap(), 1);
        assert_eq!(options.bits_for(1 << 24).unwrap(), 19);
        assert_eq!(options.bits_for(u64::MAX).unwrap(), MAX_SPACE_BITS);
        assert_eq!(options.clone().space_bits(7).bits_for(1 << 30).unwrap(), 7);
        assert!(options.clone().space_bits(31).bits_for(1).is_err());
        assert!(options.bucket_tuples(0).bits_for(1).is_err());
    }

    #[test]
    fn default_subspaces_are_one_attribute_each_after_the_key_index() {
        let shapes = HyperspaceOptions::default()
            .space_bits(10)
            .shapes(3, 0)
            .unwrap();
        assert_eq!(shapes.len(), 4);
        assert_eq!(shapes[0].dimensions(), &[(Field::Key, 10)]);
        assert_eq!(shapes[2].dimensions(), &[(Field::Attribute(1), 10)]);
    }

    #[test]
    fn pairs_split_bits_and_leave_an_odd_attribute_alone() {
        let shapes = HyperspaceOptions::default()
            .space_bits(11)
            .subspaces(Subspaces::Pairs)
            .shapes(3, 0)
            .unwrap();
        assert_eq!(
            shapes[1].dimensions(),
            &[(Field::Attribute(0), 6), (Field::Attribute(1), 5)]
        );
        assert_eq!(shapes[2].dimensions(), &[(Field::Attribute(2), 11)]);
    }

    #[test]
    fn bad_options_are_refused() {
        let options = HyperspaceOptions::default();
        assert!(options.shapes(0, 10).is_err());
        assert!(options.shapes(9, 10).is_err());
        let past_p = options
            .clone()
            .subspaces(Subspaces::Groups(vec![vec![0, 3]]));
        assert!(past_p.shapes(3, 10).is_err());
        let repeated = options
            .clone()
            .subspaces(Subspaces::Groups(vec![vec![1, 1]]));
        assert!(repeated.shapes(3, 10).is_err());
        let empty = options.clone().subspaces(Subspaces::Groups(vec![vec![]]));
        assert!(empty.shapes(3, 10).is_err());
        let shape = |dimensions| Subspaces::Shapes(vec![SpaceShape::new(dimensions).unwrap()]);
        for bad in [
            shape(vec![]),
            shape(vec![(Field::Key, 3)]),
            shape(vec![(Field::Attribute(0), 3), (Field::Attribute(3), 2)]),
        ] {
            assert!(options.clone().subspaces(bad).shapes(3, 10).is_err());
        }
    }

    #[test]
    fn given_shapes_keep_their_bits() {
        let given = vec![
            SpaceShape::new(vec![(Field::Attribute(2), 3), (Field::Attribute(0), 9)]).unwrap(),
            SpaceShape::new(vec![(Field::Attribute(1), 0)]).unwrap(),
        ];
        let shapes = HyperspaceOptions::default()
            .space_bits(14)
            .subspaces(Subspaces::Shapes(given.clone()))
            .shapes(3, 0)
            .unwrap();
        assert_eq!(shapes[0].dimensions(), &[(Field::Key, 14)]);
        assert_eq!(&shapes[1..], &given[..]);
    }

    #[test]
    fn the_key_spread_gives_the_key_the_bits_attributes_cannot_use() {
        let options = HyperspaceOptions::default().space_bits(19);
        assert!(options.key_spread);
        // A0 of 100 values uses 7 bits, A1 unknown all 19, A2 of a million values all 19.
        let mut population = Population::with_distinct(1 << 24, &[100, 0, 1_000_000]);
        population.distinct[1] = None;
        let shapes = options.shapes_for(3, 1 << 24, &population).unwrap();
        assert_eq!(shapes[0].dimensions(), &[(Field::Key, 19)]);
        assert_eq!(
            shapes[1].dimensions(),
            &[(Field::Attribute(0), 7), (Field::Key, 12)]
        );
        assert_eq!(shapes[2].dimensions(), &[(Field::Attribute(1), 19)]);
        assert_eq!(shapes[3].dimensions(), &[(Field::Attribute(2), 19)]);
        // Pairs share the bits up to their caps; the key takes what is left.
        let pairs = options.clone().subspaces(Subspaces::Pairs);
        let small = Population::with_distinct(1 << 24, &[100, 50]);
        let shapes = pairs.shapes_for(2, 1 << 24, &small).unwrap();
        assert_eq!(
            shapes[1].dimensions(),
            &[
                (Field::Attribute(0), 7),
                (Field::Attribute(1), 6),
                (Field::Key, 6)
            ]
        );
        // Off: the GHSH paper's even split, whatever the population.
        let paper = pairs
            .key_spread(false)
            .shapes_for(2, 1 << 24, &small)
            .unwrap();
        assert_eq!(
            paper[1].dimensions(),
            &[(Field::Attribute(0), 10), (Field::Attribute(1), 9)]
        );
        // Nothing known (a new index): as the paper, on or off.
        assert_eq!(
            options.shapes(3, 1 << 24).unwrap(),
            options
                .clone()
                .key_spread(false)
                .shapes(3, 1 << 24)
                .unwrap()
        );
    }

    #[test]
    fn given_shapes_may_end_with_the_key() {
        let given = |dimensions| Subspaces::Shapes(vec![SpaceShape::new(dimensions).unwrap()]);
        let options = HyperspaceOptions::default().space_bits(12);
        let spread = given(vec![(Field::Attribute(1), 4), (Field::Key, 8)]);
        let shapes = options.clone().subspaces(spread).shapes(2, 0).unwrap();
        assert_eq!(
            shapes[1].dimensions(),
            &[(Field::Attribute(1), 4), (Field::Key, 8)]
        );
        for bad in [
            given(vec![(Field::Key, 8), (Field::Attribute(1), 4)]),
            given(vec![(Field::Key, 8)]),
            given(vec![(Field::Attribute(2), 4), (Field::Key, 8)]),
        ] {
            assert!(options.clone().subspaces(bad).shapes(2, 0).is_err());
        }
    }

    #[test]
    fn the_history_halves_every_check_unless_told() {
        let regrouping = RegroupOptions {
            check_every: 500,
            ..RegroupOptions::default()
        };
        let options = HyperspaceOptions::default().adaptive(regrouping.clone());
        assert!(options.adaptive);
        assert_eq!(options.half_life(), 500.0);
        assert_eq!(options.clone().history_half_life(7.0).half_life(), 7.0);
        assert!(options.regrouping(regrouping.clone()).adaptive);
        let manual = HyperspaceOptions::default().regrouping(regrouping.clone());
        assert!(!manual.adaptive);
        assert_eq!(manual.regrouping, regrouping);
    }
}

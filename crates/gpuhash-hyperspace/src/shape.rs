//! The geometry every part of the index shares: which fields a tuple has, which of them a
//! space hashes to coordinates, and how many buckets a search touches in it.
//!
//! A tuple is `(key, A1..Ap, value)` with `1 <= p <= MAX_ATTRIBUTES`. A *space* hashes some of
//! those fields (its *dimensions*) to coordinates of `bits` bits each; a bucket is one cell of
//! that grid, `2^(sum of bits)` of them. The key index is the space whose only dimension is
//! the key; an attribute subspace has a group of attributes as dimensions. A search fixes the
//! coordinates of the dimensions it names and must visit every coordinate of the others.

use std::fmt;

use gpuhash_core::hash::fmix32;

/// Most attributes a tuple may have.
pub const MAX_ATTRIBUTES: usize = 8;

/// One field of a tuple: the key, or attribute `i` (0-based, `i < p`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The tuple's key, unique in the index.
    Key,
    /// Attribute `i`, 0-based.
    Attribute(u8),
}

impl Field {
    /// The field's bit in a [`FieldSet`]: bit 0 the key, bit `i + 1` attribute `i`.
    pub const fn bit(self) -> u16 {
        1 << self.index()
    }

    /// The field's number as the kernels take it: 0 the key, `i + 1` attribute `i`.
    pub const fn index(self) -> u32 {
        match self {
            Field::Key => 0,
            Field::Attribute(i) => i as u32 + 1,
        }
    }
}

/// Coordinate of `value` on a dimension of `bits` bits whose seed is `seed`: the top
/// `bits` bits of `fmix32(value ^ seed)` (0 for a dimension of no bits). The kernels
/// (`cuda-src/hyperspace/space.cuh`) compute the same.
pub fn coordinate(value: u32, seed: u32, bits: u8) -> u32 {
    match bits {
        0 => 0,
        bits => fmix32(value ^ seed) >> (32 - u32::from(bits.min(32))),
    }
}

/// The seed of `field`'s dimension in every space of an index whose seed is `index_seed`:
/// each field gets its own, so equal values of two fields land on unrelated coordinates.
pub fn field_seed(index_seed: u32, field: Field) -> u32 {
    fmix32(index_seed ^ field.index().wrapping_mul(0x9e37_79b9))
}

/// A set of fields, as a bit mask (bit 0 the key, bit `i + 1` attribute `i`): the fields a
/// search names, or the dimensions of a space.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldSet(u16);

impl FieldSet {
    /// No field.
    pub const EMPTY: FieldSet = FieldSet(0);

    /// The set of the given fields.
    pub fn of(fields: impl IntoIterator<Item = Field>) -> FieldSet {
        FieldSet(fields.into_iter().fold(0, |mask, field| mask | field.bit()))
    }

    /// The set whose bit mask is `mask`.
    pub const fn from_mask(mask: u16) -> FieldSet {
        FieldSet(mask)
    }

    /// The bit mask.
    pub const fn mask(self) -> u16 {
        self.0
    }

    /// Whether `field` is in the set.
    pub const fn contains(self, field: Field) -> bool {
        self.0 & field.bit() != 0
    }

    /// How many fields the set holds.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set holds no field.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Fields in both sets.
    pub const fn intersection(self, other: FieldSet) -> FieldSet {
        FieldSet(self.0 & other.0)
    }

    /// Fields in either set.
    pub const fn union(self, other: FieldSet) -> FieldSet {
        FieldSet(self.0 | other.0)
    }

    /// The fields, key first, then attributes in order.
    pub fn fields(self) -> impl Iterator<Item = Field> {
        (0..=MAX_ATTRIBUTES as u8).filter_map(move |bit| {
            let field = if bit == 0 {
                Field::Key
            } else {
                Field::Attribute(bit - 1)
            };
            self.contains(field).then_some(field)
        })
    }
}

impl fmt::Debug for FieldSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.fields()).finish()
    }
}

/// The grid of one space: its dimensions, in order, with the coordinate bits of each.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpaceShape {
    dimensions: Vec<(Field, u8)>,
}

/// Most coordinate bits a space may have in all (its bucket count is at most `2^MAX_SPACE_BITS`).
pub const MAX_SPACE_BITS: u32 = 30;

impl SpaceShape {
    /// A space with the given dimensions and coordinate bits, or `None` when a field repeats
    /// or the bits add up past [`MAX_SPACE_BITS`].
    pub fn new(dimensions: Vec<(Field, u8)>) -> Option<SpaceShape> {
        let fields = FieldSet::of(dimensions.iter().map(|&(field, _)| field));
        let bits: u32 = dimensions.iter().map(|&(_, bits)| u32::from(bits)).sum();
        (fields.len() as usize == dimensions.len() && bits <= MAX_SPACE_BITS)
            .then_some(SpaceShape { dimensions })
    }

    /// The dimensions, in order, with their coordinate bits.
    pub fn dimensions(&self) -> &[(Field, u8)] {
        &self.dimensions
    }

    /// The fields hashed to coordinates.
    pub fn fields(&self) -> FieldSet {
        FieldSet::of(self.dimensions.iter().map(|&(field, _)| field))
    }

    /// Coordinate bits in all.
    pub fn total_bits(&self) -> u32 {
        self.dimensions
            .iter()
            .map(|&(_, bits)| u32::from(bits))
            .sum()
    }

    /// Buckets in the grid: `2^total_bits`.
    pub fn bucket_count(&self) -> u64 {
        1 << self.total_bits()
    }

    /// The bucket of a tuple whose field `f` holds `value_of(f)`, when the index's seed is
    /// `index_seed`: the coordinates of the dimensions, concatenated in order, the first
    /// the highest bits.
    pub fn bucket(&self, index_seed: u32, value_of: impl Fn(Field) -> u32) -> u32 {
        self.dimensions.iter().fold(0u64, |bucket, &(field, bits)| {
            let c = coordinate(value_of(field), field_seed(index_seed, field), bits);
            (bucket << bits) | u64::from(c)
        }) as u32
    }

    /// Buckets a search naming the fields `named` must visit: every coordinate of each
    /// dimension it does not name.
    pub fn buckets_touched(&self, named: FieldSet) -> u64 {
        let free_bits: u32 = self
            .dimensions
            .iter()
            .filter(|&&(field, _)| !named.contains(field))
            .map(|&(_, bits)| u32::from(bits))
            .sum();
        1 << free_bits
    }
}

/// Test dimensions: attribute `i` with `bits[i] % below` coordinate bits, for the first
/// `most` entries of `bits`.
#[cfg(test)]
pub(crate) fn attribute_dimensions(bits: &[u8], most: usize, below: u8) -> Vec<(Field, u8)> {
    bits.iter()
        .take(most)
        .enumerate()
        .map(|(i, b)| (Field::Attribute(i as u8), b % below))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[test]
    fn field_sets_list_their_fields_in_order() {
        let set = FieldSet::of([Field::Attribute(3), Field::Key, Field::Attribute(0)]);
        let fields: Vec<Field> = set.fields().collect();
        assert_eq!(
            fields,
            vec![Field::Key, Field::Attribute(0), Field::Attribute(3)]
        );
        assert_eq!(set.len(), 3);
        assert_eq!(set.mask(), 0b1_0011);
    }

    #[test]
    fn shapes_refuse_repeated_fields_and_too_many_bits() {
        assert!(SpaceShape::new(vec![(Field::Key, 4), (Field::Key, 4)]).is_none());
        assert!(
            SpaceShape::new(vec![(Field::Attribute(0), 20), (Field::Attribute(1), 11)]).is_none()
        );
        assert!(
            SpaceShape::new(vec![(Field::Attribute(0), 20), (Field::Attribute(1), 10)]).is_some()
        );
    }

    #[test]
    fn coordinates_are_the_top_bits_of_the_mix() {
        // Values the kernels must produce too (tests/gpu.rs checks them on a device).
        assert_eq!(coordinate(0, 0, 10), 0);
        assert_eq!(coordinate(1, 0, 10), 325);
        assert_eq!(coordinate(42, 0x9e37_79b9, 7), 114);
        assert_eq!(coordinate(u32::MAX, 12345, 32), 2_095_846_414);
        assert_eq!(coordinate(7, 1, 1), 0);
        assert_eq!(coordinate(123, 9, 0), 0);
    }

    #[test]
    fn buckets_concatenate_coordinates_first_dimension_highest() {
        let shape =
            SpaceShape::new(vec![(Field::Attribute(1), 3), (Field::Key, 5)]).expect("8 bits");
        let value_of = |f: Field| match f {
            Field::Key => 77,
            Field::Attribute(i) => 1000 + u32::from(i),
        };
        let high = coordinate(1001, field_seed(5, Field::Attribute(1)), 3);
        let low = coordinate(77, field_seed(5, Field::Key), 5);
        assert_eq!(shape.bucket(5, value_of), (high << 5) | low);
        assert!(shape.bucket(5, value_of) < 256);
    }

    quickcheck! {
        fn buckets_stay_below_the_bucket_count(bits: Vec<u8>, values: Vec<u32>, seed: u32) -> bool {
            let dims = attribute_dimensions(&bits, MAX_ATTRIBUTES, 4);
            let shape = SpaceShape::new(dims).expect("at most 24 bits");
            let value_of = |f: Field| values.get(f.index() as usize).copied().unwrap_or(0);
            u64::from(shape.bucket(seed, value_of)) < shape.bucket_count()
        }

        fn touched_buckets_multiply_over_free_dimensions(bits: Vec<u8>, named: u16) -> bool {
            let dims = attribute_dimensions(&bits, MAX_ATTRIBUTES, 4);
            let shape = SpaceShape::new(dims.clone()).expect("at most 24 bits");
            let named = FieldSet::from_mask(named);
            let expected: u64 = dims
                .iter()
                .filter(|(f, _)| !named.contains(*f))
                .map(|(_, b)| 1u64 << b)
                .product();
            shape.buckets_touched(named) == expected
                && shape.buckets_touched(FieldSet::EMPTY) == shape.bucket_count()
        }
    }
}

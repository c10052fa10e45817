//! How a table's buckets hold its pairs: [`BucketLayout`], chosen by the pair's width.

use crate::CuckooError;
use crate::layouts::{
    GH_CUCKOO_BUCKET_BYTES, GH_CUCKOO_LAYOUT_PACKED, GH_CUCKOO_LAYOUT_SPLIT, GH_CUCKOO_PACKED_SLOTS,
};

/// How the buckets of a table hold its pairs ([`CuckooOptions::layout`]).
///
/// A bucket is one 128-byte line of *slot words* either way, and lookups read a key's home
/// half of it (64 bytes) first.
///
/// - [`Split`](Self::Split), struct of arrays: a slot is a key (32 `u32` or 16 `u64` a
///   bucket) and values lie in an array apart. Any value of 4 to 64 bytes fits, and a miss
///   reads keys only, but a hit reads its value apart from its key: two dependent reads.
/// - [`Packed`](Self::Packed): a slot is one 8-byte word holding a `u32` key (low half) and
///   its 4-byte value (high half), 16 a bucket, so a hit mostly reads one half line that
///   holds key and value together, and an insert claims key and value with one 64-bit CAS.
///   Only pairs of a `u32` key and a 4-byte value fit: a `u64` key with a 4-byte value takes
///   12 bytes, so it stays split.
/// - [`Auto`](Self::Auto), the default: packed where the pair fits, split otherwise.
///
/// ```
/// use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable};
///
/// // u32 pairs are packed unless split buckets are asked for; u64 keys stay split.
/// assert_eq!(BucketLayout::Auto.resolve(4, 4)?, BucketLayout::Packed);
/// assert_eq!(BucketLayout::Auto.resolve(8, 4)?, BucketLayout::Split);
/// assert_eq!(CuckooTable::<u32, u32>::bucket_slots(BucketLayout::Auto)?, 16);
/// assert_eq!(CuckooTable::<u32, u32>::bucket_slots(BucketLayout::Split)?, 32);
/// let compare = CuckooOptions::with_capacity(1 << 20).layout(BucketLayout::Split);
/// # let _ = compare;
/// # Ok::<(), gpuhash_cuckoo::CuckooError>(())
/// ```
///
/// [`CuckooOptions::layout`]: crate::CuckooOptions::layout
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BucketLayout {
    /// Packed for a `u32` key and a 4-byte value, split for any other pair.
    #[default]
    Auto,
    /// Keys in the buckets, values in an array apart, whatever the pair.
    Split,
    /// Key and value in one 8-byte slot word; only for a `u32` key and a 4-byte value.
    Packed,
}

impl BucketLayout {
    /// The layout a table of `key_bytes` keys and `value_bytes` values made with this
    /// choice has: `Split` or `Packed`, never `Auto`.
    /// [`CuckooError::InvalidOptions`] for `Packed` on a pair that does not fit 8 bytes.
    pub fn resolve(self, key_bytes: usize, value_bytes: usize) -> Result<Self, CuckooError> {
        let fits = key_bytes == 4 && value_bytes == 4;
        match self {
            Self::Auto if fits => Ok(Self::Packed),
            Self::Auto | Self::Split => Ok(Self::Split),
            Self::Packed if fits => Ok(Self::Packed),
            Self::Packed => Err(CuckooError::InvalidOptions(format!(
                "packed buckets hold a 4-byte key and a 4-byte value, not {key_bytes} and \
                 {value_bytes} bytes"
            ))),
        }
    }

    /// Pairs one bucket of this (resolved) layout holds with keys of `key_bytes`: 16 packed,
    /// 32 split `u32` keys, 16 split `u64` keys.
    pub(crate) fn slots(self, key_bytes: usize) -> u64 {
        match self {
            Self::Packed => u64::from(GH_CUCKOO_PACKED_SLOTS),
            Self::Auto | Self::Split => u64::from(GH_CUCKOO_BUCKET_BYTES) / key_bytes as u64,
        }
    }

    /// 4-byte words the values array of a subtable holds a bucket, for values of
    /// `value_words` words: none when packed, where the value is in the slot word.
    pub(crate) fn value_words_per_bucket(self, key_bytes: usize, value_words: usize) -> u64 {
        match self {
            Self::Packed => 0,
            Self::Auto | Self::Split => self.slots(key_bytes) * value_words as u64,
        }
    }

    /// Its `GH_CUCKOO_LAYOUT_*` code, as kernels' parameters and images hold it.
    pub(crate) fn code(self) -> u32 {
        match self {
            Self::Packed => GH_CUCKOO_LAYOUT_PACKED,
            Self::Auto | Self::Split => GH_CUCKOO_LAYOUT_SPLIT,
        }
    }

    /// The resolved layout of a `GH_CUCKOO_LAYOUT_*` code.
    pub(crate) fn from_code(code: u32) -> Option<Self> {
        match code {
            GH_CUCKOO_LAYOUT_SPLIT => Some(Self::Split),
            GH_CUCKOO_LAYOUT_PACKED => Some(Self::Packed),
            _ => None,
        }
    }

    /// The choice that gives `resolved` for a pair of these widths, preferring `Auto`: what a
    /// table loaded from an image keeps in its options.
    pub(crate) fn choice_for(resolved: Self, key_bytes: usize, value_bytes: usize) -> Self {
        if Self::Auto.resolve(key_bytes, value_bytes).ok() == Some(resolved) {
            Self::Auto
        } else {
            resolved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_packs_the_pairs_that_fit_eight_bytes() {
        let auto = BucketLayout::Auto;
        assert_eq!(auto.resolve(4, 4).unwrap(), BucketLayout::Packed);
        for (k, v) in [(4, 8), (4, 64), (8, 4), (8, 8)] {
            assert_eq!(auto.resolve(k, v).unwrap(), BucketLayout::Split, "{k} {v}");
        }
        assert_eq!(
            BucketLayout::Split.resolve(4, 4).unwrap(),
            BucketLayout::Split
        );
        assert_eq!(
            BucketLayout::Packed.resolve(4, 4).unwrap(),
            BucketLayout::Packed
        );
        for (k, v) in [(8, 4), (4, 8)] {
            assert!(matches!(
                BucketLayout::Packed.resolve(k, v),
                Err(CuckooError::InvalidOptions(_))
            ));
        }
        assert_eq!(BucketLayout::default(), BucketLayout::Auto);
    }

    #[test]
    fn slots_and_bytes_follow_the_layout() {
        use BucketLayout::{Packed, Split};
        assert_eq!(
            (Split.slots(4), Split.slots(8), Packed.slots(4)),
            (32, 16, 16)
        );
        assert_eq!(Packed.value_words_per_bucket(4, 1), 0);
        assert_eq!(Split.value_words_per_bucket(4, 1), 32);
        assert_eq!(Split.value_words_per_bucket(8, 3), 48);
        // Bytes a slot: packed 128 / 16, split u32/u32 128 / 32 of keys and 4 of value.
        let per_slot =
            |l: BucketLayout| (128 + 4 * l.value_words_per_bucket(4, 1)) as f64 / l.slots(4) as f64;
        assert_eq!((per_slot(Packed), per_slot(Split)), (8.0, 8.0));
    }

    #[test]
    fn codes_round_trip_and_split_is_zero() {
        use BucketLayout::{Auto, Packed, Split};
        for l in [Split, Packed] {
            assert_eq!(BucketLayout::from_code(l.code()), Some(l));
        }
        // Images of before the packed layout hold zero there.
        assert_eq!(BucketLayout::from_code(0), Some(Split));
        assert_eq!(BucketLayout::from_code(7), None);
        assert_eq!(BucketLayout::choice_for(Packed, 4, 4), Auto);
        assert_eq!(BucketLayout::choice_for(Split, 4, 4), Split);
        assert_eq!(BucketLayout::choice_for(Split, 8, 4), Auto);
    }
}

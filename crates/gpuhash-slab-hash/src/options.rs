//! What a table is made with: `SlabHashOptions` and the bucket count it gives.

use gpuhash_core::last_copy::DuplicateKeys;
use gpuhash_slab_alloc::Variant;

use crate::Result;
use crate::shape::Shape;

/// Options of a slab hash table: [`Default`] or [`SlabHashOptions::with_capacity`], then
/// chained setters, `SlabHashOptions::with_capacity(1 << 20).load(0.5).variant(Variant::Light)`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SlabHashOptions {
    /// Entries the table is sized for; it holds more, with longer lists.
    pub expected_entries: u64,
    /// How full the head slabs should be at `expected_entries`, from 0 (exclusive) to 1:
    /// buckets = expected_entries / (entries per slab * load). Lower is faster, higher
    /// uses less memory.
    pub load: f64,
    /// A bucket count to use instead of the one `load` gives.
    pub buckets: Option<u32>,
    /// Addressing of the slab allocator.
    pub variant: Variant,
    /// Seed of the bucket hash function.
    pub seed: u64,
    /// Which value a map's insert keeps for a key its batch holds more than once: by
    /// default one whole value, unspecified which; [`DuplicateKeys::LastCopy`] keeps the
    /// last copy's. Sets have no values, and multimaps keep every copy.
    pub duplicate_keys: DuplicateKeys,
}

impl Default for SlabHashOptions {
    /// 2^20 entries at load 0.6, regular addressing.
    fn default() -> Self {
        Self {
            expected_entries: 1 << 20,
            load: 0.6,
            buckets: None,
            variant: Variant::Regular,
            seed: 0x5eed,
            duplicate_keys: DuplicateKeys::AnyCopy,
        }
    }
}

impl SlabHashOptions {
    /// Options for `expected_entries` entries, the rest as [`Default`].
    pub fn with_capacity(expected_entries: u64) -> Self {
        Self::default().expected_entries(expected_entries)
    }

    /// Sets [`SlabHashOptions::expected_entries`].
    pub fn expected_entries(mut self, expected_entries: u64) -> Self {
        self.expected_entries = expected_entries;
        self
    }

    /// Sets [`SlabHashOptions::load`].
    pub fn load(mut self, load: f64) -> Self {
        self.load = load;
        self
    }

    /// Sets [`SlabHashOptions::buckets`]: this many buckets, whatever the load.
    pub fn buckets(mut self, buckets: u32) -> Self {
        self.buckets = Some(buckets);
        self
    }

    /// Sets [`SlabHashOptions::variant`].
    pub fn variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// Sets [`SlabHashOptions::seed`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`SlabHashOptions::duplicate_keys`].
    pub fn duplicate_keys(mut self, duplicate_keys: DuplicateKeys) -> Self {
        self.duplicate_keys = duplicate_keys;
        self
    }

    /// The bucket count for slabs of `shape`.
    pub(crate) fn bucket_count(&self, shape: Shape) -> Result<u32> {
        if let Some(buckets) = self.buckets {
            return (buckets > 0)
                .then_some(buckets)
                .ok_or_else(|| invalid("buckets must be positive"));
        }
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(invalid(format!(
                "load must be in (0, 1], not {}",
                self.load
            )));
        }
        let buckets = (self.expected_entries as f64 / (shape.per_slab() as f64 * self.load))
            .ceil()
            .max(1.0);
        u32::try_from(buckets as u64).map_err(|_| invalid("more than 2^32 buckets"))
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> crate::SlabHashError {
    gpuhash_core::Error::InvalidInput(message.into()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Kind;

    #[test]
    fn bucket_count_follows_load_and_rejects_nonsense() {
        let options = SlabHashOptions::with_capacity(15_000).load(0.5);
        let map = Shape::of::<u32, u32>(Kind::Map);
        assert_eq!(options.bucket_count(map).unwrap(), 2000);
        assert_eq!(
            options
                .bucket_count(Shape::of::<u32, u32>(Kind::Set))
                .unwrap(),
            1000
        );
        // 64-bit keys with 32-bit values are padded to 4 lanes: 7 to a slab.
        let wide = Shape::of::<u64, u32>(Kind::Map);
        assert_eq!(
            options.bucket_count(wide).unwrap(),
            15_000u32.div_ceil(7) * 2
        );
        for load in [0.0, -1.0, 1.5, f64::NAN] {
            assert!(options.load(load).bucket_count(map).is_err());
        }
        assert!(options.buckets(0).bucket_count(map).is_err());
        assert_eq!(options.buckets(7).bucket_count(map).unwrap(), 7);
    }

    #[test]
    fn setters_set_their_field_only() {
        let options = SlabHashOptions::default()
            .seed(9)
            .variant(Variant::Light)
            .duplicate_keys(DuplicateKeys::LastCopy);
        assert_eq!(options.seed, 9);
        assert_eq!(options.variant, Variant::Light);
        assert_eq!(options.duplicate_keys, DuplicateKeys::LastCopy);
        assert_eq!(
            options.expected_entries,
            SlabHashOptions::default().expected_entries
        );
    }
}

//! The options of a [`CuckooTable`](crate::CuckooTable).

use crate::layouts::GH_CUCKOO_MAX_SUBTABLES;
use crate::{BucketLayout, CuckooError};
pub use gpuhash_core::last_copy::DuplicateKeys;

/// How a table is shaped and when it resizes. `Default` gives the paper's defaults:
/// 3 subtables, fill factor kept within `[0.4, 0.9]`, and the bucket layout the pair's
/// width picks; each field has a setter of its name,
/// so that options read as one chain:
///
/// ```
/// use gpuhash_cuckoo::CuckooOptions;
///
/// let options = CuckooOptions::with_capacity(1 << 20).subtables(4).alpha(0.25);
/// assert_eq!((options.initial_capacity, options.subtables), (1 << 20, 4));
/// options.validate()?;
/// # Ok::<(), gpuhash_cuckoo::CuckooError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CuckooOptions {
    /// Pairs the table should hold without resizing; sets the initial size so that this
    /// many pairs fill it to `beta` (a power of two buckets a subtable, so the table may
    /// hold more). Ignored when `initial_buckets` is set.
    ///
    /// The size made for it is also the table's capacity floor, kept as a `Vec` or a
    /// `HashMap` keeps its capacity: however few pairs the table holds, no downsize leaves
    /// it fewer slots than it was built with, so a table made for a large batch does not
    /// shrink after a small one and grow again at the next large one. The floor counts
    /// slots of the whole table, not buckets of a subtable, because a downsize halves one
    /// subtable at a time: the table shrinks while the halved table keeps the floor's slots.
    /// [`CuckooTable::shrink_to`](crate::CuckooTable::shrink_to) and
    /// [`shrink_to_fit`](crate::CuckooTable::shrink_to_fit) lower it.
    pub initial_capacity: usize,
    /// Buckets of every subtable at creation, overriding `initial_capacity` (benchmarks use
    /// it to build a table of an exact load factor). Any count works; halving needs it even.
    /// The size made for it is the capacity floor, as for `initial_capacity`.
    pub initial_buckets: Option<u64>,
    /// Number of subtables, the paper's d: 2 to 8.
    pub subtables: usize,
    /// Lower bound of the fill factor; below it the largest subtable is halved. 0 never
    /// shrinks.
    pub alpha: f64,
    /// Upper bound of the fill factor; above it the smallest subtable is doubled.
    pub beta: f64,
    /// No subtable shrinks below this many buckets.
    pub min_buckets: u64,
    /// Swaps a pair may make before it counts as failed, is set aside on the device and
    /// retried after an upsize.
    pub max_evictions: u32,
    /// Resize by doubling or halving every subtable and rehashing all pairs (the baseline
    /// the paper compares against), instead of one subtable at a time.
    pub rehash_all: bool,
    /// Seed of the subtables' hash functions.
    pub seed: u64,
    /// Which value wins among equal keys of one insert batch.
    pub duplicate_keys: DuplicateKeys,
    /// How buckets hold pairs: [`BucketLayout::Auto`] (the default) packs a `u32` key and a
    /// 4-byte value into one 8-byte slot word and keeps other pairs split;
    /// [`BucketLayout::Split`] forces keys and values apart (to compare the two).
    pub layout: BucketLayout,
}

impl Default for CuckooOptions {
    fn default() -> Self {
        Self {
            initial_capacity: 1 << 16,
            initial_buckets: None,
            subtables: 3,
            alpha: 0.4,
            beta: 0.9,
            min_buckets: 1,
            max_evictions: 64,
            rehash_all: false,
            seed: 0x5eed_c0c0,
            duplicate_keys: DuplicateKeys::AnyCopy,
            layout: BucketLayout::Auto,
        }
    }
}

/// Setters of the fields taken as they are, each documented at its field.
macro_rules! setters {
    ($($field:ident: $type:ty),* $(,)?) => {
        $(
            #[doc = concat!("Sets the `", stringify!($field), "` field.")]
            pub fn $field(mut self, $field: $type) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}

impl CuckooOptions {
    /// The default options with `initial_capacity` set to `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::default().initial_capacity(capacity)
    }

    setters!(
        initial_capacity: usize,
        subtables: usize,
        alpha: f64,
        beta: f64,
        min_buckets: u64,
        max_evictions: u32,
        rehash_all: bool,
        seed: u64,
        duplicate_keys: DuplicateKeys,
        layout: BucketLayout,
    );

    /// Sets the `initial_buckets` field to `Some(buckets)`.
    pub fn initial_buckets(mut self, buckets: u64) -> Self {
        self.initial_buckets = Some(buckets);
        self
    }

    /// Checks the options: 2 to 8 subtables, `0 <= alpha`, `beta <= 1`, and alpha low
    /// enough that one resize cannot jump over the whole band: an upsize from just above
    /// beta leaves at least `beta * d / (d + 1)` (the paper's bound), a downsize from just
    /// below alpha at most `alpha * 2d / (2d - 1)`; with rehash-everything the factors are
    /// 1/2 and 2.
    pub fn validate(&self) -> Result<(), CuckooError> {
        let d = self.subtables;
        let fail = |why: String| Err(CuckooError::InvalidOptions(why));
        if !(2..=GH_CUCKOO_MAX_SUBTABLES as usize).contains(&d) {
            return fail(format!("subtables must be 2 to 8, not {d}"));
        }
        if !(self.alpha >= 0.0 && self.beta > 0.0 && self.beta <= 1.0 && self.alpha < self.beta) {
            return fail(format!(
                "need 0 <= alpha < beta <= 1 (alpha = {}, beta = {})",
                self.alpha, self.beta
            ));
        }
        let d = d as f64;
        let (up, down) = if self.rehash_all {
            (0.5, 2.0)
        } else {
            (d / (d + 1.0), 2.0 * d / (2.0 * d - 1.0))
        };
        if self.alpha >= self.beta * up || self.alpha * down >= self.beta {
            return fail(format!(
                "alpha = {} is too close to beta = {}: with {} subtables one resize could cross the band",
                self.alpha, self.beta, self.subtables
            ));
        }
        if self.min_buckets == 0 || self.min_buckets >= 1 << 31 {
            return fail("min_buckets must be 1 to 2^31 - 1".into());
        }
        if self.initial_buckets.is_some_and(|b| b == 0 || b >= 1 << 31) {
            return fail("initial_buckets must be 1 to 2^31 - 1".into());
        }
        if self.max_evictions == 0 {
            return fail("max_evictions must be at least 1".into());
        }
        Ok(())
    }

    /// Buckets of each subtable at creation, for buckets of `slots` pairs: a power of two
    /// (so that the table can shrink to `min_buckets`) large enough that
    /// `initial_capacity` pairs fill the table to at most `beta`.
    pub(crate) fn initial_bucket_count(&self, slots: u64) -> u64 {
        if let Some(b) = self.initial_buckets {
            return b;
        }
        let pairs = self.initial_capacity as f64 / self.beta;
        let per_subtable = (pairs / (self.subtables as f64 * slots as f64)).ceil() as u64;
        per_subtable
            .max(self.min_buckets)
            .max(1)
            .next_power_of_two()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_valid() {
        let o = CuckooOptions::default();
        assert_eq!((o.subtables, o.alpha, o.beta), (3, 0.4, 0.9));
        o.validate().unwrap();
    }

    #[test]
    fn rejects_bad_options() {
        let bad = [
            CuckooOptions {
                subtables: 1,
                ..Default::default()
            },
            CuckooOptions {
                subtables: 9,
                ..Default::default()
            },
            CuckooOptions {
                alpha: 0.9,
                beta: 0.8,
                ..Default::default()
            },
            CuckooOptions {
                beta: 1.5,
                ..Default::default()
            },
            CuckooOptions {
                alpha: -0.1,
                ..Default::default()
            },
            CuckooOptions {
                alpha: f64::NAN,
                ..Default::default()
            },
            // d = 3: alpha must stay below 0.9 * 3/4 = 0.675.
            CuckooOptions {
                alpha: 0.7,
                ..Default::default()
            },
            // rehash-everything halves the fill on an upsize: alpha < 0.45.
            CuckooOptions {
                alpha: 0.45,
                rehash_all: true,
                ..Default::default()
            },
            CuckooOptions {
                min_buckets: 0,
                ..Default::default()
            },
            CuckooOptions {
                initial_buckets: Some(0),
                ..Default::default()
            },
            CuckooOptions {
                max_evictions: 0,
                ..Default::default()
            },
        ];
        for options in bad {
            assert!(
                matches!(options.validate(), Err(CuckooError::InvalidOptions(_))),
                "{options:?}"
            );
        }
        CuckooOptions {
            alpha: 0.0,
            beta: 1.0,
            ..Default::default()
        }
        .validate()
        .unwrap();
        CuckooOptions {
            subtables: 2,
            alpha: 0.25,
            ..Default::default()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn setters_set_their_fields() {
        let o = CuckooOptions::with_capacity(7)
            .initial_buckets(12)
            .subtables(4)
            .alpha(0.1)
            .beta(0.8)
            .min_buckets(2)
            .max_evictions(9)
            .rehash_all(true)
            .seed(5)
            .duplicate_keys(DuplicateKeys::LastCopy)
            .layout(BucketLayout::Split);
        let expected = CuckooOptions {
            initial_capacity: 7,
            initial_buckets: Some(12),
            subtables: 4,
            alpha: 0.1,
            beta: 0.8,
            min_buckets: 2,
            max_evictions: 9,
            rehash_all: true,
            seed: 5,
            duplicate_keys: DuplicateKeys::LastCopy,
            layout: BucketLayout::Split,
        };
        assert_eq!(o, expected);
    }

    #[test]
    fn initial_size_holds_the_capacity_below_beta() {
        for capacity in [0usize, 1, 100, 1 << 16, 1_000_000] {
            let o = CuckooOptions {
                initial_capacity: capacity,
                ..Default::default()
            };
            let b = o.initial_bucket_count(32);
            assert!(b.is_power_of_two());
            assert!(capacity as f64 <= 0.9 * (3 * b * 32) as f64);
        }
        let o = CuckooOptions {
            initial_buckets: Some(12345),
            ..Default::default()
        };
        assert_eq!(o.initial_bucket_count(32), 12345);
    }
}

//! What the table derives from a key type.

use gpuhash_core::table::Key;

/// What the table needs of a key type beyond [`Key`], derived from [`Key::WORDS`] so that
/// every key type of the contract has it: users name [`Key`] only, and code generic over
/// `K: Key` makes a `CuckooTable<K, V>` without a bound of this crate's own.
pub(crate) trait KeyLayout: Key {
    /// Entries of this width in one 128-byte bucket: 32 for u32, 16 for u64. A split
    /// bucket's slots; a packed bucket holds 16 pairs in the same bytes, so a subtable's
    /// slot-word array has `buckets * PER_BUCKET` entries of `Self` either way.
    const PER_BUCKET: u64 = 32 / Self::WORDS as u64;

    /// The key value that marks an empty slot (all ones); the table keeps its pair apart.
    fn reserved() -> Self {
        let mut key = Self::zeroed();
        bytemuck::bytes_of_mut(&mut key).fill(0xff);
        key
    }
}

impl<K: Key> KeyLayout for K {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_key_width() {
        assert_eq!((u32::PER_BUCKET, u64::PER_BUCKET), (32, 16));
        assert_eq!((u32::reserved(), u64::reserved()), (u32::MAX, u64::MAX));
    }
}

//! Helpers the GPU test files share.
#![allow(dead_code, reason = "each test file uses its own part of the helpers")]

use gpuhash_core::table::Key;
use gpuhash_slab_hash::SlabHashOptions;

pub use gpuhash_test_support::{device, key_from_bits, stream};

pub fn options(expected: u64, buckets: Option<u32>) -> SlabHashOptions {
    let options = SlabHashOptions::with_capacity(expected);
    match buckets {
        Some(buckets) => options.buckets(buckets),
        None => options,
    }
}

pub fn sorted<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    let mut items = items.to_vec();
    items.sort_unstable();
    items
}

/// Keys for a width: the two reserved words and zero, keys that agree in their low 32 bits
/// (for u64), and hashed ones; all distinct.
pub fn keys_of<K: Key>(n: u64) -> Vec<K> {
    let mut keys: Vec<K> = [u64::MAX, u64::MAX - 1, 0]
        .into_iter()
        .map(key_from_bits::<K>)
        .collect();
    keys.extend((1..200u64).map(|i| key_from_bits::<K>((i << 32) | 0x1234_5678)));
    keys.extend((0..n).map(|i| key_from_bits::<K>(gpuhash_core::hash::fmix64(i + 7))));
    keys.sort_unstable();
    keys.dedup();
    keys
}

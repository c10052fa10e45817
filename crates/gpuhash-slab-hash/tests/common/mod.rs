//! Helpers the GPU test files share.
#![allow(dead_code, reason = "each test file uses its own part of the helpers")]

use std::sync::OnceLock;

use gpuhash_core::table::Key;
use gpuhash_core::{Device, Stream};
use gpuhash_slab_hash::SlabHashOptions;

pub fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| Device::default().expect("these tests need a CUDA device"))
}

pub fn stream() -> &'static Stream {
    static STREAM: OnceLock<Stream> = OnceLock::new();
    STREAM.get_or_init(|| device().new_stream().unwrap())
}

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

/// Key and value types of the width tests.
pub trait TestWord: Key {
    fn from_bits(bits: u64) -> Self;
}

impl TestWord for u32 {
    fn from_bits(bits: u64) -> Self {
        bits as u32
    }
}

impl TestWord for u64 {
    fn from_bits(bits: u64) -> Self {
        bits
    }
}

/// Keys for a width: the two reserved words and zero, keys that agree in their low 32 bits
/// (for u64), and hashed ones; all distinct.
pub fn keys_of<K: TestWord>(n: u64) -> Vec<K> {
    let mut keys: Vec<K> = [u64::MAX, u64::MAX - 1, 0]
        .into_iter()
        .map(K::from_bits)
        .collect();
    keys.extend((1..200u64).map(|i| K::from_bits((i << 32) | 0x1234_5678)));
    keys.extend((0..n).map(|i| K::from_bits(gpuhash_core::hash::fmix64(i + 7))));
    keys.sort_unstable();
    keys.dedup();
    keys
}

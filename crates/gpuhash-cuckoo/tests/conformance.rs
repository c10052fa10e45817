//! DyHash against the contract's conformance suite (gpuhash-test-support), at each key
//! width, with a wide value, and `u32` pairs in both bucket layouts (packed by default,
//! split forced). Run on a GPU machine with `--include-ignored`.

use gpuhash_core::Device;
use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable, DuplicateKeys, Result};
use gpuhash_test_support::{
    combining_conformance, image_round_trip, last_copy_in_chunks, map_conformance,
};

/// A table of `capacity` pairs with split buckets forced.
fn split<K: gpuhash_core::table::Key, V: gpuhash_core::table::Value>(
    device: &Device,
    capacity: usize,
) -> Result<CuckooTable<K, V>> {
    CuckooTable::new(
        device,
        CuckooOptions::with_capacity(capacity).layout(BucketLayout::Split),
    )
}

#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_u32_u32_passes_the_map_suite() {
    map_conformance(CuckooTable::<u32, u32>::with_capacity);
    image_round_trip(CuckooTable::<u32, u32>::with_capacity);
    map_conformance(split::<u32, u32>);
    image_round_trip(split::<u32, u32>);
}

/// Other 4-byte values share the packed layout.
#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_u32_with_other_4_byte_values_passes_the_map_suite() {
    map_conformance(CuckooTable::<u32, f32>::with_capacity);
    map_conformance(CuckooTable::<u32, [u32; 1]>::with_capacity);
    image_round_trip(CuckooTable::<u32, [u8; 4]>::with_capacity);
}

#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_u64_u64_passes_the_map_suite() {
    map_conformance(CuckooTable::<u64, u64>::with_capacity);
    image_round_trip(CuckooTable::<u64, u64>::with_capacity);
}

#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_u32_with_16_byte_values_passes_the_map_suite() {
    map_conformance(CuckooTable::<u32, [u32; 4]>::with_capacity);
    image_round_trip(CuckooTable::<u32, [u32; 4]>::with_capacity);
}

/// Upserts (Add, Min, Max) and `insert_or_find` at both key widths and both value widths
/// (one and two 4-byte words).
#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_passes_the_combining_suite() {
    combining_conformance(CuckooTable::<u32, u32>::with_capacity);
    combining_conformance(split::<u32, u32>);
    combining_conformance(CuckooTable::<u64, u32>::with_capacity);
    combining_conformance(CuckooTable::<u32, u64>::with_capacity);
    combining_conformance(CuckooTable::<u64, u64>::with_capacity);
}

/// A table that keeps the last copy of a key keeps it across the chunks of a host insert,
/// and a failing chunk leaves it as it was.
#[test]
#[ignore = "needs a CUDA device"]
fn last_copies_win_across_insert_chunks() {
    last_copy_in_chunks(|device, capacity| {
        let options =
            CuckooOptions::with_capacity(capacity).duplicate_keys(DuplicateKeys::LastCopy);
        CuckooTable::<u32, u32>::new(device, options)
    });
}

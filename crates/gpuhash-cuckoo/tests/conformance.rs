//! DyHash against the contract's conformance suite (gpuhash-test-support), at each key
//! width and with a wide value. Run on a GPU machine with `--include-ignored`.

use gpuhash_cuckoo::CuckooTable;
use gpuhash_test_support::{combining_conformance, image_round_trip, map_conformance};

#[test]
#[ignore = "needs a CUDA device"]
fn dyhash_u32_u32_passes_the_map_suite() {
    map_conformance(CuckooTable::<u32, u32>::with_capacity);
    image_round_trip(CuckooTable::<u32, u32>::with_capacity);
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
    combining_conformance(CuckooTable::<u64, u32>::with_capacity);
    combining_conformance(CuckooTable::<u32, u64>::with_capacity);
    combining_conformance(CuckooTable::<u64, u64>::with_capacity);
}

//! The slab hash tables against the contract's conformance suite (gpuhash-test-support), at
//! each width. Run on a GPU machine with `--include-ignored`.

use gpuhash_slab_hash::{
    DuplicateKeys, SlabHashMap, SlabHashMultiMap, SlabHashOptions, SlabHashSet,
};
use gpuhash_test_support::{
    combining_conformance, image_round_trip, last_copy_in_chunks, map_conformance,
    multimap_conformance, set_conformance,
};

#[test]
#[ignore = "needs a CUDA device"]
fn maps_pass_the_map_suite() {
    map_conformance(SlabHashMap::<u32, u32>::with_capacity);
    map_conformance(SlabHashMap::<u64, u64>::with_capacity);
    image_round_trip(SlabHashMap::<u32, u64>::with_capacity);
}

/// Every slab shape of a map: one 64-bit compare-and-swap (u32 pairs, and u64 keys or
/// values alone), and the busy-spot claims of wider entries.
#[test]
#[ignore = "needs a CUDA device"]
fn maps_pass_the_combining_suite() {
    combining_conformance(SlabHashMap::<u32, u32>::with_capacity);
    combining_conformance(SlabHashMap::<u32, u64>::with_capacity);
    combining_conformance(SlabHashMap::<u64, u32>::with_capacity);
    combining_conformance(SlabHashMap::<u64, u64>::with_capacity);
}

#[test]
#[ignore = "needs a CUDA device"]
fn sets_pass_the_set_suite() {
    set_conformance(SlabHashSet::<u32>::with_capacity);
    set_conformance(SlabHashSet::<u64>::with_capacity);
    image_round_trip(SlabHashSet::<u64>::with_capacity);
}

#[test]
#[ignore = "needs a CUDA device"]
fn multimaps_pass_the_multimap_suite() {
    multimap_conformance(SlabHashMultiMap::<u32, u32>::with_capacity);
    multimap_conformance(SlabHashMultiMap::<u64, u64>::with_capacity);
    image_round_trip(SlabHashMultiMap::<u64, u32>::with_capacity);
}

/// A map that keeps the last copy of a key keeps it across the chunks of a host insert,
/// and a failing chunk leaves it as it was.
#[test]
#[ignore = "needs a CUDA device"]
fn last_copies_win_across_insert_chunks() {
    last_copy_in_chunks(|device, capacity| {
        let options =
            SlabHashOptions::with_capacity(capacity as u64).duplicate_keys(DuplicateKeys::LastCopy);
        SlabHashMap::<u32, u64>::new(device, options)
    });
}

//! Batches in which a few keys repeat hundreds of thousands of times (Zipf-skewed), as
//! counting and deduplication workloads send them. Every copy of a key must be served in
//! bounded time, and the value the table keeps must be one copy's value, whole.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::{HashMap, HashSet};

use bytemuck::Pod;
use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::zipf_keys;
use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable};
use gpuhash_test_support::{device, shared_memory};

/// A value of copy `copy` whose words all derive from the copy, so that a value torn
/// between two copies is caught.
trait CopyValue: Pod + PartialEq + std::fmt::Debug {
    fn of_copy(copy: u32) -> Self;
}

impl CopyValue for u32 {
    fn of_copy(copy: u32) -> Self {
        copy
    }
}

impl CopyValue for [u32; 4] {
    fn of_copy(copy: u32) -> Self {
        [copy, copy.wrapping_mul(3), !copy, copy ^ 0x5555_5555]
    }
}

/// Inserts `rounds` Zipf-skewed batches (the later ones meet keys the table holds) into a
/// table of `layout` and checks every key against the copies sent for it.
fn skewed_batches<V: CopyValue + gpuhash_core::table::Value>(
    layout: BucketLayout,
    count: usize,
    ranks: u32,
    rounds: u32,
) {
    let _memory = shared_memory();
    let options = CuckooOptions::with_capacity(ranks as usize).layout(layout);
    let table = CuckooTable::<u32, V>::new(device(), options).expect("table");
    let mut sent: HashMap<u32, HashSet<u32>> = HashMap::new();
    for round in 0..rounds {
        let keys = zipf_keys(count, ranks, 0x5eed + u64::from(round));
        let first_copy = round * count as u32;
        let values: Vec<V> = (0..count as u32)
            .map(|i| V::of_copy(first_copy + i))
            .collect();
        table
            .insert(&keys, &values)
            .expect("a skewed batch goes in");
        let mut this_round: HashMap<u32, HashSet<u32>> = HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            this_round
                .entry(*key)
                .or_default()
                .insert(first_copy + i as u32);
        }
        // A key this batch sent holds one of this batch's copies; others keep theirs.
        for (key, copies) in this_round {
            sent.insert(key, copies);
        }
    }
    let distinct: Vec<u32> = sent.keys().copied().collect();
    assert_eq!(table.len().expect("len"), distinct.len());
    let found = table.get(&distinct).expect("get");
    for (key, value) in distinct.iter().zip(found) {
        let value = value.unwrap_or_else(|| panic!("key {key:#x} is missing"));
        let copies = &sent[key];
        // Every value's first word is its copy's number.
        let copy = bytemuck::pod_read_unaligned::<u32>(&bytemuck::bytes_of(&value)[..4]);
        assert!(
            V::of_copy(copy) == value && copies.contains(&copy),
            "key {key:#x} holds {value:?}, not the value of one of its copies"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn zipf_batches_of_32_bit_values_finish_and_keep_a_copy() {
    // Packed buckets (the default for these pairs), then split ones forced.
    for layout in [BucketLayout::Auto, BucketLayout::Split] {
        skewed_batches::<u32>(layout, 1 << 22, 1 << 20, 2);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn zipf_batches_of_wide_values_finish_and_keep_one_whole_copy() {
    skewed_batches::<[u32; 4]>(BucketLayout::Auto, 1 << 20, 1 << 16, 2);
}

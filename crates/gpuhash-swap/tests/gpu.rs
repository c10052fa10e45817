//! GPU tests of the swap table: the contract's conformance suite with children paging on
//! every batch, answers against a `HashMap` over batches that force evictions, write-backs
//! of changed children only, and budgets too small to hold a child.

use std::collections::HashMap;

use gpuhash_core::Device;
use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError};
use gpuhash_cuckoo::{CuckooError, CuckooTable};
use gpuhash_swap::{SwapMap, SwapOptions};
use gpuhash_test_support::{SeededRng, device, map_conformance, value_of};

const CHILDREN: usize = 8;
const RESIDENT: u64 = 2;
const SCRATCH: u64 = 1 << 20;

/// A table of 8 DyHash children of which 2 fit the device budget, for `capacity` pairs.
fn paging<K: Key>(device: &Device, capacity: usize) -> Result<SwapMap<K, u64>, CuckooError> {
    let child_capacity = capacity.div_ceil(CHILDREN).max(1024);
    let child = CuckooTable::<K, u64>::with_capacity(device, child_capacity)?;
    let child_bytes = child.memory()?.bytes_reserved;
    let options = SwapOptions::with_capacity(capacity)
        .children(CHILDREN)
        .child_capacity(child_capacity)
        .scratch_bytes(SCRATCH)
        .device_budget(RESIDENT * child_bytes + SCRATCH);
    SwapMap::new(device, options)
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_two_of_eight_children_resident() {
    map_conformance(paging::<u32>);
    map_conformance(paging::<u64>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_plan_pages() {
    let table = paging::<u32>(device(), 1 << 16).unwrap();
    assert_eq!(table.children(), CHILDREN);
    assert_eq!(table.resident_limit(), RESIDENT as usize);
}

/// Rounds of inserts, removals and lookups of keys spread over every child, held against
/// a `HashMap`.
fn matches_a_hash_map<K: Key>() {
    let table = paging::<K>(device(), 1 << 16).unwrap();
    let mut model: HashMap<K, u64> = HashMap::new();
    let mut rng = SeededRng::new(7);
    let keys: Vec<K> = rng.distinct_keys(1 << 16);
    for (round, batch) in keys.chunks(1 << 13).enumerate() {
        let values: Vec<u64> = batch
            .iter()
            .map(|&k| value_of::<u64>(k.widen()) ^ round as u64)
            .collect();
        table.insert(batch, &values).unwrap();
        model.extend(batch.iter().copied().zip(values));
        let gone: Vec<K> = keys.iter().step_by(5 + round).copied().collect();
        let removed = table.remove(&gone).unwrap();
        for (key, removed) in gone.iter().zip(removed) {
            assert_eq!(removed, model.remove(key).is_some(), "round {round}");
        }
        let found = table.get(&keys).unwrap();
        for (key, found) in keys.iter().zip(found) {
            assert_eq!(found, model.get(key).copied(), "round {round}");
        }
        assert_eq!(table.len().unwrap(), model.len());
    }
    let mut exported = table.export().unwrap();
    exported.sort_unstable_by_key(|&(k, _)| k);
    let mut expected: Vec<(K, u64)> = model.into_iter().collect();
    expected.sort_unstable_by_key(|&(k, _)| k);
    assert_eq!(exported, expected);
    assert!(table.stats().page_outs > 0, "{:?}", table.stats());
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u32() {
    matches_a_hash_map::<u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u64() {
    matches_a_hash_map::<u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn an_unchanged_child_is_dropped_not_written_back() {
    let table = paging::<u64>(device(), 1 << 16).unwrap();
    let keys: Vec<u64> = SeededRng::new(9).distinct_keys(1 << 14);
    table.insert(&keys, &keys).unwrap();
    table.get(&keys).unwrap();
    let after_first = table.stats();
    table.get(&keys).unwrap();
    table.contains(&keys).unwrap();
    let after_reads = table.stats();
    assert_eq!(
        after_reads.page_outs, after_first.page_outs,
        "{after_reads:?}"
    );
    assert!(after_reads.drops > after_first.drops, "{after_reads:?}");
    assert!(
        after_reads.page_ins > after_first.page_ins,
        "{after_reads:?}"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_budget_too_small_is_refused() {
    let options = SwapOptions::<CuckooTable<u32, u32>>::with_capacity(1 << 20)
        .scratch_bytes(SCRATCH)
        .device_budget(SCRATCH + 1024);
    let refused = SwapMap::new(device(), options).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    let no_scratch = SwapOptions::<CuckooTable<u32, u32>>::with_capacity(1 << 20).scratch_bytes(4);
    assert_eq!(
        SwapMap::new(device(), no_scratch).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

//! GPU tests of the swap table: the contract's conformance suite with children paging on
//! every batch, answers against a `HashMap` over batches that force evictions, write-backs
//! of changed children only, budgets too small to hold a child, lookups of children on the
//! host probed in place and paged giving the same answers, misses answered by the filters
//! with no paging, a host budget that runs out, and exports beside threads that remove and
//! reinsert keys. DyHash children of u32 keys and u32 values have packed buckets (the
//! default for such pairs), those of u64 values split ones: both are paged and probed.

use std::collections::HashMap;

use gpuhash_core::image::Image;
use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError, Value};
use gpuhash_core::{Device, PinnedPool};
use gpuhash_cuckoo::{CuckooError, CuckooTable};
use gpuhash_slab_hash::{SlabHashError, SlabHashMap};
use gpuhash_swap::policy::child_of;
use gpuhash_swap::{CostModel, SwapMap, SwapOptions, SwapTable};
use gpuhash_test_support::{
    SeededRng, adversarial_keys, device, map_conformance, value_in_round, value_of,
};

const CHILDREN: usize = 8;
const RESIDENT: u64 = 2;
const SCRATCH: u64 = 1 << 20;
const FILTER_BITS: u64 = 8;

/// The options of a table of 8 DyHash children of which 2 fit the device budget, for
/// `capacity` pairs.
fn paging_options<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<SwapOptions<CuckooTable<K, V>>, CuckooError> {
    let child_capacity = capacity.div_ceil(CHILDREN).max(1024);
    let child = CuckooTable::<K, V>::with_capacity(device, child_capacity)?;
    let child_bytes = child.memory()?.bytes_reserved;
    // Each child's filter: FILTER_BITS bits a pair, in blocks of 32 bytes.
    let filters = CHILDREN as u64 * (child_capacity as u64 * FILTER_BITS).div_ceil(256) * 32;
    Ok(SwapOptions::with_capacity(capacity)
        .children(CHILDREN)
        .child_capacity(child_capacity)
        .scratch_bytes(SCRATCH)
        .filter_bits_per_key(FILTER_BITS as u32)
        .device_budget(RESIDENT * child_bytes + SCRATCH + filters))
}

/// A table of 8 DyHash children of which 2 fit the device budget, for `capacity` pairs.
fn paging<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<SwapMap<K, V>, CuckooError> {
    SwapMap::new(device, paging_options(device, capacity)?)
}

/// A cost model under which lookups of children on the host always page them in.
fn always_page() -> CostModel {
    CostModel {
        zero_copy_bytes_per_s: 1.0,
        ..CostModel::default()
    }
}

/// A cost model under which lookups of children on the host always probe in place.
fn always_probe() -> CostModel {
    CostModel {
        zero_copy_bytes_per_s: f64::INFINITY,
        ..CostModel::default()
    }
}

/// [`paging`] with lookups that page or probe as `cost_model` says.
fn paging_with<K: Key, V: Value>(capacity: usize, cost_model: CostModel) -> SwapMap<K, V> {
    let options = paging_options(device(), capacity).unwrap();
    SwapMap::new(device(), options.cost_model(cost_model)).unwrap()
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_when_lookups_always_page_or_always_probe() {
    map_conformance(|device, capacity| {
        SwapMap::<u32, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
    map_conformance(|device, capacity| {
        SwapMap::<u64, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
    // Packed children, probed in place and paged.
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_two_of_eight_children_resident() {
    map_conformance(paging::<u32, u64>);
    map_conformance(paging::<u64, u64>);
    map_conformance(paging::<u32, u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_slab_hash_children_which_always_page() {
    map_conformance(slab_hash_children);
}

/// A table of 8 slab hash children of which 2 fit the device budget, for `capacity` pairs.
fn slab_hash_children(
    device: &Device,
    capacity: usize,
) -> Result<SwapTable<SlabHashMap<u32, u32>>, SlabHashError> {
    let child_capacity = capacity.div_ceil(CHILDREN).max(1024);
    let child = SlabHashMap::<u32, u32>::with_capacity(device, child_capacity)?;
    let child_bytes = child.memory()?.bytes_reserved;
    let filters = CHILDREN as u64 * (child_capacity as u64 * FILTER_BITS).div_ceil(256) * 32;
    let options = SwapOptions::<CuckooTable<u32, u32>>::with_capacity(capacity)
        .children(CHILDREN)
        .child_capacity(child_capacity)
        .scratch_bytes(SCRATCH)
        .filter_bits_per_key(FILTER_BITS as u32)
        .device_budget(RESIDENT * child_bytes + SCRATCH + filters)
        .make_child(SlabHashMap::<u32, u32>::with_capacity);
    SwapTable::new(device, options)
}

/// Exports while two threads remove and reinsert keys on their own streams: each child's
/// export must hold only pairs someone inserted (the children's removals may still run on
/// the device while the next batch exports them), for DyHash and slab hash children.
#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_hold_only_inserted_pairs() {
    let dyhash = paging::<u32, u64>(device(), 1 << 16).unwrap();
    gpuhash_test_support::exports_under_churn(&dyhash, 20_000, 4).unwrap();
    let packed = paging::<u32, u32>(device(), 1 << 16).unwrap();
    gpuhash_test_support::exports_under_churn(&packed, 20_000, 4).unwrap();
    let slab_hash = slab_hash_children(device(), 1 << 16).unwrap();
    gpuhash_test_support::exports_under_churn(&slab_hash, 20_000, 4).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_plan_pages() {
    let table = paging::<u32, u64>(device(), 1 << 16).unwrap();
    assert_eq!(table.children(), CHILDREN);
    assert_eq!(table.resident_limit(), RESIDENT as usize);
}

/// Rounds of inserts, removals and lookups of keys spread over every child, held against
/// a `HashMap`.
fn matches_a_hash_map<K: Key, V: Value>() {
    let table = paging::<K, V>(device(), 1 << 16).unwrap();
    let mut model: HashMap<K, V> = HashMap::new();
    let mut rng = SeededRng::new(7);
    let keys: Vec<K> = rng.distinct_keys(1 << 16);
    for (round, batch) in keys.chunks(1 << 13).enumerate() {
        let values: Vec<V> = batch
            .iter()
            .map(|&k| value_in_round::<V>(k.widen(), round as u64))
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
    let mut expected: Vec<(K, V)> = model.into_iter().collect();
    expected.sort_unstable_by_key(|&(k, _)| k);
    assert_eq!(exported, expected);
    assert!(table.stats().page_outs > 0, "{:?}", table.stats());
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u32() {
    matches_a_hash_map::<u32, u64>();
    matches_a_hash_map::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u64() {
    matches_a_hash_map::<u64, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn an_unchanged_child_is_dropped_not_written_back() {
    let table = paging_with::<u64, u64>(1 << 16, always_page());
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
    let no_host_room =
        SwapOptions::<CuckooTable<u32, u32>>::with_capacity(1 << 20).host_budget(4096);
    assert_eq!(
        SwapMap::new(device(), no_host_room).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let no_scratch = SwapOptions::<CuckooTable<u32, u32>>::with_capacity(1 << 20).scratch_bytes(4);
    assert_eq!(
        SwapMap::new(device(), no_scratch).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

/// Lookups of hits, misses, removed keys and adversarial keys, with the answers of a
/// `HashMap`, in batches of `batch` keys.
fn check_lookups<K: Key, V: Value>(
    table: &SwapMap<K, V>,
    model: &HashMap<K, V>,
    probes: &[K],
    batch: usize,
) {
    for chunk in probes.chunks(batch) {
        let found = table.get(chunk).unwrap();
        let present = table.contains(chunk).unwrap();
        for ((key, found), present) in chunk.iter().zip(found).zip(present) {
            assert_eq!(found, model.get(key).copied(), "get {key:?}");
            assert_eq!(present, model.contains_key(key), "contains {key:?}");
        }
    }
}

/// A table filled with `keys` (the adversarial ones included), a third of them removed
/// again, and its model.
fn filled<K: Key, V: Value>(cost_model: CostModel, keys: &[K]) -> (SwapMap<K, V>, HashMap<K, V>) {
    let table = paging_with::<K, V>(1 << 16, cost_model);
    let values: Vec<V> = keys.iter().map(|&k| value_of::<V>(k.widen())).collect();
    table.insert(keys, &values).unwrap();
    let gone: Vec<K> = keys.iter().step_by(3).copied().collect();
    table.remove(&gone).unwrap();
    let mut model: HashMap<K, V> = keys.iter().copied().zip(values).collect();
    for key in &gone {
        model.remove(key);
    }
    (table, model)
}

fn probing_and_paging_agree<K: Key, V: Value>() {
    let mut keys: Vec<K> = SeededRng::new(11).distinct_keys(1 << 15);
    keys.extend(adversarial_keys::<K>());
    keys.sort_unstable();
    keys.dedup();
    let mut probes = keys.clone();
    probes.extend(SeededRng::new(12).distinct_keys::<K>(1 << 14));
    let (probing, model) = filled::<K, V>(always_probe(), &keys);
    let (paged, _) = filled::<K, V>(always_page(), &keys);
    for batch in [1 << 10, 1 << 14, probes.len()] {
        let before = probing.stats();
        check_lookups(&probing, &model, &probes, batch);
        check_lookups(&paged, &model, &probes, batch);
        let after = probing.stats();
        assert_eq!(after.page_ins, before.page_ins, "probing paged: {after:?}");
        assert!(after.probes_in_place > before.probes_in_place, "{after:?}");
        for chunk in probes.chunks(batch) {
            assert_eq!(probing.get(chunk).unwrap(), paged.get(chunk).unwrap());
        }
    }
    assert_eq!(paged.stats().probes_in_place, 0, "{:?}", paged.stats());
    assert!(paged.stats().page_ins > 0, "{:?}", paged.stats());
    assert!(probing.stats().filtered > 0, "{:?}", probing.stats());
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_probed_in_place_and_paged_agree_with_a_hash_map_u32() {
    probing_and_paging_agree::<u32, u64>();
    probing_and_paging_agree::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_probed_in_place_and_paged_agree_with_a_hash_map_u64() {
    probing_and_paging_agree::<u64, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn misses_leave_residency_unchanged() {
    // The default cost model: small batches of misses page nothing in, whatever their
    // filters let through.
    let table = paging::<u64, u64>(device(), 1 << 16).unwrap();
    let keys: Vec<u64> = SeededRng::new(13).distinct_keys(1 << 16);
    let (stored, misses) = keys.split_at(1 << 15);
    table.insert(stored, stored).unwrap();
    let before = table.stats();
    for chunk in misses.chunks(1 << 10) {
        assert!(table.get(chunk).unwrap().iter().all(Option::is_none));
        assert!(!table.contains(chunk).unwrap().iter().any(|&c| c));
    }
    let after = table.stats();
    assert_eq!(
        (after.page_ins, after.page_outs, after.drops),
        (before.page_ins, before.page_outs, before.drops),
        "{after:?}"
    );
    // At 8 bits a pair, nearly every miss stops at its filter.
    let lookups = 2 * misses.len() as u64 * (CHILDREN as u64 - RESIDENT) / CHILDREN as u64;
    assert!(
        after.filtered - before.filtered > lookups * 9 / 10,
        "{after:?}"
    );
    // Small batches of hits do not page either.
    for chunk in stored.chunks(1 << 10) {
        let found = table.get(chunk).unwrap();
        assert!(chunk.iter().zip(found).all(|(&k, v)| v == Some(k)));
    }
    assert_eq!(
        table.stats().page_ins,
        before.page_ins,
        "{:?}",
        table.stats()
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_host_budget_that_runs_out_is_an_error_and_loses_nothing() {
    // The budget holds 8 images: the empty one all children share and 7 of their own, so
    // the page-out of an eighth changed child is refused.
    let options = paging_options::<u64, u64>(device(), 1 << 16).unwrap();
    let child = (options.make_child)(device(), options.child_capacity).unwrap();
    let image_class = child
        .to_pinned_image(&PinnedPool::new_mapped(device(), None))
        .unwrap()
        .pinned_bytes() as u64;
    let table = SwapMap::<u64, u64>::new(
        device(),
        options
            .host_budget(CHILDREN as u64 * image_class)
            .cost_model(always_probe()),
    )
    .unwrap();
    let keys: Vec<u64> = SeededRng::new(14).distinct_keys(1 << 14);
    let mut model: HashMap<u64, u64> = HashMap::new();
    let mut refused = None;
    // Child by child, round and round: each batch changes one child, so a refused batch
    // changes nothing.
    'rounds: for round in 0..3u64 {
        for child in 0..CHILDREN as u32 {
            let batch: Vec<u64> = keys
                .iter()
                .copied()
                .filter(|&k| child_of(k, CHILDREN as u32) == child)
                .skip(round as usize * 100)
                .take(100)
                .collect();
            let values: Vec<u64> = batch.iter().map(|&k| k ^ round).collect();
            match table.insert(&batch, &values) {
                Ok(()) => model.extend(batch.iter().copied().zip(values)),
                Err(error) => {
                    refused = Some(error);
                    break 'rounds;
                }
            }
        }
    }
    let refused = refused.expect("the host budget never ran out");
    assert_eq!(refused.kind(), ErrorKind::OutOfPinnedMemory, "{refused}");
    assert_eq!(table.len().unwrap(), model.len());
    let mut probes: Vec<u64> = model.keys().copied().collect();
    probes.extend_from_slice(&keys);
    check_lookups(&table, &model, &probes, 1 << 12);
}

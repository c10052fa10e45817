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
    SeededRng, adversarial_keys, all_memory, device, fill_device_except, map_conformance,
    shared_memory, stream, value_in_round, value_of,
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

// The conformance runs are split over several tests so that the harness runs them side by
// side: each pages on every batch.

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_when_lookups_always_page() {
    let _memory = shared_memory();
    map_conformance(|device, capacity| {
        SwapMap::<u32, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
    // Packed children.
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_when_lookups_always_probe() {
    let _memory = shared_memory();
    map_conformance(|device, capacity| {
        SwapMap::<u64, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_two_of_eight_children_resident_u32() {
    let _memory = shared_memory();
    map_conformance(paging::<u32, u64>);
    map_conformance(paging::<u32, u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_two_of_eight_children_resident_u64() {
    let _memory = shared_memory();
    map_conformance(paging::<u64, u64>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn conforms_with_slab_hash_children_which_always_page() {
    let _memory = shared_memory();
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
    let _memory = shared_memory();
    let dyhash = paging::<u32, u64>(device(), 1 << 14).unwrap();
    gpuhash_test_support::exports_under_churn(&dyhash, 8_000, 4).unwrap();
    let packed = paging::<u32, u32>(device(), 1 << 14).unwrap();
    gpuhash_test_support::exports_under_churn(&packed, 8_000, 4).unwrap();
    let slab_hash = slab_hash_children(device(), 1 << 14).unwrap();
    gpuhash_test_support::exports_under_churn(&slab_hash, 8_000, 4).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_plan_pages() {
    let _memory = shared_memory();
    let table = paging::<u32, u64>(device(), 1 << 16).unwrap();
    assert_eq!(table.children(), CHILDREN);
    assert_eq!(table.resident_limit(), RESIDENT as usize);
}

/// Rounds of inserts, removals and lookups of keys spread over every child, held against
/// a `HashMap`.
fn matches_a_hash_map<K: Key, V: Value>() {
    let _memory = shared_memory();
    let table = paging::<K, V>(device(), 1 << 14).unwrap();
    let mut model: HashMap<K, V> = HashMap::new();
    let mut rng = SeededRng::new(7);
    let keys: Vec<K> = rng.distinct_keys(1 << 14);
    for (round, batch) in keys.chunks(1 << 11).enumerate() {
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
    let _memory = shared_memory();
    let table = paging_with::<u64, u64>(1 << 14, always_page());
    let keys: Vec<u64> = SeededRng::new(9).distinct_keys(1 << 12);
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
    let _memory = shared_memory();
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
    let table = paging_with::<K, V>(1 << 14, cost_model);
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
    let _memory = shared_memory();
    let mut keys: Vec<K> = SeededRng::new(11).distinct_keys(1 << 13);
    keys.extend(adversarial_keys::<K>());
    keys.sort_unstable();
    keys.dedup();
    let mut probes = keys.clone();
    probes.extend(SeededRng::new(12).distinct_keys::<K>(1 << 12));
    let (probing, model) = filled::<K, V>(always_probe(), &keys);
    let (paged, _) = filled::<K, V>(always_page(), &keys);
    for batch in [1 << 10, 1 << 12, probes.len()] {
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
    let _memory = shared_memory();
    let table = paging::<u64, u64>(device(), 1 << 14).unwrap();
    let keys: Vec<u64> = SeededRng::new(13).distinct_keys(1 << 14);
    let (stored, misses) = keys.split_at(1 << 13);
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
    let _memory = shared_memory();
    let options = paging_options::<u64, u64>(device(), 1 << 14).unwrap();
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
    let keys: Vec<u64> = SeededRng::new(14).distinct_keys(1 << 13);
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

// ---------------------------------------------------------------- the overlapped pipeline

/// `items` in an order `rng` picks.
fn shuffled<T>(rng: &mut SeededRng, mut items: Vec<T>) -> Vec<T> {
    for i in (1..items.len()).rev() {
        items.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    items
}

/// The keys of `keys` that live in the children `children` marks.
fn keys_of_children<K: Key>(keys: &[K], children: &[bool]) -> Vec<K> {
    keys.iter()
        .copied()
        .filter(|k| children[child_of(k.widen(), CHILDREN as u32) as usize])
        .collect()
}

/// Rounds of batches, each over the keys of a random set of children (most often all of
/// them) in a random order, with a random verb, on a table whose lookups page as
/// `cost_model` says: the resident set differs at the start of each batch, so the
/// look-ahead evicts clean and changed children in the middle of batches, in ever other
/// orders. Every answer is held against a `HashMap`.
fn pipeline_matches_a_hash_map<K: Key, V: Value>(seed: u64, cost_model: CostModel) {
    let table = paging_with::<K, V>(1 << 14, cost_model);
    let mut rng = SeededRng::new(seed);
    let keys: Vec<K> = rng.distinct_keys(1 << 13);
    let mut model: HashMap<K, V> = HashMap::new();
    for round in 0..24u64 {
        let children: Vec<bool> = match rng.next_u64() % 3 {
            0 => (0..CHILDREN)
                .map(|_| rng.next_u64().is_multiple_of(2))
                .collect(),
            _ => vec![true; CHILDREN],
        };
        let batch = shuffled(&mut rng, keys_of_children(&keys, &children));
        let batch: Vec<K> = batch
            .into_iter()
            .filter(|_| !rng.next_u64().is_multiple_of(4))
            .collect();
        match rng.next_u64() % 4 {
            0 | 1 => {
                let values: Vec<V> = batch
                    .iter()
                    .map(|&k| value_in_round::<V>(k.widen(), round))
                    .collect();
                table.insert(&batch, &values).unwrap();
                model.extend(batch.iter().copied().zip(values));
            }
            2 => {
                let removed = table.remove(&batch).unwrap();
                for (key, removed) in batch.iter().zip(removed) {
                    assert_eq!(removed, model.remove(key).is_some(), "round {round}");
                }
            }
            _ => {
                let found = table.get(&batch).unwrap();
                let present = table.contains(&batch).unwrap();
                for ((key, found), present) in batch.iter().zip(found).zip(present) {
                    assert_eq!(found, model.get(key).copied(), "round {round}");
                    assert_eq!(present, model.contains_key(key), "round {round}");
                }
            }
        }
        assert_eq!(table.len().unwrap(), model.len(), "round {round}");
    }
    check_lookups(&table, &model, &keys, keys.len());
    let mut exported = table.export().unwrap();
    exported.sort_unstable_by_key(|&(k, _)| k);
    let mut expected: Vec<(K, V)> = model.into_iter().collect();
    expected.sort_unstable_by_key(|&(k, _)| k);
    assert_eq!(exported, expected);
    let stats = table.stats();
    assert!(
        stats.page_outs > 0 && stats.drops > 0 && stats.page_ins > 2 * CHILDREN as u64,
        "{stats:?}"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_in_random_child_orders_u32() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u32, u64>(21, always_page());
    pipeline_matches_a_hash_map::<u32, u32>(22, always_page());
    pipeline_matches_a_hash_map::<u32, u32>(23, CostModel::default());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_in_random_child_orders_u64() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u64, u64>(24, always_page());
    pipeline_matches_a_hash_map::<u64, u64>(25, always_probe());
}

/// A budget of one child: no room to look ahead, every child pages in at its visit.
#[test]
#[ignore = "needs a CUDA device"]
fn a_budget_of_one_child_pages_without_looking_ahead() {
    let _memory = shared_memory();
    let options = paging_options::<u32, u64>(device(), 1 << 14).unwrap();
    let child = (options.make_child)(device(), options.child_capacity).unwrap();
    let child_bytes = child.memory().unwrap().bytes_reserved;
    let budget = options.device_budget - (RESIDENT - 1) * child_bytes;
    let table = SwapMap::new(
        device(),
        options.device_budget(budget).cost_model(always_page()),
    )
    .unwrap();
    assert_eq!(table.resident_limit(), 1);
    let keys: Vec<u32> = SeededRng::new(26).distinct_keys(1 << 12);
    let values: Vec<u64> = keys.iter().map(|&k| value_of::<u64>(k.widen())).collect();
    table.insert(&keys, &values).unwrap();
    let found = table.get(&keys).unwrap();
    assert!(found.iter().zip(&values).all(|(f, v)| *f == Some(*v)));
    assert_eq!(table.len().unwrap(), keys.len());
}

/// Four host threads, each with keys of its own over every child and a model of its
/// own, insert, remove and look up at once on one table whose budget holds two of its
/// eight children.
#[test]
#[ignore = "needs a CUDA device"]
fn four_threads_on_the_pipeline_match_their_models() {
    let _memory = shared_memory();
    let table = paging_with::<u64, u64>(1 << 14, always_page());
    let keys: Vec<u64> = SeededRng::new(27).distinct_keys(1 << 13);
    let models: Vec<HashMap<u64, u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = keys
            .chunks(keys.len() / 4)
            .enumerate()
            .map(|(thread, own)| {
                let table = &table;
                scope.spawn(move || {
                    let mut rng = SeededRng::new(100 + thread as u64);
                    let mut model = HashMap::new();
                    for round in 0..12u64 {
                        let batch = shuffled(&mut rng, own.to_vec());
                        let (some, _) = batch.split_at(batch.len() / 2);
                        let values: Vec<u64> = some.iter().map(|&k| k ^ round).collect();
                        table.insert(some, &values).unwrap();
                        model.extend(some.iter().copied().zip(values));
                        let gone: Vec<u64> =
                            own.iter().copied().step_by(3 + round as usize).collect();
                        for (key, removed) in gone.iter().zip(table.remove(&gone).unwrap()) {
                            assert_eq!(removed, model.remove(key).is_some());
                        }
                        for (key, found) in own.iter().zip(table.get(own).unwrap()) {
                            assert_eq!(found, model.get(key).copied(), "thread {thread}");
                        }
                    }
                    model
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let model: HashMap<u64, u64> = models.into_iter().flatten().collect();
    assert_eq!(table.len().unwrap(), model.len());
    check_lookups(&table, &model, &keys, keys.len());
}

/// Batches over every child with the device nearly full, at rooms from 0 to 48 MiB: a
/// batch may fail anywhere in the pipeline (partition, a page-in ahead, a page-out, a
/// child's kernels), always with `OutOfDeviceMemory`. A failed lookup leaves the table as
/// it was; a failed insert leaves each child with all of its part of the batch or none of
/// it. At some room batches fail and at the largest they pass.
#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_mid_pipeline_loses_nothing() {
    let _memory = all_memory();
    let table = paging_with::<u64, u64>(1 << 14, always_page());
    let keys: Vec<u64> = SeededRng::new(28).distinct_keys(1 << 13);
    let (stored, fresh) = keys.split_at(1 << 12);
    table.insert(stored, stored).unwrap();
    let mut model: HashMap<u64, u64> = stored.iter().map(|&k| (k, k)).collect();
    let (mut failed, mut passed) = (0, 0);
    for (step, room) in (0..=48usize).step_by(4).enumerate() {
        let values: Vec<u64> = fresh.iter().map(|&k| k ^ step as u64).collect();
        let (looked_up, inserted) = {
            let hog = fill_device_except(stream(), room << 20);
            let looked_up = table.get(&keys);
            let inserted = table.insert(fresh, &values);
            drop(hog);
            stream().synchronize().unwrap();
            (looked_up, inserted)
        };
        match looked_up {
            Ok(found) => {
                passed += 1;
                for (key, found) in keys.iter().zip(found) {
                    assert_eq!(found, model.get(key).copied(), "room {room} MiB");
                }
            }
            Err(error) => {
                failed += 1;
                assert_eq!(error.kind(), ErrorKind::OutOfDeviceMemory, "{error}");
            }
        }
        if let Err(error) = &inserted {
            failed += 1;
            assert_eq!(error.kind(), ErrorKind::OutOfDeviceMemory, "{error}");
        }
        // Each child took its part of the insert whole or not at all.
        let found = table.get(fresh).unwrap();
        for child in 0..CHILDREN as u32 {
            let part: Vec<usize> = (0..fresh.len())
                .filter(|&i| child_of(fresh[i], CHILDREN as u32) == child)
                .collect();
            let took = part
                .iter()
                .filter(|&&i| found[i] == Some(values[i]))
                .count();
            assert!(
                took == 0 || took == part.len(),
                "room {room} MiB, child {child}: {took} of {}",
                part.len()
            );
            if took == part.len() {
                model.extend(part.iter().map(|&i| (fresh[i], values[i])));
            }
            if inserted.is_ok() {
                assert_eq!(took, part.len(), "room {room} MiB, child {child}");
            }
        }
        assert_eq!(table.len().unwrap(), model.len(), "room {room} MiB");
    }
    assert!(failed > 0 && passed > 0, "failed {failed}, passed {passed}");
    check_lookups(&table, &model, &keys, keys.len());
}

/// Lookups of keys of children that hold nothing (empty filters): every key stops at its
/// filter, and no child is paged in or probed, however the cost model would reach it.
#[test]
#[ignore = "needs a CUDA device"]
fn a_child_whose_keys_its_filter_all_rules_out_is_neither_paged_nor_probed() {
    let _memory = shared_memory();
    for cost_model in [always_page(), always_probe()] {
        let table = paging_with::<u64, u64>(1 << 14, cost_model);
        let keys: Vec<u64> = SeededRng::new(29).distinct_keys(1 << 13);
        // Keys only in children 0 to 2: with two resident, one of them pages out.
        let filled: Vec<bool> = (0..CHILDREN).map(|c| c < 3).collect();
        let stored = keys_of_children(&keys, &filled);
        table.insert(&stored, &stored).unwrap();
        let empty: Vec<bool> = filled.iter().map(|f| !f).collect();
        let misses = keys_of_children(&keys, &empty);
        let before = table.stats();
        assert!(before.page_outs > 0, "{before:?}");
        for chunk in misses.chunks(1 << 10) {
            assert!(table.get(chunk).unwrap().iter().all(Option::is_none));
            assert!(!table.contains(chunk).unwrap().iter().any(|&c| c));
        }
        let after = table.stats();
        assert_eq!(after.filtered - before.filtered, 2 * misses.len() as u64);
        assert_eq!(
            (
                after.page_ins,
                after.page_outs,
                after.drops,
                after.probes_in_place
            ),
            (
                before.page_ins,
                before.page_outs,
                before.drops,
                before.probes_in_place
            ),
            "{after:?}"
        );
    }
}

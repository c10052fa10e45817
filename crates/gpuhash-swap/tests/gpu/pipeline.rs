//! The overlapped pipeline (the next child paged in while the current child's kernels
//! run) against `HashMap` models: random child orders and verbs, a one-child budget with
//! no look-ahead, four host threads at once, device memory running out mid-pipeline, and
//! children whose filters rule every key out.

use std::collections::HashMap;

use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError, Value};
use gpuhash_swap::{CostModel, SwapMap};
use gpuhash_test_support::{
    SeededRng, all_memory, device, fill_device_except, shared_memory, stream, value_in_round,
    value_of,
};

use crate::common::{
    CHILDREN, RESIDENT, always_page, always_probe, check_lookups, keys_of_children, paging_options,
    paging_with, shuffled,
};

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
fn the_pipeline_matches_a_hash_map_u32_u64_paging() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u32, u64>(21, always_page());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_u32_u32_packed_paging() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u32, u32>(22, always_page());
}

/// The default cost model: small lookups probe, large ones page.
#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_u32_u32_packed_default_costs() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u32, u32>(23, CostModel::default());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_u64_u64_paging() {
    let _memory = shared_memory();
    pipeline_matches_a_hash_map::<u64, u64>(24, always_page());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pipeline_matches_a_hash_map_u64_u64_probing() {
    let _memory = shared_memory();
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
/// child's kernels), in any of its segments, always with `OutOfDeviceMemory`. A failed
/// lookup leaves the table as it was, and so does a failed insert, unless its undo failed
/// too (the table counts those: each key of the batch then holds its new value or its old
/// one). At some room batches fail and at the largest they pass.
#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_mid_pipeline_leaves_the_table_as_it_was() {
    let _memory = all_memory();
    // A page-in reuses the memory its victim's page-out gave back, so what runs out is the
    // batch's own space: 512K fresh pairs (8 MiB and their partitioned copies) ask for more
    // than the smallest rooms leave and less than the largest.
    let table = paging_with::<u64, u64>(1 << 21, always_page());
    let keys: Vec<u64> = SeededRng::new(28).distinct_keys((1 << 12) + (1 << 19));
    let (stored, fresh) = keys.split_at(1 << 12);
    table.insert(stored, stored).unwrap();
    let mut model: HashMap<u64, u64> = stored.iter().map(|&k| (k, k)).collect();
    let (mut failed, mut passed) = (0, 0);
    for (step, room) in (0..=48usize).step_by(4).enumerate() {
        let values: Vec<u64> = fresh.iter().map(|&k| k ^ step as u64).collect();
        let before = table.stats();
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
        // A failed insert is taken back whole (the crate docs, "After an error"): every
        // fresh key holds what it held before. Only where the undo itself failed (counted)
        // may a key hold its new value instead; none is lost or holds anything else.
        let undo_failed = table.stats().undo_failures > before.undo_failures;
        let found = table.get(fresh).unwrap();
        for (i, &key) in fresh.iter().enumerate() {
            let held = model.get(&key).copied();
            match (&inserted, undo_failed) {
                (Ok(()), _) => assert_eq!(found[i], Some(values[i]), "room {room} MiB, {key}"),
                (Err(_), false) => assert_eq!(found[i], held, "room {room} MiB, {key}"),
                (Err(_), true) => assert!(
                    found[i] == Some(values[i]) || found[i] == held,
                    "room {room} MiB, key {key}: {:?}, before {held:?}, new {}",
                    found[i],
                    values[i]
                ),
            }
            if let Some(value) = found[i] {
                model.insert(key, value);
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

//! Paging against `HashMap` models: answers across evictions, write-backs of changed
//! children only, budgets too small to hold a child, lookups of children on the host
//! probed in place and paged giving the same answers, misses answered by the filters with
//! no paging (and probed once a child at the end of a lookup of many segments), a host
//! budget that runs out, and the image bytes paging counts. DyHash
//! children of u32 keys and u32 values have packed buckets (the default for such pairs),
//! the others split ones: both are paged and probed.

use std::collections::HashMap;

use gpuhash_core::image::Image;
use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError, Value};
use gpuhash_core::{PinnedPool, staging};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_swap::policy::child_of;
use gpuhash_swap::{CostModel, SwapMap, SwapOptions};
use gpuhash_test_support::{SeededRng, adversarial_keys, device, shared_memory, value_in_round};

use crate::common::{
    CHILDREN, RESIDENT, SCRATCH, always_page, always_probe, check_lookups, filled,
    keys_of_children, paging, paging_options, paging_with,
};

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
fn answers_match_a_hash_map_across_evictions_u32_u64() {
    matches_a_hash_map::<u32, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u32_u32_packed() {
    matches_a_hash_map::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn answers_match_a_hash_map_across_evictions_u64_u64() {
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

/// The bytes an image of a DyHash child of the test tables holds while it has not grown:
/// its arrays are sized by its capacity, not by what it holds.
fn child_image_bytes<K: Key, V: Value>(table: &SwapMap<K, V>) -> u64 {
    let capacity = (1usize << 14).div_ceil(CHILDREN).max(1024);
    assert_eq!(table.children(), CHILDREN);
    let child = CuckooTable::<K, V>::with_capacity(device(), capacity).unwrap();
    let pool = PinnedPool::new_mapped(device(), None);
    let image = child.to_pinned_image(&pool).unwrap();
    device().synchronize().unwrap();
    image.bytes()
}

#[test]
#[ignore = "needs a CUDA device"]
fn paging_counts_the_image_bytes_it_moves() {
    // A quarter of each child's capacity: no child grows, so every image has the bytes of
    // a fresh child's.
    let _memory = shared_memory();
    let table = paging_with::<u64, u64>(1 << 14, always_page());
    let image = child_image_bytes(&table);
    let keys: Vec<u64> = SeededRng::new(21).distinct_keys(1 << 12);
    assert_eq!(table.stats(), Default::default());
    table.insert(&keys, &keys).unwrap();
    let inserted = table.stats();
    assert!(inserted.page_outs > 0, "{inserted:?}");
    for chunk in keys.chunks(1 << 10) {
        let found = table.get(chunk).unwrap();
        assert!(chunk.iter().zip(found).all(|(&k, v)| v == Some(k)));
    }
    let stats = table.stats();
    assert!(stats.page_ins > inserted.page_ins, "{stats:?}");
    assert_eq!(stats.bytes_paged_in, stats.page_ins * image, "{stats:?}");
    assert_eq!(
        stats.bytes_written_back,
        stats.page_outs * image,
        "{stats:?}"
    );
    // Lookups change nothing, but they evict children the inserts left changed: those
    // are written back, every other child leaving is dropped.
    let lookups = stats.since(inserted);
    assert_eq!(
        lookups.bytes_written_back,
        lookups.page_outs * image,
        "{lookups:?}"
    );
    assert_eq!(
        lookups.bytes_paged_in,
        lookups.page_ins * image,
        "{lookups:?}"
    );
    // Probing in place moves no image.
    let probing = paging_with::<u64, u64>(1 << 14, always_probe());
    probing.insert(&keys, &keys).unwrap();
    let before = probing.stats();
    probing.get(&keys[..1 << 10]).unwrap();
    let probed = probing.stats().since(before);
    assert!(probed.probes_in_place > 0, "{probed:?}");
    assert_eq!(
        (probed.page_ins, probed.bytes_paged_in),
        (0, 0),
        "{probed:?}"
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

/// Lookups of hits, misses, removed keys and adversarial keys, probed in place on one
/// table and paged on another, against a `HashMap` and each other.
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
fn lookups_probed_in_place_and_paged_agree_u32_u64() {
    probing_and_paging_agree::<u32, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_probed_in_place_and_paged_agree_u32_u32_packed() {
    probing_and_paging_agree::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_probed_in_place_and_paged_agree_u64_u64() {
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

/// A lookup batch of several segments pages each child on the host in at most once (in
/// groups the slots hold) where a model pages, none where it probes, and answers as the
/// `HashMap` does under every model: hits, removed keys, misses and adversarial keys,
/// repeated so that the batch spans many segments.
fn lookups_of_many_segments_page_each_child_once<K: Key, V: Value>() {
    let _memory = shared_memory();
    let mut keys: Vec<K> = SeededRng::new(31).distinct_keys(1 << 13);
    keys.extend(adversarial_keys::<K>());
    keys.sort_unstable();
    keys.dedup();
    let mut probes = keys.clone();
    probes.extend(SeededRng::new(32).distinct_keys::<K>(1 << 12));
    let probes: Vec<K> = probes
        .iter()
        .copied()
        .cycle()
        .take(probes.len() * 12)
        .collect();
    let models = [
        ("page", always_page()),
        ("probe", always_probe()),
        ("default", CostModel::default()),
    ];
    for (name, cost_model) in models {
        let (table, model) = filled::<K, V>(cost_model, &keys);
        assert!(
            probes.len() > 4 * table.segment_len(),
            "{name}: {} keys in segments of {}",
            probes.len(),
            table.segment_len()
        );
        let before = table.stats();
        let found = table.get(&probes).unwrap();
        let paged = table.stats().since(before);
        for (key, found) in probes.iter().zip(&found) {
            assert_eq!(*found, model.get(key).copied(), "{name}: get {key:?}");
        }
        let present = table.contains(&probes).unwrap();
        for (key, present) in probes.iter().zip(present) {
            assert_eq!(present, model.contains_key(key), "{name}: contains {key:?}");
        }
        // Paging a child a segment would page it in dozens of times.
        match name {
            "page" => assert!(paged.page_ins <= CHILDREN as u64, "{name}: {paged:?}"),
            "probe" => assert_eq!(paged.page_ins, 0, "{name}: {paged:?}"),
            _ => {}
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_of_many_segments_page_each_child_once_u32_u32_packed() {
    lookups_of_many_segments_page_each_child_once::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_of_many_segments_page_each_child_once_u64_u64() {
    lookups_of_many_segments_page_each_child_once::<u64, u64>();
}

/// A lookup of many segments that the filters mostly answer (misses, with hits and
/// removed keys spread through it) keeps the keys each child's filter passes, segment by
/// segment, and probes each child on the host in place once, at its end: its answers
/// match the `HashMap`'s, and it probes at most once a child where a probe a segment
/// would probe each child on the host once for each of its segments.
fn deferred_probes_run_once_a_child<K: Key, V: Value>() {
    let _memory = shared_memory();
    let keys: Vec<K> = SeededRng::new(41).distinct_keys(1 << 13);
    let (table, model) = filled::<K, V>(always_probe(), &keys);
    let mut probes: Vec<K> = SeededRng::new(42).distinct_keys(5 * table.segment_len());
    let spread = probes.len() / keys.len();
    for (at, &key) in keys.iter().enumerate().step_by(16) {
        probes[at * spread] = key;
    }
    let segments = probes.len().div_ceil(table.segment_len());
    assert!(
        segments >= 5,
        "{} keys in segments of {}",
        probes.len(),
        table.segment_len()
    );
    let before = table.stats();
    let found = table.get(&probes).unwrap();
    let stats = table.stats().since(before);
    for (key, found) in probes.iter().zip(&found) {
        assert_eq!(*found, model.get(key).copied(), "get {key:?}");
    }
    assert!(
        (1..=CHILDREN as u64).contains(&stats.probes_in_place),
        "{segments} segments: {stats:?}"
    );
    assert_eq!(stats.page_ins, 0, "{stats:?}");
    let present = table.contains(&probes).unwrap();
    for (key, present) in probes.iter().zip(present) {
        assert_eq!(present, model.contains_key(key), "contains {key:?}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn deferred_probes_run_once_a_child_u32_u32_packed() {
    deferred_probes_run_once_a_child::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn deferred_probes_run_once_a_child_u64_u64() {
    deferred_probes_run_once_a_child::<u64, u64>();
}

/// A host lookup runs in chunks, each routed, where a sample of it says it would page no
/// child, and whole where it would: misses to children whose filters rule out every key
/// (they hold nothing) and a few hits, past two chunks, go in chunks and answer exactly;
/// a batch of hits large enough to page its children goes whole; a batch of one chunk
/// runs whole either way, with no sample.
#[test]
#[ignore = "needs a CUDA device"]
fn host_lookups_run_in_chunks_only_where_nothing_pages() {
    let _memory = shared_memory();
    let table = paging_with::<u64, u64>(1 << 14, CostModel::default());
    let filled: Vec<bool> = (0..CHILDREN).map(|c| c < 3).collect();
    let stored = keys_of_children(&SeededRng::new(31).distinct_keys::<u64>(1 << 13), &filled);
    let values: Vec<u64> = stored.iter().map(|k| k ^ 0x5a5a).collect();
    table.insert(&stored, &values).unwrap();
    let empty: Vec<bool> = filled.iter().map(|f| !f).collect();
    let mut lookups = keys_of_children(&SeededRng::new(32).distinct_keys::<u64>(1 << 24), &empty);
    assert!(lookups.len() > 2 * staging::CHUNK, "{} keys", lookups.len());
    for (at, &key) in stored.iter().take(16).enumerate() {
        lookups[at * 600_011] = key;
    }
    assert_eq!(table.host_lookup_chunk_for(&lookups), staging::CHUNK);
    let model: HashMap<u64, u64> = stored.iter().copied().zip(values).collect();
    let found = table.get(&lookups).unwrap();
    for (key, found) in lookups.iter().zip(found) {
        assert_eq!(found, model.get(key).copied(), "key {key}");
    }
    let hits: Vec<u64> = stored
        .iter()
        .copied()
        .cycle()
        .take(staging::CHUNK + 1)
        .collect();
    assert_eq!(table.host_lookup_chunk_for(&hits), usize::MAX);
    assert!(table.contains(&hits).unwrap().into_iter().all(|hit| hit));
    assert_eq!(table.host_lookup_chunk_for(&hits[..16]), staging::CHUNK);
}

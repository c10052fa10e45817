//! Slab hash tables on a real GPU, every result held against a std collection model.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::{HashMap, HashSet};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

mod common;
mod exports;

use common::{device, key_from_bits, keys_of, options, sorted, stream};
use gpuhash_core::hash::fmix32;
use gpuhash_core::last_copy::DuplicateKeys;
use gpuhash_core::table::{ErrorKind, Key, Map, MultiMap, Set, Table, TableError as _};
use gpuhash_core::{DeviceBuffer, Error};
use gpuhash_slab_hash::{Op, Outcome, SlabHashError, SlabHashMap, SlabHashMultiMap, SlabHashSet};
use quickcheck::{QuickCheck, TestResult};

/// Tests that fill the device's memory on purpose take this for writing; the others for
/// reading, so that none of them runs out of memory by accident while one does.
static DEVICE_MEMORY: RwLock<()> = RwLock::new(());

fn shared_memory() -> RwLockReadGuard<'static, ()> {
    DEVICE_MEMORY
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn all_memory() -> RwLockWriteGuard<'static, ()> {
    DEVICE_MEMORY
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keys that stress the table: the reserved slab words, zero, and keys equal in the low
/// 20 bits.
fn adversarial_keys() -> Vec<u32> {
    let mut keys = vec![0, 1, u32::MAX, u32::MAX - 1, u32::MAX - 2, 1 << 31];
    keys.extend((0..200).map(|i| (i << 20) | 0x5_5555));
    keys
}

fn check_map(map: &SlabHashMap, model: &HashMap<u32, u32>) {
    let mut expected: Vec<(u32, u32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    expected.sort_unstable();
    assert_eq!(sorted(&map.export().unwrap()), expected);
    assert_eq!(map.len().unwrap(), model.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn map_holds_every_key_value_including_the_reserved_words() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 12, None)).unwrap();
    let keys = adversarial_keys();
    let values: Vec<u32> = keys.iter().map(|&k| fmix32(k)).collect();
    map.insert(&keys, &values).unwrap();
    let model: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
    let got = map.get(&keys).unwrap();
    assert_eq!(got, values.iter().map(|&v| Some(v)).collect::<Vec<_>>());
    assert_eq!(map.get(&[2, 3, 1 << 20]).unwrap(), vec![None, None, None]);
    check_map(&map, &model);

    // Replace, then remove the reserved words and zero.
    map.insert(&[u32::MAX, 0], &[7, 8]).unwrap();
    assert_eq!(map.get(&[u32::MAX, 0]).unwrap(), vec![Some(7), Some(8)]);
    assert_eq!(
        map.remove(&[u32::MAX, u32::MAX - 1, 0, 12345]).unwrap(),
        vec![true, true, true, false]
    );
    assert_eq!(
        map.contains(&[u32::MAX, u32::MAX - 1, 0, 1]).unwrap(),
        vec![false, false, false, true]
    );
    assert_eq!(map.len().unwrap(), keys.len() - 3);
    map.insert(&[], &[]).unwrap();
    assert_eq!(map.get(&[]).unwrap(), vec![]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn duplicate_keys_in_one_batch_keep_one_of_their_values() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 10, None)).unwrap();
    let keys: Vec<u32> = (0..30_000).map(|i| i % 1000).collect();
    let values: Vec<u32> = (0..30_000).collect();
    map.insert(&keys, &values).unwrap();
    assert_eq!(map.len().unwrap(), 1000);
    for (key, value) in map.export().unwrap() {
        assert_eq!(value % 1000, key, "{key} got a value of another key");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_bucket_holds_chains_of_many_slabs_and_flush_compacts_them() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(16, Some(1))).unwrap();
    let keys: Vec<u32> = (0..3000).map(fmix32).collect();
    map.insert(&keys, &keys).unwrap();
    let before = map.memory().unwrap();
    assert!(
        before.bytes_in_use >= 200 * 128,
        "3000 pairs need 200 slabs: {before:?}"
    );
    let removed: Vec<u32> = keys.iter().copied().filter(|k| k % 10 != 0).collect();
    assert!(map.remove(&removed).unwrap().iter().all(|&r| r));
    let kept: HashMap<u32, u32> = keys
        .iter()
        .filter(|k| *k % 10 == 0)
        .map(|&k| (k, k))
        .collect();
    check_map(&map, &kept);
    map.flush().unwrap();
    let after = map.memory().unwrap();
    assert!(
        after.bytes_in_use < before.bytes_in_use / 5,
        "flush freed too little: {before:?} then {after:?}"
    );
    check_map(&map, &kept);
    // The compacted list still takes inserts and removes.
    map.insert(&removed[..100], &removed[..100]).unwrap();
    assert_eq!(map.len().unwrap(), kept.len() + 100);
}

/// Lookups that read only a key's home quarter trust that a key sits there while that
/// quarter has room. A flush compacts lists to their first spots; a list left in its head
/// slab must have its keys put back in their home quarters, or those lookups miss them.
#[test]
#[ignore = "needs a CUDA device"]
fn lookups_after_a_flush_find_every_key_left_and_none_removed() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(6000, Some(1000))).unwrap();
    let keys: Vec<u32> = (0..6000).map(fmix32).collect();
    let values: Vec<u32> = (0..6000).collect();
    map.insert(&keys, &values).unwrap();
    let (kept, removed): (Vec<usize>, Vec<usize>) = (0..keys.len()).partition(|i| i % 3 == 0);
    let removed_keys: Vec<u32> = removed.iter().map(|&i| keys[i]).collect();
    assert!(map.remove(&removed_keys).unwrap().iter().all(|&r| r));
    map.flush().unwrap();
    let got = map.get(&keys).unwrap();
    for (i, (key, got)) in keys.iter().zip(&got).enumerate() {
        let expected = (i % 3 == 0).then_some(values[i]);
        assert_eq!(*got, expected, "key {key:#x} (index {i}) after the flush");
    }
    // Inserts after the flush keep the homes: every key is found again.
    map.insert(&removed_keys, &removed_keys).unwrap();
    let got = map.get(&keys).unwrap();
    for (i, got) in got.iter().enumerate() {
        let expected = if i % 3 == 0 { values[i] } else { keys[i] };
        assert_eq!(*got, Some(expected), "index {i} after reinserting");
    }
    assert_eq!(map.len().unwrap(), kept.len() + removed.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_allocator_grows_under_a_batch_larger_than_the_table() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1000, Some(64))).unwrap();
    let keys: Vec<u32> = (0..1_000_000).map(fmix32).collect();
    map.insert(&keys, &keys).unwrap();
    let got = map.get(&keys).unwrap();
    assert!(got.iter().zip(&keys).all(|(g, &k)| *g == Some(k)));
    assert_eq!(map.len().unwrap(), keys.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn mismatched_lengths_are_refused_and_change_nothing() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(100, None)).unwrap();
    map.insert(&[1, 2], &[10, 20]).unwrap();
    let refused = map.insert(&[3, 4, 5], &[30]);
    assert!(
        matches!(
            refused,
            Err(SlabHashError::Device(Error::LengthMismatch { .. }))
        ),
        "{refused:?}"
    );
    let multimap = SlabHashMultiMap::<u32, u32>::new(device(), options(100, None)).unwrap();
    assert!(multimap.insert(&[1], &[]).is_err());
    assert_eq!(multimap.len().unwrap(), 0);
    check_map(&map, &HashMap::from([(1, 10), (2, 20)]));
}

#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_refuses_the_batch_or_names_the_inserts_left_out() {
    let _memory = all_memory();
    let s = stream();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1000, Some(1 << 16))).unwrap();
    map.insert(&[1, 2, 3], &[1, 2, 3]).unwrap();
    // One chunk of a host insert (a larger batch is undone whole: the next test). The 3M
    // pairs need about 24 MiB of slabs in 2^16 buckets; the device is left room for the
    // batch's own buffers (keys, values, a status byte each) and a spare that grows by
    // 4 MiB: with too little the batch is refused whole; where the slabs it can get run
    // out part way it goes in in part and names the rest (how wide that window is depends
    // on the memory the allocator holds already); with enough it goes in whole.
    let keys: Vec<u32> = (10..3_000_010).map(fmix32).collect();
    let mut failed = 0;
    for spare in (4..=64).step_by(4) {
        let filler = gpuhash_test_support::fill_device_except(s, keys.len() * 9 + (spare << 20));
        let result = map.insert(&keys, &keys);
        drop(filler);
        match result {
            Ok(()) => {
                assert_eq!(map.len().unwrap(), 3 + keys.len());
                break;
            }
            Err(SlabHashError::NotInserted { not_inserted, .. }) => {
                check_named(&map, &keys, not_inserted);
                failed += 1;
                break;
            }
            Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => {
                assert_eq!(map.len().unwrap(), 3, "{spare} MiB spare: a refused batch");
                failed += 1;
            }
            Err(e) => panic!("{spare} MiB spare: {e}"),
        }
    }
    assert!(failed > 0, "4 MiB spare cannot hold 24 MiB of slabs");
    let got = map.get(&keys).unwrap();
    assert!(
        got.iter()
            .zip(&keys)
            .all(|(g, &k)| g.is_none_or(|v| v == k))
    );
    assert_eq!(
        map.get(&[1, 2, 3]).unwrap(),
        vec![Some(1), Some(2), Some(3)]
    );
}

/// After an insert that named `not_inserted` (indices into `keys`, inserted with
/// themselves as values): the others are in, those are not, and 1, 2, 3 are kept.
fn check_named(map: &SlabHashMap, keys: &[u32], not_inserted: Vec<usize>) {
    assert!(!not_inserted.is_empty() && not_inserted.len() < keys.len());
    let missing: HashSet<usize> = not_inserted.into_iter().collect();
    let got = map.get(keys).unwrap();
    for (i, (g, &k)) in got.iter().zip(keys).enumerate() {
        assert_eq!(*g, (!missing.contains(&i)).then_some(k), "element {i}");
    }
    assert_eq!(map.len().unwrap(), 3 + keys.len() - missing.len());
}

/// A host insert of more than one chunk that runs out of memory is undone whole: the map
/// holds what it held before.
#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_in_a_batch_of_chunks_leaves_the_map_as_it_was() {
    let _memory = all_memory();
    let s = stream();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1000, Some(1 << 16))).unwrap();
    map.insert(&[1, 2, 3], &[1, 2, 3]).unwrap();
    let keys: Vec<u32> = (10..10_000_010).map(fmix32).collect();
    let filler = gpuhash_test_support::fill_device_except(s, keys.len() * 9 + (4 << 20));
    let result = map.insert(&keys, &keys);
    drop(filler);
    assert!(result.is_err(), "10M pairs cannot fit in 8 MiB of slabs");
    check_map(&map, &HashMap::from([(1, 1), (2, 2), (3, 3)]));
}

#[test]
#[ignore = "needs a CUDA device"]
fn len_needs_no_memory_in_proportion_to_the_table() {
    let _memory = all_memory();
    let s = stream();
    // About 7.5M buckets: a count per bucket would take 60 MB.
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 26, None)).unwrap();
    let keys: Vec<u32> = (0..10_000).map(fmix32).collect();
    map.insert(&keys, &keys).unwrap();
    let filler = gpuhash_test_support::fill_device_except(s, 4 << 20);
    let counted = map.len();
    let found = map.get(&keys[..100]);
    drop(filler);
    assert_eq!(counted.unwrap(), keys.len());
    assert!(
        found
            .unwrap()
            .iter()
            .zip(&keys)
            .all(|(g, &k)| *g == Some(k))
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn flush_of_a_shared_map_runs_beside_other_threads_batches() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 16, Some(512))).unwrap();
    let flushing = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..3u32)
            .map(|t| {
                let map = &map;
                scope.spawn(move || {
                    let keys: Vec<u32> = (0..30_000).map(|i| fmix32(t << 24 | i)).collect();
                    for round in 0..8usize {
                        map.insert(&keys, &keys).unwrap();
                        let doomed: Vec<u32> =
                            keys.iter().copied().skip(round % 3).step_by(3).collect();
                        assert!(map.remove(&doomed).unwrap().iter().all(|&r| r));
                        let got = map.get(&keys).unwrap();
                        for (i, (g, &k)) in got.iter().zip(&keys).enumerate() {
                            let kept = (i % 3 != round % 3).then_some(k);
                            assert_eq!(*g, kept, "thread {t} round {round} key {i}");
                        }
                    }
                })
            })
            .collect();
        scope.spawn(|| {
            while flushing.load(std::sync::atomic::Ordering::Relaxed) {
                map.flush().unwrap();
            }
        });
        for w in workers {
            w.join().unwrap();
        }
        flushing.store(false, std::sync::atomic::Ordering::Relaxed);
    });
    let model: HashMap<u32, u32> = (0..3u32)
        .flat_map(|t| {
            (0..30_000u32)
                .filter(|i| i % 3 != 7 % 3) // the last round's removals
                .map(move |i| fmix32(t << 24 | i))
        })
        .map(|k| (k, k))
        .collect();
    check_map(&map, &model);
    map.flush().unwrap();
    check_map(&map, &model);
}

/// A batch sequence: each step inserts, removes or looks up keys drawn from a small range
/// (so steps collide), against a HashMap.
fn map_batches_match_the_model(steps: Vec<(u8, Vec<u16>)>, buckets: u8) -> TestResult {
    let map =
        SlabHashMap::<u32, u32>::new(device(), options(256, Some(1 + u32::from(buckets) % 32)))
            .unwrap();
    let mut model = HashMap::new();
    for (kind, raw) in steps {
        let keys: Vec<u32> = raw
            .iter()
            .map(|&k| u32::from(k % 2048).wrapping_sub(2))
            .collect();
        match kind % 3 {
            0 => {
                // Unique keys, so the model knows which value stays.
                let keys: Vec<u32> = keys
                    .iter()
                    .copied()
                    .collect::<HashSet<_>>()
                    .into_iter()
                    .collect();
                let values: Vec<u32> = keys.iter().map(|&k| fmix32(k ^ u32::from(kind))).collect();
                map.insert(&keys, &values).unwrap();
                model.extend(keys.into_iter().zip(values));
            }
            1 => {
                // A key repeated in the batch is removed by exactly one of its elements.
                let removed = map.remove(&keys).unwrap();
                let mut trues: HashMap<u32, usize> = HashMap::new();
                for (&k, r) in keys.iter().zip(removed) {
                    *trues.entry(k).or_default() += usize::from(r);
                }
                for (k, n) in trues {
                    if n != usize::from(model.remove(&k).is_some()) {
                        return TestResult::error(format!("remove of {k} said true {n} times"));
                    }
                }
            }
            _ => {
                let expected: Vec<Option<u32>> =
                    keys.iter().map(|k| model.get(k).copied()).collect();
                if map.get(&keys).unwrap() != expected {
                    return TestResult::error("lookups differ from the model");
                }
            }
        }
    }
    check_map(&map, &model);
    TestResult::passed()
}

#[test]
#[ignore = "needs a CUDA device"]
fn map_follows_a_hash_map_through_random_batches() {
    let _memory = shared_memory();
    QuickCheck::new()
        .tests(60)
        .quickcheck(map_batches_match_the_model as fn(Vec<(u8, Vec<u16>)>, u8) -> TestResult);
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_mixed_batch_answers_each_operation_in_one_launch() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 16, None)).unwrap();
    let present: Vec<u32> = (0..20_000).map(fmix32).collect();
    map.insert(&present, &present).unwrap();
    // Each key appears once in the batch, so every outcome is determined.
    let mut ops = Vec::new();
    for i in 0..20_000u32 {
        let key = fmix32(i);
        ops.push(match i % 4 {
            0 => Op::Get(key),
            1 => Op::Remove(key),
            2 => Op::Insert(key, 7),
            _ => Op::Get(fmix32(i + 1_000_000)),
        });
    }
    ops.push(Op::Insert(u32::MAX, 1));
    ops.push(Op::Remove(u32::MAX - 1));
    let outcomes = map.apply(&ops).unwrap();
    for (op, outcome) in ops.iter().zip(&outcomes) {
        let expected = match *op {
            Op::Get(k) if k == fmix32(k_index(k)) => Outcome::Found(k),
            Op::Get(_) => Outcome::Missing,
            Op::Remove(k) if k == u32::MAX - 1 => Outcome::Missing,
            Op::Remove(_) => Outcome::Removed,
            Op::Insert(..) => Outcome::Inserted,
        };
        assert_eq!(*outcome, expected, "{op:?}");
    }
    assert_eq!(map.len().unwrap(), 20_000 - 5000 + 1);
    assert_eq!(
        map.get(&[fmix32(2), u32::MAX]).unwrap(),
        vec![Some(7), Some(1)]
    );
}

/// The index i < 20000 with fmix32(i) == key, or an index whose fmix32 differs from key.
fn k_index(key: u32) -> u32 {
    (0..20_000).find(|&i| fmix32(i) == key).unwrap_or(u32::MAX)
}

#[test]
#[ignore = "needs a CUDA device"]
fn threads_share_one_map_each_on_its_own_stream() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 18, None)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let map = &map;
            scope.spawn(move || {
                for round in 0..5u32 {
                    let keys: Vec<u32> = (0..20_000)
                        .map(|i| fmix32(t * 1_000_000 + round * 20_000 + i))
                        .collect();
                    map.insert(&keys, &keys).unwrap();
                    let doomed: Vec<u32> = keys.iter().copied().step_by(2).collect();
                    assert!(map.remove(&doomed).unwrap().iter().all(|&r| r));
                    let got = map.get(&keys).unwrap();
                    for (i, (g, &k)) in got.iter().zip(&keys).enumerate() {
                        assert_eq!(*g, (i % 2 == 1).then_some(k));
                    }
                }
            });
        }
    });
    let model: HashMap<u32, u32> = (0..4u32)
        .flat_map(|t| {
            (0..100_000u32)
                .filter(|i| i % 20_000 % 2 == 1)
                .map(move |i| fmix32(t * 1_000_000 + i))
        })
        .map(|k| (k, k))
        .collect();
    check_map(&map, &model);
}

#[test]
#[ignore = "needs a CUDA device"]
fn set_follows_a_hash_set() {
    let _memory = shared_memory();
    let set = SlabHashSet::<u32>::new(device(), options(1 << 12, Some(100))).unwrap();
    let keys = adversarial_keys();
    set.insert(&keys).unwrap();
    assert_eq!(set.len().unwrap(), keys.len());
    set.insert(&keys[..10]).unwrap();
    assert_eq!(
        set.len().unwrap(),
        keys.len(),
        "keys it holds are not added twice"
    );
    let mut model: HashSet<u32> = keys.iter().copied().collect();
    let more: Vec<u32> = (0..50_000).map(|i| fmix32(i) % 100_000).collect();
    set.insert(&more).unwrap();
    model.extend(&more);
    assert_eq!(set.len().unwrap(), model.len());
    assert_eq!(
        sorted(&set.export().unwrap()),
        sorted(&model.iter().copied().collect::<Vec<_>>())
    );
    let probe: Vec<u32> = (0..1000)
        .map(|i| i * 97)
        .chain([u32::MAX, u32::MAX - 1])
        .collect();
    let expected: Vec<bool> = probe.iter().map(|k| model.contains(k)).collect();
    assert_eq!(set.contains(&probe).unwrap(), expected);
    let removed = set.remove(&probe).unwrap();
    assert_eq!(removed, expected);
    for k in &probe {
        model.remove(k);
    }
    set.flush().unwrap();
    assert_eq!(set.len().unwrap(), model.len());
    set.clear().unwrap();
    assert!(set.is_empty().unwrap());
}

#[test]
#[ignore = "needs a CUDA device"]
fn multimap_keeps_duplicates_and_gathers_every_value() {
    let _memory = shared_memory();
    let multimap = SlabHashMultiMap::<u32, u32>::new(device(), options(1 << 14, None)).unwrap();
    // Zipf-like skew: key k appears about 1000 / (k + 1) times; the reserved words too.
    let mut keys = Vec::new();
    let mut values = Vec::new();
    for k in 0..300u32 {
        for j in 0..(1000 / (k + 1)) {
            keys.push(if k < 2 { u32::MAX - k } else { k });
            values.push(j);
        }
    }
    keys.push(7);
    values.push(0); // the same pair as one already there
    multimap.insert(&keys, &values).unwrap();
    let mut model: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&k, &v) in keys.iter().zip(&values) {
        model.entry(k).or_default().push(v);
    }
    let probe: Vec<u32> = model.keys().copied().chain([5000, 0]).collect();
    let counts = multimap.count(&probe).unwrap();
    let all = multimap.get_all(&probe).unwrap();
    for ((k, c), got) in probe.iter().zip(&counts).zip(&all) {
        let expected = model.get(k).cloned().unwrap_or_default();
        assert_eq!(*c as usize, expected.len(), "count of {k}");
        assert_eq!(sorted(got), sorted(&expected), "values of {k}");
    }
    assert_eq!(multimap.len().unwrap(), keys.len());
    let removed = multimap.remove_all(&[u32::MAX, 3, 5000]).unwrap();
    assert_eq!(removed, vec![1000, 250, 0]);
    assert_eq!(multimap.len().unwrap(), keys.len() - 1250);
    multimap.flush().unwrap();
    let mut exported = multimap.export().unwrap();
    exported.sort_unstable();
    let mut expected: Vec<(u32, u32)> = keys
        .iter()
        .zip(&values)
        .filter(|(k, _)| **k != u32::MAX && **k != 3)
        .map(|(&k, &v)| (k, v))
        .collect();
    expected.sort_unstable();
    assert_eq!(exported, expected);
}

fn map_of_width_follows_a_hash_map<K: Key, V: Key>() {
    let map = SlabHashMap::<K, V>::new(device(), options(1 << 14, None)).unwrap();
    let keys = keys_of::<K>(40_000);
    let values: Vec<V> = keys
        .iter()
        .map(|k| key_from_bits::<V>(gpuhash_core::hash::fmix64(k.widen()) | 1))
        .collect();
    map.insert(&keys, &values).unwrap();
    let mut model: HashMap<K, V> = keys.iter().copied().zip(values.iter().copied()).collect();
    assert_eq!(
        map.get(&keys).unwrap(),
        values.iter().map(|&v| Some(v)).collect::<Vec<_>>()
    );
    // Replace some values, remove others (the reserved words among them).
    let replaced: Vec<V> = keys[..100]
        .iter()
        .map(|k| key_from_bits::<V>(k.widen() ^ 0xff))
        .collect();
    map.insert(&keys[..100], &replaced).unwrap();
    model.extend(keys[..100].iter().copied().zip(replaced));
    let doomed: Vec<K> = keys.iter().copied().step_by(3).collect();
    assert!(map.remove(&doomed).unwrap().iter().all(|&r| r));
    for k in &doomed {
        model.remove(k);
    }
    let mut expected: Vec<(K, V)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    expected.sort_unstable();
    assert_eq!(sorted(&map.export().unwrap()), expected);
    let got = map.get(&keys).unwrap();
    for (k, g) in keys.iter().zip(got) {
        assert_eq!(g, model.get(k).copied(), "{k:?}");
    }
    map.flush().unwrap();
    assert_eq!(sorted(&map.export().unwrap()), expected);
    assert_eq!(map.len().unwrap(), model.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn maps_of_every_key_and_value_width_follow_a_hash_map() {
    let _memory = shared_memory();
    map_of_width_follows_a_hash_map::<u32, u64>();
    map_of_width_follows_a_hash_map::<u64, u32>();
    map_of_width_follows_a_hash_map::<u64, u64>();
}

/// Batches with many copies of each key into a map that keeps the last copy, through the
/// host form and the device form, against a HashMap filled in batch order.
fn last_copy_wins_at_width<K: Key, V: Key>() {
    let options = options(1 << 14, None).duplicate_keys(DuplicateKeys::LastCopy);
    let map = SlabHashMap::<K, V>::new(device(), options).unwrap();
    let distinct = keys_of::<K>(3000);
    let mut model = HashMap::new();
    for round in 0..3u64 {
        let keys: Vec<K> = (0..60_000u32)
            .map(|i| distinct[fmix32(i ^ round as u32) as usize % distinct.len()])
            .collect();
        let values: Vec<V> = (0..60_000u64)
            .map(|i| key_from_bits::<V>(round << 40 | i))
            .collect();
        if round == 1 {
            let s = stream();
            map.insert_async(
                s,
                &DeviceBuffer::from_host(s, &keys).unwrap(),
                &DeviceBuffer::from_host(s, &values).unwrap(),
            )
            .unwrap();
            s.synchronize().unwrap();
        } else {
            map.insert(&keys, &values).unwrap();
        }
        model.extend(keys.iter().copied().zip(values.iter().copied()));
        let got = map.get(&distinct).unwrap();
        for (k, g) in distinct.iter().zip(got) {
            assert_eq!(g, model.get(k).copied(), "round {round}, key {k:?}");
        }
        assert_eq!(map.len().unwrap(), model.len());
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn maps_that_keep_the_last_copy_of_a_key_match_inserting_in_order() {
    let _memory = shared_memory();
    last_copy_wins_at_width::<u32, u32>();
    last_copy_wins_at_width::<u32, u64>();
    last_copy_wins_at_width::<u64, u32>();
    last_copy_wins_at_width::<u64, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn sets_and_multimaps_of_64_bit_keys_follow_the_model() {
    let _memory = shared_memory();
    let set = SlabHashSet::<u64>::new(device(), options(1 << 12, Some(50))).unwrap();
    let keys = keys_of::<u64>(10_000);
    set.insert(&keys).unwrap();
    set.insert(&keys[..5]).unwrap();
    assert_eq!(sorted(&set.export().unwrap()), keys);
    let probe = [u64::MAX, u64::MAX - 1, 0, 1, 1 << 40];
    let expected: Vec<bool> = probe
        .iter()
        .map(|k| keys.binary_search(k).is_ok())
        .collect();
    assert_eq!(set.contains(&probe).unwrap(), expected);

    let multimap = SlabHashMultiMap::<u64, u64>::new(device(), options(1 << 12, None)).unwrap();
    let mut pairs = Vec::new();
    for (i, &k) in keys[..300].iter().enumerate() {
        for j in 0..(i % 7) as u64 {
            pairs.push((k, j << 40 | i as u64));
        }
    }
    let (mk, mv): (Vec<u64>, Vec<u64>) = pairs.iter().copied().unzip();
    multimap.insert(&mk, &mv).unwrap();
    let all = multimap.get_all(&keys[..300]).unwrap();
    let counts = multimap.count(&keys[..300]).unwrap();
    for (i, (got, &count)) in all.iter().zip(&counts).enumerate() {
        let expected: Vec<u64> = (0..(i % 7) as u64).map(|j| j << 40 | i as u64).collect();
        assert_eq!(sorted(got), expected, "values of key {i}");
        assert_eq!(count as usize, expected.len());
    }
    let removed = multimap.remove_all(&keys[..3]).unwrap();
    assert_eq!(removed, vec![0, 1, 2]);
    assert_eq!(multimap.len().unwrap(), pairs.len() - 3);
}

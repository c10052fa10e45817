//! Tests over every GPU the driver sees (rank `i` on device `i`); each prints a note and
//! passes where fewer than two are visible.

use std::collections::HashMap;

use gpuhash_core::table::{ErrorKind, Map, Table, TableError};
use gpuhash_core::{Device, DeviceBuffer};
use gpuhash_cuckoo::CuckooError;
use gpuhash_shard::{Comm, ShardOptions, ShardedMap, nccl_available, nccl_missing_help};
use gpuhash_test_support::{
    SeededRng, all_memory, combining_conformance, device, fill_device_except, map_conformance,
    shared_memory,
};

/// Rank 0 on the test device, then every other GPU; `None` (with a note) below two.
fn all_gpus(test: &str) -> Option<Vec<Device>> {
    let count = Device::count().expect("a CUDA driver");
    if count < 2 {
        println!("{test}: {count} GPU visible, needs two or more; skipped");
        return None;
    }
    assert!(nccl_available(), "{}", nccl_missing_help());
    let others = (1..count).map(|ordinal| Device::new(ordinal).expect("a visible GPU"));
    Some(std::iter::once(device().clone()).chain(others).collect())
}

fn table(devices: &[Device], capacity: usize) -> Result<ShardedMap<u64, u64>, CuckooError> {
    ShardedMap::new(
        Comm::from_devices(devices)?,
        ShardOptions::with_capacity(capacity),
    )
}

/// Distinct keys all owned by rank `rank` of `ranks`, and as many more spread over all.
fn skewed_keys(rng: &mut SeededRng, ranks: usize, rank: usize, n: usize) -> Vec<u64> {
    let mut owned = Vec::new();
    while owned.len() < n {
        let key = rng.next_u64();
        if ShardedMap::<u64, u64>::owner_of(key, ranks) == rank {
            owned.push(key);
        }
    }
    owned.extend(rng.distinct_keys::<u64>(n / 8));
    owned.sort_unstable();
    owned.dedup();
    owned
}

/// Everything the map holds, sorted.
fn contents(map: &ShardedMap<u64, u64>) -> Vec<(u64, u64)> {
    let mut pairs = map.export().expect("export");
    pairs.sort_unstable();
    pairs
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_on_every_gpu() {
    let Some(devices) = all_gpus("conformance_on_every_gpu") else {
        return;
    };
    map_conformance(|_device, capacity| table(&devices, capacity));
}

/// Upserts and `insert_or_find` over every GPU: each value combined once, wherever its
/// key lives.
#[test]
#[ignore = "needs a CUDA device"]
fn combining_on_every_gpu() {
    let Some(devices) = all_gpus("combining_on_every_gpu") else {
        return;
    };
    combining_conformance(|_device, capacity| table(&devices, capacity));
}

/// Keys that nearly all belong to one shard (each rank in turn): answers match a model,
/// and that shard holds its keys.
#[test]
#[ignore = "needs a CUDA device"]
fn skewed_keys_load_one_shard() {
    let Some(devices) = all_gpus("skewed_keys_load_one_shard") else {
        return;
    };
    let _memory = shared_memory();
    let ranks = devices.len();
    for rank in 0..ranks {
        let map = table(&devices, 1 << 16).expect("a table");
        let mut rng = SeededRng::new(rank as u64 + 1);
        let keys = skewed_keys(&mut rng, ranks, rank, 1 << 16);
        let values: Vec<u64> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
        map.insert(&keys, &values).expect("insert");
        let model: HashMap<u64, u64> = keys.iter().copied().zip(values.iter().copied()).collect();
        let owned = keys
            .iter()
            .filter(|&&k| ShardedMap::<u64, u64>::owner_of(k, ranks) == rank)
            .count();
        assert_eq!(
            map.shard(rank).len().expect("shard len"),
            owned,
            "rank {rank}"
        );
        assert_eq!(map.len().expect("len"), model.len());
        let mut probes = keys.clone();
        probes.extend(rng.distinct_keys::<u64>(1 << 12));
        let answers = map.get(&probes).expect("get");
        for (key, answer) in probes.iter().zip(answers) {
            assert_eq!(answer, model.get(key).copied(), "key {key:#x}, rank {rank}");
        }
        let removed = map.remove(&keys[..keys.len() / 2]).expect("remove");
        assert!(removed.iter().all(|&r| r));
        assert_eq!(map.len().expect("len"), keys.len() - keys.len() / 2);
        let mut expected: Vec<_> = keys[keys.len() / 2..]
            .iter()
            .map(|&k| (k, model[&k]))
            .collect();
        expected.sort_unstable();
        assert_eq!(contents(&map), expected, "rank {rank}");
    }
}

/// A batch in device buffers on the last GPU: answers come back there, in input order.
#[test]
#[ignore = "needs a CUDA device"]
fn batches_from_another_gpu() {
    let Some(devices) = all_gpus("batches_from_another_gpu") else {
        return;
    };
    let _memory = shared_memory();
    let map = table(&devices, 1 << 16).expect("a table");
    let stream = devices
        .last()
        .expect("GPUs")
        .new_stream()
        .expect("a stream");
    let mut rng = SeededRng::new(7);
    let keys = rng.distinct_keys::<u64>(1 << 15);
    let (inserted, missing) = keys.split_at(keys.len() / 2);
    let values: Vec<u64> = inserted.iter().map(|k| k ^ 0xabc).collect();
    let on_device = DeviceBuffer::from_host(&stream, inserted).expect("keys");
    let values_on_device = DeviceBuffer::from_host(&stream, &values).expect("values");
    map.insert_async(&stream, &on_device, &values_on_device)
        .expect("insert");
    let mut probes = keys.clone();
    probes.reverse();
    let probes_on_device = DeviceBuffer::from_host(&stream, &probes).expect("probes");
    let mut found = DeviceBuffer::zeroed(&stream, probes.len()).expect("found");
    let mut got = DeviceBuffer::zeroed(&stream, probes.len()).expect("values");
    map.get_async(&stream, &probes_on_device, &mut found, &mut got)
        .expect("get");
    let (found, got) = (
        found.to_host(&stream).unwrap(),
        got.to_host(&stream).unwrap(),
    );
    let model: HashMap<u64, u64> = inserted.iter().copied().zip(values).collect();
    for (i, key) in probes.iter().enumerate() {
        match model.get(key) {
            Some(&value) => assert_eq!((found[i], got[i]), (1, value), "key {key:#x}"),
            None => assert_eq!(found[i], 0, "key {key:#x}"),
        }
    }
    assert!(missing.iter().all(|k| !model.contains_key(k)));
}

/// The last GPU's memory full: an insert that needs room there fails with an error of
/// kind `OutOfDeviceMemory` (or `NotInserted`) and leaves every shard as it was, whether
/// the GPU has too little room for the batch's keys to arrive (the exchange fails) or room
/// for them and their log but not for its shard to grow (the shard's insert fails after
/// the other shards changed, and every shard is taken back).
#[test]
#[ignore = "needs a CUDA device"]
fn one_gpu_full_leaves_every_shard_unchanged() {
    let Some(devices) = all_gpus("one_gpu_full_leaves_every_shard_unchanged") else {
        return;
    };
    let _memory = all_memory();
    const BATCH: usize = 1 << 22;
    let per_shard = BATCH / devices.len();
    // Keys and values arriving (16 bytes a pair), the log (9), the split's copies.
    let arrival_room = per_shard * 32 + (2 << 20);
    for room in [1 << 20, arrival_room] {
        let map = table(&devices, 1 << 14).expect("a table");
        let mut rng = SeededRng::new(11);
        let before = rng.distinct_keys::<u64>(1 << 13);
        map.insert(&before, &before).expect("first insert");
        let held = contents(&map);
        let last = devices
            .last()
            .expect("GPUs")
            .new_stream()
            .expect("a stream");
        let filler = fill_device_except(&last, room);
        let batch = rng.distinct_keys::<u64>(BATCH);
        let outcome = map.insert(&batch, &batch);
        drop(filler);
        let error = outcome.expect_err("no room on the last GPU");
        assert!(
            matches!(
                error.kind(),
                ErrorKind::OutOfDeviceMemory | ErrorKind::NotInserted
            ),
            "room {room}: {error}"
        );
        assert_eq!(contents(&map), held, "room {room}");
        map.insert(&batch[..1000], &batch[..1000])
            .expect("inserts once memory is back");
    }
}

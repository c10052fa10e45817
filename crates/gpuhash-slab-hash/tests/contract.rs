//! The table contract on a real GPU: device forms on a caller's stream, inserts queued
//! without waiting that finish on their own, images, and host forms shared by threads.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::{HashMap, HashSet};

mod common;

use common::{device, key_from_bits, keys_of, options, sorted, stream};
use gpuhash_core::DeviceBuffer;
use gpuhash_core::hash::fmix32;
use gpuhash_core::image::{Image, TableImage};
use gpuhash_core::table::{ErrorKind, Key, Map, MultiMap, Set, Table, TableError};
use gpuhash_slab_hash::{Op, OpCode, Outcome, SlabHashMap, SlabHashMultiMap, SlabHashSet, Variant};

fn bools(bytes: &DeviceBuffer<u8>) -> Vec<bool> {
    let bytes = bytes.to_host(stream()).unwrap();
    assert!(bytes.iter().all(|&b| b <= 1), "answers are one or zero");
    bytes.into_iter().map(|b| b == 1).collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_forms_of_every_table_follow_the_model() {
    let s = stream();
    let keys = keys_of::<u64>(30_000);
    let n = keys.len();
    let d_keys = DeviceBuffer::from_host(s, &keys).unwrap();

    // Map: lookups leave the values of missing keys as they were.
    let map = SlabHashMap::<u64, u32>::new(device(), options(1 << 10, Some(64))).unwrap();
    let values: Vec<u32> = keys.iter().map(|&k| fmix32(k as u32) | 1).collect();
    let d_values = DeviceBuffer::from_host(s, &values).unwrap();
    map.insert_async(s, &d_keys, &d_values).unwrap();
    let probe: Vec<u64> = keys.iter().copied().chain([1, 2, 3]).collect();
    let d_probe = DeviceBuffer::from_host(s, &probe).unwrap();
    let mut found = DeviceBuffer::from_host(s, &vec![7u8; probe.len()]).unwrap();
    let mut got = DeviceBuffer::from_host(s, &vec![5u32; probe.len()]).unwrap();
    map.get_async(s, &d_probe, &mut found, &mut got).unwrap();
    let expected_values: Vec<u32> = values.iter().copied().chain([5, 5, 5]).collect();
    assert_eq!(
        bools(&found),
        (0..probe.len()).map(|i| i < n).collect::<Vec<_>>()
    );
    assert_eq!(got.to_host(s).unwrap(), expected_values);
    let doomed = DeviceBuffer::from_host(s, &keys[..n / 2]).unwrap();
    let mut removed = DeviceBuffer::from_host(s, &vec![9u8; n / 2]).unwrap();
    map.remove_async(s, &doomed, &mut removed).unwrap();
    assert!(bools(&removed).iter().all(|&r| r));
    map.contains_async(s, &d_keys, &mut DeviceBuffer::zeroed(s, n).unwrap())
        .unwrap();
    let mut present = DeviceBuffer::zeroed(s, n).unwrap();
    map.contains_async(s, &d_keys, &mut present).unwrap();
    assert_eq!(
        bools(&present),
        (0..n).map(|i| i >= n / 2).collect::<Vec<_>>()
    );
    let pairs = map.export_on(s).unwrap().to_host(s).unwrap();
    let expected: Vec<(u64, u32)> = keys[n / 2..]
        .iter()
        .copied()
        .zip(values[n / 2..].iter().copied())
        .collect();
    assert_eq!(sorted(&pairs), sorted(&expected));
    assert_eq!(map.len_on(s).unwrap(), n - n / 2);

    // Set.
    let set = SlabHashSet::<u64>::new(device(), options(1 << 10, Some(32))).unwrap();
    set.insert_async(s, &d_keys).unwrap();
    let model: HashSet<u64> = keys.iter().copied().collect();
    let expected: Vec<bool> = probe.iter().map(|k| model.contains(k)).collect();
    let mut found = DeviceBuffer::zeroed(s, probe.len()).unwrap();
    set.contains_async(s, &d_probe, &mut found).unwrap();
    assert_eq!(bools(&found), expected);
    let mut removed = DeviceBuffer::zeroed(s, probe.len()).unwrap();
    set.remove_async(s, &d_probe, &mut removed).unwrap();
    assert_eq!(bools(&removed), expected);
    assert!(set.export_on(s).unwrap().to_host(s).unwrap().is_empty());

    // Multimap: key i % 500 gets i % 5 + 1 values; counts, gathers and removals.
    let multimap = SlabHashMultiMap::<u32, u64>::new(device(), options(1 << 12, None)).unwrap();
    let mk: Vec<u32> = (0..500u32)
        .flat_map(|k| std::iter::repeat_n(fmix32(k), k as usize % 5 + 1))
        .collect();
    let mv: Vec<u64> = (0..mk.len() as u64).map(|i| i << 33 | 5).collect();
    let mut model: HashMap<u32, Vec<u64>> = HashMap::new();
    for (&k, &v) in mk.iter().zip(&mv) {
        model.entry(k).or_default().push(v);
    }
    let (d_mk, d_mv) = (
        DeviceBuffer::from_host(s, &mk).unwrap(),
        DeviceBuffer::from_host(s, &mv).unwrap(),
    );
    multimap.insert_async(s, &d_mk, &d_mv).unwrap();
    let probe: Vec<u32> = (0..520u32).map(fmix32).collect();
    let d_probe = DeviceBuffer::from_host(s, &probe).unwrap();
    let expected: Vec<u32> = probe
        .iter()
        .map(|k| model.get(k).map_or(0, Vec::len) as u32)
        .collect();
    let mut counts = DeviceBuffer::zeroed(s, probe.len()).unwrap();
    multimap.count_async(s, &d_probe, &mut counts).unwrap();
    assert_eq!(counts.to_host(s).unwrap(), expected);
    let rows = multimap.get_all_on(s, &d_probe).unwrap();
    let (offsets, gathered) = (
        rows.offsets.to_host(s).unwrap(),
        rows.values.to_host(s).unwrap(),
    );
    assert_eq!(offsets.len(), probe.len() + 1);
    for (i, k) in probe.iter().enumerate() {
        let got = &gathered[offsets[i] as usize..offsets[i + 1] as usize];
        assert_eq!(
            sorted(got),
            sorted(&model.get(k).cloned().unwrap_or_default())
        );
    }
    let mut removed = DeviceBuffer::from_host(s, &vec![77u32; probe.len()]).unwrap();
    multimap
        .remove_all_async(s, &d_probe, &mut removed)
        .unwrap();
    assert_eq!(removed.to_host(s).unwrap(), expected);
    assert!(multimap.is_empty().unwrap());
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_mixed_device_batch_answers_in_bytes_and_values() {
    let s = stream();
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 12, None)).unwrap();
    map.insert(&[1, 2, 3], &[10, 20, 30]).unwrap();
    let ops = [
        Op::Get(1),
        Op::Get(9),
        Op::Remove(2),
        Op::Remove(9),
        Op::Insert(4, 40),
        Op::Insert(u32::MAX, 50),
    ];
    let codes: Vec<OpCode> = ops.iter().map(Op::code).collect();
    let keys: Vec<u32> = ops.iter().map(Op::key).collect();
    let values: Vec<u32> = ops.iter().map(Op::value).collect();
    let mut results = DeviceBuffer::from_host(s, &[3u32; 6]).unwrap();
    let mut done = DeviceBuffer::zeroed(s, ops.len()).unwrap();
    map.apply_async(
        s,
        &DeviceBuffer::from_host(s, &codes).unwrap(),
        &DeviceBuffer::from_host(s, &keys).unwrap(),
        &DeviceBuffer::from_host(s, &values).unwrap(),
        &mut results,
        &mut done,
    )
    .unwrap();
    let (done, results) = (done.to_host(s).unwrap(), results.to_host(s).unwrap());
    assert_eq!(done, vec![1, 0, 1, 0, 1, 1]);
    let outcomes: Vec<Outcome<u32>> = (0..ops.len())
        .map(|i| ops[i].outcome(done[i], results[i]))
        .collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Found(10),
            Outcome::Missing,
            Outcome::Removed,
            Outcome::Missing,
            Outcome::Inserted,
            Outcome::Inserted
        ]
    );
    assert_eq!(results[1], 3, "a missing key leaves its result as it was");
    assert_eq!(
        map.get(&[1, 2, 3, 4, u32::MAX]).unwrap(),
        vec![Some(10), None, Some(30), Some(40), Some(50)]
    );
}

/// Pairs of `n` distinct keys, queued in one `insert_async` into a table whose allocator
/// starts with a few thousand slabs; nothing but a wait on the stream after it.
fn async_batch_larger_than_the_reserve<K: Key, V: Key>(variant: Variant) {
    let s = stream();
    let map = SlabHashMap::<K, V>::new(device(), options(1000, Some(64)).variant(variant)).unwrap();
    let keys = keys_of::<K>(2_000_000);
    let values: Vec<V> = keys
        .iter()
        .map(|k| key_from_bits::<V>(k.widen() ^ 0x5a))
        .collect();
    let reserved_before = map.memory().unwrap().bytes_reserved;
    map.insert_async(
        s,
        &DeviceBuffer::from_host(s, &keys).unwrap(),
        &DeviceBuffer::from_host(s, &values).unwrap(),
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(map.len_on(s).unwrap(), keys.len());
    let expected: Vec<Option<V>> = values.iter().copied().map(Some).collect();
    assert_eq!(map.get(&keys).unwrap(), expected);
    assert!(map.memory().unwrap().bytes_reserved > 100 * reserved_before);
}

#[test]
#[ignore = "needs a CUDA device"]
fn async_inserts_far_past_the_reserve_finish_on_their_own() {
    async_batch_larger_than_the_reserve::<u32, u32>(Variant::Regular);
    async_batch_larger_than_the_reserve::<u64, u64>(Variant::Light);
    // Sets and multimaps reserve the same way.
    let s = stream();
    let keys = keys_of::<u64>(1_000_000);
    let d_keys = DeviceBuffer::from_host(s, &keys).unwrap();
    let set = SlabHashSet::<u64>::new(device(), options(1000, Some(16))).unwrap();
    set.insert_async(s, &d_keys).unwrap();
    let multimap = SlabHashMultiMap::<u64, u64>::new(device(), options(1000, Some(16))).unwrap();
    multimap.insert_async(s, &d_keys, &d_keys).unwrap();
    multimap.insert_async(s, &d_keys, &d_keys).unwrap();
    s.synchronize().unwrap();
    assert_eq!(set.len_on(s).unwrap(), keys.len());
    assert!(set.contains(&keys).unwrap().iter().all(|&c| c));
    assert_eq!(multimap.len_on(s).unwrap(), 2 * keys.len());
    assert!(multimap.count(&keys).unwrap().iter().all(|&c| c == 2));
}

/// The table, written to bytes and read back, through `save` and `load`.
fn through_bytes<T: Image>(table: &T) -> T {
    let mut bytes = Vec::new();
    table.save(&mut bytes).unwrap();
    T::load(device(), &mut bytes.as_slice()).unwrap()
}

fn map_image_round_trip<K: Key, V: Key>(variant: Variant) {
    let map =
        SlabHashMap::<K, V>::new(device(), options(1 << 12, Some(200)).variant(variant)).unwrap();
    let keys = keys_of::<K>(50_000);
    let values: Vec<V> = keys
        .iter()
        .map(|k| key_from_bits::<V>(k.widen() | 1))
        .collect();
    map.insert(&keys, &values).unwrap();
    map.remove(&keys[..1000]).unwrap(); // tombstones travel too
    let probe: Vec<K> = keys
        .iter()
        .copied()
        .chain([key_from_bits::<K>(12345)])
        .collect();
    let (answers, pairs) = (map.get(&probe).unwrap(), sorted(&map.export().unwrap()));
    let copied = SlabHashMap::<K, V>::from_image(device(), &map.to_image().unwrap()).unwrap();
    let loaded = through_bytes(&map);
    for table in [&copied, &loaded] {
        assert_eq!(table.get(&probe).unwrap(), answers);
        assert_eq!(sorted(&table.export().unwrap()), pairs);
        assert_eq!(table.len().unwrap(), keys.len() - 1000);
    }
    // The rebuilt table grows, compacts and takes changes like the original.
    loaded.insert(&keys[..1000], &values[..1000]).unwrap();
    loaded.flush().unwrap();
    assert_eq!(loaded.len().unwrap(), keys.len());
    assert_eq!(
        map.len().unwrap(),
        keys.len() - 1000,
        "the original is untouched"
    );
}

fn set_and_multimap_image_round_trip<K: Key>(variant: Variant) {
    let keys = keys_of::<K>(20_000);
    let set = SlabHashSet::<K>::new(device(), options(1 << 10, Some(50)).variant(variant)).unwrap();
    set.insert(&keys).unwrap();
    set.remove(&keys[..10]).unwrap();
    let loaded = through_bytes(&set);
    assert_eq!(
        sorted(&loaded.export().unwrap()),
        sorted(&set.export().unwrap())
    );
    assert_eq!(
        loaded.contains(&keys).unwrap(),
        set.contains(&keys).unwrap()
    );

    let multimap =
        SlabHashMultiMap::<K, K>::new(device(), options(1 << 10, Some(50)).variant(variant))
            .unwrap();
    let twice: Vec<K> = keys.iter().chain(&keys[..500]).copied().collect();
    multimap.insert(&twice, &twice).unwrap();
    let loaded = through_bytes(&multimap);
    assert_eq!(loaded.count(&keys).unwrap(), multimap.count(&keys).unwrap());
    let (got, expected) = (
        loaded.get_all(&keys[..600]).unwrap(),
        multimap.get_all(&keys[..600]).unwrap(),
    );
    assert!(
        got.iter()
            .zip(&expected)
            .all(|(g, e)| sorted(g) == sorted(e))
    );
    assert_eq!(
        sorted(&loaded.export().unwrap()),
        sorted(&multimap.export().unwrap())
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn images_give_back_the_same_tables_at_every_width_and_variant() {
    for variant in [Variant::Regular, Variant::Light] {
        map_image_round_trip::<u32, u32>(variant);
        map_image_round_trip::<u32, u64>(variant);
        map_image_round_trip::<u64, u32>(variant);
        map_image_round_trip::<u64, u64>(variant);
        set_and_multimap_image_round_trip::<u32>(variant);
        set_and_multimap_image_round_trip::<u64>(variant);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn damaged_and_foreign_images_are_refused() {
    let map = SlabHashMap::<u32, u32>::new(device(), options(1 << 10, None)).unwrap();
    map.insert(&[1, 2, 3], &[4, 5, 6]).unwrap();
    let mut bytes = Vec::new();
    map.save(&mut bytes).unwrap();
    for at in [0, 20, bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let refused = SlabHashMap::<u32, u32>::load(device(), &mut damaged.as_slice());
        assert_eq!(
            refused.unwrap_err().kind(),
            ErrorKind::InvalidInput,
            "byte {at}"
        );
    }
    let truncated = SlabHashMap::<u32, u32>::load(device(), &mut &bytes[..bytes.len() - 9]);
    assert!(truncated.is_err());
    let image = TableImage::read_from(&mut bytes.as_slice()).unwrap();
    assert!(SlabHashMap::<u64, u32>::from_image(device(), &image).is_err());
    assert!(SlabHashMap::<u32, u64>::from_image(device(), &image).is_err());
    assert!(SlabHashMultiMap::<u32, u32>::from_image(device(), &image).is_err());
    assert!(SlabHashSet::<u32>::from_image(device(), &image).is_err());
    // A section cut short passes the checksum it was written with, and is still refused.
    let mut cut = TableImage::new(image.header().clone());
    for (i, section) in image.sections().iter().enumerate() {
        let keep = if i == 1 {
            section.len() - 128
        } else {
            section.len()
        };
        cut.push_section(section[..keep].to_vec());
    }
    assert!(SlabHashMap::<u32, u32>::from_image(device(), &cut).is_err());
    assert_eq!(map.get(&[2]).unwrap(), vec![Some(5)]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn four_host_threads_share_a_set_and_a_multimap_through_the_host_forms() {
    let set = SlabHashSet::<u32>::new(device(), options(1 << 16, None)).unwrap();
    let multimap = SlabHashMultiMap::<u32, u32>::new(device(), options(1 << 16, None)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let (set, multimap) = (&set, &multimap);
            scope.spawn(move || {
                for round in 0..5u32 {
                    let keys: Vec<u32> = (0..20_000)
                        .map(|i| fmix32(t << 28 | round << 20 | i))
                        .collect();
                    set.insert(&keys).unwrap();
                    multimap.insert(&keys, &keys).unwrap();
                    multimap.insert(&keys, &keys).unwrap();
                    let doomed: Vec<u32> = keys.iter().copied().step_by(2).collect();
                    assert!(set.remove(&doomed).unwrap().iter().all(|&r| r));
                    assert!(
                        multimap
                            .remove_all(&doomed)
                            .unwrap()
                            .iter()
                            .all(|&c| c == 2)
                    );
                    let present = set.contains(&keys).unwrap();
                    let counts = multimap.count(&keys).unwrap();
                    for i in 0..keys.len() {
                        assert_eq!(present[i], i % 2 == 1, "thread {t} round {round} key {i}");
                        assert_eq!(counts[i], 2 * (i % 2) as u32);
                    }
                }
            });
        }
    });
    assert_eq!(set.len().unwrap(), 4 * 5 * 10_000);
    assert_eq!(multimap.len().unwrap(), 2 * 4 * 5 * 10_000);
}

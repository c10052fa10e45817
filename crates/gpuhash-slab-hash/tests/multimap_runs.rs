//! Multimap insert batches whose keys repeat, which the tiled pass defers to the grouped
//! appends (`cuda-src/slab_hash/slab_runs.cuh`): one key with 2^20 copies, Zipf-like
//! skew, all keys distinct, batches mixed with the keys of earlier ones and with removals,
//! runs that end exactly at a slab's or a chain's boundary, host threads inserting copies
//! of the same keys at once while others read them, and a batch that runs out of device
//! memory part way. Every answer is held against a host model, each key's values compared
//! as multisets; slabs in use are held against the fewest the pairs need. Run on a GPU
//! machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::HashMap;

mod common;

use common::{device, key_from_bits, options, sorted, stream};
use gpuhash_core::DeviceBuffer;
use gpuhash_core::hash::fmix64;
use gpuhash_core::table::{ErrorKind, Key, MultiMap, Table, TableError};
use gpuhash_slab_hash::{SlabHashError, SlabHashMultiMap};
use gpuhash_test_support::{
    SeededRng, adversarial_keys, all_memory, fill_device_except, shared_memory, value_in_round,
};

/// What a multimap should hold: every value of each key, in no particular order.
struct Model<K, V> {
    entries: HashMap<K, Vec<V>>,
}

impl<K: Key, V: Key> Model<K, V> {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    fn insert(&mut self, keys: &[K], values: &[V]) {
        for (&key, &value) in keys.iter().zip(values) {
            self.entries.entry(key).or_default().push(value);
        }
    }

    fn remove_all(&mut self, keys: &[K]) {
        keys.iter().for_each(|k| drop(self.entries.remove(k)));
    }

    fn len(&self) -> usize {
        self.entries.values().map(Vec::len).sum()
    }
}

/// Holds `multimap` against `model`: counts and values of every key it holds and of
/// `absent` keys, its length, and (while it is small enough to sort on the host) its
/// export.
fn check<K: Key, V: Key>(
    multimap: &SlabHashMultiMap<K, V>,
    model: &Model<K, V>,
    absent: &[K],
    what: &str,
) {
    let mut keys: Vec<K> = model.entries.keys().copied().collect();
    keys.extend(absent.iter().filter(|k| !model.entries.contains_key(k)));
    let counts = multimap.count(&keys).unwrap();
    let rows = multimap.get_all(&keys).unwrap();
    for ((key, &count), row) in keys.iter().zip(&counts).zip(&rows) {
        let expected = model.entries.get(key).map_or(&[][..], Vec::as_slice);
        assert_eq!(count as usize, expected.len(), "{what}: count of {key:?}");
        assert!(
            sorted(row) == sorted(expected),
            "{what}: the {} values of {key:?} are not the {} inserted",
            row.len(),
            expected.len()
        );
    }
    assert_eq!(multimap.len().unwrap(), model.len(), "{what}: len");
    if model.len() <= 1 << 22 {
        let mut expected: Vec<(K, V)> = (model.entries.iter())
            .flat_map(|(&k, values)| values.iter().map(move |&v| (k, v)))
            .collect();
        expected.sort_unstable();
        assert!(
            sorted(&multimap.export().unwrap()) == expected,
            "{what}: the export is not the model's pairs"
        );
    }
}

/// A value for copy `copy` of `key`: copies get different values (a 32-bit value may
/// repeat now and then, which a multiset comparison takes in its stride).
fn value_for<V: Key>(key: u64, copy: u64) -> V {
    value_in_round(key, copy)
}

fn values_for<K: Key, V: Key>(keys: &[K], first_copy: u64) -> Vec<V> {
    (keys.iter().enumerate())
        .map(|(i, k)| value_for(k.widen(), first_copy + i as u64))
        .collect()
}

/// `keys` in a random order of `seed`.
fn shuffled<K: Copy>(mut keys: Vec<K>, seed: u64) -> Vec<K> {
    let mut rng = SeededRng::new(seed);
    for i in (1..keys.len()).rev() {
        keys.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    keys
}

/// `copies` copies of each key, shuffled.
fn with_copies<K: Key>(keys: &[(K, usize)], seed: u64) -> Vec<K> {
    let all = keys
        .iter()
        .flat_map(|&(k, c)| std::iter::repeat_n(k, c))
        .collect();
    shuffled(all, seed)
}

/// Pairs a slab of this width holds: 15 of two words, 7 of three or four.
fn per_slab<K: Key, V: Key>() -> usize {
    if K::WORDS + V::WORDS == 2 { 15 } else { 7 }
}

/// Slabs the allocator lends the multimap beyond its head slabs (`buckets` of them).
fn slabs_beyond_heads<K: Key, V: Key>(multimap: &SlabHashMultiMap<K, V>, buckets: u64) -> u64 {
    let heads = (buckets + 3) * 128;
    (multimap.memory().unwrap().bytes_in_use - heads) / 128
}

/// One key with 2^18 and then 2^20 copies among 1000 keys of one copy, into a table
/// cleared between the two: every copy is stored, and a count and a get_all of the key
/// answer them all. (How the build's time grows with the copies is measured by W6's
/// stand-alone indexes, docs/benchmarks/hyperspace.md, not here.)
#[test]
#[ignore = "needs a CUDA device"]
fn a_key_with_a_million_copies_goes_in_whole() {
    let _memory = shared_memory();
    let multimap = SlabHashMultiMap::<u32, u32>::new(device(), options(1 << 16, None)).unwrap();
    let heavy = 0x5eed_u32;
    let others: Vec<u32> = SeededRng::new(1).distinct_keys(1000);
    for copies in [1usize << 18, 1 << 20] {
        let mut keyed: Vec<(u32, usize)> = others.iter().map(|&k| (k, 1)).collect();
        keyed.push((heavy, copies));
        let keys = with_copies(&keyed, copies as u64);
        let values: Vec<u32> = values_for(&keys, 0);
        multimap.clear().unwrap();
        multimap.insert(&keys, &values).unwrap();
        assert_eq!(multimap.count(&[heavy]).unwrap()[0] as usize, copies);
        assert_eq!(multimap.get_all(&[heavy]).unwrap()[0].len(), copies);
        let mut model = Model::new();
        model.insert(&keys, &values);
        check(
            &multimap,
            &model,
            &[1, 2, u32::MAX],
            &format!("{copies} copies"),
        );
    }
}

/// Keys of rank r among 2000 get about 2^16 / r copies (the first ones the reserved words
/// and zero), in two batches, at every width.
fn zipf_skew<K: Key, V: Key>() {
    let multimap = SlabHashMultiMap::<K, V>::new(device(), options(1 << 14, None)).unwrap();
    let mut ranked: Vec<K> = [u64::MAX, u64::MAX - 1, u64::MAX - 2, 0]
        .into_iter()
        .map(key_from_bits::<K>)
        .collect();
    ranked.extend(SeededRng::new(2).distinct_keys::<K>(2000));
    ranked.dedup();
    let keyed: Vec<(K, usize)> = (ranked.iter().enumerate())
        .map(|(r, &k)| (k, ((1 << 16) / (r + 1)).max(1)))
        .collect();
    let mut model = Model::new();
    for round in 0..2u64 {
        let keys = with_copies(&keyed, 10 + round);
        let values: Vec<V> = values_for(&keys, round << 32);
        multimap.insert(&keys, &values).unwrap();
        model.insert(&keys, &values);
        let absent = SeededRng::new(3).distinct_keys::<K>(100);
        check(&multimap, &model, &absent, &format!("Zipf round {round}"));
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn zipf_skewed_batches_match_the_model_at_every_width() {
    let _memory = shared_memory();
    zipf_skew::<u32, u32>();
    zipf_skew::<u32, u64>();
    zipf_skew::<u64, u32>();
    zipf_skew::<u64, u64>();
}

/// 2^20 distinct keys, then the same keys again (two copies each), then the adversarial
/// keys: the tiled pass stores most pairs, and the few of full head slabs are appended.
fn distinct<K: Key, V: Key>() {
    let multimap = SlabHashMultiMap::<K, V>::new(device(), options(1 << 21, None)).unwrap();
    let keys: Vec<K> = SeededRng::new(4).distinct_keys(1 << 20);
    let mut model = Model::new();
    for round in 0..2 {
        let values: Vec<V> = values_for(&keys, round << 32);
        multimap.insert(&keys, &values).unwrap();
        model.insert(&keys, &values);
        check(&multimap, &model, &[], &format!("distinct, round {round}"));
    }
    let adversarial = adversarial_keys::<K>();
    let values: Vec<V> = values_for(&adversarial, 7 << 32);
    multimap.insert(&adversarial, &values).unwrap();
    model.insert(&adversarial, &values);
    check(&multimap, &model, &[], "distinct, adversarial keys");
}

#[test]
#[ignore = "needs a CUDA device"]
fn batches_of_distinct_keys_match_the_model() {
    let _memory = shared_memory();
    distinct::<u32, u32>();
    distinct::<u64, u64>();
}

/// Six batches, each of new keys, more copies of keys of earlier batches (one growing by
/// 20000 copies a batch into a list of thousands of slabs, others by a few), queued on a
/// caller's stream or run from the host in turn; removals of some keys in between, and a
/// flush half way.
fn mixed_with_earlier_keys<K: Key, V: Key>() {
    let multimap = SlabHashMultiMap::<K, V>::new(device(), options(1 << 16, None)).unwrap();
    let mut model = Model::new();
    let mut rng = SeededRng::new(5);
    let old: Vec<K> = rng.distinct_keys(3000);
    let s = stream();
    for round in 0..6u64 {
        let fresh: Vec<K> = rng.distinct_keys(5000);
        let mut keyed: Vec<(K, usize)> = fresh
            .iter()
            .map(|&k| (k, 1 + (k.widen() % 3) as usize))
            .collect();
        keyed.push((old[0], 20_000));
        keyed.extend(old[1..].iter().map(|&k| (k, 1 + (k.widen() % 40) as usize)));
        let keys = with_copies(&keyed, 20 + round);
        let values: Vec<V> = values_for(&keys, round << 32);
        if round % 2 == 0 {
            multimap.insert(&keys, &values).unwrap();
        } else {
            let (d_keys, d_values) = (
                DeviceBuffer::from_host(s, &keys).unwrap(),
                DeviceBuffer::from_host(s, &values).unwrap(),
            );
            multimap.insert_async(s, &d_keys, &d_values).unwrap();
            s.synchronize().unwrap();
        }
        model.insert(&keys, &values);
        check(
            &multimap,
            &model,
            &fresh[..10],
            &format!("mixed, round {round}"),
        );
        let gone: Vec<K> = fresh
            .iter()
            .step_by(7)
            .chain(&old[1 + round as usize..][..50])
            .copied()
            .collect();
        multimap.remove_all(&gone).unwrap();
        model.remove_all(&gone);
        if round == 2 {
            multimap.flush().unwrap();
        }
        check(
            &multimap,
            &model,
            &gone[..10],
            &format!("mixed, round {round}, after removals"),
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn batches_mixed_with_keys_of_earlier_batches_match_the_model() {
    let _memory = shared_memory();
    mixed_with_earlier_keys::<u32, u32>();
    mixed_with_earlier_keys::<u64, u32>();
    mixed_with_earlier_keys::<u64, u64>();
}

/// One key alone in a fresh table, in batches whose copies end exactly at a slab's end,
/// one short of it or one past it, at a chain's end (32 slabs from one claim of the
/// allocator) or past it: every copy is stored, and the list takes the fewest slabs that
/// hold them (every slab full but the tail).
fn boundaries<K: Key, V: Key>() {
    const BUCKETS: u32 = 64;
    let per = per_slab::<K, V>();
    let multimap =
        SlabHashMultiMap::<K, V>::new(device(), options(1 << 10, Some(BUCKETS))).unwrap();
    let key = key_from_bits::<K>(0xb0b0_cafe);
    let runs: [&[usize]; 6] = [
        &[per],
        &[per - 1, 1, per],
        &[per + 1, per - 1, 1],
        &[32 * per, per, 1],
        &[33 * per, 31 * per, 32 * per + 1],
        &[2 * per, 64 * per - 1, 1, 1],
    ];
    for batches in runs {
        multimap.clear().unwrap();
        let mut model = Model::new();
        let mut held = 0;
        for (b, &copies) in batches.iter().enumerate() {
            let keys = vec![key; copies];
            let values: Vec<V> = values_for(&keys, (held + b) as u64);
            multimap.insert(&keys, &values).unwrap();
            model.insert(&keys, &values);
            held += copies;
            let what = format!("{batches:?} pairs of {per} a slab, after {}", b + 1);
            check(&multimap, &model, &[], &what);
            let slabs = slabs_beyond_heads(&multimap, u64::from(BUCKETS));
            assert_eq!(
                slabs,
                (held.div_ceil(per) - 1) as u64,
                "{what}: {held} pairs in {slabs} slabs beside the head"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn runs_that_end_at_slab_and_chain_boundaries_fill_every_slab() {
    let _memory = shared_memory();
    boundaries::<u32, u32>();
    boundaries::<u32, u64>();
    boundaries::<u64, u32>();
    boundaries::<u64, u64>();
}

/// A value of `key` that says whose it is: its top bits are a tag of the key that is never
/// all ones (so an empty slot does not pass for one), the rest a serial number.
fn tagged<K: Key, V: Key>(key: K, serial: u64) -> V {
    let tag = fmix64(key.widen()) % if V::WORDS == 1 { 0xfff } else { 0xffff_ffff };
    let bits = if V::WORDS == 1 {
        (tag << 20) | (serial & 0xf_ffff)
    } else {
        (tag << 32) | (serial & 0xffff_ffff)
    };
    key_from_bits(bits)
}

/// Four host threads insert batches of copies of the same 8 keys (and keys of their own)
/// while two others read the 8 keys' values: readers see only values written under their
/// key, and at the end the multimap holds every copy of every thread.
fn threads_share_keys<K: Key, V: Key>() {
    const WRITERS: u64 = 4;
    const BATCHES: u64 = 6;
    let multimap = SlabHashMultiMap::<K, V>::new(device(), options(1 << 18, None)).unwrap();
    let shared: Vec<K> = SeededRng::new(6).distinct_keys(8);
    let done = std::sync::atomic::AtomicBool::new(false);
    let batches: Vec<Vec<(Vec<K>, Vec<V>)>> = (0..WRITERS)
        .map(|w| {
            (0..BATCHES)
                .map(|b| {
                    let own: Vec<K> = SeededRng::new(100 + w * BATCHES + b).distinct_keys(2000);
                    let mut keyed: Vec<(K, usize)> = shared.iter().map(|&k| (k, 5000)).collect();
                    keyed.extend(own.iter().map(|&k| (k, 2)));
                    let keys = with_copies(&keyed, w * BATCHES + b);
                    let serial = (w * BATCHES + b) << 16;
                    let values = (keys.iter().enumerate())
                        .map(|(i, &k)| tagged::<K, V>(k, serial + i as u64))
                        .collect();
                    (keys, values)
                })
                .collect()
        })
        .collect();
    std::thread::scope(|scope| {
        let writers: Vec<_> = (batches.iter())
            .map(|mine| {
                let multimap = &multimap;
                scope.spawn(move || {
                    for (keys, values) in mine {
                        multimap.insert(keys, values).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            let (multimap, shared, done) = (&multimap, &shared, &done);
            scope.spawn(move || {
                let mut reads = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                    for (key, row) in shared.iter().zip(multimap.get_all(shared).unwrap()) {
                        let wrong = row.iter().filter(|&&v| v != tagged_as(*key, v)).count();
                        assert_eq!(
                            wrong, 0,
                            "a reader saw {wrong} values nobody wrote under {key:?}"
                        );
                    }
                    reads += 1;
                }
            });
        }
        writers.into_iter().for_each(|w| w.join().unwrap());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut model = Model::new();
    for (keys, values) in batches.iter().flatten() {
        model.insert(keys, values);
    }
    check(&multimap, &model, &[], "after the threads");
}

/// `value` with its serial number kept and its tag made `key`'s: equal to `value` only if
/// it was written under `key`.
fn tagged_as<K: Key, V: Key>(key: K, value: V) -> V {
    let serial_bits = if V::WORDS == 1 { 0xf_ffff } else { 0xffff_ffff };
    tagged(key, value.widen() & serial_bits)
}

#[test]
#[ignore = "needs a CUDA device"]
fn threads_inserting_copies_of_the_same_keys_at_once_keep_every_copy() {
    let _memory = shared_memory();
    threads_share_keys::<u32, u32>();
    threads_share_keys::<u64, u64>();
}

/// A batch of 3M pairs, 20 keys of 150000 copies each, with too little device memory for
/// its slabs: the batch is refused whole (OutOfDeviceMemory, the multimap as it was), or
/// goes in but for the pairs NotInserted names, or, with memory enough, whole. An insert
/// queued without waiting is refused with nothing queued. Then the multimap works on.
#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_in_a_batch_of_copies_keeps_the_multimap_rule() {
    let _memory = all_memory();
    let s = stream();
    let multimap =
        SlabHashMultiMap::<u32, u32>::new(device(), options(1000, Some(1 << 10))).unwrap();
    let mut model = Model::new();
    let before: Vec<u32> = (0..3000).collect();
    multimap.insert(&before, &before).unwrap();
    model.insert(&before, &before);
    let heavy: Vec<(u32, usize)> = (0..20).map(|k| (1_000_000 + k, 150_000)).collect();
    let keys = with_copies(&heavy, 30);
    let values: Vec<u32> = values_for(&keys, 0);
    // Room for the batch's keys and values, its status, grouped indices and table of
    // buckets, and a spare that grows by 4 MiB; the slabs need about 26 MiB.
    let mut failed = 0;
    for spare in (4..=64).step_by(4) {
        let filler = fill_device_except(s, keys.len() * 13 + (1 << 20) + (spare << 20));
        let result = multimap.insert(&keys, &values);
        drop(filler);
        match result {
            Ok(()) => {
                model.insert(&keys, &values);
                break;
            }
            Err(SlabHashError::NotInserted { not_inserted, .. }) => {
                assert!(!not_inserted.is_empty() && not_inserted.len() < keys.len());
                let mut left_out = vec![false; keys.len()];
                not_inserted.iter().for_each(|&i| left_out[i] = true);
                let (went_keys, went_values): (Vec<u32>, Vec<u32>) = (keys.iter().zip(&values))
                    .zip(&left_out)
                    .filter(|(_, out)| !**out)
                    .map(|((&k, &v), _)| (k, v))
                    .unzip();
                model.insert(&went_keys, &went_values);
                failed += 1;
                break;
            }
            Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => failed += 1,
            Err(e) => panic!("{spare} MiB spare: {e}"),
        }
        check(
            &multimap,
            &model,
            &[1_000_000],
            &format!("{spare} MiB spare, refused"),
        );
    }
    assert!(failed > 0, "4 MiB spare cannot hold 26 MiB of slabs");
    check(&multimap, &model, &[], "after the batch");
    let (d_keys, d_values) = (
        DeviceBuffer::from_host(s, &keys).unwrap(),
        DeviceBuffer::from_host(s, &values).unwrap(),
    );
    let filler = fill_device_except(s, 4 << 20);
    let queued = multimap.insert_async(s, &d_keys, &d_values);
    drop(filler);
    let refused = queued.expect_err("4 MiB cannot hold the room the batch reserves");
    assert_eq!(refused.kind(), ErrorKind::OutOfDeviceMemory, "{refused}");
    check(&multimap, &model, &[], "after a refused insert_async");
    let more: Vec<u32> = with_copies(&[(7, 5000), (2_000_000, 1)], 31);
    let more_values: Vec<u32> = values_for(&more, 1 << 40);
    multimap.insert(&more, &more_values).unwrap();
    model.insert(&more, &more_values);
    check(&multimap, &model, &[], "after a batch with memory again");
}

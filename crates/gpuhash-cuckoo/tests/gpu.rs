//! gpuhash-cuckoo on a real GPU, every result held against a `HashMap` model.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use gpuhash_core::image::{Image, PinnedImage, ProbeInPlace};
use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError, Value};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, Error, PinnedPool};
use gpuhash_cuckoo::{
    BucketLayout, CuckooError, CuckooOptions, CuckooTable, DuplicateKeys, policy,
};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| Device::default().expect("these tests need a CUDA device"))
}

/// Tests run in parallel; the one that takes nearly all device memory runs alone.
static MEMORY: RwLock<()> = RwLock::new(());

fn shared_memory() -> RwLockReadGuard<'static, ()> {
    MEMORY.read().unwrap_or_else(|e| e.into_inner())
}

fn all_memory() -> RwLockWriteGuard<'static, ()> {
    MEMORY.write().unwrap_or_else(|e| e.into_inner())
}

/// The bucket layouts every test of `u32` keys and 4-byte values runs with: the default
/// (packed buckets for such pairs) and split buckets forced, so that both stay covered.
const LAYOUTS: [BucketLayout; 2] = [BucketLayout::Auto, BucketLayout::Split];

/// Pairs a bucket of a `u32`/`u32` table of `layout` holds.
fn slots(layout: BucketLayout) -> u64 {
    CuckooTable::<u32, u32>::bucket_slots(layout).unwrap() as u64
}

/// A table that starts as small as it can (one bucket a subtable), so that a few
/// thousand pairs push it across both fill bounds many times.
fn small_options() -> CuckooOptions {
    CuckooOptions::with_capacity(0)
}

/// A table of fixed size (alpha 0 and beta 0.99, so it never resizes) of buckets of `slots`
/// pairs that `pairs` pairs fill to `load`, with its buckets a subtable.
fn fixed_size(pairs: u32, load: f64, slots: u64) -> (CuckooOptions, u64) {
    let buckets = (f64::from(pairs) / load / slots as f64 / 3.0).ceil() as u64;
    let options = CuckooOptions::default()
        .initial_buckets(buckets)
        .alpha(0.0)
        .beta(0.99);
    (options, buckets)
}

/// How many keys a remove answered true for.
fn count_removed(flags: Vec<bool>) -> usize {
    flags.into_iter().filter(|&removed| removed).count()
}

/// Deterministic xorshift, for inputs the tests make themselves.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Checks everything the table says against the model: every model key's value, misses,
/// the length, the exported pairs, and the fill factor bounds.
fn check_against<K: Key, V: Value>(
    table: &CuckooTable<K, V>,
    model: &HashMap<K, V>,
    misses: &[K],
) -> Result<(), String> {
    if table.len().unwrap() != model.len() {
        return Err(format!(
            "len {} != model {}",
            table.len().unwrap(),
            model.len()
        ));
    }
    let keys: Vec<K> = model.keys().copied().collect();
    let got = table.get(&keys).map_err(|e| e.to_string())?;
    for (k, g) in keys.iter().zip(&got) {
        if g.as_ref() != model.get(k) {
            return Err(format!("get({k:?}) = {g:?}, model {:?}", model.get(k)));
        }
    }
    let absent: Vec<K> = misses
        .iter()
        .copied()
        .filter(|k| !model.contains_key(k))
        .collect();
    if table
        .contains(&absent)
        .map_err(|e| e.to_string())?
        .iter()
        .any(|&c| c)
    {
        return Err("a key not in the model is found".into());
    }
    let mut exported = table.export().map_err(|e| e.to_string())?;
    exported.sort_by_key(|p| p.0);
    let mut expected: Vec<(K, V)> = model.iter().map(|(k, v)| (*k, *v)).collect();
    expected.sort_by_key(|p| p.0);
    if exported.len() != expected.len() || exported.iter().zip(&expected).any(|(a, b)| a != b) {
        return Err(format!(
            "export differs: {} pairs, model {}",
            exported.len(),
            expected.len()
        ));
    }
    let (fill, o) = (table.fill_factor().unwrap(), table.options());
    if fill > o.beta + 1e-12 {
        return Err(format!("fill factor {fill} above beta {}", o.beta));
    }
    if fill < o.alpha && !table.at_minimum_size().unwrap() {
        return Err(format!(
            "fill factor {fill} below alpha {} with room to shrink ({:?})",
            o.alpha,
            table.subtable_buckets()
        ));
    }
    let buckets = table.subtable_buckets();
    let (min, max) = (buckets.iter().min().unwrap(), buckets.iter().max().unwrap());
    if max > &(2 * min) {
        return Err(format!("subtables {buckets:?} differ by more than 2x"));
    }
    Ok(())
}

/// One batch of a random sequence.
#[derive(Debug, Clone)]
enum Batch {
    Insert(Vec<u32>, u32),
    Remove(Vec<u32>),
    Get(Vec<u32>),
}

/// Keys from a small space (so batches hit, repeat and collide), with the special values
/// mixed in.
fn key_of(raw: u32) -> u32 {
    match raw % 97 {
        0 => 0,
        1 => u32::MAX,
        2 => (raw % 4096) << 20 | 0x5_5555,
        _ => raw % 6000,
    }
}

impl Arbitrary for Batch {
    fn arbitrary(g: &mut Gen) -> Self {
        let size = usize::arbitrary(g) % 3000;
        let salt = u32::arbitrary(g);
        let keys: Vec<u32> = (0..size)
            .map(|i| key_of(gpuhash_core::hash::fmix32(salt ^ i as u32)))
            .collect();
        match u8::arbitrary(g) % 5 {
            0..=1 => Batch::Insert(keys, u32::arbitrary(g)),
            2..=3 => Batch::Remove(keys),
            _ => Batch::Get(keys),
        }
    }
}

fn run_sequence(batches: Vec<Batch>, rehash_all: bool, layout: BucketLayout) -> TestResult {
    let options = small_options()
        .layout(layout)
        .rehash_all(rehash_all)
        .alpha(if rehash_all { 0.3 } else { 0.4 });
    let table = CuckooTable::<u32, u32>::new(device(), options).unwrap();
    let mut model: HashMap<u32, u32> = HashMap::new();
    let mut misses = vec![0u32, u32::MAX, 7, 1 << 20 | 0x5_5555];
    for (step, batch) in batches.into_iter().enumerate() {
        match &batch {
            Batch::Insert(keys, salt) => {
                // Distinct values per position, so that the winner of duplicates shows.
                let values: Vec<u32> = (0..keys.len() as u32).map(|i| salt ^ i).collect();
                table.insert(keys, &values).unwrap();
                let mut winners: HashMap<u32, Vec<u32>> = HashMap::new();
                for (k, v) in keys.iter().zip(&values) {
                    winners.entry(*k).or_default().push(*v);
                }
                let got = table
                    .get(&winners.keys().copied().collect::<Vec<_>>())
                    .unwrap();
                for ((k, candidates), g) in winners.iter().zip(got) {
                    let Some(g) = g else {
                        return TestResult::error(format!("step {step}: inserted {k} missing"));
                    };
                    if !candidates.contains(&g) {
                        return TestResult::error(format!(
                            "step {step}: {k} has {g}, not one of the batch's values"
                        ));
                    }
                    model.insert(*k, g);
                }
            }
            Batch::Remove(keys) => {
                let removed = count_removed(table.remove(keys).unwrap());
                let mut expected = 0;
                for k in keys {
                    if model.remove(k).is_some() {
                        expected += 1;
                    }
                }
                if removed != expected {
                    return TestResult::error(format!(
                        "step {step}: removed {removed}, model {expected}"
                    ));
                }
                misses.extend(keys.iter().take(50));
            }
            Batch::Get(keys) => {
                let got = table.get(keys).unwrap();
                for (k, g) in keys.iter().zip(got) {
                    if g.as_ref() != model.get(k) {
                        return TestResult::error(format!("step {step}: get({k}) = {g:?}"));
                    }
                }
            }
        }
        if let Err(e) = check_against(&table, &model, &misses) {
            return TestResult::error(format!("step {step} ({}): {e}", kind(&batch)));
        }
    }
    TestResult::passed()
}

fn kind(b: &Batch) -> &'static str {
    match b {
        Batch::Insert(..) => "insert",
        Batch::Remove(..) => "remove",
        Batch::Get(..) => "get",
    }
}

/// The sequence on a table of `LAYOUTS[L]`.
fn sequences_match_the_model<const L: usize>(batches: Vec<Batch>) -> TestResult {
    run_sequence(batches, false, LAYOUTS[L])
}

fn sequences_match_the_model_rehashing_everything<const L: usize>(
    batches: Vec<Batch>,
) -> TestResult {
    run_sequence(batches, true, LAYOUTS[L])
}

/// One property for each of `LAYOUTS`.
type Property = fn(Vec<Batch>) -> TestResult;

#[test]
#[ignore = "needs a CUDA device"]
fn random_batch_sequences_match_a_hashmap() {
    let _memory = shared_memory();
    let properties: [Property; 2] = [
        sequences_match_the_model::<0>,
        sequences_match_the_model::<1>,
    ];
    for property in properties {
        QuickCheck::new()
            .tests(40)
            .rng(Gen::new(40))
            .quickcheck(property);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_batch_sequences_match_a_hashmap_in_rehash_everything_mode() {
    let _memory = shared_memory();
    let properties: [Property; 2] = [
        sequences_match_the_model_rehashing_everything::<0>,
        sequences_match_the_model_rehashing_everything::<1>,
    ];
    for property in properties {
        QuickCheck::new()
            .tests(15)
            .rng(Gen::new(30))
            .quickcheck(property);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn fill_crosses_both_bounds_many_times() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        // Grow to 200k pairs and shrink back to 1k, three times, checking after every batch.
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        let mut model = HashMap::new();
        for round in 0..3u32 {
            for step in 0..20u32 {
                let first = round * 1_000_000 + step * 10_000;
                let (keys, values) = workload::host_pairs(KeySet::Hits, first, 10_000);
                table.insert(&keys, &values).unwrap();
                model.extend(keys.into_iter().zip(values));
                check_against(&table, &model, &[]).unwrap();
            }
            let mut keys: Vec<u32> = model.keys().copied().collect();
            keys.sort_unstable();
            for chunk in keys.chunks(10_000).take(keys.len() / 10_000 - 1) {
                assert_eq!(count_removed(table.remove(chunk).unwrap()), chunk.len());
                for k in chunk {
                    model.remove(k);
                }
                check_against(&table, &model, &chunk[..10]).unwrap();
            }
        }
        let stats = table.resize_stats();
        assert!(stats.upsizes >= 10 && stats.downsizes >= 10, "{stats:?}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn wide_values_round_trip() {
    let _memory = shared_memory();
    let table = CuckooTable::<u64, [u32; 16]>::new(device(), small_options()).unwrap();
    let mut model = HashMap::new();
    let keys: Vec<u64> = (0..50_000u64)
        .map(|i| gpuhash_core::hash::fmix64(i) | (i & 1) << 63)
        .chain([0, u64::MAX, u64::MAX - 1])
        .collect();
    let values: Vec<[u32; 16]> = keys
        .iter()
        .map(|&k| std::array::from_fn(|w| (k as u32).wrapping_mul(w as u32 + 1) ^ (k >> 32) as u32))
        .collect();
    table.insert(&keys, &values).unwrap();
    model.extend(keys.iter().copied().zip(values.iter().copied()));
    check_against(&table, &model, &[5, 6, 7]).unwrap();
    // Replace half the values, remove a third of the keys.
    let replaced: Vec<[u32; 16]> = values.iter().map(|v| v.map(|w| !w)).collect();
    table.insert(&keys[..25_000], &replaced[..25_000]).unwrap();
    model.extend(
        keys[..25_000]
            .iter()
            .copied()
            .zip(replaced[..25_000].iter().copied()),
    );
    table.remove(&keys[30_000..]).unwrap();
    for k in &keys[30_000..] {
        model.remove(k);
    }
    check_against(&table, &model, &keys[30_000..30_100]).unwrap();
    // Odd widths.
    let table = CuckooTable::<u32, [u8; 12]>::new(device(), small_options()).unwrap();
    table
        .insert(&[1, 2, u32::MAX], &[[1; 12], [2; 12], [3; 12]])
        .unwrap();
    assert_eq!(
        table.get(&[2, u32::MAX, 9]).unwrap(),
        vec![Some([2; 12]), Some([3; 12]), None]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn memory_counts_every_array_of_the_table() {
    let _memory = shared_memory();
    let table = CuckooTable::<u64, [u32; 3]>::new(device(), small_options()).unwrap();
    let keys: Vec<u64> = (0..20_000u64).map(gpuhash_core::hash::fmix64).collect();
    let values: Vec<[u32; 3]> = keys.iter().map(|&k| [k as u32; 3]).collect();
    table.insert(&keys, &values).unwrap();
    let memory = table.memory().unwrap();
    let per_subtable = table.subtable_buckets();
    let buckets: u64 = per_subtable.iter().sum();
    // A bucket of u64 keys: 16 keys of 8 bytes, their 16 values of 12 bytes, a lock word;
    // a subtable's dirty bits, one word for 32 buckets; then the pair counts of 8
    // subtables and the side slot (2 header words, 3 value words).
    let dirty_words: u64 = per_subtable.iter().map(|b| b.div_ceil(32)).sum();
    let table_bytes = buckets * (16 * 8 + 16 * 12 + 4) + dirty_words * 4 + 8 * 8 + (2 + 3) * 4;
    assert_eq!(memory.bytes_in_use, table_bytes);
    assert_eq!(memory.entry_bytes, keys.len() as u64 * (8 + 12));
    assert!(
        memory.bytes_reserved > memory.bytes_in_use,
        "the insert keeps its scratch space"
    );
    assert_eq!(
        memory.utilization(),
        (keys.len() * 20) as f64 / table_bytes as f64
    );
}

/// The layout each pair gets (packed for a u32 key and any 4-byte value, split for other
/// pairs and when forced), the slots of its buckets, and the memory it counts: packed
/// buckets hold 16 pairs in their 128 bytes and have no values array, split u32 buckets 32
/// keys and their 32 values apart. Both hold the same pairs and answer alike.
#[test]
#[ignore = "needs a CUDA device"]
fn each_pair_gets_its_layout_and_memory_counts_it() {
    let _memory = shared_memory();
    let packed = BucketLayout::Packed;
    let split = BucketLayout::Split;
    let layout_of = |options: CuckooOptions| {
        let f = CuckooTable::<u32, f32>::new(device(), options.clone()).unwrap();
        let one = CuckooTable::<u32, [u32; 1]>::new(device(), options.clone()).unwrap();
        let wide = CuckooTable::<u64, u32>::new(device(), options.clone()).unwrap();
        (f.layout(), one.layout(), wide.layout())
    };
    assert_eq!(layout_of(small_options()), (packed, packed, split));
    assert_eq!(
        layout_of(small_options().layout(split)),
        (split, split, split)
    );
    assert!(matches!(
        CuckooTable::<u64, u32>::new(device(), small_options().layout(packed)),
        Err(CuckooError::InvalidOptions(_))
    ));
    let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 20_000);
    let (misses, _) = workload::host_pairs(KeySet::Misses, 0, 1000);
    for (layout, resolved, slots, value_bytes) in [
        (BucketLayout::Auto, packed, 16, 0),
        (packed, packed, 16, 0),
        (split, split, 32, 32 * 4),
    ] {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        assert_eq!(
            (table.layout(), table.slots_per_bucket()),
            (resolved, slots)
        );
        table.insert(&keys, &values).unwrap();
        let per_subtable = table.subtable_buckets();
        let buckets: u64 = per_subtable.iter().sum();
        assert_eq!(table.capacity() as u64, buckets * slots as u64);
        // A bucket: 128 bytes of slot words, its values apart (split), a lock word; the
        // dirty bits, the pair counts of 8 subtables and the side slot (2 + 1 words).
        let dirty_words: u64 = per_subtable.iter().map(|b| b.div_ceil(32)).sum();
        let table_bytes = buckets * (128 + value_bytes + 4) + dirty_words * 4 + 8 * 8 + 3 * 4;
        assert_eq!(
            table.memory().unwrap().bytes_in_use,
            table_bytes,
            "{layout:?}"
        );
        let model: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        check_against(&table, &model, &misses).unwrap();
    }
}

/// For batches whose value words start with the pair's index in the batch: every key of
/// `distinct` is held with the whole value of one of its own pairs (of equal keys in a batch,
/// one value wins, never a mix).
fn each_holds_one_whole_value_of_its_own<const W: usize>(
    table: &CuckooTable<u32, [u32; W]>,
    distinct: &[u32],
    keys: &[u32],
    values: &[[u32; W]],
) where
    [u32; W]: bytemuck::Pod,
{
    for (k, got) in distinct.iter().zip(table.get(distinct).unwrap()) {
        let v = got.expect("inserted");
        assert_eq!(
            keys[v[0] as usize], *k,
            "the value comes from this key's pairs"
        );
        assert_eq!(v, values[v[0] as usize], "one whole value, not a mix");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn duplicate_keys_in_one_batch_store_one_value() {
    let _memory = shared_memory();
    let table = CuckooTable::<u32, [u32; 4]>::new(device(), small_options()).unwrap();
    // 200k inserts of 1000 keys, each key 200 times with distinct values, in one batch,
    // into an empty table (no pass 1) and then again into a full one (pass 1 updates).
    for round in 0..2u32 {
        let keys: Vec<u32> = (0..200_000u32).map(|i| i % 1000 * 7919).collect();
        let values: Vec<[u32; 4]> = (0..200_000u32).map(|i| [i, i ^ round, !i, i]).collect();
        table.insert(&keys, &values).unwrap();
        assert_eq!(table.len().unwrap(), 1000);
        let distinct: Vec<u32> = (0..1000).map(|i| i * 7919).collect();
        each_holds_one_whole_value_of_its_own(&table, &distinct, &keys, &values);
        assert_eq!(table.export().unwrap().len(), 1000);
    }
    // Duplicates of the reserved key.
    table.insert(&[u32::MAX; 100], &[[9; 4]; 100]).unwrap();
    assert_eq!(table.len().unwrap(), 1001);
    assert_eq!(
        count_removed(table.remove(&[u32::MAX, u32::MAX]).unwrap()),
        1
    );
    assert_eq!(table.len().unwrap(), 1000);
}

#[test]
#[ignore = "needs a CUDA device"]
fn duplicates_meet_in_both_insert_passes() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        // 2^20 distinct keys, one in 16 twice, in one shuffled batch with distinct values, into
        // a table sized for load 0.92 (the batch with its copies just fits below beta, so it does
        // not grow): early pairs go in lock-free, late ones find all their buckets full and go
        // through the evicting pass, and the copies of a key meet in either.
        let distinct = 1u32 << 20;
        let (options, buckets) = fixed_size(distinct, 0.92, slots(layout));
        let table = CuckooTable::<u32, u32>::new(device(), options.layout(layout)).unwrap();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut keys = Vec::new();
        for i in 0..distinct {
            let key = gpuhash_core::hash::fmix32(i);
            let copies = if rng.next().is_multiple_of(16) { 2 } else { 1 };
            keys.extend(std::iter::repeat_n(key, copies));
        }
        for i in (1..keys.len()).rev() {
            keys.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        let distinct_keys: Vec<u32> = (0..distinct).map(gpuhash_core::hash::fmix32).collect();
        // Round 0 into the empty table, round 1 over it (every key held already).
        for round in 0..2u32 {
            let values: Vec<u32> = (0..keys.len() as u32).map(|j| j | round << 31).collect();
            table.insert(&keys, &values).unwrap();
            assert_eq!(table.len().unwrap(), distinct as usize);
            assert_eq!(table.subtable_buckets(), vec![buckets; 3], "no resize");
            for (k, got) in distinct_keys.iter().zip(table.get(&distinct_keys).unwrap()) {
                let v = got.expect("every key is held");
                assert_eq!(v >> 31, round, "key {k}: a value of this round");
                assert_eq!(
                    keys[(v & !(1 << 31)) as usize],
                    *k,
                    "key {k}: one of its own values"
                );
            }
            assert_eq!(table.export().unwrap().len(), distinct as usize);
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn adversarial_keys() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        let mut model = HashMap::new();
        // Empty batches change nothing.
        table.insert(&[], &[]).unwrap();
        assert_eq!(table.get(&[]).unwrap(), vec![]);
        assert_eq!(count_removed(table.remove(&[]).unwrap()), 0);
        assert!(table.is_empty().unwrap());
        // 0 and all ones are ordinary keys.
        table.insert(&[0, u32::MAX], &[10, 20]).unwrap();
        model.extend([(0, 10), (u32::MAX, 20)]);
        check_against(&table, &model, &[1, u32::MAX - 1]).unwrap();
        // 4096 keys equal in their low 20 bits.
        let same_low: Vec<u32> = (0..4096u32).map(|i| i << 20 | 0xa_bcde).collect();
        table.insert(&same_low, &same_low).unwrap();
        model.extend(same_low.iter().map(|&k| (k, k)));
        check_against(&table, &model, &[0x000a_bcdf]).unwrap();
        // A batch far larger than the table.
        let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 300_000);
        table.insert(&keys, &values).unwrap();
        model.extend(keys.iter().copied().zip(values.iter().copied()));
        let (misses, _) = workload::host_pairs(KeySet::Misses, 0, 1000);
        check_against(&table, &model, &misses).unwrap();
        // Zipf-skewed keys (s = 1.2 over 100k ranks), with repeats inside batches.
        let mut rng = Rng(0x1234_5678);
        for _ in 0..5 {
            let keys: Vec<u32> = (0..100_000)
                .map(|_| {
                    let (n, s) = (100_000f64, 1.2f64);
                    let u = rng.unit();
                    let rank = ((n.powf(1.0 - s) - 1.0) * u + 1.0).powf(1.0 / (1.0 - s));
                    gpuhash_core::hash::fmix32(rank as u32)
                })
                .collect();
            let values: Vec<u32> = keys.iter().map(|k| k ^ 0xffff).collect();
            table.insert(&keys, &values).unwrap();
            model.extend(keys.iter().copied().zip(values.iter().copied()));
            check_against(&table, &model, &misses).unwrap();
            let gone: Vec<u32> = keys.iter().step_by(3).copied().collect();
            table.remove(&gone).unwrap();
            for k in &gone {
                model.remove(k);
            }
            check_against(&table, &model, &gone[..100]).unwrap();
        }
        // Clearing empties everything, the reserved key included.
        table.clear().unwrap();
        model.clear();
        check_against(&table, &model, &[0, u32::MAX]).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn u64_keys_match_the_model() {
    let _memory = shared_memory();
    let table = CuckooTable::<u64, u64>::new(device(), small_options()).unwrap();
    let mut model = HashMap::new();
    let p = (1u64 << 61) - 1;
    let mut keys: Vec<u64> = (0..2000u64).map(|i| i * p).collect(); // equal mod 2^61 - 1
    keys.extend((0..2000u64).map(|i| i << 40)); // equal in the low 40 bits
    keys.extend((0..100_000u64).map(|i| gpuhash_core::hash::fmix64(i + 77)));
    keys.extend([0, u64::MAX, u64::MAX - 1, u32::MAX as u64]);
    let values: Vec<u64> = keys.iter().map(|k| k.rotate_left(7)).collect();
    table.insert(&keys, &values).unwrap();
    model.extend(keys.iter().copied().zip(values.iter().copied()));
    check_against(&table, &model, &[1, 2, 3, p + 1]).unwrap();
    table.remove(&keys[..3000]).unwrap();
    for k in &keys[..3000] {
        model.remove(k);
    }
    check_against(&table, &model, &keys[..100]).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn mismatched_lengths_change_nothing() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        table.insert(&[1, 2, 3], &[1, 2, 3]).unwrap();
        let err = table.insert(&[4, 5], &[4]).unwrap_err();
        assert!(matches!(
            err,
            CuckooError::Core(Error::LengthMismatch { .. })
        ));
        let model = HashMap::from([(1, 1), (2, 2), (3, 3)]);
        check_against(&table, &model, &[4, 5]).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_leaves_the_table_as_it_was() {
    let _memory = all_memory();
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let table = CuckooTable::<u32, [u32; 16]>::new(dev, small_options()).unwrap();
    let (keys, _) = workload::host_pairs(KeySet::Hits, 0, 100_000);
    let values: Vec<[u32; 16]> = keys.iter().map(|&k| [k; 16]).collect();
    table.insert(&keys, &values).unwrap();
    let model: HashMap<u32, [u32; 16]> = keys.iter().copied().zip(values.iter().copied()).collect();
    // Take nearly all free memory, leaving too little for the next batch's growth.
    // The batch's upload and scratch take about 550 MB; growing the table to hold it
    // needs more than the rest.
    let hog = gpuhash_test_support::fill_device_except(&stream, 600 << 20);
    let (more, _) = workload::host_pairs(KeySet::Hits, 100_000, 2_000_000);
    let more_values: Vec<[u32; 16]> = more.iter().map(|&k| [!k; 16]).collect();
    let result = table.insert(&more, &more_values);
    drop(hog);
    match result {
        Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => {}
        other => panic!("expected OutOfDeviceMemory, got {other:?}"),
    }
    check_against(&table, &model, &more[..1000]).unwrap();
    // And the table works afterwards.
    table.insert(&more, &more_values).unwrap();
    assert_eq!(table.len().unwrap(), 2_100_000);
}

#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_memory_half_way_through_a_batch_undoes_it() {
    let _memory = all_memory();
    let dev = device();
    let stream = dev.new_stream().unwrap();
    for layout in LAYOUTS {
        // A fixed size, beta 1 and one swap a pair at most: the second batch, from load 0.5 to
        // 0.995, fits below beta (nothing grows up front) but leaves pairs homeless, and the
        // upsize that would take them cannot get its memory; by then pairs of the batch are
        // placed and old pairs evicted. (The first batch stays below the load at which a single
        // swap leaves pairs homeless.)
        // 3 * 2^22 slots in either layout: a subtable takes about 34 MB, doubled 68 MB.
        let buckets = (1u64 << 22) / slots(layout);
        let capacity = 3 << 22;
        let options = CuckooOptions::default()
            .layout(layout)
            .initial_buckets(buckets)
            .alpha(0.0)
            .beta(1.0)
            .max_evictions(1);
        let table = CuckooTable::<u32, u32>::new(dev, options).unwrap();
        let held = capacity / 2;
        let (keys, values) = workload::host_pairs(KeySet::Hits, 0, held);
        table.insert(&keys, &values).unwrap();
        let model: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        let sizes = table.subtable_buckets();
        assert_eq!(
            sizes,
            vec![buckets; 3],
            "the first batch went in without growing"
        );
        let (mut more, mut more_values) =
            workload::host_pairs(KeySet::Hits, held, capacity / 1000 * 495);
        // The reserved key too, whose side slot the table did not hold: the undo empties it.
        more.push(u32::MAX);
        more_values.push(7);
        // Room for the batch: uploads, the first pass's flags and old values (13 bytes a pair)
        // and 24 MB to spare, not for doubling a subtable as well (65 MB). The batch's copy
        // sorted by partition takes the place of the first batch's, which it frees first (and
        // which is larger). The synchronize hands what the first batch freed back from the
        // stream-ordered pool; left there, it would serve the upsize.
        let room = more.len() * 13 + (24 << 20);
        dev.synchronize().unwrap();
        let hog = gpuhash_test_support::fill_device_except(&stream, room);
        let result = table.insert(&more, &more_values);
        drop(hog);
        match result {
            Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => {}
            other => panic!(
                "expected OutOfDeviceMemory, got {other:?}; subtables {:?} -> {:?}, {:?}",
                sizes,
                table.subtable_buckets(),
                table.resize_stats()
            ),
        }
        // A subtable doubled before memory ran out may stay doubled: the pairs held are what
        // must be as before, and none of the batch.
        check_against(&table, &model, &more).unwrap();
        table.insert(&more, &more_values).unwrap();
        assert_eq!(table.len().unwrap(), keys.len() + more.len());
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_buffer_forms_agree_with_host_forms() {
    let _memory = shared_memory();
    let dev = device();
    let stream = dev.new_stream().unwrap();
    for layout in LAYOUTS {
        let options = CuckooOptions::with_capacity(1 << 20).layout(layout);
        let table = CuckooTable::<u32, u32>::new(dev, options).unwrap();
        let n = 1 << 20;
        let mut keys = DeviceBuffer::<u32>::zeroed(&stream, n).unwrap();
        let mut values = DeviceBuffer::<u32>::zeroed(&stream, n).unwrap();
        workload::generate(&stream, KeySet::Hits, 0, &mut keys, Some(&mut values)).unwrap();
        table.insert_async(&stream, &keys, &values).unwrap();
        assert_eq!(table.len_on(&stream).unwrap(), n);
        let mut found = DeviceBuffer::<u8>::zeroed(&stream, n).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&stream, n).unwrap();
        table
            .get_async(&stream, &keys, &mut found, &mut out)
            .unwrap();
        assert!(found.to_host(&stream).unwrap().iter().all(|&f| f == 1));
        assert_eq!(
            out.to_host(&stream).unwrap(),
            values.to_host(&stream).unwrap()
        );
        let mut misses = DeviceBuffer::<u32>::zeroed(&stream, n).unwrap();
        workload::generate(&stream, KeySet::Misses, 0, &mut misses, None).unwrap();
        table.contains_async(&stream, &misses, &mut found).unwrap();
        assert!(found.to_host(&stream).unwrap().iter().all(|&f| f == 0));
        let mut removed = DeviceBuffer::<u8>::zeroed(&stream, n).unwrap();
        table.remove_async(&stream, &keys, &mut removed).unwrap();
        assert!(removed.to_host(&stream).unwrap().iter().all(|&r| r == 1));
        assert_eq!(table.len_on(&stream).unwrap(), 0);
        let exported = table.export_on(&stream).unwrap();
        assert!(exported.keys.is_empty() && exported.values.is_empty());
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn high_load_builds_place_every_pair() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        // Tables sized for loads 0.9 and 0.95 (beta raised so they stay that full).
        for load in [0.9, 0.95] {
            let n = 1u32 << 22;
            let (options, buckets) = fixed_size(n, load, slots(layout));
            let table = CuckooTable::<u32, u32>::new(device(), options.layout(layout)).unwrap();
            let (keys, values) = workload::host_pairs(KeySet::Hits, 0, n);
            table.insert(&keys, &values).unwrap();
            assert_eq!(table.len().unwrap(), n as usize);
            assert_eq!(
                table.subtable_buckets(),
                vec![buckets; 3],
                "no resize at {load}"
            );
            let got = table.get(&keys).unwrap();
            assert!(got.iter().zip(&values).all(|(g, v)| *g == Some(*v)));
            let (misses, _) = workload::host_pairs(KeySet::Misses, 0, n);
            assert!(table.contains(&misses).unwrap().iter().all(|&c| !c));
        }
    }
}

/// Rounds of removing and re-inserting random halves of the keys in a table that never
/// resizes, so that every insert after the first lands among the holes removes left: every
/// answer must stay exact, for u32 and u64 keys.
#[test]
#[ignore = "needs a CUDA device"]
fn removes_and_reinserts_in_place_keep_lookups_exact() {
    let _memory = shared_memory();
    churn::<u32, [u32; 2]>(BucketLayout::Auto, |raw| raw);
    churn::<u64, [u32; 2]>(BucketLayout::Auto, |raw| {
        (u64::from(raw) << 32) | u64::from(raw.rotate_left(7))
    });
    for layout in LAYOUTS {
        churn::<u32, u32>(layout, |raw| raw);
    }
}

/// A value of the churn test from a key's place and the round.
trait FromPlace {
    fn from_place(place: u32, round: u32) -> Self;
}

impl FromPlace for [u32; 2] {
    fn from_place(place: u32, round: u32) -> Self {
        [place, round]
    }
}

impl FromPlace for u32 {
    fn from_place(place: u32, round: u32) -> Self {
        place ^ round << 24
    }
}

fn churn<K: Key, V: Value + FromPlace>(layout: BucketLayout, widen: impl Fn(u32) -> K) {
    let n = 1u32 << 16;
    // Sized so that all n keys would fill it to 0.9 (a round holds at most about 2/3 of them).
    let slots = CuckooTable::<K, V>::bucket_slots(layout).unwrap() as f64;
    let options = CuckooOptions::default()
        .initial_buckets((f64::from(n) / 0.9 / slots / 3.0).ceil() as u64)
        .alpha(0.0)
        .beta(0.99)
        .layout(layout);
    let table = CuckooTable::<K, V>::new(device(), options).unwrap();
    let buckets = table.subtable_buckets();
    let (hits, _) = workload::host_pairs(KeySet::Hits, 0, n);
    let (misses, _) = workload::host_pairs(KeySet::Misses, 0, n);
    let keys: Vec<K> = hits.iter().map(|&k| widen(k)).collect();
    let misses: Vec<K> = misses.iter().map(|&k| widen(k)).collect();
    let mut model = HashMap::new();
    let mut rng = Rng(0x5eed_7a95);
    for round in 0..12u32 {
        // Odd rounds remove about half of what is held, even rounds put a random half of
        // all keys (back) in with new values.
        let chosen: Vec<K> = keys
            .iter()
            .copied()
            .filter(|_| rng.next() & 1 == 0)
            .collect();
        if round % 2 == 1 {
            let held = chosen.iter().filter(|k| model.contains_key(*k)).count();
            assert_eq!(
                count_removed(table.remove(&chosen).unwrap()),
                held,
                "round {round}"
            );
            for k in &chosen {
                model.remove(k);
            }
        } else {
            let values: Vec<V> = (0..chosen.len() as u32)
                .map(|i| V::from_place(i, round))
                .collect();
            table.insert(&chosen, &values).unwrap();
            model.extend(chosen.iter().copied().zip(values));
        }
        assert_eq!(
            table.subtable_buckets(),
            buckets,
            "round {round}: no resize"
        );
        let present = table.contains(&keys).unwrap();
        for (k, p) in keys.iter().zip(&present) {
            assert_eq!(*p, model.contains_key(k), "round {round}: contains({k:?})");
        }
        check_against(&table, &model, &misses).unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
}

/// A lower bound of 0.7 (and an upper one of 0.99): each downsize halves a subtable that
/// holds far more than its new half can, so the residuals crowd into the other two, which
/// are nearly full, with many swaps, while probe orders skip the subtable being halved
/// (whose buckets they pass must turn dirty). Lookups stop early wherever they may: every
/// held key must still be found and every removed one missed, for u32 and u64 keys.
#[test]
#[ignore = "needs a CUDA device"]
fn downsizes_that_spill_residuals_keep_lookups_exact() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        spill::<u32>(layout, |raw| raw);
    }
    spill::<u64>(BucketLayout::Auto, |raw| {
        (u64::from(raw.rotate_left(11)) << 32) | u64::from(raw)
    });
}

fn spill<K: Key>(layout: BucketLayout, widen: impl Fn(u32) -> K) {
    let options = small_options().alpha(0.7).beta(0.99).layout(layout);
    let table = CuckooTable::<K, u32>::new(device(), options).unwrap();
    let (hits, values) = workload::host_pairs(KeySet::Hits, 0, 200_000);
    let keys: Vec<K> = hits.iter().map(|&k| widen(k)).collect();
    let mut model = HashMap::new();
    for (chunk, vals) in keys.chunks(20_000).zip(values.chunks(20_000)) {
        table.insert(chunk, vals).unwrap();
        model.extend(chunk.iter().copied().zip(vals.iter().copied()));
        check_against(&table, &model, &[]).unwrap();
    }
    let downsizes_before = table.resize_stats().downsizes;
    // Remove the keys in an order unrelated to their insertion, 10k at a time, down to 10k;
    // then put half of them back.
    let mut order = keys.clone();
    order.sort_unstable();
    for (i, chunk) in order.chunks(10_000).take(19).enumerate() {
        assert_eq!(
            count_removed(table.remove(chunk).unwrap()),
            chunk.len(),
            "remove {i}"
        );
        for k in chunk {
            model.remove(k);
        }
        check_against(&table, &model, chunk).unwrap_or_else(|e| panic!("remove {i}: {e}"));
    }
    assert!(
        table.resize_stats().downsizes >= downsizes_before + 5,
        "{:?}",
        table.resize_stats()
    );
    let back: Vec<K> = order.iter().step_by(2).copied().collect();
    let back_values: Vec<u32> = (0..back.len() as u32).collect();
    table.insert(&back, &back_values).unwrap();
    model.extend(back.iter().copied().zip(back_values));
    let gone: Vec<K> = order.iter().skip(1).step_by(2).copied().collect();
    check_against(&table, &model, &gone).unwrap();
}

/// A batch above the size from which inserts into split buckets past the L2 cache sort their
/// pairs by partition (about 2M pairs on an H100), holding the reserved key, keys repeated with other values and keys the table
/// holds already: every key ends with one whole value of its own, the reserved key in its
/// side slot.
#[test]
#[ignore = "needs a CUDA device"]
fn large_sorted_batches_keep_duplicates_and_the_reserved_key_right() {
    let _memory = shared_memory();
    let n = 1u32 << 22;
    let (options, _) = fixed_size(2 * n, 0.8, 32);
    let table = CuckooTable::<u32, [u32; 2]>::new(device(), options).unwrap();
    let (first, _) = workload::host_pairs(KeySet::Hits, 0, n);
    let mut keys = first.clone();
    // Every 16th key again later in the batch, and the reserved key twice.
    keys.extend(first.iter().step_by(16).copied());
    keys.extend([u32::MAX, u32::MAX]);
    let values: Vec<[u32; 2]> = (0..keys.len() as u32).map(|i| [i, !i]).collect();
    table.insert(&keys, &values).unwrap();
    let mut distinct = first.clone();
    distinct.push(u32::MAX);
    assert_eq!(table.len().unwrap(), distinct.len());
    each_holds_one_whole_value_of_its_own(&table, &distinct, &keys, &values);
    // Again into the full table: every key held already, new values.
    let values: Vec<[u32; 2]> = (0..keys.len() as u32).map(|i| [i, i ^ 0x5555]).collect();
    table.insert(&keys, &values).unwrap();
    assert_eq!(table.len().unwrap(), distinct.len());
    each_holds_one_whole_value_of_its_own(&table, &distinct, &keys, &values);
}

#[test]
#[ignore = "needs a CUDA device"]
fn readers_on_many_threads_share_the_table() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(
            device(),
            CuckooOptions::with_capacity(1 << 16).layout(layout),
        )
        .unwrap();
        let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 100_000);
        table.insert(&keys, &values).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let (table, keys, values) = (&table, &keys, &values);
                scope.spawn(move || {
                    for _ in 0..10 {
                        let got = table.get(&keys[t * 1000..]).unwrap();
                        assert!(
                            got.iter()
                                .zip(&values[t * 1000..])
                                .all(|(g, v)| *g == Some(*v))
                        );
                    }
                });
            }
            // A writer between them: new keys only, so every reader's keys stay present.
            scope.spawn(|| {
                for i in 0..5 {
                    let (k, v) = workload::host_pairs(KeySet::Hits, 1_000_000 + i * 50_000, 50_000);
                    table.insert(&k, &v).unwrap();
                }
            });
        });
        assert_eq!(table.len().unwrap(), 350_000);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn invalid_options_are_refused() {
    let _memory = shared_memory();
    let bad = CuckooOptions::default().subtables(9);
    assert!(matches!(
        CuckooTable::<u32, u32>::new(device(), bad),
        Err(CuckooError::InvalidOptions(_))
    ));
    for d in [2, 4, 8] {
        let table =
            CuckooTable::<u32, u32>::new(device(), small_options().subtables(d).alpha(0.25))
                .unwrap();
        let (k, v) = workload::host_pairs(KeySet::Hits, 0, 50_000);
        table.insert(&k, &v).unwrap();
        let model: HashMap<u32, u32> = k.iter().copied().zip(v.iter().copied()).collect();
        check_against(&table, &model, &[]).unwrap();
        table.remove(&k[..45_000]).unwrap();
        let model: HashMap<u32, u32> = k[45_000..]
            .iter()
            .copied()
            .zip(v[45_000..].iter().copied())
            .collect();
        check_against(&table, &model, &k[..10]).unwrap();
    }
}

/// Issue 13: a table made for 2^22 pairs keeps its size after a batch of 100K (which fills
/// it far below alpha); `shrink_to` then shrinks it to the room asked for, `shrink_to_fit`
/// as far as the fill bounds allow, and every answer stays exact.
#[test]
#[ignore = "needs a CUDA device"]
fn a_capacity_asked_for_is_kept_until_shrunk() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(
            device(),
            CuckooOptions::with_capacity(1 << 22).layout(layout),
        )
        .unwrap();
        let (built, built_bytes) = (table.capacity(), table.memory().unwrap().bytes_in_use);
        assert_eq!(table.capacity_floor(), built);
        let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 100_000);
        let (misses, _) = workload::host_pairs(KeySet::Misses, 0, 10_000);
        let model: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        table.insert(&keys, &values).unwrap();
        assert_eq!(table.capacity(), built, "no downsize below the floor");
        assert_eq!(table.memory().unwrap().bytes_in_use, built_bytes);
        assert_eq!(table.resize_stats().downsizes, 0);
        check_against(&table, &model, &misses).unwrap();

        let room = policy::slots_for(1 << 20, table.options().beta) as usize;
        table.shrink_to(1 << 20).unwrap();
        assert_eq!(table.capacity_floor(), room);
        let shrunk = table.capacity();
        assert!(
            room <= shrunk && shrunk < built,
            "{room} <= {shrunk} < {built}"
        );
        assert!(table.memory().unwrap().bytes_in_use < built_bytes);
        check_against(&table, &model, &misses).unwrap();
        // A floor is only ever lowered.
        table.shrink_to(1 << 22).unwrap();
        assert_eq!(table.capacity_floor(), room);

        table.shrink_to_fit().unwrap();
        assert_eq!(table.capacity_floor(), 0);
        assert!(table.capacity() < shrunk);
        assert!(table.fill_factor().unwrap() >= table.options().alpha);
        check_against(&table, &model, &misses).unwrap();
    }
}

/// An insert that runs out of memory leaves a table made for 2^22 pairs with the pairs it
/// held and the size it was made with (the failed insert's clean-up shrinks only down to
/// the floor).
#[test]
#[ignore = "needs a CUDA device"]
fn a_failed_insert_keeps_the_pairs_and_the_capacity_floor() {
    let _memory = all_memory();
    let dev = device();
    let stream = dev.new_stream().unwrap();
    for layout in LAYOUTS {
        let table =
            CuckooTable::<u32, u32>::new(dev, CuckooOptions::with_capacity(1 << 22).layout(layout))
                .unwrap();
        let built = table.capacity();
        let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 100_000);
        table.insert(&keys, &values).unwrap();
        let model: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        // 2^26 new pairs: their upload (512 MB) fits in the 1 GB left, the batch's scratch
        // space (two lists of homeless pairs, 1 GB) does not.
        let (more, more_values) = workload::host_pairs(KeySet::Hits, 100_000, 1 << 26);
        dev.synchronize().unwrap();
        let hog = gpuhash_test_support::fill_device_except(&stream, 1 << 30);
        let result = table.insert(&more, &more_values);
        drop(hog);
        match result {
            Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => {}
            other => panic!("expected OutOfDeviceMemory, got {other:?}"),
        }
        assert_eq!(table.capacity(), built);
        check_against(&table, &model, &more[..10_000]).unwrap();
    }
}

fn last_copy_options(initial_capacity: usize) -> CuckooOptions {
    CuckooOptions::with_capacity(initial_capacity).duplicate_keys(DuplicateKeys::LastCopy)
}

/// Batches of `(size, distinct)` keys drawn from `distinct` values (0 and the all-ones key
/// among them), inserted in turn into one table with `DuplicateKeys::LastCopy`: after each,
/// every key holds exactly the value of its last copy, as a `HashMap` filled in order.
fn last_copy_wins<K: Key>(
    options: CuckooOptions,
    batches: &[(u32, u32)],
    widen: impl Fn(u32) -> K,
) {
    let table = CuckooTable::<K, [u32; 2]>::new(device(), options).unwrap();
    let mut model = HashMap::new();
    let mut rng = Rng(0x1a57_c0b1_e5ee_d001);
    for (round, &(size, distinct)) in batches.iter().enumerate() {
        let keys: Vec<K> = (0..size)
            .map(|_| {
                let raw = (rng.next() % u64::from(distinct)) as u32;
                widen(match raw % 97 {
                    0 => 0,
                    1 => u32::MAX,
                    _ => gpuhash_core::hash::fmix32(raw),
                })
            })
            .collect();
        let values: Vec<[u32; 2]> = (0..size).map(|i| [i, round as u32]).collect();
        table.insert(&keys, &values).unwrap();
        model.extend(keys.iter().copied().zip(values.iter().copied()));
        check_against(&table, &model, &[]).unwrap_or_else(|e| panic!("batch {round}: {e}"));
    }
}

/// The all-ones u32 key becomes the all-ones u64 key; others use both halves.
fn wide(raw: u32) -> u64 {
    if raw == u32::MAX {
        u64::MAX
    } else {
        (u64::from(raw) << 32) | u64::from(raw.rotate_left(7))
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn last_copy_wins_among_equal_keys_of_small_batches() {
    let _memory = shared_memory();
    // Into a table that starts small and grows, then over keys it holds already.
    let batches = [
        (1, 1),
        (100, 10),
        (3000, 500),
        (200_000, 1000),
        (200_000, 150_000),
        (50_000, 1),
    ];
    last_copy_wins(last_copy_options(0), &batches, |raw| raw);
    last_copy_wins(last_copy_options(0), &batches, wide);
}

/// Batches whose last copies are more than the lock-free pass holds in flight (about 2M on
/// an H100), into split buckets that outgrow the L2 cache, so that the insert sorts them by
/// partition.
#[test]
#[ignore = "needs a CUDA device"]
fn last_copy_wins_among_equal_keys_of_batches_above_the_sort_threshold() {
    let _memory = shared_memory();
    // 6.3M pairs of 4.2M keys: about 3.3M last copies, twice over the same keys; 8M slots
    // of 12 bytes or more, past the L2 of any GPU so far.
    let batches = [(3 << 21, 1 << 22), (3 << 21, 1 << 22)];
    last_copy_wins(last_copy_options(1 << 23), &batches, |raw| raw);
    last_copy_wins(last_copy_options(1 << 23), &batches, wide);
}

/// A table grown by upsizes, with removes behind it (dirty buckets, uncounted removes, the
/// reserved key's side slot emptied), saved and loaded: the loaded table answers as the
/// saved one did, has its sizes, options and floor, and takes more inserts.
fn image_round_trip<K: Key, V: Value>(
    layout: BucketLayout,
    key: impl Fn(u32) -> K,
    value: impl Fn(u32) -> V,
) {
    let table = CuckooTable::<K, V>::new(device(), small_options().layout(layout)).unwrap();
    let (raw, _) = workload::host_pairs(KeySet::Hits, 0, 60_000);
    let keys: Vec<K> = raw.iter().map(|&k| key(k)).chain([key(u32::MAX)]).collect();
    let values: Vec<V> = (0..keys.len() as u32).map(&value).collect();
    table.insert(&keys, &values).unwrap();
    let gone: Vec<K> = keys.iter().step_by(3).copied().collect();
    table.remove(&gone).unwrap();
    let mut model: HashMap<K, V> = keys.iter().copied().zip(values.iter().copied()).collect();
    for k in &gone {
        model.remove(k);
    }
    let mut bytes = Vec::new();
    table.save(&mut bytes).unwrap();
    let loaded = CuckooTable::<K, V>::load(device(), &mut bytes.as_slice()).unwrap();
    let rebuilt = CuckooTable::<K, V>::from_image(device(), &table.to_image().unwrap()).unwrap();
    let pool = PinnedPool::new_mapped(device(), None);
    let pinned = table.to_pinned_image(&pool).unwrap();
    assert_eq!(pinned.to_image().unwrap(), table.to_image().unwrap());
    let from_pinned = CuckooTable::<K, V>::from_pinned_image(device(), &pinned).unwrap();
    // Lookups in the pinned image, in place, answer as the table does: hits, removed keys,
    // the reserved key and misses.
    let (misses, _) = workload::host_pairs(KeySet::Misses, 0, 5_000);
    let probes: Vec<K> = keys
        .iter()
        .copied()
        .chain(misses.iter().map(|&k| key(k)))
        .collect();
    assert_eq!(
        get_in_place::<K, V>(&pinned, &probes),
        table.get(&probes).unwrap()
    );
    for copy in [&loaded, &rebuilt, &from_pinned] {
        assert_eq!(copy.subtable_buckets(), table.subtable_buckets());
        assert_eq!(copy.capacity_floor(), table.capacity_floor());
        assert_eq!(copy.options(), table.options());
        assert_eq!(copy.layout(), table.layout());
        assert_eq!(copy.get(&keys).unwrap(), table.get(&keys).unwrap());
        check_against(copy, &model, &gone).unwrap();
    }
    // More inserts, past the next upsize, into the loaded table.
    let (more, _) = workload::host_pairs(KeySet::Hits, 60_000, 100_000);
    let more: Vec<K> = more.iter().map(|&k| key(k)).collect();
    let more_values: Vec<V> = (0..more.len() as u32).map(|i| value(!i)).collect();
    loaded.insert(&more, &more_values).unwrap();
    model.extend(more.iter().copied().zip(more_values));
    check_against(&loaded, &model, &gone).unwrap();
    assert!(loaded.resize_stats().upsizes > 0);
}

/// `keys` looked up in the table `image` holds, read in place.
fn get_in_place<K: Key, V: Value>(image: &PinnedImage, keys: &[K]) -> Vec<Option<V>> {
    let stream = device().new_stream().unwrap();
    let on_device = DeviceBuffer::from_host(&stream, keys).unwrap();
    let mut found = DeviceBuffer::zeroed(&stream, keys.len()).unwrap();
    let mut values = DeviceBuffer::<V>::zeroed(&stream, keys.len()).unwrap();
    CuckooTable::<K, V>::get_in_place(&stream, image, &on_device, &mut found, Some(&mut values))
        .unwrap();
    let found = found.to_host(&stream).unwrap();
    let values = values.to_host(&stream).unwrap();
    found
        .iter()
        .zip(values)
        .map(|(&f, v)| (f != 0).then_some(v))
        .collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn in_place_lookups_need_a_mapped_image_of_the_table() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        table.insert(&[1, 2, u32::MAX], &[10, 20, 30]).unwrap();
        let stream = device().new_stream().unwrap();
        let keys = DeviceBuffer::from_host(&stream, &[1u32, 3]).unwrap();
        let mut found = DeviceBuffer::zeroed(&stream, 2).unwrap();
        let unmapped = table
            .to_pinned_image(&PinnedPool::new(device(), None))
            .unwrap();
        let refused =
            CuckooTable::<u32, u32>::get_in_place(&stream, &unmapped, &keys, &mut found, None);
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidInput);
        let wide = CuckooTable::<u64, u32>::new(device(), small_options()).unwrap();
        let foreign = wide
            .to_pinned_image(&PinnedPool::new_mapped(device(), None))
            .unwrap();
        let refused =
            CuckooTable::<u32, u32>::get_in_place(&stream, &foreign, &keys, &mut found, None);
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidInput);
        let mapped = table
            .to_pinned_image(&PinnedPool::new_mapped(device(), None))
            .unwrap();
        let mut short = DeviceBuffer::zeroed(&stream, 1).unwrap();
        let refused =
            CuckooTable::<u32, u32>::get_in_place(&stream, &mapped, &keys, &mut short, None);
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(
            get_in_place::<u32, u32>(&mapped, &[1, 2, 3, u32::MAX]),
            vec![Some(10), Some(20), None, Some(30)]
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn images_round_trip_at_every_key_width() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        image_round_trip::<u32, u32>(layout, |k| k, |i| i);
    }
    let auto = BucketLayout::Auto;
    image_round_trip::<u32, f32>(auto, |k| k, |i| i as f32 * 0.5);
    image_round_trip::<u32, [u32; 1]>(auto, |k| k, |i| [!i]);
    image_round_trip::<u64, u32>(auto, wide, |i| i);
    image_round_trip::<u32, [u32; 4]>(auto, |k| k, |i| [i, !i, i ^ 0x55, 7]);
    image_round_trip::<u64, [u32; 4]>(auto, wide, |i| [i, !i, i ^ 0x55, 7]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn damaged_and_foreign_images_are_refused() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        table.insert(&[1, 2, u32::MAX], &[10, 20, 30]).unwrap();
        let mut bytes = Vec::new();
        table.save(&mut bytes).unwrap();
        let refused = |result: Result<CuckooTable<u32, u32>, CuckooError>| match result {
            Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}"),
            Ok(_) => panic!("an image that is not this table's was loaded"),
        };
        for at in [0, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            refused(CuckooTable::load(device(), &mut damaged.as_slice()));
        }
        refused(CuckooTable::load(device(), &mut &bytes[..bytes.len() - 9]));
        // Images of other widths, and of the other layout under this table's header.
        let wide_keys = CuckooTable::<u64, u32>::new(device(), small_options()).unwrap();
        refused(CuckooTable::from_image(
            device(),
            &wide_keys.to_image().unwrap(),
        ));
        let wide_values = CuckooTable::<u32, [u32; 4]>::new(device(), small_options()).unwrap();
        refused(CuckooTable::from_image(
            device(),
            &wide_values.to_image().unwrap(),
        ));
        // The same table under another name or version.
        let other_layout = if layout == BucketLayout::Split {
            BucketLayout::Auto
        } else {
            BucketLayout::Split
        };
        let twin =
            CuckooTable::<u32, u32>::new(device(), small_options().layout(other_layout)).unwrap();
        twin.insert(&[1, 2, u32::MAX], &[10, 20, 30]).unwrap();
        let mut swapped = twin.to_image().unwrap();
        let own = table.to_image().unwrap();
        // The twin's arrays with this table's state: the sections do not fit the layout.
        let mut mixed = gpuhash_core::image::TableImage::new(own.header().clone());
        mixed.push_section(own.sections()[0].clone());
        for section in &swapped.sections()[1..] {
            mixed.push_section(section.clone());
        }
        refused(CuckooTable::from_image(device(), &mixed));
        // The twin's own image loads, in its layout.
        let twin_loaded = CuckooTable::<u32, u32>::from_image(device(), &swapped).unwrap();
        assert_eq!(twin_loaded.layout(), twin.layout());
        swapped = twin_loaded.to_image().unwrap();
        assert_eq!(swapped, twin.to_image().unwrap());
        let image = table.to_image().unwrap();
        let mut header = image.header().clone();
        header.layout_version += 1;
        let mut other = gpuhash_core::image::TableImage::new(header);
        for section in image.sections() {
            other.push_section(section.clone());
        }
        refused(CuckooTable::from_image(device(), &other));
        // A lock held in the last subtable (sections: state, side, then keys, values, locks
        // and dirty bits a subtable) would never be let go: refused from the host and from
        // pinned memory, whose arrays are already on their way to the device by then.
        let last_locks = image.sections().len() - 2;
        let mut locked = gpuhash_core::image::TableImage::new(image.header().clone());
        for (i, section) in image.sections().iter().enumerate() {
            let mut section = section.clone();
            if i == last_locks {
                let at = section.len() - 1;
                section[at] = 1;
            }
            locked.push_section(section);
        }
        refused(CuckooTable::from_image(device(), &locked));
        let pool = PinnedPool::new(device(), None);
        let pinned = PinnedImage::from_image(&pool, &locked).unwrap();
        refused(CuckooTable::from_pinned_image(device(), &pinned));
        // The table itself still loads.
        let loaded = CuckooTable::<u32, u32>::load(device(), &mut bytes.as_slice()).unwrap();
        assert_eq!(
            loaded.get(&[1, 2, 3, u32::MAX]).unwrap(),
            vec![Some(10), Some(20), None, Some(30)]
        );
    }
}

/// `get_async` and `contains_async` on a caller's stream, read back once: one byte a key,
/// 1 with the value for held keys, 0 with the value buffer untouched for the rest.
#[test]
#[ignore = "needs a CUDA device"]
fn get_async_answers_one_byte_a_key() {
    let _memory = shared_memory();
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let table = CuckooTable::<u64, [u32; 2]>::new(dev, small_options()).unwrap();
    let mut rng = Rng(0xa5a5_0f0f);
    let keys: Vec<u64> = (0..200_000)
        .map(|_| rng.next() % 400_000)
        .chain([0, u64::MAX])
        .collect();
    let values: Vec<[u32; 2]> = keys.iter().map(|&k| [k as u32, (k >> 3) as u32]).collect();
    table.insert(&keys, &values).unwrap();
    let model: HashMap<u64, [u32; 2]> = keys.iter().copied().zip(values.iter().copied()).collect();
    let queries: Vec<u64> = (0..300_000)
        .map(|_| rng.next() % 500_000)
        .chain([0, u64::MAX, u64::MAX - 1])
        .collect();
    let untouched = [0xdead_beef; 2];
    let d_queries = DeviceBuffer::from_host(&stream, &queries).unwrap();
    let mut found = DeviceBuffer::<u8>::from_host(&stream, &vec![7; queries.len()]).unwrap();
    let mut out = DeviceBuffer::from_host(&stream, &vec![untouched; queries.len()]).unwrap();
    let mut present = DeviceBuffer::<u8>::from_host(&stream, &vec![7; queries.len()]).unwrap();
    table
        .get_async(&stream, &d_queries, &mut found, &mut out)
        .unwrap();
    table
        .contains_async(&stream, &d_queries, &mut present)
        .unwrap();
    let (found, out) = (
        found.to_host(&stream).unwrap(),
        out.to_host(&stream).unwrap(),
    );
    let present = present.to_host(&stream).unwrap();
    for (i, q) in queries.iter().enumerate() {
        match model.get(q) {
            Some(v) => assert_eq!((found[i], out[i], present[i]), (1, *v, 1), "key {q}"),
            None => assert_eq!((found[i], out[i], present[i]), (0, untouched, 0), "key {q}"),
        }
    }
}

/// A table of `layout` holding 2^22 workload pairs, with its keys and values.
fn holding_2_22(layout: BucketLayout) -> (CuckooTable<u32, u32>, Vec<u32>, Vec<u32>) {
    let options = CuckooOptions::with_capacity(1 << 22).layout(layout);
    let table = CuckooTable::<u32, u32>::new(device(), options).unwrap();
    let (keys, values) = workload::host_pairs(KeySet::Hits, 0, 1 << 22);
    table.insert(&keys, &values).unwrap();
    (table, keys, values)
}

/// A reader's batch queued on one stream, then a writer's on another, both returning
/// before their kernels run: the remove waits for the lookup on the device, so every key
/// is found; a lookup queued after the remove, on the first stream, finds none.
#[test]
#[ignore = "needs a CUDA device"]
fn batches_on_different_streams_run_in_the_order_they_were_queued() {
    let _memory = shared_memory();
    let dev = device();
    let (reader, writer) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    for layout in LAYOUTS {
        let (table, keys, values) = holding_2_22(layout);
        let d_keys = DeviceBuffer::from_host(&reader, &keys).unwrap();
        let mut found = DeviceBuffer::<u8>::zeroed(&reader, keys.len()).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&reader, keys.len()).unwrap();
        let mut removed = DeviceBuffer::<u8>::zeroed(&writer, keys.len()).unwrap();
        let mut after = DeviceBuffer::<u8>::zeroed(&reader, keys.len()).unwrap();
        reader.synchronize().unwrap();
        for _ in 0..4 {
            table
                .get_async(&reader, &d_keys, &mut found, &mut out)
                .unwrap();
        }
        table.remove_async(&writer, &d_keys, &mut removed).unwrap();
        table.contains_async(&reader, &d_keys, &mut after).unwrap();
        assert!(found.to_host(&reader).unwrap().iter().all(|&f| f == 1));
        assert_eq!(out.to_host(&reader).unwrap(), values);
        assert!(removed.to_host(&writer).unwrap().iter().all(|&r| r == 1));
        assert!(after.to_host(&reader).unwrap().iter().all(|&f| f == 0));
        assert!(table.is_empty().unwrap());
    }
}

/// A table dropped while its lookups still run frees its arrays only after them: memory
/// allocated and overwritten on another stream right after the drop leaves every answer
/// intact. A table whose batches have all run frees with no wait (its arrays are reused
/// at once), and a table made in that memory answers from its own pairs.
#[test]
#[ignore = "needs a CUDA device"]
fn a_table_dropped_under_its_lookups_frees_after_them() {
    let _memory = all_memory();
    let dev = device();
    let (reader, other) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    for layout in LAYOUTS {
        let (table, keys, values) = holding_2_22(layout);
        let bytes = table.memory().unwrap().bytes_reserved as usize;
        let d_keys = DeviceBuffer::from_host(&reader, &keys).unwrap();
        let mut found = DeviceBuffer::<u8>::zeroed(&reader, keys.len()).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&reader, keys.len()).unwrap();
        reader.synchronize().unwrap();
        for _ in 0..8 {
            table
                .get_async(&reader, &d_keys, &mut found, &mut out)
                .unwrap();
        }
        drop(table);
        // As much memory as the table held, taken and overwritten while the lookups run.
        let mut scribble = DeviceBuffer::<u32>::zeroed(&other, 2 * bytes / 4).unwrap();
        scribble
            .copy_from_host(&other, &vec![0xffff_ffff; scribble.len()])
            .unwrap();
        assert!(
            found.to_host(&reader).unwrap().iter().all(|&f| f == 1),
            "{layout:?}"
        );
        assert_eq!(out.to_host(&reader).unwrap(), values, "{layout:?}");
        drop(scribble);

        // All run: freed at once, and the next table, likely in the same memory, is whole.
        let settled =
            CuckooTable::<u32, u32>::new(dev, CuckooOptions::with_capacity(1 << 20).layout(layout))
                .unwrap();
        settled
            .insert(&keys[..1 << 20], &values[..1 << 20])
            .unwrap();
        drop(settled);
        let next =
            CuckooTable::<u32, u32>::new(dev, CuckooOptions::with_capacity(1 << 20).layout(layout))
                .unwrap();
        let (more, more_values) = workload::host_pairs(KeySet::Hits, 1 << 22, 1 << 20);
        next.insert(&more, &more_values).unwrap();
        let got: Vec<u32> = next.get(&more).unwrap().into_iter().flatten().collect();
        assert_eq!(got, more_values, "{layout:?}");
        assert!(
            next.get(&keys[..1 << 16])
                .unwrap()
                .iter()
                .all(Option::is_none),
            "{layout:?}"
        );
    }
}

/// Four host threads through the host forms at once, each on keys of its own: inserts,
/// lookups, removes, membership tests and lengths all agree with each thread's model.
#[test]
#[ignore = "needs a CUDA device"]
fn four_host_threads_share_the_host_forms() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let table = CuckooTable::<u32, u32>::new(device(), small_options().layout(layout)).unwrap();
        let models: Vec<HashMap<u32, u32>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4u32)
                .map(|t| {
                    let table = &table;
                    scope.spawn(move || {
                        let mut model = HashMap::new();
                        for round in 0..8u32 {
                            let first = t * 10_000_000 + round * 30_000;
                            let (keys, values) = workload::host_pairs(KeySet::Hits, first, 30_000);
                            table.insert(&keys, &values).unwrap();
                            model.extend(keys.iter().copied().zip(values.iter().copied()));
                            let got = table.get(&keys).unwrap();
                            assert!(got.iter().zip(&values).all(|(g, v)| *g == Some(*v)));
                            let gone: Vec<u32> = keys.iter().step_by(2).copied().collect();
                            assert_eq!(count_removed(table.remove(&gone).unwrap()), gone.len());
                            for k in &gone {
                                model.remove(k);
                            }
                            let present = table.contains(&keys).unwrap();
                            for (k, p) in keys.iter().zip(present) {
                                assert_eq!(p, model.contains_key(k), "thread {t}, key {k}");
                            }
                            assert!(table.len().unwrap() >= model.len());
                        }
                        model
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let model: HashMap<u32, u32> = models.into_iter().flatten().collect();
        check_against(&table, &model, &[]).unwrap();
    }
}

/// Exports while two threads remove (queued, their counts read later) and reinsert keys on
/// their own streams: a remove queued between an export's count and its kernel left the
/// counts behind, and the export must count again rather than fail or return a stale
/// reserved key.
#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_hold_only_inserted_pairs() {
    let _memory = shared_memory();
    for layout in LAYOUTS {
        let options = CuckooOptions::with_capacity(1 << 18).layout(layout);
        let narrow = CuckooTable::<u32, u32>::new(device(), options).unwrap();
        gpuhash_test_support::exports_under_churn(&narrow, 100_000, 12).unwrap();
    }
    let wide = CuckooTable::<u64, u64>::with_capacity(device(), 1 << 18).unwrap();
    gpuhash_test_support::exports_under_churn(&wide, 100_000, 12).unwrap();
}

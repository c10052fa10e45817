//! Exports and multimap rows laid out on the device, on tables large enough that the
//! device scan runs at more than one level, held against std collection models; exports
//! into caller buffers exactly full and one short; exports beside threads that remove and
//! reinsert keys. Part of the `gpu` test binary.

use std::collections::{HashMap, HashSet};

use crate::common::{device, keys_of, options, sorted, stream};
use crate::shared_memory;
use gpuhash_core::DeviceBuffer;
use gpuhash_core::table::{ErrorKind, Key, Map, MultiMap, Set, Table, TableError};
use gpuhash_slab_hash::{SlabHashMap, SlabHashMultiMap, SlabHashSet};
use gpuhash_test_support::exports_under_churn;

/// Buckets of the large tables: 2^18, so 8192 chunks of 32 buckets to count and scan, two
/// tiles of the device scan.
const MANY_BUCKETS: u32 = 1 << 18;

fn value_for<V: Key>(key: u64, round: u64) -> V {
    gpuhash_test_support::key_from_bits(gpuhash_core::hash::fmix64(key ^ (round << 40)))
}

/// A map over many buckets against a `HashMap`: empty, after inserts, after removals; its
/// export, `export_into_on` into exactly full and one-short buffers, and `export_into`.
fn map_over_many_buckets<K: Key, V: Key>() {
    let map = SlabHashMap::<K, V>::new(device(), options(1 << 18, Some(MANY_BUCKETS))).unwrap();
    let mut model: HashMap<K, V> = HashMap::new();
    check_map_export(&map, &model, "empty");
    let keys = keys_of::<K>(200_000);
    let values: Vec<V> = keys.iter().map(|k| value_for(k.widen(), 1)).collect();
    map.insert(&keys, &values).unwrap();
    model.extend(keys.iter().copied().zip(values.iter().copied()));
    check_map_export(&map, &model, "after inserts");
    let gone: Vec<K> = keys.iter().step_by(3).copied().collect();
    map.remove(&gone).unwrap();
    gone.iter().for_each(|k| {
        model.remove(k);
    });
    check_map_export(&map, &model, "after removals");
}

fn check_map_export<K: Key, V: Key>(map: &SlabHashMap<K, V>, model: &HashMap<K, V>, when: &str) {
    let expected = sorted(&model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
    assert_eq!(sorted(&map.export().unwrap()), expected, "export {when}");
    let s = stream();
    let n = model.len();
    let junk_key: K = gpuhash_test_support::key_from_bits(0xA5A5_A5A5_A5A5_A5A5);
    let mut keys = DeviceBuffer::from_host(s, &vec![junk_key; n]).unwrap();
    let mut values = DeviceBuffer::from_host(s, &vec![V::zeroed(); n]).unwrap();
    assert_eq!(map.export_into_on(s, &mut keys, &mut values).unwrap(), n);
    let (k, v) = (keys.to_host(s).unwrap(), values.to_host(s).unwrap());
    let pairs: Vec<(K, V)> = k.into_iter().zip(v).collect();
    assert_eq!(
        sorted(&pairs),
        expected,
        "export_into_on, exactly full, {when}"
    );
    if n > 0 {
        let mut short = DeviceBuffer::from_host(s, &vec![junk_key; n - 1]).unwrap();
        let refused = map.export_into_on(s, &mut short, &mut values);
        assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::InvalidInput));
        assert!(
            short.to_host(s).unwrap().iter().all(|&k| k == junk_key),
            "a refused export_into_on wrote the keys {when}"
        );
        let (mut host_keys, mut host_values) = (vec![junk_key; n - 1], vec![V::zeroed(); n]);
        let refused = map.export_into(&mut host_keys, &mut host_values);
        assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::InvalidInput));
        assert!(host_keys.iter().all(|&k| k == junk_key));
    }
    let (mut host_keys, mut host_values) = (vec![junk_key; n + 3], vec![V::zeroed(); n + 3]);
    assert_eq!(
        map.export_into(&mut host_keys, &mut host_values).unwrap(),
        n
    );
    let pairs: Vec<(K, V)> = host_keys[..n]
        .iter()
        .copied()
        .zip(host_values[..n].iter().copied())
        .collect();
    assert_eq!(
        sorted(&pairs),
        expected,
        "export_into, longer slices, {when}"
    );
    assert!(
        host_keys[n..].iter().all(|&k| k == junk_key),
        "export_into wrote past the pairs"
    );
    assert_eq!(map.len().unwrap(), n, "len after the exports {when}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn map_exports_over_many_buckets_match_the_model_at_every_width() {
    let _memory = shared_memory();
    map_over_many_buckets::<u32, u32>();
    map_over_many_buckets::<u32, u64>();
    map_over_many_buckets::<u64, u32>();
    map_over_many_buckets::<u64, u64>();
}

fn set_over_many_buckets<K: Key>() {
    let set = SlabHashSet::<K>::new(device(), options(1 << 18, Some(MANY_BUCKETS))).unwrap();
    let keys = keys_of::<K>(150_000);
    set.insert(&keys).unwrap();
    let gone: Vec<K> = keys.iter().step_by(4).copied().collect();
    set.remove(&gone).unwrap();
    let gone: HashSet<K> = gone.into_iter().collect();
    let expected = sorted(
        &keys
            .iter()
            .copied()
            .filter(|k| !gone.contains(k))
            .collect::<Vec<_>>(),
    );
    assert_eq!(sorted(&set.export().unwrap()), expected);
    let n = expected.len();
    let s = stream();
    let mut exact = DeviceBuffer::<K>::zeroed(s, n).unwrap();
    assert_eq!(set.export_into_on(s, &mut exact).unwrap(), n);
    assert_eq!(sorted(&exact.to_host(s).unwrap()), expected);
    let mut short = DeviceBuffer::<K>::zeroed(s, n - 1).unwrap();
    let refused = set.export_into_on(s, &mut short);
    assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::InvalidInput));
    let mut host = vec![K::zeroed(); n];
    assert_eq!(set.export_into(&mut host).unwrap(), n);
    assert_eq!(sorted(&host), expected);
}

#[test]
#[ignore = "needs a CUDA device"]
fn set_exports_over_many_buckets_match_the_model() {
    let _memory = shared_memory();
    set_over_many_buckets::<u32>();
    set_over_many_buckets::<u64>();
}

/// A multimap whose keys hold 0 to 4 values each, over many buckets: export, and get_all
/// of more keys than one tile of the device scan (hits and misses mixed), as rows.
fn multimap_over_many_buckets<K: Key, V: Key>() {
    let multimap =
        SlabHashMultiMap::<K, V>::new(device(), options(1 << 18, Some(MANY_BUCKETS))).unwrap();
    let keys = keys_of::<K>(30_000);
    let mut model: HashMap<K, Vec<V>> = HashMap::new();
    for round in 0..4u64 {
        let batch: Vec<K> = keys
            .iter()
            .enumerate()
            .filter(|&(i, _)| (i as u64 % 5) > round)
            .map(|(_, &k)| k)
            .collect();
        let values: Vec<V> = batch.iter().map(|k| value_for(k.widen(), round)).collect();
        multimap.insert(&batch, &values).unwrap();
        for (&k, &v) in batch.iter().zip(&values) {
            model.entry(k).or_default().push(v);
        }
    }
    let expected: Vec<(K, V)> = sorted(
        &model
            .iter()
            .flat_map(|(&k, vs)| vs.iter().map(move |&v| (k, v)))
            .collect::<Vec<_>>(),
    );
    assert_eq!(sorted(&multimap.export().unwrap()), expected);
    let n = expected.len();
    let (mut host_keys, mut host_values) = (vec![K::zeroed(); n], vec![V::zeroed(); n]);
    assert_eq!(
        multimap
            .export_into(&mut host_keys, &mut host_values)
            .unwrap(),
        n
    );
    let pairs: Vec<(K, V)> = host_keys.into_iter().zip(host_values).collect();
    assert_eq!(sorted(&pairs), expected);
    let (mut short_keys, mut short_values) = (vec![K::zeroed(); n], vec![V::zeroed(); n - 1]);
    let refused = multimap.export_into(&mut short_keys, &mut short_values);
    assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::InvalidInput));

    let rows = multimap.get_all(&keys).unwrap();
    assert_eq!(rows.len(), keys.len());
    for (key, row) in keys.iter().zip(rows) {
        let want = model.get(key).cloned().unwrap_or_default();
        assert_eq!(sorted(&row), sorted(&want), "get_all of {key:?}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn multimap_exports_and_rows_over_many_buckets_match_the_model() {
    let _memory = shared_memory();
    multimap_over_many_buckets::<u32, u32>();
    multimap_over_many_buckets::<u64, u64>();
}

/// Random keys of the churn tests, beside the adversarial ones.
const CHURNED_KEYS: usize = 200_000;
/// Rounds of every export form while the keys churn.
const CHURN_ROUNDS: usize = 12;

/// Exports of a map, a set and a multimap while two threads remove and reinsert keys on
/// their own streams: a removal between an export's count and its write pass leaves a
/// chunk short of its range, and the export must run again rather than return the slots
/// nobody wrote.
#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_hold_only_inserted_pairs() {
    let _memory = shared_memory();
    let capacity = CHURNED_KEYS as u64 * 2;
    let map = SlabHashMap::<u32, u32>::new(device(), options(capacity, None)).unwrap();
    exports_under_churn(&map, CHURNED_KEYS, CHURN_ROUNDS).unwrap();
    let wide = SlabHashMap::<u64, u64>::new(device(), options(capacity, None)).unwrap();
    exports_under_churn(&wide, CHURNED_KEYS, CHURN_ROUNDS).unwrap();
    let set = SlabHashSet::<u32>::new(device(), options(capacity, None)).unwrap();
    exports_under_churn(&set, CHURNED_KEYS, CHURN_ROUNDS).unwrap();
    let multimap = SlabHashMultiMap::<u32, u32>::new(device(), options(capacity, None)).unwrap();
    exports_under_churn(&multimap, CHURNED_KEYS, CHURN_ROUNDS).unwrap();
}

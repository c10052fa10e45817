//! What the swap GPU tests share: tables of 8 children of which 2 fit the device budget,
//! cost models that always page or always probe, and lookups held against a `HashMap`.

use std::collections::HashMap;

use gpuhash_core::Device;
use gpuhash_core::table::{Key, Map, Table, Value};
use gpuhash_cuckoo::{CuckooError, CuckooTable};
use gpuhash_slab_hash::{SlabHashError, SlabHashMap};
use gpuhash_swap::policy::child_of;
use gpuhash_swap::{CostModel, SwapMap, SwapOptions, SwapTable};
use gpuhash_test_support::{SeededRng, device, value_of};

pub const CHILDREN: usize = 8;
pub const RESIDENT: u64 = 2;
pub const SCRATCH: u64 = 1 << 20;
pub const FILTER_BITS: u64 = 8;

/// Device bytes of the filters of 8 children of `child_capacity` pairs: FILTER_BITS bits
/// a pair, in blocks of 32 bytes.
fn filter_bytes(child_capacity: usize) -> u64 {
    CHILDREN as u64 * (child_capacity as u64 * FILTER_BITS).div_ceil(256) * 32
}

/// The options of a table of 8 DyHash children of which 2 fit the device budget, for
/// `capacity` pairs.
pub fn paging_options<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<SwapOptions<CuckooTable<K, V>>, CuckooError> {
    paging_options_with_scratch(device, capacity, SCRATCH)
}

/// [`paging_options`] with `scratch` bytes of scratch (within the device budget, which
/// still holds 2 children): batches run in segments of as many elements as it holds.
pub fn paging_options_with_scratch<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
    scratch: u64,
) -> Result<SwapOptions<CuckooTable<K, V>>, CuckooError> {
    paging_options_holding(device, capacity, scratch, RESIDENT)
}

/// [`paging_options_with_scratch`] with a budget that holds `resident` children.
pub fn paging_options_holding<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
    scratch: u64,
    resident: u64,
) -> Result<SwapOptions<CuckooTable<K, V>>, CuckooError> {
    let child_capacity = capacity.div_ceil(CHILDREN).max(1024);
    let child = CuckooTable::<K, V>::with_capacity(device, child_capacity)?;
    let child_bytes = child.memory()?.bytes_reserved;
    Ok(SwapOptions::with_capacity(capacity)
        .children(CHILDREN)
        .child_capacity(child_capacity)
        .scratch_bytes(scratch)
        .filter_bits_per_key(FILTER_BITS as u32)
        .device_budget(resident * child_bytes + scratch + filter_bytes(child_capacity)))
}

/// A table of 8 DyHash children of which 2 fit the device budget, for `capacity` pairs.
pub fn paging<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<SwapMap<K, V>, CuckooError> {
    SwapMap::new(device, paging_options(device, capacity)?)
}

/// [`paging`] with lookups that page or probe as `cost_model` says.
pub fn paging_with<K: Key, V: Value>(capacity: usize, cost_model: CostModel) -> SwapMap<K, V> {
    let options = paging_options(device(), capacity).unwrap();
    SwapMap::new(device(), options.cost_model(cost_model)).unwrap()
}

/// A cost model under which lookups of children on the host always page them in.
pub fn always_page() -> CostModel {
    CostModel {
        zero_copy_bytes_per_s: 1.0,
        ..CostModel::default()
    }
}

/// A cost model under which lookups of children on the host always probe in place.
pub fn always_probe() -> CostModel {
    CostModel {
        zero_copy_bytes_per_s: f64::INFINITY,
        ..CostModel::default()
    }
}

/// A table of 8 slab hash children of which 2 fit the device budget, for `capacity` pairs.
pub fn slab_hash_children(
    device: &Device,
    capacity: usize,
) -> Result<SwapTable<SlabHashMap<u32, u32>>, SlabHashError> {
    let child_capacity = capacity.div_ceil(CHILDREN).max(1024);
    let child = SlabHashMap::<u32, u32>::with_capacity(device, child_capacity)?;
    let child_bytes = child.memory()?.bytes_reserved;
    let options = SwapOptions::<CuckooTable<u32, u32>>::with_capacity(capacity)
        .children(CHILDREN)
        .child_capacity(child_capacity)
        .scratch_bytes(SCRATCH)
        .filter_bits_per_key(FILTER_BITS as u32)
        .device_budget(RESIDENT * child_bytes + SCRATCH + filter_bytes(child_capacity))
        .make_child(SlabHashMap::<u32, u32>::with_capacity);
    SwapTable::new(device, options)
}

/// Lookups of hits, misses, removed keys and adversarial keys, with the answers of a
/// `HashMap`, in batches of `batch` keys.
pub fn check_lookups<K: Key, V: Value>(
    table: &impl Map<Key = K, Value = V>,
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

/// Asserts that `table` holds exactly what `model` does: its count, its export, and the
/// answers to lookups of `probes` (hits and misses), in one batch.
pub fn assert_holds<K: Key, V: Value>(
    table: &impl Map<Key = K, Value = V>,
    model: &HashMap<K, V>,
    probes: &[K],
    when: &str,
) {
    assert_eq!(table.len().unwrap(), model.len(), "len {when}");
    let mut exported = table.export().unwrap();
    exported.sort_unstable_by_key(|&(k, _)| k);
    let mut expected: Vec<(K, V)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    expected.sort_unstable_by_key(|&(k, _)| k);
    assert!(
        exported == expected,
        "the export {when} differs from the model"
    );
    let found = table.get(probes).unwrap();
    for (key, found) in probes.iter().zip(found) {
        assert_eq!(found, model.get(key).copied(), "get {key:?} {when}");
    }
}

/// A table filled with `keys` (the adversarial ones included), a third of them removed
/// again, and its model.
pub fn filled<K: Key, V: Value>(
    cost_model: CostModel,
    keys: &[K],
) -> (SwapMap<K, V>, HashMap<K, V>) {
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

/// `items` in an order `rng` picks.
pub fn shuffled<T>(rng: &mut SeededRng, mut items: Vec<T>) -> Vec<T> {
    for i in (1..items.len()).rev() {
        items.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    items
}

/// The keys of `keys` that live in the children `children` marks.
pub fn keys_of_children<K: Key>(keys: &[K], children: &[bool]) -> Vec<K> {
    keys.iter()
        .copied()
        .filter(|k| children[child_of(k.widen(), CHILDREN as u32) as usize])
        .collect()
}

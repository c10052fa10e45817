//! The combining suite: upserts and `insert_or_find` of a [`CombiningMap`] against a
//! `HashMap` fold, through the host forms and the device forms.

use std::collections::{HashMap, HashSet};

use gpuhash_core::table::{Combine, CombiningMap, ErrorKind, Key, Map, Table, TableError};
use gpuhash_core::workload::zipf_keys;
use gpuhash_core::{Device, DeviceBuffer};

use crate::chunked::small;
use crate::conformance::{During, expect};
use crate::gpu::{device, shared_memory, stream};
use crate::inputs::{SeededRng, adversarial_keys, key_from_bits};
use crate::shape::Via;
use crate::small_chunks::ChunkSetup;

/// The values a combining map holds, by widened key.
type Fold = HashMap<u64, u64>;

/// Runs every check of combining maps on maps that `make` builds (`make(device,
/// capacity)`), whose values are `u32` or `u64`: counting Zipf-skewed keys with many
/// copies a batch (Add of 1), sums of large values that wrap, Min and Max, several batches
/// in sequence, four host threads counting into one map, and `insert_or_find` giving
/// dense ids; the first ones through the device forms as well. Takes the memory guard
/// itself. Panics naming the map type, the check and the forms unless the map conforms.
pub fn combining_conformance<M, F>(make: F)
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let _memory = shared_memory();
    for via in [Via::Host, Via::Device(stream())] {
        expect::<M>("counting skewed keys", via, counting(&make, via));
        expect::<M>("sums, min and max", via, sums_min_max(&make, via));
        expect::<M>("dense ids", via, dense_ids(&make, via));
    }
    expect::<M>("four host threads counting", Via::Host, threads(&make));
    expect::<M>("upserts of many chunks", Via::Host, chunked_upserts(&make));
}

fn made<M: Table>(made: Result<M, M::Error>) -> Result<M, String> {
    made.during("making the map")
}

/// Upserts through `via`.
fn upsert_via<M: CombiningMap>(
    map: &M,
    via: Via<'_>,
    keys: &[M::Key],
    values: &[M::Value],
    combine: Combine,
) -> Result<(), String> {
    match via {
        Via::Host => map.upsert(keys, values, combine).during("upsert"),
        Via::Device(s) => {
            let k = DeviceBuffer::from_host(s, keys).during("copying keys")?;
            let v = DeviceBuffer::from_host(s, values).during("copying values")?;
            map.upsert_async(s, &k, &v, combine)
                .during("upsert_async")?;
            s.synchronize().during("synchronize")
        }
    }
}

/// `insert_or_find` through `via`.
fn insert_or_find_via<M: CombiningMap>(
    map: &M,
    via: Via<'_>,
    keys: &[M::Key],
    candidates: &[M::Value],
) -> Result<Vec<M::Value>, String> {
    match via {
        Via::Host => map
            .insert_or_find(keys, candidates)
            .during("insert_or_find"),
        Via::Device(s) => {
            let k = DeviceBuffer::from_host(s, keys).during("copying keys")?;
            let c = DeviceBuffer::from_host(s, candidates).during("copying candidates")?;
            let mut out = DeviceBuffer::zeroed(s, keys.len()).during("values_out")?;
            map.insert_or_find_async(s, &k, &c, &mut out)
                .during("insert_or_find_async")?;
            out.to_host(s).during("copying values_out")
        }
    }
}

/// Folds a batch into the model as the map should.
fn fold<K: Key, V: Key>(model: &mut Fold, keys: &[K], values: &[V], combine: Combine) {
    let bits = 8 * size_of::<V>() as u32;
    for (key, value) in keys.iter().zip(values) {
        model
            .entry(key.widen())
            .and_modify(|held| *held = combine.apply(*held, value.widen(), bits))
            .or_insert(value.widen());
    }
}

/// The map's whole content against the model.
fn check_content<M: Map>(map: &M, model: &Fold, after: &str) -> Result<(), String>
where
    M::Value: Key,
{
    let pairs = map.export().during("export")?;
    if pairs.len() != model.len() {
        return Err(format!(
            "after {after}: {} pairs, the model holds {}",
            pairs.len(),
            model.len()
        ));
    }
    for (key, value) in pairs {
        let expected = model.get(&key.widen());
        if expected != Some(&value.widen()) {
            return Err(format!(
                "after {after}: key {key:?} holds {value:?}, the model {expected:?}"
            ));
        }
    }
    Ok(())
}

/// Counting: Add of 1 over Zipf-skewed keys (the top keys thousands of times a batch), a
/// key 14 times, and the adversarial keys, in several batches.
fn counting<M, F>(make: &F, via: Via<'_>) -> Result<(), String>
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let map = made(make(device(), 1 << 16))?;
    let mut model = Fold::new();
    let mut fourteen = vec![key_from_bits::<M::Key>(0xdead_beef); 14];
    fourteen.extend(adversarial_keys::<M::Key>());
    let one = key_from_bits::<M::Value>(1);
    upsert_via(
        &map,
        via,
        &fourteen,
        &vec![one; fourteen.len()],
        Combine::Add,
    )?;
    fold(
        &mut model,
        &fourteen,
        &vec![one; fourteen.len()],
        Combine::Add,
    );
    check_content(&map, &model, "a key 14 times")?;
    for batch in 0..4 {
        let keys: Vec<M::Key> = zipf_keys(100_000, 50_000, batch)
            .into_iter()
            .map(|k| key_from_bits(u64::from(k)))
            .collect();
        let ones = vec![one; keys.len()];
        upsert_via(&map, via, &keys, &ones, Combine::Add)?;
        fold(&mut model, &keys, &ones, Combine::Add);
        check_content(&map, &model, &format!("counting batch {batch}"))?;
    }
    Ok(())
}

/// Random values over few keys (many copies each), summed with wrap-around, then Min and
/// Max into the same map.
fn sums_min_max<M, F>(make: &F, via: Via<'_>) -> Result<(), String>
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let map = made(make(device(), 1 << 12))?;
    let mut model = Fold::new();
    let mut rng = SeededRng::new(0x5eed);
    let distinct = rng.distinct_keys::<M::Key>(3000);
    for (round, combine) in [
        Combine::Add,
        Combine::Min,
        Combine::Max,
        Combine::Add,
        Combine::Max,
    ]
    .into_iter()
    .enumerate()
    {
        let keys: Vec<M::Key> = (0..50_000)
            .map(|_| distinct[rng.next_u64() as usize % distinct.len()])
            .collect();
        let values: Vec<M::Value> = keys.iter().map(|_| key_from_bits(rng.next_u64())).collect();
        upsert_via(&map, via, &keys, &values, combine)?;
        fold(&mut model, &keys, &values, combine);
        check_content(&map, &model, &format!("round {round}, {combine:?}"))?;
    }
    Ok(())
}

/// Candidates numbered in batch order, each batch after the last: every key gets one id
/// of its own, equal keys the same, keys already there keep theirs.
fn dense_ids<M, F>(make: &F, via: Via<'_>) -> Result<(), String>
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let map = made(make(device(), 1 << 14))?;
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut first = 0u64;
    for batch in 0..3 {
        let keys: Vec<M::Key> = zipf_keys(40_000, 20_000, 100 + batch)
            .into_iter()
            .map(|k| key_from_bits(u64::from(k)))
            .collect();
        let candidates: Vec<M::Value> = (0..keys.len() as u64)
            .map(|i| key_from_bits(first + i))
            .collect();
        let got = insert_or_find_via(&map, via, &keys, &candidates)?;
        let mut fresh: HashMap<u64, u64> = HashMap::new();
        for (i, (key, id)) in keys.iter().zip(&got).enumerate() {
            let (key, id) = (key.widen(), id.widen());
            let expected = match ids.get(&key) {
                Some(&old) => old,
                None => *fresh.entry(key).or_insert(id),
            };
            let in_batch = (first..first + keys.len() as u64).contains(&id);
            if id != expected || (!ids.contains_key(&key) && !in_batch) {
                return Err(format!(
                    "batch {batch}, element {i}: key {key:#x} got id {id}, expected {expected}"
                ));
            }
        }
        ids.extend(fresh);
        first += keys.len() as u64;
    }
    let distinct: HashSet<u64> = ids.values().copied().collect();
    if distinct.len() != ids.len() {
        return Err(format!("{} keys share {} ids", ids.len(), distinct.len()));
    }
    check_content(&map, &ids, "insert_or_find")
}

/// Four host threads count the same skewed keys into one map at once.
fn threads<M, F>(make: &F) -> Result<(), String>
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let map = made(make(device(), 1 << 16))?;
    let keys: Vec<M::Key> = zipf_keys(200_000, 30_000, 42)
        .into_iter()
        .map(|k| key_from_bits(u64::from(k)))
        .collect();
    let ones = vec![key_from_bits::<M::Value>(1); keys.len()];
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| map.upsert(&keys, &ones, Combine::Add).during("upsert")))
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| "a thread panicked".to_string())?)
    })?;
    let mut model = Fold::new();
    for _ in 0..4 {
        fold(&mut model, &keys, &ones, Combine::Add);
    }
    check_content(&map, &model, "four threads")
}

/// Upserts of five chunks of 1000 keys (Zipf-skewed, so keys repeat within and across
/// chunks), Add then Max, into a map holding keys: each against the fold; then the same
/// batch with its third chunk failing, after which the map holds what it held before.
/// Skipped for a map whose host upserts run whole.
fn chunked_upserts<M, F>(make: &F) -> Result<(), String>
where
    M: CombiningMap,
    M::Value: Key,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    const CHUNK: usize = 1000;
    if made(make(device(), 1))?.host_insert_chunk() > gpuhash_core::staging::CHUNK {
        return Ok(());
    }
    let make = small(make, 1 << 12);
    for fail_at in [None, Some(4)] {
        let map = made(make(
            device(),
            ChunkSetup {
                chunk: CHUNK,
                fail_at,
            },
        ))?;
        let mut held = adversarial_keys::<M::Key>();
        held.truncate(CHUNK);
        let ones = vec![key_from_bits::<M::Value>(1); held.len()];
        // The first call of the upsert form (held is one chunk).
        map.upsert(&held, &ones, Combine::Add)
            .during("upsert before")?;
        let mut model = Fold::new();
        fold(&mut model, &held, &ones, Combine::Add);
        let mut keys: Vec<M::Key> = zipf_keys(5 * CHUNK, 700, 7)
            .into_iter()
            .map(|k| key_from_bits(u64::from(k)))
            .collect();
        keys[CHUNK..CHUNK + held.len()].copy_from_slice(&held);
        let mut rng = SeededRng::new(0xadd);
        let values: Vec<M::Value> = keys
            .iter()
            .map(|_| key_from_bits(rng.next_u64() % 1000))
            .collect();
        // The wrapper fails one call: with it, only the first upsert of the batch fails.
        let combines: &[Combine] = match fail_at {
            None => &[Combine::Add, Combine::Max],
            Some(_) => &[Combine::Add],
        };
        for &combine in combines {
            let outcome = map.upsert(&keys, &values, combine);
            match (outcome, fail_at) {
                (Ok(()), None) => fold(&mut model, &keys, &values, combine),
                (Err(e), Some(_)) if e.kind() == ErrorKind::InvalidInput => {}
                (outcome, _) => {
                    return Err(format!(
                        "{combine:?}, fail_at {fail_at:?}: the upsert gave {outcome:?}"
                    ));
                }
            }
            check_content(
                &map,
                &model,
                &format!("{combine:?} in chunks, fail_at {fail_at:?}"),
            )?;
        }
    }
    Ok(())
}

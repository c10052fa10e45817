//! The `_into` host forms (`get_into`, `contains_into`, `count_into`), which answer into the
//! caller's buffers, checked against a `HashMap`: buffers reused from batch to batch (each
//! filled with junk first, so that an answer left unwritten shows), caller memory registered
//! with the driver for the keys, the values and the answers, and mismatched lengths.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

use bytemuck::Pod;
use gpuhash_core::table::{ErrorKind, Key, Map, MultiMap, Set, TableError};
use gpuhash_core::{Device, HostRegistered};

use crate::conformance::During;
use crate::gpu::device;
use crate::inputs::{SeededRng, adversarial_keys, value_in_round};

/// Keys a batch: enough that every slice of it is past the size the host forms copy
/// without staging, so the staged and the registered paths both run.
const BATCH: usize = 100_000;
/// What an answer buffer holds before each call: neither 0 nor 1.
const JUNK_FLAG: u8 = 0xA5;

/// `len` values whose pages hold nothing else, so that registering them never collides
/// with another registration (the driver pins whole pages).
pub struct PageAlone<T> {
    storage: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Pod> PageAlone<T> {
    /// A copy of `values`, alone on its pages.
    pub fn from_slice(values: &[T]) -> Self {
        let pad = (8192 / size_of::<T>().max(1)).max(1);
        let storage: Vec<T> = bytemuck::zeroed_vec(values.len() + 2 * pad);
        let offset = storage.as_ptr().align_offset(4096);
        let mut alone = Self {
            storage,
            start: if offset < pad { offset } else { pad },
            len: values.len(),
        };
        alone.values_mut().copy_from_slice(values);
        alone
    }

    /// The values.
    pub fn values(&self) -> &[T] {
        &self.storage[self.start..self.start + self.len]
    }

    /// The values, to write.
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.storage[self.start..self.start + self.len]
    }

    /// The values, registered with `device` until the answer drops.
    pub fn register(&mut self, device: &Device) -> Result<HostRegistered<&mut [T]>, String> {
        device
            .register(self.values_mut())
            .map_err(|e| format!("register failed: {e}"))
    }
}

/// Random keys and the adversarial ones, distinct, in a random order.
fn query_keys<K: Key>(seed: u64, random: usize) -> Vec<K> {
    let mut keys: Vec<K> = SeededRng::new(seed).distinct_keys(random);
    let mut seen: HashSet<K> = keys.iter().copied().collect();
    keys.extend(
        adversarial_keys::<K>()
            .into_iter()
            .filter(|k| seen.insert(*k)),
    );
    keys
}

/// Whether round `round` goes through registered memory: every other one.
fn registered_round(round: u64) -> bool {
    round.is_multiple_of(2)
}

/// Fails unless the call was refused as [`ErrorKind::InvalidInput`].
fn expect_invalid<R: Debug, E: TableError>(
    call: &str,
    outcome: Result<R, E>,
) -> Result<(), String> {
    match outcome {
        Err(e) if e.kind() == ErrorKind::InvalidInput => Ok(()),
        other => Err(format!("{call} gave {other:?}, not InvalidInput")),
    }
}

/// Fails unless every flag is `expected(i)` (a flag other than 0 and 1 included).
fn check_flags(what: &str, flags: &[u8], expected: impl Fn(usize) -> bool) -> Result<(), String> {
    match (0..flags.len()).find(|&i| flags[i] != u8::from(expected(i))) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: flag {i} is {}, the model says {}",
            flags[i],
            expected(i)
        )),
    }
}

/// `get_into` and `contains_into` of a map over four rounds of inserts and removals.
pub(crate) fn map_caller_buffers<M: Map>(
    make: &impl Fn(&Device, usize) -> Result<M, M::Error>,
) -> Result<(), String> {
    let device = device();
    let keys = query_keys::<M::Key>(15, 2 * BATCH);
    let map = make(device, keys.len()).during("make")?;
    let mut model: HashMap<M::Key, M::Value> = HashMap::new();
    let mut found = PageAlone::from_slice(&vec![JUNK_FLAG; keys.len()]);
    let mut values = PageAlone::<M::Value>::from_slice(&bytemuck::zeroed_vec(keys.len()));
    let mut queries = PageAlone::from_slice(&keys);
    for round in 0..4u64 {
        // Batches overlap from round to round, so that values are replaced too.
        let start = (round as usize * BATCH / 2) % keys.len();
        let batch: Vec<M::Key> = keys
            .iter()
            .cycle()
            .skip(start)
            .take(BATCH)
            .copied()
            .collect();
        let batch_values: Vec<M::Value> = batch
            .iter()
            .map(|k| value_in_round(k.widen(), round))
            .collect();
        if registered_round(round) {
            let mut k = PageAlone::from_slice(&batch);
            let mut v = PageAlone::from_slice(&batch_values);
            let (k, v) = (k.register(device)?, v.register(device)?);
            map.insert(&k, &v).during("insert from registered memory")?;
        } else {
            map.insert(&batch, &batch_values).during("insert")?;
        }
        model.extend(batch.iter().copied().zip(batch_values.iter().copied()));
        if round == 2 {
            let gone: Vec<M::Key> = batch.iter().step_by(3).copied().collect();
            let removed = map.remove(&gone).during("remove")?;
            if removed.iter().any(|&was_there| !was_there) {
                return Err("remove missed a key the batch had just inserted".into());
            }
            gone.iter().for_each(|k| {
                model.remove(k);
            });
        }
        found.values_mut().fill(JUNK_FLAG);
        if registered_round(round) {
            let query = queries.register(device)?;
            let mut f = found.register(device)?;
            let mut v = values.register(device)?;
            map.get_into(&query, &mut f, &mut v)
                .during("get_into registered memory")?;
        } else {
            map.get_into(queries.values(), found.values_mut(), values.values_mut())
                .during("get_into")?;
        }
        let (f, v) = (found.values(), values.values());
        check_flags("get_into", f, |i| model.contains_key(&keys[i]))
            .map_err(|why| format!("round {round}: {why}"))?;
        if let Some(i) = (0..keys.len()).find(|&i| f[i] == 1 && model[&keys[i]] != v[i]) {
            return Err(format!(
                "round {round}: get_into gave key {:?} the value {:?}, the model {:?}",
                keys[i], v[i], model[&keys[i]]
            ));
        }
        found.values_mut().fill(JUNK_FLAG);
        map.contains_into(queries.values(), found.values_mut())
            .during("contains_into")?;
        check_flags("contains_into", found.values(), |i| {
            model.contains_key(&keys[i])
        })
        .map_err(|why| format!("round {round}: {why}"))?;
    }
    // Mismatched lengths are refused before anything is written.
    let n = keys.len();
    found.values_mut().fill(JUNK_FLAG);
    let (f, v) = (found.values_mut(), values.values_mut());
    expect_invalid(
        "get_into with a short found",
        map.get_into(&keys, &mut f[..n - 1], v),
    )?;
    expect_invalid(
        "get_into with short values",
        map.get_into(&keys, f, &mut v[..n - 1]),
    )?;
    expect_invalid("get_into with short keys", map.get_into(&keys[1..], f, v))?;
    expect_invalid(
        "contains_into with a short found",
        map.contains_into(&keys, &mut f[..1]),
    )?;
    if f.iter().any(|&flag| flag != JUNK_FLAG) {
        return Err("a refused call wrote the caller's buffer".into());
    }
    let len = map.len().during("len")?;
    if len != model.len() {
        return Err(format!(
            "after refused calls the map holds {len}, the model {}",
            model.len()
        ));
    }
    Ok(())
}

/// `contains_into` of a set over two rounds, the second through registered memory.
pub(crate) fn set_caller_buffers<S: Set>(
    make: &impl Fn(&Device, usize) -> Result<S, S::Error>,
) -> Result<(), String> {
    let device = device();
    let keys = query_keys::<S::Key>(16, 2 * BATCH);
    let set = make(device, keys.len()).during("make")?;
    let mut model = HashSet::new();
    let mut found = PageAlone::from_slice(&vec![JUNK_FLAG; keys.len()]);
    for round in 0..2u64 {
        let batch = &keys[round as usize * BATCH / 2..][..BATCH];
        set.insert(batch).during("insert")?;
        model.extend(batch.iter().copied());
        found.values_mut().fill(JUNK_FLAG);
        if registered_round(round) {
            let mut f = found.register(device)?;
            set.contains_into(&keys, &mut f)
                .during("contains_into registered memory")?;
        } else {
            set.contains_into(&keys, found.values_mut())
                .during("contains_into")?;
        }
        check_flags("contains_into", found.values(), |i| {
            model.contains(&keys[i])
        })
        .map_err(|why| format!("round {round}: {why}"))?;
    }
    expect_invalid(
        "contains_into with a long found",
        set.contains_into(&keys[1..], found.values_mut()),
    )
}

/// `count_into` of a multimap over two rounds (each key inserted again adds a value), the
/// second through registered memory.
pub(crate) fn multimap_caller_buffers<M: MultiMap>(
    make: &impl Fn(&Device, usize) -> Result<M, M::Error>,
) -> Result<(), String> {
    let device = device();
    let keys = query_keys::<M::Key>(17, 2 * BATCH);
    let multimap = make(device, 2 * keys.len()).during("make")?;
    let mut model: HashMap<M::Key, u32> = HashMap::new();
    let mut counts = PageAlone::from_slice(&vec![u32::MAX; keys.len()]);
    for round in 0..2u64 {
        let batch = &keys[round as usize * BATCH / 2..][..BATCH];
        let values: Vec<M::Value> = batch
            .iter()
            .map(|k| value_in_round(k.widen(), round))
            .collect();
        multimap.insert(batch, &values).during("insert")?;
        batch
            .iter()
            .for_each(|k| *model.entry(*k).or_default() += 1);
        counts.values_mut().fill(u32::MAX);
        if registered_round(round) {
            let mut c = counts.register(device)?;
            multimap
                .count_into(&keys, &mut c)
                .during("count_into registered memory")?;
        } else {
            multimap
                .count_into(&keys, counts.values_mut())
                .during("count_into")?;
        }
        let c = counts.values();
        let expected = |i: usize| model.get(&keys[i]).copied().unwrap_or(0);
        if let Some(i) = (0..keys.len()).find(|&i| c[i] != expected(i)) {
            return Err(format!(
                "round {round}: count_into gave key {:?} {} values, the model {}",
                keys[i],
                c[i],
                expected(i)
            ));
        }
    }
    expect_invalid(
        "count_into with short counts",
        multimap.count_into(&keys, &mut counts.values_mut()[1..]),
    )
}

//! Host inserts of many chunks ([`Table::host_insert_chunk`]) against the model, through
//! [`SmallChunks`] so that a chunk is a few thousand keys: keys the table held, keys new
//! to it, keys repeated within a chunk and across chunks, from pageable and registered
//! memory; and a chunk that fails (the first, the third, the last), after which the table
//! must hold exactly what it held before the batch.

use std::collections::HashMap;

use gpuhash_core::Device;
use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError};

use crate::caller_buffers::PageAlone;
use crate::conformance::{During, ModelOf, check_everything, expect};
use crate::gpu::{device, shared_memory};
use crate::inputs::{SeededRng, adversarial_keys, value_in_round};
use crate::model::{Ambiguous, Model};
use crate::shape::{Shape, Via};
use crate::small_chunks::{ChunkSetup, SmallChunks};

/// Keys of a chunk in these checks: one below the size the host forms copy without
/// staging (64 KiB of keys), one past it.
const CHUNKS: [usize; 2] = [1000, 20_000];

/// The value type of a table of shape `W`.
type ValueOf<W, Tag> = <W as Shape<Tag>>::Value;

/// A key a chunk left ambiguous, in a table of shape `W`.
type AmbiguousOf<W, Tag> = Ambiguous<<W as Table>::Key, ValueOf<W, Tag>>;

/// Builds a table wrapped in [`SmallChunks`].
pub(crate) type MakeSmall<'a, W> =
    &'a dyn Fn(&Device, ChunkSetup) -> Result<W, <W as Table>::Error>;

/// Wraps `make`'s tables in [`SmallChunks`], made for `capacity` keys.
pub(crate) fn small<T: Table>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    capacity: usize,
) -> impl Fn(&Device, ChunkSetup) -> Result<SmallChunks<T>, T::Error> + '_ {
    move |device, setup| Ok(SmallChunks::new(make(device, capacity)?, setup))
}

/// Every check of this module, on tables of shape `W` that `make` builds.
pub(crate) fn chunked_inserts<W: Shape<Tag>, Tag>(make: MakeSmall<'_, W>) -> Result<(), String> {
    for chunk in CHUNKS {
        for registered in [false, true] {
            let memory = if registered { "registered" } else { "pageable" };
            let name = format!("chunks of {chunk} keys, {memory} inputs");
            many_chunks(make, chunk, registered).map_err(|why| format!("{name}: {why}"))?;
            // Into a table holding keys, and into an empty one (which looks nothing up).
            for held in [true, false] {
                for failing in [0, 2, usize::MAX] {
                    failing_chunk(make, chunk, failing, registered, held).map_err(|why| {
                        format!("{name}, chunk {failing} failing, held keys {held}: {why}")
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// A table holding some keys, a batch of several chunks over them and new keys, and the
/// model of the table before the batch.
struct Scenario<W: Shape<Tag>, Tag> {
    table: W,
    model: ModelOf<W, Tag>,
    keys: Vec<W::Key>,
    values: Vec<ValueOf<W, Tag>>,
}

impl<W: Shape<Tag>, Tag> Scenario<W, Tag> {
    /// The table after an insert of the held keys (one chunk: the insert form's first
    /// call) unless `empty`, and the batch.
    fn new(make: MakeSmall<'_, W>, setup: ChunkSetup, empty: bool) -> Result<Self, String> {
        let table = make(device(), setup).during("making the table")?;
        let (held, batch) = held_and_batch::<W::Key>(setup.chunk);
        let mut model = Model::new(W::RULE);
        if !empty {
            let held_values = rounds_to_values::<W, Tag>(&held, |_| 1);
            table
                .insert_via(Via::Host, &held, &held_values)
                .during("the insert before the batch")?;
            model.insert(&held, &held_values);
        }
        let keys: Vec<W::Key> = batch.iter().map(|&(k, _)| k).collect();
        let rounds: Vec<u64> = batch.iter().map(|&(_, r)| r).collect();
        let values = rounds_to_values::<W, Tag>(&keys, |i| rounds[i]);
        Ok(Self {
            table,
            model,
            keys,
            values,
        })
    }

    /// Inserts the batch from host slices, registered with the device if `registered`.
    fn insert(&self, registered: bool) -> Result<(), W::Error> {
        if !registered {
            return self.table.insert_via(Via::Host, &self.keys, &self.values);
        }
        let mut keys = PageAlone::from_slice(&self.keys);
        let mut values = PageAlone::from_slice(&self.values);
        let device = self.table.device();
        let keys = keys.register(device).map_err(failed_registration)?;
        // Values of no size (a set's) take no memory to register.
        let values_registered;
        let values: &[ValueOf<W, Tag>] = if size_of::<ValueOf<W, Tag>>() > 0 {
            values_registered = values.register(device).map_err(failed_registration)?;
            &values_registered
        } else {
            values.values()
        };
        self.table.insert_via(Via::Host, &keys, values)
    }

    /// The model after the batch, chunk by chunk, and the keys some chunk left ambiguous
    /// (copies of different values in it) that no later chunk inserted again: the table
    /// says which copy it kept, and that must be one of the chunk's.
    fn model_after(&self, chunk: usize) -> Result<ModelOf<W, Tag>, String> {
        let mut model = self.model.clone();
        let mut open: HashMap<W::Key, AmbiguousOf<W, Tag>> = HashMap::new();
        for (keys, values) in self.keys.chunks(chunk).zip(self.values.chunks(chunk)) {
            for key in keys {
                open.remove(key);
            }
            open.extend(model.insert(keys, values).into_iter().map(|a| (a.0, a)));
        }
        let open: Vec<_> = open.into_values().collect();
        let keys: Vec<W::Key> = open.iter().map(|(k, _)| *k).collect();
        let found = self
            .table
            .lookup_via(Via::Host, &keys)
            .during("lookup of keys repeated in a chunk")?;
        open.iter()
            .zip(found)
            .try_for_each(|(a, found)| model.settle(a, &found))?;
        Ok(model)
    }
}

/// A batch of about three and a half chunks into a table holding keys: it must hold the
/// model's content after, chunk by chunk.
fn many_chunks<W: Shape<Tag>, Tag>(
    make: MakeSmall<'_, W>,
    chunk: usize,
    registered: bool,
) -> Result<(), String> {
    let scenario = Scenario::new(
        make,
        ChunkSetup {
            chunk,
            fail_at: None,
        },
        false,
    )?;
    scenario
        .insert(registered)
        .during("the insert of many chunks")?;
    let model = scenario.model_after(chunk)?;
    check_everything(&scenario.table, Via::Host, &model)
}

/// The same batch with chunk `failing` failing (`usize::MAX`: the last), into the table
/// holding keys (`held`) or empty: the insert returns the failure and the table holds what
/// it held before; then the batch again, failing nowhere, takes effect.
fn failing_chunk<W: Shape<Tag>, Tag>(
    make: MakeSmall<'_, W>,
    chunk: usize,
    failing: usize,
    registered: bool,
    held: bool,
) -> Result<(), String> {
    let chunks = held_and_batch::<W::Key>(chunk).1.len().div_ceil(chunk);
    let failing = failing.min(chunks - 1);
    // The insert before the batch, if any, is the insert form's first call.
    let setup = ChunkSetup {
        chunk,
        fail_at: Some(failing + 1 + usize::from(held)),
    };
    let scenario = Scenario::new(make, setup, !held)?;
    match scenario.insert(registered) {
        Err(e) if e.kind() == ErrorKind::InvalidInput => {}
        Err(e) => {
            return Err(format!(
                "the batch failed with {e} ({:?}), not the failure injected",
                e.kind()
            ));
        }
        Ok(()) => return Err("the batch succeeded, though a chunk failed".into()),
    }
    check_everything(&scenario.table, Via::Host, &scenario.model)
        .map_err(|why| format!("after the failed batch: {why}"))?;
    scenario.insert(registered).during("the batch again")?;
    let model = scenario.model_after(chunk)?;
    check_everything(&scenario.table, Via::Host, &model)
        .map_err(|why| format!("after the batch again: {why}"))
}

/// The values of `keys`, key `i` in round `round(i)`.
fn rounds_to_values<W: Shape<Tag>, Tag>(
    keys: &[W::Key],
    round: impl Fn(usize) -> u64,
) -> Vec<ValueOf<W, Tag>> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| value_in_round(k.widen(), round(i)))
        .collect()
}

fn failed_registration<E: TableError>(why: String) -> E {
    gpuhash_core::Error::InvalidInput(why).into()
}

/// The keys a table holds before the batch (the adversarial ones and random ones, one
/// chunk at most, sorted), and the batch ([`many_chunk_batch`]) over them and new keys.
fn held_and_batch<K: Key>(chunk: usize) -> (Vec<K>, Vec<(K, u64)>) {
    let mut held = adversarial_keys::<K>();
    held.extend(SeededRng::new(0x41).distinct_keys::<K>(chunk / 2));
    held.sort_unstable();
    held.dedup();
    held.truncate(chunk);
    let mut fresh = SeededRng::new(0x42).distinct_keys::<K>(5 * chunk / 2 + 3);
    fresh.retain(|k| held.binary_search(k).is_err());
    let batch = many_chunk_batch(&fresh, &held, chunk);
    (held, batch)
}

/// A batch of several chunks of `chunk` keys, as (key, round) pairs: each of `fresh` in
/// round 2, with a key of `held` after every fifth, a second copy in round 12 after every
/// eleventh (within a chunk, mostly), and then every third key of the first chunk again in
/// round 3, in a chunk at least two past it. `fresh` must hold at least two chunks.
pub(crate) fn many_chunk_batch<K: Key>(fresh: &[K], held: &[K], chunk: usize) -> Vec<(K, u64)> {
    let mut batch = Vec::new();
    for (i, &key) in fresh.iter().enumerate() {
        batch.push((key, 2));
        if i % 5 == 0
            && let Some(&h) = held.get(i / 5)
        {
            batch.push((h, 2));
        }
        if i % 11 == 0 {
            batch.push((key, 12));
        }
    }
    let again: Vec<(K, u64)> = batch[..chunk.min(batch.len())]
        .iter()
        .step_by(3)
        .map(|&(k, _)| (k, 3))
        .collect();
    batch.extend(again);
    batch
}

/// For maps of `DuplicateKeys::LastCopy` that `make` builds (`make(device, capacity)`): a
/// host insert of several chunks in which keys repeat within and across chunks, with
/// different values, leaves each key with its last copy's value, and one whose third
/// chunk fails leaves the map as it was. Takes the memory guard itself; panics naming the
/// map type unless it conforms.
pub fn last_copy_in_chunks<M: Map, F>(make: F)
where
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    let _memory = shared_memory();
    expect::<M>(
        "last copies in chunks",
        Via::Host,
        last_copies(&small(&make, 1 << 10)),
    );
}

fn last_copies<M: Map>(make: MakeSmall<'_, SmallChunks<M>>) -> Result<(), String> {
    let chunk = CHUNKS[0];
    for fail_at in [None, Some(4)] {
        let map = make(device(), ChunkSetup { chunk, fail_at }).during("making the map")?;
        let mut held = adversarial_keys::<M::Key>();
        // One chunk: the insert form's first call.
        held.truncate(chunk);
        let held_values: Vec<M::Value> =
            held.iter().map(|k| value_in_round(k.widen(), 1)).collect();
        map.insert(&held, &held_values)
            .during("the insert before")?;
        let mut fresh = SeededRng::new(0x43).distinct_keys::<M::Key>(5 * chunk / 2);
        fresh.retain(|k| !held.contains(k));
        let batch = many_chunk_batch(&fresh, &held, chunk);
        let keys: Vec<M::Key> = batch.iter().map(|&(k, _)| k).collect();
        let values: Vec<M::Value> = batch
            .iter()
            .enumerate()
            .map(|(i, &(k, r))| value_in_round(k.widen(), r * 1000 + i as u64))
            .collect();
        let mut model: HashMap<M::Key, M::Value> = held.iter().copied().zip(held_values).collect();
        match (map.insert(&keys, &values), fail_at) {
            (Ok(()), None) => model.extend(keys.iter().copied().zip(values.iter().copied())),
            (Err(e), Some(_)) if e.kind() == ErrorKind::InvalidInput => {}
            (outcome, _) => return Err(format!("fail_at {fail_at:?}: the batch gave {outcome:?}")),
        }
        let pairs = map.export().during("export")?;
        let mut exported: HashMap<M::Key, M::Value> = HashMap::new();
        for (k, v) in pairs {
            if exported.insert(k, v).is_some() {
                return Err(format!("fail_at {fail_at:?}: key {k:?} exported twice"));
            }
        }
        if exported != model {
            let wrong = model.iter().find(|(k, v)| exported.get(k) != Some(v));
            return Err(format!(
                "fail_at {fail_at:?}: the map holds {} pairs, the model {}; first difference: {wrong:?} (map {:?})",
                exported.len(),
                model.len(),
                wrong.and_then(|(k, _)| exported.get(k))
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_repeats_keys_across_chunks_and_holds_held_ones() {
        let chunk = 100;
        let fresh: Vec<u32> = (1000..1000 + 5 * chunk as u32 / 2).collect();
        let held: Vec<u32> = (0..50).collect();
        let batch = many_chunk_batch(&fresh, &held, chunk);
        let chunks: Vec<&[(u32, u64)]> = batch.chunks(chunk).collect();
        assert!(chunks.len() >= 4, "{} chunks", chunks.len());
        let tail = &batch[batch.len() - chunk.div_ceil(3)..];
        for &(key, round) in tail {
            assert_eq!(round, 3);
            assert!(
                chunks[0].iter().any(|&(k, _)| k == key),
                "{key} not in chunk 0"
            );
        }
        assert!(
            batch.len() - tail.len() >= 2 * chunk,
            "the repeats share a chunk"
        );
        assert!(batch.iter().any(|&(k, _)| held.contains(&k)));
        let in_chunk_copies = chunks[0].iter().filter(|&&(_, r)| r == 12).count();
        assert!(in_chunk_copies > 0);
    }
}

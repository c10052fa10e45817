//! Host-slice inserts and upserts in chunks, whose copies overlap the inserts, and which
//! still take effect, or fail, as one.
//!
//! A batch of at most one chunk
//! ([`Table::host_insert_chunk`](super::Table::host_insert_chunk)) is uploaded whole and
//! runs the table's device form once, with no lookup. A larger batch runs as a pipeline: copy lanes (host
//! threads, each with a stream and one chunk's device buffers of its own) upload the
//! chunks in turn, while the calling thread runs each chunk, in batch order, on the
//! call's stream. So chunk k + 1's copies cross the bus while chunk k's insert runs.
//! Events order the two: the call's stream waits for the lane's copies before it runs a
//! chunk, and the lane's stream waits for that chunk's insert before it overwrites the
//! buffers with a later chunk.
//!
//! Before each chunk is inserted, its keys are looked up with the table's own device form
//! (`get_async` for a map, `contains_async` for a set), and the answers (a flag a key and,
//! for a map, the value it held) stay on the device until the batch is done; into a table
//! that was empty when the batch began nothing is looked up (every key a chunk holds then
//! came with the batch, and its undo removes them all). If a chunk
//! fails (its upload, its lookup or its insert returns an error), the chunks that ran are
//! undone in reverse order with the contract's own verbs ([`UndoPlan`]): the keys a chunk
//! did not find are removed, and the keys it found get their old values back by an insert
//! (which replaces a value). Reverse order makes a key repeated across chunks end with the value
//! it held before the batch: each chunk's undo brings back what the chunk before it left.
//! Then the error of the chunk that failed is returned.
//!
//! The failed chunk itself: a device form that fails before it changes anything (bad
//! input, no device memory for its scratch space or its room) leaves the table as it was,
//! and one that fails with [`ErrorKind::NotInserted`](super::ErrorKind::NotInserted) has
//! put in every pair but those it names. So a chunk whose insert form returned an error
//! is undone as well (which changes nothing where the form changed nothing): after the
//! error the table holds exactly what it held before the batch, and a `NotInserted`
//! error's pairs are the chunk's that found no place, none of the batch being in. A chunk
//! whose upload or lookup failed never ran.
//!
//! Which copy of a repeated key wins follows from the order: chunks run one after
//! another, so a later chunk's copy replaces an earlier chunk's, and within a chunk the
//! table's own rule ([`crate::last_copy::DuplicateKeys`]) decides. `LastCopy` thus keeps
//! the last copy of the whole batch; `AnyCopy` keeps some copy of the last chunk that
//! holds the key.
//!
//! What the undo cannot undo: an error that a device form does not return but that shows
//! only when the stream is waited on (a kernel that faults leaves the context unusable),
//! and an undo that itself fails (the device lost, say): the error returned is still the
//! failed chunk's, and the table may then hold part of the batch. A batch undone while
//! other host threads write the same keys may overwrite their writes with the old values.
//! The answers cost device memory for the whole batch while it runs: one byte a key, and
//! one value a key for a map.

use std::ops::Range;
use std::sync::mpsc::{Receiver, Sender, channel};

use cudarc::driver::CudaEvent;

use super::host::with_stream;
use super::undo::UndoPlan;
use super::{Combine, CombiningMap, Key, Map, Set, Value, check_pairs};
use crate::staging::{chunks, copy_threads, downloaded, upload, upload_into};
use crate::{Device, DeviceBuffer, Error, Stream};

/// What a chunked insert needs of a table: the batch's own device form, and the forms that
/// look a chunk up before it runs and undo it after a later chunk fails.
trait Undoable: Sync {
    type Key: Key;
    /// The value type (`()` for a set, whose batches have no values).
    type Value: Value;
    type Error: From<Error> + Send;

    fn device(&self) -> &Device;

    /// Queues the batch's form on a chunk (values for a map, `None` for a set).
    fn apply(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: Option<&DeviceBuffer<Self::Value>>,
    ) -> Result<(), Self::Error>;

    /// Queues the lookup of a chunk's keys before it runs: flags, and values for a map.
    fn look_up(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        held: Option<&mut DeviceBuffer<Self::Value>>,
    ) -> Result<(), Self::Error>;

    /// Queues the removal of keys a chunk added.
    fn remove(&self, stream: &Stream, keys: &DeviceBuffer<Self::Key>) -> Result<(), Self::Error>;

    /// Queues putting back the values that keys held before a chunk (maps only).
    fn restore(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error>;

    /// Counts the table after an undo: a table that leaves the resizes its removes call
    /// for to its next count (DyHash) makes them here, so that it gives back what the
    /// undone chunks grew it by.
    fn count(&self, stream: &Stream) -> Result<usize, Self::Error>;
}

/// A map's insert or upsert, `apply` being the batch's device form.
struct MapForms<'a, M: ?Sized, F> {
    map: &'a M,
    apply: F,
}

impl<M, F> Undoable for MapForms<'_, M, F>
where
    M: Map + ?Sized,
    F: Fn(&Stream, &DeviceBuffer<M::Key>, &DeviceBuffer<M::Value>) -> Result<(), M::Error> + Sync,
{
    type Key = M::Key;
    type Value = M::Value;
    type Error = M::Error;

    fn device(&self) -> &Device {
        self.map.device()
    }

    fn apply(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        values: Option<&DeviceBuffer<M::Value>>,
    ) -> Result<(), M::Error> {
        let values =
            values.ok_or_else(|| Error::InvalidInput("a map insert without values".into()))?;
        (self.apply)(stream, keys, values)
    }

    fn look_up(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        found: &mut DeviceBuffer<u8>,
        held: Option<&mut DeviceBuffer<M::Value>>,
    ) -> Result<(), M::Error> {
        match held {
            Some(held) => self.map.get_async(stream, keys, found, held),
            None => self.map.contains_async(stream, keys, found),
        }
    }

    fn remove(&self, stream: &Stream, keys: &DeviceBuffer<M::Key>) -> Result<(), M::Error> {
        let mut removed = DeviceBuffer::unfilled(stream, keys.len())?;
        self.map.remove_async(stream, keys, &mut removed)
    }

    fn count(&self, stream: &Stream) -> Result<usize, M::Error> {
        self.map.len_on(stream)
    }

    fn restore(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        values: &DeviceBuffer<M::Value>,
    ) -> Result<(), M::Error> {
        self.map.insert_async(stream, keys, values)
    }
}

/// A set's insert.
struct SetForms<'a, S: ?Sized> {
    set: &'a S,
}

impl<S: Set + ?Sized> Undoable for SetForms<'_, S> {
    type Key = S::Key;
    type Value = ();
    type Error = S::Error;

    fn device(&self) -> &Device {
        self.set.device()
    }

    fn apply(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<S::Key>,
        _: Option<&DeviceBuffer<()>>,
    ) -> Result<(), S::Error> {
        self.set.insert_async(stream, keys)
    }

    fn look_up(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<S::Key>,
        found: &mut DeviceBuffer<u8>,
        _: Option<&mut DeviceBuffer<()>>,
    ) -> Result<(), S::Error> {
        self.set.contains_async(stream, keys, found)
    }

    fn remove(&self, stream: &Stream, keys: &DeviceBuffer<S::Key>) -> Result<(), S::Error> {
        let mut removed = DeviceBuffer::unfilled(stream, keys.len())?;
        self.set.remove_async(stream, keys, &mut removed)
    }

    fn count(&self, stream: &Stream) -> Result<usize, S::Error> {
        self.set.len_on(stream)
    }

    /// A set's found keys are there after the chunk as before: nothing to put back.
    fn restore(
        &self,
        _: &Stream,
        _: &DeviceBuffer<S::Key>,
        _: &DeviceBuffer<()>,
    ) -> Result<(), S::Error> {
        Ok(())
    }
}

/// [`Map::insert`]: inserts each pair, in chunks of
/// [`Table::host_insert_chunk`](super::Table::host_insert_chunk) whose
/// copies overlap the inserts, taking effect or failing as one (see the module docs of
/// `gpuhash_core::table` on host inserts). For a table that overrides [`Map::insert`] for
/// batches of one chunk and leaves larger ones to the contract.
pub fn insert_in_chunks<M: Map + ?Sized>(
    map: &M,
    keys: &[M::Key],
    values: &[M::Value],
) -> Result<(), M::Error> {
    let forms = MapForms {
        map,
        apply: |s: &Stream, k: &DeviceBuffer<M::Key>, v: &DeviceBuffer<M::Value>| {
            map.insert_async(s, k, v)
        },
    };
    run(&forms, keys, Some(values), map.host_insert_chunk())
}

/// [`CombiningMap::upsert`] in chunks, as [`insert_in_chunks`]: an undone chunk puts back
/// each key's value from before it, whatever the combine made of it.
pub fn upsert_in_chunks<M: CombiningMap + ?Sized>(
    map: &M,
    keys: &[M::Key],
    values: &[M::Value],
    combine: Combine,
) -> Result<(), M::Error> {
    let forms = MapForms {
        map,
        apply: |s: &Stream, k: &DeviceBuffer<M::Key>, v: &DeviceBuffer<M::Value>| {
            map.upsert_async(s, k, v, combine)
        },
    };
    run(&forms, keys, Some(values), map.host_insert_chunk())
}

/// [`Set::insert`] in chunks, as [`insert_in_chunks`]: an undone chunk removes the keys it
/// added.
pub fn insert_keys_in_chunks<S: Set + ?Sized>(set: &S, keys: &[S::Key]) -> Result<(), S::Error> {
    run(&SetForms { set }, keys, None, set.host_insert_chunk())
}

/// Runs a batch in chunks of `chunk` keys, or whole when it fits in one.
fn run<U: Undoable>(
    table: &U,
    keys: &[U::Key],
    values: Option<&[U::Value]>,
    chunk: usize,
) -> Result<(), U::Error> {
    if let Some(values) = values {
        check_pairs(keys.len(), values.len())?;
    }
    let plan = ChunkPlan::new(keys.len(), chunk, lanes_for(table.device(), keys, values));
    if plan.chunks.len() <= 1 {
        return with_stream(table.device(), |s| {
            let k = upload(s, keys)?;
            let v = values.map(|v| upload(s, v)).transpose()?;
            table.apply(s, &k, v.as_ref())
        });
    }
    with_stream(table.device(), |s| {
        let mut answers = Vec::with_capacity(plan.chunks.len());
        // Into an empty table no chunk needs looking up: an undo removes every key.
        let empty_before = table.count(s)? == 0;
        let Err(failure) = pipeline(table, s, &plan, keys, values, empty_before, &mut answers)
        else {
            return Ok(());
        };
        // Every chunk that ran, the failed one included, is undone, last first.
        let ran = &plan.chunks[..answers.len()];
        let undone = ran
            .iter()
            .zip(&answers)
            .rev()
            .all(|(range, answers)| undo(table, s, &keys[range.clone()], answers).is_ok());
        if undone {
            // The error to return is the failed chunk's, whatever the count says.
            let _ = table.count(s);
        }
        Err(failure)
    })
}

/// Copy lanes for a batch: two when its slices are registered (each chunk one DMA a
/// slice, at the bus's speed: one lane copies while the other's chunk is inserted), else
/// as many as the host has copy threads (at least two), so that the staging copies of
/// several chunks run side by side.
fn lanes_for<K, V>(device: &Device, keys: &[K], values: Option<&[V]>) -> usize {
    let registered =
        device.is_registered(keys) && values.is_none_or(|values| device.is_registered(values));
    if registered { 2 } else { copy_threads().max(2) }
}

/// How a batch is cut: its chunks in order, and how many lanes copy them (chunk `i` by
/// lane `i % lanes`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChunkPlan {
    chunks: Vec<Range<usize>>,
    lanes: usize,
}

impl ChunkPlan {
    /// Chunks of `chunk` keys (at least 1) over `len` keys, the last one short, and at
    /// most `lanes` lanes, one a chunk at most, at least one.
    fn new(len: usize, chunk: usize, lanes: usize) -> Self {
        let chunks = chunks(len, chunk);
        let lanes = lanes.min(chunks.len()).max(1);
        Self { chunks, lanes }
    }

    /// The chunks lane `lane` copies, in order.
    fn of_lane(&self, lane: usize) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        self.chunks
            .iter()
            .cloned()
            .enumerate()
            .skip(lane)
            .step_by(self.lanes)
    }
}

/// One chunk's device buffers, passed between its lane and the inserting thread.
struct Slot<K, V> {
    keys: DeviceBuffer<K>,
    values: Option<DeviceBuffer<V>>,
}

/// A slot with a chunk uploaded, and the event after its copies.
struct Loaded<K, V> {
    slot: Slot<K, V>,
    copied: CudaEvent,
}

/// A slot given back to its lane, and the event after the insert that read it.
struct Returned<K, V> {
    slot: Slot<K, V>,
    inserted: CudaEvent,
}

/// What a chunk's keys held before it ran, kept on the device; `None` when the table was
/// empty before the batch (nothing looked up: the chunk's keys were all new or the batch's
/// own, and its undo removes them all).
struct Answers<V> {
    found: Option<DeviceBuffer<u8>>,
    held: Option<DeviceBuffer<V>>,
}

/// Runs the chunks of `plan` in order on `stream`, their copies in lanes, pushing the
/// answers of every chunk whose insert form runs onto `answers` before it runs (looked up
/// unless the table was `empty_before` the batch).
fn pipeline<U: Undoable>(
    table: &U,
    stream: &Stream,
    plan: &ChunkPlan,
    keys: &[U::Key],
    values: Option<&[U::Value]>,
    empty_before: bool,
    answers: &mut Vec<Answers<U::Value>>,
) -> Result<(), U::Error> {
    std::thread::scope(|scope| {
        let mut loaded = Vec::new();
        let mut give_back = Vec::new();
        for lane in 0..plan.lanes {
            let (loaded_tx, loaded_rx) = channel();
            let (back_tx, back_rx) = channel();
            loaded.push(loaded_rx);
            give_back.push(back_tx);
            scope.spawn(move || {
                copy_lane(table.device(), plan, lane, keys, values, loaded_tx, back_rx)
            });
        }
        // Returning drops the channels: lanes waiting on them end, and the scope joins them.
        plan.chunks.iter().enumerate().try_for_each(|(i, range)| {
            let lane = i % plan.lanes;
            let Loaded { slot, copied } = loaded[lane].recv().map_err(|_| lane_gone())??;
            stream.wait_for(&copied)?;
            if empty_before {
                answers.push(Answers {
                    found: None,
                    held: None,
                });
            } else {
                let mut found = DeviceBuffer::unfilled(stream, range.len())?;
                let mut held = values
                    .map(|_| DeviceBuffer::unfilled(stream, range.len()))
                    .transpose()?;
                table.look_up(stream, &slot.keys, &mut found, held.as_mut())?;
                answers.push(Answers {
                    found: Some(found),
                    held,
                });
            }
            table.apply(stream, &slot.keys, slot.values.as_ref())?;
            let inserted = stream.record()?;
            // A lane with no chunk left has gone: the slot is freed with it.
            let _ = give_back[lane].send(Returned { slot, inserted });
            Ok(())
        })
    })
}

/// One copy lane: uploads its chunks of the batch in turn on a stream of its own, each
/// into the slot once the insert of the chunk it held before is done.
fn copy_lane<K: Key, V: Value, E: From<Error>>(
    device: &Device,
    plan: &ChunkPlan,
    lane: usize,
    keys: &[K],
    values: Option<&[V]>,
    loaded: Sender<Result<Loaded<K, V>, E>>,
    give_back: Receiver<Returned<K, V>>,
) {
    let upload_chunks = || -> Result<(), Error> {
        let stream = device.lend_stream()?;
        let mut slot: Option<Slot<K, V>> = None;
        for (i, range) in plan.of_lane(lane) {
            if i >= plan.lanes {
                let Ok(Returned {
                    slot: back,
                    inserted,
                }) = give_back.recv()
                else {
                    return Ok(());
                };
                stream.wait_for(&inserted)?;
                slot = Some(back);
            }
            let mut filled = match slot.take() {
                Some(s) if s.keys.len() == range.len() => s,
                _ => Slot {
                    keys: DeviceBuffer::unfilled(&stream, range.len())?,
                    values: values
                        .map(|_| DeviceBuffer::unfilled(&stream, range.len()))
                        .transpose()?,
                },
            };
            upload_into(&stream, &keys[range.clone()], &mut filled.keys)?;
            if let (Some(host), Some(device)) = (values, filled.values.as_mut()) {
                upload_into(&stream, &host[range], device)?;
            }
            let copied = stream.record()?;
            if loaded
                .send(Ok(Loaded {
                    slot: filled,
                    copied,
                }))
                .is_err()
            {
                return Ok(());
            }
        }
        Ok(())
    };
    if let Err(e) = upload_chunks() {
        let _ = loaded.send(Err(e.into()));
    }
}

/// Undoes one chunk that ran: removes the keys it did not find, and puts back the values
/// of those it found ([`UndoPlan::after_insert`]). Reads the answers back to the host to
/// part the keys.
fn undo<U: Undoable>(
    table: &U,
    stream: &Stream,
    keys: &[U::Key],
    answers: &Answers<U::Value>,
) -> Result<(), U::Error> {
    let found = match &answers.found {
        Some(found) => downloaded(stream, found)?,
        None => vec![0; keys.len()],
    };
    let held = answers
        .held
        .as_ref()
        .map(|h| downloaded(stream, h))
        .transpose()?;
    UndoPlan::after_insert(keys, &found, held.as_deref()).apply(
        stream,
        |added| table.remove(stream, added),
        |keys, values| table.restore(stream, keys, values),
    )?;
    stream.synchronize()?;
    Ok(())
}

fn lane_gone() -> Error {
    Error::InvalidInput("chunked insert: a copy lane ended early".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_batch_once_in_order() {
        let plan = ChunkPlan::new(10, 4, 8);
        assert_eq!(plan.chunks, vec![0..4, 4..8, 8..10]);
        assert_eq!(plan.lanes, 3);
        assert_eq!(ChunkPlan::new(0, 4, 2).chunks, Vec::<Range<usize>>::new());
        assert_eq!(ChunkPlan::new(0, 4, 2).lanes, 1);
        assert_eq!(ChunkPlan::new(4, 4, 2).chunks, vec![0..4]);
        assert_eq!(ChunkPlan::new(3, 0, 2).chunks, vec![0..1, 1..2, 2..3]);
        assert_eq!(ChunkPlan::new(5, usize::MAX, 2).chunks, vec![0..5]);
    }

    #[test]
    fn lanes_take_chunks_in_turn() {
        let plan = ChunkPlan::new(9, 2, 2);
        let lane0: Vec<usize> = plan.of_lane(0).map(|(i, _)| i).collect();
        let lane1: Vec<(usize, Range<usize>)> = plan.of_lane(1).collect();
        assert_eq!(lane0, vec![0, 2, 4]);
        assert_eq!(lane1, vec![(1, 2..4), (3, 6..8)]);
    }
}

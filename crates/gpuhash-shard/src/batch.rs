//! A batch of a device form. Every local rank may be a *source*: its batch is split by
//! owner on its GPU ([`Partition::by_part`]); each source sends each owner its part and
//! receives a part from every source ([`all_to_all`]); each owner runs its shard's own
//! device form on each part it received, part by part (one shard call a non-empty part);
//! the answers go back to each part's source and are put in input order there. In one
//! process one rank is the source and the others send empty parts; in several processes
//! each process is the source of its own batch (possibly empty), so every process runs
//! the same verb at once. A change first looks its keys up in each shard it reaches, so
//! that a batch that fails anywhere takes every shard back ([`UndoPlan`]).

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::table::{ErrorKind, Map, Table, TableError, UndoPlan};
use gpuhash_core::{DeviceBuffer, Error, Result, Stream};
use gpuhash_swap::partition::{Partition, gather_answers};

use crate::exchange::{all_to_all, by_reference, sum_over_ranks};
use crate::launch::device_error;
use crate::table::{ShardedTable, owners};

pub(crate) type KeyOf<T> = <T as Table>::Key;
pub(crate) type ValueOf<T> = <T as Map>::Value;
type ErrorOf<T> = <T as Table>::Error;

/// A shard's own change of pairs (an insert, an upsert), on a stream of its GPU.
pub(crate) type PairsOp<'a, T> = &'a dyn Fn(
    &T,
    &Stream,
    &DeviceBuffer<KeyOf<T>>,
    &DeviceBuffer<ValueOf<T>>,
) -> Result<(), ErrorOf<T>>;

/// A shard's own `insert_or_find`: keys, candidates, the values they hold after.
pub(crate) type FindOp<'a, T> = &'a dyn Fn(
    &T,
    &Stream,
    &DeviceBuffer<KeyOf<T>>,
    &DeviceBuffer<ValueOf<T>>,
    &mut DeviceBuffer<ValueOf<T>>,
) -> Result<(), ErrorOf<T>>;

/// What a batch does, with the caller's buffers on the source GPU.
pub(crate) enum Verb<'a, T: Map> {
    /// Pairs changed by `op` (an insert or an upsert): no answers.
    Pairs {
        values: &'a DeviceBuffer<ValueOf<T>>,
        op: PairsOp<'a, T>,
    },
    /// Keys given their held value or a candidate; every key's value after comes back.
    InsertOrFind {
        candidates: &'a DeviceBuffer<ValueOf<T>>,
        values_out: &'a mut DeviceBuffer<ValueOf<T>>,
        op: FindOp<'a, T>,
    },
    Get {
        found: &'a mut DeviceBuffer<u8>,
        values: &'a mut DeviceBuffer<ValueOf<T>>,
    },
    Contains(&'a mut DeviceBuffer<u8>),
    Remove(&'a mut DeviceBuffer<u8>),
}

impl<T: Map> Verb<'_, T> {
    /// The values that travel with the keys.
    fn values_in(&self) -> Option<&DeviceBuffer<ValueOf<T>>> {
        match self {
            Verb::Pairs { values, .. } => Some(values),
            Verb::InsertOrFind { candidates, .. } => Some(candidates),
            _ => None,
        }
    }
}

/// Parts a local rank holds, one a rank of the communicator: `[local][rank]`.
type Parts<X> = Vec<Vec<DeviceBuffer<X>>>;

/// What one part's keys held in their owner's shard before a change reached it, on the
/// owner's GPU.
struct Log<V> {
    local: usize,
    from: usize,
    found: DeviceBuffer<u8>,
    held: DeviceBuffer<V>,
}

/// One batch's place: the caller's local rank, the stream each local rank works on, and
/// the split of the caller's keys (none where it has none).
struct Batch<'a, K, V> {
    source: usize,
    streams: Vec<Stream>,
    split: Option<Partition<K, V>>,
    caller: &'a Stream,
}

impl<T: Map> ShardedTable<T> {
    /// Runs `verb` on `keys`, queued on `stream` (a stream of one of the local ranks'
    /// GPUs). Where every rank is local, a batch of no keys returns at once; in several
    /// processes every process takes part, and one whose own arguments are wrong takes
    /// part with no keys, so that its peers are not left waiting, then returns its error.
    pub(crate) fn run(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<KeyOf<T>>,
        verb: Verb<'_, T>,
    ) -> Result<(), T::Error> {
        let room = check_answers_room(keys.len(), &verb);
        if self.comm.is_whole() && (room.is_err() || keys.is_empty()) {
            return Ok(room?);
        }
        let _batch = self.batch.lock();
        let (source, caller, refused) = self.caller(stream)?;
        let refused = refused.and(room);
        let split = match keys.is_empty() || refused.is_err() {
            true => None,
            false => Some(Partition::by_part(
                caller,
                owners(self.comm.ranks()),
                keys,
                verb.values_in(),
            )?),
        };
        let batch = Batch {
            source,
            streams: self.comm.streams_for(source, caller),
            split,
            caller,
        };
        self.run_split(&batch, verb)?;
        Ok(refused?)
    }

    /// Runs `verb` on a batch split (or empty, on a rank with no keys).
    fn run_split(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        verb: Verb<'_, T>,
    ) -> Result<(), T::Error> {
        let owned = self.to_owners(batch, |split, range| split.keys_of(batch.caller, range))?;
        let values = match verb.values_in() {
            Some(_) => {
                self.to_owners(batch, |split, range| split.values_of(batch.caller, range))?
            }
            None => Vec::new(),
        };
        match verb {
            Verb::Pairs { op, .. } => {
                let change = |local: usize, from: usize, s: &Stream, keys: &DeviceBuffer<_>| {
                    if !keys.is_empty() {
                        op(&self.shards[local], s, keys, &values[local][from])?;
                    }
                    Ok(())
                };
                self.change(batch, &owned, false, change, |_| Ok(()))
            }
            Verb::InsertOrFind { values_out, op, .. } => {
                let change = |local: usize, from: usize, s: &Stream, keys: &DeviceBuffer<_>| {
                    let mut out = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        op(&self.shards[local], s, keys, &values[local][from], &mut out)?;
                    }
                    Ok(out)
                };
                self.change(batch, &owned, false, change, |outs| {
                    let places = places(batch)?;
                    let outs = self.to_sources(batch, &outs)?;
                    Ok(put_back(batch, &places, &outs, None, values_out)?)
                })
            }
            Verb::Remove(removed) => {
                let remove = |local: usize, _: usize, s: &Stream, keys: &DeviceBuffer<_>| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        self.shards[local].remove_async(s, keys, &mut flags)?;
                    }
                    Ok(flags)
                };
                self.change(batch, &owned, true, remove, |flags| {
                    let places = places(batch)?;
                    let flags = self.to_sources(batch, &flags)?;
                    Ok(put_back(batch, &places, &flags, None, removed)?)
                })
            }
            Verb::Contains(found) => {
                let flags = self.each_part(batch, &owned, |local, _, s, keys| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        self.shards[local].contains_async(s, keys, &mut flags)?;
                    }
                    Ok(flags)
                })?;
                let places = places(batch)?;
                let flags = self.to_sources(batch, &flags)?;
                Ok(put_back(batch, &places, &flags, None, found)?)
            }
            Verb::Get { found, values } => {
                let mut answers = Vec::with_capacity(owned.len());
                let flags = self.each_part(batch, &owned, |local, from, s, keys| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    let mut held = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        self.shards[local].get_async(s, keys, &mut flags, &mut held)?;
                    }
                    if from == 0 {
                        answers.push(Vec::with_capacity(self.comm.ranks()));
                    }
                    answers[local].push(held);
                    Ok(flags)
                })?;
                let places = places(batch)?;
                let flags = self.to_sources(batch, &flags)?;
                let held = self.to_sources(batch, &answers)?;
                put_back(batch, &places, &flags, None, found)?;
                Ok(put_back(batch, &places, &held, Some(&flags), values)?)
            }
        }
    }

    /// Each owner's parts of every source's batch, `[local owner][source rank]` on the
    /// owner's GPU: the caller's parts made on its GPU by `part_of` from each owner's range
    /// of the split, the other local ranks sending empty ones.
    fn to_owners<X: Pod>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        part_of: impl Fn(&Partition<KeyOf<T>, ValueOf<T>>, Range<usize>) -> Result<DeviceBuffer<X>>,
    ) -> Result<Parts<X>> {
        let parts = batch
            .streams
            .iter()
            .enumerate()
            .map(|(local, stream)| {
                (0..self.comm.ranks())
                    .map(|to| match &batch.split {
                        Some(split) if local == batch.source => {
                            part_of(split, split.ranges()[to].clone())
                        }
                        _ => DeviceBuffer::unfilled(stream, 0),
                    })
                    .collect()
            })
            .collect::<Result<Parts<X>>>()?;
        all_to_all(&self.comm, &batch.streams, &by_reference(&parts))
    }

    /// The answers of each part (`[local owner][source rank]`) sent back to its source;
    /// returns the caller's, one buffer an owner rank, on the caller's GPU.
    fn to_sources<X: Pod>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        answers: &[Vec<DeviceBuffer<X>>],
    ) -> Result<Vec<DeviceBuffer<X>>> {
        let mut received = all_to_all(&self.comm, &batch.streams, &by_reference(answers))?;
        Ok(received.swap_remove(batch.source))
    }

    /// `visit(local, source, stream, keys)` on every part every local owner received,
    /// on its stream (empty parts too: their answers are empty); `[local][source]`.
    fn each_part<X>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[Vec<DeviceBuffer<KeyOf<T>>>],
        mut visit: impl FnMut(usize, usize, &Stream, &DeviceBuffer<KeyOf<T>>) -> Result<X, T::Error>,
    ) -> Result<Vec<Vec<X>>, T::Error> {
        owned
            .iter()
            .enumerate()
            .map(|(local, row)| {
                row.iter()
                    .enumerate()
                    .map(|(from, keys)| visit(local, from, &batch.streams[local], keys))
                    .collect()
            })
            .collect()
    }

    /// A change on every part that has keys, each logged first, then `finish` on the
    /// parts' answers; on any failure of either, the logged parts are taken back and the
    /// failure returned.
    fn change<X>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[Vec<DeviceBuffer<KeyOf<T>>>],
        removal: bool,
        mut visit: impl FnMut(usize, usize, &Stream, &DeviceBuffer<KeyOf<T>>) -> Result<X, T::Error>,
        finish: impl FnOnce(Vec<Vec<X>>) -> Result<(), T::Error>,
    ) -> Result<(), T::Error> {
        let mut logs = Vec::new();
        let result = self.each_part(batch, owned, |local, from, stream, keys| {
            if !keys.is_empty() {
                let mut found = DeviceBuffer::unfilled(stream, keys.len())?;
                let mut held = DeviceBuffer::unfilled(stream, keys.len())?;
                self.shards[local].get_async(stream, keys, &mut found, &mut held)?;
                logs.push(Log {
                    local,
                    from,
                    found,
                    held,
                });
            }
            visit(local, from, stream, keys)
        });
        let result = self.agree(batch, result).and_then(finish);
        if result.is_err() {
            // The batch's own error is the one returned; an undo that fails in turn
            // leaves its shard partly changed (documented in the crate docs).
            let _ = self.undo(batch, owned, logs, removal);
        }
        result
    }

    /// In several processes, whether every rank's part of a change went through: each
    /// rank's outcome is exchanged (one word each way), so that all of them go on to the
    /// answers, or all take their shards back. A rank whose own part went through, where
    /// another's failed, fails with `OutOfDeviceMemory` if that is how every failed one
    /// failed, else with an error of kind `Device`. Where every rank is local the outcome
    /// is already known.
    fn agree<X>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        result: Result<X, T::Error>,
    ) -> Result<X, T::Error> {
        if self.comm.is_whole() {
            return result;
        }
        let failed = match &result {
            Ok(_) => [0, 0],
            Err(error) if error.kind() == ErrorKind::OutOfDeviceMemory => [1, 0],
            Err(_) => [0, 1],
        };
        let failed = vec![failed; batch.streams.len()];
        let [out_of_memory, other] = match sum_over_ranks(&self.comm, &batch.streams, &failed) {
            Ok(failed) => failed,
            Err(error) => return result.and(Err(error.into())),
        };
        match (result, out_of_memory + other) {
            (Ok(answers), 0) => Ok(answers),
            (Ok(_), _) if other == 0 => Err(Error::OutOfDeviceMemory.into()),
            (Ok(_), _) => Err(device_error("another rank's part of the batch failed").into()),
            (Err(error), _) => Err(error),
        }
    }

    /// Takes every logged part back, the last reached first. Every log comes to the host
    /// first, its device buffers freed as it does, so that the undo's own uploads find
    /// room on a GPU that the batch filled.
    fn undo(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[Vec<DeviceBuffer<KeyOf<T>>>],
        logs: Vec<Log<ValueOf<T>>>,
        removal: bool,
    ) -> Result<(), T::Error> {
        let plans = logs
            .into_iter()
            .map(|log| {
                let stream = &batch.streams[log.local];
                let keys = owned[log.local][log.from].to_host(stream)?;
                let found = log.found.to_host(stream)?;
                let held = log.held.to_host(stream)?;
                let plan = if removal {
                    UndoPlan::after_remove(&keys, &found, &held)
                } else {
                    UndoPlan::after_insert(&keys, &found, Some(&held))
                };
                Ok((log.local, plan))
            })
            .collect::<Result<Vec<_>>>()?;
        for (local, plan) in plans.into_iter().rev() {
            let (stream, shard) = (&batch.streams[local], &self.shards[local]);
            plan.apply(
                stream,
                |keys| {
                    let mut removed = DeviceBuffer::unfilled(stream, keys.len())?;
                    shard.remove_async(stream, keys, &mut removed)
                },
                |keys, values| shard.insert_async(stream, keys, values),
            )?;
        }
        Ok(())
    }
}

/// Each owner's input places of the caller's split, on the caller's GPU (none without
/// a split).
fn places<K: Pod, V: Pod>(batch: &Batch<'_, K, V>) -> Result<Vec<DeviceBuffer<u32>>> {
    let Some(split) = &batch.split else {
        return Ok(Vec::new());
    };
    split
        .ranges()
        .iter()
        .map(|range| split.places_of(batch.caller, range.clone()))
        .collect()
}

/// Puts each owner's answers (on the caller's GPU) at their input places in `out`; only
/// where the owner's `found` flag is set, where given.
fn put_back<K: Pod, V: Pod, X: Pod>(
    batch: &Batch<'_, K, V>,
    places: &[DeviceBuffer<u32>],
    answers: &[DeviceBuffer<X>],
    found: Option<&[DeviceBuffer<u8>]>,
    out: &mut DeviceBuffer<X>,
) -> Result<()> {
    for (owner, places) in places.iter().enumerate() {
        let found = found.map(|found| &found[owner]);
        gather_answers(batch.caller, &answers[owner], places, found, out, 0)?;
    }
    Ok(())
}

/// The caller's buffers must hold an answer a key; values that travel with keys, one a
/// key.
fn check_answers_room<T: Map>(keys: usize, verb: &Verb<'_, T>) -> Result<()> {
    let (what, room, exact) = match verb {
        Verb::Pairs { values, .. } => ("keys and values", values.len(), true),
        Verb::InsertOrFind {
            candidates,
            values_out,
            ..
        } => (
            "insert_or_find: keys, candidates and values_out",
            match candidates.len() == keys {
                true => values_out.len(),
                false => candidates.len(),
            },
            true,
        ),
        Verb::Get { found, values } => ("get: answers", found.len().min(values.len()), false),
        Verb::Contains(found) => ("contains: keys and flags", found.len(), false),
        Verb::Remove(removed) => ("remove: keys and flags", removed.len(), false),
    };
    if room < keys || exact && room != keys {
        return Err(Error::LengthMismatch {
            what,
            left: keys,
            right: room,
        });
    }
    Ok(())
}

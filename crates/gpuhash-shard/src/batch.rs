//! A batch of a device form: split by owner on the source GPU ([`Partition::by_part`]),
//! keys (and values) to their owners ([`all_to_all`]), each shard's own device form on its
//! GPU, and the answers back to the source, put in input order. An insert or a removal
//! first looks its keys up in each shard it reaches, so that a batch that fails anywhere
//! takes every shard back ([`UndoPlan`]).

use bytemuck::Pod;
use gpuhash_core::table::{Map, Table, UndoPlan};
use gpuhash_core::{DeviceBuffer, Error, Result, Stream};
use gpuhash_swap::partition::{Partition, gather_answers};

use crate::exchange::all_to_all;
use crate::table::ShardedTable;

/// What a batch does, with the caller's buffers on the source GPU.
pub(crate) enum Verb<'a, V> {
    Insert(&'a DeviceBuffer<V>),
    Get {
        found: &'a mut DeviceBuffer<u8>,
        values: &'a mut DeviceBuffer<V>,
    },
    Contains(&'a mut DeviceBuffer<u8>),
    Remove(&'a mut DeviceBuffer<u8>),
}

/// What one shard's keys held before a change reached it, on the shard's GPU.
struct Log<V> {
    rank: usize,
    found: DeviceBuffer<u8>,
    held: DeviceBuffer<V>,
}

/// One batch's place: the caller's rank, the stream each rank works on, and the split.
struct Batch<'a, K, V> {
    source: usize,
    streams: Vec<Stream>,
    split: Partition<K, V>,
    caller: &'a Stream,
}

type KeyOf<T> = <T as Table>::Key;
type ValueOf<T> = <T as Map>::Value;

impl<T: Map> ShardedTable<T> {
    /// Runs `verb` on `keys`, queued on `stream` (a stream of one of the ranks' GPUs).
    pub(crate) fn run(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<KeyOf<T>>,
        mut verb: Verb<'_, ValueOf<T>>,
    ) -> Result<(), T::Error> {
        check_answers_room(keys.len(), &verb)?;
        if keys.is_empty() {
            return Ok(());
        }
        let _batch = self.batch.lock();
        let source = self.comm.rank_of(stream)?;
        let values = match &verb {
            Verb::Insert(values) => Some(*values),
            _ => None,
        };
        let split = Partition::by_part(stream, self.comm.ranks(), keys, values)?;
        let batch = Batch {
            source,
            streams: self.comm.streams_for(source, stream),
            split,
            caller: stream,
        };
        let owned = self.to_owners(&batch, |range| batch.split.keys_of(stream, range))?;
        match &mut verb {
            Verb::Insert(_) => {
                let values =
                    self.to_owners(&batch, |range| batch.split.values_of(stream, range))?;
                let insert = |rank: usize, s: &Stream, keys: &DeviceBuffer<KeyOf<T>>| {
                    self.shards[rank].insert_async(s, keys, &values[rank])?;
                    Ok(None)
                };
                self.change(&batch, &owned, false, insert, |_| Ok(()))
            }
            Verb::Remove(removed) => {
                let remove = |rank: usize, s: &Stream, keys: &DeviceBuffer<KeyOf<T>>| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    self.shards[rank].remove_async(s, keys, &mut flags)?;
                    Ok(Some(flags))
                };
                self.change(&batch, &owned, true, remove, |flags| {
                    Ok(self.answer(&batch, flags, None, removed, None)?)
                })
            }
            Verb::Contains(found) => {
                let flags = self.each_shard(&batch, &owned, |rank, s, keys| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        self.shards[rank].contains_async(s, keys, &mut flags)?;
                    }
                    Ok(flags)
                })?;
                Ok(self.answer(&batch, flags, None, found, None)?)
            }
            Verb::Get { found, values } => {
                let mut answers = Vec::with_capacity(owned.len());
                let flags = self.each_shard(&batch, &owned, |rank, s, keys| {
                    let mut flags = DeviceBuffer::unfilled(s, keys.len())?;
                    let mut held = DeviceBuffer::unfilled(s, keys.len())?;
                    if !keys.is_empty() {
                        self.shards[rank].get_async(s, keys, &mut flags, &mut held)?;
                    }
                    answers.push(held);
                    Ok(flags)
                })?;
                Ok(self.answer(&batch, flags, Some(answers), found, Some(values))?)
            }
        }
    }

    /// Each rank's part of the batch, made on the source GPU by `part_of` from the rank's
    /// range of the split, moved to the rank: one buffer a rank, on its GPU.
    fn to_owners<X: Pod>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        part_of: impl Fn(std::ops::Range<usize>) -> Result<DeviceBuffer<X>>,
    ) -> Result<Vec<DeviceBuffer<X>>> {
        let ranges = batch.split.ranges();
        let parts = batch
            .streams
            .iter()
            .enumerate()
            .map(|(from, stream)| {
                ranges
                    .iter()
                    .map(|range| {
                        if from == batch.source {
                            part_of(range.clone())
                        } else {
                            DeviceBuffer::unfilled(stream, 0)
                        }
                    })
                    .collect()
            })
            .collect::<Result<Vec<Vec<_>>>>()?;
        let received = all_to_all(&self.comm, &batch.streams, &parts)?;
        Ok(received
            .into_iter()
            .map(|mut row| row.swap_remove(batch.source))
            .collect())
    }

    /// Each rank's answers moved back to the source GPU: one buffer a rank.
    fn to_source<X: Pod>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        answers: Vec<DeviceBuffer<X>>,
    ) -> Result<Vec<DeviceBuffer<X>>> {
        self.gather_at(batch.source, &batch.streams, answers)
    }

    /// `parts[rank]` (on `streams[rank]`'s GPU) moved to rank `source`: one buffer a rank.
    pub(crate) fn gather_at<X: Pod>(
        &self,
        source: usize,
        streams: &[Stream],
        parts: Vec<DeviceBuffer<X>>,
    ) -> Result<Vec<DeviceBuffer<X>>> {
        let answers = parts;
        let ranks = answers.len();
        let parts = answers
            .into_iter()
            .zip(streams)
            .map(|(answer, stream)| {
                let mut row = (0..ranks)
                    .map(|_| DeviceBuffer::unfilled(stream, 0))
                    .collect::<Result<Vec<_>>>()?;
                row[source] = answer;
                Ok(row)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut received = all_to_all(&self.comm, streams, &parts)?;
        Ok(received.swap_remove(source))
    }

    /// `visit(rank, stream, keys)` on every rank, its keys on its stream (ranks with no
    /// keys too: their answers are empty).
    fn each_shard<X>(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[DeviceBuffer<KeyOf<T>>],
        mut visit: impl FnMut(usize, &Stream, &DeviceBuffer<KeyOf<T>>) -> Result<X, T::Error>,
    ) -> Result<Vec<X>, T::Error> {
        owned
            .iter()
            .enumerate()
            .map(|(rank, keys)| visit(rank, &batch.streams[rank], keys))
            .collect()
    }

    /// A change on every shard that has keys, each logged first, then `finish` on each
    /// rank's flags where `visit` gives them (empty for ranks with no keys); on any
    /// failure of either, the logged shards are taken back and the failure returned.
    fn change(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[DeviceBuffer<KeyOf<T>>],
        removal: bool,
        mut visit: impl FnMut(
            usize,
            &Stream,
            &DeviceBuffer<KeyOf<T>>,
        ) -> Result<Option<DeviceBuffer<u8>>, T::Error>,
        finish: impl FnOnce(Vec<DeviceBuffer<u8>>) -> Result<(), T::Error>,
    ) -> Result<(), T::Error> {
        let mut logs = Vec::new();
        let result = self.each_shard(batch, owned, |rank, stream, keys| {
            if keys.is_empty() {
                return Ok(DeviceBuffer::unfilled(stream, 0)?);
            }
            let mut found = DeviceBuffer::unfilled(stream, keys.len())?;
            let mut held = DeviceBuffer::unfilled(stream, keys.len())?;
            self.shards[rank].get_async(stream, keys, &mut found, &mut held)?;
            logs.push(Log { rank, found, held });
            Ok(match visit(rank, stream, keys)? {
                Some(flags) => flags,
                None => DeviceBuffer::unfilled(stream, 0)?,
            })
        });
        let result = result.and_then(finish);
        if result.is_err() {
            // The batch's own error is the one returned; an undo that fails in turn
            // leaves its shard partly changed (documented in the crate docs).
            let _ = self.undo(batch, owned, logs, removal);
        }
        result
    }

    /// Takes every logged shard back, the last reached first. Every log comes to the host
    /// first, its device buffers freed as it does, so that the undo's own uploads find
    /// room on a GPU that the batch filled.
    fn undo(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        owned: &[DeviceBuffer<KeyOf<T>>],
        logs: Vec<Log<ValueOf<T>>>,
        removal: bool,
    ) -> Result<(), T::Error> {
        let plans = logs
            .into_iter()
            .map(|log| {
                let stream = &batch.streams[log.rank];
                let keys = owned[log.rank].to_host(stream)?;
                let found = log.found.to_host(stream)?;
                let held = log.held.to_host(stream)?;
                let plan = if removal {
                    UndoPlan::after_remove(&keys, &found, &held)
                } else {
                    UndoPlan::after_insert(&keys, &found, Some(&held))
                };
                Ok((log.rank, plan))
            })
            .collect::<Result<Vec<_>>>()?;
        for (rank, plan) in plans.into_iter().rev() {
            let (stream, shard) = (&batch.streams[rank], &self.shards[rank]);
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

    /// Brings each rank's flags (and values, for a lookup) back to the source and puts
    /// them at their input places in the caller's buffers; values only where found.
    fn answer(
        &self,
        batch: &Batch<'_, KeyOf<T>, ValueOf<T>>,
        flags: Vec<DeviceBuffer<u8>>,
        values: Option<Vec<DeviceBuffer<ValueOf<T>>>>,
        flags_out: &mut DeviceBuffer<u8>,
        values_out: Option<&mut DeviceBuffer<ValueOf<T>>>,
    ) -> Result<()> {
        let stream = batch.caller;
        let flags = self.to_source(batch, flags)?;
        let values = values.map(|v| self.to_source(batch, v)).transpose()?;
        let places = batch
            .split
            .ranges()
            .iter()
            .map(|range| batch.split.places_of(stream, range.clone()))
            .collect::<Result<Vec<_>>>()?;
        for (rank, places) in places.iter().enumerate() {
            gather_answers(stream, &flags[rank], places, None, flags_out, 0)?;
        }
        if let (Some(values), Some(values_out)) = (values, values_out) {
            for (rank, places) in places.iter().enumerate() {
                let found = Some(&flags[rank]);
                gather_answers(stream, &values[rank], places, found, values_out, 0)?;
            }
        }
        Ok(())
    }
}

/// The caller's answer buffers must hold an answer a key.
fn check_answers_room<V: Pod>(keys: usize, verb: &Verb<'_, V>) -> Result<()> {
    let (what, room) = match verb {
        Verb::Insert(values) => ("insert: keys and values", values.len()),
        Verb::Get { found, values } => ("get: answers", found.len().min(values.len())),
        Verb::Contains(found) => ("contains: keys and flags", found.len()),
        Verb::Remove(removed) => ("remove: keys and flags", removed.len()),
    };
    if room < keys || matches!(verb, Verb::Insert(_)) && room != keys {
        return Err(Error::LengthMismatch {
            what,
            left: keys,
            right: room,
        });
    }
    Ok(())
}

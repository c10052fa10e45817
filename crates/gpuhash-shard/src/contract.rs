//! The table contract on a [`ShardedTable`]: the verbs run as batches ([`crate::batch`]);
//! counts and memory go shard by shard on each local shard's GPU and are summed over
//! every rank; clearing clears the local shards; an export brings every shard's pairs to
//! the caller's GPU through the same exchange (to every rank's, in several processes).

use bytemuck::Pod;
use gpuhash_core::table::{Combine, CombiningMap, DevicePairs, Map, MemoryUsage, Table};
use gpuhash_core::{Device, DeviceBuffer, Result, Stream};

use crate::batch::Verb;
use crate::exchange::{all_to_all, sum_over_ranks};
use crate::table::ShardedTable;

/// What each local rank answered, with the caller's place and each local rank's stream.
struct Answers<X> {
    source: usize,
    streams: Vec<Stream>,
    answers: Vec<X>,
}

impl<T: Map> ShardedTable<T> {
    /// `visit(shard, stream)` on every local shard, on the stream its rank works on for
    /// work queued on `stream`, one batch at a time; a refused stream (see
    /// [`ShardedTable::caller`]) returns its error after the visits, which the caller's
    /// exchanges then follow.
    fn each_rank<X>(
        &self,
        stream: &Stream,
        mut visit: impl FnMut(&T, &Stream) -> Result<X, T::Error>,
    ) -> Result<(Answers<X>, Result<()>), T::Error> {
        let (source, caller, refused) = self.caller(stream)?;
        let streams = self.comm.streams_for(source, caller);
        let answers = self
            .shards
            .iter()
            .zip(&streams)
            .map(|(shard, stream)| visit(shard, stream))
            .collect::<Result<_, _>>()?;
        let answers = Answers {
            source,
            streams,
            answers,
        };
        Ok((answers, refused))
    }

    /// Keys a host form's chunk: whole batches in several processes.
    fn host_chunk(&self) -> usize {
        match self.comm.is_whole() {
            true => gpuhash_core::staging::CHUNK,
            false => usize::MAX,
        }
    }

    /// `parts[local]` (on `streams[local]`'s GPU) moved to the ranks that asked (the
    /// caller's alone in one process, every rank in several): what the caller's rank
    /// received, one buffer a rank.
    fn gather_at<X: Pod>(
        &self,
        source: usize,
        streams: &[Stream],
        parts: &[DeviceBuffer<X>],
    ) -> Result<Vec<DeviceBuffer<X>>> {
        let receivers = self.comm.receivers(source);
        let empty = streams
            .iter()
            .map(|stream| DeviceBuffer::unfilled(stream, 0))
            .collect::<Result<Vec<_>>>()?;
        let rows: Vec<Vec<_>> = parts
            .iter()
            .zip(&empty)
            .map(|(part, empty)| {
                receivers
                    .iter()
                    .map(|&receives| if receives { part } else { empty })
                    .collect()
            })
            .collect();
        let mut received = all_to_all(&self.comm, streams, &rows)?;
        Ok(received.swap_remove(source))
    }
}

impl<T: Map> Table for ShardedTable<T> {
    type Key = T::Key;
    type Error = T::Error;

    /// The first local rank's device: where the host forms stage their batches.
    fn device(&self) -> &Device {
        self.comm.device(self.comm.local_ranks().start)
    }

    /// The core's chunk where every rank is local; in several processes `usize::MAX`:
    /// every host form is one batch, so every process runs as many.
    fn host_lookup_chunk(&self) -> usize {
        self.host_chunk()
    }

    /// As [`ShardedTable::host_lookup_chunk`].
    fn host_insert_chunk(&self) -> usize {
        self.host_chunk()
    }

    /// Summed over every rank (in several processes, each rank's count is exchanged).
    fn len_on(&self, stream: &Stream) -> Result<usize, Self::Error> {
        let _batch = self.batch.lock();
        let (lens, refused) = self.each_rank(stream, |shard, s| Ok([shard.len_on(s)? as u64]))?;
        let [len] = sum_over_ranks(&self.comm, &lens.streams, &lens.answers)?;
        refused?;
        Ok(len as usize)
    }

    /// Every shard's memory, summed over the GPUs of every rank.
    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, Self::Error> {
        let _batch = self.batch.lock();
        let (usages, refused) = self.each_rank(stream, |shard, s| {
            let usage = shard.memory_on(s)?;
            Ok([usage.bytes_reserved, usage.bytes_in_use, usage.entry_bytes])
        })?;
        let [bytes_reserved, bytes_in_use, entry_bytes] =
            sum_over_ranks(&self.comm, &usages.streams, &usages.answers)?;
        refused?;
        Ok(MemoryUsage {
            bytes_reserved,
            bytes_in_use,
            entry_bytes,
        })
    }

    /// Clears local shard after local shard; one that fails leaves the shards before it
    /// cleared. In several processes each clears its own shard (no exchange).
    fn clear_on(&self, stream: &Stream) -> Result<(), Self::Error> {
        let _batch = self.batch.lock();
        let (_, refused) = self.each_rank(stream, |shard, s| shard.clear_on(s))?;
        Ok(refused?)
    }
}

impl<T: Map> Map for ShardedTable<T> {
    type Value = T::Value;

    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error> {
        let op: crate::batch::PairsOp<'_, T> = &|shard, s, k, v| shard.insert_async(s, k, v);
        self.run(stream, keys, Verb::Pairs { values, op })
    }

    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error> {
        self.run(stream, keys, Verb::Get { found, values })
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error> {
        self.run(stream, keys, Verb::Contains(found))
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error> {
        self.run(stream, keys, Verb::Remove(removed))
    }

    /// Every shard's pairs, exported on its GPU, brought to `stream`'s GPU and laid end to
    /// end there (in several processes, every process gets every shard's pairs).
    fn export_on(
        &self,
        stream: &Stream,
    ) -> Result<DevicePairs<Self::Key, Self::Value>, Self::Error> {
        let _batch = self.batch.lock();
        let (parts, refused) = self.each_rank(stream, |shard, s| shard.export_on(s))?;
        let (keys, values): (Vec<_>, Vec<_>) = parts
            .answers
            .into_iter()
            .map(|p| (p.keys, p.values))
            .unzip();
        let keys = self.gather_at(parts.source, &parts.streams, &keys)?;
        let values = self.gather_at(parts.source, &parts.streams, &values)?;
        refused?;
        let total = keys.iter().map(DeviceBuffer::len).sum();
        let mut all = DevicePairs {
            keys: DeviceBuffer::unfilled(stream, total)?,
            values: DeviceBuffer::unfilled(stream, total)?,
        };
        let mut at = 0;
        for (k, v) in keys.iter().zip(&values) {
            all.keys.copy_from_at(stream, at, k)?;
            all.values.copy_from_at(stream, at, v)?;
            at += k.len();
        }
        Ok(all)
    }
}

/// Where the shards combine, so does the table: an upsert travels and is taken back on
/// failure as an insert does, each owner upserting what each source sent it, source by
/// source (every value is combined into its key's once); `insert_or_find` likewise, each
/// key's value after the batch coming back to its input place. Of equal new keys from
/// several sources, the first source's part to reach the owner stores its candidate.
impl<T: CombiningMap> CombiningMap for ShardedTable<T> {
    fn upsert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
        combine: Combine,
    ) -> Result<(), Self::Error> {
        let op: crate::batch::PairsOp<'_, T> =
            &|shard, s, k, v| shard.upsert_async(s, k, v, combine);
        self.run(stream, keys, Verb::Pairs { values, op })
    }

    fn insert_or_find_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        candidates: &DeviceBuffer<Self::Value>,
        values_out: &mut DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error> {
        let op: crate::batch::FindOp<'_, T> =
            &|shard, s, k, c, out| shard.insert_or_find_async(s, k, c, out);
        self.run(
            stream,
            keys,
            Verb::InsertOrFind {
                candidates,
                values_out,
                op,
            },
        )
    }
}

//! The table contract on a [`ShardedTable`]: the verbs run as batches ([`crate::batch`]);
//! counts, memory and clearing go shard by shard on each shard's GPU, and an export
//! brings every shard's pairs to the caller's GPU through the same exchange.

use gpuhash_core::table::{DevicePairs, Map, MemoryUsage, Table, check_pairs};
use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::batch::Verb;
use crate::table::ShardedTable;

impl<T: Map> ShardedTable<T> {
    /// `visit(shard, stream)` on every shard, on the stream its rank works on for work
    /// queued on `stream`, one batch at a time.
    fn each_rank<X>(
        &self,
        stream: &Stream,
        mut visit: impl FnMut(&T, &Stream) -> Result<X, T::Error>,
    ) -> Result<(usize, Vec<Stream>, Vec<X>), T::Error> {
        let source = self.comm.rank_of(stream)?;
        let streams = self.comm.streams_for(source, stream);
        let answers = self
            .shards
            .iter()
            .zip(&streams)
            .map(|(shard, stream)| visit(shard, stream))
            .collect::<Result<_, _>>()?;
        Ok((source, streams, answers))
    }
}

impl<T: Map> Table for ShardedTable<T> {
    type Key = T::Key;
    type Error = T::Error;

    /// Rank 0's device: where the host forms stage their batches.
    fn device(&self) -> &Device {
        self.comm.device(0)
    }

    fn len_on(&self, stream: &Stream) -> Result<usize, Self::Error> {
        let _batch = self.batch.lock();
        let (_, _, lens) = self.each_rank(stream, |shard, s| shard.len_on(s))?;
        Ok(lens.into_iter().sum())
    }

    /// Every shard's memory, summed over the GPUs.
    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, Self::Error> {
        let _batch = self.batch.lock();
        let (_, _, usages) = self.each_rank(stream, |shard, s| shard.memory_on(s))?;
        Ok(usages.into_iter().sum())
    }

    /// Clears shard after shard; one that fails leaves the shards before it cleared.
    fn clear_on(&self, stream: &Stream) -> Result<(), Self::Error> {
        let _batch = self.batch.lock();
        self.each_rank(stream, |shard, s| shard.clear_on(s))?;
        Ok(())
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
        check_pairs(keys.len(), values.len())?;
        self.run(stream, keys, Verb::Insert(values))
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
    /// end there.
    fn export_on(
        &self,
        stream: &Stream,
    ) -> Result<DevicePairs<Self::Key, Self::Value>, Self::Error> {
        let _batch = self.batch.lock();
        let (source, streams, parts) = self.each_rank(stream, |shard, s| shard.export_on(s))?;
        let (keys, values): (Vec<_>, Vec<_>) =
            parts.into_iter().map(|p| (p.keys, p.values)).unzip();
        let keys = self.gather_at(source, &streams, keys)?;
        let values = self.gather_at(source, &streams, values)?;
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

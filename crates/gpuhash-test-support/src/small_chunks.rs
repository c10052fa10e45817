//! [`SmallChunks`]: a table whose host inserts run in chunks of a few keys, and whose
//! insert form can be made to fail at a chosen batch, so that the chunked host inserts
//! ([`gpuhash_core::table::insert_in_chunks`]) are checked at test sizes, undo included.

use std::sync::atomic::{AtomicUsize, Ordering};

use gpuhash_core::table::{Combine, CombiningMap, DevicePairs, Map, MemoryUsage, Set, Table};
use gpuhash_core::{Device, DeviceBuffer, Error, Stream};

/// How a [`SmallChunks`] cuts and fails its inserts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkSetup {
    /// Keys of a host insert's chunks.
    pub(crate) chunk: usize,
    /// The call of the insert (or upsert) device form, counted from 1, that fails with
    /// `InvalidInput`, changing nothing; `None`: none fails.
    pub(crate) fail_at: Option<usize>,
}

/// A table that answers [`Table::host_insert_chunk`] with its setup's chunk, and whose
/// insert and upsert device forms fail, changing nothing, at the setup's call; every
/// other form is the table's own.
#[derive(Debug)]
pub(crate) struct SmallChunks<T> {
    table: T,
    setup: ChunkSetup,
    inserts: AtomicUsize,
}

impl<T> SmallChunks<T> {
    pub(crate) fn new(table: T, setup: ChunkSetup) -> Self {
        Self {
            table,
            setup,
            inserts: AtomicUsize::new(0),
        }
    }

    /// Counts a call of the insert or upsert form: the failure where the setup puts it.
    fn count_insert<E: From<Error>>(&self) -> Result<(), E> {
        let call = self.inserts.fetch_add(1, Ordering::Relaxed) + 1;
        if Some(call) == self.setup.fail_at {
            return Err(
                Error::InvalidInput(format!("insert call {call} fails, as the test asks")).into(),
            );
        }
        Ok(())
    }
}

impl<T: Table> Table for SmallChunks<T> {
    type Key = T::Key;
    type Error = T::Error;

    fn device(&self) -> &Device {
        self.table.device()
    }

    fn len_on(&self, stream: &Stream) -> Result<usize, T::Error> {
        self.table.len_on(stream)
    }

    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, T::Error> {
        self.table.memory_on(stream)
    }

    fn clear_on(&self, stream: &Stream) -> Result<(), T::Error> {
        self.table.clear_on(stream)
    }

    fn host_lookup_chunk(&self) -> usize {
        self.table.host_lookup_chunk()
    }

    fn host_lookup_chunk_for(&self, keys: &[Self::Key]) -> usize {
        self.table.host_lookup_chunk_for(keys)
    }

    fn host_insert_chunk(&self) -> usize {
        self.setup.chunk
    }
}

impl<M: Map> Map for SmallChunks<M> {
    type Value = M::Value;

    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        values: &DeviceBuffer<M::Value>,
    ) -> Result<(), M::Error> {
        self.count_insert()?;
        self.table.insert_async(stream, keys, values)
    }

    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<M::Value>,
    ) -> Result<(), M::Error> {
        self.table.get_async(stream, keys, found, values)
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), M::Error> {
        self.table.contains_async(stream, keys, found)
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), M::Error> {
        self.table.remove_async(stream, keys, removed)
    }

    fn export_on(&self, stream: &Stream) -> Result<DevicePairs<M::Key, M::Value>, M::Error> {
        self.table.export_on(stream)
    }
}

impl<M: CombiningMap> CombiningMap for SmallChunks<M> {
    fn upsert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        values: &DeviceBuffer<M::Value>,
        combine: Combine,
    ) -> Result<(), M::Error> {
        self.count_insert()?;
        self.table.upsert_async(stream, keys, values, combine)
    }

    fn insert_or_find_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<M::Key>,
        candidates: &DeviceBuffer<M::Value>,
        values_out: &mut DeviceBuffer<M::Value>,
    ) -> Result<(), M::Error> {
        self.table
            .insert_or_find_async(stream, keys, candidates, values_out)
    }
}

impl<S: Set> Set for SmallChunks<S> {
    fn insert_async(&self, stream: &Stream, keys: &DeviceBuffer<S::Key>) -> Result<(), S::Error> {
        self.count_insert()?;
        self.table.insert_async(stream, keys)
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<S::Key>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), S::Error> {
        self.table.contains_async(stream, keys, found)
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<S::Key>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), S::Error> {
        self.table.remove_async(stream, keys, removed)
    }

    fn export_on(&self, stream: &Stream) -> Result<DeviceBuffer<S::Key>, S::Error> {
        self.table.export_on(stream)
    }
}

//! `SlabHashSet`: keys only, 30 (or 15 of 64 bits) to a slab.

use std::marker::PhantomData;

use gpuhash_core::table::{Key, Set, Table, insert_keys_in_chunks};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::contract::table_contract;
use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE};
use crate::scan::ExportOutputs;
use crate::shape::{Kind, Shape};
use crate::table::{Batch, SlabTable};

/// A concurrent GPU hash set of `u32` or `u64` keys over slab lists; it speaks the table
/// contract ([`Set`], [`gpuhash_core::table::Table`], [`gpuhash_core::image::Image`]).
/// Every key value is valid; every call takes `&self`.
#[derive(Debug)]
pub struct SlabHashSet<K: Key = u32> {
    table: SlabTable,
    types: PhantomData<fn(K)>,
}

table_contract!([K: Key] SlabHashSet<K>, "keys", Shape::of::<K, u32>(Kind::Set));

impl<K: Key> Set for SlabHashSet<K> {
    /// Queues inserts on `stream` and returns without waiting; the batch finishes on its
    /// own (see the crate docs on the room it reserves first).
    fn insert_async(&self, stream: &Stream, keys: &DeviceBuffer<K>) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(GH_OP_INSERT, keys, None);
        self.table.queue(stream, &batch, None, None)
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(GH_OP_GET, keys, None);
        self.table.queue(stream, &batch, None, Some(found))
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(GH_OP_REMOVE, keys, None);
        self.table.queue(stream, &batch, None, Some(removed))
    }

    fn export_on(&self, stream: &Stream) -> Result<DeviceBuffer<K>> {
        Ok(self.table.export::<K, u32>(stream)?.0)
    }

    /// Writes the caller's buffer straight: the export pass places the keys there.
    fn export_into_on(&self, stream: &Stream, keys: &mut DeviceBuffer<K>) -> Result<usize> {
        let outputs = ExportOutputs::<K, u32> { keys, values: None };
        self.table.export_into(stream, outputs)
    }

    /// Inserts each key; as [`crate::SlabHashMap`]'s insert, a batch of one chunk runs
    /// whole, inserts that find no free slab running again once the table has made room,
    /// or [`crate::SlabHashError::NotInserted`] naming them; a larger batch runs in chunks
    /// ([`insert_keys_in_chunks`]), as one.
    fn insert(&self, keys: &[K]) -> Result<()> {
        if keys.len() > self.host_insert_chunk() {
            return insert_keys_in_chunks(self, keys);
        }
        self.table
            .run_host::<K, u32>(None, GH_OP_INSERT, keys, None, false)
            .map(drop)
    }
}

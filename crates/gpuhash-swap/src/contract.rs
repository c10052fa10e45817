//! The table contract on a [`SwapTable`]: the verbs run as batches ([`crate::batch`]);
//! counts, memory, clearing and exports go child by child.

use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::table::{DevicePairs, Map, MemoryUsage, Table, check_pairs};
use gpuhash_core::{Device, DeviceBuffer, Stream, staging};

use crate::batch::Verb;
use crate::policy::resident_first;
use crate::table::SwapTable;

/// One child's exported pairs.
type ChildPairs<T> = DevicePairs<<T as Table>::Key, <T as Map>::Value>;

impl<T: ProbeInPlace> SwapTable<T> {
    /// Each child's pairs, the children paged in in turn (least recently used out), the
    /// resident ones first.
    fn export_children(&self, stream: &Stream) -> Result<Vec<ChildPairs<T>>, T::Error> {
        let mut residency = self.residency.lock();
        let mut parts = Vec::with_capacity(residency.count());
        let order = resident_first((0..residency.count()).map(|child| (child, ())), |child| {
            residency.is_resident(child)
        });
        for (child, ()) in order {
            parts.push(
                residency.on_resident(&self.device, (child, false), stream, |table| {
                    table.export_on(stream)
                })?,
            );
        }
        Ok(parts)
    }
}

impl<T: ProbeInPlace> Table for SwapTable<T> {
    type Key = T::Key;
    type Error = T::Error;

    fn device(&self) -> &Device {
        &self.device
    }

    /// Entries of every child: resident ones counted on the device, the others as their
    /// images hold them.
    fn len_on(&self, stream: &Stream) -> Result<usize, Self::Error> {
        self.residency.lock().len_on(stream)
    }

    /// Device memory of the resident children (children on the host take none) and of
    /// every child's miss filter.
    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, Self::Error> {
        let mut residency = self.residency.lock();
        let filters = residency.filters().bytes();
        let start = MemoryUsage {
            bytes_reserved: filters,
            bytes_in_use: filters,
            entry_bytes: 0,
        };
        residency
            .resident()
            .into_iter()
            .try_fold(start, |sum, child| {
                let usage = residency.queued_on(child, stream, |table| table.memory_on(stream))?;
                Ok(sum + usage)
            })
    }

    fn clear_on(&self, stream: &Stream) -> Result<(), Self::Error> {
        self.residency.lock().clear_on(stream)
    }

    /// Whole: every batch pages its children in in turn, so a lookup cut into chunks would
    /// page them all once a chunk.
    fn host_lookup_chunk(&self) -> usize {
        usize::MAX
    }

    /// In chunks ([`staging::CHUNK`]) where the lookup would page no child (each chunk is
    /// routed, with nothing to page again: the crate docs' "Routed lookups"), their copies
    /// beside other chunks' kernels; whole otherwise, as [`Table::host_lookup_chunk`] says.
    fn host_lookup_chunk_for(&self, keys: &[Self::Key]) -> usize {
        match self.routes_host_lookup(keys) {
            true => staging::CHUNK,
            false => usize::MAX,
        }
    }

    /// Whole, for the same reason: an insert cut into chunks would page every child in
    /// twice a chunk (its lookup, then its insert).
    fn host_insert_chunk(&self) -> usize {
        usize::MAX
    }
}

impl<T: ProbeInPlace> Map for SwapTable<T> {
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
        check_pairs(keys.len(), values.len())?;
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

    /// Every child's pairs, each child paged in in turn (least recently used out).
    fn export_on(
        &self,
        stream: &Stream,
    ) -> Result<DevicePairs<Self::Key, Self::Value>, Self::Error> {
        let parts = self.export_children(stream)?;
        let total = parts.iter().map(|p| p.keys.len()).sum();
        let mut all = DevicePairs {
            keys: DeviceBuffer::unfilled(stream, total)?,
            values: DeviceBuffer::unfilled(stream, total)?,
        };
        concatenate_into(stream, &parts, &mut all.keys, &mut all.values)?;
        Ok(all)
    }

    /// Every child's pairs, end to end in the caller's buffers (each child paged in in
    /// turn, and every child's pairs counted before any is written).
    fn export_into_on(
        &self,
        stream: &Stream,
        keys: &mut DeviceBuffer<Self::Key>,
        values: &mut DeviceBuffer<Self::Value>,
    ) -> Result<usize, Self::Error> {
        let parts = self.export_children(stream)?;
        Ok(concatenate_into(stream, &parts, keys, values)?)
    }
}

/// The pairs of `parts`, end to end, into the front of `keys` and `values`; returns how
/// many. Buffers with room for fewer are an error, with nothing written.
fn concatenate_into<K: bytemuck::Pod, V: bytemuck::Pod>(
    stream: &Stream,
    parts: &[DevicePairs<K, V>],
    keys: &mut DeviceBuffer<K>,
    values: &mut DeviceBuffer<V>,
) -> gpuhash_core::Result<usize> {
    let total: usize = parts.iter().map(|p| p.keys.len()).sum();
    let room = keys.len().min(values.len());
    if room < total {
        return Err(gpuhash_core::Error::InvalidInput(format!(
            "export_into: room for {room} pairs, the table holds {total}"
        )));
    }
    let mut at = 0;
    for part in parts {
        keys.copy_from_at(stream, at, &part.keys)?;
        values.copy_from_at(stream, at, &part.values)?;
        at += part.keys.len();
    }
    Ok(total)
}

//! The table contract on a [`SwapTable`]: each batch is cut into segments, each segment
//! partitioned by child on the device, each child's range run by the child's own device
//! form (the child paged in as needed), and the answers put back in input order.
//!
//! Lookups (get, contains) of children on the host go another way: their keys are checked
//! against the children's miss filters on the device, and only the keys a filter passes go
//! on, to the child's image probed in place or to the child paged in, as the cost model
//! chooses. Inserts and removes of children on the host page them in.

use std::ops::Range;

use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::table::{DevicePairs, Map, MemoryUsage, Table, check_pairs};
use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::filter::Survivors;
use crate::launch;
use crate::partition::Partition;
use crate::policy::{Access, resident_first, segments};
use crate::residency::Residency;
use crate::table::SwapTable;

/// A batch verb with the caller's buffers.
enum Verb<'a, V> {
    Insert(&'a DeviceBuffer<V>),
    Get {
        found: &'a mut DeviceBuffer<u8>,
        values: &'a mut DeviceBuffer<V>,
    },
    Contains(&'a mut DeviceBuffer<u8>),
    Remove(&'a mut DeviceBuffer<u8>),
}

impl<V> Verb<'_, V> {
    fn changes(&self) -> bool {
        matches!(self, Verb::Insert(_) | Verb::Remove(_))
    }

    fn values(&self) -> Option<&DeviceBuffer<V>> {
        match self {
            Verb::Insert(values) => Some(values),
            _ => None,
        }
    }

    fn found(&mut self) -> Option<&mut DeviceBuffer<u8>> {
        match self {
            Verb::Insert(_) => None,
            Verb::Get { found, .. } | Verb::Contains(found) | Verb::Remove(found) => Some(found),
        }
    }
}

/// One child's exported pairs.
type ChildPairs<T> = DevicePairs<<T as Table>::Key, <T as Map>::Value>;

/// One segment's answers in partitioned order.
struct Answers<V> {
    found: DeviceBuffer<u8>,
    values: DeviceBuffer<V>,
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// Runs `verb` on `keys`, segment by segment.
    fn run(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        mut verb: Verb<'_, T::Value>,
    ) -> Result<(), T::Error> {
        if let Some(found) = verb.found() {
            check_pairs(keys.len(), found.len())?;
        }
        let mut residency = self.residency.lock();
        for segment in segments(keys.len(), self.plan.segment) {
            self.run_segment(&mut residency, stream, keys, &mut verb, segment)?;
        }
        Ok(())
    }

    fn run_segment(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        verb: &mut Verb<'_, T::Value>,
        segment: Range<usize>,
    ) -> Result<(), T::Error> {
        let children = residency.count();
        let partition = Partition::of(stream, children, keys, verb.values(), segment.clone())?;
        // Misses of children on the host are answered by these zeros.
        let mut answers = Answers {
            found: DeviceBuffer::zeroed(stream, segment.len())?,
            values: DeviceBuffer::unfilled(stream, segment.len())?,
        };
        // Which children a lookup reaches through its filter: those on the host now (the
        // set is fixed before any child of the segment pages in or out).
        let on_host: Vec<bool> = (0..children)
            .map(|child| !verb.changes() && !residency.is_resident(child))
            .collect();
        let survivors = residency.filters().check(stream, &partition, &on_host)?;
        // Resident children first: an earlier child paging in evicts none of them.
        let order = resident_first(partition.children(), |child| residency.is_resident(child));
        for (child, range) in order {
            if on_host[child] {
                residency.count_filtered(range.len() - survivors.ranges[child].len());
                self.look_up_on_host(residency, stream, child, &survivors, verb, &mut answers)?;
            } else {
                let table = residency.table(&self.device, stream, child, verb.changes())?;
                run_child(table, stream, &partition, range, verb, &mut answers)?;
            }
        }
        gather_answers(stream, &partition, &answers, verb, segment.start)?;
        Ok(())
    }

    /// Looks up the keys of child `child` (on the host) that its filter passed: in its image
    /// in place or paged in, as the cost model chooses; their answers go to their places
    /// in `answers`.
    fn look_up_on_host(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        child: usize,
        survivors: &Survivors<T::Key>,
        verb: &Verb<'_, T::Value>,
        answers: &mut Answers<T::Value>,
    ) -> Result<(), T::Error> {
        let range = survivors.ranges[child].clone();
        if range.is_empty() {
            return Ok(());
        }
        let keys = survivors.keys_of(stream, range.clone())?;
        let mut found = DeviceBuffer::zeroed(stream, keys.len())?;
        let mut values = match verb {
            Verb::Get { .. } => Some(DeviceBuffer::unfilled(stream, keys.len())?),
            _ => None,
        };
        let image = residency.image(child);
        let access = if T::PROBES_IN_PLACE {
            self.cost_model()
                .choose(keys.len() as u64, T::PROBE_BYTES, image.bytes())
        } else {
            Access::Page
        };
        match access {
            Access::Probe => {
                T::get_in_place(stream, &image, &keys, &mut found, values.as_mut())?;
                residency.count_probe_in_place();
            }
            Access::Page => {
                let table = residency.table(&self.device, stream, child, false)?;
                match values.as_mut() {
                    Some(values) => table.get_async(stream, &keys, &mut found, values)?,
                    None => table.contains_async(stream, &keys, &mut found)?,
                }
            }
        }
        let places = survivors.places_of(stream, range)?;
        launch::gather(stream, &found, &places, None, &mut answers.found, 0)?;
        if let Some(values) = &values {
            launch::gather(
                stream,
                values,
                &places,
                Some(&found),
                &mut answers.values,
                0,
            )?;
        }
        // The image may be replaced while the kernels above still read it: its memory goes
        // back to the pool only once they have run (a pinned buffer waits for its readers).
        drop(image);
        Ok(())
    }

    /// Each child's pairs, the children paged in in turn (least recently used out), the
    /// resident ones first.
    fn export_children(&self, stream: &Stream) -> Result<Vec<ChildPairs<T>>, T::Error> {
        let mut residency = self.residency.lock();
        let mut parts = Vec::with_capacity(residency.count());
        let order = resident_first((0..residency.count()).map(|child| (child, ())), |child| {
            residency.is_resident(child)
        });
        for (child, ()) in order {
            let table = residency.table(&self.device, stream, child, false)?;
            parts.push(table.export_on(stream)?);
        }
        Ok(parts)
    }
}

/// Runs `verb` on one child's range, its answers into `answers` at the range.
fn run_child<T: Map>(
    table: &T,
    stream: &Stream,
    partition: &Partition<T::Key, T::Value>,
    range: Range<usize>,
    verb: &Verb<'_, T::Value>,
    answers: &mut Answers<T::Value>,
) -> Result<(), T::Error> {
    let keys = partition.keys_of(stream, range.clone())?;
    let found = match verb {
        Verb::Insert(_) => {
            return table.insert_async(stream, &keys, &partition.values_of(stream, range)?);
        }
        Verb::Get { .. } => {
            let mut values = DeviceBuffer::unfilled(stream, keys.len())?;
            let found = flags(stream, keys.len(), |found| {
                table.get_async(stream, &keys, found, &mut values)
            })?;
            answers.values.copy_from_at(stream, range.start, &values)?;
            found
        }
        Verb::Contains(_) => flags(stream, keys.len(), |found| {
            table.contains_async(stream, &keys, found)
        })?,
        Verb::Remove(_) => flags(stream, keys.len(), |found| {
            table.remove_async(stream, &keys, found)
        })?,
    };
    Ok(answers.found.copy_from_at(stream, range.start, &found)?)
}

/// A new flag buffer of `len`, filled by `device_form`.
fn flags<E: From<gpuhash_core::Error>>(
    stream: &Stream,
    len: usize,
    device_form: impl FnOnce(&mut DeviceBuffer<u8>) -> Result<(), E>,
) -> Result<DeviceBuffer<u8>, E> {
    let mut found = DeviceBuffer::unfilled(stream, len)?;
    device_form(&mut found)?;
    Ok(found)
}

/// Puts a segment's answers into the caller's buffers, in input order; values only where
/// found, so a miss leaves the caller's value as it was.
fn gather_answers<K, V: gpuhash_core::table::Value>(
    stream: &Stream,
    partition: &Partition<K, V>,
    answers: &Answers<V>,
    verb: &mut Verb<'_, V>,
    start: usize,
) -> gpuhash_core::Result<()> {
    let index = &partition.index;
    if let Verb::Get { values, .. } = verb {
        launch::gather(
            stream,
            &answers.values,
            index,
            Some(&answers.found),
            values,
            start,
        )?;
    }
    match verb.found() {
        Some(found) => launch::gather(stream, &answers.found, index, None, found, start),
        None => Ok(()),
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
        let residency = self.residency.lock();
        let filters = residency.filters().bytes();
        let start = MemoryUsage {
            bytes_reserved: filters,
            bytes_in_use: filters,
            entry_bytes: 0,
        };
        residency.resident_tables().try_fold(start, |sum, table| {
            let usage = table.memory_on(stream)?;
            Ok(MemoryUsage {
                bytes_reserved: sum.bytes_reserved + usage.bytes_reserved,
                bytes_in_use: sum.bytes_in_use + usage.bytes_in_use,
                entry_bytes: sum.entry_bytes + usage.entry_bytes,
            })
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

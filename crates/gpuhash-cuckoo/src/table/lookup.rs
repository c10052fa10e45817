//! Lookups and exports: the kernels that read the table and change nothing.

use std::ops::Range;

use gpuhash_core::image::check_each;
use gpuhash_core::table::{DevicePairs, Key, Value};
use gpuhash_core::{DeviceBuffer, Error, Stream};

use super::{CuckooTable, SIDE_HEADER};
use crate::key::KeyLayout;
use crate::launch::{FindPart, FindShared};
use crate::{Result, launch};

/// Tries of an export as a reading batch before it runs as a writing one
/// ([`CuckooTable::counted_export`]).
const READING_EXPORT_TRIES: usize = 4;

impl<K: Key, V: Value> CuckooTable<K, V> {
    pub(super) fn find(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: Option<&mut DeviceBuffer<u8>>,
        values: Option<&mut DeviceBuffer<V>>,
        hits: Option<&mut DeviceBuffer<u64>>,
    ) -> Result<()> {
        let view = self.view();
        let mut guards = Vec::new();
        let table = self.describe(&view, stream, &mut guards);
        launch::find(
            stream,
            launch::Find {
                table,
                home: self.home(&view, false),
                keys,
                found,
                values,
                hits,
            },
        )
    }

    /// [`ProbeInPlace::get_each`] for tables of one bucket layout: the find kernel once for
    /// all of them, each table's range served by blocks of its own
    /// ([`launch::find_many`]). Each table reads as a reading batch does
    /// ([`CuckooTable::reading_each`]).
    ///
    /// [`ProbeInPlace::get_each`]: gpuhash_core::image::ProbeInPlace::get_each
    pub(super) fn find_each(
        stream: &Stream,
        maps: &[(&Self, Range<usize>)],
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        let values_len = values.as_deref().map(DeviceBuffer::len);
        check_each(maps, keys.len(), found.len(), values_len)?;
        let Some(&(first, _)) = maps.first() else {
            return Ok(());
        };
        let tables: Vec<&Self> = maps.iter().map(|&(map, _)| map).collect();
        Self::reading_each(stream, &tables, || {
            let views: Vec<_> = maps.iter().map(|(map, _)| map.view()).collect();
            let mut guards = Vec::new();
            let parts: Vec<FindPart> = maps
                .iter()
                .zip(&views)
                .filter(|((_, range), _)| !range.is_empty())
                .map(|((map, range), view)| FindPart {
                    table: map.describe(view, stream, &mut guards),
                    home: map.home(view, false),
                    range: range.clone(),
                })
                .collect();
            let shared = FindShared {
                keys,
                found,
                values,
            };
            launch::find_many(stream, first.layout.code(), &parts, shared)
        })
    }

    /// Runs `read`, which queues work on `stream` that reads every table of `maps`, with
    /// each table read as a reading batch reads it: its gate's read lock held (taken in the
    /// tables' address order, so that two such calls never wait on each other) and its
    /// place taken in the stream order of its batches before and after the work.
    pub(super) fn reading_each(
        stream: &Stream,
        maps: &[&Self],
        read: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut by_address = maps.to_vec();
        by_address.sort_by_key(|&map| std::ptr::from_ref(map) as usize);
        let _gates: Vec<_> = by_address.iter().map(|map| map.gate.read()).collect();
        let mut ordered = Ok(());
        for map in maps {
            ordered = ordered.and_then(|()| map.order.before_read(stream));
        }
        let launched = ordered.and_then(|()| read());
        let recorded = maps.iter().try_for_each(|map| map.order.after_read(stream));
        launched?;
        recorded
    }

    /// Every pair in the subtables (not the side slot) into the first `slotted` places of
    /// `keys` and `values` (which hold at least that many), `slotted` being the pairs the
    /// counts say the subtables hold; an error if the kernel found another number (it
    /// writes below `slotted` only), so nothing is lost unnoticed. Waits for `stream`.
    pub(super) fn export_slotted(
        &self,
        stream: &Stream,
        slotted: usize,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        let mut written = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        {
            let view = self.view();
            let mut guards = Vec::new();
            let table = self.describe(&view, stream, &mut guards);
            let buckets: u64 = view.subs.iter().map(|s| s.buckets).max().unwrap_or(1);
            launch::export(
                stream,
                launch::Export {
                    table,
                    buckets,
                    keys,
                    values,
                    written: &mut written,
                    capacity: slotted as u64,
                },
            )?;
        }
        let written = written.to_host(stream)?[0] as usize;
        if written != slotted {
            return Err(Error::InvalidInput(format!(
                "export found {written} pairs where the counts say {slotted}"
            ))
            .into());
        }
        Ok(())
    }

    /// Runs `export`, which sizes its answer by the host's counts, on current counts. The
    /// counts are read first after removes (a writing batch, as [`Table::len_on`] does),
    /// then `export` runs as a reading batch; but a remove queued by another thread in
    /// between leaves the counts behind, the kernel finding fewer pairs than they say (an
    /// error) and the side slot's flag stale. So the reading batch checks, under the gate,
    /// that no remove came, and the export starts again if one did, up to
    /// [`READING_EXPORT_TRIES`] times; then it runs as one writing batch with the counts,
    /// alone on the host and the device, so that the call always ends.
    ///
    /// [`Table::len_on`]: gpuhash_core::table::Table::len_on
    pub(super) fn counted_export<R>(
        &self,
        stream: &Stream,
        mut export: impl FnMut() -> Result<R>,
    ) -> Result<R> {
        for _ in 0..READING_EXPORT_TRIES {
            self.count_on(stream)?;
            let exported = self.reading(stream, || {
                if self.mirror.lock().uncounted_removes {
                    return Ok(None);
                }
                export().map(Some)
            })?;
            if let Some(exported) = exported {
                return Ok(exported);
            }
        }
        self.writing(stream, || {
            self.settle_counts(stream)?;
            export()
        })
    }

    /// The pairs the subtables hold, by the counts, and whether the side slot holds the
    /// reserved key.
    fn exported_len(&self) -> (usize, bool) {
        let m = self.mirror.lock();
        (m.counts.iter().sum::<u64>() as usize, m.side_present)
    }

    /// Every pair, the reserved key's included, into new device buffers; waits for
    /// `stream` to size them. The counts must be current (no removes uncounted).
    pub(super) fn export_pairs(&self, stream: &Stream) -> Result<DevicePairs<K, V>> {
        let (slotted, side_present) = self.exported_len();
        let total = slotted + usize::from(side_present);
        let mut pairs = DevicePairs {
            keys: DeviceBuffer::unfilled(stream, total)?,
            values: DeviceBuffer::unfilled(stream, total)?,
        };
        self.export_pairs_into(stream, &mut pairs.keys, &mut pairs.values)?;
        Ok(pairs)
    }

    /// Every pair, the reserved key's included, into the front of the caller's buffers;
    /// returns how many. Buffers with room for fewer are [`Error::InvalidInput`], with
    /// nothing written. The counts must be current (no removes uncounted).
    pub(super) fn export_pairs_into(
        &self,
        stream: &Stream,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<usize> {
        let (slotted, side_present) = self.exported_len();
        let total = slotted + usize::from(side_present);
        let room = keys.len().min(values.len());
        if room < total {
            return Err(Error::InvalidInput(format!(
                "export_into: room for {room} pairs, the table holds {total}"
            ))
            .into());
        }
        self.export_slotted(stream, slotted, keys, values)?;
        if side_present {
            let key = DeviceBuffer::from_host(stream, &[K::reserved()])?;
            let value = DeviceBuffer::from_host(stream, &[self.side_value(stream)?])?;
            keys.copy_from_at(stream, slotted, &key)?;
            values.copy_from_at(stream, slotted, &value)?;
        }
        Ok(total)
    }

    /// The reserved key's value in the side slot; waits for `stream`.
    fn side_value(&self, stream: &Stream) -> Result<V> {
        let side = self.shared.read().side.to_host(stream)?;
        Ok(bytemuck::pod_read_unaligned(bytemuck::cast_slice(
            &side[SIDE_HEADER..],
        )))
    }
}

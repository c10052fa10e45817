//! Lookups and exports: the kernels that read the table and change nothing.

use gpuhash_core::table::{DevicePairs, Key, Value};
use gpuhash_core::{DeviceBuffer, Error, Stream};

use super::{CuckooTable, SIDE_HEADER};
use crate::key::KeyLayout;
use crate::{Result, launch};

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
        let table = Self::describe(&view, stream, &mut guards);
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

    /// Every pair in the subtables (not the side slot) into the first `slotted` places of
    /// new device buffers of `room` pairs (at least `slotted`), `slotted` being the pairs
    /// the counts say the subtables hold; an error if the kernel found another number (it
    /// writes below `slotted` only), so nothing is lost unnoticed. Waits for `stream`.
    pub(super) fn export_slotted(
        &self,
        stream: &Stream,
        slotted: usize,
        room: usize,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
        let mut keys = DeviceBuffer::<K>::zeroed(stream, room)?;
        let mut values = DeviceBuffer::<V>::zeroed(stream, room)?;
        let mut written = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        {
            let view = self.view();
            let mut guards = Vec::new();
            let table = Self::describe(&view, stream, &mut guards);
            let buckets: u64 = view.subs.iter().map(|s| s.buckets).max().unwrap_or(1);
            launch::export(
                stream,
                launch::Export {
                    table,
                    buckets,
                    keys: &mut keys,
                    values: &mut values,
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
        Ok((keys, values))
    }

    /// Every pair, the reserved key's included, into new device buffers; waits for
    /// `stream` to size them. The counts must be current (no removes uncounted).
    pub(super) fn export_pairs(&self, stream: &Stream) -> Result<DevicePairs<K, V>> {
        let (slotted, side_present) = {
            let m = self.mirror.lock();
            (m.counts.iter().sum::<u64>() as usize, m.side_present)
        };
        let room = slotted + usize::from(side_present);
        let (mut keys, mut values) = self.export_slotted(stream, slotted, room)?;
        if side_present {
            let key = DeviceBuffer::from_host(stream, &[K::reserved()])?;
            let value = DeviceBuffer::from_host(stream, &[self.side_value(stream)?])?;
            keys.copy_from_at(stream, slotted, &key)?;
            values.copy_from_at(stream, slotted, &value)?;
        }
        Ok(DevicePairs { keys, values })
    }

    /// The reserved key's value in the side slot; waits for `stream`.
    fn side_value(&self, stream: &Stream) -> Result<V> {
        let side = self.shared.read().side.to_host(stream)?;
        Ok(bytemuck::pod_read_unaligned(bytemuck::cast_slice(
            &side[SIDE_HEADER..],
        )))
    }
}

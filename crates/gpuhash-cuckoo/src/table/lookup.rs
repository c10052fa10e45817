//! Lookups and exports: the kernels that read the table and change nothing.

use gpuhash_core::table::{DevicePairs, Key, Value};
use gpuhash_core::{DeviceBuffer, Error, Stream};

use super::{CuckooTable, SIDE_HEADER, tile_shape};
use crate::Result;
use crate::key::KeyLayout;
use crate::layouts::{GhCuckooExportParams, GhCuckooFindParams};

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
        let k = keys.address(stream);
        let f = found.map(|b| b.address_mut(stream));
        let v = values.map(|b| b.address_mut(stream));
        let h = hits.map(|b| b.address_mut(stream));
        let params = GhCuckooFindParams {
            home: self.home(&view, false),
            table,
            keys: k.address as *const _,
            values_out: v
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u32),
            found_out: f
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u8),
            hits: h
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| (a.address + 16) as *mut u64),
            count: keys.len() as u64,
        };
        // SAFETY: the table arrays are held by `view` and their address guards; `keys`,
        // and the outputs when given, are live buffers of keys.len() entries (callers
        // check the lengths), `hits` a 4-u64 counters buffer whose third word is written;
        // all guards outlive the launch.
        unsafe {
            K::kernels()
                .find
                .launch(stream, tile_shape(stream, keys.len() as u64), params)
        }?;
        Ok(())
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
            let k = keys.address_mut(stream);
            let v = values.address_mut(stream);
            let w = written.address_mut(stream);
            let params = GhCuckooExportParams {
                table,
                keys_out: k.address as *mut _,
                values_out: v.address as *mut u32,
                written: w.address as *mut u64,
                capacity: slotted as u64,
            };
            let buckets: u64 = view.subs.iter().map(|s| s.buckets).max().unwrap_or(1);
            // SAFETY: the table's arrays are held by the read guards in `subs` and their
            // address guards; the outputs hold `room >= slotted` keys and values, the
            // kernel writes below `capacity` only and counts the rest in `written`.
            unsafe {
                K::kernels()
                    .export
                    .launch(stream, tile_shape(stream, buckets), params)
            }?;
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

//! Removes: of some keys (the remove kernel), or of every pair (clear).

use gpuhash_core::table::{Key, Value};
use gpuhash_core::{DeviceBuffer, Stream};

use super::{CuckooTable, SIDE_HEADER, fill_words, tile_shape};
use crate::Result;
use crate::key::KeyLayout;
use crate::layouts::GhCuckooRemoveParams;

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// Queues the remove kernel over the first `count` keys (those not flagged in `skip`),
    /// emptying the copies `copies` names (`GH_CUCKOO_REMOVE_*`); `removed[i]` (when
    /// given) becomes 1 where key i's slot was emptied, else 0. The kernel keeps the
    /// device's pair counts; the host's are then behind, which the caller records.
    pub(super) fn remove_launch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        count: usize,
        skip: Option<&DeviceBuffer<u8>>,
        copies: u32,
        removed: Option<&mut DeviceBuffer<u8>>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        assert!(removed.as_ref().is_none_or(|r| r.len() >= count));
        let view = self.view();
        let mut guards = Vec::new();
        let table = Self::describe(&view, stream, &mut guards);
        let k = keys.address(stream);
        let s = skip.map(|b| b.address(stream));
        let r = removed.map(|b| b.address_mut(stream));
        let params = GhCuckooRemoveParams {
            table,
            keys: k.address as *const _,
            skip: s
                .as_ref()
                .map_or(std::ptr::null(), |a| a.address as *const u8),
            removed_out: r
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u8),
            count: count as u64,
            copies,
            pad: 0,
        };
        // SAFETY: table arrays held as in `find`; `keys` (and `skip`) hold at least `count`
        // entries (callers size them), `removed` at least `count` flags (asserted); all
        // guards outlive the launch.
        unsafe {
            K::kernels()
                .remove
                .launch(stream, tile_shape(stream, count as u64), params)
        }?;
        Ok(())
    }

    /// Under the gate's write lock: empties every subtable and the side slot, then shrinks
    /// as the fill bounds say (waiting for `stream` only if it resizes).
    pub(super) fn clear_locked(&self, stream: &Stream) -> Result<()> {
        for sub in &self.subtables {
            let mut sub = sub.write();
            fill_words(stream, &mut sub.keys, u32::MAX)?;
            sub.dirty.fill_zero(stream)?;
        }
        let mut side = vec![0u32; SIDE_HEADER + Self::WORDS];
        self.write_side(stream, &mut side)?;
        self.write_counts(stream, &vec![0; self.options.subtables])?;
        {
            let mut m = self.mirror.lock();
            m.counts.fill(0);
            m.side_present = false;
            m.uncounted_removes = false;
            m.settled = Default::default();
        }
        self.apply_policy(stream)
    }
}

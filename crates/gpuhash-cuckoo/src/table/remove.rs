//! Removes: of some keys (the remove kernel), or of every pair (clear).

use gpuhash_core::table::{Key, Value};
use gpuhash_core::{DeviceBuffer, Stream};

use super::scratch::Scratch;
use super::{CuckooTable, SIDE_HEADER};
use crate::launch::counter;
use crate::layouts::{GH_CUCKOO_REMOVE_DUPLICATES, GhCuckooTable};
use crate::{Result, launch};

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
        self.queue_remove(stream, |table| launch::Remove {
            table,
            keys,
            count,
            skip,
            copies,
            removed,
            count_from: None,
            report: false,
        })
    }

    /// The remove kernel on a batch's eviction log, as many keys as the insert kernel
    /// logged (read on the device), removing every copy of each but the first; its last
    /// block reports the table's counts and side flag in the batch's counters
    /// ([`counter::REPORT`]), for [`CuckooTable::refresh_from_report`].
    pub(super) fn remove_logged(&self, stream: &Stream, scratch: &mut Scratch<K, V>) -> Result<()> {
        self.queue_remove(stream, |table| launch::Remove {
            table,
            keys: &scratch.log,
            count: scratch.log.len(),
            skip: None,
            copies: GH_CUCKOO_REMOVE_DUPLICATES,
            removed: None,
            count_from: Some((&mut scratch.counters, counter::LOGGED)),
            report: true,
        })
    }

    /// Queues the remove kernel on the table as it is, the rest of the launch from `remove`.
    fn queue_remove<'a>(
        &self,
        stream: &Stream,
        remove: impl FnOnce(GhCuckooTable) -> launch::Remove<'a, K>,
    ) -> Result<()> {
        let view = self.view();
        let mut guards = Vec::new();
        let table = self.describe(&view, stream, &mut guards);
        launch::remove(stream, remove(table))
    }

    /// Under the gate's write lock: empties every subtable and the side slot, then shrinks
    /// as the fill bounds say (waiting for `stream` only if it resizes).
    pub(super) fn clear_locked(&self, stream: &Stream) -> Result<()> {
        for sub in &self.subtables {
            let mut sub = sub.write();
            launch::fill(stream, &mut sub.keys, u32::MAX)?;
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

//! The table contract's verbs for [`CuckooTable`]: [`Table`] and [`Map`], whose host forms
//! (`insert`, `get`, `contains`, `remove`, `export`, `len`, `memory`, `clear`) come with
//! the traits.

use gpuhash_core::table::{DevicePairs, Key, Map, MemoryUsage, Table, Value, check_pairs};
use gpuhash_core::{Device, DeviceBuffer, Stream};

use super::{CuckooTable, check_lengths};
use crate::layouts::GH_CUCKOO_REMOVE_FIRST;
use crate::{CuckooError, Result};

impl<K: Key, V: Value> Table for CuckooTable<K, V> {
    type Key = K;
    type Error = CuckooError;

    fn device(&self) -> &Device {
        &self.device
    }

    /// Pairs held once the work queued on `stream` before the call has run; waits for
    /// `stream`. After removes, first reads the counts they left on the device and makes
    /// the downsizes they call for, as a writing batch on `stream`.
    fn len_on(&self, stream: &Stream) -> Result<usize> {
        let len = self.count_on(stream)?;
        stream.synchronize()?;
        Ok(len as usize)
    }

    /// The subtables and the words every kernel shares are in use; the scratch space kept
    /// from the largest insert batch so far is reserved beside them. Counts the pairs as
    /// [`Table::len_on`] does.
    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage> {
        let pairs = self.count_on(stream)?;
        let table = self.table_bytes();
        // One lock at a time, none held while another is taken.
        let scratch = self.scratch.lock().as_ref().map_or(0, |s| s.bytes());
        Ok(MemoryUsage {
            bytes_reserved: table + scratch,
            bytes_in_use: table,
            entry_bytes: pairs * (size_of::<K>() + size_of::<V>()) as u64,
        })
    }

    /// A writing batch on `stream`; returns without waiting unless the emptied table
    /// shrinks (as its fill bounds say, down to its capacity floor), which waits for the
    /// resize.
    fn clear_on(&self, stream: &Stream) -> Result<()> {
        self.writing(stream, || self.clear_locked(stream))
    }
}

impl<K: Key, V: Value> Map for CuckooTable<K, V> {
    type Value = V;

    /// Inserts the pairs `(keys[i], values[i])`, replacing the value of keys already held.
    /// Of equal keys within one batch exactly one whole value wins: the last copy's with
    /// [`DuplicateKeys::LastCopy`](crate::DuplicateKeys::LastCopy), an unspecified one with
    /// `AnyCopy` (the default; see [`CuckooOptions::duplicate_keys()`](crate::CuckooOptions::duplicate_keys)).
    /// Pairs that find no place are kept on the device, the table grows and they are
    /// retried: the call returns `Ok` with every pair in, or an error naming what is not.
    ///
    /// DyHash decides its resizes on the host, from counts it reads back, so this call
    /// waits for `stream` (after the work queued before it there, and after the batches of
    /// other streams it must follow), and returns with the batch done. It waits:
    /// - when removes were queued since the table last read its counts: once, to read them
    ///   (the pair counts, then the side slot's flag);
    /// - with `DuplicateKeys::LastCopy`: once, where the reduction to last copies reads how
    ///   many it keeps;
    /// - when the table holds pairs and the batch might not fit below beta were every key
    ///   new: once after the lookup of the batch's keys, to read how many it holds already
    ///   (which sizes the upsizes made before anything changes);
    /// - once at the end of the passes (the lock-free pass, the evicting pass and the
    ///   clean-up of evicted copies, which read their counts on the device), to read the
    ///   batch's counters with the new pair counts and the side slot's flag; once more for
    ///   each round that retries homeless pairs after an upsize, and once more when the log
    ///   of evicted keys overflowed;
    /// - in every resize, for its kernels and its counts: upsizes before the batch (to make
    ///   room below beta), resizes after it (to bring the fill factor within bounds).
    ///
    /// So a batch that needs no resize and places every pair waits once.
    ///
    /// [`Error::LengthMismatch`](gpuhash_core::Error::LengthMismatch) when the buffers
    /// differ in length, and nothing changes.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.writing(stream, || self.insert_now(stream, keys, values))
    }

    /// Queues the lookup on `stream` and returns without waiting; the table may change
    /// only after it has run (a later writer's work waits for it on the device).
    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        check_lengths("get_async: keys and found", keys.len(), found.len())?;
        check_lengths("get_async: keys and values", keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.reading(stream, || {
            self.find(stream, keys, Some(found), Some(values), None)
        })
    }

    /// Queues the membership tests on `stream` and returns without waiting.
    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        check_lengths("contains_async: keys and found", keys.len(), found.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.reading(stream, || self.find(stream, keys, Some(found), None, None))
    }

    /// Queues the removals on `stream` and returns without waiting: the remove kernel
    /// keeps the pair counts on the device, and the table reads them (and makes the
    /// downsizes they call for) when it next needs its count (see
    /// [`CuckooTable::fill_factor`]). Of equal keys in one batch, one answers 1.
    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        check_lengths("remove_async: keys and removed", keys.len(), removed.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.writing(stream, || {
            let launched = self.remove_launch(
                stream,
                keys,
                keys.len(),
                None,
                GH_CUCKOO_REMOVE_FIRST,
                Some(removed),
            );
            self.mirror.lock().uncounted_removes = true;
            launched
        })
    }

    /// Every pair into new device buffers; waits for `stream` to size them (and, after
    /// removes, to count them first, as [`Table::len_on`] does). A remove another thread
    /// queues between the count and the export has it count again (after 4 tries, the
    /// export runs as a writing batch), so the answer matches the table it ran on.
    fn export_on(&self, stream: &Stream) -> Result<DevicePairs<K, V>> {
        self.counted_export(stream, || self.export_pairs(stream))
    }

    /// Writes the caller's buffers straight; counts first after removes, as
    /// [`Map::export_on`] does.
    fn export_into_on(
        &self,
        stream: &Stream,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<usize> {
        self.counted_export(stream, || self.export_pairs_into(stream, keys, values))
    }
}

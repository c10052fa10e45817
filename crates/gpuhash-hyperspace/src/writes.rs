//! Writes: insert, modify (whole tuples, or values alone) and delete, each from host slices
//! and from device buffers on the caller's stream, both forms running the same phases on
//! device tuples (phase order in `index.rs`).
//!
//! The device forms (`insert_on`, `modify_on`, `modify_values_on`, `delete_on`) take
//! [`DeviceTuples`] or device keys and write one byte an element into the caller's buffer
//! (1 yes, 0 no), as the contract's device forms do. They check what the host forms check,
//! with the same errors and an unchanged index after one: buffer lengths on the host, the
//! keys (none reserved, none twice) on the device (read back only to name a fault), and,
//! for inserts and modifies, the attribute columns, which the index sketches for its cost
//! model, read back to the host, all before anything is written. Like the host forms, they
//! wait for their batch: an insert decides on the host which keys were new before the
//! subspaces take them, and grows allocators between passes; a modify waits out its grace
//! period.

use gpuhash_core::staging::{downloaded, upload};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::index::{HyperspaceIndex, InsertStatus};
use crate::launch::Lookup;
use crate::layouts::{GH_HS_INSERTED, GH_HS_PENDING, GH_HS_PRESENT};
use crate::observations::distinct_found;
use crate::space::Space;
use crate::tuples::{self, DeviceTuples, TupleBatch};

impl HyperspaceIndex {
    /// Inserts each tuple whose key the index does not hold; the others leave the index
    /// as it was. A batch with a key twice, a reserved key ([`crate::is_reserved_key`]) or
    /// the wrong shape is rejected whole, as is one the allocators cannot make room for
    /// (the error names why; the tuples of the batch inserted meanwhile are taken out).
    pub fn insert(&self, batch: TupleBatch<'_>) -> Result<Vec<InsertStatus>> {
        tuples::check_shape(self.attribute_count(), batch)?;
        if batch.is_empty() {
            return tuples::check_keys(batch.keys).map(|()| Vec::new());
        }
        let stream = self.device().lend_stream()?;
        let status = self.observed_write(
            batch.attributes,
            batch.len(),
            || {
                let tuples = DeviceTuples::from_batch(&stream, batch)?;
                tuples::check_keys_on(&stream, &tuples.keys, Some(batch.keys))?;
                self.insert_tuples(&stream, &tuples)
            },
            |status| inserted_count(status),
        )?;
        Ok(status
            .iter()
            .map(|&s| match u32::from(s) {
                GH_HS_INSERTED => InsertStatus::Inserted,
                _ => InsertStatus::Present,
            })
            .collect())
    }

    /// [`HyperspaceIndex::insert`] from device buffers, on `stream`: `inserted[i]` becomes
    /// 1 where tuple i went in, 0 where the index held its key. Checked and rejected as
    /// the host form, with the same errors and nothing written: the lengths on the host,
    /// then the keys on the device, then the attribute columns (which the index sketches)
    /// read back to the host; waits for the batch.
    pub fn insert_on(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
        inserted: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let attributes = self.checked_columns(stream, tuples, inserted.len())?;
        if tuples.is_empty() {
            return Ok(());
        }
        let status = self.observed_write(
            &attributes,
            tuples.len(),
            || self.insert_tuples(stream, tuples),
            |status| inserted_count(status),
        )?;
        let flags: Vec<u8> = status
            .iter()
            .map(|&s| u8::from(u32::from(s) == GH_HS_INSERTED))
            .collect();
        Ok(inserted.copy_from_host(stream, &flags)?)
    }

    /// Inserts checked tuples: the key index's status of each (GH_HS_INSERTED or
    /// GH_HS_PRESENT). On an error the copies the batch put in are taken out.
    fn insert_tuples(&self, stream: &Stream, tuples: &DeviceTuples) -> Result<Vec<u8>> {
        let _writes = self.writes.read();
        let spaces = self.spaces();
        let spaces = spaces.all();
        // Everything the phases need is allocated first: past the key index's insert, an
        // error takes the batch's copies out again.
        let mut buffers = PhaseBuffers::new(stream, spaces.len(), tuples.len())?;
        match insert_phases(&spaces, stream, tuples, &mut buffers) {
            Ok(key_status) => Ok(key_status),
            Err(error) => {
                take_out(&spaces, stream, &tuples.keys, &buffers.slots)?;
                Err(error)
            }
        }
    }

    /// Removes the tuple of each key; true where there was one (for each copy of a key
    /// the batch repeats). Each subspace first, then the key index, so that a key is gone
    /// from every space once it is gone from the key index.
    pub fn delete(&self, keys: &[u32]) -> Result<Vec<bool>> {
        let stream = self.device().lend_stream()?;
        let keys_on = upload(&stream, keys)?;
        let found = self.delete_keys(&stream, &keys_on, keys)?;
        Ok(found.iter().map(|&f| f != 0).collect())
    }

    /// [`HyperspaceIndex::delete`] from device buffers, on `stream`: `deleted[i]` becomes
    /// 1 where the index held key i (for each copy of a key the batch repeats), else 0.
    /// The keys are read back to the host (the index counts the distinct tuples taken
    /// out); waits for the batch.
    pub fn delete_on(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        deleted: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        check_flags("keys and deleted", keys.len(), deleted.len())?;
        let host_keys = downloaded(stream, keys)?;
        let found = self.delete_keys(stream, keys, &host_keys)?;
        Ok(deleted.copy_from_host(stream, &found)?)
    }

    /// Deletes `keys_on` (whose host copy is `keys`): found flags.
    fn delete_keys(
        &self,
        stream: &Stream,
        keys_on: &DeviceBuffer<u32>,
        keys: &[u32],
    ) -> Result<Vec<u8>> {
        let (found, tuples) = self.lookup_on(stream, keys_on)?;
        let _writes = self.writes.read();
        // Subspaces first, the key index last.
        for space in self.spaces().all().iter().rev() {
            space.delete(stream, &tuples)?;
        }
        stream.synchronize()?;
        drop(_writes);
        let found_keys: Vec<bool> = found.iter().map(|&f| f != 0).collect();
        let removed = distinct_found(keys, &found_keys);
        self.observations.lock().removed(removed);
        self.removed_tuples(removed)?;
        Ok(found)
    }

    /// Replaces the attributes and value of each tuple whose key the index holds with
    /// the batch's; true where it did, false for a key the index does not hold.
    ///
    /// In the GHSH paper's order: the new copies go into every space, then, once every
    /// search that began before they were all in has ended, the old copies go out. A
    /// search running meanwhile finds the tuple once or twice (old and new), never not at
    /// all. Two batches modifying one key at once from two host threads are not ordered:
    /// keep such writes on one thread. Rejected whole like [`HyperspaceIndex::insert`].
    pub fn modify(&self, batch: TupleBatch<'_>) -> Result<Vec<bool>> {
        tuples::check_shape(self.attribute_count(), batch)?;
        if batch.is_empty() {
            return tuples::check_keys(batch.keys).map(|()| Vec::new());
        }
        let stream = self.device().lend_stream()?;
        let found = self.observed_write(
            batch.attributes,
            batch.len(),
            || {
                let new = DeviceTuples::from_batch(&stream, batch)?;
                tuples::check_keys_on(&stream, &new.keys, Some(batch.keys))?;
                self.modify_tuples(&stream, &new)
            },
            |_| 0,
        )?;
        Ok(found.iter().map(|&f| f != 0).collect())
    }

    /// [`HyperspaceIndex::modify`] from device buffers, on `stream`: `modified[i]` becomes
    /// 1 where the index held key i and took tuple i, else 0. Checked and rejected as the
    /// host form, as [`HyperspaceIndex::insert_on`] checks; waits for the batch and its
    /// grace period.
    pub fn modify_on(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
        modified: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let attributes = self.checked_columns(stream, tuples, modified.len())?;
        if tuples.is_empty() {
            return Ok(());
        }
        let found = self.observed_write(
            &attributes,
            tuples.len(),
            || self.modify_tuples(stream, tuples),
            |_| 0,
        )?;
        Ok(modified.copy_from_host(stream, &found)?)
    }

    /// Modifies to checked tuples `new`: found flags of their keys. Keys the index does
    /// not hold (a reserved key among them) change nothing.
    fn modify_tuples(&self, stream: &Stream, new: &DeviceTuples) -> Result<Vec<u8>> {
        let _writes = self.writes.read();
        let spaces = self.spaces();
        let spaces = spaces.all();
        let (found, old) = self.lookup_on(stream, &new.keys)?;
        let old_slots = slots_of(&spaces, stream, &old)?;
        let pending: Vec<u8> = found
            .iter()
            .map(|&f| {
                if f != 0 {
                    GH_HS_PENDING as u8
                } else {
                    GH_HS_PRESENT as u8
                }
            })
            .collect();
        let mut buffers = PhaseBuffers::new(stream, spaces.len(), new.len())?;
        let inserted = (|| {
            for (s, space) in spaces.iter().enumerate() {
                buffers.status[s].copy_from_host(stream, &pending)?;
                let (status, slots) = (&mut buffers.status[s], &mut buffers.slots[s]);
                space.insert(stream, new, status, Some(slots), false)?;
            }
            Ok(())
        })();
        if let Err(error) = inserted {
            take_out(&spaces, stream, &new.keys, &buffers.slots)?;
            return Err(error);
        }
        stream.synchronize()?;
        self.grace.wait_for_earlier_searches()?;
        take_out(&spaces, stream, &new.keys, &old_slots)?;
        drop(_writes);
        let modified = found.iter().filter(|&&f| f != 0).count();
        self.removed_tuples(modified as u64)?;
        Ok(found)
    }

    /// Replaces the value of each key the index holds, keeping its attributes; true where
    /// it did. The same road as [`HyperspaceIndex::modify`] with the attributes the key
    /// index holds (a tuple whose attributes change on another thread meanwhile may get
    /// the older ones back: writes of one key from two threads are not ordered). A key
    /// twice or a reserved key rejects the batch.
    pub fn modify_values(&self, keys: &[u32], values: &[u32]) -> Result<Vec<bool>> {
        gpuhash_core::table::check_pairs(keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let stream = self.device().lend_stream()?;
        let keys_on = upload(&stream, keys)?;
        tuples::check_keys_on(&stream, &keys_on, Some(keys))?;
        let values_on = upload(&stream, values)?;
        let found = self.modify_values_of(&stream, &keys_on, values_on)?;
        Ok(found.iter().map(|&f| f != 0).collect())
    }

    /// [`HyperspaceIndex::modify_values`] from device buffers, on `stream`: `modified[i]`
    /// becomes 1 where the index held key i and took value i, else 0. The keys are checked
    /// on the device as the host form's are; waits for the batch and its grace period.
    pub fn modify_values_on(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        values: &DeviceBuffer<u32>,
        modified: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        gpuhash_core::table::check_pairs(keys.len(), values.len())?;
        check_flags("keys and modified", keys.len(), modified.len())?;
        tuples::check_keys_on(stream, keys, None)?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut own_values = DeviceBuffer::unfilled(stream, values.len())?;
        own_values.copy_from(stream, values)?;
        let found = self.modify_values_of(stream, keys, own_values)?;
        Ok(modified.copy_from_host(stream, &found)?)
    }

    /// Modifies checked keys to `values`, keeping the attributes the key index holds:
    /// found flags. A key the lookup misses goes on as the reserved empty word, which the
    /// modify's own lookup never finds, so it stays missing whatever happens meanwhile.
    fn modify_values_of(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        values: DeviceBuffer<u32>,
    ) -> Result<Vec<u8>> {
        let (_, held) = self.lookup_on(stream, keys)?;
        let new = DeviceTuples { values, ..held };
        self.modify_tuples(stream, &new)
    }

    /// Looks device keys up in the key index: found flags (on the host) and tuples (on the
    /// device, their key the empty word where not found).
    fn lookup_on(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
    ) -> Result<(Vec<u8>, DeviceTuples)> {
        let mut found = DeviceBuffer::<u8>::zeroed(stream, keys.len())?;
        let mut tuples = DeviceTuples::unfilled(stream, self.attribute_count(), keys.len())?;
        self.get_async(stream, keys, &mut found, &mut tuples)?;
        Ok((found.to_host(stream)?, tuples))
    }

    /// Checks device tuples and a flag buffer as a host batch is checked: lengths, then
    /// the keys (on the device); returns the attribute columns, read back for the
    /// sketches.
    fn checked_columns(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
        flags: usize,
    ) -> Result<Vec<u32>> {
        check_flags("tuples and answers", tuples.len(), flags)?;
        tuples::check_lengths(
            self.attribute_count(),
            tuples.len(),
            tuples.values.len(),
            tuples.attributes.len(),
        )?;
        tuples::check_keys_on(stream, &tuples.keys, None)?;
        Ok(downloaded(stream, &tuples.attributes)?)
    }
}

/// Tuples an insert's statuses put in.
fn inserted_count(status: &[u8]) -> u64 {
    status
        .iter()
        .filter(|&&s| u32::from(s) == GH_HS_INSERTED)
        .count() as u64
}

/// Checks that an answer buffer holds one flag an element.
fn check_flags(what: &'static str, elements: usize, flags: usize) -> Result<()> {
    if elements != flags {
        return Err(gpuhash_core::Error::LengthMismatch {
            what,
            left: elements,
            right: flags,
        }
        .into());
    }
    Ok(())
}

/// The key slot of each tuple's copy in every space (0 where a key was not found).
fn slots_of(
    spaces: &[&Space],
    stream: &Stream,
    tuples: &DeviceTuples,
) -> Result<Vec<DeviceBuffer<u64>>> {
    let n = tuples.len();
    let mut all = Vec::with_capacity(spaces.len());
    for space in spaces {
        let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
        let mut slots = DeviceBuffer::<u64>::zeroed(stream, n)?;
        let lookup = Lookup {
            keys: &tuples.keys,
            attributes: Some(&tuples.attributes),
        };
        space.get(stream, lookup, &mut found, None, Some(&mut slots))?;
        all.push(slots);
    }
    Ok(all)
}

/// Takes out the copies a batch put in: `slots[s]` holds the key slots it took in space s
/// (0 where it took none), for the first `slots.len()` spaces.
fn take_out(
    spaces: &[&Space],
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    slots: &[DeviceBuffer<u64>],
) -> Result<()> {
    for (space, slots) in spaces.iter().zip(slots) {
        space.delete_slots(stream, slots, keys)?;
    }
    stream.synchronize()?;
    Ok(())
}

/// A status and a slot id for every element of a batch, in every space.
struct PhaseBuffers {
    status: Vec<DeviceBuffer<u8>>,
    slots: Vec<DeviceBuffer<u64>>,
}

impl PhaseBuffers {
    fn new(stream: &Stream, spaces: usize, n: usize) -> Result<Self> {
        let mut buffers = Self {
            status: Vec::with_capacity(spaces),
            slots: Vec::with_capacity(spaces),
        };
        for _ in 0..spaces {
            buffers.status.push(DeviceBuffer::zeroed(stream, n)?);
            buffers.slots.push(DeviceBuffer::zeroed(stream, n)?);
        }
        Ok(buffers)
    }
}

/// An insert's phases: the key index (which answers which keys are new), then each
/// subspace with the new ones. Returns the key index's status of each tuple.
fn insert_phases(
    spaces: &[&Space],
    stream: &Stream,
    tuples: &DeviceTuples,
    buffers: &mut PhaseBuffers,
) -> Result<Vec<u8>> {
    let (status, slots) = (&mut buffers.status[0], &mut buffers.slots[0]);
    spaces[0].insert(stream, tuples, status, Some(slots), true)?;
    let key_status = buffers.status[0].to_host(stream)?;
    let pending: Vec<u8> = key_status
        .iter()
        .map(|&s| {
            if u32::from(s) == GH_HS_INSERTED {
                GH_HS_PENDING as u8
            } else {
                GH_HS_PRESENT as u8
            }
        })
        .collect();
    for (s, space) in spaces.iter().enumerate().skip(1) {
        buffers.status[s].copy_from_host(stream, &pending)?;
        let (status, slots) = (&mut buffers.status[s], &mut buffers.slots[s]);
        space.insert(stream, tuples, status, Some(slots), false)?;
    }
    stream.synchronize()?;
    Ok(key_status)
}

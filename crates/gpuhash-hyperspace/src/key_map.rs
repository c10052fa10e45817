//! [`KeyIndexMap`]: a hyperspace index through the table contract (the struct's docs
//! tell how).

use std::collections::{BTreeMap, HashMap, HashSet};

use bytemuck::Pod;
use gpuhash_core::staging::{downloaded, upload};
use gpuhash_core::table::{DevicePairs, Map, MemoryUsage, Table, check_pairs};
use gpuhash_core::{Device, DeviceBuffer, Stream};
use parking_lot::Mutex;

use crate::index::{HyperspaceIndex, InsertStatus};
use crate::tuples::{Tuple, Tuples, is_reserved_key};
use crate::{HyperspaceError, HyperspaceOptions, Result};

/// A hyperspace index seen through the table contract as a
/// `Map<u32, [u32; W]>`, the key mapped to its tuple's other fields (`W - 1` attributes,
/// then the value), so that code written against [`gpuhash_core::table::Map`], and the
/// contract's conformance suite, run on the index's key index.
///
/// The contract asks two things the index does not give, and the map adds them:
/// - **Every `u32` is a key.** The index reserves three key words
///   ([`crate::is_reserved_key`]); the map keeps the tuples of those keys in a side store
///   on the host (three entries at most), answering for them beside the index.
/// - **A key repeated in a batch keeps one of its values, whole.** The index rejects such
///   batches; the map keeps the last copy of each key before the batch goes in, and a
///   removal answers yes for the first copy of a key it held, no for the others.
///
/// An insert is an upsert: the tuples whose keys are new go in by
/// [`HyperspaceIndex::insert`], the others are replaced by [`HyperspaceIndex::modify`]
/// (the GHSH paper's insert-then-delete, so a search meanwhile sees them once or twice).
/// A lookup is the key index's get; a removal its delete; `len`, `clear`, memory and
/// export are the index's, with the side store's entries added.
///
/// Waits: the device forms read the keys (and an insert's values, a lookup's value
/// buffer, whose entries for keys not found must stay as they were) back to the host and
/// run the index's host forms, which wait for their batches; so every device form of this
/// map waits for its batch. An insert of new and held keys at once runs two batches: should
/// the second (the modify) fail, which leaves the held tuples as they were, the new keys
/// are deleted again before the error returns (should that delete fail too, for want of
/// device memory, they stay in).
///
/// `W` from 2 to 9: an index of `W - 1` attributes.
#[derive(Debug)]
pub struct KeyIndexMap<const W: usize> {
    index: HyperspaceIndex,
    /// The tuples of reserved keys, which the index cannot hold.
    reserved: Mutex<BTreeMap<u32, [u32; W]>>,
}

impl<const W: usize> KeyIndexMap<W>
where
    [u32; W]: Pod,
{
    /// An empty map over an index of `W - 1` attributes sized for `capacity` tuples.
    pub fn new(device: &Device, capacity: usize, options: HyperspaceOptions) -> Result<Self> {
        let p = W.checked_sub(1).ok_or_else(|| {
            HyperspaceError::Options("a map of tuples needs at least a value word".into())
        })?;
        Ok(Self {
            index: HyperspaceIndex::new(device, p, capacity as u64, options)?,
            reserved: Mutex::new(BTreeMap::new()),
        })
    }

    /// [`KeyIndexMap::new`] with the default options.
    pub fn with_capacity(device: &Device, capacity: usize) -> Result<Self> {
        Self::new(device, capacity, HyperspaceOptions::default())
    }

    /// The index underneath, for searches by attribute (it does not hold the tuples of
    /// reserved keys).
    pub fn index(&self) -> &HyperspaceIndex {
        &self.index
    }

    /// Puts each pair in, the last copy of a repeated key winning.
    fn upsert(&self, keys: &[u32], values: &[[u32; W]]) -> Result<()> {
        let (reserved, plain): (Vec<usize>, Vec<usize>) = last_copies(keys)
            .into_iter()
            .partition(|&i| is_reserved_key(keys[i]));
        let tuples = tuples_of(plain.iter().map(|&i| (keys[i], &values[i])));
        let status = self.index.insert(tuples.as_batch())?;
        let held = tuples_of(
            plain
                .iter()
                .zip(&status)
                .filter(|&(_, &s)| s == InsertStatus::Present)
                .map(|(&i, _)| (keys[i], &values[i])),
        );
        if let Err(error) = self.index.modify(held.as_batch()) {
            // A failed modify leaves the held tuples as they were: take the new ones back
            // out, so the map holds what it held before the batch.
            let added: Vec<u32> = plain
                .iter()
                .zip(&status)
                .filter(|&(_, &s)| s == InsertStatus::Inserted)
                .map(|(&i, _)| keys[i])
                .collect();
            let _undone = self.index.delete(&added);
            return Err(error);
        }
        let mut side = self.reserved.lock();
        for i in reserved {
            side.insert(keys[i], values[i]);
        }
        Ok(())
    }

    /// The value of each key, from the index or the side store.
    fn lookup(&self, keys: &[u32]) -> Result<Vec<Option<[u32; W]>>> {
        let held = self.index.get(keys)?;
        let side = self.reserved.lock();
        Ok(keys
            .iter()
            .zip(held)
            .map(|(key, tuple)| {
                if is_reserved_key(*key) {
                    side.get(key).copied()
                } else {
                    tuple.as_ref().map(words_of)
                }
            })
            .collect())
    }

    /// Removes each key; one for the first copy of a key held, zero otherwise.
    fn remove_keys(&self, keys: &[u32]) -> Result<Vec<u8>> {
        let first = first_copies(keys);
        let plain: Vec<u32> = keys
            .iter()
            .zip(&first)
            .filter(|&(&k, &f)| f && !is_reserved_key(k))
            .map(|(&k, _)| k)
            .collect();
        let deleted: HashMap<u32, bool> = plain
            .iter()
            .copied()
            .zip(self.index.delete(&plain)?)
            .collect();
        let mut side = self.reserved.lock();
        Ok(keys
            .iter()
            .zip(first)
            .map(|(key, first)| {
                let removed = first
                    && if is_reserved_key(*key) {
                        side.remove(key).is_some()
                    } else {
                        deleted[key]
                    };
                u8::from(removed)
            })
            .collect())
    }
}

/// The positions of the last copy of each key, in batch order.
fn last_copies(keys: &[u32]) -> Vec<usize> {
    let mut last: HashMap<u32, usize> = HashMap::with_capacity(keys.len());
    for (i, &key) in keys.iter().enumerate() {
        last.insert(key, i);
    }
    let mut chosen: Vec<usize> = last.into_values().collect();
    chosen.sort_unstable();
    chosen
}

/// Whether each key is the first copy of its key in the batch.
fn first_copies(keys: &[u32]) -> Vec<bool> {
    let mut seen = HashSet::with_capacity(keys.len());
    keys.iter().map(|&k| seen.insert(k)).collect()
}

/// Tuples of pairs, as structure of arrays.
fn tuples_of<'a, const W: usize>(pairs: impl Iterator<Item = (u32, &'a [u32; W])>) -> Tuples {
    let pairs: Vec<_> = pairs.collect();
    let n = pairs.len();
    let p = W - 1;
    let mut tuples = Tuples {
        attribute_count: p,
        keys: Vec::with_capacity(n),
        attributes: vec![0; p * n],
        values: Vec::with_capacity(n),
    };
    for (i, (key, words)) in pairs.into_iter().enumerate() {
        tuples.keys.push(key);
        for (a, &word) in words[..p].iter().enumerate() {
            tuples.attributes[a * n + i] = word;
        }
        tuples.values.push(words[p]);
    }
    tuples
}

/// A tuple's words under its key: the attributes, then the value.
fn words_of<const W: usize>(tuple: &Tuple) -> [u32; W]
where
    [u32; W]: Pod,
{
    let mut words = [0u32; W];
    words[..W - 1].copy_from_slice(&tuple.attributes);
    words[W - 1] = tuple.value;
    words
}

/// Checks that an answer buffer holds one entry a key.
fn check_answers(what: &'static str, keys: usize, answers: usize) -> Result<()> {
    if keys != answers {
        return Err(gpuhash_core::Error::LengthMismatch {
            what,
            left: keys,
            right: answers,
        }
        .into());
    }
    Ok(())
}

impl<const W: usize> Table for KeyIndexMap<W>
where
    [u32; W]: Pod,
{
    type Key = u32;
    type Error = HyperspaceError;

    fn device(&self) -> &Device {
        self.index.device()
    }

    fn len_on(&self, stream: &Stream) -> Result<usize> {
        stream.synchronize()?;
        Ok(self.index.len()? + self.reserved.lock().len())
    }

    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage> {
        stream.synchronize()?;
        let mut usage = self.index.memory()?;
        usage.entry_bytes += self.reserved.lock().len() as u64 * (W as u64 + 1) * 4;
        Ok(usage)
    }

    fn clear_on(&self, stream: &Stream) -> Result<()> {
        stream.synchronize()?;
        self.index.clear()?;
        self.reserved.lock().clear();
        Ok(())
    }
}

impl<const W: usize> Map for KeyIndexMap<W>
where
    [u32; W]: Pod,
{
    type Value = [u32; W];

    /// Upserts the pairs (the last copy of a key repeated in the batch wins); waits.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        values: &DeviceBuffer<[u32; W]>,
    ) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        let keys = downloaded(stream, keys)?;
        let values = downloaded(stream, values)?;
        self.upsert(&keys, &values)
    }

    /// Looks the keys up; waits.
    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<[u32; W]>,
    ) -> Result<()> {
        check_answers("keys and found", keys.len(), found.len())?;
        check_answers("keys and values", keys.len(), values.len())?;
        let held = self.lookup(&downloaded(stream, keys)?)?;
        let mut answers = downloaded(stream, values)?;
        for (answer, held) in answers.iter_mut().zip(&held) {
            if let Some(words) = held {
                *answer = *words;
            }
        }
        let flags: Vec<u8> = held.iter().map(|h| u8::from(h.is_some())).collect();
        found.copy_from_host(stream, &flags)?;
        Ok(values.copy_from_host(stream, &answers)?)
    }

    /// Tests the keys; waits.
    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        check_answers("keys and found", keys.len(), found.len())?;
        let held = self.lookup(&downloaded(stream, keys)?)?;
        let flags: Vec<u8> = held.iter().map(|h| u8::from(h.is_some())).collect();
        Ok(found.copy_from_host(stream, &flags)?)
    }

    /// Removes the keys (1 for the first copy of a key held); waits.
    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        check_answers("keys and removed", keys.len(), removed.len())?;
        let flags = self.remove_keys(&downloaded(stream, keys)?)?;
        Ok(removed.copy_from_host(stream, &flags)?)
    }

    fn export_on(&self, stream: &Stream) -> Result<DevicePairs<u32, [u32; W]>> {
        let tuples = self.index.export_on(stream)?.to_host(stream, W - 1)?;
        let side = self.reserved.lock();
        let keys: Vec<u32> = tuples.keys.iter().chain(side.keys()).copied().collect();
        let values: Vec<[u32; W]> = tuples
            .iter()
            .map(|t| words_of(&t))
            .chain(side.values().copied())
            .collect();
        Ok(DevicePairs {
            keys: upload(stream, &keys)?,
            values: upload(stream, &values)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_become_tuples_of_column_major_attributes() {
        let tuples = tuples_of([(5, &[1, 2, 3]), (6, &[4, 5, 6])].into_iter());
        assert_eq!(tuples.keys, vec![5, 6]);
        assert_eq!(tuples.attributes, vec![1, 4, 2, 5]);
        assert_eq!(tuples.values, vec![3, 6]);
        assert_eq!(words_of::<3>(&tuples.tuple(1)), [4, 5, 6]);
        assert!(tuples_of::<3>(std::iter::empty()).is_empty());
    }

    #[test]
    fn a_repeated_key_keeps_its_last_copy_and_answers_a_removal_once() {
        let keys = [7, 3, 7, u32::MAX, 3, 7, u32::MAX];
        assert_eq!(last_copies(&keys), vec![4, 5, 6]);
        assert_eq!(
            first_copies(&keys),
            vec![true, true, false, true, false, false, false]
        );
        assert!(last_copies(&[]).is_empty());
    }

    #[test]
    fn answer_buffers_hold_one_entry_a_key() {
        assert!(check_answers("k", 3, 3).is_ok());
        assert!(matches!(
            check_answers("k", 3, 2),
            Err(HyperspaceError::Device(
                gpuhash_core::Error::LengthMismatch { .. }
            ))
        ));
    }
}

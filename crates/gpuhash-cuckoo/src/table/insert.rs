//! Inserts: the batch's two passes (lock-free placing, then voter-coordinated inserts with
//! evictions), the sort by partition of large batches, the clean-up of copies that
//! evictions left, retrying homeless pairs after upsizes, and undoing a batch that ran out
//! of memory half way.

use std::collections::HashSet;

use gpuhash_core::hash::fmix64;
use gpuhash_core::last_copy::{self, DuplicateKeys};
use gpuhash_core::table::{ErrorKind, Key, TableError as _, Value};
use gpuhash_core::{DeviceBuffer, Stream};

use super::CuckooTable;
use super::SIDE_HEADER;
use super::scratch::{Input, Scratch};
use crate::launch::{self, counter, lane_shape};
use crate::layouts::{
    GH_CUCKOO_DUPLICATE, GH_CUCKOO_NO_EXCLUDE, GH_CUCKOO_PARTITIONS, GH_CUCKOO_PLACE_PER_THREAD,
    GH_CUCKOO_REMOVE_ALL, GH_CUCKOO_REMOVE_DUPLICATES,
};
use crate::policy::{self, Resize};
use crate::{BucketLayout, CuckooError, Result};

/// Upsize-and-retry rounds an insert makes before it reports the pairs it could not place.
const MAX_ROUNDS: usize = 24;
/// The find kernel's mark of a key it found, which the update kernel selects.
const FOUND: u32 = 1;

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// Under the gate's write lock: inserts the batch (see the crate docs), with the counts
    /// read first if removes changed them.
    pub(super) fn insert_now(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        self.catch_up_counts(stream)?;
        let result = self.insert_locked(stream, keys, values);
        self.after_failed_insert(stream, result)
    }

    /// An insert that failed (out of memory, say) may have grown the table before it
    /// changed any pair; with its scratch space freed, shrink back within bounds (as far
    /// as memory allows) and pass the error on.
    pub(super) fn after_failed_insert(&self, stream: &Stream, result: Result<()>) -> Result<()> {
        if result.is_err() {
            let _ = self
                .refresh(stream)
                .and_then(|()| self.apply_policy(stream));
        }
        result
    }

    /// Keeps the copy of each key that the table's [`DuplicateKeys`] rule makes win, then
    /// inserts the batch.
    fn insert_locked(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        match self.options.duplicate_keys {
            DuplicateKeys::AnyCopy => self.insert_batch(stream, keys, values),
            DuplicateKeys::LastCopy => {
                let (keys, values) = last_copy::last_copies(stream, keys, values)?;
                self.insert_batch(stream, &keys, &values)
            }
        }
    }

    pub(super) fn insert_batch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        let n = keys.len();
        let (len_before, side_before) = {
            let m = self.mirror.lock();
            (m.len(), m.side_present)
        };
        // Everything the batch needs is allocated before anything changes.
        let mut scratch = match self.scratch.lock().take() {
            Some(cached) if cached.log.len() >= n => cached,
            _ => Scratch::<K, V>::new(stream, n, n)?,
        };
        let mut sorted = None;
        if policy::sorts_by_partition(&self.insert_shape(stream, n)) {
            // A copy of another size is freed before the new one is allocated.
            let cached = scratch.sorted.take().filter(|(k, _)| k.len() == n);
            let (mut sorted_keys, mut sorted_values) = match cached {
                Some(copy) => copy,
                None => (
                    DeviceBuffer::unfilled(stream, n)?,
                    DeviceBuffer::unfilled(stream, n)?,
                ),
            };
            self.sort_batch(stream, keys, values, &mut sorted_keys, &mut sorted_values)?;
            sorted = Some((sorted_keys, sorted_values));
        }
        let (keys, values) = sorted.as_ref().map_or((keys, values), |(k, v)| (k, v));
        let mut found = None;
        let mut old_values = None;
        if len_before > 0 {
            // Pass 1: which keys are held already, and their values (for undoing). Every
            // flag is written; a value only where its key is found, and read only there.
            scratch.reset(stream)?;
            let mut f = DeviceBuffer::<u8>::unfilled(stream, n)?;
            let mut old = DeviceBuffer::<V>::unfilled(stream, n)?;
            self.find(
                stream,
                keys,
                Some(&mut f),
                Some(&mut old),
                Some(&mut scratch.counters),
            )?;
            found = Some(f);
            old_values = Some(old);
        }
        // How many keys the table holds already matters only if the batch might not fit
        // below beta without them: only then does the host wait to read it.
        let all_new = len_before + n as u64;
        let existing = match &found {
            Some(_) if self.must_grow_for(all_new) => {
                Some(scratch.counters(stream)?[counter::HITS])
            }
            _ => None,
        };
        if side_before {
            // Saved on the stream, between batches: its lock word is clear. (An empty side
            // slot is restored from the host.)
            scratch
                .side_before
                .copy_from(stream, &self.shared.read().side)?;
        }
        // Grow before changing anything, so that running out of memory here leaves the
        // table as it was.
        self.grow_for(stream, all_new - existing.unwrap_or(0))?;
        scratch.reset(stream)?;

        if let Some(f) = &found
            && existing != Some(0)
        {
            self.update(stream, keys, values, f, FOUND)?;
        }
        let input = Input {
            keys,
            values,
            count: n,
            count_from: None,
            skip: found.as_ref(),
        };
        let outcome = self.place_and_settle(stream, &input, &mut scratch);
        match outcome {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => {
                self.undo_insert(
                    stream,
                    keys,
                    found.as_ref(),
                    old_values.as_ref(),
                    side_before,
                    &mut scratch,
                )?;
                return Err(e);
            }
            Err(e) => {
                self.refresh(stream)?;
                return Err(e);
            }
        }
        // The counts are fresh: settle read them after the batch's last change to them.
        if sorted.is_some() {
            scratch.sorted = sorted;
        }
        *self.scratch.lock() = Some(scratch);
        self.apply_policy(stream)
    }

    /// What [`policy::sorts_by_partition`] and [`policy::home_quarter_pairs`] decide a
    /// batch of `pairs` pairs by.
    fn insert_shape(&self, stream: &Stream, pairs: usize) -> policy::InsertShape {
        policy::InsertShape {
            split: self.layout == BucketLayout::Split,
            pairs: pairs as u64,
            in_flight: self.pairs_in_flight(stream),
            len: self.mirror.lock().len(),
            capacity: self.capacity() as u64,
            table_bytes: self.table_bytes(),
            l2_bytes: stream.device().properties().l2_cache_bytes as u64,
        }
    }

    /// Pairs the place kernel holds in flight at most: GH_CUCKOO_PLACE_PER_THREAD a thread of
    /// as many threads as the device keeps resident.
    fn pairs_in_flight(&self, stream: &Stream) -> u64 {
        let shape = lane_shape(stream, u64::MAX);
        u64::from(shape.blocks)
            * u64::from(shape.threads_per_block)
            * u64::from(GH_CUCKOO_PLACE_PER_THREAD)
    }

    /// Writes the batch into `sorted_keys` and `sorted_values` (of its length) sorted by the
    /// partition of each pair's first bucket (see `GhCuckooPartitionParams`): the kernels
    /// that then take the pairs in order work on a few partitions at a time, whose key and
    /// value lines stay in L2, where pairs in the order given would touch lines all over the
    /// table, each a DRAM access.
    fn sort_batch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        sorted_keys: &mut DeviceBuffer<K>,
        sorted_values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        let n = keys.len();
        assert!(sorted_keys.len() == n && sorted_values.len() == n);
        let mut offsets = DeviceBuffer::<u64>::zeroed(stream, GH_CUCKOO_PARTITIONS as usize)?;
        {
            let view = self.view();
            let mut guards = Vec::new();
            let table = self.describe(&view, stream, &mut guards);
            launch::partition(
                stream,
                launch::Partition {
                    table,
                    home: self.home(&view, false),
                    keys,
                    values,
                    count: n,
                    sorted_keys,
                    sorted_values,
                    offsets: &mut offsets,
                },
            )?;
        }
        Ok(())
    }

    /// Passes 2 and 3 of a user batch: most pairs find an empty slot without a lock (the
    /// place kernel); the insert kernel, with its locks and evictions, takes the rest from
    /// failed list 1; `settle` removes the copies evictions left and retries the homeless;
    /// last, the later copies of a key write their values.
    fn place_and_settle(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        self.place_then_insert(stream, input, scratch)?;
        let duplicates = self.settle(stream, scratch, Some(input), true, true)?;
        if duplicates > 0 {
            self.update(
                stream,
                input.keys,
                input.values,
                &scratch.status,
                GH_CUCKOO_DUPLICATE,
            )?;
        }
        Ok(())
    }

    /// The place kernel, then the insert kernel for the pairs it left pending (from failed
    /// list 1, homeless ones into failed list 0), which reads their number on the device:
    /// the host does not wait between them.
    fn place_then_insert(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        self.place_launch(stream, input, scratch)?;
        self.insert_from_list(stream, scratch, 1, input.count, Some(counter::PENDING), 0)
    }

    /// The insert kernel on the first `count` pairs of failed list `list` (or as many as
    /// counter `count_from` says, read on the device), homeless ones into list `out`. The
    /// list is lent to the launch and back in the scratch space whether it fails or not.
    fn insert_from_list(
        &self,
        stream: &Stream,
        scratch: &mut Scratch<K, V>,
        list: usize,
        count: usize,
        count_from: Option<usize>,
        out: usize,
    ) -> Result<()> {
        let keys = std::mem::replace(
            &mut scratch.failed_keys[list],
            DeviceBuffer::zeroed(stream, 0)?,
        );
        let values = std::mem::replace(
            &mut scratch.failed_values[list],
            DeviceBuffer::zeroed(stream, 0)?,
        );
        let input = Input {
            keys: &keys,
            values: &values,
            count,
            count_from,
            skip: None,
        };
        let launched = self.insert_launch(stream, &input, scratch, out, None);
        scratch.failed_keys[list] = keys;
        scratch.failed_values[list] = values;
        launched
    }

    /// After an insert launch into failed list 0: removes duplicates that evictions may
    /// have left (when `dedup`), and while pairs are homeless, grows the table (when
    /// `grow`; an undo, short of memory, retries with fresh random swaps only) and retries
    /// them. On return every pair is placed, or the error says which are not; the failed
    /// list then holds them. Returns the duplicates the place kernel counted (read with the
    /// first counts, before a retry clears them).
    pub(super) fn settle(
        &self,
        stream: &Stream,
        scratch: &mut Scratch<K, V>,
        original: Option<&Input<'_, K, V>>,
        dedup: bool,
        grow: bool,
    ) -> Result<u64> {
        const DUPLICATES: u32 = GH_CUCKOO_REMOVE_DUPLICATES;
        let mut current = 0usize;
        let mut retried = 0usize;
        let mut duplicates = None;
        for round in 0..MAX_ROUNDS {
            if dedup {
                // A key of this batch that was swapped out may rest in two subtables now:
                // every key the log holds is checked, as many as the insert kernel logged
                // (read on the device: the host waits once a round, below). That launch
                // comes last: it reports the table's counts after the clean-up.
                if round > 0 {
                    let retried_keys = &scratch.failed_keys[1 - current];
                    self.remove_launch(stream, retried_keys, retried, None, DUPLICATES, None)?;
                }
                self.remove_logged(stream, scratch)?;
            }
            // The counters, and the table's counts after the clean-up, in one wait.
            let counters = match dedup {
                true => self.refresh_from_report(stream, &scratch.counters)?,
                false => self.refresh_reading(stream, Some(&scratch.counters))?,
            };
            let duplicates = *duplicates.get_or_insert(counters[counter::DUPLICATES]);
            let (logged, failed) = (counters[counter::LOGGED], counters[counter::FAILED]);
            let failed = failed as usize;
            if dedup
                && logged as usize > scratch.log.len()
                && let Some(input) = original
            {
                // The log overflowed: every new key of the batch is checked.
                self.remove_launch(
                    stream,
                    input.keys,
                    input.count,
                    input.skip,
                    DUPLICATES,
                    None,
                )?;
                self.refresh(stream)?;
            }
            if failed == 0 {
                return Ok(duplicates);
            }
            if grow && !self.retries_in_place(round, failed) {
                let buckets = self.subtable_buckets();
                let resize = if self.options.rehash_all {
                    Resize::UpAll
                } else {
                    Resize::Up(policy::upsize_target(&buckets))
                };
                scratch.current = current;
                self.resize(stream, resize)?;
            }
            scratch.reset(stream)?;
            let next = 1 - current;
            // Retry the homeless pairs, from list `current` into list `next`.
            self.insert_from_list(stream, scratch, current, failed, None, next)?;
            retried = failed;
            current = next;
            scratch.current = current;
        }
        // Still homeless after every round: name them.
        let failed = scratch.counters(stream)?[counter::FAILED] as usize;
        let keys = scratch.failed_keys[current].to_host(stream)?;
        Err(CuckooError::NotInserted {
            keys: keys[..failed].iter().map(|k| k.widen()).collect(),
        })
    }

    /// Whether the homeless pairs of settle's round `round` (`failed` of them) are retried
    /// as the table is ([`policy::retries_in_place`]), by the counts settle just read.
    fn retries_in_place(&self, round: usize, failed: usize) -> bool {
        let len = self.mirror.lock().len() + failed as u64;
        policy::retries_in_place(round, len, self.options.beta, self.capacity() as u64)
    }

    /// Undoes an insert batch that ran out of memory half way: removes the keys it added,
    /// restores the values it replaced and the side slot (saved in the scratch space when
    /// `side_before`, else empty), and puts back the old pairs that were swapped out and
    /// left homeless.
    fn undo_insert(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: Option<&DeviceBuffer<u8>>,
        old_values: Option<&DeviceBuffer<V>>,
        side_before: bool,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        stream.synchronize()?;
        let failed = scratch.counters(stream)?[counter::FAILED] as usize;
        // The homeless pairs of the last insert launch.
        let homeless: Vec<(K, V)> = {
            let list = scratch.current;
            let k = scratch.failed_keys[list].to_host(stream)?;
            let v = scratch.failed_values[list].to_host(stream)?;
            k.into_iter().zip(v).take(failed).collect()
        };
        let n = keys.len();
        // Every copy of every key the batch added goes.
        self.remove_launch(stream, keys, n, found, GH_CUCKOO_REMOVE_ALL, None)?;
        stream.synchronize()?;
        // Pairs of the batch that were not held before are dropped; old pairs go back.
        let batch_keys = keys.to_host(stream)?;
        let was_found = match found {
            Some(f) => f.to_host(stream)?,
            None => vec![0; n],
        };
        let new_keys: HashSet<K> = batch_keys
            .iter()
            .zip(&was_found)
            .filter(|&(_, &f)| f == 0)
            .map(|(k, _)| *k)
            .collect();
        let mut seen = HashSet::new();
        let old: Vec<(K, V)> = homeless
            .into_iter()
            .filter(|(k, _)| !new_keys.contains(k) && seen.insert(*k))
            .collect();
        if !old.is_empty() {
            let (k, v): (Vec<K>, Vec<V>) = old.into_iter().unzip();
            let dk = DeviceBuffer::from_host(stream, &k)?;
            let dv = DeviceBuffer::from_host(stream, &v)?;
            scratch.reset(stream)?;
            let input = Input {
                keys: &dk,
                values: &dv,
                count: k.len(),
                count_from: None,
                skip: None,
            };
            // Into empty slots first, then with swaps, retried in place: there is no memory
            // to grow into.
            self.place_then_insert(stream, &input, scratch)?;
            if let Err(e) = self.settle(stream, scratch, None, false, false) {
                self.refresh(stream)?;
                return Err(e);
            }
        }
        // Then the values the batch replaced, and the side slot, as they were.
        if let (Some(found), Some(old)) = (found, old_values) {
            self.update(stream, keys, old, found, FOUND)?;
        }
        if side_before {
            self.shared
                .write()
                .side
                .copy_from(stream, &scratch.side_before)?;
        } else {
            self.write_side(stream, &mut vec![0; SIDE_HEADER + Self::WORDS])?;
        }
        self.refresh(stream)
    }

    fn update(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        found: &DeviceBuffer<u8>,
        select: u32,
    ) -> Result<()> {
        let view = self.view();
        let mut guards = Vec::new();
        let table = self.describe(&view, stream, &mut guards);
        launch::update(
            stream,
            launch::Update {
                table,
                keys,
                values,
                found,
                select,
            },
        )
    }

    /// The lock-free first pass of a user batch: places what fits into an empty slot of one
    /// of its buckets, writes each pair's fate into `scratch.status` and the pairs left
    /// pending into failed list 1. Returns the number of pending pairs (for the insert
    /// kernel) and of duplicates (for the update kernel, once every pair is placed) in the
    /// scratch counters.
    fn place_launch(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        let quarter_until = policy::home_quarter_pairs(&self.insert_shape(stream, input.count));
        // The addresses borrow the scratch space until the launch is queued.
        {
            let view = self.view();
            let home = self.home(&view, true);
            let mut guards = Vec::new();
            let table = self.describe(&view, stream, &mut guards);
            launch::place(
                stream,
                launch::Place {
                    table,
                    home,
                    keys: input.keys,
                    values: input.values,
                    count: input.count,
                    skip: input.skip,
                    status: &mut scratch.status,
                    pending_keys: &mut scratch.failed_keys[1],
                    pending_values: &mut scratch.failed_values[1],
                    counters: &mut scratch.counters,
                    quarter_until,
                },
            )?;
        }
        Ok(())
    }

    /// One insert launch: places `input`, logging evicted keys in `scratch.log` and
    /// setting homeless pairs aside in `scratch.failed_*[out]`.
    pub(super) fn insert_launch(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
        out: usize,
        exclude: Option<usize>,
    ) -> Result<()> {
        if input.count == 0 {
            return Ok(());
        }
        let salt = {
            let mut m = self.mirror.lock();
            m.launches += 1;
            fmix64(m.launches ^ self.options.seed) as u32
        };
        let view = self.view();
        let home = self.home(&view, true);
        let mut guards = Vec::new();
        let table = self.describe(&view, stream, &mut guards);
        let [failed_keys_0, failed_keys_1] = &mut scratch.failed_keys;
        let [failed_values_0, failed_values_1] = &mut scratch.failed_values;
        let (failed_keys, failed_values) = if out == 0 {
            (failed_keys_0, failed_values_0)
        } else {
            (failed_keys_1, failed_values_1)
        };
        launch::insert(
            stream,
            launch::Insert {
                table,
                home,
                keys: input.keys,
                values: input.values,
                count: input.count,
                count_from: input.count_from,
                skip: input.skip,
                failed_keys,
                failed_values,
                log: &mut scratch.log,
                counters: &mut scratch.counters,
                salt,
                max_evictions: self.options.max_evictions,
                exclude: exclude.map_or(GH_CUCKOO_NO_EXCLUDE, |e| e as u32),
            },
        )
    }
}

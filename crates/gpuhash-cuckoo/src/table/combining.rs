//! [`CombiningMap`] for [`CuckooTable`]: upserts that combine (Add, Min, Max) and
//! `insert_or_find`, for `u32` and `u64` values. See the crate docs ("Combining").

use gpuhash_core::DeviceBuffer;
use gpuhash_core::Stream;
use gpuhash_core::last_copy::{self, Reduce, Reduced};
use gpuhash_core::table::{Combine, CombiningMap, Key, check_pairs, check_values_out};

use super::CuckooTable;
use crate::Result;

impl<K: Key, V: Key> CombiningMap for CuckooTable<K, V> {
    /// Upserts the pairs: a writing batch, exact whatever the batch holds and whatever
    /// other threads queue (writing batches run one at a time). The batch is reduced on the
    /// device to one combined value a key, the distinct keys are looked up, their held
    /// values folded in, and the results inserted as an ordinary insert batch. Waits for
    /// `stream` as [`Map::insert_async`](gpuhash_core::table::Map::insert_async) does, and
    /// once more to count the distinct keys; returns with the batch done. Running out of
    /// memory leaves the table as it was.
    fn upsert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        combine: Combine,
    ) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.writing(stream, || {
            self.catch_up_counts(stream)?;
            let result = self
                .combine_locked(stream, keys, values, Reduce::Combined(combine))
                .map(drop);
            self.after_failed_insert(stream, result)
        })
    }

    /// Inserts the keys not held with their first copy's candidate, keeping the value of
    /// keys held; `values_out[i]` gets the value `keys[i]` holds afterwards. A writing
    /// batch that waits as [`upsert_async`](Self::upsert_async) does and returns with the
    /// batch done, `values_out` written once the work queued on `stream` has run.
    fn insert_or_find_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        candidates: &DeviceBuffer<V>,
        values_out: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        check_pairs(keys.len(), candidates.len())?;
        check_values_out(keys.len(), values_out.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        self.writing(stream, || {
            self.catch_up_counts(stream)?;
            let result = self
                .combine_locked(stream, keys, candidates, Reduce::First)
                .and_then(|(mut reduced, finals)| {
                    Ok(reduced.spread(stream, &finals, keys, values_out)?)
                });
            self.after_failed_insert(stream, result)
        })
    }
}

impl<K: Key, V: Key> CuckooTable<K, V> {
    /// Under the gate's write lock: reduces the batch to its distinct keys (`how`), folds
    /// in what the table holds for them (combined, or kept for `Reduce::First`) and
    /// inserts the results. Returns the reduction and the value each distinct key holds
    /// now.
    fn combine_locked(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        how: Reduce,
    ) -> Result<(Reduced<K, V>, DeviceBuffer<V>)> {
        let mut reduced = last_copy::reduce(stream, keys, values, how)?;
        let n = reduced.keys.len();
        let mut finals = std::mem::replace(&mut reduced.values, DeviceBuffer::zeroed(stream, 0)?);
        if self.mirror.lock().len() > 0 {
            let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
            let mut held = DeviceBuffer::<V>::zeroed(stream, n)?;
            self.find(
                stream,
                &reduced.keys,
                Some(&mut found),
                Some(&mut held),
                None,
            )?;
            let combine = match how {
                Reduce::Combined(c) => Some(c),
                Reduce::First => None,
            };
            last_copy::fold_held(stream, &held, &found, &mut finals, combine)?;
        }
        self.insert_batch(stream, &reduced.keys, &finals)?;
        Ok((reduced, finals))
    }
}

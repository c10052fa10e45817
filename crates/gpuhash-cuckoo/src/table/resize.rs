//! Resizes: one subtable doubled or halved (DyHash), or every subtable with every pair
//! inserted again (the rehash-everything baseline). Each waits for its kernels.

use std::time::Instant;

use gpuhash_core::table::{ErrorKind, Key, TableError as _, Value};
use gpuhash_core::{DeviceBuffer, Error, Stream};

use super::CuckooTable;
use super::scratch::{Input, Scratch};
use crate::launch::{self, counter};
use crate::policy::{self, Bounds, Resize};
use crate::{CuckooError, Result};

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// Upsizes (before a batch changes anything) until `len` pairs fit below beta.
    pub(super) fn grow_for(&self, stream: &Stream, len: u64) -> Result<()> {
        while let Some(resize) = self.growth_for(len) {
            self.resize(stream, resize)?;
        }
        Ok(())
    }

    /// Whether [`grow_for`](Self::grow_for) would upsize for `len` pairs.
    pub(super) fn must_grow_for(&self, len: u64) -> bool {
        self.growth_for(len).is_some()
    }

    /// The upsize that `len` pairs call for now, ignoring the lower fill bound.
    fn growth_for(&self, len: u64) -> Option<Resize> {
        let bounds = Bounds {
            alpha: 0.0,
            ..self.bounds()
        };
        policy::next_resize(&self.subtable_buckets(), len, &bounds)
    }

    /// Resizes until the fill factor is within bounds. Running out of memory for a resize
    /// here is not an error: every pair is in, only the fill factor stays out of bounds.
    pub(super) fn apply_policy(&self, stream: &Stream) -> Result<()> {
        for _ in 0..64 {
            let len = self.mirror.lock().len();
            let Some(resize) = policy::next_resize(&self.subtable_buckets(), len, &self.bounds())
            else {
                return Ok(());
            };
            match self.resize(stream, resize) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::OutOfDeviceMemory => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub(super) fn resize(&self, stream: &Stream, resize: Resize) -> Result<()> {
        let start = Instant::now();
        match resize {
            Resize::Up(i) => self.resize_one(stream, i, true)?,
            Resize::Down(i) => self.resize_one(stream, i, false)?,
            Resize::UpAll => self.rehash_all(stream, true)?,
            Resize::DownAll => self.rehash_all(stream, false)?,
        }
        let mut m = self.mirror.lock();
        match resize {
            Resize::Up(_) => m.stats.upsizes += 1,
            Resize::Down(_) => m.stats.downsizes += 1,
            Resize::UpAll | Resize::DownAll => m.stats.rehashes += 1,
        }
        m.stats.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }

    /// Doubles or halves subtable `index`, holding only its write lock. A downsize's
    /// residuals (pairs of two merged buckets that do not fit one) are then inserted into
    /// the other subtables.
    fn resize_one(&self, stream: &Stream, index: usize, up: bool) -> Result<()> {
        let words = Self::WORDS;
        let count = self.shared.read().counts.to_host(stream)?[index] as usize;
        let mut residual_keys = DeviceBuffer::<K>::zeroed(stream, if up { 0 } else { count })?;
        let mut residual_values = DeviceBuffer::<V>::zeroed(stream, if up { 0 } else { count })?;
        let mut residual_count = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        let mut scratch = if up {
            None
        } else {
            Some(Scratch::<K, V>::new(stream, count, 0)?)
        };
        let residuals = {
            let mut sub = self.subtables[index].write();
            let buckets = if up { sub.buckets * 2 } else { sub.buckets / 2 };
            if buckets >= 1 << 31 {
                return Err(Error::OutOfDeviceMemory.into());
            }
            let hash = (sub.hash_a, sub.hash_b);
            let new = Self::allocate_subtable(self.layout, stream, buckets, hash)?;
            {
                let mut guards = Vec::new();
                let from = sub.layout(stream, &mut guards);
                let to = new.layout(stream, &mut guards);
                launch::resize(
                    stream,
                    launch::Resize {
                        from,
                        to,
                        residual_keys: &mut residual_keys,
                        residual_values: &mut residual_values,
                        residual_count: &mut residual_count,
                        value_words: words as u32,
                        seed: self.choice_seed(),
                        layout: self.layout.code(),
                    },
                )?;
            }
            stream.synchronize()?;
            *sub = new;
            residual_count.to_host(stream)?[0] as usize
        };
        if residuals > 0 {
            let mut counts = self.shared.read().counts.to_host(stream)?;
            counts[index] -= residuals as u64;
            self.write_counts(stream, &counts[..self.options.subtables])?;
            self.refresh(stream)?;
            let scratch = scratch.as_mut().expect("downsizes have scratch");
            let exclude = (self.options.subtables >= 3).then_some(index);
            let input = Input {
                keys: &residual_keys,
                values: &residual_values,
                count: residuals,
                count_from: None,
                skip: None,
            };
            self.insert_launch(stream, &input, scratch, 0, exclude)?;
            if let Err(e) = self.settle(stream, scratch, None, false, true) {
                // The residuals left homeless are no longer in the table: whatever went
                // wrong (running out of memory for the upsize that would make room), the
                // error names them rather than passing as a mere lack of memory.
                self.refresh(stream)?;
                return Err(match e {
                    CuckooError::Core(Error::OutOfDeviceMemory) => {
                        let failed = scratch.counters(stream)?[counter::FAILED] as usize;
                        let keys = scratch.failed_keys[scratch.current].to_host(stream)?;
                        CuckooError::NotInserted {
                            keys: keys[..failed].iter().map(|k| k.widen()).collect(),
                        }
                    }
                    other => other,
                });
            }
        }
        self.refresh(stream)
    }

    /// The rehash-everything baseline: every subtable doubled (or halved) and every pair
    /// inserted again. The old arrays stay until all pairs are in the new ones, so a failure
    /// leaves the table as it was.
    fn rehash_all(&self, stream: &Stream, up: bool) -> Result<()> {
        let (slotted, counts_before) = {
            let m = self.mirror.lock();
            (m.counts.iter().sum::<u64>() as usize, m.counts.clone())
        };
        let mut keys = DeviceBuffer::<K>::unfilled(stream, slotted)?;
        let mut values = DeviceBuffer::<V>::unfilled(stream, slotted)?;
        self.export_slotted(stream, slotted, &mut keys, &mut values)?;
        let mut factor = 1u64;
        loop {
            factor *= 2;
            if factor > 64 {
                // The table still holds every pair in its old arrays.
                return Err(Error::InvalidInput(
                    "rehash found no place for some pairs even at 64 times the size".into(),
                )
                .into());
            }
            let mut fresh = Vec::with_capacity(self.subtables.len());
            for sub in &self.subtables {
                let sub = sub.read();
                let buckets = if up {
                    sub.buckets * factor
                } else {
                    sub.buckets * factor / 4
                };
                fresh.push(Self::allocate_subtable(
                    self.layout,
                    stream,
                    buckets.max(1),
                    (sub.hash_a, sub.hash_b),
                )?);
            }
            let mut scratch = Scratch::<K, V>::new(stream, slotted, 0)?;
            stream.synchronize()?;
            let mut old = Vec::with_capacity(fresh.len());
            for (slot, new) in self.subtables.iter().zip(fresh) {
                old.push(std::mem::replace(&mut *slot.write(), new));
            }
            self.write_counts(stream, &vec![0; self.options.subtables])?;
            self.refresh(stream)?;
            // Every pair goes in afresh: only this insert's thresholds count.
            let settled_before = std::mem::take(&mut self.mirror.lock().settled);
            let input = Input {
                keys: &keys,
                values: &values,
                count: slotted,
                count_from: None,
                skip: None,
            };
            self.insert_launch(stream, &input, &mut scratch, 0, None)?;
            stream.synchronize()?;
            if scratch.counters(stream)?[counter::FAILED] == 0 {
                return self.refresh(stream);
            }
            // Some pairs found no place: put the old arrays back and try larger ones.
            for (slot, previous) in self.subtables.iter().zip(old) {
                *slot.write() = previous;
            }
            self.mirror.lock().settled = settled_before;
            self.write_counts(stream, &counts_before)?;
            self.refresh(stream)?;
            if !up && factor >= 2 {
                // A halving that does not fit is simply not done.
                return Ok(());
            }
        }
    }
}

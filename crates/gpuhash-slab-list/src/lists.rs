//! [`SlabLists`]: a set of slab lists on one device, their head slabs in one array and the
//! rest of every list from one [`SlabAlloc`].

use gpuhash_core::scan::{exclusive_scan, scanned_total};
use gpuhash_core::table::{DeviceRows, MemoryUsage};
use gpuhash_core::{Device, DeviceBuffer, Stream};
use gpuhash_slab_alloc::{Exhaustion, SlabAlloc, SlabAllocOptions};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::batch::{self, slabs_needed};
use crate::error::{Result, SlabListError};
use crate::launch;
use crate::room::{self, InUseBound, safe_share};
use gpuhash_slab_alloc::layouts::{GH_SLAB_WORDS, GhSlabAllocContext};

use crate::layouts::{GH_SLAB_EMPTY_WORD, GhSlabLists};

/// Options of [`SlabLists`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlabListsOptions {
    /// The allocator the lists take their slabs from.
    pub alloc: SlabAllocOptions,
    /// The most slabs the allocator may reserve; `None` lets it grow while the device has
    /// memory. A batch that could need more fails with [`SlabListError::OutOfSlabs`] and
    /// appends nothing.
    pub max_slabs: Option<u64>,
}

/// What kernels read: the head slabs and the allocator.
#[derive(Debug)]
struct Slabs {
    heads: DeviceBuffer<u32>,
    alloc: SlabAlloc,
}

/// `list_count` lists of 32-bit words on the device, each a chain of 128-byte slabs.
///
/// Appends and removals from many host threads, on any streams, run at once; what needs
/// the lists alone (growing the allocator, [`SlabLists::collect`], [`SlabLists::clear`])
/// waits for every kernel on the device first.
#[derive(Debug)]
pub struct SlabLists {
    device: Device,
    list_count: u32,
    max_slabs: Option<u64>,
    slabs: RwLock<Slabs>,
    /// An upper bound of the allocator's slabs in use: measured at the last device-wide
    /// wait, plus every append's reservation since.
    possibly_in_use: InUseBound,
}

impl SlabLists {
    /// `list_count` empty lists (at least one).
    pub fn new(device: &Device, list_count: u32, options: SlabListsOptions) -> Result<Self> {
        if list_count == 0 {
            return Err(gpuhash_core::Error::InvalidInput(
                "slab lists need at least one list".into(),
            )
            .into());
        }
        if let Some(max) = options.max_slabs
            && options.alloc.initial_slabs > max
        {
            return Err(gpuhash_core::Error::InvalidInput(format!(
                "{} initial slabs exceed the limit of {max}",
                options.alloc.initial_slabs
            ))
            .into());
        }
        let stream = device.lend_stream()?;
        let head_words = list_count as usize * GH_SLAB_WORDS as usize;
        let heads = DeviceBuffer::from_host(&stream, &vec![GH_SLAB_EMPTY_WORD; head_words])?;
        let alloc = SlabAlloc::new(&stream, options.alloc)?;
        stream.synchronize()?;
        Ok(Self {
            device: device.clone(),
            list_count,
            max_slabs: options.max_slabs,
            slabs: RwLock::new(Slabs { heads, alloc }),
            possibly_in_use: InUseBound::new(0),
        })
    }

    /// The device the lists live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// How many lists there are.
    pub fn list_count(&self) -> u32 {
        self.list_count
    }

    /// Appends `words[i]` to list `lists[i]`, after the work queued on `stream`, and waits
    /// for it. A list holds the words of a batch after those of every batch that finished
    /// before it began (appends take the first never-written word of a list); the words one
    /// batch sends to one list, or batches running at once, land in any order.
    ///
    /// Errors: lengths that differ, a list past [`SlabLists::list_count`] or a reserved
    /// word ([`crate::is_reserved`]) append nothing; so does a batch that could need more
    /// slabs than the allocator can reserve. Only when the device allocator runs dry
    /// during the batch and cannot grow does [`SlabListError::NotAppended`] name the
    /// words that did not go in (all others did).
    pub fn append(&self, stream: &Stream, lists: &[u32], words: &[u32]) -> Result<()> {
        batch::check(lists, words, self.list_count)?;
        if words.is_empty() {
            return Ok(());
        }
        let lists_of = DeviceBuffer::from_host(stream, lists)?;
        let words_on = DeviceBuffer::from_host(stream, words)?;
        let mut status = DeviceBuffer::<u8>::zeroed(stream, words.len())?;
        {
            let slabs = self.with_room(stream, slabs_needed(words.len(), self.list_count))?;
            self.append_pass(&slabs, stream, &lists_of, &words_on, &mut status)?;
        }
        loop {
            let pending = not_stored(&status.to_host(stream)?);
            if pending.is_empty() {
                return Ok(());
            }
            // The device allocator found no slab although the batch had reserved room:
            // grow, and append what is left.
            let mut slabs = self.slabs.write();
            self.device.synchronize()?;
            if let Err(cause) = self.grow(&mut slabs, stream) {
                return Err(SlabListError::NotAppended {
                    not_appended: pending,
                    cause: Box::new(cause),
                });
            }
            let slabs = RwLockWriteGuard::downgrade(slabs);
            self.append_pass(&slabs, stream, &lists_of, &words_on, &mut status)?;
        }
    }

    fn append_pass(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        lists_of: &DeviceBuffer<u32>,
        words: &DeviceBuffer<u32>,
        status: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let mut exhaustion = Exhaustion::new(stream)?;
        let exhausted = exhaustion.address(stream);
        let context = slabs.alloc.context(stream, exhausted);
        let heads = slabs.heads.address(stream);
        let lists = self.layout(heads.address, context.params());
        launch::append(stream, lists, lists_of, words, status)?;
        Ok(())
    }

    /// Removes every copy of `words[i]` from list `lists[i]`, after the work queued on
    /// `stream`; returns how many copies each element removed (a word named twice in a
    /// batch is removed by one of the two). Removed words leave holes that later appends
    /// do not fill; [`SlabLists::clear`] gives the slabs back. Errors as
    /// [`SlabLists::append`]'s checks, removing nothing.
    pub fn remove(&self, stream: &Stream, lists: &[u32], words: &[u32]) -> Result<Vec<u32>> {
        batch::check(lists, words, self.list_count)?;
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let lists_of = DeviceBuffer::from_host(stream, lists)?;
        let words_on = DeviceBuffer::from_host(stream, words)?;
        let mut removed = DeviceBuffer::<u32>::zeroed(stream, words.len())?;
        {
            let slabs = self.slabs.read();
            self.with_lists(&slabs, stream, |lists| {
                launch::remove(stream, lists, &lists_of, &words_on, &mut removed)
            })?;
        }
        Ok(removed.to_host(stream)?)
    }

    /// The live words of every list, after the work queued on `stream`: entry l of the
    /// result is list l's count. Words appended or removed by kernels still running on
    /// other streams may or may not count.
    pub fn counts(&self, stream: &Stream) -> Result<Vec<u64>> {
        let mut counts = DeviceBuffer::<u64>::zeroed(stream, self.list_count as usize)?;
        {
            let slabs = self.slabs.read();
            self.with_lists(&slabs, stream, |lists| {
                launch::count(stream, lists, &mut counts)
            })?;
        }
        Ok(counts.to_host(stream)?)
    }

    /// The words of all lists, the lists' lengths summed.
    pub fn len(&self, stream: &Stream) -> Result<u64> {
        Ok(self.counts(stream)?.iter().sum())
    }

    /// Every list's words, in list order, as compressed rows: list l's words are
    /// `values[offsets[l]..offsets[l + 1]]`. Waits for every kernel on the device first,
    /// so that the rows are one snapshot.
    pub fn collect(&self, stream: &Stream) -> Result<DeviceRows<u32>> {
        let slabs = self.slabs.write();
        self.device.synchronize()?;
        let mut counts = DeviceBuffer::<u64>::zeroed(stream, self.list_count as usize)?;
        self.with_lists(&slabs, stream, |lists| {
            launch::count(stream, lists, &mut counts)
        })?;
        let mut offsets = DeviceBuffer::unfilled(stream, counts.len() + 1)?;
        exclusive_scan(stream, &counts, &mut offsets)?;
        let total = scanned_total(stream, &offsets)?;
        let mut values = DeviceBuffer::<u32>::unfilled(stream, total as usize)?;
        self.with_lists(&slabs, stream, |lists| {
            launch::collect(stream, lists, &offsets, &mut values)
        })?;
        Ok(DeviceRows { offsets, values })
    }

    /// Device memory: the head slabs and the allocator's reservation; in use, the heads
    /// and the slabs linked; entries, 4 bytes a live word.
    pub fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage> {
        let words = self.len(stream)?;
        let slabs = self.slabs.read();
        let heads = slabs.heads.size_bytes() as u64;
        Ok(MemoryUsage {
            bytes_reserved: heads + slabs.alloc.bytes_reserved() as u64,
            bytes_in_use: heads + slabs.alloc.slabs_in_use(stream)? * u64::from(GH_SLAB_WORDS) * 4,
            entry_bytes: words * 4,
        })
    }

    /// Empties every list, returning every slab past the heads to the allocator (which
    /// keeps its memory): after every kernel queued on the device before it.
    pub fn clear(&self, stream: &Stream) -> Result<()> {
        let slabs = self.slabs.write();
        self.device.synchronize()?;
        self.with_lists(&slabs, stream, |lists| launch::free(stream, lists))?;
        stream.synchronize()?;
        self.possibly_in_use.set(0);
        Ok(())
    }

    /// Slabs the allocator has handed out to the lists (heads not counted); waits for
    /// `stream`.
    pub fn slabs_in_use(&self, stream: &Stream) -> Result<u64> {
        Ok(self.slabs.read().alloc.slabs_in_use(stream)?)
    }

    fn layout(&self, heads: u64, alloc: GhSlabAllocContext) -> GhSlabLists {
        GhSlabLists {
            heads: heads as *mut u32,
            list_count: self.list_count,
            alloc,
        }
    }

    /// Runs `launch` with the lists as a kernel parameter, for kernels that never allocate.
    fn with_lists(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        launch: impl FnOnce(GhSlabLists) -> gpuhash_core::Result<()>,
    ) -> Result<()> {
        let mut exhaustion = Exhaustion::new(stream)?;
        let exhausted = exhaustion.address(stream);
        let context = slabs.alloc.context(stream, exhausted);
        let heads = slabs.heads.address(stream);
        launch(self.layout(heads.address, context.params()))?;
        Ok(())
    }

    /// The slabs held for reading, with room for `needed` more in use: at once while the
    /// bound of slabs in use leaves it, else after waiting for the device, measuring, and
    /// growing the allocator until they fit within the safe share.
    fn with_room(&self, stream: &Stream, needed: u64) -> Result<RwLockReadGuard<'_, Slabs>> {
        let reserved = |slabs: &Slabs| slabs.alloc.slabs_reserved();
        room::with_room(
            &self.slabs,
            &self.possibly_in_use,
            needed,
            true,
            reserved,
            |slabs| {
                self.device.synchronize()?;
                let in_use = slabs.alloc.slabs_in_use(stream)?;
                if let Some(max_slabs) = self.max_slabs
                    && in_use + needed > safe_share(max_slabs)
                {
                    return Err(SlabListError::OutOfSlabs { needed, max_slabs });
                }
                while in_use + needed > safe_share(slabs.alloc.slabs_reserved()) {
                    self.grow(slabs, stream)?;
                }
                self.possibly_in_use.set(in_use + needed);
                Ok(())
            },
        )
    }

    /// Doubles the allocator's reservation, unless that passes the limit.
    fn grow(&self, slabs: &mut Slabs, stream: &Stream) -> Result<()> {
        let reserved = slabs.alloc.slabs_reserved();
        if let Some(max_slabs) = self.max_slabs
            && reserved.saturating_mul(2) > max_slabs
        {
            return Err(SlabListError::OutOfSlabs {
                needed: reserved,
                max_slabs,
            });
        }
        slabs.alloc.grow(stream)?;
        Ok(())
    }
}

/// Indices of the elements whose status says they were not stored.
fn not_stored(status: &[u8]) -> Vec<usize> {
    status
        .iter()
        .enumerate()
        .filter(|&(_, &s)| s == 0)
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_stored_names_the_zero_statuses() {
        assert_eq!(not_stored(&[1, 0, 1, 0]), vec![1, 3]);
        assert!(not_stored(&[1, 1]).is_empty());
    }
}

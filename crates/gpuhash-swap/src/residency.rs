//! The children and where each one is: its image in mapped pinned host memory always, its
//! table on the device while resident, and its miss filter in device memory. Paging in
//! rebuilds a child from its image (one DMA a section); paging out writes a changed child's
//! image back (likewise) after rebuilding its filter, and drops an unchanged one.

use std::sync::Arc;

use gpuhash_core::image::{PinnedImage, ProbeInPlace};
use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_core::{Device, Error, PinnedPool, Stream};

use crate::filter::Filters;
use crate::policy::Lru;

/// Paging counts since the table was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapStats {
    /// Children rebuilt on the device from their images.
    pub page_ins: u64,
    /// Changed children whose images were written back to the host.
    pub page_outs: u64,
    /// Unchanged children dropped from the device with nothing written back.
    pub drops: u64,
    /// Lookups of one batch segment in one child run on the child's image in place, over
    /// the bus, instead of paging the child in.
    pub probes_in_place: u64,
    /// Keys of lookups that a child's miss filter answered on the device: misses that
    /// sent nothing over the bus.
    pub filtered: u64,
}

/// A child table: its host image, and its device table while resident.
struct Child<T> {
    /// The image the child was last written to (stale while the resident table is dirty).
    image: Arc<PinnedImage>,
    /// Entries the image holds.
    image_len: usize,
    resident: Option<Resident<T>>,
}

struct Resident<T> {
    table: T,
    /// Changed since it came in: its image must be written back before it leaves.
    dirty: bool,
}

/// Every child, the resident set, the pinned memory of the images, the filters and the
/// counts.
pub(crate) struct Residency<T> {
    children: Vec<Child<T>>,
    lru: Lru,
    empty: Arc<PinnedImage>,
    /// Mapped pinned memory for the images, capped at the host budget.
    pool: PinnedPool,
    filters: Filters,
    stats: SwapStats,
}

impl<T: ProbeInPlace> Residency<T> {
    /// `children` children, each the empty image of `first`, none resident; at most
    /// `resident` at once. A host budget that holds no `children` empty images is an
    /// error of kind `InvalidInput`.
    pub(crate) fn new(
        device: &Device,
        first: &T,
        children: usize,
        resident: usize,
        host_budget: Option<u64>,
        filters: Filters,
    ) -> Result<Self, T::Error> {
        let cap = host_budget.map(|b| usize::try_from(b).unwrap_or(usize::MAX));
        let pool = PinnedPool::new_mapped(device, cap);
        let too_small = || {
            Error::InvalidInput(format!(
                "a host budget of {host_budget:?} bytes holds no {children} empty children"
            ))
        };
        let empty = match first.to_pinned_image(&pool) {
            Err(error) if host_budget.is_some() && is_out_of_pinned(&error) => {
                return Err(too_small().into());
            }
            other => Arc::new(other?),
        };
        let needed = empty.pinned_bytes() as u64 * children as u64;
        if host_budget.is_some_and(|budget| needed > budget) {
            return Err(too_small().into());
        }
        let children = (0..children)
            .map(|_| Child {
                image: Arc::clone(&empty),
                image_len: 0,
                resident: None,
            })
            .collect();
        Ok(Self {
            children,
            lru: Lru::new(resident),
            empty,
            pool,
            filters,
            stats: SwapStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> SwapStats {
        self.stats
    }

    pub(crate) fn count(&self) -> usize {
        self.children.len()
    }

    /// Whether child `index` is on the device.
    pub(crate) fn is_resident(&self, index: usize) -> bool {
        self.lru.is_resident(index)
    }

    /// The image of child `index`: current for a child on the host.
    pub(crate) fn image(&self, index: usize) -> Arc<PinnedImage> {
        Arc::clone(&self.children[index].image)
    }

    /// The miss filters.
    pub(crate) fn filters(&self) -> &Filters {
        &self.filters
    }

    /// Counts a lookup run on an image in place.
    pub(crate) fn count_probe_in_place(&mut self) {
        self.stats.probes_in_place += 1;
    }

    /// Counts `keys` lookups answered by the filters.
    pub(crate) fn count_filtered(&mut self, keys: usize) {
        self.stats.filtered += keys as u64;
    }

    /// Child `index` on the device, paged in (and the least recently used paged out) as
    /// needed. `changes` marks it dirty. Work on the device that used a child being paged
    /// out is waited for first.
    pub(crate) fn table(
        &mut self,
        device: &Device,
        stream: &Stream,
        index: usize,
        changes: bool,
    ) -> Result<&T, T::Error> {
        if !self.lru.is_resident(index) {
            if let Some(victim) = self.lru.victim() {
                self.page_out(device, stream, victim)?;
            }
            self.page_in(device, index)?;
        }
        self.lru.touch(index);
        let resident = self.children[index]
            .resident
            .as_mut()
            .expect("the LRU and the children agree on who is resident");
        resident.dirty |= changes;
        Ok(&resident.table)
    }

    fn page_in(&mut self, device: &Device, index: usize) -> Result<(), T::Error> {
        let child = &mut self.children[index];
        let table = T::from_pinned_image(device, &child.image)?;
        child.resident = Some(Resident {
            table,
            dirty: false,
        });
        self.stats.page_ins += 1;
        Ok(())
    }

    /// Rebuilds a dirty child's filter from its keys and writes its image back (within the
    /// host budget), then drops its table; on an error the child stays resident and
    /// unchanged. Waits for the whole device first: other threads' batches may have left
    /// work on the child on their streams.
    fn page_out(&mut self, device: &Device, stream: &Stream, index: usize) -> Result<(), T::Error> {
        device.synchronize()?;
        let child = &mut self.children[index];
        let resident = child.resident.as_ref().expect("a resident victim");
        if resident.dirty {
            // The export holds one pair a key: its length is the child's, with no count
            // and no wait of its own.
            let pairs = resident.table.export_on(stream)?;
            let len = pairs.keys.len();
            self.filters.rebuild(stream, index, &pairs.keys)?;
            drop(pairs);
            // The image the child came in with is stale: its memory goes back to the pool
            // first, so that a host budget that holds the new image holds it now.
            child.image = Arc::clone(&self.empty);
            child.image = Arc::new(resident.table.to_pinned_image(&self.pool)?);
            child.image_len = len;
            self.stats.page_outs += 1;
        } else {
            self.stats.drops += 1;
        }
        child.resident = None;
        self.lru.evict(index);
        Ok(())
    }

    /// Entries of every child: resident ones counted on `stream`.
    pub(crate) fn len_on(&self, stream: &Stream) -> Result<usize, T::Error> {
        self.children.iter().try_fold(0, |sum, child| {
            Ok(sum
                + match &child.resident {
                    Some(resident) => resident.table.len_on(stream)?,
                    None => child.image_len,
                })
        })
    }

    /// The resident children's tables.
    pub(crate) fn resident_tables(&self) -> impl Iterator<Item = &T> {
        self.lru
            .resident()
            .filter_map(|index| self.children[index].resident.as_ref())
            .map(|resident| &resident.table)
    }

    /// Empties every child: resident ones cleared in place (and dirty), the others given
    /// the empty image and an empty filter.
    pub(crate) fn clear_on(&mut self, stream: &Stream) -> Result<(), T::Error> {
        for (index, child) in self.children.iter_mut().enumerate() {
            match &mut child.resident {
                Some(resident) => {
                    resident.table.clear_on(stream)?;
                    resident.dirty = true;
                }
                None => {
                    self.filters.clear(stream, index)?;
                    child.image = Arc::clone(&self.empty);
                    child.image_len = 0;
                }
            }
        }
        Ok(())
    }
}

/// Whether a table's error is the pinned pool's refusal.
fn is_out_of_pinned(error: &impl TableError) -> bool {
    error.kind() == ErrorKind::OutOfPinnedMemory
}

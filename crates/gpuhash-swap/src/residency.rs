//! The children and where each one is: its image in mapped pinned host memory always, its
//! table on the device while resident, and its miss filter in device memory. Paging in
//! rebuilds a child from its image (one DMA a section); paging out writes a changed child's
//! image back (likewise) after rebuilding its filter, and drops an unchanged one.
//!
//! A batch pages in two ways: at once, on the thread that runs the batch
//! ([`Residency::table`]), or ahead, as a [`Move`] taken out of the residency and run on a
//! thread of its own while the batch's kernels run ([`Move::run`], then
//! [`Residency::land`]). Either way a child leaves only once the work queued on it has run:
//! each resident child keeps an event recorded after every piece of work queued on it
//! ([`Residency::on_resident`] is the only way to it), and a page-out waits for those, not
//! for the whole device, so the kernels of other children run on. That wait is bounded
//! ([`crate::SwapOptions::page_out_wait`]): work that never finishes fails the page-out
//! with an error instead of hanging the batch.
//!
//! A [`Move`] owns all it touches (the victim's table, the incoming image, the pool's
//! handle) and takes no lock the batch's thread holds, so the thread that waits for it
//! waits only for the move's own device work and the victim's bounded wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::CudaEvent;
use gpuhash_core::image::{PinnedImage, ProbeInPlace};
use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_core::{Device, DeviceBuffer, Error, PinnedPool, Stream};

use crate::filter::Filters;
use crate::policy::{Ahead, Lru};
use crate::routed::RoutedCounts;
use crate::wait;

/// Paging counts, and counts of failed batches taken back, since the table was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapStats {
    /// Children rebuilt on the device from their images.
    pub page_ins: u64,
    /// Changed children whose images were written back to the host.
    pub page_outs: u64,
    /// Unchanged children dropped from the device with nothing written back.
    pub drops: u64,
    /// Lookups run on a child's image in place, over the bus, instead of paging the child
    /// in: one a child a segment, or one a child a batch where a lookup of several
    /// segments keeps the keys to probe until its end.
    pub probes_in_place: u64,
    /// Keys of lookups that a child's miss filter answered on the device: misses that
    /// sent nothing over the bus.
    pub filtered: u64,
    /// Failed inserts and removals whose changes were all taken back: the table held
    /// exactly what it held before them (see the crate docs, "After an error").
    pub undone: u64,
    /// Failed inserts and removals whose undo failed in turn (the device lost, say): the
    /// table may hold part of them.
    pub undo_failures: u64,
    /// Bytes of the images that page-ins copied from the host to the device.
    pub bytes_paged_in: u64,
    /// Bytes of the images that page-outs wrote back from the device to the host (drops
    /// write none).
    pub bytes_written_back: u64,
}

impl SwapStats {
    /// What happened between `earlier`, counts taken before, and these: each count less
    /// the earlier one.
    pub fn since(self, earlier: SwapStats) -> SwapStats {
        SwapStats {
            page_ins: self.page_ins - earlier.page_ins,
            page_outs: self.page_outs - earlier.page_outs,
            drops: self.drops - earlier.drops,
            probes_in_place: self.probes_in_place - earlier.probes_in_place,
            filtered: self.filtered - earlier.filtered,
            bytes_paged_in: self.bytes_paged_in - earlier.bytes_paged_in,
            bytes_written_back: self.bytes_written_back - earlier.bytes_written_back,
            undone: self.undone - earlier.undone,
            undo_failures: self.undo_failures - earlier.undo_failures,
        }
    }
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
    /// Recorded after work queued on the table, on the streams that queued it (the
    /// completed ones pruned): the table leaves the device once they have completed.
    used: Vec<CudaEvent>,
}

impl<T> Resident<T> {
    fn new(table: T) -> Self {
        Self {
            table,
            dirty: false,
            used: Vec::new(),
        }
    }

    /// Blocks until the work queued on the table has run, for at most `limit`: past it, a
    /// device error (`CUDA_ERROR_TIMEOUT`), not an endless wait for work that does not end.
    fn settle(&self, limit: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + limit;
        self.used
            .iter()
            .try_for_each(|event| wait::event_by(event, deadline))
    }
}

/// What a page-out leaves on the host.
enum Left {
    /// The child had not changed: its image stands.
    Dropped,
    /// The child's new image, its entries and its new miss filter.
    Written(Box<Written>),
}

/// A changed child's state on the host once it has left.
struct Written {
    image: PinnedImage,
    len: usize,
    filter: DeviceBuffer<u32>,
}

/// How a page-out went: what it left on the host, or the child's table back, with the
/// error.
type Leaving<T> = Result<Left, (Resident<T>, <T as gpuhash_core::table::Table>::Error)>;

/// A page-in, with the page-out that makes room for it, taken out of the residency to run
/// on a thread of its own ([`Move::run`]) while a batch's kernels run; the residency takes
/// the outcome back with [`Residency::land`].
pub(crate) struct Move<T> {
    device: Device,
    pool: PinnedPool,
    filter_blocks: u32,
    page_out_wait: Duration,
    /// The child that leaves, with its table.
    victim: Option<(usize, Resident<T>)>,
    incoming: usize,
    image: Arc<PinnedImage>,
}

/// A [`Move`] run: how its page-out and page-in went.
pub(crate) struct Moved<T: ProbeInPlace> {
    victim: Option<(usize, Leaving<T>)>,
    /// `None` when the page-out failed and the page-in was not tried.
    incoming: Option<(usize, Result<T, T::Error>)>,
}

impl<T: ProbeInPlace> Moved<T> {
    /// Whether the page-out or the page-in failed.
    pub(crate) fn failed(&self) -> bool {
        matches!(self.victim, Some((_, Err(_)))) || !matches!(self.incoming, Some((_, Ok(_))))
    }
}

impl<T: ProbeInPlace> Move<T> {
    /// Pages the victim out (waiting for its work first), then, if that went well, the
    /// incoming child in: on streams the device lends, beside the batch's stream.
    pub(crate) fn run(self) -> Moved<T> {
        let victim = self.victim.map(|(index, resident)| {
            let how = Leave {
                device: &self.device,
                pool: &self.pool,
                filter_blocks: self.filter_blocks,
                wait: self.page_out_wait,
            };
            let left = how.leave(&resident);
            (index, left.map_err(|error| (resident, error)))
        });
        if matches!(victim, Some((_, Err(_)))) {
            return Moved {
                victim,
                incoming: None,
            };
        }
        let incoming = T::from_pinned_image(&self.device, &self.image);
        Moved {
            victim,
            incoming: Some((self.incoming, incoming)),
        }
    }
}

/// What a page-out needs besides its child.
struct Leave<'a> {
    device: &'a Device,
    /// Where the image goes.
    pool: &'a PinnedPool,
    filter_blocks: u32,
    /// The longest it waits for the child's work.
    wait: Duration,
}

impl Leave<'_> {
    /// Takes a resident child off the device, once its work has run (waiting at most
    /// `wait`): a changed child's filter rebuilt from its keys and its image written into
    /// `pool`; nothing for an unchanged one.
    fn leave<T: ProbeInPlace>(&self, resident: &Resident<T>) -> Result<Left, T::Error> {
        resident.settle(self.wait)?;
        if !resident.dirty {
            return Ok(Left::Dropped);
        }
        let stream = self.device.lend_stream()?;
        // The export holds one pair a key: its length is the child's, with no count and no
        // wait of its own.
        let pairs = resident.table.export_on(&stream)?;
        let len = pairs.keys.len();
        let filter = Filters::built(&stream, self.filter_blocks, &pairs.keys)?;
        drop(pairs);
        let image = resident.table.to_pinned_image(self.pool)?;
        stream.synchronize()?;
        Ok(Left::Written(Box::new(Written { image, len, filter })))
    }
}

/// Every child, the resident set, the pinned memory of the images, the filters and the
/// counts.
pub(crate) struct Residency<T> {
    device: Device,
    children: Vec<Child<T>>,
    lru: Lru,
    empty: Arc<PinnedImage>,
    /// Mapped pinned memory for the images, capped at the host budget.
    pool: PinnedPool,
    filters: Filters,
    /// The longest a page-out waits for its child's work.
    page_out_wait: Duration,
    stats: SwapStats,
    /// Counts of routed lookups not yet in `stats`.
    routed: RoutedCounts,
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
        page_out_wait: Duration,
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
            device: device.clone(),
            children,
            lru: Lru::new(resident),
            empty,
            pool,
            filters,
            page_out_wait,
            stats: SwapStats::default(),
            routed: RoutedCounts::default(),
        })
    }

    /// The counts, those of routed lookups read back first.
    pub(crate) fn stats(&mut self) -> SwapStats {
        self.routed.read_into(&mut self.stats);
        self.stats
    }

    /// Sends a routed lookup's counts to the host, for the stats, with no wait.
    pub(crate) fn keep_routed_counts(
        &mut self,
        stream: &Stream,
        counts: &DeviceBuffer<u32>,
        on_host: Vec<bool>,
    ) -> Result<(), Error> {
        self.routed.keep(stream, &mut self.stats, counts, on_host)
    }

    pub(crate) fn count(&self) -> usize {
        self.children.len()
    }

    /// Which children are on the host, by index.
    pub(crate) fn on_host(&self) -> Vec<bool> {
        (0..self.children.len())
            .map(|child| !self.is_resident(child))
            .collect()
    }

    /// Whether child `index` is on the device.
    pub(crate) fn is_resident(&self, index: usize) -> bool {
        self.lru.is_resident(index)
    }

    /// The image of child `index`: current for a child on the host.
    pub(crate) fn image(&self, index: usize) -> Arc<PinnedImage> {
        Arc::clone(&self.children[index].image)
    }

    /// Room for one more child while the children `busy` says keep their slots.
    pub(crate) fn ahead(&self, busy: impl Fn(usize) -> bool) -> Option<Ahead> {
        self.lru.ahead(busy)
    }

    /// The page-ins ahead, one after the other, that bring in the children of `wanted`
    /// not resident while those `busy` says keep their slots ([`Lru::moves_ahead`]).
    pub(crate) fn moves_ahead(
        &self,
        wanted: &[usize],
        busy: impl Fn(usize) -> bool,
    ) -> Vec<(usize, Ahead)> {
        self.lru.moves_ahead(wanted, busy)
    }

    /// The miss filters.
    pub(crate) fn filters(&self) -> &Filters {
        &self.filters
    }

    /// Records that kernels queued on `stream` read the miss filters.
    pub(crate) fn filters_read_on(&mut self, stream: &Stream) -> Result<(), Error> {
        self.filters.read_on(stream)
    }

    /// Counts a lookup run on an image in place.
    pub(crate) fn count_probe_in_place(&mut self) {
        self.stats.probes_in_place += 1;
    }

    /// Counts a failed batch taken back, whole (`undone`) or not.
    pub(crate) fn count_undo(&mut self, undone: bool) {
        match undone {
            true => self.stats.undone += 1,
            false => self.stats.undo_failures += 1,
        }
    }

    /// Counts `keys` lookups answered by the filters.
    pub(crate) fn count_filtered(&mut self, keys: u64) {
        self.stats.filtered += keys;
    }

    /// Runs `work` on child `index`, paged in (and the least recently used paged out) as
    /// needed before it runs, and records that the work was queued on `stream` (see
    /// [`Residency::queued_on`]). `changes` marks the child dirty. Work on the device that
    /// used a child being paged out is waited for first.
    pub(crate) fn on_resident<R>(
        &mut self,
        device: &Device,
        (index, changes): (usize, bool),
        stream: &Stream,
        work: impl FnOnce(&T) -> Result<R, T::Error>,
    ) -> Result<R, T::Error> {
        self.table(device, index, changes)?;
        self.queued_on(index, stream, work)
    }

    /// Runs `work` on resident child `index` and records an event on `stream` after what
    /// it queued there, whether it succeeded or not (or, should the driver refuse the
    /// event, waits for the stream): the child leaves the device only once that has run.
    /// Every piece of work on a resident child goes through here.
    pub(crate) fn queued_on<R>(
        &mut self,
        index: usize,
        stream: &Stream,
        work: impl FnOnce(&T) -> Result<R, T::Error>,
    ) -> Result<R, T::Error> {
        let resident = self.children[index]
            .resident
            .as_mut()
            .expect("work on a resident child");
        let outcome = work(&resident.table);
        let recorded = match stream.cuda_stream().record_event(None) {
            Ok(event) => {
                resident.used.retain(|e| !e.is_complete());
                resident.used.push(event);
                Ok(())
            }
            // Work that cannot be tracked is waited for now.
            Err(_) => stream.synchronize(),
        };
        let value = outcome?;
        recorded?;
        Ok(value)
    }

    /// Runs `work` on the resident children `indices` at once (each counted as used, as
    /// [`Residency::on_resident`] does) and records an event on `stream` after what it
    /// queued for each, as [`Residency::queued_on`] does for one.
    pub(crate) fn queued_on_each<R>(
        &mut self,
        indices: &[usize],
        stream: &Stream,
        work: impl FnOnce(&[&T]) -> Result<R, T::Error>,
    ) -> Result<R, T::Error> {
        for &index in indices {
            self.lru.touch(index);
        }
        let tables: Vec<&T> = indices
            .iter()
            .map(|&index| {
                let resident = self.children[index].resident.as_ref();
                &resident.expect("work on a resident child").table
            })
            .collect();
        let outcome = work(&tables);
        let mut recorded = Ok(());
        for &index in indices {
            let resident = self.children[index]
                .resident
                .as_mut()
                .expect("work on a resident child");
            match stream.cuda_stream().record_event(None) {
                Ok(event) => {
                    resident.used.retain(|e| !e.is_complete());
                    resident.used.push(event);
                }
                // Work that cannot be tracked is waited for now.
                Err(_) => recorded = recorded.and(stream.synchronize()),
            }
        }
        let value = outcome?;
        recorded?;
        Ok(value)
    }

    /// The resident children, least recently used first.
    pub(crate) fn resident(&self) -> Vec<usize> {
        self.lru.by_age()
    }

    /// Child `index` on the device, paged in (and the least recently used paged out) as
    /// needed, before this returns. `changes` marks it dirty.
    fn table(&mut self, device: &Device, index: usize, changes: bool) -> Result<&T, T::Error> {
        if !self.lru.is_resident(index) {
            if let Some(victim) = self.lru.victim() {
                self.page_out(device, victim)?;
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
        child.resident = Some(Resident::new(T::from_pinned_image(device, &child.image)?));
        self.stats.page_ins += 1;
        self.stats.bytes_paged_in += child.image.bytes();
        Ok(())
    }

    /// Rebuilds a dirty child's filter from its keys and writes its image back (within the
    /// host budget), then drops its table; on an error the child stays resident and
    /// unchanged. Waits for the work queued on the child first (other threads' batches
    /// may have left work on it on their streams).
    fn page_out(&mut self, device: &Device, index: usize) -> Result<(), T::Error> {
        let pool = self.pool.clone();
        let how = Leave {
            device,
            pool: &pool,
            filter_blocks: self.filters.blocks(),
            wait: self.page_out_wait,
        };
        let resident = self.take_leaving(index);
        let left = how.leave(&resident);
        self.settle_leaving(index, left.map_err(|error| (resident, error)))
    }

    /// Takes resident child `index` out to leave the device. The image it came in with is
    /// stale if it changed: that image's memory goes back to the pool first, so that a
    /// host budget that holds the new image holds it now.
    fn take_leaving(&mut self, index: usize) -> Resident<T> {
        let child = &mut self.children[index];
        let resident = child.resident.take().expect("a resident victim");
        if resident.dirty {
            child.image = Arc::clone(&self.empty);
        }
        resident
    }

    /// Takes back the outcome of child `index`'s page-out: on the host with its image and
    /// filter, or, when it failed, resident as before (its image, being stale, is the empty
    /// one until it leaves again).
    fn settle_leaving(&mut self, index: usize, left: Leaving<T>) -> Result<(), T::Error> {
        let child = &mut self.children[index];
        match left {
            Ok(Left::Dropped) => self.stats.drops += 1,
            Ok(Left::Written(written)) => {
                let Written { image, len, filter } = *written;
                self.stats.bytes_written_back += image.bytes();
                child.image = Arc::new(image);
                child.image_len = len;
                self.filters.replace(&self.device, index, filter);
                self.stats.page_outs += 1;
            }
            Err((resident, error)) => {
                child.resident = Some(resident);
                return Err(error);
            }
        }
        self.lru.evict(index);
        Ok(())
    }

    /// A page-in of child `incoming` ahead of its visit, making room as `ahead` says, to
    /// run on another thread; `land` its outcome before anything else touches the
    /// residency.
    pub(crate) fn start_move(&mut self, device: &Device, ahead: Ahead, incoming: usize) -> Move<T> {
        let victim = match ahead {
            Ahead::Free => None,
            Ahead::Evict(victim) => Some((victim, self.take_leaving(victim))),
        };
        debug_assert!(
            !self.lru.is_resident(incoming) && self.children[incoming].resident.is_none(),
            "a page-in ahead of child {incoming}, which is resident"
        );
        Move {
            device: device.clone(),
            pool: self.pool.clone(),
            filter_blocks: self.filters.blocks(),
            page_out_wait: self.page_out_wait,
            victim,
            incoming,
            image: self.image(incoming),
        }
    }

    /// Takes back a [`Move`] that never ran: its victim stays resident, as it was.
    pub(crate) fn unmove(&mut self, unrun: Move<T>) {
        if let Some((victim, resident)) = unrun.victim {
            self.children[victim].resident = Some(resident);
        }
    }

    /// Takes back a [`Move`]'s outcome: the victim on the host and the incoming child
    /// resident (and just used), or, for the step that failed, the child as it was, and
    /// the error.
    pub(crate) fn land(&mut self, moved: Moved<T>) -> Result<(), T::Error> {
        if let Some((victim, left)) = moved.victim {
            self.settle_leaving(victim, left)?;
        }
        if let Some((incoming, table)) = moved.incoming {
            debug_assert!(self.children[incoming].resident.is_none());
            // The child's image stays its own while it is resident: what the move copied.
            let child = &mut self.children[incoming];
            child.resident = Some(Resident::new(table?));
            self.stats.page_ins += 1;
            self.stats.bytes_paged_in += child.image.bytes();
            self.lru.touch(incoming);
        }
        Ok(())
    }

    /// Entries of every child: resident ones counted on `stream`.
    pub(crate) fn len_on(&mut self, stream: &Stream) -> Result<usize, T::Error> {
        let mut sum = 0;
        for index in 0..self.children.len() {
            sum += match self.children[index].resident {
                Some(_) => self.queued_on(index, stream, |table| table.len_on(stream))?,
                None => self.children[index].image_len,
            };
        }
        Ok(sum)
    }

    /// Empties every child: resident ones cleared in place (and dirty), the others given
    /// the empty image and an empty filter.
    pub(crate) fn clear_on(&mut self, stream: &Stream) -> Result<(), T::Error> {
        for index in 0..self.children.len() {
            match &mut self.children[index].resident {
                Some(resident) => {
                    resident.dirty = true;
                    self.queued_on(index, stream, |table| table.clear_on(stream))?;
                }
                None => {
                    self.filters.clear(stream, index)?;
                    let child = &mut self.children[index];
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

#[cfg(test)]
mod tests {
    use super::SwapStats;

    #[test]
    fn counts_since_an_earlier_snapshot_are_differences() {
        let earlier = SwapStats {
            page_ins: 3,
            page_outs: 1,
            drops: 2,
            probes_in_place: 5,
            filtered: 100,
            bytes_paged_in: 3 << 20,
            bytes_written_back: 1 << 20,
            undone: 1,
            undo_failures: 0,
        };
        let later = SwapStats {
            page_ins: 7,
            page_outs: 1,
            drops: 6,
            probes_in_place: 9,
            filtered: 150,
            bytes_paged_in: 7 << 20,
            bytes_written_back: 1 << 20,
            undone: 2,
            undo_failures: 1,
        };
        let between = later.since(earlier);
        assert_eq!(
            between,
            SwapStats {
                page_ins: 4,
                page_outs: 0,
                drops: 4,
                probes_in_place: 4,
                filtered: 50,
                bytes_paged_in: 4 << 20,
                bytes_written_back: 0,
                undone: 1,
                undo_failures: 1,
            }
        );
        assert_eq!(later.since(later), SwapStats::default());
    }
}

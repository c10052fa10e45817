//! Lookups routed: each key's child written by the partition's count kernel (none where
//! the child's miss filter rules the key out), then every key looked up in one launch that
//! reads the resident children's tables and the images of the children on the host where
//! they lie ([`ProbeInPlace::get_routed`]). Nothing is partitioned or gathered, and a
//! segment waits for nothing.
//!
//! A lookup takes this way when its children's maps can route ([`ProbeInPlace::ROUTES`])
//! and probe in place. A batch so short that the cost model would probe a child on the
//! host in place even if every key went to it ([`SwapTable::routes_unseen`]) takes one
//! pass, with no wait. A longer batch is surveyed, and takes the passes of its plan
//! ([`crate::passes`]): the children it pages, a group a pass, are paged in before their
//! pass (the prefetch of the pass before brings them in beside its launches), and each
//! pass routes only its own children's keys, the others' answers left as they are. The
//! counts (the keys each filter ruled out or passed) come to the host with no wait, and
//! join the stats when [`crate::SwapTable::stats`] reads them ([`RoutedCounts`]).

use std::ops::Range;
use std::sync::Arc;

use gpuhash_core::image::{PinnedImage, ProbeInPlace, Route, Routed};
use gpuhash_core::{DeviceBuffer, PooledPinned, Stream, staging};

use crate::batch::{Verb, paged, reached};
use crate::launch::{self, COUNT_WORDS};
use crate::layouts::GH_SWAP_SEED;
use crate::passes::Pass;
use crate::policy::{Access, Reach};
use crate::prefetch::Prefetch;
use crate::residency::{Residency, SwapStats};
use crate::table::SwapTable;

/// Routed batches whose counts were not read back yet, at most this many: the next one
/// reads them all first.
const PENDING_COUNTS: usize = 256;

/// The sample that tells whether a host lookup may run in chunks: this many runs of
/// [`SAMPLE_RUN`] keys, evenly spaced over the batch. Runs, so that the host reads whole
/// lines and pages: 2^16 keys taken one by one, a stride apart, cost a cache and TLB miss
/// each, over a millisecond for a batch of 2^26 keys.
const SAMPLE_RUNS: usize = 64;
const SAMPLE_RUN: usize = 1024;

impl<T: ProbeInPlace> SwapTable<T> {
    /// Whether the children's lookups can be routed: their maps route and probe in place.
    pub(crate) const ROUTES: bool = T::ROUTES && T::PROBES_IN_PLACE;

    /// Whether a lookup of `len` keys would probe every child on the host in place
    /// wherever its keys go (all to one child, at worst), so that it is routed with no
    /// count first.
    pub(crate) fn routes_unseen(&self, residency: &Residency<T>, len: usize) -> bool {
        let model = self.cost_model();
        Self::ROUTES
            && (0..residency.count())
                .filter(|&child| !residency.is_resident(child))
                .all(|child| {
                    let image_bytes = residency.image(child).bytes();
                    model.choose(len as u64, T::PROBE_BYTES, image_bytes) == Access::Probe
                })
    }

    /// Whether a lookup of the host's `keys` would page no child, so that it may run in
    /// chunks, each routed, their copies beside their kernels
    /// ([`Table::host_lookup_chunk_for`]): a batch of at most one chunk (it runs whole
    /// either way, and its own plan decides), a batch [`SwapTable::routes_unseen`] routes,
    /// or one whose sample ([`SAMPLE_RUNS`] runs of keys, evenly spaced over it), counted
    /// through the filters on the device, says that no child on the host would be paged for
    /// the keys its filter passes, scaled to the batch. A sample that cannot be counted
    /// (the device failed) says no: the batch then runs whole, and meets the failure there.
    ///
    /// [`Table::host_lookup_chunk_for`]: gpuhash_core::table::Table::host_lookup_chunk_for
    pub(crate) fn routes_host_lookup(&self, keys: &[T::Key]) -> bool {
        if !Self::ROUTES || keys.len() <= staging::CHUNK {
            return Self::ROUTES;
        }
        let mut residency = self.residency.lock();
        if self.routes_unseen(&residency, keys.len()) {
            return true;
        }
        let stride = keys.len() / SAMPLE_RUNS;
        let sample: Vec<T::Key> = (0..SAMPLE_RUNS)
            .flat_map(|run| {
                let start = run * stride;
                &keys[start..keys.len().min(start + SAMPLE_RUN)]
            })
            .copied()
            .collect();
        let scale = keys.len() as f64 / sample.len() as f64;
        let on_host = residency.on_host();
        let counted = self
            .device
            .lend_stream()
            .map_err(T::Error::from)
            .and_then(|stream| {
                let sample = DeviceBuffer::from_host(&stream, &sample)?;
                Self::survey(&mut residency, &stream, &sample, &on_host)
            });
        let Ok(counts) = counted else {
            return false;
        };
        let passed = &counts[on_host.len()..2 * on_host.len()];
        let model = self.cost_model();
        (0..on_host.len())
            .filter(|&child| on_host[child])
            .all(|child| {
                let probes = (f64::from(passed[child]) * scale).ceil() as u64;
                let image_bytes = residency.image(child).bytes();
                model.choose(probes, T::PROBE_BYTES, image_bytes) == Access::Probe
            })
    }

    /// Runs the lookup `verb` on `keys` routed (module docs) in `passes` over the batch
    /// ([`crate::passes`]): a pass reaches its children resident, or on the host probed in
    /// place; a pass of children the batch pages pages them in first (those the last pass's
    /// prefetch did not bring), then starts the next pass's children paging in, one after
    /// the other, before its own segments are queued, so that the bus moves them while
    /// those run ([`Prefetch`]). Each pass reads segments of `segment` keys (a route a key
    /// is its scratch), and waits for nothing but its page-ins.
    pub(crate) fn look_up_routed(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        verb: &mut Verb<'_, T::Value>,
        (passes, segment): (&[Vec<Reach>], usize),
    ) -> Result<(), T::Error> {
        // A pass writes the answers of the keys it routes only.
        if let Some(found) = verb.found() {
            found.fill_zero(stream)?;
        }
        let mut route_of = DeviceBuffer::unfilled(stream, segment.min(keys.len()))?;
        std::thread::scope(|scope| {
            let mut prefetch = Prefetch::new();
            let mut outcome = Ok(());
            for (at, reach) in passes.iter().enumerate() {
                let next = passes.get(at + 1).map_or_else(Vec::new, |next| paged(next));
                let busy: Vec<usize> = reached(reach).chain(next.iter().copied()).collect();
                outcome = prefetch
                    .land(residency)
                    .and_then(|()| self.page_in_pass(residency, stream, reach))
                    .and_then(|()| prefetch.next(scope, residency, &self.device, &next, &busy))
                    .and_then(|()| {
                        let pass = Pass::new(stream, reach, false)?;
                        let between = |residency: &mut Residency<T>| {
                            prefetch.next(scope, residency, &self.device, &next, &busy)
                        };
                        let buffers = (keys, &mut route_of);
                        let pass = (&pass, segment);
                        Self::routed_pass(residency, stream, buffers, verb, pass, between)
                    });
                if outcome.is_err() {
                    break;
                }
            }
            let landed = prefetch.land(residency);
            outcome.and(landed)
        })
    }

    /// Pages in, one at a time, the children that `reach` pages and that are not resident.
    fn page_in_pass(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        reach: &[Reach],
    ) -> Result<(), T::Error> {
        for child in paged(reach) {
            residency.on_resident(&self.device, (child, false), stream, |_| Ok(()))?;
        }
        Ok(())
    }

    /// One routed pass over the batch: each segment's keys of the children the pass reaches
    /// counted into routes (through the filters of those on the host), then looked up in
    /// one call; `between` runs after each segment.
    fn routed_pass(
        residency: &mut Residency<T>,
        stream: &Stream,
        (keys, route_of): (&DeviceBuffer<T::Key>, &mut DeviceBuffer<u32>),
        verb: &mut Verb<'_, T::Value>,
        (pass, segment): (&Pass<'_>, usize),
        mut between: impl FnMut(&mut Residency<T>) -> Result<(), T::Error>,
    ) -> Result<(), T::Error> {
        let children = residency.count();
        let reaches = |child: usize| pass.reach[child] != Reach::Skip;
        let on_host: Vec<bool> = (0..children)
            .map(|child| reaches(child) && !residency.is_resident(child))
            .collect();
        let resident: Vec<usize> = residency
            .resident()
            .into_iter()
            .filter(|&child| reaches(child))
            .collect();
        // The route of a child the pass leaves out is never read: its image stands in.
        // Each image stays alive until the launches that read it are queued (its memory
        // goes back to the pool only once they have run).
        let images: Vec<Option<Arc<PinnedImage>>> = (0..children)
            .map(|child| (!resident.contains(&child)).then(|| residency.image(child)))
            .collect();
        let mut counts = DeviceBuffer::zeroed(stream, COUNT_WORDS * children)?;
        let mut start = 0;
        while start < keys.len() {
            let range = start..keys.len().min(start + segment);
            start = range.end;
            Self::reading_filters(residency, stream, &on_host, |filters| {
                let in_pass = pass.in_pass.as_ref();
                let (range, child_of) = (range.clone(), Some(&mut *route_of));
                launch::count(
                    stream,
                    keys,
                    range,
                    GH_SWAP_SEED,
                    filters,
                    in_pass,
                    child_of,
                    &mut counts,
                )
            })?;
            residency.queued_on_each(&resident, stream, |tables| {
                let routes: Vec<Route<'_, T>> = (0..children)
                    .map(|child| match &images[child] {
                        Some(image) => Route::InPlace(image.as_ref()),
                        None => {
                            let at = resident.iter().position(|&r| r == child);
                            Route::Device(tables[at.expect("a resident child")])
                        }
                    })
                    .collect();
                Self::route_one(stream, &routes, keys, range, route_of, verb)
            })?;
            between(residency)?;
        }
        Ok(residency.keep_routed_counts(stream, &counts, on_host)?)
    }

    /// One segment's routed lookup, its answers into the verb's buffers.
    fn route_one(
        stream: &Stream,
        routes: &[Route<'_, T>],
        keys: &DeviceBuffer<T::Key>,
        range: Range<usize>,
        route_of: &DeviceBuffer<u32>,
        verb: &mut Verb<'_, T::Value>,
    ) -> Result<(), T::Error> {
        let batch = Routed {
            keys,
            range,
            route_of,
        };
        match verb {
            Verb::Get { found, values } => {
                T::get_routed(stream, routes, batch, found, Some(values))
            }
            Verb::Contains(found) => T::get_routed(stream, routes, batch, found, None),
            Verb::Insert(_) | Verb::Remove(_) => unreachable!("only lookups are routed"),
        }
    }
}

/// The counts of routed lookups, on their way to the host: each batch's count words (per
/// child: keys routed, keys the filter passed, keys it ruled out), copied without a wait
/// into pinned memory from the device's pool, and which children were on the host. They
/// join the stats when these are asked for, or once [`PENDING_COUNTS`] batches wait.
#[derive(Default)]
pub(crate) struct RoutedCounts {
    pending: Vec<(PooledPinned<u32>, Vec<bool>)>,
}

impl RoutedCounts {
    /// Queues the copy of one batch's `counts` to the host on `stream`; adds every kept
    /// batch's to `stats` first when [`PENDING_COUNTS`] wait already.
    pub(crate) fn keep(
        &mut self,
        stream: &Stream,
        stats: &mut SwapStats,
        counts: &DeviceBuffer<u32>,
        on_host: Vec<bool>,
    ) -> gpuhash_core::Result<()> {
        if self.pending.len() >= PENDING_COUNTS {
            self.read_into(stats);
        }
        let mut copy = stream.device().pinned_pool().take(counts.len())?;
        counts.copy_to_pinned_async(stream, &mut copy)?;
        self.pending.push((copy, on_host));
        Ok(())
    }

    /// Adds the counts of every batch kept to `stats`, once their copies have run: the keys
    /// the filters ruled out, and a probe in place for each child on the host whose filter
    /// passed a key. Counts whose copy failed (the device failed) stay kept.
    pub(crate) fn read_into(&mut self, stats: &mut SwapStats) {
        self.pending.retain(|(copy, on_host)| {
            if copy.wait().is_err() {
                return true;
            }
            let children = on_host.len();
            let (passed, ruled_out) = copy[children..].split_at(children);
            stats.filtered += ruled_out.iter().map(|&r| u64::from(r)).sum::<u64>();
            let probed = on_host
                .iter()
                .zip(passed)
                .filter(|&(&host, &p)| host && p > 0);
            stats.probes_in_place += probed.count() as u64;
            false
        });
    }
}

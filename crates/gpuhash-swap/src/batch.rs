//! A batch on a [`SwapTable`]: cut into segments, each segment partitioned by child on the
//! device, then its children visited one by one, with paging overlapped with kernels.
//!
//! Each segment's children are visited once each, the resident ones first
//! ([`resident_first`]). A visit queues the child's work on the caller's stream: the
//! child's own device form on its range of the partition, or, for a lookup of a child on
//! the host, on the keys its miss filter passed, probed in place or paged in as the cost
//! model chooses (a child whose keys the filter all ruled out is not visited). Right after
//! a visit's kernels are queued, the look-ahead starts paging in the next child the segment
//! needs on the device ([`next_page_in`]): on a thread of its own, on streams the device
//! lends, first paging out the least recently used child no visit still needs when no slot
//! is free ([`crate::policy::Lru::ahead`]), so that the budget holds. The page-out waits
//! for the events recorded after the victim's own work, not for the stream, so the bus
//! moves one child while the SMs run another (the paper's two child slots). The next visit
//! takes the move's outcome back first; with one slot there is no room to look ahead and
//! every page-in happens at its visit.
//!
//! A batch of several segments with children on the host first counts its keys by child
//! (through the filters for a lookup: one count kernel over the batch, one wait). Each
//! segment visits its children once, so with more children on the host than slots, every
//! segment would page again each child the batch pages. Instead, those children (a
//! lookup's that the cost model pages for the whole batch's survivors, an insert's or a
//! removal's every one with keys) are left out of a first pass over every segment (the
//! resident children, and for a lookup those on the host probed in place), then put in
//! groups of half the resident limit, each group taking a pass of its own over every
//! segment: paged in once, resident throughout ([`crate::passes`]), the next group paging
//! in while this one runs ([`crate::prefetch`]). A pass partitions only its children's keys of each
//! segment (the count kernel reads every key, the scatter moves only those) and writes
//! only the answers it found, on flags zeroed before the first pass. A key's child is in
//! one pass, and a pass runs the segments in order, so a key's visits run in segment order
//! as with one pass. A lookup's children on the host that it probes in place keep their
//! survivors from segment to segment and are probed once each at the batch's end
//! ([`crate::deferred`]).
//!
//! A pass's segments read as many keys as the scratch holds at its share of the keys it
//! moves: the keys of its children, less a lookup's that the filters rule out (the count
//! kernel leaves those out, and the flags the batch zeroes first answer them). A segment
//! that would move more than that share is counted again at half the length, never shorter
//! than the segment the scratch holds when every key moves ([`SegmentRoom`]).
//!
//! An insert or a removal logs what each visit's keys held before it ran, and a batch that
//! fails takes back every logged visit before it returns ([`crate::undo`]).

use std::ops::Range;

use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::table::{Map, check_pairs};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::deferred::Deferred;
use crate::filter::{self, Survivors};
use crate::launch::{self, FilterSet};
use crate::partition::{Counted, Partition};
use crate::passes::{BatchPlan, Pass};
use crate::policy::{
    Access, Reach, SegmentRoom, Spread, next_page_in, resident_first, scratch_per_element,
};
use crate::prefetch::{Prefetch, joined};
use crate::residency::Residency;
use crate::table::SwapTable;
use crate::undo::{Before, Change, UndoLog};

/// A batch verb with the caller's buffers.
pub(crate) enum Verb<'a, V> {
    Insert(&'a DeviceBuffer<V>),
    Get {
        found: &'a mut DeviceBuffer<u8>,
        values: &'a mut DeviceBuffer<V>,
    },
    Contains(&'a mut DeviceBuffer<u8>),
    Remove(&'a mut DeviceBuffer<u8>),
}

impl<V> Verb<'_, V> {
    /// How the verb changes the table, if it does.
    fn change(&self) -> Option<Change> {
        match self {
            Verb::Insert(_) => Some(Change::Insert),
            Verb::Remove(_) => Some(Change::Remove),
            Verb::Get { .. } | Verb::Contains(_) => None,
        }
    }

    fn changes(&self) -> bool {
        self.change().is_some()
    }

    fn values(&self) -> Option<&DeviceBuffer<V>> {
        match self {
            Verb::Insert(values) => Some(values),
            _ => None,
        }
    }

    pub(crate) fn found(&mut self) -> Option<&mut DeviceBuffer<u8>> {
        match self {
            Verb::Insert(_) => None,
            Verb::Get { found, .. } | Verb::Contains(found) | Verb::Remove(found) => Some(found),
        }
    }

    pub(crate) fn gets_values(&self) -> bool {
        matches!(self, Verb::Get { .. })
    }

    fn answers(&self) -> bool {
        !matches!(self, Verb::Insert(_))
    }
}

/// One segment's answers in partitioned order.
struct Answers<V> {
    found: DeviceBuffer<u8>,
    values: DeviceBuffer<V>,
}

impl<V: bytemuck::Pod> Answers<V> {
    /// Room for the answers of `verb` on `len` elements: flags for the verbs that answer,
    /// zeros that answer the misses of children on the host; values for a get. An insert
    /// answers nothing and takes none (its undo log takes the room).
    fn for_verb(stream: &Stream, verb: &Verb<'_, V>, len: usize) -> gpuhash_core::Result<Self> {
        let room = |needed: bool| if needed { len } else { 0 };
        Ok(Self {
            found: DeviceBuffer::zeroed(stream, room(verb.answers()))?,
            values: DeviceBuffer::unfilled(stream, room(verb.gets_values()))?,
        })
    }
}

/// Found flags, and values where found when a lookup gets them.
pub(crate) type ProbeAnswers<V> = (DeviceBuffer<u8>, Option<DeviceBuffer<V>>);

/// A segment partitioned by child, and the keys the filters passed.
type Split<K, V> = (Partition<K, V>, Survivors<K>);

/// A segment counted for a pass, with the children whose filters the count consulted.
struct CountedSegment {
    counted: Counted,
    on_host: Vec<bool>,
}

/// How a visit reaches its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// The child on the device, the verb on its range of the partition.
    Run,
    /// A lookup of the filter's survivors in the child's image, in place.
    Probe,
    /// A lookup of the filter's survivors in the child paged in.
    PageLookup,
    /// The filter's survivors kept for a probe in place at the batch's end.
    Defer,
}

/// A child's part of a segment.
struct Visit {
    child: usize,
    /// The child's range of the partition ([`How::Run`]) or of the survivors.
    range: Range<usize>,
    how: How,
}

/// What a batch's segments share: its keys, its undo log and the lists of its deferred
/// probes.
struct Batch<'b, K, V> {
    keys: &'b DeviceBuffer<K>,
    log: &'b mut UndoLog<V>,
    deferred: Option<&'b mut Deferred<K>>,
}

/// What every visit of a segment reads and writes.
struct Segment<'s, 'v, K, V> {
    stream: &'s Stream,
    /// The segment's start in the batch.
    start: usize,
    partition: &'s Partition<K, V>,
    survivors: &'s Survivors<K>,
    verb: &'s Verb<'v, V>,
    answers: &'s mut Answers<V>,
    /// What the keys of an insert or a removal held before their visits.
    before: Option<&'s mut Before<V>>,
    /// Where a lookup keeps the keys of the children it probes at the batch's end.
    deferred: Option<&'s mut Deferred<K>>,
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// Runs `verb` on `keys`, segment by segment. An insert or a removal that fails is
    /// taken back before the error returns ([`crate::undo`]): the table then holds what it
    /// held before.
    pub(crate) fn run(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        mut verb: Verb<'_, T::Value>,
    ) -> Result<(), T::Error> {
        if let Some(found) = verb.found() {
            check_pairs(keys.len(), found.len())?;
        }
        let mut residency = self.residency.lock();
        let element_bytes = scratch_per_element(size_of::<T::Key>(), size_of::<T::Value>());
        // A routed lookup's scratch is a route a key.
        let route_segment = (self.plan.segment as u64 * element_bytes / 4) as usize;
        if !verb.changes() && self.routes_unseen(&residency, keys.len()) {
            let one_pass = [vec![Reach::AsCounted; residency.count()]];
            let routed = (&one_pass[..], route_segment);
            return self.look_up_routed(&mut residency, stream, keys, &mut verb, routed);
        }
        let mut log = UndoLog::new();
        let BatchPlan {
            passes,
            segment,
            reads,
            deferred,
            routed,
        } = self.passes(&mut residency, stream, keys, verb.changes())?;
        if routed {
            let routed = (&passes[..], route_segment);
            return self.look_up_routed(&mut residency, stream, keys, &mut verb, routed);
        }
        let room = SegmentRoom {
            segment,
            element_bytes,
        };
        let mut deferred = Deferred::new(stream, &deferred)?;
        // Passes that skip children each write only the keys they found, on flags zeroed
        // first; so are a lookup's, whose keys the filters rule out no segment moves.
        let skips = passes.iter().any(|reach| reach.contains(&Reach::Skip));
        if (skips || !verb.changes())
            && let Some(found) = verb.found()
        {
            found.fill_zero(stream)?;
        }
        let changes = verb.changes();
        let mut outcome = std::thread::scope(|scope| {
            let mut prefetch = Prefetch::new();
            let mut outcome = Ok(());
            for (at, (reach, &read)) in passes.iter().zip(&reads).enumerate() {
                let next = passes.get(at + 1).map_or_else(Vec::new, |next| paged(next));
                let busy: Vec<usize> = reached(reach).chain(next.iter().copied()).collect();
                outcome = prefetch
                    .land(&mut residency)
                    .and_then(|()| Pass::new(stream, reach, !skips).map_err(T::Error::from))
                    .and_then(|pass| {
                        let mut start = 0;
                        while start < keys.len() {
                            // The logs of the segments before leave the device; this one's
                            // stays there while it runs (and, for the last, until the
                            // batch ends).
                            log.move_to_host(stream)?;
                            let counted = Self::count_fitting(
                                &mut residency,
                                stream,
                                keys,
                                changes,
                                (start, read),
                                &room,
                                &pass,
                            )?;
                            start = counted.counted.segment().end;
                            // A segment's visits page in the children it reaches that are
                            // not resident, never beside a move under way.
                            if reached(reach).any(|c| !residency.is_resident(c)) {
                                prefetch.land(&mut residency)?;
                            }
                            let batch = Batch {
                                keys,
                                log: &mut log,
                                deferred: deferred.as_mut(),
                            };
                            self.run_segment(
                                &mut residency,
                                stream,
                                &mut verb,
                                counted,
                                batch,
                                &pass,
                            )?;
                            prefetch.next(scope, &mut residency, &self.device, &next, &busy)?;
                        }
                        Ok(())
                    });
                if outcome.is_err() {
                    break;
                }
            }
            let landed = prefetch.land(&mut residency);
            outcome.and(landed)
        });
        if outcome.is_ok()
            && let Some(deferred) = deferred
        {
            outcome = self.probe_deferred(&mut residency, stream, deferred, &mut verb);
        }
        if outcome.is_err()
            && let Some(change) = verb.change()
        {
            self.undo(&mut residency, stream, keys, change, log);
        }
        outcome
    }

    /// Runs one segment of a pass; an insert's or a removal's log of it goes onto the
    /// batch's log, whatever happens once its visits start.
    fn run_segment(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        verb: &mut Verb<'_, T::Value>,
        counted: CountedSegment,
        batch: Batch<'_, T::Key, T::Value>,
        pass: &Pass<'_>,
    ) -> Result<(), T::Error> {
        let Batch {
            keys,
            log,
            deferred,
        } = batch;
        let CountedSegment { counted, on_host } = counted;
        let segment = counted.segment().clone();
        let (partition, survivors) =
            Self::partition(residency, stream, keys, verb, counted, &on_host)?;
        let mut answers = Answers::for_verb(stream, verb, partition.index.len())?;
        let mut before = match verb.changes() {
            true => Some(Before::new(stream, partition.index.len())?),
            false => None,
        };
        let visits = self.visits(residency, &partition, &survivors, &on_host, pass.reach);
        // A lookup's resident children answer in one call (`ProbeInPlace::get_each`: one
        // launch for DyHash children), and so do the children it probes in place on the
        // host (`ProbeInPlace::get_in_place_each`); the others go child by child.
        let (together, rest): (Vec<Visit>, Vec<Visit>) = visits.into_iter().partition(|visit| {
            visit.how == How::Run && !verb.changes() && residency.is_resident(visit.child)
        });
        let (probed, one_by_one): (Vec<Visit>, Vec<Visit>) =
            rest.into_iter().partition(|visit| visit.how == How::Probe);
        let mut work = Segment {
            stream,
            start: segment.start,
            partition: &partition,
            survivors: &survivors,
            verb,
            answers: &mut answers,
            before: before.as_mut(),
            deferred,
        };
        let answered = Self::look_up_together(residency, &together, &mut work)
            .and_then(|()| Self::probe_together(residency, &probed, &mut work))
            .and_then(|()| self.visit_all(residency, &one_by_one, &mut work))
            .and_then(|()| {
                let start = segment.start;
                gather_answers(
                    stream,
                    &partition,
                    &answers,
                    verb,
                    start,
                    pass.writes_misses,
                )
                .map_err(T::Error::from)
            });
        // The log keeps the partition's places of its elements in the segment: its
        // flags and values are in the partition's order.
        if let Some(before) = before {
            log.push(segment, before, partition.index);
        }
        answered
    }

    /// Counts the segment of `keys` that starts at `start` and reads `read` keys, or fewer
    /// where it would move more than the scratch holds ([`SegmentRoom::next`]).
    fn count_fitting(
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        changes: bool,
        (start, read): (usize, usize),
        room: &SegmentRoom,
        pass: &Pass<'_>,
    ) -> Result<CountedSegment, T::Error> {
        room.next((start, keys.len()), read, |range| {
            let counted = Self::count(residency, stream, keys, changes, range, pass)?;
            let moved = counted.counted.moved();
            Ok((counted, moved))
        })
    }

    /// Counts the segment `range` of `keys` by child for a pass, and waits for the stream
    /// (the one wait a segment has): which children a lookup (a verb that `changes`
    /// nothing) reaches through its filter are those on the host now (the set is fixed
    /// before any child of the segment pages in or out), and the count counts the keys
    /// their filters pass too; one more kernel compacts those keys for the whole segment.
    fn count(
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        changes: bool,
        range: Range<usize>,
        pass: &Pass<'_>,
    ) -> Result<CountedSegment, T::Error> {
        let children = residency.count();
        let on_host: Vec<bool> = (0..children)
            .map(|child| !changes && !residency.is_resident(child))
            .collect();
        let counted = Self::reading_filters(residency, stream, &on_host, |filters| {
            let spread = Spread::children(children as u32);
            let in_pass = pass.in_pass.as_ref();
            Counted::count(stream, spread, keys, range, filters, in_pass)
        })?;
        Ok(CountedSegment { counted, on_host })
    }

    /// The counted segment partitioned by child, and the keys of the children `on_host`
    /// that their filters pass (one kernel compacts them for the whole segment).
    fn partition(
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        verb: &Verb<'_, T::Value>,
        counted: Counted,
        on_host: &[bool],
    ) -> Result<Split<T::Key, T::Value>, T::Error> {
        Self::reading_filters(residency, stream, on_host, |filters| {
            let partition = counted.scatter(stream, keys, verb.values())?;
            let survivors = filter::survivors(stream, &partition, filters.is_some())?;
            Ok((partition, survivors))
        })
    }

    /// Runs `work` with the filters of the children `on_host` for kernels on `stream`; the
    /// filters' readers are recorded even when it fails: its kernels may have been queued.
    pub(crate) fn reading_filters<R>(
        residency: &mut Residency<T>,
        stream: &Stream,
        on_host: &[bool],
        work: impl FnOnce(Option<&FilterSet<'_>>) -> gpuhash_core::Result<R>,
    ) -> Result<R, T::Error> {
        let filters = residency.filters().set(stream, on_host)?;
        let consulted = filters.is_some();
        let outcome = work(filters.as_ref());
        drop(filters);
        if consulted {
            residency.filters_read_on(stream)?;
        }
        Ok(outcome?)
    }

    /// The segment's visits in order, resident children first, of the children the pass
    /// reaches; counts the keys the filters ruled out.
    fn visits<K: bytemuck::Pod, V: bytemuck::Pod>(
        &self,
        residency: &mut Residency<T>,
        partition: &Partition<K, V>,
        survivors: &Survivors<K>,
        on_host: &[bool],
        reach: &[Reach],
    ) -> Vec<Visit> {
        let cost_model = self.cost_model();
        let order = resident_first(partition.children(), |child| residency.is_resident(child));
        residency.count_filtered(partition.ruled_out);
        order
            .into_iter()
            .filter_map(|(child, range)| {
                if reach[child] == Reach::Skip {
                    return None;
                }
                if !on_host[child] {
                    return Some(Visit {
                        child,
                        range,
                        how: How::Run,
                    });
                }
                let passed = survivors.ranges[child].clone();
                // Every key ruled out: the child is neither paged in nor probed.
                if passed.is_empty() {
                    return None;
                }
                if reach[child] == Reach::Defer {
                    return Some(Visit {
                        child,
                        range: passed,
                        how: How::Defer,
                    });
                }
                let access = if T::PROBES_IN_PLACE && reach[child] == Reach::AsCounted {
                    let image_bytes = residency.image(child).bytes();
                    cost_model.choose(passed.len() as u64, T::PROBE_BYTES, image_bytes)
                } else {
                    Access::Page
                };
                let how = match access {
                    Access::Probe => How::Probe,
                    Access::Page => How::PageLookup,
                };
                Some(Visit {
                    child,
                    range: passed,
                    how,
                })
            })
            .collect()
    }

    /// Looks up the keys of every visit of `visits` (lookups of resident children) in one
    /// call, each child's answers at its range of the segment's answers.
    fn look_up_together(
        residency: &mut Residency<T>,
        visits: &[Visit],
        work: &mut Segment<'_, '_, T::Key, T::Value>,
    ) -> Result<(), T::Error> {
        if visits.is_empty() {
            return Ok(());
        }
        let children: Vec<usize> = visits.iter().map(|visit| visit.child).collect();
        let Segment {
            stream,
            partition,
            verb,
            answers,
            ..
        } = work;
        residency.queued_on_each(&children, stream, |tables| {
            let maps: Vec<(&T, Range<usize>)> = tables
                .iter()
                .zip(visits)
                .map(|(&table, visit)| (table, visit.range.clone()))
                .collect();
            let values = verb.gets_values().then_some(&mut answers.values);
            T::get_each(stream, &maps, partition.keys(), &mut answers.found, values)
        })
    }

    /// Probes in place the images of every visit of `visits` (lookups of children on the
    /// host) in one call, their answers into their survivors' places in the segment's
    /// answers. Only the flags of keys found are written there: the segment's flags start
    /// zeroed, and each key has one visit.
    fn probe_together(
        residency: &mut Residency<T>,
        visits: &[Visit],
        work: &mut Segment<'_, '_, T::Key, T::Value>,
    ) -> Result<(), T::Error> {
        if visits.is_empty() {
            return Ok(());
        }
        let (stream, survivors) = (work.stream, work.survivors);
        let parts = visits
            .iter()
            .map(|visit| (visit.child, visit.range.clone()));
        let gets_values = work.verb.gets_values();
        let (found, values) =
            Self::probe_in_place(residency, stream, parts, survivors.keys(), gets_values)?;
        let answers = &mut *work.answers;
        let places = survivors.places();
        launch::gather(stream, &found, places, Some(&found), &mut answers.found, 0)?;
        if let Some(values) = &values {
            launch::gather(stream, values, places, Some(&found), &mut answers.values, 0)?;
        }
        Ok(())
    }

    /// Probes in place, in one call ([`ProbeInPlace::get_in_place_each`]), the image of
    /// each child of `parts` (children on the host) on its range of `keys`: flags over all
    /// of `keys` (zero outside the ranges), and values where found (when `gets_values`).
    pub(crate) fn probe_in_place(
        residency: &mut Residency<T>,
        stream: &Stream,
        parts: impl Iterator<Item = (usize, Range<usize>)>,
        keys: &DeviceBuffer<T::Key>,
        gets_values: bool,
    ) -> Result<ProbeAnswers<T::Value>, T::Error> {
        // Each image may be replaced while the kernels still read it: its memory goes back
        // to the pool only once they have run (a pinned buffer waits for its readers).
        let images: Vec<_> = parts
            .map(|(child, range)| (residency.image(child), range))
            .collect();
        let in_place: Vec<_> = images
            .iter()
            .map(|(image, range)| (image.as_ref(), range.clone()))
            .collect();
        let mut found = DeviceBuffer::zeroed(stream, keys.len())?;
        let mut values = match gets_values {
            true => Some(DeviceBuffer::unfilled(stream, keys.len())?),
            false => None,
        };
        T::get_in_place_each(stream, &in_place, keys, &mut found, values.as_mut())?;
        for _ in &in_place {
            residency.count_probe_in_place();
        }
        Ok((found, values))
    }

    /// Visits each child in turn, paging the next one in while the last one's kernels run.
    /// Whatever happens, a move under way is taken back before this returns, so the
    /// residency is whole: children before a failed visit hold their part of the segment
    /// (logged, for the undo), those after have none of it, and the failed one's log says
    /// whether its form may have run. At most one move is under way, and
    /// only between a visit's queueing and the next landing: no visit runs beside it on the
    /// host, and a panic in a visit leaves none behind.
    fn visit_all(
        &self,
        residency: &mut Residency<T>,
        visits: &[Visit],
        work: &mut Segment<'_, '_, T::Key, T::Value>,
    ) -> Result<(), T::Error> {
        let needs_device: Vec<(usize, bool)> = visits
            .iter()
            .map(|v| (v.child, !matches!(v.how, How::Probe | How::Defer)))
            .collect();
        std::thread::scope(|scope| {
            let mut under_way = None;
            let mut outcome = Ok(());
            for (at, visit) in visits.iter().enumerate() {
                if let Some(moving) = under_way.take() {
                    outcome = residency.land(joined(moving));
                }
                outcome = outcome.and_then(|()| self.visit(residency, visit, work));
                if outcome.is_err() {
                    break;
                }
                let Some(next) = next_page_in(&needs_device, at + 1, |c| residency.is_resident(c))
                else {
                    continue;
                };
                let upcoming = &needs_device[at + 1..];
                let busy = |c: usize| c == visit.child || upcoming.iter().any(|&(u, _)| u == c);
                if let Some(ahead) = residency.ahead(busy) {
                    let moving = residency.start_move(&self.device, ahead, next);
                    under_way = Some(scope.spawn(move || moving.run()));
                }
            }
            let landed = under_way.map_or(Ok(()), |moving| residency.land(joined(moving)));
            outcome.and(landed)
        })
    }

    /// Queues one visit's work on the segment's stream.
    fn visit(
        &self,
        residency: &mut Residency<T>,
        visit: &Visit,
        work: &mut Segment<'_, '_, T::Key, T::Value>,
    ) -> Result<(), T::Error> {
        let (child, range) = (visit.child, visit.range.clone());
        let stream = work.stream;
        match visit.how {
            How::Probe => Self::probe_together(residency, std::slice::from_ref(visit), work),
            How::Defer => {
                let index = &work.partition.index;
                let kept = match work.deferred.as_deref_mut() {
                    Some(deferred) => {
                        deferred.keep(stream, child, work.survivors, range, index, work.start)
                    }
                    None => Err(gpuhash_core::Error::InvalidInput(format!(
                        "child {child} deferred by a batch that keeps no deferred keys"
                    ))),
                };
                Ok(kept?)
            }
            How::Run => {
                let changes = work.verb.changes();
                residency.on_resident(&self.device, (child, changes), stream, |table| {
                    run_child(table, work, child, range)
                })
            }
            How::PageLookup => {
                residency.on_resident(&self.device, (child, false), stream, |table| {
                    look_up(work, range, |keys, found, values| match values {
                        Some(values) => table.get_async(stream, keys, found, values),
                        None => table.contains_async(stream, keys, found),
                    })
                })
            }
        }
    }
}

/// The children a pass reaches.
pub(crate) fn reached(reach: &[Reach]) -> impl Iterator<Item = usize> + '_ {
    (0..reach.len()).filter(|&child| reach[child] != Reach::Skip)
}

/// The children a pass pages in for all its segments.
pub(crate) fn paged(reach: &[Reach]) -> Vec<usize> {
    (0..reach.len())
        .filter(|&child| reach[child] == Reach::Page)
        .collect()
}

/// Runs the segment's verb on child `child`'s range of the partition, its answers into
/// the segment's answers at the range; an insert or a removal logs what the keys held
/// first.
fn run_child<T: Map>(
    table: &T,
    work: &mut Segment<'_, '_, T::Key, T::Value>,
    child: usize,
    range: Range<usize>,
) -> Result<(), T::Error> {
    let Segment {
        stream,
        partition,
        answers,
        verb,
        before,
        ..
    } = work;
    let keys = partition.keys_of(stream, range.clone())?;
    if let Some(before) = before {
        before.record(stream, table, child, &keys, range.start)?;
    }
    let found = match verb {
        Verb::Insert(_) => {
            return table.insert_async(stream, &keys, &partition.values_of(stream, range)?);
        }
        Verb::Get { .. } => {
            let mut values = DeviceBuffer::unfilled(stream, keys.len())?;
            let found = flags(stream, keys.len(), |found| {
                table.get_async(stream, &keys, found, &mut values)
            })?;
            answers.values.copy_from_at(stream, range.start, &values)?;
            found
        }
        Verb::Contains(_) => flags(stream, keys.len(), |found| {
            table.contains_async(stream, &keys, found)
        })?,
        Verb::Remove(_) => flags(stream, keys.len(), |found| {
            table.remove_async(stream, &keys, found)
        })?,
    };
    Ok(answers.found.copy_from_at(stream, range.start, &found)?)
}

/// Looks up the survivors of `range` with `lookup` (found flags, and values for a get),
/// their answers into their places in the segment's answers.
fn look_up<K: bytemuck::Pod, V: gpuhash_core::table::Value, E: From<gpuhash_core::Error>>(
    work: &mut Segment<'_, '_, K, V>,
    range: Range<usize>,
    lookup: impl FnOnce(
        &DeviceBuffer<K>,
        &mut DeviceBuffer<u8>,
        Option<&mut DeviceBuffer<V>>,
    ) -> Result<(), E>,
) -> Result<(), E> {
    let stream = work.stream;
    let keys = work.survivors.keys_of(stream, range.clone())?;
    let mut found = DeviceBuffer::zeroed(stream, keys.len())?;
    let mut values = match work.verb.gets_values() {
        true => Some(DeviceBuffer::unfilled(stream, keys.len())?),
        false => None,
    };
    lookup(&keys, &mut found, values.as_mut())?;
    let places = work.survivors.places_of(stream, range)?;
    let answers = &mut *work.answers;
    launch::gather(stream, &found, &places, None, &mut answers.found, 0)?;
    if let Some(values) = &values {
        launch::gather(
            stream,
            values,
            &places,
            Some(&found),
            &mut answers.values,
            0,
        )?;
    }
    Ok(())
}

/// A new flag buffer of `len`, filled by `device_form`.
fn flags<E: From<gpuhash_core::Error>>(
    stream: &Stream,
    len: usize,
    device_form: impl FnOnce(&mut DeviceBuffer<u8>) -> Result<(), E>,
) -> Result<DeviceBuffer<u8>, E> {
    let mut found = DeviceBuffer::unfilled(stream, len)?;
    device_form(&mut found)?;
    Ok(found)
}

/// Puts a segment's answers into the caller's buffers, in input order; values only where
/// found, so a miss leaves the caller's value as it was; flags of misses too when
/// `writes_misses` (else only the keys found, leaving other passes' answers).
fn gather_answers<K, V: gpuhash_core::table::Value>(
    stream: &Stream,
    partition: &Partition<K, V>,
    answers: &Answers<V>,
    verb: &mut Verb<'_, V>,
    start: usize,
    writes_misses: bool,
) -> gpuhash_core::Result<()> {
    let index = &partition.index;
    if let Verb::Get { values, .. } = verb {
        launch::gather(
            stream,
            &answers.values,
            index,
            Some(&answers.found),
            values,
            start,
        )?;
    }
    let only_found = (!writes_misses).then_some(&answers.found);
    match verb.found() {
        Some(found) => launch::gather(stream, &answers.found, index, only_found, found, start),
        None => Ok(()),
    }
}

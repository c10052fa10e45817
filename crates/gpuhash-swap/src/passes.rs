//! The passes a batch of several segments takes over them (`crate::batch`).
//!
//! Each segment visits its children once, so with more children on the host than slots a
//! batch of many segments would page a child in and out once a segment. Instead the
//! children on the host that the batch pages are left out of a first pass over every
//! segment and take passes of their own, as many at once as the slots hold, paged in once
//! and resident throughout ([`policy::passes`]). Which children those are depends on the
//! verb: a lookup pages the children on the host whose keys the filters pass and that the
//! cost model pages for the whole batch's survivors (the others it probes in place, in the
//! first pass); an insert or a removal pages every child on the host that has keys in the
//! batch (the image is never written in place). Either way one count kernel over the whole
//! batch, through the filters for a lookup, counts its keys by child first, with one wait.

use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::{DeviceBuffer, Stream};

use crate::launch::{self, COUNT_WORDS};
use crate::layouts::GH_SWAP_SEED;
use crate::policy::{self, Access, Reach, SegmentRoom, deferred_segment, scratch_per_element};
use crate::residency::Residency;
use crate::table::SwapTable;

/// One pass over a batch's segments: how it reaches each child, the children it
/// partitions when it skips some (a byte a child, on the device), and whether it writes
/// the flags of misses too (a batch's only pass that skips none does; passes that skip
/// children write only what they found, on flags zeroed before the first).
pub(crate) struct Pass<'a> {
    pub(crate) reach: &'a [Reach],
    pub(crate) in_pass: Option<DeviceBuffer<u8>>,
    pub(crate) writes_misses: bool,
}

impl<'a> Pass<'a> {
    /// The pass that reaches the children as `reach` says, with its marks on the device
    /// when it skips some: the partition's count kernel then leaves the keys of the others
    /// out of each segment, so a pass moves and looks up only its own.
    pub(crate) fn new(
        stream: &Stream,
        reach: &'a [Reach],
        writes_misses: bool,
    ) -> gpuhash_core::Result<Self> {
        let in_pass = match reach.contains(&Reach::Skip) {
            true => {
                let marks: Vec<u8> = reach.iter().map(|&r| u8::from(r != Reach::Skip)).collect();
                Some(DeviceBuffer::from_host(stream, &marks)?)
            }
            false => None,
        };
        Ok(Self {
            reach,
            in_pass,
            writes_misses,
        })
    }
}

/// How a batch runs: its passes, the segment they cut it into, and the keys of each child
/// whose probes in place wait for the batch's end (0 for the others).
pub(crate) struct BatchPlan {
    pub(crate) passes: Vec<Vec<Reach>>,
    /// The segment the scratch holds when every key read is moved.
    pub(crate) segment: usize,
    /// The keys each pass's segments read: longer than `segment` for a pass that moves
    /// only some of the batch's keys ([`SegmentRoom::stretched`]).
    pub(crate) reads: Vec<usize>,
    pub(crate) deferred: Vec<u32>,
    /// A lookup whose passes run routed ([`crate::routed`]): its children can route, and
    /// the survey counted it.
    pub(crate) routed: bool,
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// The passes of a batch of `keys` (module docs) for a verb that `changes` the table
    /// or looks up: one that reaches every child as counted when that serves (a batch of
    /// one segment, no child on the host, or none that the batch pages). A lookup of
    /// several segments collects the keys of the children it probes in place over every
    /// segment and probes each child once, at its end, where they fit the scratch
    /// ([`policy::deferred_segment`]): one probe a child a batch, not one a segment.
    pub(crate) fn passes(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        changes: bool,
    ) -> Result<BatchPlan, T::Error> {
        let children = residency.count();
        let segment = self.plan.segment;
        let one_pass = |segment| BatchPlan {
            passes: vec![vec![Reach::AsCounted; children]],
            segment,
            reads: vec![segment],
            deferred: vec![0; children],
            routed: false,
        };
        let on_host = residency.on_host();
        // The counts are 32-bit words.
        let countable = u32::try_from(keys.len()).is_ok();
        // A routed lookup's plan needs the survey even for one segment: its passes never
        // count a segment to choose.
        let routed = !changes && Self::ROUTES;
        let one_segment = keys.len() <= segment && !routed;
        if one_segment || !countable || !on_host.contains(&true) {
            return Ok(one_pass(segment));
        }
        // A lookup reaches a child on the host through its filter; a change, with every key.
        let filtered: Vec<bool> = on_host.iter().map(|&host| host && !changes).collect();
        let counts = Self::survey(residency, stream, keys, &filtered)?;
        // A lookup's keys that the filters rule out are not counted in `all`: no pass
        // moves them.
        let (all, passed) = (&counts[..children], &counts[children..2 * children]);
        let model = self.cost_model();
        let paged: Vec<bool> = (0..children)
            .map(|child| {
                let reached = match filtered[child] {
                    true => passed[child],
                    false => all[child],
                };
                let pages = || {
                    let image_bytes = residency.image(child).bytes();
                    let probes = u64::from(reached);
                    model.choose(probes, T::PROBE_BYTES, image_bytes) == Access::Page
                };
                on_host[child] && reached > 0 && (changes || !T::PROBES_IN_PLACE || pages())
            })
            .collect();
        // A routed pass probes its children on the host as it goes: nothing is deferred.
        let probed: Vec<u32> = (0..children)
            .map(|child| {
                let deferred = filtered[child] && !paged[child] && T::PROBES_IN_PLACE && !routed;
                if deferred { passed[child] } else { 0 }
            })
            .collect();
        let (key_bytes, value_bytes) = (size_of::<T::Key>(), size_of::<T::Value>());
        let element_bytes = scratch_per_element(key_bytes, value_bytes);
        let deferral = deferred_segment(&probed, segment, element_bytes, key_bytes, value_bytes);
        let (segment, deferred) = match deferral {
            Some(shrunk) => (shrunk, probed),
            None => (segment, vec![0; children]),
        };
        let marks: Vec<bool> = deferred.iter().map(|&keys| keys > 0).collect();
        let group = policy::page_group(self.plan.resident);
        let passes = policy::passes(all, &paged, &marks, group);
        let room = SegmentRoom {
            segment,
            element_bytes,
        };
        let reads = passes
            .iter()
            .map(|reach| {
                let moved = (0..children)
                    .filter(|&child| reach[child] != Reach::Skip)
                    .map(|child| u64::from(all[child]))
                    .sum();
                room.stretched(moved, keys.len() as u64)
            })
            .collect();
        Ok(BatchPlan {
            passes,
            segment,
            reads,
            deferred,
            routed,
        })
    }

    /// Each child's keys in the whole batch but those its filter rules out, then those its
    /// filter passes (0 for the children not `filtered`), then those it rules out: one count
    /// kernel over the whole batch ([`launch::count`], which writes no child ids for a
    /// count alone, so needs no scratch), one wait.
    pub(crate) fn survey(
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        filtered: &[bool],
    ) -> Result<Vec<u32>, T::Error> {
        let children = residency.count();
        let mut counts = DeviceBuffer::<u32>::zeroed(stream, COUNT_WORDS * children)?;
        let filters = residency.filters().set(stream, filtered)?;
        let counted = launch::count(
            stream,
            keys,
            0..keys.len(),
            GH_SWAP_SEED,
            filters.as_ref(),
            None,
            None,
            &mut counts,
        );
        let consulted = filters.is_some();
        drop(filters);
        if consulted {
            residency.filters_read_on(stream)?;
        }
        counted?;
        Ok(counts.to_host(stream)?)
    }
}

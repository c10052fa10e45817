//! Probes in place deferred to a lookup's end.
//!
//! A lookup of several segments would probe each child on the host in place once a
//! segment, on the few keys of the segment that the child's filter passes; a probe costs
//! the host tens of microseconds whatever its keys, so a batch of misses over many segments
//! spent its time there. Instead, each segment copies those keys, with their places in the
//! batch, to the end of the child's list, and the children are probed at the batch's end,
//! all in one call ([`crate::policy::deferred_segment`] says when the lists and their
//! answers fit the scratch). The batch's
//! count through the filters sized each list: the segments' filters run the same test on
//! the same keys, so the lists fill exactly.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::{DeviceBuffer, Error, Result, Stream};

use crate::batch::Verb;
use crate::filter::Survivors;
use crate::launch;
use crate::residency::Residency;
use crate::table::SwapTable;

/// The deferred children's keys and their places in the batch, one list a child laid end
/// to end, filled segment by segment.
pub(crate) struct Deferred<K> {
    keys: DeviceBuffer<K>,
    places: DeviceBuffer<u32>,
    children: Vec<Option<Kept>>,
}

/// A deferred child's list: where it starts, its room and how much of it is filled.
struct Kept {
    start: usize,
    room: usize,
    len: usize,
}

/// Every deferred list, full: the keys and their places in the batch, and each child's
/// range of them.
pub(crate) struct Lists<K> {
    keys: DeviceBuffer<K>,
    places: DeviceBuffer<u32>,
    children: Vec<(usize, Range<usize>)>,
}

impl<K: Pod> Deferred<K> {
    /// Room for `counts[child]` keys of each child (none where 0), or `None` when no child
    /// is deferred.
    pub(crate) fn new(stream: &Stream, counts: &[u32]) -> Result<Option<Self>> {
        let total: usize = counts.iter().map(|&count| count as usize).sum();
        if total == 0 {
            return Ok(None);
        }
        let mut start = 0;
        let children = counts
            .iter()
            .map(|&count| {
                let room = count as usize;
                let kept = (room > 0).then_some(Kept {
                    start,
                    room,
                    len: 0,
                });
                start += room;
                kept
            })
            .collect();
        Ok(Some(Self {
            keys: DeviceBuffer::unfilled(stream, total)?,
            places: DeviceBuffer::unfilled(stream, total)?,
            children,
        }))
    }

    /// Keeps the survivors of `range` (all `child`'s) of a segment that starts at `start`
    /// in the batch, whose partition put its elements' places in the segment in `index`.
    pub(crate) fn keep(
        &mut self,
        stream: &Stream,
        child: usize,
        survivors: &Survivors<K>,
        range: Range<usize>,
        index: &DeviceBuffer<u32>,
        start: usize,
    ) -> Result<()> {
        let Some(Some(kept)) = self.children.get_mut(child) else {
            return Err(unsized_list(child, range.len(), 0));
        };
        if kept.len + range.len() > kept.room {
            return Err(unsized_list(child, kept.len + range.len(), kept.room));
        }
        let at = kept.start + kept.len;
        self.keys
            .copy_range_from(stream, at, survivors.keys(), range.clone())?;
        launch::places(
            stream,
            index,
            survivors.places(),
            range.clone(),
            start,
            &mut self.places,
            at,
        )?;
        kept.len += range.len();
        Ok(())
    }

    /// The lists, every one full.
    pub(crate) fn into_lists(self) -> Result<Lists<K>> {
        let children = self
            .children
            .into_iter()
            .enumerate()
            .filter_map(|(child, kept)| kept.map(|kept| (child, kept)))
            .map(|(child, kept)| match kept.len == kept.room {
                true => Ok((child, kept.start..kept.start + kept.room)),
                false => Err(unsized_list(child, kept.len, kept.room)),
            })
            .collect::<Result<_>>()?;
        Ok(Lists {
            keys: self.keys,
            places: self.places,
            children,
        })
    }
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// Probes the deferred children on the keys their segments kept, the answers put at
    /// the keys' places in the batch's answers: flags and values where found (every flag
    /// of a kept key was written 0 by its segment, or zeroed before the passes). The
    /// children on the host are probed in place, all in one call
    /// ([`ProbeInPlace::get_in_place_each`]: one launch for DyHash), so the batch pays
    /// for one probe, not one a child; one that a pass left on the device (none does
    /// now: a lookup pages in only the children it does not defer) is looked up there.
    pub(crate) fn probe_deferred(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        deferred: Deferred<T::Key>,
        verb: &mut Verb<'_, T::Value>,
    ) -> std::result::Result<(), T::Error> {
        let lists = deferred.into_lists()?;
        let (on_host, on_device): (Vec<_>, Vec<_>) = lists
            .children
            .into_iter()
            .partition(|(child, _)| !residency.is_resident(*child));
        let gets_values = verb.gets_values();
        let (mut found, mut values) = Self::probe_in_place(
            residency,
            stream,
            on_host.into_iter(),
            &lists.keys,
            gets_values,
        )?;
        for (child, range) in on_device {
            residency.on_resident(&self.device, (child, false), stream, |table| {
                let maps = [(table, range)];
                T::get_each(stream, &maps, &lists.keys, &mut found, values.as_mut())
            })?;
        }
        if let (Verb::Get { values: target, .. }, Some(values)) = (&mut *verb, &values) {
            launch::gather(stream, values, &lists.places, Some(&found), target, 0)?;
        }
        if let Some(target) = verb.found() {
            launch::gather(stream, &found, &lists.places, Some(&found), target, 0)?;
        }
        Ok(())
    }
}

/// The error of a list that the batch's count did not size for what its segments kept: a
/// fault of this crate, reported rather than overrun.
fn unsized_list(child: usize, kept: usize, counted: usize) -> Error {
    Error::InvalidInput(format!(
        "deferred probes of child {child}: {kept} keys kept where the batch's count found \
         {counted}"
    ))
}

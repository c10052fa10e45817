//! Probes in place deferred to a lookup's end.
//!
//! A lookup of several segments would probe each child on the host in place once a
//! segment, on the few keys of the segment that the child's filter passes; a probe costs
//! the host tens of microseconds whatever its keys, so a batch of misses over many segments
//! spent its time there. Instead, each segment copies those keys, with their places in the
//! batch, to the end of the child's list, and each child is probed once, at the batch's end
//! ([`crate::policy::deferred_segment`] says when the lists fit the scratch). The batch's
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

/// Each deferred child's keys and their places in the batch, filled segment by segment.
pub(crate) struct Deferred<K> {
    children: Vec<Option<Kept<K>>>,
}

/// A deferred child, its kept keys and their places in the batch.
type List<K> = (usize, DeviceBuffer<K>, DeviceBuffer<u32>);

/// One child's kept keys: room for all of them, the first `len` filled.
struct Kept<K> {
    keys: DeviceBuffer<K>,
    places: DeviceBuffer<u32>,
    len: usize,
}

impl<K: Pod> Deferred<K> {
    /// Room for `counts[child]` keys of each child (none where 0), or `None` when no child
    /// is deferred.
    pub(crate) fn new(stream: &Stream, counts: &[u32]) -> Result<Option<Self>> {
        if counts.iter().all(|&count| count == 0) {
            return Ok(None);
        }
        let children = counts
            .iter()
            .map(|&count| match count {
                0 => Ok(None),
                count => Ok(Some(Kept {
                    keys: DeviceBuffer::unfilled(stream, count as usize)?,
                    places: DeviceBuffer::unfilled(stream, count as usize)?,
                    len: 0,
                })),
            })
            .collect::<Result<_>>()?;
        Ok(Some(Self { children }))
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
        let at = kept.len;
        if at + range.len() > kept.keys.len() {
            return Err(unsized_list(child, at + range.len(), kept.keys.len()));
        }
        kept.keys
            .copy_range_from(stream, at, survivors.keys(), range.clone())?;
        launch::places(
            stream,
            index,
            survivors.places(),
            range.clone(),
            start,
            &mut kept.places,
            at,
        )?;
        kept.len += range.len();
        Ok(())
    }

    /// Each deferred child with its keys and their places in the batch, every list full.
    pub(crate) fn into_lists(self) -> Result<Vec<List<K>>> {
        self.children
            .into_iter()
            .enumerate()
            .filter_map(|(child, kept)| kept.map(|kept| (child, kept)))
            .map(|(child, kept)| match kept.len == kept.keys.len() {
                true => Ok((child, kept.keys, kept.places)),
                false => Err(unsized_list(child, kept.len, kept.keys.len())),
            })
            .collect()
    }
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// Probes each deferred child once on the keys its segments kept, its answers put at
    /// the keys' places in the batch's answers: flags and values where found (every flag
    /// of a kept key was written 0 by its segment, or zeroed before the passes). A child
    /// on the host is probed in place; one that a pass left on the device (none does now:
    /// a lookup pages in only the children it does not defer) is looked up there.
    pub(crate) fn probe_deferred(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        deferred: Deferred<T::Key>,
        verb: &mut Verb<'_, T::Value>,
    ) -> std::result::Result<(), T::Error> {
        for (child, keys, places) in deferred.into_lists()? {
            let mut found = DeviceBuffer::zeroed(stream, keys.len())?;
            let mut values = match verb.gets_values() {
                true => Some(DeviceBuffer::unfilled(stream, keys.len())?),
                false => None,
            };
            match residency.is_resident(child) {
                false => {
                    let image = residency.image(child);
                    T::get_in_place(stream, &image, &keys, &mut found, values.as_mut())?;
                    residency.count_probe_in_place();
                }
                true => residency.on_resident(&self.device, (child, false), stream, |table| {
                    match values.as_mut() {
                        Some(values) => table.get_async(stream, &keys, &mut found, values),
                        None => table.contains_async(stream, &keys, &mut found),
                    }
                })?,
            }
            if let (Verb::Get { values: target, .. }, Some(values)) = (&mut *verb, &values) {
                launch::gather(stream, values, &places, Some(&found), target, 0)?;
            }
            if let Some(target) = verb.found() {
                launch::gather(stream, &found, &places, Some(&found), target, 0)?;
            }
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

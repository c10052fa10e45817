//! One segment of a batch, split by child on the device: the keys (and values) of each
//! child laid end to end, each element's place in the segment, and each child's range.
//!
//! Public as a building block for other layers that split batches among parts (a table
//! sharded over GPUs, say): [`Partition::by_part`] splits a whole batch among parts by
//! the seeded hash the children use, with a seed of the caller's
//! ([`crate::policy::Spread`]), and
//! [`gather_answers`] puts answers computed part by part back in input order.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::{DeviceBuffer, Result, Stream};

use crate::launch::{self, COUNT_WORDS, FilterSet, ScatterTarget};
use crate::policy::{Spread, child_ranges};

/// A segment `keys[segment]` partitioned among `children` children.
pub struct Partition<K, V> {
    keys: DeviceBuffer<K>,
    values: Option<DeviceBuffer<V>>,
    /// Each partitioned element's place in the segment.
    pub(crate) index: DeviceBuffer<u32>,
    /// Each child's range of the partitioned elements.
    pub(crate) ranges: Vec<Range<usize>>,
    /// Each child's keys that its filter in the partition's filter set passed (0 for
    /// children not checked): every key of the child the partition holds.
    pub(crate) passed: Vec<usize>,
    /// Keys of the segment that the filters ruled out, which the partition left out
    /// (their answers are misses).
    pub(crate) ruled_out: u64,
}

impl<K: Pod, V: Pod> Partition<K, V> {
    /// Splits the whole batch `keys` (and `values`, of the same length, where given) among
    /// `spread.parts` parts on the device, each key to part [`Spread::part_of`]`(key)`
    /// (give a layer above the swap table a seed of its own: see [`Spread`]). Waits for
    /// the stream once, for the counts (each part's range is sized on the host).
    pub fn by_part(
        stream: &Stream,
        spread: Spread,
        keys: &DeviceBuffer<K>,
        values: Option<&DeviceBuffer<V>>,
    ) -> Result<Self> {
        if values.is_some_and(|values| values.len() != keys.len()) {
            return Err(gpuhash_core::Error::LengthMismatch {
                what: "by_part: keys and values",
                left: keys.len(),
                right: values.map_or(0, DeviceBuffer::len),
            });
        }
        Counted::count(stream, spread, keys, 0..keys.len(), None, None)?
            .scatter(stream, keys, values)
    }

    /// Each part's range of the partitioned elements, every part's, empty ones included.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The children that have elements, with their ranges.
    pub(crate) fn children(&self) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        self.ranges
            .iter()
            .enumerate()
            .filter(|(_, range)| !range.is_empty())
            .map(|(child, range)| (child, range.clone()))
    }

    /// The partitioned keys, every child's end to end.
    pub(crate) fn keys(&self) -> &DeviceBuffer<K> {
        &self.keys
    }

    /// A child's keys, in a buffer of their own.
    pub fn keys_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<K>> {
        launch::copy_range(stream, &self.keys, range)
    }

    /// A child's elements' places in the segment, in a buffer of their own.
    pub fn places_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<u32>> {
        launch::copy_range(stream, &self.index, range)
    }

    /// A child's values, in a buffer of their own (empty when the batch has none).
    pub fn values_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<V>> {
        match &self.values {
            Some(values) => launch::copy_range(stream, values, range),
            None => DeviceBuffer::unfilled(stream, 0),
        }
    }
}

/// A segment counted by child, its counts on the host: the first half of a partition,
/// which [`Counted::scatter`] completes.
pub(crate) struct Counted {
    segment: Range<usize>,
    child_of: DeviceBuffer<u32>,
    counts: Vec<u32>,
}

impl Counted {
    /// Counts `keys[segment]` by child, and those the filters of `filters` pass, on
    /// `stream`, and waits for that stream once, for the counts (each child's range is
    /// sized on the host). With `in_pass` (a byte a child), only the keys of the children
    /// it marks are counted.
    pub(crate) fn count<K: Pod>(
        stream: &Stream,
        spread: Spread,
        keys: &DeviceBuffer<K>,
        segment: Range<usize>,
        filters: Option<&FilterSet<'_>>,
        in_pass: Option<&DeviceBuffer<u8>>,
    ) -> Result<Self> {
        let mut child_of = DeviceBuffer::unfilled(stream, segment.len())?;
        let mut counts = DeviceBuffer::zeroed(stream, COUNT_WORDS * spread.parts as usize)?;
        launch::count(
            stream,
            keys,
            segment.clone(),
            spread.seed,
            filters,
            in_pass,
            Some(&mut child_of),
            &mut counts,
        )?;
        Ok(Self {
            segment,
            child_of,
            counts: counts.to_host(stream)?,
        })
    }

    /// The segment's range of the batch.
    pub(crate) fn segment(&self) -> &Range<usize> {
        &self.segment
    }

    /// Keys the scatter will move: those of every child counted.
    pub(crate) fn moved(&self) -> u64 {
        let children = self.counts.len() / COUNT_WORDS;
        self.counts[..children].iter().map(|&c| u64::from(c)).sum()
    }

    /// Moves the counted segment of `keys` (and `values`) into its children's ranges, on
    /// `stream`, with no wait.
    pub(crate) fn scatter<K: Pod, V: Pod>(
        self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: Option<&DeviceBuffer<V>>,
    ) -> Result<Partition<K, V>> {
        let children = self.counts.len() / COUNT_WORDS;
        let (counts, rest) = self.counts.split_at(children);
        let (passed, ruled_out) = rest.split_at(children);
        let ranges = child_ranges(counts);
        let len = ranges.last().map_or(0, |range| range.end);
        let passed = passed.iter().map(|&p| p as usize).collect();
        let ruled_out = ruled_out.iter().map(|&r| u64::from(r)).sum();
        let starts: Vec<u32> = ranges.iter().map(|r| r.start as u32).collect();
        let mut cursors = DeviceBuffer::from_host(stream, &starts)?;
        let mut partition = Partition {
            keys: DeviceBuffer::unfilled(stream, len)?,
            values: values
                .map(|_| DeviceBuffer::unfilled(stream, len))
                .transpose()?,
            index: DeviceBuffer::unfilled(stream, len)?,
            ranges,
            passed,
            ruled_out,
        };
        let target = ScatterTarget {
            keys: &mut partition.keys,
            values: partition.values.as_mut(),
            index: &mut partition.index,
        };
        launch::scatter(
            stream,
            keys,
            values,
            self.segment,
            &self.child_of,
            &mut cursors,
            target,
        )?;
        Ok(partition)
    }
}

/// `target[offset + places[i]] = answers[i]` for every `i`, or only where `found[i] != 0`:
/// answers of a part's elements (in the order [`Partition::keys_of`] gave them) put back
/// at their input places ([`Partition::places_of`]). `target` must hold every place.
pub fn gather_answers<T: Pod>(
    stream: &Stream,
    answers: &DeviceBuffer<T>,
    places: &DeviceBuffer<u32>,
    found: Option<&DeviceBuffer<u8>>,
    target: &mut DeviceBuffer<T>,
    offset: usize,
) -> Result<()> {
    if places.len() != answers.len() || found.is_some_and(|f| f.len() != answers.len()) {
        return Err(gpuhash_core::Error::InvalidInput(format!(
            "gather_answers: {} answers, {} places",
            answers.len(),
            places.len()
        )));
    }
    launch::gather(stream, answers, places, found, target, offset)
}

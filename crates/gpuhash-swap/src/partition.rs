//! One segment of a batch, split by child on the device: the keys (and values) of each
//! child laid end to end, each element's place in the segment, and each child's range.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::{DeviceBuffer, Result, Stream};

use crate::launch::{self, ScatterTarget};
use crate::policy::child_ranges;

/// A segment `keys[segment]` partitioned among `children` children.
pub(crate) struct Partition<K, V> {
    keys: DeviceBuffer<K>,
    values: Option<DeviceBuffer<V>>,
    /// Each partitioned element's place in the segment.
    pub(crate) index: DeviceBuffer<u32>,
    /// Each child's range of the partitioned elements.
    pub(crate) ranges: Vec<Range<usize>>,
}

impl<K: Pod, V: Pod> Partition<K, V> {
    /// Counts the segment's keys by child, scans the counts (on the host, which needs each
    /// child's range anyway: this waits for the stream) and scatters the segment.
    pub(crate) fn of(
        stream: &Stream,
        children: usize,
        keys: &DeviceBuffer<K>,
        values: Option<&DeviceBuffer<V>>,
        segment: Range<usize>,
    ) -> Result<Self> {
        let len = segment.len();
        let mut child_of = DeviceBuffer::unfilled(stream, len)?;
        let mut counts = DeviceBuffer::zeroed(stream, children)?;
        launch::count(stream, keys, segment.clone(), &mut child_of, &mut counts)?;
        let ranges = child_ranges(&counts.to_host(stream)?);
        let starts: Vec<u32> = ranges.iter().map(|r| r.start as u32).collect();
        let mut cursors = DeviceBuffer::from_host(stream, &starts)?;
        let mut partition = Self {
            keys: DeviceBuffer::unfilled(stream, len)?,
            values: values
                .map(|_| DeviceBuffer::unfilled(stream, len))
                .transpose()?,
            index: DeviceBuffer::unfilled(stream, len)?,
            ranges,
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
            segment,
            &child_of,
            &mut cursors,
            target,
        )?;
        Ok(partition)
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
    pub(crate) fn keys_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<K>> {
        launch::copy_range(stream, &self.keys, range)
    }

    /// A child's values, in a buffer of their own (empty when the batch has none).
    pub(crate) fn values_of(
        &self,
        stream: &Stream,
        range: Range<usize>,
    ) -> Result<DeviceBuffer<V>> {
        match &self.values {
            Some(values) => launch::copy_range(stream, values, range),
            None => DeviceBuffer::unfilled(stream, 0),
        }
    }
}

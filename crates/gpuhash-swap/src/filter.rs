//! Miss filters: a blocked Bloom filter in device memory for each child, consulted for the
//! children on the host, so that a lookup of a key a child does not hold is answered on the
//! device and never crosses the bus.
//!
//! A child's filter holds (at least) every key the child's image holds: it is built from
//! the child's keys when a changed child leaves the device, and emptied when the child is
//! cleared on the host. While a child is resident its filter is not consulted, so removes
//! and inserts there need not keep it current. A filter only ever answers "maybe" for a key
//! of its child; its "no" for others is wrong at a rate that the bits a key set
//! ([`crate::SwapOptions::filter_bits_per_key`]) bound.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::{DeviceBuffer, Result, Stream};

use crate::launch::{self, CheckTarget, FilterSet};
use crate::partition::Partition;

/// Every child's filter.
pub(crate) struct Filters {
    filters: Vec<DeviceBuffer<u32>>,
    blocks: u32,
}

/// The keys of a partitioned segment that the filters passed, compacted to the front of
/// their children's ranges, with their places in the partitioned segment.
pub(crate) struct Survivors<K> {
    keys: DeviceBuffer<K>,
    places: DeviceBuffer<u32>,
    /// Each child's passed keys (empty for children not checked).
    pub(crate) ranges: Vec<Range<usize>>,
}

impl Filters {
    /// Empty filters of `blocks` blocks for `children` children.
    pub(crate) fn new(stream: &Stream, children: usize, blocks: u32) -> Result<Self> {
        let filters = (0..children)
            .map(|_| DeviceBuffer::zeroed(stream, launch::filter_words(blocks)))
            .collect::<Result<_>>()?;
        Ok(Self { filters, blocks })
    }

    /// Device bytes of every filter.
    pub(crate) fn bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.size_bytes() as u64).sum()
    }

    /// Empties child `child`'s filter and adds `keys` to it.
    pub(crate) fn rebuild<K: Pod>(
        &mut self,
        stream: &Stream,
        child: usize,
        keys: &DeviceBuffer<K>,
    ) -> Result<()> {
        let filter = &mut self.filters[child];
        filter.fill_zero(stream)?;
        launch::filter_add(stream, keys, self.blocks, filter)
    }

    /// Empties child `child`'s filter.
    pub(crate) fn clear(&mut self, stream: &Stream, child: usize) -> Result<()> {
        self.filters[child].fill_zero(stream)
    }

    /// Checks the keys of the children `consult` marks against their filters; waits for
    /// `stream` (the host needs each child's count of keys passed).
    pub(crate) fn check<K: Pod, V: Pod>(
        &self,
        stream: &Stream,
        partition: &Partition<K, V>,
        consult: &[bool],
    ) -> Result<Survivors<K>> {
        let len = partition.keys().len();
        let mut survivors = Survivors {
            keys: DeviceBuffer::unfilled(stream, len)?,
            places: DeviceBuffer::unfilled(stream, len)?,
            ranges: vec![0..0; consult.len()],
        };
        if !consult.iter().any(|&c| c) {
            return Ok(survivors);
        }
        let starts: Vec<u32> = partition.ranges.iter().map(|r| r.start as u32).collect();
        let starts = DeviceBuffer::from_host(stream, &starts)?;
        let mut counts = DeviceBuffer::<u32>::zeroed(stream, consult.len())?;
        let set = FilterSet {
            filters: self
                .filters
                .iter()
                .zip(consult)
                .map(|(filter, &consulted)| consulted.then_some(filter))
                .collect(),
            blocks: self.blocks,
        };
        let target = CheckTarget {
            starts: &starts,
            survivors: &mut counts,
            keys: &mut survivors.keys,
            places: &mut survivors.places,
        };
        launch::filter_check(stream, partition.keys(), &set, target)?;
        let counts = counts.to_host(stream)?;
        survivors.ranges = partition
            .ranges
            .iter()
            .zip(counts)
            .map(|(range, count)| range.start..range.start + count as usize)
            .collect();
        Ok(survivors)
    }
}

impl<K: Pod> Survivors<K> {
    /// The keys of `range`, in a buffer of their own.
    pub(crate) fn keys_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<K>> {
        launch::copy_range(stream, &self.keys, range)
    }

    /// The places (in the partitioned segment) of the keys of `range`.
    pub(crate) fn places_of(
        &self,
        stream: &Stream,
        range: Range<usize>,
    ) -> Result<DeviceBuffer<u32>> {
        launch::copy_range(stream, &self.places, range)
    }
}
